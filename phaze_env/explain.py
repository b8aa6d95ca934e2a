"""Why a layer takes the time it does: one layer of a workload on one accelerator, split by unit.

:func:`explain_layer` schedules the layer's forward and backward DAGs exactly as :func:`evaluate` does
(same latency table, same ILP, same cache) and reports, for the chosen schedule:

* **time by unit** — seconds each unit is busy, summed over operators in the mode the schedule picked:
  tensor cores (GEMM compute), vector cores (vector compute), HBM (GEMM traffic, exposed first/last
  tiles, vector spills) and links (collectives);
* **what bounds it** — each operator's scheduled time attributed to its largest term: ``compute``
  (tensor or vector compute), ``memory`` (HBM) or ``latency`` (exposed tile loads/stores and link time,
  which no overlap hides);
* **utilisation** — achieved work over the layer's makespan at each unit's nominal peak (tensor-core
  FLOP/s, vector elements/s, HBM bytes/s).

The CLI face is ``python -m phaze_env.hardware explain`` (:mod:`phaze_env.hardware.__main__`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from phaze_env.attention import causal_attention, recomputed_by_backward
from phaze_env.cluster import Cluster
from phaze_env.hardware.accelerator import Accelerator
from phaze_env.hardware.estimator import vector_cycles_per_element
from phaze_env.pricing import price_ops
from phaze_env.schedule import DEFAULT_TIME_LIMIT_S, schedule_graph
from phaze_env.workloads import Workload, get_workload, model_graph
from phaze_env.workloads.graph import OpGraph

UNITS = ("tensor_cores", "vector_cores", "hbm", "links")
BOUNDS = ("compute", "memory", "latency")


@dataclass(frozen=True)
class OpExplanation:
    """One scheduled operator: its mode, time and the busy time of each unit (seconds)."""

    direction: str
    name: str
    unit: str
    parallel: bool
    start_s: float
    latency_s: float
    tensor_cores_s: float
    vector_cores_s: float
    hbm_s: float
    links_s: float
    bound: str


@dataclass(frozen=True)
class LayerExplanation:
    """One layer (forward + backward) of ``workload`` on ``accelerator`` at (tensor width, microbatch)."""

    workload: str
    layer: str
    tensor_width: int
    microbatch: int
    accelerator: dict[str, Any]
    fwd_s: float
    bwd_s: float
    busy_s: dict[str, float]  # UNITS → seconds busy
    bound_s: dict[str, float]  # BOUNDS → scheduled op-seconds attributed to each
    utilisation: dict[str, float]  # UNITS (but links) → achieved / peak over the makespan
    ops: tuple[OpExplanation, ...]

    @property
    def time_s(self) -> float:
        return self.fwd_s + self.bwd_s

    @property
    def bound(self) -> str:
        """What dominates: the bound with the most op-seconds."""
        return max(BOUNDS, key=lambda b: self.bound_s[b])

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "time_s": self.time_s, "bound": self.bound}

    def summary(self) -> str:
        total = sum(self.bound_s.values()) or 1.0
        lines = [
            f"{self.workload} layer {self.layer!r} (t={self.tensor_width}, m={self.microbatch}): "
            f"{self.time_s * 1e3:.3f} ms (fwd {self.fwd_s * 1e3:.3f} + bwd {self.bwd_s * 1e3:.3f}), "
            f"{self.bound}-bound",
            "busy time by unit: " + ", ".join(f"{u.replace('_', ' ')} {self.busy_s[u] * 1e3:.3f} ms" for u in UNITS),
            "bound (share of op time): " + ", ".join(f"{b} {self.bound_s[b] / total:.0%}" for b in BOUNDS),
            "utilisation of peak: " + ", ".join(f"{u.replace('_', ' ')} {self.utilisation[u]:.0%}" for u in UNITS[:3]),
        ]
        return "\n".join(lines)


def _op_row(direction: str, name: str, op, i: int, parallel: bool, start_s: float, latency: float, tensor, vector,
            exposed_links_s) -> OpExplanation:
    """Operator ``i``'s explanation row from its priced terms, in the mode ``parallel``."""
    tensor_s = float((tensor.compute_all_s if parallel else tensor.compute_one_s)[i, 0])
    vector_s = float((vector.compute_all_s if parallel else vector.compute_one_s)[i, 0])
    memory_s = float(tensor.memory_s[i, 0] + tensor.cast_s[i, 0]  # FP8 casts are HBM-bound kernels
                     + np.broadcast_to(tensor.eager_s, tensor.cast_s.shape)[i, 0]  # so are unfused elementwise ones
                     + (vector.hbm_all_s if parallel else vector.hbm_one_s)[i, 0])
    exposed_s = float(tensor.exposed_s[i, 0])
    links_s = float(exposed_links_s[i])
    terms = {"compute": max(tensor_s, vector_s), "memory": memory_s, "latency": exposed_s + links_s}
    bound = max(BOUNDS, key=lambda b: terms[b]) if latency > 0 else "latency"
    return OpExplanation(direction, name, op.unit, parallel, start_s, latency, tensor_s, vector_s, memory_s + exposed_s,
                         links_s, bound)


