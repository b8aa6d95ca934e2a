"""The host as a stage of the pipeline (phaze_env.host, Stack.host_op_s): a layer pass whose kernels are issued more
slowly than the device runs them takes the issue time, a pass of long kernels is unchanged, the syncs of an expert
dispatch stall the device, the ILP-free bound stays a bound, and the megatron-core profile's fit (one Qwen3 row)
holds on the row it was not fitted to."""

from __future__ import annotations


import pytest

from experiments.validation_cases import get_case
from experiments.validation_fit import CALIBRATION_CASES, error_with, fit_host_op_s
from phaze_env.cluster import Cluster, Stack
from phaze_env.evaluate import evaluate, throughput_upper_bound
from phaze_env.hardware.accelerator import get_preset
from phaze_env.host import SYNC_ROUND_TRIP_S, forward_syncs, host_bound_s, kernels_issued
from phaze_env.plan_spec import PlanSpec
from phaze_env.stacks import MEGATRON_CORE_HOST_OP_S, STACKS
from phaze_env.workloads import custom_workload, model_graph
from phaze_env.workloads.graph import Gemm, Layer, Op, OpGraph

TINY = custom_workload("tiny-gpt2-host", "GPT2Config", "GPT2LMHeadModel", 64, n_embd=128, n_layer=4, n_head=4,
                       n_inner=512, vocab_size=1000, n_positions=64)
PLAN = PlanSpec.parse("t1p1d1m1")


def _layer(routed_experts: int = 0) -> Layer:
    """A hand-built layer: forward a GEMM with a fused activation (2 traced operators) and an add (1); backward the
    GEMM's two gradients (input and weight) with the activation's gradient (2 members, 2 GEMMs) and the add's (1)."""
    gemm = Gemm(1, 8, 8, 8)
    fwd = OpGraph((Op("linear", "matmul", "tc+vc", gemms=(gemm,), fused=("linear", "gelu")),
                   Op("add", "elementwise", "vc", vector_elements=64, fused=("add",))), ((0, 1),))
    bwd = OpGraph((Op("grad_add", "elementwise", "vc", vector_elements=64, fused=("add",)),
                   Op("grad_linear", "matmul", "tc+vc", gemms=(gemm, gemm), fused=("linear", "gelu"))), ((0, 1),))
    return Layer("block", 1, fwd, bwd, params=64, param_bytes=128, flops_fwd=0, flops_bwd=0, activation_stash_bytes=0,
                 input_bytes=0, output_bytes=0, routed_experts=routed_experts, experts_per_token=2 if routed_experts else 0)


def test_kernels_are_counted_by_hand_from_the_traced_operators():
    assert kernels_issued(_layer()) == (3, 3 + 1)  # backward: 3 members + the weight-gradient GEMM
    assert forward_syncs(_layer(), "hierarchical") == 0  # a dense layer never syncs
    assert forward_syncs(_layer(8), "alltoall") == 1 and forward_syncs(_layer(8), "hierarchical") == 2


def test_a_tiny_pass_is_priced_at_its_issue_time_and_a_long_one_is_unchanged():
    assert host_bound_s(1e-6, 100, 0, 10e-6) == pytest.approx(1e-3)  # 100 kernels at 10 µs against 1 µs of device
    assert host_bound_s(5e-3, 100, 0, 10e-6) == 5e-3  # long kernels: the device time, exactly
    assert host_bound_s(5e-3, 100, 2, 10e-6) == pytest.approx(5e-3 + 2 * (10e-6 + SYNC_ROUND_TRIP_S))  # the syncs
    assert host_bound_s(1e-6, 100, 2, 0.0) == 1e-6  # host_op_s 0 (CUDA graphs): nothing added, syncs included


def _time_s(host_op_s: float) -> float:
    cluster = Cluster(n_devices=1, global_batch=4, host_op_s=host_op_s)
    evaluation = evaluate(TINY, get_preset("a100"), cluster, plan=PLAN, cache=False)
    assert evaluation.feasible
    return evaluation.plan.time_per_batch_s


