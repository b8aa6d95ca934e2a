"""Exact search of the best (data, pipeline) degrees, stage partition and per-stage recompute for one
tensor width, microbatch size and HBM capacity.

Model (1F1B / PipeDream-Flush, Narayanan et al. 2021; ``p`` stages, ``d`` replicas, ``m_r = ceil(B/(d·m))``
microbatches per replica, ``v`` virtual stages per device):

* stage time per microbatch ``c = Σfwd + Σbwd + recompute + v · p2p sends``, where recompute is 0
  (``none``), the attention cores' forward (``selective``, Korthikanti et al. 2022 §5) or the whole
  forward (``full``); each stage uses the fastest allowed mode that fits its memory;
* memory of a stage: ``weights + gradients + optimizer state`` (ZeRO-1 divides the state by ``d``) plus
  activations for the microbatches in flight: the stage ``s``-th from the end holds ``n = min(s, m_r)``
  (1F1B) — with interleaving, ``2(s−1) + (v−1)p + 1`` chunks of ``1/v`` of a microbatch (Megatron-LM's
  warm-up count, capped at ``v·m_r``; for the first stage that is ``p + (p−1)/v`` microbatches, Korthikanti
  et al. 2022 §4.2.3). Activations per microbatch: ``stash`` (none), ``stash − attention core``
  (selective), the input of every layer (full: Megatron's per-layer checkpoints, "2sbh per layer",
  Korthikanti et al. 2022 §5) plus, once, the largest layer's stash while it is rebuilt; sequence
  parallelism divides the non-tensor-parallel part of the stash and the layer inputs by ``t``;
* ``T = (m_r + (p−1)/v) · max_k c_k + allreduce(P) + optimizer step(P)``, ``P`` = the largest stage's
  parameter bytes (the bubble is ``(p−1)/(v·m_r)`` of the steady state, Narayanan et al. 2021 §2.2.2).
  With interleaving a device's layers are modelled as one contiguous stage (its ``v`` chunks carry the
  same load), and Megatron's rule that ``m_r`` be a multiple of ``p`` is enforced.

Exactness. Recompute modes are ordered by time (none ≤ selective ≤ full) and each only lowers memory,
so the fastest fitting mode is the stage's one cost for each ``n``, and the gradient bytes never depend
on it. For ``v = 1``, counting stages from the end (``s = p − k``) makes ``n = min(s, m_r)`` independent of
``p``: one suffix DP ``f_s(a) = min_b max(c_{min(s, m_r)}(a, b), f_{s−1}(b))`` gives the min-max stage time
for every ``p``; for ``v > 1`` ``n`` depends on ``p`` and the DP is run per ``p``. For fixed ``(d, p, v)`` the
objective ``M·C + A(P)`` (``A`` increasing and affine) is minimised exactly by an ε-constraint walk down
the (C, P) trade-off: the fastest partition, then the fastest one with a strictly smaller ``P``, and so
on, stopping when ``M·C`` plus the smallest possible ``A`` cannot beat the incumbent. Without ZeRO-1,
among data-parallel degrees with the same ``m_r`` the smallest dominates (same stage memory; its
all-reduce and pipeline sends span no more levels of the network); with ZeRO-1 every ``d`` is searched.
Shapes are visited in order of a lower bound on ``T`` (the DP with the loosest memory rule, no p2p,
plus the smallest possible all-reduce), so most are never solved. With ZeRO-1 a second bound, shared by all
shapes, is checked before a data-parallel degree gets its own DP: the loosest memory's DP at the shape's
microbatches (rounded down to a power of two; fewer microbatches never hold more in flight). A finite
``cutoff_s`` (``run``) starts the search with that incumbent time: branch and bound across searches.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Callable

import numpy as np

from phaze_env.cluster import Cluster
from phaze_env.placement.inputs import GRADIENT_FACTOR, LayerArrays, Settings
from phaze_env.placement.plan import Plan, infeasible
from phaze_env.placement.stages import StageTable
from phaze_env.plan_spec import PlanSpec

_LOWER_BOUND_SLACK = 1.0 - 1e-12  # keeps rounding in prefix sums from pruning an exact tie


class StageMemory:
    """The memory side of :class:`StageCosts` (it does not depend on the network): per recompute mode each
    stage's fixed bytes and bytes per activation unit, which stages fit with one unit, and how many
    units each stage holds per mode (``limits``)."""

    def __init__(self, table: StageTable, settings: Settings, state_factor: float, interleave: int,
                 transient_bytes: np.ndarray, layout: StageMemory | None = None):
        self.settings = settings
        self.interleave = interleave
        self.modes = settings.plan.recompute_modes
        self._table, self._state_factor, self._transient_full = table, state_factor, transient_bytes
        if layout is None:
            fits_once = np.zeros_like(table.valid)
            for mode in self.modes:
                fits_once |= self.full_fixed[mode] + self.full_per_unit[mode] <= settings.hbm_bytes
            fits_once &= table.valid
            width = max(1, int(fits_once.sum(axis=1).max()))
            self._order = np.argsort(~fits_once, axis=1, kind="stable")[:, :width]
            self._listed = np.take_along_axis(fits_once, self._order, axis=1)
            self.next_index = np.where(self._listed, self._order, table.size)
            self.param_bytes = self.compact(table.param_bytes)
            # What does not depend on the state factor, compacted once per layout (same interleave).
            self._transient = self.compact(transient_bytes)
            self._per_unit = {mode: self.compact(self.full_per_unit[mode]) for mode in self.modes}
        else:  # a looser memory's layout lists a superset of the stages; the others get limit -1 (inf)
            self._order, self._listed = layout._order, layout._listed
            self.next_index, self.param_bytes = layout.next_index, layout.param_bytes
            self._transient, self._per_unit = layout._transient, layout._per_unit
        # compact(P·f) = compact(P)·f and compact(P·f + X) = compact(P)·f + compact(X), entry by entry
        state_compact = self.param_bytes * state_factor
        fixed = {"none": state_compact, "selective": state_compact, "full": state_compact + self._transient}
        self.limits = [_most_in_flight(fixed[mode], self._per_unit[mode], settings.hbm_bytes) for mode in self.modes]
        # ``c_n`` changes with ``n`` only where ``n`` passes some ``limit + 1``: between two such
        # breakpoints it is the same matrix, so it is computed (and keyed) once per interval.
        limits = np.concatenate([limit.ravel() for limit in self.limits])
        limits = limits[np.isfinite(limits) & (limits >= 1)]
        self.breakpoints = np.unique(limits + 1).tolist()  # the n > 1 at which some entry of c_n changes
        # Two memories with one layout and equal limits give identical stage costs c_n for every n.
        self.signature = (id(self._order), b"".join(limit.tobytes() for limit in self.limits))

    @cached_property
    def full_fixed(self) -> dict[str, np.ndarray]:
        """Every stage's fixed bytes per recompute mode: weights, gradients, optimizer state (+ the rebuilt
        layer's stash for full recompute)."""
        state = self._table.param_bytes * self._state_factor
        return {"none": state, "selective": state, "full": state + self._transient_full}

    @cached_property
    def full_per_unit(self) -> dict[str, np.ndarray]:
        """Every stage's bytes per activation unit (``1/v`` of a microbatch) per recompute mode."""
        table, settings, v = self._table, self.settings, self.interleave
        t = settings.tensor_width
        split = (1.0 - 1.0 / t) if settings.sequence_parallel else 0.0
        stash = table.stash_bytes - table.replicated_stash_bytes * split
        layer_inputs = table.input_bytes / t if settings.sequence_parallel else table.input_bytes
        return {"none": stash / v, "selective": (stash - table.attention_stash_bytes) / v, "full": layer_inputs / v}

    def mode(self, a: int, b: int, units: float) -> str | None:
        """The recompute mode of stage ``(a, b)`` with ``units`` in flight (the same comparison as the DP)."""
        for mode in self.modes:
            if self.full_fixed[mode][a, b] + units * self.full_per_unit[mode][a, b] <= self.settings.hbm_bytes:
                return mode
        return None

    def compact(self, matrix: np.ndarray) -> np.ndarray:
        """``matrix`` in the compact layout (row ``a``: the stages that fit with one unit, then ``inf``)."""
        return np.where(self._listed, np.take_along_axis(matrix, self._order, axis=1), np.inf)


