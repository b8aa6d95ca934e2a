"""The issue's GPT-3 175B / 4,096 A100 instance: the free plan is runnable under Megatron-LM's rules and no pinned
interleaving or ZeRO stage beats it (``python -m experiments.runnable_plans`` prints the same figures)."""

from __future__ import annotations

import pytest

from experiments import runnable_plans
from phaze_env.plan_spec import PlanSpec
from phaze_env.stacks import get_stack


@pytest.mark.slow
def test_the_free_gpt3_plan_is_runnable_and_no_pinned_v_beats_it():
    free = runnable_plans.run(runnable_plans.FREE)
    assert free.proven and runnable_plans.runnable_reason(free) == ""
    free_s = runnable_plans.GLOBAL_BATCH / free.throughput_samples_s
    for v in (3, 6, 8):
        pinned = runnable_plans.run(PlanSpec(**{**runnable_plans.FREE.to_dict(), "interleave": v}))
        assert pinned.feasible and runnable_plans.runnable_reason(pinned) == ""
        assert free_s <= runnable_plans.GLOBAL_BATCH / pinned.throughput_samples_s * (1 + 1e-9), v


def test_megatron_lm_refuses_a_zero_stage_it_does_not_have():
    with pytest.raises(ValueError, match="runs ZeRO stages 0, 1 only"):
        runnable_plans.run(PlanSpec(**{**runnable_plans.FREE.to_dict(), "zero": 3}))
    assert get_stack("pytorch-fsdp").plan_rules.pipeline is False
