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


def test_megatron_core_counts_the_embedding_and_loss_in_the_split():
    """Megatron-Core's account-for-embedding/loss split (``PlanRules.embedding_loss_in_split``): 6 transformer layers
    do not split into 4 uniform stages, 6 + 2 do (the first stage: the embedding + 1 layer; the last: 1 layer + the
    loss), and at v = 2 each stage's 2 split into 2 chunks. Without the rule p = 4 is refused with its reason."""
    from dataclasses import replace

    from phaze_env.cluster import get_cluster
    from phaze_env.evaluate import evaluate
    from phaze_env.hardware import get_preset
    from phaze_env.workloads import custom_workload

    tiny = custom_workload("tiny-llama-6", "LlamaConfig", "LlamaForCausalLM", 64, hidden_size=128,
                           num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=4, intermediate_size=256,
                           vocab_size=512, max_position_embeddings=64)
    megatron = get_stack("megatron-lm")
    cluster = megatron.structure(get_cluster("dgx-a100", 4, global_batch=8))
    plan = PlanSpec.parse("t1p4d1m1v2+rc=none")
    refused = evaluate(tiny, get_preset("a100"), cluster, plan=plan)
    assert not refused.feasible and "does not divide the 6 transformer layers" in refused.reason
    counted = cluster.replace(plan_rules=replace(cluster.stack.plan_rules, embedding_loss_in_split=True))
    runs = evaluate(tiny, get_preset("a100"), counted, plan=plan)
    assert runs.feasible, runs.reason
    # layers per stage as the placement lists them: the embedding (pre) and head (post) are layers of the chain
    assert [len(stage) for stage in runs.plan.stage_layers] == [2, 2, 2, 2]
