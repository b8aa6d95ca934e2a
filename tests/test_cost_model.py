"""Chip area, power and cost model (phaze_env.hardware.cost) and its report (experiments.cost_table)."""

import ast
import math
from dataclasses import replace
from pathlib import Path

import pytest

from experiments import cost_table
from phaze_env.hardware import area, cost
from phaze_env.hardware.accelerator import TPUV4, UnknownPresetError, get_preset

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["a100", "h100"])
def test_die_area_within_15_percent_of_published(name):
    # A100's SIMT factor and uncore come from its own die photo (bookkeeping); H100 is a prediction.
    published = cost.PUBLISHED[name].die_area_mm2
    assert cost.preset_estimate(name).die_area_mm2 == pytest.approx(published, rel=0.15)


def test_tpuv4_die_area_within_the_published_bound():
    estimate = cost.preset_estimate("tpuv4")
    assert cost.PUBLISHED["tpuv4"].die_area_bound_mm2 == 600
    assert estimate.die_area_mm2 < 600
    assert estimate.area_mm2["compute"] == pytest.approx(TPUV4.area_mm2)  # the template as is, at N7


@pytest.mark.parametrize("name", ["tpuv4", "a100", "h100"])
def test_power_within_20_percent_of_published(name):
    assert cost.preset_estimate(name).total_power_w == pytest.approx(cost.PUBLISHED[name].power_w, rel=0.20)


def test_yield_matches_a_hand_computed_value():
    # 100 mm² = 1 cm², D0 = 0.1/cm², α = 2: (1 + 0.1·1/2)^-2 = 1/1.1025.
    assert cost.die_yield(100.0, 0.1, alpha=2.0) == pytest.approx(1 / 1.1025, rel=1e-12)
    assert cost.die_yield(100.0, 0.1, alpha=1e9) == pytest.approx(math.exp(-0.1), rel=1e-6)  # α → ∞: Poisson
    assert cost.die_yield(100.0, 0.0) == 1.0
    with pytest.raises(ValueError):
        cost.die_yield(100.0, 0.1, alpha=0.0)


def test_dies_per_wafer_follows_the_standard_formula():
    # 300 mm wafer, 100 mm² die: π·150²/100 − π·300/√200 = 706.86 − 66.64 = 640.2 → 640 whole dies.
    assert cost.dies_per_wafer(100.0) == 640
    # 225 mm² (1.5 cm × 1.5 cm): 314.16 − 44.43 = 269.7 → 269.
    assert cost.dies_per_wafer(225.0) == 269
    assert cost.dies_per_wafer(1e6) == 0
    with pytest.raises(ValueError):
        cost.dies_per_wafer(0.0)


def test_link_lanes_match_the_whitepapers():
    assert cost.preset_system("a100").lane_pairs == 12 * 4  # NVLink3: 4 pairs per direction per link
    assert cost.preset_system("h100").lane_pairs == 18 * 2  # NVLink4: 2 pairs per direction per link
    # TPUv4 ICI: 400 Gb/s per link and direction over (assumed) 50 Gb/s NRZ pairs = 8 pairs per link.
    assert cost.preset_system("tpuv4").lane_pairs == 6 * 8
    assert cost.preset_system("tpuv4").per_direction_Bps == 6 * cost.TPUV4_ICI_LINK_BPS == 300e9
    # 600 GB/s at 5 pJ/bit = 24 W.
    assert cost.preset_estimate("a100").power_w["links"] == pytest.approx(600e9 * 8 * 5e-12)


def test_reticle_check_raises_and_flags_a_too_large_die():
    cost.check_reticle(area.RETICLE_LIMIT_MM2)  # exactly at the limit is printable
    with pytest.raises(cost.ReticleLimitError, match="reticle limit of 858 mm²"):
        cost.check_reticle(900.0)
    huge = TPUV4.replace(num_tc=64)
    system = cost.preset_system("tpuv4")
    with pytest.raises(cost.ReticleLimitError):
        cost.chip_estimate(huge, system)
    flagged = cost.chip_estimate(huge, system, allow_over_reticle=True)
    assert not flagged.fits_reticle and flagged.die_area_mm2 > area.RETICLE_LIMIT_MM2
    assert cost.preset_estimate("tpuv4").fits_reticle


