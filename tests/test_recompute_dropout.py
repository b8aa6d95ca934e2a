"""Two costs of the Megatron-LM runs of 2021-22 (docs/table5_scaling.md): full recompute reruns the transformer layers
only (not the embedding, the LM head or the loss), and unfused attention pays its attention dropout as a memory-bound
kernel over the ``s × s`` scores, where the stack runs it that way and the workload trains with it."""

from __future__ import annotations

import pytest
from tiny import TINY

from phaze_env.attention import attention_dropout_bytes, attention_dropout_probability, attention_dropout_s
from phaze_env.cluster import Cluster, get_cluster
from phaze_env.evaluate import LayerTiming, _layer_chain, evaluate
from phaze_env.hardware import get_preset
from phaze_env.plan_spec import PlanSpec
from phaze_env.stacks import STACKS
from phaze_env.workloads import custom_workload, get_workload, model_graph

TINY_LLAMA = custom_workload("tiny-llama-dropless", "LlamaConfig", "LlamaForCausalLM", 64, hidden_size=128,
                             num_hidden_layers=4, num_attention_heads=4, intermediate_size=512, vocab_size=1000,
                             max_position_embeddings=64)
STREAMING_BPS = 1e9  # an HBM rate for the chain tests: the dropout time is its bytes over it


def _timings(graph) -> dict[str, LayerTiming]:
    """Every layer at 1 s forward (0.25 s of it the attention core where it has one), 2 s backward."""
    return {layer.name: LayerTiming(1.0, 2.0, 1.0, 2.0, "ilp", "ilp", True, True,
                                    0.25 if layer.is_transformer_layer else 0.0)
            for layer in graph.layers}


def test_full_recompute_reruns_the_transformer_layers_only():
    """Megatron-LM's checkpoint wraps ``ParallelTransformer``'s layers: the embedding (``pre``) and the LM head + loss
    (``post``) are not rerun, so their ``recompute_fwd_s`` is 0, a block's its whole forward."""
    graph = model_graph(TINY, seq_len=64, microbatch=1, tensor_width=1)
    chain = _layer_chain(graph, _timings(graph))
    names = [layer.name for layer in graph.layers for _ in range(layer.repeat)]
    assert names[0] == "pre" and names[-1] == "post"
    for name, entry in zip(names, chain):
        assert entry.recompute_fwd_s == (entry.fwd_s if name not in ("pre", "post") else 0.0)


def test_a_full_recompute_plan_pays_the_blocks_forward_once_more_not_the_head():
    """A pinned one-stage full-recompute plan is slower than the same plan without recompute by exactly its blocks'
    forward per microbatch (the evaluator's own layer times): the head's forward is not in it."""
    acc = get_preset("a100")
    cluster = Cluster(n_devices=1, global_batch=4)
    full = evaluate(TINY, acc, cluster, plan=PlanSpec.parse("t1p1d1m1+rc=full"), seq_len=64, cache=False)
    none = evaluate(TINY, acc, cluster, plan=PlanSpec.parse("t1p1d1m1+rc=none"), seq_len=64, cache=False)
    assert full.feasible and none.feasible
    blocks = full.layer_timings["t1_m1"]["block"]
    head = full.layer_timings["t1_m1"]["post"]
    assert float(head["fwd_s"]) > 0
    repeats = TINY.num_layers
    per_microbatch = full.plan.time_per_batch_s / 4 - none.plan.time_per_batch_s / 4
    assert per_microbatch == pytest.approx(repeats * float(blocks["fwd_s"]), rel=1e-9)


def test_attention_dropout_probability_is_the_configs_or_its_class_default():
    """GPT-2's ``attn_pdrop`` defaults to 0.1 (the Megatron GPTs and the tiny GPT-2 set none), Llama's
    ``attention_dropout`` to 0."""
    assert attention_dropout_probability(get_workload("megatron-175b")) == 0.1
    assert attention_dropout_probability(TINY) == 0.1
    assert attention_dropout_probability(get_workload("llama3-70b")) == 0.0
    assert attention_dropout_probability(TINY_LLAMA) == 0.0


