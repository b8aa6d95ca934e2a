"""Activation stash per layer against Korthikanti et al. 2022 (eq. 1 and 2) for GPT-3 175B, and against what eager
PyTorch autograd saves (measured with ``torch.autograd.graph.saved_tensors_hooks``) for small HF blocks.

The differences from Korthikanti's formulas are the deliberate ones documented next to ``SAVED_FOR_BACKWARD`` in
:mod:`phaze_env.workloads.trace` (eager HF GPT-2: unfused tanh-GELU, no dropout); the tests hold those terms exactly.
"""

import pytest

from phaze_env.cluster import Cluster
from phaze_env.evaluate import layer_stash_bytes
from phaze_env.workloads import custom_workload, model_graph

S, B, H, A = 2048, 1, 12288, 96  # GPT-3 175B: sequence, microbatch, hidden, heads
SBH = S * B * H


def korthikanti_bytes(t: int) -> float:
    if t == 1:
        return SBH * (34 + 5 * A * S / H)  # eq. 1
    return SBH * (10 + 24 / t + 5 * A * S / (H * t))  # eq. 2


def block(t: int):
    graph = model_graph("gpt3-175b", microbatch=B, tensor_width=t)
    return next(layer for layer in graph.layers if layer.repeat > 1)


NO_DROPOUT_ATTENTION = -3 * A * S * S * B  # softmax output only, not its dropout mask and output (Megatron: 5·as²b)
DROPOUT_MASKS = -2 * SBH  # the two s·b·h dropout masks (attention output, MLP output)
EAGER_GELU = 24 * SBH  # tanh, 0.5·x and 1 + tanh, 4h wide each, beyond the GELU input and output Megatron keeps


@pytest.mark.parametrize("t", [1, 8])
def test_eager_stash_is_korthikanti_plus_the_documented_eager_differences(t):
    expected = korthikanti_bytes(t) + (EAGER_GELU + NO_DROPOUT_ATTENTION) / t + DROPOUT_MASKS
    assert block(t).activation_stash_bytes == pytest.approx(expected)


@pytest.mark.parametrize("t", [1, 8])
def test_a_fusing_stack_keeps_megatrons_stash_less_dropout(t):
    """Fused kernels rebuild the GELU's intermediates: what a fusing stack stashes is eq. 1/2 without dropout."""
    stash, attention, replicated = layer_stash_bytes(block(t), Cluster())
    assert stash == pytest.approx(korthikanti_bytes(t) + NO_DROPOUT_ATTENTION / t + DROPOUT_MASKS)
    assert attention == pytest.approx(2 * A * S * S * B / t)  # the softmax output, what selective recompute drops
    # the LayerNorms' inputs and outputs (the QKV and fc1 inputs): Korthikanti's 10sbh less the dropout masks
    assert replicated == pytest.approx(8 * SBH)
    eager = layer_stash_bytes(block(t), Cluster(unfused_elementwise=True))
    assert eager == (block(t).activation_stash_bytes, block(t).stash_attention_bytes, block(t).stash_replicated_bytes)


LINEAR_INPUTS = 4 * SBH  # the QKV and fc1 inputs (the LayerNorms' outputs), 2·sbh each, replicated without SP


@pytest.mark.parametrize("t", [1, 8])
def test_the_gemm_input_part_of_the_stash_is_the_linears_inputs(t):
    """Korthikanti's Linear inputs: QKV and fc1 (2sbh each, replicated), the projection's (2sbh/t) and fc2's (8sbh/t)."""
    layer = block(t)
    assert layer.stash_gemm_input_bytes == pytest.approx(LINEAR_INPUTS + 10 * SBH / t)
    assert layer.stash_gemm_input_replicated_bytes == pytest.approx(LINEAR_INPUTS)


@pytest.mark.parametrize("t", [1, 8])
def test_an_fp8_layer_keeps_its_linear_inputs_in_one_byte(t):
    """TE keeps an FP8 Linear's input for its weight gradient in FP8: half the bf16 bytes of those tensors; the
    attention part and the bf16 layers (embedding, head) stay as they are."""
    bf16 = layer_stash_bytes(block(t), Cluster())
    fp8 = layer_stash_bytes(block(t), Cluster(), "fp8", 2)
    assert bf16[0] - fp8[0] == pytest.approx((LINEAR_INPUTS + 10 * SBH / t) / 2)
    assert (bf16[1], bf16[2] - fp8[2]) == (fp8[1], pytest.approx(LINEAR_INPUTS / 2))
    head = next(layer for layer in model_graph("gpt3-175b", microbatch=B, tensor_width=t).layers if layer.name == "post")
    assert layer_stash_bytes(head, Cluster(), "fp8", 2) == layer_stash_bytes(head, Cluster())


def test_an_moe_blocks_gemm_inputs_are_its_experts_and_not_the_routers():
    """Qwen3-30B-A3B (hidden 2048, 32 × 128 query width, top-8 of 128 experts of width 768) at EP 8: the QKV and
    projection inputs, then each routed token's input to FC1 and to FC2; the router's input stays in bf16 (Megatron-
    Core's router is not an FP8 Linear) and is not counted."""
    tokens, hidden, query, top_k, expert_ffn = 256, 2048, 32 * 128, 8, 768
    graph = model_graph("qwen3-30b-a3b", seq_len=tokens, microbatch=1, expert_parallel=8)
    layer = next(layer for layer in graph.layers if layer.repeat > 1)
    assert layer.stash_gemm_input_bytes == 2 * tokens * (hidden + query + top_k * (hidden + expert_ffn))


def _autograd_saved_bytes(model, ids, blocks) -> int:
    """Bytes (2 per element) of the distinct non-parameter storages autograd saves inside the second block."""
    import torch

    inside, saved = [False], {}
    blocks[1].register_forward_pre_hook(lambda *_: inside.__setitem__(0, True))
    blocks[1].register_forward_hook(lambda *_: inside.__setitem__(0, False))
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if inside[0] and storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes() // tensor.element_size() * 2
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(ids, labels=ids)
    return sum(saved.values())


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_eager_stash_matches_what_autograd_saves(family):
    """The traced stash of a block is within 10 % of what eager autograd keeps for it (a small HF model, eager
    attention). The trace is below by the copies ``torch.matmul`` makes of q and kᵀ to batch them (a storage of its
    own each); before products with constants were known to save nothing (rotary q·cos, the scale by √d) it was
    15–25 % above."""
    import torch
    import transformers

    seq, hidden = 64, 128
    if family == "gpt2":
        config = dict(n_embd=hidden, n_layer=2, n_head=4, n_positions=seq, vocab_size=1000)
        workload = custom_workload("stash-gpt2", "GPT2Config", "GPT2LMHeadModel", seq, **config)
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**config, attn_pdrop=0, resid_pdrop=0, embd_pdrop=0))
        blocks = model.transformer.h
    else:
        config = dict(hidden_size=hidden, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      intermediate_size=352, vocab_size=1000, max_position_embeddings=seq)
        workload = custom_workload("stash-llama", "LlamaConfig", "LlamaForCausalLM", seq, **config)
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**config))
        blocks = model.model.layers
    model.config._attn_implementation = "eager"
    torch.manual_seed(0)
    measured = _autograd_saved_bytes(model.train(), torch.randint(0, 1000, (1, seq)), blocks)
    traced = next(layer for layer in model_graph(workload, seq_len=seq).layers if layer.name == "block")
    assert traced.activation_stash_bytes == pytest.approx(measured, rel=0.10)
