"""Trace a workload with ``torch.export`` (non-strict) on the meta device into raw per-region operators.

The model is built from its config with **two** transformer layers (enough to check that the repeated
layer is identical and to see what crosses a layer boundary) on the meta device: no weights, no
network, constant memory. The exported ATen graph is reduced to the operators that do work on the
training data path:

* view-like operators (view, transpose, expand, dropout at inference, dtype casts, ...) are bridged;
* index/mask arithmetic (non-floating outputs, or values not derived from any parameter) is dropped:
  it is tiny, and a pipeline stage regenerates it rather than receiving it;
* each remaining node becomes a :class:`RawOp` tagged with its region — ``pre`` (embeddings), ``block``
  (layer 0, checked identical to layer 1) or ``post`` (final norm, head, loss); a model whose first layers
  differ from the rest (DeepSeek's dense layers before the MoE ones) is traced with one of them first, in
  region ``dense`` — and its role for
  Megatron tensor parallelism (column-/row-parallel linear, vocabulary-parallel embedding/head), read
  from the graph's structure, not from module names (:func:`assign_tensor_parallel_roles`).

Mixture-of-experts blocks are traced as static-shape stand-ins (:mod:`phaze_env.workloads.moe`): the
graph does not depend on routing, and the router's and experts' operators carry ``moe_role``.
"""

from __future__ import annotations

import logging
import math
import os
import re
import warnings
from dataclasses import dataclass, field

from phaze_env.workloads.registry import Workload

# ATen operators that only re-index or alias memory (bridged, no cost).
VIEW_OPS = {
    "view", "_unsafe_view", "reshape", "transpose", "permute", "t", "expand", "unsqueeze", "squeeze", "slice",
    "select", "split", "split_with_sizes", "chunk", "unbind", "alias", "to", "_to_copy", "contiguous", "clone",
    "dropout", "detach", "type_as", "as_strided", "lift_fresh_copy", "_assert_tensor_metadata", "getitem",
    "repeat_interleave", "flatten", "numpy_T",
}
MATMUL_OPS = {"linear", "addmm", "mm", "bmm", "matmul", "baddbmm"}
# ATen operator → (kind, vector cost class, FLOPs per output element).
VECTOR_OPS = {
    "add": ("elementwise", "add", 1), "sub": ("elementwise", "add", 1), "mul": ("elementwise", "mul", 1),
    "div": ("elementwise", "mul", 1), "neg": ("elementwise", "add", 1), "where": ("elementwise", "add", 1),
    "pow": ("elementwise", "mul", 1), "rsqrt": ("elementwise", "exp", 1), "sqrt": ("elementwise", "exp", 1),
    "tanh": ("elementwise", "tanh", 4), "relu": ("elementwise", "relu", 1), "gelu": ("elementwise", "gelu", 8),
    "silu": ("elementwise", "silu", 4), "sigmoid": ("elementwise", "exp", 4), "exp": ("elementwise", "exp", 1),
    "cos": ("elementwise", "exp", 1), "sin": ("elementwise", "exp", 1),
    "softmax": ("softmax", "softmax", 5), "_softmax": ("softmax", "softmax", 5), "log_softmax": ("softmax", "softmax", 5),
    "layer_norm": ("norm", "norm", 7), "native_layer_norm": ("norm", "norm", 7), "rms_norm": ("norm", "norm", 4),
    "mean": ("reduction", "reduce", 1), "sum": ("reduction", "reduce", 1), "amax": ("reduction", "reduce", 1),
    "cross_entropy_loss": ("reduction", "loss", 6), "nll_loss": ("reduction", "loss", 2),
    "cat": ("data", "copy", 0), "stack": ("data", "copy", 0), "pad": ("data", "copy", 0),
    "embedding": ("data", "gather", 0), "gather": ("data", "gather", 0), "index": ("data", "gather", 0),
    # Mixture-of-experts routing (phaze_env.workloads.moe): top-k over the router scores, the dispatch gather
    # and the combine's scatter-add.
    "topk": ("reduction", "reduce", 1), "index_select": ("data", "gather", 0), "index_add": ("reduction", "add", 1),
    "scatter": ("data", "copy", 0),  # DeepSeek-V3's group mask: ones written at the kept groups
}
# Operators whose reduction runs over the input, not the output (elements = input numel).
REDUCING = {"mean", "sum", "amax", "cross_entropy_loss", "nll_loss", "topk", "index_add"}
# Which inputs the backward pass needs, per vector cost class: "in", "out", "all" or "none" — what eager
# PyTorch autograd keeps for the traced (Hugging Face) module, tensor by tensor, deduplicated per layer (products:
# :data:`PRODUCTS`). Checked against Korthikanti et al. 2022 (eq. 1: s·b·h·(34 + 5·a·s/h) bytes per layer at t = 1;
# eq. 2: s·b·h·(10 + 24/t + 5·a·s/(h·t)) with tensor width t) for GPT-3 175B (s=2048, b=1, h=12288, a=96):
# t=1: 2,214.6 MB vs 2,868.9 MB; t=8: 453.0 MB vs 578.8 MB (tests/test_workloads_stash.py holds the terms). We
# deliberately count what the eager HF model keeps, which differs from Megatron's fused kernels by (t=1):
#   +604.0 MB    HF's tanh-GELU runs unfused: autograd keeps three 4h-wide intermediates besides the GELU input and
#                output (tanh, 0.5·x, 1 + tanh: 40·sbh bytes in all) where Megatron counts the input and the output
#                (16·sbh) — a fused kernel rebuilds them (workloads.model.kernel_recomputed: the evaluator
#                drops them for every stack that fuses, Stack.unfused_elementwise);
#   −1,208 MB    no dropout (the trace is deterministic): we keep the softmax output (2·as²b; the scale by a constant
#                keeps nothing, PRODUCTS) where Megatron keeps it, the dropout mask (as²b) and the dropout output
#                (2·as²b);
#   −50.3 MB     the two s·b·h dropout masks (attention output, MLP output).
SAVED_FOR_BACKWARD = {
    "add": "none", "copy": "none", "gather": "none", "mul": "all", "relu": "out", "gelu": "in", "silu": "in",
    "tanh": "out", "exp": "out", "softmax": "out", "norm": "in", "reduce": "none", "loss": "in",
}

