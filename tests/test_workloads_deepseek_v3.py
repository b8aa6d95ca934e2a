"""DeepSeek-V3 (issue 28 item 3's built-in): MLA with query compression, three dense layers, then DeepSeekMoE layers of
1 shared + 256 routed experts behind the sigmoid, group-limited router — traced on meta, checked against references
computed here from the architecture (DeepSeek-AI 2024, DeepSeek-V3 Technical Report, arXiv:2412.19437, §2.1) and the
Hugging Face model itself."""

import pytest

from phaze_env.workloads import get_workload, model_graph
from test_workloads_deepseek import ffn_flops_per_token, hf_model

SEQ = 256
PUBLISHED_ACTIVE = 37_000_000_000  # §1 / §4.2: "37B activated for each token"


@pytest.fixture(scope="module")
def v3():
    return get_workload("deepseek-v3"), model_graph("deepseek-v3", seq_len=SEQ)


def test_layers_and_parameters_are_the_hf_models(v3):
    workload, graph = v3
    assert [(layer.name, layer.repeat) for layer in graph.layers] == [("pre", 1), ("dense", 3), ("block", 58),
                                                                      ("post", 1)]
    model = hf_model(workload)
    layers = {layer.name: layer for layer in graph.layers}
    assert graph.params_total == sum(p.numel() for p in model.parameters())
    assert layers["block"].params == sum(p.numel() for p in model.model.layers[3].parameters())
    assert abs(graph.params_total - workload.published_params) / workload.published_params < 0.01  # 671 B


def test_active_parameters_match_published(v3):
    """37 B activated: the whole model but the 248 idle routed experts of each of the 58 MoE layers and the embedding
    table (a token reads one row); −1.0 % (the published figure is rounded)."""
    workload, graph = v3
    cfg = workload.config_dict
    idle = 58 * (cfg["n_routed_experts"] - cfg["num_experts_per_tok"]) * 3 * cfg["hidden_size"] * cfg["moe_intermediate_size"]
    active = graph.params_total - idle - cfg["vocab_size"] * cfg["hidden_size"]
    assert abs(active - PUBLISHED_ACTIVE) / PUBLISHED_ACTIVE < 0.02


def test_forward_matmul_flops_are_mla_with_query_compression_and_the_moe(v3):
    """Per token: q = W^UQ W^DQ h (rank 1536), [c^KV; k^R] = W^DKV h, keys and values up from the 512-wide latent,
    scores over 192 dims and values of 128 for all ``s`` keys, the output projection; then the router (256 logits),
    8 routed experts and 1 shared expert of 2048 (SwiGLU), or the dense FFN of 18432."""
    workload, graph = v3
    cfg = workload.config_dict
    h, heads, latent, q_rank = cfg["hidden_size"], cfg["num_attention_heads"], cfg["kv_lora_rank"], cfg["q_lora_rank"]
    nope, rope, value = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    projections = (h * q_rank + q_rank * heads * (nope + rope) + h * (latent + rope) + latent * heads * (nope + value)
                   + heads * value * h)
    attention = 2 * projections + 2 * heads * SEQ * (nope + rope) + 2 * heads * SEQ * value
    expert = cfg["moe_intermediate_size"]
    moe = 2 * h * cfg["n_routed_experts"] + (cfg["num_experts_per_tok"] + cfg["n_shared_experts"]) * ffn_flops_per_token(h, expert)
    layers = {layer.name: layer for layer in graph.layers}
    assert sum(op.gemm_flops for op in layers["block"].fwd.ops) == (attention + moe) * SEQ  # C = 256·8/256: exact
    assert sum(op.gemm_flops for op in layers["dense"].fwd.ops) == (attention + ffn_flops_per_token(h, cfg["intermediate_size"])) * SEQ


def test_the_router_is_sigmoid_and_group_limited(v3):
    """The router's vector work: the sigmoid over 256 affinities, the per-group top-2 and the top-4 groups' mask."""
    _, graph = v3
    block = next(layer for layer in graph.layers if layer.name == "block")
    members = {name for op in block.fwd.ops for name in op.fused}
    assert any(name.startswith("sigmoid") for name in members) and any(name.startswith("scatter") for name in members)


def test_expert_parallel_64_holds_four_experts_per_rank():
    rank = model_graph("deepseek-v3", seq_len=SEQ, expert_parallel=64)
    block = next(layer for layer in rank.layers if layer.name == "block")
    batches = {g.batch for op in block.fwd.ops for g in op.gemms if any(n.startswith("bmm") for n in op.fused)}
    assert batches == {256 // 64}