def test_the_dropout_kernel_is_paid_per_attention_layer_in_both_directions():
    """Each block adds the dropout's bytes (5 per score at bf16: probabilities in and out, a bool mask) at the
    streaming rate to its forward and backward, the forward part inside what selective recompute repeats; the
    embedding and the head have no scores and pay nothing."""
    graph = model_graph(TINY, seq_len=64, microbatch=2, tensor_width=2)
    cluster = Cluster(n_devices=2, global_batch=2, attention_dropout_kernel=True)
    dropout = attention_dropout_s(TINY, cluster, graph, 64, STREAMING_BPS)
    scores = 2 * (4 // 2) * 64 * 64  # b · a/t · s · s
    assert dropout == pytest.approx((5 * scores / STREAMING_BPS, 5 * scores / STREAMING_BPS))
    assert attention_dropout_bytes(scores, 2) == (5 * scores, 5 * scores)
    plain = _layer_chain(graph, _timings(graph), cluster)
    paid = _layer_chain(graph, _timings(graph), cluster, streaming_Bps=STREAMING_BPS, dropout_s=dropout)
    for layer, before, after in zip([x for x in graph.layers for _ in range(x.repeat)], plain, paid):
        extra = dropout if layer.is_transformer_layer else (0.0, 0.0)
        assert after.fwd_s - before.fwd_s == pytest.approx(extra[0])
        assert after.bwd_s - before.bwd_s == pytest.approx(extra[1])
        assert after.attention_fwd_s - before.attention_fwd_s == pytest.approx(extra[0])
        assert after.recompute_fwd_s - before.recompute_fwd_s == pytest.approx(extra[0])


@pytest.mark.parametrize("workload, stack_runs_it, paid", [(TINY, True, True), (TINY, False, False),
                                                            (TINY_LLAMA, True, False)])
def test_dropout_is_paid_only_by_an_unfused_stack_on_a_workload_that_trains_with_it(workload, stack_runs_it, paid):
    graph = model_graph(workload, seq_len=64, microbatch=1, tensor_width=1)
    cluster = Cluster(n_devices=1, global_batch=1, attention_dropout_kernel=stack_runs_it)
    dropout = attention_dropout_s(workload, cluster, graph, 64, STREAMING_BPS)
    assert (dropout[0] > 0 and dropout[1] > 0) if paid else dropout == (0.0, 0.0)


def test_a_fused_attention_kernel_drops_on_chip_and_pays_no_dropout_kernel():
    """The dgx-a100 preset carries Megatron-LM's unfused dropout; switched to a fused attention kernel it pays none."""
    graph = model_graph(TINY, seq_len=64, microbatch=1, tensor_width=1)
    cluster = get_cluster("dgx-a100", 8)
    assert cluster.stack.attention_dropout_kernel
    assert attention_dropout_s(TINY, cluster, graph, 64, STREAMING_BPS)[0] > 0
    fused = cluster.replace(attention_efficiency=0.5)
    assert attention_dropout_s(TINY, fused, graph, 64, STREAMING_BPS) == (0.0, 0.0)


def test_only_megatron_lm_on_a100_runs_the_unfused_dropout():
    """Megatron-LM of 2021-22 (the A100 fits' runs, both releases) ran unfused attention with attention dropout 0.1;
    every other profile's fit is a fused kernel (which drops on chip) or a stack whose runs are not known to pay it."""
    runs_it = {(name, chip) for name, profile in STACKS.items() for fit in profile.fits for chip in fit.chips
               if fit.attention_dropout_kernel}
    assert {("megatron-lm", "a100"), ("megatron-lm-2021", "a100")} <= runs_it
    assert all(name in ("megatron-lm", "megatron-lm-2021") or STACKS[name].variant_of == "megatron-lm"
               for name, _ in runs_it)
    assert all(chip == "a100" for _, chip in runs_it)
