"""Each system family's host and scale-out network: the references' wall power per chip from their own families'
sources, the designs' families, the chip count a budget buys against brute force, and the constants' sources."""

from __future__ import annotations

import ast
import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phaze_env import cluster as cluster_module
from phaze_env.design import SystemDesignSpace, reference_system
from phaze_env.hardware import system as system_module
from phaze_env.hardware.cost import ChipEstimate
from phaze_env.hardware.system import (HDR_FAT_TREE, NDR_FAT_TREE, NVSWITCH_GEN3, PUE, REFERENCE_FAMILIES, SYSTEM_FAMILIES,
                                       TOPOLOGY_FAMILIES, FatTree, SystemBudget, SystemChoice, SystemFamily, devices_supported,
                                       topology_family)
from tests.test_system_space import small_space

WALL_W_PER_CHIP_RANGES = {"tpuv4": (0.0, 450.0), "a100": (0.0, 950.0), "h100": (1150.0, 1550.0)}
"""Issue 29's must-show: each reference's wall power per chip (PUE included) from its own family's sources."""


@pytest.mark.parametrize("budget_w", [1e6, 10e6])
@pytest.mark.parametrize("name", list(WALL_W_PER_CHIP_RANGES))
def test_each_reference_draws_its_own_familys_wall_power_per_chip(name, budget_w):
    """Through the build the table uses (design.reference_system → the summary its rows carry)."""
    point, cluster = reference_system(name, SystemBudget(power_w=budget_w))
    summary = point.summary()
    low, high = WALL_W_PER_CHIP_RANGES[name]
    assert low <= summary["wall_power_per_chip_w"] <= high
    assert summary["family"] == REFERENCE_FAMILIES[name] and cluster.n_devices == point.n_devices
    parts = (summary["chip_power_w"] + summary["host_w_per_chip"] + summary["scale_up_w_per_chip"]
             + summary["nic_w_per_chip"] + summary["network_w_per_chip"])
    assert summary["wall_power_per_chip_w"] == pytest.approx(parts * PUE, rel=1e-12)
    assert summary["cluster_power_w"] <= budget_w
    assert summary["network_w_per_chip"] > 0 or (name == "tpuv4" and point.pods == 1)  # a pod needs no DCN


def test_tpuv4_and_h100_pay_different_hosts_and_designs_pay_their_topologys():
    budget = SystemBudget(power_w=1e6)
    tpuv4, _ = reference_system("tpuv4", budget)
    h100, _ = reference_system("h100", budget)
    a100, _ = reference_system("a100", budget)
    def beyond_chip_w(point):  # the host, scale-up fabric (NVSwitch, OCS) and NICs its measured figure includes
        family = point.family
        return family.host.w_per_chip + family.scale_up_w_per_chip(point.estimate) + family.nic_w_per_chip

    assert beyond_chip_w(tpuv4) == pytest.approx(326.0 - 170.0)  # measured system − chip mean
    assert beyond_chip_w(h100) == pytest.approx((10_200.0 - 8 * 700.0) / 8)  # DGX H100 − 8 GPUs
    assert beyond_chip_w(a100) == pytest.approx((6_500.0 - 8 * 400.0) / 8)  # DGX A100 − 8 GPUs
    assert tpuv4.family.scale_up_w_per_chip(tpuv4.estimate) == pytest.approx(0.03 * 326.0)  # OCS < 3 % of power
    assert len({p.family.host.w_per_chip for p in (tpuv4, h100, a100)}) == 3
    space = small_space()
    for design in space:
        point = space.point(design)
        assert point.family == topology_family(design.topology) == SYSTEM_FAMILIES[TOPOLOGY_FAMILIES[design.topology]]
    assert topology_family("torus").host == tpuv4.family.host and topology_family("switched") == h100.family
    with pytest.raises(ValueError, match="unknown topology"):
        topology_family("ring")


