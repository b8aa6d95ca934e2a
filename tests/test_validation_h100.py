"""H100 runs in bf16 and FP8 and the same stack's runs on A100 and H100 (experiments.validation_cases), predicted
by experiments.validate: every H100 case within ±15 % of its published throughput (one of them the calibration of
Megatron-LM's H100 efficiency), the FP8 speed-up over bf16 of the same plan within ±15 % (±5 % a known gap), and every
cross-chip ratio
within ±10 % (one row the calibration of the ratio stack's per-chip efficiencies) — except the known gaps, held as
strict xfails so that closing one is noticed (docs/validation.md explains each)."""

from __future__ import annotations

import pytest

from experiments.validation_fit import fit_ratio_efficiency, plan_of, predict, predict_ratio, published_time_s
from experiments.validation_report import STACK_GAPS as VALIDATE_STACK_GAPS
from experiments.validation_stats import RATIO_TOLERANCE, TOLERANCE, fp8_speedups
from experiments.validation_cases import H100_CASES, RATIO_CASES, get_case
from phaze_env.cluster import get_cluster
from phaze_env.stacks import get_stack

FP8_SPEEDUP_TOLERANCE = 0.05
NEMO_2407 = ("nemo2407-llama2-7b-fp8", "nemo2407-llama2-13b-fp8")
# The H100 rows outside ±15 % for a cause found and stated in experiments.validation_report.STACK_GAPS (the Llama 3
# paper's unpublished FLOP convention and stack; NeMo 24.03's Llama 2 7B FP8 rows at 128K–1M tokens, which the
# profile over-predicts alike at 4K without CP: experiments.long_context_gap).
CONVENTION_GAPS = {case.name for case in H100_CASES if case.name in VALIDATE_STACK_GAPS}
DGXC = [case for case in H100_CASES if case.name.startswith("dgxc-")]


@pytest.mark.parametrize("case", DGXC, ids=lambda c: c.name)
def test_case_is_the_published_plan(case):
    assert case.accelerator == "h100" and case.cluster == "dgx-h100"
    assert case.tensor * case.pipeline * case.data == case.n_devices
    assert case.global_batch == 2 * case.n_devices  # the recipe: 16 sequences per 8-GPU node
    assert case.microbatches_per_replica * case.data * case.microbatch == case.global_batch
    assert str(plan_of(case)).startswith(f"t4p8d{case.n_devices // 32}m1v12") and plan_of(case).zero == 1
    assert get_case(case.name) == case and case.number_format in case.name
    step_s = float(case.source.split("training step time ")[1].split(" s")[0])
    assert published_time_s(case) == pytest.approx(step_s)


def test_the_h100_efficiency_is_the_stack_s_not_the_cluster_preset_s():
    """The dgx-h100 preset stays at 1 (the system space and README runs are unchanged); the Megatron-LM profile carries
    its H100 fit, whose calibration run is one MLPerf v3.1 case (NeMo's own GPT model), and Megatron-Core's its own,
    fitted to a Megatron-Bridge run (so every DGXC, Llama-2 and MoE case is held out)."""
    assert get_cluster("dgx-h100", 8).stack.framework_efficiency == 1.0
    fit = get_stack("megatron-lm").fit_on("h100")
    calibration = get_case(fit.calibration)
    assert calibration.campaign.startswith("mlperf-v3.1-") and calibration.stack == "megatron-lm"
    assert 0 < fit.framework_efficiency < 1
    core = get_stack("megatron-core").fit_on("h100")
    assert get_case(core.calibration).name.startswith("bridge") and not any(case.name == core.calibration
                                                                            for case in DGXC)


def test_llama2_cases_carry_nemo_figures():
    for name in NEMO_2407:
        case = get_case(name)
        tokens_s = float(case.source.split(" tokens/s per GPU")[0].rsplit(": ", 1)[1])
        assert case.published == pytest.approx(tokens_s * case.n_devices / case.seq_len)
        assert case.tensor * case.pipeline * case.data == case.n_devices and case.number_format == "fp8"


