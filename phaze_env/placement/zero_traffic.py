"""The ZeRO-2/3 collectives of every stage per microbatch (:class:`ZeroTraffic`): the gradients' reduce-scatter
(ZeRO-2), also the weights' all-gathers (ZeRO-3), a hybrid shard group's all-reduce, each layer's left exposed by
its own compute, priced on the cluster's collectives (:mod:`phaze_env.placement.collectives`). A stage time
(:class:`~phaze_env.placement.stage_costs.StageCosts`) adds them; the once-per-batch collectives are
:class:`~phaze_env.placement.prices.Prices`'."""

from __future__ import annotations

from functools import cached_property

import numpy as np

from phaze_env.placement.collectives import collective_affine, expert_collective_affine, hybrid_collective_s
from phaze_env.placement.inputs import GRADIENT_FACTOR, RERUN_COVER, LayerArrays, Settings
from phaze_env.placement.stages import StageTable


class ZeroTraffic:
    """The ZeRO-2/3 traffic of one placement search (its layers, stages and settings), per ``(d, zero)`` computed once."""

    def __init__(self, layers: LayerArrays, table: StageTable, settings: Settings):
        self.layers = layers
        self.table = table
        self.settings = settings
        self._zero_comm: dict[tuple[int, int], dict[str, np.ndarray]] = {}
        # (ZeRO stage, recompute mode) -> per (d, layer), totals
        self._layer_zero_comm: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}
        self.none = np.zeros_like(table.fwd_s)  # every stage: no traffic
        self.none_by_mode = dict.fromkeys(RERUN_COVER, self.none)  # ZeRO-0/1: none in any recompute mode

    def zero_comm_s(self, data_parallel: int, zero: int) -> dict[str, np.ndarray]:
        """Every stage's exposed ZeRO-2/3 collectives per microbatch, per recompute mode the plan may run (0 for
        ZeRO-0/1).

        Each microbatch's gradients are reduce-scattered as its backward pass produces them (sharded
        gradients cannot accumulate whole ones: DeepSpeed's ZeRO-2 reduces every micro-step, FSDP without
        ``no_sync``); ZeRO-3 also all-gathers each layer's weights in the forward and again in the backward
        pass (FSDP's ``reshard_after_forward=True``). Assumed overlap (FSDP's forward/backward prefetch and
        DeepSpeed's ``overlap_comm``, on their own stream): a layer's collectives run while the layer
        computes, so each layer adds ``max(0, all-gather − fwd) + max(0, all-gather + reduce-scatter − bwd)``
        (ZeRO-2: ``max(0, reduce-scatter − bwd)``). A layer rerun in the backward pass (recompute mode ``selective``:
        its attention core; ``full``: its forward, :data:`~phaze_env.placement.inputs.RERUN_COVER`) covers that layer's backward collectives too:
        the all-gather of its weights is prefetched while the layer after it reruns and runs its backward pass, and
        its gradients' reduce-scatter runs while the layer before it does (PyTorch FSDP's ``BACKWARD_PRE`` prefetch,
        issued in the pre-backward hook, before the checkpointed layer's rerun: ``torch.distributed.fsdp``
        ``_pre_backward_hook`` / ``_prefetch_handle``; DeepSpeed ZeRO-3's ``overlap_comm`` prefetch, which traces the
        rerun as any forward; Megatron-FSDP's prefetched all-gathers, ``megatron/core/distributed/fsdp``), so the
        backward term is ``max(0, all-gather + reduce-scatter − bwd − rerun)``. A stage's time in a mode,
        ``rerun + exposed``, is still at least its time without recompute (``r + max(0, X − b − r) = max(r, X − b) ≥
        max(0, X − b)``), so the faster-mode order the DP relies on holds and the mode-``none`` traffic bounds every
        mode's from below. The collective after
        the flush (:meth:`~phaze_env.placement.prices.Prices.allreduce_s`) is not overlapped, for any stage: ZeRO-0/1
        pay their whole all-reduce there. At ``e > 1`` a layer's expert bytes have their own collectives over the ``d·c/e`` expert replicas (one
        after the other with the dense ones).

        Hybrid sharding (``PlanSpec.shard_group`` ``h``, FSDP's ``HYBRID_SHARD``): the all-gathers and the
        reduce-scatter span the ``h`` ranks of a shard group (``t`` apart), and each layer's gradient shard
        (``1/h`` of its gradient) is then all-reduced across the ``d·c/h`` groups (``t·h`` apart) in the same
        post-backward step (``torch.distributed.fsdp`` ``_post_backward_hook``: reduce-scatter, then all-reduce in
        the replicate process group), so the backward covers ``all-gather + reduce-scatter + all-reduce``; a stack
        that runs that all-reduce once after the backward pass instead (``Stack.hybrid_allreduce_overlapped``
        False) pays it whole after the flush (:meth:`~phaze_env.placement.prices.Prices.part_allreduce_s`); one that
        overlaps it but does not hide all of it (``Stack.hybrid_allreduce_exposure`` ``x`` > 0) adds ``x`` × each
        layer's all-reduce on top.
        """
        key = (data_parallel, zero)
        if key not in self._zero_comm:
            if zero < 2 or self.settings.weight_replicas(data_parallel) == 1:
                self._zero_comm[key] = self.none_by_mode
            else:
                by_mode: dict[str, np.ndarray] = {}
                for mode in self.settings.plan.recompute_modes:  # the modes the plan may run
                    exposed = self.layer_zero_comm_s(data_parallel, zero, mode)
                    # a mode whose rerun changes no layer's exposure shares the array (and so the variant's DP)
                    same = next((by_mode[m] for m in by_mode
                                 if np.array_equal(self.layer_zero_comm_s(data_parallel, zero, m), exposed)), None)
                    by_mode[mode] = self.table.layer_sum(exposed) if same is None else same
                self._zero_comm[key] = by_mode
        return self._zero_comm[key]

    def layer_zero_comm_s(self, data_parallel: int, zero: int, mode: str = "none") -> np.ndarray | None:
        """Each layer's exposed ZeRO-2/3 collectives per microbatch in recompute ``mode`` (:meth:`zero_comm_s` sums
        them per stage); ``None`` when there are none (ZeRO-0/1, or one weight replica)."""
        if zero < 2 or self.settings.weight_replicas(data_parallel) == 1:
            return None
        return self.layer_zero_comm_table(zero, mode)[0][self.settings.expert_index(data_parallel)]

    def layer_zero_comm_table(self, zero: int, mode: str = "none") -> tuple[np.ndarray, np.ndarray]:
        """:meth:`layer_zero_comm_s` of ZeRO-2 or 3 in recompute ``mode`` for every ``d = e, 2e, … ≤ N/(t·c)`` at
        once (row ``d/e − 1``; in a folded expert grid every ``d ≤ N/(t·c)``, row ``d − 1``:
        ``Settings.expert_index``), and each row's total: one array expression per search instead of one per ``d``.
        Mode ``none`` (the default) is the least in every entry: what the search's bounds read."""
        if (zero, mode) not in self._layer_zero_comm:
            field = RERUN_COVER[mode]
            rerun = None if field is None else getattr(self.layers, field)
            if rerun is not None and not rerun.any():  # nothing rerun: mode none's exposure
                self._layer_zero_comm[zero, mode] = self.layer_zero_comm_table(zero)
            else:
                gather, scatter, always = self._collectives
                cover = self.layers.bwd_s if rerun is None else self.layers.bwd_s + rerun
                if zero == 2:
                    exposed = np.maximum(scatter - cover, 0.0)
                else:
                    exposed = np.maximum(gather - self.layers.fwd_s, 0.0) + np.maximum(gather + scatter - cover, 0.0)
                exposed = np.broadcast_to(exposed + always, gather.shape)
                self._layer_zero_comm[zero, mode] = exposed, exposed.sum(axis=1)
        return self._layer_zero_comm[zero, mode]

    @cached_property
    def _collectives(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | float]:
        """Per ``(d, layer)`` (rows as :meth:`layer_zero_comm_table`'s): each layer's weight all-gather and gradient
        reduce-scatter (with a hybrid shard group's overlapped all-reduce), and the part of them no pass hides
        (``Stack.hybrid_allreduce_exposure``; 0 without hybrid sharding)."""
        layers, s = self.layers, self.settings
        e = s.expert_parallel
        step = 1 if s.folded_experts else e
        data_parallel = step * np.arange(1, max(1, s.n_devices // (s.replica_devices * step)) + 1)
        replicas = s.weight_replicas(data_parallel)
        experts = layers.expert_param_bytes if e > 1 else np.zeros_like(layers.param_bytes)

        def collective_s(kind: str, per_param: float) -> np.ndarray:
            dense_table = collective_affine(s.cluster, kind, s.tensor_width)
            fixed, per_byte = (part[:, None] for part in dense_table.take(replicas - 1))
            dense = (layers.param_bytes - experts) * per_param
            times = np.where(dense > 0, fixed + per_byte * dense, 0.0)
            if experts.any():
                expert_table = expert_collective_affine(s.cluster, kind, s.tensor_width, s.context_parallel, e,
                                                        s.folded_experts)
                fixed_e, per_byte_e = (part[:, None] for part in expert_table.take(s.expert_index(data_parallel)))
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
            weights = layers.param_bytes
            gather = hybrid_collective_s(s.cluster, "allgather", s.tensor_width, weights, shards, 1, 1.0)
            scatter = hybrid_collective_s(s.cluster, "reducescatter", s.tensor_width, weights, shards, 1,
                                          GRADIENT_FACTOR)
            # else once per batch after the flush (Prices.part_allreduce_s)
            if s.cluster.stack.hybrid_allreduce_overlapped:
                allreduce = hybrid_collective_s(s.cluster, "allreduce", s.tensor_width,
                                                layers.param_bytes / shards, groups, shards, GRADIENT_FACTOR)
                scatter = scatter + allreduce
                always = s.cluster.stack.hybrid_allreduce_exposure * allreduce  # the share the backward does not hide
        shape = (len(replicas), len(layers))
        return np.broadcast_to(gather, shape), np.broadcast_to(scatter, shape), always


