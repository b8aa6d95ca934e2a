"""Mixture-of-experts workloads: static-shape experts, exact parameters, active FLOPs, the capacity/imbalance knobs.

Reference counts are computed here from the configs (``matmul_params``) and from the Hugging Face models built on
the meta device, independently of the trace. Attention FLOPs are the eager (non-causal) count the trace makes:
``Q·Kᵀ`` and ``softmax·V`` over the whole ``s × s`` square, ``2 · 2 · s · heads · head_dim`` per token and layer.
"""

import dataclasses
import math
import warnings

import pytest
import torch

from phaze_env.workloads import custom_workload, get_trace, get_workload, model_graph
from phaze_env.workloads.trace import TensorParallelError, export_model
from test_workloads import published_tolerance

SEQ, MBS = 32, 1
TOKENS = SEQ * MBS
SMALL_BASE = dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                  max_position_embeddings=64, tie_word_embeddings=False)
# family → (config class, model class, config); 8 experts, top-2: 8 tokens per expert at a uniform load.
SMALL = {
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(SMALL_BASE, intermediate_size=96, num_local_experts=8, num_experts_per_tok=2, sliding_window=None)),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  dict(SMALL_BASE, intermediate_size=160, moe_intermediate_size=48, shared_expert_intermediate_size=96,
                       num_experts=8, num_experts_per_tok=2, norm_topk_prob=False)),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(SMALL_BASE, moe_intermediate_size=48, num_experts=8, num_experts_per_tok=2, norm_topk_prob=True)),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM",
              dict(SMALL_BASE, intermediate_size=48, num_experts=8, num_experts_per_tok=2)),
}
MOE_BUILTINS = {"mixtral-8x7b": "mixtral", "qwen1.5-moe-a2.7b": "qwen2_moe", "qwen3-30b-a3b": "qwen3_moe",
                "olmoe-1b-7b": "olmoe", "qwen3-235b-a22b": "qwen3_moe"}
# Published active parameters per token (embedding table included, as the sources count them).
PUBLISHED_ACTIVE = {"mixtral-8x7b": 12_900_000_000, "qwen1.5-moe-a2.7b": 2_700_000_000, "olmoe-1b-7b": 1_300_000_000,
                    "qwen3-235b-a22b": 22_000_000_000}
# Qwen3-30B-A3B's "3.3 B activated" is left out: the config gives 3.35 B with the embedding table, 3.04 B without.
DATA_DEPENDENT_ATEN = {"nonzero", "_local_scalar_dense", "masked_select", "unique", "item", "one_hot"}


def small(family, **knobs):
    config_class, model_class, config = SMALL[family]
    return dataclasses.replace(custom_workload(f"moe-{family}", config_class, model_class, SEQ, **config), **knobs)


def hf_parameters(workload) -> int:
    """Parameters of the Hugging Face model itself, all layers, built on meta from the same config."""
    import transformers

    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        config = getattr(transformers, workload.config_class)(**workload.config_dict)
        return sum(p.numel() for p in getattr(transformers, workload.model_class)(config).parameters())


def head_size(cfg: dict) -> int:
    return cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])


def matmul_params(family: str, cfg: dict, active: bool) -> int:
    """Weights of every matmul of the model (all experts, or the k a token uses), from the config alone."""
    h, layers, heads = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
    head_dim = head_size(cfg)
    kv = cfg.get("num_key_value_heads", heads)
    attention = 2 * h * heads * head_dim + 2 * h * kv * head_dim
    experts = cfg["num_local_experts"] if family == "mixtral" else cfg["num_experts"]
    expert_ffn = cfg["intermediate_size"] if family in ("mixtral", "olmoe") else cfg["moe_intermediate_size"]
    used = cfg["num_experts_per_tok"] if active else experts
    moe = experts * h + used * 3 * h * expert_ffn  # router, routed experts
    if family == "qwen2_moe":
        moe += 3 * h * cfg["shared_expert_intermediate_size"] + h  # shared expert and its sigmoid gate
    return layers * (attention + moe) + cfg["vocab_size"] * h  # + the LM head


