"""Megatron-Core's folded expert grid (``Stack.folded_experts``, expert tensor parallelism 1): a rank's experts whole
on its ``1/t`` of the tokens, no tensor-parallel collective around them, ``e`` dividing ``t·c·d``.

The graph is checked against the same model at tensor width 1 (the whole experts) and at width ``t`` unfolded (the
same work per rank); the placement against brute force in ``tests/test_placement_ep.py``,
``tests/test_placement_combined.py`` and the search's bound in ``tests/test_bounds_hold.py``.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from phaze_env.cluster import get_cluster
from phaze_env.evaluate import _layer_chain, evaluate
from phaze_env.hardware import get_preset
from phaze_env.moe_dispatch import dispatch_s
from phaze_env.plan_spec import PlanSpec
from phaze_env.stacks import STACKS
from phaze_env.workloads import model_graph
from test_workloads_moe import small

T, E = 2, 4


def block(graph):
    return next(layer for layer in graph.layers if layer.name == "block")


def expert_gemms(layer):
    """The routed experts' forward GEMMs: weight GEMMs batched over the experts (attention's are weightless)."""
    return [gemm for op in layer.fwd.ops if op.param_bytes for gemm in op.gemms if gemm.batch > 1]


@pytest.fixture(scope="module")
def graphs():
    workload = small("qwen3_moe")  # 8 experts top-2 on 32 tokens: C = 8 tokens per expert
    make = lambda t, folded: model_graph(workload, tensor_width=t, expert_parallel=E, folded_experts=folded,  # noqa: E731
                                         cache=False)
    return {"whole": block(make(1, False)), "split": block(make(T, False)), "folded": block(make(T, True))}


def test_a_rank_runs_its_experts_whole_on_its_share_of_the_tokens(graphs):
    """Each expert GEMM (E/e, e·C, k, n) of the whole model becomes (E/e, e·⌈C/t⌉, k, n): every feature kept, the
    tokens split t ways; the same FLOPs per rank as the unfolded width-t graph, whose experts are split by features."""
    whole, split, folded = (expert_gemms(graphs[name]) for name in ("whole", "split", "folded"))
    assert whole and len(whole) == len(folded) == len(split)
    for w, f in zip(whole, folded):
        assert (f.batch, f.m, f.k, f.n) == (w.batch, math.ceil(w.m / (E * T)) * E, w.k, w.n)
    flops = lambda gemms: sum(g.batch * g.m * g.k * g.n for g in gemms)  # noqa: E731
    assert flops(folded) == flops(split) == flops(whole) / T


def test_the_experts_are_held_whole_and_their_tokens_are_the_ranks(graphs):
    whole, split, folded = graphs["whole"], graphs["split"], graphs["folded"]
    assert folded.expert_param_bytes == whole.expert_param_bytes == T * split.expert_param_bytes
    dense = lambda layer: layer.param_bytes - layer.expert_param_bytes  # noqa: E731
    assert dense(folded) == dense(split)  # attention and router: as any layer at width t
    assert folded.routed_token_bytes == whole.routed_token_bytes / T == split.routed_token_bytes / T
    assert folded.routed_activation_bytes == split.routed_activation_bytes


def test_no_tensor_parallel_collective_around_the_experts(graphs):
    """Unfolded, the MoE block gathers its tokens (f, backward) and reduces the combine (g, forward); folded, only the
    attention's pair is left."""
    comms = lambda layer, part: sorted(op.name for op in getattr(layer, part).ops if op.unit == "comm")  # noqa: E731
    split, folded = graphs["split"], graphs["folded"]
    for part in ("fwd", "bwd"):
        assert set(comms(folded, part)) < set(comms(split, part))
    assert len(comms(split, "fwd")) + len(comms(split, "bwd")) - 2 == len(comms(folded, "fwd")) + len(comms(folded, "bwd"))
    assert not any("index_add" in name for part in ("fwd", "bwd") for name in comms(folded, part))


def test_the_stash_is_the_ranks_share_under_sequence_parallelism(graphs):
    """What a rank keeps: the width-t graph's stash with its replicated part split by sequence parallelism (required
    with MoE at t > 1) — the same bytes, none of them replicated any more on the experts."""
    kept = lambda layer: layer.activation_stash_bytes - layer.stash_replicated_bytes * (1 - 1 / T)  # noqa: E731
    assert kept(graphs["folded"]) == pytest.approx(kept(graphs["split"]))
    assert graphs["folded"].stash_replicated_bytes < graphs["split"].stash_replicated_bytes


