"""Context parallelism ``c``: one rank's share of each layer when every sequence is split across ``c`` ranks.

Megatron-Core's ``--context-parallel-size`` (ring attention: Liu et al. 2023, "Ring Attention with Blockwise
Transformers for Near-Infinite Context"). Each sequence of a microbatch is cut into ``2c`` equal chunks and
rank ``i`` holds chunks ``i`` and ``2c−1−i``, so under a causal mask every rank does the same attention work
(Megatron-Core's load balancing); hence ``c`` must divide the sequence length into ``2c`` equal chunks.

**Work and memory per rank.** A rank's layer is the model traced at ``s/c`` tokens: every operator outside
the attention core (projections, MLP, norms, embedding, LM head, loss) and every activation it stashes is
exactly the one of ``s/c`` tokens. The attention core (QKᵀ, softmax, ·V, and their gradients: the operators
of kinds :data:`ATTENTION_CORE_KINDS`) runs blockwise, the local queries against each of the ``c`` key/value
chunks in turn — ``c`` blocks of the traced ``(s/c) × (s/c)`` attention — so those operators get ``c``× the
batch, vector elements, FLOPs and bytes, and the stashed attention scores (``stash_attention_bytes``) are
``c``× the traced ones: ``(s/c)·s`` per head, ``1/c`` of the unsplit layer's. The traced eager attention
computes the full masked square, at ``c = 1`` as here, so every term is exactly ``1/c`` of the unsplit
layer's. Weights are unchanged (the ``c`` ranks hold the same weights; the placement DP all-reduces their
gradients over ``d·c`` ranks).

**Ring exchange.** Forward: ``c − 1`` hops, each passing the local key/value chunk to the next rank of the
ring; backward: ``c − 1`` hops passing keys/values and their gradients (twice the bytes), as Megatron-Core's
``AttnFuncWithCPAndKVP2P`` does. A hop goes between ranks ``t`` apart (tensor ranks innermost, then context),
priced as a point-to-point send at the slowest level the context group spans (``Cluster.p2p_s``). Megatron-Core
overlaps each hop with the attention block of the chunk already received, so here **each hop costs
max(attention block, send)** and what the ring adds to a direction is ``(c − 1) · max(0, send − block)``,
with ``block`` = the rank's attention-core time of that direction / ``c``. That exposed part is added to the
layer's forward / backward time and reported as ``cp_comm``; selective recompute repeats the forward's.

Not modelled: the receive buffers of the ring (two key/value chunks, transient), and the causal mask a fused
attention kernel would not materialise (the traced eager attention stashes an ``(s/c)²`` mask per layer,
counted with the replicated stash as at ``c = 1``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable

from phaze_env.cluster import Cluster
from phaze_env.workloads import Layer, Workload
from phaze_env.workloads.graph import ATTENTION_CORE_KINDS, Gemm, ModelGraph, Op, OpGraph, is_attention_core
CONTEXT_PARALLELS = (1, 2, 4, 8, 16)  # degrees searched when the plan leaves ``c`` free
KV_TENSORS = 2  # keys and values


def context_parallel_error(seq_len: int, c: int) -> str:
    """Why ``c`` cannot split ``seq_len``-token sequences ("" if it can)."""
    if c > 1 and seq_len % (2 * c):
        return (f"context parallel {c} needs the sequence length to split into 2c = {2 * c} equal chunks "
                f"(causal load balancing), but {seq_len} is not a multiple of {2 * c}")
    return ""


def valid_context_parallels(seq_len: int, degrees: Iterable[int]) -> list[int]:
    """The degrees that split ``seq_len`` into ``2c`` equal chunks (``c = 1`` always)."""
    return [c for c in degrees if not context_parallel_error(seq_len, c)]


def _blockwise(op: Op, c: int) -> Op:
    """``op`` done for ``c`` key/value chunks: ``c``× its batch, elements, FLOPs and bytes."""
    return replace(op, gemms=tuple(Gemm(g.batch * c, g.m, g.k, g.n) for g in op.gemms),
                   vector_elements=op.vector_elements * c,
                   vector_parts=tuple((kind, elements * c) for kind, elements in op.vector_parts),
                   flops=op.flops * c, bytes_read=op.bytes_read * c, bytes_written=op.bytes_written * c,
                   stash_bytes=op.stash_bytes * c)


def _rank_direction(graph: OpGraph, c: int) -> OpGraph:
    return OpGraph(tuple(_blockwise(op, c) if is_attention_core(op) else op for op in graph.ops), graph.edges)


def rank_layer(layer: Layer, c: int) -> Layer:
    """One context-parallel rank's ``layer`` (traced at ``s/c`` tokens) with its attention core over all ``s`` keys."""
    if c == 1:
        return layer
    fwd, bwd = _rank_direction(layer.fwd, c), _rank_direction(layer.bwd, c)
    return replace(layer, fwd=fwd, bwd=bwd, flops_fwd=fwd.flops, flops_bwd=bwd.flops,
                   activation_stash_bytes=layer.activation_stash_bytes + (c - 1) * layer.stash_attention_bytes,
                   stash_attention_bytes=c * layer.stash_attention_bytes,
                   stash_kernel_bytes=layer.stash_kernel_bytes + (c - 1) * layer.stash_kernel_attention_bytes,
                   stash_kernel_attention_bytes=c * layer.stash_kernel_attention_bytes)


