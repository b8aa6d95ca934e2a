"""PHAZE's operator-scheduling ILP (PuLP; CBC or HiGHS), with lazily added core-capacity cuts.

Model (times divided by ``scale_s``, the starting incumbent's makespan, so every value is O(1)):

* ``S_i >= 0`` start, ``p_i`` binary mode (1: on all cores of its type), duration
  ``d_i = l_i + (lᴾ_i - l_i) p_i``; minimise ``T`` with ``T >= S_i + d_i + tail_i``;
* ``S_j >= S_i + d_i`` for every edge;
* for incomparable ops sharing a core type, binaries ``o_ij``/``o_ji`` ("i ends before j starts")
  with big-M disjunctions; the pair must be ordered when either runs in parallel mode
  (``o_ij + o_ji >= p_i``, ``>= p_j``);
* the work of each core type fits in ``T`` on its cores (a valid inequality that tightens the LP);
* capacity of one-core ops: "among ``n + 1`` pairwise incomparable ops of a type with ``n`` cores,
  some pair is ordered". Unlike PHAZE, which finds these only lazily, every such cut is added up
  front while there are few (layer graphs have small antichains), which makes the model exact in
  one solve. Beyond that, lazily, as PHAZE does: solve, replay the ordering, and for every set ``A``
  of one-core ops of one type that the solution runs at one instant beyond ``n``, add "at least
  ``C(|A|,2) - turan(|A|, n)`` pairs of ``A`` are ordered" (Turán: more overlapping pairs would
  leave ``n + 1`` ops pairwise overlapping, i.e. running together); re-solve until the replay
  matches the relaxation's optimum.

Every relaxation's optimum (or the solver's proven bound) is a lower bound on the true optimum, and
every replay is a feasible schedule, so stopping at any point yields a valid schedule and bound.
"""

from __future__ import annotations

import functools
import math
import os
import re
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import pulp

from phaze_env.schedule.problem import CORE_TYPES, Problem
from phaze_env.schedule.sgs import Timetable, replay

SOLVERS = ("cbc", "highs")
MIP_REL_GAP = 1e-7  # relative gap at which one relaxation counts as solved
FEASIBILITY_TOL = 1e-9  # integrality and primal tolerances: with big-M = 1 (scaled) they bound time errors
OPTIMALITY_REL_TOL = 1e-6  # schedule counts as optimal when its bound is this close
OVERLAP_TOL = 1e-6  # (scaled time) overlaps shorter than this are solver noise, not over-subscription
MIN_SOLVE_TIME_S = 0.05  # less remaining time than this is not worth a solver call
MAX_EAGER_CUT_TERMS = 3000  # pair terms of the capacity cuts added up front, per core type; the rest lazily


@dataclass(frozen=True)
class IlpResult:
    """The best schedule the ILP loop found (or was given), the best proven bound, and why it stopped."""

    best: Timetable
    lower_bound_s: float
    status: str  # "optimal" | "timeout" | "failed" | "stalled"
    iterations: int


@dataclass(frozen=True)
class _Relaxation:
    """What one solver call established about the current (partially cut) model."""

    start_s: tuple[float, ...] | None  # None when the solver found no solution
    parallel: tuple[bool, ...] | None
    bound_s: float | None  # proven lower bound on its optimum, if known
    finished: bool  # solved to optimality


Cut = tuple[str, frozenset[int]]  # (core type, ops that may not all run together)