def test_the_alltoall_runs_over_consecutive_ranks_with_the_ranks_tokens():
    """The layer chain's dispatch: over e consecutive ranks (the folded grid's order tp-ep-dp-pp), each sending its
    own tokens; unfolded, over ranks t·c apart with every token of the microbatch."""
    cluster = get_cluster("dgx-h100", 64)
    folded_cluster = cluster.replace(stack=replace(cluster.stack, folded_experts=True))
    graph = model_graph("qwen3-30b-a3b", seq_len=1024, tensor_width=T, expert_parallel=E, folded_experts=True)
    layer = block(graph)
    timings = {item.name: type("T", (), dict(fwd_s=1.0, bwd_s=1.0, attention_fwd_s=0.0, tp_comm_s=0.0, cp_comm_s=0.0))
               for item in graph.layers}
    chain = _layer_chain(graph, timings, folded_cluster, E)
    block_cost = chain[1]
    one = dispatch_s(folded_cluster, layer.routed_token_bytes, E, 1, experts=layer.routed_experts,
                     top_k=layer.experts_per_token)
    assert block_cost.ep_comm_s == pytest.approx(4 * one)
    assert block_cost.expert_param_bytes == layer.expert_param_bytes / E


def test_evaluate_places_an_e_the_data_parallel_ranks_cannot_hold():
    """t = 2, d = 4, e = 8 on 64 H100: the folded stack runs it; the unfolded one refuses it in one line; a dense model
    cannot fold what it does not have."""
    accelerator = get_preset("h100")
    cluster = STACKS["megatron-core-folded"].apply(get_cluster("dgx-h100", 64, global_batch=64), "h100")
    plan = PlanSpec.parse("t2p8d4e8m1+sp+zero1+rc=selective")
    result = evaluate("qwen3-30b-a3b", accelerator, cluster, plan=plan, seq_len=1024)
    assert result.feasible and PlanSpec.parse(result.plan.notation).e == 8
    assert result.time_breakdown_s.get("ep_comm", 0.0) > 0
    unfolded = STACKS["megatron-core"].apply(get_cluster("dgx-h100", 64, global_batch=64), "h100")
    with pytest.raises(ValueError, match=r"e=8 must divide the data-parallel degree d=4 .*folded_experts"):
        evaluate("qwen3-30b-a3b", accelerator, unfolded, plan=plan, seq_len=1024)
    with pytest.raises(ValueError, match="folded_experts .* needs a mixture-of-experts model; gpt2-xl is dense"):
        evaluate("gpt2-xl", accelerator, cluster, plan=PlanSpec.parse("t2"), seq_len=1024)
    with pytest.raises(ValueError, match=r"e=8 must divide the data-parallel degree d=2 .* nor does it divide the "
                                         r"t·c·d = 4 ranks a folded expert grid would use"):
        PlanSpec.parse("t2p16d2e8m1")
    with pytest.raises(ValueError, match=r"e=8 must divide the data-parallel degree d=2 .* only in a stack that folds"):
        PlanSpec.parse("p8d2e8m1")  # t free: the notation cannot know t·c·d, so e | d


def test_the_folded_stacks_are_variants_with_their_parents_fits():
    for parent in ("megatron-core", "megatron-core-deepep", "megatron-core-deepep-a2a-overlap"):
        folded = STACKS[f"{parent}-folded"]
        assert folded.folded_experts and not STACKS[parent].folded_experts
        assert folded.fits == STACKS[parent].fits and folded.variant_of == "megatron-core"
        assert {k: v for k, v in vars(folded).items() if k not in ("name", "sources", "folded_experts", "variant_of")} == \
            {k: v for k, v in vars(STACKS[parent]).items() if k not in ("name", "sources", "folded_experts", "variant_of")}


# ---------------------------------------------------------------- the MoE block rerun (--recompute-modules moe)
def test_the_moe_blocks_rerun_keeps_only_its_input(graphs):
    """Every tensor the MoE block produces (router scores, dispatched tokens, the experts' GEMM outputs and
    activation) is in the block's dropped part, not the block's input (the norm's output, kept by the checkpoint) nor
    anything of the attention; the rerun operators are the block's."""
    from phaze_env.workloads.model import moe_block_recompute
    from phaze_env.workloads.build import get_trace

    workload = small("qwen3_moe")
    trace = get_trace(workload, 1, workload.seq_len, cache=False)
    ops = [op for op in trace.ops if op.region == "block0"]
    inside, _ = moe_block_recompute([], ops)
    router = next(op for op in ops if op.moe_role == "router")
    assert router.name in inside and all(op.name in inside for op in ops if op.moe_role == "expert")
    assert not inside.intersection(router.inputs)  # the block's input stays
    assert not any(op.module.endswith("self_attn") or "layernorm" in op.module for op in ops if op.name in inside)
    layer = graphs["folded"]
    assert 0 < layer.stash_moe_bytes < layer.activation_stash_bytes and layer.moe_rerun
    assert layer.stash_moe_bytes + layer.stash_norm_up_bytes <= layer.activation_stash_bytes  # disjoint parts


