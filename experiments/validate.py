"""Predict published training runs and compare: ``python -m experiments.validate``.

For every case of :mod:`experiments.validation_cases` (Narayanan et al. 2021 Table 1, Korthikanti et
al. 2022, Chowdhery et al. 2022; NVIDIA's GPT-3 175B H100 runs in bf16 and FP8) the case's plan is pinned
(``PlanSpec``: t, p, d, microbatch, interleave, recompute, sequence parallelism, ZeRO-1 as the run had it) on the
case's accelerator (in the case's number format) and
cluster presets, and ``evaluate`` predicts the time per batch ``T``. The prediction is converted to the
case's metric with the *authors'* formula (the case module's docstring):

* ``tflops_per_device``: ``96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) / (T · N)`` (Narayanan §5.1);
* ``mfu``: ``72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) / (T · N · peak)`` (Korthikanti §6), with the peak the
  authors used (:data:`PUBLISHED_PEAK_FLOPS`);
* ``samples_s``: ``B / T``.

The dgx-a100 preset's ``framework_efficiency`` is fitted to :data:`CALIBRATION_CASE`; the mean error is over
the other (held-out) cases. Writes ``docs/validation.md`` (case, published, source, predicted, error, plan) and
``docs/figures/validation.png``; prints the mean absolute error. A full run also predicts the cross-chip
ratio cases (:data:`~experiments.validation_cases.RATIO_CASES`: one stack's run on A100 and on H100) and writes
their table as a section of the report. ``--cases a,b`` runs a subset (without the ratios).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from experiments.validation_cases import CASES, H100_CASES, RATIO_CASES, ChipRatioCase, ValidationCase, get_case
from phaze_env.cli import OneLineParser
from phaze_env.cluster import MEGATRON_A100_EFFICIENCY, get_cluster
from phaze_env.evaluate import Evaluation, evaluate
from phaze_env.files import atomic_path, writable_directory, write_text_atomic
from phaze_env.hardware import get_preset
from phaze_env.plan_spec import PlanSpec
from phaze_env.workloads import get_workload

TOLERANCE = 0.15  # the target: every case within ±15 % of the published figure
CALIBRATION_CASE = "korthikanti22-175b-full"
"""The one case ``phaze_env.cluster.MEGATRON_A100_EFFICIENCY`` (the dgx-a100 preset's framework efficiency) is
fitted to; it is reported but left out of the mean error, which is over the held-out cases only."""
PUBLISHED_PEAK_FLOPS = {
    "a100": 312e12,  # A100 bf16 dense tensor-core peak, the figure Korthikanti et al. 2022 divide by
    "tpuv4": 275e12,  # TPU v4 bf16 peak per chip, the figure Chowdhery et al. 2022 divide by
}
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Prediction:
    """One case's prediction (``predicted`` in the case's metric; ``None`` when it cannot be modelled)."""

    case: ValidationCase
    plan: str
    predicted: float | None
    time_per_batch_s: float | None
    note: str
    compute_efficiency: float | None = None  # see compute_efficiency()
    layers_per_stage: tuple[int, ...] = ()

    @property
    def error(self) -> float | None:
        """Relative error ``predicted / published − 1``."""
        return None if self.predicted is None else self.predicted / self.case.published - 1.0


def plan_of(case: ValidationCase) -> PlanSpec:
    return PlanSpec(t=case.tensor, p=case.pipeline, d=case.data, microbatch=case.microbatch, interleave=case.interleave,
                    recompute=case.recompute, sequence_parallel=case.sequence_parallel, zero1=case.zero1)


def _dims(case: ValidationCase) -> tuple[int, int, int, int]:
    """(layers, hidden, vocabulary, sequence) of the case's model, from its registry config."""
    workload = get_workload(case.workload)
    cfg = workload.config_dict
    layers = next(int(cfg[k]) for k in ("num_hidden_layers", "n_layer", "num_layers") if k in cfg)
    hidden = next(int(cfg[k]) for k in ("hidden_size", "n_embd", "d_model") if k in cfg)
    return layers, hidden, int(cfg["vocab_size"]), case.seq_len


def metric_value(case: ValidationCase, time_per_batch_s: float) -> float:
    """The case's metric for a time per batch, with the authors' formula."""
    layers, hidden, vocab, seq = _dims(case)
    tokens_term = case.global_batch * seq * layers * hidden**2
    if case.metric == "tflops_per_device":
        flops = 96 * tokens_term * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))
        return flops / (time_per_batch_s * case.n_devices) / 1e12
    if case.metric == "mfu":
        flops = 72 * tokens_term * (1 + seq / (6 * hidden) + vocab / (12 * layers * hidden))
        return flops / (time_per_batch_s * case.n_devices * PUBLISHED_PEAK_FLOPS[case.accelerator])
    return case.global_batch / time_per_batch_s