def test_fat_tree_tiers_follow_the_switch_radix():
    assert [NDR_FAT_TREE.tiers(n) for n in (1, 64, 65, 2048, 2049, 65536, 65537)] == [1, 1, 2, 2, 3, 3, 4]
    assert [NDR_FAT_TREE.ports_per_endpoint(n) for n in (64, 2048, 2049)] == [1, 3, 5]
    assert [HDR_FAT_TREE.tiers(n) for n in (40, 41, 800, 801, 16000, 16001)] == [1, 2, 2, 3, 3, 4]
    # the switch's power is shared by its ports; every switch port carries one transceiver
    assert NDR_FAT_TREE.port_w() == pytest.approx(NDR_FAT_TREE.switch_w / 64 + NDR_FAT_TREE.transceiver_w)
    family = SYSTEM_FAMILIES["dgx-h100"]
    assert family.network_w_per_chip(8) == 0  # one node: NVSwitch only
    assert family.network_w_per_chip(2048) == pytest.approx(3 * NDR_FAT_TREE.port_w())
    torus = SYSTEM_FAMILIES["tpuv4-torus"]
    assert torus.network_w_per_chip(4096) == 0  # one pod: no data-centre network
    assert torus.network_w_per_chip(8192) == pytest.approx(3 * NDR_FAT_TREE.port_w() / 4)  # 2,048 hosts: 2 tiers


def test_a_malformed_family_or_network_is_refused_with_its_reason():
    with pytest.raises(ValueError, match="even radix"):
        FatTree("bad", 400e9, 2, 1.0, 1.0, 1.0, 1.0, "test", 1.0, 1.0)
    with pytest.raises(ValueError, match="switch_w"):
        FatTree("bad", 400e9, 64, float("nan"), 1.0, 1.0, 1.0, "test", 1.0, 1.0)
    host = SYSTEM_FAMILIES["dgx-h100"].host
    with pytest.raises(ValueError, match="network ports"):
        SystemFamily("bad", "switched", host, NDR_FAT_TREE, 0.0, NVSWITCH_GEN3)
    with pytest.raises(ValueError, match="unknown topology"):
        SystemFamily("bad", "ring", host, NDR_FAT_TREE, 1.0, NVSWITCH_GEN3)


def test_the_networks_line_rates_are_the_clusters_nic_rates():
    assert NDR_FAT_TREE.port_bps == cluster_module.SCALE_OUT_NIC_BPS * 8 == cluster_module.NDR_IB_PER_GPU_BPS * 8
    assert HDR_FAT_TREE.port_bps == cluster_module.HDR_IB_PER_GPU_BPS * 8
    assert SYSTEM_FAMILIES["dgx-a100"].network == HDR_FAT_TREE and SYSTEM_FAMILIES["dgx-h100"].network == NDR_FAT_TREE


SMALL_RADIX = FatTree("test-8", 400e9, 8, switch_w=80.0, switch_usd=8_000.0, transceiver_w=9.0, transceiver_usd=500.0,
                      source="a radix-8 tree for the brute force: its tiers step at 8, 32, 128, 512 endpoints",
                      nic_w=29.0, nic_usd=2_500.0)


def _estimate(power_w: float, cost_usd: float) -> ChipEstimate:
    return ChipEstimate(area_mm2={"die": 500.0}, power_w={"chip": power_w}, cost_usd={"chip": cost_usd},
                        dies_per_wafer=100, die_yield=0.5, fits_reticle=True)


@settings(max_examples=150, deadline=None)
@given(family=st.sampled_from([*SYSTEM_FAMILIES, "small-switched", "small-torus"]), power_w=st.floats(50.0, 1500.0),
       cost_usd=st.floats(500.0, 20_000.0), budget=st.floats(500.0, 4e5), money=st.booleans(),
       cubes_per_pod=st.integers(1, 4))