def _add_work(work: dict, op, i: int, parallel: bool, tensor, vector, fused: bool) -> None:
    """``op``'s achieved work: its GEMM FLOPs (a fused kernel's kept ones), vector cycles (none for a fused kernel,
    whose softmax runs inside it and is priced with its GEMMs) and HBM bytes."""
    work["flops"] += op.gemm_flops
    if op.unit in ("vc", "tc+vc") and not fused:
        work["vector_cycles"] += op.vector_elements * vector_cycles_per_element(op)
    work["hbm_bytes"] += float(tensor.traffic_bytes[i, 0] + (vector.spill_all_bytes if parallel else vector.spill_one_bytes)[i, 0])


def _priced(dag: OpGraph, acc: Accelerator, cluster: Cluster, layer: str, causal: bool):
    """The evaluation's own pricing of ``dag`` (same terms, same framework efficiency) and its operators as priced
    (:attr:`~phaze_env.pricing.PricedOps.ops`: with a fused attention kernel, the attention core in its fused form,
    causal as the workload's attention is; under sequence parallelism, the replicated vector operators on their share
    of the tokens), with the fused kernel's rows."""
    priced = price_ops(dag.ops, acc, cluster, layer=layer, edges=dag.edges, causal=causal)
    return priced, list(priced.ops), set(priced.fused)


def _explain_dag(direction: str, dag: OpGraph, acc: Accelerator, cluster: Cluster, time_limit_s: float, layer: str,
                 causal: bool = True):
    priced, priced_ops, fused = _priced(dag, acc, cluster, layer, causal)
    table, tensor, vector = priced.table, priced.tensor, priced.vector
    one, all_cores = table.latencies_s(0, 0)
    exposed_links_s = table.exposed_comm_s(table.device_latencies_s(0, 0)[1])
    schedule = schedule_graph(dag, one, all_cores, acc.num_tc, acc.num_vc, time_limit_s=time_limit_s)
    ops, work = [], {"flops": 0.0, "vector_cycles": 0.0, "hbm_bytes": 0.0}
    for i, op in enumerate(priced_ops):
        parallel = bool(schedule.parallel[i])
        latency = float(schedule.end_s[i] - schedule.start_s[i])
        ops.append(_op_row(direction, op.name, op, i, parallel, float(schedule.start_s[i]), latency, tensor, vector,
                           exposed_links_s))
        _add_work(work, op, i, parallel, tensor, vector, i in fused)
    return schedule.makespan_s, ops, work


