"""The system side: hierarchical clusters, the plan notation, fixed-plan evaluation and its CLI."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phaze_env.cluster import (CLUSTER_PRESETS, Cluster, UnknownClusterError, _counted_extents, _extents, _p2p_level_index,
                               get_cluster)
from phaze_env.evaluate import evaluate
from phaze_env.hardware import TPUV4, get_preset
from phaze_env.plan_spec import PlanSpec, PlanSyntaxError
from phaze_env.workloads import custom_workload

TINY = custom_workload("tiny-gpt2-sys", "GPT2Config", "GPT2LMHeadModel", 64, n_embd=128, n_layer=4, n_head=4,
                       n_inner=512, vocab_size=1000, n_positions=64)
GiB = 2**30


# ---------------------------------------------------------------- collectives, written from the formulas
def ring_allreduce(size, group, bandwidth, latency=0.0):
    """Thakur et al. 2005: 2(g−1)/g · S / B + 2(g−1) · α."""
    return 0.0 if group == 1 else 2 * (group - 1) / group * size / bandwidth + 2 * (group - 1) * latency


def test_flat_cluster_is_the_ring_formula():
    cluster = Cluster(n_devices=64, link_bandwidth_Bps=4e9, link_latency_s=1e-6)
    for group, stride in ((8, 1), (16, 4), (64, 1)):
        ring_s = ring_allreduce(1e9, group, 4e9, 1e-6)
        assert cluster.network.collective_s("allreduce", 1e9, group, stride) == pytest.approx(ring_s)
        assert cluster.network.collective_s("allgather", 1e9, group, stride) == pytest.approx(ring_s / 2)
    assert cluster.network.p2p_s(1e9, stride=8) == pytest.approx(1e9 / 4e9 + 1e-6)


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=4), group=st.integers(0, 700),
       stride=st.one_of(st.integers(0, 70), st.sampled_from((1, 2, 4, 8, 64, 128, 384))),
       outer=st.one_of(st.just((1, 0)), st.tuples(st.integers(1, 4), st.integers(1, 50))))
def test_extents_in_closed_form_equal_the_listed_positions(sizes, group, stride, outer):
    """The closed forms (an arithmetic progression's quotients by each level's unit, modulo its size) count exactly
    what listing the devices' positions counts, on any level sizes, strides and groups."""
    assert _extents.__wrapped__(tuple(sizes), group, stride, outer) == _counted_extents(tuple(sizes), group, stride, outer)


@settings(max_examples=400, deadline=None)
@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=4), stride=st.integers(1, 400), hops=st.integers(1, 300))
def test_p2p_level_in_closed_form_is_the_outermost_level_the_listed_positions_cross(sizes, stride, hops):
    """The pipeline sends' level (the outermost level whose digit of ``hops·stride`` is nonzero while the sends stay
    inside the levels) is the outermost level on which the listed positions ``0, stride, …, hops·stride`` differ."""
    crossed = [k for k, extent in enumerate(_counted_extents(tuple(sizes), hops + 1, stride, (1, 0))) if extent > 1]
    assert _p2p_level_index.__wrapped__(tuple(sizes), stride, hops) == (crossed[-1] if crossed else 0)


def test_dgx_a100_prices_each_level():
    cluster = get_cluster("dgx-a100", 64)
    nvlink, ib = 300e9 * 0.8, 25e9 * 0.8  # nominal × NCCL efficiency (the preset's cited constants)
    a_nv, a_ib = 2e-6, 5e-6
    # A tensor group of 8 consecutive GPUs stays in its node.
    assert cluster.network.extents(8, 1) == (8, 1)
    assert cluster.network.collective_s("allreduce", 1e9, 8) == pytest.approx(ring_allreduce(1e9, 8, nvlink, a_nv))
    # A data-parallel group of 8 GPUs 8 apart crosses 8 nodes, one GPU each: a ring over InfiniBand.
    assert cluster.network.extents(8, 8) == (1, 8)
    assert cluster.network.collective_s("allreduce", 1e9, 8, stride=8) == pytest.approx(ring_allreduce(1e9, 8, ib, a_ib))
    # 32 GPUs 2 apart: 4 per node × 8 nodes — reduce-scatter in the node, all-reduce of 1/4 across, all-gather.
    assert cluster.network.extents(32, 2) == (4, 8)
    expected = ring_allreduce(1e9, 4, nvlink, a_nv) + ring_allreduce(1e9 / 4, 8, ib, a_ib)
    assert cluster.network.collective_s("allreduce", 1e9, 32, stride=2) == pytest.approx(expected)
    # Pipeline neighbours 8 apart are in different nodes; 1 apart (t·d = 1) inside one.
    assert cluster.network.p2p_level(8, 7).bandwidth_Bps == pytest.approx(ib)
    assert cluster.network.p2p_level(1, 7).bandwidth_Bps == pytest.approx(nvlink)
    assert cluster.network.p2p_level(1, 8).bandwidth_Bps == pytest.approx(ib)  # 9 devices: the last send leaves the node