def solve_ilp(problem: Problem, incumbent: Timetable, lower_bound_s: float, solver: str, time_limit_s: float) -> IlpResult:
    """Minimum-makespan schedule by the lazy-cut ILP loop, stopping at ``time_limit_s`` with the best known."""
    deadline = time.monotonic() + time_limit_s
    best, bound_s = incumbent, lower_bound_s
    cuts = _clique_cuts(problem, MAX_EAGER_CUT_TERMS)
    iterations = 0
    while True:
        if bound_s >= best.makespan_s * (1 - OPTIMALITY_REL_TOL):
            return IlpResult(best, bound_s, "optimal", iterations)
        remaining_s = deadline - time.monotonic()
        if remaining_s < MIN_SOLVE_TIME_S:
            return IlpResult(best, bound_s, "timeout", iterations)
        iterations += 1
        try:
            relaxation = _solve_relaxation(problem, cuts, best, bound_s, incumbent.makespan_s, solver, deadline)
        except Exception as exc:  # noqa: BLE001 - a solver failure must not lose the incumbent
            warnings.warn(f"schedule ILP: solver {solver!r} failed ({exc}); keeping the best known schedule", stacklevel=2)
            return IlpResult(best, bound_s, "failed", iterations)
        if relaxation.bound_s is not None:
            bound_s = max(bound_s, relaxation.bound_s)
        if relaxation.start_s is not None:
            replayed = replay(problem, relaxation.start_s, relaxation.parallel)
            if replayed.makespan_s < best.makespan_s:
                best = replayed
        if bound_s >= best.makespan_s * (1 - OPTIMALITY_REL_TOL):
            continue
        if not relaxation.finished:
            return IlpResult(best, bound_s, "timeout", iterations)
        new_cuts = _violated_cuts(problem, relaxation, incumbent.makespan_s) - cuts
        if not new_cuts:
            return IlpResult(best, bound_s, "stalled", iterations)
        cuts |= new_cuts


def _solve_relaxation(problem, cuts, best, bound_s, scale_s, solver, deadline: float) -> _Relaxation:
    model, starts, modes = _build_model(problem, cuts, best, bound_s, scale_s)
    time_limit_s = max(deadline - time.monotonic(), MIN_SOLVE_TIME_S)  # building the model took time too
    if solver == "cbc":
        bound, finished = _run_cbc(model, time_limit_s)
    else:
        bound, finished = _run_highs(model, time_limit_s)
    bound_s = None if bound is None else bound * scale_s
    values = [v.value() for v in starts]
    if any(v is None or not math.isfinite(v) for v in values):
        return _Relaxation(None, None, bound_s, finished)
    parallel = tuple(m.value() > 0.5 if isinstance(m, pulp.LpVariable) else bool(m) for m in modes)
    return _Relaxation(tuple(v * scale_s for v in values), parallel, bound_s, finished)


def _build_model(problem: Problem, cuts: set[Cut], best: Timetable, bound_s: float, scale_s: float):
    """The MILP with the given capacity cuts; ``best`` bounds ``T`` and is the warm start."""
    n = len(problem)
    heads = [h / scale_s for h in problem.heads_s()]
    tails = [t / scale_s for t in problem.tails_s()]
    single = [l / scale_s for l in problem.latency_s]
    par = [l / scale_s for l in problem.latency_parallel_s]
    ub = best.makespan_s / scale_s
    model = pulp.LpProblem("layer_schedule", pulp.LpMinimize)
    makespan = _variable(model, "T", min(bound_s / scale_s, ub), ub)
    makespan.setInitialValue(ub)
    model += makespan
    modes = [_mode_variable(model, problem, i, best.parallel[i]) for i in range(n)]
    durations = [single[i] + (par[i] - single[i]) * modes[i] for i in range(n)]
    starts = []
    for i in range(n):
        latest = ub - tails[i] - problem.min_duration_s(i) / scale_s
        start = _variable(model, f"S_{i}", heads[i], max(latest, heads[i]))
        start.setInitialValue(min(max(best.start_s[i] / scale_s, start.lowBound), start.upBound))
        starts.append(start)
        model += makespan >= start + durations[i] + tails[i], f"end_{i}"
    for i, j in problem.edges:
        model += starts[j] >= starts[i] + durations[i], f"edge_{i}_{j}"
    for core_type in CORE_TYPES:
        _add_work_bound(model, problem, core_type, makespan, single, par, modes)
    orders = _add_disjunctions(model, problem, cuts, best, starts, durations, modes, ub, heads, tails)
    for core_type, members in sorted(cuts, key=lambda c: (c[0], sorted(c[1]))):
        _add_capacity_cut(model, problem, core_type, members, orders)
    return model, starts, modes


def _variable(model: pulp.LpProblem, name: str, low=None, up=None, cat: str = "Continuous") -> pulp.LpVariable:
    """A variable of ``model`` (PuLP >= 3.3 attaches variables to their model; older PuLP cannot)."""
    if hasattr(model, "add_variable"):
        return model.add_variable(name, low, up, cat=cat)
    return pulp.LpVariable(name, low, up, cat=cat)