PRODUCTS = {"mul", "div"}
"""Operators whose backward needs each operand only for the *other* operand's gradient (``d(a·b)/da = b``,
``d(a/b)/da = 1/b``): autograd saves an operand only when another one requires a gradient. PyTorch's generated
autograd code guards each such save with ``should_compute_output`` (``tools/autograd/gen_variable_type.py``,
``guard_for``); measured with ``torch.autograd.graph.saved_tensors_hooks`` (torch 2.13): ``q * c`` with ``c`` a
constant saves only ``c``, ``q * w`` with ``w`` a parameter saves both. So rotary embeddings (``q·cos``), a scale by
a constant (``scores / √d``) and other products with constants stash no activation."""


def saved_inputs(aten: str, vector_kind: str, name: str, act_inputs: list[str], param_inputs: list[str]) -> list[str]:
    """The activations a vector operator keeps for its backward pass (:data:`SAVED_FOR_BACKWARD`; a product keeps an
    activation operand only when another operand — an activation or a parameter — needs a gradient,
    :data:`PRODUCTS`)."""
    if aten in PRODUCTS:
        return list(act_inputs) if len(act_inputs) + len(param_inputs) > 1 else []
    rule = SAVED_FOR_BACKWARD.get(vector_kind, "in")
    return {"out": [name], "in": act_inputs[:1], "all": list(act_inputs)}.get(rule, [])


# Megatron tensor-parallel roles whose output is split across the tensor-parallel group.
SPLIT_ROLES = ("column", "vocab_head")
# Roles whose output is whole again (after the all-reduce Megatron puts there).
REDUCED_ROLES = ("row", "vocab_embedding")
LAYER_INDEX = re.compile(r"\.(?:h|layers|layer)\.(\d+)(?:\.|$)")


class TraceError(RuntimeError):
    """The model could not be traced into per-layer graphs."""


class TensorParallelError(TraceError, ValueError):
    """The model has a matmul Megatron's tensor parallelism cannot place, so it is only defined at width 1."""