class StageCosts:
    """Stage time matrices ``c_n`` per number ``n`` of activation units in flight (``inf`` = does not fit).

    One instance per variant: the p2p time matrix (the network level the pipeline crosses) and a
    :class:`StageMemory` (the state factor — weights + gradients + optimizer state, ZeRO-1 shards — and
    the interleave ``v``: a unit is ``1/v`` of a microbatch). ``full_*`` hold every stage's time, fixed and
    per-unit memory per recompute mode, so the plan report uses the very numbers the DP compared.

    Stored compactly: row ``a`` lists only the stages ``(a, b)`` that fit with one unit in flight (the
    loosest rule), as ``next_index[a, w] = b`` padded with the sentinel ``K`` whose suffix value is always
    ``inf``. For a chain that is a band of stage lengths.
    """

    def __init__(self, table: StageTable, p2p_s: np.ndarray, memory: StageMemory):
        self.memory = memory
        self.settings = memory.settings
        self.interleave = v = memory.interleave
        self.modes = memory.modes
        self.next_index = memory.next_index
        self.param_bytes = memory.param_bytes
        plain = table.fwd_s + table.bwd_s + v * p2p_s
        self.p2p_s = p2p_s
        self.full_time = {"none": plain, "selective": plain + table.attention_fwd_s, "full": plain + table.fwd_s}
        self._times = [memory.compact(self.full_time[mode]) for mode in self.modes]
        self._limits = memory.limits
        self._breakpoints = memory.breakpoints
        self._cache: dict[int, np.ndarray] = {}

    def canonical(self, n: int) -> int:
        """The smallest ``n' ≤ n`` with ``c_{n'} = c_n`` (exactly, entry by entry)."""
        interval = bisect.bisect_right(self._breakpoints, n)
        return int(self._breakpoints[interval - 1]) if interval else 1

    def time(self, n: int) -> np.ndarray:
        result = self._cache.get(n)
        if result is None:
            canonical = self.canonical(n)
            result = self._cache.get(canonical)
            if result is None:
                result = np.full(self.next_index.shape, np.inf)
                for times, limit in zip(self._times[::-1], self._limits[::-1]):  # the fastest fitting mode wins
                    result = np.where(canonical <= limit, times, result)
                self._cache[canonical] = result
            self._cache[n] = result
        return result



