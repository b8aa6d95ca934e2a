"""The figures the validation report's known-gap prose quotes, computed when the report is written (issue 27).

The causes of the known gaps (``TREND_GAPS``, ``STACK_GAPS``, ``MOE_GAPS`` of :mod:`experiments.validation_report`)
are prose templates: every figure in them that the current model predicts (an error, a fitted efficiency, a time of
the predicted step, a memory) is a ``{name}`` field, filled by :data:`FIGURES` ``[name]`` — a small named function of
the report's own predictions (:class:`GapFigures`), or of a re-evaluation the function names — so the prose cannot
disagree with the report's tables. Figures of the past (what an earlier model gave, what a scratch patch measured)
stay text in the templates, dated.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import replace

from experiments import long_context_gap, memory_check, moe_stack_gap, scale_loss
from experiments.validation_cases import H100_CASES, get_case
from experiments.validation_fit import (Prediction, error_with, evaluation_with, fit_efficiency, metric_value,
                                        predict, published_time_s)
from experiments.validation_stats import scaling_series
from phaze_env.evaluate import Evaluation
from phaze_env.stacks import get_stack

GIB = 2**30


# --- how the prose writes a figure ----------------------------------------------------------------------------------
def percent(value: float, digits: int = 0) -> str:
    """``14 %``: a share as the prose writes it."""
    return f"{value:.{digits}%}".replace("%", " %")


def signed_percent(value: float, digits: int = 0) -> str:
    """``+18 %`` / ``−31 %`` (a true minus sign, a space before the per cent, as the prose writes them)."""
    return f"{value:+.{digits}%}".replace("-", "−").replace("%", " %")


def percent_range(values: Iterable[float], digits: int = 0) -> str:
    """The span of ``values`` as the prose writes it: ``+31–35 %`` when both ends round alike in sign, one figure when
    they round equal, else ``−3 % to +4 %``."""
    values = sorted(values)
    low, high = signed_percent(values[0], digits), signed_percent(values[-1], digits)
    if low == high:
        return low
    if low[0] == high[0] and low[0] == "+":
        return f"{low[:-2]}–{high[1:]}"
    return f"{low} to {high}"


def percent_span(values: Iterable[float], digits: int = 1) -> str:
    """``+12.5 % to +18.3 %``: the lowest and the highest of ``values``."""
    values = sorted(values)
    return f"{signed_percent(values[0], digits)} to {signed_percent(values[-1], digits)}"


def number_range(values: Iterable[float], form: str) -> str:
    """``0.36–0.38`` (``form`` a format spec such as ``.2f``): one figure when both ends print alike."""
    values = sorted(values)
    low, high = format(values[0], form), format(values[-1], form)
    return low if low == high else f"{low}–{high}"


# --- the predictions a template reads ---------------------------------------------------------------------------------
class GapFigures(dict):
    """``template.format_map(GapFigures(predictions))``: each ``{name}`` is :data:`FIGURES` ``[name]`` of the report's
    predictions, computed on first use. A case the report did not predict (a ``--cases`` subset) is predicted here."""

    def __init__(self, predictions: Iterable[Prediction]):
        super().__init__()
        self._predictions = {p.case.name: p for p in predictions}
        self._memo: dict[str, object] = {}

    def memo(self, key: str, compute: Callable[[], object]):
        """``compute()`` once per report (a fit or a table that several figures quote)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def prediction(self, name: str) -> Prediction:
        if name not in self._predictions:
            self._predictions[name] = predict(get_case(name))
        return self._predictions[name]

    def error(self, name: str) -> float:
        error = self.prediction(name).error
        if error is None:
            raise ValueError(f"the gap prose quotes case {name!r}, which is not predicted: {self.prediction(name).note}")
        return error

    def time_s(self, name: str) -> float:
        """The case's predicted time per batch."""
        self.error(name)  # predicted, or why not
        return self.prediction(name).time_per_batch_s

    def __missing__(self, key: str) -> str:
        """The figure, or — when the current model no longer gives it (a quoted case not predicted, a fit or a
        threshold out of reach) — a visible mark in its place saying why, so the prose never quotes a stale value."""
        figure = FIGURES[key]  # KeyError: a template names a figure nobody defined
        try:
            value = figure(self)
        except ValueError as exc:
            value = f"[not computable with the current model: {exc}]"
        self[key] = value
        return value


