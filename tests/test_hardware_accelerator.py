"""Accelerator value, presets, area model and the CLI."""

import json
import subprocess
import sys

import pytest

from phaze_env.hardware.__main__ import main
from phaze_env.hardware.accelerator import PRESETS, TPUV4, Accelerator, UnknownPresetError, get_preset
from phaze_env.hardware.cost import preset_estimate


def test_tpuv4_preset_matches_public_figures():
    acc = get_preset("tpuv4")
    assert (acc.num_tc, acc.tc_width, acc.tc_depth, acc.num_vc, acc.vc_width, acc.buffer_mb) == (8, 128, 128, 2, 128, 128)
    assert acc.hbm_gb == 32 and acc.hbm_bandwidth_Bps == 1.2e12 and acc.clock_hz == 1.05e9 and acc.bytes_per_element == 2
    assert acc.peak_flops == 2 * 8 * 128 * 128 * 1.05e9
    assert acc.peak_flops == pytest.approx(275e12, rel=0.01)


def test_tpuv4_area_is_plausible():
    # The whole die (the cost model's) should be TPUv4-sized (below 600 mm², Jouppi et al. 2023); the searched part
    # is a share of it.
    die = preset_estimate("tpuv4").die_area_mm2
    assert 330 <= die <= 600
    assert 0.4 * die < TPUV4.area_mm2 < die


def test_area_grows_with_every_component():
    base = TPUV4.area_mm2
    for field, value in (("num_tc", 16), ("tc_width", 256), ("tc_depth", 256), ("num_vc", 4), ("vc_width", 256), ("buffer_mb", 256)):
        assert TPUV4.replace(**{field: value}).area_mm2 > base, field


def test_area_matches_the_documented_figures():
    # The docstring's numbers, typed as literals: 1000 µm² per MAC, 2e-3 mm² per edge lane, 0.5 mm² per core,
    # 0.05 mm² per 8-sublane vector lane, 0.875 mm²/MB.
    tensor = 8 * (128 * 128 * 1e-3 + 256 * 2e-3 + 0.5)
    vector = 2 * (128 * 0.05 + 0.5)
    assert TPUV4.area_mm2 == pytest.approx(tensor + vector + 128 * 0.875)
    # Area follows width × sublanes: half the sublanes cost what half the lanes cost.
    assert TPUV4.replace(vc_sublanes=4).area_mm2 == pytest.approx(TPUV4.replace(vc_width=64).area_mm2)


def test_vector_throughput_counts_sublanes():
    assert TPUV4.vector_elements_per_cycle == 2 * 128 * 8 == 2048
    assert get_preset("tpuv4i").vector_elements_per_cycle == 1024
    # GPU presets: the FP32 lanes' rate (A100 6,912 lanes at 1.41 GHz; H100 16,896 at 1.98 GHz, −7.6 %).
    assert get_preset("a100").peak_vector_elements_per_s == pytest.approx(6912 * 1.41e9, rel=0.01)
    assert get_preset("h100").peak_vector_elements_per_s == pytest.approx(16896 * 1.98e9, rel=0.08)


def test_presets_match_datasheets():
    expected = {  # dense bf16 TFLOP/s, HBM TB/s, HBM GB: public datasheets
        "tpuv4": (275e12, 1.2e12, 32), "tpuv4i": (138e12, 614e9, 8), "a100": (312e12, 2.039e12, 80), "h100": (989.4e12, 3.35e12, 80),
    }
    for name, (peak, bandwidth, capacity) in expected.items():
        acc = get_preset(name)
        assert acc.peak_flops == pytest.approx(peak, rel=0.005), name
        assert acc.hbm_bandwidth_Bps == bandwidth and acc.hbm_gb == capacity, name
        assert 0.75 <= acc.hbm_efficiency <= 0.95 and 0.75 <= acc.gemm_efficiency <= 1.0, name


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_round_trip_through_json(name):
    acc = get_preset(name)
    assert Accelerator.from_dict(json.loads(json.dumps(acc.to_dict()))) == acc
    assert acc.peak_flops > 0 and acc.area_mm2 > 0


@pytest.mark.parametrize("field", ["num_tc", "tc_width", "tc_depth", "num_vc", "vc_width", "vc_sublanes", "buffer_mb"])
@pytest.mark.parametrize("bad", [0, -4, 3, 96])
def test_invalid_powers_of_two_name_the_field(field, bad):
    with pytest.raises(ValueError, match=field):
        TPUV4.replace(**{field: bad})


@pytest.mark.parametrize("field", ["hbm_gb", "hbm_bandwidth_Bps", "clock_hz", "bytes_per_element", "gemm_efficiency",
                                   "hbm_efficiency"])
def test_non_positive_numbers_name_the_field(field):
    with pytest.raises(ValueError, match=field):
        TPUV4.replace(**{field: 0})


@pytest.mark.parametrize("field", ["gemm_efficiency", "hbm_efficiency"])
def test_efficiencies_are_fractions(field):
    with pytest.raises(ValueError, match=field):
        TPUV4.replace(**{field: 1.2})


def test_from_dict_rejects_unknown_fields():
    with pytest.raises(ValueError, match="frequency"):
        Accelerator.from_dict({**TPUV4.to_dict(), "frequency": 1})


def test_unknown_preset_suggests_the_closest_name():
    with pytest.raises(UnknownPresetError, match="Did you mean 'tpuv4'"):
        get_preset("tpu-v4")
    assert get_preset(" TPUv4 ") == TPUV4


def test_cli_json_has_the_contract_keys(capsys):
    assert main(["--preset", "tpuv4", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    for key in ("preset", "peak_flops", "area", "area_budget", "space_size"):
        assert key in info
    assert info["area"] == pytest.approx(info["area_budget"])
    assert info["space_size"] > 1000 and info["in_space"] is True


def test_cli_table_and_unknown_preset():
    ok = subprocess.run([sys.executable, "-m", "phaze_env.hardware", "--preset", "a100"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "TFLOP/s" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "phaze_env.hardware", "--preset", "nope"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stdout == ""
    assert len(bad.stderr.strip().splitlines()) == 1 and "nope" in bad.stderr