def test_affordable_chips_are_the_brute_force_most_and_grow_with_the_budget(family, power_w, cost_usd, budget, money,
                                                                          cubes_per_pod):
    """``SystemBudget.affordable`` against brute force over every chip count (the largest ``n`` with
    ``n × share(n) ≤ budget``, the share stepping up with the network's tiers), on pods of 1–4 cubes so the torus's
    data-centre network steps are reached; the count never falls when the budget grows, and the topology's
    rounding keeps a count the budget pays for."""
    if family.startswith("small"):
        topology = family.removeprefix("small-")
        fam = SystemFamily(family, topology, topology_family(topology).host, SMALL_RADIX,
                           network_ports_per_chip=1.0 if topology == "switched" else 0.25,
                           scale_up=topology_family(topology).scale_up)
    else:
        fam = SYSTEM_FAMILIES[family]
    estimate = _estimate(power_w, cost_usd)
    spend = SystemBudget(power_w=None, cost_usd=budget * 50) if money else SystemBudget(power_w=budget)
    total = spend.cost_usd if money else spend.power_w
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(system_module, "TORUS_POD_CHIPS", 64 * cubes_per_pod)
        n = spend.affordable(estimate, fam)
        limit = int(total / spend.per_chip(estimate, fam, 1)) + 2
        brute = max(k for k in range(limit) if k * spend.per_chip(estimate, fam, max(k, 1)) <= total * (1 + 1e-12))
        assert n == brute
        bigger = SystemBudget(power_w=None, cost_usd=spend.cost_usd * 1.3) if money else SystemBudget(power_w=budget * 1.3)
        assert bigger.affordable(estimate, fam) >= n
        built = devices_supported(fam.topology, n)
        assert built <= n and built * spend.per_chip(estimate, fam, max(built, 1)) <= total * (1 + 1e-12)


SOURCE_WORDS = ("datasheet", "data sheet", "user guide", "documentation", "white paper", "et al.", "manual", "specification",
                "assumption", "Assumption", "DESIGN.md")
FAMILY_CONSTANTS = ("TPUV4_CHIP_MEAN_W", "TPUV4_SYSTEM_W_PER_CHIP", "TPUV4_HOST", "DGX_A100_MAX_W", "DGX_H100_MAX_W",
                    "DGX_HOST_USD_PER_CHIP", "DGX_A100_HOST", "DGX_H100_HOST", "NDR_FAT_TREE", "HDR_FAT_TREE",
                    "SYSTEM_FAMILIES", "TOPOLOGY_FAMILIES", "REFERENCE_FAMILIES", "SCALE_UP_SWITCH_W_PER_BPS",
                    "SCALE_UP_SWITCH_USD_PER_BPS", "TPUV4_OCS_POWER_SHARE", "TPUV4_OCS_COST_SHARE", "TPUV4_OCS_W_PER_CHIP",
                    "TPUV4_HOST_USD_PER_CHIP", "NVSWITCH_GEN2", "NVSWITCH_GEN3", "TPUV4_OCS", "CONNECTX7_W",
                    "CONNECTX7_USD", "NDR_NIC_MODULE_W", "CONNECTX6_W", "CONNECTX6_USD", "DGX_B200_MAX_W", "NVSWITCH_GEN4",
                    "DGX_B200_HOST", "GB200_NVL72_CHIPS", "GB200_NVL72_RACK_W", "GB200_NVL72_HOST", "TPUV5P_POD_CHIPS",
                    "TPUV5P_HOST", "MI300X_PLATFORM_CHIPS", "MI300X_MESH", "MI300X_HOST", "MI300X_RIVAL_SYSTEM",
                    "FLAGSHIP_CHIP_SYSTEMS", "FLAGSHIP_TOPOLOGIES", "FLAGSHIP_FAMILIES", "FLAGSHIP_HBM_GENERATIONS",
                    "FLAGSHIP_NUMBER_FORMATS", "RIVAL_TOPOLOGIES")


