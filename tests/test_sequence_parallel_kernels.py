"""Sequence parallelism's per-token kernels and Transformer Engine's FP8 casts, counted by hand from the sources
(issue 28, docs/fidelity.md "Per-token kernels at hidden 4096"): a Llama block at tensor width t casts, forward, the
norm output once for q, k and v (one QKV GEMM) and the second norm's output once for gate and up (one fc1 GEMM), each on
its s/t tokens before the FP8 all-gather (3 B per element: bf16 read, FP8 written) and transposed once gathered (2 B
per element on all s tokens), and with TE's fused cast-transpose (4 B per element) the attention output (s × h/t) and
the SwiGLU output (s × f/t); backward, each GEMM's output gradient, a row-parallel one (proj, fc2) cast before the
gather and transposed after it; at t = 1 every cast is the fused 4 B one; the norms and residual adds run on s/t
tokens."""

from dataclasses import replace

import pytest

from experiments.validation_cases import get_case
from experiments.validation_fit import case_cluster
from phaze_env.cluster import Stack, get_cluster
from phaze_env.evaluate import evaluate
from phaze_env.plan_spec import PlanSpec
from phaze_env.hardware import get_preset
from phaze_env.hardware.number_format import fp8_cast_bytes, fp8_flags
from phaze_env.pricing import price_ops, sequence_split
from phaze_env.stacks import STACKS, SYSTEM_STACKS
from phaze_env.workloads import custom_workload, model_graph

HIDDEN, FFN, HEADS, KV_HEADS, SEQ = 256, 512, 8, 2, 256
TINY_LLAMA = custom_workload("tiny-llama-gqa-sp", "LlamaConfig", "LlamaForCausalLM", SEQ, hidden_size=HIDDEN,
                             num_hidden_layers=2, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                             intermediate_size=FFN, vocab_size=512, max_position_embeddings=SEQ)
KV = HIDDEN // HEADS * KV_HEADS  # the k (and v) projection's width
H100_FP8 = get_preset("h100-fp8")


def _block(t: int):
    graph = model_graph(TINY_LLAMA, tensor_width=t)
    return next(layer for layer in graph.layers if layer.name == "block")


def _cast_bytes(ops, sequence_parallel: bool) -> int:
    return sum(fp8_cast_bytes(op, sequence_parallel) for op, fp8 in zip(ops, fp8_flags(ops, "block", "fp8")) if fp8)


def _gathered(t: int, elements: int) -> int:
    """One replicated operand of ``elements`` under sequence parallelism: cast on s/t tokens, transposed on all."""
    return 4 * elements if t == 1 else 3 * elements // t + 2 * elements


@pytest.mark.parametrize("t", [1, 2, 4])
def test_forward_casts_are_one_per_te_module_input(t):
    # QKV input and fc1 input (s × h each, replicated) + attention output (s × h/t) + SwiGLU output (s × f/t)
    assert _cast_bytes(_block(t).fwd.ops, True) == 2 * _gathered(t, SEQ * HIDDEN) + 4 * SEQ * (HIDDEN + FFN) // t


