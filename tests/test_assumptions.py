"""The assumption registry and :func:`phaze_env.assumptions.moved`: nominal values are the model's, a move changes what
the model computes (in this process and in the search's workers), restores it, and never shares a cache entry with
the nominal model."""

from __future__ import annotations

import os

import pytest

from phaze_env import cache
from phaze_env.assumptions import ASSUMPTIONS, moved
from phaze_env.cache import MOVED_ASSUMPTIONS_ENV, DiskCache, code_key
from phaze_env.design import SystemDesignSpace
from phaze_env.hardware import cost, energy, system
from phaze_env.hardware.system import SystemBudget, reference_point
from phaze_env.stacks import DEFAULT_SYSTEM_STACK, SYSTEM_STACKS
from search.executors import make_executor

BUDGET = SystemBudget(power_w=1e6)


def _chips() -> dict[str, int]:
    return {name: reference_point(name, BUDGET).n_devices for name in ("tpuv4", "a100", "h100")}


def test_nominals_are_the_models_values_and_ranges_hold_them():
    assert ASSUMPTIONS["pue"].nominal == system.PUE
    assert ASSUMPTIONS["hbm_usd_per_gb"].nominal == cost.HBM_USD_PER_GB
    assert ASSUMPTIONS["link_pj_per_byte"].nominal == energy.LINK_PJ_PER_BYTE
    assert ASSUMPTIONS["host_w.dgx-h100"].nominal == system.SYSTEM_FAMILIES["dgx-h100"].host.w_per_chip
    stack = SYSTEM_STACKS[DEFAULT_SYSTEM_STACK]
    assert ASSUMPTIONS["design_framework_efficiency"].nominal == stack.design_fit(SystemDesignSpace().base)[0].framework_efficiency
    assert ASSUMPTIONS["design_attention_efficiency"].nominal == stack.design_fit(SystemDesignSpace().base)[0].attention_efficiency
    for a in ASSUMPTIONS.values():
        assert a.low <= a.nominal <= a.high and a.source, a.name
        assert a.ends(), f"{a.name}: a range with no end off the nominal moves nothing"


@pytest.mark.parametrize("name", sorted(ASSUMPTIONS))
def test_every_move_is_undone(name):
    before = (system.PUE, dict(system.SYSTEM_FAMILIES), dict(cost.NODES), dict(SYSTEM_STACKS), energy.MAC_PJ,
              energy.FP8_MAC_PJ, energy.HBM_PJ_PER_BYTE, energy.LINK_PJ_PER_BYTE, energy.LEAKAGE_W_PER_MM2,
              cost.HBM_USD_PER_GB, cost.PACKAGE_USD, system.DESIGN_GEMM_EFFICIENCY)
    with pytest.raises(KeyError):
        with moved(name, ASSUMPTIONS[name].low if ASSUMPTIONS[name].low != ASSUMPTIONS[name].nominal
                   else ASSUMPTIONS[name].high):
            assert os.environ[MOVED_ASSUMPTIONS_ENV]
            raise KeyError("an error inside the move")
    after = (system.PUE, dict(system.SYSTEM_FAMILIES), dict(cost.NODES), dict(SYSTEM_STACKS), energy.MAC_PJ,
             energy.FP8_MAC_PJ, energy.HBM_PJ_PER_BYTE, energy.LINK_PJ_PER_BYTE, energy.LEAKAGE_W_PER_MM2,
             cost.HBM_USD_PER_GB, cost.PACKAGE_USD, system.DESIGN_GEMM_EFFICIENCY)
    assert after == before and MOVED_ASSUMPTIONS_ENV not in os.environ


def test_a_power_assumption_moves_the_chip_counts_and_back():
    nominal = _chips()
    with moved("pue", 1.58):
        assert system.PUE == 1.58
        assert all(n < nominal[k] for k, n in _chips().items())
    with moved("host_w.dgx-h100", ASSUMPTIONS["host_w.dgx-h100"].low):
        assert _chips()["h100"] > nominal["h100"] and _chips()["tpuv4"] == nominal["tpuv4"]
    assert _chips() == nominal


@pytest.mark.parametrize("name", ["host_w.dgx-b200", "host_w.gb200-nvl72", "host_w.tpuv5p-torus",
                                  "host_w.mi300x-platform"])
