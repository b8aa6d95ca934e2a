"""Validated inputs of the placement problem: per-layer arrays and the cluster / training settings.

All times are seconds and all sizes bytes, already for one tensor-parallel width and one microbatch
size (the tracer and the operator ILP produce them). ``param_bytes`` are bf16 weights (2 bytes per
parameter); the optimizer factors below are multiples of ``param_bytes``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

REQUIRED_LAYER_KEYS = ("fwd_s", "bwd_s", "param_bytes", "stash_bytes", "output_bytes")

# Optimizer state per device as a multiple of the bf16 weight bytes (gradients are counted separately,
# always 1x the weights). "sgd": one momentum buffer of the weights' size (PHAZE's default).
# "adam": mixed precision, fp32 master weights + two fp32 moments = 12 bytes/param = 6x bf16 weights.
OPTIMIZER_STATE_FACTORS = {"sgd": 1.0, "adam": 6.0}
GRADIENT_FACTOR = 1.0


@dataclass(frozen=True)
class LayerArrays:
    """Per-layer quantities as float arrays (index = layer position)."""

    fwd_s: np.ndarray
    bwd_s: np.ndarray
    param_bytes: np.ndarray
    stash_bytes: np.ndarray
    output_bytes: np.ndarray
    input_bytes: np.ndarray

    def __len__(self) -> int:
        return len(self.fwd_s)


@dataclass(frozen=True)
class Settings:
    """Cluster and training settings shared by every plan of one search."""

    n_devices: int
    tensor_width: int
    global_batch: int
    microbatch: int
    hbm_bytes: float
    link_bandwidth_Bps: float
    link_latency_s: float
    allow_recompute: bool
    optimizer: str
    seq_len: int | None
    model_flops_per_sample: float | None
    peak_flops: float | None

    @property
    def optimizer_factor(self) -> float:
        return OPTIMIZER_STATE_FACTORS[self.optimizer]

    @property
    def state_factor(self) -> float:
        """Weights + gradients + optimizer state, as a multiple of the weight bytes."""
        return 1.0 + GRADIENT_FACTOR + self.optimizer_factor


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


def _column(layers: Sequence[Mapping[str, Any]], key: str, default: list[float] | None = None) -> np.ndarray:
    """One per-layer quantity as floats; non-numbers, NaN, infinities and negatives raise ``ValueError``."""
    values = [layer.get(key, default[i] if default is not None else None) for i, layer in enumerate(layers)]
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
    arrays = LayerArrays(**columns, input_bytes=_column(layers, "input_bytes", default_input))
    if not (arrays.fwd_s + arrays.bwd_s).sum() > 0:
        raise ValueError("layers take no time: at least one layer needs a positive fwd_s or bwd_s")
    return arrays


def settings(
    *,
    n_devices: Any,
    tensor_width: Any,
    global_batch: Any,
    microbatch: Any,
    hbm_bytes: Any,
    link_bandwidth_Bps: Any,
    link_latency_s: Any,
    allow_recompute: bool,
    optimizer: str,
    seq_len: Any,
    model_flops_per_sample: Any,
    peak_flops: Any,
) -> Settings:
    """Check the scalar arguments of a placement search; raise ``ValueError`` with the reason."""
    hbm = _number(hbm_bytes, "hbm_bytes")
    if not hbm > 0:
        raise ValueError(f"hbm_bytes must be positive, got {hbm}")
    bandwidth = _number(link_bandwidth_Bps, "link_bandwidth_Bps")
    if not bandwidth > 0:
        raise ValueError(f"link_bandwidth_Bps must be positive (inf = free communication), got {bandwidth}")
    latency = _number(link_latency_s, "link_latency_s")
    if latency < 0 or math.isinf(latency):
        raise ValueError(f"link_latency_s must be finite and non-negative, got {latency}")
    if optimizer not in OPTIMIZER_STATE_FACTORS:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZER_STATE_FACTORS)}, got {optimizer!r}")
    flops = None if model_flops_per_sample is None else _number(model_flops_per_sample, "model_flops_per_sample")
    if flops is not None and (flops < 0 or math.isinf(flops)):
        raise ValueError(f"model_flops_per_sample must be finite and non-negative, got {flops}")
    peak = None if peak_flops is None else _number(peak_flops, "peak_flops")
    if peak is not None and not (0 < peak < math.inf):
        raise ValueError(f"peak_flops must be finite and positive, got {peak}")
    return Settings(
        n_devices=_positive_int(n_devices, "n_devices"),
        tensor_width=_positive_int(tensor_width, "tensor_width"),
        global_batch=_positive_int(global_batch, "global_batch"),
        microbatch=_positive_int(microbatch, "microbatch"),
        hbm_bytes=hbm,
        link_bandwidth_Bps=bandwidth,
        link_latency_s=latency,
        allow_recompute=bool(allow_recompute),
        optimizer=optimizer,
        seq_len=None if seq_len is None else _positive_int(seq_len, "seq_len"),
        model_flops_per_sample=flops,
        peak_flops=peak,
    )


def microbatches_per_replica(global_batch: int, data_parallel: int, microbatch: int) -> int:
    """``m_r = ceil(B / (d·m))``: the last microbatch of a replica is padded when ``d·m`` does not divide ``B``."""
    return -(-global_batch // (data_parallel * microbatch))
