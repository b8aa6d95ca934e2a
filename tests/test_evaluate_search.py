"""The evaluator and the exact search: exactness against brute force, resume, executors, CLI errors."""

import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from phaze_env.evaluate import Cluster, evaluate, throughput_upper_bound
from phaze_env.design import DesignSpace
from phaze_env.hardware import TPUV4
from phaze_env.workloads import custom_workload
from search.bounds import throughput_bounds
from search.phaze import SearchConfig, SearchResult, aggregate, run_search
from search.progress import SearchProgress
from tiny import CLUSTER, SPACE, TINY

TINY_LLAMA = custom_workload("tiny-llama", "LlamaConfig", "LlamaForCausalLM", 64, hidden_size=128, num_hidden_layers=4,
                             num_attention_heads=4, num_key_value_heads=4, intermediate_size=352, vocab_size=1000,
                             max_position_embeddings=64)
ARCH = SPACE.arch_space()
KNOBS = dict(microbatch=(1, 4), hbm_gb=(32.0,), tensor_widths=(1, 2))


def config(workloads, **kw):
    return SearchConfig(workloads=[w.name if hasattr(w, "name") else w for w in workloads], cluster=CLUSTER, space=SPACE,
                        tensor_widths=(1, 2), **kw)


class Recorder(SearchProgress):
    """Keeps the search's progress events."""

    def __init__(self):
        self.events = []

    def resumed(self, records, path):
        self.events.append(("resumed", records))

    def bounding(self, workload, architectures):
        self.events.append(("bounding", workload, architectures))

    def searching(self, label, done, in_flight, remaining, incumbent, next_bound):
        self.events.append(("searching", done, in_flight, remaining, incumbent, next_bound))

    def finished(self, label, visited, architectures, incumbent):
        self.events.append(("finished", visited, architectures, incumbent))


@pytest.fixture(scope="module")
def brute_force():
    """evaluate() of every architecture of SPACE on both tiny workloads."""
    from phaze_env.workloads.registry import BUILTIN

    BUILTIN.setdefault(TINY.name, TINY)  # the search addresses workloads by name
    BUILTIN.setdefault(TINY_LLAMA.name, TINY_LLAMA)
    return {w.name: [evaluate(w, acc, CLUSTER, **KNOBS) for acc in ARCH] for w in (TINY, TINY_LLAMA)}


def test_evaluation_is_sane_and_cached(brute_force):
    evaluation = evaluate(TINY, TPUV4, CLUSTER, **KNOBS)
    assert evaluation.feasible and evaluation.throughput_samples_s > 0
    assert 0 < evaluation.mfu <= 1
    assert evaluation.area_mm2 == pytest.approx(TPUV4.area_mm2)
    plan = evaluation.plan
    assert plan.data_parallel * plan.pipeline_stages * plan.tensor_width <= CLUSTER.n_devices
    assert evaluation.energy_per_sample_j > 0
    assert set(evaluation.timings_s) == {"trace", "estimate", "schedule", "placement"}
    again = evaluate(TINY, TPUV4, CLUSTER, **KNOBS)
    assert again.from_cache and again.throughput_samples_s == evaluation.throughput_samples_s


def test_upper_bounds_are_valid(brute_force):
    bounds = throughput_bounds(TINY, ARCH, CLUSTER, microbatch=(1, 4), tensor_widths=(1, 2))
    for index, (acc, ev) in enumerate(zip(ARCH, brute_force[TINY.name])):
        assert ev.throughput_samples_s <= bounds[index]
        if index % 7 == 0:  # the ILP-free placement bound too (slower: sampled)
            assert ev.throughput_samples_s <= throughput_upper_bound(TINY, acc, CLUSTER, **KNOBS)


