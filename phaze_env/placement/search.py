"""Exact search of the best (data, pipeline) degrees, ZeRO stage, stage partition and per-stage recompute for
one tensor width, microbatch size and HBM capacity.

Model (1F1B / PipeDream-Flush, Narayanan et al. 2021; ``p`` stages, ``d`` replicas, ``m_r = ceil(B/(d·m))``
microbatches per replica, ``v`` virtual stages per device):

* stage time per microbatch ``c = Σfwd + Σbwd + recompute + v · p2p sends + ZeRO traffic``, where recompute
  is 0 (``none``), the attention cores' forward (``selective``, Korthikanti et al. 2022 §5) or the transformer
  layers' forward (``full``: ``recompute_fwd_s``, Megatron-LM reruns neither the embedding nor the LM head);
  each stage uses the fastest allowed mode that fits its memory. ZeRO traffic
  (:meth:`~phaze_env.placement.zero_traffic.ZeroTraffic.zero_comm_s`): ZeRO-2 reduce-scatters each microbatch's
  gradients, ZeRO-3 also all-gathers each layer's weights in the forward and again in the backward pass; a layer's
  collectives overlap its own compute (prefetch), so a layer adds only ``max(0, comm − compute)``, the backward's
  compute counting the layer's rerun in the stage's recompute mode; a pinned hybrid shard
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
  same load), and Megatron-LM's rule that ``m_r`` be a multiple of ``p`` is enforced (``m_r ≥ p`` under
  Megatron-Core's microbatch groups, ``PlanRules.microbatch_groups``, whose group ``N ≥ p`` puts
  ``2(s−1) + (v−1)N + 1`` chunks in flight: :func:`~phaze_env.placement.inputs.in_flight_units`).
* a stack running DualPipe (``Stack.pipeline_schedule``, arXiv:2412.19437 §3.2.1) replaces 1F1B's ``(p−1)/v`` by
  ``(p/2 − 1)·κ`` (:func:`~phaze_env.placement.inputs.pipeline_slots`; ``κ = 2/3``,
  :data:`~phaze_env.placement.inputs.DUALPIPE_BUBBLE_SHARE`, a constant: the DP stays monotone in the layer times);
  device ``k`` holds stage ``k`` and its mirror ``p − 1 − k`` (:func:`~phaze_env.placement.inputs.parameter_copies`),
  each stage with its own ``min(s, m_r)`` microbatches in flight (:func:`~phaze_env.placement.inputs.in_flight_units`,
  from deepseek-ai/DualPipe's schedule), so a device's memory is the pair's sum, and it runs half the microbatches
  through each stage, so its pace is the pair's mean time: such a shape runs the pair DP
  (:mod:`~phaze_env.placement.pair_dp`: exact min-max over pairs from both ends); a device syncs and steps its two
  stages' bytes together once per batch (:class:`~phaze_env.placement.pair_dp.PairSync`) and the batch waits for the
  longest, so the walk below runs on that sync itself, the pair DP keeping only the pairs below the cap, and every
  sync floor of one stage's bytes stays a floor (the device holding a stage syncs its bytes and more); only ``p`` even with
  ``m_r ≥ 2p`` even and ``v = 1`` are searched. The bounds below hold with the average stage (the layers' work over
  ``p``) in place of the loosest DP's slowest stage, which does not bound a pair's mean;
* a stack that overlaps its data-parallel collectives with the passes (``Stack.dp_comm_overlap``:
  Megatron-Core's ``--overlap-grad-reduce`` / ``--overlap-param-gather``) pays, for ZeRO-0/1, only what each
  stage's buckets leave exposed after its last backward pass and before its first forward pass
  (:mod:`phaze_env.placement.dp_overlap`; per chunk when interleaved), so a stage's sync is a matrix of its own
  layers and passes, not a function of its parameter bytes: the ε-constraint walk below runs on the largest stage
  sync itself, as at ``e > 1``, and the shape bounds count the exposed part at its floor, the stages' share of the
  collectives less the passes (:meth:`~phaze_env.placement.prices.Prices.overlap_floor_s`; the step is still counted).

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

import math

import numpy as np

from phaze_env.placement.candidate_costs import CandidateCosts
from phaze_env.placement.candidates import Shape, candidate_degrees
from phaze_env.placement.inputs import LayerArrays, Settings, pipeline_slots, pipeline_time_s
from phaze_env.placement.plan import Plan
from phaze_env.placement.prices import Prices
from phaze_env.placement.record import infeasible_plan, no_fit_reason, obviously_infeasible, plan_record
from phaze_env.placement.rules import RunnableShapes
from phaze_env.placement.stage_costs import StageCosts
from phaze_env.placement.stages import StageTable
from phaze_env.placement.suffix_dp import SuffixDP
from phaze_env.placement.zero_traffic import ZeroTraffic

_LOWER_BOUND_SLACK = 1.0 - 1e-12  # keeps rounding in prefix sums from pruning an exact tie
_CANDIDATE_CHUNK = 64  # candidate shapes turned into Python values at a time


class _Best:
    """The incumbent: smallest time per batch seen, with its shape and partition.

    Among plans of equal time the one whose shape comes first in the candidates' canonical order (``rank``: by the
    loosest bound, then ``d``, ``p``, ``v``, ``z``), and within a shape the first offered, is kept, whatever order the
    shapes are solved in: every bound the search prunes with lies strictly below the time of any plan it bounds, so a
    plan tying the incumbent is always offered."""

    def __init__(self, cutoff_s: float = math.inf):
        self.time_s = cutoff_s
        self.rank: tuple = ()  # before every shape's: a plan tying the cutoff does not beat it
        self.visiting: tuple = ()  # rank of the shape being solved
        self.shape: Shape | None = None
        self.pairs: list[tuple[int, int]] = []

    def offer(self, time_s: float, shape: Shape, pairs: list[tuple[int, int]]) -> None:
        if time_s < self.time_s or (time_s == self.time_s and self.visiting < self.rank):
            self.time_s, self.shape, self.pairs, self.rank = time_s, shape, pairs, self.visiting


class PlacementSearch:
    """Best plan for one tensor width, microbatch size and HBM capacity (see module docstring): which shapes
    (:mod:`~phaze_env.placement.candidates`) are solved, in the order of their lower bounds, and the argmin over
    their partitions. What a shape costs is :class:`~phaze_env.placement.candidate_costs.CandidateCosts`' (with the
    network and optimizer terms of :class:`~phaze_env.placement.prices.Prices` and the ZeRO-2/3 traffic of
    :class:`~phaze_env.placement.zero_traffic.ZeroTraffic`); the plan found, or why none was, is written by
    :mod:`phaze_env.placement.record`."""

    def __init__(self, layers: LayerArrays, table: StageTable, settings: Settings, max_stages: int):
        self.layers = layers
        self.table = table
        self.settings = settings
        s = settings
        self.rules = RunnableShapes(s, table)
        self.max_stages = max_stages if self.rules.plan_rules.pipeline else 1
        self.prices = Prices(layers, table, settings)
        self.zero_traffic = ZeroTraffic(layers, table, settings)
        self.costing = CandidateCosts(layers, table, settings, self.prices, self.zero_traffic)
        self._sync_floor: dict[tuple[int, int, int, int], float] = {}  # (p, d, zero, v) -> sync floor of any partition
        self._zero_loosest: dict[int, SuffixDP] = {}  # ZeRO stage -> _zero_loosest_dp
        self._layer_work_s = float(layers.fwd_s.sum() + layers.bwd_s.sum())
        # The loosest DP, bounding every variant's: the loosest memory (CandidateCosts.loosest_state), no ZeRO
        # traffic, no p2p.
        none = self.zero_traffic.none
        loosest = StageCosts(table, none, none, self.costing.memory(self.costing.loosest_state, 1, 0))
        self.loosest_dp = SuffixDP(table, loosest)
        deepest = min(self.max_stages, self.costing.most_replicas)
        self.loosest_s = [self.loosest_dp.min_stage_time(1, stages) for stages in range(1, deepest + 1)]
        if s.expert_parallel == 1:  # the smallest largest-stage parameter bytes, bounding the sync
            self.param_floor = self.loosest_dp.param_floor(deepest)
        else:  # the smallest largest-stage dense and expert bytes, bounding each sync part (param_floor is unused)
            memory = loosest.memory
            self.dense_floor = self.loosest_dp.param_floor(deepest, memory.compact(table.param_bytes - table.expert_param_bytes))
            self.expert_floor = self.loosest_dp.param_floor(deepest, memory.expert_param_bytes)

    def run(self, cutoff_s: float = math.inf) -> Plan | None:
        """The optimal plan, or (with a finite ``cutoff_s``) ``None`` if no plan takes less than ``cutoff_s``
        per batch: the search then prunes against the cutoff from the start (branch and bound across
        searches, as ``evaluate`` does over tensor widths, microbatches and HBM sizes)."""
        reason = obviously_infeasible(self.settings, self.layers, self.max_stages, self.costing.loosest_state)
        if reason:
            return infeasible_plan(self.settings, reason)
        best = _Best(cutoff_s)
        for shape, bound_s, floor_s, rank in self._candidates():
            if bound_s >= best.time_s:
                break
            if floor_s >= best.time_s:  # this shape's own floor (the bounds are sorted, the floors are not)
                continue
            best.visiting = rank
            self._solve_shape(shape, best)
        if best.shape is None:
            if math.isfinite(cutoff_s):
                return None
            return infeasible_plan(self.settings, no_fit_reason(self.costing, self.rules, self.max_stages))
        return plan_record(self.costing, best.shape, best.pairs)

    def _candidates(self):
        """``(shape, lower bound on T, floor, rank)`` for every candidate shape (:func:`candidate_degrees`), by
        increasing bound; ``floor``: at least that bound, the shape's own (not sorted: under
        ``Settings.unbounded_overlap_cover`` it adds the pace's floor, :meth:`Prices.overlap_pace_floor_s`); ``rank``: the
        shape's key in the canonical order that breaks ties between equal plans (:class:`_Best`).

        Stage-time bound: the DP with one unit in flight everywhere, the smallest optimizer state and no
        p2p (``self.loosest_s``); all-reduce bound: the smallest largest-stage parameter bytes of any
        ``p``-stage partition (``self.param_floor``). Under DualPipe a device's pace is the mean of two stages', which
        the slowest stage does not bound: its stage-time bound is the average, the layers' work over ``p``. The
        canonical order is by that bound, then ``d``, ``p``, ``v``, ``z``; the shapes are visited by a tighter bound,
        which also counts every stage's share of the layers' work and ZeRO-2/3 traffic (:meth:`_average_stage_s`), so
        that shapes whose traffic dwarfs their compute come after the ones that can win and are pruned.
        """
        s = self.settings
        d, p, m_r, v, z = candidate_degrees(s, self.rules, len(self.loosest_s))
        if len(d) == 0:
            return
        loosest = np.array(self.loosest_s)[p - 1]
        if s.cluster.stack.pipeline_schedule == "dualpipe":  # a device's pace is a pair's mean: at least the average
            loosest = np.where((p > 1) & np.isfinite(loosest), self._layer_work_s / p, loosest)
        if s.expert_parallel == 1:
            sync_floor_s = self.prices.sync_floor_s(d, self.param_floor[p - 1], z)
        else:  # each part of the largest sync is at least its own smallest largest stage's
            sync_floor_s = np.maximum(self.prices.sync_floor_s(d, self.dense_floor[p - 1], z),
                                      self.prices.sync_floor_s(d, self.expert_floor[p - 1], z, expert=True))
        if s.cluster.stack.dp_comm_overlap:  # the largest stage's exposed collectives are at least their share of the total
            for zero in (0, 1):
                rows = z == zero
                if rows.any():
                    sync_floor_s[rows] = np.maximum(sync_floor_s[rows],
                                                    self.prices.overlap_floor_s(d[rows], zero, p[rows], v[rows]))
                    # what _bound_s would price shape by shape (_overlapped_sync_floor_s), kept from here at once
                    for key, floor in zip(zip(p[rows].tolist(), d[rows].tolist(), z[rows].tolist(), v[rows].tolist()),
                                          sync_floor_s[rows].tolist()):
                        self._sync_floor.setdefault(key, floor)
        sends = np.zeros(len(p))
        if (v > 1).any():  # interleaved shapes send v times per microbatch: their slowest stage pays v sends or more
            interleaved = np.flatnonzero(v > 1)
            pairs, inverse = np.unique(np.stack((d[interleaved], p[interleaved])), axis=1, return_inverse=True)
            least_s = np.array([self.prices.least_send_s(d_i, p_i) for d_i, p_i in pairs.T.tolist()])
            sends[interleaved] = v[interleaved] * least_s[inverse.ravel()]
            loosest = loosest + sends
        slots = pipeline_slots(m_r, p, v, s.cluster.stack.pipeline_schedule)
        bound_s = pipeline_time_s(slots, loosest, sync_floor_s)
        keep = np.flatnonzero(np.isfinite(bound_s))
        d, p, m_r, v, z, bound_s = d[keep], p[keep], m_r[keep], v[keep], z[keep], bound_s[keep] * _LOWER_BOUND_SLACK
        slowest_s = np.maximum(loosest[keep], self._average_stages_s(d, p, z) + sends[keep])
        slots = slots[keep]
        tight_s = pipeline_time_s(slots, slowest_s, sync_floor_s[keep]) * _LOWER_BOUND_SLACK
        # on lower-bound layer times under the overlap, the pace's floor too (CandidateCosts.batch_time_s), priced
        # only for the shapes visited, a chunk at a time
        order = np.argsort(tight_s, kind="stable")
        columns = (d, p, m_r, v, z, tight_s, bound_s)
        for start in range(0, len(order), _CANDIDATE_CHUNK):  # most searches stop after a few chunks
            chunk = order[start:start + _CANDIDATE_CHUNK]
            floor_s = tight_s[chunk].copy()
            for zero in np.unique(z[chunk]).tolist():
                paced = (z[chunk] == zero) & self.prices.paces_overlap(zero, p[chunk])
                if paced.any():
                    rows = chunk[paced]
                    floor_s[paced] = np.maximum(floor_s[paced], self.prices.overlap_pace_floor_s(
                        d[rows], zero, p[rows], v[rows], slots[rows], slowest_s[rows]) * _LOWER_BOUND_SLACK)
            for (d_i, p_i, m_i, v_i, z_i, tight_i, bound_i), floor_i in zip(
                    zip(*(x[chunk].tolist() for x in columns)), floor_s.tolist()):
                yield (Shape(d_i, p_i, m_i, v_i, z_i, s.cluster.stack.pipeline_schedule), tight_i, floor_i,
                       (bound_i, d_i, p_i, v_i, z_i))

    def _stage_values(self, shape: Shape, costs: StageCosts, mask: np.ndarray | None = None):
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

    def _solve_shape(self, shape: Shape, best: _Best) -> None:
        """Offer ``best`` the optimal partition of one shape, if it can beat it."""
        rule = self.rules.stage_mask(shape.interleave, shape.stages)
        paired = self.costing.paired(shape)  # DualPipe: a device's memory is two stages' (its own DP)
        if shape.zero or shape.interleave > 1 or rule is not None or paired is not None:
            # Every shape's memory is at least the loosest one's (most ZeRO shards; an interleaved stage ``s``-th
            # from the end holds ``min(2(s−1)+(v−1)N+1, v·m_r)/v ≥ min(s, m_r)`` microbatches' worth, N ≥ p) and its
            # p2p ≥ 0 (a DualPipe device holds its stage's state and min(s, m_r) microbatches, and its mirror's
            # besides), and fewer microbatches per replica never put more in flight, so the loosest DP at the
            # largest power of two ≤ m_r bounds the stage time from below. That DP is shared by all shapes (a
            # few capped suffixes), which spares a per-d memory side or a one-off interleaved DP for most.
            m_lo = 1 << (shape.microbatches.bit_length() - 1)
            # (a DualPipe device's time is a mean of two stages', which no slowest stage bounds: the average does)
            loose_s = self.loosest_dp.min_stage_time(m_lo, shape.stages) if paired is None else 0.0
            # and every stage of a pipeline sends: the slowest stage also pays at least v times the cheapest send
            # (max_k(x_k + v·y_k) ≥ max_k x_k + v·min_k y_k)
            average_s = self._average_stage_s(shape)
            slowest_s = max(loose_s, average_s) + shape.interleave * self.prices.least_p2p_s(shape)
            if math.isinf(loose_s) or self._prunes(shape, slowest_s, best):
                return
            if self._zero_prunes(shape, m_lo, average_s, best):
                return
        costs, dp = self.costing.variant(shape)
        if paired is not None:
            stage_time_s, pairs = paired.solve(rule)
            if math.isinf(stage_time_s) or self._prunes(shape, stage_time_s, best):
                return
        elif rule is None:
            stage_time_s = dp.min_stage_time(shape.microbatches, shape.stages)
            if math.isinf(stage_time_s) or self._prunes(shape, stage_time_s, best):
                return
            pairs = dp.partition(shape.microbatches, shape.stages)
        else:
            allowed = self.rules.compact_mask(shape.interleave, shape.stages, costs.memory)
            stage_time_s, pairs = dp.constrained(shape.stages, self._stage_values(shape, costs, allowed))
            if math.isinf(stage_time_s) or self._prunes(shape, stage_time_s, best):
                return
        best.offer(self.costing.time_per_batch_s(shape, pairs), shape, pairs)
        # a stage's sync costs time once per batch: trade it off against the stage time, unless the fastest partition
        # pays none (then it is optimal: every sync is >= 0). Not on the sync's floor: under Stack.dp_comm_overlap
        # that floor can be 0 where the partition's exposed collectives are not
        if self.costing.batch_sync_s(shape, pairs) > 0.0:
            self._pareto_walk(shape, pairs, best)

    def _zero_prunes(self, shape: Shape, m_lo: int, average_s: float, best: _Best) -> bool:
        """Whether the loosest DP of the shape's own ZeRO stage prunes it, checked before a ZeRO shape gets a variant of
        its own (a memory side, stage costs and a DP). That DP (:meth:`_zero_loosest_dp`) bounds every shape of
        the stage as the shared loosest DP bounds every shape, more tightly: its state is the stage's own at the most
        replicas (ZeRO-1 and -2 keep far more state than ZeRO-3), with the stage's buffers."""
        if (not shape.zero or not math.isfinite(best.time_s) or self.costing.paired(shape) is not None
                or self.costing.has_variant(shape)):
            return False
        zero_s = self._zero_loosest_dp(shape.zero).min_stage_time(m_lo, shape.stages)
        slowest_s = max(zero_s, average_s) + shape.interleave * self.prices.least_p2p_s(shape)
        return math.isinf(zero_s) or self._prunes(shape, slowest_s, best)

    def _zero_loosest_dp(self, zero: int) -> SuffixDP:
        """The DP of ZeRO stage ``zero``'s loosest memory (its state at the most replicas, its buffers, ``v = 1``,
        no expert extra), without p2p or ZeRO traffic: a lower bound on the stage time of every shape at that stage
        (the argument of :meth:`_solve_shape` for the shared loosest DP, whose state is the smallest of any stage)."""
        if zero not in self._zero_loosest:
            s = self.settings
            state = s.state_factor(s.zero_shards(s.weight_replicas(self.costing.most_replicas)), zero)
            none = self.zero_traffic.none
            self._zero_loosest[zero] = SuffixDP(self.table, StageCosts(self.table, none, none,
                                                                      self.costing.memory(state, 1, zero)))
        return self._zero_loosest[zero]

    def _prunes(self, shape: Shape, stage_time_s: float, best: _Best) -> bool:
        """Whether no partition of ``shape`` whose slowest stage takes ``stage_time_s`` or more can beat ``best``
        (:meth:`_bound_s` ≥ its time). The sync floor only adds (``slots·C + S ≥ slots·C`` for ``S ≥ 0``, also in
        floating point), so the pipeline alone decides first, without pricing the shape's sync floor."""
        if pipeline_time_s(shape.slots, stage_time_s, 0.0) * _LOWER_BOUND_SLACK >= best.time_s:
            return True
        return self._bound_s(shape, stage_time_s, best.time_s) >= best.time_s

    def _bound_s(self, shape: Shape, stage_time_s: float, enough_s: float = math.inf) -> float:
        """Lower bound on ``T`` of any partition of ``shape`` whose slowest stage takes ``stage_time_s`` or more (the
        pace's floor left out when the rest reaches ``enough_s`` already)."""
        key = (shape.stages, shape.data_parallel, shape.zero, shape.interleave)
        if key not in self._sync_floor:
            d, index = shape.data_parallel, shape.stages - 1
            if self.prices.overlaps(shape.zero):
                self._sync_floor[key] = self._overlapped_sync_floor_s(shape)
            elif self.settings.expert_parallel == 1:
                self._sync_floor[key] = self.prices.sync_s(self.param_floor[index], d, shape.zero)
            else:  # each part of the largest stage sync is at least that part's smallest largest stage's
                self._sync_floor[key] = max(self.prices.part_sync_s(self.dense_floor[index], d, shape.zero),
                                            self.prices.part_sync_s(self.expert_floor[index], d, shape.zero, expert=True))
        bound_s = pipeline_time_s(shape.slots, stage_time_s, self._sync_floor[key])
        if bound_s * _LOWER_BOUND_SLACK < enough_s and self.prices.paces_overlap(shape.zero, shape.stages):
            # CandidateCosts.batch_time_s's floor, at least
            bound_s = max(bound_s, self.prices.overlap_pace_floor_s(shape.data_parallel, shape.zero, shape.stages,
                                                                    shape.interleave, shape.slots, stage_time_s))
        return bound_s * _LOWER_BOUND_SLACK

    def _overlapped_sync_floor_s(self, shape: Shape) -> float:
        """The largest stage sync of any partition of ``shape`` under ``Stack.dp_comm_overlap``: at least the step
        of the smallest largest stage (each part's, at ``e > 1``) and at least the exposed collectives' floor
        (:meth:`Prices.overlap_floor_s`)."""
        d, zero, index = np.array([shape.data_parallel]), np.array([shape.zero]), shape.stages - 1
        if self.settings.expert_parallel == 1:
            step_s = float(self.prices.sync_floor_s(d, np.array([self.param_floor[index]]), zero)[0])
        else:
            step_s = max(float(self.prices.sync_floor_s(d, np.array([self.dense_floor[index]]), zero)[0]),
                         float(self.prices.sync_floor_s(d, np.array([self.expert_floor[index]]), zero, expert=True)[0]))
        return max(step_s, self.prices.overlap_floor_s(shape.data_parallel, shape.zero, shape.stages, shape.interleave))

    def _pareto_walk(self, shape: Shape, pairs: list[tuple[int, int]], best: _Best) -> None:
        """Exact ``min M·C + A(P)``: repeatedly the fastest partition with a strictly smaller largest stage.

        The parameter bytes ``P_i`` of the partitions found strictly decrease and their stage times
        ``C_i`` do not; while ``P_i`` exceeds the optimum's ``P*``, ``C_{i+1} ≤ C*``, so some partition
        with ``C ≤ C*`` and ``P ≤ P*`` is reached. Stop when ``M·C_i`` + the smallest possible
        all-reduce cannot beat the incumbent, or when ``P_i`` is the smallest possible. The same argument holds with
        ``P`` the largest stage sync (``e > 1``, overlapped collectives) or, under DualPipe, the longest device sync
        (:class:`~phaze_env.placement.pair_dp.PairSync`, which the pair DP caps pair by pair).
        """
        costs, dp = self.costing.variant(shape)
        paired = self.costing.paired(shape)
        if paired is not None:  # DualPipe: walk down the longest device sync, a pair's (the pair DP caps it)
            floor, key = 0.0, None
        elif not self.prices.walks_on_sync(shape.zero):  # the sync grows with the largest stage's parameter bytes
            floor, key = self.param_floor[shape.stages - 1], costs.param_bytes
        else:  # two byte counts, or overlapped collectives: walk down the largest stage sync itself
            floor, key = 0.0, self.prices.sync_compact(shape, costs.memory)
        largest = self.costing.largest_sync_key(shape, pairs)
        rule = self.rules.compact_mask(shape.interleave, shape.stages, costs.memory)
        while largest > floor:
            if paired is not None:
                stage_time_s, pairs = paired.solve(None if rule is None else costs.layout.dense(rule, False),
                                                   (self.costing.pair_sync(shape), largest))
            else:
                smaller = key < largest
                allowed = smaller if rule is None else smaller & rule
                stage_time_s, pairs = dp.constrained(shape.stages, self._stage_values(shape, costs, allowed))
            if math.isinf(stage_time_s) or self._prunes(shape, stage_time_s, best):
                return
            best.offer(self.costing.time_per_batch_s(shape, pairs), shape, pairs)
            largest = self.costing.largest_sync_key(shape, pairs)

    def _average_stages_s(self, d: np.ndarray, p: np.ndarray, z: np.ndarray) -> np.ndarray:
        """:meth:`_average_stage_s` of the shapes ``(d, p, z)``, elementwise."""
        total = np.full(len(d), self._layer_work_s)
        for zero in (2, 3):
            rows = np.flatnonzero((z == zero) & (self.settings.weight_replicas(d) > 1))
            if len(rows):
                totals = self.zero_traffic.layer_zero_comm_table(zero)[1]
                total[rows] += totals[self.settings.expert_index(d[rows])]
        return total / p

    def _average_stage_s(self, shape: Shape) -> float:
        """A lower bound on the slowest stage of any partition of ``shape`` that the shared loosest DP does not see:
        the stages cover every layer once, and each stage's time is at least its layers' forward + backward + exposed
        ZeRO-2/3 traffic (recompute and p2p only add), so the slowest is at least the average, that total over ``p``."""
        total = self._layer_work_s
        if shape.zero >= 2 and self.settings.weight_replicas(shape.data_parallel) > 1:
            totals = self.zero_traffic.layer_zero_comm_table(shape.zero)[1]
            total += float(totals[self.settings.expert_index(shape.data_parallel)])
        return total / shape.stages

