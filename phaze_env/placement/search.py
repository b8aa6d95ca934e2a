"""Exact search of the best (data, pipeline) degrees, ZeRO stage, stage partition and per-stage recompute for
one tensor width, microbatch size and HBM capacity.

Model (1F1B / PipeDream-Flush, Narayanan et al. 2021; ``p`` stages, ``d`` replicas, ``m_r = ceil(B/(d·m))``
microbatches per replica, ``v`` virtual stages per device):

* stage time per microbatch ``c = Σfwd + Σbwd + recompute + v · p2p sends + ZeRO traffic``, where recompute
  is 0 (``none``), the attention cores' forward (``selective``, Korthikanti et al. 2022 §5) or the transformer
  layers' forward (``full``: ``recompute_fwd_s``, Megatron-LM reruns neither the embedding nor the LM head);
  each stage uses the fastest allowed mode that fits its memory. ZeRO traffic
  (:meth:`PlacementSearch.zero_comm_s`): ZeRO-2 reduce-scatters each microbatch's gradients, ZeRO-3 also
  all-gathers each layer's weights in the forward and again in the backward pass; a layer's collectives
  overlap its own compute (prefetch), so a layer adds only ``max(0, comm − compute)``; a pinned hybrid shard
  group ``h`` (``+shard<h>``, FSDP's HSDP) gathers and scatters over ``h`` ranks and all-reduces each gradient
  shard across the ``d·c/h`` groups;
* memory of a stage: ``weights + gradients + optimizer state``, of which ZeRO-``z`` divides the first
  ``z`` of (optimizer state, gradients, weights) by ``d`` (Rajbhandari et al. 2020 §5; by ``h`` when hybrid), plus ZeRO-2/3's
  buffers (:func:`~phaze_env.placement.inputs.zero_buffer_factor` × the stage's largest layer's weights), plus
  activations for the microbatches in flight: the stage ``s``-th from the end holds ``n = min(s, m_r)``
  (1F1B) — with interleaving, ``2(s−1) + (v−1)p + 1`` chunks of ``1/v`` of a microbatch (Megatron-LM's
  warm-up count, capped at ``v·m_r``; for the first stage that is ``p + (p−1)/v`` microbatches, Korthikanti
  et al. 2022 §4.2.3). Activations per microbatch: ``stash`` (none), ``stash − attention core``
  (selective), the input of every layer (full: Megatron's per-layer checkpoints, "2sbh per layer",
  Korthikanti et al. 2022 §5) plus, once, the largest layer's stash while it is rebuilt; sequence
  parallelism divides the non-tensor-parallel part of the stash and the layer inputs by ``t``;
* context parallelism ``c`` (fixed per search, like ``t``: the layers come priced per rank at ``c``) multiplies
  the devices of a replica: a plan uses ``t·c·p·d`` devices, pipeline neighbours are ``t·c·d`` apart, and the
  ``c`` ranks hold the same weights, so gradients are all-reduced (and ZeRO-1 shards) over ``d·c`` ranks
  ``t`` apart (Megatron-Core's tp-cp-dp-pp rank order);
* expert parallelism ``e`` (``Settings.expert_parallel``; fixed per search, the layers come priced at it: their
  expert bytes are the ``1/e`` a device holds, their times include the all-to-alls over the ``e`` ranks ``t·c``
  apart): only ``d`` that ``e`` divides (Megatron-Core's tp-cp-ep-dp-pp order carves the expert-parallel groups
  from the data-parallel ranks). Each expert shard is held by the ``d·c/e`` expert-data-parallel ranks — the
  ``c`` context-parallel ranks (``t`` apart) × the ``d/e`` data-parallel ranks ``t·c·e`` apart — over which its
  gradients are all-reduced (or reduce-scattered), ZeRO shards its state and ZeRO-3 gathers it; a stage's sync
  is its dense bytes' collective + step over ``d·c`` plus its expert bytes' over ``d·c/e``;
* ``T = (m_r + (p−1)/v) · max_k c_k + allreduce(P) + optimizer step(P)``, ``P`` = the largest stage's
  parameter bytes; "allreduce" is the data-parallel collective after the flush: the gradient all-reduce
  (ZeRO-0/1), the updated weights' all-gather (ZeRO-2), none (ZeRO-3); the step updates a ``1/d`` shard
  under ZeRO ≥ 1 (the bubble is ``(p−1)/(v·m_r)`` of the steady state, Narayanan et al. 2021 §2.2.2).
  With interleaving a device's layers are modelled as one contiguous stage (its ``v`` chunks carry the
  same load), and Megatron's rule that ``m_r`` be a multiple of ``p`` is enforced.
* a stack that overlaps its data-parallel collectives with the passes (``Stack.dp_comm_overlap``:
  Megatron-Core's ``--overlap-grad-reduce`` / ``--overlap-param-gather``) pays, for ZeRO-0/1, only what each
  stage's buckets leave exposed after its last backward pass and before its first forward pass
  (:mod:`phaze_env.placement.dp_overlap`; per chunk when interleaved), so a stage's sync is a matrix of its own
  layers and passes, not a function of its parameter bytes: the ε-constraint walk below runs on the largest stage
  sync itself, as at ``e > 1``, and the shape bounds count the exposed part at its floor, the stages' share of the
  collectives less the passes (:meth:`PlacementSearch.overlap_floor_s`; the step is still counted).

Exactness. Recompute modes are ordered by time (none ≤ selective ≤ full) and each only lowers memory,
so the fastest fitting mode is the stage's one cost for each ``n``, and the gradient bytes never depend
on it. For ``v = 1``, counting stages from the end (``s = p − k``) makes ``n = min(s, m_r)`` independent of
``p``: one suffix DP ``f_s(a) = min_b max(c_{min(s, m_r)}(a, b), f_{s−1}(b))`` gives the min-max stage time
for every ``p``; for ``v > 1`` ``n`` depends on ``p`` and the DP is run per ``p``. For fixed ``(d, p, v)`` the
objective ``M·C + A(P)`` (``A`` increasing and affine) is minimised exactly by an ε-constraint walk down
the (C, P) trade-off: the fastest partition, then the fastest one with a strictly smaller ``P``, and so
on, stopping when ``M·C`` plus the smallest possible ``A`` cannot beat the incumbent. At ``e > 1`` the sync
depends on two byte counts per stage, so the walk runs on the largest stage sync ``S`` itself
(``M·C + S``, the same argument with ``A`` the identity), bounded below by the larger of its two parts'
floors.

ZeRO. The stage ``z`` is a degree of the shape ``(d, p, v, z)``: for a fixed shape its traffic is a sum
over each stage's layers (a stage cost like ``Σfwd``, so the min-max DP stays exact), its buffers are
fixed bytes of every recompute mode (the modes keep their order), and ``A`` (all-reduce, all-gather or
nothing, + the step) stays nondecreasing and affine in ``P``, so the walk above stays exact. Without ZeRO
(stage 0), among data-parallel degrees with the same ``m_r`` the smallest dominates (same stage memory; its
all-reduce and pipeline sends span no more levels of the network); with ZeRO ≥ 1 the memory (ZeRO-2/3:
also the stage times) depends on ``d`` and every ``d`` is searched. Left to the DP (``+zero=auto``), every
stage the cluster's training stack runs (``PlanRules.zero_stages``) is searched and weighed by its own costs,
0 included; none of 1, 2, 3 dominates another (less memory is paid with per-microbatch traffic and buffers).
With ``d = 1`` every stage is ZeRO-0 (nothing to shard:
same memory, no traffic, no buffers), searched once. Shapes are visited in order of a lower bound on
``T`` (the DP with the loosest memory rule — the smallest state of any allowed ``(d, z)``, no buffers, no p2p,
no ZeRO traffic — plus the shape's smallest possible ``A``), so most are never solved. With ZeRO a second
bound, shared by all shapes, is checked before a data-parallel degree gets its own DP: the loosest memory's DP
at the shape's microbatches (rounded down to a power of two; fewer microbatches never hold more in flight),
and for ZeRO-2/3 also the average stage: its layers' forward + backward + exposed ZeRO traffic over ``p`` (the
stages cover every layer once), which sees the per-microbatch traffic that the shared DP leaves out.
A finite ``cutoff_s`` (``run``) starts the search with that incumbent time: branch and bound across searches.
Runnable plans (:class:`~phaze_env.plan_spec.PlanRules`). Only the shapes and stages the stack can run are searched:
with ``v > 1``, ``p`` at least the stack's minimum and ``v`` layers or more per stage, and every stage's transformer
layers a multiple of ``v`` (the ``v`` chunks carry the same load); with uniform stages, ``L/p`` layers in each
(``StageTable.layer_count``; the embedding and the head count none). Free interleaving tries every ``v`` that divides
``L``. A rule is a mask on the stage matrices (the DP over the allowed stages is the same DP), so every bound above,
computed without the mask, stays a bound; an interleaved shape's bound also adds ``v`` times the cheapest send of
its network level (every stage of a pipeline sends: ``max_k(x_k + v·y_k) ≥ max_k x_k + v·min_k y_k``).
Every stage time stays nondecreasing in each layer's forward and backward time (``fwd + max(0, g − fwd) =
max(fwd, g)``), so the DP on lower-bound layer latencies still bounds the throughput (``evaluate``'s ILP-free
bound).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np

from phaze_env.placement.collectives import (AffineTable, collective_affine, expert_collective_affine, expert_group,
                                             pipeline_send_s)
from phaze_env.placement.dp_overlap import (OVERLAPPED_COLLECTIVES, bucket_counts, exposed_floor_s, interleaved_exposed_s,
                                            stage_exposed_s)
from phaze_env.placement.inputs import (GRADIENT_FACTOR, LayerArrays, Settings, in_flight_units, microbatches_per_replica,
                                        pipeline_slots, pipeline_time_s, zero_buffer_factor)
from phaze_env.placement.plan import Plan, infeasible
from phaze_env.placement.rules import RunnableShapes
from phaze_env.placement.stages import StageTable
from phaze_env.plan_spec import PlanSpec

_LOWER_BOUND_SLACK = 1.0 - 1e-12  # keeps rounding in prefix sums from pruning an exact tie


class StageMemory:
    """The memory side of :class:`StageCosts` (it does not depend on the network): per recompute mode each
    stage's fixed bytes and bytes per activation unit, which stages fit with one unit, and how many
    units each stage holds per mode (``limits``)."""

    def __init__(self, table: StageTable, settings: Settings, state_factor: float, interleave: int,
                 transient_bytes: np.ndarray, buffer_bytes: np.ndarray, layout: StageMemory | None = None,
                 expert_extra: float = 0.0):
        self.settings = settings
        self.interleave = interleave
        self.modes = settings.plan.recompute_modes
        self._table, self._state_factor, self._transient_full = table, state_factor, transient_bytes
        self.buffer_bytes = buffer_bytes  # ZeRO-2/3's unsharded gradients and gathered weights, in every mode
        self._expert_extra = expert_extra  # an expert byte's state factor minus a dense one's (ZeRO over d·c/e)
        if layout is None:
            fits_once = np.zeros_like(table.valid)
            for mode in self.modes:
                fits_once |= self.full_fixed[mode] + self.full_per_unit[mode] <= settings.hbm_bytes
            fits_once &= table.valid
            width = max(1, int(fits_once.sum(axis=1).max()))
            self._order = np.argsort(~fits_once, axis=1, kind="stable")[:, :width]
            self._listed = np.take_along_axis(fits_once, self._order, axis=1)
            self._flat_order = self._order + np.arange(len(self._order))[:, None] * table.size  # into a raveled K × K
            self.next_index = np.where(self._listed, self._order, table.size)
            self.param_bytes = self.compact(table.param_bytes)
            self.expert_param_bytes = self.compact(table.expert_param_bytes)
            # What does not depend on the state factor, compacted once per layout (same interleave).
            self._transient = self.compact(transient_bytes)
            self._per_unit = np.stack([self.compact(self.full_per_unit[mode]) for mode in self.modes])
        else:  # a looser memory's layout lists a superset of the stages; the others get limit -1 (inf)
            self._order, self._listed, self._flat_order = layout._order, layout._listed, layout._flat_order
            self.next_index, self.param_bytes = layout.next_index, layout.param_bytes
            self.expert_param_bytes = layout.expert_param_bytes
            self._transient, self._per_unit = layout._transient, layout._per_unit
        # compact(P·f) = compact(P)·f and compact(P·f + X) = compact(P)·f + compact(X), entry by entry
        state_compact = self.param_bytes * state_factor
        if expert_extra:  # (never 0·inf on the unlisted entries)
            state_compact = state_compact + self.expert_param_bytes * expert_extra
        if buffer_bytes.any():
            state_compact = state_compact + self.compact(buffer_bytes)
        fixed = {"none": state_compact, "selective": state_compact, "full": state_compact + self._transient}
        # every mode in one elementwise call (``limits[i]``: mode ``modes[i]``)
        limits = _most_in_flight(np.stack([fixed[mode] for mode in self.modes]), self._per_unit, settings.hbm_bytes)
        self.limits = list(limits)
        # ``c_n`` changes with ``n`` only where ``n`` passes some ``limit + 1``: between two such
        # breakpoints it is the same matrix, so it is computed (and keyed) once per interval.
        finite = limits[np.isfinite(limits) & (limits >= 1)]
        self.breakpoints = np.unique(finite + 1).tolist()  # the n > 1 at which some entry of c_n changes
        # Two memories with one layout and equal limits give identical stage costs c_n for every n.
        self.signature = (id(self._order), limits.tobytes())

    @cached_property
    def full_fixed(self) -> dict[str, np.ndarray]:
        """Every stage's fixed bytes per recompute mode: weights, gradients, optimizer state, ZeRO buffers (+ the
        rebuilt layer's stash for full recompute)."""
        state = self.state_bytes + self.buffer_bytes
        return {"none": state, "selective": state, "full": state + self._transient_full}

    @cached_property
    def state_bytes(self) -> np.ndarray:
        """Every stage's weights + gradients + optimizer state (dense bytes sharded over ``d·c``, experts over
        ``d·c/e``)."""
        return self._table.param_bytes * self._state_factor + self._table.expert_param_bytes * self._expert_extra

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
        return np.where(self._listed, matrix.take(self._flat_order), np.inf)


