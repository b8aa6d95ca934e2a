"""Each microbatch's weight-gradient accumulation into the main gradients (Stack.main_grad_accumulation_bytes,
phaze_env.evaluate.main_grad_accumulation_s): the step grows by the hand count of the weights' bytes, a rank's routed
experts count once per rank, the ILP-free bound stays a bound, bad values are one clear line, and the profiles carry
it where their stack does."""

from __future__ import annotations

import math

import pytest

from phaze_env.cluster import Cluster
from phaze_env.evaluate import evaluate, main_grad_accumulation_s, throughput_upper_bound
from phaze_env.hardware.accelerator import get_preset
from phaze_env.plan_spec import PlanSpec
from phaze_env.stacks import (MEGATRON_CORE_MAIN_GRAD_BYTES, STACKS, SYSTEM_MAIN_GRAD_ACCUMULATION_BYTES,
                              get_system_stack)
from phaze_env.workloads import custom_workload, model_graph
from phaze_env.workloads.graph import Layer, OpGraph

TINY = custom_workload("tiny-gpt2-accumulate", "GPT2Config", "GPT2LMHeadModel", 64, n_embd=128, n_layer=4, n_head=4,
                       n_inner=512, vocab_size=1000, n_positions=64)
PLAN = PlanSpec.parse("t1p1d1m1")
MICROBATCHES = 4  # global batch 4, microbatch 1, one device


def _step_s(per_weight: float) -> float:
    cluster = Cluster(n_devices=1, global_batch=MICROBATCHES, main_grad_accumulation_bytes=per_weight)
    evaluation = evaluate(TINY, get_preset("a100"), cluster, plan=PLAN, cache=False)
    assert evaluation.feasible
    return evaluation.plan.time_per_batch_s


def test_the_step_grows_by_the_hand_count_of_the_weights_bytes():
    """Brute force through the evaluator on one device: every microbatch's backward pass of every layer adds its
    weights × the bytes per weight at the chip's achieved HBM bandwidth (the default framework efficiency 1)."""
    graph = model_graph(TINY)
    weights = sum(layer.params * layer.repeat for layer in graph.layers)
    bandwidth = get_preset("a100").effective_hbm_bandwidth_Bps
    expected_per_byte = MICROBATCHES * weights / bandwidth
    assert (_step_s(8.0) - _step_s(4.0)) / 4.0 == pytest.approx(expected_per_byte, rel=1e-6)
    assert _step_s(4.0) - _step_s(0.0) == pytest.approx(4.0 * expected_per_byte, rel=1e-6)


def test_a_ranks_routed_experts_count_once_per_rank():
    empty = OpGraph((), ())
    layer = Layer("block", 1, empty, empty, params=1000, param_bytes=2000, flops_fwd=0, flops_bwd=0,
                  activation_stash_bytes=0, input_bytes=0, output_bytes=0, expert_param_bytes=1600, routed_experts=8,
                  experts_per_token=2)
    cluster = Cluster(n_devices=4, global_batch=4, main_grad_accumulation_bytes=4.0)
    # 200 dense weights + 800 expert weights of which a rank of 4 holds 200: 400 weights, 4 bytes each
    assert main_grad_accumulation_s(layer, 4, cluster, 1e3) == pytest.approx(4.0 * 400 / 1e3)
    assert main_grad_accumulation_s(layer, 1, cluster, 1e3) == pytest.approx(4.0 * 1000 / 1e3)
    assert main_grad_accumulation_s(layer, 4, Cluster(n_devices=4, global_batch=4), 1e3) == 0.0  # not priced
    assert main_grad_accumulation_s(layer, 4, None, 1e3) == 0.0


def test_the_ilp_free_bound_stays_above_an_accumulating_evaluation():
    for per_weight in (0.0, 4.0, 8.0):
        cluster = Cluster(n_devices=1, global_batch=MICROBATCHES, main_grad_accumulation_bytes=per_weight)
        achieved = evaluate(TINY, get_preset("a100"), cluster, plan=PLAN, cache=False).throughput_samples_s
        assert throughput_upper_bound(TINY, get_preset("a100"), cluster, plan=PLAN, cache=False) >= achieved


@pytest.mark.parametrize("bad", [-1.0, math.inf, math.nan, True, "4"])
def test_a_bad_byte_count_is_one_clear_line(bad):
    with pytest.raises(ValueError, match=r"main_grad_accumulation_bytes must be a finite number of bytes per weight"):
        Cluster(n_devices=1, global_batch=1, main_grad_accumulation_bytes=bad)


def test_the_profiles_carry_it_where_their_stack_accumulates():
    core = STACKS["megatron-core"]
    assert core.stack(core.fits[0]).main_grad_accumulation_bytes == MEGATRON_CORE_MAIN_GRAD_BYTES == 4.0
    assert all(STACKS[name].main_grad_accumulation_bytes == MEGATRON_CORE_MAIN_GRAD_BYTES
               for name in STACKS if STACKS[name].variant_of == "megatron-core")
    assert STACKS["megatron-lm"].main_grad_accumulation_bytes == 0.0  # its fits absorb it (a known limit)
    system = get_system_stack("megatron-core").structure
    assert system.main_grad_accumulation_bytes == SYSTEM_MAIN_GRAD_ACCUMULATION_BYTES == MEGATRON_CORE_MAIN_GRAD_BYTES