def render(template: str, figures: GapFigures) -> str:
    """A gap's prose with its figures filled in."""
    return template.format_map(figures)


# --- MT-NLG's strong-scaling series (Smith et al. 2022) -----------------------------------------------------------
MTNLG = scale_loss.SERIES[scale_loss.FIT_SERIES]
NARAYANAN_530B, NARAYANAN_175B = (names for label, names in scale_loss.SERIES.items() if label != scale_loss.FIT_SERIES)
BLOOM = "bigscience22-bloom-176b"


def _scales(figures: GapFigures, names: list[str]) -> list[scale_loss.Scale]:
    return scale_loss.series_scales(names, figures.prediction)


def _breakdown_s(name: str, term: str) -> float:
    """One term of the predicted step of case ``name`` (its pinned plan re-evaluated: the report keeps no breakdown)."""
    return evaluation_with(get_case(name)).plan.time_breakdown_s[term]


def _mtnlg_fixed_s(figures: GapFigures) -> str:
    """The model's part of MT-NLG's step that does not shrink with ``d`` (:func:`scale_loss.fixed_and_per_microbatch_s`)."""
    scales = _scales(figures, MTNLG)
    return f"{scale_loss.fixed_and_per_microbatch_s(scales, [s.predicted_s for s in scales])[0]:.1f}"


def _slowest_device_sigma(figures: GapFigures) -> float:
    """The spread of a GPU's speed at which a job paced by its slowest GPU closes MT-NLG's trend
    (:func:`experiments.scale_loss.sigma_to_close`)."""
    sigma = figures.memo("slowest_device_sigma",
                         lambda: scale_loss.sigma_to_close(_scales(figures, MTNLG), scale_loss.with_slowest_device))
    if sigma is None:
        raise ValueError("no spread of a GPU's speed up to 1000 % closes MT-NLG's trend")
    return sigma


def _slowest_device_held_out_pt(figures: GapFigures) -> str:
    """The Megatron-LM series' worst trend difference at that spread (held out: nothing is fitted to them)."""
    sigma = _slowest_device_sigma(figures)
    worst = [scale_loss.worst_difference(scales, scale_loss.with_slowest_device(scales, sigma))
             for scales in (_scales(figures, NARAYANAN_530B), _scales(figures, NARAYANAN_175B))]
    return number_range([100 * w for w in worst], ".1f")


def _mtnlg_efficiency_at_microbatch_2(figures: GapFigures) -> float:
    """The Megatron-DeepSpeed efficiency fitted at 280 nodes if the series' unpublished microbatch were 2."""
    return figures.memo("mtnlg_mb2", lambda: fit_efficiency(replace(get_case(MTNLG[0]), microbatch=2)))


# --- NVIDIA's GPT-3 175B weak-scaling series (DGX Cloud, bf16 and FP8) ---------------------------------------------
DGXC = {fmt: [f"dgxc-gpt3-175b-{fmt}-{n}" for n in (128, 256, 512, 1024, 2048)] for fmt in ("bf16", "fp8")}


def _trend(figures: GapFigures, names: list[str]):
    (points,) = scaling_series([figures.prediction(name) for name in names])
    return points


DGXC_405B = "dgxc2504-llama31-405b-bf16-2048"
"""NVIDIA's own stack training Llama 3.1 405B at 8K tokens in bf16 on H100 (DGX Cloud v25.04, 2,048 GPUs)."""


def _dgxc405_tflops() -> float:
    """Its published throughput as Megatron-Core counts TFLOP/s per GPU (the Llama 3 paper cases' count)."""
    case = get_case(DGXC_405B)
    return metric_value(replace(case, metric="mcore_tflops_per_device"), published_time_s(case))


LLAMA70_2502_FP8 = ("dgxc2502-llama31-70b-fp8-64", "dgxc2502-llama31-70b-fp8-2048")
"""The ends of DGX Cloud v25.02's Llama 3.1 70B FP8 weak-scaling series (Apex's distributed Adam)."""


def _llama70_added(figures: GapFigures) -> str:
    """What the model adds to the series' step from its smallest to its largest scale."""
    first, last = LLAMA70_2502_FP8
    return f"{figures.time_s(last) - figures.time_s(first):+.2f} s"


