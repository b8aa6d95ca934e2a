"""Cheap lower bounds on the makespan, valid for every feasible schedule."""

from __future__ import annotations

from graphlib import TopologicalSorter

import numpy as np

from phaze_env.schedule.problem import CORE_TYPES, Problem, unit_uses
from phaze_env.workloads.graph import OpGraph


def critical_path_s(problem: Problem) -> float:
    """Longest path with every op at its shortest duration (cores unlimited)."""
    heads_s = problem.heads_s()
    return max((heads_s[i] + problem.min_duration_s(i) for i in range(len(problem))), default=0.0)


def core_time_s(problem: Problem, i: int, core_type: str) -> float:
    """Least core-time op ``i`` holds on one core type: one core for ``latency_s`` or every core for
    ``latency_parallel_s``, the cheaper of its admissible modes (0 when it uses no core of that type)."""
    if not problem.uses(i, core_type):
        return 0.0
    k = CORE_TYPES.index(core_type)
    return min(problem.demand(i, p)[k] * problem.duration_s(i, p) for p in problem.modes(i))


def core_work_bound_s(problem: Problem, core_type: str) -> float:
    """Least core-time the ops need on one core type, spread over all its cores."""
    return sum(core_time_s(problem, i, core_type) for i in range(len(problem))) / problem.cores(core_type)


def release_and_tail_s(problem: Problem) -> tuple[list[float], list[float]]:
    """Per op, a time before which it cannot start and a time that must pass after it ends.

    Every ancestor of op ``j`` ends before ``j`` starts, so on each core type their least core-time fits in
    ``[0, S_j]`` on that type's cores: ``S_j ≥ W(ancestors) / cores``; likewise every descendant runs in
    ``[E_j, T]``. Both also propagate along edges, as a critical path does.
    """
    n = len(problem)
    ancestors = [0] * n
    for i in range(n):
        for j in _bits(problem.descendants[i]):
            ancestors[j] |= 1 << i
    work = [[core_time_s(problem, i, t) for t in CORE_TYPES] for i in range(n)]

    def spread_s(members: int) -> float:
        return max(sum(work[i][k] for i in _bits(members)) / problem.cores(t) for k, t in enumerate(CORE_TYPES))

    preds, succs = problem.predecessors(), [[] for _ in range(n)]
    for i, j in problem.edges:
        succs[i].append(j)
    release = [0.0] * n
    for j in problem.topo_order:
        release[j] = max([spread_s(ancestors[j])] + [release[i] + problem.min_duration_s(i) for i in preds[j]])
    tail = [0.0] * n
    for i in reversed(problem.topo_order):
        tail[i] = max([spread_s(problem.descendants[i])] + [problem.min_duration_s(j) + tail[j] for j in succs[i]])
    return release, tail


def precedence_work_bound_s(problem: Problem, release_tail: tuple[list[float], list[float]] | None = None) -> float:
    """Longest release + shortest duration + tail of any op (``release_tail``: :func:`release_and_tail_s`)."""
    release, tail = release_tail or release_and_tail_s(problem)
    return max((release[i] + problem.min_duration_s(i) + tail[i] for i in range(len(problem))), default=0.0)


def pair_bound_s(problem: Problem, release_tail: tuple[list[float], list[float]] | None = None) -> float:
    """Two unordered ops sharing a core type either overlap, and then both hold one core for their one-core
    latency, or one runs after the other (each at least its shortest duration): the makespan is at least the
    least of the three cases, for every such pair. Closes the gap of a short op that a long parallel op must
    let pass (one core of each would be slower). ``release_tail``: :func:`release_and_tail_s`."""
    release, tail = release_tail or release_and_tail_s(problem)
    shortest = [problem.min_duration_s(i) for i in range(len(problem))]
    bound = 0.0
    for i in range(len(problem)):
        for j in range(i + 1, len(problem)):
            if problem.comparable(i, j) or not any(problem.uses(i, t) and problem.uses(j, t) for t in CORE_TYPES):
                continue
            overlap = (max(release[i] + problem.latency_s[i] + tail[i], release[j] + problem.latency_s[j] + tail[j])
                       if False in problem.modes(i) and False in problem.modes(j) else float("inf"))
            i_first = max(release[i] + shortest[i], release[j]) + shortest[j] + tail[j]
            j_first = max(release[j] + shortest[j], release[i]) + shortest[i] + tail[i]
            bound = max(bound, min(overlap, i_first, j_first))
    return bound


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def lower_bound_s(problem: Problem) -> float:
    """The best of the critical-path, per-core-type work, precedence-work and pair bounds."""
    release_tail = release_and_tail_s(problem)
    return max(critical_path_s(problem), precedence_work_bound_s(problem, release_tail),
               pair_bound_s(problem, release_tail),
               *(core_work_bound_s(problem, t) for t in CORE_TYPES))


