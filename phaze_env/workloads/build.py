"""``model_graph(workload, ...)``: the cached entry point from a workload name to its layer graphs."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from phaze_env.cache import DiskCache, code_key
from phaze_env.workloads.eager import EAGER_PROBE_SEQ, EagerTraffic, eager_traffic
from phaze_env.workloads.graph import ModelGraph, is_attention_core
from phaze_env.workloads.model import (at_expert_rank, build_layer, check_tensor_width, combine_weighting_saved, fuse,
                                       kernel_recomputed, moe_block_recompute, norm_up_projection_recompute,
                                       region_params, signature, split_nodes)
from phaze_env.workloads.registry import Workload, get_workload
from phaze_env.workloads.trace import Trace, TraceError, sharded_ops, trace_workload

TENSOR_WIDTHS = (1, 2, 4, 8)
ID_BYTES = 8  # int64 token ids enter the pre-layers
LOSS_BYTES = 4  # a scalar fp32 loss leaves the post-layers

_trace_cache = DiskCache("trace")
_graph_cache = DiskCache("graphs")
_eager_cache = DiskCache("eager-traffic")


def eager_traffic_cached(workload: Workload, cache: bool = True) -> EagerTraffic:
    """:func:`~phaze_env.workloads.eager.eager_traffic` of ``workload`` (probe sequence at most the workload's own),
    cached on disk (keyed like its graphs; ``cache=False`` touches no cache)."""
    seq_len = min(EAGER_PROBE_SEQ, workload.seq_len)
    key = code_key(__name__, "eager_traffic", workload.to_dict(), seq_len)
    traffic = _eager_cache.get(key) if cache else None
    if traffic is None:
        try:
            traffic = eager_traffic(workload, seq_len)
        except Exception as exc:  # noqa: BLE001 - surface probe failures with the workload's name
            raise TraceError(f"workload {workload.name!r}: the eager-traffic probe failed: {type(exc).__name__}: "
                             f"{exc}") from exc
        if cache:
            _eager_cache.put(key, traffic)
    return traffic


def get_trace(workload: Workload, microbatch: int, seq_len: int, *, cache: bool = True) -> Trace:
    key = code_key(__name__, "trace", workload.to_dict(), microbatch, seq_len)
    trace = _trace_cache.get(key) if cache else None
    if trace is None:
        trace = trace_workload(workload, microbatch, seq_len)
        _check_repeated_layer(workload, trace)
        if cache:
            _trace_cache.put(key, trace)
    return trace


def _check_repeated_layer(workload: Workload, trace: Trace) -> None:
    layer0 = [op for op in trace.ops if op.region == "block0"]
    layer1 = [op for op in trace.ops if op.region == "block1"]
    if not layer0:
        raise TraceError(f"workload {workload.name!r}: no transformer layer found in the traced graph")
    if signature(layer0) != signature(layer1):
        raise TraceError(f"workload {workload.name!r}: layers 0 and 1 differ; the repeated-layer model does not apply")


def _validate(workload: Workload, seq_len: int, microbatch: int, tensor_width: int, bytes_per_element: int) -> None:
    for label, value in (("sequence length", seq_len), ("microbatch size", microbatch),
                         ("tensor-parallel width", tensor_width), ("bytes per element", bytes_per_element)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    max_positions = workload.config_dict.get("n_positions") or workload.config_dict.get("max_position_embeddings")
    if max_positions and seq_len > max_positions and workload.family in ("gpt2", "opt", "bert"):
        raise ValueError(f"workload {workload.name!r}: sequence length {seq_len} exceeds its {max_positions} "
                         f"learned positions")


def prepare_graphs(workload: str | Workload, tensor_widths, microbatches, *, seq_len: int | None = None,
                   done: Callable[[int, int], None] | None = None) -> None:
    """Trace every (tensor width, microbatch) graph of ``workload`` into the cache before a long run uses them (the
    slow part of a cold start: a CLI shows it with a total and a time left), calling ``done(finished, total)``
    after each; a width that does not divide the model is skipped, as evaluations skip it."""
    variants = [(t, m) for t in tensor_widths for m in microbatches]
    for finished, (t, m) in enumerate(variants, 1):
        try:
            model_graph(workload, seq_len=seq_len, microbatch=m, tensor_width=t)
        except ValueError:
            pass  # that width does not divide this model
        if done is not None:
            done(finished, len(variants))


def model_graph(workload: str | Workload, *, seq_len: int | None = None, microbatch: int = 1, tensor_width: int = 1,
                bytes_per_element: int = 2, cache: bool = True, expert_parallel: int = 1,
                folded_experts: bool = False) -> ModelGraph:
    """The model as pre-layers, the repeated layer × L and post-layers, at one tensor-parallel width (with
    leading dense layers, as DeepSeek's: pre, dense × k, the repeated MoE layer × (L − k), post).

    Every layer has forward and backward operator DAGs (fused), parameters, FLOPs, stashed-activation and
    boundary bytes for one microbatch. At ``expert_parallel`` ``e > 1`` the routed experts' operators are one
    expert-parallel rank's (:func:`~phaze_env.workloads.model.at_expert_rank`: ``E/e`` experts on ``e·C`` tokens
    each); the layers' parameter figures stay the whole model's. ``folded_experts`` (``Stack.folded_experts``): the
    routed experts as a folded expert grid's rank runs them — whole, on the rank's ``1/t`` of the tokens, no
    tensor-parallel collective around them (:func:`~phaze_env.workloads.model.split_nodes`); the layers' expert
    parameters are then the whole experts'. Results are cached on disk, keyed by the content of the arguments.
    """
    workload = get_workload(workload)
    seq_len = workload.seq_len if seq_len is None else seq_len
    _validate(workload, seq_len, microbatch, tensor_width, bytes_per_element)
    if reason := workload.expert_parallel_error(expert_parallel):
        raise ValueError(reason)
    if folded_experts and not workload.num_experts:
        raise ValueError(f"folded experts (expert tensor parallelism 1) need a mixture-of-experts model; "
                         f"{workload.name} is dense")
    key = code_key(__name__, "model_graph", workload.to_dict(), seq_len, microbatch, tensor_width,
                      bytes_per_element, *((expert_parallel,) if expert_parallel > 1 else ()),
                      *(("folded",) if folded_experts else ()))
    graph = _graph_cache.get(key) if cache else None
    if graph is None:
        graph = _build(workload, seq_len, microbatch, tensor_width, bytes_per_element, cache, expert_parallel,
                       folded_experts)
        if cache:
            _graph_cache.put(key, graph)
    return graph


def _build(workload: Workload, seq_len: int, microbatch: int, t: int, bpe: int, cache: bool, e: int = 1,
           folded: bool = False) -> ModelGraph:
    trace = get_trace(workload, microbatch, seq_len, cache=cache)
    check_tensor_width(trace, t, workload.num_heads)
    layers = _layers(workload, trace, seq_len, microbatch, t, bpe, e, folded)
    tokens = microbatch * seq_len
    base = layers if t == 1 else _layers(workload, trace, seq_len, microbatch, 1, bpe)
    try:  # only an eager stack reads the count: a model the probe cannot run still builds (and says why)
        return ModelGraph(workload.name, seq_len, microbatch, t, bpe, _eager_scaled(workload, layers, base, tokens, cache))
    except TraceError as exc:
        return ModelGraph(workload.name, seq_len, microbatch, t, bpe, tuple(layers), eager_error=str(exc))


def _layers(workload: Workload, trace: Trace, seq_len: int, microbatch: int, t: int, bpe: int, e: int = 1,
            folded: bool = False) -> list:
    """The pre-, (dense,) repeated and post-layers at tensor width ``t`` (the experts at expert-parallel degree
    ``e``'s per-rank shape; ``folded``: whole, on the rank's ``1/t`` of the tokens), before the eager traffic is
    scaled."""
    sharded = sharded_ops(trace.ops)
    tokens = microbatch * seq_len
    hidden_bytes = trace.boundary_elements["pre"] * bpe
    out_bytes = trace.boundary_elements["block0"] * bpe
    owned = _owned_params(trace)
    dense = workload.leading_dense_layers
    dense_out_bytes = trace.boundary_elements["dense"] * bpe if dense else hidden_bytes
    layers = []
    for region, name, repeat, in_bytes, layer_out in (
        ("pre", "pre", 1, tokens * ID_BYTES, hidden_bytes),
        *((("dense", "dense", dense, hidden_bytes, dense_out_bytes),) if dense else ()),
        ("block0", "block", workload.num_layers - dense, dense_out_bytes, out_bytes),
        ("post", "post", 1, out_bytes, LOSS_BYTES),
    ):
        ops = [op for op in trace.ops if op.region == region]
        nodes, edges = split_nodes(ops, sharded, trace, t, bpe, tokens, folded)
        nodes, edges = fuse(nodes, edges)
        nodes = at_expert_rank(nodes, workload.num_experts, e)
        params, stored = region_params(trace, ops, t, owned[region], folded)
        experts = [op for op in ops if op.moe_role == "expert"]
        layer = build_layer(name, repeat, nodes, edges, tensor_width=t, params=params, param_bytes=stored * bpe,
                            input_bytes=in_bytes, output_bytes=layer_out, recomputed=kernel_recomputed(nodes, ops),
                            norm_up=norm_up_projection_recompute(nodes, ops), moe_block=moe_block_recompute(nodes, ops),
                            weighted=combine_weighting_saved(ops))
        routing = dict(routed_experts=workload.num_experts,
                       experts_per_token=int(workload.config_dict["num_experts_per_tok"])) if experts else {}
        layers.append(replace(layer, expert_param_bytes=region_params(trace, experts, t, owned[region], folded)[1] * bpe,
                              routed_token_bytes=_routed_elements(experts, t if folded else 1) * bpe,
                              routed_activation_bytes=_routed_activation_elements(nodes) * bpe, **routing))
    return layers


def _eager_sums(layers) -> dict[str, tuple[int, int]]:
    """Per layer name, the traced eager bytes (forward, backward) outside the attention core."""
    return {layer.name: tuple(sum(op.eager_bytes for op in graph.ops if not is_attention_core(op))
                              for graph in (layer.fwd, layer.bwd)) for layer in layers}


def _eager_scaled(workload: Workload, layers: list, base: list, tokens: int, cache: bool) -> tuple:
    """``layers`` with every op's ``eager_bytes`` scaled so that each layer's sum outside the attention core is the
    dispatcher's count (:func:`phaze_env.workloads.eager.eager_traffic`: the repeated layer its own, the pre-, post-
    and leading dense layers together the rest), the ratios taken on ``base`` (the same layers at tensor width 1)."""
    traffic = eager_traffic_cached(workload, cache)
    sums = _eager_sums(base)
    outer = [name for name in sums if name != "block"]
    measured = {"block": (traffic.block_fwd, traffic.block_bwd), "outer": (traffic.outer_fwd, traffic.outer_bwd)}
    scale = {}
    for group, names in (("block", ["block"]), ("outer", outer)):
        for direction in (0, 1):
            traced = sum(sums[name][direction] for name in names)
            scale[group, direction] = measured[group][direction] * tokens / traced if traced else 1.0

    def scaled(graph, factor):  # the attention core keeps its traced count: the probe left it out
        return replace(graph, ops=tuple(replace(op, eager_bytes=round(op.eager_bytes * factor))
                                        if op.eager_bytes and not is_attention_core(op) else op for op in graph.ops))

    out = []
    for layer in layers:
        group = "block" if layer.name == "block" else "outer"
        out.append(replace(layer, fwd=scaled(layer.fwd, scale[group, 0]), bwd=scaled(layer.bwd, scale[group, 1])))
    return tuple(out)


def _routed_elements(expert_ops: list, token_shards: int = 1) -> int:
    """Elements of the tokens one rank dispatches to the routed experts: the ``experts × capacity × hidden`` input of
    their first batched matmul (:class:`~phaze_env.workloads.moe.StaticExperts`; 0 for a dense layer), the capacity
    over ``token_shards`` (a folded expert grid's rank routes its ``1/t`` of the tokens: ``⌈C/t⌉``, as its GEMMs)."""
    batch, rows, inner, _ = next((op.gemms[0] for op in expert_ops if op.gemms), (0, 0, 0, 0))
    return batch * -(-rows // token_shards) * inner


def _routed_activation_elements(nodes: list) -> int:
    """Elements of the routed experts' first GEMM output at this tensor width (``experts × capacity × 2·ffn/t``: the
    gate and up projections its activation kernel reads; the product is the same at every expert-parallel shape);
    0 for a dense layer."""
    batch, rows, _, cols = next((node.gemms[0] for node in nodes if node.moe_role == "expert" and node.gemms),
                                (0, 0, 0, 0))
    return batch * rows * cols


def _owned_params(trace: Trace) -> dict[str, set[str]]:
    """Each parameter is owned (counted once) by the first region that uses it."""
    owned: dict[str, set[str]] = {"pre": set(), "dense": set(), "block0": set(), "block1": set(), "post": set()}
    seen: set[str] = set()
    for op in trace.ops:
        for fqn in op.params:
            if fqn not in seen:
                seen.add(fqn)
                owned[op.region].add(fqn)
    return owned


def model_summary(graph: ModelGraph) -> dict:
    """The JSON summary the CLI prints (keys documented in the README)."""
    layers = [
        {"name": layer.name, "repeat": layer.repeat, "params": layer.params, "param_bytes": layer.param_bytes,
         "flops_fwd": layer.flops_fwd, "flops_bwd": layer.flops_bwd,
         "activation_stash_bytes": layer.activation_stash_bytes, "input_bytes": layer.input_bytes,
         "output_bytes": layer.output_bytes, "num_ops": layer.num_ops, "num_bwd_ops": len(layer.bwd.ops)}
        for layer in graph.layers
    ]
    flops = sum((layer.flops_fwd + layer.flops_bwd) * layer.repeat for layer in graph.layers)
    return {
        "model": graph.workload, "seq_len": graph.seq_len, "microbatch": graph.microbatch,
        "tensor_width": graph.tensor_width, "num_layers": graph.num_layers - 2,
        "params_total": graph.params_total, "layers": layers,
        "flops_total_per_sample": flops // graph.microbatch,
    }