def _mode_variable(model: pulp.LpProblem, problem: Problem, i: int, initial: bool):
    """``p_i`` as a binary when both modes are admissible, else the fixed mode as a constant."""
    choices = problem.modes(i)
    if len(choices) == 1:
        return int(choices[0])
    mode = _variable(model, f"p_{i}", cat="Binary")
    mode.setInitialValue(int(initial))
    return mode


def _add_work_bound(model, problem, core_type, makespan, single, par, modes) -> None:
    n_cores = problem.cores(core_type)
    users = [i for i in range(len(problem)) if problem.uses(i, core_type)]
    if users:
        work = pulp.lpSum(single[i] + (n_cores * par[i] - single[i]) * modes[i] for i in users)
        model += n_cores * makespan >= work, f"work_{core_type}"


def _add_disjunctions(model, problem, cuts, best, starts, durations, modes, ub, heads, tails):
    """Order binaries and big-M disjunctions for the pairs that need them; returns ``{(i, j): o_ij}``."""
    pairs = {
        (i, j)
        for i, j in combinations(range(len(problem)), 2)
        if _share_cores(problem, i, j) and not problem.comparable(i, j) and (True in problem.modes(i) or True in problem.modes(j))
    }
    for _, members in cuts:
        pairs |= {(i, j) for i, j in combinations(sorted(members), 2) if not problem.comparable(i, j)}
    best_end = [best.start_s[i] + problem.duration_s(i, best.parallel[i]) for i in range(len(problem))]
    orders = {}
    for i, j in sorted(pairs):
        before = _variable(model, f"o_{i}_{j}", cat="Binary")
        after = _variable(model, f"o_{j}_{i}", cat="Binary")
        before.setInitialValue(int(best_end[i] <= best.start_s[j]))
        after.setInitialValue(int(best_end[j] <= best.start_s[i] and best_end[i] > best.start_s[j]))
        model += starts[j] >= starts[i] + durations[i] - max(ub - tails[i] - heads[j], 0.0) * (1 - before), f"before_{i}_{j}"
        model += starts[i] >= starts[j] + durations[j] - max(ub - tails[j] - heads[i], 0.0) * (1 - after), f"before_{j}_{i}"
        model += before + after <= 1, f"one_way_{i}_{j}"
        for k in (i, j):
            if True in problem.modes(k):
                model += before + after >= modes[k], f"parallel_alone_{i}_{j}_{k}"
        orders[i, j], orders[j, i] = before, after
    return orders


def _share_cores(problem: Problem, i: int, j: int) -> bool:
    return any(problem.uses(i, t) and problem.uses(j, t) for t in CORE_TYPES)


def _add_capacity_cut(model, problem, core_type, members, orders) -> None:
    """Among ``members`` (one core type) enough pairs are ordered that no ``n + 1`` run together."""
    m, n_cores = len(members), problem.cores(core_type)
    required = m * (m - 1) // 2 - _turan_edges(m, n_cores)
    ordered = [
        1 if problem.comparable(i, j) else orders[i, j] + orders[j, i]
        for i, j in combinations(sorted(members), 2)
    ]
    name = f"capacity_{core_type}_" + "_".join(map(str, sorted(members)))
    model += pulp.lpSum(ordered) >= required, name


def _turan_edges(m: int, parts: int) -> int:
    """Edges of the Turán graph T(m, parts): the most pairs among m ops with no parts + 1 all together."""
    q, r = divmod(m, parts)
    sum_squares = r * (q + 1) ** 2 + (parts - r) * q**2
    return (m * m - sum_squares) // 2


def _clique_cuts(problem: Problem, max_terms: int) -> set[Cut]:
    """Capacity cuts, one per set of ``n + 1`` pairwise incomparable one-core ops of a type, while
    their pair terms stay within ``max_terms`` per core type.

    With all of them the model is exact (ops that pairwise overlap in time share an instant), so
    layer graphs, whose antichains are small, need no lazy rounds; wide graphs get the first few.
    """
    cuts: set[Cut] = set()
    for core_type in CORE_TYPES:
        size = problem.cores(core_type) + 1
        members = [
            i for i in range(len(problem))
            if problem.uses(i, core_type) and False in problem.modes(i) and problem.latency_s[i] > 0
        ]
        limit = max_terms // (size * (size - 1) // 2)
        cuts |= {(core_type, clique) for clique in _antichains(problem, members, size, limit)}
    return cuts