def test_a_host_bound_step_grows_by_the_hand_count_of_its_kernels():
    """Brute force through the evaluator: with every block pass host-bound, the step grows with the host's cost by
    exactly (forward + backward kernels) × blocks × microbatches per unit of ``host_op_s``; a host far faster than the
    device changes nothing."""
    graph = model_graph(TINY)
    block = next(layer for layer in graph.layers if layer.name == "block")
    per_step = sum(kernels_issued(block)) * block.repeat * 4  # 4 microbatches of 1 on one device
    slope = (_time_s(2e-4) - _time_s(1e-4)) / 1e-4
    assert slope == pytest.approx(per_step, rel=1e-6)
    assert _time_s(1e-12) == pytest.approx(_time_s(0.0), rel=1e-12)


def test_the_ilp_free_bound_stays_above_a_host_bound_evaluation():
    for host_op_s in (0.0, 1e-5, 1e-4):
        cluster = Cluster(n_devices=1, global_batch=4, host_op_s=host_op_s)
        achieved = evaluate(TINY, get_preset("a100"), cluster, plan=PLAN, cache=False).throughput_samples_s
        assert throughput_upper_bound(TINY, get_preset("a100"), cluster, plan=PLAN, cache=False) >= achieved


@pytest.mark.parametrize("bad", [-1e-6, float("nan"), 0.01, "20us", True])
def test_a_bad_host_cost_is_one_clear_line(bad):
    with pytest.raises(ValueError, match=r"host_op_s .* must be a number in \[0, 0.001\]") as error:
        Stack(host_op_s=bad)
    assert "\n" not in str(error.value)


def test_the_profiles_that_run_without_cuda_graphs_carry_the_host():
    assert STACKS["megatron-core"].host_op_s == MEGATRON_CORE_HOST_OP_S > 0
    assert STACKS["deepseek-hai-llm"].host_op_s == 0  # HAI-LLM's host path is not published: not carried


def _on_stack_error(name: str, **fields) -> float:
    return error_with(get_case(name), **fields)


def test_the_qwen3_rows_run_the_stack_they_ran_and_the_host_fit_is_their_calibration():
    """The Bridge rows run megatron-core (the stack of their recipes, kernels issued from the host) with each recipe's
    dispatch; the 26.04 row is the host's calibration (left out of the mean), the constant its fit."""
    assert {get_case(name).stack for name in ("bridge2604-qwen3-30b-a3b-fp8", "bridge260201-qwen3-30b-a3b-fp8",
                                              "bridge2511-qwen3-30b-a3b-fp8")} == {
        "megatron-core-deepep", "megatron-core-deepep-a2a-overlap", "megatron-core"}
    for name in ("megatron-core-deepep", "megatron-core-deepep-a2a-overlap"):
        assert STACKS[name].variant_of == "megatron-core" and STACKS[name].host_op_s == MEGATRON_CORE_HOST_OP_S
    assert STACKS["megatron-core-deepep-a2a-overlap"].moe_alltoall_overlap
    assert CALIBRATION_CASES["bridge2604-qwen3-30b-a3b-fp8"] == "megatron-core"
    assert fit_host_op_s(get_case("bridge2604-qwen3-30b-a3b-fp8")) == pytest.approx(MEGATRON_CORE_HOST_OP_S, rel=1e-3)


def test_the_qwen3_rows_on_the_stack_they_ran():
    """Fitted to the 26.04 row (EP 16), held out on 26.02.01 (EP 8, PP 2, VP 12, all-to-all overlap): +100 % without the
    host, within ±15 % with it."""
    assert _on_stack_error("bridge2604-qwen3-30b-a3b-fp8") == pytest.approx(0.0, abs=0.005)
    assert abs(_on_stack_error("bridge260201-qwen3-30b-a3b-fp8")) < 0.15
    assert _on_stack_error("bridge260201-qwen3-30b-a3b-fp8", host_op_s=0.0) > 0.5  # the test fails without the host


def test_a_dense_run_of_long_kernels_is_unaffected():
    """The megatron-core profile's calibration run (Llama 3 70B FP8, TP 4, 8K tokens): device-bound in every pass."""
    case = get_case("bridge2509-llama3-70b-fp8-64")
    assert error_with(case) == pytest.approx(error_with(case, host_op_s=0.0), abs=1e-9)
