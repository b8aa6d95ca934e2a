"""The system table's rivals against their published runs, built by the table's own path (issue 29 item 2).

A reference of ``experiments.system_table`` is its chip at the system space's GEMM efficiency
(:func:`~phaze_env.hardware.system.reference_point`), in its family's cluster
(:func:`~phaze_env.cluster.reference_cluster`: DGX A100 / DGX H100, or the torus the table builds for TPU v4), running the
system stack (:data:`~phaze_env.stacks.DEFAULT_SYSTEM_STACK`) with its efficiency on that chip. Here each reference is
built exactly so, at a published run's chip count, batch and optimizer, with the run's plan pinned (and its own stack's
structure, e.g. MaxText's FSDP for TPU v4, which is no plan of Megatron-Core), and its prediction is set against the
published figure with the authors' own metric (:func:`experiments.validation_fit.metric_value`). One run per chip is the
calibration of the system stack's efficiency there (:attr:`~phaze_env.stacks.ChipFit.calibration`, fitted by
``--fit``); the others are held out and must land within :data:`TOLERANCE`.

The same rows also show what the table itself would predict for that run: the stack's plan freedom at the run's chip
count and batch (``free plan``), and each reference's wall power per chip from its own family's host and network
(:attr:`~phaze_env.hardware.system.SystemPoint.wall_power_per_chip_w`).

    python -m experiments.rival_runs            # the table of every rival run (docs/rival_runs.md)
    python -m experiments.rival_runs --fit      # the system stack's efficiency per chip, fitted to its calibration run
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from experiments.validation_fit import _bisect, metric_value, plan_of
from experiments.validation_cases import FLAGSHIP_CASES, ValidationCase, all_cases, get_case
from phaze_env.cli import OneLineParser
from phaze_env.cluster import Cluster, reference_cluster
from phaze_env.evaluate import Evaluation, evaluate
from phaze_env.files import write_text_atomic
from phaze_env.hardware import get_preset
from phaze_env.hardware.system import GB200_NVL72_CHIPS, SystemBudget, SystemPoint, reference_point
from phaze_env.stacks import (DEFAULT_SYSTEM_STACK, SystemStack, get_stack,
                              get_system_stack)

TOLERANCE = 0.10
CARRIED_RANGE = 0.15
"""The range :data:`~phaze_env.stacks.CARRIED_FITS` states for a fit carried to a flagship (±15 %)."""
"""Issue 29's target: every held-out rival run within ±10 % of its published figure through the table's path."""

RIVAL_RUNS: dict[str, tuple[str, ...]] = {
    "h100": ("dgxc-gpt3-175b-bf16-128", "dgxc-gpt3-175b-bf16-256", "dgxc-gpt3-175b-bf16-512",
             "dgxc-gpt3-175b-bf16-1024", "dgxc-gpt3-175b-bf16-2048", "dgxc-gpt3-175b-fp8-128", "dgxc-gpt3-175b-fp8-256",
             "dgxc-gpt3-175b-fp8-512", "dgxc-gpt3-175b-fp8-1024", "dgxc-gpt3-175b-fp8-2048"),
    "a100": ("korthikanti22-175b-full", "korthikanti22-175b-selective-sp", "narayanan21-table2-175b-384",
             "narayanan21-table2-175b-768", "narayanan21-table2-175b-1536"),
    "tpuv4": ("maxtext-22b-1xv4-128", "maxtext-52b-1xv4-384"),
}
"""Per reference chip, its published GPT-3-class runs the table's path can express (cases of
:mod:`experiments.validation_cases`, with their sources): NVIDIA's DGX Cloud GPT-3 175B recipe on H100 in bf16 and FP8
at five scales; Megatron-LM's GPT-3 175B on A100 (Korthikanti et al. 2022 Table 5; Narayanan et al. 2021 Table 2);
MaxText on TPU v4 (single slices: the table's torus has no data-centre network below 4,096 chips, so the multi-slice
runs are not its path; PaLM 540B needs 2-D weight sharding, not a plan of this model)."""


LONG_SEQUENCE_RUNS: tuple[str, ...] = tuple(
    f"dgxc{release}-llama31-{size}-{fmt}-{gpus}" for release, size, gpus in
    (("2502", "8b", 128), ("2502", "70b", 2048), ("2502", "405b", 2304), ("2504", "8b", 128), ("2504", "70b", 2048))
    for fmt in ("bf16", "fp8"))
"""NVIDIA's DGX Cloud Llama 3.1 runs on H100 at 8,192 tokens (each table's largest scale; the validation's
``DGXC_LLAMA31``): not in :data:`RIVAL_RUNS` (the table's GPT-3-class rivals), reported apart
(:func:`long_sequence_lines`), each as the table prices it (Transformer Engine's fused kernel) and with the eager
attention it priced before. v25.04's 405B rows are left out: their published plan splits the embedding and the loss as
layers, which the table's plan rules do not (infeasible through its path)."""


@dataclass(frozen=True)
class RivalRun:
    """One published run predicted by the table's path."""

    case: ValidationCase
    kind: str  # "calibration" (the run the stack's efficiency on this chip is fitted to) or "held-out"
    predicted: float  # in the case's metric, its published plan pinned
    free_predicted: float | None  # in the case's metric, the stack's plan freedom (None: no runnable plan)
    free_plan: str
    wall_power_per_chip_w: float

    @property
    def error(self) -> float:
        return self.predicted / self.case.published - 1


GB200_SEGMENT_RULE = ("NVIDIA-NeMo/Megatron-Bridge scripts/performance/utils/executors.py at commit 0a25f911b2ed "
                      "('add --segment flag to sbatch if job uses GB200'): a job of n nodes of 4 GPUs takes one Slurm "
                      "segment of n nodes when n ≤ 18, else segments of the largest divisor of n up to 18")
"""How NVIDIA's Megatron-Bridge recipes place a job on GB200 NVL72 racks: a segment is a set of compute trays (nodes of 4
GPUs) inside one rack, so it is the job's NVLink domain."""
GB200_TRAYS_PER_RACK = 18
"""Compute trays in one GB200 NVL72 rack, the largest segment (:data:`GB200_SEGMENT_RULE`; NVIDIA DGX GB200 user guide:
18 compute trays of 4 GPUs, ``hardware.system.GB200_NVL72_CHIPS``)."""


def job_domain_chips(family: str, gpus: int) -> int | None:
    """The NVLink domain of a published job of ``gpus`` GPUs on ``family``'s racks, where the job's placement sets it
    (``None``: the family's own domain, as for DGX nodes of 8). On ``gb200-nvl72``: :data:`GB200_SEGMENT_RULE` — 8 GPUs
    are one domain of 8, 256 GPUs four of 64 (16 trays in each of four racks), 576 GPUs eight racks of 72."""
    if family != "gb200-nvl72":
        return None
    tray = GB200_NVL72_CHIPS // GB200_TRAYS_PER_RACK
    if gpus < 1 or gpus % tray:
        raise ValueError(f"a GB200 NVL72 job takes whole compute trays of {tray} GPUs, not {gpus} GPUs")
    trays = gpus // tray
    segment = trays if trays <= GB200_TRAYS_PER_RACK else next(
        k for k in range(GB200_TRAYS_PER_RACK, 0, -1) if trays % k == 0)
    return tray * segment


def rival_point(case: ValidationCase) -> SystemPoint:
    """The reference chip of ``case`` as the table builds it (at the system space's GEMM efficiency, in the run's number
    format), with the run's chip count instead of a budget's, and the run's own NVLink domain where its job placement
    set one (:func:`job_domain_chips`: a GB200 run on part of its racks)."""
    point = reference_point(case.accelerator, SystemBudget(power_w=1e6), case.number_format)
    point = dataclasses.replace(point, n_devices=case.n_devices)
    domain = job_domain_chips(point.family.name, case.n_devices)
    if domain is None:
        return point
    return dataclasses.replace(point, family=dataclasses.replace(point.family, domain_chips=domain))


MEGATRON_STACKS = ("megatron-lm", "megatron-lm-2021", "megatron-core")
"""Runs made with Megatron are predicted under the system stack's own structure (its efficiency is fitted and applied
under it, so the fit absorbs what the 2021-22 code did not overlap); the others under their own stack's (MaxText's FSDP,
ZeRO-3 without a pipeline, is no plan of Megatron-Core)."""


def published_attention(case: ValidationCase, stack: SystemStack | None = None) -> float:
    """The attention kernel ``case``'s published run ran, as :attr:`~phaze_env.stacks.ChipFit.attention_efficiency`:
    its own stack's on its chip (the validation profile's, which records the kernel of the code the run used — 0, the
    traced eager attention, for Megatron-LM 2021–22 and MaxText 2023; Transformer Engine's fused kernel for NeMo's
    Megatron-Core runs). The system stack runs a fused kernel on every chip, but a run made without one is priced as
    it ran, so its fit and its held-out check measure the stack's efficiency, not the kernel's absence.

    A flagship run (:data:`FLAGSHIP_RUNS`: its chip has no validation fit, only the one ``stack`` carries to it,
    :data:`~phaze_env.stacks.CARRIED_FITS`) ran a Megatron-Core recipe with Transformer Engine's fused attention, the
    kernel the table gives every chip: it is priced with ``stack``'s kernel there, the carried rate (what those runs
    test)."""
    fit = get_stack(case.stack).fit_on(case.accelerator)
    if fit is None and stack is not None and case.stack in MEGATRON_STACKS:
        carried, source = stack.rival_fit(case.accelerator)
        if carried is not None and source != case.accelerator:
            return carried.attention_efficiency
    if fit is None:
        raise ValueError(f"case {case.name!r}: its stack {case.stack!r} has no fit on {case.accelerator!r}, so the "
                         "attention kernel it ran is not recorded")
    return fit.attention_efficiency


def rival_cluster(case: ValidationCase, stack: SystemStack, *, published_structure: bool = True,
                  framework_efficiency: float | None = None) -> Cluster:
    """The reference cluster of ``case`` (:func:`~phaze_env.cluster.reference_cluster`) at the run's batch and optimizer,
    running ``stack`` with its efficiency on the run's chip (or ``framework_efficiency``); ``published_structure``: a
    run not made with Megatron (:data:`MEGATRON_STACKS`) takes the structure and plan rules of its own stack (its plan
    runs there), else ``stack``'s. A published plan that turned sequence parallelism off at ``t > 1`` (Megatron-LM
    2021–22, before or without ``--sequence-parallel``) is priced as it ran, its norms and residual adds on all ``s``
    tokens (``sequence_parallel_kernels`` off for that run), instead of being refused by a stack that always runs it.
    Likewise its attention: ``published_structure`` prices the kernel the run ran (:func:`published_attention`), the
    table's stack (``published_structure`` off) the fused kernel it gives every chip."""
    base = stack.training(Cluster(global_batch=case.global_batch, optimizer=case.optimizer), case.accelerator)
    if published_structure and case.stack not in MEGATRON_STACKS:
        own = get_stack(case.stack)
        base = own.structure(base).replace(framework_efficiency=base.stack.framework_efficiency)
    if published_structure:
        base = base.replace(attention_efficiency=published_attention(case, stack))
    if published_structure and plan_of(case).sequence_parallel is False and base.stack.sequence_parallel_kernels:
        base = base.replace(sequence_parallel_kernels=False)
    if published_structure and case.rules:  # what the run's stack set otherwise (e.g. the embedding/loss split)
        base = base.replace(plan_rules=dataclasses.replace(base.stack.plan_rules, **dict(case.rules)))
    if framework_efficiency is not None:
        base = base.replace(framework_efficiency=framework_efficiency)
    return reference_cluster(case.accelerator, rival_point(case), base)


def _evaluate(case: ValidationCase, cluster: Cluster, plan, gemm_scale: float = 1.0) -> Evaluation:
    accelerator = rival_point(case).accelerator
    if gemm_scale != 1.0:
        accelerator = accelerator.replace(gemm_efficiency=accelerator.gemm_efficiency * gemm_scale)
    return evaluate(case.workload, accelerator, cluster, plan=plan, seq_len=case.seq_len)


def predicted_metric(case: ValidationCase, stack: SystemStack, framework_efficiency: float | None = None,
                     gemm_scale: float = 1.0, **cluster_fields) -> float:
    """``case``'s metric predicted by the table's path with its published plan pinned (ValueError when infeasible);
    ``gemm_scale`` and ``cluster_fields``: a what-if (:func:`pinned_evaluation`; e.g. ``attention_efficiency``)."""
    evaluation = pinned_evaluation(case, stack, framework_efficiency, gemm_scale, **cluster_fields)
    return metric_value(case, evaluation.plan.time_per_batch_s)


def pinned_error(case: ValidationCase, stack: SystemStack, **what_if) -> float:
    """:func:`predicted_metric` over the published figure, minus 1."""
    return predicted_metric(case, stack, **what_if) / case.published - 1


def pinned_evaluation(case: ValidationCase, stack: SystemStack, framework_efficiency: float | None = None,
                      gemm_scale: float = 1.0, **cluster_fields) -> Evaluation:
    """:func:`predicted_metric`'s evaluation (ValueError when infeasible); ``gemm_scale``: a what-if on the chip's GEMM
    efficiency (a factor on the table's)."""
    cluster = rival_cluster(case, stack, framework_efficiency=framework_efficiency).replace(**cluster_fields)
    evaluation = _evaluate(case, cluster, plan_of(case), gemm_scale)
    if not evaluation.feasible:
        raise ValueError(f"case {case.name!r} is infeasible through the table's path: {evaluation.reason}")
    return evaluation


def fit_efficiency(case: ValidationCase, stack: SystemStack, *, tolerance: float = 1e-4) -> float:
    """The framework efficiency at which the table's path predicts ``case`` exactly (bisection, as
    :func:`experiments.validation_fit.fit_efficiency`)."""
    predicted = lambda efficiency: predicted_metric(case, stack, efficiency)  # noqa: E731
    if predicted(1.0) < case.published:
        raise ValueError(f"case {case.name!r}: even framework efficiency 1 predicts less than the published figure")
    return _bisect(predicted, case.published, 0.05, 1.0, tolerance)


def predict(case: ValidationCase, stack: SystemStack) -> RivalRun:
    fit = stack.fit_on(case.accelerator)
    kind = "calibration" if fit is not None and fit.calibration == case.name else "held-out"
    free = _evaluate(case, rival_cluster(case, stack, published_structure=False),
                     dataclasses.replace(stack.plan_spec(), t=None))
    free_value = metric_value(case, free.plan.time_per_batch_s) if free.feasible else None
    return RivalRun(case, kind, predicted_metric(case, stack), free_value,
                    free.plan.notation if free.feasible else f"infeasible: {free.reason}",
                    rival_point(case).wall_power_per_chip_w)


def predict_all(stack: SystemStack) -> list[RivalRun]:
    return [predict(get_case(name), stack) for names in RIVAL_RUNS.values() for name in names]


def _figure(case: ValidationCase, value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.1%}" if case.metric.startswith("mfu") else f"{value:,.2f}"


def markdown(stack: SystemStack, runs: list[RivalRun]) -> str:
    lines = [
        "# The system table's rivals against their published runs",
        "",
        "Written by `python -m experiments.rival_runs` (issue 29 item 2). Each reference chip is built by the system "
        "table's own path — the chip at the system space's GEMM efficiency, in its family's reference cluster, running "
        f"the `{stack.name}` stack with its efficiency on that chip — at the published run's chip count, batch and "
        "optimizer, its published plan pinned; the metric is the authors' own. *calibration*: the run the stack's "
        "efficiency on that chip is fitted to (`--fit`); every other row is held out and must land within "
        f"±{TOLERANCE:.0%}. *free plan*: what the table itself predicts for the run — the stack's plan freedom "
        f"({stack.plan_spec()}) at the same chips and batch, in the same metric (Narayanan et al.'s TFLOP/s count the "
        "forward pass twice, as their fully recomputed runs do, whatever the plan). Wall W/chip: chip + its family's "
        "host and network, × PUE.",
        "",
        "| chip | run | metric | published | predicted | error | kind | free plan | free-plan prediction | wall W/chip |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        c = run.case
        lines.append(f"| {c.accelerator} | {c.name} | {c.metric} | {_figure(c, c.published)} | "
                     f"{_figure(c, run.predicted)} | {run.error:+.1%} | {run.kind} | {run.free_plan} | "
                     f"{_figure(c, run.free_predicted)} | {run.wall_power_per_chip_w:,.0f} |")
    held_out = [abs(run.error) for run in runs if run.kind == "held-out"]
    lines += ["", f"Held-out runs: {len(held_out)}, mean |error| {sum(held_out) / len(held_out):.1%}, largest "
                  f"{max(held_out):.1%}.", "", "Sources: each case's in `experiments/validation_cases.py`; the "
                  f"efficiencies: `phaze_env.stacks.SYSTEM_STACKS[{stack.name!r}]`.", ""]
    return "\n".join(lines)


def long_sequence_errors(case: ValidationCase, stack: SystemStack) -> tuple[float, float]:
    """``case``'s error through the table's path with its published plan: with the attention kernel the run ran (its
    own stack's, :func:`published_attention`: Transformer Engine's fused kernel for these runs, at the rate the table's
    H100 runs), and with the traced eager attention the table priced before its stack ran a fused kernel (the
    stack's efficiency as fitted now, not refitted)."""
    return (predicted_metric(case, stack) / case.published - 1,
            predicted_metric(case, stack, attention_efficiency=0.0) / case.published - 1)


def long_sequence_lines(stack: SystemStack) -> list[str]:
    """The :data:`LONG_SEQUENCE_RUNS` section of the report."""
    calibration = get_case(stack.fit_on("h100").calibration)
    rows = [(case, *long_sequence_errors(case, stack)) for case in (*map(get_case, LONG_SEQUENCE_RUNS), calibration)]
    runs = rows[:-1]

    def span(values) -> str:
        values = sorted(values)
        return f"{values[0]:+.1%} … {values[-1]:+.1%}"

    by_format = {fmt: [row for row in runs if row[0].number_format == fmt] for fmt in ("bf16", "fp8")}
    lines = ["## Runs at 8,192 tokens", "",
             "NVIDIA's DGX Cloud Llama 3.1 recipes on H100 (the validation's `DGXC_LLAMA31` rows; each table's largest "
             "scale), through the same path with their published plans, reported apart from the held-out count above "
             "(the table's rivals are its GPT-3-class runs). The table's stack runs a fused causal attention kernel, on "
             f"H100 Transformer Engine's at {stack.fit_on('h100').attention_efficiency:g} of the bf16 peak (cited, not "
             f"fitted): bf16 {span(r[1] for r in by_format['bf16'])}, FP8 {span(r[1] for r in by_format['fp8'])}. With "
             "the traced eager attention the table priced before (2026-12-07; the efficiency as fitted now, not "
             f"refitted) they come out {span(r[2] for r in runs)}: the eager kernel writes and reads the 8,192 × 8,192 "
             "scores and computes the masked half, and at 8,192 tokens attention is a larger share of a step than at "
             "GPT-3's 2,048 (by s/h).", "",
             "| run | GPUs | published | error, as the table prices it | error, eager attention |", "|---|---|---|---|---|"]
    for case, table, eager in rows:
        label = f"{case.name} (the H100 calibration, 2,048 tokens)" if case is calibration else case.name
        lines.append(f"| {label} | {case.n_devices:,} | {_figure(case, case.published)} | {table:+.1%} | {eager:+.1%} |")
    return lines + [""]


FLAGSHIP_RUNS: dict[str, tuple[str, ...]] = {
    chip: tuple(case.name for case in FLAGSHIP_CASES if case.accelerator == chip) for chip in ("b200", "gb200")}
"""The Blackwell flagships' own published runs (:data:`experiments.validation_cases.FLAGSHIP_CASES`: NVIDIA's
Megatron-Bridge Llama 3 recipes on DGX B200 and GB200 NVL72, FP8), predicted through the table's path with the fit the
stack carries to them (:data:`~phaze_env.stacks.CARRIED_FITS`: H100's), nothing fitted to them: the check of that
assumption. Not in :data:`RIVAL_RUNS`, whose runs are the ones the stack's fits are made and held out on."""


def h100_twin(case: ValidationCase) -> ValidationCase | None:
    """The H100 run of the same Megatron-Bridge release and model as flagship run ``case`` (the same page lists it;
    ``None`` when the validation has none: the H100 Llama 3 8B rows are sharded with Megatron-FSDP)."""
    prefix = case.name.split(f"-{case.accelerator}-")[0] + f"-{case.workload}-fp8-"
    return next((c for c in all_cases() if c.name.startswith(prefix) and c.accelerator == "h100"), None)


def flagship_errors(stack: SystemStack) -> list[tuple[ValidationCase, Evaluation, ValidationCase | None, float | None]]:
    """Each :data:`FLAGSHIP_RUNS` run through the table's path (its pinned evaluation), with its :func:`h100_twin`'s
    error through the same path (the part both chips share, e.g. the FP8 recipe's, against the part the carried fit misses on Blackwell)."""
    rows = []
    for name in (name for names in FLAGSHIP_RUNS.values() for name in names):
        case = get_case(name)
        twin = h100_twin(case)
        rows.append((case, pinned_evaluation(case, stack), twin,
                     None if twin is None else pinned_error(twin, stack)))
    return rows


def flagship_lines(stack: SystemStack) -> list[str]:
    """The :data:`FLAGSHIP_RUNS` section of the report."""
    rows = [(case, metric_value(case, evaluation.plan.time_per_batch_s) / case.published - 1, twin, twin_error,
             evaluation) for case, evaluation, twin, twin_error in flagship_errors(stack)]
    carried = {chip: stack.rival_fit(chip) for chip in FLAGSHIP_RUNS}
    within = sum(abs(error) <= CARRIED_RANGE for _, error, _, _, _ in rows)
    lines = ["## The Blackwell flagships against their own published runs", "",
             "NVIDIA's Megatron-Bridge Llama 3 recipes on DGX B200 and GB200 NVL72 (FP8 with per-tensor scaling; the "
             "validation's `FLAGSHIP_CASES`, sources there), through the same path with their published plans, at the "
             "fit the stack carries to these chips (" + ", ".join(
                 f"{chip} at {source}'s {fit.framework_efficiency:g}" for chip, (fit, source) in carried.items())
             + ", `stacks.CARRIED_FITS`) and its fused attention at the carried rate: nothing is fitted to them. A "
             "GB200 job's NVLink domain is the one its recipe's Slurm segments give it (`job_domain_chips`: 8 GPUs one "
             "domain of 8, 256 GPUs four of 64). *H100, same release*: the run of the same release and model on H100, "
             "through the same path (the part of the error both chips share).", "",
             "| chip | run | GPUs | plan | published tokens/s per GPU | predicted | error | H100, same release |",
             "|---|---|---|---|---|---|---|---|"]
    for case, error, twin, twin_error, evaluation in rows:
        twin_text = "—" if twin is None else f"{twin_error:+.1%} ({twin.name})"
        lines.append(f"| {case.accelerator} | {case.name} | {case.n_devices:,} | `{evaluation.plan.notation}` | "
                     f"{case.published:,.0f} | {case.published * (1 + error):,.0f} | {error:+.1%} | {twin_text} |")
    errors = [error for _, error, _, _, _ in rows]
    by_model: dict[str, list[float]] = {}
    for case, error, twin, twin_error, _ in rows:
        if twin_error is not None:
            by_model.setdefault(case.workload, []).append(error - twin_error)
    excess = "; ".join(f"{model} {min(d):+.1%} to {max(d):+.1%} ({len(d)} pairs)" for model, d in by_model.items())
    lines += ["", f"{len(rows)} runs, mean error {sum(errors) / len(errors):+.1%}, mean |error| "
                  f"{sum(map(abs, errors)) / len(errors):.1%}, {within} within the carried fit's stated range "
                  f"(±{CARRIED_RANGE:.0%}). Where the same release ran the same model on H100, the Blackwell run's error "
                  f"less the H100 run's: {excess} (the H100 8B rows shard the model with Megatron-FSDP at microbatch 1, "
                  "the Blackwell ones run the distributed optimizer at microbatch 2: the page's recipes per chip).", ""]
    return lines


CUDNN_SDPA_BENCHMARK = ("NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/artifacts/"
                        "sdpa_bf16_benchmark_results_NVIDIA_{chip}.csv ({cudnn}; Llama 3.1 405B's heads: 128 query and 8 "
                        "key-value heads of 128, causal, bf16), 8,192 tokens: {fwd:g} TFLOP/s forward in {fwd_ms:g} ms, "
                        "{bwd:g} TFLOP/s backward in {bwd_ms:g} ms")
BLACKWELL_ATTENTION_8K = {"b200": ("B200", "cuDNN 9.10.2, NGC PyTorch 25.06", 1171.278, 1.877, 942.509, 5.833),
                          "gb200": ("GB200", "cuDNN 9.17.0, NGC PyTorch 25.11", 1584.0, 1.389, 1211.0, 4.542)}
"""NVIDIA's measured fused attention (cuDNN through cudnn-frontend) on each Blackwell chip at 8,192 tokens, the
sequence of the flagship runs (:data:`CUDNN_SDPA_BENCHMARK`): chip, software, forward TFLOP/s and ms, backward TFLOP/s
and ms. A candidate for the next model change, not in the model: the table carries H100's rate (0.55 of the bf16 peak)."""
MAMF_GB200_OVER_B200 = (1822.0 / 2500.0) / (1745.0 / 2250.0)
"""GB200's GEMMs against B200's, each at its measured fraction of its own bf16 peak: 72.9 % against 77.6 % (S. Bekman,
*Machine Learning Engineering*, 'Maximum Achievable Matmul FLOPS comparison table', v2, BF16: GB200 1,822 of 2,500
TFLOP/s, B200 1,745 of 2,250): GB200's higher peak is 4.4 % more measured GEMM rate, not 11 %. A candidate for the next
model change, not in the model."""


def measured_attention_efficiency(chip: str) -> float:
    """:data:`BLACKWELL_ATTENTION_8K`'s forward and backward pass together, as a fraction of the chip preset's bf16 peak
    (the basis of :attr:`~phaze_env.stacks.ChipFit.attention_efficiency`)."""
    _, _, fwd, fwd_ms, bwd, bwd_ms = BLACKWELL_ATTENTION_8K[chip]
    flop = fwd * 1e12 * fwd_ms * 1e-3 + bwd * 1e12 * bwd_ms * 1e-3
    return flop / ((fwd_ms + bwd_ms) * 1e-3) / get_preset(chip).peak_flops


def candidate_lines(stack: SystemStack) -> list[str]:
    """The flagship runs again under the two measured candidates (:data:`BLACKWELL_ATTENTION_8K`,
    :data:`MAMF_GB200_OVER_B200`): what each would move, measured before the model takes either."""
    lines = ["### The candidates, measured", "",
             "Each flagship run again with the chip's measured fused attention in place of the carried rate ("
             + "; ".join(f"{chip} {measured_attention_efficiency(chip):.3f}: " + CUDNN_SDPA_BENCHMARK.format(
                 chip=name, cudnn=cudnn, fwd=fwd, fwd_ms=fwd_ms, bwd=bwd, bwd_ms=bwd_ms)
                 for chip, (name, cudnn, fwd, fwd_ms, bwd, bwd_ms) in BLACKWELL_ATTENTION_8K.items())
             + f"), and on GB200 also its GEMMs at its measured rate over B200's ({MAMF_GB200_OVER_B200:.3f}, "
             "`MAMF_GB200_OVER_B200`). Neither is in the model: each re-signs the table.", "",
             "| run | carried fit | measured attention | and GB200's measured GEMM rate |", "|---|---|---|---|"]
    for name in (name for names in FLAGSHIP_RUNS.values() for name in names):
        case = get_case(name)
        carried = pinned_error(case, stack)
        attention = measured_attention_efficiency(case.accelerator)
        with_attention = pinned_error(case, stack, attention_efficiency=attention)
        both = pinned_error(case, stack, gemm_scale=MAMF_GB200_OVER_B200, attention_efficiency=attention) \
            if case.accelerator == "gb200" else None
        lines.append(f"| {name} | {carried:+.1%} | {with_attention:+.1%} | {'—' if both is None else f'{both:+.1%}'} |")
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.rival_runs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", default=DEFAULT_SYSTEM_STACK, help=f"system stack (default {DEFAULT_SYSTEM_STACK})")
    parser.add_argument("--fit", action="store_true",
                        help="print the stack's efficiency per chip fitted to each calibration run (default: the table)")
    parser.add_argument("--out", type=Path, default=Path("docs/rival_runs.md"), help="the table (default docs/rival_runs.md)")
    args = parser.parse_args(argv)
    try:
        stack = get_system_stack(args.stack)
    except ValueError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    if stack is None:
        parser.exit(2, f"{parser.prog}: error: the phaze stack has no fitted efficiencies to check\n")
    if args.fit:
        for fit in stack.fits:
            print(f"{fit.chips[0]}: {fit_efficiency(get_case(fit.calibration), stack):.4f} "
                  f"(constant {fit.framework_efficiency:g}; calibration {fit.calibration})")
        return 0
    text = markdown(stack, predict_all(stack)) + "\n".join(["", *long_sequence_lines(stack), *flagship_lines(stack),
                                                             *candidate_lines(stack)])
    write_text_atomic(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
