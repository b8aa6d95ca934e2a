"""The search's bounds and the evaluator share one definition of each plan rule (issue 27, "one cost model"): which
layers a pipeline split counts (``PlanRules.split_layers``), whether a free ``v`` is searched
(``Stack.searches_interleave``) and PHAZE's plan without one (``phaze_plan``). A bound that tried other ``v`` than the
placement DP, or bounded another default plan, could fall below the evaluation and prune the optimum."""

from __future__ import annotations

import numpy as np
import pytest

from phaze_env.cluster import Cluster
from phaze_env.evaluate import PLAN_SEARCH_PROGRESS, LayerTiming, _layer_chain, evaluate, throughput_upper_bound
from phaze_env.placement import Settings
from phaze_env.placement.inputs import layer_arrays
from phaze_env.placement.rules import RunnableShapes, pipeline_split
from phaze_env.placement.stages import chain_stages
from phaze_env.plan_spec import PlanRules, PlanSpec, phaze_plan
from phaze_env.workloads import custom_workload, model_graph
from search.bounds import row_variant_bounds, throughput_bounds
from tiny import SPACE

TINY_LLAMA_6 = custom_workload("tiny-llama-6", "LlamaConfig", "LlamaForCausalLM", 64, hidden_size=128,
                               num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=4,
                               intermediate_size=256, vocab_size=512, max_position_embeddings=64)
"""6 transformer layers (v ∈ {1, 2, 3, 6}), 8 with the embedding and the loss counted (v ∈ {1, 2, 4, 8})."""
TINY_MOE = custom_workload("tiny-mixtral", "MixtralConfig", "MixtralForCausalLM", 64, hidden_size=128,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, intermediate_size=256,
                           num_local_experts=8, num_experts_per_tok=2, vocab_size=1000, max_position_embeddings=64,
                           sliding_window=None, tie_word_embeddings=False)
COUNTED = PlanRules(embedding_loss_in_split=True)
STACKS = {"default": {}, "embedding-loss-counted": dict(plan_rules=COUNTED),
          "no-interleaved-schedule": dict(interleaved_schedule=False),
          "no-pipeline": dict(plan_rules=PlanRules(pipeline=False)),
          "counted-uniform": dict(plan_rules=PlanRules(embedding_loss_in_split=True, uniform_stages=True,
                                                       interleave_min_stages=3))}
PLANS = {"phaze": phaze_plan(), "v-free": PlanSpec.parse("+v=auto"), "v2": PlanSpec.parse("v2")}


def _placement_rules(graph, cluster: Cluster, plan: PlanSpec) -> RunnableShapes:
    """The placement DP's rules on the evaluator's own layer chain of ``graph`` (the timings do not enter them)."""
    timing = LayerTiming(1e-3, 2e-3, 1e-3, 2e-3, "test", "test", True, True)
    chain = _layer_chain(graph, {layer.name: timing for layer in graph.layers}, cluster)
    settings = Settings(cluster=cluster, tensor_width=1, microbatch=1, hbm_bytes=2.0**40, plan=plan)
    return RunnableShapes(settings, chain_stages(layer_arrays(chain)))


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("plan", PLANS)
def test_the_bounds_split_and_interleave_as_the_placement_dp_does(stack, plan):
    cluster = Cluster(n_devices=16, global_batch=64, **STACKS[stack])
    plan = PLANS[plan]
    if (plan.interleave or 1) > 1 and not cluster.stack.searches_interleave:
        pytest.skip("the placement refuses a pinned v > 1 on this stack (Settings)")
    graph = model_graph(TINY_LLAMA_6, microbatch=1, tensor_width=1)
    rules = _placement_rules(graph, cluster, plan)
    assert pipeline_split(graph, cluster, plan) == (rules.total_layers, tuple(rules.interleaves()))


def test_the_rules_are_live_on_this_model():
    """The cases above tell the rules apart: counting the embedding and the loss changes the layers and the ``v``
    tried, and a stack that does not pipeline (or has no interleaved schedule) tries v = 1 only."""
    graph = model_graph(TINY_LLAMA_6, microbatch=1, tensor_width=1)
    free = PLANS["v-free"]
    assert pipeline_split(graph, Cluster(n_devices=16), free) == (6, (1, 2, 3, 6))
    assert pipeline_split(graph, Cluster(n_devices=16, plan_rules=COUNTED), free) == (8, (1, 2, 4, 8))
    assert pipeline_split(graph, Cluster(n_devices=16, plan_rules=PlanRules(pipeline=False)), free) == (6, (1,))
    assert pipeline_split(graph, Cluster(n_devices=16, interleaved_schedule=False), free) == (6, (1,))