@dataclass
class RawOp:
    """One traced ATen operator that does work, before tensor-parallel splitting and fusion."""

    name: str
    aten: str
    kind: str
    region: str  # "pre" | "dense" (a leading dense layer) | "block0" | "block1" | "post"
    module: str
    role: str = "replicated"  # "column" | "row" | "vocab_head" | "vocab_embedding" | "sharded" | "replicated"
    moe_role: str = ""  # "router" | "expert" (the routed experts, to shard over expert-parallel ranks) | ""
    gemms: list[tuple[int, int, int, int]] = field(default_factory=list)  # (batch, m, k, n)
    vector_kind: str = ""
    vector_elements: int = 0
    flops_per_element: int = 0
    inputs: list[str] = field(default_factory=list)  # producing RawOp names (activations)
    saved: list[str] = field(default_factory=list)  # tensors (RawOp names or "in:<name>") kept for backward
    params: dict[str, int] = field(default_factory=dict)  # parameter FQN → elements
    out_shape: tuple[int, ...] = ()
    in_shapes: list[tuple[int, ...]] = field(default_factory=list)
    out_elements: int = 0
    in_elements: int = 0


@dataclass
class Trace:
    """Raw operators of a two-layer instance, with region boundaries and parameter ownership."""

    ops: list[RawOp]
    boundary_elements: dict[str, int]  # region → elements of activations leaving it
    tensor_elements: dict[str, int]  # producing op name (or external input) → elements of its output
    param_elements: dict[str, int]  # FQN → elements (every parameter of the two-layer model)
    tied: set[str]  # FQNs used in more than one region (tied embeddings)
    # Block modules whose matmul has no Megatron role (module path → why): tensor width 1 only.
    unsplittable: dict[str, str] = field(default_factory=dict)


def _quiet_transformers() -> None:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.getLogger("transformers").setLevel(logging.ERROR)


def traced_dense_layers(workload: Workload) -> int:
    """Leading dense layers in the traced model: one stands for all of them (they are alike)."""
    if workload.leading_dense_layers >= workload.num_layers:
        raise TraceError(f"workload {workload.name!r}: all {workload.num_layers} layers are dense "
                         f"(first_k_dense_replace {workload.leading_dense_layers}); no MoE layer to repeat")
    return min(workload.leading_dense_layers, 1)


def build_meta_model(workload: Workload, num_layers: int = 2):
    """The workload's model with ``num_layers`` repeated layers (after one leading dense layer, if it has such
    layers) on the meta device (eager attention, eval mode)."""
    _quiet_transformers()
    import torch
    import transformers

    from phaze_env.workloads.moe import replace_sparse_moe_blocks

    config_cls = getattr(transformers, workload.config_class)
    model_cls = getattr(transformers, workload.model_class)
    kwargs = workload.config_dict
    kwargs[workload.layer_count_key] = traced_dense_layers(workload) + num_layers
    if workload.leading_dense_layers:
        kwargs["first_k_dense_replace"] = traced_dense_layers(workload)
    try:
        config = config_cls(**kwargs)
    except Exception as exc:  # noqa: BLE001 - surface config errors with the workload's name
        raise TraceError(f"workload {workload.name!r}: {workload.config_class}(**config) failed: {exc}") from exc
    config._attn_implementation = "eager"
    config.use_cache = False  # training: no key/value cache in the outputs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.device("meta"):
            model = model_cls(config)
    replace_sparse_moe_blocks(model, workload.expert_load_factor)  # routing-independent, static shapes
    model.eval()
    return model


def export_model(workload: Workload, microbatch: int, seq_len: int):
    """``torch.export`` (non-strict) of the two-layer meta model with token ids and labels."""
    import torch

    from phaze_env.workloads.deepseek import real_valued_rotary

    model = build_meta_model(workload)
    ids = torch.zeros(microbatch, seq_len, dtype=torch.long, device="meta")
    kwargs = {"input_ids": ids, "labels": ids}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with real_valued_rotary(model):
                return torch.export.export(model, (), kwargs, strict=False)
    except Exception as exc:  # noqa: BLE001
        raise TraceError(f"workload {workload.name!r}: torch.export failed at microbatch {microbatch}, "
                         f"sequence {seq_len}: {type(exc).__name__}: {exc}") from exc