class StageCosts:
    """Stage time matrices ``c_n`` per number ``n`` of activation units in flight (``inf`` = does not fit).

    One instance per variant: the p2p time matrix (the network level the pipeline crosses), the exposed
    ZeRO-2/3 collectives per microbatch (``zero_comm_s``) and a :class:`StageMemory` (the state factor —
    weights + gradients + optimizer state, ZeRO shards — and the interleave ``v``: a unit is ``1/v`` of a
    microbatch). ``full_*`` hold every stage's time, fixed and per-unit memory per recompute mode, so the
    plan report uses the very numbers the DP compared.

    Stored compactly: row ``a`` lists only the stages ``(a, b)`` that fit with one unit in flight (the
    loosest rule), as ``next_index[a, w] = b`` padded with the sentinel ``K`` whose suffix value is always
    ``inf``. For a chain that is a band of stage lengths.
    """

    def __init__(self, table: StageTable, p2p_s: np.ndarray, zero_comm_s: np.ndarray, memory: StageMemory):
        self.memory = memory
        self.settings = memory.settings
        self.interleave = v = memory.interleave
        self.modes = memory.modes
        self.next_index = memory.next_index
        self.param_bytes = memory.param_bytes
        plain = table.fwd_s + table.bwd_s + v * p2p_s + zero_comm_s
        self.p2p_s, self.zero_comm_s = p2p_s, zero_comm_s
        self.full_time = {"none": plain, "selective": plain + table.attention_fwd_s, "full": plain + table.recompute_fwd_s}
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

    def param_floor(self, deepest: int, param_bytes: np.ndarray | None = None) -> np.ndarray:
        """Smallest possible largest-stage parameter bytes for ``p = 1 … deepest`` (stages that fit at ``n = 1``);
        ``param_bytes``: another compact per-stage byte count instead (a part of the parameters)."""
        param_bytes = self.costs.param_bytes if param_bytes is None else param_bytes
        value = np.where(np.isfinite(self.costs.time(1)), param_bytes, np.inf)
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
    zero: int = 0  # ZeRO stage (0 whenever d = 1: there is nothing to shard over)

    @property
    def slots(self) -> float:
        """Steady-state microbatches plus the bubble, in stage times: ``m_r + (p − 1)/v``."""
        return pipeline_slots(self.microbatches, self.stages, self.interleave)

    def units(self, s: int) -> int:
        """Activation units in flight on the stage ``s``-th from the end (:func:`in_flight_units`)."""
        return in_flight_units(s, self.stages, self.microbatches, self.interleave)


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
        self.rules = RunnableShapes(s, table)
        self.max_stages = max_stages if self.rules.plan_rules.pipeline else 1
        self._p2p: dict[object, np.ndarray] = {}
        self._least_p2p: dict[object, float] = {}  # level -> the cheapest send of a stage of a p ≥ 2 pipeline
        self._variants: dict[tuple, tuple[StageCosts, SuffixDP]] = {}
        self._sync_floor: dict[tuple[int, int, int, int], float] = {}  # (p, d, zero, v) -> sync floor of any partition
        self._zero_comm: dict[tuple[int, int], np.ndarray] = {}
        self._layer_zero_comm: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # ZeRO stage -> per (d, layer), totals
        self._layer_work_s = float(layers.fwd_s.sum() + layers.bwd_s.sum())
        self._sync_compact: dict[tuple, np.ndarray] = {}  # (layout, d, zero, p, v) -> stage syncs (e > 1 or overlap)
        self._overlap_syncs: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}  # (d, zero, p, v) -> (exposed, sync)
        self._overlap_layers: dict[tuple[int, int], tuple] = {}  # (d, zero) -> each layer's overlapped collectives
        # Full recompute rebuilds one layer at a time: its largest layer stash is live transiently.
        self.transient_bytes = table.layer_max(self._layer_memory("none"))
        self._largest_layer_params = table.layer_max(layers.param_bytes)
        self._no_time = np.zeros_like(table.fwd_s)
        # The loosest memory rule over every variant: the smallest state (most ZeRO shards), no buffers, no p2p.
        most_replicas = max(1, s.n_devices // self._replica_devices)
        self._loosest_state = min(s.state_factor(s.zero_shards(self._weight_replicas(most_replicas)), zero)
                                  for zero in s.zero_stages)
        self._memory: dict[tuple[float, int, int], StageMemory] = {}
        loosest = StageCosts(table, self._no_time, self._no_time, self.memory(self._loosest_state, 1, 0))
        self.loosest_dp = SuffixDP(table, loosest)
        deepest = min(self.max_stages, most_replicas)
        self.loosest_s = [self.loosest_dp.min_stage_time(1, stages) for stages in range(1, deepest + 1)]
        if s.expert_parallel == 1:  # the smallest largest-stage parameter bytes, bounding the sync
            self.param_floor = self.loosest_dp.param_floor(deepest)
        else:  # the smallest largest-stage dense and expert bytes, bounding each sync part (param_floor is unused)
            memory = loosest.memory
            self.dense_floor = self.loosest_dp.param_floor(deepest, memory.compact(table.param_bytes - table.expert_param_bytes))
            self.expert_floor = self.loosest_dp.param_floor(deepest, memory.expert_param_bytes)

    # --- network and optimizer terms --------------------------------------------------------------
    @property
    def _replica_devices(self) -> int:
        """Devices of one pipeline stage of one replica: the tensor group times the context-parallel ranks."""
        return self.settings.tensor_width * self.settings.context_parallel

    def _weight_replicas(self, data_parallel: int | np.ndarray) -> int | np.ndarray:
        """Ranks holding the same weights: ``d·c`` (context-parallel ranks differ only in their tokens); the
        data-parallel collectives and ZeRO's shards span them."""
        return data_parallel * self.settings.context_parallel

    def _expert_replicas(self, data_parallel: int | np.ndarray) -> int | np.ndarray:
        """Ranks holding the same expert shard: ``d·c/e`` (Megatron-Core's expert data parallelism, DP·CP/EP)."""
        return data_parallel * self.settings.context_parallel // self.settings.expert_parallel

    def _group(self, data_parallel: int, expert: bool) -> dict:
        """Where the weight replicas sit, as :meth:`Network.collective_s` arguments. Rank order tp-cp-ep-dp-pp:
        dense bytes are replicated on the ``d·c`` ranks ``t`` apart; an expert shard on the ``c`` context-parallel
        ranks (``t`` apart) of each of the ``d/e`` data-parallel positions ``t·c·e`` apart that hold it."""
        s = self.settings
        if not expert:
            return {"group": data_parallel * s.context_parallel, "stride": s.tensor_width}
        return expert_group(s.tensor_width, s.context_parallel, s.expert_parallel, data_parallel)

    def _expert_affine(self, kind: str) -> AffineTable:
        """:func:`expert_collective_affine` at this search's ``t``, ``c``, ``e``."""
        s = self.settings
        return expert_collective_affine(s.cluster, kind, s.tensor_width, s.context_parallel, s.expert_parallel)

    def part_allreduce_s(self, part_bytes: float, data_parallel: int, zero: int, expert: bool = False) -> float:
        """The data-parallel collective once per batch, after the pipeline flush, of weights replicated on the
        dense (``d·c``) or expert (``d·c/e``) replicas.

        ZeRO-0/1: the gradient all-reduce (ZeRO-1 runs it as reduce-scatter + all-gather, the same bytes);
        ZeRO-2: the all-gather of the updated weights (its gradients were reduce-scattered per microbatch);
        ZeRO-3: none (the next forward pass gathers the weights it needs), except under hybrid sharding in a stack
        that does not overlap it (``Stack.hybrid_allreduce_overlapped`` False): the all-reduce of the ``1/h``
        gradient shard across the ``d·c/h`` shard groups (``t·h`` apart).
        """
        if part_bytes == 0:
            return 0.0
        hybrid = self._hybrid_after_flush(data_parallel, zero, expert)
        if hybrid is not None:
            groups, shards = hybrid
            return self.settings.cluster.network.collective_s("allreduce", part_bytes / shards * GRADIENT_FACTOR, groups,
                                                      stride=self.settings.tensor_width * shards)
        kind, payload = _BATCH_COLLECTIVE[zero]
        if kind is None:
            return 0.0
        return self.settings.cluster.network.collective_s(kind, part_bytes * payload, **self._group(data_parallel, expert))

    def _hybrid_after_flush(self, data_parallel, zero: int, expert: bool = False):
        """(shard groups, shard group size) when a ZeRO-3 hybrid-sharded stage all-reduces its gradient shard across
        the groups after the flush (a stack that does not overlap it); ``None`` otherwise."""
        s = self.settings
        if zero != 3 or expert or s.plan.shard_group is None or s.cluster.stack.hybrid_allreduce_overlapped:
            return None
        return self._weight_replicas(data_parallel) // s.plan.shard_group, s.plan.shard_group

    def part_sync_s(self, part_bytes: float, data_parallel: int, zero: int, expert: bool = False) -> float:
        """:meth:`part_allreduce_s` + the optimizer step of those bytes (ZeRO shards it over the same replicas)."""
        replicas = (self._expert_replicas(data_parallel) if expert
                    else self.settings.zero_shards(self._weight_replicas(data_parallel)))
        return (self.part_allreduce_s(part_bytes, data_parallel, zero, expert)
                + self.settings.optimizer_step_s(part_bytes, replicas, zero))

    def allreduce_s(self, param_bytes: float, data_parallel: int, zero: int, expert_bytes: float = 0.0) -> float:
        """The collectives after the flush of a stage with ``param_bytes`` weights, ``expert_bytes`` of them routed
        experts (two collectives at ``e > 1``: dense over ``d·c``, experts over ``d·c/e``)."""
        return (self.part_allreduce_s(param_bytes - expert_bytes, data_parallel, zero)
                + self.part_allreduce_s(expert_bytes, data_parallel, zero, expert=True))

    def sync_s(self, param_bytes: float, data_parallel: int, zero: int, expert_bytes: float = 0.0) -> float:
        """What a stage adds once per batch: data-parallel collectives + optimizer step (dense and expert parts)."""
        return (self.part_sync_s(param_bytes - expert_bytes, data_parallel, zero)
                + self.part_sync_s(expert_bytes, data_parallel, zero, expert=True))

    def overlaps(self, zero: int) -> bool:
        """Whether the stack hides this ZeRO stage's once-per-batch collectives under the passes
        (``Stack.dp_comm_overlap``: ZeRO-0's gradient all-reduce, ZeRO-1's reduce-scatter and all-gather;
        :mod:`phaze_env.placement.dp_overlap`). ZeRO-2/3 overlap theirs per microbatch already (:meth:`zero_comm_s`)."""
        return self.settings.cluster.stack.dp_comm_overlap and zero <= 1

    def _walks_on_sync(self, zero: int) -> bool:
        """Whether a stage's once-per-batch sync is its own matrix rather than a function of its parameter bytes
        alone (two byte counts at ``e > 1``; the overlapped collectives depend on the stage's layers and passes)."""
        return self.settings.expert_parallel > 1 or self.overlaps(zero)

    def overlap_collectives_s(self, data_parallel: int, zero: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
        """Every layer's data-parallel collectives under ``Stack.dp_comm_overlap``, each with the pass that hides
        it: ``((collective_s, backward_s),)`` for ZeRO-0's gradient all-reduce, also ``(collective_s, forward_s)`` for
        ZeRO-1's weight all-gather (its gradients reduce-scattered under the backward). Priced as the search prices
        them (:func:`collective_affine` over the ``d·c`` dense replicas ``t`` apart; the expert bytes over the
        ``d·c/e`` expert replicas), one fixed part per bucket (:func:`~phaze_env.placement.dp_overlap.bucket_counts`)."""
        key = (data_parallel, zero)
        if key not in self._overlap_layers:
            layers, s = self.layers, self.settings
            e = s.expert_parallel
            experts = layers.expert_param_bytes if e > 1 else np.zeros_like(layers.param_bytes)
            dense = layers.param_bytes - experts

            def layer_comm_s(kind: str, per_param: float) -> np.ndarray:
                group = np.array([self._weight_replicas(data_parallel) - 1])
                fixed, per_byte = (float(x[0]) for x in collective_affine(s.cluster, kind, s.tensor_width).take(group))
                times = bucket_counts(dense) * fixed + per_byte * dense * per_param
                if experts.any():
                    fixed_e, per_byte_e = (float(x[0]) for x in
                                           self._expert_affine(kind).take(np.array([data_parallel // e - 1])))
                    times = times + bucket_counts(experts) * fixed_e + per_byte_e * experts * per_param
                return times

            self._overlap_layers[key] = tuple((layer_comm_s(kind, per_param), getattr(layers, cover))
                                              for kind, per_param, cover in OVERLAPPED_COLLECTIVES[zero])
        return self._overlap_layers[key]

    def overlap_syncs(self, data_parallel: int, zero: int, stages: int, interleave: int) -> tuple[np.ndarray, np.ndarray]:
        """``(exposed, sync)``: every stage's exposed data-parallel collectives under ``Stack.dp_comm_overlap`` and
        its once-per-batch sync (those + its optimizer step), as ``K × K`` matrices (``inf`` where no stage): each of
        :meth:`overlap_collectives_s` left exposed by the stage's own pass
        (:func:`~phaze_env.placement.dp_overlap.stage_exposed_s`; interleaved:
        :func:`~phaze_env.placement.dp_overlap.interleaved_exposed_s`, which depends on ``p``)."""
        key = (data_parallel, zero, stages if interleave > 1 else 0, interleave)
        if key not in self._overlap_syncs:
            layers, s, table = self.layers, self.settings, self.table
            e = s.expert_parallel
            buckets = bucket_counts(layers.param_bytes - layers.expert_param_bytes) + bucket_counts(layers.expert_param_bytes)
            exposed = np.zeros(table.valid.shape)
            for comm_s, cover_s in self.overlap_collectives_s(data_parallel, zero):
                one = stage_exposed_s(table.member, table.valid, comm_s, cover_s, buckets, table.chain)
                exposed = exposed + interleaved_exposed_s(one, _stage_sums(table, comm_s), _stage_sums(table, cover_s),
                                                          stages, interleave)
            stage_experts = table.expert_param_bytes if e > 1 else np.zeros_like(table.param_bytes)
            step = (s.optimizer_step_s(np.where(table.valid, table.param_bytes - stage_experts, 0.0),
                                       s.zero_shards(self._weight_replicas(data_parallel)), zero)
                    + s.optimizer_step_s(np.where(table.valid, stage_experts, 0.0), self._expert_replicas(data_parallel),
                                         zero))
            exposed = np.where(table.valid, exposed, np.inf)
            self._overlap_syncs[key] = exposed, exposed + step
        return self._overlap_syncs[key]

    def overlap_floor_s(self, data_parallel, zero: int, stages, interleave):
        """A lower bound on the largest stage's exposed collectives of any partition (:meth:`overlap_syncs`), elementwise
        over arrays of ``d``, ``p`` and ``v``: a stage leaves at least ``max(0, C − B)/v`` of each collective exposed
        (:func:`~phaze_env.placement.dp_overlap.exposed_floor_s`), and the stages cover every layer once, so the
        largest is at least their mean, which is at least the floor of the totals over ``p`` (``Σ_j max(0, x_j) ≥
        max(0, Σ_j x_j)``). The totals are :meth:`overlap_collectives_s` summed over the layers, taken from
        the affine tables at once (a bucket's fixed part times the buckets, the per-byte part times the bytes)."""
        layers, s = self.layers, self.settings
        d = np.atleast_1d(np.asarray(data_parallel))
        e = s.expert_parallel
        experts = layers.expert_param_bytes if e > 1 else np.zeros_like(layers.param_bytes)
        dense = layers.param_bytes - experts
        floor = np.zeros(len(d))
        for kind, per_param, cover in OVERLAPPED_COLLECTIVES[zero]:
            fixed, per_byte = collective_affine(s.cluster, kind, s.tensor_width).take(self._weight_replicas(d) - 1)
            total = bucket_counts(dense).sum() * fixed + per_byte * (dense.sum() * per_param)
            if experts.any():
                fixed_e, per_byte_e = self._expert_affine(kind).take(d // e - 1)
                total = total + bucket_counts(experts).sum() * fixed_e + per_byte_e * (experts.sum() * per_param)
            floor += exposed_floor_s(total, float(getattr(layers, cover).sum()), interleave)
        result = floor / np.asarray(stages)
        return float(result[0]) if np.ndim(data_parallel) == 0 else result

    def zero_comm_s(self, data_parallel: int, zero: int) -> np.ndarray:
        """Every stage's exposed ZeRO-2/3 collectives per microbatch (0 for ZeRO-0/1).

        Each microbatch's gradients are reduce-scattered as its backward pass produces them (sharded
        gradients cannot accumulate whole ones: DeepSpeed's ZeRO-2 reduces every micro-step, FSDP without
        ``no_sync``); ZeRO-3 also all-gathers each layer's weights in the forward and again in the backward
        pass (FSDP's ``reshard_after_forward=True``). Assumed overlap (FSDP's forward/backward prefetch and
        DeepSpeed's ``overlap_comm``, on their own stream): a layer's collectives run while the layer
        computes, so each layer adds ``max(0, all-gather − fwd) + max(0, all-gather + reduce-scatter − bwd)``
        (ZeRO-2: ``max(0, reduce-scatter − bwd)``); recomputation is not counted as cover. The collective after
        the flush (:meth:`allreduce_s`) is not overlapped, for any stage: ZeRO-0/1 pay their whole all-reduce there.
        At ``e > 1`` a layer's expert bytes have their own collectives over the ``d·c/e`` expert replicas (one
        after the other with the dense ones).

        Hybrid sharding (``PlanSpec.shard_group`` ``h``, FSDP's ``HYBRID_SHARD``): the all-gathers and the
        reduce-scatter span the ``h`` ranks of a shard group (``t`` apart), and each layer's gradient shard
        (``1/h`` of its gradient) is then all-reduced across the ``d·c/h`` groups (``t·h`` apart) in the same
        post-backward step (``torch.distributed.fsdp`` ``_post_backward_hook``: reduce-scatter, then all-reduce in
        the replicate process group), so the backward covers ``all-gather + reduce-scatter + all-reduce``; a stack
        that runs that all-reduce once after the backward pass instead (``Stack.hybrid_allreduce_overlapped``
        False) pays it whole after the flush (:meth:`part_allreduce_s`); one that overlaps it but does not hide all of
        it (``Stack.hybrid_allreduce_exposure`` ``x`` > 0) adds ``x`` × each layer's all-reduce on top.
        """
        key = (data_parallel, zero)
        if key not in self._zero_comm:
            exposed = self.layer_zero_comm_s(data_parallel, zero)
            self._zero_comm[key] = self._no_time if exposed is None else _stage_sums(self.table, exposed)
        return self._zero_comm[key]

    def layer_zero_comm_s(self, data_parallel: int, zero: int) -> np.ndarray | None:
        """Each layer's exposed ZeRO-2/3 collectives per microbatch (:meth:`zero_comm_s` sums them per stage);
        ``None`` when there are none (ZeRO-0/1, or one weight replica)."""
        if zero < 2 or self._weight_replicas(data_parallel) == 1:
            return None
        return self._layer_zero_comm_table(zero)[0][data_parallel // self.settings.expert_parallel - 1]

    def _layer_zero_comm_table(self, zero: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`layer_zero_comm_s` of ZeRO-2 or 3 for every ``d = e, 2e, … ≤ N/(t·c)`` at once (row ``d/e − 1``),
        and each row's total: one array expression per search instead of one per ``d``."""
        if zero not in self._layer_zero_comm:
            layers, s = self.layers, self.settings
            e = s.expert_parallel
            data_parallel = e * np.arange(1, max(1, s.n_devices // (self._replica_devices * e)) + 1)
            replicas = self._weight_replicas(data_parallel)
            experts = layers.expert_param_bytes if e > 1 else np.zeros_like(layers.param_bytes)

            def collective_s(kind: str, per_param: float) -> np.ndarray:
                dense_table = collective_affine(s.cluster, kind, s.tensor_width)
                fixed, per_byte = (part[:, None] for part in dense_table.take(replicas - 1))
                dense = (layers.param_bytes - experts) * per_param
                times = np.where(dense > 0, fixed + per_byte * dense, 0.0)
                if experts.any():
                    expert_table = self._expert_affine(kind)
                    fixed_e, per_byte_e = (part[:, None] for part in expert_table.take(data_parallel // e - 1))
                    times = times + np.where(experts > 0, fixed_e + per_byte_e * experts * per_param, 0.0)
                return times

            shards = s.plan.shard_group
            always = 0.0
            if shards is None:
                gather = collective_s("allgather", 1.0)
                scatter = collective_s("reducescatter", GRADIENT_FACTOR)
            else:  # hybrid: the shard group's collectives, then the shard's all-reduce across the groups (rows of a
                # d the group does not divide are never read: the DP only visits d with h | d·c)
                groups = np.maximum(replicas // shards, 1)[:, None]
                gather = self._hybrid_s("allgather", layers.param_bytes, shards, 1, 1.0)
                scatter = self._hybrid_s("reducescatter", layers.param_bytes, shards, 1, GRADIENT_FACTOR)
                if s.cluster.stack.hybrid_allreduce_overlapped:  # else once per batch after the flush (part_allreduce_s)
                    allreduce = self._hybrid_s("allreduce", layers.param_bytes / shards, groups, shards,
                                               GRADIENT_FACTOR)
                    scatter = scatter + allreduce
                    always = s.cluster.stack.hybrid_allreduce_exposure * allreduce  # the share the backward does not hide
            if zero == 2:
                exposed = np.maximum(scatter - layers.bwd_s, 0.0)
            else:
                exposed = np.maximum(gather - layers.fwd_s, 0.0) + np.maximum(gather + scatter - layers.bwd_s, 0.0)
            exposed = exposed + always
            exposed = np.broadcast_to(exposed, (len(replicas), len(layers)))
            self._layer_zero_comm[zero] = exposed, exposed.sum(axis=1)
        return self._layer_zero_comm[zero]

    def _average_stage_s(self, shape: _Shape) -> float:
        """A lower bound on the slowest stage of any partition of ``shape`` that the shared loosest DP does not see:
        the stages cover every layer once, and each stage's time is at least its layers' forward + backward + exposed
        ZeRO-2/3 traffic (recompute and p2p only add), so the slowest is at least the average, that total over ``p``."""
        total = self._layer_work_s
        if shape.zero >= 2 and self._weight_replicas(shape.data_parallel) > 1:
            totals = self._layer_zero_comm_table(shape.zero)[1]
            total += float(totals[shape.data_parallel // self.settings.expert_parallel - 1])
        return total / shape.stages

    def _least_p2p_s(self, shape: _Shape) -> float:
        """The cheapest per-microbatch send time of any stage of a ``p ≥ 2`` pipeline of ``shape`` (0 when ``p = 1``):
        every stage but the whole model's, on the network level the shape's pipeline crosses."""
        if shape.stages == 1:
            return 0.0
        level = self._level(shape)
        if level not in self._least_p2p:
            stages = self.table.valid.copy()
            stages[self.table.empty, self.table.full] = False
            self._least_p2p[level] = float(self._p2p_s(level)[stages].min()) if stages.any() else 0.0
        return self._least_p2p[level]

    def _p2p_s(self, level) -> np.ndarray:
        """Every stage's per-microbatch send time across ``level`` (computed once per level)."""
        if level not in self._p2p:
            self._p2p[level] = self.table.p2p_s(lambda payload: self._send_s(level, payload))
        return self._p2p[level]

    def _hybrid_s(self, kind: str, param_bytes: np.ndarray, group: int | np.ndarray, spacing: int,
                  per_param: float) -> np.ndarray:
        """A ``kind`` collective of every layer's ``param_bytes · per_param`` over ``group`` weight replicas
        ``spacing`` replicas apart (``t·spacing`` devices apart), 0 for a layer without weights (``group`` an array
        of shape ``(rows, 1)``: one row per group size)."""
        table = collective_affine(self.settings.cluster, kind, self.settings.tensor_width * spacing)
        fixed, per_byte = table.take(np.asarray(group) - 1)
        return np.where(param_bytes > 0, fixed + per_byte * param_bytes * per_param, 0.0)

    def sync_compact(self, shape: _Shape, memory: StageMemory) -> np.ndarray:
        """:meth:`sync_s` of every stage in ``memory``'s compact layout (``e > 1``; ``inf`` where unlisted), each
        part evaluated once per distinct byte count."""
        key = (id(memory.next_index), shape.data_parallel, shape.zero, shape.stages, shape.interleave)
        if key not in self._sync_compact and self.overlaps(shape.zero):
            self._sync_compact[key] = memory.compact(self.overlap_syncs(shape.data_parallel, shape.zero, shape.stages,
                                                                        shape.interleave)[1])
        if key not in self._sync_compact:
            dense = memory.compact(self.table.param_bytes - self.table.expert_param_bytes)
            listed = np.isfinite(dense)

            def per_stage(values: np.ndarray, expert: bool) -> np.ndarray:
                distinct, inverse = np.unique(values[listed], return_inverse=True)
                return np.array([self.part_sync_s(size, shape.data_parallel, shape.zero, expert)
                                 for size in distinct.tolist()])[inverse.ravel()]

            matrix = np.full(dense.shape, np.inf)
            matrix[listed] = per_stage(dense, False) + per_stage(memory.expert_param_bytes, True)
            self._sync_compact[key] = matrix
        return self._sync_compact[key]

    def _level(self, shape: _Shape):
        return self.settings.cluster.network.p2p_level(self._replica_devices * shape.data_parallel, max(shape.stages - 1, 1))

    def _send_s(self, level, payload_bytes: float) -> float:
        """One pipeline message across ``level`` (:func:`pipeline_send_s`)."""
        return pipeline_send_s(self.settings.cluster, level, payload_bytes, self.settings.tensor_width)

    def memory(self, state_factor: float, interleave: int, zero: int, expert_extra: float = 0.0) -> StageMemory:
        """The memory side of a state factor, interleave, ZeRO stage (its buffers) and expert state extra."""
        key = (state_factor, interleave, zero_buffer_factor(zero), expert_extra)
        if key not in self._memory:
            loosest = (self._loosest_state, interleave, 0.0, 0.0)
            layout = None if key == loosest else self.memory(self._loosest_state, interleave, 0)
            buffer_bytes = self._largest_layer_params * key[2]
            self._memory[key] = StageMemory(self.table, self.settings, state_factor, interleave, self.transient_bytes,
                                            buffer_bytes, layout, expert_extra)
        return self._memory[key]

    def memory_for(self, shape: _Shape) -> StageMemory:
        """The memory side of one shape (ZeRO shards dense bytes over the ``d·c`` weight replicas, expert bytes
        over the ``d·c/e`` expert replicas)."""
        s, replicas = self.settings, self._weight_replicas(shape.data_parallel)
        return self.memory(s.state_factor(s.zero_shards(replicas), shape.zero), shape.interleave, shape.zero,
                           s.expert_state_extra(replicas, shape.zero))

    def variant(self, shape: _Shape) -> tuple[StageCosts, SuffixDP]:
        """Stage costs (and the shared suffix DP) of the network level, ZeRO stage and interleave of ``shape``."""
        level = self._level(shape)
        memory = self.memory_for(shape)
        zero_comm = self.zero_comm_s(shape.data_parallel, shape.zero)
        # data-parallel degrees with equal limits (and no ZeRO-2/3 traffic) share one DP; the traffic arrays live
        # in ``self._zero_comm`` for the whole search, so their identity names them
        key = (level, shape.interleave, memory.signature, id(zero_comm))
        if key not in self._variants:
            costs = StageCosts(self.table, self._p2p_s(level), zero_comm, memory)
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
        if self._replica_devices > s.n_devices:
            return (f"tensor width {s.tensor_width} × context parallel {s.context_parallel} exceeds the "
                    f"{s.n_devices} devices")
        if plan.devices is not None and plan.devices != s.n_devices:
            return f"plan {plan} uses t·c·p·d = {plan.devices} devices, the cluster has {s.n_devices}"
        used = self._replica_devices * (plan.p or 1) * (plan.d or 1)
        if used > s.n_devices:
            return f"plan {plan} needs at least {used} devices, the cluster has {s.n_devices}"
        if plan.p is not None and plan.p > self.max_stages:
            return f"plan {plan} has {plan.p} pipeline stages but the model has only {self.max_stages} layers"
        e = s.expert_parallel
        if plan.d is not None and plan.d % e:
            return f"plan {plan}: expert-parallel degree e={e} does not divide the data-parallel degree d={plan.d}"
        ranks = s.n_devices // (self._replica_devices * (plan.p or 1))
        if e > ranks:
            return (f"expert-parallel degree e={e} exceeds the {ranks} data-parallel ranks of {s.n_devices} devices at "
                    f"tensor width {s.tensor_width}" + (f", context parallel {s.context_parallel}" if s.context_parallel > 1
                                                        else "") + (f" and {plan.p} pipeline stages" if plan.p else ""))
        # Each layer's smallest footprint: the loosest state and one unit of its lightest mode.
        costs = self.loosest_dp.costs
        state = self.layers.param_bytes * self._loosest_state
        lightest = np.min([self._layer_memory(mode) for mode in costs.modes], axis=0) + state
        worst = int(np.argmax(lightest - s.hbm_bytes))
        if lightest[worst] > s.hbm_bytes:
            return (f"layer {worst} alone needs {lightest[worst] / 2**30:.3g} GiB (weights, gradients, "
                    f"{s.cluster.setup.optimizer} state and one microbatch of activations) > {s.hbm_bytes / 2**30:.3g} GiB "
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
        replicas = np.arange(1, s.n_devices // self._replica_devices + 1)
        if plan.d is not None:
            replicas = replicas[replicas == plan.d]
        replicas = replicas[replicas % s.expert_parallel == 0]  # expert-parallel groups are carved from the replicas
        if self.rules.plan_rules.whole_microbatches:  # the stack runs whole microbatches only: d·m divides the batch
            replicas = replicas[s.global_batch % (replicas * s.microbatch) == 0]
        if plan.shard_group is not None:  # hybrid shard groups tile the weight replicas
            replicas = replicas[self._weight_replicas(replicas) % plan.shard_group == 0]
        microbatches = microbatches_per_replica(s.global_batch, replicas, s.microbatch)
        shapes = []
        for zero in s.zero_stages:
            # ZeRO-0's memory does not depend on d: the smallest d of each m_r is enough (module docstring)
            first = np.unique(microbatches, return_index=True)[1] if zero == 0 and plan.d is None else slice(None)
            d_z, m_z = replicas[first], microbatches[first]
            sharded = self._weight_replicas(d_z) > 1
            z = np.where(sharded, zero, 0)  # one weight replica shards nothing: every stage is ZeRO-0 there
            if zero > min(s.zero_stages):
                d_z, m_z, z = d_z[sharded], m_z[sharded], z[sharded]  # d·c = 1 comes once, from the first stage
            shapes.append((d_z, m_z, z))
        replicas, microbatches, zeros = (np.concatenate(parts) for parts in zip(*shapes))
        most_stages = np.minimum(len(self.loosest_s), s.n_devices // (replicas * self._replica_devices))
        d = np.repeat(replicas, most_stages)
        m_r = np.repeat(microbatches, most_stages)
        z = np.repeat(zeros, most_stages)
        p = np.arange(1, len(d) + 1) - np.repeat(np.cumsum(most_stages) - most_stages, most_stages)
        if plan.p is not None:
            keep = p == plan.p
            d, m_r, p, z = d[keep], m_r[keep], p[keep], z[keep]
        shapes = []
        for v in self.rules.interleaves():
            allowed = self.rules.runnable(p, m_r, v)
            shapes.append((d[allowed], p[allowed], m_r[allowed], np.full(int(allowed.sum()), v), z[allowed]))
        d, p, m_r, v, z = (np.concatenate(parts) for parts in zip(*shapes))
        if len(d) == 0:
            return
        loosest = np.array(self.loosest_s)[p - 1]
        if s.expert_parallel == 1:
            sync_floor_s = self._sync_floor_s(d, self.param_floor[p - 1], z)
        else:  # each part of the largest sync is at least its own smallest largest stage's
            sync_floor_s = np.maximum(self._sync_floor_s(d, self.dense_floor[p - 1], z),
                                      self._sync_floor_s(d, self.expert_floor[p - 1], z, expert=True))
        if s.cluster.stack.dp_comm_overlap:  # the largest stage's exposed collectives are at least their share of the total
            for zero in (0, 1):
                rows = z == zero
                if rows.any():
                    sync_floor_s[rows] = np.maximum(sync_floor_s[rows],
                                                    self.overlap_floor_s(d[rows], zero, p[rows], v[rows]))
        if (v > 1).any():  # interleaved shapes send v times per microbatch: their slowest stage pays v sends or more
            sends = np.zeros(len(p))
            for index in np.flatnonzero(v > 1).tolist():
                sends[index] = v[index] * self._least_p2p_s(_Shape(int(d[index]), int(p[index]), int(m_r[index])))
            loosest = loosest + sends
        bound_s = pipeline_time_s(pipeline_slots(m_r, p, v), loosest, sync_floor_s)
        keep = np.flatnonzero(np.isfinite(bound_s))
        d, p, m_r, v, z, bound_s = d[keep], p[keep], m_r[keep], v[keep], z[keep], bound_s[keep] * _LOWER_BOUND_SLACK
        order = np.lexsort((z, v, p, d, bound_s))
        for d_i, p_i, m_i, v_i, z_i, bound_i in zip(*(x[order].tolist() for x in (d, p, m_r, v, z, bound_s))):
            yield _Shape(d_i, p_i, m_i, v_i, z_i), bound_i

    def _sync_floor_s(self, data_parallel: np.ndarray, param_bytes: np.ndarray, zero: np.ndarray,
                      expert: bool = False) -> np.ndarray:
        """``part_sync_s`` elementwise, for bounds (it is affine in the bytes for a fixed group, and 0 for no bytes)."""
        s = self.settings
        finite_bytes = np.where(np.isfinite(param_bytes), param_bytes, 0.0)
        times = np.zeros(len(finite_bytes))
        for stage in np.unique(zero).tolist():
            rows = zero == stage
            d, size = data_parallel[rows], finite_bytes[rows]
            group = self._expert_replicas(d) if expert else self._weight_replicas(d)
            times[rows] = s.optimizer_step_s(size, group if expert else s.zero_shards(group), stage)
            if self.overlaps(stage):  # the exposed collectives may be as little as 0: the step alone bounds the sync
                continue
            hybrid = self._hybrid_after_flush(d, stage, expert)
            if hybrid is not None:  # the gradient shard's all-reduce across the shard groups (part_allreduce_s)
                groups, shards = hybrid
                times[rows] += self._hybrid_s("allreduce", size / shards, np.maximum(groups, 1), shards, GRADIENT_FACTOR)
                continue
            kind, payload = _BATCH_COLLECTIVE[stage]
            if kind is None:
                continue
            if expert:  # a two-dimensional group, indexed by the d/e expert-data-parallel positions
                fixed, per_byte = self._expert_affine(kind).take(d // s.expert_parallel - 1)
            else:
                fixed, per_byte = collective_affine(s.cluster, kind, s.tensor_width).take(group - 1)
            times[rows] += np.where(size > 0, fixed + per_byte * size * payload, 0.0)
        return np.where(param_bytes > 0, times, 0.0)

    def _stage_values(self, shape: _Shape, costs: StageCosts, mask: np.ndarray | None = None):
        """``value_at(s)``: the stage-time matrix of the stage ``s``-th from the end (optionally masked; each masked
        matrix is built once per number of units in flight, and reused by the DP and its trace-back)."""
        if mask is None:
            return lambda s: costs.time(shape.units(s))
        masked: dict[int, np.ndarray] = {}

        def value_at(s: int) -> np.ndarray:
            units = shape.units(s)
            if units not in masked:
                masked[units] = np.where(mask, costs.time(units), np.inf)
            return masked[units]
        return value_at

    def _solve_shape(self, shape: _Shape, best: _Best) -> None:
        """Offer ``best`` the optimal partition of one shape, if it can beat it."""
        rule = self.rules.stage_mask(shape.interleave, shape.stages)
        if shape.zero or shape.interleave > 1 or rule is not None:
            # Every shape's memory is at least the loosest one's (most ZeRO shards; an interleaved stage ``s``-th
            # from the end holds ``min(2(s−1)+(v−1)p+1, v·m_r)/v ≥ min(s, m_r)`` microbatches' worth) and its
            # p2p ≥ 0, and fewer microbatches per replica never put more in flight, so the loosest DP at the
            # largest power of two ≤ m_r bounds the stage time from below. That DP is shared by all shapes (a
            # few capped suffixes), which spares a per-d memory side or a one-off interleaved DP for most.
            m_lo = 1 << (shape.microbatches.bit_length() - 1)
            loose_s = self.loosest_dp.min_stage_time(m_lo, shape.stages)
            # and every stage of a pipeline sends: the slowest stage also pays at least v times the cheapest send
            # (max_k(x_k + v·y_k) ≥ max_k x_k + v·min_k y_k)
            slowest_s = max(loose_s, self._average_stage_s(shape)) + shape.interleave * self._least_p2p_s(shape)
            if math.isinf(loose_s) or self._bound_s(shape, slowest_s) >= best.time_s:
                return
        costs, dp = self.variant(shape)
        if rule is None:
            stage_time_s = dp.min_stage_time(shape.microbatches, shape.stages)
            if math.isinf(stage_time_s) or self._bound_s(shape, stage_time_s) >= best.time_s:
                return
            pairs = dp.partition(shape.microbatches, shape.stages)
        else:
            allowed = self.rules.compact_mask(shape.interleave, shape.stages, costs.memory)
            stage_time_s, pairs = dp.constrained(shape.stages, self._stage_values(shape, costs, allowed))
            if math.isinf(stage_time_s) or self._bound_s(shape, stage_time_s) >= best.time_s:
                return
        best.offer(self._time_per_batch_s(shape, pairs), shape, pairs)
        if self._bound_s(shape, 0.0) > 0.0:  # a stage's parameters cost time once per batch: trade them off
            self._pareto_walk(shape, pairs, best)

    def _bound_s(self, shape: _Shape, stage_time_s: float) -> float:
        """Lower bound on ``T`` of any partition of ``shape`` whose slowest stage takes ``stage_time_s`` or more."""
        key = (shape.stages, shape.data_parallel, shape.zero, shape.interleave)
        if key not in self._sync_floor:
            d, index = shape.data_parallel, shape.stages - 1
            if self.overlaps(shape.zero):
                self._sync_floor[key] = self._overlapped_sync_floor_s(shape)
            elif self.settings.expert_parallel == 1:
                self._sync_floor[key] = self.sync_s(self.param_floor[index], d, shape.zero)
            else:  # each part of the largest stage sync is at least that part's smallest largest stage's
                self._sync_floor[key] = max(self.part_sync_s(self.dense_floor[index], d, shape.zero),
                                            self.part_sync_s(self.expert_floor[index], d, shape.zero, expert=True))
        return pipeline_time_s(shape.slots, stage_time_s, self._sync_floor[key]) * _LOWER_BOUND_SLACK

    def _overlapped_sync_floor_s(self, shape: _Shape) -> float:
        """The largest stage sync of any partition of ``shape`` under ``Stack.dp_comm_overlap``: at least the step
        of the smallest largest stage (each part's, at ``e > 1``) and at least the exposed collectives' floor
        (:meth:`overlap_floor_s`)."""
        d, zero, index = np.array([shape.data_parallel]), np.array([shape.zero]), shape.stages - 1
        if self.settings.expert_parallel == 1:
            step_s = float(self._sync_floor_s(d, np.array([self.param_floor[index]]), zero)[0])
        else:
            step_s = max(float(self._sync_floor_s(d, np.array([self.dense_floor[index]]), zero)[0]),
                         float(self._sync_floor_s(d, np.array([self.expert_floor[index]]), zero, expert=True)[0]))
        return max(step_s, self.overlap_floor_s(shape.data_parallel, shape.zero, shape.stages, shape.interleave))

    def _pareto_walk(self, shape: _Shape, pairs: list[tuple[int, int]], best: _Best) -> None:
        """Exact ``min M·C + A(P)``: repeatedly the fastest partition with a strictly smaller largest stage.

        The parameter bytes ``P_i`` of the partitions found strictly decrease and their stage times
        ``C_i`` do not; while ``P_i`` exceeds the optimum's ``P*``, ``C_{i+1} ≤ C*``, so some partition
        with ``C ≤ C*`` and ``P ≤ P*`` is reached. Stop when ``M·C_i`` + the smallest possible
        all-reduce cannot beat the incumbent, or when ``P_i`` is the smallest possible.
        """
        costs, dp = self.variant(shape)
        if not self._walks_on_sync(shape.zero):  # the sync grows with the largest stage's parameter bytes
            floor, key = self.param_floor[shape.stages - 1], costs.param_bytes
        else:  # two byte counts, or overlapped collectives: walk down the largest stage sync itself
            floor, key = 0.0, self.sync_compact(shape, costs.memory)
        largest = self._largest_sync_key(shape, pairs)
        rule = self.rules.compact_mask(shape.interleave, shape.stages, costs.memory)
        while largest > floor:
            smaller = key < largest
            stage_time_s, pairs = dp.constrained(
                shape.stages, self._stage_values(shape, costs, smaller if rule is None else smaller & rule))
            if math.isinf(stage_time_s) or self._bound_s(shape, stage_time_s) >= best.time_s:
                return
            best.offer(self._time_per_batch_s(shape, pairs), shape, pairs)
            largest = self._largest_sync_key(shape, pairs)

    def _max_params(self, pairs: list[tuple[int, int]]) -> float:
        first, after = np.array(pairs).T
        return float(self.table.param_bytes[first, after].max())

    def _expert_bytes(self, pair: tuple[int, int]) -> float:
        """A stage's routed-expert bytes as the sync sees them: 0 at ``e = 1`` (one collective for all its bytes)."""
        return float(self.table.expert_param_bytes[pair]) if self.settings.expert_parallel > 1 else 0.0

    def _stage_sync_s(self, shape: _Shape, pair: tuple[int, int]) -> float:
        if self.overlaps(shape.zero):
            return float(self.overlap_syncs(shape.data_parallel, shape.zero, shape.stages, shape.interleave)[1][pair])
        return self.sync_s(float(self.table.param_bytes[pair]), shape.data_parallel, shape.zero, self._expert_bytes(pair))

    def _largest_sync_key(self, shape: _Shape, pairs: list[tuple[int, int]]) -> float:
        """What the once-per-batch sync grows with: the largest stage's parameter bytes, or at ``e > 1`` the
        largest stage sync (seconds; also under overlapped collectives)."""
        if not self._walks_on_sync(shape.zero):
            return self._max_params(pairs)
        return max(self._stage_sync_s(shape, pair) for pair in pairs)

    def _batch_sync_s(self, shape: _Shape, pairs: list[tuple[int, int]]) -> float:
        """The once-per-batch sync of a partition: that of its largest stage."""
        if not self._walks_on_sync(shape.zero):
            return self.sync_s(self._max_params(pairs), shape.data_parallel, shape.zero)
        return self._largest_sync_key(shape, pairs)

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
        return pipeline_time_s(shape.slots, slowest_s, self._batch_sync_s(shape, pairs))

    def _reported_allreduce_s(self, shape: _Shape, pair: tuple[int, int]) -> float:
        """A stage's data-parallel collectives once per batch as the plan pays them: :meth:`allreduce_s`, or under
        ``Stack.dp_comm_overlap`` only their exposed part (:meth:`overlap_syncs`)."""
        if self.overlaps(shape.zero):
            return float(self.overlap_syncs(shape.data_parallel, shape.zero, shape.stages, shape.interleave)[0][pair])
        return self.allreduce_s(float(self.table.param_bytes[pair]), shape.data_parallel, shape.zero,
                                self._expert_bytes(pair))

    def _no_fit_reason(self) -> str:
        s, plan = self.settings, self.settings.plan
        if plan.p is not None and plan.d is not None:
            m_r = microbatches_per_replica(s.global_batch, plan.d, s.microbatch)
            v = plan.interleave or 1
            broken = self.rules.broken_rule(plan.p, m_r, v, plan.d)
            if broken:
                return f"plan {plan}: {broken}"
            zeros = [zero if self._weight_replicas(plan.d) > 1 else 0 for zero in s.zero_stages]
            need = min(self._least_memory(_Shape(plan.d, plan.p, m_r, v, zero)) for zero in zeros)
            return (f"plan {plan} does not fit: its best partition needs {need / 2**30:.3g} GiB on the fullest device "
                    f"> {s.hbm_bytes / 2**30:.3g} GiB of HBM (recompute {'/'.join(s.plan.recompute_modes)}, "
                    f"sequence parallel {'on' if s.sequence_parallel else 'off'}, "
                    f"ZeRO stage {'/'.join(map(str, sorted(set(zeros))))})")
        return (f"no pipeline of at most {self.max_stages} stages fits {s.hbm_bytes / 2**30:.3g} GiB of HBM per device "
                f"with {s.n_devices} devices at tensor width {s.tensor_width}, context parallel {s.context_parallel}, "
                f"expert parallel {s.expert_parallel} "
                f"(plan {plan})")

    def _least_memory(self, shape: _Shape) -> float:
        """The smallest worst-device memory of any partition of ``shape`` (its lightest mode per stage)."""
        memory_ = self.memory_for(shape)
        rule = self.rules.stage_mask(shape.interleave, shape.stages)
        valid = self.table.valid if rule is None else rule
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
        d, zero, e = shape.data_parallel, shape.zero, s.expert_parallel
        dense_parts = s.state_parts(s.zero_shards(self._weight_replicas(d)), zero)  # the groups ZeRO shards over
        expert_parts = s.state_parts(self._expert_replicas(d), zero)
        for k, ((a, b), mode) in enumerate(zip(pairs, modes)):
            experts = float(t.expert_param_bytes[a, b])
            dense = float(t.param_bytes[a, b]) - experts
            units = shape.units(shape.stages - k)
            buffers = float(memory_side.buffer_bytes[a, b])
            weights, gradients, optimizer = (dense * x + experts * y for x, y in zip(dense_parts, expert_parts))
            memory.append({
                "weights": weights,
                "gradients": gradients,
                "optimizer": optimizer,
                "zero_buffers": buffers,
                "activations": float(memory_side.full_fixed[mode][a, b] - memory_side.state_bytes[a, b] - buffers
                                     + units * memory_side.full_per_unit[mode][a, b]),
            })
        for item in memory:
            item["total"] = sum(item.values())
        slowest = int(np.argmax(times))
        a, b = pairs[slowest]
        # the stage whose sync sets the batch's: the most parameter bytes, or at e > 1 the largest sync
        synced = pairs[int(np.argmax([self._largest_sync_key(shape, [pair]) for pair in pairs]))]
        largest, experts = float(t.param_bytes[synced]), self._expert_bytes(synced)
        steady = shape.microbatches
        zero_comm_s = float(costs.zero_comm_s[a, b])
        recompute_s = times[slowest] - float(t.fwd_s[a, b] + t.bwd_s[a, b] + shape.interleave * costs.p2p_s[a, b]
                                             + zero_comm_s)
        breakdown = {
            "compute": steady * float(t.fwd_s[a, b] + t.bwd_s[a, b] - t.tp_comm_s[a, b] - t.cp_comm_s[a, b]
                                      - t.ep_comm_s[a, b]),
            "recompute": steady * recompute_s,
            "tp_comm": steady * float(t.tp_comm_s[a, b]),
            "cp_comm": steady * float(t.cp_comm_s[a, b]),
            "ep_comm": steady * float(t.ep_comm_s[a, b]),
            "p2p": steady * shape.interleave * float(costs.p2p_s[a, b]),
            "zero_comm": steady * zero_comm_s,
            "bubble": (shape.stages - 1) / shape.interleave * times[slowest],
            "dp_allreduce": self._reported_allreduce_s(shape, synced),
            "optimizer": (s.optimizer_step_s(largest - experts, s.zero_shards(self._weight_replicas(d)), zero)
                          + s.optimizer_step_s(experts, self._expert_replicas(d), zero)),
        }
        time_per_batch_s = pipeline_time_s(shape.slots, times[slowest], self._batch_sync_s(shape, pairs))
        throughput = s.global_batch / time_per_batch_s
        devices = shape.data_parallel * shape.stages * self._replica_devices
        layers = tuple(t.layers_of(a, b) for a, b in pairs)
        used = [mode for mode in ("none", "selective", "full") if mode in modes]
        spec = PlanSpec(t=s.tensor_width, c=s.context_parallel, p=shape.stages, d=shape.data_parallel,
                        microbatch=s.microbatch,
                        interleave=shape.interleave, recompute="|".join(used),
                        sequence_parallel=s.sequence_parallel and s.tensor_width > 1, zero=zero, e=e,
                        shard_group=s.plan.shard_group if zero == 3 else None)
        return Plan(
            feasible=True,
            notation=str(spec),
            throughput_samples_s=throughput,
            time_per_batch_s=time_per_batch_s,
            tokens_s=None if s.seq_len is None else throughput * s.seq_len,
            mfu=_mfu(s, throughput, devices),
            tensor_width=s.tensor_width,
            data_parallel=shape.data_parallel,
            expert_parallel=e,
            pipeline_stages=shape.stages,
            microbatch=s.microbatch,
            microbatches_per_replica=shape.microbatches,
            interleave=shape.interleave,
            sequence_parallel=spec.sequence_parallel,
            zero=zero,
            context_parallel=s.context_parallel,
            devices_used=devices,
            hbm_bytes=s.hbm_bytes,
            stage_bounds=tuple((min(group), max(group)) for group in layers),
            stage_layers=layers,
            recompute=tuple(mode != "none" for mode in modes),
            recompute_modes=modes,
            stage_times_s=tuple(times),
            stage_p2p_s=tuple(shape.interleave * float(costs.p2p_s[a, b]) for a, b in pairs),
            stage_allreduce_s=tuple(self._reported_allreduce_s(shape, pair) for pair in pairs),
            stage_memory_bytes=tuple(item["total"] for item in memory),
            stage_memory=tuple(memory),
            bubble_fraction=(shape.stages - 1) / shape.interleave / shape.slots,
            memory_bytes=max(memory, key=lambda item: item["total"]),
            time_breakdown_s=breakdown,
            allreduce_s=breakdown["dp_allreduce"],
            p2p_s=breakdown["p2p"],
        )


_BATCH_COLLECTIVE = {0: ("allreduce", GRADIENT_FACTOR), 1: ("allreduce", GRADIENT_FACTOR), 2: ("allgather", 1.0),
                     3: (None, 0.0)}
"""Per ZeRO stage: the data-parallel collective after the flush and its payload per weight byte
(:meth:`PlacementSearch.allreduce_s`)."""


def _stage_sums(table: StageTable, values: np.ndarray) -> np.ndarray:
    """Every stage's sum of a per-layer quantity (0 where no stage)."""
    inside = table.member.astype(float) @ values
    return np.where(table.valid, inside[None, :] - inside[:, None], 0.0)


def _mfu(settings: Settings, throughput_samples_s: float, devices: int) -> float | None:
    """Model FLOPs per second over the peak of the devices the plan uses (``Settings.peak_flops``: the evaluator
    passes the peak of the design's number format, ``Accelerator.format_peak_flops``)."""
    if settings.model_flops_per_sample is None or settings.peak_flops is None:
        return None
    return settings.model_flops_per_sample * throughput_samples_s / (settings.peak_flops * devices)
