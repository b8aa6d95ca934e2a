"""The system design space: knobs, area window, chip count at a budget, topology builders, bounds and the exact
search against brute force on a small system space."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from phaze_env import cluster as cluster_module
from phaze_env.cluster import (DCN_LATENCY_S, NVLINK3_BPS, REFERENCE_CLUSTER_PRESETS, TPUV4_DCN_PER_CHIP_BPS, Cluster,
                               Stack, get_cluster, point_cluster, reference_cluster, system_cluster, torus_dims)
from phaze_env.design import SYSTEM_FIELDS, Design, DesignSpace, SystemArchSpace, SystemDesignSpace, evaluate_design
from phaze_env.evaluate import throughput_upper_bound
from phaze_env.hardware.cost import TPUV4_ICI_LINK_BPS, chip_area_mm2, preset_system
from phaze_env.hardware.space import ARCH_KNOBS, SYSTEM_KNOBS
from phaze_env.hardware import system as system_module
from phaze_env.hardware.system import (TORUS_POD_CHIPS, torus_pods, HBM_GENERATIONS, PUE, SCALE_UP_DOMAIN,
                                       SYSTEM_GEMM_EFFICIENCY, SystemBudget, baseline_point, devices_supported,
                                       REFERENCE_TOPOLOGIES, reference_point,
                                       topology_family, topology_unit, wall_power_per_chip_w)
from phaze_env.placement.bounds import placement_time_bound_s
from phaze_env.stacks import STACKS
from phaze_env.workloads import model_graph
from search.bounds import (_variant_throughput_bounds, bounding_cluster, bounding_groups, least_state_of,
                           row_variant_bounds, throughput_bounds)
from search.config import SearchConfig
from search.result import SearchResult
from search.run import run_search
from tests.tiny import TINY

BUDGET_W = 1e5  # ≈ 130 chips of ≈ 770 W: 128 in a torus of two cubes, 128 switched
TRAINING = Cluster(global_batch=64)
WIDTHS = (1, 2)


def small_space(**overrides) -> SystemDesignSpace:
    """Two link bandwidths × number formats × HBM generations × topologies × tensor-core counts: 32 rows."""
    values = dict(die_area_mm2=(600.0,), hbm_stacks=(4,), links=(6,), link_GBps=(50.0, 100.0),
                  number_format=("bf16", "fp8"), hbm_generation=("hbm2e", "hbm3e"), topology=("torus", "switched"),
                  num_tc=(4, 8), tc_width=(128,), tc_depth=(128,), num_vc=(2,), buffer_mb=(128,), microbatch=(1, 2),
                  recompute=(False,))
    return DesignSpace.named("system", budget_w=BUDGET_W, **(values | overrides))


# ---------------------------------------------------------------- the space API over the system knobs
def test_system_space_knobs_encode_decode_and_count():
    space = small_space()
    assert space.knobs == SYSTEM_KNOBS and space.area_knobs == SYSTEM_KNOBS[:len(space.area_knobs)]
    assert space.area_knobs[-1] == "buffer_mb"  # the window is known after the last architecture knob
    designs = list(space)
    assert len(designs) == len(space) == space.designs > 0
    assert len(set(designs)) == len(designs)
    for design in designs:
        assert design in space and design.is_system
        assert space.decode(space.encode(design)) == design
        assert Design.from_dict(design.to_dict()) == design
        assert design.hbm_gb == design.hbm_stacks * HBM_GENERATIONS[design.hbm_generation].stack_gb
    in_window = {tuple(space.encode(d)) for d in designs}
    every = [space.decode(list(i)) for i in itertools.product(*(range(n) for n in space.nvec))]
    assert len(every) == space.combinations
    assert {tuple(space.encode(d)) for d in every if space.area_ok(d)} == in_window
    rng = np.random.default_rng(0)
    assert all(space.sample(rng) in space for _ in range(20))


def test_phaze_designs_keep_their_dict_and_knobs():
    space = DesignSpace.reduced()
    design = next(iter(space))
    assert not design.is_system and not set(SYSTEM_FIELDS) & set(design.to_dict())
    assert space.knobs == tuple(f for f in design.to_dict())
    with pytest.raises(ValueError, match="not a system-space design"):
        design.system_choice()


def test_area_window_is_the_compute_block_against_die_minus_periphery():
    space = small_space(die_area_mm2=(400.0, 858.0), links=(6, 12), num_tc=(4, 8, 16, 32), tc_width=(128, 256),
                        buffer_mb=(32, 128))
    seen_out = False
    for indices in itertools.product(*(range(n) for n in space.nvec)):
        design = space.decode(list(indices))
        choice = design.system_choice()
        areas = chip_area_mm2(design.accelerator(), choice.chip_system())
        periphery = areas["hbm_interfaces"] + areas["serdes"] + areas["io_misc"]
        assert choice.compute_budget_mm2() == pytest.approx(design.die_area_mm2 - periphery)
        fits = areas["compute"] <= choice.compute_budget_mm2() * (1 + 1e-9)
        assert space.area_ok(design) == (fits and areas["compute"] >= 0.3 * choice.compute_budget_mm2() * (1 - 1e-9))
        seen_out |= not fits
        if space.area_ok(design):
            assert sum(areas.values()) <= design.die_area_mm2 * (1 + 1e-9)
    assert seen_out  # the window binds somewhere in this space
    masks = space.area_tables().knob_masks(space)
    assert [len(m) for m in masks] == space.nvec


def test_spaces_round_trip_through_their_json():
    import json

    for space in (DesignSpace(), DesignSpace.reduced(hbm_gb=(32.0,)), small_space(),
                  DesignSpace.named("system", budget_usd=2e8, links=(6,))):
        back = DesignSpace.from_dict(json.loads(json.dumps(space.to_dict())))
        assert back == space and type(back) is type(space)


def test_invalid_system_spaces_fail_with_a_clear_message():
    with pytest.raises(ValueError, match="multiples of 6"):
        DesignSpace.named("system", links=(4,))
    with pytest.raises(ValueError, match="reticle"):
        DesignSpace.named("system", die_area_mm2=(900.0,))
    with pytest.raises(ValueError, match="exactly one"):
        SystemBudget(power_w=None, cost_usd=None)
    with pytest.raises(ValueError, match="not both"):
        DesignSpace.named("system", budget_w=1e6, budget_usd=1e6)


# ---------------------------------------------------------------- chip count, topology, baseline
def test_chip_count_is_the_budget_over_the_per_chip_share_rounded_to_the_topology():
    space = small_space()
    for design in space:
        point = space.point(design)
        family = topology_family(design.topology)
        assert point.family == family

        def share(n):
            return (point.estimate.total_power_w + family.overhead_w_per_chip(point.estimate, n)) * PUE

        affordable = max(n for n in range(1, 1000) if n * share(n) <= BUDGET_W)  # brute force
        unit = topology_unit(design.topology)
        assert point.n_devices == affordable // unit * unit
        assert point.n_devices * wall_power_per_chip_w(point.estimate, family, point.n_devices) <= BUDGET_W
        assert point.cluster_power_w <= BUDGET_W
        assert (point.n_devices + unit) * share(point.n_devices + unit) > BUDGET_W
    money = DesignSpace.named("system", budget_usd=1e6, **{k: getattr(space, k) for k in SYSTEM_KNOBS})
    design = next(iter(money))
    point = money.point(design)
    family = point.family

    def cost(n):
        return point.estimate.total_cost_usd + family.overhead_usd_per_chip(point.estimate, n)

    assert point.n_devices == devices_supported(design.topology, max(n for n in range(1, 1000) if n * cost(n) <= 1e6))


def test_topology_builders():
    assert torus_dims(64) == (4, 4, 4) and torus_dims(4096) == (16, 16, 16) and torus_dims(192) == (4, 4, 12)
    with pytest.raises(ValueError, match="multiple of 64"):
        torus_dims(100)
    assert devices_supported("torus", 200) == 192 and devices_supported("switched", 15) == 8
    torus = system_cluster("torus", 128, 6, 50e9)
    assert torus.network.torus_dims == (4, 4, 8)
    assert torus.network.link_bandwidth_Bps == 25e9  # 1 link of 50 GB/s (both ways) each
    nvlink3 = system_cluster("switched", 64, 12, 50e9)  # A100: 12 NVLink3 links × 50 GB/s
    assert nvlink3.network.levels[0].size == SCALE_UP_DOMAIN
    assert nvlink3.network.node_bandwidth_Bps == NVLINK3_BPS
    with pytest.raises(ValueError, match="whole nodes"):
        system_cluster("switched", 12, 12, 50e9)


@pytest.mark.parametrize("budget_w", [BUDGET_W, 1e6, 1.4e6])
def test_tpuv4_baseline_cluster_has_the_tpuv4_pod_presets_ici_bandwidth(budget_w):
    # One convention: the system space's TPUv4 (ChipSystem, both directions together) must get the per-direction
    # ICI bandwidth the tpuv4-pod preset gives the same chips (50 GB/s per link and direction, 6 links).
    point = baseline_point(SystemBudget(power_w=budget_w))
    baseline, pod = point_cluster(point), get_cluster("tpuv4-pod", point.n_devices)
    assert 64 <= point.n_devices <= 4096 and baseline.network.torus_dims == pod.network.torus_dims
    assert baseline.network.link_bandwidth_Bps == pod.network.link_bandwidth_Bps == TPUV4_ICI_LINK_BPS == 50e9
    assert point.chip_system.per_direction_Bps == 6 * TPUV4_ICI_LINK_BPS  # 2 links per torus dimension
    # The torus levels differ only by the assumed ring efficiency the system space gives every family.
    assert [level.bandwidth_Bps / baseline.network.link_efficiency for level in baseline.network.levels] == \
        [level.bandwidth_Bps / pod.network.link_efficiency for level in pod.network.levels]


# ---------------------------------------------------------------- a torus is at most one pod
def test_a_torus_pod_is_a_tpu_v4_pod_and_the_4_5mw_tpuv4_baseline_is_three_pods():
    assert TORUS_POD_CHIPS == 4096 == math.prod(cluster_module.TPUV4_POD_DIMS)
    assert torus_pods(4096) == 1 and torus_pods(4224) == 2 and torus_pods(12096) == 3
    for wrong in (4097, 4096 + 64 + 64 * 2):  # not whole cubes; 67 cubes do not split into 2 equal pods
        with pytest.raises(ValueError, match="do not split"):
            torus_pods(wrong)
    # 4.5 MW buys 11,442 TPUv4 chips (393 W each at the wall with TPU v4's hosts and the data-centre network): 178
    # cubes as 3 pods of 59 cubes (4×4×4 each) over the data-centre network,
    # the tpuv4-pod preset's multislice cluster of the same chips (the levels differ only by the ring efficiency
    # the system space gives every torus; the DCN's bandwidth is PaLM's achieved one in both).
    point = baseline_point(SystemBudget(power_w=4.5e6))
    assert point.budget.affordable(point.estimate, point.family) == 11442
    assert point.n_devices == 11328 and point.pods == 3 and point.summary()["pods"] == 3
    built, preset = point_cluster(point), get_cluster("tpuv4-pod", 11328, slices=3)
    assert built.network.slices == 3 and built.network.torus_dims == preset.network.torus_dims == torus_dims(3776)
    for network in (built.network, preset.network):
        assert (network.dcn_bandwidth_Bps, network.dcn_latency_s) == (TPUV4_DCN_PER_CHIP_BPS, DCN_LATENCY_S)
    assert [(level.size, level.bandwidth_Bps / built.network.link_efficiency) for level in built.network.levels[:-1]] == \
        [(level.size, level.bandwidth_Bps) for level in preset.network.levels[:-1]]
    assert built.network.levels[-1] == preset.network.levels[-1]
    assert system_cluster("switched", 12096, 18, 50e9).network.slices == 1  # the switched family has no pod cap
    assert devices_supported("switched", 12101) == 12096


def test_the_search_console_names_the_pods_of_a_multi_pod_torus():
    from types import SimpleNamespace

    from search.cli import system_cells

    summary = baseline_point(SystemBudget(power_w=4.5e6)).summary() | {"die_area_mm2": None, "link_GBps": 100.0,
                                                                     "hbm_stacks": 4, "hbm_generation": "hbm2"}
    assert system_cells(SimpleNamespace(system=summary))["chips"] == "11,328 (3 pods)"
    assert system_cells(SimpleNamespace(system=summary | {"pods": 1}))["chips"] == "11,328"


def largest_pod_split(affordable: int) -> int:
    """The definition :func:`devices_supported` implements for a torus, by enumeration: the most chips ≤
    ``affordable`` that :func:`torus_pods` accepts (equal pods of whole cubes, as few as the pod size allows)."""
    for n in range(affordable // 64 * 64, 0, -64):
        try:
            torus_pods(n)
        except ValueError:
            continue
        return n
    return 0


@settings(max_examples=200, deadline=None)
@given(cubes_per_pod=st.integers(1, 6), affordable=st.integers(0, 64 * 80))
@example(cubes_per_pod=64, affordable=641 * 64)  # 11 pods of 58 cubes (638) < 10 full pods (640)
@example(cubes_per_pod=64, affordable=12101)
def test_torus_chip_count_is_the_largest_equal_pod_split_and_grows_with_the_budget(cubes_per_pod, affordable):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(system_module, "TORUS_POD_CHIPS", 64 * cubes_per_pod)
        n = devices_supported("torus", affordable)
        assert n == largest_pod_split(affordable)
        assert n <= affordable and devices_supported("torus", affordable + 64) >= n
        if n:
            pods = torus_pods(n)
            assert pods == -(-n // (64 * cubes_per_pod)) and n // pods <= 64 * cubes_per_pod
            units = affordable // 64  # fewer cubes lost to the equal split than the pods the affordable cubes need
            assert units - n // 64 < -(-units // cubes_per_pod)


@settings(max_examples=60, deadline=None)
@given(links=st.sampled_from((6, 12)), link_GBps=st.sampled_from((5.0, 50.0, 100.0)), cubes=st.integers(1, 24),
       cubes_per_pod=st.sampled_from((1, 2, 3, 64)), dcn_scale=st.sampled_from((1.0, 100.0)),
       group=st.integers(2, 64), stride=st.sampled_from((1, 2, 4, 8)),
       kind=st.sampled_from(("allreduce", "allgather", "alltoall")), t=st.sampled_from((1, 2, 4)))
@example(links=6, link_GBps=5.0, cubes=4, cubes_per_pod=1, dcn_scale=100.0, group=4, stride=64, kind="allreduce", t=2)
def test_bounding_cluster_is_no_slower_than_any_multi_pod_torus(links, link_GBps, cubes, cubes_per_pod, dcn_scale,
                                                               group, stride, kind, t):
    """With the data-centre network as the outermost level (slower than the torus rings, or — scaled up — faster),
    the bounding cluster of the family's largest count is no slower for any collective, nor for a pipeline send
    (whole, or scattered 1/t over the DCN and all-gathered over the t ranks)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(system_module, "TORUS_POD_CHIPS", 64 * cubes_per_pod)
        patch.setattr(cluster_module, "TPUV4_DCN_PER_CHIP_BPS", TPUV4_DCN_PER_CHIP_BPS * dcn_scale)
        n = devices_supported("torus", 64 * cubes)
        torus = system_cluster("torus", n, links, link_GBps * 1e9)
        largest = bounding_cluster(system_cluster("torus", devices_supported("torus", 64 * 24), links, link_GBps * 1e9))
        assert torus.network.slices == torus_pods(n) == -(-n // (64 * cubes_per_pod))
    if group * stride <= torus.n_devices:
        assert largest.network.collective_s(kind, 1e9, group, stride) <= \
            torus.network.collective_s(kind, 1e9, group, stride) * (1 + 1e-12)
        assert largest.network.p2p_s(1e6, stride) <= torus.network.p2p_s(1e6, stride)
        level = torus.network.p2p_level(stride, 1)
        scattered = 1e6 / t / level.p2p_bandwidth_Bps + torus.network.collective_s("allgather", 1e6, t)
        assert largest.network.p2p_s(1e6, stride) <= scattered * (1 + 1e-12)


@pytest.mark.parametrize("name", sorted(REFERENCE_CLUSTER_PRESETS))
def test_gpu_reference_chips_have_their_cluster_presets_nvlink_bandwidth(name):
    # The a100/h100 ChipSystems (both directions together) and their DGX presets (per direction) agree, and a
    # switched system-space cluster built from the chip's links gets the preset's NVLink bandwidth.
    point = reference_point(name, SystemBudget(power_w=1e6))
    preset = reference_cluster(name, point)
    assert preset.name == REFERENCE_CLUSTER_PRESETS[name]
    assert point.chip_system == preset_system(name)
    assert point.chip_system.per_direction_Bps == preset.network.node_bandwidth_Bps == {"a100": 300e9, "h100": 450e9}[name]
    built = system_cluster("switched", point.n_devices, point.chip_system.links, point.chip_system.link_bandwidth_Bps)
    assert built.network.node_bandwidth_Bps == preset.network.node_bandwidth_Bps
    assert built.network.levels[0].size == preset.network.levels[0].size


def test_baseline_is_the_tpuv4_chip_at_the_same_budget_and_gemm_efficiency():
    point = baseline_point(SystemBudget(power_w=BUDGET_W))
    assert point.accelerator.gemm_efficiency == SYSTEM_GEMM_EFFICIENCY
    assert all(d.accelerator().gemm_efficiency == SYSTEM_GEMM_EFFICIENCY for d in small_space())
    assert point.topology == "torus" and point.n_devices % 64 == 0 and point.n_devices >= 64


@settings(max_examples=60, deadline=None)
@given(links=st.sampled_from((6, 12)), link_GBps=st.sampled_from((50.0, 100.0)), cubes=st.integers(1, 24),
       group=st.integers(2, 64), stride=st.sampled_from((1, 2, 4, 8)), kind=st.sampled_from(("allreduce", "allgather")))
def test_bounding_cluster_is_no_slower_than_any_torus_of_the_family(links, link_GBps, cubes, group, stride, kind):
    torus = system_cluster("torus", 64 * cubes, links, link_GBps * 1e9)
    largest = bounding_cluster(system_cluster("torus", 64 * 24, links, link_GBps * 1e9))
    if group * stride <= torus.n_devices:
        assert largest.network.collective_s(kind, 1e9, group, stride) <= \
            torus.network.collective_s(kind, 1e9, group, stride) * (1 + 1e-12)
        assert largest.network.p2p_s(1e6, stride) <= torus.network.p2p_s(1e6, stride)


EVERY_KNOB_STACK = Stack(framework_efficiency=0.8, interleaved_schedule=False, pipeline_scatter_gather=False,
                         attention_efficiency=0.5, hybrid_allreduce_overlapped=False, hybrid_allreduce_exposure=0.3,
                         unfused_elementwise=True, plan_rules=STACKS["pytorch-fsdp"].plan_rules, tp_comm_overlap=True,
                         moe_dispatch="hierarchical", moe_node_limit=4, moe_alltoall_overlap=True, moe_comm_sm_share=0.1,
                         dp_comm_overlap=True, attention_dropout_kernel=True, sequence_parallel_kernels=True,
                         host_op_s=50e-6, gemm_wave_sms=108, folded_experts=True, recompute_moe=True,
                         moe_probs_in_activation=True, main_grad_accumulation_bytes=4.0)
"""A stack with every field away from its default, so a cluster built from it that drops or resets any field shows
(but the DualPipe fields, which exclude its interleaving and data-parallel overlap: :data:`DUALPIPE_KNOB_STACK`)."""

DUALPIPE_KNOB_STACK = Stack(interleaved_schedule=False, plan_rules=STACKS["megatron-core"].plan_rules,
                            pipeline_schedule="dualpipe", recompute_norms_up_projections=True)
"""The fields :data:`EVERY_KNOB_STACK` cannot move with its own (DualPipe runs no interleaving and no overlapped
data-parallel collectives), away from their defaults."""


def test_the_every_knob_stacks_set_every_stack_field():
    default = Stack()
    assert all(any(getattr(stack, field.name) != getattr(default, field.name)
                   for stack in (EVERY_KNOB_STACK, DUALPIPE_KNOB_STACK))
               for field in dataclasses.fields(Stack)), "a new Stack field: set it in EVERY_KNOB_STACK"


def test_bounding_cluster_keeps_the_stack_and_training_fields():
    """Only the network is replaced: a fused-attention stack's torus bound must not be priced with eager
    attention (slower layers would make the bound too tight)."""
    torus = system_cluster("torus", 64 * 4, 6, 100e9, global_batch=512, optimizer="adam", stack=EVERY_KNOB_STACK)
    bound = bounding_cluster(torus)
    assert bound.setup == torus.setup and bound.stack == torus.stack == EVERY_KNOB_STACK
    assert bound.n_devices == torus.n_devices and bound.network.link_efficiency == torus.network.link_efficiency
    assert not bound.network.torus_dims and bound.network.link_latency_s == 0
    assert bound.network.link_bandwidth_Bps == 2 * torus.network.link_bandwidth_Bps


@pytest.mark.parametrize("stack", [EVERY_KNOB_STACK, DUALPIPE_KNOB_STACK]
                         + [profile.apply(Cluster()).stack for profile in STACKS.values()],
                         ids=["every-knob", "dualpipe-knobs"] + list(STACKS))
def test_system_and_reference_clusters_carry_the_whole_stack_of_the_base(stack):
    """A system point's cluster and each reference's run the base's setup and its whole stack: every field of a stack
    profile (its MoE dispatch and overlaps too) survives, none is reset to a default or to the preset's."""
    base = Cluster(global_batch=512, optimizer="adam", stack=stack)
    budget = SystemBudget(power_w=1e6)
    clusters = {"point": point_cluster(baseline_point(budget), base)}
    clusters |= {name: reference_cluster(name, reference_point(name, budget), base) for name in REFERENCE_TOPOLOGIES}
    for name, cluster in clusters.items():
        assert cluster.setup == base.setup, name
        for field in dataclasses.fields(Stack):
            assert getattr(cluster.stack, field.name) == getattr(stack, field.name), (name, field.name)


@settings(max_examples=80, deadline=None)
@given(family=st.sampled_from(("torus", "switched")), units=st.lists(st.integers(1, 12), min_size=1, max_size=5),
       layers=st.lists(st.tuples(st.floats(1e-4, 1.0), st.integers(1, 6)), min_size=1, max_size=6),
       spread=st.floats(0.5, 2.0), t=st.sampled_from((1, 2, 4, 8)), m=st.sampled_from((1, 2, 4)),
       batch=st.one_of(st.integers(1, 2048), st.sampled_from((64, 128, 512, 1024))),  # some fill a cap exactly
       gradient_bytes=st.one_of(st.just(0.0), st.floats(0.0, 1e11)), boundary_bytes=st.floats(0.0, 1e8))
@example(family="switched", units=[8, 16], layers=[(0.1, 2)], spread=1.0, t=1, m=1, batch=64, gradient_bytes=0.0,
         boundary_bytes=0.0)  # 64 chips: d = 64 (one microbatch each) uses the whole cap
def test_capped_placement_bound_is_each_architectures_own_chip_count_bound(family, units, layers, spread, t, m, batch,
                                                                          gradient_bytes, boundary_bytes):
    """Capping each architecture's placements at its own chip count (one call over a group on the largest
    count's bounding cluster) gives exactly the bound on that chip count's own bounding cluster: not looser (the
    per-row tightening), and not tighter (a cap below the row's chips would fail this)."""
    unit = 64 if family == "torus" else 8
    caps = np.array([unit * k for k in units])
    layer_s = np.array([[s * spread ** j for j in range(len(caps))] for s, _ in layers])  # layers × architectures
    repeats = np.array([r for _, r in layers])

    def bounding(n):
        return bounding_cluster(system_cluster(family, n, 12, 100e9, global_batch=batch))

    grouped = placement_time_bound_s(layer_s, repeats, gradient_bytes, boundary_bytes, t, m, bounding(int(caps.max())),
                                     device_caps=caps)
    for j, cap in enumerate(caps):
        own = placement_time_bound_s(layer_s[:, [j]], repeats, gradient_bytes, boundary_bytes, t, m, bounding(int(cap)))
        assert grouped[j] == pytest.approx(own[0], rel=1e-12) or grouped[j] == own[0] == math.inf


# ---------------------------------------------------------------- evaluation, bounds and the exact search
def test_evaluate_design_runs_a_system_design_on_its_own_cluster():
    space = small_space()
    design = next(iter(space))
    evaluation = space.evaluate(design, TINY, TRAINING, tensor_widths=WIDTHS)
    assert evaluation.feasible
    assert evaluation.cluster["n_devices"] == space.point(design).n_devices
    assert evaluation.accelerator["hbm_gb"] == design.hbm_gb
    unbuilt = evaluate_design(design, TINY, TRAINING, budget=SystemBudget(power_w=400.0), tensor_widths=WIDTHS)
    assert not unbuilt.feasible and "0.0004 MW budget buys 1 of these chips" in unbuilt.reason


TINY_BUDGET_W = 3e3
"""≈ 2 switched chips of ≈ 1.3 kW at the wall (DGX H100's host), ≈ 9 torus chips of ≈ 320 W (TPU v4's): not one
8-chip node or 64-chip torus cube."""


def test_a_budget_that_buys_no_topology_unit_is_infeasible_on_every_face():
    import gymnasium
    import phaze_env.env  # noqa: F401 - registers the env ids
    from phaze_env.objective import make_objective

    space = DesignSpace.named("system", budget_w=TINY_BUDGET_W, **{k: small_space().values(k) for k in SYSTEM_KNOBS})
    for topology, unit in (("torus", 64), ("switched", 8)):
        design = next(d for d in space if d.topology == topology)
        point = space.point(design)
        assert point.n_devices == 0 and 1 <= space.budget.affordable(point.estimate, point.family) < unit
        evaluation = space.evaluate(design, TINY, TRAINING, tensor_widths=WIDTHS)
        assert not evaluation.feasible and evaluation.throughput_samples_s == 0 and evaluation.plan is None
        assert evaluation.reason == point.unbuildable_reason
        assert f"not one whole {topology} unit of {unit}" in evaluation.reason and "0.003 MW budget" in evaluation.reason
        with pytest.raises(ValueError, match="not one whole"):  # a cluster of no chips is still never built
            point_cluster(point)
    for name in ("tpuv4", "a100", "h100"):
        evaluation = space.evaluate_reference(name, TINY, TRAINING, tensor_widths=WIDTHS)
        assert not evaluation.feasible and evaluation.reason.startswith(f"{name}: a 0.003 MW budget buys")
    # The env scores the design as infeasible (its baseline, the TPUv4 torus, is infeasible too: warned), the
    # Optuna objective records it as infeasible with the reason.
    env = gymnasium.make("phaze_env/ArchSearch-v0", workload=TINY, cluster=TRAINING, space=space).unwrapped
    env.reset(seed=0)
    with pytest.warns(UserWarning, match="baseline infeasible"):
        _, reward, terminated, _, info = env.step(space.encode(design))
    assert terminated and reward < 0 and not info["feasible"] and "not one whole switched unit" in info["reason"]
    record = make_objective(TINY, TRAINING, space=space).record(design)
    assert not record.attrs["feasible"] and record.attrs["reason"] == point.unbuildable_reason


def test_the_memory_floor_is_at_most_the_state_every_plan_holds(tmp_path, monkeypatch):
    """The fewest stages a system-space group's bound allows rest on :func:`least_state_of`: the whole model's weights,
    gradients and optimizer state on one tensor group's devices at the most replicas, FP8 weight copies counted as the
    DP counts them. On an FP8 and a bf16 row of the small space at two tensor widths (the stack's ZeRO-1), the state
    the evaluated plan's stages hold (summed over them) is at least the floor and within 2 % of it (the optimizer's
    shards at the plan's replicas, not the most), and the FP8 row's copies raise it."""
    monkeypatch.setenv("PHAZE_CACHE_DIR", str(tmp_path))
    space = small_space(topology=("switched",), link_GBps=(100.0,), hbm_generation=("hbm3e",), num_tc=(8,),
                        microbatch=(1,))
    rows = space.arch_space()
    floors = {}
    for design, point in zip(rows.designs, rows.points):
        cluster = rows.cluster(rows.designs.index(design), TRAINING)
        for t in WIDTHS:
            plan = dataclasses.replace(space.stack_plan(design.recompute, TINY), t=t, microbatch=1)
            evaluation = space.evaluate(design, TINY, TRAINING, tensor_widths=(t,), plan=plan)
            assert evaluation.feasible, evaluation.reason
            held = sum(stage["weights"] + stage["gradients"] + stage["optimizer"]
                       for stage in evaluation.plan.stage_memory)
            floor = least_state_of(model_graph(TINY, microbatch=1, tensor_width=t), cluster, plan, 1,
                                   design.number_format)
            assert floor <= held * (1 + 1e-9), (design.number_format, t, floor, held)
            assert floor >= 0.98 * held, (design.number_format, t, floor, held)  # only ZeRO-1's shards differ
            floors[(design.number_format, t)] = floor
    assert all(floors[("fp8", t)] > 1.2 * floors[("bf16", t)] for t in WIDTHS)


@pytest.fixture(scope="module")
def brute_force(tmp_path_factory):
    """Every design of :func:`small_space` evaluated on its own (in a private cache): the best throughput and its
    tokens/s per row (design head: the design without microbatch and recompute); the bounds checked on each."""
    space = small_space()
    rows = space.arch_space()
    best: dict[Design, tuple[float, float]] = {}
    interleaved: list[bool] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PHAZE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        plan = space.stack_plan(workload=TINY)  # the space's stack: interleaving, SP, ZeRO-1, fused attention
        assert plan.interleave is None and "none" not in plan.recompute_modes
        bounds = throughput_bounds(TINY, rows, TRAINING, microbatch=space.microbatch, tensor_widths=WIDTHS, plan=plan)
        # each row's bound is the one on its own chip count (the rows grouped together have different counts)
        counts: dict[Design, set[int]] = {}  # rows that differ only in their tensor-core count share a group
        for design, point in zip(rows.designs, rows.points):
            counts.setdefault(dataclasses.replace(design, num_tc=0), set()).add(point.n_devices)
        assert any(len(n) > 1 for n in counts.values())
        for i, (design, point) in enumerate(zip(rows.designs, rows.points)):
            alone = SystemArchSpace(space, (design,), (point,), {"area_mm2": rows.arrays["area_mm2"][[i]]})
            assert bounds[i] == pytest.approx(throughput_bounds(TINY, alone, TRAINING, microbatch=space.microbatch,
                                                                tensor_widths=WIDTHS, plan=plan)[0], rel=1e-12)
        for design in space:
            evaluation = space.evaluate(design, TINY, TRAINING, tensor_widths=WIDTHS)
            head = Design.from_dict(design.to_dict() | {"microbatch": space.microbatch[0], "recompute": space.recompute[0]})
            row = rows.designs.index(head)
            assert evaluation.throughput_samples_s <= bounds[row]
            per_design_bound = throughput_upper_bound(TINY, rows[row], rows.cluster(row, TRAINING), tensor_widths=WIDTHS,
                                                      microbatch=(design.microbatch,), hbm_gb=(design.hbm_gb,),
                                                      plan=space.stack_plan(design.recompute, TINY))
            assert evaluation.throughput_samples_s <= per_design_bound * (1 + 1e-9)
            interleaved.append(evaluation.feasible and evaluation.plan.interleave > 1)
            if head not in best or evaluation.throughput_samples_s > best[head][0]:
                best[head] = (evaluation.throughput_samples_s, evaluation.tokens_s)
            if evaluation.feasible and not interleaved[-1]:  # the stack's best plan is plain 1F1B (its data-parallel
                # overlap hides what interleaving would): an interleaved plan of the same space is bounded too
                pinned = dataclasses.replace(space.stack_plan(design.recompute, TINY), p=2, interleave=2)
                forced = space.evaluate(design, TINY, TRAINING, tensor_widths=WIDTHS, plan=pinned)
                if forced.feasible:
                    assert forced.plan.interleave == 2
                    assert forced.throughput_samples_s <= min(bounds[row], per_design_bound * (1 + 1e-9))
                    assert forced.throughput_samples_s <= evaluation.throughput_samples_s * (1 + 1e-9)
                    interleaved.append(True)
        assert any(interleaved)  # the bounds were checked on interleaved plans, not only on plain 1F1B
        yield space, best


@pytest.mark.slow
def test_bounds_hold_for_every_row_and_the_search_equals_brute_force(brute_force):
    space, evaluated = brute_force  # the fixture checks the bounds on every design
    throughput = {head: samples for head, (samples, _) in evaluated.items()}
    best = max(throughput.values())
    result = run_search(SearchConfig(workloads=(TINY,), cluster=TRAINING, space=space, tensor_widths=WIDTHS))
    found = result.best[TINY.name]
    assert result.exact
    assert found.throughput_samples_s == pytest.approx(best, rel=1e-9)
    # the search's design is one of the brute force's best
    assert throughput[found_head(found, throughput)] == pytest.approx(best, rel=1e-9)
    assert result.baseline[TINY.name].system["topology"] == "torus"
    for objective in ("throughput_per_w", "throughput_per_usd", "carbon_per_token"):  # evaluations now cached
        result = run_search(SearchConfig(workloads=(TINY,), cluster=TRAINING, space=space, tensor_widths=WIDTHS,
                                         objective=objective))
        value = {head: t / space.point(head).objective_divisor(objective) for head, t in throughput.items()}
        found = result.best[TINY.name]
        assert result.exact
        assert value[found_head(found, throughput)] == pytest.approx(max(value.values()), rel=1e-9)


@pytest.mark.slow
def test_the_search_under_data_parallel_overlap_equals_brute_force(tmp_path, monkeypatch):
    """With the system stack overlapping its data-parallel collectives (``Stack.dp_comm_overlap``, where a slower pass
    hides more and the DP is not monotone in its layer times) the bounds still hold on every design and the exact
    search finds the brute force's best: the ILP-free bounds price the exposure at its floor
    (``Settings.unbounded_overlap_cover``)."""
    from phaze_env import stacks

    core = stacks.SYSTEM_STACKS["megatron-core"]
    monkeypatch.setitem(stacks.SYSTEM_STACKS, "megatron-core",
                        dataclasses.replace(core, structure=dataclasses.replace(core.structure, dp_comm_overlap=True)))
    monkeypatch.setenv("PHAZE_CACHE_DIR", str(tmp_path / "cache"))
    space = small_space(link_GBps=(50.0,), number_format=("bf16",), topology=("torus",))
    assert space.system_stack.structure.dp_comm_overlap
    rows, plan = space.arch_space(), space.stack_plan(workload=TINY)
    bounds = throughput_bounds(TINY, rows, TRAINING, microbatch=space.microbatch, tensor_widths=WIDTHS, plan=plan)
    best: dict[Design, float] = {}
    for design in space:
        evaluation = space.evaluate(design, TINY, TRAINING, tensor_widths=WIDTHS)
        head = Design.from_dict(design.to_dict() | {"microbatch": space.microbatch[0], "recompute": space.recompute[0]})
        row = rows.designs.index(head)
        assert evaluation.throughput_samples_s <= bounds[row] * (1 + 1e-9)
        assert evaluation.throughput_samples_s <= throughput_upper_bound(
            TINY, rows[row], rows.cluster(row, TRAINING), tensor_widths=WIDTHS, microbatch=(design.microbatch,),
            hbm_gb=(design.hbm_gb,), plan=space.stack_plan(design.recompute, TINY)) * (1 + 1e-9)
        best[head] = max(best.get(head, 0.0), evaluation.throughput_samples_s)
    result = run_search(SearchConfig(workloads=(TINY,), cluster=TRAINING, space=space, tensor_widths=WIDTHS))
    assert result.exact
    assert result.best[TINY.name].throughput_samples_s == pytest.approx(max(best.values()), rel=1e-9)


@pytest.mark.slow
def test_the_nre_knob_keeps_the_per_dollar_search_exact(brute_force):
    """With every design paying its NRE over 10,000 chips (``SystemBudget.nre_chips``) the chip counts at a power budget
    do not move but every cluster's cost does: the exact per-dollar search still finds the brute force's best."""
    space, evaluated = brute_force
    priced = dataclasses.replace(space, budget=dataclasses.replace(space.budget, nre_chips=10_000))
    throughput = {head: samples for head, (samples, _) in evaluated.items()}
    assert all(priced.point(head).n_devices == space.point(head).n_devices for head in throughput)
    assert all(priced.point(head).cluster_cost_usd > space.point(head).cluster_cost_usd for head in throughput)
    result = run_search(SearchConfig(workloads=(TINY,), cluster=TRAINING, space=priced, tensor_widths=WIDTHS,
                                     objective="throughput_per_usd"))
    value = {head: t / priced.point(head).objective_divisor("throughput_per_usd") for head, t in throughput.items()}
    found = result.best[TINY.name]
    assert result.exact
    assert value[found_head(found, throughput)] == pytest.approx(max(value.values()), rel=1e-9)


@contextlib.contextmanager
def one_cube_pods(tmp_path):
    """The small torus space at 50 kW with pods of one cube (64 chips), so that its rows are one pod or two:
    ``(space, its rows)``, the pod size patched (and the cache in ``tmp_path``) while the block runs."""
    space = dataclasses.replace(small_space(topology=("torus",), number_format=("bf16",)),
                                budget=SystemBudget(power_w=5e4))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PHAZE_CACHE_DIR", str(tmp_path))
        patch.setattr(system_module, "TORUS_POD_CHIPS", 64)
        yield space, space.arch_space()


@pytest.mark.slow
def test_multi_pod_torus_bounds_hold_and_the_search_equals_brute_force(tmp_path):
    """A pod of one cube (64 chips): at 50 kW the torus rows buy 128 chips, two pods over the data-centre network
    (whose switches and optics they pay for), or one pod. Every design's evaluation is within its row's bound (the
    bound ≥ the evaluated throughput of the multi-pod designs too), and the exact search finds the brute force's
    best."""
    with one_cube_pods(tmp_path) as (space, rows):
        pods = [point.pods for point in rows.points]
        assert 1 in pods and 2 in pods
        bounds = throughput_bounds(TINY, rows, TRAINING, microbatch=space.microbatch, tensor_widths=WIDTHS,
                                   plan=space.stack_plan(workload=TINY))
        best: dict[Design, float] = {}
        multi_pod = 0
        for design in space:
            evaluation = space.evaluate(design, TINY, TRAINING, tensor_widths=WIDTHS)
            head = Design.from_dict(design.to_dict() | {"microbatch": space.microbatch[0], "recompute": space.recompute[0]})
            row = rows.designs.index(head)
            assert evaluation.cluster.get("slices", 1) == rows.points[row].pods
            if rows.points[row].pods > 1:
                multi_pod += evaluation.feasible
            assert evaluation.throughput_samples_s <= bounds[row]
            per_design_bound = throughput_upper_bound(TINY, rows[row], rows.cluster(row, TRAINING), tensor_widths=WIDTHS,
                                                      microbatch=(design.microbatch,), hbm_gb=(design.hbm_gb,),
                                                      plan=space.stack_plan(design.recompute, TINY))  # on the pods
            assert evaluation.throughput_samples_s <= per_design_bound * (1 + 1e-9)
            best[head] = max(best.get(head, 0.0), evaluation.throughput_samples_s)
        assert multi_pod  # a multi-pod design was evaluated (and bounded), not only built
        result = run_search(SearchConfig(workloads=(TINY,), cluster=TRAINING, space=space, tensor_widths=WIDTHS))
    found = result.best[TINY.name]
    assert result.exact and found.throughput_samples_s == pytest.approx(max(best.values()), rel=1e-9)
    assert best[found_head(found, best)] == pytest.approx(max(best.values()), rel=1e-9)


PARETO_CASES = [("throughput", "carbon_per_token"), ("throughput_per_usd", "area"), ("energy_per_token", "throughput"),
                ("throughput", "carbon_per_token", "area"), ("throughput_per_w", "throughput_per_usd", "area")]


@pytest.mark.slow
def test_pareto_fronts_over_the_system_objectives_equal_brute_force(brute_force):
    """2 and 3 objectives, maximised and minimised ones (carbon and energy per token, area): the search's front is
    the brute force's, point for point, and each front design's figures are its own."""
    space, evaluated = brute_force
    minimised = {"energy_per_token", "carbon_per_token", "area"}
    figure_keys = {"throughput_per_w": "tokens_per_s_per_w", "throughput_per_usd": "tokens_per_s_per_usd",
                   "energy_per_token": "energy_per_token_j", "carbon_per_token": "carbon_per_token_g"}

    def figures(head: Design, objectives) -> tuple[float, ...]:
        samples, tokens = evaluated[head]
        point = space.point(head)
        values = {"throughput": samples, "area": point.estimate.die_area_mm2}
        values |= {name: point.figures(tokens)[key] for name, key in figure_keys.items()}
        return tuple(values[name] for name in objectives)

    def at_least_as_good(a, b, objectives) -> bool:
        return all(x <= y if name in minimised else x >= y for x, y, name in zip(a, b, objectives))

    unvisited = []
    for objectives in PARETO_CASES:
        points = {figures(head, objectives) for head, (samples, _) in evaluated.items() if samples > 0}
        front = sorted(p for p in points if not any(q != p and at_least_as_good(q, p, objectives) for q in points))
        result = run_search(SearchConfig(workloads=(TINY,), cluster=TRAINING, space=space, tensor_widths=WIDTHS,
                                         pareto=True, objectives=objectives))
        assert result.exact and result.objectives == objectives
        designs = result.pareto[TINY.name]
        found = sorted(tuple(result.objective_values(d).values()) for d in designs)
        assert len(found) == len(front), objectives
        for got, want in zip(found, front):
            assert got == pytest.approx(want, rel=1e-9), objectives
        for design in designs:  # each point is the design's own figures
            assert figures(found_head(design, evaluated), objectives) == pytest.approx(
                tuple(result.objective_values(design).values()), rel=1e-12)
        assert SearchResult.from_json(result.to_json()) == result
        unvisited.append(len(evaluated) - result.evaluations - result.pruned_by_placement_bound)
    assert any(unvisited), unvisited  # the first bound pruned some rows unvisited


def found_head(found, heads) -> Design:
    """The row (design without microbatch and recompute) a search result is."""
    return next(head for head in heads if all(found.system[k] == getattr(head, k) for k in SYSTEM_FIELDS) and
                all(found.accelerator[k] == getattr(head, k) for k in ARCH_KNOBS))


@pytest.mark.slow
def test_cli_system_search_and_one_line_errors(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "search.phaze", *args], capture_output=True, text=True)

    wrong = run("--space", "full", "--budget-mw", "5", "--out", str(tmp_path))
    assert wrong.returncode == 2 and wrong.stderr.strip().count("\n") == 0 and "--space system" in wrong.stderr
    wrong = run("--space", "full", "--objective", "carbon_per_token", "--out", str(tmp_path))
    assert wrong.returncode == 2 and wrong.stderr.strip().count("\n") == 0 and "--space system" in wrong.stderr
    wrong = run("--space", "system", "--hbm-gb", "32", "--out", str(tmp_path))
    assert wrong.returncode == 2 and "do not apply to the system space" in wrong.stderr