def rank_graph(graph: ModelGraph, c: int) -> ModelGraph:
    """The whole model for one rank of ``c`` (``graph`` traced at ``s/c`` tokens; its ``seq_len`` stays ``s/c``)."""
    return replace(graph, layers=tuple(rank_layer(layer, c) for layer in graph.layers))


def kv_bytes_per_token(workload: Workload, tensor_width: int, bytes_per_element: int) -> int:
    """Key + value bytes of one token on one tensor rank (grouped-query heads split ``t`` ways, at least one)."""
    config = workload.config_dict
    heads = workload.num_heads
    if heads is None:
        raise ValueError(f"workload {workload.name!r} names no attention heads: cannot size its key/value chunks")
    hidden = config.get("hidden_size", config.get("n_embd"))
    head_dim = config.get("head_dim") or hidden // heads
    kv_heads = config.get("num_key_value_heads") or heads
    return KV_TENSORS * max(1, kv_heads // tensor_width) * head_dim * bytes_per_element


@dataclass(frozen=True)
class RankShare:
    """One context-parallel rank's part of a variant: its model (:func:`rank_graph`) and the bytes each forward ring hop
    of an attention layer passes (the keys and values of its ``s/c`` tokens; 0 at ``c = 1``: no ring)."""

    graph: ModelGraph
    kv_hop_bytes: float


def rank_share(graph: ModelGraph, workload: Workload, c: int) -> RankShare:
    """The share of one rank of ``c`` of ``graph`` (``workload`` traced at ``s/c`` tokens): what the evaluator takes
    from context parallelism for one variant, in one call."""
    hop_bytes = (graph.microbatch * graph.seq_len * kv_bytes_per_token(workload, graph.tensor_width,
                                                                        graph.bytes_per_element) if c > 1 else 0.0)
    return RankShare(rank_graph(graph, c), hop_bytes)


def ring_exposed_s(attention_s: float, hop_bytes: float, cluster: Cluster, tensor_width: int, c: int) -> float:
    """What ``c − 1`` ring hops of ``hop_bytes`` add to a direction whose attention core takes ``attention_s``
    on this rank: each hop overlaps one chunk's block (``attention_s / c``) and costs the longer of the two."""
    if c == 1:
        return 0.0
    send_s = cluster.network.p2p_s(hop_bytes, stride=tensor_width, hops=c - 1)
    return (c - 1) * max(0.0, send_s - attention_s / c)


__all__ = ["ATTENTION_CORE_KINDS", "CONTEXT_PARALLELS", "RankShare", "context_parallel_error", "is_attention_core",
           "kv_bytes_per_token", "rank_graph", "rank_layer", "rank_share", "ring_exposed_s", "valid_context_parallels"]
