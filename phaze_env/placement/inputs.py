"""Validated inputs of the placement problem: per-layer arrays and the cluster / training settings.

All times are seconds and all sizes bytes, already for one tensor-parallel width and one microbatch
size (the tracer and the operator ILP produce them). ``param_bytes`` are bf16 weights (2 bytes per
parameter); the optimizer factors (:data:`phaze_env.cluster.OPTIMIZERS`) are multiples of ``param_bytes``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

# OPTIMIZERS is the cluster's vocabulary (Cluster.optimizer names one); imported here, it stays a constant of this
# module, which cache.model_version() hashes.
from phaze_env.cluster import OPTIMIZERS, Cluster, Optimizer
from phaze_env.plan_spec import PlanSpec

REQUIRED_LAYER_KEYS = ("fwd_s", "bwd_s", "param_bytes", "stash_bytes", "output_bytes")
OPTIONAL_LAYER_KEYS = ("attention_stash_bytes", "attention_fwd_s", "replicated_stash_bytes", "tp_comm_s")
AUTO_INTERLEAVES = (1, 2, 4)  # virtual stages per device tried when the plan leaves ``interleave`` to the DP
OPTIMIZER_STATE_FACTORS = {name: optimizer.state_factor for name, optimizer in OPTIMIZERS.items()}
GRADIENT_FACTOR = 1.0  # bf16 gradients, 2 bytes/param (ZeRO's accounting; Megatron's fp32 main_grad would be 2.0)


@dataclass(frozen=True)
class LayerArrays:
    """Per-layer quantities as float arrays (index = layer position).

    ``attention_stash_bytes``: the part of ``stash_bytes`` that selective recompute drops (the attention
    core: QKᵀ, softmax, dropout, attention over V — Korthikanti et al. 2022 §5); ``attention_fwd_s`` the
    forward time of those operators (what selective recompute adds to the backward pass);
    ``replicated_stash_bytes`` the part of ``stash_bytes`` not split by tensor parallelism (layer norms,
    dropout masks, residual inputs), which sequence parallelism splits ``t`` ways; ``tp_comm_s`` the
    tensor-parallel collectives inside ``fwd_s + bwd_s`` (reported, not optimised). All default to 0.
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

    def __len__(self) -> int:
        return len(self.fwd_s)


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


def _column(layers: Sequence[Mapping[str, Any]], key: str, default: list[float] | None = None) -> np.ndarray:
    """One per-layer quantity as floats; non-numbers, NaN, infinities and negatives raise ``ValueError``."""
    values = [layer.get(key, default[i] if default is not None else None) for i, layer in enumerate(layers)]
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


def layer_arrays(layers: Sequence[Mapping[str, Any]], *, chain: bool = True) -> LayerArrays:
    """Check ``layers`` (a list of dicts) and return them as arrays.

    ``input_bytes`` defaults, for a chain, to the previous layer's ``output_bytes`` (layer 0: its own
    output). For a DAG (``chain=False``) list order says nothing about which layer feeds which, so the
    default is the layer's own ``output_bytes`` (the chain's rule for its source, layer 0); the DAG
    stages use ``input_bytes`` only for graph sources, so the answer does not depend on the numbering.
    """
    if isinstance(layers, Mapping) or not isinstance(layers, Sequence) or len(layers) == 0:
        raise ValueError("layers must be a non-empty list of dicts")
    for index, layer in enumerate(layers):
        if not isinstance(layer, Mapping):
            raise ValueError(f"layer {index} must be a dict, got {type(layer).__name__}")
        missing = [key for key in REQUIRED_LAYER_KEYS if key not in layer]
        if missing:
            raise ValueError(f"layer {index} is missing {', '.join(missing)}")
    columns = {key: _column(layers, key) for key in REQUIRED_LAYER_KEYS}
    output = columns["output_bytes"]
    default_input = (np.concatenate((output[:1], output[:-1])) if chain else output).tolist()
    zeros = [0.0] * len(layers)
    optional = {key: _column(layers, key, zeros) for key in OPTIONAL_LAYER_KEYS}
    if np.any(optional["attention_stash_bytes"] + optional["replicated_stash_bytes"] > columns["stash_bytes"] * (1 + 1e-12)):
        raise ValueError("attention_stash_bytes + replicated_stash_bytes must not exceed a layer's stash_bytes")
    if np.any(optional["attention_fwd_s"] > columns["fwd_s"] * (1 + 1e-12)):
        raise ValueError("attention_fwd_s must not exceed a layer's fwd_s")
    arrays = LayerArrays(**columns, input_bytes=_column(layers, "input_bytes", default_input), **optional)
    if not (arrays.fwd_s + arrays.bwd_s).sum() > 0:
        raise ValueError("layers take no time: at least one layer needs a positive fwd_s or bwd_s")
    return arrays