def _most_in_flight(fixed_bytes: np.ndarray, per_microbatch_bytes: np.ndarray, hbm_bytes: float) -> np.ndarray:
    """Largest ``n`` with ``fixed + n·per_microbatch ≤ hbm`` (``inf`` if unbounded, ``-1`` if none).

    The division is only a guess; it is corrected with the same comparison the plan report uses, so the
    DP and the report never disagree on a boundary case.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        guess = np.floor((hbm_bytes - fixed_bytes) / per_microbatch_bytes)
    guess = np.where(per_microbatch_bytes > 0, guess, np.where(fixed_bytes <= hbm_bytes, np.inf, -1.0))
    guess = np.where(np.isfinite(guess), np.maximum(guess, -1.0), guess)
    finite = np.isfinite(guess) & (guess >= 0)
    with np.errstate(invalid="ignore"):  # inf·0 where unbounded: masked out by ``finite``
        wrong = finite & ((fixed_bytes + guess * per_microbatch_bytes > hbm_bytes)
                          | (fixed_bytes + (guess + 1) * per_microbatch_bytes <= hbm_bytes))
    index = np.flatnonzero(wrong)  # usually none: fix the few the division got wrong, until none is
    if index.size:
        guess = guess.copy()
        fixed, per = np.broadcast_to(fixed_bytes, guess.shape).ravel()[index], per_microbatch_bytes.ravel()[index]
        flat = guess.reshape(-1)
        while index.size:  # f + n·u is monotone in n (u > 0), so each entry settles after a step or two
            n = flat[index]
            n = np.where(fixed + n * per > hbm_bytes, n - 1, np.where(fixed + (n + 1) * per <= hbm_bytes, n + 1, n))
            flat[index] = n
            still = (fixed + n * per > hbm_bytes) | (fixed + (n + 1) * per <= hbm_bytes)
            index, fixed, per = index[still], fixed[still], per[still]
    return np.where(np.isnan(guess), -1.0, guess)


def _add_stage(value: np.ndarray, next_index: np.ndarray, after: np.ndarray, rows: int) -> np.ndarray:
    """One DP step: best min-max over a stage ``(a, b)`` followed by the suffix from ``b`` (+ sentinel).

    Only the first ``rows`` downsets can still be split into the stages left (see ``SuffixDP.rows``);
    the others are ``inf`` without looking.
    """
    best = np.empty(len(after))
    best[rows:] = np.inf
    np.minimum.reduce(np.maximum(value[:rows], after[next_index[:rows]]), axis=1, out=best[:rows])
    return best


def _finish(table: StageTable) -> np.ndarray:
    """``f_0`` (with the sentinel): zero stages cover only what is already complete."""
    done = np.full(table.size + 1, np.inf)
    done[table.full] = 0.0
    return done


def _trace(start: int, stages: int, next_index: np.ndarray, value_at, suffix) -> list[tuple[int, int]]:
    """Recover the stage pairs of a DP optimum (``value_at(s)``: matrix of the stage ``s`` from the end)."""
    pairs, a = [], start
    for s in range(stages, 0, -1):
        w = int(np.argmin(np.maximum(value_at(s)[a], suffix(s - 1)[next_index[a]])))
        pairs.append((a, int(next_index[a, w])))
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
        self._shared = [_finish(table)]  # f_s with n = s
        self._capped: dict[int, list[np.ndarray]] = {}  # m_r -> f_s for s > m_r (n = m_r)
        # Downsets are sorted by size, so those with at least ``s`` layers left (the only ones that
        # ``s`` non-empty stages can start from) are a prefix; its length for each ``s``.
        left = len(table.member[0]) - table.member.sum(axis=1)
        self._rows = np.searchsorted(-left, -np.arange(len(left) + 1), side="right").tolist()

    def rows(self, s: int) -> int:
        """How many downsets (a prefix) have at least ``s`` layers outside them."""
        return self._rows[min(s, len(self._rows) - 1)]

    def suffix(self, m_r: int, s: int) -> np.ndarray:
        step = self.costs.next_index
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
        return _trace(self.table.empty, p, self.costs.next_index, lambda s: self.costs.time(min(s, m_r)),
                      lambda s: self.suffix(m_r, s))

    def param_floor(self, deepest: int) -> np.ndarray:
        """Smallest possible largest-stage parameter bytes for ``p = 1 … deepest`` (stages that fit at ``n = 1``)."""
        value = np.where(np.isfinite(self.costs.time(1)), self.costs.param_bytes, np.inf)
        suffixes, optima = _finish(self.table), []
        for s in range(1, deepest + 1):
            suffixes = _add_stage(value, self.costs.next_index, suffixes, self.rows(s))
            optima.append(suffixes[self.table.empty])
        return np.array(optima)

    def constrained(self, p: int, value_at: Callable[[int], np.ndarray]):
        """A one-off suffix DP with other value matrices (``value_at(s)``); returns (optimum, pairs)."""
        suffixes = [_finish(self.table)]
        for s in range(1, p + 1):
            suffixes.append(_add_stage(value_at(s), self.costs.next_index, suffixes[-1], self.rows(s)))
        optimum = float(suffixes[p][self.table.empty])
        if math.isinf(optimum):
            return optimum, []
        return optimum, _trace(self.table.empty, p, self.costs.next_index, value_at, lambda s: suffixes[s])


@dataclass(frozen=True)
class _Shape:
    """Degrees of one candidate plan."""

    data_parallel: int
    stages: int
    microbatches: int  # per replica
    interleave: int = 1

    @property
    def slots(self) -> float:
        """Steady-state microbatches plus the bubble, in stage times: ``m_r + (p − 1)/v``."""
        return self.microbatches + (self.stages - 1) / self.interleave

    def units(self, s: int) -> int:
        """Activation units in flight on the stage ``s``-th from the end (1F1B, or Megatron's interleaved warm-up)."""
        if self.interleave == 1:
            return min(s, self.microbatches)
        v, p = self.interleave, self.stages
        return min(2 * (s - 1) + (v - 1) * p + 1, v * self.microbatches)


class _Best:
    """The incumbent: smallest time per batch seen, with its shape and partition."""

    def __init__(self):
        self.time_s = math.inf
        self.shape: _Shape | None = None
        self.pairs: list[tuple[int, int]] = []

    def offer(self, time_s: float, shape: _Shape, pairs: list[tuple[int, int]]) -> None:
        if time_s < self.time_s:
            self.time_s, self.shape, self.pairs = time_s, shape, pairs


class PlacementSearch:
    """Best plan for one tensor width, microbatch size and HBM capacity (see module docstring)."""

    def __init__(self, layers: LayerArrays, table: StageTable, settings: Settings, max_stages: int):
        self.layers = layers
        self.table = table
        self.settings = settings
        s = settings
        self.max_stages = max_stages
        self._p2p: dict[object, np.ndarray] = {}
        self._variants: dict[tuple, tuple[StageCosts, SuffixDP]] = {}
        self._sync_floor: dict[tuple[int, int], float] = {}  # (p, d) -> sync_s of the smallest largest stage
        # Full recompute rebuilds one layer at a time: its largest layer stash is live transiently.
        self.transient_bytes = table.layer_max(self._layer_memory("none"))
        # The loosest memory rule over every variant: the smallest state (most ZeRO shards), no p2p.
        most_replicas = max(1, s.n_devices // s.tensor_width)
        self._loosest_state = s.state_factor(most_replicas)
        self._memory: dict[tuple[float, int], StageMemory] = {}
        loosest = StageCosts(table, np.zeros_like(table.fwd_s), self.memory(s.state_factor(most_replicas), 1))
        self.loosest_dp = SuffixDP(table, loosest)
        deepest = min(max_stages, most_replicas)
        self.loosest_s = [self.loosest_dp.min_stage_time(1, stages) for stages in range(1, deepest + 1)]
        self.param_floor = self.loosest_dp.param_floor(deepest)

    # --- network and optimizer terms --------------------------------------------------------------
    def allreduce_s(self, param_bytes: float, data_parallel: int) -> float:
        """Data-parallel gradient all-reduce (ZeRO-1: reduce-scatter + all-gather, the same bytes)."""
        return self.settings.cluster.collective_s("allreduce", param_bytes * GRADIENT_FACTOR, data_parallel,
                                                  stride=self.settings.tensor_width)

    def sync_s(self, param_bytes: float, data_parallel: int) -> float:
        """What the largest stage adds once per batch: gradient all-reduce + optimizer step."""
        return self.allreduce_s(param_bytes, data_parallel) + self.settings.optimizer_step_s(param_bytes, data_parallel)

    def _level(self, shape: _Shape):
        cluster, t = self.settings.cluster, self.settings.tensor_width
        return cluster.p2p_level(t * shape.data_parallel, max(shape.stages - 1, 1))

    def _send_s(self, level, payload_bytes: float) -> float:
        """One pipeline message; across a slower level than the tensor group's, Megatron's scatter/gather
        (Narayanan et al. 2021 §4.1) sends ``1/t`` per tensor rank and all-gathers it inside the group."""
        from phaze_env import comm

        cluster, t = self.settings.cluster, self.settings.tensor_width
        if t == 1 or len(cluster.levels) == 1:
            return comm.p2p_s(payload_bytes, level.p2p_bandwidth_Bps, level.latency_s)
        return (comm.p2p_s(payload_bytes / t, level.p2p_bandwidth_Bps, level.latency_s)
                + cluster.collective_s("allgather", payload_bytes, t))

    def memory(self, state_factor: float, interleave: int) -> StageMemory:
        key = (state_factor, interleave)
        if key not in self._memory:
            layout = None if state_factor == self._loosest_state else self.memory(self._loosest_state, interleave)
            self._memory[key] = StageMemory(self.table, self.settings, state_factor, interleave, self.transient_bytes,
                                            layout)
        return self._memory[key]

    def memory_for(self, shape: _Shape) -> StageMemory:
        """The memory side of one shape (ZeRO-1 shards its optimizer state over ``d``)."""
        return self.memory(self.settings.state_factor(shape.data_parallel), shape.interleave)

    def variant(self, shape: _Shape) -> tuple[StageCosts, SuffixDP]:
        """Stage costs (and the shared suffix DP) of the network level, ZeRO shards and interleave of ``shape``."""
        s = self.settings
        level = self._level(shape)
        memory = self.memory_for(shape)
        key = (level, shape.interleave, memory.signature)  # data-parallel degrees with equal limits share one DP
        if key not in self._variants:
            if level not in self._p2p:
                self._p2p[level] = self.table.p2p_s(lambda payload: self._send_s(level, payload))
            costs = StageCosts(self.table, self._p2p[level], memory)
            self._variants[key] = (costs, SuffixDP(self.table, costs))
        return self._variants[key]

    # --- search -----------------------------------------------------------------------------------
    def run(self, cutoff_s: float = math.inf) -> Plan | None:
        """The optimal plan, or (with a finite ``cutoff_s``) ``None`` if no plan takes less than ``cutoff_s``
        per batch: the search then prunes against the cutoff from the start (branch and bound across
        searches, as ``evaluate`` does over tensor widths, microbatches and HBM sizes)."""
        reason = self._obviously_infeasible()
        if reason:
            return self._infeasible(reason)
        best = _Best()
        best.time_s = cutoff_s
        for shape, bound_s in self._candidates():
            if bound_s >= best.time_s:
                break
            self._solve_shape(shape, best)
        if best.shape is None:
            return None if math.isfinite(cutoff_s) else self._infeasible(self._no_fit_reason())
        return self._plan(best.shape, best.pairs)

    def _infeasible(self, reason: str) -> Plan:
        s = self.settings
        return infeasible(reason, tensor_width=s.tensor_width, microbatch=s.microbatch, hbm_bytes=s.hbm_bytes)

    def _obviously_infeasible(self) -> str:
        s = self.settings
        plan = s.plan
        if s.tensor_width > s.n_devices:
            return f"tensor width {s.tensor_width} exceeds the {s.n_devices} devices"
        if plan.devices is not None and plan.devices != s.n_devices:
            return f"plan {plan} uses t·p·d = {plan.devices} devices, the cluster has {s.n_devices}"
        used = s.tensor_width * (plan.p or 1) * (plan.d or 1)
        if used > s.n_devices:
            return f"plan {plan} needs at least {used} devices, the cluster has {s.n_devices}"
        if plan.p is not None and plan.p > self.max_stages:
            return f"plan {plan} has {plan.p} pipeline stages but the model has only {self.max_stages} layers"
        # Each layer's smallest footprint: the loosest state and one unit of its lightest mode.
        costs = self.loosest_dp.costs
        state = self.layers.param_bytes * s.state_factor(max(1, s.n_devices // s.tensor_width))
        lightest = np.min([self._layer_memory(mode) for mode in costs.modes], axis=0) + state
        worst = int(np.argmax(lightest - s.hbm_bytes))
        if lightest[worst] > s.hbm_bytes:
            return (f"layer {worst} alone needs {lightest[worst] / 2**30:.3g} GiB (weights, gradients, "
                    f"{s.cluster.optimizer} state and one microbatch of activations) > {s.hbm_bytes / 2**30:.3g} GiB "
                    f"of HBM at tensor width {s.tensor_width}")
        return ""

    def _layer_memory(self, mode: str) -> np.ndarray:
        s, layers = self.settings, self.layers
        split = (1.0 - 1.0 / s.tensor_width) if s.sequence_parallel else 0.0
        stash = layers.stash_bytes - layers.replicated_stash_bytes * split
        if mode == "none":
            return stash
        if mode == "selective":
            return stash - layers.attention_stash_bytes
        # full: the rebuilt layer's stash. Its checkpointed input is left out of this lower bound: in a DAG
        # only sources checkpoint their own ``input_bytes`` (a non-source's is what its predecessors output)
        return stash

    def _candidates(self):
        """``(shape, lower bound on T)`` for every allowed ``(d, p, v)``, by increasing bound.

        Stage-time bound: the DP with one unit in flight everywhere, the smallest optimizer state and no
        p2p (``self.loosest_s``); all-reduce bound: the smallest largest-stage parameter bytes of any
        ``p``-stage partition (``self.param_floor``).
        """
        s, plan = self.settings, self.settings.plan
        replicas = np.arange(1, s.n_devices // s.tensor_width + 1)
        if plan.d is not None:
            replicas = replicas[replicas == plan.d]
        microbatches = -(-s.global_batch // (replicas * s.microbatch))
        if not s.zero1 and plan.d is None:
            _, first = np.unique(microbatches, return_index=True)
            replicas, microbatches = replicas[first], microbatches[first]
        most_stages = np.minimum(len(self.loosest_s), s.n_devices // (replicas * s.tensor_width))
        d = np.repeat(replicas, most_stages)
        m_r = np.repeat(microbatches, most_stages)
        p = np.arange(1, len(d) + 1) - np.repeat(np.cumsum(most_stages) - most_stages, most_stages)
        if plan.p is not None:
            keep = p == plan.p
            d, m_r, p = d[keep], m_r[keep], p[keep]
        shapes = []
        for v in s.interleaves:
            allowed = np.ones(len(p), dtype=bool) if v == 1 else (p > 1) & (m_r % np.maximum(p, 1) == 0)
            shapes.append((d[allowed], p[allowed], m_r[allowed], np.full(int(allowed.sum()), v)))
        d, p, m_r, v = (np.concatenate(parts) for parts in zip(*shapes))
        if len(d) == 0:
            return
        loosest = np.array(self.loosest_s)[p - 1]
        bound_s = (m_r + (p - 1) / v) * loosest + self._sync_floor_s(d, self.param_floor[p - 1])
        keep = np.flatnonzero(np.isfinite(bound_s))
        d, p, m_r, v, bound_s = d[keep], p[keep], m_r[keep], v[keep], bound_s[keep] * _LOWER_BOUND_SLACK
        order = np.lexsort((v, p, d, bound_s))
        for d_i, p_i, m_i, v_i, bound_i in zip(*(x[order].tolist() for x in (d, p, m_r, v, bound_s))):
            yield _Shape(d_i, p_i, m_i, v_i), bound_i

    def _sync_floor_s(self, data_parallel: np.ndarray, param_bytes: np.ndarray) -> np.ndarray:
        """``sync_s`` elementwise, for bounds (it is affine in the bytes for a fixed group, and 0 for no bytes)."""
        s = self.settings
        fixed, per_byte = _allreduce_affine(s.cluster, s.tensor_width)
        finite_bytes = np.where(np.isfinite(param_bytes), param_bytes, 0.0)
        times = (fixed[data_parallel - 1] + per_byte[data_parallel - 1] * finite_bytes * GRADIENT_FACTOR
                 + s.optimizer_step_s(finite_bytes, data_parallel))
        return np.where(param_bytes > 0, times, 0.0)

    def _stage_values(self, shape: _Shape, costs: StageCosts, mask: np.ndarray | None = None):
        """``value_at(s)``: the stage-time matrix of the stage ``s``-th from the end (optionally masked)."""
        def value_at(s: int) -> np.ndarray:
            times = costs.time(shape.units(s))
            return times if mask is None else np.where(mask, times, np.inf)
        return value_at

    def _solve_shape(self, shape: _Shape, best: _Best) -> None:
        """Offer ``best`` the optimal partition of one shape, if it can beat it."""
        if self.settings.zero1 or shape.interleave > 1:
            # Every shape's memory is at least the loosest one's (most ZeRO shards; an interleaved stage ``s``-th
            # from the end holds ``min(2(s−1)+(v−1)p+1, v·m_r)/v ≥ min(s, m_r)`` microbatches' worth) and its
            # p2p ≥ 0, and fewer microbatches per replica never put more in flight, so the loosest DP at the
            # largest power of two ≤ m_r bounds the stage time from below. That DP is shared by all shapes (a
            # few capped suffixes), which spares a per-d memory side or a one-off interleaved DP for most.
            m_lo = 1 << (shape.microbatches.bit_length() - 1)
            loose_s = self.loosest_dp.min_stage_time(m_lo, shape.stages)
            if math.isinf(loose_s) or self._bound_s(shape, loose_s) >= best.time_s:
                return
        costs, dp = self.variant(shape)
        if shape.interleave == 1:
            stage_time_s = dp.min_stage_time(shape.microbatches, shape.stages)
            if math.isinf(stage_time_s) or self._bound_s(shape, stage_time_s) >= best.time_s:
                return
            pairs = dp.partition(shape.microbatches, shape.stages)
        else:
            stage_time_s, pairs = dp.constrained(shape.stages, self._stage_values(shape, costs))
            if math.isinf(stage_time_s) or self._bound_s(shape, stage_time_s) >= best.time_s:
                return
        best.offer(self._time_per_batch_s(shape, pairs), shape, pairs)
        if self._bound_s(shape, 0.0) > 0.0:  # a stage's parameters cost time once per batch: trade them off
            self._pareto_walk(shape, pairs, best)

    def _bound_s(self, shape: _Shape, stage_time_s: float) -> float:
        """Lower bound on ``T`` of any partition of ``shape`` whose slowest stage takes ``stage_time_s`` or more."""
        key = (shape.stages, shape.data_parallel)
        if key not in self._sync_floor:
            self._sync_floor[key] = self.sync_s(self.param_floor[shape.stages - 1], shape.data_parallel)
        return (shape.slots * stage_time_s + self._sync_floor[key]) * _LOWER_BOUND_SLACK

    def _pareto_walk(self, shape: _Shape, pairs: list[tuple[int, int]], best: _Best) -> None:
        """Exact ``min M·C + A(P)``: repeatedly the fastest partition with a strictly smaller largest stage.

        The parameter bytes ``P_i`` of the partitions found strictly decrease and their stage times
        ``C_i`` do not; while ``P_i`` exceeds the optimum's ``P*``, ``C_{i+1} ≤ C*``, so some partition
        with ``C ≤ C*`` and ``P ≤ P*`` is reached. Stop when ``M·C_i`` + the smallest possible
        all-reduce cannot beat the incumbent, or when ``P_i`` is the smallest possible.
        """
        costs, dp = self.variant(shape)
        floor_bytes = self.param_floor[shape.stages - 1]
        params = self._max_params(pairs)
        while params > floor_bytes:
            stage_time_s, pairs = dp.constrained(shape.stages, self._stage_values(shape, costs, costs.param_bytes < params))
            if math.isinf(stage_time_s) or self._bound_s(shape, stage_time_s) >= best.time_s:
                return
            best.offer(self._time_per_batch_s(shape, pairs), shape, pairs)
            params = self._max_params(pairs)

    def _max_params(self, pairs: list[tuple[int, int]]) -> float:
        first, after = np.array(pairs).T
        return float(self.table.param_bytes[first, after].max())

    def _stages(self, shape: _Shape, pairs: list[tuple[int, int]]) -> list[tuple[str | None, float]]:
        """(recompute mode, time per microbatch) of every stage of a partition."""
        costs, _ = self.variant(shape)
        stages = []
        for k, (a, b) in enumerate(pairs):
            mode = self.memory_for(shape).mode(a, b, shape.units(shape.stages - k))
            stages.append((mode, math.inf if mode is None else float(costs.full_time[mode][a, b])))
        return stages

    def _time_per_batch_s(self, shape: _Shape, pairs: list[tuple[int, int]]) -> float:
        """``(m_r + (p−1)/v) · max stage time + sync of the largest stage`` of a partition."""
        slowest_s = max(time for _, time in self._stages(shape, pairs))
        return shape.slots * slowest_s + self.sync_s(self._max_params(pairs), shape.data_parallel)

    def _no_fit_reason(self) -> str:
        s, plan = self.settings, self.settings.plan
        if plan.p is not None and plan.d is not None:
            m_r = -(-s.global_batch // (plan.d * s.microbatch))
            v = plan.interleave or 1
            if v > 1 and (plan.p == 1 or m_r % plan.p):
                return (f"plan {plan}: the interleaved schedule needs p > 1 and the {m_r} microbatches per replica "
                        f"to be a multiple of p = {plan.p} (Megatron-LM)")
            need = self._least_memory(_Shape(plan.d, plan.p, m_r, v))
            return (f"plan {plan} does not fit: its best partition needs {need / 2**30:.3g} GiB on the fullest device "
                    f"> {s.hbm_bytes / 2**30:.3g} GiB of HBM (recompute {'/'.join(s.plan.recompute_modes)}, "
                    f"sequence parallel {'on' if s.sequence_parallel else 'off'}, ZeRO-1 {'on' if s.zero1 else 'off'})")
        return (f"no pipeline of at most {self.max_stages} stages fits {s.hbm_bytes / 2**30:.3g} GiB of HBM per device "
                f"with {s.n_devices} devices at tensor width {s.tensor_width} (plan {plan})")

    def _least_memory(self, shape: _Shape) -> float:
        """The smallest worst-device memory of any partition of ``shape`` (its lightest mode per stage)."""
        memory_ = self.memory_for(shape)
        valid = self.table.valid
        value = {}

        def memory(s: int) -> np.ndarray:
            units = shape.units(s)
            if units not in value:
                value[units] = np.where(valid, np.min([memory_.full_fixed[m] + units * memory_.full_per_unit[m]
                                                       for m in memory_.modes], axis=0), np.inf)
            return value[units]

        best = _finish(self.table)[:-1]
        for s in range(1, shape.stages + 1):
            best = np.min(np.maximum(memory(s), best[None, :]), axis=1)
        return float(best[self.table.empty])

    def _plan(self, shape: _Shape, pairs: list[tuple[int, int]]) -> Plan:
        """Evaluate a partition into a full :class:`Plan` (the reported numbers are recomputed here)."""
        s, t = self.settings, self.table
        costs, _ = self.variant(shape)
        memory_side = self.memory_for(shape)
        stages = self._stages(shape, pairs)
        modes = tuple(mode for mode, _ in stages)
        times = [time for _, time in stages]
        memory = []
        for k, ((a, b), mode) in enumerate(zip(pairs, modes)):
            params = float(t.param_bytes[a, b])
            units = shape.units(shape.stages - k)
            state = s.state_factor(shape.data_parallel)
            memory.append({
                "weights": params * (1.0 + s.weight_copy_factor),
                "gradients": params * GRADIENT_FACTOR,
                "optimizer": params * (state - 1.0 - s.weight_copy_factor - GRADIENT_FACTOR),
                "activations": float(memory_side.full_fixed[mode][a, b] - params * state
                                     + units * memory_side.full_per_unit[mode][a, b]),
            })
        for item in memory:
            item["total"] = item["weights"] + item["gradients"] + item["optimizer"] + item["activations"]
        slowest = int(np.argmax(times))
        a, b = pairs[slowest]
        largest = self._max_params(pairs)
        steady = shape.microbatches
        recompute_s = times[slowest] - float(t.fwd_s[a, b] + t.bwd_s[a, b] + shape.interleave * costs.p2p_s[a, b])
        breakdown = {
            "compute": steady * float(t.fwd_s[a, b] + t.bwd_s[a, b] - t.tp_comm_s[a, b]),
            "recompute": steady * recompute_s,
            "tp_comm": steady * float(t.tp_comm_s[a, b]),
            "p2p": steady * shape.interleave * float(costs.p2p_s[a, b]),
            "bubble": (shape.stages - 1) / shape.interleave * times[slowest],
            "dp_allreduce": self.allreduce_s(largest, shape.data_parallel),
            "optimizer": s.optimizer_step_s(largest, shape.data_parallel),
        }
        time_per_batch_s = shape.slots * times[slowest] + self.sync_s(largest, shape.data_parallel)
        throughput = s.global_batch / time_per_batch_s
        devices = shape.data_parallel * shape.stages * s.tensor_width
        layers = tuple(t.layers_of(a, b) for a, b in pairs)
        used = [mode for mode in ("none", "selective", "full") if mode in modes]
        spec = PlanSpec(t=s.tensor_width, p=shape.stages, d=shape.data_parallel, microbatch=s.microbatch,
                        interleave=shape.interleave, recompute="|".join(used),
                        sequence_parallel=s.sequence_parallel and s.tensor_width > 1,
                        zero1=s.zero1 and shape.data_parallel > 1)
        return Plan(
            feasible=True,
            notation=str(spec),
            throughput_samples_s=throughput,
            time_per_batch_s=time_per_batch_s,
            tokens_s=None if s.seq_len is None else throughput * s.seq_len,
            mfu=_mfu(s, throughput, devices),
            tensor_width=s.tensor_width,
            data_parallel=shape.data_parallel,
            pipeline_stages=shape.stages,
            microbatch=s.microbatch,
            microbatches_per_replica=shape.microbatches,
            interleave=shape.interleave,
            sequence_parallel=spec.sequence_parallel,
            zero1=spec.zero1,
            devices_used=devices,
            hbm_bytes=s.hbm_bytes,
            stage_bounds=tuple((min(group), max(group)) for group in layers),
            stage_layers=layers,
            recompute=tuple(mode != "none" for mode in modes),
            recompute_modes=modes,
            stage_times_s=tuple(times),
            stage_p2p_s=tuple(shape.interleave * float(costs.p2p_s[a, b]) for a, b in pairs),
            stage_allreduce_s=tuple(self.allreduce_s(float(t.param_bytes[a, b]), shape.data_parallel) for a, b in pairs),
            stage_memory_bytes=tuple(item["total"] for item in memory),
            bubble_fraction=(shape.stages - 1) / shape.interleave / shape.slots,
            memory_bytes=max(memory, key=lambda item: item["total"]),
            time_breakdown_s=breakdown,
            allreduce_s=breakdown["dp_allreduce"],
            p2p_s=breakdown["p2p"],
        )


@lru_cache(maxsize=64)
def _allreduce_affine(cluster: Cluster, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """The data-parallel all-reduce over ``d = 1 … N/stride`` replicas as ``fixed[d−1] + per_byte[d−1] · S``
    (exact for ``S > 0``: every ring term is affine in the bytes), shared by every search on one cluster."""
    groups = range(1, max(1, cluster.n_devices // stride) + 1)
    one = np.array([cluster.collective_s("allreduce", 1.0, g, stride=stride) for g in groups])
    two = np.array([cluster.collective_s("allreduce", 2.0, g, stride=stride) for g in groups])
    return one - (two - one), two - one


def _mfu(settings: Settings, throughput_samples_s: float, devices: int) -> float | None:
    """Model FLOPs per second over the peak of the devices the plan uses."""
    if settings.model_flops_per_sample is None or settings.peak_flops is None:
        return None
    return settings.model_flops_per_sample * throughput_samples_s / (settings.peak_flops * devices)