def _llama70_exposed_pt(figures: GapFigures) -> str:
    """The series' trend difference at its largest scale with the data-parallel collectives exposed (points)."""
    def per_device(name: str) -> float:  # the predicted rate per device with the collectives exposed, over published
        case = get_case(name)
        return (1 + error_with(case, dp_comm_overlap=False)) * case.published / case.n_devices
    first, last = LLAMA70_2502_FP8
    published = (get_case(last).published / get_case(last).n_devices) / (get_case(first).published
                                                                           / get_case(first).n_devices)
    return f"{100 * (per_device(last) / per_device(first) - published):.1f}"


def _dgxc_published_growth(figures: GapFigures) -> str:
    """How much the published step grows from the smallest to the largest scale, in each format."""
    return ", ".join(f"{fmt} {published_time_s(get_case(names[-1])) - published_time_s(get_case(names[0])):.2f} s"
                     for fmt, names in DGXC.items())


def _dgxc_added_s(figures: GapFigures) -> str:
    """What the model adds to the step from the smallest to the largest scale (the same plan per replica, so only
    the data-parallel terms differ), in each format: one figure when the two agree."""
    added = {fmt: figures.time_s(names[-1]) - figures.time_s(names[0]) for fmt, names in DGXC.items()}
    texts = {fmt: f"{value:+.2f} s" for fmt, value in added.items()}
    return texts["fp8"] if len(set(texts.values())) == 1 else ", ".join(f"{fmt} {t}" for fmt, t in texts.items())


# --- NVIDIA's MLPerf Training v3.1 GPT-3 175B runs (16 and 8 microbatches per replica) ----------------------------
MIXTRAL_RELEASES = ("mcore-mixtral-8x7b", "mcore-v09-mixtral-8x7b")
"""One Mixtral plan published on Megatron-Core v0.8 and on v0.9."""

MLPERF_PAIR = ("mlperf31-gpt3-175b-fp8-8192", "mlperf31-gpt3-175b-fp8-10240")
"""Two scales of the same plan, 16 and 8 microbatches per replica and the same gradient bytes per GPU: their step
times split into a time per microbatch and a part that does not shrink with the microbatches
(:func:`experiments.scale_loss.split_by_microbatches`)."""


def _mlperf_split(figures: GapFigures, stack: str | None) -> tuple[float, float]:
    """The published split (``stack`` None) or the model's on ``stack``."""
    cases = [get_case(name) for name in MLPERF_PAIR]
    if stack is None:
        times = tuple(published_time_s(c) for c in cases)
    elif stack == cases[0].stack:
        times = tuple(figures.time_s(name) for name in MLPERF_PAIR)
    else:
        def time_on(case):
            evaluation = evaluation_with(replace(case, stack=stack))
            if not evaluation.feasible:
                raise ValueError(f"{case.name} on {stack}: {evaluation.reason}")
            return evaluation.plan.time_per_batch_s
        times = figures.memo(f"mlperf_times_{stack}", lambda: tuple(time_on(c) for c in cases))
    fixed, per_microbatch = scale_loss.split_cases(cases, times)
    return per_microbatch, fixed


MLPERF30 = tuple(case.name for case in H100_CASES if case.campaign.startswith("mlperf-v3.0-"))
"""MLPerf v3.0's runs (every submitter's), by their campaign."""
MLPERF_RELEASES_768 = ("mlperf30-gpt3-175b-fp8-768", "mlperf31-gpt3-175b-fp8-768")
"""The same plan, batch and scale on NVIDIA's DGX H100 in both rounds: the software release's own speed-up."""


def _mlperf_release_ratio() -> str:
    """v3.0's published step over v3.1's at 768 GPUs (the same plan and batch)."""
    older, newer = (published_time_s(get_case(name)) for name in MLPERF_RELEASES_768)
    return f"{older / newer:.3f}"


def _mlperf_per_microbatch_error(figures: GapFigures, stack: str) -> str:
    """The model's time per microbatch on ``stack`` against the published one (a signed percentage)."""
    return signed_percent(_mlperf_split(figures, stack)[0] / _mlperf_split(figures, None)[0] - 1, 1)


# --- Llama 3 405B (Dubey et al. 2024 Table 4) ---------------------------------------------------------------------------
LLAMA3_PAPER_8K = ("llama3-405b-paper-8192", "llama3-405b-paper-16384")
LLAMA3_PAPER_CP = "llama3-405b-paper-16384-cp16"