@dataclass(frozen=True)
class Settings:
    """Everything but the layers that one placement search depends on (validated on construction).

    ``plan`` pins what the user fixed (``t`` and ``microbatch`` must match ``tensor_width`` and
    ``microbatch``); ``hbm_bandwidth_Bps`` times the optimizer step (``None``: the step is not timed).
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
    weight_copy_factor: float = 0.0  # extra per-weight copies (FP8 weights), as a multiple of the weight bytes

    def __post_init__(self) -> None:
        if not isinstance(self.cluster, Cluster):
            raise ValueError(f"cluster must be a Cluster, got {type(self.cluster).__name__}")
        if not isinstance(self.plan, PlanSpec):
            raise ValueError(f"plan must be a PlanSpec, got {type(self.plan).__name__}")
        _positive_int(self.tensor_width, "tensor_width")
        _positive_int(self.microbatch, "microbatch")
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
        for name, own in (("t", self.tensor_width), ("microbatch", self.microbatch)):
            pinned = getattr(self.plan, name)
            if pinned is not None and pinned != own:
                raise ValueError(f"the plan pins {name}={pinned} but this search is at {name}={own}")

    @property
    def n_devices(self) -> int:
        return self.cluster.n_devices

    @property
    def global_batch(self) -> int:
        return self.cluster.global_batch

    @property
    def optimizer(self) -> Optimizer:
        return OPTIMIZERS[self.cluster.optimizer]

    @property
    def sequence_parallel(self) -> bool:
        """Pinned, or on whenever ``t > 1`` (it only removes memory; its collectives cost what TP's did)."""
        return self.plan.sequence_parallel if self.plan.sequence_parallel is not None else self.tensor_width > 1

    @property
    def zero1(self) -> bool:
        """Pinned, or on (it only removes memory and optimizer-step time; same communicated bytes)."""
        return self.plan.zero1 if self.plan.zero1 is not None else True

    @property
    def interleaves(self) -> tuple[int, ...]:
        return AUTO_INTERLEAVES if self.plan.interleave is None else (self.plan.interleave,)

    def state_factor(self, data_parallel: int) -> float:
        """Weights (with their FP8 copies) + gradients + optimizer state per device, as a multiple of the stage's
        weight bytes.

        ZeRO-1 (Rajbhandari et al. 2020, "P_os") shards the optimizer state over the ``d`` replicas.
        """
        shards = data_parallel if self.zero1 else 1
        return 1.0 + self.weight_copy_factor + GRADIENT_FACTOR + self.optimizer.state_factor / shards

    def optimizer_step_s(self, param_bytes: float, data_parallel: int) -> float:
        """HBM-bound optimizer update of a stage: bytes touched / HBM bandwidth (ZeRO-1: its 1/d shard)."""
        if self.hbm_bandwidth_Bps is None:
            return 0.0
        shards = data_parallel if self.zero1 else 1
        return param_bytes * self.optimizer.step_factor / shards / self.hbm_bandwidth_Bps


def microbatches_per_replica(global_batch: int, data_parallel: int, microbatch: int) -> int:
    """``m_r = ceil(B / (d·m))``: the last microbatch of a replica is padded when ``d·m`` does not divide ``B``."""
    return -(-global_batch // (data_parallel * microbatch))
