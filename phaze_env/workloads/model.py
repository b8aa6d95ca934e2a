"""From a trace to per-layer forward/backward operator graphs at a tensor-parallel width.

Steps, each a small function:

1. **Tensor parallelism (Megatron-LM, Shoeybi et al. 2019)** — column-parallel linears split their
   output features, row-parallel linears their input features, the attention and MLP interiors are
   split by heads / hidden units, the word embedding and LM head split the vocabulary (padded up as
   Megatron pads it). Collectives go where Megatron puts them: ``g`` (all-reduce forward, identity
   backward) after every row-parallel linear and after the vocabulary-parallel embedding; ``f``
   (identity forward, all-reduce backward) before the column-parallel linears of one input; the
   vocabulary-parallel cross-entropy all-reduces three per-token fp32 values.
2. **Fusion** — a matmul absorbs its elementwise epilogue (bias, activation, residual add) and becomes
   one ``tc+vc`` operator, as PHAZE does; chains of vector operators merge into one vector operator.
   A merge is only made when it keeps the graph acyclic.
3. **Backward** — every fused operator gets its gradient operator: matmuls need dX and dW GEMMs (2× the
   forward FLOPs), vector work about twice its forward elements, the embedding a scatter-add;
   collectives are replaced by their conjugates; edges are reversed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from phaze_env.workloads.graph import Gemm, Layer, Op, OpGraph
from phaze_env.workloads.trace import REDUCED_ROLES, SPLIT_ROLES, RawOp, TensorParallelError, Trace

CE_ALLREDUCE_BYTES_PER_TOKEN = 3 * 4  # max, sum of exponentials, target logit (fp32) per token


@dataclass
class _Node:
    """A forward operator being built (mutable until it becomes an :class:`Op`)."""

    name: str
    kind: str
    gemms: list[tuple[int, int, int, int]] = field(default_factory=list)
    vector: list[tuple[str, int, int]] = field(default_factory=list)  # (kind, elements, flops per element)
    comm_fwd: tuple[str, int] | None = None  # (collective, bytes)
    comm_bwd: tuple[str, int] | None = None
    embedding: bool = False
    saved_bytes: dict[str, int] = field(default_factory=dict)
    replicated_saved: set[str] = field(default_factory=set)  # saved tensors not split by tensor parallelism
    attention_saved: set[str] = field(default_factory=set)  # saved attention scores/probabilities (…, s, s)
    gemm_input_saved: set[str] = field(default_factory=set)  # saved by a weight GEMM as its activation input
    other_saved: set[str] = field(default_factory=set)  # saved by any other operator (or by the router's GEMM)
    param_bytes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    in_shapes: list[tuple[int, ...]] = field(default_factory=list)
    out_shape: tuple[int, ...] = ()
    members: list[str] = field(default_factory=list)
    eager_read: int = 0  # bytes its traced operators read as kernels of their own (see Op.eager_bytes)
    eager_written: int = 0
    moe_role: str = ""  # see RawOp.moe_role; fusion keeps router, expert and dense work in separate operators
    sequence_shards: int = 1  # see Op.sequence_shards (vector work replicated over the t ranks: t)
    cast_source: str = ""  # a weight GEMM's activation operand: the op that produces it (forward)
    cast_shards_fwd: int = 1  # see Op.cast_shards: t when that operand is replicated over the t ranks
    cast_shards_bwd: int = 1  # t when the GEMM's output (its gradient: the backward cast) is replicated
    cast_shared: bool = False  # see Op.cast_shared

    @property
    def is_comm(self) -> bool:
        return self.comm_fwd is not None or self.comm_bwd is not None

    @property
    def fwd_unit(self) -> str:
        if self.is_comm:
            return "comm"
        if self.gemms:
            return "tc+vc" if self.vector else "tc"
        return "vc"


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def check_tensor_width(trace: Trace, tensor_width: int, heads: int | None) -> None:
    """Reject widths that do not divide the attention heads or the split hidden dimensions, and any width
    above 1 for a model with a block matmul that has no Megatron role."""
    if tensor_width < 1 or tensor_width & (tensor_width - 1):
        raise ValueError(f"tensor-parallel width must be a power of two ≥ 1, got {tensor_width}")
    if tensor_width > 1 and trace.unsplittable:
        module, reason = next(iter(trace.unsplittable.items()))
        raise TensorParallelError(f"tensor-parallel width {tensor_width}: cannot split the matmul of {module} "
                                  f"({reason}); this model is only supported at tensor-parallel width 1")
    if heads is not None and heads % tensor_width:
        raise ValueError(f"tensor-parallel width {tensor_width} does not divide the {heads} attention heads")
    for op in trace.ops:
        if op.role == "column" and op.gemms[0][3] % tensor_width:
            raise ValueError(f"tensor-parallel width {tensor_width} does not divide the {op.gemms[0][3]} "
                             f"output features of {op.module}")
        if op.role == "row" and op.gemms[0][2] % tensor_width:
            raise ValueError(f"tensor-parallel width {tensor_width} does not divide the {op.gemms[0][2]} "
                             f"input features of {op.module}")


def split_nodes(region_ops: list[RawOp], all_sharded: set[str], trace: Trace, t: int, bpe: int,
                tokens: int, folded: bool = False) -> tuple[list[_Node], list[tuple[str, str]]]:
    """The region's forward nodes at width ``t`` with Megatron's collectives, and their edges (by name). ``folded``
    (``Stack.folded_experts``, expert tensor parallelism 1): the routed experts whole on the rank's ``1/t`` of the
    tokens (:func:`_folded_expert_node`), with no tensor-parallel collective around them."""
    nodes: list[_Node] = []
    edges: list[tuple[str, str]] = []
    f_ops: dict[str, str] = {}  # input tensor → its f collective (one per tensor, shared by q, k, v)
    alias: dict[str, str] = {}  # op → the node its consumers wait for (its g collective, if any)
    local = {op.name for op in region_ops}
    entries = _expert_entries(region_ops)
    # Megatron-Core reduces the experts' partial sums once, after the combine, not after each expert's down projection.
    combines = {i for op in region_ops if op.moe_role != "expert" for i in op.inputs if i in entries}
    if folded:  # the experts see the rank's own tokens: no f before them, no g after the combine
        entries, combines = {}, set()
    for op in region_ops:
        folded_expert = folded and op.moe_role == "expert"
        node = _folded_expert_node(op, trace, t, bpe) if folded_expert else _node_at_width(op, all_sharded, trace, t, bpe)
        sources = [alias.get(i, i) for i in op.inputs if i in local]
        if t > 1 and op.role in SPLIT_ROLES and not folded_expert:
            # an expert's f is on the tokens entering the MoE block (the gradient of the dispatch is summed there)
            f_tensors = sorted(entries[op.name]) if op.moe_role == "expert" else op.inputs
            sources = sources if op.moe_role == "expert" else []
            for tensor in f_tensors:
                if tensor not in f_ops:
                    f = _Node(f"f_allreduce_{tensor}", "comm", comm_bwd=("allreduce", trace.tensor_elements[tensor] * bpe))
                    f_ops[tensor] = f.name
                    nodes.append(f)
                    if tensor in local:
                        edges.append((alias.get(tensor, tensor), f.name))
                sources.append(f_ops[tensor])
        edges.extend((src, op.name) for src in sources)
        nodes.append(node)
        if t > 1 and ((op.role in REDUCED_ROLES and op.moe_role != "expert") or op.name in combines):
            g = _Node(f"g_allreduce_{op.name}", "comm", comm_fwd=("allreduce", op.out_elements * bpe))
            nodes.append(g)
            edges.append((op.name, g.name))
            alias[op.name] = g.name
        if t > 1 and op.vector_kind == "loss" and op.name in all_sharded:
            ce = _Node(f"ce_allreduce_{op.name}", "comm", comm_fwd=("allreduce", tokens * CE_ALLREDUCE_BYTES_PER_TOKEN))
            nodes.append(ce)
            edges.append((op.name, ce.name))
    return nodes, list(dict.fromkeys(edges))


def _folded_expert_node(op: RawOp, trace: Trace, t: int, bpe: int) -> _Node:
    """A routed expert's operator as a rank of a folded expert grid runs it (expert tensor parallelism 1, Megatron-Core's
    MoE parallel folding): its weights whole, on the rank's ``1/t`` of the microbatch's tokens — each of the ``t``
    tensor ranks routes its own sequence-parallel shard. Every GEMM ``(E, C, k, n)`` becomes ``(E, ⌈C/t⌉, k, n)``
    (:func:`at_expert_rank` then takes ``E/e`` experts on ``e`` times those tokens); its activations, vector work and
    FP8 casts are the rank's ``1/t`` (cast on its own tokens: nothing gathered), its parameters whole. The stash is the
    width-``t`` node's: the expert tensors that width splits by ``t`` and those it keeps replicated, which sequence
    parallelism (required with MoE at ``t > 1``) splits by ``t``, are the rank's ``1/t`` as here."""
    node = _node_at_width(op, set(), trace, 1, bpe)
    stashed = _node_at_width(op, {op.name, *op.inputs, *op.saved}, trace, t, bpe) if t > 1 else node
    node.gemms = [(b, _ceil_div(m, t), k, n) for b, m, k, n in node.gemms]
    node.vector = [(kind, _ceil_div(elements, t), flops) for kind, elements, flops in node.vector]
    activations = node.bytes_read - node.param_bytes
    node.bytes_read = node.param_bytes + _ceil_div(activations, t)
    node.bytes_written = _ceil_div(node.bytes_written, t)
    if not node.gemms:
        node.eager_read, node.eager_written = node.bytes_read, node.bytes_written
    node.cast_shards_fwd = node.cast_shards_bwd = 1
    node.saved_bytes, node.replicated_saved = stashed.saved_bytes, set()
    return node