def test_every_host_and_network_constant_has_a_docstring_with_its_source():
    tree = ast.parse(inspect.getsource(system_module))
    docs = {}
    for node, following in zip(tree.body, tree.body[1:]):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant) and \
                isinstance(following.value.value, str):
            docs |= {target.id: following.value.value for target in targets if isinstance(target, ast.Name)}
    for name in FAMILY_CONSTANTS:
        assert name in docs, f"{name} has no docstring"
    for name in ("TPUV4_CHIP_MEAN_W", "TPUV4_SYSTEM_W_PER_CHIP", "DGX_A100_MAX_W", "DGX_H100_MAX_W",
                 "DGX_HOST_USD_PER_CHIP", "SCALE_UP_SWITCH_W_PER_BPS", "SCALE_UP_SWITCH_USD_PER_BPS",
                 "TPUV4_OCS_POWER_SHARE", "TPUV4_OCS_COST_SHARE", "TPUV4_HOST_USD_PER_CHIP", "CONNECTX7_W",
                 "CONNECTX7_USD", "NDR_NIC_MODULE_W", "CONNECTX6_W", "CONNECTX6_USD", "DGX_B200_MAX_W",
                 "GB200_NVL72_CHIPS", "GB200_NVL72_RACK_W", "TPUV5P_POD_CHIPS", "MI300X_PLATFORM_CHIPS",
                 "MI300X_RIVAL_SYSTEM"):
        assert any(word in docs[name] for word in SOURCE_WORDS), f"{name}'s docstring cites no source"
    assert "range" in docs["TPUV4_SYSTEM_W_PER_CHIP"] and "range" in docs["DGX_HOST_USD_PER_CHIP"]  # assumptions
    assert "range" in docs["GB200_NVL72_RACK_W"] and "range" in docs["MI300X_RIVAL_SYSTEM"]
    for family in SYSTEM_FAMILIES.values():
        for part in (family.host, family.network, family.scale_up):
            assert any(word in part.source for word in SOURCE_WORDS), f"{part.name} cites no source"
            if "ssumption" in part.source:
                assert "range" in part.source, f"{part.name}'s assumption has no range"


def test_the_published_tables_references_draw_their_own_familys_wall_power_per_chip():
    """docs/system_table.json as the table run wrote it: every reference row within issue 29's ranges."""
    from pathlib import Path

    from experiments.system_table import DEFAULT_WORKLOADS, KINDS, load_rows

    rows = load_rows(Path(__file__).resolve().parents[1] / "docs" / "system_table.json")
    # every row of the default run (the four README models, iso-power and iso-cost); gpt3-175b's when it was added
    assert {(w, k) for w in DEFAULT_WORKLOADS for k in KINDS} <= {(r["workload"], r["kind"]) for r in rows}
    for row in rows:
        for name, ref in row["references"].items():
            low, high = WALL_W_PER_CHIP_RANGES[name]
            assert ref["system"]["family"] == REFERENCE_FAMILIES[name]
            assert low <= ref["system"]["wall_power_per_chip_w"] <= high, (row["workload"], row["kind"], name)


