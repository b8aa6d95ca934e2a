"""DualPipe's partition DP over device pairs (:class:`PairDP`): under ``Stack.pipeline_schedule = "dualpipe"`` device
``k`` holds stage ``k`` and its mirror ``p − 1 − k`` (:func:`~phaze_env.placement.inputs.parameter_copies`), so a
device's memory is the two stages' — their weights, gradients and optimizer state, and each stage's own activations
for the ``s`` microbatches it holds ``s``-th from the end (:func:`~phaze_env.placement.inputs.in_flight_units`: the
first stage's ``p`` with the last's one on device 0, ``p/2 + 1`` with ``p/2`` in the middle; ``p + 1`` per device).

The memory limit then couples stage ``k`` with stage ``p − 1 − k`` and the suffix DP's stage-by-stage limit no longer
applies. Exactness. The objective is still the slowest stage's time ``C`` (:mod:`phaze_env.placement.search`), and
whether some partition has ``C ≤ τ`` with every device within the HBM is monotone in ``τ`` (a larger ``τ`` allows
every stage and recompute mode a smaller one does), so the optimum is the least ``τ`` among the stage times that is
feasible: a binary search over them. For one ``τ`` each stage takes, among its recompute modes no slower than ``τ``,
the one of least memory (the pair's memory is the sum of its stages', so the least sum is the sum of the leasts), and
feasibility is a DP over the pairs from both ends of the pipeline inward: after ``h`` pairs, the reachable states are
the pairs of downsets ``(a, b)`` with stages ``0 … h−1`` covering ``a`` and stages ``p−h … p−1`` covering the layers
outside ``b``; pair ``h`` adds an early stage ``(a, a')`` (``p − h`` microbatches in flight) and a late stage
``(b', b)`` (``h + 1``) whose memories ``E_h(a, a') + L_h(b', b)`` fit; the pipeline exists when the last pair meets,
``a' = b'``. One step is two min-plus products over the reachable ``a`` (``X(a, b') = min_{b reachable from a}
L_h(b', b)``, then ``min_a E_h(a, a') + X(a, b')``), ``O(K³)`` for ``K`` downsets. The once-per-batch sync is the
largest stage's (both copies, :func:`~phaze_env.placement.inputs.parameter_copies`), so the search's ε-constraint walk
on it is unchanged: it masks stages, and a mask is a restriction of the same DP.

Not modelled: a device's two stages each count full recompute's rebuilt layer (one is live at a time; at most one
layer's stash over), and its time is priced per stage, not as the average of the pair it alternates between.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from phaze_env.placement.candidates import Shape
from phaze_env.placement.inputs import dualpipe_mirror
from phaze_env.placement.stage_costs import StageCosts
from phaze_env.placement.stages import StageTable


class PairDP:
    """The min-max stage time of one DualPipe shape with each device's memory its two stages' (module docstring)."""

    def __init__(self, table: StageTable, costs: StageCosts, shape: Shape):
        memory = costs.memory
        self.table, self.stages, self.hbm_bytes = table, shape.stages, memory.settings.hbm_bytes
        self.modes = memory.modes
        listed = costs.layout.dense(np.ones(costs.layout.entries, dtype=bool), False)  # every stage that fits alone
        self._times = [np.where(listed, costs.full_time[mode], np.inf) for mode in self.modes]
        self._fixed = [memory.full_fixed[mode] for mode in self.modes]
        self._per_unit = [memory.full_per_unit[mode] for mode in self.modes]
        # (units of the early stage h, units of the late stage p − 1 − h) for every pair h
        self._units = [(shape.units(shape.stages - h), shape.units(h + 1)) for h in range(shape.stages // 2)]

    def _memory(self, units: int, tau: float, allowed: np.ndarray) -> np.ndarray:
        """Every allowed stage's least memory among its modes no slower than ``tau`` (``inf``: none)."""
        best = np.full(allowed.shape, np.inf)
        for times, fixed, per_unit in zip(self._times, self._fixed, self._per_unit):
            np.minimum(best, np.where(allowed & (times <= tau), fixed + units * per_unit, np.inf), out=best)
        return best

    def _reachable(self, tau: float, allowed: np.ndarray) -> list[np.ndarray] | None:
        """The reachable ``(a, b)`` after each pair (the start first) if the pipeline closes at ``tau``, else None."""
        states = np.zeros(allowed.shape, dtype=bool)
        states[self.table.empty, self.table.full] = True
        levels = [states]
        for early_units, late_units in self._units:
            early, late = self._memory(early_units, tau, allowed), self._memory(late_units, tau, allowed)
            rows = np.flatnonzero(states.any(axis=1))
            # X(a, b') = min over the b reachable with a of L(b', b); then min_a E(a, a') + X(a, b')
            after = np.min(np.where(states[rows][:, None, :], late[None, :, :], np.inf), axis=2)
            states = np.min(early[rows][:, :, None] + after[:, None, :], axis=0) <= self.hbm_bytes
            if not states.any():
                return None
            levels.append(states)
        return levels if states.diagonal().any() else None

    def solve(self, allowed: np.ndarray | None = None) -> tuple[float, list[tuple[int, int]]]:
        """(least slowest-stage time, its stages first to last) over the ``allowed`` stages (K × K; None: all);
        ``(inf, [])`` when no partition fits."""
        allowed = self.table.valid if allowed is None else allowed & self.table.valid
        taus = np.unique(np.concatenate([times[allowed & np.isfinite(times)] for times in self._times]))
        if not len(taus) or self._reachable(float(taus[-1]), allowed) is None:
            return math.inf, []
        low, high = 0, len(taus) - 1  # taus[high] is feasible; find the first feasible
        while low < high:
            middle = (low + high) // 2
            if self._reachable(float(taus[middle]), allowed) is None:
                low = middle + 1
            else:
                high = middle
        tau = float(taus[high])
        return tau, self._trace(tau, allowed, self._reachable(tau, allowed))

    def _trace(self, tau: float, allowed: np.ndarray, levels: list[np.ndarray]) -> list[tuple[int, int]]:
        """The stages of one partition the reachable states ``levels`` close at ``tau``, first to last."""
        meet = int(np.flatnonzero(levels[-1].diagonal())[0])
        stages: list[tuple[int, int] | None] = [None] * self.stages
        inner = (meet, meet)
        for h in range(len(self._units) - 1, -1, -1):
            early_units, late_units = self._units[h]
            early, late = self._memory(early_units, tau, allowed), self._memory(late_units, tau, allowed)
            a_next, b_next = inner
            fits = levels[h] & (early[:, a_next][:, None] + late[b_next, :][None, :] <= self.hbm_bytes)
            a, b = (int(i) for i in np.argwhere(fits)[0])
            stages[h], stages[dualpipe_mirror(h, self.stages)] = (a, a_next), (b_next, b)
            inner = (a, b)
        return stages

    def stage_modes(self, stages: list[tuple[int, int]]) -> list[tuple[str | None, float]]:
        """(recompute mode, time per microbatch) of every stage of a partition: per device pair, the modes with the
        least slowest time (then the least sum) whose memories fit together (``(None, inf)`` for both: none does)."""
        result: list[tuple[str | None, float]] = [(None, math.inf)] * self.stages
        for h, (early_units, late_units) in enumerate(self._units):
            early, late = stages[h], stages[dualpipe_mirror(h, self.stages)]
            best = None
            for (i, mode_e), (j, mode_l) in itertools.product(enumerate(self.modes), repeat=2):
                need = (self._fixed[i][early] + early_units * self._per_unit[i][early]
                        + self._fixed[j][late] + late_units * self._per_unit[j][late])
                time_e, time_l = float(self._times[i][early]), float(self._times[j][late])
                if need <= self.hbm_bytes and math.isfinite(max(time_e, time_l)):
                    key = (max(time_e, time_l), time_e + time_l)
                    if best is None or key < best[0]:
                        best = key, (mode_e, time_e), (mode_l, time_l)
            if best is not None:
                result[h], result[dualpipe_mirror(h, self.stages)] = best[1], best[2]
        return result

    def least_memory(self, allowed: np.ndarray) -> float:
        """The smallest fullest-device memory of any partition into the ``allowed`` stages, each stage in its lightest
        mode: a min-max DP over the same pairs of downsets, ``O(K⁴)`` (only to say what a plan that does not fit
        needs)."""
        allowed = allowed & self.table.valid
        value = np.full(allowed.shape, np.inf)
        value[self.table.empty, self.table.full] = 0.0
        for early_units, late_units in self._units:
            early = self._memory(early_units, math.inf, allowed)
            late = self._memory(late_units, math.inf, allowed)
            rows = np.flatnonzero(np.isfinite(value).any(axis=1))
            reached = value[rows]  # [a, b]
            new = np.full(allowed.shape, np.inf)
            for a_next in range(allowed.shape[0]):
                column = early[rows, a_next]
                if not np.isfinite(column).any():
                    continue
                # max(value(a, b), E(a, a') + L(b', b)), least over (a, b), for every b'
                need = np.maximum(reached[:, :, None], column[:, None, None] + late.T[None, :, :])
                new[a_next] = need.min(axis=(0, 1))
            value = new
        return float(value.diagonal().min())


__all__ = ["PairDP"]
