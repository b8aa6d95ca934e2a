"""The explain view (API + CLI)."""

import json

import pytest

from phaze_env.evaluate import Cluster, evaluate
from phaze_env.explain import BOUNDS, UNITS, explain_layer
from phaze_env.explain_cli import main
from phaze_env.hardware import TPUV4
from phaze_env.workloads import custom_workload

TINY = custom_workload("tiny-gpt2", "GPT2Config", "GPT2LMHeadModel", 64, n_embd=128, n_layer=4, n_head=4, n_inner=512,
                       vocab_size=1000, n_positions=64)
CLUSTER = Cluster(n_devices=16, global_batch=64, link_bandwidth_Bps=4e9)
KNOBS = dict(microbatch=(1,), hbm_gb=(32.0,), tensor_widths=(1, 2))


@pytest.fixture
def tiny_builtin(monkeypatch):
    """The CLI addresses workloads by name: make the tiny model one for a test."""
    from phaze_env.workloads.registry import BUILTIN

    monkeypatch.setitem(BUILTIN, TINY.name, TINY)


def test_explain_agrees_with_the_evaluation_it_explains():
    evaluation = evaluate(TINY, TPUV4, CLUSTER, **KNOBS)
    explained = evaluation.explain(workload=TINY)
    timing = evaluation.layer_timings[f"t{explained.tensor_width}_m{explained.microbatch}"]["block"]
    assert explained.fwd_s == pytest.approx(timing["fwd_s"]) and explained.bwd_s == pytest.approx(timing["bwd_s"])
    assert set(explained.busy_s) == set(UNITS) and set(explained.bound_s) == set(BOUNDS)
    assert explained.bound in BOUNDS
    # Every unit is busy at most (makespan × its core count); utilisations are fractions.
    assert explained.busy_s["tensor_cores"] <= explained.time_s * TPUV4.num_tc * (1 + 1e-9)
    assert all(0 <= value <= 1 + 1e-9 for value in explained.utilisation.values())
    for op in explained.ops:  # an op never beats any of its own terms
        assert op.latency_s >= max(op.tensor_cores_s, op.vector_cores_s) * (1 - 1e-9), op.name
    assert json.loads(json.dumps(explained.to_dict()))["bound"] == explained.bound


def test_explain_tensor_parallel_layer_has_link_time():
    explained = explain_layer(TINY, TPUV4, CLUSTER, tensor_width=2)
    assert explained.busy_s["links"] > 0
    timing = evaluate(TINY, TPUV4, CLUSTER, microbatch=(1,), hbm_gb=(32.0,), tensor_widths=(2,)).layer_timings
    assert explained.fwd_s == pytest.approx(timing["t2_m1"]["block"]["fwd_s"])  # collectives priced as evaluate does


def test_explain_counts_a_sequence_parallel_stacks_vector_work_on_its_share_of_the_tokens():
    """Under sequence parallelism at ``t = 2`` the norms and residual adds run on half the tokens (as the evaluation
    prices them, :func:`phaze_env.pricing.sequence_split`): the explained vector work drops by exactly the half the
    traced graph's replicated vector operators no longer do — counted from the traced operators, not from the
    pricing."""
    from phaze_env.hardware.estimator import vector_cycles_per_element
    from phaze_env.workloads import model_graph

    def cycles(cluster):
        explained = explain_layer(TINY, TPUV4, cluster, tensor_width=2)
        return explained.utilisation["vector_cores"] * TPUV4.peak_vector_elements_per_s * explained.time_s, explained

    plain, _ = cycles(CLUSTER)
    split, explained = cycles(CLUSTER.replace(sequence_parallel_kernels=True))
    block = next(layer for layer in model_graph(TINY, microbatch=1, tensor_width=2).layers if layer.name == "block")
    halved = sum((op.vector_elements - -(-op.vector_elements // 2)) * vector_cycles_per_element(op)
                 for dag in (block.fwd, block.bwd) for op in dag.ops
                 if op.unit == "vc" and op.sequence_shards == 2)
    assert halved > 0
    assert plain - split == pytest.approx(halved, rel=1e-9)
    from phaze_env.plan_spec import PlanSpec

    timing = evaluate(TINY, TPUV4, CLUSTER.replace(sequence_parallel_kernels=True), microbatch=(1,), hbm_gb=(32.0,),
                      tensor_widths=(2,), plan=PlanSpec.parse("+sp")).layer_timings["t2_m1"]["block"]
    assert explained.fwd_s == pytest.approx(timing["fwd_s"]) and explained.bwd_s == pytest.approx(timing["bwd_s"])


def test_explain_rejects_unknown_layers_with_the_known_names():
    with pytest.raises(ValueError, match="pre, block, post"):
        explain_layer(TINY, TPUV4, CLUSTER, layer="decoder")
    with pytest.raises(ValueError, match="tensor_width"):
        explain_layer(TINY, TPUV4, CLUSTER, tensor_width=0)


@pytest.mark.parametrize("argv", [["--preset", "tpu5"], ["--workload", "gpt9"], ["--workload", "tiny-gpt2", "--layer", "nope"],
                                  ["--microbatch", "0"]])
def test_explain_cli_errors_are_one_line_with_status_2(argv, capsys, tiny_builtin):
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's own errors
        status = exc.code
    assert status == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_explain_cli_prints_the_split(capsys, tiny_builtin):
    assert main(["--preset", "phaze-small", "--workload", "tiny-gpt2", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["time_s"] > 0 and set(info["busy_s"]) == set(UNITS) and info["bound"] in BOUNDS
    assert main(["--workload", "tiny-gpt2", "--ops"]) == 0
    text = capsys.readouterr().out
    assert "busy time by unit" in text and "grad_" in text
