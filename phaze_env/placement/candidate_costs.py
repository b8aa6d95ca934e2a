"""The costing of one candidate plan: the stage costs of its variant (:meth:`CandidateCosts.variant`: the memory of
its ZeRO stage, interleave and replicas, the sends of its network level, its ZeRO-2/3 traffic, with the suffix DP shared
by every shape of that variant) and, for one partition into stages, each stage's recompute mode and time, the
once-per-batch sync and the time per batch (:meth:`CandidateCosts.time_per_batch_s`), the numbers the search
compares and the plan record (:mod:`phaze_env.placement.record`) reports."""

from __future__ import annotations

import numpy as np

from phaze_env.placement.candidates import Shape
from phaze_env.placement.inputs import (LayerArrays, Settings, dualpipe_mirror, parameter_copies, pipeline_time_s,
                                       zero_buffer_factor)
from phaze_env.placement.pair_dp import PairDP, PairSync
from phaze_env.placement.prices import Prices
from phaze_env.placement.stage_costs import StageCosts, StageMemory, layer_stash_bytes
from phaze_env.placement.stages import StageTable
from phaze_env.placement.suffix_dp import SuffixDP
from phaze_env.placement.zero_traffic import ZeroTraffic


class CandidateCosts:
    """Stage costs per variant and the time of a partition, for one placement search (each variant built once)."""

    def __init__(self, layers: LayerArrays, table: StageTable, settings: Settings, prices: Prices,
                 zero_traffic: ZeroTraffic):
        self.table = table
        self.settings = settings
        self.prices = prices
        self.zero_traffic = zero_traffic
        s = settings
        self._variants: dict[tuple, tuple[StageCosts, SuffixDP]] = {}
        self._variant_of: dict[tuple, tuple[StageCosts, SuffixDP]] = {}  # (level, d, zero, v) -> variant
        self._memory: dict[tuple[float, int, int], StageMemory] = {}
        self._buffers: dict[float, np.ndarray] = {}  # ZeRO buffer factor -> every stage's buffer bytes
        self._memory_of: dict[tuple[int, int, int], StageMemory] = {}  # (d, zero, v) -> memory_for
        self._pair_dps: dict[tuple[int, int, int], PairDP] = {}  # (variant, p, min(m_r, p)) -> a DualPipe shape's DP
        self._pair_syncs: dict[tuple[int, int], PairSync] = {}  # (d, zero) -> a DualPipe device's sync
        # Full recompute rebuilds one layer at a time: its largest layer stash is live transiently.
        self.transient_bytes = table.layer_max(layer_stash_bytes(settings, layers, "none"))
        self._largest_layer_params = table.layer_max(layers.param_bytes)
        # The loosest memory rule over every variant: the smallest state (most ZeRO shards), no buffers, no p2p.
        self.most_replicas = max(1, s.n_devices // s.replica_devices)
        self.loosest_state = s.least_state_factor(s.weight_replicas(self.most_replicas))

    def memory(self, state_factor: float, interleave: int, zero: int, expert_extra: float = 0.0) -> StageMemory:
        """The memory side of a state factor, interleave, ZeRO stage (its buffers) and expert state extra."""
        key = (state_factor, interleave, zero_buffer_factor(zero), expert_extra)
        if key not in self._memory:
            loosest = (self.loosest_state, interleave, 0.0, 0.0)
            layout = None if key == loosest else self.memory(self.loosest_state, interleave, 0)
            if key[2] not in self._buffers:  # one array per ZeRO buffer factor (the memories take it at their layout)
                self._buffers[key[2]] = self._largest_layer_params * key[2]
            buffer_bytes = self._buffers[key[2]]
            self._memory[key] = StageMemory(self.table, self.settings, state_factor, interleave, self.transient_bytes,
                                            buffer_bytes, layout, expert_extra)
        return self._memory[key]

    def memory_for(self, shape: Shape) -> StageMemory:
        """The memory side of one shape (ZeRO shards dense bytes over the ``d·c`` weight replicas, expert bytes
        over the ``d·c/e`` expert replicas): one stage's own bytes (a DualPipe device holds two stages, summed by
        :mod:`~phaze_env.placement.pair_dp`)."""
        key = (shape.data_parallel, shape.zero, shape.interleave)
        memory = self._memory_of.get(key)
        if memory is None:
            s = self.settings
            replicas = s.weight_replicas(shape.data_parallel)
            memory = self._memory_of[key] = self.memory(s.state_factor(s.zero_shards(replicas), shape.zero),
                                                        shape.interleave, shape.zero,
                                                        s.expert_state_extra(replicas, shape.zero))
        return memory

    def has_variant(self, shape: Shape) -> bool:
        """Whether :meth:`variant` of ``shape`` is built already (a new one costs a memory side, stage costs and a DP)."""
        return (self.prices.level(shape), shape.data_parallel, shape.zero, shape.interleave) in self._variant_of

    def variant(self, shape: Shape) -> tuple[StageCosts, SuffixDP]:
        """Stage costs (and the shared suffix DP) of the network level, ZeRO stage and interleave of ``shape``."""
        level = self.prices.level(shape)
        degrees = (level, shape.data_parallel, shape.zero, shape.interleave)
        found = self._variant_of.get(degrees)
        if found is None:
            memory = self.memory_for(shape)
            zero_comm = self.zero_traffic.zero_comm_s(shape.data_parallel, shape.zero)
            # data-parallel degrees with equal limits (and no ZeRO-2/3 traffic) share one DP; the traffic arrays live
            # in ``self.zero_traffic`` for the whole search, so their identity names them
            key = (level, shape.interleave, memory.signature, id(zero_comm))
            if key not in self._variants:
                costs = StageCosts(self.table, self.prices.p2p_s(level), zero_comm, memory)
                self._variants[key] = (costs, SuffixDP(self.table, costs))
            found = self._variant_of[degrees] = self._variants[key]
        return found

    def paired(self, shape: Shape) -> PairDP | None:
        """The pair DP of a DualPipe shape that pipelines (a device holds two stages: :mod:`~phaze_env.placement.pair_dp`),
        ``None`` for any other shape (its devices hold one stage each)."""
        if parameter_copies(shape.schedule, shape.stages) == 1:
            return None
        costs, _ = self.variant(shape)
        key = (id(costs), shape.stages, min(shape.microbatches, shape.stages))  # the variant is kept: its id stays
        if key not in self._pair_dps:
            self._pair_dps[key] = PairDP(self.table, costs, shape)
        return self._pair_dps[key]

    def pair_sync(self, shape: Shape) -> PairSync:
        """A DualPipe device's once-per-batch sync at the shape's ``d`` and ZeRO stage, from the two stages it holds
        (:class:`PairSync`: the dense bytes' :meth:`Prices.part_sync_s` and, at ``e > 1``, the routed experts')."""
        key = (shape.data_parallel, shape.zero)
        if key not in self._pair_syncs:
            t, d, zero = self.table, shape.data_parallel, shape.zero
            experts = np.where(t.valid, t.expert_param_bytes if self.settings.expert_parallel > 1 else 0.0, 0.0)
            self._pair_syncs[key] = PairSync.affine([
                (np.where(t.valid, t.param_bytes, 0.0) - experts, lambda size: self.prices.part_sync_s(size, d, zero)),
                (experts, lambda size: self.prices.part_sync_s(size, d, zero, expert=True))])
        return self._pair_syncs[key]

    def held(self, shape: Shape, pairs: list[tuple[int, int]], k: int) -> list[tuple[int, int]]:
        """The stages device ``k`` holds: stage ``k``, and under DualPipe its mirror (:func:`parameter_copies`)."""
        if parameter_copies(shape.schedule, shape.stages) == 1:
            return [pairs[k]]
        return [pairs[k], pairs[dualpipe_mirror(k, shape.stages)]]

    def _max_params(self, pairs: list[tuple[int, int]]) -> float:
        first, after = np.array(pairs).T
        return float(self.table.param_bytes[first, after].max())

    def expert_bytes(self, pair: tuple[int, int]) -> float:
        """A stage's routed-expert bytes as the sync sees them: 0 at ``e = 1`` (one collective for all its bytes)."""
        return float(self.table.expert_param_bytes[pair]) if self.settings.expert_parallel > 1 else 0.0

    def _stage_sync_s(self, shape: Shape, pair: tuple[int, int]) -> float:
        prices = self.prices
        if prices.overlaps(shape.zero):
            return float(prices.overlap_syncs(shape.data_parallel, shape.zero, shape.stages, shape.interleave)[1][pair])
        return prices.sync_s(float(self.table.param_bytes[pair]), shape.data_parallel, shape.zero,
                             self.expert_bytes(pair))

    def largest_sync_key(self, shape: Shape, pairs: list[tuple[int, int]]) -> float:
        """What the once-per-batch sync grows with: the largest stage's parameter bytes, or at ``e > 1`` the
        largest stage sync (seconds; also under overlapped collectives); under DualPipe the longest device sync
        (seconds, :meth:`PairSync.largest`: a device syncs its two stages)."""
        if self.paired(shape) is not None:
            return self.pair_sync(shape).largest(pairs)[0]
        if not self.prices.walks_on_sync(shape.zero):
            return self._max_params(pairs)
        return max(self._stage_sync_s(shape, pair) for pair in pairs)

    def batch_sync_s(self, shape: Shape, pairs: list[tuple[int, int]]) -> float:
        """The once-per-batch sync of a partition: that of its largest stage (under DualPipe, its longest device's)."""
        if self.paired(shape) is None and not self.prices.walks_on_sync(shape.zero):
            return self.prices.sync_s(self._max_params(pairs), shape.data_parallel, shape.zero)
        return self.largest_sync_key(shape, pairs)

    def stages(self, shape: Shape, pairs: list[tuple[int, int]]) -> list[tuple[str | None, float]]:
        """(recompute mode, time per microbatch) of every stage of a partition (under DualPipe, per device pair:
        :meth:`PairDP.stage_modes`)."""
        paired = self.paired(shape)
        if paired is not None:
            return paired.stage_modes(pairs)
        costs, _ = self.variant(shape)
        modes = self.memory_for(shape).stage_modes(pairs, [shape.units(shape.stages - k) for k in range(len(pairs))])
        return list(zip(modes, costs.stage_times(pairs, modes)))

    def time_per_batch_s(self, shape: Shape, pairs: list[tuple[int, int]]) -> float:
        """``slots · slowest device time + sync of the largest stage`` of a partition (``slots``: ``m_r + (p−1)/v`` under
        1F1B, :func:`~phaze_env.placement.inputs.pipeline_slots`; the device time: :meth:`pace_s`)."""
        return self.batch_time_s(shape, self.pace_s(shape, pairs), self.batch_sync_s(shape, pairs))

    def batch_time_s(self, shape: Shape, pace_s: float, sync_s: float) -> float:
        """``slots · pace + sync``; on lower-bound layer times with the exposure at its floor
        (``Settings.unbounded_overlap_cover``) at least :meth:`Prices.overlap_pace_floor_s` at that pace (a stage hides
        no more than its own passes, which the slowest stage's time bounds; not under DualPipe, whose pace is a mean of
        two stages'). The floor is nondecreasing in the pace, so the partitions' Pareto walk stays exact."""
        time_s = pipeline_time_s(shape.slots, pace_s, sync_s)
        if self.prices.paces_overlap(shape.zero, shape.stages):
            time_s = max(time_s, self.prices.overlap_pace_floor_s(shape.data_parallel, shape.zero, shape.stages,
                                                                  shape.interleave, shape.slots, pace_s))
        return time_s

    def pace_s(self, shape: Shape, pairs: list[tuple[int, int]]) -> float:
        """The slowest device's time per microbatch slot: the slowest stage's, or under DualPipe the slowest mean of a
        stage and its mirror (:meth:`PairDP.device_time_s`)."""
        times = [time for _, time in self.stages(shape, pairs)]
        return max(times) if self.paired(shape) is None else PairDP.device_time_s(times)

    def reported_allreduce_s(self, shape: Shape, stages: list[tuple[int, int]]) -> float:
        """A device's data-parallel collectives once per batch as the plan pays them, for the ``stages`` it holds
        (:meth:`held`: their bytes together): :meth:`Prices.allreduce_s`, or under ``Stack.dp_comm_overlap`` (one
        stage per device) only their exposed part (:meth:`Prices.overlap_syncs`)."""
        prices = self.prices
        if prices.overlaps(shape.zero):
            (pair,) = stages
            return float(prices.overlap_syncs(shape.data_parallel, shape.zero, shape.stages, shape.interleave)[0][pair])
        return prices.allreduce_s(sum(float(self.table.param_bytes[pair]) for pair in stages), shape.data_parallel,
                                  shape.zero, sum(self.expert_bytes(pair) for pair in stages))