def test_a_flagships_own_host_power_moves_only_that_flagship(name):
    """The 2024–25 flagships' hosts are their own assumptions, each over its stated range: moving one changes that
    rival's chip count at iso-power and no other rival's (TPU v5p's host is TPU v4's value, MI300X's DGX H100's, but
    not their assumptions)."""
    family = name.removeprefix("host_w.")
    own = {rival for rival, rival_family in system.RIVAL_FAMILIES.items() if rival_family == family}
    assert own, f"{family} is no rival's family"
    def chips():
        return {rival: reference_point(rival, BUDGET).n_devices for rival in system.RIVAL_TOPOLOGIES}
    nominal, assumption = chips(), ASSUMPTIONS[name]
    for end in assumption.ends().values():
        with moved(name, end):
            at_end = chips()
        assert {rival for rival in nominal if at_end[rival] != nominal[rival]} == own, (name, end)
        assert all((at_end[rival] > nominal[rival]) == (end < assumption.nominal) for rival in own)


def test_cost_assumptions_move_the_chip_cost():
    estimate = cost.preset_estimate("h100")
    with moved("hbm_usd_per_gb", 20.0):
        assert cost.preset_estimate("h100").cost_usd["hbm"] == pytest.approx(estimate.cost_usd["hbm"] * 20 / 15)
    with moved("wafer_cost_factor", 1.25):
        assert cost.preset_estimate("h100").cost_usd["die"] == pytest.approx(estimate.cost_usd["die"] * 1.25)
    with moved("mac_pj", energy.MAC_PJ * 1.5):
        assert energy.FP8_MAC_PJ == pytest.approx(energy.MAC_PJ / 2)
        assert cost.preset_estimate("h100").power_w["mac"] == pytest.approx(estimate.power_w["mac"] * 1.5)
    assert cost.preset_estimate("h100") == estimate


def test_design_efficiencies_move_the_designs_not_the_references():
    space = SystemDesignSpace()
    design = next(iter(space))
    nominal_reference = space.reference_training("tpuv4", None).stack.framework_efficiency
    with moved(design_framework_efficiency=0.8, design_gemm_efficiency=0.95):
        assert space.design_training(None).stack.framework_efficiency == 0.8
        assert space.reference_training("tpuv4", None).stack.framework_efficiency == nominal_reference
        assert design.accelerator(space.base).gemm_efficiency == 0.95
        assert reference_point("tpuv4", BUDGET).accelerator.gemm_efficiency == system.SYSTEM_GEMM_EFFICIENCY


def test_the_voltage_frequency_exponents_low_end_is_the_measured_mi300x_clock_and_moves_only_capped_rivals():
    """k's low end is the exponent at which the capped MI300X runs at AMD's measured median bf16 GEMM clock; moving it
    there lowers the capped flagships' clocks (MI300X, B200, GB200) and nothing else: no design runs below its silicon's
    top clock (tests/test_sensitivity.py: the search's inputs do not move) and TPUv4, A100 and H100 are under their
    limits whatever k."""
    assumption = ASSUMPTIONS["voltage_frequency_exponent"]
    assert assumption.nominal == assumption.high == energy.VOLTAGE_FREQUENCY_EXPONENT
    assert 0 < assumption.low < assumption.nominal
    nominal_clocks = {name: system.rival_chip(name)[0].clock_hz for name in system.RIVAL_TOPOLOGIES}
    with moved("voltage_frequency_exponent", assumption.low):
        assert system.mi300x_engine_clock_hz() == pytest.approx(cost.MI300X_GEMM_MEDIAN_CLOCKS_HZ["bf16"], rel=1e-5)
        moved_clocks = {name: system.rival_chip(name)[0].clock_hz for name in system.RIVAL_TOPOLOGIES}
    lower = {name for name in moved_clocks if moved_clocks[name] < nominal_clocks[name]}
    assert lower == {"mi300x", "b200", "gb200"}
    assert all(moved_clocks[n] == nominal_clocks[n] for n in system.RIVAL_TOPOLOGIES if n not in lower)


def test_nesting_and_bad_moves_are_refused():
    with moved(design_framework_efficiency=0.8):
        with pytest.raises(RuntimeError, match="do not nest"):
            with moved("pue", 1.2):
                pass
    with pytest.raises(ValueError, match="unknown assumption 'nope'"):
        with moved("nope", 1.0):
            pass
    with pytest.raises(ValueError, match="positive finite"):
        with moved("pue", float("nan")):
            pass