def _convention_factor() -> float:
    """How much counting the 131K row's scores in full rather than causal moves its figure (count / time)."""
    return 1 / (1 - long_context_gap.score_share(get_case(LLAMA3_PAPER_CP)) / 2)


def _llama3_paper_8k_least(figures: GapFigures) -> str:
    """The smallest of the 8K rows' errors, with the scores counted in full (the table) or causal."""
    errors = [figures.error(n) for n in LLAMA3_PAPER_8K]
    errors += [long_context_gap.causal_count_error(figures.error(n), long_context_gap.score_share(get_case(n)))
               for n in LLAMA3_PAPER_8K]
    return f"{math.floor(100 * min(errors))} %"  # "more than": rounded down


def _llama3_paper_drop_pt(figures: GapFigures) -> str:
    """|predicted − published| relative drop of per-GPU throughput from 8,192 to 16,384 GPUs (percentage points)."""
    small, large = (get_case(n) for n in LLAMA3_PAPER_8K)
    published = large.published / small.published
    predicted = published * (1 + figures.error(large.name)) / (1 + figures.error(small.name))
    return f"{100 * abs(predicted - published):.1f}"


# --- NeMo 24.03's long-context rows (Llama 2 7B FP8, context parallelism) ------------------------------------------
NEMO_CP = [f"nemo2403-llama2-7b-fp8-{k}k-cp{c}" for k, c in ((128, 4), (256, 8), (512, 16), (1024, 32))]


def _nemo_table(figures: GapFigures) -> list[long_context_gap.Row]:
    """Every row of the NeMo long-context table on the validation's profile, each fitted alone (cached per report)."""
    return figures.memo("nemo_table", lambda: long_context_gap.rows(fit=True))


def _nemo_device_table(figures: GapFigures) -> list[long_context_gap.Row]:
    """The same rows with the host never limiting (``host_op_s`` 0): the device side alone."""
    return figures.memo("nemo_device_table", lambda: long_context_gap.rows(fit=True, host_op_s=0.0))


def _bridge_llama3_8b_errors(figures: GapFigures) -> list[float]:
    """Megatron-Bridge's Llama 3 8B rows (hidden 4096, the profile's own releases) on the profile."""
    return figures.memo("bridge_8b", lambda: [predict(long_context_gap.bridge_llama3_8b(*spec)).error
                                              for spec in long_context_gap.BRIDGE_LLAMA3_8B])


def _nemo_over_bridge(figures: GapFigures) -> str:
    """How much slower NeMo 24.03 ran than the profile's own releases on a model of the same width: the table's 4K row
    (no CP) over the mean of Megatron-Bridge's Llama 3 8B rows, as predicted / published."""
    four_k = _nemo_table(figures)[0].error
    return f"{(1 + four_k) / (1 + statistics.mean(_bridge_llama3_8b_errors(figures))):.2f}"


# --- Megatron-Bridge's Llama 3.1 405B rows and the Qwen3-30B-A3B MoE row ----------------------------------------------
BRIDGE_405B = [f"bridge{r}-llama3-405b-fp8-1024" for r in ("2509", "2511", "2602")]
BRIDGE_70B_CALIBRATION = "bridge2509-llama3-70b-fp8-64"
QWEN3_2511 = "bridge2511-qwen3-30b-a3b-fp8"


def _bridge_405b_tp_exposed() -> list[float]:
    """The 405B rows priced with their tensor-parallel collectives exposed, the efficiency refitted so on the 70B
    calibration run."""
    efficiency = fit_efficiency(get_case(BRIDGE_70B_CALIBRATION), tp_comm_overlap=False)
    return [error_with(get_case(name), tp_comm_overlap=False, framework_efficiency=efficiency) for name in BRIDGE_405B]


def _qwen3_fullest_device() -> memory_check.StageTerms:
    """The fullest device of the Qwen3 row's published plan, term by term (:func:`memory_check.stage_terms`)."""
    return max(memory_check.stage_terms(evaluation_with(get_case(QWEN3_2511))), key=lambda stage: stage.total)


def _qwen3_chunks_in_flight() -> str:
    evaluation = evaluation_with(get_case(QWEN3_2511))
    return f"{_qwen3_fullest_device().in_flight_microbatches * evaluation.plan.interleave:.0f}"