@pytest.mark.parametrize("t", [1, 2, 4])
def test_backward_casts_are_each_output_gradient_row_parallel_ones_gathered(t):
    # dY of proj and fc2 (s × h each, replicated) + dY of QKV (s × (h + 2·kv)/t) and fc1 (s × 2f/t)
    assert _cast_bytes(_block(t).bwd.ops, True) == (2 * _gathered(t, SEQ * HIDDEN)
                                                    + 4 * SEQ * (HIDDEN + 2 * KV + 2 * FFN) // t)


def test_without_sequence_parallelism_replicated_operands_are_cast_on_every_token():
    fwd, bwd = _block(4).fwd.ops, _block(4).bwd.ops
    assert _cast_bytes(fwd, False) == 4 * SEQ * (2 * HIDDEN + HIDDEN // 4 + FFN // 4)
    assert _cast_bytes(bwd, False) == 4 * SEQ * ((HIDDEN + 2 * KV + 2 * FFN) // 4 + 2 * HIDDEN)


def test_norms_and_residual_adds_run_on_s_over_t_tokens():
    t = 4
    ops = _block(t).fwd.ops
    replicated = [op for op in ops if op.sequence_shards > 1]
    # the two RMSNorms and the two residual adds (fused into the chains the tracer forms), nothing split by TP
    assert {member for op in replicated for member in op.fused} >= {"pow_1", "add_7", "add_9"}
    assert all(op.unit == "vc" and op.sequence_shards == t for op in replicated)
    for op in replicated:
        split = sequence_split(op)
        assert split.vector_elements * t == pytest.approx(op.vector_elements, abs=t)
        assert (split.bytes_read + split.bytes_written) * t == pytest.approx(op.bytes_read + op.bytes_written, abs=2 * t)
    assert all(sequence_split(op) is op for op in ops if op.sequence_shards == 1)
    assert not any(op.sequence_shards > 1 for op in _block(1).fwd.ops)


def test_pricing_applies_it_only_where_the_stack_runs_it():
    ops = _block(4).fwd.ops
    cluster = get_cluster("dgx-h100", 8)
    plain = price_ops(ops, H100_FP8, cluster, layer="block")
    sp = price_ops(ops, H100_FP8, cluster.replace(sequence_parallel_kernels=True), layer="block")
    one_plain, _ = plain.latencies_s()
    one_sp, _ = sp.latencies_s()
    replicated = [i for i, op in enumerate(ops) if op.sequence_shards > 1 or (op.cast_shards > 1 and not op.cast_shared)]
    assert replicated and all(one_sp[i] < one_plain[i] for i in replicated)
    assert all(one_sp[i] == one_plain[i] for i in range(len(ops)) if i not in replicated)


def test_the_megatron_core_profile_and_the_system_stack_run_it():
    assert STACKS["megatron-core"].sequence_parallel_kernels
    assert case_cluster(get_case("bridge2509-llama3-70b-fp8-64")).stack.sequence_parallel_kernels
    assert SYSTEM_STACKS["megatron-core"].structure.sequence_parallel_kernels  # its fits redone with it (rival_runs --fit)
    assert not STACKS["megatron-lm"].sequence_parallel_kernels
    with pytest.raises(ValueError, match="sequence_parallel_kernels"):
        replace(Stack(), sequence_parallel_kernels="yes")


def test_a_plan_without_sequence_parallelism_is_refused_where_the_stack_always_runs_it():
    cluster = STACKS["megatron-core"].apply(get_cluster("dgx-h100", 8, global_batch=8))
    with pytest.raises(ValueError, match="turns sequence parallelism off at t=2.*sequence_parallel_kernels"):
        evaluate(TINY_LLAMA, H100_FP8, cluster, plan=PlanSpec(t=2, p=1, d=4, sequence_parallel=False))
    assert evaluate(TINY_LLAMA, H100_FP8, cluster, plan=PlanSpec(t=2, p=1, d=4, sequence_parallel=True)).feasible


def test_a_rival_run_made_without_sequence_parallelism_is_priced_as_it_ran():
    """Korthikanti et al.'s full-recompute row (t 8, no sequence parallelism), the system stack's A100 calibration:
    priced with its norms on all tokens instead of refused by a stack that always runs sequence parallelism."""
    from experiments.rival_runs import predicted_metric, rival_cluster

    stack = SYSTEM_STACKS["megatron-core"]
    case = get_case("korthikanti22-175b-full")
    assert not rival_cluster(case, stack).stack.sequence_parallel_kernels
    assert rival_cluster(get_case("dgxc-gpt3-175b-bf16-512"), stack).stack.sequence_parallel_kernels
    assert predicted_metric(case, stack) > 0