@pytest.mark.parametrize("workload", [TINY, TINY_LLAMA], ids=lambda w: w.name)
def test_exact_search_equals_brute_force(brute_force, workload):
    result = run_search(config([workload]), workers=1)
    best = max(ev.throughput_samples_s for ev in brute_force[workload.name])
    assert result.exact is True and result.mode == "best"
    assert result.best[workload.name].throughput_samples_s == pytest.approx(best, rel=1e-12)
    assert result.evaluations < len(ARCH)  # the bounds pruned something
    assert result.baseline[workload.name].accelerator["num_tc"] == TPUV4.num_tc
    assert result.architectures == len(ARCH) and result.designs == len(ARCH) * 4  # 2 microbatches × 2 recompute × 1 HBM
    assert SearchResult.from_json(result.to_json()) == result


def test_multi_workload_search_equals_brute_force(brute_force):
    for how in ("mean", "geomean"):
        result = run_search(config([TINY, TINY_LLAMA], aggregate=how), workers=1)
        combined = [aggregate((brute_force[w][i].throughput_samples_s for w in brute_force), how) for i in range(len(ARCH))]
        assert result.mode == "shared" and SearchResult.from_json(result.to_json()) == result
        assert result.shared.throughput_samples_s == pytest.approx(max(combined), rel=1e-12)
        for name, design in result.best.items():
            assert design.throughput_samples_s == pytest.approx(max(e.throughput_samples_s for e in brute_force[name]))


@pytest.mark.parametrize("objectives", [("throughput", "area"), ("area", "throughput")])
def test_pareto_front_equals_brute_force(brute_force, objectives, tmp_path_factory):
    result = run_search(config([TINY], pareto=True, objectives=objectives), workers=1)
    feasible = [(ev.area_mm2, ev.throughput_samples_s) for ev in brute_force[TINY.name] if ev.feasible]
    front = sorted({(a, t) for a, t in feasible  # no other design as small and as fast, and smaller or faster
                    if not any(b <= a and u >= t and (b < a or u > t) for b, u in feasible)})
    assert result.mode == "pareto" and result.best == {} and result.shared is None
    assert result.exact and result.objectives == objectives
    assert SearchResult.from_json(result.to_json()) == result
    found = sorted((d.area_mm2, d.throughput_samples_s) for d in result.pareto[TINY.name])
    assert len(found) == len(front)
    for got, want in zip(found, front):  # pytest.approx does not nest into tuples (pytest ≥ 9)
        assert got == pytest.approx(want, rel=1e-12)
    assert result.evaluations < len(ARCH)  # the bounds pruned something
    data = json.loads(result.to_json())
    assert data["objectives"] == list(objectives)
    assert [d["objectives"] for d in data["pareto"][TINY.name]] == [
        {"throughput": d.throughput_samples_s, "area": d.area_mm2} for d in result.pareto[TINY.name]]
    import io

    from rich.console import Console

    from search.cli import figure, print_summary
    from search.objectives import area_label

    printed = io.StringIO()
    print_summary(result, tmp_path_factory.mktemp("out"), Console(file=printed, width=300))
    table = printed.getvalue()  # the console's front table: its objectives' columns, a row per front design
    assert f"Pareto front ({', '.join(objectives)}) for {TINY.name}" in table
    assert all((area_label(False) if objective == "area" else f"{objective} (") in table for objective in objectives)
    assert all(d.plan.notation in table and figure(d.throughput_samples_s) in table
               for d in result.pareto[TINY.name])


@pytest.mark.parametrize("args, message", [
    (["--objectives", "throughput,speed"], "unknown objective 'speed'"),
    (["--objectives", "throughput,area,throughput"], "named twice"),
    (["--objectives", "throughput,carbon_per_token"], "needs the system space"),
    (["--objectives", "throughput_per_w"], "throughput_per_w objective needs --space system"),  # one name: --objective
    (["--objectives", "throughput,area", "--objective", "throughput_per_w"], "not both"),
    (["--objectives", "area"], "area alone"),
    (["--space", "system", "--objectives", "energy_per_token,area", "--objective", "carbon_per_token"], "not both"),
])
def test_cli_objectives_errors(args, message):
    from search.cli import build_parser, config_from_args

    with pytest.raises(ValueError, match=message):
        config_from_args(build_parser().parse_args(args))