QWEN3_235B_PLAIN = "mcore-qwen3-235b-tp2-ep32-pp8-deepep"
QWEN3_235B_OVERLAP = "mcore-qwen3-235b-tp2-ep32-pp8-deepep-a2a-overlap"
QWEN3_235B_PP32 = "mcore-qwen3-235b-tp2-ep8-pp32-a2a"
QWEN3_235B_FSDP = "mcore-qwen3-235b-tp2-ep8-fsdp-deepep"


def _qwen3_235b_fsdp_zero_s(f: GapFigures) -> float:
    """The exposed ZeRO-3 collectives of the Megatron-FSDP row's predicted step (seconds; evaluated once a report)."""
    return f.memo("q235_fsdp_zero", lambda: evaluation_with(get_case(QWEN3_235B_FSDP)).time_breakdown_s["zero_comm"])


def _qwen3_235b_exchange_s(f: GapFigures) -> float:
    """The expert all-to-alls of the plain cross-node row's predicted step (seconds: what the overlap could hide)."""
    return f.memo("q235_exchange", lambda: evaluation_with(get_case(QWEN3_235B_PLAIN)).time_breakdown_s["ep_comm"])


def _qwen3_235b_pp32(f: GapFigures):
    """The 32-stage row's published plan evaluated (once a report: two figures quote it)."""
    return f.memo("q235_pp32", lambda: evaluation_with(get_case(QWEN3_235B_PP32)))


def _qwen3_235b_pp32_fullest(f: GapFigures) -> memory_check.StageTerms:
    """The fullest device of the 32-stage row's published plan."""
    return max(memory_check.stage_terms(_qwen3_235b_pp32(f)), key=lambda stage: stage.total)


DEEPSEEK_V3 = "deepseek-v3-2048-h800"
UNBOUNDED_HBM_GB = 1024.0
"""HBM at which DeepSeek-V3's plan is evaluated to see its time with memory not binding (far above its need)."""


def _deepseek(schedule: str, hbm_gb: float | None = None) -> Evaluation:
    """DeepSeek-V3's published plan on its stack under pipeline ``schedule``, at its chip's HBM or ``hbm_gb``."""
    return evaluation_with(get_case(DEEPSEEK_V3), hbm_gb=hbm_gb, pipeline_schedule=schedule)


def _deepseek_error(schedule: str, hbm_gb: float | None = None) -> float:
    return error_with(get_case(DEEPSEEK_V3), hbm_gb=hbm_gb, pipeline_schedule=schedule)


def _deepseek_stage_layers() -> str:
    """The fewest and most layers a stage of the 80-GiB DualPipe placement holds (the balanced split: 61/16 ≈ 4)."""
    counts = [len(layers) for layers in _deepseek("dualpipe").plan.stage_layers]
    return f"{min(counts)}–{max(counts)}"


def _deepseek_fullest_device() -> memory_check.StageTerms:
    """The fullest device of DeepSeek-V3's plan under DualPipe on its time-optimal partition, memory not binding."""
    return max(memory_check.stage_terms(_deepseek("dualpipe", UNBOUNDED_HBM_GB)), key=lambda stage: stage.total)