def test_a_search_never_resumes_rows_of_another_power_or_cost_model(monkeypatch):
    """The power and cost model sets every row's chip count (and the reference systems'): its modules are in the
    code a search's signature hashes (``phaze_env.cache.code_version``), so rows computed by another version of it
    are never resumed (nor a system_table row kept)."""
    from phaze_env import cache
    from phaze_env.hardware import cost, system
    from search.config import SEARCH_MODULE

    config = SearchConfig(workloads=(TINY,), cluster=TRAINING, space=small_space(), tensor_widths=WIDTHS)
    signature = config.signature
    assert config.signature == signature  # stable while nothing changes
    assert {cost.__name__, system.__name__} <= set(cache.code_closure(SEARCH_MODULE))
    real = cache.code_version
    monkeypatch.setattr(cache, "code_version", lambda *modules: real(*modules) + "-edited")
    assert config.signature != signature


def test_row_variant_bounds_share_layer_bounds_across_groups_and_equal_each_groups_own():
    """The system space's per-variant row bounds (what a design's second bound narrows to) are each group's own
    :func:`variant_throughput_bounds`, computed without sharing: sharing the layer bounds between the groups on different
    networks (a collective-free graph's are the same; a ``t = 2`` graph prices Megatron's collectives on each network)
    changes no figure, and their best is :func:`throughput_bounds`."""
    space = small_space()
    rows = space.arch_space()
    plan = space.stack_plan(workload=TINY)
    options = dict(microbatch=space.microbatch, tensor_widths=WIDTHS, seq_len=None, plan=plan)
    per_variant = row_variant_bounds(TINY, rows, TRAINING, **options)
    assert set(per_variant) == {(t, m) for t in WIDTHS for m in space.microbatch}
    groups = bounding_groups(rows, TRAINING)
    assert len({group.cluster.network for group in groups}) > 1
    for group in groups:  # each row's column is its architecture's place in the group's space
        assert [group.space.index(rows[r]) for r in group.rows.tolist()] == group.columns.tolist()
    memo: dict = {}
    for group in groups:
        own = _variant_throughput_bounds(TINY, group.space, group.cluster, device_caps=group.device_caps, **options)
        shared = _variant_throughput_bounds(TINY, group.space, group.cluster, device_caps=group.device_caps,
                                            layer_memo=memo, **options)
        for variant, bound in own.items():
            assert np.array_equal(shared[variant], bound)
            assert np.array_equal(per_variant[variant][group.rows], bound[group.columns])
    assert len(memo) < len(groups) * len(per_variant)  # the groups did share
    best = throughput_bounds(TINY, rows, TRAINING, **options)
    assert np.array_equal(best, np.max(list(per_variant.values()), axis=0))


def test_pod_levels_give_the_bound_the_data_centre_level_its_flat_ring_drops(tmp_path):
    """Pods of one cube (64 chips), 50 kW: torus rows of one pod and of two. Each bounding group holding a several-pod
    row carries the data-centre level with the most devices any member holds in a pod (:func:`search.bounds.
    pod_levels`), and on each several-pod member a pipeline reaching that span crosses that level (the DP's own
    :meth:`~phaze_env.cluster.Network.p2p_level`); groups of one-pod rows carry nothing."""
    with one_cube_pods(tmp_path) as (_, rows):
        several = 0
        for group in bounding_groups(rows, TRAINING):
            points = [rows.points[i] for i in group.rows]
            if all(point.pods == 1 for point in points):
                assert group.far_levels == ()
                continue
            (span, levels), = group.far_levels
            assert span == max(point.n_devices // point.pods for point in points) == 64
            for i, point in zip(group.rows.tolist(), points):
                network = rows.cluster(i, TRAINING).network
                assert point.n_devices <= span or network.p2p_level(1, span) in levels
                several += point.pods > 1
        assert several
