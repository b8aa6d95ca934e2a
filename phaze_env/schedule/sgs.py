"""Serial schedule generation: list schedules (the starting incumbent) and replays of ILP orderings.

The serial scheme takes ops in a precedence-feasible order, each with a mode, and starts each at the
earliest time its predecessors have ended and enough cores of each type are free for its whole
duration. Fed the order of a feasible schedule's start times, it never starts an op later than that
schedule did, so replaying an ILP solution through it loses nothing and is feasible by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from phaze_env.schedule.problem import Problem


@dataclass(frozen=True)
class Timetable:
    """A feasible schedule: start time and mode of every op."""

    start_s: tuple[float, ...]
    parallel: tuple[bool, ...]
    makespan_s: float


class _CoreProfile:
    """Cores of each type held over time by the ops placed so far."""

    def __init__(self, n_tc: int, n_vc: int):
        self._capacity = (n_tc, n_vc)
        self._intervals: list[tuple[float, float, tuple[int, int]]] = []

    def place(self, start_s: float, end_s: float, demand: tuple[int, int]) -> None:
        if end_s > start_s and any(demand):
            self._intervals.append((start_s, end_s, demand))

    def earliest_start_s(self, ready_s: float, duration_s: float, demand: tuple[int, int]) -> float:
        """The earliest time >= ``ready_s`` at which ``demand`` fits for ``duration_s``."""
        if duration_s <= 0 or not any(demand):
            return ready_s
        candidates = sorted({ready_s} | {end for _, end, _ in self._intervals if end > ready_s})
        for start_s in candidates:
            if self._fits(start_s, start_s + duration_s, demand):
                return start_s
        raise AssertionError("unreachable: every core is free after the last placed op ends")

    def _fits(self, start_s: float, end_s: float, demand: tuple[int, int]) -> bool:
        # Usage only rises where a placed op starts, so checking those instants suffices.
        instants = [start_s] + [s for s, _, _ in self._intervals if start_s < s < end_s]
        return all(self._free_at(t, demand) for t in instants)

    def _free_at(self, t: float, demand: tuple[int, int]) -> bool:
        for k, capacity in enumerate(self._capacity):
            held = sum(d[k] for s, e, d in self._intervals if s <= t < e)
            if held + demand[k] > capacity:
                return False
        return True


ModeChooser = Callable[[int, _CoreProfile, float], bool]


def serial_schedule(problem: Problem, order: Sequence[int], choose_mode: ModeChooser) -> Timetable:
    """Schedule ops in ``order`` (precedence-feasible), each as early as possible in its chosen mode."""
    preds = problem.predecessors()
    profile = _CoreProfile(problem.n_tc, problem.n_vc)
    start_s = [0.0] * len(problem)
    end_s = [0.0] * len(problem)
    parallel = [False] * len(problem)
    for i in order:
        ready_s = max((end_s[p] for p in preds[i]), default=0.0)
        parallel[i] = choose_mode(i, profile, ready_s)
        duration_s = problem.duration_s(i, parallel[i])
        demand = problem.demand(i, parallel[i])
        start_s[i] = profile.earliest_start_s(ready_s, duration_s, demand)
        end_s[i] = start_s[i] + duration_s
        profile.place(start_s[i], end_s[i], demand)
    return Timetable(tuple(start_s), tuple(parallel), max(end_s, default=0.0))


def replay(problem: Problem, start_s: Sequence[float], parallel: Sequence[bool]) -> Timetable:
    """Re-time a (possibly slightly inexact) schedule: its modes, ops taken in order of start time."""
    order = priority_order(problem, [-s for s in start_s])
    return serial_schedule(problem, order, lambda i, _profile, _ready: bool(parallel[i]))


def priority_order(problem: Problem, priority: Sequence[float]) -> list[int]:
    """A topological order taking, among ready ops, the highest priority first (ties: lower index)."""
    preds_left = [0] * len(problem)
    succs: list[list[int]] = [[] for _ in range(len(problem))]
    for i, j in problem.edges:
        preds_left[j] += 1
        succs[i].append(j)
    ready = [i for i in range(len(problem)) if preds_left[i] == 0]
    order = []
    while ready:
        best = min(ready, key=lambda i: (-priority[i], i))
        ready.remove(best)
        order.append(best)
        for j in succs[best]:
            preds_left[j] -= 1
            if preds_left[j] == 0:
                ready.append(j)
    return order


def list_schedule(problem: Problem) -> Timetable:
    """Best of a few critical-path list schedules (greedy, all-parallel, all-one-core modes)."""
    tails_s = problem.tails_s()
    order = priority_order(problem, [problem.min_duration_s(i) + tails_s[i] for i in range(len(problem))])
    choosers: list[ModeChooser] = [
        lambda i, profile, ready_s: _earliest_finishing_mode(problem, i, profile, ready_s),
        lambda i, _profile, _ready: problem.modes(i)[-1],
        lambda i, _profile, _ready: problem.modes(i)[0],
    ]
    return min((serial_schedule(problem, order, choose) for choose in choosers), key=lambda t: t.makespan_s)


def _earliest_finishing_mode(problem: Problem, i: int, profile: _CoreProfile, ready_s: float) -> bool:
    """The mode in which op ``i`` would finish first given the cores already taken (ties: fewer cores)."""

    def finish_s(parallel: bool) -> float:
        duration_s = problem.duration_s(i, parallel)
        return profile.earliest_start_s(ready_s, duration_s, problem.demand(i, parallel)) + duration_s

    return min(problem.modes(i), key=lambda parallel: (finish_s(parallel), parallel))
