"""Expert parallelism's token dispatch and combine: the all-to-all a stack runs, flat or node-deduplicated.

At expert-parallel degree ``e`` every rank sends each of its tokens to the ranks holding the token's ``k`` routed
experts and gets the results back (dispatch, combine; their gradients in the backward pass are the same exchanges
reversed). Two ways a stack does it (``Stack.moe_dispatch``, set by a stack profile, :mod:`phaze_env.stacks`):

* ``"alltoall"`` — every (token, expert) copy is its own message (Megatron-Core's ``alltoall`` token dispatcher:
  ``torch.distributed.all_to_all_single`` over the expert-parallel group). The buffer of ``S = E·C·h`` bytes per
  rank (``C`` tokens for each of the ``E`` experts) is exchanged on every level the group spans
  (:meth:`phaze_env.cluster.Cluster.collective_s`, ``"alltoall"``).
* ``"hierarchical"`` — a token crosses the scale-out network once per destination *node* that holds any of its
  experts and is fanned out to those experts' GPUs inside the node over NVLink (DeepEP's internode kernels,
  DeepSeek-AI, github.com/deepseek-ai/DeepEP: RDMA to the node, NVLink forwarding inside it; Megatron-Core's ``flex``
  dispatcher with its ``deepep`` and ``hybridep`` backends; DeepSeek-V3, arXiv:2412.19437 §3.2.2: a token goes over
  IB to the GPU of the same in-node index on each target node, which forwards it over NVLink). Inside the node the copies are exchanged as before; on every level above it the buffer is the tokens,
  ``S/k``, times the expected number of distinct nodes a token's experts sit on (:func:`expected_nodes_hit`).

``Stack.moe_node_limit`` ``M`` > 0 is node-limited routing (DeepSeek-V3 §2.1.2: each token is sent to at most ``M``
nodes, ``M = 4`` of its 8 groups, config ``topk_group = 4``): the router first picks ``M`` nodes and then the
``k`` experts among theirs, so at most ``M`` nodes are hit. It changes what a hierarchical dispatch sends; with a flat
one it changes nothing, so a profile must pair it with ``"hierarchical"``.

Assumption (range noted where used): uniform routing — a token's ``k`` experts are a uniformly random ``k``-subset of
the experts (of its ``M`` nodes' experts when node-limited), which the load-balancing loss aims at; a skewed router
hits fewer nodes (less traffic) and loads some ranks more (not modelled). Exact for the published Megatron-Bridge
benchmark runs, which force it (``moe_router_force_load_balancing = True``, "required for token dropless", in
scripts/performance's ``set_qwen3_common_configs``, NVIDIA-NeMo/Megatron-Bridge v0.2.0–v0.4.0); what a learned router
costs instead, measured: Qwen3-235B-A22B on 256 H100 at 16K tokens, 295 TFLOP/s per GPU forced-balanced against 237
dropless (−20 %; yanring/Megatron-MoE-ModelZoo best_practice/qwen3/readme.md, "Long Context" table).
"""

from __future__ import annotations

import math

from phaze_env import comm

MOE_DISPATCHES = ("alltoall", "hierarchical")


def expected_nodes_hit(experts: int, top_k: int, nodes: int, node_limit: int = 0) -> float:
    """Expected number of distinct nodes a token's ``top_k`` experts sit on, ``experts`` spread evenly over ``nodes``.

    A node of ``q = E/N`` experts is missed when all ``k`` choices fall among the other experts eligible to the token;
    with ``M`` eligible nodes (``M = N`` unless node-limited) that is ``C(M·q − q, k) / C(M·q, k)``, so the expectation
    is ``M · (1 − C(M·q − q, k) / C(M·q, k))`` (linearity over the ``M`` nodes)."""
    if nodes < 1 or experts % nodes:
        raise ValueError(f"{experts} experts do not spread evenly over {nodes} nodes")
    if not 1 <= top_k <= experts:
        raise ValueError(f"top-k must be between 1 and the {experts} experts, got {top_k}")
    eligible = nodes if node_limit <= 0 else min(node_limit, nodes)
    per_node = experts // nodes
    pool = eligible * per_node
    if pool < top_k:
        raise ValueError(f"node-limited routing to {eligible} of {nodes} nodes leaves {pool} experts, fewer than the "
                         f"{top_k} a token picks")
    return eligible * (1.0 - math.comb(pool - per_node, top_k) / math.comb(pool, top_k))