def test_hierarchy_never_beats_a_flat_ring_at_its_fastest_level():
    """Σ_i 2(k_i−1)/k_i · S_i = 2(g−1)/g · S: a hierarchy is a flat ring when every level is equally fast."""
    same = Cluster(n_devices=64, devices_per_node=8, node_bandwidth_Bps=10e9, link_bandwidth_Bps=10e9)
    flat = Cluster(n_devices=64, link_bandwidth_Bps=10e9)
    for group, stride in ((64, 1), (32, 2), (16, 4)):
        assert same.network.collective_s("allreduce", 3e9, group, stride) == \
            pytest.approx(flat.network.collective_s("allreduce", 3e9, group, stride))


def test_tpuv4_pod_slices_are_tori():
    assert get_cluster("tpuv4-pod", 4096).network.torus_dims == (16, 16, 16)
    assert get_cluster("tpuv4-pod", 64).network.torus_dims == (4, 4, 4)
    pod = get_cluster("tpuv4-pod", 64)
    # A group along one full dimension: a bidirectional ring over 2 links of 50 GB/s.
    assert pod.network.collective_s("allreduce", 1e9, 4) == pytest.approx(ring_allreduce(1e9, 4, 2 * 50e9, 1e-6))
    with pytest.raises(ValueError, match="torus_dims"):
        Cluster(n_devices=100, torus_dims=(4, 4, 4))


def test_presets_and_errors():
    assert set(CLUSTER_PRESETS) >= {"phaze", "dgx-a100", "dgx-h100", "tpuv4-pod"}
    assert get_cluster("phaze", 1024) == Cluster(name="phaze")
    with pytest.raises(UnknownClusterError, match="dgx-a100"):
        get_cluster("dgx-a10", 8)
    for bad in (dict(link_efficiency=0.0), dict(node_efficiency=1.5), dict(devices_per_node=0), dict(optimizer="lion")):
        with pytest.raises(ValueError):
            Cluster(**bad)
    cluster = get_cluster("dgx-h100", 16, global_batch=32)
    assert Cluster.from_dict(json.loads(json.dumps(cluster.to_dict()))) == cluster


# ---------------------------------------------------------------- the plan notation
@pytest.mark.parametrize("text", ["t8p8d1m1", "t8p8d1m1v3+sp+zero1+rc=selective", "t2m4+rc=none|full",
                                  "+v=auto+sp=auto+zero=auto+rc=auto", "p4", "t2p2d4m1+zero2", "d8+zero3"])
def test_plan_notation_round_trips(text):
    spec = PlanSpec.parse(text)
    assert str(spec) == text and PlanSpec.parse(str(spec)) == spec


def test_plan_notation_fields():
    spec = PlanSpec.parse("t8p8d1m1v3+sp+rc=selective")
    assert (spec.t, spec.p, spec.d, spec.microbatch, spec.interleave) == (8, 8, 1, 1, 3)
    assert spec.sequence_parallel and spec.zero == 0 and spec.recompute_modes == ("selective",)
    assert spec.devices == 64 and PlanSpec(t=8).devices is None
    assert PlanSpec().recompute_modes == ("none", "selective", "full")


@pytest.mark.parametrize("text", ["x8", "t8p8+sp=yes", "t0p1", "t8+rc=most", "p8t8"])
def test_bad_plan_strings_are_clear_errors(text):
    with pytest.raises(PlanSyntaxError):
        PlanSpec.parse(text)


# ---------------------------------------------------------------- evaluate with a pinned plan
CLUSTER8 = get_cluster("dgx-a100", 8, global_batch=16, optimizer="adam")


