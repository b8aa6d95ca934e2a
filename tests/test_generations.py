"""Technology generations (nodes, HBM, SerDes by year), multi-die chips and the 2024 flagships as predictions."""

import json
from dataclasses import replace

import pytest

from phaze_env.hardware import area, cost, energy
from phaze_env.hardware.accelerator import Accelerator, get_preset
from phaze_env.hardware.generations import REFERENCE_TECHNOLOGIES, Technology, technology
from phaze_env.hardware.system import HBM_GENERATIONS, SystemChoice

FLAGSHIPS = ("b200", "b200-fp8", "gb200", "tpuv5p", "mi300x")


def within(modelled: float, published: float, tolerance: float = 0.20) -> bool:
    return abs(modelled - published) <= tolerance * published


@pytest.mark.parametrize("name", ["b200", "gb200"])
def test_blackwell_silicon_within_20_percent_of_two_gh100_dies(name):
    published = cost.PUBLISHED[name].die_area_mm2
    assert published == 2 * cost.PUBLISHED["h100"].die_area_mm2
    estimate = cost.preset_estimate(name)
    assert estimate.dies == 2 and estimate.fits_reticle
    assert within(estimate.die_area_mm2, published), estimate.die_area_mm2


def test_gb200_power_within_20_percent_of_its_1200_w():
    assert within(cost.preset_estimate("gb200").total_power_w, cost.PUBLISHED["gb200"].power_w)


def test_b200_power_within_20_percent_of_its_1000_w():
    """A prediction: the GB200's silicon at the B200's published clock (0.9× the GB200's, from the two datasheets'
    peak rates) and the voltage that clock needs (energy.VOLTAGE_FREQUENCY_EXPONENT), not a fit to 1,000 W."""
    assert within(cost.preset_estimate("b200").total_power_w, cost.PUBLISHED["b200"].power_w)


def test_the_b200_bin_runs_at_a_lower_voltage_over_the_documented_range(monkeypatch):
    """VOLTAGE_FREQUENCY_EXPONENT's docstring: +21 / +13 / +6 % of 1,000 W at k = 0 / 0.5 / 1; the top bin (GB200)
    and single-bin chips do not move; a clock above the top bin is refused."""
    from phaze_env.hardware import energy
    documented = {0.0: 0.21, 0.5: 0.13, 1.0: 0.06}
    gb200 = cost.preset_estimate("gb200").total_power_w
    for exponent, error in documented.items():
        monkeypatch.setattr(energy, "VOLTAGE_FREQUENCY_EXPONENT", exponent)
        b200 = cost.preset_estimate("b200")
        assert b200.total_power_w / cost.PUBLISHED["b200"].power_w - 1 == pytest.approx(error, abs=0.005), exponent
        assert cost.preset_estimate("gb200").total_power_w == pytest.approx(gb200)
    system = cost.preset_system("b200")
    assert cost.bin_clock_ratio(get_preset("b200"), system) == pytest.approx(2.25 / 2.5)
    assert cost.bin_clock_ratio(get_preset("h100"), cost.preset_system("h100")) == 1.0
    with pytest.raises(ValueError, match="above its silicon's top bin"):
        cost.chip_estimate(get_preset("gb200"), replace(system, top_clock_hz=get_preset("b200").clock_hz))
    with pytest.raises(ValueError, match="top_clock_hz"):
        replace(system, top_clock_hz=0.0)


def test_tpuv5p_has_no_published_figures_and_the_report_says_so():
    published = cost.PUBLISHED["tpuv5p"]
    assert published.power_w is None and published.die_area_mm2 is None
    from experiments.cost_table import validation_rows
    rows = [row for row in validation_rows({"tpuv5p": cost.preset_estimate("tpuv5p")})]
    assert [row[2] for row in rows] == ["< 858 (bound)", "not published"]
    assert all("no figure to check" in row[4] for row in rows)


def test_flagship_presets_reproduce_their_datasheet_rates():
    expected = {"b200": (2.25e15, 8e12, 180), "gb200": (2.5e15, 8e12, 186), "tpuv5p": (459e12, 2.765e12, 95),
                "mi300x": (1307.4e12, 5.3e12, 192)}
    for name, (peak, bandwidth, capacity) in expected.items():
        acc = get_preset(name)
        assert acc.peak_flops == pytest.approx(peak, rel=1e-9), name
        assert (acc.hbm_bandwidth_Bps, acc.hbm_gb) == (bandwidth, capacity), name
    assert get_preset("b200-fp8").format_peak_flops == pytest.approx(4.5e15)