def _fused_rerun(dag: OpGraph, acc: Accelerator, cluster: Cluster, layer: str, start_s: float, causal: bool):
    """What a fused kernel's backward pass reruns of the forward ``dag`` (the scores and probabilities,
    :func:`~phaze_env.attention.recomputed_by_backward`), priced as the evaluator adds it to the backward pass: each
    operator in series at its faster mode (``min`` of one core and all), after the backward DAG's makespan."""
    priced, priced_ops, fused = _priced(dag, acc, cluster, layer, causal)
    table, tensor, vector = priced.table, priced.tensor, priced.vector
    one, all_cores = table.latencies_s(0, 0)
    exposed_links_s = table.exposed_comm_s(table.device_latencies_s(0, 0)[1])
    ops, work, clock = [], {"flops": 0.0, "vector_cycles": 0.0, "hbm_bytes": 0.0}, start_s
    for i, (traced, op) in enumerate(zip(dag.ops, priced_ops)):
        if not recomputed_by_backward(traced):
            continue
        parallel = bool(all_cores[i] < one[i])
        latency = float(min(one[i], all_cores[i]))
        ops.append(_op_row("bwd", f"{op.name} (rerun by the fused backward)", op, i, parallel, clock, latency, tensor,
                           vector, exposed_links_s))
        _add_work(work, op, i, parallel, tensor, vector, i in fused)
        clock += latency
    return clock - start_s, ops, work


def explain_layer(workload: str | Workload, accelerator: Accelerator, cluster: Cluster | None = None, *,
                  layer: str = "block", tensor_width: int = 1, microbatch: int = 1, seq_len: int | None = None,
                  time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> LayerExplanation:
    """The time split of ``layer`` (a layer name of the workload's graph: e.g. ``pre``, ``block``, ``post``).

    Raises ``ValueError`` for an unknown layer name (listing the known ones) or invalid widths.
    """
    if not isinstance(accelerator, Accelerator):
        raise TypeError(f"accelerator must be an Accelerator, got {type(accelerator).__name__}")
    cluster = cluster if cluster is not None else Cluster()
    for name, value in (("tensor_width", tensor_width), ("microbatch", microbatch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    workload = get_workload(workload)
    graph = model_graph(workload, seq_len=seq_len, microbatch=microbatch, tensor_width=tensor_width,
                        folded_experts=cluster.stack.folded_experts)
    layers = {item.name: item for item in graph.layers}
    if layer not in layers:
        raise ValueError(f"{workload.name} has no layer {layer!r}; its layers are: {', '.join(layers)}")
    chosen = layers[layer]
    causal = causal_attention(workload)
    fwd_s, fwd_ops, fwd_work = _explain_dag("fwd", chosen.fwd, accelerator, cluster, time_limit_s, layer, causal)
    bwd_s, bwd_ops, bwd_work = _explain_dag("bwd", chosen.bwd, accelerator, cluster, time_limit_s, layer, causal)
    if cluster.stack.attention_efficiency:  # the fused kernel's backward reruns the scores (as evaluate prices it)
        rerun_s, rerun_ops, rerun_work = _fused_rerun(chosen.fwd, accelerator, cluster, layer, bwd_s, causal)
        bwd_s, bwd_ops = bwd_s + rerun_s, bwd_ops + rerun_ops
        bwd_work = {k: bwd_work[k] + rerun_work[k] for k in bwd_work}
    ops = tuple(fwd_ops + bwd_ops)
    makespan = fwd_s + bwd_s
    busy = {"tensor_cores": sum(o.tensor_cores_s for o in ops), "vector_cores": sum(o.vector_cores_s for o in ops),
            "hbm": sum(o.hbm_s for o in ops), "links": sum(o.links_s for o in ops)}
    bound_s = {b: sum(o.latency_s for o in ops if o.bound == b) for b in BOUNDS}
    work = {k: fwd_work[k] + bwd_work[k] for k in fwd_work}
    span = makespan if makespan > 0 else np.inf
    utilisation = {
        "tensor_cores": work["flops"] / (accelerator.peak_flops * span),
        "vector_cores": work["vector_cycles"] / (accelerator.peak_vector_elements_per_s * span),
        "hbm": work["hbm_bytes"] / (accelerator.hbm_bandwidth_Bps * span),
        "links": busy["links"] / span,
    }
    return LayerExplanation(workload.name, layer, tensor_width, microbatch, accelerator.to_dict(), fwd_s, bwd_s, busy,
                            bound_s, utilisation, ops)


__all__ = ["BOUNDS", "UNITS", "LayerExplanation", "OpExplanation", "explain_layer"]
