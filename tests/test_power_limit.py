"""A rival whose modelled power at its nominal clock exceeds its published power limit (TDP / TBP) runs, as the real
chip does under its power management, at the clock that meets the limit (``cost.power_capped``,
``system.rival_chip``): its throughput falls instead of its power rising above the limit."""

from __future__ import annotations

import pytest

from phaze_env.hardware import cost, energy
from phaze_env.hardware.accelerator import get_preset
from phaze_env.hardware.system import (RIVAL_TOPOLOGIES, SystemBudget, mi300x_engine_clock_hz, reference_point,
                                       rival_chip)

MI300X_CLOCK_BAND = (1.0, 1.5)
"""The stated band of the capped clock at the default V–f exponent (k = 1, the upper end of its 0–1 range) over the
measured BF16 median: the TDP-like model errs high, in the rival's favour (every unit at the top bin's energy per
event, no data-toggle or boost-voltage term), by under 50 %."""


capped_mi300x_clock_hz = mi300x_engine_clock_hz


def test_the_mi300x_rival_draws_its_750_w_tbp_at_a_lower_clock_near_the_measured_one():
    nominal = cost.preset_estimate("mi300x").total_power_w
    accelerator, system = rival_chip("mi300x")
    capped = cost.chip_estimate(accelerator, system)
    assert nominal > cost.MI300X_POWER_W  # the model at 2.1 GHz: over the TBP, what the cap corrects
    assert capped.total_power_w <= cost.MI300X_POWER_W + 1e-6
    assert capped.total_power_w == pytest.approx(cost.MI300X_POWER_W, rel=1e-9)
    ratio = capped_mi300x_clock_hz() / cost.MI300X_GEMM_MEDIAN_CLOCKS_HZ["bf16"]
    assert MI300X_CLOCK_BAND[0] < ratio < MI300X_CLOCK_BAND[1], ratio
    # the same silicon: die area and cost unmoved; the peak rates fall with the clock
    assert capped.die_area_mm2 == pytest.approx(cost.preset_estimate("mi300x").die_area_mm2, rel=1e-12)
    assert capped.total_cost_usd == pytest.approx(cost.preset_estimate("mi300x").total_cost_usd, rel=1e-12)
    assert accelerator.peak_flops / get_preset("mi300x").peak_flops == pytest.approx(
        accelerator.clock_hz / get_preset("mi300x").clock_hz)


def test_the_measured_mi300x_clocks_lie_within_the_models_voltage_frequency_range(monkeypatch):
    """Over the V–f exponent's stated range (k = 0: power ∝ f, static fixed; k = 1: dynamic ∝ f³) the capped clock
    spans the blog's measured medians (FP16, BF16, FP8)."""
    clocks = {}
    for exponent in (0.0, 1.0):
        monkeypatch.setattr(energy, "VOLTAGE_FREQUENCY_EXPONENT", exponent)
        clocks[exponent] = capped_mi300x_clock_hz()
    assert clocks[0.0] < min(cost.MI300X_GEMM_MEDIAN_CLOCKS_HZ.values()) < max(cost.MI300X_GEMM_MEDIAN_CLOCKS_HZ.values()) < clocks[1.0]


@pytest.mark.parametrize("name", ["a100", "h100", "tpuv4", "tpuv5p"])
def test_the_limit_is_a_no_op_for_a_chip_within_or_without_one(name):
    """A100 and H100 are modelled under their TDPs; TPU v4's published power is a measured maximum, not a limit;
    TPU v5p has none: each runs at its preset's clock, as before."""
    accelerator, system = rival_chip(name)
    assert accelerator == get_preset(name)
    assert system == cost.SYSTEMS[name][0]


def test_a_limit_above_the_chips_power_returns_the_chip_unchanged():
    acc, system = get_preset("mi300x"), cost.SYSTEMS["mi300x"][0]
    assert cost.power_capped(acc, system, 2000.0) == (acc, system)
    assert cost.power_capped(acc, system, None) == (acc, system)


@pytest.mark.parametrize("name", ["b200", "gb200"])
def test_blackwell_over_its_tdp_is_capped_to_it_too(name):
    """The model puts B200 and GB200 6–8 % over their TDPs (1,000 / 1,200 W): they run at a clock a few % lower."""
    limit = cost.PUBLISHED[name].power_w
    assert cost.preset_estimate(name).total_power_w > limit
    accelerator, system = rival_chip(name)
    assert cost.chip_estimate(accelerator, system).total_power_w == pytest.approx(limit, rel=1e-9)
    assert 0.9 < accelerator.clock_hz / get_preset(name).clock_hz < 1.0


def test_every_rival_point_is_within_its_published_limit():
    for name in RIVAL_TOPOLOGIES:
        limit = cost.PUBLISHED[name].power_limit_w
        if limit is not None:
            assert reference_point(name, SystemBudget(power_w=1e6)).estimate.total_power_w <= limit + 1e-6, name


def test_a_limit_below_the_chips_clockless_power_is_one_clear_error():
    acc, system = get_preset("mi300x"), cost.SYSTEMS["mi300x"][0]
    with pytest.raises(cost.PowerLimitError, match=r"power limit of 100 W is below .* no clock meets it"):
        cost.power_capped(acc, system, 100.0)
    for bad in (0.0, -5.0, float("nan"), True, "750"):
        with pytest.raises(ValueError, match="power limit must be a positive power"):
            cost.power_capped(acc, system, bad)