@pytest.fixture(scope="module")
def h100_predictions():
    return [predict(case) for case in H100_CASES]


@pytest.mark.slow
def test_every_modelled_h100_case_is_within_tolerance(h100_predictions):
    for prediction in h100_predictions:
        if prediction.case.name not in CONVENTION_GAPS:
            assert prediction.error is not None and abs(prediction.error) <= TOLERANCE, prediction
    within = [p for p in h100_predictions if p.error is not None and abs(p.error) <= TOLERANCE]
    assert len(within) >= 3 and any(p.case.number_format == "fp8" for p in within)


GAP_REASONS = {name: "a cause found and stated in experiments.validation_report.STACK_GAPS (an unpublished FLOP "
                     "convention and stack, or the profile's gap on a hidden-4096 FP8 model at any length)"
               for name in CONVENTION_GAPS}


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=reason))
                                  for name, reason in sorted(GAP_REASONS.items())])
def test_gap_case_is_within_tolerance(name, h100_predictions):
    prediction = next(p for p in h100_predictions if p.case.name == name)
    assert prediction.error is not None and abs(prediction.error) <= TOLERANCE, prediction


@pytest.mark.slow
def test_every_dgxc_plan_fits_on_balanced_stages(h100_predictions):
    """NeMo's fused bias-GeLU keeps only its input (``nemo-gpt3-175b``): every published plan, FP8 with its weight
    copies at 4-way ZeRO-1 included, fits 80 GiB with the recipe's 12 layers per stage (the embedding and the head on
    the end stages); traced with HF's eight-operator gelu_new, the 128-GPU FP8 plan did not fit."""
    for prediction in h100_predictions:
        if prediction.case in DGXC:
            assert prediction.predicted is not None, prediction
            assert prediction.layers_per_stage == (13, 12, 12, 12, 12, 12, 12, 13), prediction


@pytest.mark.slow
def test_fp8_speedup_over_bf16_is_over_predicted_within_its_known_bound(h100_predictions):
    """On ``megatron-core`` (the model the DGX Cloud runs trained) FP8 runs ahead of its bf16 twin by more than
    published: within 15 %, not within the 5 % held while the rows ran ``megatron-lm`` with an efficiency of their own
    (docs/fidelity.md, 'One H100 profile?': the FP8 speed-up's known gap, the strict xfail below)."""
    rows = [row for row in fp8_speedups(h100_predictions) if row[0].startswith("dgxc-")]
    assert len(rows) == len(DGXC) // 2
    for name, published, predicted in rows:
        assert 1.3 < published < 1.6, name  # the recipe's tables: 1.42-1.48x
        assert published < predicted < published * (1 + TOLERANCE), name


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="megatron-core over-predicts FP8's speed-up over bf16 (1.60x against 1.42-1.48x "
                                       "published): docs/fidelity.md, 'One H100 profile?'")
def test_fp8_speedup_over_bf16_matches_the_published(h100_predictions):
    for name, published, predicted in fp8_speedups(h100_predictions):
        if name.startswith("dgxc-"):
            assert predicted == pytest.approx(published, rel=FP8_SPEEDUP_TOLERANCE), name


@pytest.mark.slow
def test_the_llama31_fp8_speed_ups_of_one_plan_are_near_the_published(h100_predictions):
    """The DGX Cloud Llama 3.1 pairs of one plan and scale (8B and 405B in both releases, 70B in v25.02; v25.04's 70B
    FP8 runs another plan), on megatron-core: each FP8-over-bf16 speed-up within 5 % of the published one but
    v25.04's 8B rows at 32 GPUs and more (+5.4 … +6.5 % measured on 2026-12-07: their published speed-up falls with
    scale, 1.315× → 1.292×, the FP8 step growing where the bf16 one does not), which stay within 7 %."""
    rows = [row for row in fp8_speedups(h100_predictions) if "llama31" in row[0]]
    assert len(rows) == 22 and not any("2504-llama31-70b" in name for name, *_ in rows)
    for name, published, predicted in rows:
        wide = name.startswith("dgxc2504-llama31-8b-")
        assert predicted == pytest.approx(published, rel=0.07 if wide else FP8_SPEEDUP_TOLERANCE), name