def test_cli_objectives_modes():
    from search.cli import build_parser, config_from_args

    def parsed(*args):
        return config_from_args(build_parser().parse_args(["--space", "system", *args]))

    front = parsed("--objectives", "throughput,carbon_per_token,area")
    assert front.pareto and front.objectives == ("throughput", "carbon_per_token", "area")
    single = parsed("--objectives", "throughput_per_usd")  # one name: the best design for it
    assert not single.pareto and single.objective == "throughput_per_usd"
    assert "objectives" in front.arguments()  # a front over other objectives never resumes another's rows
    assert "objectives" not in parsed("--objectives", "throughput,area").arguments()  # old searches still resume
    with pytest.raises(ValueError, match="set pareto=True"):  # never silently ignored
        SearchConfig(workloads=(TINY,), cluster=CLUSTER, space=SPACE, objectives=("throughput", "energy_per_token"))


def test_resume_and_outputs(brute_force, tmp_path):
    first = run_search(config([TINY]), workers=1, out=tmp_path)
    for name in ("results.json", "evaluations.csv", "throughput_vs_area.png", "report.html", "results.db"):
        assert (tmp_path / name).stat().st_size > 0
    assert SearchResult.from_json((tmp_path / "results.json").read_text()) == first  # the file is the result
    data = json.loads((tmp_path / "results.json").read_text())
    for key in ("accelerator", "plan", "throughput_samples_s", "tokens_s", "mfu", "area_mm2", "feasible"):
        assert key in data["best"][TINY.name] and key in data["baseline"][TINY.name]
    progress = Recorder()
    second = run_search(config([TINY]), workers=1, out=tmp_path, progress=progress)
    assert second.resumed_records > 0 and second.evaluations_this_run == 0
    assert progress.events[0] == ("resumed", second.resumed_records)  # said before anything else
    assert second.best == first.best


