"""TPU slices joined by the data-centre network (``Network.slices``, the ``tpuv4-pod`` preset's ``slices=``).

The DCN is one more, outermost level: a group inside a slice is priced as on one slice, a group across slices adds
a ring over the slices at the DCN bandwidth; one-slice clusters keep their serialised form (and cache keys); the
placement DP stays exact on sliced clusters (the combined brute force of ``test_placement_combined``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phaze_env import comm, placement
from phaze_env.cluster import DCN_LATENCY_S, TPUV4_DCN_PER_CHIP_BPS, Cluster, get_cluster
from phaze_env.evaluate import main as evaluate_main
from phaze_env.placement import Settings
from phaze_env.plan_spec import PlanSpec
from phaze_env.placement import best_plan
from test_bound_property import assert_not_faster, layer, slowdown, slower
from test_placement import records
from test_placement_combined import _instance, assert_dp_equals_brute_force


def test_dcn_per_chip_bandwidth_is_palms_burst_per_chip():
    """81 Tbps over PaLM's 6144 chips (Chowdhery et al. 2022 §4): 1.65 GB/s per chip."""
    assert TPUV4_DCN_PER_CHIP_BPS == pytest.approx(1.648e9, rel=1e-3)


def test_slices_add_one_outer_dcn_level():
    sliced = get_cluster("tpuv4-pod", 256, slices=4)
    one = get_cluster("tpuv4-pod", 64)
    assert sliced.network.slice_devices == 64 and sliced.network.torus_dims == one.network.torus_dims == (4, 4, 4)
    assert sliced.network.levels[:-1] == one.network.levels
    dcn = sliced.network.levels[-1]
    assert (dcn.size, dcn.bandwidth_Bps, dcn.latency_s) == (4, TPUV4_DCN_PER_CHIP_BPS, DCN_LATENCY_S)


def test_a_group_inside_a_slice_is_priced_as_on_one_slice():
    sliced, one = get_cluster("tpuv4-pod", 256, slices=4), get_cluster("tpuv4-pod", 64)
    for kind in ("allreduce", "allgather", "reducescatter"):
        assert sliced.network.collective_s(kind, 3e8, 64) == one.network.collective_s(kind, 3e8, 64)
        assert sliced.network.collective_s(kind, 3e8, 16, stride=4) == one.network.collective_s(kind, 3e8, 16, stride=4)


def test_a_group_across_slices_is_a_ring_over_the_dcn():
    sliced = get_cluster("tpuv4-pod", 512, slices=8)
    payload = 6.9e8
    expected = comm.allreduce_s(payload, 8, TPUV4_DCN_PER_CHIP_BPS, DCN_LATENCY_S)
    assert sliced.network.collective_s("allreduce", payload, 8, stride=64) == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(2 * 7 / 8 * payload / TPUV4_DCN_PER_CHIP_BPS, rel=1e-3)
    # every chip of every slice: the slice's ICI rings, then the DCN ring on the 1/64 shard
    whole = sliced.network.collective_s("allreduce", payload, 512)
    inner = get_cluster("tpuv4-pod", 64).network.collective_s("allreduce", payload, 64)
    assert whole == pytest.approx(inner + comm.allreduce_s(payload / 64, 8, TPUV4_DCN_PER_CHIP_BPS, DCN_LATENCY_S))
    assert sliced.network.p2p_level(64, 1).bandwidth_Bps == TPUV4_DCN_PER_CHIP_BPS  # pipeline neighbours a slice apart


def test_one_slice_keeps_its_serialised_form_and_round_trips():
    one = get_cluster("tpuv4-pod", 64)
    assert "slices" not in one.to_dict() and Cluster.from_dict(one.to_dict()) == one
    sliced = get_cluster("tpuv4-pod", 128, slices=2, global_batch=2048)
    assert sliced.to_dict()["slices"] == 2 and Cluster.from_dict(sliced.to_dict()) == sliced
    assert "(slices, DCN)" in sliced.describe()


def test_v4_slices_are_whole_cubes_with_the_cloud_topologies():
    assert get_cluster("tpuv4-pod", 192).network.torus_dims == (4, 4, 12)  # v4-384
    assert get_cluster("tpuv4-pod", 4096).network.torus_dims == (16, 16, 16)
    assert get_cluster("tpuv4-pod", 6144, slices=2).network.torus_dims == (12, 16, 16)  # PaLM's 2 × 3072


@pytest.mark.parametrize("kwargs, message", [
    (dict(n_devices=100, slices=2), "whole slices of 4×4×4 cubes"),
    (dict(n_devices=8192), "slices joined by the data-centre network"),
    (dict(n_devices=192, slices=5), "equal slices"),
])
def test_inexpressible_slicings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        get_cluster("tpuv4-pod", kwargs.pop("n_devices"), **kwargs)


def test_a_sliced_cluster_needs_a_dcn_and_full_slices():
    with pytest.raises(ValueError, match="only tpuv4-pod has one"):
        Cluster(n_devices=8, slices=2)
    with pytest.raises(ValueError, match="fill its levels exactly"):
        Cluster(n_devices=8, slices=2, dcn_bandwidth_Bps=1.0, torus_dims=(2, 4))


