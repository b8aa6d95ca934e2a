"""The min-max stage-time DP over the downsets of the layer graph (:class:`SuffixDP`): for ``p`` stages counted
from the end, ``f_s(a) = min_b max(c_{min(s, m_r)}(a, b), f_{s−1}(b))`` on one variant's stage costs
(:class:`~phaze_env.placement.stage_costs.StageCosts`), shared between every ``p`` and, up to the memory limits,
every ``m_r`` (exactness: :mod:`phaze_env.placement.search`'s docstring)."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from phaze_env.placement.stage_costs import Layout, StageCosts
from phaze_env.placement.stages import StageTable


def _add_stage(value: np.ndarray, layout: Layout, after: np.ndarray, rows: int) -> np.ndarray:
    """One DP step: best min-max over a stage ``(a, b)`` followed by the suffix from ``b``.

    Only the first ``rows`` downsets can still be split into the stages left (see ``SuffixDP.rows``);
    the others, and those that list no stage, are ``inf`` without looking.
    """
    best = np.full(len(after), np.inf)
    nonempty, end = layout.nonempty_rows(rows)
    if len(nonempty):
        # the rows' entries are consecutive, so each row's minimum is one segment's (the rows without entries between
        # two listed ones add no entry to a segment)
        best[nonempty] = np.minimum.reduceat(np.maximum(value[:end], after[layout.next_index[:end]]),
                                             layout.row_start[nonempty])
    return best


def finish(table: StageTable) -> np.ndarray:
    """``f_0`` (with the sentinel): zero stages cover only what is already complete."""
    done = np.full(table.size + 1, np.inf)
    done[table.full] = 0.0
    return done


def _trace(start: int, stages: int, layout: Layout, value_at, suffix) -> list[tuple[int, int]]:
    """Recover the stage pairs of a DP optimum (``value_at(s)``: matrix of the stage ``s`` from the end)."""
    pairs, a = [], start
    for s in range(stages, 0, -1):
        row = layout.row(a)
        w = int(np.argmin(np.maximum(value_at(s)[row], suffix(s - 1)[layout.next_index[row]])))
        pairs.append((a, int(layout.next_index[row.start + w])))
        a = pairs[-1][1]
    return pairs


class SuffixDP:
    """The min-max stage-time DP, shared between all ``p`` and, for ``s ≤ m_r``, between all ``m_r``.

    For ``s > m_r`` the DP uses ``c_{m_r}`` at every remaining step. If ``m' = costs.canonical(m_r)``,
    then ``c_{min(k, m_r)} = c_{min(k, m')}`` for every ``k`` (both are ``c_k`` up to ``m'`` and the one
    matrix of the interval ``[m', m_r]`` after), so ``f^{m_r}_s = f^{m'}_s``: one capped DP per interval
    of constant ``c_n``, not one per distinct ``m_r`` (most ``m_r`` exceed every memory limit).
    """

    def __init__(self, table: StageTable, costs: StageCosts):
        self.table = table
        self.costs = costs
        self._shared = [finish(table)]  # f_s with n = s
        self._capped: dict[int, list[np.ndarray]] = {}  # m_r -> f_s for s > m_r (n = m_r)
        # Downsets are sorted by size, so those with at least ``s`` layers left (the only ones that
        # ``s`` non-empty stages can start from) are a prefix; its length for each ``s``.
        left = len(table.member[0]) - table.member.sum(axis=1)
        self._rows = np.searchsorted(-left, -np.arange(len(left) + 1), side="right").tolist()

    def rows(self, s: int) -> int:
        """How many downsets (a prefix) have at least ``s`` layers outside them."""
        return self._rows[min(s, len(self._rows) - 1)]

    def suffix(self, m_r: int, s: int) -> np.ndarray:
        step = self.costs.layout
        if s <= m_r:
            while len(self._shared) <= s:
                s_new = len(self._shared)
                self._shared.append(_add_stage(self.costs.time(s_new), step, self._shared[-1], self.rows(s_new)))
            return self._shared[s]
        m_r = self.costs.canonical(m_r)
        capped = self._capped.setdefault(m_r, [])
        while len(capped) < s - m_r:
            previous = capped[-1] if capped else self.suffix(m_r, m_r)
            capped.append(_add_stage(self.costs.time(m_r), step, previous, self.rows(m_r + len(capped) + 1)))
        return capped[s - m_r - 1]

    def min_stage_time(self, m_r: int, p: int) -> float:
        return float(self.suffix(m_r, p)[self.table.empty])

    def partition(self, m_r: int, p: int) -> list[tuple[int, int]]:
        return _trace(self.table.empty, p, self.costs.layout, lambda s: self.costs.time(min(s, m_r)),
                      lambda s: self.suffix(m_r, s))

    def param_floor(self, deepest: int, param_bytes: np.ndarray | None = None) -> np.ndarray:
        """Smallest possible largest-stage parameter bytes for ``p = 1 … deepest`` (stages that fit at ``n = 1``);
        ``param_bytes``: another compact per-stage byte count instead (a part of the parameters)."""
        param_bytes = self.costs.param_bytes if param_bytes is None else param_bytes
        value = np.where(np.isfinite(self.costs.time(1)), param_bytes, np.inf)
        suffixes, optima = finish(self.table), []
        for s in range(1, deepest + 1):
            suffixes = _add_stage(value, self.costs.layout, suffixes, self.rows(s))
            optima.append(suffixes[self.table.empty])
        return np.array(optima)

    def constrained(self, p: int, value_at: Callable[[int], np.ndarray]):
        """A one-off suffix DP with other value matrices (``value_at(s)``); returns (optimum, pairs)."""
        suffixes = [finish(self.table)]
        for s in range(1, p + 1):
            suffixes.append(_add_stage(value_at(s), self.costs.layout, suffixes[-1], self.rows(s)))
        optimum = float(suffixes[p][self.table.empty])
        if math.isinf(optimum):
            return optimum, []
        return optimum, _trace(self.table.empty, p, self.costs.layout, value_at, lambda s: suffixes[s])