def test_the_bounds_hold_where_the_embedding_and_loss_count_in_the_split():
    """Bound ≥ evaluation with ``v`` free on a stack that counts the embedding and the loss (the DP may run v = 4 or 8
    there, which 6 transformer layers alone do not allow)."""
    cluster = Cluster(n_devices=16, global_batch=64, link_bandwidth_Bps=4e9, plan_rules=COUNTED)
    plan = PlanSpec.parse("+v=auto+rc=none|full")
    arch = SPACE.arch_space()
    knobs = dict(microbatch=(1, 4), tensor_widths=(1, 2))
    bounds = throughput_bounds(TINY_LLAMA_6, arch, cluster, plan=plan, **knobs)
    evaluations = [evaluate(TINY_LLAMA_6, arch[i], cluster, plan=plan, hbm_gb=(32.0,), **knobs)
                   for i in range(0, len(arch), 12)]
    assert any(ev.feasible and ev.plan.interleave > 1 for ev in evaluations)  # the interleaving rule is exercised
    for index, evaluation in zip(range(0, len(arch), 12), evaluations):
        assert evaluation.throughput_samples_s <= bounds[index]


def test_without_a_plan_the_bounds_and_the_evaluator_take_phazes_plan():
    """``plan=None`` is :func:`phaze_plan` on both sides: on a mixture-of-experts model (whose ``e`` a plan may leave
    free) the bounds without a plan are the bounds of ``phaze_plan()`` and the evaluation is its evaluation."""
    cluster = Cluster(n_devices=16, global_batch=64, link_bandwidth_Bps=4e9)
    arch = SPACE.arch_space()
    knobs = dict(microbatch=(1, 4), tensor_widths=(1, 2))
    default = throughput_bounds(TINY_MOE, arch, cluster, **knobs)
    np.testing.assert_array_equal(default, throughput_bounds(TINY_MOE, arch, cluster, plan=phaze_plan(), **knobs))
    assert not np.array_equal(default, throughput_bounds(TINY_MOE, arch, cluster,
                                                         plan=PlanSpec.parse("+e=auto+rc=none|full"), **knobs))
    for accelerator in (arch[0], arch[len(arch) - 1]):
        unpinned = evaluate(TINY_MOE, accelerator, cluster, hbm_gb=(32.0,), **knobs)
        pinned = evaluate(TINY_MOE, accelerator, cluster, plan=phaze_plan(), hbm_gb=(32.0,), **knobs)
        assert unpinned.throughput_samples_s == pinned.throughput_samples_s
        assert unpinned.plan == pinned.plan


def test_the_bounds_and_the_evaluator_search_the_same_degrees():
    """Which tensor widths and expert-parallel degrees a search tries is one rule
    (:func:`~phaze_env.placement.rules.searched_degrees`): on 4 devices, of the widths 1, 2, 3, 4, 8 only those that
    split the 4 heads and fit (1, 2, 4) have a bound, and the evaluation reaches one variant per such width,
    microbatch and ``e`` dividing the 8 experts up to the 4 devices (1, 2, 4); a pinned width the rule refuses is
    refused with its reason."""
    cluster = Cluster(n_devices=4, global_batch=16, link_bandwidth_Bps=4e9)
    knobs = dict(microbatch=(1, 2), tensor_widths=(1, 2, 3, 4, 8))
    plan = PlanSpec.parse("+e=auto+rc=none|full")
    arch = SPACE.arch_space()
    assert set(row_variant_bounds(TINY_MOE, arch, cluster, plan=plan, **knobs)) == {
        (t, m) for t in (1, 2, 4) for m in (1, 2)}
    totals = []
    token = PLAN_SEARCH_PROGRESS.set(lambda reached, total: totals.append(total))
    try:
        throughput_upper_bound(TINY_MOE, arch[0], cluster, plan=plan, hbm_gb=(32.0,), cache=False, **knobs)
    finally:
        PLAN_SEARCH_PROGRESS.reset(token)
    assert set(totals) == {3 * 2 * 3}  # t ∈ {1, 2, 4} × m ∈ {1, 2} × e ∈ {1, 2, 4}
    with pytest.raises(ValueError, match=r"tensor width 8 does not divide tiny-mixtral's 4 "
                                         r"attention heads \(or is not a power of two ≤ 4\)"):
        throughput_upper_bound(TINY_MOE, arch[0], cluster, plan=PlanSpec.parse("t8+e=auto"), hbm_gb=(32.0,),
                               cache=False, **knobs)
