"""Independent schedule checker: dependencies, durations of the chosen modes, cores at every instant.

Shares nothing with the scheduler but input validation, so it can judge the scheduler's output.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from phaze_env.schedule.problem import CORE_UNITS, build_problem

REL_TOL = 1e-9  # relative to the schedule's time scale, for schedules written with rounding


def verify(ops: Sequence[Mapping], edges: Sequence, n_tc: int, n_vc: int, schedule, *, strict: bool = False) -> list[str]:
    """Every way ``schedule`` (``start_s``, ``parallel``, ``end_s``, ``makespan_s``) breaks the rules.

    Returns the violations as readable strings (empty: the schedule is valid); with ``strict=True``
    raises ``ValueError`` listing them instead. Invalid ``ops``/``edges`` raise ``ValueError`` too.
    """
    problem = build_problem(ops, edges, n_tc, n_vc)
    n = len(problem)
    start_s, parallel = list(schedule.start_s), list(schedule.parallel)
    end_s = list(getattr(schedule, "end_s", None) or [])
    if len(start_s) != n or len(parallel) != n or (end_s and len(end_s) != n):
        violations = [f"schedule covers {len(start_s)} starts / {len(parallel)} modes / {len(end_s)} ends for {n} ops"]
        return _report(violations, strict)
    if not all(isinstance(s, (int, float)) and math.isfinite(s) for s in start_s):
        return _report([f"start times must be finite numbers: {start_s}"], strict)
    scale_s = max([abs(s) for s in start_s] + list(problem.latency_s) + list(problem.latency_parallel_s) + [1e-300])
    tol = REL_TOL * scale_s
    violations: list[str] = []
    durations_s = []
    for i in range(n):
        if parallel[i] and problem.units[i] not in CORE_UNITS:
            violations.append(f"op {i} ({problem.units[i]}) holds no cores and has no parallel mode")
        duration_s = problem.latency_parallel_s[i] if parallel[i] else problem.latency_s[i]
        durations_s.append(duration_s)
        if start_s[i] < -tol:
            violations.append(f"op {i} starts before 0: {start_s[i]}")
        if end_s and abs(end_s[i] - start_s[i] - duration_s) > tol:
            violations.append(f"op {i} runs {end_s[i] - start_s[i]} s but its {'parallel' if parallel[i] else 'one-core'} latency is {duration_s} s")
    finish_s = [start_s[i] + durations_s[i] for i in range(n)]
    for i, j in problem.edges:
        if start_s[j] < finish_s[i] - tol:
            violations.append(f"edge ({i}, {j}): op {j} starts at {start_s[j]} before op {i} ends at {finish_s[i]}")
    violations += _core_violations(problem.units, parallel, start_s, finish_s, {"tc": n_tc, "vc": n_vc}, tol)
    makespan_s = getattr(schedule, "makespan_s", None)
    if makespan_s is not None and abs(makespan_s - max(finish_s, default=0.0)) > tol:
        violations.append(f"makespan_s {makespan_s} but the last op ends at {max(finish_s, default=0.0)}")
    return _report(violations, strict)


def _core_violations(units, parallel, start_s, finish_s, cores: dict[str, int], tol: float) -> list[str]:
    """Instants (op starts) at which more cores of a type are held than exist."""
    violations = []
    for core_type, capacity in cores.items():
        holders = [
            (start_s[i], finish_s[i], capacity if parallel[i] else 1, i)
            for i, unit in enumerate(units)
            if core_type in unit.split("+") and finish_s[i] - start_s[i] > tol
        ]
        for t in sorted({s for s, _, _, _ in holders}):
            running = [(i, held) for s, e, held, i in holders if s <= t + tol and e > t + tol]
            if sum(held for _, held in running) > capacity:
                violations.append(f"at t={t} s ops {[i for i, _ in running]} hold {sum(h for _, h in running)} of {capacity} {core_type} cores")
    return violations


def _report(violations: list[str], strict: bool) -> list[str]:
    if strict and violations:
        raise ValueError("invalid schedule:\n  " + "\n  ".join(violations))
    return violations