def all_params(family: str, cfg: dict) -> int:
    """Every parameter: matmul weights, the embedding table, norms and biases, from the config alone."""
    h, layers, heads = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads", heads)
    head_dim = head_size(cfg)
    per_layer = 2 * h  # the two RMSNorms
    if family == "qwen2_moe":
        per_layer += (heads + 2 * kv) * head_dim  # q, k, v biases
    if family == "olmoe":
        per_layer += (heads + kv) * head_dim  # q_norm, k_norm over all heads
    if family == "qwen3_moe":
        per_layer += 2 * head_dim  # q_norm, k_norm per head
    return matmul_params(family, cfg, active=False) + cfg["vocab_size"] * h + h + layers * per_layer


def forward_matmul_flops_per_token(graph) -> float:
    return sum(op.gemm_flops * layer.repeat for layer in graph.layers for op in layer.fwd.ops) / (
        graph.microbatch * graph.seq_len)


def attention_flops_per_token(cfg: dict, seq: int) -> int:
    return cfg["num_hidden_layers"] * 2 * 2 * seq * cfg["num_attention_heads"] * head_size(cfg)


@pytest.mark.parametrize("family", sorted(SMALL))
def test_parameters_are_exactly_the_hugging_face_models(family):
    workload = small(family)
    graph = model_graph(workload, microbatch=MBS)
    assert graph.params_total == hf_parameters(workload) == all_params(family, workload.config_dict)
    # The stand-in holds the HF parameters under their own names: the trace's are the HF model's first two layers.
    import transformers

    config = dict(workload.config_dict, num_hidden_layers=2)
    with torch.device("meta"):
        hf = getattr(transformers, workload.model_class)(getattr(transformers, workload.config_class)(**config))
    assert set(get_trace(workload, MBS, SEQ).param_elements) == {name for name, _ in hf.named_parameters()}


@pytest.mark.parametrize("family", sorted(SMALL))
def test_forward_flops_are_twice_the_active_parameters_plus_attention(family):
    workload = small(family)
    graph = model_graph(workload, microbatch=MBS)
    expected = 2 * matmul_params(family, workload.config_dict, active=True) + attention_flops_per_token(
        workload.config_dict, SEQ)
    assert forward_matmul_flops_per_token(graph) == expected  # 32 tokens · top-2 / 8 experts: no rounding up
    assert sum(op.gemm_flops for op in graph.layers[1].bwd.ops) == 2 * sum(op.gemm_flops for op in graph.layers[1].fwd.ops)


@pytest.mark.parametrize("family", sorted(SMALL))
def test_router_and_experts_are_tagged_and_batched_over_experts(family):
    workload = small(family)
    cfg = workload.config_dict
    experts = cfg.get("num_local_experts") or cfg["num_experts"]
    ffn = cfg["intermediate_size"] if family in ("mixtral", "olmoe") else cfg["moe_intermediate_size"]
    block = [op for op in get_trace(workload, MBS, SEQ).ops if op.region == "block0"]
    routers = [op for op in block if op.moe_role == "router" and op.kind == "matmul"]
    expert_matmuls = [op for op in block if op.moe_role == "expert" and op.kind == "matmul"]
    capacity = TOKENS * 2 // experts
    shared_gate = [[(1, TOKENS, 64, 1)]] if family == "qwen2_moe" else []  # Qwen2-MoE's gate on its shared expert
    assert [op.gemms for op in routers] == [[(1, TOKENS, 64, experts)]] + shared_gate
    assert [op.gemms for op in expert_matmuls] == [[(experts, capacity, 64, 2 * ffn)], [(experts, capacity, ffn, 64)]]
    assert {op.aten for op in block if op.moe_role == "router"} >= {"linear", "softmax", "topk"}
    assert {op.aten for op in block if op.moe_role == "expert"} >= {"index_select", "bmm", "index_add"}
    # Fusion keeps router, expert and dense work in separate operators (expert parallelism will move the experts').
    roles = {op.name: op.moe_role for op in block}
    for op in model_graph(workload, microbatch=MBS).layers[1].fwd.ops:
        assert len({roles[member] for member in op.fused if member in roles}) <= 1