def test_pinned_plan_is_the_plan_evaluated_and_its_breakdown_adds_up():
    spec = PlanSpec.parse("t2p2d2m2+sp+rc=selective")
    evaluation = evaluate(TINY, TPUV4, CLUSTER8, plan=spec)
    assert evaluation.feasible, evaluation.reason
    assert evaluation.plan.notation == "t2p2d2m2+sp+rc=selective"
    total = evaluation.plan.time_per_batch_s
    assert math.isclose(sum(evaluation.time_breakdown_s.values()), total, rel_tol=1e-9)
    assert evaluation.time_breakdown_s["dp_allreduce"] > 0 and evaluation.time_breakdown_s["optimizer"] > 0
    assert evaluation.time_breakdown_s["tp_comm"] > 0
    # Every pinned degree is the one evaluated; 16 samples over d = 2 replicas of 2-sample microbatches: m_r = 4,
    # and the 1F1B bubble of p = 2 stages is (p − 1) / (m_r + p − 1) = 1/5.
    plan = evaluation.plan
    assert (plan.tensor_width, plan.pipeline_stages, plan.data_parallel, plan.microbatch) == (2, 2, 2, 2)
    assert plan.sequence_parallel and plan.recompute_modes == ("selective", "selective") and plan.zero == 0
    assert plan.microbatches_per_replica == 4 and plan.bubble_fraction == pytest.approx(1 / 5)


def test_branch_and_bound_across_the_grid_keeps_the_best_plan():
    """``evaluate`` prunes each (t, m, HBM) search against the best plan so far; the answer is the best of
    the searches run one by one."""
    widths, sizes, hbm = (1, 2, 4), (1, 2), (0.05, 0.5)
    searched = evaluate(TINY, TPUV4, CLUSTER8, plan=PlanSpec(), tensor_widths=widths, microbatch=sizes, hbm_gb=hbm)
    alone = [evaluate(TINY, TPUV4, CLUSTER8, plan=PlanSpec(t=t, microbatch=m), tensor_widths=(t,), microbatch=(m,),
                      hbm_gb=h) for h in hbm for t in widths for m in sizes]  # evaluate's order: ties keep the first
    best = max((e for e in alone if e.feasible), key=lambda e: e.throughput_samples_s)
    assert searched.throughput_samples_s == pytest.approx(best.throughput_samples_s, rel=1e-12)
    assert searched.plan.notation == best.plan.notation


def test_framework_efficiency_slows_device_time_only():
    """``framework_efficiency`` divides every operator's device time (compute, recompute) and leaves the
    collectives alone; the dgx-a100 preset carries the fitted Megatron-LM figure, the others keep 1."""

    from phaze_env.cluster import MEGATRON_A100_EFFICIENCY

    spec = PlanSpec.parse("t2p2d2m2+sp+rc=selective")
    full, half = (evaluate(TINY, TPUV4, CLUSTER8.replace(framework_efficiency=e), plan=spec) for e in (1.0, 0.5))
    for part in ("compute", "recompute"):
        assert half.time_breakdown_s[part] == pytest.approx(2 * full.time_breakdown_s[part], rel=1e-6), part
    for part in ("tp_comm", "dp_allreduce", "optimizer"):
        assert half.time_breakdown_s[part] == pytest.approx(full.time_breakdown_s[part], rel=1e-9), part
    assert get_cluster("dgx-a100", 16).stack.framework_efficiency == MEGATRON_A100_EFFICIENCY < 1
    assert get_cluster("dgx-h100", 16).stack.framework_efficiency == get_cluster("phaze", 16).stack.framework_efficiency == 1
    with pytest.raises(ValueError, match="framework_efficiency"):
        Cluster(framework_efficiency=0.0)


def test_searching_more_knobs_is_never_slower_than_a_pinned_plan():
    pinned = evaluate(TINY, TPUV4, CLUSTER8, plan=PlanSpec.parse("t2p2d2m2"))
    searched = evaluate(TINY, TPUV4, CLUSTER8, plan=PlanSpec(microbatch=2, interleave=None), tensor_widths=(1, 2, 4))
    assert searched.throughput_samples_s >= pinned.throughput_samples_s * (1 - 1e-12)


def test_pinned_plan_that_does_not_fit_says_how_much_memory_it_needs():
    evaluation = evaluate(TINY, TPUV4, CLUSTER8, plan=PlanSpec.parse("t1p1d8m8"), hbm_gb=0.01)
    assert not evaluation.feasible
    needs_gib = float(re.search(r"needs ([0-9.]+) GiB", evaluation.reason).group(1))
    # the figure is what the same plan holds on its fullest device when the HBM is large enough
    fits = evaluate(TINY, TPUV4, CLUSTER8, plan=PlanSpec.parse("t1p1d8m8"), hbm_gb=1.0)
    memory = fits.plan.memory_bytes
    assert fits.feasible and needs_gib == pytest.approx(memory["total"] / GiB, rel=5e-3) and needs_gib > 0.01
    assert memory["optimizer"] == 6 * memory["weights"]  # Adam under ZeRO's accounting: 12 bytes/param vs 2