def _antichains(problem: Problem, members: list[int], size: int, limit: int) -> list[frozenset[int]]:
    """Up to ``limit`` sets of ``size`` pairwise incomparable ``members`` (search capped at 50 steps per set)."""
    found: list[frozenset[int]] = []
    steps = 0

    def extend(chosen: list[int], rest: list[int]) -> None:
        nonlocal steps
        steps += 1
        if len(found) >= limit or steps > 50 * limit or len(chosen) + len(rest) < size:
            return
        if len(chosen) == size:
            found.append(frozenset(chosen))
            return
        for position, i in enumerate(rest):
            extend(chosen + [i], [j for j in rest[position + 1:] if not problem.comparable(i, j)])

    extend([], members)
    return found


def _violated_cuts(problem: Problem, relaxation: _Relaxation, scale_s: float) -> set[Cut]:
    """Sets of one-core ops of one type that the relaxation runs at one instant beyond the core count."""
    tol = OVERLAP_TOL * scale_s
    cuts: set[Cut] = set()
    for core_type in CORE_TYPES:
        intervals = {
            i: (relaxation.start_s[i], relaxation.start_s[i] + problem.duration_s(i, False))
            for i in range(len(problem))
            if problem.uses(i, core_type) and not relaxation.parallel[i] and problem.latency_s[i] > tol
        }
        for probe_s, _ in intervals.values():
            running = frozenset(i for i, (s, e) in intervals.items() if s <= probe_s + tol and e >= probe_s + 2 * tol)
            if len(running) > problem.cores(core_type):
                cuts.add((core_type, running))
    return cuts


def _run_cbc(model: pulp.LpProblem, time_limit_s: float) -> tuple[float | None, bool]:
    """Solve with CBC (warm-started); return (proven bound on the objective, solved to optimality)."""
    with tempfile.TemporaryDirectory(prefix="phaze-cbc-") as tmp:
        log_path = Path(tmp) / "cbc.log"
        with warnings.catch_warnings():  # PuLP 3.3 deprecates the bundled CBC, still its only CBC
            warnings.simplefilter("ignore", DeprecationWarning)
            command = pulp.PULP_CBC_CMD(
                msg=False,
                timeLimit=time_limit_s,
                timeMode="elapsed",
                gapRel=MIP_REL_GAP,
                threads=1,
                warmStart=True,
                logPath=str(log_path),
                options=[f"integerTolerance {FEASIBILITY_TOL}", f"primalTolerance {FEASIBILITY_TOL}"],
            )
        model.solve(command)
        log = log_path.read_text(errors="replace") if log_path.exists() else ""
    finished = model.sol_status == pulp.LpSolutionOptimal
    if finished:
        return pulp.value(model.objective) * (1 - MIP_REL_GAP), True
    match = re.search(r"^Lower bound:\s+(\S+)", log, re.MULTILINE)
    return (float(match.group(1)) if match else None), False


@functools.cache
def _silence_highs_banner() -> None:
    """HiGHS prints a banner to the process's stdout when its first instance is built, whatever the
    options; build that first instance with stdout pointed at /dev/null (stdout may carry JSON)."""
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _run_highs(model: pulp.LpProblem, time_limit_s: float) -> tuple[float | None, bool]:
    """Solve with HiGHS through its Python API; return (proven bound on the objective, solved to optimality)."""
    import highspy

    _silence_highs_banner()
    model.solve(
        pulp.HiGHS(
            msg=False,
            timeLimit=time_limit_s,
            gapRel=MIP_REL_GAP,
            mip_feasibility_tolerance=FEASIBILITY_TOL,
            primal_feasibility_tolerance=FEASIBILITY_TOL,
        )
    )
    highs = model.solverModel
    info = highs.getInfo()
    finished = highs.getModelStatus() == highspy.HighsModelStatus.kOptimal
    if info.primal_solution_status != 2:  # no feasible solution: the values pulp copied are meaningless
        for variable in model.variables():
            variable.varValue = None
    if finished:  # a model without binaries is a plain LP, which reports no MIP bound
        return pulp.value(model.objective) * (1 - MIP_REL_GAP), True
    bound = info.mip_dual_bound
    return (bound if math.isfinite(bound) else None), False
