"""The one pricing path: what every operator of a layer costs on an accelerator inside a cluster.

:func:`price_ops` is the only place where the estimator's per-core terms (:mod:`phaze_env.hardware.estimator`)
meet the system: the tensor-parallel collectives are priced on the cluster's levels
(:meth:`~phaze_env.cluster.Cluster.collective_s`; a tensor group is ``t`` consecutive devices, so on a DGX it
stays on NVLink) and every device-time term is divided by the cluster's ``framework_efficiency`` (the
fraction of the kernel model's speed the software stack reaches; collectives are not slowed). The
evaluator (:func:`phaze_env.evaluate.evaluate` and its ILP-free bound), the time split of
:mod:`phaze_env.explain` and the exact search's vectorised bounds (:mod:`search.bounds`) all call it, so the
three can never disagree on what an operator costs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from phaze_env.attention import fused_attention_ops, recomputed_by_backward
from phaze_env.cluster import Cluster
from phaze_env.hardware.accelerator import Accelerator
from phaze_env.hardware.estimator import LatencyTable, TensorTerms, VectorTerms, priced_table
from phaze_env.hardware.number_format import fp8_flags
from phaze_env.hardware.space import ArchSpace
from phaze_env.schedule.bounds import dag_lower_bounds_s
from phaze_env.workloads.graph import Op, is_attention_core


@dataclass(frozen=True)
class PricedOps:
    """Operators priced on every configuration asked for: the latency table the schedules use and the
    terms it is made of (seconds already divided by the framework efficiency, as the table's); ``ops``: the operators
    as priced (a fused attention kernel's core in its fused form, a sequence-parallel stack's replicated vector
    operators on their ``1/t`` of the tokens), row for row; ``fused``: the rows of the fused kernel's operators."""

    table: LatencyTable
    tensor: TensorTerms
    vector: VectorTerms
    ops: tuple = ()
    fused: tuple[int, ...] = ()

    def latencies_s(self, tc_index=0, vc_index=0) -> tuple[np.ndarray, np.ndarray]:
        """``(one_core, all_cores)`` latencies per op (:meth:`LatencyTable.latencies_s`)."""
        return self.table.latencies_s(tc_index, vc_index)


def collectives_s(ops: Sequence[Op], cluster: Cluster) -> np.ndarray:
    """Seconds of each communication op on the cluster's levels (0 for every other op)."""
    return np.array([cluster.network.collective_s(op.comm_kind, op.comm_bytes, op.comm_group) if op.unit == "comm" else 0.0
                     for op in ops], dtype=float)


def sequence_split(op: Op) -> Op:
    """``op`` as one rank runs it under sequence parallelism: a vector operator replicated over the tensor group
    (``Op.sequence_shards`` ``t > 1``: a norm, a residual add) on ``1/t`` of its tokens — its elements, traffic and
    eager traffic divided by ``t`` (Korthikanti et al. 2022, arXiv:2205.05198, §4.2.2: the layer-norm and dropout regions,
    independent along the sequence, are split along it over the tensor-parallel ranks); every other operator as it is."""
    shards = op.sequence_shards
    if shards == 1 or op.unit != "vc":
        return op
    return replace(op, vector_elements=-(-op.vector_elements // shards),
                   vector_parts=tuple((kind, -(-n // shards)) for kind, n in op.vector_parts),
                   flops=-(-op.flops // shards), bytes_read=-(-op.bytes_read // shards),
                   bytes_written=-(-op.bytes_written // shards), eager_bytes=-(-op.eager_bytes // shards))


def eager_extra_bytes(ops: Sequence[Op], skip: Sequence[int] = ()) -> np.ndarray:
    """Per op, the HBM bytes its elementwise operators add when each runs as a kernel of its own: ``Op.eager_bytes``
    less what the fused op already moves for them (a vector chain's own traffic; none for a matmul's epilogue). 0 for
    the ops in ``skip`` (the fused attention kernel's, whose softmax and scaling stay inside it)."""
    extra = np.array([max(0.0, float(op.eager_bytes - (0 if op.gemms else op.bytes_read + op.bytes_written)))
                      for op in ops], dtype=float)
    if len(skip):
        extra[np.asarray(skip)] = 0.0
    return extra


def tp_comm_overlaps(ops: Sequence[Op], edges) -> tuple[tuple[int, tuple[int, ...], int], ...]:
    """The tensor-parallel collectives a TP-overlapping stack hides (``Stack.tp_comm_overlap``): each collective over
    ``t > 1`` ranks whose inputs are GEMMs (the row-parallel projection's partial sums forward, the column-parallel
    projections' input gradients backward), with those GEMMs and the ring's ``t`` steps
    (:func:`~phaze_env.hardware.estimator.chunked_exposed_s`). A collective fed by no GEMM stays exposed."""
    producers: dict[int, list[int]] = {}
    for src, dst in edges:
        producers.setdefault(dst, []).append(src)
    overlaps = []
    for index, op in enumerate(ops):
        if op.unit != "comm" or op.comm_group < 2 or op.comm_kind not in ("allreduce", "allgather", "reducescatter"):
            continue
        gemms = tuple(sorted(src for src in producers.get(index, ()) if ops[src].gemms))
        if gemms:
            overlaps.append((index, gemms, op.comm_group))
    return tuple(overlaps)


def price_ops(ops: Sequence[Op], accelerator: Accelerator, cluster: Cluster, *, tc_configs=None,
              vc_configs=None, layer: str | None = None, edges=None, causal: bool = True) -> PricedOps:
    """Price ``ops`` on ``accelerator`` in ``cluster`` — or, with ``tc_configs``/``vc_configs`` (rows as in
    :func:`~phaze_env.hardware.estimator.latency_terms`), on every core configuration of a space that shares
    ``accelerator``'s clock, HBM, efficiencies and element size (its ``shared_parameters``). ``layer`` is the ops'
    layer name, required on an FP8 accelerator (:func:`~phaze_env.hardware.number_format.fp8_flags`).

    A cluster whose stack runs fused attention (``Stack.attention_efficiency`` > 0) prices the attention core as the
    fused kernel of :mod:`phaze_env.attention`: its kept FLOPs at that fraction of the bf16 peak, no ``s × s``
    HBM traffic; causal (the masked blocks skipped) unless ``causal`` is off (an encoder's attention,
    :func:`~phaze_env.attention.causal_attention`). A cluster whose stack runs elementwise operators unfused (``Stack.unfused_elementwise``, eager
    PyTorch) adds, in series, the HBM time of the traffic fusion saved (:func:`eager_extra_bytes`, at the chip's
    achieved HBM bandwidth): each of an operator's merged members reads its operands and writes its result.

    A cluster whose stack runs sequence parallelism's kernels (``Stack.sequence_parallel_kernels``) prices each
    vector operator replicated over the tensor group on ``1/t`` of its tokens (:func:`sequence_split`) and casts a
    replicated FP8 GEMM operand on ``1/t`` of them before the FP8 all-gather and transposes the gathered tensor
    (:func:`~phaze_env.hardware.number_format.fp8_cast_bytes`).

    A cluster whose stack overlaps its tensor-parallel collectives with their GEMMs (``Stack.tp_comm_overlap``)
    needs the ops' ``edges`` (the DAG's): each collective fed by GEMMs (:func:`tp_comm_overlaps`) costs only what the
    chunked pipeline leaves exposed, in the evaluation, the explanation and the bounds alike.

    A cluster whose stack prices its GEMMs' wave quantisation (``Stack.gemm_wave_sms`` > 0) divides each tensor-core
    operator's compute by it (:func:`~phaze_env.hardware.estimator.gemm_wave_factors`).

    Every latency is homogeneous of degree one in the device-time terms (max, sums and the epilogue
    pipeline :func:`~phaze_env.hardware.estimator.pipelined_s`), so dividing the terms by the framework
    efficiency divides each operator's device latency by it exactly.
    """
    tc = [accelerator.tc_config] if tc_configs is None else tc_configs
    vc = [accelerator.vc_config] if vc_configs is None else vc_configs
    stack = cluster.stack
    comm_s = collectives_s(ops, cluster)  # the fused and sequence-split forms below leave every collective as it is
    fused: list[int] = []
    if stack.attention_efficiency:
        ops, fused = fused_attention_ops(ops, accelerator.bytes_per_element, causal=causal)
    if stack.sequence_parallel_kernels:
        ops = [sequence_split(op) for op in ops]
    overlap = ()
    if stack.tp_comm_overlap:
        if edges is None:
            raise ValueError("a stack that overlaps tensor-parallel communication (tp_comm_overlap) prices a layer's "
                             "collectives from its DAG: pass the ops' edges")
        overlap = tp_comm_overlaps(ops, edges)
    # each merged elementwise operator its own HBM-bound kernel, in series (eager PyTorch)
    eager_bytes = eager_extra_bytes(ops, fused) if stack.unfused_elementwise else None
    return PricedOps(*priced_table(ops, accelerator, tc, vc, comm_s, fp8=fp8_flags(ops, layer, accelerator.number_format),
                                   sequence_parallel=stack.sequence_parallel_kernels, comm_overlap=overlap, fused=fused,
                                   fused_efficiency=stack.attention_efficiency, eager_bytes=eager_bytes,
                                   slowdown=1.0 / stack.framework_efficiency, wave_sms=stack.gemm_wave_sms),
                     ops=tuple(ops), fused=tuple(fused))


def layer_time_bounds_s(graph, space: ArchSpace, cluster: Cluster,
                        recompute_modes: tuple[str, ...] = ("none",)) -> np.ndarray:
    """Lower bound of each layer's fwd+bwd time (rows: the graph's layers) per architecture (columns).

    Operators are priced by :func:`price_ops`, the evaluator's own pricing: the same
    per-op latencies (framework efficiency included, collectives on the cluster's levels) for every
    architecture (on the space's unique core configurations, :attr:`~phaze_env.hardware.space.ArchSpace.tc_configs`
    and ``vc_configs``), so each entry bounds the schedule ``evaluate`` finds for that layer from below.

    ``recompute_modes`` without ``"none"`` (a stack whose plans always recompute, e.g. fused attention priced as
    selective recompute): every stage's backward pass repeats at least ``min(A, F)`` of each layer, the least of what
    selective (``A``: the attention core's operators at their shortest, capped at the forward time, as ``evaluate``
    prices it) and full recompute (``F``: the forward pass, at least its DAG bound) add — so it is added (eager
    attention only). A fused kernel's backward reruns its scores in every mode (:mod:`phaze_env.attention`): each
    architecture's rerun, the forward's recomputed operators at their faster mode, is added as ``evaluate`` adds it.
    A fused kernel is priced causal here whatever the model: an encoder's (every score block) takes longer, so its
    bound stays a bound.
    """
    arrays = space.arrays
    (tc_rows, tc_index), (vc_rows, vc_index) = space.tc_configs, space.vc_configs
    fused = bool(cluster.stack.attention_efficiency)
    always_recomputes = "none" not in recompute_modes and not fused
    rows = []
    for layer in graph.layers:
        layer_s = np.zeros(len(space))
        for direction in ("fwd", "bwd"):
            dag = getattr(layer, direction)
            if not dag.ops:
                continue
            priced = price_ops(dag.ops, space.base, cluster, tc_configs=tc_rows, vc_configs=vc_rows, layer=layer.name,
                               edges=dag.edges)
            one, all_cores = priced.latencies_s(tc_index.ravel(), vc_index.ravel())
            dag_s = dag_lower_bounds_s(dag, one, all_cores, arrays["num_tc"], arrays["num_vc"])
            layer_s += dag_s
            if fused and direction == "fwd":  # the kernel's backward reruns its scores in every mode, as evaluate adds
                rerun = np.array([recomputed_by_backward(op) for op in dag.ops])
                layer_s += np.minimum(one[rerun], all_cores[rerun]).sum(axis=0)
            elif always_recomputes and direction == "fwd":
                core = np.array([is_attention_core(op) for op in dag.ops])
                layer_s += np.minimum(np.minimum(one[core], all_cores[core]).sum(axis=0), dag_s)
        rows.append(layer_s)
    return np.array(rows)


def shared_layer_time_bounds_s(graph, graph_key, space: ArchSpace, cluster: Cluster,
                               recompute_modes: tuple[str, ...] = ("none",), memo: dict | None = None) -> np.ndarray:
    """:func:`layer_time_bounds_s` of ``graph``, computed once per ``memo`` for every call that prices it alike — the
    system space's bounding groups on different networks share their architectures and base, and most graphs price no
    collective (the network enters the layer bounds only through the graph's communication operators,
    :func:`collectives_s`; the stack through the pricing). ``graph_key`` tells the graph apart among the memo's (one
    ``memo`` serves one workload and sequence length: the search keys it by tensor width, microbatch and
    expert-parallel degree); the rest of the key is everything the pricing reads, so a shared entry is the array the
    call would compute. ``memo`` None: computed, not kept."""
    collectives = any(op.unit == "comm" for layer in graph.layers for dag in (layer.fwd, layer.bwd) for op in dag.ops)
    key = (graph_key, space, cluster.stack, cluster.network if collectives else None, tuple(recompute_modes))
    memo = {} if memo is None else memo
    if (hit := memo.get(key)) is None:
        hit = memo[key] = layer_time_bounds_s(graph, space, cluster, recompute_modes)
    return hit


__all__ = ["PricedOps", "collectives_s", "eager_extra_bytes", "layer_time_bounds_s", "price_ops", "sequence_split",
           "shared_layer_time_bounds_s", "tp_comm_overlaps"]
