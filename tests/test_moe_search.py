"""The exact search with a plan (expert parallelism): its bounds hold for ``e`` free, and its answer on a tiny
mixture-of-experts model equals brute force over the tiny space."""

import pytest

from phaze_env.evaluate import evaluate, throughput_upper_bound
from phaze_env.plan_spec import PlanSpec
from phaze_env.workloads import TENSOR_WIDTHS, custom_workload
from search.bounds import throughput_bounds
from search.cli import build_parser, config_from_args
from search.phaze import SearchConfig, run_search
from tiny import CLUSTER, SPACE

TINY_MOE = custom_workload("tiny-mixtral", "MixtralConfig", "MixtralForCausalLM", 64, hidden_size=128,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, intermediate_size=256,
                           num_local_experts=8, num_experts_per_tok=2, vocab_size=1000, max_position_embeddings=64,
                           sliding_window=None, tie_word_embeddings=False)
EXPERT_PLAN = PlanSpec.parse("+e=auto+rc=none|full")  # PHAZE's plan space + the expert-parallel degree
ARCH = SPACE.arch_space()
KNOBS = dict(microbatch=(1, 4), hbm_gb=(32.0,), tensor_widths=(1, 2))


def config(**kw):
    return SearchConfig(workloads=[TINY_MOE], cluster=CLUSTER, space=SPACE, tensor_widths=(1, 2), **kw)


@pytest.fixture(scope="module")
def brute_force():
    """evaluate() of every architecture of SPACE on the tiny MoE, with expert parallelism and without."""
    from phaze_env.workloads.registry import BUILTIN

    BUILTIN.setdefault(TINY_MOE.name, TINY_MOE)  # the search addresses workloads by name
    return {plan: [evaluate(TINY_MOE, acc, CLUSTER, plan=plan, **KNOBS) for acc in ARCH] for plan in (None, EXPERT_PLAN)}


def test_expert_parallelism_is_chosen_and_pays(brute_force):
    """The mechanism is live on this model: some design picks e > 1 and beats its PHAZE-space (e = 1) evaluation."""
    pairs = list(zip(brute_force[None], brute_force[EXPERT_PLAN]))
    assert all(ep.throughput_samples_s >= phaze.throughput_samples_s * (1 - 1e-12) for phaze, ep in pairs)
    assert any(ep.feasible and ep.plan.expert_parallel > 1 and ep.throughput_samples_s > phaze.throughput_samples_s
               for phaze, ep in pairs)


def test_bounds_hold_with_expert_parallelism(brute_force):
    """Every design: the search's vectorised bound and the ILP-free placement bound ≥ the evaluation with e free."""
    bounds = throughput_bounds(TINY_MOE, ARCH, CLUSTER, microbatch=(1, 4), tensor_widths=(1, 2), plan=EXPERT_PLAN)
    for index, (acc, ev) in enumerate(zip(ARCH, brute_force[EXPERT_PLAN])):
        assert ev.throughput_samples_s <= bounds[index]
        if index % 7 == 0:  # slower: sampled
            assert ev.throughput_samples_s <= throughput_upper_bound(TINY_MOE, acc, CLUSTER, plan=EXPERT_PLAN, **KNOBS)


def test_search_with_a_plan_equals_brute_force(brute_force):
    result = run_search(config(plan=EXPERT_PLAN), workers=1)
    best = max(ev.throughput_samples_s for ev in brute_force[EXPERT_PLAN])
    assert result.exact is True
    assert result.best[TINY_MOE.name].throughput_samples_s == pytest.approx(best, rel=1e-12)
    assert result.evaluations < len(ARCH)  # the bounds still prune
    phaze_best = run_search(config(), workers=1).best[TINY_MOE.name].throughput_samples_s
    assert phaze_best == pytest.approx(max(ev.throughput_samples_s for ev in brute_force[None]), rel=1e-12)


def test_plan_is_part_of_the_signature_and_a_string_is_read():
    assert "plan" not in config().arguments()  # searches without a plan keep their resume signature
    assert config(plan="+e=auto+rc=none|full").plan == EXPERT_PLAN
    assert config(plan=EXPERT_PLAN).signature != config().signature
    assert config(plan=EXPERT_PLAN).task(TINY_MOE.name, 0, None)["plan"] == EXPERT_PLAN.to_dict()


@pytest.mark.parametrize("plan, message", [
    ("+e=auto+zero=auto", "ZeRO-0/1"), ("+e=auto+zero3", "ZeRO-0/1"),
    ("+c=auto", "context parallelism"), ("e3", "does not divide tiny-mixtral's 8 experts"),
    ("t1p2d2", "4 devices but the cluster has 16")])
def test_plans_the_bounds_cannot_take_are_refused(plan, message):
    with pytest.raises(ValueError, match=message):
        config(plan=plan)


def test_interleaving_is_bounded_so_a_plan_may_leave_or_pin_it():
    """Issue 29: the search's bounds take every interleaving the DP may run (search.bounds.placement_time_bound_s)."""
    assert config(plan="v2+e=auto").plan.interleave == 2
    assert config(plan="+v=auto+e=auto").plan.interleave is None


def test_cli_reads_the_plan_and_refuses_no_recompute_with_it():
    parser = build_parser()
    args = parser.parse_args(["--workload", "olmoe-1b-7b", "--space", "reduced", "--plan", "+e=auto+rc=none|full"])
    assert config_from_args(args).plan == EXPERT_PLAN
    args = parser.parse_args(["--workload", "olmoe-1b-7b", "--space", "reduced", "--plan", "+e=auto", "--no-recompute"])
    with pytest.raises(ValueError, match="--no-recompute does not apply with --plan"):
        config_from_args(args)


