"""What a candidate plan pays beyond its layers' passes once per batch and per message, on the cluster's network and
HBM (:class:`Prices`): the data-parallel collectives and the optimizer step after the flush (a stage's sync), or under
a stack that overlaps them with the passes only what they leave exposed (:mod:`phaze_env.placement.dp_overlap`), and
the pipeline sends, each exactly as the search adds them and, elementwise over candidates, their floors for its
bounds. The per-microbatch ZeRO-2/3 collectives are :class:`~phaze_env.placement.zero_traffic.ZeroTraffic`'s. The
collectives are priced through :mod:`phaze_env.placement.collectives`; the model is stated in
:mod:`phaze_env.placement.search`'s docstring."""

from __future__ import annotations

import math

import numpy as np

from phaze_env.placement.candidates import Shape
from phaze_env.placement.collectives import (AffineTable, collective_affine, expert_collective_affine, expert_group,
                                             hybrid_collective_s, pipeline_send_s)
from phaze_env.placement.dp_overlap import (OVERLAPPED_COLLECTIVES, bucket_bytes, bucket_counts, dense_and_expert_bytes,
                                            interleaved_exposed_s, interleaved_floor_s, pace_floor_curve, pace_floor_s,
                                            single_bucket, stage_collectives_s, stage_exposed_s)
from phaze_env.placement.inputs import GRADIENT_FACTOR, LayerArrays, Settings
from phaze_env.placement.stage_costs import StageMemory
from phaze_env.placement.stages import StageTable

_BATCH_COLLECTIVE = {0: ("allreduce", GRADIENT_FACTOR), 1: ("allreduce", GRADIENT_FACTOR), 2: ("allgather", 1.0),
                     3: (None, 0.0)}
"""Per ZeRO stage: the data-parallel collective after the flush and its payload per weight byte
(:meth:`Prices.allreduce_s`)."""