@pytest.mark.parametrize("spec, message", [("t2p2d1m1", "devices"), ("t3p1d1m1", "tensor width")])
def test_impossible_plans_raise(spec, message):
    with pytest.raises(ValueError, match=message):
        evaluate(TINY, TPUV4, get_cluster("dgx-a100", 3 if spec.startswith("t3") else 8), plan=PlanSpec.parse(spec))


def test_hbm_is_gib_and_defaults_to_the_accelerators_own():
    """``hbm_gb`` is GiB (2**30 bytes) everywhere; without ``hbm_gb`` the preset's own capacity is used."""
    small = get_preset("tpuv4i")  # 8 GiB
    evaluation = evaluate(TINY, small, Cluster(n_devices=4, global_batch=8))
    assert evaluation.feasible and evaluation.plan.hbm_bytes == 8 * GiB == small.hbm_bytes
    assert evaluation.hbm_gb == 8.0
    assert evaluate(TINY, small, Cluster(n_devices=4, global_batch=8), hbm_gb=32.0).plan.hbm_bytes == 32 * GiB


def test_default_evaluation_keeps_phazes_plan_space():
    evaluation = evaluate(TINY, TPUV4, Cluster(n_devices=16, global_batch=64), tensor_widths=(1, 2))
    plan = evaluation.plan
    assert not plan.sequence_parallel and plan.zero == 0 and plan.interleave == 1
    assert set(plan.recompute_modes) <= {"none", "full"}
    assert evaluation.time_breakdown_s["optimizer"] > 0  # the SGD step is timed (HBM-bound)


# ---------------------------------------------------------------- the CLI
def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "phaze_env.evaluate", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args, message", [
    (["--preset", "a1000"], "unknown accelerator preset"),
    (["--cluster", "dgx-b200"], "unknown cluster"),
    (["--devices", "64", "--plan", "t8p4d1m1"], "devices"),
    (["--workload", "gpt2-xl", "--devices", "16", "--plan", "t2p8d1m1"], "does not divide"),
    (["--plan", "t8p8d1m1+rc=most"], "unknown plan flag"),
    (["--devices", "0"], "positive"),
    (["--framework-efficiency", "1.5"], "framework_efficiency must be in (0, 1]"),
])
def test_cli_bad_input_is_one_line_exit_2(args, message):
    result = run_cli(*args)
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_cli_json_breakdown_adds_up():
    from phaze_env.workloads.registry import BUILTIN

    BUILTIN.setdefault(TINY.name, TINY)
    from phaze_env.evaluate import main

    # In-process (the tiny workload is registered here, not in a subprocess).
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["--workload", TINY.name, "--preset", "tpuv4", "--cluster", "dgx-a100", "--devices", "8",
                       "--batch", "16", "--plan", "t2p2d2m2", "--recompute", "selective", "--sp", "--json"])
    info = json.loads(out.getvalue())
    assert status == 0 and info["plan"] == "t2p2d2m2+sp+rc=selective"
    assert math.isclose(sum(info["time_breakdown_s"].values()), info["time_per_batch_s"], rel_tol=1e-9)
    assert info["tokens_s"] == pytest.approx(info["throughput_samples_s"] * 64)


# ---------------------------------------------------------------- bounds stay valid on a hierarchical network
def test_search_bounds_hold_on_a_hierarchical_cluster():
    """search.bounds prices TP, p2p and DP traffic on the cluster's levels (or below them): still upper bounds."""
    from phaze_env.design import DesignSpace
    from phaze_env.evaluate import throughput_upper_bound
    from search.bounds import throughput_bounds

    cluster = get_cluster("dgx-a100", 16, global_batch=32)
    arch = DesignSpace(num_tc=(4, 16), num_vc=(1, 16), tc_width=(128,), tc_depth=(128,), buffer_mb=(32,),
                       hbm_gb=(32.0,), microbatch=(1, 4), recompute=(False, True)).arch_space()
    bounds = throughput_bounds(TINY, arch, cluster, microbatch=(1, 4), tensor_widths=(1, 2, 4))
    knobs = dict(microbatch=(1, 4), hbm_gb=(32.0,), tensor_widths=(1, 2, 4))
    for index, acc in enumerate(arch):
        exact = evaluate(TINY, acc, cluster, **knobs)
        assert exact.feasible and exact.throughput_samples_s <= bounds[index]
        assert exact.throughput_samples_s <= throughput_upper_bound(TINY, acc, cluster, **knobs)
        modern = PlanSpec(interleave=None)  # every knob chosen by the DP: the ILP-free bound still holds
        assert (evaluate(TINY, acc, cluster, plan=modern, **knobs).throughput_samples_s
                <= throughput_upper_bound(TINY, acc, cluster, plan=modern, **knobs))