@pytest.mark.slow
@pytest.mark.parametrize("case", RATIO_CASES, ids=lambda c: c.name)
def test_cross_chip_ratio_is_within_tolerance(case):
    prediction = predict_ratio(case)
    assert prediction.error is not None and abs(prediction.error) <= RATIO_TOLERANCE, prediction


def test_ratio_cases_run_one_stack_fitted_on_one_row_per_chip():
    """Both chips of every ratio case run the same stack, whose efficiency on each chip is fitted to the same row
    (so the other rows' ratios are held out), with a fused attention kernel on both."""
    (stack,) = {case.stack for case in RATIO_CASES}
    fits = [get_stack(stack).fit_on(chip) for chip in ("a100", "h100")]
    assert all(fit is not None and fit.attention_efficiency > 0 for fit in fits)
    (calibration,) = {fit.calibration for fit in fits}
    assert calibration in {case.name for case in RATIO_CASES}


@pytest.mark.slow
@pytest.mark.parametrize("chip", ["a100", "h100"])
def test_ratio_stack_efficiency_is_the_fit_to_its_calibration_row(chip):
    fit = get_stack(RATIO_CASES[0].stack).fit_on(chip)
    case = next(case for case in RATIO_CASES if case.name == fit.calibration)
    assert fit.framework_efficiency == pytest.approx(fit_ratio_efficiency(case, chip), abs=0.005)
    assert predict_ratio(case).tokens_s[chip] == pytest.approx(case.published[chip], rel=0.01)


# NumParams column of the llm-foundry tables (same source as the cases): the stand-in must have the MPT's size.
LLM_FOUNDRY_PARAMS = {"llm-foundry-mpt-1b-s1024": 1_313_853_440, "llm-foundry-mpt-1b-s4096": 1_320_144_896}


@pytest.mark.slow
@pytest.mark.parametrize("name", LLM_FOUNDRY_PARAMS)
def test_ratio_workload_has_the_published_size(name):
    from phaze_env.workloads import model_graph

    case = next(case for case in RATIO_CASES if case.name == name)
    params = model_graph(case.workload, seq_len=case.seq_len, microbatch=1, tensor_width=1).params_total
    assert params == pytest.approx(LLM_FOUNDRY_PARAMS[name], rel=1e-3)


def test_fp8_compute_at_is_counted_on_the_bf16_peak_it_names():
    """Evaluation.peak_flops is an FP8 design's FP8 peak (the basis of its MFU); the validation note's "compute at x %
    of the bf16 peak" divides by the bf16 peak it names, so its figures did not move with the MFU basis."""
    from experiments.validation_fit import case_accelerator, case_cluster, compute_efficiency
    from phaze_env.evaluate import evaluate

    case = get_case("nemo2407-llama2-7b-fp8")
    accelerator = case_accelerator(case)
    evaluation = evaluate(case.workload, accelerator, case_cluster(case), plan=plan_of(case), seq_len=case.seq_len)
    assert accelerator.number_format == "fp8" and evaluation.peak_flops == 2 * accelerator.peak_flops
    flops = evaluation.mfu * evaluation.peak_flops * evaluation.plan.time_per_batch_s
    assert compute_efficiency(case, evaluation) == pytest.approx(
        flops / (evaluation.time_breakdown_s["compute"] * accelerator.peak_flops), rel=1e-12)
    assert "of the bf16 peak" in predict(case).note