def _expert_entries(region_ops: list[RawOp]) -> dict[str, set[str]]:
    """Each routed-expert op → the tensors from outside the experts it derives from (through expert ops)."""
    entries: dict[str, set[str]] = {}
    for op in region_ops:
        if op.moe_role == "expert":
            entries[op.name] = set().union(*(entries.get(i, {i}) for i in op.inputs))
    return entries


def _node_at_width(op: RawOp, all_sharded: set[str], trace: Trace, t: int, bpe: int) -> _Node:
    node = _Node(op.name, op.kind, in_shapes=list(op.in_shapes), out_shape=op.out_shape, members=[op.name],
                 moe_role=op.moe_role)
    node.gemms = [_split_gemm(g, op, t, op.name in all_sharded) for g in op.gemms]
    if op.vector_elements:
        split = 1 if op.role == "row" or op.name not in all_sharded else t
        node.vector.append((op.vector_kind, _ceil_div(op.vector_elements, split), op.flops_per_element))
        if not op.gemms and split == 1 and op.vector_kind != "gather":  # an embedding's lookup is on all tokens
            node.sequence_shards = t
    if op.gemms and op.params and op.inputs:  # a weight GEMM: its activation operand, replicated or split
        node.cast_source = op.inputs[0]
        node.cast_shards_fwd = 1 if op.inputs[0] in all_sharded else t
        node.cast_shards_bwd = 1 if op.name in all_sharded else t
    node.embedding = op.vector_kind == "gather"
    node.param_bytes = sum(_param_split(fqn, n, op, t) for fqn, n in op.params.items()) * bpe
    node.bytes_written = _ceil_div(op.out_elements, t if op.name in all_sharded else 1) * bpe
    node.bytes_read = node.param_bytes + bpe * sum(
        _ceil_div(trace.tensor_elements.get(i, 0), t if i in all_sharded else 1) for i in op.inputs)
    if not node.gemms:  # a matmul's own operands are the tensor-core model's; the elementwise kernels' are eager traffic
        node.eager_read, node.eager_written = node.bytes_read, node.bytes_written
    shapes = {raw.name: raw.out_shape for raw in trace.ops}
    for tensor in op.saved:
        elements = trace.tensor_elements.get(tensor, op.in_elements)
        node.saved_bytes[tensor] = _ceil_div(elements, t if tensor in all_sharded else 1) * bpe
        if tensor not in all_sharded:
            node.replicated_saved.add(tensor)
        (node.gemm_input_saved if _weight_gemm_input(op, tensor) else node.other_saved).add(tensor)
        shape = shapes.get(tensor, ())
        # what selective recompute drops (Korthikanti et al. 2022); an expert's (experts, tokens, features) is not it
        if len(shape) >= 3 and shape[-1] == shape[-2] and not op.moe_role:
            node.attention_saved.add(tensor)
    return node