def test_dask_local_cluster_gives_the_same_answer(brute_force, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        result = run_search(config([TINY]), scheduler=cluster.scheduler_address)
    assert result.best[TINY.name].throughput_samples_s == pytest.approx(max(e.throughput_samples_s for e in brute_force[TINY.name]))


def test_infeasible_designs_report_why():
    evaluation = evaluate(TINY, TPUV4.replace(hbm_gb=32.0), Cluster(n_devices=1, global_batch=8),
                          microbatch=(8,), recompute=(False,), hbm_gb=(1e-6,))
    assert not evaluation.feasible and evaluation.throughput_samples_s == 0.0
    assert "HBM" in evaluation.reason or "fit" in evaluation.reason


@pytest.mark.parametrize("bad", [dict(microbatch=(0,)), dict(hbm_gb=(-1,)), dict(recompute=())])
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
    (["--objectives", "throughput,energy"], "unknown objective"),
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


@pytest.mark.slow
def test_cli_main_end_to_end(brute_force, tmp_path, capsys):
    from search.phaze import main

    args = ["--workload", TINY.name, "--space", "reduced", "--devices", "16", "--batch", "64", "--microbatch", "1,4",
            "--hbm-gb", "32", "--tensor-widths", "1,2", "--workers", "1", "--out", str(tmp_path), "--quiet"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "best design vs the baseline" in out and "exact: proven" in out
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["best"][TINY.name]["feasible"] and data["exact"] is True
    reduced = DesignSpace.reduced(microbatch=(1, 4), hbm_gb=(32.0,))  # --space reduced is the one reduced space
    assert data["space"] == json.loads(json.dumps(reduced.to_dict()))
    assert data["architectures"] == len(reduced.arch_space()) and data["designs"] == reduced.designs
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["best"] == data["best"]


def test_one_design_for_many_workloads_shares_its_hbm_capacity(brute_force):
    """HBM is hardware: the multi-workload design has one capacity for all workloads (brute force over both)."""
    capacities = (0.004, 32.0)
    space = DesignSpace(num_tc=(1, 16), num_vc=(1, 16), tc_width=(128,), tc_depth=(128,), buffer_mb=(2, 32),
                        microbatch=(1, 4), recompute=(False, True), hbm_gb=capacities)
    cfg = SearchConfig(workloads=[TINY.name, TINY_LLAMA.name], cluster=CLUSTER, space=space, tensor_widths=(1, 2))
    result = run_search(cfg, workers=1)
    expected = max(
        aggregate((evaluate(w, acc, CLUSTER, microbatch=(1, 4), hbm_gb=(h,), tensor_widths=(1, 2)).throughput_samples_s
                   for w in (TINY, TINY_LLAMA)), "mean")
        for acc in space.arch_space() for h in capacities)
    assert result.shared.throughput_samples_s == pytest.approx(expected, rel=1e-12)
    hbm = result.shared.accelerator["hbm_gb"]
    assert {design.accelerator["hbm_gb"] for design in result.shared.per_workload.values()} == {hbm}


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
    assert 0 < resumed.resumed_records < len(rows)
    assert resumed.best == complete.best
    assert resumed.evaluations == complete.evaluations


def test_progress_reports_phases_with_an_honest_total(brute_force, tmp_path):
    """Bounding, then candidates, then proving optimality; the total (done + running + designs whose bound
    still beats the incumbent) never grows and ends at the designs actually visited — not the space size."""
    progress = Recorder()
    result = run_search(config([TINY]), workers=1, progress=progress)
    kinds = [e[0] for e in progress.events]
    assert kinds[0] == "bounding" and kinds[-1] == "finished" and set(kinds[1:-1]) == {"searching"}
    searching = [e for e in progress.events if e[0] == "searching"]
    totals = [done + in_flight + remaining for _, done, in_flight, remaining, _, _ in searching]
    assert all(b <= a for a, b in zip(totals, totals[1:]))
    _, visited, architectures, incumbent = progress.events[-1]
    assert architectures == len(ARCH) and visited < architectures and totals[-1] == visited
    assert incumbent == result.best[TINY.name].throughput_samples_s
    for _, _, _, remaining, best, bound in searching:  # the bound still to beat is above the incumbent
        assert (bound is None) == (remaining == 0) and (best is None or bound is None or bound > best)


def test_time_shares_add_up_and_match_the_pipeline_formula(brute_force):
    """The 'why' breakdown: shares summing to 1; bubble : per-microbatch work = (p − 1)/v : m_r (1F1B)."""
    from search.result import DesignResult

    evaluations = [ev for ev in brute_force[TINY.name] if ev.feasible and ev.plan.pipeline_stages > 1]
    assert evaluations
    for ev in evaluations[:10]:
        shares, plan = DesignResult.from_evaluation(ev).time_shares, ev.plan
        assert sum(shares.values()) == pytest.approx(1.0)
        assert shares["dp_allreduce"] == pytest.approx(plan.allreduce_s / plan.time_per_batch_s)
        work = shares["compute"] + shares["recompute"] + shares["tp_comm"] + shares["p2p"]
        p, v, m = plan.pipeline_stages, plan.interleave, plan.microbatches_per_replica
        assert shares["bubble"] / work == pytest.approx((p - 1) / (v * m))


def test_search_records_hold_the_placement_plan_and_write_it_back_byte_for_byte(brute_force):
    """A design's plan, read back from its record (``Evaluation.to_dict()`` through JSON, as results.db and
    results.json hold it), is the evaluation's own :class:`Plan` (``None`` when infeasible), and writes the same JSON
    bytes again: resumed and re-rendered results stay identical."""
    from phaze_env.evaluate import Evaluation
    from phaze_env.placement import Plan
    from search.result import DesignResult

    evaluations = [ev for name in brute_force for ev in brute_force[name]]
    infeasible = dataclasses.replace(evaluations[0], feasible=False, reason="does not fit", plan=None)
    for ev in [*evaluations, infeasible]:
        record = json.dumps(ev.to_dict())
        stored = Evaluation.from_dict(json.loads(record))
        assert json.dumps(stored.to_dict()) == record  # a results.db row reads back and writes the same bytes
        design = DesignResult.from_evaluation(stored)
        assert design.plan == ev.plan and (design.plan is None or isinstance(design.plan, Plan))
        again = DesignResult.from_dict(json.loads(json.dumps(design.to_dict())))
        assert json.dumps(again.to_dict()) == json.dumps(design.to_dict())
        assert json.dumps(again.to_dict()["plan"]) == json.dumps(json.loads(record)["plan"])
    with pytest.raises(ValueError, match="unknown key"):
        Plan.from_dict({"feasible": True, "notaton": "t1p1d1m1"})
    with pytest.raises(TypeError, match="Plan.from_dict"):  # a plan as a dict is refused, not read by key later
        dataclasses.replace(design, plan={"notation": "t1p1d1m1"})


def test_cli_units_preset_and_area_budget(brute_force, tmp_path, capsys):
    from search.phaze import main

    common = ["--workload", TINY.name, "--space", "reduced", "--devices", "16", "--batch", "64", "--microbatch", "1",
              "--hbm-gb", "32", "--tensor-widths", "1", "--workers", "1", "--quiet", "--out", str(tmp_path)]
    assert main([*common, "--link-gbps", "8", "--json"]) == 0
    captured = capsys.readouterr()
    assert "--link-gbps is deprecated; use --link-GBps" in captured.err
    data = json.loads(captured.out)
    assert data["best"][TINY.name]["devices_available"] == 16
    assert data["best"][TINY.name]["area_mm2"] > 0 and "area" not in data["best"][TINY.name]
    assert main([*common, "--link-GBps", "8", "--json", "--preset", "tpuv4i"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["space"]["base"]["hbm_bandwidth_Bps"] == 614e9  # the preset's, not TPUv4's
    assert data["best"][TINY.name]["accelerator"]["hbm_bandwidth_Bps"] == 614e9
    budget = DesignSpace.reduced().budget_mm2 / 2
    assert main([*common, "--json", "--area-budget", str(budget)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["space"]["budget_mm2"] == budget and data["best"][TINY.name]["area_mm2"] <= budget
    for bad, message in ((["--preset", "tpu9"], "unknown accelerator preset"),
                         (["--area-budget", "0.5"], "no architecture")):
        with pytest.raises(SystemExit) as exc:
            main([*common, *bad])
        assert exc.value.code == 2 and message in capsys.readouterr().err


def test_cli_interrupt_is_one_line_and_status_130(brute_force, tmp_path, capsys, monkeypatch):
    """Ctrl-C during the search: one line saying how many designs are saved and how to resume, status 130."""
    import sqlite3

    import search.cli

    from search.phaze import main

    args = ["--workload", TINY.name, "--space", "reduced", "--devices", "16", "--batch", "64", "--microbatch", "1",
            "--hbm-gb", "32", "--tensor-widths", "1", "--workers", "1", "--quiet", "--out", str(tmp_path)]
    assert main(args) == 0
    capsys.readouterr()
    with sqlite3.connect(tmp_path / "results.db") as db:
        saved = db.execute("SELECT COUNT(*) FROM designs").fetchone()[0]
    assert saved > 0

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(search.cli, "run_search", interrupted)
    assert main(args) == 130
    err = capsys.readouterr().err
    assert err == (f"interrupted — {saved} designs saved in {tmp_path / 'results.db'}; "
                   "rerun the same command to resume\n")


def test_process_pool_search_equals_brute_force(brute_force, tmp_path):
    """The CLI's default executor (local processes) end to end: same answer as brute force, and resumable."""
    result = run_search(config([TINY_LLAMA]), workers=2, out=tmp_path)
    best = max(ev.throughput_samples_s for ev in brute_force[TINY_LLAMA.name])
    assert result.best[TINY_LLAMA.name].throughput_samples_s == pytest.approx(best, rel=1e-12)
    again = run_search(config([TINY_LLAMA]), workers=2, out=tmp_path)
    assert again.best == result.best and again.evaluations_this_run == 0


def test_exact_search_on_a_hierarchical_cluster_equals_brute_force(brute_force, tmp_path, capsys):
    """--cluster dgx-a100 (8-GPU NVLink nodes, InfiniBand between them): still exact, and what results.json says."""
    from phaze_env.cluster import get_cluster
    from search.phaze import main

    space = DesignSpace(num_tc=(1, 4, 16), num_vc=(1, 16), tc_width=(128,), tc_depth=(32, 128), buffer_mb=(32,),
                        microbatch=(1, 4), recompute=(False, True), hbm_gb=(32.0,))
    dgx = get_cluster("dgx-a100", 16, global_batch=64)
    result = run_search(SearchConfig(workloads=(TINY,), cluster=dgx, space=space, tensor_widths=(1, 2)), workers=1)
    brute = max(evaluate(TINY, acc, dgx, microbatch=(1, 4), hbm_gb=(32.0,), tensor_widths=(1, 2)).throughput_samples_s
                for acc in space.arch_space())
    assert result.best[TINY.name].throughput_samples_s == pytest.approx(brute, rel=1e-12)
    args = ["--workload", TINY.name, "--space", "reduced", "--devices", "16", "--batch", "64", "--microbatch", "1",
            "--hbm-gb", "32", "--tensor-widths", "1", "--workers", "1", "--json", "--out", str(tmp_path)]
    assert main([*args, "--cluster", "dgx-a100", "--link-GBps", "12.5"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cluster"] == dgx.replace(link_bandwidth_Bps=12.5e9).to_dict()  # (all finite)
    assert data["exact"] is True and data["best"][TINY.name]["feasible"]


@pytest.mark.slow
def test_dp_calls_count_the_placement_dp_runs_made(monkeypatch):
    """``dp_calls`` (on scheduled layer latencies) and ``bound_dp_calls`` (on lower bounds) are the DP runs made:
    their sum equals a counter around the DP; the variant-level branch and bound makes at most one scheduled run
    per variant (t × m × HBM × c × e), fewer when a variant's lower-bound DP cannot beat the incumbent; a pruned
    design reports only the bound's runs."""
    from phaze_env.placement import api
    from search.tasks import evaluate_design

    runs = []
    best_plan = api.best_plan
    monkeypatch.setattr(api, "best_plan", lambda *args, **kw: runs.append(1) or best_plan(*args, **kw))
    knobs = dict(microbatch=(1, 4), hbm_gb=(0.004, 32.0), tensor_widths=(1, 2), context_parallels=(1,))
    variants = 2 * 2 * 2  # widths × microbatches × capacities (c = e = 1: a dense model, c pinned)
    scheduled = []
    for accelerator in list(ARCH)[::24]:
        before = len(runs)
        evaluation = evaluate(TINY, accelerator, CLUSTER, **knobs)  # these knobs are this test's: not cached before
        assert not evaluation.from_cache and evaluation.dp_calls + evaluation.bound_dp_calls == len(runs) - before
        assert evaluation.dp_calls <= variants and evaluation.bound_dp_calls <= variants  # every schedule proven
        scheduled.append(evaluation.dp_calls)
        before, calls = len(runs), {}
        throughput_upper_bound(TINY, accelerator, CLUSTER, calls=calls, **knobs)
        assert calls == {"bound_dp_calls": len(runs) - before} and calls["bound_dp_calls"] == variants
    assert min(scheduled) < variants  # the branch and bound skipped scheduled runs (the old count claimed them)
    task = SearchConfig(workloads=(TINY,), cluster=CLUSTER, space=SPACE, tensor_widths=(1, 2)).task(TINY.name, 0, 1e30)
    before = len(runs)
    pruned = evaluate_design(task)
    assert pruned["status"] == "pruned" and pruned["dp_calls"] == 0
    assert pruned["bound_dp_calls"] == len(runs) - before