@pytest.mark.parametrize("family", ["mixtral", "qwen2_moe"])
def test_the_trace_does_not_depend_on_routing(family):
    workload = small(family)
    first, second = (get_trace(workload, MBS, SEQ, cache=False) for _ in range(2))
    assert first == second
    exported = export_model(workload, MBS, SEQ)
    targets = {getattr(n.target, "__name__", str(n.target)).split(".")[0] for n in exported.graph.nodes
               if n.op == "call_function"}
    assert not targets & DATA_DEPENDENT_ATEN
    for node in exported.graph.nodes:  # every shape is a plain integer: nothing waits on a routing decision
        val = node.meta.get("val")
        for tensor in (val if isinstance(val, (tuple, list)) else [val]):
            assert all(type(d) is int for d in getattr(tensor, "shape", ()))


@pytest.mark.parametrize("knobs,factor", [
    (dict(), 1.0),
    (dict(capacity_factor=1.25), 1.0),  # uniform load: the busiest expert fills 1/1.25 of its buffer
    (dict(load_imbalance=1.5), 1.0),  # capacity 1.0: the busiest expert's excess tokens are dropped
    (dict(load_imbalance=1.5, capacity_factor=2.0), 1.5),
    (dict(load_imbalance=1.5, capacity_factor=1.25), 1.25),
    (dict(load_imbalance=1.3, capacity_factor=None), 1.3),  # dropless
])
def test_expert_tokens_follow_capacity_and_imbalance(knobs, factor):
    workload = small("mixtral", **knobs)
    capacity = math.ceil(factor * TOKENS * 2 / 8)
    expert_matmuls = [op for op in get_trace(workload, MBS, SEQ).ops if op.region == "block0"
                      and op.moe_role == "expert" and op.kind == "matmul"]
    assert [op.gemms[0][:2] for op in expert_matmuls] == [(8, capacity)] * 2
    assert workload.to_dict().keys() >= knobs.keys()
    assert type(workload).from_dict(workload.to_dict()) == workload


def test_dense_workloads_keep_their_dict_and_bad_knobs_are_refused():
    assert "capacity_factor" not in get_workload("llama2-7b").to_dict()
    with pytest.raises(ValueError, match="capacity factor must be positive"):
        small("mixtral", capacity_factor=0)
    with pytest.raises(ValueError, match="load imbalance .* at least 1"):
        small("mixtral", load_imbalance=0.5)


@pytest.mark.parametrize("family", ["mixtral", "qwen2_moe", "qwen3_moe"])
@pytest.mark.parametrize("width", [2, 4])
def test_tensor_parallel_splits_each_expert_and_reduces_once_after_the_combine(family, width):
    workload = small(family)
    full, split = (model_graph(workload, microbatch=MBS, tensor_width=t) for t in (1, width))
    ops = {op.name: op for op in get_trace(workload, MBS, SEQ).ops if op.region == "block0"}

    def gemm_flops(graph, role):
        fused = lambda op: {ops[m].moe_role for m in op.fused if m in ops}  # noqa: E731
        return sum(op.gemm_flops for d in ("fwd", "bwd") for op in getattr(graph.layers[1], d).ops if role in fused(op))

    assert gemm_flops(split, "expert") * width == gemm_flops(full, "expert")
    assert gemm_flops(split, "router") == gemm_flops(full, "router")  # replicated
    hidden = split.layers[1].output_bytes
    comms = lambda direction: [(op.comm_kind, op.comm_bytes, op.comm_group)  # noqa: E731
                               for op in getattr(split.layers[1], direction).ops if op.unit == "comm"]
    # g after the attention output and once after the combine (+ after Qwen2-MoE's shared expert); f before
    # the attention and before the MoE block (experts and shared expert read the same tokens): all of the hidden state
    assert comms("fwd") == [("allreduce", hidden, width)] * (3 if family == "qwen2_moe" else 2)
    assert comms("bwd") == [("allreduce", hidden, width)] * 2
    # Per device: every weight matrix of the block but the routers ÷ t (and Qwen2's q, k, v biases); norms and
    # routers whole.
    cfg = workload.config_dict
    one_layer = dict(cfg, num_hidden_layers=1, vocab_size=0)
    routers = (cfg.get("num_local_experts") or cfg["num_experts"]) * cfg["hidden_size"]
    routers += cfg["hidden_size"] if family == "qwen2_moe" else 0  # the shared expert's gate
    split_weights = matmul_params(family, one_layer, active=False) - routers
    if family == "qwen2_moe":
        split_weights += (cfg["num_attention_heads"] + 2 * cfg["num_key_value_heads"]) * head_size(cfg)
    assert full.layers[1].params - split.layers[1].params == split_weights - split_weights // width