FIGURES: dict[str, Callable[[GapFigures], str]] = {
    # MLPerf v3.1 GPT-3 175B (16 and 8 microbatches per replica)
    "mlperf_published_ms": lambda f: f"{1000 * _mlperf_split(f, None)[0]:.1f}",
    "mlperf_published_fixed_s": lambda f: f"{_mlperf_split(f, None)[1]:.2f}",
    "mlperf_model_ms": lambda f: f"{1000 * _mlperf_split(f, get_case(MLPERF_PAIR[0]).stack)[0]:.1f}",
    "mlperf_model_fixed_s": lambda f: f"{_mlperf_split(f, get_case(MLPERF_PAIR[0]).stack)[1]:.2f}",
    "mlperf_core_ms": lambda f: f"{1000 * _mlperf_split(f, 'megatron-core')[0]:.1f}",
    "mlperf_core_fixed_s": lambda f: f"{_mlperf_split(f, 'megatron-core')[1]:.2f}",
    "mlperf_allreduce_s": lambda f: f"{_breakdown_s(MLPERF_PAIR[1], 'dp_allreduce'):.2f}",
    "mlperf30_errors": lambda f: percent_span(f.error(n) for n in MLPERF30),
    "mlperf_release_ratio": lambda f: _mlperf_release_ratio(),
    "mlperf_model_per_microbatch": lambda f: _mlperf_per_microbatch_error(f, get_case(MLPERF_PAIR[0]).stack),
    "mlperf_core_per_microbatch": lambda f: _mlperf_per_microbatch_error(f, "megatron-core"),
    # MT-NLG
    "mtnlg_allreduce_s": lambda f: number_range([_breakdown_s(n, "dp_allreduce") for n in MTNLG], ".2f"),
    "mtnlg_optimizer_s": lambda f: f"{_breakdown_s(MTNLG[-1], 'optimizer'):.2f}",
    "narayanan_530b_trend_pt": lambda f: f"{100 * max(abs(p.difference) for p in _trend(f, NARAYANAN_530B)):.1f}",
    "mtnlg_nccl_ring_us": lambda f: number_range(
        [1e6 * scale_loss.nccl_allreduce_latency_s("ring", s.data, s.data) for s in _scales(f, MTNLG)], ".0f"),
    "mtnlg_nccl_tree_us": lambda f: number_range(
        [1e6 * scale_loss.nccl_allreduce_latency_s("tree", s.data, s.data) for s in _scales(f, MTNLG)], ".0f"),
    "slowest_device_sigma": lambda f: percent(_slowest_device_sigma(f)),
    "slowest_device_held_out_pt": _slowest_device_held_out_pt,
    "mtnlg_fixed_mb1_s": _mtnlg_fixed_s,
    "mtnlg_fixed_mb2_s": lambda f: f"{scale_loss.model_fixed_s_at_microbatch(MTNLG, 2):.1f}",
    "mtnlg_efficiency": lambda f: f"{get_stack('megatron-deepspeed').fit_on('a100').framework_efficiency:.3f}",
    "mtnlg_efficiency_mb2": lambda f: f"{_mtnlg_efficiency_at_microbatch_2(f):.3f}",
    "bloom_error": lambda f: signed_percent(f.error(BLOOM), 1),
    "bloom_error_mb2": lambda f: signed_percent(
        error_with(get_case(BLOOM), framework_efficiency=_mtnlg_efficiency_at_microbatch_2(f)), 1),
    # DGX Cloud GPT-3 175B
    "dgxc_published_growth": _dgxc_published_growth,
    "llama70_2502_added": _llama70_added,
    "llama70_2502_exposed_pt": _llama70_exposed_pt,
    "dgxc_added_s": _dgxc_added_s,
    # Llama 3 405B paper rows
    "llama3_paper_8k_least": _llama3_paper_8k_least,
    "llama3_paper_cp_share": lambda f: percent(long_context_gap.score_share(get_case(LLAMA3_PAPER_CP))),
    "llama3_paper_cp_convention": lambda f: percent(_convention_factor() - 1),
    "llama3_paper_drop_pt": _llama3_paper_drop_pt,
    "dgxc405_tflops": lambda f: f"{_dgxc405_tflops():.0f}",
    "dgxc405_error": lambda f: signed_percent(f.error(DGXC_405B), 1),
    "dgxc405_over_paper": lambda f: percent(_dgxc405_tflops() / get_case(LLAMA3_PAPER_8K[0]).published - 1),
    # NeMo 24.03 long context
    "nemo_4k_error": lambda f: signed_percent(_nemo_table(f)[0].error),
    "nemo_4k_share": lambda f: percent(_nemo_table(f)[0].score_share),
    "nemo_fitted_efficiencies": lambda f: number_range([r.fitted_efficiency for r in _nemo_table(f)], ".2f"),
    "nemo_4k_device_error": lambda f: signed_percent(_nemo_device_table(f)[0].error),
    "nemo_device_fitted_efficiencies": lambda f: number_range([r.fitted_efficiency for r in _nemo_device_table(f)],
                                                              ".2f"),
    "nemo_causal_tilt": lambda f: (f"{signed_percent(_nemo_table(f)[0].causal_count_error)} to "
                                   f"{signed_percent(min(r.causal_count_error for r in _nemo_table(f)))}"),
    "nemo_send_over_block": lambda f: f"{max(r.send_over_block for r in _nemo_table(f)):.2f}",
    "nemo_cp_errors": lambda f: percent_range(f.error(n) for n in NEMO_CP),
    "bridge_llama3_8b_errors": lambda f: percent_range(_bridge_llama3_8b_errors(f)),
    "nemo_over_bridge": _nemo_over_bridge,
    # Megatron-Bridge Llama 3.1 405B
    "bridge_405b_errors": lambda f: percent_span(f.error(n) for n in BRIDGE_405B),
    "bridge_405b_tp_exposed": lambda f: percent_range(_bridge_405b_tp_exposed()),
    # Megatron-Bridge Qwen3-30B-A3B 25.11
    "qwen3_fullest_gib": lambda f: f"{_qwen3_fullest_device().total / GIB:.1f}",
    "qwen3_chunks": lambda f: _qwen3_chunks_in_flight(),
    "qwen3_optimizer_gib": lambda f: f"{_qwen3_fullest_device().optimizer / GIB:.0f}",
    "qwen3_predicted": lambda f: f"{f.prediction(QWEN3_2511).predicted:,.0f}",
    "qwen3_error": lambda f: signed_percent(f.error(QWEN3_2511)),
    "mixtral_release_gain": lambda f: signed_percent(get_case(MIXTRAL_RELEASES[1]).published
                                                     / get_case(MIXTRAL_RELEASES[0]).published - 1, 1),
    "mixtral_v09_error": lambda f: signed_percent(f.error(MIXTRAL_RELEASES[1]), 1),
    "qwen3_host_share": lambda f: percent(moe_stack_gap.row(QWEN3_2511)["host_share"]),
    "qwen3_2026_device_only": lambda f: percent_range(moe_stack_gap.row(name)["device_only_error"]
                                                      for name in moe_stack_gap.ROWS),
    # Megatron-MoE-ModelZoo Qwen3-235B-A22B rows
    "q235_plain_error": lambda f: signed_percent(f.error(QWEN3_235B_PLAIN), 1),
    "q235_exchange_share": lambda f: percent(_qwen3_235b_exchange_s(f) / f.time_s(QWEN3_235B_PLAIN)),
    "q235_exchange_s": lambda f: f"{_qwen3_235b_exchange_s(f):.1f}",
    "q235_model_speedup": lambda f: f"{f.time_s(QWEN3_235B_PLAIN) / f.time_s(QWEN3_235B_OVERLAP):.2f}",
    "q235_published_speedup": lambda f: f"{get_case(QWEN3_235B_OVERLAP).published / get_case(QWEN3_235B_PLAIN).published:.2f}",
    "q235_fsdp_zero_share": lambda f: percent(_qwen3_235b_fsdp_zero_s(f) / f.time_s(QWEN3_235B_FSDP)),
    "q235_fsdp_hidden_error": lambda f: signed_percent(
        metric_value(get_case(QWEN3_235B_FSDP), f.time_s(QWEN3_235B_FSDP) - _qwen3_235b_fsdp_zero_s(f))
        / get_case(QWEN3_235B_FSDP).published - 1, 1),
    "q235_pp32_fullest_gib": lambda f: f"{_qwen3_235b_pp32_fullest(f).total / GIB:.1f}",
    "q235_pp32_p2p_share": lambda f: percent(
        _qwen3_235b_pp32(f).time_breakdown_s["p2p"] / f.time_s(QWEN3_235B_PP32)),
    # DeepSeek-V3 on DualPipe
    "deepseek_stage_layers": lambda f: _deepseek_stage_layers(),
    "deepseek_fullest_gib": lambda f: f"{_deepseek_fullest_device().total / GIB:.0f}",
    "deepseek_activation_gib": lambda f: f"{_deepseek_fullest_device().activations / GIB:.0f}",
    "deepseek_in_flight": lambda f: f"{_deepseek_fullest_device().in_flight_microbatches:.0f}",
    "deepseek_dualpipe_bubble": lambda f: percent(
        _deepseek("dualpipe", UNBOUNDED_HBM_GB).plan.bubble_fraction, 1),
    "deepseek_1f1b_bubble": lambda f: percent(_deepseek("1f1b", UNBOUNDED_HBM_GB).plan.bubble_fraction, 1),
    "deepseek_1f1b_error": lambda f: signed_percent(_deepseek_error("1f1b"), 1),
    "deepseek_1f1b_unbounded_error": lambda f: signed_percent(_deepseek_error("1f1b", UNBOUNDED_HBM_GB)),
    "deepseek_unbounded_error": lambda f: signed_percent(_deepseek_error("dualpipe", UNBOUNDED_HBM_GB)),
}
"""Every figure the gap prose may quote, by the name its templates use."""