def test_a_moved_result_never_answers_the_nominal_question(tmp_path, monkeypatch):
    """A cache entry written under a move is not read at nominal, nor the other way round; caches whose code cannot
    read a moved constant (the traced graphs) keep their key."""
    monkeypatch.setenv("PHAZE_CACHE_DIR", str(tmp_path))
    store = DiskCache("assumption-test")
    nominal_key = code_key("phaze_env.evaluate", "same inputs")
    store.put(nominal_key, "nominal")
    graphs_key = code_key("phaze_env.workloads.build", "same inputs")
    with moved("pue", 1.4):
        moved_key = code_key("phaze_env.evaluate", "same inputs")
        assert moved_key != nominal_key and store.get(moved_key) is None
        store.put(moved_key, "moved")
        assert code_key("phaze_env.workloads.build", "same inputs") == graphs_key
    with moved("pue", 1.2):
        assert code_key("phaze_env.evaluate", "same inputs") not in (moved_key, nominal_key)
    assert code_key("phaze_env.evaluate", "same inputs") == nominal_key and store.get(nominal_key) == "nominal"
    assert cache.moved_constants("phaze_env.evaluate") == ()


def test_the_system_space_rows_follow_the_move():
    space = SystemDesignSpace(budget=BUDGET)
    nominal = [p.n_devices for p in space.arch_space().points[:20]]
    with moved("pue", 1.58):
        assert [p.n_devices for p in space.arch_space().points[:20]] != nominal
    assert [p.n_devices for p in space.arch_space().points[:20]] == nominal


def test_search_workers_run_under_the_parents_move():
    with moved("host_w.dgx-h100", ASSUMPTIONS["host_w.dgx-h100"].low):
        here = reference_point("h100", BUDGET).n_devices
        with make_executor(2) as pool:
            there = pool.submit(reference_point, "h100", BUDGET).result().n_devices
    assert there == here != reference_point("h100", BUDGET).n_devices


def test_an_evaluation_cached_at_nominal_is_not_returned_under_a_move(tmp_path, monkeypatch):
    """The same evaluation inputs (chip, cluster) under a moved per-event energy: the energy per sample is the moved
    model's, as a run with no cache computes it — not the nominal entry the cache holds for those inputs."""
    from phaze_env.evaluate import evaluate
    from phaze_env.hardware import get_preset
    from tests.tiny import CLUSTER, TINY

    monkeypatch.setenv("PHAZE_CACHE_DIR", str(tmp_path))
    options = dict(tensor_widths=(1,), microbatch=(1,), recompute=(False,))
    nominal = evaluate(TINY, get_preset("tpuv4"), CLUSTER, **options)
    with moved("mac_pj", ASSUMPTIONS["mac_pj"].high):
        cached = evaluate(TINY, get_preset("tpuv4"), CLUSTER, **options)
        fresh = evaluate(TINY, get_preset("tpuv4"), CLUSTER, cache=False, **options)
    assert cached.energy_per_sample_j == fresh.energy_per_sample_j > nominal.energy_per_sample_j
    assert evaluate(TINY, get_preset("tpuv4"), CLUSTER, **options).energy_per_sample_j == nominal.energy_per_sample_j


def test_the_searched_chips_attention_rate_moves_the_designs_only():
    """The fused attention rate the searched chips take (TPU v4's, an assumption) moves their clusters, not the TPU v4
    reference whose fit it is."""
    from phaze_env.cluster import Cluster
    from phaze_env.hardware import TPUV4

    low = ASSUMPTIONS["design_attention_efficiency"].low
    with moved("design_attention_efficiency", low):
        stack = SYSTEM_STACKS[DEFAULT_SYSTEM_STACK]
        assert stack.design_training(Cluster(), TPUV4).stack.attention_efficiency == low
        assert stack.training(Cluster(), "tpuv4").stack.attention_efficiency == stack.fit_on("tpuv4").attention_efficiency
    assert SYSTEM_STACKS[DEFAULT_SYSTEM_STACK].design_training(Cluster(), TPUV4).stack.attention_efficiency == \
        ASSUMPTIONS["design_attention_efficiency"].nominal
