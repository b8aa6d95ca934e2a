"""Accelerator value, presets, area model and the CLI."""

import json
import subprocess
import sys

import pytest

from phaze_env.hardware import area
from phaze_env.hardware.__main__ import main
from phaze_env.hardware.accelerator import PRESETS, TPUV4, Accelerator, UnknownPresetError, get_preset


def test_tpuv4_preset_matches_public_figures():
    acc = get_preset("tpuv4")
    assert (acc.num_tc, acc.tc_width, acc.tc_depth, acc.num_vc, acc.vc_width, acc.buffer_mb) == (8, 128, 128, 2, 128, 128)
    assert acc.hbm_gb == 32 and acc.hbm_bandwidth_Bps == 1.2e12 and acc.clock_hz == 1.05e9 and acc.bytes_per_element == 2
    assert acc.peak_flops == 2 * 8 * 128 * 128 * 1.05e9
    assert acc.peak_flops == pytest.approx(275e12, rel=0.01)


def test_tpuv4_area_is_plausible():
    # The whole-die estimate should be TPUv4-sized (≈ 400 mm², below 600 mm²); the searched part is a share of it.
    assert 330 <= TPUV4.die_area_mm2 <= 600
    assert 0.4 * TPUV4.die_area_mm2 < TPUV4.area_mm2 < TPUV4.die_area_mm2


def test_area_grows_with_every_component():
    base = TPUV4.area_mm2
    for field, value in (("num_tc", 16), ("tc_width", 256), ("tc_depth", 256), ("num_vc", 4), ("vc_width", 256), ("buffer_mb", 256)):
        assert TPUV4.replace(**{field: value}).area_mm2 > base, field


def test_area_matches_the_documented_formula():
    expected = (8 * (128 * 128 * area.MAC_AREA_MM2 + 256 * area.TC_EDGE_AREA_MM2_PER_LANE + area.TC_CORE_OVERHEAD_MM2)
                + 2 * (128 * area.VC_LANE_AREA_MM2 + area.VC_CORE_OVERHEAD_MM2) + 128 * area.SRAM_AREA_MM2_PER_MB)
    assert TPUV4.area_mm2 == pytest.approx(expected)


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_round_trip_through_json(name):
    acc = get_preset(name)
    assert Accelerator.from_dict(json.loads(json.dumps(acc.to_dict()))) == acc
    assert acc.peak_flops > 0 and acc.area_mm2 > 0


def test_approximate_gpu_presets_have_published_peaks():
    assert get_preset("a100").peak_flops == pytest.approx(312e12, rel=0.02)
    assert get_preset("h100").peak_flops == pytest.approx(989e12, rel=0.05)
    assert get_preset("tpuv4i").peak_flops == pytest.approx(138e12, rel=0.01)


@pytest.mark.parametrize("field", ["num_tc", "tc_width", "tc_depth", "num_vc", "vc_width", "buffer_mb"])
@pytest.mark.parametrize("bad", [0, -4, 3, 96])
def test_invalid_powers_of_two_name_the_field(field, bad):
    with pytest.raises(ValueError, match=field):
        TPUV4.replace(**{field: bad})


@pytest.mark.parametrize("field", ["hbm_gb", "hbm_bandwidth_Bps", "clock_hz", "bytes_per_element"])
def test_non_positive_numbers_name_the_field(field):
    with pytest.raises(ValueError, match=field):
        TPUV4.replace(**{field: 0})


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
