"""The GEMM-waves what-if (experiments.gemm_waves): on a fit that already prices the waves it is the identity, and bad
input is one clear line."""

from __future__ import annotations

import pytest

from experiments import gemm_waves


@pytest.mark.slow
def test_the_what_if_on_a_fit_that_prices_the_waves_reproduces_it():
    """Megatron-LM's A100 fit was fitted with the waves over 108 SMs: refitted with the same waves, it comes back to its
    own efficiency, and a held-out case's error is the same before and after."""
    result = gemm_waves.waves_what_if("megatron-lm", "a100", 108, names=("korthikanti22-530b-full",))
    assert result.refitted == pytest.approx(result.efficiency, abs=1e-3)
    (now, waved), = result.errors.values()
    assert waved == pytest.approx(now, abs=2e-3)
    assert result.lines()[0].startswith("megatron-lm on a100, waves over 108 SMs: efficiency 0.878 -> 0.878")
    assert abs(result.calibration_error) < 1e-3 and "calibration korthikanti22-175b-full at it" in result.lines()[0]


@pytest.mark.parametrize("argv, message", [
    (["--stack", "nope", "--chip", "h100", "--sms", "132"], "unknown training stack 'nope'"),
    (["--stack", "megatron-lm", "--chip", "tpuv4", "--sms", "132"], "has no fit on 'tpuv4'"),
    (["--stack", "megatron-lm", "--chip", "h100", "--sms", "0"], "sms must be a positive number"),
])
def test_bad_input_is_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        gemm_waves.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
