"""DeepSeek-V2-Lite: multi-head latent attention (MLA) and DeepSeekMoE traced on meta, with a dense first layer.

References are computed here, independently of the trace: parameters from the Hugging Face model built on meta,
forward FLOPs per token from the architecture (DeepSeek-AI 2024, DeepSeek-V2, arXiv:2405.04434: §2.1.2 MLA,
eqs. 9–19, without query compression as in V2-Lite; §2.2 DeepSeekMoE, eqs. 20–22). Attention is the eager
(non-causal) count the trace makes: ``Q·Kᵀ`` over the whole ``s × s`` square.
"""

import warnings

import pytest
import torch

from phaze_env.workloads import custom_workload, get_trace, get_workload, model_graph
from phaze_env.workloads.deepseek import RealRotaryEmbedding, real_valued_rotary
from phaze_env.workloads.trace import TensorParallelError, TraceError, build_meta_model

SEQ = 256
PUBLISHED_ACTIVE = 2_400_000_000  # the model card's "2.4B activated": 2.45 B without the embedding table, 2.66 B with


def hf_model(workload):
    """The Hugging Face model itself, all layers, on meta from the same config."""
    import transformers

    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        config = getattr(transformers, workload.config_class)(**workload.config_dict)
        return getattr(transformers, workload.model_class)(config)


def mla_flops_per_token(cfg: dict, seq: int) -> int:
    """Forward matmul FLOPs of one MLA layer per token: q = W^Q h; [c^KV; k^R] = W^DKV h (+ W^KR h);
    [k^C; v^C] = W^UK c, W^UV c; scores over (nope + rope) dims; probabilities · values; output projection."""
    h, heads, latent = cfg["hidden_size"], cfg["num_attention_heads"], cfg["kv_lora_rank"]
    nope, rope, value = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    projections = h * heads * (nope + rope) + h * (latent + rope) + latent * heads * (nope + value) + heads * value * h
    return 2 * projections + 2 * heads * seq * (nope + rope) + 2 * heads * seq * value


def ffn_flops_per_token(hidden: int, ffn: int) -> int:
    """A gated (SwiGLU) FFN: gate, up and down projections."""
    return 2 * 3 * hidden * ffn


def moe_flops_per_token(cfg: dict) -> int:
    """Router, top-k routed experts and the shared experts (one FFN of n_shared × moe_intermediate_size)."""
    h, expert = cfg["hidden_size"], cfg["moe_intermediate_size"]
    return (2 * h * cfg["n_routed_experts"] + cfg["num_experts_per_tok"] * ffn_flops_per_token(h, expert)
            + ffn_flops_per_token(h, cfg["n_shared_experts"] * expert))


@pytest.fixture(scope="module")
def lite():
    return get_workload("deepseek-v2-lite"), model_graph("deepseek-v2-lite", seq_len=SEQ)


def test_layers_are_pre_dense_moe_post(lite):
    workload, graph = lite
    assert [(layer.name, layer.repeat) for layer in graph.layers] == [("pre", 1), ("dense", 1), ("block", 26), ("post", 1)]
    layers = {layer.name: layer for layer in graph.layers}
    assert layers["dense"].expert_param_bytes == 0 and layers["dense"].routed_token_bytes == 0
    assert layers["block"].expert_param_bytes > 0
    assert layers["dense"].input_bytes == layers["pre"].output_bytes
    assert layers["block"].input_bytes == layers["dense"].output_bytes


def test_parameters_exact_per_layer(lite):
    workload, graph = lite
    model = hf_model(workload)
    layers = {layer.name: layer for layer in graph.layers}
    assert graph.params_total == sum(p.numel() for p in model.parameters())
    assert layers["dense"].params == sum(p.numel() for p in model.model.layers[0].parameters())
    assert layers["block"].params == sum(p.numel() for p in model.model.layers[1].parameters())
    assert abs(graph.params_total - workload.published_params) / workload.published_params < 0.01


def test_forward_flops_match_mla_and_moe_count(lite):
    workload, graph = lite
    cfg = workload.config_dict
    layers = {layer.name: layer for layer in graph.layers}
    attention = mla_flops_per_token(cfg, SEQ)
    expected = {"dense": attention + ffn_flops_per_token(cfg["hidden_size"], cfg["intermediate_size"]),
                "block": attention + moe_flops_per_token(cfg),
                "post": 2 * cfg["hidden_size"] * cfg["vocab_size"]}
    for name, per_token in expected.items():
        layer = layers[name]
        assert sum(op.gemm_flops for op in layer.fwd.ops) == per_token * SEQ, name  # C = 256·6/64: no rounding
        assert layer.flops_fwd / SEQ == pytest.approx(per_token, rel=0.01), name  # + the vector work
    total = sum(layer.flops_fwd * layer.repeat for layer in graph.layers) / SEQ
    assert total == pytest.approx(sum(expected[n] * layers[n].repeat for n in expected), rel=0.01)


def test_active_parameters_match_published(lite):
    workload, graph = lite
    cfg = workload.config_dict
    h, expert = cfg["hidden_size"], cfg["moe_intermediate_size"]
    idle_experts = cfg["n_routed_experts"] - cfg["num_experts_per_tok"]
    idle = (workload.num_layers - workload.leading_dense_layers) * idle_experts * 3 * h * expert
    active = graph.params_total - idle - cfg["vocab_size"] * h  # a token reads one row of the embedding table
    assert abs(active - PUBLISHED_ACTIVE) / PUBLISHED_ACTIVE < 0.03


