"""Published training runs (experiments.validation_cases) predicted by the model (experiments.validate).

The dgx-a100 preset's framework efficiency is fitted to one case (``CALIBRATION_CASE``); every other case
is held out and must land within the issue's ±15 %. The relative effect of the plan features — the speed-up of selective
recompute + sequence parallelism over full recompute that Korthikanti et al. 2022 measured on the same
runs — is held too.
"""

from __future__ import annotations

import pytest

from experiments.validation_cases import get_case
from experiments.validation_fit import CALIBRATION_CASE, metric_value, predict, published_time_s
from experiments.validation_stats import TOLERANCE
from experiments.validation_cases import CASES
from phaze_env.workloads import get_workload
from test_validation_cases import A100_PEAK_FLOPS, korthikanti_model_flops

MODELLED = [case.name for case in CASES if case.cluster != "tpuv4-pod"]  # PaLM spans several pods: not modelled


def authors_metric(case, time_per_batch_s: float) -> float:
    """The case's metric as its authors computed it, written from the papers (not from experiments.validate)."""
    if case.metric == "tflops_per_device":  # Narayanan et al. 2021 eq. 3: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))
        cfg = get_workload(case.workload).config_dict
        b, s, l, h, v = case.global_batch, case.seq_len, cfg["n_layer"], cfg["n_embd"], cfg["vocab_size"]
        return 96 * b * s * l * h**2 * (1 + s / (6 * h) + v / (16 * l * h)) / (time_per_batch_s * case.n_devices) / 1e12
    if case.metric == "mfu":
        return korthikanti_model_flops(case) / (time_per_batch_s * case.n_devices * A100_PEAK_FLOPS)
    return case.global_batch / time_per_batch_s  # sequences per second


@pytest.mark.parametrize("name", MODELLED)
def test_metric_is_the_authors_formula(name):
    case = get_case(name)
    assert case.accelerator == "a100"  # the peak authors_metric divides by
    for time_s in (0.5, 13.75):
        assert metric_value(case, time_s) == pytest.approx(authors_metric(case, time_s), rel=1e-12)


def test_the_calibration_case_is_fitted():
    """``MEGATRON_A100_EFFICIENCY`` reproduces the case it was fitted to (re-fit it when the model changes)."""
    prediction = predict(get_case(CALIBRATION_CASE))
    assert abs(prediction.error) <= 0.01, prediction


@pytest.mark.parametrize("name", [name for name in MODELLED if name != CALIBRATION_CASE])
def test_held_out_case_is_within_tolerance(name):
    prediction = predict(get_case(name))
    assert prediction.error is not None and abs(prediction.error) <= TOLERANCE, prediction
    assert prediction.predicted == pytest.approx(authors_metric(prediction.case, prediction.time_per_batch_s))


@pytest.mark.parametrize("size", ["22b", "175b", "530b", "1t"])
def test_selective_recompute_and_sp_speedup_matches_korthikanti(size):
    full, selective = predict(get_case(f"korthikanti22-{size}-full")), predict(get_case(f"korthikanti22-{size}-selective-sp"))
    assert full.time_per_batch_s and selective.time_per_batch_s
    predicted = full.time_per_batch_s / selective.time_per_batch_s
    published = published_time_s(full.case) / published_time_s(selective.case)
    assert predicted == pytest.approx(published, rel=0.05), (predicted, published)


def test_the_why_the_gap_figures_are_computed_each_run(monkeypatch):
    """The report's "Why the gap" prose once typed its figures by hand ("17 of the 18 … cases were over-predicted, by
    +9.5 % to +43.8 % (mean absolute error 24.7 %)", "21–26 % too fast"), and they went stale: they are the cases
    re-evaluated at framework efficiency 1 (and Megatron-DeepSpeed's at Megatron-LM's factor) on every run."""
    from experiments import validation_report
    from experiments.validation_stats import EfficiencySensitivity

    monkeypatch.setattr(validation_report, "at_efficiency",
                        lambda predictions, stack, efficiency, **fields: EfficiencySensitivity((0.2, 0.4, -0.1), (0.7, 0.8, 0.9)))
    unfitted = validation_report._unfitted_text([])
    assert "median 80% of peak" in unfitted and "2 of the 3 Megatron-LM A100 cases" in unfitted
    assert "+20.0% to +40.0%" in unfitted and "mean absolute error 23.3%" in unfitted
    assert "at -10.0% to +40.0%" in validation_report._borrowed_factor_text([])
    monkeypatch.setattr(validation_report, "at_efficiency", lambda *args, **fields: EfficiencySensitivity((), ()))
    assert validation_report._unfitted_text([]) == validation_report._borrowed_factor_text([]) == ""  # a subset run