class Prices:
    """The network and optimizer terms of one placement search (its layers, stages and settings), each computed
    once and kept for the whole search."""

    def __init__(self, layers: LayerArrays, table: StageTable, settings: Settings):
        self.layers = layers
        self.table = table
        self.settings = settings
        self._p2p: dict[object, np.ndarray] = {}
        self._least_p2p: dict[object, float] = {}  # level -> the cheapest send of a stage of a p ≥ 2 pipeline
        self._levels: dict[tuple[int, int], object] = {}  # (d, p − 1 or 1) -> the level the pipeline crosses
        self._sync_compact: dict[tuple, np.ndarray] = {}  # (layout, d, zero, p, v) -> stage syncs (e > 1 or overlap)
        self._overlap_syncs: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}  # (d, zero, p, v) -> (exposed, sync)
        self._overlap_layers: dict[tuple[int, int], tuple] = {}  # (d, zero) -> each layer's overlapped collectives
        self._overlap_chunks: dict[tuple[int, int, int], list] = {}  # (d, zero, v) -> _overlap_tables
        self._pace_curves: dict[tuple[int, int, int, int], tuple] = {}  # (zero, d, p, v) -> (xs, values, row)

    def _group(self, data_parallel: int, expert: bool) -> dict:
        """Where the weight replicas sit, as :meth:`Network.collective_s` arguments. Rank order tp-cp-ep-dp-pp:
        dense bytes are replicated on the ``d·c`` ranks ``t`` apart; an expert shard on the ``c`` context-parallel
        ranks (``t`` apart) of each of the ``d/e`` data-parallel positions ``t·c·e`` apart that hold it."""
        s = self.settings
        if not expert:
            return {"group": data_parallel * s.context_parallel, "stride": s.tensor_width}
        return expert_group(s.tensor_width, s.context_parallel, s.expert_parallel, data_parallel, s.folded_experts)

    def _expert_affine(self, kind: str) -> AffineTable:
        """:func:`expert_collective_affine` at this search's ``t``, ``c``, ``e`` (indexed by ``Settings.expert_index``)."""
        s = self.settings
        return expert_collective_affine(s.cluster, kind, s.tensor_width, s.context_parallel, s.expert_parallel,
                                        s.folded_experts)

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
        return s.weight_replicas(data_parallel) // s.plan.shard_group, s.plan.shard_group

    def part_sync_s(self, part_bytes: float, data_parallel: int, zero: int, expert: bool = False) -> float:
        """:meth:`part_allreduce_s` + the optimizer step of those bytes (ZeRO shards it over the same replicas)."""
        replicas = (self.settings.expert_replicas(data_parallel) if expert
                    else self.settings.zero_shards(self.settings.weight_replicas(data_parallel)))
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
        :mod:`phaze_env.placement.dp_overlap`). ZeRO-2/3 overlap theirs per microbatch already
        (:meth:`~phaze_env.placement.zero_traffic.ZeroTraffic.zero_comm_s`)."""
        return self.settings.cluster.stack.dp_comm_overlap and zero <= 1

    def paces_overlap(self, zero: int, stages):
        """Whether a shape of this ZeRO stage and ``stages`` (elementwise over an array of them) takes
        :meth:`overlap_pace_floor_s` beside its pipeline: the DP on lower-bound layer times
        (``Settings.unbounded_overlap_cover``) where the stack overlaps the stage's collectives (:meth:`overlaps`), not
        on a DualPipe device holding two stages (its pace is their mean, :mod:`~phaze_env.placement.pair_dp`). The one
        rule of the plan record's time (:meth:`CandidateCosts.batch_time_s`) and of the search's bounds on it."""
        s = self.settings
        on = s.unbounded_overlap_cover and self.overlaps(zero)
        single = np.asarray(stages) == 1 if s.cluster.stack.pipeline_schedule == "dualpipe" \
            else np.ones(np.shape(stages), dtype=bool)  # parameter_copies(schedule, p) == 1
        return bool(on and single) if np.ndim(stages) == 0 else single & on

    def walks_on_sync(self, zero: int) -> bool:
        """Whether a stage's once-per-batch sync is its own matrix rather than a function of its parameter bytes
        alone (two byte counts at ``e > 1``; the overlapped collectives depend on the stage's layers and passes)."""
        return self.settings.expert_parallel > 1 or self.overlaps(zero)

    def overlap_collectives_s(self, data_parallel: int, zero: int) -> tuple[tuple[tuple, np.ndarray], ...]:
        """The data-parallel collectives under ``Stack.dp_comm_overlap``, each with the pass that hides it:
        ``((streams, backward_s),)`` for ZeRO-0's gradient all-reduce, also ``(streams, forward_s)`` for ZeRO-1's
        weight all-gather (its gradients reduce-scattered under the backward). ``streams``: the gradient buffers as
        :data:`~phaze_env.placement.dp_overlap.Stream` — every layer's weight bytes over the ``d·c`` replicas ``t``
        apart at ``e = 1``; at ``e > 1`` the dense bytes so and the expert shard over the ``d·c/e`` expert replicas, a
        buffer of its own — priced as the search prices them (:func:`collective_affine`: a bucket's fixed part and
        its bytes' part)."""
        key = (data_parallel, zero)
        if key not in self._overlap_layers:
            layers, s = self.layers, self.settings
            e = s.expert_parallel
            dense, experts = dense_and_expert_bytes(e, layers.param_bytes, layers.expert_param_bytes)

            def streams(kind: str, per_param: float) -> tuple:
                group = np.array([s.weight_replicas(data_parallel) - 1])
                fixed, per_byte = (float(x[0]) for x in collective_affine(s.cluster, kind, s.tensor_width).take(group))
                result = [(dense, fixed, per_byte * per_param)]
                if experts.any():
                    fixed_e, per_byte_e = (float(x[0]) for x in
                                           self._expert_affine(kind).take(np.array([s.expert_index(data_parallel)])))
                    result.append((experts, fixed_e, per_byte_e * per_param))
                return tuple(result)

            def cover_s(name: str) -> np.ndarray:  # Settings.unbounded_overlap_cover: every pass unboundedly long
                return np.full(len(layers), np.inf) if s.unbounded_overlap_cover else getattr(layers, name)

            self._overlap_layers[key] = tuple((streams(kind, per_param), cover_s(cover))
                                              for kind, per_param, cover in OVERLAPPED_COLLECTIVES[zero])
        return self._overlap_layers[key]

    def overlap_syncs(self, data_parallel: int, zero: int, stages: int, interleave: int) -> tuple[np.ndarray, np.ndarray]:
        """``(exposed, sync)``: every stage's exposed data-parallel collectives under ``Stack.dp_comm_overlap`` and
        its once-per-batch sync (those + its optimizer step), as ``K × K`` matrices (``inf`` where no stage): each of
        :meth:`overlap_collectives_s` left exposed by the stage's own pass, its buffers cut into buckets across its
        layers (:func:`~phaze_env.placement.dp_overlap.stage_exposed_s`); interleaved, each of the ``v`` equal chunks
        a buffer of its own (one chunk is the stage at ``1/v`` of every byte and pass, so ``v`` times its exposure is
        the stage's at ``v``-fold buckets and fixed parts) and the chunks' backlog
        (:func:`~phaze_env.placement.dp_overlap.interleaved_exposed_s`, which depends on ``p``)."""
        key = (data_parallel, zero, stages if interleave > 1 else 0, interleave)
        if key not in self._overlap_syncs:
            s, table = self.settings, self.table
            e = s.expert_parallel
            exposed = np.zeros(table.valid.shape)
            for one, collectives, covers in self._overlap_tables(data_parallel, zero, interleave):
                exposed = exposed + interleaved_exposed_s(one, collectives, covers, stages, interleave)
            stage_experts = table.expert_param_bytes if e > 1 else np.zeros_like(table.param_bytes)
            step = (s.optimizer_step_s(np.where(table.valid, table.param_bytes - stage_experts, 0.0),
                                       s.zero_shards(s.weight_replicas(data_parallel)), zero)
                    + s.optimizer_step_s(np.where(table.valid, stage_experts, 0.0), s.expert_replicas(data_parallel),
                                         zero))
            exposed = np.where(table.valid, exposed, np.inf)
            self._overlap_syncs[key] = exposed, exposed + step
        return self._overlap_syncs[key]

    def _overlap_tables(self, data_parallel: int, zero: int, interleave: int) -> list[tuple[np.ndarray, ...]]:
        """Per overlapped collective, ``(v·a chunk's exposure, the stage's collectives, its pass)`` of every stage at
        interleave ``v`` (none of them depends on ``p``: computed once for every depth)."""
        key = (data_parallel, zero, interleave)
        if key not in self._overlap_chunks:
            table, v = self.table, interleave
            tables = []
            bucket = v * float(bucket_bytes(self.settings.weight_replicas(data_parallel)))  # a chunk's, v times
            for streams, cover_s in self.overlap_collectives_s(data_parallel, zero):
                chunked = [(x, v * fixed, per_byte) for x, fixed, per_byte in streams]
                covers = (np.full(table.valid.shape, np.inf) if np.isposinf(cover_s).all()  # (inf · 0 is nan)
                          else table.layer_sum(cover_s))
                tables.append((stage_exposed_s(table, chunked, cover_s, bucket), stage_collectives_s(table, chunked, bucket),
                               covers))
            self._overlap_chunks[key] = tables
        return self._overlap_chunks[key]

    def _overlap_totals(self, d: np.ndarray, zero: int, stages, interleave) -> tuple[
            list[tuple[np.ndarray, str, np.ndarray, np.ndarray]], np.ndarray]:
        """Per overlapped collective at each ``(d, p, v)`` of the arrays, ``(C, cover, one, dense)``: at least the
        stages' collectives of that kind in all — a bucket's fixed part times the buckets of each buffer, plus the
        per-byte part times the bytes, from the affine tables at once —, the pass that hides it, one fixed part and the
        dense bytes' part; and whether one bucket holds the whole model's dense weights and every layer has some
        (:func:`~phaze_env.placement.dp_overlap.single_bucket`). The buckets: a stage's ``v`` chunks hold
        ``v·⌈x_s/(v·B)⌉`` of ``B`` (:func:`~phaze_env.placement.dp_overlap.bucket_bytes` at the ``d·c`` replicas) for its
        ``x_s > 0`` bytes (:meth:`_overlap_tables`), so in all at least ``v·⌈X/(v·B)⌉`` (``Σ⌈x_s⌉ ≥ ⌈Σx_s⌉``) and at
        least ``v`` per stage holding dense bytes, of which there are at least ``p`` less the weightless layers (a
        stage without any holds only weightless layers, one or more) and one; the expert shard's at least
        ``⌈X_e/B⌉``."""
        layers, s = self.layers, self.settings
        e = s.expert_parallel
        dense, experts = dense_and_expert_bytes(e, layers.param_bytes, layers.expert_param_bytes)
        bucket = bucket_bytes(s.weight_replicas(d))
        p, v = np.asarray(stages), np.asarray(interleave)
        holding = np.maximum(p - int((dense <= 0).sum()), 1) if dense.sum() > 0 else 0  # stages with dense bytes
        dense_buckets = v * np.maximum(bucket_counts(dense.sum(), v * bucket), holding)
        totals = []
        for kind, per_param, cover in OVERLAPPED_COLLECTIVES[zero]:
            fixed, per_byte = collective_affine(s.cluster, kind, s.tensor_width).take(s.weight_replicas(d) - 1)
            dense_part = per_byte * (dense.sum() * per_param)
            total = dense_buckets * fixed + dense_part
            if experts.any():
                fixed_e, per_byte_e = self._expert_affine(kind).take(s.expert_index(d))
                total = total + bucket_counts(experts.sum(), bucket) * fixed_e + per_byte_e * (experts.sum() * per_param)
            totals.append((total, cover, fixed, dense_part))
        single = single_bucket(np.ones(len(dense)), e, layers.param_bytes, layers.expert_param_bytes, bucket)
        return totals, single

    def overlap_floor_s(self, data_parallel, zero: int, stages, interleave):
        """A lower bound on the largest stage's exposed collectives of any partition (:meth:`overlap_syncs`), elementwise
        over arrays of ``d``, ``p`` and ``v``: a stage leaves at least
        :func:`~phaze_env.placement.dp_overlap.interleaved_floor_s` of each collective exposed (``max(0, C − B)/v`` and
        the interleaved chunks' backlog ``max(0, (v − 1)·(C − p·B)/v)``), jointly convex in the stage's totals ``C`` and
        ``B``, and the stages cover every layer once, so the largest is at least their mean, which is at least its value
        at the mean totals ``C/p`` and ``B/p`` (Jensen; ``C`` from :meth:`_overlap_totals`; under
        ``Settings.unbounded_overlap_cover`` ``B`` is unbounded: :meth:`overlap_pace_floor_s` bounds it by the slowest
        stage). Where one bucket holds the whole model's dense weights and every layer has some
        (:func:`~phaze_env.placement.dp_overlap.single_bucket`), at least one fixed part and ``1/(p·v)`` of the dense
        bytes' part of each collective, exposed in full."""
        layers, s = self.layers, self.settings
        d = np.atleast_1d(np.asarray(data_parallel))
        p, v = np.asarray(stages), np.asarray(interleave)
        totals, single = self._overlap_totals(d, zero, p, v)
        floor, whole = np.zeros(len(d)), np.zeros(len(d))
        for total, cover, fixed, dense_part in totals:
            passes = math.inf if s.unbounded_overlap_cover else float(getattr(layers, cover).sum())
            floor += interleaved_floor_s(total / p, passes / p, p, v)
            whole = whole + fixed + dense_part / (p * v)
        # one bucket holds every stage's dense weights, and every layer has some: all of them exposed
        # (phaze_env.placement.dp_overlap.single_bucket; at least the largest stage's last chunk's)
        result = np.maximum(floor, np.where(single, whole, 0.0))
        return float(result[0]) if np.ndim(data_parallel) == 0 else result

    def overlap_pace_floor_s(self, data_parallel, zero: int, stages, interleave, slots, pace_s):
        """Under ``Settings.unbounded_overlap_cover`` (the DP on lower-bound layer times), a lower bound on the time per
        batch of any partition of the shapes ``(d, zero, p, v)`` whose slowest stage takes at least ``pace_s`` per
        microbatch on those layer times (so at least that on the real ones), elementwise:
        :func:`~phaze_env.placement.dp_overlap.pace_floor_s` with each collective's stages' mean ``C/p``
        (:meth:`_overlap_totals`), the stages' mean forward and backward passes on the lower-bound layer times, and
        ``v`` times the cheapest send of a ``p ≥ 2`` pipeline (:meth:`least_send_s`) that every stage's time holds
        besides. This is what the floor of the exposed collectives at the unbounded cover misses: a stage hides them
        under no more than its own passes, which the slowest stage's time bounds, and the interleaved chunks' backlog
        grows as they shrink. Only where :meth:`paces_overlap` (on real layer times the DP prices the exposure itself)."""
        if not self.settings.unbounded_overlap_cover:
            raise ValueError("the pace's floor bounds the DP on lower-bound layer times (Settings.unbounded_overlap_cover)")
        d = np.atleast_1d(np.asarray(data_parallel))
        p, v = np.broadcast_to(stages, d.shape), np.broadcast_to(interleave, d.shape)
        result = pace_floor_s(slots, pace_s, self._pace_curves_of(d, zero, p, v))
        return float(result[0]) if np.ndim(data_parallel) == 0 else result

    def _pace_curves_of(self, d: np.ndarray, zero: int, p: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:func:`~phaze_env.placement.dp_overlap.pace_floor_curve` of the shapes (:meth:`overlap_pace_floor_s`): many
        at once, kept by shape (a shape is bounded at many paces: a single one is then looked up)."""
        if len(d) == 1 and (zero, int(d[0]), int(p[0]), int(v[0])) in self._pace_curves:
            xs, values, row = self._pace_curves[(zero, int(d[0]), int(p[0]), int(v[0]))]
            return xs[row:row + 1], values[row:row + 1]
        totals, _ = self._overlap_totals(d, zero, p, v)
        under = {"bwd_s": [], "fwd_s": []}
        for total, cover, _, _ in totals:
            under[cover].append(total / p)
        pairs, inverse = np.unique(np.stack((d, p)), axis=1, return_inverse=True)
        least = np.array([self.least_send_s(d_i, p_i) for d_i, p_i in pairs.T.tolist()])
        xs, values = pace_floor_curve(v * least[inverse.ravel()], under["bwd_s"], under["fwd_s"],
                                      float(self.layers.bwd_s.sum()) / p, float(self.layers.fwd_s.sum()) / p, p, v)
        for row, key in enumerate(zip(d.tolist(), p.tolist(), v.tolist())):
            self._pace_curves.setdefault((zero, *key), (xs, values, row))
        return xs, values

    def least_p2p_s(self, shape: Shape) -> float:
        """The cheapest per-microbatch send time of any stage of a ``p ≥ 2`` pipeline of ``shape`` (0 when ``p = 1``):
        every stage but the whole model's, on the network level the shape's pipeline crosses."""
        return self.least_send_s(shape.data_parallel, shape.stages)

    def least_send_s(self, data_parallel: int, stages: int) -> float:
        """:meth:`least_p2p_s` of the shapes with ``d`` replicas and ``p`` stages (the send depends on no other
        degree)."""
        if stages == 1:
            return 0.0
        level = self._level(data_parallel, stages)
        if level not in self._least_p2p:
            stages = self.table.valid.copy()
            stages[self.table.empty, self.table.full] = False
            self._least_p2p[level] = float(self.p2p_s(level)[stages].min()) if stages.any() else 0.0
        return self._least_p2p[level]

    def p2p_s(self, level) -> np.ndarray:
        """Every stage's per-microbatch send time across ``level`` (computed once per level)."""
        if level not in self._p2p:
            self._p2p[level] = self.table.p2p_s(lambda payload: self._send_s(level, payload))
        return self._p2p[level]

    def sync_compact(self, shape: Shape, memory: StageMemory) -> np.ndarray:
        """:meth:`sync_s` of every stage in ``memory``'s compact layout (``e > 1``, or overlapped collectives), each
        part evaluated once per distinct byte count."""
        key = (id(memory.next_index), shape.data_parallel, shape.zero, shape.stages, shape.interleave)
        if key not in self._sync_compact and self.overlaps(shape.zero):
            self._sync_compact[key] = memory.compact(self.overlap_syncs(shape.data_parallel, shape.zero, shape.stages,
                                                                        shape.interleave)[1])
        if key not in self._sync_compact:
            dense = memory.compact(self.table.param_bytes - self.table.expert_param_bytes)

            def per_stage(values: np.ndarray, expert: bool) -> np.ndarray:
                distinct, inverse = np.unique(values, return_inverse=True)
                return np.array([self.part_sync_s(size, shape.data_parallel, shape.zero, expert)
                                 for size in distinct.tolist()])[inverse.ravel()]

            self._sync_compact[key] = per_stage(dense, False) + per_stage(memory.expert_param_bytes, True)
        return self._sync_compact[key]

    def level(self, shape: Shape):
        """The network level the pipeline of ``shape`` crosses (neighbours ``t·c·d`` devices apart)."""
        return self._level(shape.data_parallel, shape.stages)

    def _level(self, data_parallel: int, stages: int):
        """:meth:`level` of ``d`` replicas and ``p`` stages, looked up once per ``(d, max(p − 1, 1))``."""
        key = (data_parallel, max(stages - 1, 1))
        level = self._levels.get(key)
        if level is None:
            level = self._levels[key] = self.settings.cluster.network.p2p_level(
                self.settings.replica_devices * data_parallel, key[1])
        return level

    def _send_s(self, level, payload_bytes: float) -> float:
        """One pipeline message across ``level`` (:func:`pipeline_send_s`)."""
        return pipeline_send_s(self.settings.cluster, level, payload_bytes, self.settings.tensor_width)

    def sync_floor_s(self, data_parallel: np.ndarray, param_bytes: np.ndarray, zero: np.ndarray,
                     expert: bool = False) -> np.ndarray:
        """``part_sync_s`` elementwise, for bounds (it is affine in the bytes for a fixed group, and 0 for no bytes)."""
        s = self.settings
        finite_bytes = np.where(np.isfinite(param_bytes), param_bytes, 0.0)
        times = np.zeros(len(finite_bytes))
        for stage in np.unique(zero).tolist():
            rows = zero == stage
            d, size = data_parallel[rows], finite_bytes[rows]
            group = s.expert_replicas(d) if expert else s.weight_replicas(d)
            times[rows] = s.optimizer_step_s(size, group if expert else s.zero_shards(group), stage)
            if self.overlaps(stage):  # the exposed collectives may be as little as 0: the step alone bounds the sync
                continue
            hybrid = self._hybrid_after_flush(d, stage, expert)
            if hybrid is not None:  # the gradient shard's all-reduce across the shard groups (part_allreduce_s)
                groups, shards = hybrid
                times[rows] += hybrid_collective_s(s.cluster, "allreduce", s.tensor_width, size / shards,
                                                   np.maximum(groups, 1), shards, GRADIENT_FACTOR)
                continue
            kind, payload = _BATCH_COLLECTIVE[stage]
            if kind is None:
                continue
            if expert:  # a two-dimensional group, indexed by the d/e expert-data-parallel positions
                fixed, per_byte = self._expert_affine(kind).take(s.expert_index(d))
            else:
                fixed, per_byte = collective_affine(s.cluster, kind, s.tensor_width).take(group - 1)
            times[rows] += np.where(size > 0, fixed + per_byte * size * payload, 0.0)
        return np.where(param_bytes > 0, times, 0.0)