def _weight_gemm_input(op: RawOp, tensor: str) -> bool:
    """Whether ``op`` keeps ``tensor`` for its backward pass as the activation operand of a weight GEMM (a Linear's
    input, for its weight gradient), the tensor Transformer Engine keeps in FP8 in an FP8 layer
    (:func:`phaze_env.hardware.number_format.fp8_stash_saving_bytes`). Not the MoE router's GEMM: Megatron-Core's
    router is a plain ``torch`` linear in the compute precision (``megatron/core/transformer/moe/router.py``)."""
    return (bool(op.gemms) and bool(op.params) and op.moe_role != "router"
            and (tensor in op.inputs or tensor.removeprefix("in:") in op.inputs))


def _split_gemm(gemm: tuple[int, int, int, int], op: RawOp, t: int, sharded: bool) -> tuple[int, int, int, int]:
    b, m, k, n = gemm
    if op.role == "column":
        return (b, m, k, n // t)
    if op.role == "row":
        return (b, m, k // t, n)
    if op.role == "vocab_head":
        return (b, m, k, _ceil_div(n, t))
    if sharded:
        return (_ceil_div(b, t), m, k, n)  # attention interior: split by heads
    return gemm


def _param_split(fqn: str, elements: int, op: RawOp, t: int) -> int:
    if op.role in ("column", "vocab_head", "vocab_embedding"):
        return _ceil_div(elements, t)
    if op.role == "row" and not fqn.endswith("bias"):
        return elements // t
    return elements


def at_expert_rank(nodes: list[_Node], experts: int, expert_parallel: int) -> list[_Node]:
    """The routed experts' operators of ``nodes`` at the per-rank shape of expert parallelism ``e``: a device holds
    ``E/e`` experts and receives, from the ``e`` ranks of its group, ``e·C`` tokens for each (the same token slots,
    ``E·C``, as the traced ``E`` experts on ``C`` tokens). Each expert GEMM ``(E, C, k, n)`` becomes the grouped GEMM
    ``(E/e, e·C, k, n)`` and reads only the local experts' weights (``bytes_read`` less ``(1 − 1/e)`` of its
    parameters); its FLOPs, vector work and written bytes are unchanged. ``param_bytes`` stays the whole layer's
    (what :class:`~phaze_env.workloads.graph.Layer` sums; the placement shards it by ``e``).

    Priced as a batched GEMM of ``E/e`` equal groups, at the rate of the dense kernel: a grouped GEMM over uniform
    groups runs at cuBLAS batched-GEMM speed (MegaBlocks, Gale et al. 2023, MLSys, kernel benchmarks: its block-sparse
    kernels reach 98.6 % of cuBLAS batched-matmul throughput on average, 91–104 %; Megatron-Core's
    ``moe_grouped_gemm`` runs CUTLASS grouped GEMMs, NVIDIA/Megatron-LM megatron/core/transformer/moe/README.md).
    Assumption: uniform routing (every local expert gets ``e·C`` tokens); a skewed load's slowest rank is not modelled.
    """
    e = expert_parallel
    if e == 1:
        return nodes
    shaped = []
    for node in nodes:
        if node.moe_role != "expert" or not node.gemms:
            shaped.append(node)
            continue
        if any(b != experts for b, *_ in node.gemms) or experts % e:
            raise ValueError(f"expert operator {node.name!r}: GEMMs {node.gemms} are not batched over the {experts} "
                             f"experts that expert parallelism {e} splits")
        gemms = [(b // e, m * e, k, n) for b, m, k, n in node.gemms]
        local_params = node.param_bytes // e
        shaped.append(replace(node, gemms=gemms, bytes_read=node.bytes_read - node.param_bytes + local_params))
    return shaped


# ---------------------------------------------------------------------------------------------- fusion

def fuse(nodes: list[_Node], edges: list[tuple[str, str]]) -> tuple[list[_Node], list[tuple[str, str]]]:
    """Merge elementwise epilogues into matmuls and chains of vector ops, keeping the graph acyclic."""
    group = {n.name: n.name for n in nodes}
    by_name = {n.name: n for n in nodes}
    position = {n.name: i for i, n in enumerate(nodes)}
    preds: dict[str, set[str]] = {n.name: set() for n in nodes}
    for a, b in edges:
        preds[b].add(a)

    def reaches(src: str, dst: str) -> bool:
        """Does group ``src`` reach group ``dst`` through the current (grouped) graph?"""
        succ: dict[str, set[str]] = {}
        for a, b in edges:
            ga, gb = group[a], group[b]
            if ga != gb:
                succ.setdefault(ga, set()).add(gb)
        stack, seen = [src], {src}
        while stack:
            for nxt in succ.get(stack.pop(), ()):
                if nxt == dst:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return False

    for node in nodes:
        if node.is_comm or node.gemms or node.embedding:
            continue
        pred_groups = {group[p] for p in preds[node.name]}
        # matmul hosts first, then graph order: a set's order would change with PYTHONHASHSEED
        for target in sorted(pred_groups, key=lambda g: (-len(by_name[g].gemms), position[g])):
            host = by_name[target]
            if host.is_comm or (host.gemms and node.kind != "elementwise") or host.moe_role != node.moe_role:
                continue
            others = pred_groups - {target}
            if any(reaches(target, other) for other in others):
                continue
            # contract: node joins the host's group
            host.vector.extend(node.vector)
            host.members.extend(node.members)
            host.sequence_shards = min(host.sequence_shards, node.sequence_shards)  # a GEMM host's stays 1
            host.saved_bytes.update(node.saved_bytes)
            host.replicated_saved |= node.replicated_saved
            host.attention_saved |= node.attention_saved
            host.gemm_input_saved |= node.gemm_input_saved
            host.other_saved |= node.other_saved
            host.param_bytes += node.param_bytes
            host.bytes_read += max(0, node.bytes_read - host.bytes_written)  # the host's output stays on chip
            host.eager_read += node.eager_read  # run eagerly, each member reads and writes its own tensors
            host.eager_written += node.eager_written
            host.bytes_written = node.bytes_written
            host.out_shape = node.out_shape
            for name, g in group.items():
                if g == node.name:
                    group[name] = target
            break
    fused = [by_name[name] for name in dict.fromkeys(group[n.name] for n in nodes)]
    fused_edges = list(dict.fromkeys((group[a], group[b]) for a, b in edges if group[a] != group[b]))
    return fused, fused_edges


# ------------------------------------------------------------------------------------- ops and layers

def _vector_ops(parts: list[tuple[str, int, int]]) -> tuple[int, str, tuple[tuple[str, int], ...]]:
    merged: dict[str, int] = {}
    for kind, elements, _ in parts:
        merged[kind] = merged.get(kind, 0) + elements
    total = sum(merged.values())
    kinds = list(merged)
    return total, (kinds[0] if len(kinds) == 1 else ("mixed" if kinds else "")), tuple(merged.items())


def forward_op(node: _Node, tensor_width: int) -> Op | None:
    if node.is_comm:
        if node.comm_fwd is None:
            return None
        kind, payload = node.comm_fwd
        return Op(node.name, "comm", "comm", comm_kind=kind, comm_bytes=payload, comm_group=tensor_width,
                  bytes_read=payload, bytes_written=payload)
    elements, vkind, parts = _vector_ops(node.vector)
    gemms = tuple(Gemm(*g) for g in node.gemms)
    flops = sum(g.flops for g in gemms) + sum(e * f for _, e, f in node.vector)
    return Op(node.name, node.kind, node.fwd_unit, gemms=gemms, vector_elements=elements, vector_kind=vkind,
              vector_parts=parts, flops=flops, bytes_read=node.bytes_read, bytes_written=node.bytes_written,
              eager_bytes=node.eager_read + node.eager_written,
              param_bytes=node.param_bytes, stash_bytes=sum(node.saved_bytes.values()),
              in_shapes=tuple(tuple(s) for s in node.in_shapes), out_shape=tuple(node.out_shape),
              fused=tuple(node.members), sequence_shards=node.sequence_shards, cast_shards=node.cast_shards_fwd,
              cast_shared=node.cast_shared)


def backward_op(node: _Node, tensor_width: int) -> Op | None:
    """The gradient operator of a forward node (None when it has no backward work)."""
    if node.is_comm:
        if node.comm_bwd is None:
            return None
        kind, payload = node.comm_bwd
        return Op(f"grad_{node.name}", "comm", "comm", comm_kind=kind, comm_bytes=payload, comm_group=tensor_width,
                  bytes_read=payload, bytes_written=payload)
    gemms: list[Gemm] = []
    for b, m, k, n in node.gemms:
        gemms += [Gemm(b, m, n, k), Gemm(b, k, m, n)]  # dA = dC·Bᵀ, dB = Aᵀ·dC
    parts = [(kind, 2 * e, 2 * f) for kind, e, f in node.vector]
    if node.embedding:
        parts = [("gather", e, 1) for _, e, _ in node.vector]  # scatter-add of the output gradient
    elements, vkind, vparts = _vector_ops(parts)
    flops = sum(g.flops for g in gemms) + sum(e * f // 2 for _, e, f in parts)
    unit = ("tc+vc" if parts else "tc") if gemms else "vc"
    return Op(f"grad_{node.name}", node.kind, unit, gemms=tuple(gemms), vector_elements=elements, vector_kind=vkind,
              vector_parts=vparts, flops=flops, bytes_read=node.bytes_read + node.bytes_written,
              bytes_written=node.bytes_read, fused=tuple(node.members), sequence_shards=node.sequence_shards,
              cast_shards=node.cast_shards_bwd,
              eager_bytes=2 * node.eager_read + node.eager_written)  # each member's backward, as bytes_read/_written


def induced_graph(ops: list[Op | None], edges: list[tuple[int, int]]) -> OpGraph:
    """The DAG on the non-None ops, bridging edges through dropped ones (transitively)."""
    n = len(ops)
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        succ[a].append(b)
    keep = [i for i in range(n) if ops[i] is not None]
    index = {old: new for new, old in enumerate(keep)}
    new_edges: set[tuple[int, int]] = set()
    for src in keep:
        stack, seen = list(succ[src]), set()
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if ops[v] is not None:
                new_edges.add((index[src], index[v]))
            else:
                stack.extend(succ[v])
    return OpGraph(tuple(ops[i] for i in keep), tuple(sorted(new_edges)))


def kernel_recomputed(nodes: list[_Node], region_ops: list[RawOp]) -> set[str]:
    """The saved tensors a fused kernel recomputes in its backward pass instead of stashing them.

    A fused operator (a matmul with its elementwise epilogue, or a chain of vector operators) runs as one kernel; its
    backward kernel rebuilds the intermediates of its elementwise members from what it keeps. Megatron-LM's fused
    bias-GeLU and bias-SwiGLU keep only their input (``megatron/core/fusions/fused_bias_gelu.py``,
    ``fused_bias_swiglu.py``: ``ctx.save_for_backward(input, bias)``, the activation recomputed in the backward
    function); Transformer Engine's normalisations keep their input and the row statistics (``ln_out`` is kept by the
    linear that reads it); PyTorch's compiler does the same by choice (AOTAutograd's min-cut partitioner recomputes
    fusible pointwise operators rather than saving them). A tensor is recomputed when an elementwise or reduction
    member produces it, only members of the same fused operator save it, and it can be rebuilt from tensors that stay
    saved (its producer's inputs are kept, or are themselves rebuilt inside the operator); a matmul's output is
    always kept. Eager PyTorch, which runs every operator as its own kernel, keeps them all
    (``Stack.unfused_elementwise``)."""
    group = {member: node.name for node in nodes for member in node.members}
    fused = {node.name for node in nodes if len(node.members) > 1}
    by_name = {op.name: op for op in region_ops}
    savers: dict[str, set[str]] = {}
    for node in nodes:
        for tensor in node.saved_bytes:
            savers.setdefault(tensor, set()).add(node.name)
    candidates = {tensor for tensor, nodes_ in savers.items()
                  if tensor in by_name and not by_name[tensor].gemms and group.get(tensor) in fused
                  and nodes_ == {group[tensor]}}
    kept = set(savers) - candidates

    def available(tensor: str, home: str) -> bool:
        """Whether the backward kernel of fused operator ``home`` has ``tensor``: kept, or rebuilt from what it has."""
        if tensor in kept:
            return True
        op = by_name.get(tensor)
        if op is None or op.gemms or group.get(tensor) != home:
            return False
        return all(available(i, home) for i in op.inputs)

    recomputed = set()
    position = {op.name: index for index, op in enumerate(region_ops)}
    for tensor in sorted(candidates, key=position.get):  # inputs first: each decision sees the earlier ones
        if all(available(i, group[tensor]) for i in by_name[tensor].inputs):
            recomputed.add(tensor)
        else:
            kept.add(tensor)
    return recomputed


UP_PROJECTION_MODULES = ("q_b_proj", "kv_b_proj")
"""The MLA up-projections (DeepSeek-V2/V3, Hugging Face ``modeling_deepseek_v2``/``_v3``: ``q_b_proj`` lifts the query
latent to the heads' queries, ``kv_b_proj`` the key-value latent to the heads' keys and values)."""


def norm_up_projection_recompute(nodes: list[_Node], region_ops: list[RawOp]) -> tuple[set[str], tuple[str, ...]]:
    """(the tensors, fused forward operators) a stack that reruns every RMSNorm and the MLA up-projections in the
    backward pass rebuilds instead of keeping (DeepSeek-V3, arXiv:2412.19437 §3.2.3; ``Stack.
    recompute_norms_up_projections``): the outputs of the normalisation modules (a module named ``…norm``) and of the
    up-projections (:data:`UP_PROJECTION_MODULES`), and what the attention's queries and keys are built from them up to
    the attention core (the rotary embedding and the concatenation: elementwise and data operators fed by an
    up-projection's output). A fused operator is rerun when it computes one of them and every weight GEMM in it is
    one of them (a norm's first step fused into the GEMM before it is not counted; nor is the shared key's rotary
    embedding, a few elementwise operators on the key-value latent's kept output)."""
    norms: set[str] = set()
    lifted: set[str] = set()  # the up-projections' outputs and what q and k are built from them
    for op in region_ops:  # traced order: producers first
        module = op.module.rsplit(".", 1)[-1]
        if module.endswith("norm"):
            norms.add(op.name)
        elif module in UP_PROJECTION_MODULES or (op.kind in ("elementwise", "data") and lifted.intersection(op.inputs)):
            lifted.add(op.name)
    rebuilt = norms | lifted
    return rebuilt, _rerun_nodes(nodes, region_ops, rebuilt)


def _rerun_nodes(nodes: list[_Node], region_ops: list[RawOp], rebuilt: set[str]) -> tuple[str, ...]:
    """The fused forward operators a stack reruns to rebuild the tensors ``rebuilt``: each that computes one of them
    and every weight GEMM of which is one of them (a fused operator whose GEMM's output is kept is not rerun for the
    elementwise tail fused into it)."""
    by_name = {op.name: op for op in region_ops}
    return tuple(node.name for node in nodes if rebuilt.intersection(node.members)
                 and all(member in rebuilt for member in node.members if by_name[member].gemms))


def moe_block_recompute(nodes: list[_Node], region_ops: list[RawOp]) -> tuple[set[str], tuple[str, ...]]:
    """(the tensors, fused forward operators) a stack that reruns the whole MoE block in the backward pass rebuilds
    instead of keeping (Megatron-Core's ``--recompute-modules moe``, ``Stack.recompute_moe``): every tensor produced by
    an operator of the block — the module the router sits in and everything under it (router, dispatch, routed and
    shared experts, combine) — while the block's input, produced before it, stays kept (the checkpoint's). A fused
    operator is rerun when one of its members is in the block and every weight GEMM in it is (as
    :func:`norm_up_projection_recompute`)."""
    blocks = {op.module.rsplit(".", 1)[0] for op in region_ops if op.moe_role == "router"}
    inside = {op.name for op in region_ops
              if any(op.module == block or op.module.startswith(block + ".") for block in blocks)}
    return inside, _rerun_nodes(nodes, region_ops, inside)


def combine_weighting_saved(region_ops: list[RawOp]) -> set[str]:
    """The experts' down-projection outputs that the traced combine keeps only to weight them by the router's
    probabilities (:class:`~phaze_env.workloads.moe.StaticExperts`: ``out * routing``, whose backward needs ``out``
    for the probabilities' gradient): each output of the last weight GEMM of the routed experts that no operator but
    an elementwise one of the experts saves. A stack that multiplies the probabilities into the experts' activation
    instead (Megatron-Core since 2025, ``megatron/core/transformer/moe/experts.py``, ``activation_func_with_probs``,
    at NVIDIA/Megatron-LM 1e057005) keeps the activation it already keeps for the down-projection and the small
    probabilities, not these (``Stack.moe_probs_in_activation``)."""
    gemms = [op for op in region_ops if op.moe_role == "expert" and op.gemms and op.params]
    if not gemms:
        return set()
    down = gemms[-1].name
    savers = [op for op in region_ops if down in op.saved]
    if savers and all(op.moe_role == "expert" and op.kind == "elementwise" and down in op.inputs for op in savers):
        return {down}
    return set()


def build_layer(name: str, repeat: int, nodes: list[_Node], edges: list[tuple[str, str]], *, tensor_width: int,
                params: int, param_bytes: int, input_bytes: int, output_bytes: int,
                recomputed: set[str] = frozenset(),
                norm_up: tuple[set[str], tuple[str, ...]] = (frozenset(), ()),
                moe_block: tuple[set[str], tuple[str, ...]] = (frozenset(), ()),
                weighted: set[str] = frozenset()) -> Layer:
    """The layer of fused operators ``nodes``; ``recomputed``: the saved tensors its fused kernels rebuild
    (:func:`kernel_recomputed`), reported as the ``stash_kernel_*`` parts of its stash; ``norm_up``: what rerunning
    the norms and up-projections rebuilds (:func:`norm_up_projection_recompute`), the ``stash_norm_up_*`` parts;
    ``moe_block``: what rerunning the MoE block rebuilds (:func:`moe_block_recompute`), the ``stash_moe_*`` parts
    (without what the norms' rerun already drops: the two add); ``weighted``: what the combine keeps only to weight
    the experts' outputs (:func:`combine_weighting_saved`), the ``stash_probs_*`` parts, kept apart from the block's
    (a rerun block drops both parts)."""
    position = {n.name: i for i, n in enumerate(nodes)}
    idx_edges = [(position[a], position[b]) for a, b in edges]
    cast: set[str] = set()
    for n in nodes:  # each activation cast to FP8 once, by the first weight GEMM that reads it (Op.cast_shared)
        n.cast_shared = bool(n.cast_source) and n.cast_source in cast
        cast.add(n.cast_source)
    fwd = induced_graph([forward_op(n, tensor_width) for n in nodes], idx_edges)
    bwd_ops = [backward_op(n, tensor_width) for n in nodes]
    bwd = induced_graph(bwd_ops, [(b, a) for a, b in idx_edges])
    saved: dict[str, int] = {}
    # A saved (s, s) tensor that tensor parallelism does not split (OPT's and Llama's attention mask) counts
    # once, as replicated: it is an input of the attention core, kept (not recomputed) by selective recompute.
    replicated: set[str] = set()
    attention: set[str] = set()
    gemm_inputs: set[str] = set()
    others: set[str] = set()
    for n in nodes:
        saved.update(n.saved_bytes)
        replicated |= n.replicated_saved
        attention |= n.attention_saved
        gemm_inputs |= n.gemm_input_saved
        others |= n.other_saved
    recomputed = recomputed & set(saved)
    # kept only as weight GEMMs' inputs: what an FP8 recipe stores in FP8 (no other operator keeps the wide copy)
    gemm_only = gemm_inputs - others - recomputed
    dropped = (set(norm_up[0]) & set(saved)) - recomputed - attention  # the scores are selective recompute's
    probs_dropped = (set(weighted) & set(saved)) - recomputed - attention - dropped
    moe_dropped = (set(moe_block[0]) & set(saved)) - recomputed - attention - dropped - probs_dropped
    return Layer(name=name, repeat=repeat, fwd=fwd, bwd=bwd, params=params, param_bytes=param_bytes,
                 flops_fwd=fwd.flops, flops_bwd=bwd.flops, activation_stash_bytes=sum(saved.values()),
                 input_bytes=input_bytes, output_bytes=output_bytes,
                 stash_attention_bytes=sum(saved[k] for k in attention - replicated),
                 stash_replicated_bytes=sum(saved[k] for k in replicated),
                 stash_kernel_bytes=sum(saved[k] for k in recomputed),
                 stash_kernel_attention_bytes=sum(saved[k] for k in (attention - replicated) & recomputed),
                 stash_kernel_replicated_bytes=sum(saved[k] for k in replicated & recomputed),
                 stash_gemm_input_bytes=sum(saved[k] for k in gemm_only),
                 stash_gemm_input_replicated_bytes=sum(saved[k] for k in gemm_only & replicated),
                 stash_norm_up_bytes=sum(saved[k] for k in dropped),
                 stash_norm_up_replicated_bytes=sum(saved[k] for k in dropped & replicated),
                 stash_norm_up_gemm_input_bytes=sum(saved[k] for k in dropped & gemm_only),
                 stash_norm_up_gemm_input_replicated_bytes=sum(saved[k] for k in dropped & gemm_only & replicated),
                 norm_up_rerun=norm_up[1],
                 stash_moe_bytes=sum(saved[k] for k in moe_dropped),
                 stash_moe_replicated_bytes=sum(saved[k] for k in moe_dropped & replicated),
                 stash_moe_gemm_input_bytes=sum(saved[k] for k in moe_dropped & gemm_only),
                 stash_moe_gemm_input_replicated_bytes=sum(saved[k] for k in moe_dropped & gemm_only & replicated),
                 moe_rerun=moe_block[1],
                 stash_probs_bytes=sum(saved[k] for k in probs_dropped),
                 stash_probs_replicated_bytes=sum(saved[k] for k in probs_dropped & replicated))


def region_params(trace: Trace, region_ops: list[RawOp], t: int, owned: set[str],
                  folded: bool = False) -> tuple[int, int]:
    """(unique parameter elements owned by this region, parameter elements stored by it) at width ``t`` (``folded``:
    the routed experts' whole, :func:`_folded_expert_node`)."""
    stored: dict[str, int] = {}
    for op in region_ops:
        width = 1 if folded and op.moe_role == "expert" else t
        for fqn, elements in op.params.items():
            stored[fqn] = _param_split(fqn, elements, op, width)
    unique = sum(v for k, v in stored.items() if k in owned)
    return unique, sum(stored.values())


def signature(ops: list[RawOp]) -> list[tuple]:
    """What must be equal for two layers to be the same repeated layer."""
    return [(op.aten, op.kind, op.role, op.moe_role, tuple(op.gemms), op.vector_elements, op.out_shape,
             sorted(op.params.values())) for op in ops]
