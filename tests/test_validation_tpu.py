"""TPU v4 runs (experiments.validation_cases.TPU_CASES) against the jax-xla profile (phaze_env.stacks).

MaxText's published 22B and 52B runs: the profile's efficiency is fitted to 22B on one v4-128 slice and must
reproduce it; every other predicted run must land within the issue's ±15 %. The metric is MaxText's own count
(6·N FLOPs per token over 275 TFLOP/s), written here from MaxText's model shapes, not from experiments.validate.
The multi-slice runs (hybrid sharding across the data-centre network) keep MaxText's published per-chip trend.
PaLM (12-way model parallelism) is listed as data with the reason.
"""

from __future__ import annotations

import pytest


from experiments.validation_fit import case_cluster, metric_value, plan_of, predict
from experiments.validation_stats import TOLERANCE, TREND_TOLERANCE, scaling_series
from experiments.validation_cases import TPU_CASES, get_case
from phaze_env.cluster import get_cluster
from phaze_env.evaluate import evaluate
from phaze_env.hardware import get_preset
from phaze_env.stacks import STACKS
from phaze_env.workloads import get_workload

TPUV4_PEAK_FLOPS = 275e12  # Cloud TPU v4 documentation: 275 TFLOP/s bf16 per chip, MaxText's MFU denominator
MAXTEXT_README = {  # README.md at d3f68fe2c: (TFLOP/sec/chip, MFU %)
    "maxtext-22b-1xv4-128": (156, 56.7), "maxtext-22b-2xv4-128": (152, 55.2), "maxtext-22b-4xv4-128": (149, 54.3),
    "maxtext-22b-8xv4-128": (146, 53.2), "maxtext-52b-1xv4-384": (154, 56.0), "maxtext-52b-2xv4-384": (162, 58.9),
}
MAXTEXT = [case for case in TPU_CASES if case.name in MAXTEXT_README]
CALIBRATION = STACKS["jax-xla"].calibration
HELD_OUT = [case for case in TPU_CASES if not case.requires and case.name != CALIBRATION]


def maxtext_params(case) -> int:
    """MaxText's parameter count from its layer shapes: per layer q, k, v, o (hidden × heads·256), the MLP's wi and wo
    (hidden × ffn) and two norm scales; the shared embedding and the final norm once."""
    cfg = get_workload(case.workload).config_dict
    h, heads, ffn, layers, vocab = (cfg[k] for k in ("hidden_size", "num_attention_heads", "intermediate_size",
                                                       "num_hidden_layers", "vocab_size"))
    return layers * (4 * h * heads * 256 + 2 * h * ffn + 2 * h) + vocab * h + h


@pytest.mark.parametrize("case", MAXTEXT, ids=lambda c: c.name)
def test_maxtext_case_is_the_published_run(case):
    tflops, mfu = MAXTEXT_README[case.name]
    assert case.published == pytest.approx(mfu / 100)
    assert abs(tflops * 1e12 / TPUV4_PEAK_FLOPS - case.published) <= 0.5e12 / TPUV4_PEAK_FLOPS  # whole TFLOP/s printed
    assert case.seq_len == get_workload(case.workload).seq_len == 1024
    assert case.tensor * case.pipeline * case.data == case.n_devices and case.microbatches_per_replica == 1
    assert case.n_devices // case.slices in (64, 192) and case.zero == 3 and case.stack == "jax-xla"
    assert case.source


@pytest.mark.slow
@pytest.mark.parametrize("case", MAXTEXT, ids=lambda c: c.name)
def test_metric_is_maxtexts_six_n_count(case):
    assert abs(get_workload(case.workload).published_params / maxtext_params(case) - 1) < 0.01  # "22B", "52B"
    for time_s in (0.5, 11.0):
        authors = 6 * maxtext_params(case) * case.global_batch * case.seq_len / (time_s * case.n_devices * TPUV4_PEAK_FLOPS)
        assert metric_value(case, time_s) == pytest.approx(authors, rel=1e-4)  # the stand-in's norms add biases


@pytest.mark.slow
def test_the_jax_xla_profile_is_fitted_to_one_slice_of_22b():
    prediction = predict(get_case(CALIBRATION))
    assert prediction.kind == "calibration" and abs(prediction.error) <= 0.01, prediction


@pytest.mark.slow
@pytest.mark.parametrize("case", HELD_OUT, ids=lambda c: c.name)
def test_held_out_tpu_run_is_within_tolerance(case):
    prediction = predict(case)
    assert prediction.kind == "held-out"
    assert prediction.error is not None and abs(prediction.error) <= TOLERANCE, prediction


@pytest.mark.parametrize("case", [case for case in TPU_CASES if case.requires], ids=lambda c: c.name)
def test_runs_the_model_cannot_express_are_listed_with_the_reason(case):
    prediction = predict(case)
    assert prediction.predicted is None and prediction.kind == "data" and case.requires in prediction.note
    cluster = get_cluster(case.cluster, case.n_devices, slices=case.slices)  # the system itself is expressible
    assert cluster.network.slices == case.slices and cluster.network.slice_devices * case.slices == case.n_devices


SLICES_22B = [f"maxtext-22b-{slices}xv4-128" for slices in (1, 2, 4, 8)]


@pytest.mark.slow
def test_the_multislice_series_keeps_maxtexts_per_chip_trend():
    """22B on 1, 2, 4, 8 slices (weak scaling): per-chip throughput relative to one slice within 3 points at every
    scale (the issue's target), and falling with the slices as published."""
    (points,) = scaling_series([predict(get_case(name)) for name in SLICES_22B])
    assert [point.case.slices for point in points] == [1, 2, 4, 8]
    assert all(abs(point.difference) <= TREND_TOLERANCE for point in points), points
    for before, after in zip(points, points[1:]):
        assert after.published < before.published and after.predicted < before.predicted


@pytest.mark.slow
def test_an_overlapped_dcn_allreduce_would_lose_nothing():
    """What the jax-xla structure is for: with each layer's gradient-shard all-reduce overlapped with its backward (as
    PyTorch's HYBRID_SHARD does), 8 slices keep > 99.5 % of one slice's per-chip throughput, where MaxText published
    93.8 %; after the backward pass (the profile) the 0.73 s DCN all-reduce is what the series loses."""
    one, eight = get_case(SLICES_22B[0]), get_case(SLICES_22B[-1])

    def per_chip(case, overlapped):
        cluster = case_cluster(case).replace(hybrid_allreduce_overlapped=overlapped)
        evaluation = evaluate(case.workload, get_preset(case.accelerator), cluster, plan=plan_of(case), seq_len=case.seq_len)
        return metric_value(case, evaluation.plan.time_per_batch_s), evaluation.time_breakdown_s["dp_allreduce"]

    (base, _), (overlapped, _), (after, allreduce_s) = per_chip(one, False), per_chip(eight, True), per_chip(eight, False)
    assert overlapped / base > 0.995 and eight.published / one.published < 0.94
    assert after / base == pytest.approx(eight.published / one.published, abs=TREND_TOLERANCE)
    assert allreduce_s == pytest.approx(2 * 7 / 8 * get_workload(eight.workload).published_params * 2 / 64 / 1.648e9, rel=0.05)
