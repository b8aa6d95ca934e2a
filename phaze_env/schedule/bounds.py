"""Cheap lower bounds on the makespan, valid for every feasible schedule."""

from __future__ import annotations

from phaze_env.schedule.problem import CORE_TYPES, Problem


def critical_path_s(problem: Problem) -> float:
    """Longest path with every op at its shortest duration (cores unlimited)."""
    heads_s = problem.heads_s()
    return max((heads_s[i] + problem.min_duration_s(i) for i in range(len(problem))), default=0.0)


def core_work_bound_s(problem: Problem, core_type: str) -> float:
    """Least core-time the ops need on one core type, spread over all its cores.

    An op holds one core for ``latency_s`` or every core for ``latency_parallel_s``; it is charged
    the cheaper of its admissible modes.
    """
    n_cores = problem.cores(core_type)
    work_s = 0.0
    for i in range(len(problem)):
        if problem.uses(i, core_type):
            work_s += min(problem.demand(i, p)[CORE_TYPES.index(core_type)] * problem.duration_s(i, p) for p in problem.modes(i))
    return work_s / n_cores


def lower_bound_s(problem: Problem) -> float:
    """The best of the critical-path bound and the per-core-type work bounds."""
    return max(critical_path_s(problem), *(core_work_bound_s(problem, t) for t in CORE_TYPES))