def predict(case: ValidationCase, *, cache: bool = True) -> Prediction:
    plan = plan_of(case)
    try:
        cluster = get_cluster(case.cluster, case.n_devices, global_batch=case.global_batch, optimizer=case.optimizer)
        accelerator = get_preset(case.accelerator).replace(number_format=case.number_format)
        evaluation: Evaluation = evaluate(case.workload, accelerator, cluster, plan=plan, seq_len=case.seq_len,
                                          cache=cache)
    except ValueError as exc:  # a system or plan the model cannot express (several pods, 12-way 2-D sharding)
        return Prediction(case, str(plan), None, None, f"not modelled: {exc}")
    if not evaluation.feasible:
        return Prediction(case, str(plan), None, None, f"infeasible in the model: {evaluation.reason}")
    time_s = evaluation.plan["time_per_batch_s"]
    parts = evaluation.time_breakdown_s
    largest = sorted(parts, key=parts.get, reverse=True)[:3]
    note = ", ".join(f"{key} {parts[key] / time_s:.0%}" for key in largest)
    efficiency = compute_efficiency(case, evaluation)
    note += f"; compute at {efficiency:.0%} of {'the bf16 ' if case.number_format == 'fp8' else ''}peak"
    layers = tuple(len(group) for group in evaluation.plan["stage_layers"])
    return Prediction(case, evaluation.plan["notation"], metric_value(case, time_s), time_s, note, efficiency, layers)


def compute_efficiency(case: ValidationCase, evaluation: Evaluation) -> float:
    """How fast the model runs the layers' arithmetic: the model FLOPs one device does per batch (Korthikanti's
    formula / N) over ``compute`` time × the published peak — the figure that sets most of the error."""
    layers, hidden, vocab, seq = _dims(case)
    flops = 72 * case.global_batch * seq * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (12 * layers * hidden))
    peak = PUBLISHED_PEAK_FLOPS.get(case.accelerator, evaluation.peak_flops)
    return flops / case.n_devices / (evaluation.time_breakdown_s["compute"] * peak)


def _figure(metric: str, value: float) -> str:
    return f"{value:.1%}" if metric == "mfu" else f"{value:.3g}"


UNITS = {"tflops_per_device": "TFLOP/s per GPU", "mfu": "MFU", "samples_s": "sequences/s"}


def held_out_errors(predictions: list[Prediction]) -> list[float]:
    """Absolute errors of the predicted cases other than the calibration case."""
    return [abs(p.error) for p in predictions if p.error is not None and p.case.name != CALIBRATION_CASE]


