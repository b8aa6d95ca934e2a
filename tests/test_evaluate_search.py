"""The evaluator and the exact search: exactness against brute force, resume, executors, CLI errors."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from phaze_env.evaluate import Cluster, evaluate, throughput_upper_bound
from phaze_env.hardware import TPUV4, ArchSpace, KnobSpace
from phaze_env.workloads import custom_workload
from search.bounds import throughput_bounds
from search.phaze import SearchConfig, aggregate, run_search

TINY = custom_workload("tiny-gpt2", "GPT2Config", "GPT2LMHeadModel", 64, n_embd=128, n_layer=4, n_head=4, n_inner=512,
                       vocab_size=1000, n_positions=64)
TINY_LLAMA = custom_workload("tiny-llama", "LlamaConfig", "LlamaForCausalLM", 64, hidden_size=128, num_hidden_layers=4,
                             num_attention_heads=4, num_key_value_heads=4, intermediate_size=352, vocab_size=1000,
                             max_position_embeddings=64)
CLUSTER = Cluster(n_devices=16, global_batch=64, link_bandwidth_Bps=4e9)
SPACE = ArchSpace(num_tc=(1, 4, 16), num_vc=(1, 16), tc_width=(16, 128), tc_depth=(32, 128), buffer_mb=(2, 32),
                  knobs=KnobSpace(microbatches=(1, 4), recompute=(False, True), hbm_gb=(32.0,)))
KNOBS = dict(microbatch_sizes=(1, 4), hbm_gb=(32.0,), tensor_widths=(1, 2))


def config(workloads, **kw):
    return SearchConfig(workloads=[w.name if hasattr(w, "name") else w for w in workloads], cluster=CLUSTER, space=SPACE,
                        microbatches=(1, 4), hbm_gb=(32.0,), tensor_widths=(1, 2), **kw)


@pytest.fixture(scope="module")
def brute_force():
    """evaluate() of every architecture of SPACE on both tiny workloads."""
    from phaze_env.workloads.registry import BUILTIN

    BUILTIN.setdefault(TINY.name, TINY)  # the search addresses workloads by name
    BUILTIN.setdefault(TINY_LLAMA.name, TINY_LLAMA)
    return {w.name: [evaluate(w, acc, CLUSTER, **KNOBS) for acc in SPACE] for w in (TINY, TINY_LLAMA)}


def test_evaluation_is_sane_and_cached(brute_force):
    evaluation = evaluate(TINY, TPUV4, CLUSTER, **KNOBS)
    assert evaluation.feasible and evaluation.throughput_samples_s > 0
    assert 0 < evaluation.mfu <= 1
    assert evaluation.area_mm2 == pytest.approx(TPUV4.area_mm2)
    plan = evaluation.plan
    assert plan["data_parallel"] * plan["pipeline_stages"] * plan["tensor_width"] <= CLUSTER.n_devices
    assert evaluation.energy_per_sample_j > 0
    assert set(evaluation.timings_s) == {"trace", "estimate", "schedule", "placement"}
    again = evaluate(TINY, TPUV4, CLUSTER, **KNOBS)
    assert again.from_cache and again.throughput_samples_s == evaluation.throughput_samples_s


def test_upper_bounds_are_valid(brute_force):
    bounds = throughput_bounds(TINY, SPACE, CLUSTER, microbatches=(1, 4), tensor_widths=(1, 2))
    for index, (acc, ev) in enumerate(zip(SPACE, brute_force[TINY.name])):
        assert ev.throughput_samples_s <= bounds[index]
        if index % 7 == 0:  # the ILP-free placement bound too (slower: sampled)
            assert ev.throughput_samples_s <= throughput_upper_bound(TINY, acc, CLUSTER, **KNOBS)


@pytest.mark.parametrize("workload", [TINY, TINY_LLAMA], ids=lambda w: w.name)
def test_exact_search_equals_brute_force(brute_force, workload):
    result = run_search(config([workload]), workers=1)
    best = max(ev.throughput_samples_s for ev in brute_force[workload.name])
    assert result["exact"] is True
    assert result["best"]["throughput_samples_s"] == pytest.approx(best, rel=1e-12)
    assert result["evaluations"] < len(SPACE)  # the bounds pruned something
    assert result["baseline"]["accelerator"]["num_tc"] == TPUV4.num_tc


def test_multi_workload_search_equals_brute_force(brute_force):
    for how in ("mean", "geomean"):
        result = run_search(config([TINY, TINY_LLAMA], aggregate=how), workers=1)
        combined = [aggregate((brute_force[w][i].throughput_samples_s for w in brute_force), how) for i in range(len(SPACE))]
        assert result["best_aggregate"]["throughput_samples_s"] == pytest.approx(max(combined), rel=1e-12)
        for name, design in result["per_workload_best"].items():
            assert design["throughput_samples_s"] == pytest.approx(max(e.throughput_samples_s for e in brute_force[name]))


def test_pareto_front_equals_brute_force(brute_force):
    result = run_search(config([TINY], pareto=True), workers=1)
    points = sorted((ev.area_mm2, -ev.throughput_samples_s) for ev in brute_force[TINY.name] if ev.feasible)
    front, best = [], 0.0
    for area, negative in points:
        if -negative > best:
            front.append((area, -negative))
            best = -negative
    found = [(d["area"], d["throughput_samples_s"]) for d in result["pareto"][TINY.name]]
    # flattened: pytest >= 9 refuses approx on a list of tuples
    assert [x for point in found for x in point] == pytest.approx([x for point in front for x in point])
    assert len(found) == len(front)


def test_resume_and_outputs(brute_force, tmp_path):
    first = run_search(config([TINY]), workers=1, out=tmp_path)
    for name in ("results.json", "evaluations.csv", "throughput_vs_area.png", "results.db"):
        assert (tmp_path / name).stat().st_size > 0
    data = json.loads((tmp_path / "results.json").read_text())
    for key in ("workloads", "exact", "elapsed_s", "evaluations", "ilp_solves", "best", "baseline"):
        assert key in data
    for key in ("accelerator", "plan", "throughput_samples_s", "tokens_s", "mfu", "area", "feasible"):
        assert key in data["best"] and key in data["baseline"]
    second = run_search(config([TINY]), workers=1, out=tmp_path)
    assert second["resumed_records"] > 0 and second["evaluations_this_run"] == 0
    assert second["best"] == first["best"]


def test_dask_local_cluster_gives_the_same_answer(brute_force, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        result = run_search(config([TINY]), scheduler=cluster.scheduler_address)
    assert result["best"]["throughput_samples_s"] == pytest.approx(max(e.throughput_samples_s for e in brute_force[TINY.name]))


def test_infeasible_designs_report_why():
    evaluation = evaluate(TINY, TPUV4.replace(hbm_gb=32.0), Cluster(n_devices=1, global_batch=8),
                          microbatch_sizes=(8,), recompute=(False,), hbm_gb=(1e-6,))
    assert not evaluation.feasible and evaluation.throughput_samples_s == 0.0
    assert "HBM" in evaluation.reason or "fit" in evaluation.reason


@pytest.mark.parametrize("bad", [dict(microbatch_sizes=(0,)), dict(hbm_gb=(-1,)), dict(recompute=())])
def test_bad_knobs_raise(bad):
    with pytest.raises(ValueError):
        evaluate(TINY, TPUV4, CLUSTER, **bad)


def test_bad_cluster_raises():
    with pytest.raises(ValueError, match="n_devices"):
        Cluster(n_devices=0)
    with pytest.raises(ValueError, match="bandwidth"):
        Cluster(link_bandwidth_Bps=0)


@pytest.mark.parametrize("args, message", [
    (["--workload", "gpt5"], "unknown workload"),
    (["--devices", "0"], "positive"),
    (["--objectives", "area"], "--objectives"),
    (["--out", "/proc/phaze-out"], "not writable"),
])
def test_cli_bad_arguments_exit_2(args, message):
    out = subprocess.run([sys.executable, "-m", "search.phaze", *args], capture_output=True, text=True)
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) <= 3


def test_cli_help_documents_options():
    out = subprocess.run([sys.executable, "-m", "search.phaze", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for option in ("--workload", "--workers", "--scheduler", "--out", "--objectives", "--json"):
        assert option in out.stdout


def test_aggregate():
    assert aggregate([1.0, 4.0], "geomean") == pytest.approx(2.0)
    assert aggregate([1.0, 0.0], "geomean") == 0.0
    assert aggregate([1.0, 3.0], "mean") == 2.0
    assert math.isfinite(aggregate(np.array([2.0, 8.0]), "geomean"))


def test_cli_main_end_to_end(brute_force, tmp_path, capsys):
    from search.phaze import main

    args = ["--workload", TINY.name, "--space", "reduced", "--devices", "16", "--batch", "64", "--microbatches", "1,4",
            "--hbm-gb", "32", "--tensor-widths", "1,2", "--workers", "1", "--out", str(tmp_path), "--quiet"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "best design vs TPUv4" in out and "exact: True" in out
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["best"]["feasible"] and data["exact"] is True
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["best"] == data["best"]


def test_one_design_for_many_workloads_shares_its_hbm_capacity(brute_force):
    """HBM is hardware: the multi-workload design has one capacity for all workloads (brute force over both)."""
    space = ArchSpace(num_tc=(1, 16), num_vc=(1, 16), tc_width=(128,), tc_depth=(128,), buffer_mb=(2, 32),
                      knobs=KnobSpace(microbatches=(1, 4), recompute=(False, True), hbm_gb=(0.004, 32.0)))
    capacities = (0.004, 32.0)
    cfg = SearchConfig(workloads=[TINY.name, TINY_LLAMA.name], cluster=CLUSTER, space=space, microbatches=(1, 4),
                       hbm_gb=capacities, tensor_widths=(1, 2))
    result = run_search(cfg, workers=1)
    expected = max(
        aggregate((evaluate(w, acc, CLUSTER, microbatch_sizes=(1, 4), hbm_gb=(h,), tensor_widths=(1, 2)).throughput_samples_s
                   for w in (TINY, TINY_LLAMA)), "mean")
        for acc in space for h in capacities)
    assert result["best_aggregate"]["throughput_samples_s"] == pytest.approx(expected, rel=1e-12)
    hbm = result["best_aggregate"]["accelerator"]["hbm_gb"]
    assert {design["accelerator"]["hbm_gb"] for design in result["best"].values()} == {hbm}


def test_interrupted_run_resumes_to_the_same_answer(brute_force, tmp_path):
    """A run killed part-way leaves some rows in results.db; the restart evaluates only what is missing."""
    import sqlite3

    from phaze_env.evaluate import _EVALUATIONS

    complete = run_search(config([TINY_LLAMA]), workers=1, out=tmp_path)
    with sqlite3.connect(tmp_path / "results.db") as db:  # forget the later half, as if killed there
        rows = db.execute("SELECT rowid FROM designs ORDER BY rowid").fetchall()
        assert len(rows) >= 2
        db.execute("DELETE FROM designs WHERE rowid > ?", (rows[len(rows) // 2 - 1][0],))
    _EVALUATIONS.clear_memory()
    resumed = run_search(config([TINY_LLAMA]), workers=1, out=tmp_path)
    assert 0 < resumed["resumed_records"] < len(rows)
    assert resumed["best"] == complete["best"]
    assert resumed["evaluations"] == complete["evaluations"]