def test_the_scale_up_fabric_grows_with_the_designs_links_and_keeps_each_references_measured_total():
    """NVSwitch follows a switched chip's link bandwidth, TPU v4's OCS a torus chip's link count; each reference's
    host + fabric is still its family's measured figure (the fabric is carved out of it, not added), and the OCS is
    the paper's 5 % of the TPU v4 system's cost."""
    budget = SystemBudget(power_w=1e6)
    arch = SystemDesignSpace().base

    def point(links, link_GBps, topology):
        choice = SystemChoice(600.0, 4, "hbm3", links, link_GBps, topology)
        return system_module.choice_point(choice, arch, budget)

    switched = [point(6, 50.0, "switched"), point(12, 100.0, "switched")]
    fabric = [p.family.scale_up_w_per_chip(p.estimate) for p in switched]
    assert fabric[1] == pytest.approx(4 * fabric[0]) and fabric[0] > 0
    assert switched[1].wall_power_per_chip_w - switched[0].wall_power_per_chip_w > (fabric[1] - fabric[0]) * PUE
    torus = [point(6, 50.0, "torus"), point(12, 50.0, "torus")]
    ocs = [p.family.scale_up_usd_per_chip(p.estimate) for p in torus]
    assert ocs[1] == pytest.approx(2 * ocs[0]) and ocs[0] > 0
    tpuv4, _ = reference_system("tpuv4", budget)
    system_usd = tpuv4.estimate.total_cost_usd + tpuv4.family.host.usd_per_chip + tpuv4.family.nic_usd_per_chip
    assert tpuv4.family.scale_up_usd_per_chip(tpuv4.estimate) / (system_usd + ocs[0]) == pytest.approx(0.05)
    with pytest.raises(ValueError, match="w_per_Bps"):
        system_module.ScaleUpFabric("bad", -1.0, 0.0, 0.0, 0.0, "test")


def test_each_chip_pays_its_nic_share_at_any_size_and_the_network_adds_switch_ports_above_one_domain():
    """The NIC (with its module) is charged per NIC port whatever the cluster's size — the torus a quarter of one per
    chip, a DGX GPU one; the switches and their optics only once the cluster needs the scale-out network."""
    h100, torus = SYSTEM_FAMILIES["dgx-h100"], SYSTEM_FAMILIES["tpuv4-torus"]
    estimate = _estimate(700.0, 3_000.0)
    assert h100.nic_w_per_chip == pytest.approx(system_module.CONNECTX7_W + system_module.NDR_NIC_MODULE_W)
    assert torus.nic_usd_per_chip == pytest.approx(NDR_FAT_TREE.nic_usd / 4)
    one_node = h100.overhead_w_per_chip(estimate, 8)
    assert one_node == pytest.approx(h100.host.w_per_chip + h100.nic_w_per_chip)  # no links on this estimate
    assert h100.overhead_w_per_chip(estimate, 2048) == pytest.approx(one_node + 3 * NDR_FAT_TREE.port_w())


def test_the_nre_knob_charges_designs_not_references_and_is_off_by_default():
    """``nre_chips`` amortises the node's design + mask-set cost (cost.DESIGN_NRE_USD) over that many custom chips: every
    design pays it, a reference chip (bought off the shelf) does not; off, nothing moves and the budget's dict (the
    stored results' signatures) keeps its old form."""
    from phaze_env.hardware import cost as cost_module
    off, on = SystemBudget(power_w=None, cost_usd=1e8), SystemBudget(power_w=None, cost_usd=1e8, nre_chips=100_000)
    assert off.to_dict() == {"power_w": None, "cost_usd": 1e8} and SystemBudget(**on.to_dict()) == on
    arch = SystemDesignSpace().base
    choice = SystemChoice(600.0, 4, "hbm3", 6, 50.0, "switched")
    plain, charged = (system_module.choice_point(choice, arch, budget) for budget in (off, on))
    assert charged.estimate.cost_usd["nre"] == pytest.approx(249e6 / 100_000) and "nre" not in plain.estimate.cost_usd
    assert charged.cost_per_chip_usd - plain.cost_per_chip_usd == pytest.approx(2_490.0)
    assert charged.n_devices < plain.n_devices
    for name in REFERENCE_FAMILIES:
        assert (system_module.reference_point(name, on).cost_per_chip_usd
                == pytest.approx(system_module.reference_point(name, off).cost_per_chip_usd))
    with pytest.raises(ValueError, match="positive whole number of chips"):
        SystemBudget(power_w=1e6, nre_chips=0)
    odd = cost_module.ProcessNode("N6X", 1.2, 1.1, 0.9, 10_000.0, 0.1)  # a variant with no NRE figure
    with pytest.raises(cost_module.UnknownNodeError, match="no NRE figure for node 'N6X'"):
        cost_module.nre_usd_per_chip(odd, 1000)
