"""Tensor-parallel communication overlapped with its GEMMs (``Stack.tp_comm_overlap``, the megatron-core profile):
the exposed part of a chunked collective against an event-by-event simulation of the pipeline, the collectives the
overlap applies to in a traced layer, and the evaluation, explanation and bounds pricing it alike."""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phaze_env.cluster import get_cluster
from phaze_env.evaluate import evaluate
from phaze_env.hardware import get_preset
from phaze_env.hardware.estimator import chunked_exposed_s
from phaze_env.plan_spec import PlanSpec
from phaze_env.pricing import price_ops, tp_comm_overlaps
from phaze_env.workloads import custom_workload, model_graph


def simulated_exposed_s(comm_s: float, gemm_s: float, steps: int) -> float:
    """The chunked pipeline event by event (written independently of the closed form): GEMM chunk ``k`` runs after
    chunk ``k−1`` on the cores; transfer ``k`` starts when GEMM chunk ``k`` is done and transfer ``k−1`` has left the
    link. The collective's exposed time is the pipeline's end minus the GEMM's own time."""
    gemm_done, link_free = 0.0, 0.0
    for _ in range(steps):
        gemm_done += gemm_s / steps
        link_free = max(link_free, gemm_done) + comm_s / steps
    return link_free - gemm_s


@settings(max_examples=300, deadline=None)
@given(st.floats(0.0, 10.0), st.floats(0.0, 10.0), st.integers(1, 64))
def test_the_closed_form_is_the_simulated_pipeline(comm_s, gemm_s, steps):
    exposed = float(chunked_exposed_s(comm_s, gemm_s, steps))
    assert exposed == pytest.approx(simulated_exposed_s(comm_s, gemm_s, steps), rel=1e-9, abs=1e-12)
    assert comm_s / steps - 1e-12 <= exposed <= comm_s + 1e-12  # never below one chunk, never above the whole


def test_one_step_hides_nothing():
    assert float(chunked_exposed_s(2.0, 5.0, 1)) == 2.0
    with pytest.raises(ValueError, match="at least one step"):
        chunked_exposed_s(1.0, 1.0, 0)


TINY = custom_workload("tiny-llama-tp", "LlamaConfig", "LlamaForCausalLM", 256, hidden_size=256, num_hidden_layers=2,
                       num_attention_heads=8, num_key_value_heads=8, intermediate_size=512, vocab_size=512,
                       max_position_embeddings=256)


def test_the_overlap_pairs_each_tp_collective_with_the_gemms_that_feed_it():
    """Forward: the all-reduce after the attention output projection and after the MLP down projection, each fed by
    its one GEMM; backward: the input-gradient all-reduces, fed by the column-parallel projections' gradient GEMMs."""
    block = [layer for layer in model_graph(TINY, tensor_width=4).layers if layer.is_transformer_layer][0]
    for dag in (block.fwd, block.bwd):
        overlaps = tp_comm_overlaps(dag.ops, dag.edges)
        comms = [i for i, op in enumerate(dag.ops) if op.unit == "comm"]
        assert sorted(i for i, _, _ in overlaps) == comms and len(comms) == 2
        for index, gemms, steps in overlaps:
            assert steps == 4 and all(dag.ops[g].gemms and (g, index) in dag.edges for g in gemms)
    assert tp_comm_overlaps(block.fwd.ops, ()) == ()  # nothing feeds them: nothing hidden


def test_a_stack_that_overlaps_needs_the_dag():
    block = [layer for layer in model_graph(TINY, tensor_width=2).layers if layer.is_transformer_layer][0]
    cluster = get_cluster("dgx-h100", 8).replace(tp_comm_overlap=True)
    with pytest.raises(ValueError, match="pass the ops' edges"):
        price_ops(block.fwd.ops, get_preset("h100"), cluster)
    table = price_ops(block.fwd.ops, get_preset("h100"), cluster, edges=block.fwd.edges).table
    exposed = table.exposed_comm_s(table.device_latencies_s(0, 0)[1])
    assert np.all(exposed <= table.comm_s + 1e-15) and exposed.sum() < table.comm_s.sum()


def test_the_evaluation_prices_the_overlap_and_only_its_comm_moves():
    plan = PlanSpec.parse("t8p1d1m1+rc=none")
    plain = get_cluster("dgx-h100", 8, global_batch=1)
    exposed = evaluate(TINY, get_preset("h100"), plain, plan=plan)
    hidden = evaluate(TINY, get_preset("h100"), plain.replace(tp_comm_overlap=True), plan=plan)
    before, after = exposed.plan.time_breakdown_s, hidden.plan.time_breakdown_s
    assert after["tp_comm"] < before["tp_comm"] and hidden.plan.time_per_batch_s < exposed.plan.time_per_batch_s
    assert after["compute"] == pytest.approx(before["compute"])
    assert hidden.plan.time_per_batch_s >= before["compute"]  # the overlap hides communication, never compute