def test_tensor_parallel_refused_with_a_clear_error():
    with pytest.raises(TensorParallelError, match="self_attn"):
        model_graph("deepseek-v2-lite", seq_len=SEQ, tensor_width=2)


# Two dense layers, then three MoE layers of 8 experts (top-2).
TINY_CONFIG = dict(
    hidden_size=64, num_hidden_layers=5, num_attention_heads=4, num_key_value_heads=4, intermediate_size=160,
    moe_intermediate_size=32, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, first_k_dense_replace=2,
    kv_lora_rank=32, q_lora_rank=None, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, vocab_size=128,
    max_position_embeddings=64, tie_word_embeddings=False)


def tiny(**changes):
    return custom_workload("tiny-deepseek", "DeepseekV2Config", "DeepseekV2ForCausalLM", 32, **(TINY_CONFIG | changes))


TINY = tiny()


def test_leading_dense_layers_counted_from_the_config():
    """Two dense layers: the trace holds one, the graph repeats it twice; parameters still match HF exactly."""
    assert TINY.family == "deepseek_v2" and TINY.num_experts == 8 and TINY.leading_dense_layers == 2
    graph = model_graph(TINY)
    assert [(layer.name, layer.repeat) for layer in graph.layers] == [("pre", 1), ("dense", 2), ("block", 3), ("post", 1)]
    assert graph.params_total == sum(p.numel() for p in hf_model(TINY).parameters())


def test_all_dense_layers_refused():
    with pytest.raises(TraceError, match="all 5 layers are dense"):
        model_graph(tiny(first_k_dense_replace=5))


def test_evaluate_times_the_dense_layer_apart():
    """The placement search takes the dense layer with its own schedule: both layer kinds are timed, differently."""
    from phaze_env.cluster import get_cluster
    from phaze_env.evaluate import evaluate
    from phaze_env.hardware import get_preset
    from phaze_env.plan_spec import PlanSpec

    cluster = get_cluster("dgx-h100", 8, global_batch=16, optimizer="adam")
    result = evaluate(TINY, get_preset("tpuv4"), cluster, plan=PlanSpec(t=1, microbatch=1), microbatch=(1,),
                      tensor_widths=(1,))
    assert result.feasible
    timings = next(iter(result.layer_timings.values()))
    assert set(timings) == {"pre", "dense", "block", "post"}
    assert timings["dense"] != timings["block"]


def test_real_rotary_equals_the_complex_one():
    """The traced rotary computes HF's complex product exactly (CPU, random values)."""
    import transformers
    from transformers.models.deepseek_v2 import modeling_deepseek_v2 as hf

    config = transformers.DeepseekV2Config(hidden_size=64, num_attention_heads=4, qk_rope_head_dim=8)
    complex_rotary = hf.DeepseekV2RotaryEmbedding(config)
    positions = torch.arange(10)[None]
    xq, xk = torch.randn(1, 4, 10, 8), torch.randn(1, 1, 10, 8)
    expected = hf.apply_rotary_emb(xq, xk, complex_rotary(xq, positions))
    real_rotary = RealRotaryEmbedding(complex_rotary.inv_freq, complex_rotary.attention_scaling)
    model = build_meta_model(get_workload("deepseek-v2-lite"))
    original = hf.apply_rotary_emb
    with real_valued_rotary(model):
        assert isinstance(model.model.rotary_emb, RealRotaryEmbedding)
        got = hf.apply_rotary_emb(xq, xk, real_rotary(xq, positions))
    assert hf.apply_rotary_emb is original and not isinstance(model.model.rotary_emb, RealRotaryEmbedding)
    for mine, theirs in zip(got, expected, strict=True):
        torch.testing.assert_close(mine, theirs)


def test_rotated_halves_stay_on_the_data_path():
    """Queries and keys are the concatenation of their unrotated and rotated parts, both traced (a complex rotary
    would drop the rotated part: a complex tensor is not floating-point)."""
    cfg = get_workload("deepseek-v2-lite").config_dict
    trace = get_trace(get_workload("deepseek-v2-lite"), 1, SEQ)
    head_dim = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
    joins = [op for op in trace.ops if op.region == "block0" and op.aten == "cat" and op.out_shape[-1] == head_dim]
    assert len(joins) == 2 and all(len(op.inputs) == 2 for op in joins)  # queries, keys


def test_matmul_flops_match_torch_flop_counter_on_the_real_model():
    """The HF model run on CPU (real routing, complex rotary, dense first layers) against the traced graph: every
    token meets k experts whatever the routing, so at 32 tokens · top-2 / 8 experts the matmul FLOPs agree exactly."""
    import transformers
    from torch.utils.flop_counter import FlopCounterMode

    config = transformers.DeepseekV2Config(**TINY.config_dict)
    config._attn_implementation = "eager"
    config._experts_implementation = "eager"  # HF's loop of F.linear: FlopCounterMode misses the default kernel
    torch.manual_seed(0)
    model = transformers.DeepseekV2ForCausalLM(config)
    ids = torch.randint(0, TINY_CONFIG["vocab_size"], (1, TINY.seq_len))
    with FlopCounterMode(display=False) as counter:
        model(input_ids=ids, labels=ids).loss.backward()
    graph = model_graph(TINY)
    fwd = sum(op.gemm_flops * layer.repeat for layer in graph.layers for op in layer.fwd.ops)
    bwd = sum(op.gemm_flops * layer.repeat for layer in graph.layers for op in layer.bwd.ops)
    assert fwd + bwd == counter.get_total_flops()