def test_default_widths_narrow_to_one_for_a_model_that_cannot_be_split(capsys):
    """OLMoE's q_norm normalises over the whole split q_proj output, so no width above 1 can run it: the default widths
    narrow to 1 with one line saying why (a search over 1,2,4,8 stopped at its first t = 2 instead); widths the user
    gives are kept, and a splittable model keeps the default widths without a note."""
    parser = build_parser()
    config = config_from_args(parser.parse_args(["--workload", "olmoe-1b-7b", "--space", "reduced"]))
    assert config.tensor_widths == (1,)
    assert "olmoe-1b-7b is searched at tensor-parallel width 1 only" in capsys.readouterr().err
    config = config_from_args(parser.parse_args(["--workload", "olmoe-1b-7b", "--space", "reduced",
                                                 "--tensor-widths", "1,2"]))
    assert config.tensor_widths == (1, 2)
    config = config_from_args(parser.parse_args(["--workload", "bert-large", "--space", "reduced"]))
    assert config.tensor_widths == TENSOR_WIDTHS and not capsys.readouterr().err


@pytest.mark.parametrize("fields", [
    dict(devices_per_node=4, node_bandwidth_Bps=50e9, moe_dispatch="alltoall"),
    dict(devices_per_node=4, node_bandwidth_Bps=50e9, moe_dispatch="hierarchical", moe_alltoall_overlap=True,
         moe_comm_sm_share=0.2),
    dict(moe_alltoall_overlap=True),
], ids=["nodes", "nodes-hierarchical-overlapped", "ring-overlapped"])
def test_bounds_with_the_alltoalls_hold_and_bite(fields):
    """The vectorised bound prices each MoE layer's all-to-alls at ``e > 1`` (:func:`search.bounds.with_alltoalls_s`):
    on DGX-like nodes (flat and node-deduplicated dispatch) and the ring, exchanges exposed or overlapped, every
    design's evaluation with ``e`` free stays within it, and on the slow ring some design's bound is lower than the
    same bound without them — the term bites (so a bound without it, or with it inflated, is told apart)."""
    from phaze_env.workloads.registry import BUILTIN
    from search import bounds as bounds_module

    BUILTIN.setdefault(TINY_MOE.name, TINY_MOE)
    cluster = CLUSTER.replace(**fields)
    knobs = dict(microbatch=(1, 4), tensor_widths=(1, 2), plan=EXPERT_PLAN)
    bounds = throughput_bounds(TINY_MOE, ARCH, cluster, **knobs)
    evaluations = [evaluate(TINY_MOE, acc, cluster, plan=EXPERT_PLAN, **KNOBS) for acc in ARCH]
    assert any(ev.feasible and ev.plan.expert_parallel > 1 for ev in evaluations)
    for bound, ev in zip(bounds, evaluations):
        assert ev.throughput_samples_s <= bound
    with pytest.MonkeyPatch.context() as patch:  # the same bound without the exchanges (computed, not cached)
        patch.setattr(bounds_module, "with_alltoalls_s", lambda graph, layer_s, cluster, e: layer_s)
        patch.setattr(bounds_module, "_VARIANT_BOUNDS", bounds_module.DiskCache("search-bounds-without-alltoalls"))
        without = throughput_bounds(TINY_MOE, ARCH, cluster, **knobs)
    assert (bounds <= without * (1 + 1e-12)).all()
    if "devices_per_node" not in fields:  # the 4 GB/s ring: the exchanges are a large part of a layer
        assert (bounds < without * (1 - 1e-3)).any()


@pytest.mark.parametrize("per_weight", [0.0, 4.0])
def test_bounds_with_the_streaming_terms_hold_and_bite(per_weight):
    """The vectorised bound adds what the evaluator's layer chain streams outside the traced graph
    (:func:`search.bounds.with_streaming_s`): an MoE layer's expert kernels (sort/unsort, activation) and, with a stack
    that accumulates weight gradients per microbatch, that accumulation. Every design's evaluation with ``e`` free stays
    within the bound, and some design's bound is lower than the same bound without the terms — they bite (so a bound
    without them, or with them inflated, is told apart)."""
    from phaze_env.workloads.registry import BUILTIN
    from search import bounds as bounds_module

    BUILTIN.setdefault(TINY_MOE.name, TINY_MOE)
    cluster = CLUSTER.replace(main_grad_accumulation_bytes=per_weight)
    knobs = dict(microbatch=(1, 4), tensor_widths=(1, 2), plan=EXPERT_PLAN)
    bounds = throughput_bounds(TINY_MOE, ARCH, cluster, **knobs)
    for acc, bound in zip(ARCH, bounds):
        assert evaluate(TINY_MOE, acc, cluster, plan=EXPERT_PLAN, **KNOBS).throughput_samples_s <= bound
    with pytest.MonkeyPatch.context() as patch:  # the same bound without the terms (computed, not cached)
        patch.setattr(bounds_module, "with_streaming_s", lambda graph, layer_s, space, cluster, e: layer_s)
        patch.setattr(bounds_module, "_VARIANT_BOUNDS", bounds_module.DiskCache("search-bounds-without-streaming"))
        without = throughput_bounds(TINY_MOE, ARCH, cluster, **knobs)
    assert (bounds <= without * (1 + 1e-12)).all()
    assert (bounds < without * (1 - 1e-6)).any()