def test_more_area_means_lower_yield_and_higher_cost():
    areas = [100.0, 200.0, 400.0, 800.0]
    yields = [cost.die_yield(a, cost.N7.defect_density_per_cm2) for a in areas]
    costs = [cost.good_die_cost_usd(a, cost.N7) for a in areas]
    assert all(a > b for a, b in zip(yields, yields[1:]))
    assert all(a < b for a, b in zip(costs, costs[1:]))
    # Cost per mm² grows too (fewer dies per wafer edge-wise and lower yield), not just cost per die.
    assert all(c1 / a1 < c2 / a2 for (a1, c1), (a2, c2) in zip(zip(areas, costs), zip(areas[1:], costs[1:])))
    system = cost.preset_system("tpuv4")
    small, large = (cost.chip_estimate(TPUV4.replace(buffer_mb=mb), system) for mb in (64, 256))
    assert large.die_area_mm2 > small.die_area_mm2
    assert large.die_yield < small.die_yield and large.cost_usd["die"] > small.cost_usd["die"]


def test_cost_items_follow_their_inputs():
    base = cost.preset_estimate("h100")
    assert base.cost_usd["hbm"] == pytest.approx(80 * cost.HBM_USD_PER_GB)
    assert cost.preset_estimate("h100", hbm_usd_per_gb=7.0).cost_usd["hbm"] == pytest.approx(80 * 7.0)
    worse = cost.preset_estimate("h100", defect_density_per_cm2=0.2)
    assert worse.die_yield < base.die_yield and worse.cost_usd["die"] > base.cost_usd["die"]
    assert base.to_dict()["total_cost_usd"] == pytest.approx(sum(base.cost_usd.values()))


def test_a_newer_node_shrinks_logic_but_not_phys():
    acc, n7 = get_preset("h100"), cost.preset_system("h100")
    at_n7 = cost.chip_area_mm2(acc, replace(n7, node="N7"))
    at_4n = cost.chip_area_mm2(acc, n7)
    assert at_4n["compute"] < at_n7["compute"] and at_4n["hbm_interfaces"] < at_n7["hbm_interfaces"]
    assert at_4n["serdes"] == at_n7["serdes"] and at_4n["io_misc"] == at_n7["io_misc"]
    phys_only = n7.die_hbm_phys * area.HBM_PHY_AREA_MM2
    assert at_4n["hbm_interfaces"] > phys_only


@pytest.mark.parametrize("fields,message", [({"node": "N2"}, "node"), ({"serdes": "10G"}, "serdes"),
                                            ({"core_style": "dataflow"}, "core_style"),
                                            ({"hbm_stacks": 5, "hbm_phys": 4}, "hbm_phys"),
                                            ({"links": -1}, "links"), ({"link_bandwidth_Bps": 0.0}, "link_bandwidth"),
                                            ({"base_dies": 2}, "base_node"), ({"base_node": "N6"}, "base_node"),
                                            ({"base_node": "N9", "base_dies": 2, "d2d_bandwidth_Bps": 1e12},
                                             "base_node"),
                                            ({"base_node": "N6", "base_dies": -1}, "base_dies"),
                                            ({"silicon_clock_hz": 0.0}, "silicon_clock_hz"),
                                            ({"dies": 8, "base_node": "N6", "base_dies": 4}, "d2d_bandwidth")])
def test_chip_system_rejects_bad_fields(fields, message):
    with pytest.raises(ValueError, match=message):
        cost.ChipSystem(**fields)


def test_preset_system_names_what_is_known():
    with pytest.raises(KeyError, match="presets with system data: tpuv4, a100, h100"):
        cost.preset_system("tpuv4i")
    with pytest.raises(UnknownPresetError):
        cost.preset_system("tpu-v9")
    assert cost.preset_system(" A100 ") == cost.SYSTEMS["a100"][0]