def _aten_name(target) -> str:
    if getattr(target, "__name__", "") == "getitem":
        return "getitem"
    name = getattr(target, "__name__", str(target)).split(".")[0]
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name  # in-place div_ costs as div


def _module_path(node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    return list(stack.values())[-1][0] if stack else ""


def _module_types(node) -> list:
    return [entry[1] for entry in (node.meta.get("nn_module_stack") or {}).values()]


def _numel(shape) -> int:
    return int(math.prod(int(d) for d in shape))


def _shape(val) -> tuple[int, ...] | None:
    shape = getattr(val, "shape", None)
    return tuple(int(d) for d in shape) if shape is not None else None


def _gemms(aten: str, shapes: list[tuple[int, ...]], out: tuple[int, ...]) -> list[tuple[int, int, int, int]]:
    """GEMMs of a matmul-like operator as (batch, m, k, n)."""
    if aten == "linear":
        x, w = shapes[0], shapes[1]
        return [(1, _numel(x[:-1]), x[-1], w[0])]
    if aten == "addmm":  # addmm(bias, x[m,k], w[k,n])
        x, w = shapes[1], shapes[2]
        return [(1, x[0], x[1], w[1])]
    if aten == "mm":
        return [(1, shapes[0][0], shapes[0][1], shapes[1][1])]
    a, b = shapes[-2], shapes[-1]
    if aten == "baddbmm":
        a, b = shapes[1], shapes[2]
    if len(b) == 2:  # matmul of a batch of rows with a weight matrix: a linear
        return [(1, _numel(a[:-1]), a[-1], b[-1])]
    return [(_numel(out[:-2]), a[-2], a[-1], b[-1])]


def trace_workload(workload: Workload, microbatch: int, seq_len: int) -> Trace:
    """Export the two-layer model and reduce its graph to :class:`RawOp` per region."""
    from phaze_env.workloads.moe import moe_role_of

    exported = export_model(workload, microbatch, seq_len)
    signature = exported.graph_signature
    param_of = dict(signature.inputs_to_parameters)
    graph = exported.graph_module.graph

    source: dict[str, str | None] = {}  # node → the work node it aliases (None: not on the data path)
    live: set[str] = set()  # nodes derived from parameters
    params_of_node: dict[str, str] = {}  # placeholder → FQN
    ops: list[RawOp] = []
    by_name: dict[str, RawOp] = {}
    tensor_elements: dict[str, int] = {}
    param_users: dict[str, set[str]] = {}
    token_ids = set(signature.user_inputs)  # input_ids and labels (export may pass one for both), and their views
    token_embeddings: set[str] = set()
    dense = traced_dense_layers(workload)

    for node in graph.nodes:
        if node.op == "placeholder":
            source[node.name] = node.name
            if node.name in param_of:
                live.add(node.name)
                params_of_node[node.name] = param_of[node.name]
            continue
        if node.op != "call_function":
            continue
        aten = _aten_name(node.target)
        args = [a for a in node.all_input_nodes]
        is_live = any(source.get(a.name) in live for a in args if source.get(a.name))
        val = node.meta.get("val")
        if aten == "topk":
            val = val[0]  # the values; its indices are index arithmetic
        out_shape = _shape(val)
        if aten in VIEW_OPS and args and args[0].name in token_ids:
            token_ids.add(node.name)
        if aten in VIEW_OPS or not is_live:
            first = next((source.get(a.name) for a in args if source.get(a.name) in live), None)
            source[node.name] = first
            continue
        floating = getattr(val, "dtype", None) is not None and val.dtype.is_floating_point
        if not floating or out_shape is None:
            source[node.name] = None
            continue
        module = _module_path(node)
        match = LAYER_INDEX.search(module + ".")
        in_tensors = [source.get(a.name) for a in args]
        act_inputs = [t for t in in_tensors if t in by_name]
        param_inputs = [params_of_node[t] for t in in_tensors if t in params_of_node]
        shapes = [_shape(a.meta.get("val")) or () for a in args]
        op = RawOp(name=node.name, aten=aten, kind="", region="", module=module, out_shape=out_shape,
                   in_shapes=shapes, out_elements=_numel(out_shape),
                   in_elements=max((_numel(s) for s in shapes), default=0), moe_role=moe_role_of(_module_types(node)))
        if match:
            index = int(match.group(1)) - dense
            op.region = "dense" if index < 0 else f"block{index}"
        if aten in MATMUL_OPS:
            op.kind = "matmul" if param_inputs else "bmm"
            op.gemms = _gemms(aten, shapes, out_shape)
            bias = aten == "addmm" or (aten == "linear" and len(args) > 2)
            if bias:
                op.vector_kind, op.vector_elements, op.flops_per_element = "add", op.out_elements, 1
            op.saved = [t for t in in_tensors if t in by_name]
        elif aten in VECTOR_OPS:
            op.kind, op.vector_kind, op.flops_per_element = VECTOR_OPS[aten]
            op.vector_elements = op.in_elements if aten in REDUCING else op.out_elements
            op.saved = saved_inputs(aten, op.vector_kind, node.name, act_inputs, param_inputs)
            if aten == "embedding" and len(args) > 1 and args[1].name in token_ids:
                token_embeddings.add(node.name)
        else:
            raise TraceError(f"workload {workload.name!r}: no cost rule for ATen operator {aten!r} "
                             f"(node {node.name} in {module or 'the top module'})")
        op.inputs = act_inputs
        op.params = {fqn: _param_numel(exported, fqn) for fqn in param_inputs}
        for fqn in param_inputs:
            param_users.setdefault(fqn, set()).add(node.name)
        source[node.name] = node.name
        live.add(node.name)
        tensor_elements[node.name] = op.out_elements
        by_name[node.name] = op
        ops.append(op)

    _assign_outer_regions(ops)
    unsplittable = assign_tensor_parallel_roles(ops, token_embeddings)
    regions_of_param = {fqn: {by_name[u].region.replace("block1", "block0") for u in users} for fqn, users in param_users.items()}
    tied = {fqn for fqn, regions in regions_of_param.items() if len(regions) > 1}
    param_elements = {fqn: _param_numel(exported, fqn) for fqn in param_of.values()}
    boundary = _boundary_elements(ops, by_name)
    return Trace(ops, boundary, tensor_elements, param_elements, tied, unsplittable)


def output_is_sharded(op: RawOp, sharded: set[str]) -> bool:
    """Is ``op``'s output split across the tensor-parallel group, given which of its inputs are (``sharded``)?"""
    return op.role in SPLIT_ROLES or (op.role not in REDUCED_ROLES and any(i in sharded for i in op.inputs))


def sharded_ops(ops: list[RawOp]) -> set[str]:
    """Names of ops whose output is split across the tensor-parallel group."""
    sharded: set[str] = set()
    for op in ops:
        if output_is_sharded(op, sharded):
            sharded.add(op.name)
    return sharded


def assign_tensor_parallel_roles(ops: list[RawOp], token_embeddings: set[str]) -> dict[str, str]:
    """Tag each op's Megatron role from the graph's structure; return the block matmuls that have none.

    * **vocabulary-parallel embedding**: the gather whose indices are the token ids;
    * **vocabulary-parallel head**: the last parameter matmul before the loss (nothing but vector work between)
      when it projects to the vocabulary (as many outputs as the embedding table has rows);
    * **row-parallel linear**: a parameter matmul in a block whose input is split (it closes a branch; its
      output is all-reduced and feeds the residual stream);
    * **column-parallel linear**: a parameter matmul in a block whose input is whole and whose split output
      stays inside the branch until row-parallel linears close it (attention scores, the MLP activation or
      gate product): it reaches neither the block's output nor a normalisation over its whole width.

    Ops are in topological order, so one pass decides each matmul from the roles of the ops before it.
    Anything else — a matmul of whole and split inputs, a product of activations not split by heads, a
    column whose split output escapes the block — is returned (module path → reason) and refused at t > 1.
    """
    vocabulary_sizes = set()
    for op in ops:
        if op.name in token_embeddings:
            op.role = "vocab_embedding"
            vocabulary_sizes.add(op.in_shapes[0][0])  # embedding(table, ids): the table's rows
    for head in _vocabulary_heads(ops):
        if head.gemms[0][3] in vocabulary_sizes:
            head.role = "vocab_head"
    unsplittable: dict[str, str] = {}
    for region in dict.fromkeys(op.region for op in ops if op.region not in ("pre", "post")):
        for module, reason in _assign_block_roles([op for op in ops if op.region == region], ops).items():
            if region != "block1":  # the copy of block0
                unsplittable.setdefault(module, reason)
    return unsplittable


def _vocabulary_heads(ops: list[RawOp]) -> list[RawOp]:
    """The post-layer parameter matmuls the loss depends on through vector work only."""
    by_name = {op.name: op for op in ops}
    heads: dict[str, RawOp] = {}
    stack = [op.name for op in ops if op.region == "post" and op.vector_kind == "loss"]
    seen: set[str] = set()
    while stack:
        op = by_name[stack.pop()]
        if op.name in seen or op.region != "post":
            continue
        seen.add(op.name)
        if op.kind == "matmul":
            heads[op.name] = op
        else:
            stack.extend(op.inputs)
    return list(heads.values())


def _assign_block_roles(block: list[RawOp], ops: list[RawOp]) -> dict[str, str]:
    """Column/row roles of one block's parameter matmuls (see :func:`assign_tensor_parallel_roles`)."""
    sharded: set[str] = set()  # inputs from outside the block are whole
    columns_of: dict[str, set[str]] = {}  # split op → the column-parallel linears it derives from
    by_name = {op.name: op for op in block}
    unsplittable: dict[str, str] = {}
    for op in block:
        split_inputs = [i in sharded for i in op.inputs]
        if op.kind == "matmul" and op.moe_role == "router":
            pass  # replicated: every rank routes all of its tokens; the experts' FFNs split below (Megatron-Core)
        elif op.kind == "matmul":
            if split_inputs and all(split_inputs):
                op.role = "row"
            elif any(split_inputs):
                unsplittable[op.module] = "its inputs mix split and whole activations"
            elif not op.inputs:
                unsplittable[op.module] = "it multiplies parameters only"
            else:
                op.role = "column"
        elif op.kind == "bmm" and not (split_inputs and all(split_inputs)):
            unsplittable[op.module] = "a product of activations that are not split by attention heads"
        if output_is_sharded(op, sharded):
            sharded.add(op.name)
            columns_of[op.name] = {op.name} if op.role == "column" else set().union(
                *(columns_of.get(i, set()) for i in op.inputs))
            if op.kind in ("norm", "reduction", "softmax"):
                for column in columns_of[op.name]:
                    if by_name[column].out_shape in op.in_shapes:
                        unsplittable[by_name[column].module] = (f"{op.module or op.name} normalises over all of its "
                                                                f"split output features")
    escaping = {i for op in ops if op.region != block[0].region for i in op.inputs if i in sharded}
    for name in escaping:
        for column in columns_of[name]:
            unsplittable[by_name[column].module] = "its split output leaves the block without a row-parallel linear"
    return unsplittable


def _param_numel(exported, fqn: str) -> int:
    return int(exported.state_dict[fqn].numel()) if fqn in exported.state_dict else 0


def _assign_outer_regions(ops: list[RawOp]) -> None:
    """Ops outside the layer modules are pre-layers before layer 0 and post-layers after the last layer."""
    seen_block = False
    for op in ops:
        if op.region:
            seen_block = True
        else:
            op.region = "post" if seen_block else "pre"


def _boundary_elements(ops: list[RawOp], by_name: dict[str, RawOp]) -> dict[str, int]:
    """Elements of the activations produced in (or before) a region and consumed after it."""
    order = {"pre": 0, "dense": 1, "block0": 2, "block1": 3, "post": 4}
    crossing: dict[str, set[str]] = {r: set() for r in order}
    for op in ops:
        for producer in op.inputs:
            src = by_name[producer]
            for region, rank in order.items():
                if order[src.region] <= rank < order[op.region]:
                    crossing[region].add(producer)
    return {region: sum(by_name[p].out_elements for p in names) for region, names in crossing.items()}