def _sliced(cluster: Cluster, rng: np.random.Generator) -> Cluster | None:
    """``cluster`` split into 2 slices joined by a slower or faster network (None when its nodes do not divide)."""
    if (cluster.n_devices // 2) % cluster.network.devices_per_node:
        return None
    return cluster.replace(slices=2, dcn_bandwidth_Bps=float(rng.choice([3.0, 300.0])),
                   dcn_latency_s=float(rng.choice([0.0, 0.02])))


@pytest.mark.parametrize("seed", range(40))
def test_dp_on_sliced_clusters_equals_brute_force(seed):
    """Every knob free (c, e, ZeRO stage, d, p, v, partition, recompute) on a two-slice cluster: the DP's optimum is the
    brute force's, which prices each group on the levels its positions span, the DCN as any other level."""
    rng = np.random.default_rng(1000 + seed)
    variants, cluster, options = _instance(rng)
    cluster = _sliced(cluster, rng)
    if cluster is None:
        pytest.skip("this instance's nodes do not split into two slices")
    assert_dp_equals_brute_force(variants, cluster, options)


def test_the_sliced_instances_reach_plans_across_the_dcn():
    """The seeds above are not all one-slice plans: many optima span both slices (more devices than one slice)."""
    across = 0
    for seed in range(40):
        rng = np.random.default_rng(1000 + seed)
        variants, cluster, options = _instance(rng)
        cluster = _sliced(cluster, rng)
        if cluster is None:
            continue
        spec = PlanSpec(recompute=options["recompute"], sequence_parallel=False, zero=None, c=None, e=None,
                        interleave=options["interleave"])
        template = Settings(cluster, options["tensor_width"], options["microbatch"], options["hbm_bytes"], spec,
                            hbm_bandwidth_Bps=options["hbm_bandwidth_Bps"])
        plan = placement.best_plan_multi(lambda t, m, c, e: records(variants[(c, e)]), template,
                                         tensor_widths=[options["tensor_width"]], microbatches=[options["microbatch"]],
                                         context_parallels=(1, 2), expert_parallels=(1, 2))
        across += plan.feasible and PlanSpec.parse(plan.notation).devices > cluster.network.slice_devices
    assert across >= 10


def test_evaluate_cli_takes_slices(capsys):
    args = ["--workload", "gpt2-xl", "--preset", "tpuv4", "--cluster", "tpuv4-pod", "--devices", "128", "--batch", "256",
            "--plan", "t1p1d128m2+zero1"]
    assert evaluate_main(args + ["--slices", "2"]) == 0
    out = capsys.readouterr().out
    assert "2× @ 1.64795 GB/s (slices, DCN)" in out
    with pytest.raises(SystemExit) as exit_info:
        evaluate_main(["--workload", "gpt2-xl", "--cluster", "dgx-a100", "--devices", "16", "--batch", "32", "--slices", "2"])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1 and "only tpuv4-pod has one" in err


@st.composite
def sliced_template(draw) -> Settings:
    """Two or four slices of 1–4 devices (nodes of 1 or 2) on a slower or faster DCN; ZeRO free, or ZeRO-3 hybrid
    sharded one group per slice with its all-reduce in the backward or after it (the two stack structures)."""
    slices, per_node = draw(st.sampled_from([2, 4])), draw(st.sampled_from([1, 2]))
    per_slice = per_node * draw(st.integers(1, 2))
    hybrid = draw(st.booleans()) and per_slice > 1
    cluster = Cluster(n_devices=slices * per_slice, global_batch=draw(st.integers(1, 16)),
                      link_bandwidth_Bps=draw(st.sampled_from([10.0, 100.0])), link_latency_s=draw(st.sampled_from([0.0, 0.01])),
                      optimizer="adam", devices_per_node=per_node, node_bandwidth_Bps=1000.0 if per_node > 1 else math.inf,
                      slices=slices, dcn_bandwidth_Bps=draw(st.sampled_from([3.0, 300.0])),
                      dcn_latency_s=draw(st.sampled_from([0.0, 0.02])), hybrid_allreduce_overlapped=draw(st.booleans()))
    plan = PlanSpec(recompute=draw(st.sampled_from(["none", "auto"])), interleave=draw(st.sampled_from([1, None])),
                    zero=3 if hybrid else None, shard_group=per_slice if hybrid else None)
    return Settings(cluster, 1, draw(st.integers(1, 3)), float(draw(st.integers(20, 400))), plan)


@settings(max_examples=80, deadline=None)
@given(st.lists(layer(), min_size=1, max_size=6), st.lists(slowdown, max_size=6), sliced_template())
def test_dp_on_sliced_clusters_never_gets_faster_when_layers_get_slower(layers, slowdowns, settings_):
    """What keeps ``throughput_upper_bound`` a bound on sliced clusters (``test_bound_property``'s property)."""
    assert_not_faster(best_plan(layers, settings_), best_plan(slower(layers, slowdowns), settings_))


def test_the_jax_xla_structure_reaches_the_cluster_and_its_serialised_form():
    from phaze_env.stacks import get_stack

    sliced = get_cluster("tpuv4-pod", 128, slices=2, global_batch=2048, optimizer="adam")
    assert sliced.stack.hybrid_allreduce_overlapped and "hybrid_allreduce_overlapped" not in sliced.to_dict()
    jax = get_stack("jax-xla").apply(sliced, "tpuv4")
    assert not jax.stack.hybrid_allreduce_overlapped
    assert jax.stack.framework_efficiency == get_stack("jax-xla").framework_efficiency
    assert jax.to_dict()["hybrid_allreduce_overlapped"] is False and Cluster.from_dict(jax.to_dict()) == jax
    assert "hybrid-shard all-reduce after the backward pass" in jax.describe()
    assert get_stack("pytorch-fsdp").structure(jax).stack.hybrid_allreduce_overlapped  # FSDP's HYBRID_SHARD overlaps it