@pytest.mark.parametrize("name", FLAGSHIPS)
def test_flagship_presets_round_trip_through_json(name):
    acc = get_preset(name)
    assert Accelerator.from_dict(json.loads(json.dumps(acc.to_dict()))) == acc


def test_b200_as_one_die_is_over_the_reticle_and_dearer():
    acc, system = get_preset("b200"), cost.preset_system("b200")
    monolithic = replace(system, dies=1, d2d_bandwidth_Bps=0.0)
    with pytest.raises(cost.ReticleLimitError):
        cost.chip_estimate(acc, monolithic)
    one = cost.chip_estimate(acc, monolithic, allow_over_reticle=True)
    two = cost.preset_estimate("b200")
    assert two.area_per_die_mm2 == pytest.approx(two.die_area_mm2 / 2)
    assert two.cost_usd["die"] == pytest.approx(2 * cost.good_die_cost_usd(two.area_per_die_mm2, system.process))
    assert two.cost_usd["die"] < one.cost_usd["die"]  # two smaller dies yield better than one huge one
    # the split costs a second IO block and the die-to-die interfaces: 10 TB/s at 0.5 pJ/bit = 40 W
    assert two.area_mm2["io_misc"] == 2 * area.IO_MISC_AREA_MM2 and two.area_mm2["die_to_die"] > 0
    assert two.power_w["die_to_die"] == pytest.approx(10e12 * 8 * 0.5e-12)


def test_single_die_chips_are_unchanged_by_the_die_split():
    for name in ("tpuv4", "a100", "h100"):
        estimate = cost.preset_estimate(name)
        assert estimate.dies == 1 and estimate.area_mm2["die_to_die"] == 0 and estimate.power_w["die_to_die"] == 0


@pytest.mark.parametrize("fields", [{"dies": 0}, {"dies": 2}, {"dies": 1, "d2d_bandwidth_Bps": 1e12},
                                    {"dies": 2, "d2d_bandwidth_Bps": -1.0}])
def test_die_fields_are_validated(fields):
    with pytest.raises(ValueError, match="dies|d2d"):
        cost.ChipSystem(**fields)


@pytest.mark.parametrize("node", ["N2", "N3P", "7nm", ""])
def test_a_node_without_data_is_one_clear_error(node):
    for build in (lambda: cost.ChipSystem(node=node), lambda: Technology(node, 2025), lambda: cost.get_node(node)):
        with pytest.raises(cost.UnknownNodeError, match="N7, N6, N5, 4N, N4P, 4NP, N3"):
            build()


def test_node_figures_follow_tsmc_ratios_over_n5():
    n5, n4p, n3 = cost.get_node("N5"), cost.get_node("N4P"), cost.get_node("n3")
    assert n4p.logic_density_gain == pytest.approx(1.8 * 1.06) and n4p.energy_factor == pytest.approx(0.7 * 0.78)
    assert n3.logic_density_gain == pytest.approx(1.8 * 1.6) and n3.energy_factor == pytest.approx(0.7 * 0.66)
    assert n3.sram_density_gain == n5.sram_density_gain  # N3E's bit cell is N5's 0.021 µm²
    assert [cost.NODES[n].volume_year for n in ("N7", "N5", "N4P", "N3")] == [2018, 2020, 2022, 2023]
    # at a newer node the same design is smaller and draws less
    acc, system = get_preset("h100"), cost.preset_system("h100")
    at = {node: cost.chip_estimate(acc, replace(system, node=node), allow_over_reticle=True) for node in ("N7", "N5", "N3")}
    assert at["N7"].die_area_mm2 > at["N5"].die_area_mm2 > at["N3"].die_area_mm2
    assert at["N7"].total_power_w > at["N5"].total_power_w > at["N3"].total_power_w


def test_a_year_decides_hbm_and_serdes():
    assert Technology("N7", 2020).hbm_generations == ("hbm2", "hbm2e")
    assert Technology("N7", 2020).serdes == "50G-NRZ"
    assert Technology("4N", 2022).serdes == "100G-PAM4" and Technology("N3", 2024).newest_hbm == "hbm3e"
    assert Technology("N3", 2025).serdes == "200G-PAM4"
    assert [HBM_GENERATIONS[g].first_year for g in ("hbm2", "hbm2e", "hbm3", "hbm3e")] == [2016, 2020, 2022, 2024]