def dispatch_s(cluster, routed_bytes: float, group: int, stride: int, *, experts: int, top_k: int) -> float:
    """One dispatch (or combine) of the expert-parallel group of ``group`` ranks ``stride`` apart: ``routed_bytes``
    per rank are its (token, expert) copies (``E·C·h`` bytes), priced as ``cluster.stack.moe_dispatch`` runs it (module
    docstring). Each level spanned is an all-to-all phase (:func:`phaze_env.comm.alltoall_s`, Thakur et al. 2005)."""
    if group <= 1 or routed_bytes == 0:
        return 0.0
    if cluster.stack.moe_dispatch == "alltoall":
        return cluster.network.collective_s("alltoall", routed_bytes, group, stride=stride)
    if cluster.network.devices_per_node == 1 or cluster.network.torus_dims:
        raise ValueError("a hierarchical (node-deduplicated) expert dispatch needs nodes of several devices "
                         f"(devices_per_node > 1, no torus); cluster {cluster.name!r} has none")
    extents = cluster.network.extents(group, stride)
    nodes = math.prod(extents[1:])
    token_bytes = routed_bytes / top_k * expected_nodes_hit(experts, top_k, nodes, cluster.stack.moe_node_limit)
    total = 0.0
    for index, (level, extent) in enumerate(zip(cluster.network.levels, extents)):
        if extent > 1:
            total += comm.alltoall_s(routed_bytes if index == 0 else token_bytes, extent, level.bandwidth_Bps,
                                     level.latency_s)
    return total


def exposed_alltoall_s(alltoall_s: float, compute_s: float, overlapped: bool) -> float:
    """What a layer's four exchanges (dispatch and combine, forward and backward, ``alltoall_s`` each) add to the step.

    Not overlapped: all of them. Overlapped (``Stack.moe_alltoall_overlap``): a forward and a backward of two
    microbatches run interleaved, each one's exchanges under the other's compute — Megatron-Core's
    ``--overlap-moe-expert-parallel-comm`` (EP all-to-all overlap in the 1F1B steady state, NVIDIA/Megatron-LM
    megatron/core/transformer/moe/README.md; Megatron-Bridge's ``moe_a2a_overlap``) and DeepSeek-V3's DualPipe
    (arXiv:2412.19437 §3.2.1: a forward and a backward chunk paired so that all-to-all and pipeline communication are
    hidden) — so only what exceeds the layer's forward + backward compute (``compute_s``) is left. Assumption: every
    layer has a partner (the steady state; the ``p − 1`` warm-up and cool-down microbatches of a 1F1B stage have none,
    so this is optimistic by at most ``(p − 1)/m_r`` of the exchanges), and the communication kernels take no compute
    from the partner (DeepSeek-V3 §3.2.2 gives 20 of the H800's 132 SMs to them)."""
    total_s = 4 * alltoall_s
    return max(0.0, total_s - compute_s) if overlapped else total_s


def expert_kernel_bytes(routed_bytes: float, activation_bytes: float, experts: int,
                        expert_parallel: int) -> tuple[float, float]:
    """HBM bytes (forward, backward) of one MoE layer's memory-bound expert kernels per microbatch that the traced
    graph does not price (it runs the routed experts as one batched GEMM over static token slots with the activation as
    a free epilogue), as Megatron-Core runs them (NVIDIA/Megatron-LM megatron/core/transformer/moe/, read at commit
    d98e8a64dd):

    * **the local sort and unsort** (``token_dispatcher.py``, ``MoEAlltoAllTokenDispatcher.dispatch_postprocess``:
      "Permutation 2: Sort tokens by local expert", and ``combine_preprocess``: "Unpermutation 2") — the all-to-all
      delivers a rank's tokens grouped by *source* rank, the grouped GEMM needs them grouped by *local expert*, so with
      ``E/e > 1`` local experts at ``e > 1`` each of the two is a gather of the routed tokens (``sort_chunks_by_idxs``,
      Transformer Engine's fused ``moe_sort_chunks_by_index``): it reads and writes ``routed_bytes``; the backward pass
      runs each one's inverse. The flex dispatcher (DeepEP / HybridEP backends) permutes the received tokens to their
      local experts after its dispatch and back before its combine (``MoEFlexTokenDispatcher``'s ``permute`` /
      ``unpermute``): the same traffic. ``e = 1`` has no all-to-all and the first permutation already sorts by expert;
      one local expert needs no sort.
    * **the expert activation as its own kernel** (``experts.py``, ``TEGroupedMLP.forward``: ``weighted_bias_swiglu_impl``
      between ``linear_fc1`` and ``linear_fc2``; a grouped GEMM has no SwiGLU epilogue): the forward pass reads the fc1
      output (``activation_bytes``: gate and up halves) and writes half of it; the backward pass reads the incoming
      gradient (half) and the saved fc1 output and writes its gradient (``0.5 + 1 + 1``).

    Assumptions: bf16 tokens (the FP8 recipes dispatch and sort bf16 tokens unless blockwise-scaled, Megatron-Core MoE
    README "FP8 Training"); uniform routing (every rank receives ``routed_bytes``)."""
    sort = 2 * 2 * routed_bytes if expert_parallel > 1 and experts // expert_parallel > 1 else 0.0
    return sort + 1.5 * activation_bytes, sort + 2.5 * activation_bytes


__all__ = ["MOE_DISPATCHES", "dispatch_s", "expected_nodes_hit", "expert_kernel_bytes", "exposed_alltoall_s"]