def markdown(predictions: list[Prediction], ratios: list[RatioPrediction] = ()) -> str:
    errors = held_out_errors(predictions)
    within = sum(e <= TOLERANCE for e in errors)
    calibration = next((p for p in predictions if p.case.name == CALIBRATION_CASE and p.error is not None), None)
    efficiencies = sorted(p.compute_efficiency for p in predictions
                          if p.compute_efficiency is not None and p.case.accelerator == "a100")
    low, high, middle = efficiencies[0], efficiencies[-1], statistics.median(efficiencies)
    lines = [
        "# Validation against published training runs",
        "",
        "Generated by `python -m experiments.validate` (do not edit by hand). Each case pins the published plan",
        "(`PlanSpec`) on the case's accelerator and cluster presets; `evaluate` predicts the time per batch, which",
        "is converted to the published metric with the authors' own FLOP formula (see `experiments/validate.py`).",
        "Error = predicted / published − 1.",
        "",
        f"The dgx-a100 cluster preset's `framework_efficiency` ({MEGATRON_A100_EFFICIENCY}: the fraction of the a100",
        f"preset's per-operator speed Megatron-LM achieves end to end) is fitted to one case, `{CALIBRATION_CASE}`"
        + ("" if calibration is None else f" (error there {calibration.error:+.1%})") + "; the",
        "mean error is over the other, held-out cases.",
        "",
        f"**Mean absolute error: {statistics.mean(errors):.1%}** over {len(errors)} held-out predicted cases "
        f"({within} within ±{TOLERANCE:.0%}); {sum(p.error is None for p in predictions)} not predicted.",
        "",
        "| case | metric | published | predicted | error | plan | largest parts of the predicted batch time | source |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in predictions:
        c = p.case
        predicted = "—" if p.predicted is None else _figure(c.metric, p.predicted)
        error = "—" if p.error is None else f"{p.error:+.1%}"
        name = f"{c.name} (calibration)" if c.name == CALIBRATION_CASE else c.name
        lines.append(f"| {name} | {UNITS[c.metric]} | {_figure(c.metric, c.published)} | {predicted} | {error} | "
                     f"`{p.plan}` | {p.note} | {c.source} |")
    lines += ["", "![predicted vs published](figures/validation.png)", "", "## Why the gap", "",
              "Every case's predicted batch time is dominated by `compute` (the layers' FLOPs on the accelerator model).",
              "The column \"compute at x % of peak\" is the model FLOPs one device does per batch over that predicted",
              "compute time × the published peak. The a100 preset alone (issue 11's estimator, which reproduces an",
              "isolated 8192³ GEMM at the measured 85.9 % of peak) ran these layers at a median 76 % of peak; without the",
              "factor (framework_efficiency 1) 17 of the 18 cases were over-predicted, by +9.5 % to +43.8 % (mean",
              "absolute error 24.7 %; measured before the factor was added). With the fitted framework",
              f"efficiency the layers run at {low:.0%}–{high:.0%} (median {middle:.0%}) of the A100's 312 TFLOP/s; what the",
              "factor stands for is listed in `phaze_env/cluster.py` (`MEGATRON_A100_EFFICIENCY`). The system side",
              "(TP collectives, p2p, bubble, DP all-reduce, optimizer step) is the rest of the predicted time and changes",
              "with the plan as published (a ratio of two runs on one system, which the fitted factor barely moves):", "",
              "| model | published speed-up of selective recompute + SP over full recompute | predicted | error |",
              "|---|---|---|---|"]
    for size, published, predicted in speedups(predictions):
        lines.append(f"| {size} | {published:.3f}× | {predicted:.3f}× | {predicted / published - 1:+.1%} |")
    lines += ["", "The Megatron workloads trace PyTorch's one-kernel tanh-GeLU, which like Megatron-LM's fused bias-GeLU",
              "keeps only its input (`phaze_env/workloads/registry.py`, `_megatron_gpt`). Traced as HF GPT-2's",
              "eight-operator `gelu_new`, the 1T model stashed 1,174 instead of 912 MB per layer at t = 8, memory forced",
              "1–3 layers per stage, and korthikanti22-1t-selective-sp came out at −36.5 % (measured before the change).", ""]
    squeezed = [p for p in predictions
                if p.layers_per_stage and min(p.layers_per_stage) < math.floor(statistics.mean(p.layers_per_stage))]
    if squeezed:
        lines += ["", "Activation memory squeezes these cases: with many microbatches in flight the DP must move layers off",
                  "the first stages to fit 80 GiB, and the slowest stage holds more layers than the average:", ""]
        for p in squeezed:
            layers = p.layers_per_stage
            lines.append(f"* {p.case.name}: layers per stage {min(layers)}–{max(layers)} (mean "
                         f"{statistics.mean(layers):.2f}), error {p.error:+.1%}")
    lines += h100_section(predictions) + ratio_section(ratios)
    lines.append("")
    return "\n".join(lines)


# --- H100, bf16 and FP8 ----------------------------------------------------------------------------------------
def fp8_speedups(predictions: list[Prediction]) -> list[tuple[str, float, float]]:
    """(case, published, predicted) speed-up of each FP8 H100 case over the bf16 case of the same plan and scale."""
    by_name = {p.case.name: p for p in predictions}
    rows = []
    for name, fp8 in by_name.items():
        bf16 = by_name.get(name.replace("-fp8-", "-bf16-"))
        if (fp8.case.number_format != "fp8" or bf16 is None or bf16.case.number_format != "bf16"
                or None in (fp8.time_per_batch_s, bf16.time_per_batch_s)):
            continue
        rows.append((name, published_time_s(bf16.case) / published_time_s(fp8.case), bf16.time_per_batch_s / fp8.time_per_batch_s))
    return rows


def h100_section(predictions: list[Prediction]) -> list[str]:
    """The H100 cases (bf16 and FP8 on the h100 preset and dgx-h100 cluster) and the FP8 speed-ups they imply."""
    h100 = [p for p in predictions if p.case.accelerator == "h100"]
    if not h100:
        return []
    errors = [abs(p.error) for p in h100 if p.error is not None]
    lines = ["", "## H100, bf16 and FP8", "",
             "The same GPT-3 175B plan published in bf16 and in FP8 (Transformer Engine) at several scales, and two",
             "Llama-2 FP8 runs of NeMo's performance summary, on the `h100` preset and the `dgx-h100` cluster.",
             "Nothing is fitted to them: `dgx-h100` keeps `framework_efficiency` 1.",
             "FP8 follows `phaze_env/hardware/number_format.py` (the blocks' weight GEMMs at twice the bf16 MAC rate on",
             "1-byte operands, the cast of each one's activation operand, FP8 weight copies in memory).",
             f"Mean absolute error {statistics.mean(errors):.1%} over {len(errors)} predicted H100 cases "
             f"({sum(e <= TOLERANCE for e in errors)} within ±{TOLERANCE:.0%}); {len(h100) - len(errors)} not predicted.", "",
             "| case | published sequences/s | predicted | error | plan | note |", "|---|---|---|---|---|---|"]
    for p in h100:
        predicted = "—" if p.predicted is None else f"{p.predicted:.3g}"
        error = "—" if p.error is None else f"{p.error:+.1%}"
        lines.append(f"| {p.case.name} | {p.case.published:.3g} | {predicted} | {error} | `{p.plan}` | {p.note} |")
    speedups = fp8_speedups(predictions)
    if speedups:
        lines += ["", "FP8 over bf16 (published: the two step times of the same plan and scale):", "",
                  "| FP8 case | published speed-up | predicted | error |", "|---|---|---|---|"]
        lines += [f"| {name} | {published:.3f}× | {predicted:.3f}× | {predicted / published - 1:+.1%} |"
                  for name, published, predicted in speedups]
    outside = [p for p in h100 if p.error is not None and abs(p.error) > TOLERANCE]
    if outside:
        lines += ["", "Outside ±15 %: " + ", ".join(f"{p.case.name} ({p.error:+.1%})" for p in outside) + ". At 4,096 tokens",
                  "attention is a fifth to a quarter of these models' GEMM time once the Linear layers run in FP8",
                  "(4·s²·h FLOPs per layer forward against 2·s·(4h² + 3·h·ffn) at twice the rate). NeMo runs it as causal",
                  "fused attention, which skips the masked half of QKᵀ and of the probabilities × V; the traced graph",
                  "computes all of it, so a tenth to an eighth of the predicted GEMM time is not spent in the run. NeMo also overlaps",
                  "the pipeline sends (`overlap_p2p_comm`), which the model adds in full (the p2p share in the note).",
                  "Both are properties of the training stack, not of FP8; the cases stay in the table as known gaps."]
    lines += ["", "Where FP8 does not fit: the model keeps TE's default FP8 weight copies next to the bf16 weights",
              "(+2 bytes per FP8 weight); the recipe runs with `fp8_params: true` (FP8 primary weights, no bf16 copy),",
              "which the model does not express, so at 128 GPUs (4-way ZeRO-1) its FP8 plan needs more than 80 GiB.",
              "The per-GEMM FP8 speed-up is 2× (the datasheet's MAC rate) for compute-bound shapes and less for",
              "memory-bound ones (`tests/test_fp8.py`); torchao's float8 README (H100) states the GEMM speed-up",
              "\"approaching 2x as M, K, N increase\" — its per-Linear figures (0.80× at 1024×2048×1024, 1.39× at",
              "4096×8192×16384) include dynamic-scaling casts of the weights and launch overheads this model does not",
              "price, so they are not used as a band. The end-to-end FP8 speed-ups above are the validation."]
    return lines


# --- the same run on two chips ----------------------------------------------------------------------------------
RATIO_TOLERANCE = 0.10  # the target: every predicted chip-to-chip ratio within ±10 % of the published one
RATIO_CHIPS = (("a100", "dgx-a100"), ("h100", "dgx-h100"))
SAME_STACK_EFFICIENCY = 1.0
"""The framework efficiency both chips of a ratio case run at: one stack's code on both, so whatever fraction of
the kernel model it reaches cancels in the ratio to first order; 1 (not dgx-a100's Megatron-fitted 0.79) because
neither chip's figure is fitted here."""
RATIO_HBM_GB = 1024.0
"""HBM capacity the ratio cases are evaluated with: their runs shard weights and gradients as well (PyTorch FSDP
FULL_SHARD), which a plan with ZeRO-1 cannot express; capacity changes no time in a pinned plan."""


@dataclass(frozen=True)
class RatioPrediction:
    """One chip-ratio case: predicted tokens/s per GPU on each chip (``None``: not predicted) and a note."""

    case: ChipRatioCase
    tokens_s: dict[str, float | None]
    note: str

    @property
    def predicted_ratio(self) -> float | None:
        a100, h100 = self.tokens_s["a100"], self.tokens_s["h100"]
        return None if a100 is None or h100 is None else h100 / a100

    @property
    def error(self) -> float | None:
        ratio = self.predicted_ratio
        return None if ratio is None else ratio / self.case.published_ratio - 1.0


def predict_ratio(case: ChipRatioCase, *, cache: bool = True) -> RatioPrediction:
    """Both chips' tokens/s per GPU for ``case``'s plan (pure data parallelism, its microbatch and recompute)."""
    plan = PlanSpec(t=1, p=1, d=case.n_devices, microbatch=case.microbatch, recompute=case.recompute, zero1=True)
    tokens_s, notes = {}, []
    for chip, cluster_name in RATIO_CHIPS:
        cluster = get_cluster(cluster_name, case.n_devices, global_batch=case.global_batch, optimizer="adam",
                              framework_efficiency=SAME_STACK_EFFICIENCY)
        evaluation = evaluate(case.workload, get_preset(chip), cluster, plan=plan, seq_len=case.seq_len,
                              hbm_gb=RATIO_HBM_GB, cache=cache)
        tokens_s[chip] = evaluation.tokens_s / case.n_devices if evaluation.feasible else None
        notes.append(f"{chip} {tokens_s[chip] / case.published[chip] - 1:+.1%}" if evaluation.feasible
                     else f"{chip} infeasible: {evaluation.reason}")
    return RatioPrediction(case, tokens_s, "per-chip error " + ", ".join(notes))


def ratio_section(ratios: list[RatioPrediction]) -> list[str]:
    """The cross-chip ratio table: published H100 / A100 throughput of one stack's run against the prediction."""
    if not ratios:
        return []
    errors = [abs(r.error) for r in ratios if r.error is not None]
    lines = ["", "## Cross-chip ratios (same stack, same plan)", "",
             "Published runs of one model and plan by one training stack on A100 and on H100 systems, against the",
             "ratio the model predicts on the `a100`/`dgx-a100` and `h100`/`dgx-h100` presets, both at framework",
             f"efficiency {SAME_STACK_EFFICIENCY:g} (the stack is the same on both chips). "
             f"{sum(e <= RATIO_TOLERANCE for e in errors)} of {len(ratios)} ratios within ±{RATIO_TOLERANCE:.0%} "
             f"(mean absolute error {statistics.mean(errors):.1%}).", "",
             "| case | seq | microbatch × GPUs, batch | recompute | published H100 / A100 | predicted | error | note | source |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in ratios:
        c = r.case
        predicted = "—" if r.predicted_ratio is None else f"{r.predicted_ratio:.3f}×"
        error = "—" if r.error is None else f"{r.error:+.1%}"
        lines.append(f"| {c.name} | {c.seq_len} | {c.microbatch} × {c.n_devices}, {c.global_batch} | {c.recompute} | "
                     f"{c.published_ratio:.3f}× | {predicted} | {error} | {r.note} | {c.source} |")
    a100, h100 = get_preset("a100"), get_preset("h100")
    gemm_ratio = h100.peak_flops * h100.gemm_efficiency / (a100.peak_flops * a100.gemm_efficiency)
    lines += ["", "The MPT models are traced as GPT-2-architecture models of the same shape (`ChipRatioCase.workload`);",
              "their runs shard weights and gradients (FSDP FULL_SHARD), which the plans write as ZeRO-1 with HBM",
              "capacity not binding (`RATIO_HBM_GB`).", "",
              "Where it misses: the more the GEMMs dominate a step (short sequences, large microbatches), the closer the",
              f"predicted ratio comes to the presets' sustained GEMM ratio, {gemm_ratio:.2f}× (MAMF-measured bf16 matmul",
              "rates of the two chips), while this stack's published H100 runs stay at 2.2–2.3× the A100's at every",
              "sequence length: its H100 GEMMs ran further below their best than its A100 GEMMs did (the per-chip",
              "errors in the note column). A stack's efficiency is then not the same on both chips, and a single",
              "framework factor per stack cannot carry it; the tests keep these rows as known gaps (strict xfail)."]
    return lines


def speedups(predictions: list[Prediction]) -> list[tuple[str, float, float]]:
    """(model, published, predicted) speed-up of Korthikanti's selective+SP rows over their full-recompute rows."""
    by_name = {p.case.name: p for p in predictions}
    rows = []
    for name, full in by_name.items():
        if not (name.startswith("korthikanti22-") and name.endswith("-full")):
            continue
        selective = by_name.get(name.replace("-full", "-selective-sp"))
        if selective is None or full.time_per_batch_s is None or selective.time_per_batch_s is None:
            continue
        published = published_time_s(full.case) / published_time_s(selective.case)
        rows.append((name.split("-")[1], published, full.time_per_batch_s / selective.time_per_batch_s))
    return rows


def published_time_s(case: ValidationCase) -> float:
    """The published time per batch, back from the published metric with the authors' formula."""
    reference_s = 1.0
    return reference_s * metric_value(case, reference_s) / case.published


def plot(predictions: list[Prediction], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [p for p in predictions if p.error is not None]
    calibration = [p.case.name == CALIBRATION_CASE for p in shown]
    fig, ax = plt.subplots(figsize=(9, 5.4), layout="constrained")
    bars = ax.bar(range(len(shown)), [100 * p.error for p in shown],
                  color=["tab:green" if abs(p.error) <= TOLERANCE else "tab:red" for p in shown])
    for bar, fitted in zip(bars, calibration):
        if fitted:  # fitted, not predicted: drawn apart so it is not read as a held-out result
            bar.set(facecolor="0.6", hatch="//", edgecolor="k", label="calibration case (efficiency fitted here)")
    ax.axhspan(-100 * TOLERANCE, 100 * TOLERANCE, color="0.9", zorder=0, label=f"±{TOLERANCE:.0%}")
    ax.axhline(0, color="k", linewidth=0.8)
    ax.set_xticks(range(len(shown)), [p.case.name + (" (calibration)" if fitted else "")
                                      for p, fitted in zip(shown, calibration)], rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("predicted / published − 1 (%)")
    held_out = len(shown) - sum(calibration)
    ax.set_title(f"phaze-gym vs published training runs: {held_out} held out, framework efficiency fitted to "
                 f"{CALIBRATION_CASE}", fontsize=10)
    ax.legend(loc="best", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.validate", description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "validation.md"),
                        help="Markdown report path (default docs/validation.md of the repository)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    figure = out.parent / "figures" / "validation.png"
    try:
        cases = [get_case(name) for name in args.cases.split(",")] if args.cases else list(CASES + H100_CASES)
        if out.is_dir():
            raise ValueError(f"--out {out} is a directory; give the report's file path (….md)")
        for directory in (out.parent, figure.parent):  # before the predictions, not after them
            writable_directory(directory)
    except ValueError as exc:
        parser.error(str(exc))
    predictions = []
    for case in cases:
        prediction = predict(case)
        predictions.append(prediction)
        error = "—" if prediction.error is None else f"{prediction.error:+.1%}"
        predicted = "—" if prediction.predicted is None else _figure(case.metric, prediction.predicted)
        print(f"{case.name:34s} published {_figure(case.metric, case.published):>8s}  predicted {predicted:>8s}  "
              f"error {error:>7s}  {prediction.plan}  {prediction.note[:120]}", flush=True)
    ratios = [] if args.cases else [predict_ratio(case) for case in RATIO_CASES]  # a --cases run is a subset
    for ratio in ratios:
        predicted = "—" if ratio.predicted_ratio is None else f"{ratio.predicted_ratio:.3f}"
        error = "—" if ratio.error is None else f"{ratio.error:+.1%}"
        print(f"{ratio.case.name:34s} published H100/A100 {ratio.case.published_ratio:.3f}  predicted {predicted:>6s}  "
              f"error {error:>7s}  {ratio.note}", flush=True)
    try:
        write_text_atomic(out, markdown(predictions, ratios))
        with atomic_path(figure) as temporary:
            plot(predictions, temporary)
    except OSError as exc:
        parser.exit(1, f"{parser.prog}: error: cannot write the report into {out.parent}: {exc.strerror or exc}\n")
    errors = held_out_errors(predictions)
    if errors:
        print(f"mean absolute error {statistics.mean(errors):.1%} over {len(errors)} held-out cases "
              f"(calibration: {CALIBRATION_CASE}); {sum(e <= TOLERANCE for e in errors)} within ±{TOLERANCE:.0%}; "
              f"wrote {out}")
    return 0 if errors and not any(math.isnan(e) for e in errors) else 1


if __name__ == "__main__":
    raise SystemExit(main())
