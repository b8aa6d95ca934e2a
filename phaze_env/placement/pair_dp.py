"""DualPipe's partition DP over device pairs (:class:`PairDP`): under ``Stack.pipeline_schedule = "dualpipe"`` device
``k`` holds stage ``k`` and its mirror ``p − 1 − k`` (:func:`~phaze_env.placement.inputs.parameter_copies`), so a
device's memory is the two stages' — their weights, gradients and optimizer state, and each stage's own activations
for the ``s`` microbatches it holds ``s``-th from the end (:func:`~phaze_env.placement.inputs.in_flight_units`: the
first stage's ``p`` with the last's one on device 0, ``p/2 + 1`` with ``p/2`` in the middle; ``p + 1`` per device).

A device also alternates between its two stages: it runs half of the ``m_r`` microbatches through each (one
direction's through stage ``k``, the other's through ``p − 1 − k``: deepseek-ai/DualPipe ``DualPipe.step`` runs
``num_chunks/2`` forwards and backwards of each chunk), so its time per microbatch slot is the pair's mean,
``(c_k + c_{p−1−k})/2``, and the pipeline's pace is the slowest device's (for a mirror of equal load, the stage time).

Both couple stage ``k`` with stage ``p − 1 − k``, and the suffix DP's stage by stage no longer applies. Exactness: a
DP over the pairs from both ends of the pipeline inward. After ``h`` pairs a state is a pair of downsets ``(a, b)``
with stages ``0 … h−1`` covering ``a`` and stages ``p−h … p−1`` covering the layers outside ``b``, valued by the least
slowest device time of any way there, ``V_h(a, b)``; pair ``h`` adds an early stage ``(a, a')`` (``p − h``
microbatches in flight) and a late stage ``(b', b)`` (``h + 1``), whose device time ``C`` is the least pair mean over
their recompute modes whose memories fit together: ``V_{h+1}(a', b') = min_{a, b} max(V_h(a, b), C(a, a', b', b))``,
and the optimum is ``min_x V_{p/2}(x, x)`` (the last pair meets). The objective is a maximum over pairs of a term of
its own pair only, so the principle of optimality holds; ``O(K⁴)`` per pair and mode pair for ``K`` downsets.

The once-per-batch sync is a device's too (:class:`PairSync`): device ``k`` reduces and steps the gradients of the two
stages it holds, ``P_k + P_{p−1−k}`` bytes, and the batch waits for the device that syncs longest, so
``T = slots · max_h C_h + max_h S(P_h + P_{p−1−h})``. Assumption: the sync is exposed after the flush, as under 1F1B —
deepseek-ai/DualPipe's ``DualPipe.step`` returns only after its last weight-gradient chunk (step 8) and holds no
data-parallel collective, so the reduction runs after it (``examples/example_dualpipe.py`` sums the two copies'
gradients after ``step`` returns); the stack's overlap of these collectives is refused with DualPipe
(``Stack.dp_comm_overlap``). The search minimises ``slots · C + S`` by an ε-constraint walk down ``S``
(:meth:`~phaze_env.placement.search.PlacementSearch._pareto_walk`): :meth:`PairDP.solve` given a cap keeps only the
pairs whose sync is below it, a restriction of each pair's own term, so the DP above stays exact under it.

Not modelled: a device's two stages each count full recompute's rebuilt layer (one is live at a time; at most one
layer's stash over).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from phaze_env.placement.candidates import Shape
from phaze_env.placement.inputs import dualpipe_mirror
from phaze_env.placement.stage_costs import StageCosts
from phaze_env.placement.stages import StageTable


@dataclass(frozen=True)
class PairSync:
    """The once-per-batch sync of a DualPipe device as a function of the two stages it holds: for each part of the
    weights synced as one (all of them at ``e = 1``; the dense ones over the ``d·c`` replicas and the routed experts
    over the ``d·c/e`` expert replicas at ``e > 1``), the collective and optimizer step of the two stages' bytes of
    that part together, ``fixed + per_byte · (x_k + x_{p−1−k})`` (0 s for no bytes). Both are affine in the bytes
    for a fixed group (ring collectives: :class:`~phaze_env.placement.collectives.AffineTable`; the step: bytes over
    HBM bandwidth), which :meth:`affine` checks. The two copies of a stage are summed inside that collective
    (``examples/example_dualpipe.py`` adds rank ``p−1−k``'s gradients to rank ``k``'s), as
    :func:`~phaze_env.placement.inputs.parameter_copies` states.

    Kept as the early stage's per-byte parts, ``linear``, plus the late stage's side, ``late[pattern]``: its per-byte
    parts and the fixed part of every part either stage holds bytes of (``pattern``: the parts the early stage holds,
    bit ``i`` for part ``i``). A pair's sync is ``linear[early] + late[pattern[early]][late]``, one addition, the same
    in the DP's blocks (:meth:`below`) as for one partition (:meth:`largest`), so the cap the search walks down is
    compared with exactly the numbers it reports."""

    linear: np.ndarray  # K × K: every stage's per-byte parts
    pattern: np.ndarray  # K × K: the parts a stage holds bytes of, as bits
    late: np.ndarray  # patterns × K × K: a late stage's side of the sync beside an early stage of each pattern

    @classmethod
    def affine(cls, parts: list[tuple[np.ndarray, Callable[[float], float]]]) -> PairSync:
        """From each part's stage bytes (``K × K``, ``≥ 0``, 0 where no stage) and its sync of ``x`` bytes: the line
        through the sync of the largest stage's bytes and twice them (so the fixed part costs the slope no precision),
        checked at three times them. ``ValueError`` if a sync is not affine."""
        shape = parts[0][0].shape
        linear, pattern, fixed_s = np.zeros(shape), np.zeros(shape, dtype=np.int64), []
        for bit, (stage_bytes, sync_s) in enumerate(parts):
            scale = float(stage_bytes.max(initial=0.0))
            one, two = (sync_s(scale), sync_s(2 * scale)) if scale > 0 else (0.0, 0.0)
            # (no latency is negative: a fixed part rounded below 0 is 0, which keeps the sync growing with the bytes)
            per_byte, fixed = ((two - one) / scale, max(2 * one - two, 0.0)) if scale > 0 else (0.0, 0.0)
            if scale > 0 and not math.isclose(three := sync_s(3 * scale), line := fixed + 3 * scale * per_byte,
                                              rel_tol=1e-9, abs_tol=1e-15):
                raise ValueError(f"DualPipe's pair DP prices a device's sync as affine in its bytes (ring collectives "
                                 f"and the optimizer step), but this sync is not affine: {three:g} s for "
                                 f"{3 * scale:g} bytes, {line:g} s on the line through {scale:g} and {2 * scale:g}")
            linear = linear + per_byte * stage_bytes
            pattern |= np.where(stage_bytes > 0, 1 << bit, 0)
            fixed_s.append(fixed)
        late = np.empty((1 << len(parts),) + shape)
        for early_pattern in range(len(late)):
            late[early_pattern] = linear + sum(np.where((early_pattern | pattern) >> bit & 1, fixed, 0.0)
                                               for bit, fixed in enumerate(fixed_s))
        return cls(linear, pattern, late)

    def alone_below(self, limit_s: float) -> np.ndarray:
        """``K × K``: the stages whose own sync (beside an empty stage) is below ``limit_s``. No other stage is in a
        pair below it: the pair's sync is that plus the other stage's bytes' parts, each ``≥ 0``."""
        return self.late[0] < limit_s

    def below(self, early_index, limit_s: float) -> np.ndarray:
        """``[i, b', b]``: whether the device holding early stage ``early_index[i]`` (numpy indices into the ``K × K``
        stages) and late stage ``(b', b)`` syncs in less than ``limit_s``."""
        return self.linear[early_index][:, None, None] + self.late[self.pattern[early_index]] < limit_s

    def largest(self, stages: list[tuple[int, int]]) -> tuple[float, int]:
        """(the longest device sync of a partition, the pair ``h`` whose device pays it: stages ``h`` and
        ``p − 1 − h``)."""
        pairs = [(stages[h], stages[dualpipe_mirror(h, len(stages))]) for h in range(len(stages) // 2)]
        syncs = [float(self.linear[early] + self.late[self.pattern[early]][late]) for early, late in pairs]
        h = int(np.argmax(syncs))
        return syncs[h], h


class PairDP:
    """The min-max device time of one DualPipe shape, each device's time and memory its two stages' (module
    docstring)."""

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

    def _options(self, units: int, allowed: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """(time, memory) of every allowed stage in each recompute mode with ``units`` in flight (``inf``: not
        allowed)."""
        return [(np.where(allowed, times, np.inf), np.where(allowed, fixed + units * per_unit, np.inf))
                for times, fixed, per_unit in zip(self._times, self._fixed, self._per_unit)]

    def _pair_time(self, early, late, a: np.ndarray, a_next: int, cap: tuple[PairSync, float] | None) -> np.ndarray:
        """``C[a, b', b]``: the device time of early stage ``(a, a_next)`` (each ``a`` of ``a``) beside late stage
        ``(b', b)``, the least over their modes whose memories fit together (``inf``: none, or the pair's sync is not
        below the ``cap``)."""
        best = np.full((len(a),) + late[0][0].shape, np.inf)
        for time_e, memory_e in early:
            t_e, m_e = time_e[a, a_next][:, None, None], memory_e[a, a_next][:, None, None]
            for time_l, memory_l in late:
                fits = m_e + memory_l[None, :, :] <= self.hbm_bytes
                np.minimum(best, np.where(fits, (t_e + time_l[None, :, :]) / 2, np.inf), out=best)
        if cap is not None:
            sync, limit_s = cap
            best[~sync.below((a, a_next), limit_s)] = np.inf
        return best

    def _levels(self, allowed: np.ndarray, cap: tuple[PairSync, float] | None) -> list[np.ndarray]:
        """``V_h(a, b)``: the least slowest device time of the outer ``h`` pairs reaching ``(a, b)``, for each ``h``."""
        value = np.full(allowed.shape, np.inf)
        value[self.table.empty, self.table.full] = 0.0
        levels = [value]
        for early_units, late_units in self._units:
            early, late = self._options(early_units, allowed), self._options(late_units, allowed)
            rows = np.flatnonzero(np.isfinite(value).any(axis=1))
            new = np.full(allowed.shape, np.inf)
            for a_next in range(allowed.shape[0]):
                if not any(np.isfinite(time_e[rows, a_next]).any() for time_e, _ in early):
                    continue
                cost = self._pair_time(early, late, rows, a_next, cap)  # [a, b', b]
                new[a_next] = np.maximum(value[rows][:, None, :], cost).min(axis=(0, 2))
            value = new
            levels.append(value)
        return levels

    def solve(self, allowed: np.ndarray | None = None,
              cap: tuple[PairSync, float] | None = None) -> tuple[float, list[tuple[int, int]]]:
        """(least slowest device time, its stages first to last) over the ``allowed`` stages (K × K; None: all) and,
        given a ``cap`` ``(sync, limit_s)``, the device pairs whose :class:`PairSync` is below ``limit_s`` (the
        search's walk down the sync); ``(inf, [])`` when no partition fits."""
        allowed = self.table.valid if allowed is None else allowed & self.table.valid
        if cap is not None:  # (prunes the DP's rows; the pairs are capped in _pair_time)
            allowed = allowed & cap[0].alone_below(cap[1])
        levels = self._levels(allowed, cap)
        closing = levels[-1].diagonal()
        optimum = float(closing.min())
        if math.isinf(optimum):
            return optimum, []
        return optimum, self._trace(allowed, cap, levels, int(np.argmin(closing)))

    def _trace(self, allowed: np.ndarray, cap: tuple[PairSync, float] | None, levels: list[np.ndarray],
               meet: int) -> list[tuple[int, int]]:
        """The stages of one optimal partition whose pairs close at downset ``meet``, first to last (each step
        recomputes the DP's own values, so the equality holds exactly)."""
        stages: list[tuple[int, int] | None] = [None] * self.stages
        inner = (meet, meet)
        for h in range(len(self._units) - 1, -1, -1):
            early_units, late_units = self._units[h]
            early, late = self._options(early_units, allowed), self._options(late_units, allowed)
            a_next, b_next = inner
            rows = np.arange(allowed.shape[0])
            cost = self._pair_time(early, late, rows, a_next, cap)[:, b_next, :]  # [a, b]
            value = np.maximum(levels[h], cost)
            a, b = (int(i) for i in np.argwhere(value == levels[h + 1][a_next, b_next])[0])
            stages[h], stages[dualpipe_mirror(h, self.stages)] = (a, a_next), (b_next, b)
            inner = (a, b)
        return stages

    def stage_modes(self, stages: list[tuple[int, int]]) -> list[tuple[str | None, float]]:
        """(recompute mode, time per microbatch) of every stage of a partition: per device pair, the modes with the
        least summed time (then the least slower one) whose memories fit together (``(None, inf)`` for both: none
        does)."""
        result: list[tuple[str | None, float]] = [(None, math.inf)] * self.stages
        for h, (early_units, late_units) in enumerate(self._units):
            early, late = stages[h], stages[dualpipe_mirror(h, self.stages)]
            best = None
            for (i, mode_e), (j, mode_l) in itertools.product(enumerate(self.modes), repeat=2):
                need = (self._fixed[i][early] + early_units * self._per_unit[i][early]
                        + self._fixed[j][late] + late_units * self._per_unit[j][late])
                time_e, time_l = float(self._times[i][early]), float(self._times[j][late])
                if need <= self.hbm_bytes and math.isfinite(time_e + time_l):
                    key = ((time_e + time_l) / 2, max(time_e, time_l))
                    if best is None or key < best[0]:
                        best = key, (mode_e, time_e), (mode_l, time_l)
            if best is not None:
                result[h], result[dualpipe_mirror(h, self.stages)] = best[1], best[2]
        return result

    @staticmethod
    def device_time_s(times: list[float]) -> float:
        """The slowest device's time per microbatch of a partition whose stages take ``times``: the largest mean of a
        stage and its mirror (a device runs half the microbatches through each)."""
        return max((time + times[dualpipe_mirror(k, len(times))]) / 2 for k, time in enumerate(times))

    def least_memory(self, allowed: np.ndarray) -> float:
        """The smallest fullest-device memory of any partition into the ``allowed`` stages, each stage in its lightest
        mode: a min-max DP over the same pairs of downsets, ``O(K⁴)`` (only to say what a plan that does not fit
        needs)."""
        allowed = allowed & self.table.valid
        value = np.full(allowed.shape, np.inf)
        value[self.table.empty, self.table.full] = 0.0
        for early_units, late_units in self._units:
            early, late = (np.min([memory for _, memory in self._options(units, allowed)], axis=0)
                           for units in (early_units, late_units))
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


__all__ = ["PairDP", "PairSync"]
