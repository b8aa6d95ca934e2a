"""Validated inputs of the placement problem: per-layer arrays and the cluster / training settings.

All times are seconds and all sizes bytes, already for one tensor-parallel width and one microbatch
size (the tracer and the operator ILP produce them). ``param_bytes`` are bf16 weights (2 bytes per
parameter); the optimizer factors (:data:`phaze_env.cluster.OPTIMIZERS`) are multiples of ``param_bytes``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields
from typing import Any, Mapping, Sequence

import numpy as np

# OPTIMIZERS is the cluster's vocabulary (Setup.optimizer names one)
from phaze_env.cluster import OPTIMIZERS, Cluster, Optimizer
from phaze_env.plan_spec import PlanSpec

OPTIMIZER_STATE_FACTORS = {name: optimizer.state_factor for name, optimizer in OPTIMIZERS.items()}
GRADIENT_FACTOR = 1.0  # bf16 gradients, 2 bytes/param (ZeRO's accounting; Megatron's fp32 main_grad would be 2.0)
RERUN_COVER = {"none": None, "selective": "attention_fwd_s", "full": "recompute_fwd_s"}
"""Per recompute mode, the field (of :class:`LayerArrays`, and summed per stage of
:class:`~phaze_env.placement.stages.StageTable`) of the forward time a layer reruns in its backward pass: what the mode
adds to a stage's time, and what covers its ZeRO-2/3 backward collectives besides the backward pass
(:meth:`~phaze_env.placement.zero_traffic.ZeroTraffic.zero_comm_s`)."""


@dataclass(frozen=True)
class LayerArrays:
    """Per-layer quantities as float arrays (index = layer position).

    ``attention_stash_bytes``: the part of ``stash_bytes`` that selective recompute drops (the attention
    core: QKᵀ, softmax, dropout, attention over V — Korthikanti et al. 2022 §5); ``attention_fwd_s`` the
    forward time of those operators (what selective recompute adds to the backward pass);
    ``replicated_stash_bytes`` the part of ``stash_bytes`` not split by tensor parallelism (layer norms,
    dropout masks, residual inputs), which sequence parallelism splits ``t`` ways; ``tp_comm_s`` the
    tensor-parallel collectives inside ``fwd_s + bwd_s`` (reported, not optimised); ``cp_comm_s`` the part of
    ``fwd_s + bwd_s`` that context parallelism's ring exchange of keys and values leaves exposed (reported);
    ``expert_param_bytes`` the part of ``param_bytes`` that is routed experts (already the ``1/e`` a device
    holds at expert-parallel degree ``e``: their gradients are all-reduced, and ZeRO shards them, over the
    ``d·c/e`` expert-data-parallel ranks); ``ep_comm_s`` the expert-parallel all-to-alls inside
    ``fwd_s + bwd_s`` (reported); ``recompute_fwd_s`` the forward time full recompute repeats (Megatron-LM
    checkpoints the transformer layers only — ``ParallelTransformer._checkpointed_forward`` loops over
    ``self.layers``, Megatron-Core's ``TransformerBlock._checkpointed_forward`` likewise — so the embedding and
    the LM head + loss are not rerun: 0 for them). All default to 0, but ``recompute_fwd_s`` (default ``fwd_s``:
    everything rerun) and ``transformer_layers``: how many transformer layers the layer
    counts for in a pipeline split (:class:`~phaze_env.plan_spec.PlanRules`; 0 for the embedding and the head, whose
    stages' layer counts they do not change), default 1.
    """

    fwd_s: np.ndarray
    bwd_s: np.ndarray
    param_bytes: np.ndarray
    stash_bytes: np.ndarray
    output_bytes: np.ndarray
    input_bytes: np.ndarray
    attention_stash_bytes: np.ndarray
    attention_fwd_s: np.ndarray
    replicated_stash_bytes: np.ndarray
    tp_comm_s: np.ndarray
    cp_comm_s: np.ndarray
    expert_param_bytes: np.ndarray
    ep_comm_s: np.ndarray
    recompute_fwd_s: np.ndarray
    transformer_layers: np.ndarray

    def __len__(self) -> int:
        return len(self.fwd_s)


@dataclass(frozen=True, slots=True)
class LayerCost:
    """One layer of a placement search (a chain's or a DAG's), measured on one device at the search's tensor width
    and microbatch: what :class:`LayerArrays` holds for it (the meaning of each field is documented there; seconds
    and bytes). ``input_bytes`` ``None``: in a chain the previous layer's ``output_bytes`` (layer 0: its own), in a
    DAG its own; ``recompute_fwd_s`` ``None``: ``fwd_s`` (full recompute reruns all of it). Checked when a search
    reads the layers (:func:`layer_arrays`), where a bad value can name its layer."""

    fwd_s: float
    bwd_s: float
    param_bytes: float
    stash_bytes: float
    output_bytes: float
    input_bytes: float | None = None
    attention_stash_bytes: float = 0.0
    attention_fwd_s: float = 0.0
    replicated_stash_bytes: float = 0.0
    tp_comm_s: float = 0.0
    cp_comm_s: float = 0.0
    expert_param_bytes: float = 0.0
    ep_comm_s: float = 0.0
    recompute_fwd_s: float | None = None
    transformer_layers: float = 1.0

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> LayerCost:
        """The record of a dict with these fields as keys (a missing required one or an unknown one raises
        ``ValueError``)."""
        known = [f.name for f in fields(cls)]
        unknown = [key for key in values if key not in known]
        if unknown:
            raise ValueError(f"unknown layer field {unknown[0]!r}; known: {', '.join(known)}")
        missing = [key for key in _REQUIRED_FIELDS if key not in values]
        if missing:
            raise ValueError(f"layer is missing {', '.join(missing)}")
        return cls(**values)


_REQUIRED_FIELDS = ("fwd_s", "bwd_s", "param_bytes", "stash_bytes", "output_bytes")
_SHARE_FIELDS = ("attention_stash_bytes", "attention_fwd_s", "replicated_stash_bytes", "tp_comm_s", "cp_comm_s",
                 "expert_param_bytes", "ep_comm_s")  # default 0


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{what} must be a number, got {value!r}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{what} is NaN")
    return value


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{what} must be a positive integer, got {value!r}")
    return int(value)


_plain_number_types = {int, float, np.float64, np.float32, np.int64, np.int32}


def _column(layers: Sequence[LayerCost], key: str, default: list[float] | None = None) -> np.ndarray:
    """One per-layer quantity as floats (``default[i]`` where layer ``i``'s is ``None``); non-numbers, NaN,
    infinities and negatives raise ``ValueError``."""
    values = [getattr(layer, key) for layer in layers]
    if default is not None:
        values = [default[i] if value is None else value for i, value in enumerate(values)]
    if not all(type(value) in _plain_number_types for value in values):  # the fast path covers plain numbers only
        for index, value in enumerate(values):
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise ValueError(f"layer {index} {key} must be a number, got {value!r}")
    column = np.asarray(values, dtype=float)
    bad = np.flatnonzero(~(np.isfinite(column) & (column >= 0)))
    if len(bad):
        index, value = int(bad[0]), column[bad[0]]
        problem = "is NaN" if math.isnan(value) else f"must be finite and non-negative, got {value}"
        raise ValueError(f"layer {index} {key} {problem}")
    return column


def layer_arrays(layers: Sequence[LayerCost], *, chain: bool = True) -> LayerArrays:
    """Check ``layers`` (:class:`LayerCost` records) and return them as arrays.

    ``input_bytes`` defaults, for a chain, to the previous layer's ``output_bytes`` (layer 0: its own
    output). For a DAG (``chain=False``) list order says nothing about which layer feeds which, so the
    default is the layer's own ``output_bytes`` (the chain's rule for its source, layer 0); the DAG
    stages use ``input_bytes`` only for graph sources, so the answer does not depend on the numbering.
    """
    if isinstance(layers, Mapping) or not isinstance(layers, Sequence) or len(layers) == 0:
        raise ValueError("layers must be a non-empty list of LayerCost records")
    for index, layer in enumerate(layers):
        if not isinstance(layer, LayerCost):
            hint = " (LayerCost.from_dict makes one of a dict)" if isinstance(layer, Mapping) else ""
            raise TypeError(f"layer {index} must be a LayerCost, got {type(layer).__name__}{hint}")
    columns = {key: _column(layers, key) for key in _REQUIRED_FIELDS}
    output = columns["output_bytes"]
    default_input = (np.concatenate((output[:1], output[:-1])) if chain else output).tolist()
    optional = {key: _column(layers, key) for key in _SHARE_FIELDS}
    optional["recompute_fwd_s"] = _column(layers, "recompute_fwd_s", columns["fwd_s"].tolist())
    counts = _column(layers, "transformer_layers")
    if np.any(counts != np.round(counts)):
        raise ValueError("transformer_layers must be whole numbers (how many transformer layers a layer counts for)")
    if np.any(optional["attention_stash_bytes"] + optional["replicated_stash_bytes"] > columns["stash_bytes"] * (1 + 1e-12)):
        raise ValueError("attention_stash_bytes + replicated_stash_bytes must not exceed a layer's stash_bytes")
    if np.any(optional["attention_fwd_s"] > columns["fwd_s"] * (1 + 1e-12)):
        raise ValueError("attention_fwd_s must not exceed a layer's fwd_s")
    if np.any(optional["recompute_fwd_s"] > columns["fwd_s"] * (1 + 1e-12)):
        raise ValueError("recompute_fwd_s must not exceed a layer's fwd_s")
    if np.any(optional["attention_fwd_s"] > optional["recompute_fwd_s"] * (1 + 1e-12)):
        raise ValueError("attention_fwd_s must not exceed a layer's recompute_fwd_s (full recompute repeats at least "
                         "what selective recompute does)")
    if np.any(optional["expert_param_bytes"] > columns["param_bytes"]):
        raise ValueError("expert_param_bytes must not exceed a layer's param_bytes")
    communication = optional["tp_comm_s"] + optional["cp_comm_s"] + optional["ep_comm_s"]
    if np.any(communication > (columns["fwd_s"] + columns["bwd_s"]) * (1 + 1e-12)):
        raise ValueError("tp_comm_s + cp_comm_s + ep_comm_s must not exceed a layer's fwd_s + bwd_s")
    arrays = LayerArrays(**columns, input_bytes=_column(layers, "input_bytes", default_input), **optional,
                         transformer_layers=counts)
    if not (arrays.fwd_s + arrays.bwd_s).sum() > 0:
        raise ValueError("layers take no time: at least one layer needs a positive fwd_s or bwd_s")
    return arrays


@dataclass(frozen=True)
class Settings:
    """Everything but the layers that one placement search depends on (validated on construction).

    ``plan`` pins what the user fixed (``t``, ``c``, ``e`` and ``microbatch`` must match ``tensor_width``,
    ``context_parallel``, ``expert_parallel`` and ``microbatch``); ``hbm_bandwidth_Bps`` times the optimizer
    step (``None``: the step is not timed). ``context_parallel`` ranks split each sequence (the layers are priced
    per rank at that degree); they hold the same weights, so dense gradients are all-reduced, and ZeRO shards,
    over ``d·c`` ranks. ``expert_parallel`` is the expert-parallel degree ``e`` the layers were priced at (the
    routed experts sharded ``e`` ways, carved from the data-parallel ranks: the search only considers ``d``
    that ``e`` divides); each expert shard is replicated on ``d·c/e`` ranks, over which its gradients are
    all-reduced and ZeRO shards it (Megatron-Core's expert data parallelism, ``DP·CP/EP``).

    ``unbounded_overlap_cover``: under ``Stack.dp_comm_overlap``, price every stage's data-parallel collectives as if
    its passes were unboundedly long (each stage leaves only its first layer's last bucket exposed,
    :func:`~phaze_env.placement.dp_overlap.stage_exposed_s`) instead of hiding them under the layers' own
    ``fwd_s``/``bwd_s``. What a search on lower-bound layer times takes (``evaluate``'s layer-level branch and bound and
    its ILP-free bound): the exposure falls as a pass grows, so the DP on lower-bound passes could over-price it;
    at its floor it depends on no layer time, and the DP on lower-bound layers stays a lower bound on the DP's time
    (``tests/test_bound_property.py``). No effect without the overlap.
    """

    cluster: Cluster
    tensor_width: int
    microbatch: int
    hbm_bytes: float
    plan: PlanSpec = PlanSpec()
    seq_len: int | None = None
    model_flops_per_sample: float | None = None
    peak_flops: float | None = None
    hbm_bandwidth_Bps: float | None = None
    context_parallel: int = 1
    expert_parallel: int = 1
    weight_copy_factor: float = 0.0  # extra per-weight copies (FP8 weights), as a multiple of the weight bytes
    unbounded_overlap_cover: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.cluster, Cluster):
            raise ValueError(f"cluster must be a Cluster, got {type(self.cluster).__name__}")
        if not isinstance(self.plan, PlanSpec):
            raise ValueError(f"plan must be a PlanSpec, got {type(self.plan).__name__}")
        _positive_int(self.tensor_width, "tensor_width")
        _positive_int(self.microbatch, "microbatch")
        _positive_int(self.context_parallel, "context_parallel")
        _positive_int(self.expert_parallel, "expert_parallel")
        hbm = _number(self.hbm_bytes, "hbm_bytes")
        if not hbm > 0:
            raise ValueError(f"hbm_bytes must be positive, got {hbm}")
        if self.seq_len is not None:
            _positive_int(self.seq_len, "seq_len")
        if not 0 <= _number(self.weight_copy_factor, "weight_copy_factor") < math.inf:
            raise ValueError(f"weight_copy_factor must be finite and non-negative, got {self.weight_copy_factor}")
        for name, low in (("model_flops_per_sample", 0.0), ("peak_flops", None), ("hbm_bandwidth_Bps", None)):
            value = getattr(self, name)
            if value is None:
                continue
            value = _number(value, name)
            if math.isinf(value) or value < 0 or (low is None and value == 0):
                raise ValueError(f"{name} must be finite and {'non-negative' if low == 0 else 'positive'}, got {value}")
        if not self.cluster.stack.interleaved_schedule and (self.plan.interleave or 1) > 1:
            raise ValueError(f"plan {self.plan} pins v={self.plan.interleave}, but the cluster's training stack has no "
                             "interleaved schedule (e.g. DeepSpeed's PipelineEngine runs plain 1F1B)")
        rules = self.cluster.stack.plan_rules
        if not rules.pipeline and (self.plan.p or 1) > 1:
            raise ValueError(f"plan {self.plan} pins p={self.plan.p}, but "
                             f"{rules.owner(self.cluster.name)} does not pipeline (p = 1 only)")
        if not rules.pipeline and (self.plan.interleave or 1) > 1:
            raise ValueError(f"plan {self.plan} pins v={self.plan.interleave}, but "
                             f"{rules.owner(self.cluster.name)} does not pipeline")
        if self.plan.zero is not None and self.plan.zero not in rules.zero_stages:
            raise ValueError(f"plan {self.plan} pins ZeRO stage {self.plan.zero}, but "
                             f"{rules.owner(self.cluster.name)} runs ZeRO stages {', '.join(map(str, rules.zero_stages))} only")
        if (self.plan.interleave or 1) > 1 and self.plan.p is not None and self.plan.p < rules.interleave_min_stages:
            raise ValueError(f"plan {self.plan} pins v={self.plan.interleave} with p={self.plan.p}, but "
                             f"{rules.owner(self.cluster.name)} interleaves only with p ≥ "
                             f"{rules.interleave_min_stages} pipeline stages")
        if self.cluster.stack.sequence_parallel_kernels and self.plan.sequence_parallel is False and self.tensor_width > 1:
            raise ValueError(f"plan {self.plan} turns sequence parallelism off at t={self.tensor_width}, but the "
                             "cluster's training stack always runs it with t > 1 (sequence_parallel_kernels: "
                             "Megatron-Core's TP communication overlap requires it)")
        if self.plan.shard_group is not None and self.expert_parallel > 1:
            raise ValueError(f"plan {self.plan}: hybrid sharding (+shard) is not modelled with expert parallelism "
                             f"(e = {self.expert_parallel})")
        for name, own in (("t", self.tensor_width), ("c", self.context_parallel), ("e", self.expert_parallel),
                          ("microbatch", self.microbatch)):
            pinned = getattr(self.plan, name)
            if pinned is not None and pinned != own:
                raise ValueError(f"the plan pins {name}={pinned} but this search is at {name}={own}")

    @property
    def n_devices(self) -> int:
        return self.cluster.n_devices

    @property
    def global_batch(self) -> int:
        return self.cluster.setup.global_batch

    @property
    def optimizer(self) -> Optimizer:
        return OPTIMIZERS[self.cluster.setup.optimizer]

    @property
    def sequence_parallel(self) -> bool:
        """Pinned, or on whenever ``t > 1`` (it removes memory, its collectives cost what TP's did, and under a stack
        with ``sequence_parallel_kernels`` its norms, residual adds and FP8 casts run on ``s/t`` tokens)."""
        return self.plan.sequence_parallel if self.plan.sequence_parallel is not None else self.tensor_width > 1

    @property
    def zero_stages(self) -> tuple[int, ...]:
        """The ZeRO stages the DP may use: the pinned one, or every stage the cluster's training stack runs
        (``Stack.plan_rules.zero_stages``; each weighed by its own costs)."""
        return self.cluster.stack.plan_rules.zero_stages if self.plan.zero is None else (self.plan.zero,)

    @property
    def interleaved(self) -> bool:
        """Whether ``v > 1`` may be searched: the plan pins one, or leaves it free on a stack that searches it
        (:attr:`~phaze_env.cluster.Stack.searches_interleave`: the DP then tries every ``v`` that splits the model's
        layers, :meth:`~phaze_env.placement.rules.RunnableShapes.interleaves`)."""
        if self.plan.interleave is not None:
            return self.plan.interleave > 1
        return self.cluster.stack.searches_interleave

    @property
    def replica_devices(self) -> int:
        """Devices of one pipeline stage of one replica: the tensor group times the context-parallel ranks."""
        return self.tensor_width * self.context_parallel

    def weight_replicas(self, data_parallel: int | np.ndarray) -> int | np.ndarray:
        """Ranks holding the same weights: ``d·c`` (context-parallel ranks differ only in their tokens); the
        data-parallel collectives and ZeRO's shards span them."""
        return data_parallel * self.context_parallel

    @property
    def folded_experts(self) -> bool:
        """Whether the stack folds its expert grid over the ``t·c·d`` ranks (``Stack.folded_experts``)."""
        return self.cluster.stack.folded_experts

    def expert_ranks(self, data_parallel: int | np.ndarray) -> int | np.ndarray:
        """The ranks of a stage the expert grid is carved from: the ``d`` data-parallel positions, or all ``t·c·d``
        ranks in a folded expert grid."""
        folded = self.tensor_width * self.context_parallel if self.folded_experts else 1
        return data_parallel * folded

    def expert_fits(self, data_parallel: int | np.ndarray) -> bool | np.ndarray:
        """Whether ``e`` divides the ranks the expert grid is carved from (:meth:`expert_ranks`) at ``d``."""
        return self.expert_ranks(data_parallel) % self.expert_parallel == 0

    def expert_replicas(self, data_parallel: int | np.ndarray) -> int | np.ndarray:
        """Ranks holding the same expert shard: ``d·c/e`` (Megatron-Core's expert data parallelism, DP·CP/EP), or
        ``t·c·d/e`` in a folded expert grid."""
        if self.folded_experts:
            return self.expert_ranks(data_parallel) // self.expert_parallel
        return data_parallel * self.context_parallel // self.expert_parallel

    def expert_index(self, data_parallel: int | np.ndarray) -> int | np.ndarray:
        """Where ``d`` sits in the expert-replica collective tables
        (:func:`~phaze_env.placement.collectives.expert_collective_affine`)."""
        return data_parallel - 1 if self.folded_experts else data_parallel // self.expert_parallel - 1

    def zero_shards(self, weight_replicas: int) -> int:
        """How many ways ZeRO shards the state of ``weight_replicas`` replicas: all of them, or the plan's hybrid
        shard group (``PlanSpec.shard_group``: FSDP's HYBRID_SHARD shards within the group, replicates across)."""
        return weight_replicas if self.plan.shard_group is None else self.plan.shard_group

    def state_parts(self, data_parallel: int, zero: int) -> tuple[float, float, float]:
        """(weights with their FP8 copies, gradients, optimizer state) per device, as multiples of the stage's
        weight bytes.

        Rajbhandari et al. 2020 §5 (Figure 1), per parameter with ``K`` bytes of optimizer state and ``N_d = d``:
        ``2 + 2 + K`` unsharded; ZeRO-1 ("P_os") ``2 + 2 + K/N_d``; ZeRO-2 ("P_os+g") ``2 + (2 + K)/N_d``;
        ZeRO-3 ("P_os+g+p", FSDP's full sharding) ``(2 + 2 + K)/N_d`` — the gradients' 2 bytes being the optimizer's
        ``gradient_factor`` times 2 (4 for fp32 gradients, :data:`~phaze_env.cluster.OPTIMIZERS`).
        """
        shards = [data_parallel if zero >= stage else 1 for stage in (3, 2, 1)]
        weights = (1.0 + self.weight_copy_factor) / shards[0]  # ZeRO-3 shards the FP8 copies with their weights
        return weights, self.optimizer.gradient_factor / shards[1], self.optimizer.state_factor / shards[2]

    def state_factor(self, data_parallel: int, zero: int) -> float:
        """Weights + gradients + optimizer state per device, as a multiple of the stage's weight bytes."""
        return sum(self.state_parts(data_parallel, zero))

    def least_state_factor(self, weight_replicas: int) -> float:
        """The smallest :meth:`state_factor` of any ZeRO stage the DP may use at ``weight_replicas`` replicas (ZeRO's
        shards only shrink the state as the replicas grow: at the most replicas, a floor on every shape's)."""
        return min(self.state_factor(self.zero_shards(weight_replicas), zero) for zero in self.zero_stages)

    def expert_state_extra(self, weight_replicas: int, zero: int) -> float:
        """What an expert byte adds to :meth:`state_factor` over a dense one: dense bytes are sharded by ZeRO over
        their ``weight_replicas = d·c`` ranks, expert bytes over the ``d·c/e`` expert-data-parallel ranks only
        (``t·d·c/e`` in a folded expert grid; 0 without ZeRO or expert parallelism)."""
        folded = self.tensor_width if self.folded_experts else 1
        return (self.state_factor(weight_replicas * folded // self.expert_parallel, zero)
                - self.state_factor(weight_replicas, zero))

    def optimizer_step_s(self, param_bytes: float, data_parallel: int, zero: int) -> float:
        """HBM-bound optimizer update of a stage: bytes touched / HBM bandwidth (ZeRO ≥ 1: its 1/d shard)."""
        if self.hbm_bandwidth_Bps is None:
            return 0.0
        shards = data_parallel if zero >= 1 else 1
        return param_bytes * self.optimizer.step_factor / shards / self.hbm_bandwidth_Bps


def zero_buffer_factor(zero: int) -> float:
    """Unsharded bytes a ZeRO stage holds for a moment, as a multiple of the stage's largest layer's weights.

    ZeRO-2: that layer's whole gradient, until its reduce-scatter; ZeRO-3: also its gathered weights and the
    next layer's, all-gathered ahead (FSDP's forward/backward prefetching, whose rate limiter keeps at most
    two units gathered; Zhao et al. 2023, "PyTorch FSDP", VLDB). Stages 0 and 1 keep everything whole already.
    """
    return {0: 0.0, 1: 0.0, 2: GRADIENT_FACTOR, 3: 2.0 + GRADIENT_FACTOR}[zero]


def microbatches_per_replica(global_batch: int, data_parallel: int | np.ndarray, microbatch: int) -> int | np.ndarray:
    """``m_r = ceil(B / (d·m))``: the last microbatch of a replica is padded when ``d·m`` does not divide ``B``
    (elementwise for an array of ``d``)."""
    return -(-global_batch // (data_parallel * microbatch))


def uneven_batch_note(global_batch: int, data_parallel: int, microbatch: int) -> str:
    """What a plan whose ``d·m`` does not divide the global batch costs, in words ("" when it divides): every replica
    runs :func:`microbatches_per_replica` microbatches, and the slots beyond the batch are idle time counted in the
    plan's time per batch (its throughput is the real batch over that time). Megatron-LM refuses such a split (it
    needs ``B`` divisible by ``d·m``); a stack that pads or lets replicas run uneven counts (PyTorch DDP's ``Join``)
    runs it."""
    slots = data_parallel * microbatch * microbatches_per_replica(global_batch, data_parallel, microbatch)
    if slots == global_batch:
        return ""
    per_replica = slots // (data_parallel * microbatch)
    return (f"the global batch of {global_batch:,} does not split evenly over d={data_parallel} replicas × microbatch "
            f"{microbatch}: each replica runs {per_replica:,} microbatches, {slots - global_batch:,} of the {slots:,} "
            "sample slots are idle (their time is counted)")


BACKWARD_FORWARD_RATIO = 2.0
"""Assumption: a layer's backward pass ``B`` takes twice its forward ``F``. Every forward GEMM has two backward GEMMs of
its shape, one for the input gradient and one for the weight gradient (training costs ``6N`` FLOPs per token, ``2N`` of
them forward: Kaplan et al. 2020 §2.1; Narayanan et al. 2021 §5.1); measured ratios run ≈ 1.5–2.5 (attention's
backward and recompute raise it, memory-bound operators lower it). Taken as a constant rather than the layers' own
ratio so that a slower layer never gives a faster plan (the placement DP's monotonicity, which the layer-level bound
of ``phaze_env.evaluate`` needs: with the layers' ratio, a slower backward on a stage that is not the slowest would
shrink DualPipe's bubble)."""

ZERO_BUBBLE_WEIGHT_SHARE = 0.5
"""Assumption: the share ``W/B`` of a backward pass that computes the weight gradients (the rest, ``B − W``, the input
gradients the previous stage waits for). Zero Bubble pipeline parallelism (Qi et al. 2023, arXiv:2401.10241 §2) splits
``B`` into these two passes, each one GEMM per weight matrix of the forward's shape, and takes them as about equal in
cost (``T_F ≈ T_B ≈ T_W`` in its analysis); range ≈ 0.4–0.6 (attention's score GEMMs have no weights and fall on the
input side). The placement model has no separate ``W``, so DualPipe's bubble term ``B − 3W`` takes ``W = B/2``."""

DUALPIPE_BUBBLE_SHARE = (1.0 + (1.0 - ZERO_BUBBLE_WEIGHT_SHARE) * BACKWARD_FORWARD_RATIO) / (1.0 + BACKWARD_FORWARD_RATIO)
"""DualPipe's idle time per pair of pipeline stages, in stage times ``F + B``: arXiv:2412.19437 Table 2's
``F&B + B − 3W`` with ``F&B ≈ F + B`` (the two paired chunks' compute; their all-to-all hidden as
``Stack.moe_alltoall_overlap`` prices it), ``W = B/2`` (:data:`ZERO_BUBBLE_WEIGHT_SHARE`) and ``B = 2F``
(:data:`BACKWARD_FORWARD_RATIO`): ``(F + B/2)/(F + B) = 2/3`` (1/2–5/6 over the two assumptions' ranges)."""

def parameter_copies(schedule: str, stages: int) -> int:
    """Copies of each stage's weights a DualPipe pipeline holds (2, ``p > 1``; 1 under 1F1B): device ``k`` holds stage
    ``k`` and its mirror ``p−1−k`` (deepseek-ai/DualPipe ``examples/example_dualpipe.py``: rank ``k`` loads
    ``full_modules[k]`` and ``full_modules[pp_size − 1 − k]``; arXiv:2412.19437 Table 2, "Parameter 2×"), so every stage
    sits on two devices. A device's memory is its two stages' (:func:`dualpipe_mirror`, priced pair by pair:
    :mod:`phaze_env.placement.pair_dp`), and so is its once-per-batch sync: the data-parallel collectives and optimizer
    step of its two stages' ``P_k + P_{p−1−k}`` bytes (:class:`~phaze_env.placement.pair_dp.PairSync`), the batch
    waiting for the longest. The two copies' gradients are also summed
    (``example_dualpipe.py`` adds rank ``p−1−k``'s to rank ``k``'s), which is priced inside that collective, not as an
    exchange of its own."""
    return 2 if schedule == "dualpipe" and stages > 1 else 1


def dualpipe_mirror(stage: int, stages: int) -> int:
    """The other stage on stage ``stage``'s devices under DualPipe (:func:`parameter_copies`): ``p − 1 − k``."""
    return stages - 1 - stage


def pipeline_bubble_slots(stages: int | np.ndarray, interleave: int | np.ndarray = 1, schedule: str = "1f1b"):
    """A batch's idle time in slowest-stage times (under DualPipe the slowest device's, the mean of its two stages',
    :mod:`~phaze_env.placement.pair_dp`) under ``schedule`` (``Stack.pipeline_schedule``): 1F1B's fill and
    drain ``(p − 1)/v``, which interleaving ``v`` virtual stages per device shortens ``v``-fold (Narayanan et al. 2021
    §2.2); DualPipe's ``(p/2 − 1)·κ`` (:data:`DUALPIPE_BUBBLE_SHARE`; 0 at ``p ≤ 2``, and no pipeline at ``p = 1``).
    Elementwise for arrays."""
    if schedule == "dualpipe":
        return np.maximum(stages / 2 - 1, 0) * DUALPIPE_BUBBLE_SHARE
    return (stages - 1) / interleave


def pipeline_slots(microbatches: int | np.ndarray, stages: int | np.ndarray, interleave: int | np.ndarray = 1,
                   schedule: str = "1f1b"):
    """A batch's length in slowest-stage times: the ``m_r`` microbatches of the steady state plus the schedule's bubble
    (:func:`pipeline_bubble_slots`): ``m_r + (p − 1)/v`` under 1F1B; elementwise for arrays."""
    return microbatches + pipeline_bubble_slots(stages, interleave, schedule)


@functools.lru_cache(maxsize=4096)
def microbatch_group_size(stages: int, microbatches: int) -> int:
    """The microbatches ``N`` an interleaved schedule runs per virtual stage before moving to the next
    (Megatron-Core's ``microbatch_group_size_per_vp_stage``): the least ``N`` in ``[p, m_r]`` that leaves
    ``m_r mod N`` 0 or at least ``p`` (``schedules.py``'s two checks, ``PlanRules.microbatch_groups``), ``p`` itself
    when ``p`` divides ``m_r`` (the only group of the rule before Megatron-Core v0.10) or ``m_r < p`` (no group runs).
    The least, because each extra microbatch of a group is one more chunk in flight (:func:`in_flight_units`) and the
    bubble does not depend on ``N`` (a replay of the schedule: ``tests/test_interleave_groups.py``)."""
    return next((n for n in range(stages, microbatches + 1) if microbatches % n == 0 or microbatches % n >= stages),
                stages)


def in_flight_units(stage_from_end: int, stages: int, microbatches: int, interleave: int = 1) -> int:
    """Activation units (``1/v`` of a microbatch's activations of the stage) the stage ``stage_from_end``-th from the end
    of a ``stages``-deep pipeline holds at its peak. 1F1B: ``min(s, m_r)`` microbatches (PipeDream-Flush, Narayanan et
    al. 2021 §2.2.1). Interleaved: Megatron-LM's warm-up forwards of that rank plus the one of the steady state,
    ``2(s−1) + (v−1)N + 1`` chunks (``megatron/core/pipeline_parallel/schedules.py``,
    ``forward_backward_pipelining_with_interleaving``: ``num_warmup_microbatches = (p − rank − 1)·2 + (v − 1)·N``,
    ``N`` the microbatch group, :func:`microbatch_group_size`: ``p`` whenever ``p`` divides ``m_r``),
    at most all ``v·m_r`` — for the first stage at ``N = p``, ``p + (p−1)/v`` microbatches (Korthikanti et al. 2022 §4.2.3;
    Megatron-LM's ``theoretical_memory_usage.py``: ``1 + (p−1)/(p·v)`` times ``p``). DualPipe (no interleaving):
    also ``min(s, m_r)`` of the stage's own, on each of its two devices. deepseek-ai/DualPipe
    ``dualpipe.py`` (``DualPipe.step``): a rank ``h`` ranks from its nearer end runs ``2(p/2 − h − 1)`` forwards of
    the chunk it holds at pipeline position ``h`` (step 1), then ``h + 1`` forwards of each chunk (step 2), then one
    backward and one forward of the chunk at position ``p − 1 − h`` per step (step 3), and the main step's forward
    before its paired backward frees one: at its peak it holds ``p − h`` microbatches of the first chunk (``s = p − h``
    from the end) and ``h + 1`` of the second (``s = h + 1``) at once — ``s`` of each chunk, and ``p + 1`` in all,
    arXiv:2412.19437 Table 2's "PP + 1" (a replay of the schedule's counts:
    ``tests/test_placement_dualpipe.py``). The weight-gradient passes Zero Bubble defers (steps 3, 7, 8) keep part of a
    backward's inputs a little longer; like Table 2, not counted."""
    if interleave == 1:
        return min(stage_from_end, microbatches)
    group = microbatch_group_size(stages, microbatches)
    return min(2 * (stage_from_end - 1) + (interleave - 1) * group + 1, interleave * microbatches)


def pipeline_time_s(slots, stage_time_s, sync_s):
    """Time per batch of a pipeline: ``slots`` (:func:`pipeline_slots`) × its slowest stage's time per microbatch
    + the once-per-batch sync after the flush (data-parallel collectives and optimizer step); elementwise."""
    return slots * stage_time_s + sync_s
