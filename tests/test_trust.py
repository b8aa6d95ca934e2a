"""Answers that are right or visibly qualified: "exact" only when proven, one pricing path, bounds on every topology."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import phaze_env.schedule as schedule_module
from phaze_env.cluster import Cluster, get_cluster
from phaze_env.evaluate import evaluate, throughput_upper_bound
from phaze_env.hardware import TPUV4, get_preset
from phaze_env.plan_spec import PlanSpec
from phaze_env.schedule.ilp import IlpResult
from search.bounds import throughput_bounds
from search.phaze import SearchConfig, SearchResult, run_search
from tiny import CLUSTER, SPACE, TINY



def _config() -> SearchConfig:
    return SearchConfig(workloads=[TINY], cluster=CLUSTER, space=SPACE, tensor_widths=(1, 2))


REAL_SOLVE_ILP, REAL_LOWER_BOUND = schedule_module.solve_ilp, schedule_module.lower_bound_s


@pytest.fixture
def every_ilp_times_out(monkeypatch):
    """As on a very busy machine: no schedule is proven by the cheap bound (it is halved, so every layer goes to
    the ILP) and every ILP stops at once, giving back the list schedule and the bound as a timeout. Returns the
    time limits the ILP was called with."""
    calls = []
    cheap_bound = schedule_module.lower_bound_s

    def timed_out(problem, incumbent, lower_bound_s, solver, time_limit_s):
        calls.append(time_limit_s)
        return IlpResult(incumbent, lower_bound_s, "timeout", 0)

    monkeypatch.setattr(schedule_module, "lower_bound_s", lambda problem: 0.5 * cheap_bound(problem))
    monkeypatch.setattr(schedule_module, "solve_ilp", timed_out)
    return calls


def test_injected_timeout_is_not_exact_names_the_designs_and_a_rerun_proves_them(fresh_cache, tmp_path, monkeypatch,
                                                                                 every_ilp_times_out):
    out = tmp_path / "out"
    out.mkdir()
    result = run_search(_config(), out=out)
    assert every_ilp_times_out, "the tiny space must have schedules that need the ILP, or this test proves nothing"
    # a timed-out solve was retried once with the larger limit before being given back unproven
    assert sorted(set(every_ilp_times_out)) == [10.0, 10.0 * schedule_module.RETRY_TIME_FACTOR]
    assert result.unproven, "designs resting on timed-out schedules must be named"
    best = result.best[TINY.name]
    for row in result.unproven:
        assert row.workload == TINY.name and row.schedules and row.worst_gap > 0
        assert row.throughput_bound_samples_s >= row.throughput_samples_s
        # an unproven design costs exactness exactly when its proven bound reaches the answer (or it is the answer)
        assert row.blocks_exact == (not best.proven or row.throughput_bound_samples_s >= best.throughput_samples_s)
    assert result.exact is False  # the best design itself rests on the ILP here
    assert not best.proven and best.worst_gap > 0
    stored = json.loads((out / "results.json").read_text())
    assert stored["exact"] is False and len(stored["unproven"]) == len(result.unproven)
    assert any(line.startswith("NOT PROVEN") for line in result.exactness_lines())

    # nothing provisional is served as final: the same evaluation, solved normally, is proven and not a cache hit
    monkeypatch.setattr(schedule_module, "solve_ilp", REAL_SOLVE_ILP)  # the fault ends (fresh_cache stays)
    monkeypatch.setattr(schedule_module, "lower_bound_s", REAL_LOWER_BOUND)
    row = result.unproven[0]
    design = _config().arch[row.index]
    fresh = evaluate(TINY, design, CLUSTER, microbatch=SPACE.microbatch, recompute=SPACE.recompute, hbm_gb=SPACE.hbm_gb,
                     tensor_widths=(1, 2))
    assert fresh.proven and not fresh.from_cache
    assert row.throughput_samples_s <= fresh.throughput_samples_s * (1 + 1e-9)
    assert fresh.throughput_samples_s <= row.throughput_bound_samples_s * (1 + 1e-9)

    # the rerun (same command, same results.db) re-evaluates the provisional rows and proves the answer
    again = run_search(_config(), out=out)
    assert again.exact is True and not again.unproven and again.best[TINY.name].proven
    assert again.evaluations_this_run >= 1  # provisional rows were not resumed as final: solved again as visited
    reference = run_search(_config())  # from scratch in memory (schedules now cached proven)
    assert again.best[TINY.name].throughput_samples_s == pytest.approx(reference.best[TINY.name].throughput_samples_s,
                                                                        rel=1e-12)
    assert again.best[TINY.name].accelerator == reference.best[TINY.name].accelerator


def test_unproven_schedules_and_evaluations_are_not_cached(fresh_cache, every_ilp_times_out):
    design = SPACE.arch_space()[0]
    first = evaluate(TINY, design, CLUSTER, microbatch=(1,), tensor_widths=(1,))
    solves = len(every_ilp_times_out)
    assert not first.proven and solves > 0
    second = evaluate(TINY, design, CLUSTER, microbatch=(1,), tensor_widths=(1,))
    assert not second.from_cache and len(every_ilp_times_out) == 2 * solves  # every schedule solved again


def test_unproven_designs_are_listed_in_space_order_whatever_order_they_finished_in(fresh_cache, every_ilp_times_out):
    """results.json is the same file on every run: the unproven rows follow (workload, index), not the order the
    parallel workers' answers arrived in (the records' insertion order)."""
    from types import SimpleNamespace

    from search.exact import certify

    unproven = evaluate(TINY, SPACE.arch_space()[0], CLUSTER, microbatch=(1,), tensor_widths=(1,))
    assert not unproven.proven
    record = SimpleNamespace(evaluation=unproven, feasible=True)
    arrived = [("b", 2), ("a", 5), ("a", 1)]
    _, rows = certify("pareto", {}, {key: record for key in arrived})
    assert [(row.workload, row.index) for row in rows] == sorted(arrived)


def test_unproven_design_rows_round_trip_through_json(fresh_cache, every_ilp_times_out):
    result = run_search(_config())
    text = result.to_json()
    again = SearchResult.from_json(text)
    assert again.unproven == result.unproven and again.exact == result.exact
    assert again.to_json() == text  # the rows read back as UnprovenDesign and write the same bytes
    assert again.best[TINY.name].proven == result.best[TINY.name].proven


def test_explain_adds_up_to_evaluate_at_a_framework_efficiency_below_one(fresh_cache):
    """On dgx-a100 (framework efficiency 0.878) explain's layer time is evaluate's, and its unit terms carry the
    same slow-down: device terms ×1/0.878 against efficiency 1, link time unchanged."""
    a100 = get_preset("a100")
    cluster = get_cluster("dgx-a100", 16, global_batch=64)
    assert cluster.stack.framework_efficiency < 1
    ev = evaluate(TINY, a100, cluster, plan=PlanSpec.parse("t2p1d8m4"))
    assert ev.feasible and ev.proven
    timing = ev.layer_timings["t2_m4"]["block"]
    explained = ev.explain("block", workload=TINY)
    assert explained.time_s == pytest.approx(timing["fwd_s"] + timing["bwd_s"], rel=1e-3)
    kernel = cluster.replace(framework_efficiency=1.0)
    plain = evaluate(TINY, a100, kernel, plan=PlanSpec.parse("t2p1d8m4")).explain("block", workload=TINY)
    slowdown = 1 / cluster.stack.framework_efficiency
    assert explained.busy_s["links"] == pytest.approx(plain.busy_s["links"], rel=1e-12) and plain.busy_s["links"] > 0
    for unit in ("tensor_cores", "vector_cores", "hbm"):
        assert explained.busy_s[unit] == pytest.approx(plain.busy_s[unit] * slowdown, rel=1e-9), unit
    for op, base in zip(explained.ops, plain.ops):
        if op.parallel == base.parallel:
            assert op.tensor_cores_s == pytest.approx(base.tensor_cores_s * slowdown, rel=1e-9, abs=1e-18)


@pytest.mark.parametrize("cluster", [
    Cluster(n_devices=16, global_batch=64, link_bandwidth_Bps=50e9, link_latency_s=2e-6, torus_dims=(4, 4)),
    Cluster(n_devices=16, global_batch=64, link_bandwidth_Bps=25e9, torus_dims=(2, 2, 4), framework_efficiency=0.6),
    Cluster(n_devices=16, global_batch=64, link_bandwidth_Bps=25e9, devices_per_node=4, node_bandwidth_Bps=300e9,
            node_latency_s=1e-6, framework_efficiency=0.79),
    Cluster(n_devices=16, global_batch=64, link_bandwidth_Bps=25e9, devices_per_node=4, node_bandwidth_Bps=300e9,
            framework_efficiency=0.9, gemm_wave_sms=7),
], ids=["torus-2d", "torus-3d-slow-framework", "two-tier-slow-framework", "gemm-waves-on-7-sms"])
def test_search_bounds_hold_on_torus_and_hierarchical_clusters(fresh_cache, cluster):
    """The vectorised bound and the ILP-free bound are never below the evaluated throughput, per architecture."""
    space = dataclasses.replace(SPACE, num_tc=(1, 4), buffer_mb=(2,), microbatch=(1, 4))
    arch = space.arch_space()
    knobs = dict(microbatch=space.microbatch, recompute=space.recompute, hbm_gb=space.hbm_gb, tensor_widths=(1, 2, 4))
    bounds = throughput_bounds(TINY, arch, cluster, microbatch=space.microbatch, tensor_widths=(1, 2, 4))
    for index in range(len(arch)):
        ev = evaluate(TINY, arch[index], cluster, **knobs)
        assert ev.proven
        second = throughput_upper_bound(TINY, arch[index], cluster, **knobs)
        assert ev.throughput_samples_s <= second * (1 + 1e-9), index
        assert ev.throughput_samples_s <= bounds[index] * (1 + 1e-9), index
    assert np.isfinite(bounds).all()


def test_evaluation_to_dict_is_a_deep_plain_copy(fresh_cache):
    """Evaluation.to_dict equals dataclasses.asdict, the plan as its JSON-ready Plan.to_dict, and shares no
    container with the (cached) evaluation."""
    ev = evaluate(TINY, TPUV4, CLUSTER, microbatch=(1,), tensor_widths=(1, 2))
    data = ev.to_dict()
    assert data == dataclasses.asdict(ev) | {"plan": ev.plan.to_dict()}
    data["layer_timings"]["t1_m1"]["block"]["fwd_s"] = -1.0
    data["plan"]["stage_layers"].append("mutated")
    again = evaluate(TINY, TPUV4, CLUSTER, microbatch=(1,), tensor_widths=(1, 2))
    assert again.from_cache and again.to_dict() == dataclasses.asdict(ev) | {"from_cache": True, "plan": ev.plan.to_dict()}
    assert again.layer_timings["t1_m1"]["block"]["fwd_s"] > 0 and "mutated" not in again.plan.stage_layers