# Tokens per second the DGX Cloud Llama 3.1 tables print beside each step time (NVIDIA/dgxc-benchmarking, the commits
# in experiments.validation_cases.DGXC_LLAMA31): a transcription check of the step times and batches.
DGXC_LLAMA31_TOKENS_S = {"dgxc2502-llama31-70b-bf16-64": 71756, "dgxc2502-llama31-70b-bf16-2048": 2260623,
                         "dgxc2502-llama31-70b-fp8-2048": 3053178, "dgxc2502-llama31-405b-bf16-2304": 466527,
                         "dgxc2502-llama31-405b-fp8-576": 187671, "dgxc2504-llama31-8b-bf16-128": 1360683,
                         "dgxc2504-llama31-70b-fp8-2048": 3305855, "dgxc2504-llama31-405b-bf16-512": 106024,
                         "dgxc2504-llama31-405b-fp8-2048": 667883}


@pytest.mark.parametrize("name", sorted(DGXC_LLAMA31_TOKENS_S))
def test_dgxc_llama31_rows_carry_the_tables_throughput(name):
    case = get_case(name)
    assert case.published * case.seq_len == pytest.approx(DGXC_LLAMA31_TOKENS_S[name], rel=2e-3)


def test_dgxc_llama31_tables_are_weak_scaling_series_of_one_plan_each():
    from experiments.validation_cases import DGXC_LLAMA31_CASES
    from phaze_env.workloads import get_workload

    assert len(DGXC_LLAMA31_CASES) == 56
    series: dict[str, list] = {}
    for case in DGXC_LLAMA31_CASES:
        series.setdefault(case.campaign, []).append(case)
        assert case in H100_CASES and case.stack == "megatron-core" and case.seq_len == 8192
        assert case.tensor * case.pipeline * case.context * case.data == case.n_devices
        layers = get_workload(case.workload).num_layers + 2 * bool(case.rules)  # the embedding/loss split: +2
        assert layers % (case.pipeline * case.interleave) == 0, case.name
        release = case.name[4:8]
        assert ("0b71cfda" if release == "2502" else "741c886") in case.source
    assert len(series) == 12
    for members in series.values():
        assert len({(c.tensor, c.pipeline, c.context, c.interleave) for c in members}) == 1
        assert len({c.global_batch / c.data for c in members}) == 1 and len(members) >= 3


@pytest.fixture(scope="module")
def llama31_trend():
    from experiments.validation_cases import DGXC_LLAMA31_CASES
    from experiments.validation_stats import scaling_series

    series = scaling_series([predict(case) for case in DGXC_LLAMA31_CASES])
    return {point.case.name: point for points in series for point in points}


def _llama31_scales():
    from experiments.validation_cases import DGXC_LLAMA31_CASES
    from experiments.validation_report import TREND_GAPS

    firsts = {}
    for case in DGXC_LLAMA31_CASES:
        firsts.setdefault(case.campaign, case.name)
    return [pytest.param(case.name, marks=[pytest.mark.xfail(strict=True, reason=TREND_GAPS[case.name])]
                         if case.name in TREND_GAPS else [])
            for case in DGXC_LLAMA31_CASES if case.name not in firsts.values()]


@pytest.mark.slow
@pytest.mark.parametrize("name", _llama31_scales())
def test_dgxc_llama31_weak_scaling_trend_within_three_points(llama31_trend, name):
    """Each of the twelve series' per-GPU trend within 3 points of the published one at every scale, but the known
    gaps (experiments.validation_report.TREND_GAPS: v25.02's 70B FP8 series at 1,024 and 2,048 GPUs)."""
    from experiments.validation_stats import TREND_TOLERANCE

    assert abs(llama31_trend[name].difference) <= TREND_TOLERANCE, llama31_trend[name]


@pytest.mark.slow
def test_dgxc_llama31_rows_are_within_tolerance(llama31_trend):
    from experiments.validation_cases import DGXC_LLAMA31_CASES

    for case in DGXC_LLAMA31_CASES:
        error = predict(case).error
        assert error is not None and abs(error) <= TOLERANCE, (case.name, error)