def dag_lower_bounds_s(dag: OpGraph, one_s: np.ndarray, all_s: np.ndarray, n_tc: np.ndarray,
                       n_vc: np.ndarray) -> np.ndarray:
    """Makespan lower bound of one DAG for every architecture (``one_s``/``all_s``: ops × archs).

    The cheap bounds of this module, vectorised over architectures: critical path, work per core type, release/tail
    times from ancestors' and descendants' work, and the pair bound (the exact search bounds every architecture of a
    space at once with it, :func:`phaze_env.pricing.layer_time_bounds_s`).
    """
    n = len(dag.ops)
    if not n:
        return np.zeros(one_s.shape[1])
    shortest = np.minimum(one_s, all_s)
    preds: list[list[int]] = [[] for _ in dag.ops]
    succs: list[list[int]] = [[] for _ in dag.ops]
    for a, b in dag.edges:
        preds[b].append(a)
        succs[a].append(b)
    order = list(TopologicalSorter({i: preds[i] for i in range(n)}).static_order())
    below = np.zeros((n, n), dtype=bool)  # below[i, j]: j is reachable from i
    for i in reversed(order):
        for j in succs[i]:
            below[i, j] = True
            below[i] |= below[j]
    uses = {core: np.array([unit_uses(op.unit, core) for op in dag.ops]) for core in CORE_TYPES}
    cores = {"tc": n_tc, "vc": n_vc}
    # least core-time of each op on each core type: one core for one_s or every core for all_s
    work = {core: np.where(uses[core][:, None], np.minimum(one_s, cores[core] * all_s), 0.0) for core in cores}

    def spread_s(members: np.ndarray) -> np.ndarray:  # members: ops × ops mask → ops × archs
        return np.maximum(*(members.astype(float) @ work[core] / cores[core] for core in cores))

    from_ancestors, from_descendants = spread_s(below.T), spread_s(below)
    release = np.zeros_like(shortest)
    for j in order:
        release[j] = from_ancestors[j]
        for i in preds[j]:
            release[j] = np.maximum(release[j], release[i] + shortest[i])
    tail = np.zeros_like(shortest)
    for i in reversed(order):
        tail[i] = from_descendants[i]
        for j in succs[i]:
            tail[i] = np.maximum(tail[i], shortest[j] + tail[j])
    bound = (release + shortest + tail).max(axis=0)  # ≥ the critical path: release ≥ head, tail ≥ its own
    for core in cores:
        if uses[core].any():
            bound = np.maximum(bound, work[core].sum(axis=0) / cores[core])
    # pair bound: unordered ops sharing a core type overlap (one core each, one_s) or run one after the other
    one_core_mode = np.ones((n, len(n_tc)), dtype=bool)  # a mode on one core is admissible
    for i, op in enumerate(dag.ops):
        if any(unit_uses(op.unit, core) for core in CORE_TYPES):
            single_core_types = np.all([cores[c] == 1 for c in cores if uses[c][i]], axis=0)
            one_core_mode[i] = ~((all_s[i] < one_s[i]) & single_core_types)
    for i in range(n):
        for j in range(i + 1, n):
            if below[i, j] or below[j, i] or not any(uses[c][i] and uses[c][j] for c in cores):
                continue
            overlap = np.where(one_core_mode[i] & one_core_mode[j],
                               np.maximum(release[i] + one_s[i] + tail[i], release[j] + one_s[j] + tail[j]), np.inf)
            i_first = np.maximum(release[i] + shortest[i], release[j]) + shortest[j] + tail[j]
            j_first = np.maximum(release[j] + shortest[j], release[i]) + shortest[i] + tail[i]
            bound = np.maximum(bound, np.minimum(overlap, np.minimum(i_first, j_first)))
    return bound
