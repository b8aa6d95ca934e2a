"""Operator scheduling: the minimum-makespan schedule of one layer's fused operator DAG on one accelerator.

Each operator runs either on one core of its type (``latency_s``) or split across all cores of its
type (``latency_parallel_s``, and then alone on that type); "tc+vc" operators hold a core of each
type, "comm" and "none" operators hold none (pure delays). :func:`solve_schedule` returns the best
schedule with a proven lower bound: a list schedule when a cheap bound shows it optimal, else PHAZE's
ILP (PuLP with CBC or HiGHS, core capacity added lazily), stopped at a time limit with the best
schedule known. Results are cached on disk, keyed by the problem's content and the solver settings.

Example::

    ops = [{"unit": "tc", "latency_s": 4e-3, "latency_parallel_s": 1e-3},
           {"unit": "vc", "latency_s": 1e-3, "latency_parallel_s": 5e-4}]
    schedule = solve_schedule(ops, [(0, 1)], n_tc=4, n_vc=2)
    schedule.makespan_s  # 1.5e-3
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from phaze_env.cache import DiskCache, code_key
from phaze_env.schedule.bounds import lower_bound_s
from phaze_env.schedule.ilp import OPTIMALITY_REL_TOL, SOLVERS, solve_ilp
from phaze_env.schedule.problem import Problem, build_problem
from phaze_env.schedule.sgs import Timetable, list_schedule
from phaze_env.schedule.verify import verify
from phaze_env.workloads.graph import OpGraph

__all__ = ["Schedule", "makespan_lower_bound", "schedule_graph", "solve_schedule", "verify"]

DEFAULT_TIME_LIMIT_S = 10.0
RETRY_TIME_FACTOR = 4.0
"""A solve stopped by its time limit is solved once more with this many times the limit before its answer is
given back unproven (a busy machine must not turn a provable schedule into an unproven one at once)."""
FAST_PATH_REL_TOL = 1e-9  # the list schedule is optimal when the cheap bound is this close
_CACHE = DiskCache("schedule")
_ILP_METHODS = {"optimal": "ilp", "timeout": "ilp_timeout", "failed": "ilp_failed", "stalled": "ilp_stalled"}


@dataclass(frozen=True)
class Schedule:
    """A feasible schedule of one layer DAG and what is known about its optimality.

    ``method`` says how it was found: "fast_path" (the list schedule meets the cheap lower bound),
    "ilp" (solved to optimality), "ilp_timeout" (time limit hit: best known schedule, with ``gap``),
    "ilp_failed" (the solver failed: best known schedule) or "ilp_stalled" (the lazy-cut loop stopped
    on solver round-off: best known schedule, with ``gap``).
    """

    makespan_s: float
    lower_bound_s: float  # proven: no schedule is shorter
    optimal: bool  # gap within OPTIMALITY_REL_TOL
    gap: float  # (makespan_s - lower_bound_s) / makespan_s
    method: str
    start_s: tuple[float, ...]
    end_s: tuple[float, ...]
    parallel: tuple[bool, ...]  # True: the op runs split across all cores of its type
    solve_time_s: float
    list_schedule_makespan_s: float
    solver: str
    solver_calls: int  # ILP solves (one per round of lazy capacity cuts); 0 on the fast path
    from_cache: bool = False


def solve_schedule(
    ops: Sequence[Mapping],
    edges: Sequence[tuple[int, int]],
    n_tc: int,
    n_vc: int,
    *,
    solver: str = "cbc",
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    cache: bool | DiskCache = True,
) -> Schedule:
    """Minimum-makespan schedule of a layer DAG given as plain data.

    ``ops``: dicts ``{"unit": "tc"|"vc"|"tc+vc"|"comm"|"none", "latency_s": float,
    "latency_parallel_s": float}`` (``latency_parallel_s`` is not needed for "comm"/"none");
    ``edges``: ``(i, j)`` pairs, op i ends before op j starts. ``solver``: "cbc" or "highs".
    ``time_limit_s`` caps the ILP; on the limit it is solved once more with :data:`RETRY_TIME_FACTOR` times the
    limit, and if that stops early too the best schedule known is returned with its bound and
    ``optimal=False``. Only proven-optimal schedules are cached: an unproven one is never served later as
    final, the next call solves it again.
    ``cache``: True (the persistent "schedule" cache), False, or a :class:`DiskCache` to use.
    Raises ``ValueError`` on invalid input (negative/NaN latencies, cycles, bad edges, core counts < 1).
    """
    problem = build_problem(ops, edges, n_tc, n_vc)
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if not isinstance(time_limit_s, (int, float)) or not time_limit_s > 0 or not math.isfinite(time_limit_s):
        raise ValueError(f"time_limit_s must be a positive finite number, got {time_limit_s!r}")
    store = _CACHE if cache is True else (cache or None)
    key = code_key(__name__, "schedule", _problem_content(problem), solver, float(time_limit_s))
    if store is not None and (hit := store.get(key)) is not None:
        return replace(hit, from_cache=True)
    schedule = _solve(problem, solver, float(time_limit_s))
    if schedule.method == "ilp_timeout":
        schedule = _better_of(schedule, _solve(problem, solver, float(time_limit_s) * RETRY_TIME_FACTOR))
    if store is not None and schedule.optimal:  # timeouts, stalls and failures are provisional
        store.put(key, schedule)
    return schedule


def schedule_graph(
    graph: OpGraph,
    latency_s: Sequence[float],
    latency_parallel_s: Sequence[float],
    n_tc: int,
    n_vc: int,
    **kwargs,
) -> Schedule:
    """:func:`solve_schedule` for an :class:`OpGraph` (units from ``op.unit``) and per-op latency arrays."""
    return solve_schedule(_graph_ops(graph, latency_s, latency_parallel_s), graph.edges, n_tc, n_vc, **kwargs)


def makespan_lower_bound(ops: Sequence[Mapping], edges: Sequence[tuple[int, int]], n_tc: int, n_vc: int) -> float:
    """A cheap lower bound on the makespan (critical path; work per core type), without solving."""
    return lower_bound_s(build_problem(ops, edges, n_tc, n_vc))


def _graph_ops(graph: OpGraph, latency_s, latency_parallel_s) -> list[dict]:
    if len(latency_s) != len(graph.ops) or len(latency_parallel_s) != len(graph.ops):
        raise ValueError(
            f"{len(graph.ops)} ops but {len(latency_s)} latency_s and {len(latency_parallel_s)} latency_parallel_s"
        )
    return [
        {"unit": op.unit, "latency_s": float(single), "latency_parallel_s": float(par)}
        for op, single, par in zip(graph.ops, latency_s, latency_parallel_s)
    ]


def _problem_content(problem: Problem) -> tuple:
    """What the schedule depends on (not derived fields)."""
    return (problem.units, problem.latency_s, problem.latency_parallel_s, problem.edges, problem.n_tc, problem.n_vc)


def _solve(problem: Problem, solver: str, time_limit_s: float) -> Schedule:
    started = time.perf_counter()
    incumbent = list_schedule(problem)
    bound_s = min(lower_bound_s(problem), incumbent.makespan_s)
    if bound_s >= incumbent.makespan_s * (1 - FAST_PATH_REL_TOL):
        return _schedule(problem, incumbent, bound_s, "fast_path", incumbent, solver, 0, started)
    result = solve_ilp(problem, incumbent, bound_s, solver, time_limit_s)
    bound_s = min(result.lower_bound_s, result.best.makespan_s)
    return _schedule(problem, result.best, bound_s, _ILP_METHODS[result.status], incumbent, solver, result.iterations, started)


def _better_of(first: Schedule, second: Schedule) -> Schedule:
    """The shorter of two solves of one problem, with the tighter of their proven bounds and both efforts."""
    best = min(first, second, key=lambda schedule: schedule.makespan_s)
    bound_s = min(max(first.lower_bound_s, second.lower_bound_s), best.makespan_s)
    gap = (best.makespan_s - bound_s) / best.makespan_s if best.makespan_s > 0 else 0.0
    return replace(best, lower_bound_s=bound_s, gap=gap, optimal=gap <= OPTIMALITY_REL_TOL,
                   method=best.method if gap > OPTIMALITY_REL_TOL else "ilp",
                   solver_calls=first.solver_calls + second.solver_calls,
                   solve_time_s=first.solve_time_s + second.solve_time_s)


def _schedule(problem, best: Timetable, bound_s, method, incumbent: Timetable, solver, solver_calls, started) -> Schedule:
    gap = (best.makespan_s - bound_s) / best.makespan_s if best.makespan_s > 0 else 0.0
    return Schedule(
        makespan_s=best.makespan_s,
        lower_bound_s=bound_s,
        optimal=gap <= OPTIMALITY_REL_TOL,
        gap=gap,
        method=method,
        start_s=best.start_s,
        end_s=tuple(best.start_s[i] + problem.duration_s(i, best.parallel[i]) for i in range(len(problem))),
        parallel=best.parallel,
        solve_time_s=time.perf_counter() - started,
        list_schedule_makespan_s=incumbent.makespan_s,
        solver=solver,
        solver_calls=solver_calls,
    )