def test_olmoe_is_refused_above_width_one_by_its_query_norm():
    with pytest.raises(TensorParallelError, match=r"model\.layers\.0\.self_attn\.q_proj .*q_norm normalises") as refused:
        model_graph(small("olmoe"), microbatch=MBS, tensor_width=2)
    assert "\n" not in str(refused.value)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MOE_BUILTINS))
def test_builtin_parameters_match_hugging_face_and_the_published_totals(name):
    workload = get_workload(name)
    family, cfg = MOE_BUILTINS[name], workload.config_dict
    hf = hf_parameters(workload)
    assert hf == all_params(family, cfg)
    assert model_graph(name).params_total == hf
    assert abs(hf / workload.published_params - 1) <= published_tolerance(workload.published_params)
    if name in PUBLISHED_ACTIVE:
        active = matmul_params(family, cfg, active=True) + cfg["vocab_size"] * cfg["hidden_size"]  # + embedding table
        assert abs(active / PUBLISHED_ACTIVE[name] - 1) <= published_tolerance(PUBLISHED_ACTIVE[name])


@pytest.mark.parametrize("name", sorted(MOE_BUILTINS))
def test_builtin_forward_flops_within_one_percent_of_the_active_count(name):
    workload = get_workload(name)
    family, cfg = MOE_BUILTINS[name], workload.config_dict
    graph = model_graph(name)  # Qwen1.5-MoE: 4096 tokens · top-4 / 60 experts = 273.07, rounded up to 274 per expert
    expected = 2 * matmul_params(family, cfg, active=True) + attention_flops_per_token(cfg, workload.seq_len)
    assert forward_matmul_flops_per_token(graph) == pytest.approx(expected, rel=0.01)


def tables() -> str:
    """The tables of docs/moe.md: ``PYTHONPATH=. python tests/test_workloads_moe.py``."""
    rows = ["| workload | HF model on meta | ours (trace) | published total | active (config, incl. embedding) | "
            "published active |", "|" + "---|" * 6]
    flops = ["| workload | traced fwd matmul FLOPs / token | analytic | ratio |", "|" + "---|" * 4]
    for name, family in sorted(MOE_BUILTINS.items()):
        workload = get_workload(name)
        cfg = workload.config_dict
        graph = model_graph(name)
        active = matmul_params(family, cfg, active=True) + cfg["vocab_size"] * cfg["hidden_size"]
        published_active = f"{PUBLISHED_ACTIVE[name] / 1e9:.1f} B" if name in PUBLISHED_ACTIVE else "3.3 B (not tested)"
        rows.append(f"| {name} | {hf_parameters(workload):,} | {graph.params_total:,} | "
                    f"{workload.published_params / 1e9:.1f} B | {active:,} | {published_active} |")
        traced = forward_matmul_flops_per_token(graph)
        analytic = 2 * matmul_params(family, cfg, active=True) + attention_flops_per_token(cfg, workload.seq_len)
        flops.append(f"| {name} | {traced:,.0f} | {analytic:,} | {traced / analytic:.6f} |")
    return "\n".join(rows) + "\n\n" + "\n".join(flops)


if __name__ == "__main__":
    print(tables())