def constant_docstrings(path: Path) -> dict[str, str]:
    """Every upper-case module-level constant of ``path`` → the string literal right after it ("" if none)."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    found = {}
    for statement, following in zip(body, body[1:] + [None]):
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            target = statement.targets[0] if isinstance(statement, ast.Assign) else statement.target
            if isinstance(target, ast.Name) and target.id.isupper():
                literal = isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                found[target.id] = following.value.value if literal else ""
    return found


def test_every_new_constant_has_a_docstring():
    documented = constant_docstrings(REPO / "phaze_env" / "hardware" / "cost.py")
    documented.update({name: text for name, text in constant_docstrings(REPO / "phaze_env" / "hardware" / "area.py").items()
                       if name in ("RETICLE_LIMIT_MM2", "HBM_PHY_AREA_MM2", "HBM_CONTROLLER_AREA_MM2", "IO_MISC_AREA_MM2",
                                   "SERDES_50G_NRZ_LANE_AREA_MM2", "SERDES_100G_PAM4_LANE_AREA_MM2",
                                   "GA100_CORE_BLOCKS_MM2", "SERDES_200G_PAM4_LANE_AREA_MM2",
                                   "D2D_SHORELINE_BPS_PER_MM", "D2D_DEPTH_MM")})
    energy_docs = constant_docstrings(REPO / "phaze_env" / "hardware" / "energy.py")
    documented.update({name: energy_docs[name] for name in ("LEAKAGE_W_PER_MM2", "D2D_PJ_PER_BIT")})
    documented.update(constant_docstrings(REPO / "phaze_env" / "hardware" / "generations.py"))
    assert len(documented) > 20
    assert not [name for name, text in documented.items() if not text], "constants without a docstring"


def test_the_docstring_audit_sees_a_missing_docstring(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('A = 1\n"""why A."""\nB = 2\n', encoding="utf-8")
    assert constant_docstrings(module) == {"A": "why A.", "B": ""}


def test_the_report_writes_the_committed_doc(tmp_path, capsys):
    out = tmp_path / "cost_model.md"
    assert cost_table.main(["--write", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "| a100 | die area (mm²) | 826 |" in text and "within bound" in text
    assert text == (REPO / "docs" / "cost_model.md").read_text(encoding="utf-8"), \
        "docs/cost_model.md is stale: run python -m experiments.cost_table --write docs/cost_model.md"
    assert cost_table.main(["--write", str(tmp_path / "missing" / "x.md")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_the_package_grows_with_the_interposer_and_its_assembly_yield_with_the_parts():
    """Package, assembly and test by interposer area (dies + HBM sites), anchored on the H100's $750 at its published
    814 mm² and six sites; a failed bond scraps the known-good parts (PACKAGE_BOND_YIELD per die and stack)."""
    assert cost.PACKAGE_USD_PER_MM2 * cost.interposer_area_mm2(814.0, 6) == pytest.approx(cost.PACKAGE_USD)
    acc = get_preset("tpuv4")
    small = cost.chip_estimate(acc, cost.ChipSystem(hbm_stacks=4))
    more_stacks = cost.chip_estimate(acc.replace(hbm_gb=48.0), cost.ChipSystem(hbm_stacks=6))
    grown_mm2 = 2 * cost.HBM_STACK_FOOTPRINT_MM2 + more_stacks.die_area_mm2 - small.die_area_mm2  # sites + PHYs
    assert more_stacks.cost_usd["package"] - small.cost_usd["package"] == pytest.approx(
        grown_mm2 * cost.INTERPOSER_AREA_OVERHEAD * cost.PACKAGE_USD_PER_MM2)
    parts = sum(v for k, v in small.cost_usd.items() if k != "assembly_yield")
    assert small.total_cost_usd == pytest.approx(parts / cost.PACKAGE_BOND_YIELD ** 5)  # one die, four stacks
    b200 = cost.preset_estimate("b200")
    assert cost.package_yield(cost.preset_system("b200")) == pytest.approx(cost.PACKAGE_BOND_YIELD ** 10)
    assert b200.cost_usd["package"] > cost.preset_estimate("h100").cost_usd["package"] > small.cost_usd["package"]
    assert cost.chip_estimate(acc, cost.ChipSystem(), bond_yield=1.0).cost_usd["assembly_yield"] == 0.0
    with pytest.raises(ValueError, match="bond yield"):
        cost.chip_estimate(acc, cost.ChipSystem(), bond_yield=0.0)


def test_a_sweep_that_sets_the_package_constants_moves_every_estimate(monkeypatch):
    """The package cost per mm² and the bond yield are read at the call (not frozen as default arguments), so a
    sensitivity sweep that sets the module's value moves the system space's chips too."""
    base = cost.preset_estimate("h100")
    monkeypatch.setattr(cost, "PACKAGE_USD_PER_MM2", cost.PACKAGE_USD_PER_MM2 * 2)
    monkeypatch.setattr(cost, "PACKAGE_BOND_YIELD", 1.0)
    moved = cost.preset_estimate("h100")
    assert moved.cost_usd["package"] == pytest.approx(2 * base.cost_usd["package"])
    assert moved.cost_usd["assembly_yield"] == 0.0


MI300X_DIES = {"compute": cost.MI300X_XCD_AREA_MM2, "base": cost.MI300X_IOD_AREA_MM2}


def test_mi300x_dies_are_predicted_within_20_percent_of_the_published():
    estimate = cost.preset_estimate("mi300x")
    assert (estimate.dies, estimate.base_dies) == (cost.MI300X_XCDS, cost.MI300X_IODS) == (8, 4)
    assert estimate.area_per_die_mm2 == pytest.approx(MI300X_DIES["compute"], rel=0.20)
    assert estimate.area_per_base_die_mm2 == pytest.approx(MI300X_DIES["base"], rel=0.20)
    assert estimate.die_area_mm2 == pytest.approx(cost.PUBLISHED["mi300x"].die_area_mm2, rel=0.20)
    assert cost.preset_system("mi300x").io_process.name == "N6" and cost.preset_system("mi300x").process.name == "N5"


@pytest.mark.xfail(strict=True, reason="the TDP-like model prices the data sheet's 2.1 GHz peak (≈ 1,060 W); AMD's "
                                       "750 W board limit does not sustain it (docs/cost_model.md)")
def test_mi300x_power_within_20_percent_of_published():
    assert cost.preset_estimate("mi300x").total_power_w == pytest.approx(cost.MI300X_POWER_W, rel=0.20)


def test_a_3d_stack_puts_its_periphery_on_the_base_dies_and_pays_for_each_tier():
    acc, stacked = get_preset("mi300x"), cost.preset_system("mi300x")
    estimate = cost.chip_estimate(acc, stacked)
    # each base die carries at least the compute dies stacked on it, and the periphery beside them
    assert estimate.area_per_base_die_mm2 > estimate.area_per_die_mm2 * stacked.dies / stacked.base_dies
    assert estimate.area_mm2["io_misc"] == area.IO_MISC_AREA_MM2 * stacked.base_dies
    assert estimate.cost_usd["base_dies"] == pytest.approx(
        stacked.base_dies * cost.good_die_cost_usd(estimate.area_per_base_die_mm2, cost.get_node("N6")))
    assert cost.package_yield(stacked) == pytest.approx(cost.PACKAGE_BOND_YIELD ** (8 + 4 + 8))
    # the silicon clock shrinks only the compute logic: the same chip without it has larger compute dies
    unscaled = cost.chip_estimate(acc, replace(stacked, silicon_clock_hz=None))
    assert unscaled.area_mm2["compute"] == pytest.approx(
        estimate.area_mm2["compute"] * cost.MI300X_ENGINE_CLOCK_HZ / acc.clock_hz)
    assert unscaled.area_mm2["cache"] == estimate.area_mm2["cache"]
    # every other chip is unchanged by the new fields' defaults
    assert cost.preset_estimate("h100").base_dies == 0 and cost.preset_estimate("h100").base_area_mm2 == 0.0


def test_the_mi300x_constants_and_n6_cite_their_sources():
    docs = constant_docstrings(REPO / "phaze_env" / "hardware" / "cost.py")
    for name, source in {"N6_OVER_N7_LOGIC_DENSITY": "TSMC", "N6": "range", "MI300X_ENGINE_CLOCK_HZ": "data sheet",
                         "MI300X_XCDS": "ISSCC 2024", "MI300X_IODS": "CDNA 3", "MI300X_XCD_AREA_MM2": "SemiAnalysis",
                         "MI300X_IOD_AREA_MM2": "SemiAnalysis", "MI300X_IOD_D2D_BPS": "Assumption"}.items():
        assert source in docs[name], name
    for name in ("MI300X_XCD_AREA_MM2", "MI300X_IOD_AREA_MM2", "MI300X_IOD_D2D_BPS", "N6"):
        assert "range" in docs[name], name
