"""DeepSeek-V3's recompute of every RMSNorm and the MLA up-projections (arXiv:2412.19437 §3.2.3) as a stack knob
(``Stack.recompute_norms_up_projections``): the stash it drops, counted by hand from the model's configuration, and
the backward time it adds."""

from __future__ import annotations

import pytest

from experiments.validation_cases import get_case
from experiments.validation_fit import evaluation_with
from phaze_env.cluster import Cluster
from phaze_env.evaluate import layer_stash_bytes
from phaze_env.stacks import STACKS
from phaze_env.workloads.build import model_graph
from phaze_env.workloads.registry import get_workload

SEQ = 1024  # no traced tensor is then (…, n, n) by accident (the attention classifier's square test)


@pytest.fixture(scope="module")
def deepseek_block():
    return next(layer for layer in model_graph("deepseek-v3", seq_len=SEQ).layers if layer.name == "block")


def test_the_stash_loses_the_norm_outputs_and_the_heads_q_k_v(deepseek_block):
    """Per token, as the traced block keeps them: the four RMSNorms' outputs (the input and post-attention norms over
    the hidden size, the query and key-value latents' norms), and what the up-projections make for the attention: q and
    k over every head (nope + rope dimensions) and kv_b_proj's keys and values (nope + v dimensions); bf16."""
    cfg = get_workload("deepseek-v3").config_dict
    heads, nope, rope, v = (int(cfg[key]) for key in ("num_attention_heads", "qk_nope_head_dim", "qk_rope_head_dim",
                                                      "v_head_dim"))
    norms = 2 * int(cfg["hidden_size"]) + int(cfg["q_lora_rank"]) + int(cfg["kv_lora_rank"])
    up = 2 * heads * (nope + rope) + heads * (nope + v)
    assert deepseek_block.stash_norm_up_bytes == pytest.approx(SEQ * 2 * (norms + up), rel=1e-4)
    # the rerun: the four norms, the query up-projection with its rotary embedding, the key-value one, q's and k's concat
    assert len(deepseek_block.norm_up_rerun) == 8


def test_the_knob_drops_what_fp8_had_left_of_it(deepseek_block):
    plain = Cluster(stack=STACKS["deepseek-hai-llm"].stack(STACKS["deepseek-hai-llm"].fits[0]))
    without = plain.replace(recompute_norms_up_projections=False)
    for number_format, narrowed in (("bf16", 0.0), ("fp8", 0.5)):
        kept = layer_stash_bytes(deepseek_block, without, number_format)[0]
        dropped = kept - layer_stash_bytes(deepseek_block, plain, number_format)[0]
        assert dropped == pytest.approx(deepseek_block.stash_norm_up_bytes
                                        - narrowed * deepseek_block.stash_norm_up_gemm_input_bytes)
        assert 0 < deepseek_block.stash_norm_up_gemm_input_bytes < deepseek_block.stash_norm_up_bytes
    assert "RMSNorm and MLA up-projections recomputed" in plain.stack.describe()
    assert "recompute_norms_up_projections" not in without.stack.to_dict()  # other stacks' cache keys unchanged


@pytest.mark.slow
def test_the_backward_pays_the_rerun_and_the_stash_shrinks():
    """DeepSeek-V3's published plan (memory not binding): the knob adds to each transformer layer's backward pass only,
    and lowers the fullest device's activations."""
    case = get_case("deepseek-v3-2048-h800")
    on, off = (evaluation_with(case, hbm_gb=1024.0, recompute_norms_up_projections=knob) for knob in (True, False))
    (timings_on,), (timings_off,) = on.layer_timings.values(), off.layer_timings.values()
    for name in ("dense", "block"):
        assert timings_on[name]["fwd_s"] == timings_off[name]["fwd_s"]
        assert timings_on[name]["bwd_s"] > timings_off[name]["bwd_s"]
    assert on.plan.memory_bytes["activations"] < off.plan.memory_bytes["activations"]