def test_a_technology_refuses_what_did_not_exist_yet():
    with pytest.raises(ValueError, match="N3 entered volume production in 2023"):
        Technology("N3", 2021)
    choice = SystemChoice(die_area_mm2=600.0, hbm_stacks=6, hbm_generation="hbm3e", links=12, link_GBps=100.0,
                          topology="switched")
    with pytest.raises(ValueError, match="hbm3e first shipped in 2024, after 2022"):
        Technology("4N", 2022).chip_system(choice)
    with pytest.raises(ValueError, match="integer year"):
        technology("N7", "2020")


def test_a_choice_at_a_newer_node_keeps_more_of_its_die_for_compute():
    choice = SystemChoice(die_area_mm2=600.0, hbm_stacks=6, hbm_generation="hbm3", links=12, link_GBps=100.0,
                          topology="switched")
    n7, n3 = Technology("N7", 2024), Technology("N3", 2024)
    assert n7.chip_system(choice) == replace(choice.chip_system(), serdes="200G-PAM4")  # the system space's, at N7
    assert n3.chip_system(choice).process.name == "N3"
    assert n3.compute_budget_mm2(choice) > n7.compute_budget_mm2(choice)  # HBM controllers shrink, PHYs do not


def test_technology_round_trips_and_rivals_sit_at_their_own_node():
    tech = Technology("4NP", 2024)
    assert Technology.from_dict(json.loads(json.dumps(tech.to_dict()))) == tech
    with pytest.raises(ValueError, match="unknown Technology field"):
        Technology.from_dict({"node": "N7", "year": 2020, "fab": "TSMC"})
    assert {name: t.node for name, t in REFERENCE_TECHNOLOGIES.items()} == {
        "tpuv4": "N7", "a100": "N7", "h100": "4N", "b200": "4NP", "gb200": "4NP", "tpuv5p": "N5",
        "mi300x": "N5"}
    assert set(REFERENCE_TECHNOLOGIES) == set(cost.SYSTEMS)


def test_the_hardware_cli_prices_a_preset_at_another_node(capsys):
    from phaze_env.hardware.__main__ import main

    assert main(["--preset", "h100", "--node", "N3", "--year", "2024", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["technology"] == {"node": "N3", "year": 2024}
    at_n3 = cost.chip_estimate(get_preset("h100"), replace(cost.preset_system("h100"), node="N3"))
    assert info["at_node"]["die_area_mm2"] == pytest.approx(at_n3.die_area_mm2)
    assert info["at_node"]["die_area_mm2"] < cost.preset_estimate("h100").die_area_mm2


@pytest.mark.parametrize("argv,message", [(["--node", "N2"], "no process data for node 'N2'"),
                                          (["--node", "N3", "--year", "2021"], "N3 entered volume production in 2023"),
                                          (["--year", "2024"], "--year needs --node")])
def test_the_hardware_cli_refuses_a_bad_node_in_one_line(argv, message, capsys):
    from phaze_env.hardware.__main__ import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_an_fp8_datapath_adds_its_area_and_leakage_not_dynamic_power():
    """cost_model.md's FP8 paragraph: at twice the rate an FP8 MAC costs half a bf16 one, so the TDP-like dynamic
    terms match; the FP8 MACs' extra area leaks and costs."""
    choice = SystemChoice(800.0, 4, "hbm3", 6, 50.0, "torus")
    arch = get_preset("tpuv4")
    bf16, fp8 = (cost.chip_estimate(replace(choice, number_format=f).accelerator(arch), choice.chip_system())
                 for f in ("bf16", "fp8"))
    assert all(fp8.power_w[term] == pytest.approx(bf16.power_w[term]) for term in ("mac", "sram", "vector", "hbm"))
    extra_mm2 = fp8.die_area_mm2 - bf16.die_area_mm2
    assert extra_mm2 > 0 and fp8.power_w["leakage"] - bf16.power_w["leakage"] == pytest.approx(energy.LEAKAGE_W_PER_MM2 * extra_mm2)
    assert fp8.cost_usd["die"] > bf16.cost_usd["die"]