def test_evaluate_with_the_moe_block_rerun_holds_less_and_pays_its_forward_again():
    accelerator = get_preset("h100")
    base = STACKS["megatron-core-deepep-folded"].apply(get_cluster("dgx-h100", 64, global_batch=64), "h100")
    plan = PlanSpec.parse("t2p8d4e8m1+sp+zero1+rc=selective")
    kept = evaluate("qwen3-30b-a3b", accelerator, base, plan=plan, seq_len=1024)
    rerun = evaluate("qwen3-30b-a3b", accelerator, base.replace(stack=replace(base.stack, recompute_moe=True)), plan=plan,
                     seq_len=1024)
    assert kept.feasible and rerun.feasible
    assert max(m["activations"] for m in rerun.plan.stage_memory) < max(m["activations"] for m in kept.plan.stage_memory)
    assert rerun.plan.time_per_batch_s > kept.plan.time_per_batch_s
    # the forward dispatch and combine again: six exchanges where there were four
    assert rerun.time_breakdown_s["ep_comm"] == pytest.approx(1.5 * kept.time_breakdown_s["ep_comm"], rel=1e-6)
    dense = base.replace(stack=replace(base.stack, recompute_moe=True, folded_experts=False))
    with pytest.raises(ValueError, match="recompute_moe .* needs a mixture-of-experts model; gpt2-xl is dense"):
        evaluate("gpt2-xl", accelerator, dense, plan=PlanSpec.parse("t2"), seq_len=1024)


# ---------------------------------------------------------------- the routing weights in the activation
def test_the_combine_keeps_the_experts_outputs_only_for_the_weighting():
    """The traced combine (``out * routing``) keeps the down-projection's output: E·C·H per rank. A stack that
    multiplies the weights into the activation drops exactly that, and a rerun MoE block drops it once."""
    from phaze_env.workloads.build import get_trace
    from phaze_env.workloads.model import combine_weighting_saved

    workload = small("qwen3_moe")
    ops = [op for op in get_trace(workload, 1, workload.seq_len, cache=False).ops if op.region == "block0"]
    down = [op for op in ops if op.moe_role == "expert" and op.gemms and op.params][-1]
    assert combine_weighting_saved(ops) == {down.name}
    assert combine_weighting_saved([op for op in ops if op.moe_role != "expert"]) == set()  # a dense block: nothing
    layer = model_graph("qwen3-30b-a3b", seq_len=1024, tensor_width=T, expert_parallel=E, folded_experts=True).layers[1]
    routed_tokens = layer.routed_token_bytes  # the rank's E·⌈C/t⌉·H: the down-projection's output has that shape
    assert layer.stash_probs_bytes == routed_tokens and layer.stash_probs_replicated_bytes == 0


def test_evaluate_with_the_weights_in_the_activation_holds_less_and_the_rerun_counts_it_once():
    accelerator = get_preset("h100")
    base = STACKS["megatron-core-deepep-folded"].apply(get_cluster("dgx-h100", 64, global_batch=64), "h100")
    plan = PlanSpec.parse("t2p8d4e8m1+sp+zero1+rc=selective")
    run = lambda **knobs: evaluate("qwen3-30b-a3b", accelerator, base.replace(stack=replace(base.stack, **knobs)),  # noqa: E731
                                   plan=plan, seq_len=1024)
    activations = lambda result: max(m["activations"] for m in result.plan.stage_memory)  # noqa: E731
    assert base.stack.moe_probs_in_activation  # the megatron-core profiles' own (Megatron-Core since 2025)
    kept, weighted = run(moe_probs_in_activation=False), run()
    assert activations(weighted) < activations(kept)
    assert weighted.plan.time_per_batch_s == pytest.approx(kept.plan.time_per_batch_s)  # memory only
    # a rerun block drops the outputs whether or not the weights move into the activation
    assert activations(run(recompute_moe=True, moe_probs_in_activation=False)) == pytest.approx(
        activations(run(recompute_moe=True)))


def test_the_weights_in_the_activation_leave_a_dense_model_as_it_is():
    """``moe_probs_in_activation`` is how the megatron-core profiles' MoE code applies the router's weights, not a
    plan's choice: on a dense model (no router) it is accepted and changes nothing."""
    accelerator = get_preset("h100")
    cluster = STACKS["megatron-core"].apply(get_cluster("dgx-h100", 16, global_batch=16), "h100")
    assert cluster.stack.moe_probs_in_activation
    plan = PlanSpec.parse("t1p2d8m1+zero1+rc=selective")
    on = evaluate("gpt2-xl", accelerator, cluster, plan=plan, seq_len=1024)
    off = evaluate("gpt2-xl", accelerator, cluster.replace(stack=replace(cluster.stack, moe_probs_in_activation=False)),
                   plan=plan, seq_len=1024)
    assert on.feasible and on.plan.time_per_batch_s == off.plan.time_per_batch_s
    assert on.plan.stage_memory == off.plan.stage_memory
