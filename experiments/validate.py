"""Predict published training runs and compare: ``python -m experiments.validate``.

For every case of :mod:`experiments.validation_cases` (Narayanan et al. 2021 Table 1, Korthikanti et
al. 2022, Smith et al. 2022, BLOOM, Chowdhery et al. 2022; IBM's PyTorch FSDP runs; NVIDIA's GPT-3 175B H100 runs in
bf16 and FP8) the
case's plan is pinned (``PlanSpec``: t, p, d, microbatch, interleave, recompute, sequence parallelism, the ZeRO
stage as published) on the case's accelerator (in the case's number format) and cluster presets, and ``evaluate`` predicts the time per batch ``T``. The prediction is converted to the
case's metric with the *authors'* formula (the case module's docstring):

* ``tflops_per_device``: ``96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) / (T · N)`` (Narayanan §5.1);
* ``mfu``: ``72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) / (T · N · peak)`` (Korthikanti §6), with the peak the
  authors used (:data:`PUBLISHED_PEAK_FLOPS`);
* ``mfu_6n``: ``6·P·B·s / (T · N · peak)`` with ``P`` the model's parameters (MaxText's ``train.py``);
* ``samples_s``: ``B / T``.

Each case runs its training stack's profile (:mod:`phaze_env.stacks`: structure and one efficiency per chip); each
of a profile's efficiencies is fitted to one case on that chip (its ``calibration``, :func:`fit_efficiency`), and the
errors are reported per profile and chip over its other (held-out) cases, by stack, chip and kind. A series of one run at several data-parallel degrees is
also reported as a per-GPU throughput trend. The MoE cases (``MOE_CASES``) run their published expert-parallel plans
on H100 and are reported in their own section; a case with a ``requires`` note is listed as data, not predicted.
The headline error and the main table are over each profile's home chip (A100; TPU v4 for jax-xla); the H100 cases
(:data:`~experiments.validation_cases.H100_CASES`: Megatron-Core's H100 efficiency is fitted to one of them) and the
MoE cases have sections of their own. A case on a chip its stack was never fitted on runs the profile's structure
with the cluster preset's own efficiency. Writes
``docs/validation.md`` and ``docs/figures/validation.png``; prints the mean absolute error. A full run also
predicts the cross-chip ratio cases (:data:`~experiments.validation_cases.RATIO_CASES`: one stack's run on A100
and on H100) and writes their table as a section of the report. ``--cases a,b`` runs a subset (without the
ratios).
"""

from __future__ import annotations

import math
import statistics
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from experiments import calculon_reference
from experiments.validation_cases import (COMPILE_BLOG, COMPILE_GAINS, FSDP_H100_CASES, H100_CASES, MOE_CASES, RATIO_CASES, TPU_CASES,
                                         ChipRatioCase, ValidationCase, all_cases, get_case)
from phaze_env.cli import OneLineParser, progress_display
from phaze_env.cli import console as cli_console
from phaze_env.cluster import get_cluster
from phaze_env.evaluate import Evaluation, evaluate
from phaze_env.files import atomic_path, writable_directory, write_text_atomic
from phaze_env.hardware import Accelerator, get_preset
from phaze_env.plan_spec import PlanSpec
from phaze_env.stacks import STACKS, get_stack
from phaze_env.workloads import get_workload, model_graph

TOLERANCE = 0.15  # the target: every case within ±15 % of the published figure
TREND_TOLERANCE = 0.03  # the target for a scaling series: per-GPU trend within 3 percentage points
CALIBRATION_CASES = {**{fit.calibration: profile.name for profile in STACKS.values() for fit in profile.fits},
                     **{profile.exposure_calibration: profile.name for profile in STACKS.values()
                        if profile.exposure_calibration}}
"""Case → the stack profile whose efficiency (on that case's chip) is fitted to it; reported, but left out of every
mean error."""
CALIBRATION_CASE = STACKS["megatron-lm"].calibration
"""The case ``phaze_env.cluster.MEGATRON_A100_EFFICIENCY`` (the dgx-a100 preset's own efficiency) is fitted to."""
SKIPPED = "skipped: needs "  # the note of a case with a ``requires`` (listed as data, not predicted)
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

    @property
    def kind(self) -> str:
        """``calibration`` (a profile's efficiency is fitted to this case), ``held-out``, or ``data`` (a run the model
        cannot express yet, listed but not predicted)."""
        if self.case.requires:
            return "data"
        return "calibration" if self.case.name in CALIBRATION_CASES else "held-out"


def plan_of(case: ValidationCase) -> PlanSpec:
    return PlanSpec(t=case.tensor, p=case.pipeline, d=case.data, microbatch=case.microbatch, interleave=case.interleave,
                    recompute=case.recompute, sequence_parallel=case.sequence_parallel, zero=case.zero,
                    shard_group=case.shard_group, c=case.context, e=case.expert_parallel if case.data % case.expert_parallel == 0 else None)  # an e the rank order
    # tp-cp-ep-dp-pp cannot place (e ∤ d: Megatron-Core's folded expert grid) stays free; such runs are data


def _dims(case: ValidationCase) -> tuple[int, int, int, int]:
    """(layers, hidden, vocabulary, sequence) of the case's model, from its registry config."""
    workload = get_workload(case.workload)
    cfg = workload.config_dict
    layers = next(int(cfg[k]) for k in ("num_hidden_layers", "n_layer", "num_layers") if k in cfg)
    hidden = next(int(cfg[k]) for k in ("hidden_size", "n_embd", "d_model") if k in cfg)
    return layers, hidden, int(cfg["vocab_size"]), case.seq_len


def metric_value(case: ValidationCase, time_per_batch_s: float) -> float:
    """The case's metric for a time per batch, with the authors' formula."""
    if case.metric == "samples_s":
        return case.global_batch / time_per_batch_s
    if case.metric == "tokens_s_per_device":
        return case.global_batch * case.seq_len / (time_per_batch_s * case.n_devices)
    layers, hidden, vocab, seq = _dims(case)
    tokens_term = case.global_batch * seq * layers * hidden**2
    if case.metric == "tflops_per_device":
        flops = 96 * tokens_term * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))
        return flops / (time_per_batch_s * case.n_devices) / 1e12
    if case.metric == "mfu":
        flops = 72 * tokens_term * (1 + seq / (6 * hidden) + vocab / (12 * layers * hidden))
        return flops / (time_per_batch_s * case.n_devices * PUBLISHED_PEAK_FLOPS[case.accelerator])
    if case.metric == "mfu_6n":
        return six_n_flops(case) / (time_per_batch_s * case.n_devices * PUBLISHED_PEAK_FLOPS[case.accelerator])
    if case.metric == "mcore_tflops_per_device":
        return megatron_core_flops(case) / (time_per_batch_s * case.n_devices) / 1e12
    raise ValueError(f"case {case.name!r}: no formula here for metric {case.metric!r}")


def six_n_flops(case: ValidationCase) -> float:
    """Model FLOPs of one batch as MaxText counts them (``MaxText/train.py`` at commit d3f68fe2c: ``6 ·
    num_model_parameters · max_target_length · per_device_batch_size`` per device): ``6·P`` per token, ``P`` every
    parameter of the model (the traced graph's, the shared embedding once), no attention term."""
    params = model_graph(case.workload, seq_len=case.seq_len).params_total
    return 6 * params * case.global_batch * case.seq_len


def megatron_core_flops(case: ValidationCase) -> float:
    """Model FLOPs of one batch as Megatron-Core v0.8 counts them (``megatron/training/training.py``,
    ``num_floating_point_operations`` at NVIDIA/Megatron-LM commit 0b981f9c53): ``12·B·s·l·h²·(attention + MLP +
    logit)`` with the query projection, grouped-query K/V and the full (not causal) s×s score terms, the routed
    experts' SwiGLU MLP × top-k, and the vocabulary padded to a multiple of 128; no recompute. That version counts
    no shared experts, so a model with them has no such figure."""
    cfg = get_workload(case.workload).config_dict
    if cfg.get("shared_expert_intermediate_size") or cfg.get("n_shared_experts"):
        raise ValueError(f"case {case.name!r}: Megatron-Core v0.8's FLOP count has no shared experts")
    layers, hidden, vocab, seq = _dims(case)
    heads = int(cfg["num_attention_heads"])
    query_ratio = (cfg.get("head_dim") or hidden // heads) * heads / hidden
    kv_ratio = int(cfg.get("num_key_value_heads") or heads) / heads
    ffn = int(cfg.get("moe_intermediate_size") or cfg["intermediate_size"])
    routed = int(cfg.get("num_experts_per_tok", 1))
    padded_vocab = math.ceil(vocab / (128 * case.tensor)) * 128 * case.tensor
    attention = (1 + kv_ratio + seq / hidden) * query_ratio
    mlp = ffn / hidden * routed * 3 / 2  # SwiGLU: three h×ffn GEMMs where a plain MLP has two
    logit = padded_vocab / (2 * layers * hidden)
    return 12 * case.global_batch * seq * layers * hidden**2 * (attention + mlp + logit)


def is_moe(case: ValidationCase) -> bool:
    return int(get_workload(case.workload).config_dict.get("num_experts_per_tok") or 0) > 0


def profiled(predictions: list[Prediction]) -> list[Prediction]:
    """The predictions the headline error and the main case table are over: every case on its stack's home chip
    (the profile's first fit; the H100 and MoE cases have sections of their own)."""
    return [p for p in predictions if p.case.requires or p.case.stack not in STACKS or on_home_chip(p.case)]


def on_home_chip(case: ValidationCase) -> bool:
    """Whether the case runs on its stack profile's home chip (``fits[0]``: A100, or TPU v4 for jax-xla)."""
    return case.accelerator in get_stack(case.stack).fits[0].chips


def profile_fitted(case: ValidationCase) -> bool:
    """Whether the case's stack has an efficiency fitted on the case's chip."""
    return get_stack(case.stack).fit_on(case.accelerator) is not None


def stack_cluster(case: ValidationCase, cluster):
    """``cluster`` running the case's stack: the profile's structure always; its efficiency fitted on the case's chip
    where it has one (a stack's efficiency does not carry across chips, see the cross-chip ratio section), else the
    cluster preset's own."""
    stack = get_stack(case.stack)
    return stack.apply(cluster, case.accelerator) if profile_fitted(case) else stack.structure(cluster)


def case_cluster(case: ValidationCase):
    """The case's cluster preset at its scale, batch, optimizer and slices, running its stack (:func:`stack_cluster`)."""
    slices = {"slices": case.slices} if case.slices > 1 else {}
    cluster = stack_cluster(case, get_cluster(case.cluster, case.n_devices, global_batch=case.global_batch,
                                              optimizer=case.optimizer, **slices))
    if case.embedding_loss_in_split:
        cluster = replace(cluster, plan_rules=replace(cluster.plan_rules, embedding_loss_in_split=True))
    return cluster


def case_accelerator(case: ValidationCase):
    """The case's accelerator preset in the case's number format."""
    return get_preset(case.accelerator).replace(number_format=case.number_format)


def _predictor(case: ValidationCase, field: str, **cluster_fields):
    """``value → the case's predicted metric`` with the cluster field ``field`` set to ``value`` (a number or a flag;
    the case's cluster with ``cluster_fields`` changed); an infeasible prediction raises."""
    cluster = replace(case_cluster(case), **cluster_fields)
    accelerator = case_accelerator(case)

    def predicted(value) -> float:
        evaluation = evaluate(case.workload, accelerator, replace(cluster, **{field: value}), plan=plan_of(case),
                              seq_len=case.seq_len)
        if not evaluation.feasible:
            raise ValueError(f"case {case.name!r} is infeasible in the model: {evaluation.reason}")
        return metric_value(case, evaluation.plan["time_per_batch_s"])

    return predicted


def _bisect(predicted, target: float, low: float, high: float, tolerance: float) -> float:
    """The value in ``[low, high]`` where the monotone ``predicted`` meets ``target`` (rising or falling)."""
    rising = predicted(high) > predicted(low)
    while high - low > tolerance:
        middle = (low + high) / 2
        above = predicted(middle) > target
        low, high = (low, middle) if above == rising else (middle, high)
    return (low + high) / 2


def fit_efficiency(case: ValidationCase, *, tolerance: float = 1e-4, **cluster_fields) -> float:
    """The framework efficiency at which ``case`` is predicted exactly (bisection: the predicted throughput grows with
    the efficiency): how a profile's efficiency on a chip is fitted to its calibration run. ``cluster_fields``: fitted
    on the case's cluster with those fields changed instead (a sensitivity, as :func:`error_with`)."""
    predicted = _predictor(case, "framework_efficiency", **cluster_fields)
    if predicted(1.0) < case.published:
        raise ValueError(f"case {case.name!r}: even framework efficiency 1 predicts less than the published figure")
    return _bisect(predicted, case.published, 0.05, 1.0, tolerance)


def fit_exposure(case: ValidationCase, *, tolerance: float = 1e-4, **cluster_fields) -> float:
    """The hybrid-shard all-reduce exposure (``Cluster.hybrid_allreduce_exposure``) at which ``case`` is predicted
    exactly, at its cluster's efficiency (bisection: the predicted throughput falls as the exposure grows): how a stack
    profile's exposure is fitted to its ``exposure_calibration`` run. ``cluster_fields`` as :func:`fit_efficiency`."""
    predicted = _predictor(case, "hybrid_allreduce_exposure", **cluster_fields)
    if predicted(0.0) < case.published:
        raise ValueError(f"case {case.name!r}: even with the all-reduce fully hidden the model predicts less than "
                         "the published figure")
    if predicted(1.0) > case.published:
        raise ValueError(f"case {case.name!r}: even with the all-reduce fully exposed the model predicts more than "
                         "the published figure")
    return _bisect(predicted, case.published, 0.0, 1.0, tolerance)


def predict(case: ValidationCase, *, cache: bool = True) -> Prediction:
    plan = plan_of(case)
    if case.requires:
        shown = f"{plan} with expert parallelism {case.expert_parallel}" if case.expert_parallel > 1 else str(plan)
        return Prediction(case, shown, None, None, SKIPPED + case.requires)
    try:
        cluster = case_cluster(case)
        accelerator = case_accelerator(case)
        evaluation: Evaluation = evaluate(case.workload, accelerator, cluster, plan=plan, seq_len=case.seq_len,
                                          cache=cache)
    except ValueError as exc:  # a system, stack or plan the model cannot express (several pods, 2-D sharding)
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
    """How fast the model runs the layers' arithmetic: the model FLOPs one device does per batch over ``compute``
    time × the published peak — the figure that sets most of the error. The model FLOPs are the authors' count where
    the metric is theirs (Korthikanti's formula for a GPT-shaped ``tflops_per_device`` or ``mfu`` case, MaxText's 6·N,
    Megatron-Core's count for a MoE model); otherwise (``samples_s``, ``tokens_s_per_device``: Llama's SwiGLU and
    grouped-query shapes, which the GPT formula miscounts by −6 … +16 %) the traced model's own, as ``Evaluation.mfu``
    counts them."""
    if is_moe(case):  # only the routed experts' FLOPs are model FLOPs
        flops = megatron_core_flops(case) / case.n_devices
    elif case.metric == "mfu_6n":  # the authors' count (its model's attention width is not Korthikanti's h)
        flops = six_n_flops(case) / case.n_devices
    elif case.metric in ("tflops_per_device", "mfu"):
        layers, hidden, vocab, seq = _dims(case)
        flops = 72 * case.global_batch * seq * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (12 * layers * hidden))
        flops /= case.n_devices
    else:  # Evaluation.mfu: model FLOPs per second over the peak of the design's format, per device used
        flops = evaluation.mfu * evaluation.peak_flops * evaluation.plan["time_per_batch_s"]
    # The bf16 peak for every case, FP8 ones too (the note says "of the bf16 peak" for them): the authors' peaks
    # are bf16 figures, and Evaluation.peak_flops is the FP8 peak for an FP8 design.
    peak = PUBLISHED_PEAK_FLOPS.get(case.accelerator, Accelerator.from_dict(evaluation.accelerator).peak_flops)
    return flops / (evaluation.time_breakdown_s["compute"] * peak)


def _figure(metric: str, value: float) -> str:
    if metric in ("mfu", "mfu_6n"):
        return f"{value:.1%}"
    return f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"


UNITS = {"tflops_per_device": "TFLOP/s per GPU", "mfu": "MFU", "mfu_6n": "MFU (6·N per token)", "samples_s": "sequences/s",
         "tokens_s_per_device": "tokens/s per GPU",
         "mcore_tflops_per_device": "model TFLOP/s per GPU (Megatron-Core's count)"}


def held_out_errors(predictions: list[Prediction], stack: str | None = None) -> list[float]:
    """Absolute errors of the predicted held-out cases (every case no profile is fitted to), of one stack or all."""
    return [abs(p.error) for p in predictions if p.error is not None and p.kind == "held-out"
            and (stack is None or p.case.stack == stack)]


@dataclass(frozen=True)
class TrendPoint:
    """One scale of a series: per-device throughput relative to the series' smallest scale, published and predicted."""

    case: ValidationCase
    published: float
    predicted: float
    error: float  # of the predicted figure itself (predicted / published − 1)

    @property
    def difference(self) -> float:
        """Predicted minus published relative per-device throughput (a fraction: 0.01 = 1 percentage point)."""
        return self.predicted - self.published


def scaling_series(predictions: list[Prediction]) -> list[list[TrendPoint]]:
    """Series of ≥ 3 predicted cases of one run at several data-parallel degrees (same stack, model, chip, number
    format, ZeRO stage and other plan degrees), each as the per-device throughput trend relative to its smallest
    scale: a *strong*-scaling series keeps the global batch, a *weak*-scaling one the batch per replica (B/d)."""
    groups: dict[tuple, list[Prediction]] = {}
    for p in predictions:
        c = p.case
        if p.time_per_batch_s is not None:
            plan = (c.stack, c.workload, c.accelerator, c.cluster, c.number_format, c.zero, c.tensor, c.pipeline,
                    c.microbatch, c.interleave, c.recompute, c.sequence_parallel)
            groups.setdefault(plan + ("strong", c.global_batch), []).append(p)
            groups.setdefault(plan + ("weak", c.global_batch / c.data), []).append(p)
    series = []
    for members in groups.values():
        if len({p.case.data for p in members}) < 3:
            continue
        members.sort(key=lambda p: p.case.data)

        def per_device(p: Prediction, time_s: float) -> float:  # sequences per second per device
            return p.case.global_batch / (p.case.n_devices * time_s)

        published_0 = per_device(members[0], published_time_s(members[0].case))
        predicted_0 = per_device(members[0], members[0].time_per_batch_s)
        series.append([TrendPoint(p.case, per_device(p, published_time_s(p.case)) / published_0,
                                  per_device(p, p.time_per_batch_s) / predicted_0, p.error) for p in members])
    return series


def is_strong(points: list[TrendPoint]) -> bool:
    """Whether a series keeps its global batch (strong scaling) rather than its batch per replica (weak scaling)."""
    return len({point.case.global_batch for point in points}) == 1


def microbatch_sensitivity(predictions: list[Prediction]) -> list[list[TrendPoint]]:
    """Every scaling series whose microbatch is not published, predicted again at twice that microbatch (the
    bubble ``(p−1)/m_r`` and so the trend depend on it): a sensitivity, never a fit."""
    series = []
    for points in scaling_series(predictions):
        if not points[0].case.microbatch_published:
            doubled = [predict(replace(point.case, microbatch=2 * point.case.microbatch)) for point in points]
            series += scaling_series(doubled)
    return series


def interleave_sensitivity(predictions: list[Prediction]) -> list[list[TrendPoint]]:
    """Every scaling series whose pipeline schedule is not published, predicted again with the interleaving the same
    authors used for that model elsewhere (``interleave_alternative``; the bubble shrinks by it): a sensitivity."""
    series = []
    for points in scaling_series(predictions):
        if not points[0].case.interleave_published:
            interleaved = [predict(replace(point.case, interleave=point.case.interleave_alternative)) for point in points]
            series += scaling_series(interleaved)
    return series


TREND_GAPS = {
    "smith22-mtnlg-530b-420nodes": (
        "the model's loss at scale is the 1F1B bubble: with the batch fixed each replica runs `m_r = B/(d·m)` "
        "microbatches and the bubble `(p−1)/m_r` grows with `d`, while the data-parallel all-reduce (0.36–0.38 s, "
        "priced after the flush) and the optimizer step (0.03 s) stay nearly constant. What this series loses beyond "
        "that is a per-iteration cost that does not shrink with `d`: with 4–6 s added to every iteration and the "
        "efficiency re-fitted at 280 nodes, 350 and 420 nodes come within 1.2 pt. That is half to four fifths of the "
        "modelled 7.4 s bubble, as if each microbatch took up to twice as long, which is what microbatch 2 gives (the "
        "sensitivity below; the run's microbatch is not published). It is not the cluster: Megatron-LM's own "
        "strong-scaling series of the same model, tensor × pipeline split and microbatch on Selene (Narayanan et al. "
        "2021 Table 2, 560–2,240 GPUs, next in this section) keeps the bubble's trend within 1.6 pt. The sources do "
        "not say which it is"),
    "dgxc-gpt3-175b-fp8-2048": (
        "the last doubling. Up to 1,024 GPUs the two formats' published steps grow alike (bf16 8.309 → 8.453 s, FP8 "
        "5.626 → 5.82 s) and the FP8 trend holds within 1.4 pt; from 1,024 to 2,048 GPUs the FP8 step grows by 0.14 s "
        "and the bf16 one by 0.037 s, with the same plan, batch per replica and gradient bytes (the recipe reduces "
        "gradients in bf16 in both; its FP8 parameters, `fp8_params`, make FP8's parameter all-gather the smaller one). "
        "The model adds the same data-parallel time to both formats (+0.12 s from 128 to 2,048 GPUs). One FP8-only "
        "global cost is ruled out by the recipe: TE's amax reduction is kept inside the tensor-parallel group "
        "(NVIDIA/dgxc-benchmarking nemo_megatron/configure.sh at 0b71cfda: NVTE_DP_AMAX_REDUCE_INTERVAL=0, "
        "NVTE_ASYNC_AMAX_REDUCTION=1), so it does not grow with the data-parallel degree. What the FP8 run loses at "
        "2,048 GPUs is not found in the sources"),
}
"""Scaling series whose predicted trend misses the issue's 3 points at some scale (keyed by that scale's case) and
the cause found (tests/test_validation_stacks.py holds them as strict xfails)."""


def trend_section(predictions: list[Prediction], microbatch: list[list[TrendPoint]] = (),
                  interleave: list[list[TrendPoint]] = ()) -> list[str]:
    """Every scaling series: published against predicted per-GPU trend, with the sensitivities to what is unpublished."""
    every = scaling_series(predictions)
    if not every:
        return []
    lines = ["## Scaling trends", "",
             "One run at three or more data-parallel degrees: per-device (GPU or TPU chip) throughput relative to the smallest scale, published",
             "and predicted (the issue's target: within 3 percentage points at every scale). Strong scaling keeps the",
             "global batch, so each replica runs fewer microbatches `m_r = B/(d·m)` and the 1F1B bubble `(p−1)/m_r` grows",
             "with `d`; weak scaling keeps `B/d`, so the bubble stays and only the data-parallel collectives grow.",
             f"{sum(max(abs(point.difference) for point in points) <= TREND_TOLERANCE for points in every)} of "
             f"{len(every)} series within {100 * TREND_TOLERANCE:.0f} points at every scale.", ""]
    for points in every:
        first = points[0].case
        worst = max(abs(point.difference) for point in points)
        kind = (f"strong scaling, batch {first.global_batch}" if is_strong(points)
                else f"weak scaling, batch {first.global_batch // first.data} per replica")
        schedule = f" v{first.interleave}" if first.interleave > 1 else ""
        lines += [f"### {first.workload} ({first.stack}, {first.accelerator} {first.number_format}, t{first.tensor} "
                  f"p{first.pipeline}{schedule} m{first.microbatch}, {kind})", "",
                  f"Largest difference {100 * worst:.1f} percentage points (target {100 * TREND_TOLERANCE:.0f}).", "",
                  "| devices | data parallel | case | published | predicted | difference (pp) | error of the predicted figure |",
                  "|---|---|---|---|---|---|---|"]
        for point in points:
            lines.append(f"| {point.case.n_devices} | {point.case.data} | {point.case.name} | {point.published:.1%} | "
                         f"{point.predicted:.1%} | {100 * point.difference:+.1f} | {point.error:+.1%} |")
        gaps = [point for point in points if point.case.name in TREND_GAPS]
        lines += [""] + [f"Where it misses ({point.case.n_devices} devices, {100 * point.difference:+.1f} pp): "
                         f"{TREND_GAPS[point.case.name]}." for point in gaps] + ([""] if gaps else [])
        for sensitivity in microbatch:
            if sensitivity[0].case.name == first.name:
                lines += [f"The microbatch of this series is not published (the case's source says where {first.microbatch} "
                          "comes from); the bubble's growth, and so the predicted trend, depends on it. The same series at",
                          f"microbatch {2 * first.microbatch} (a sensitivity, not a fit; the efficiency stays the one fitted "
                          f"at microbatch {first.microbatch}):", ""] + _sensitivity_table(sensitivity)
        for sensitivity in interleave:
            if sensitivity[0].case.name == first.name:
                lines += ["The pipeline schedule of this series is not published (the case runs plain 1F1B, Megatron-LM's "
                          "default); the same series with the interleaving the authors' script used for this model, "
                          f"v = {first.interleave_alternative} (the bubble `(p−1)/(v·m_r)`; a sensitivity, not a fit):", ""]
                lines += _sensitivity_table(sensitivity)
    return lines


def _sensitivity_table(points: list[TrendPoint]) -> list[str]:
    return (["| devices | published | predicted | difference (pp) | error of the predicted figure |", "|---|---|---|---|---|"]
            + [f"| {point.case.n_devices} | {point.published:.1%} | {point.predicted:.1%} | "
               f"{100 * point.difference:+.1f} | {point.error:+.1%} |" for point in points] + [""])


def markdown(predictions: list[Prediction], sensitivity: list[list[TrendPoint]] = (),
             ratios: list[RatioPrediction] = (), schedule_sensitivity: list[list[TrendPoint]] = ()) -> str:
    """The report; ``sensitivity`` and ``schedule_sensitivity``: the scaling series predicted again at another
    microbatch (:func:`microbatch_sensitivity`) and another interleaving (:func:`interleave_sensitivity`)."""
    every, predictions = predictions, profiled(predictions)
    errors = held_out_errors(predictions)
    within = sum(e <= TOLERANCE for e in errors)
    efficiencies = sorted(p.compute_efficiency for p in predictions
                          if p.compute_efficiency is not None and p.case.stack == "megatron-lm")
    spread = (f"{efficiencies[0]:.0%}–{efficiencies[-1]:.0%} (median {statistics.median(efficiencies):.0%})"
              if efficiencies else "(no Megatron-LM case in this run)")
    skipped = [p for p in predictions if p.case.requires]
    lines = [
        "# Validation against published training runs",
        "",
        "Generated by `python -m experiments.validate` (do not edit by hand). Each case pins the published plan",
        "(`PlanSpec`) on the case's accelerator and cluster presets and runs its training stack's profile",
        "(`phaze_env/stacks.py`: the stack's pipeline structure, which the placement DP models, and one framework",
        "efficiency fitted to one published run of that stack); `evaluate` predicts the time per batch, which is",
        "converted to the published metric with the authors' own FLOP formula (see `experiments/validate.py`).",
        "Error = predicted / published − 1. Kind: `calibration` = the case the profile's efficiency is fitted to",
        "(reported, never averaged), `held-out` = every other case.",
        "",
        f"**Mean absolute error: {statistics.mean(errors):.1%}** over {len(errors)} held-out predicted cases "
        f"({within} within ±{TOLERANCE:.0%}); {sum(p.error is None for p in predictions) - len(skipped)} not predicted"
        + (f"; {len(skipped)} published runs listed as data (the model cannot express them yet)" if skipped else "") + ".",
        "",
        "## Per training-stack profile",
        "",
        "| stack | chips | framework efficiency | calibration case (error there) | held-out cases | within ±15 % | mean abs. error | worst |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for profile in STACKS.values():
        for fit in profile.fits:  # one row per chip the profile is fitted on (over every case of that chip)
            mine = [p for p in every if p.case.stack == profile.name and p.case.accelerator in fit.chips]
            if not mine:
                continue
            fitted = next((p for p in mine if p.case.name == fit.calibration and p.error is not None), None)
            held = held_out_errors(mine)
            chips = ", ".join(sorted({p.case.accelerator for p in mine if p.predicted is not None}))
            calibration = fit.calibration + ("" if fitted is None else f" ({fitted.error:+.1%})")
            summary = (f"{statistics.mean(held):.1%} | {max(held):.1%}" if held else "— | —")
            lines.append(f"| {profile.name} | {chips} | {fit.framework_efficiency:g} | {calibration} | {len(held)} | "
                         f"{sum(e <= TOLERANCE for e in held)} | {summary} |")
    home = ", ".join(sorted({profile.fits[0].chips[0] for profile in STACKS.values()}))
    lines += ["", "Sources of each profile (structure and calibration) are in `phaze_env/stacks.py` (`STACKS`). The H100",
              "rows' held-out cases (dense and MoE) are in their own sections below; the headline error and the case table",
              f"are over the cases on each profile's home chip ({home}).", "",
              "## Cases", "",
              "| case | stack | chip | kind | metric | published | predicted | error | plan | largest parts of the predicted batch time | source |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in predictions:
        c = p.case
        if p.case.requires:
            continue
        predicted = "—" if p.predicted is None else _figure(c.metric, p.predicted)
        error = "—" if p.error is None else f"{p.error:+.1%}"
        lines.append(f"| {c.name} | {c.stack} | {c.accelerator} | {p.kind} | {UNITS[c.metric]} | "
                     f"{_figure(c.metric, c.published)} | {predicted} | {error} | `{p.plan}` | {p.note} | {c.source} |")
    lines += ["", "![predicted vs published, per profile](figures/validation.png)", ""]
    lines += trend_section(every, sensitivity, schedule_sensitivity)
    if skipped:
        lines += ["## Published runs the model cannot express yet (data)", "",
                  "Runs with their plans, listed with what the model lacks (`ValidationCase.requires`).",
                  "", "| case | stack | model | chip × GPUs | t | ep | p | v | d | microbatch | batch | published | needs | source |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for p in skipped:
            c = p.case
            lines.append(f"| {c.name} | {c.stack} | {c.workload} | {c.accelerator} × {c.n_devices} | {c.tensor} | "
                         f"{c.expert_parallel} | {c.pipeline} | {c.interleave} | {c.data} | {c.microbatch} | {c.global_batch} "
                         f"| {_figure(c.metric, c.published)} {UNITS[c.metric]} | {c.requires} | {c.source} |")
        lines.append("")
    lines += ["## Why the gap", "",
              "Every case's predicted batch time is dominated by `compute` (the layers' FLOPs on the accelerator model).",
              "The column \"compute at x % of peak\" is the model FLOPs one device does per batch over that predicted",
              "compute time × the published peak. The a100 preset alone (issue 11's estimator, which reproduces an",
              "isolated 8192³ GEMM at the measured 85.9 % of peak) ran these layers at a median 76 % of peak; without the",
              "factor (framework_efficiency 1) 17 of the 18 Megatron-LM cases were over-predicted, by +9.5 % to +43.8 % (mean",
              "absolute error 24.7 %; measured before the factor was added). With the fitted Megatron-LM",
              f"efficiency its layers run at {spread} of the A100's 312 TFLOP/s; what the",
              "factor stands for is listed in `phaze_env/cluster.py` (`MEGATRON_A100_EFFICIENCY`). Megatron-DeepSpeed runs",
              "the same layers more slowly end to end (its own fitted efficiency, `phaze_env/stacks.py`); with Megatron-LM's",
              "factor the MT-NLG runs came out 21–26 % too fast (measured before its profile was added). The system side",
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
    lines += calculon_reference.section({p.case.name: p.error for p in every if p.error is not None})
    lines += fsdp_section(every) + tpu_section(every) + h100_section(every) + moe_section(every) + ratio_section(ratios)
    lines.append("")
    return "\n".join(lines)


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
    """Error per case, grouped and coloured by training-stack profile; calibration cases hatched grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = {name: index for index, name in enumerate(STACKS)}
    shown = sorted((p for p in predictions if p.error is not None), key=lambda p: order.get(p.case.stack, len(order)))
    colours = dict(zip(STACKS, ("tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:green", "tab:pink", "tab:olive")))
    fig, ax = plt.subplots(figsize=(12, 5.6), layout="constrained")
    bars = ax.bar(range(len(shown)), [100 * p.error for p in shown], color=[colours[p.case.stack] for p in shown])
    labelled = set()
    for bar, p in zip(bars, shown):
        if p.kind == "calibration":  # fitted, not predicted: drawn apart so it is not read as a held-out result
            bar.set(facecolor="0.6", hatch="//", edgecolor="k")
            label = "calibration case (the profile's efficiency is fitted here)"
        else:
            held = held_out_errors(predictions, p.case.stack)
            label = f"{p.case.stack}: {len(held)} held out, mean |error| {statistics.mean(held):.1%}"
        if label not in labelled:
            bar.set_label(label)
            labelled.add(label)
    ax.axhspan(-100 * TOLERANCE, 100 * TOLERANCE, color="0.9", zorder=0, label=f"±{TOLERANCE:.0%}")
    ax.axhline(0, color="k", linewidth=0.8)
    ax.set_xticks(range(len(shown)), [p.case.name + (" (calibration)" if p.kind == "calibration" else "") for p in shown],
                  rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("predicted / published − 1 (%)")
    ax.set_title(f"phaze-gym vs published training runs: {len(held_out_errors(predictions))} held out, one framework "
                 "efficiency fitted per training stack", fontsize=10)
    fig.legend(loc="outside right upper", fontsize=8)  # beside the axes: never over a bar
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --- TPU v4 (JAX/XLA) -------------------------------------------------------------------------------------------
DCN_SENSITIVITY = (0.5, 2.0)
"""Factors on the DCN bandwidth (PaLM's burst rate, one published figure) the TPU section shows the multi-slice
errors at: a sensitivity, never a fit."""


def error_with(case: ValidationCase, **cluster_fields) -> float:
    """The error ``case`` would have on its cluster with ``cluster_fields`` changed (a sensitivity or an alternative
    structure, e.g. ``hybrid_allreduce_overlapped=True``: PyTorch's HYBRID_SHARD instead of the stack's own)."""
    cluster = replace(case_cluster(case), **cluster_fields)
    accelerator = case_accelerator(case)
    evaluation = evaluate(case.workload, accelerator, cluster, plan=plan_of(case), seq_len=case.seq_len)
    return metric_value(case, evaluation.plan["time_per_batch_s"]) / case.published - 1


def tpu_section(predictions: list[Prediction]) -> list[str]:
    """The TPU v4 runs: how they are modelled, and which are predicted (their rows are in the tables above)."""
    names = {case.name for case in TPU_CASES}
    tpu = [p for p in predictions if p.case.name in names]
    if not tpu:
        return []
    predicted = [p for p in tpu if p.error is not None]
    lines = ["", "## TPU v4 (JAX/XLA: MaxText, PaLM)", "",
             "MaxText's published TPU v4 runs (its README of May 2023: a 22B model on 1, 2, 4 and 8 v4-128 slices, a 52B",
             "model on 1 and 2 v4-384 slices; v4-128 is 64 chips) run on the `tpuv4` preset and the `tpuv4-pod` cluster with",
             "the `jax-xla` profile, whose efficiency is fitted to 22B on one slice. A slice is a torus of whole 4×4×4 cubes",
             "(v4-384: 4×4×12); MaxText shards weights, gradients and optimizer state over each slice's chips (FSDP, ZeRO-3",
             "with each layer's all-gather overlapped, `--xla_enable_async_all_gather`) and replicates them across slices:",
             "hybrid sharding with one shard group per slice (`+shard64`, `+shard192`). Slices are joined by the",
             "data-centre network, the cluster's outermost level (`Cluster.slices`: 1.65 GB/s per chip, PaLM's published",
             "81 Tbps burst over 6144 chips; latency an assumption), over which the gradient shards are all-reduced once",
             "after the backward pass, not overlapped (the `jax-xla` structure, `hybrid_allreduce_overlapped=False`; PaLM §4",
             "on the same stack: the cross-pod transfer \"does not start until each core finishes computing the",
             "gradients\"). Overlapped with each layer's backward instead (PyTorch's HYBRID_SHARD), the model would",
             "predict the multi-slice runs at " + ", ".join(f"{p.case.name} {error_with(p.case, hybrid_allreduce_overlapped=True):+.1%}" for p in predicted
                                                             if p.case.slices > 1 and p.case.shard_group) + ":",
             "(almost) no per-chip loss with the slices, where MaxText published one. The metric is MaxText's (6·N FLOPs",
             "per token over 275 TFLOP/s per chip), so \"compute at x % of peak\" counts no attention FLOPs.",
             f"{len(predicted)} of {len(tpu)} TPU runs predicted: "
             + ", ".join(f"{p.case.name} {p.error:+.1%}" for p in predicted) + ".", ""]
    sliced = [p for p in predicted if p.case.slices > 1]
    if sliced:
        lines += ["The DCN bandwidth is one published figure (PaLM's burst, not a MaxText measurement); the multi-slice",
                  "errors at " + " and ".join(f"{factor:g}×" for factor in DCN_SENSITIVITY) + " of it (a sensitivity, not a fit):", "",
                  "| case | " + " | ".join(f"DCN × {factor:g}" for factor in DCN_SENSITIVITY) + " | as modelled |",
                  "|---|" + "---|" * (len(DCN_SENSITIVITY) + 1)]
        for p in sliced:
            bandwidth = case_cluster(p.case).dcn_bandwidth_Bps
            lines.append(f"| {p.case.name} | " + " | ".join(
                f"{error_with(p.case, dcn_bandwidth_Bps=bandwidth * factor):+.1%}" for factor in DCN_SENSITIVITY)
                + f" | {p.error:+.1%} |")
        lines.append("")
    data = [p for p in tpu if p.case.requires]
    if data:
        lines += ["Listed as data, with what the model lacks (the table of runs it cannot express yet): "
                  + ", ".join(p.case.name for p in data) + ".", ""]
    return lines


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
    names = {case.name for case in H100_CASES}
    h100 = [p for p in predictions if p.case.name in names]
    errors = held_out_errors(h100)
    if not errors:
        return []
    lines = ["", "## H100, bf16 and FP8", "",
             "The same GPT-3 175B plan published in bf16 and in FP8 (Transformer Engine) at several scales, and two",
             "Llama-2 FP8 runs of NeMo's performance summary, on the `h100` preset and the `dgx-h100` cluster.",
             "They run the `megatron-lm` profile (NeMo is built on Megatron-Core) with its H100 efficiency "
             f"{get_stack('megatron-lm').fit_on('h100').framework_efficiency:g},",
             f"fitted to one of them ({get_stack('megatron-lm').fit_on('h100').calibration}, kind `calibration`; "
             "the profile's A100",
             "efficiency does not carry across chips: see the cross-chip ratios); every other case here and every MoE case",
             "is held out. The Llama 3 rows (Megatron-Bridge's performance summary, 2025–26, and the Llama 3 paper's",
             "405B pre-training on 8,192 and 16,384 GPUs) run the `megatron-core` profile: Transformer Engine's fused",
             f"attention at {get_stack('megatron-core').fit_on('h100').attention_efficiency:g} of peak (cited, not fitted) "
             f"and its efficiency {get_stack('megatron-core').fit_on('h100').framework_efficiency:g} fitted to",
             f"{get_stack('megatron-core').fit_on('h100').calibration}; the 405B rows split the embedding and the loss "
             "as layers (Megatron-Core's account-for-embedding/loss split).",
             "FP8 follows `phaze_env/hardware/number_format.py` (the blocks' weight GEMMs at twice the bf16 MAC rate on",
             "1-byte operands, the cast of each one's activation operand, FP8 weight copies in memory).",
             f"Mean absolute error {statistics.mean(errors):.1%} over {len(errors)} predicted held-out H100 cases "
             f"({sum(e <= TOLERANCE for e in errors)} within ±{TOLERANCE:.0%}); "
             f"{sum(p.error is None for p in h100)} not predicted.", "",
             "| case | kind | published sequences/s | predicted | error | plan | note |", "|---|---|---|---|---|---|---|"]
    for p in h100:
        predicted = "—" if p.predicted is None else f"{p.predicted:.3g}"
        error = "—" if p.error is None else f"{p.error:+.1%}"
        lines.append(f"| {p.case.name} | {p.kind} | {p.case.published:.3g} | {predicted} | {error} | `{p.plan}` | {p.note} |")
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
                  "(4·s²·h FLOPs per layer forward against 2·s·(4h² + 3·h·ffn) at twice the rate). NeMo runs it as",
                  "Transformer Engine's fused causal kernel, which the model can price (`phaze_env/attention.py`: kept",
                  "blocks only, no `s × s` HBM traffic, at a stated fraction of peak; the cross-chip ratio stack uses it).",
                  "It is not switched on for the Megatron-LM H100 profile, because it does not close these gaps for the",
                  "right reason. Measured with Hopper's fused kernel at FlashAttention-3's 75 % of peak (Shah et al. 2024,",
                  "abstract) and the H100 efficiency re-fitted on the same GPT-3 run (0.86): these two cases come out at",
                  "+39.3 % and +19.4 %, the Mixtral runs at +27.9 % and +19.7 %, Qwen3-30B 26.02.01 at +80.9 %, and the",
                  "GPT-3 FP8-over-bf16 speed-ups 6–9 % above the published ones. At 4,096 tokens the eager attention's",
                  "`s × s` traffic has been standing in for costs of these H100 runs the model does not price. Two signs",
                  "of where, not measured further here: the FP8 runs move away from their bf16 twins (the model runs FP8",
                  "GEMMs at twice the bf16 MAMF rate and prices no FP8 kernel but the activation casts), and the bf16",
                  "Mixtral runs at t = 1 miss as well (a candidate: the elementwise kernels Megatron-Core runs on their own",
                  "— SwiGLU, rotary embeddings, norms — which the trace fuses into GEMM epilogues). NeMo also overlaps",
                  "the pipeline sends (`overlap_p2p_comm`), which the model adds in full (the p2p share in the note).",
                  "The cases stay in the table as known gaps."]
    unfitting = [p.case.name for p in h100 if p.case.number_format == "fp8" and p.predicted is None]
    lines += ["", "Memory: the model keeps TE's default FP8 weight copies next to the bf16 weights (+2 bytes per FP8",
              "weight); the recipe runs with `fp8_params: true` (FP8 primary weights, no bf16 copy), which the model does",
              "not express" + (f", so {', '.join(unfitting)} needs more than 80 GiB." if unfitting else
                               ". The GPT-3 plans fit all the same at every scale: the cases trace NeMo's fused bias-GeLU"),
              ] + ([] if unfitting else [
              "(`nemo-gpt3-175b`), which keeps only its input; traced with HF GPT-2's eight-operator `gelu_new`",
              "(`gpt3-175b`), the 128-GPU (4-way ZeRO-1) plans stashed 45 instead of 21 GB of activations, the FP8 one did",
              "not fit, and the bf16 one moved a layer and came out 7.2 % slow (measured before the change)."]) + [
              "The per-GEMM FP8 speed-up is 2× (the datasheet's MAC rate) for compute-bound shapes and less for",
              "memory-bound ones (`tests/test_fp8.py`); torchao's float8 README (H100) states the GEMM speed-up",
              "\"approaching 2x as M, K, N increase\" — its per-Linear figures (0.80× at 1024×2048×1024, 1.39× at",
              "4096×8192×16384) include dynamic-scaling casts of the weights and launch overheads this model does not",
              "price, so they are not used as a band. The end-to-end FP8 speed-ups above are the validation."]
    return lines


# --- PyTorch FSDP ------------------------------------------------------------------------------------------------
STACK_GAPS: dict[str, str] = {
    **{name: ("Meta's own stack (not published) run as the megatron-core profile, and Table 4's TFLOP/s per GPU "
              "without its FLOP convention: counted with full s×s scores (Chowdhery et al.'s MFU, which the paper "
              "cites) the rows come out more than 15 % fast, counted causal (half) within 15 %: the scores are 8 % of "
              "the count at 8K and 57 % at 128K, so the published figure does not fix the throughput more tightly")
       for name in ("llama3-405b-paper-8192", "llama3-405b-paper-16384", "llama3-405b-paper-16384-cp16")},
    **{f"nemo2403-llama2-7b-fp8-{k}k-cp{c}": (
        "the attention kernel's generation decides a 128K–1M-token step (the scores are 80–97 % of its FLOPs): with the "
        "megatron-core profile's FlashAttention-3-class kernel (its 2025 release) the rows come out over 40 % fast, "
        "with FlashAttention-2's 0.35 of H100 peak (Shah et al. 2024) within 7 %; NeMo 24.03 (Transformer Engine 1.4, "
        "early 2024) predates FlashAttention-3 (July 2024), but which kernel it ran is not published, so neither is "
        "chosen") for k, c in ((128, 4), (256, 8), (512, 16), (1024, 32))},
}
"""Held-out cases of a stack profile outside ±15 % and the reason found (tests/test_validation_fsdp.py holds them as
strict xfails)."""


def predicted_compile_gain(case_name: str) -> float:
    """Step time with the elementwise operators unfused over fused, minus 1, at the case's plan and the profile's
    fitted efficiency (the case's metric is a rate, so the time ratio is its inverse)."""
    predicted = _predictor(get_case(case_name), "unfused_elementwise")
    return predicted(False) / predicted(True) - 1.0


def h100_exposed_share() -> float:
    """Share of the H100 7B HSDP step (fms-fsdp-mar24-llama2-7b-h100) that the profile's all-reduce exposure adds."""
    predicted = _predictor(get_case("fms-fsdp-mar24-llama2-7b-h100"), "hybrid_allreduce_exposure")
    return 1.0 - predicted(STACKS["pytorch-fsdp"].hybrid_allreduce_exposure) / predicted(0.0)


def compile_gain_lines() -> list[str]:
    """The eager-over-compiled comparison (experiments.fsdp_eager_elementwise): predicted against IBM's published
    torch.compile gains, nothing fitted to them."""
    lines = ["Check of the eager kernels against measurements nobody here fitted to: IBM measured the same runs with",
             "`torch.compile`, which fuses them. The model's counterpart is the step with the elementwise operators",
             "unfused over fused, everything else unchanged (`python -m experiments.fsdp_eager_elementwise`; compile",
             "emits its own pointwise kernels where the trace folds them into matmul epilogues, and the blog's H100",
             "column ran on 464 GPUs).", "", "| run | predicted eager / fused | published compile gain |", "|---|---|---|"]
    lines += [f"| {name} | {predicted_compile_gain(name):+.1%} | {published:+.0%} |" for name, published in COMPILE_GAINS.items()]
    return lines + ["", f"Published: {COMPILE_BLOG}.", ""]


def fsdp_section(predictions: list[Prediction]) -> list[str]:
    """The PyTorch FSDP runs: what of FSDP is modelled, and the held-out gap."""
    fsdp = [p for p in predictions if p.case.stack == "pytorch-fsdp" and p.error is not None]
    if not fsdp:
        return []
    profile = STACKS["pytorch-fsdp"]
    lines = ["", "## PyTorch FSDP (IBM fms-fsdp)", "",
             "IBM's FSDP benchmarks of Llama 2 7B–70B on 128 A100 80 GB, with 400 Gb/s between nodes (cluster preset",
             "`ibm-a100`), from two tables of the fms-fsdp README a month apart. The plans are as published: ZeRO-3",
             "(`+zero3`). HSDP rows shard within a node and all-reduce each gradient shard across the 16 nodes",
             "(`+shard8`, `PlanSpec.shard_group`). The FSDP rows shard over all 128 GPUs. Checkpointing is every block",
             "(`rc=full`) or none (`rc=selective`: nothing but the fused kernel's own recompute). Attention is SDPA's",
             "FlashAttention-2, priced as the causal fused kernel (`phaze_env.attention`, at the kernel's published",
             "fraction of peak). There is no gradient accumulation. Each layer's all-gathers and reduce-scatter overlap",
             "its compute (FSDP's prefetch), and a layer adds only what its compute does not cover, except a share of",
             f"HSDP's cross-node all-reduce, {profile.hybrid_allreduce_exposure:g} of it, that each layer adds on top",
             "(`Cluster.hybrid_allreduce_exposure`). fms-fsdp ran eager PyTorch (`use_torch_compile` False at both",
             "benchmark commits), so every elementwise operator is a kernel of its own with the HBM traffic PyTorch's",
             "dispatcher counts for the model's forward and backward pass (`Cluster.unfused_elementwise`,",
             "`phaze_env/workloads/eager.py`: RMSNorm's fp32 upcasts, rotary embeddings, SwiGLU, residual adds and",
             "their autograd kernels). Two constants are fitted, each to one run: the efficiency",
             f"{profile.framework_efficiency:g} to {profile.calibration} (FULL_SHARD: no hybrid all-reduce in it) and the",
             f"exposure to {profile.exposure_calibration} (HSDP) at that efficiency.", ""]
    compile_lines = compile_gain_lines()
    lines += compile_lines
    h100_names = {case.name for case in FSDP_H100_CASES}
    h100 = [p for p in fsdp if p.case.name in h100_names]
    if h100:
        fit = profile.fit_on("h100")
        errors = held_out_errors(h100)
        lines += ["The same table's H100 column (96 GPUs, 800 Gb/s between nodes: cluster preset `ibm-h100`) runs the",
                  f"profile's structure with its H100 efficiency {fit.framework_efficiency:g}, fitted by the same rule to "
                  f"the same row ({fit.calibration}); the exposure is the A100's, not refitted. Of the held-out 7B",
                  f"HSDP step the model leaves {h100_exposed_share():.0%} to the exposed all-reduce; the blog's H100",
                  "traces showed \"a 10% gap due to network 'peeking' out\".",
                  f"Mean absolute error {statistics.mean(errors):.1%} over {len(errors)} held-out H100 rows "
                  f"({sum(e <= TOLERANCE for e in errors)} within ±{TOLERANCE:.0%}).", "",
                  "| case | kind | published tokens/s per GPU | predicted | error | plan | note |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {p.case.name} | {p.kind} | {p.case.published:,.0f} | {p.predicted:,.0f} | {p.error:+.1%} | "
                  f"`{p.plan}` | {p.note} |" for p in h100]
        lines.append("")
    gaps = [p for p in fsdp if p.case.name in STACK_GAPS]
    if gaps:
        lines += ["Outside ±15 % (kept as known gaps): " + ", ".join(f"{p.case.name} ({p.error:+.1%})" for p in gaps)
                  + ".", ""]
        lines += [f"Why: {cause}." for cause in dict.fromkeys(STACK_GAPS[p.case.name] for p in gaps)]
        lines += ["", "Priced with the traced eager attention instead (measured before the profile had the fused kernel),",
                  "the same rule fitted 0.802 on A100 and 0.702 on H100, and 5 of the 6 A100 rows were within ±15 % (mean",
                  "9.4 %) and both H100 rows at −4.9 %: the eager attention's `s × s` HBM traffic, a larger share of the",
                  "7B's step than of the wider models', stood in for part of the missing width-dependent cost."]
    return lines


# --- mixture-of-experts runs ----------------------------------------------------------------------------------
MOE_GAPS = {
    "bridge2604-qwen3-30b-a3b-fp8": (
        "its expert-parallel group (16) spans two nodes, and the recipe dispatches with HybridEP (Megatron-Bridge "
        "scripts/performance/configs/qwen/qwen3_workload_base_configs.py at 5f3b336f9, 2026-04-28: "
        "QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1, moe_flex_dispatcher_backend='hybridep'), "
        "which sends each token over InfiniBand once per destination node and fans it out to its experts over NVLink; "
        "the model prices a flat all-to-all of every (token, expert) copy (top-8) over the levels the group spans, "
        "so its ep_comm is about half the predicted batch time"),
    "bridge2511-qwen3-30b-a3b-fp8": (
        "the published plan does not fit the model's 80 GiB: 110 GiB on the fullest device, of which 73 GiB activations "
        "(microbatch 2, 48 one-layer chunks in flight on the first stage) and 22 GiB optimizer state (the expert-data-"
        "parallel group is 1, so the experts' state is not sharded); the page does not say how the 25.11 recipe fitted "
        "it (the later recipes run microbatch 1). With the capacity not binding the plan predicts 8,763 tokens/s per "
        "GPU (+66 %; at the fitted H100 efficiency 0.97), near the 9,058 of 26.02.01: that release line's software moved this model's figure by almost 2× "
        "on one plan (26.02: 5113, 26.02.01: 9058), so 25.11's figure is the slower software, not the hardware"),
}
"""MoE cases outside ±15 % and the physical reason found (tests/test_validation_moe.py holds them as strict xfails)."""


def moe_section(predictions: list[Prediction]) -> list[str]:
    """The published MoE runs predicted with their expert-parallel plans (h100 preset, dgx-h100, held out)."""
    names = {case.name for case in MOE_CASES if not case.requires}
    moe = [p for p in predictions if p.case.name in names]
    errors = [abs(p.error) for p in moe if p.error is not None]
    if not errors:
        return []
    lines = ["", "## Mixture-of-experts runs (expert parallelism)", "",
             "Published Megatron-Core MoE runs with their plans as published (t, p, v, d, expert parallelism `e`, microbatch,",
             "batch, distributed optimizer as ZeRO-1, bf16 or FP8) on the `h100` preset and `dgx-h100` cluster. Nothing is",
             "fitted to them: like the H100 cases they run the `megatron-lm` profile with its H100 efficiency",
             f"{get_stack('megatron-lm').fit_on('h100').framework_efficiency:g} (fitted to a dense GPT-3 run, held out here). "
             "Experts are sharded over `e` ranks carved from the data-parallel ones; the dispatch/combine",
             "all-to-alls are priced on the levels the EP group spans, with uniform routing (no load imbalance). The two",
             "Mixtral rows are one plan measured on two Megatron-Core releases (v0.8 and v0.9): one prediction against two",
             "figures, not two independent plans.",
             f"Mean absolute error {statistics.mean(errors):.1%} over {len(errors)} predicted MoE cases "
             f"({sum(e <= TOLERANCE for e in errors)} within ±{TOLERANCE:.0%}); {len(moe) - len(errors)} not predicted.", "",
             "| case | model | published | predicted | error | plan | note | source |", "|---|---|---|---|---|---|---|---|"]
    for p in moe:
        c = p.case
        predicted = "—" if p.predicted is None else _figure(c.metric, p.predicted)
        error = "—" if p.error is None else f"{p.error:+.1%}"
        lines.append(f"| {c.name} | {c.workload} | {_figure(c.metric, c.published)} {UNITS[c.metric]} | {predicted} | "
                     f"{error} | `{p.plan}` | {p.note} | {c.source} |")
    gaps = [p for p in moe if p.case.name in MOE_GAPS]
    if gaps:
        lines += ["", "Outside ±15 % (kept as known gaps):", ""]
        lines += [f"* {p.case.name} ({'—' if p.error is None else f'{p.error:+.1%}'}): {MOE_GAPS[p.case.name]}."
                  for p in gaps]
    return lines


# --- the same run on two chips ----------------------------------------------------------------------------------
RATIO_TOLERANCE = 0.10  # the target: every predicted chip-to-chip ratio within ±10 % of the published one
RATIO_CHIPS = (("a100", "dgx-a100"), ("h100", "dgx-h100"))
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


def ratio_tokens_s(case: ChipRatioCase, chip: str, cluster_name: str, framework_efficiency: float | None = None, *,
                   cache: bool = True) -> float | None:
    """Predicted tokens/s per GPU of ``case``'s plan (pure data parallelism, its microbatch and recompute) on ``chip``
    running the case's stack (its efficiency fitted on that chip, unless ``framework_efficiency`` is given); ``None``
    if the plan is infeasible."""
    # FULL_SHARD: ZeRO-3, what the stack runs (llm-foundry's FSDP config; it has no optimizer-only sharding)
    plan = PlanSpec(t=1, p=1, d=case.n_devices, microbatch=case.microbatch, recompute=case.recompute, zero=3)
    cluster = get_stack(case.stack).apply(get_cluster(cluster_name, case.n_devices, global_batch=case.global_batch,
                                                      optimizer="adam"), chip)
    if framework_efficiency is not None:
        cluster = replace(cluster, framework_efficiency=framework_efficiency)
    evaluation = evaluate(case.workload, get_preset(chip), cluster, plan=plan, seq_len=case.seq_len,
                          hbm_gb=RATIO_HBM_GB, cache=cache)
    return evaluation.tokens_s / case.n_devices if evaluation.feasible else None


def fit_ratio_efficiency(case: ChipRatioCase, chip: str, *, tolerance: float = 1e-4) -> float:
    """The framework efficiency at which ``case``'s run on ``chip`` is predicted exactly (bisection): how a stack's
    efficiency on a chip is fitted to a chip-ratio case (its ``calibration``)."""
    cluster_name = dict(RATIO_CHIPS)[chip]

    def predicted(efficiency: float) -> float:
        return ratio_tokens_s(case, chip, cluster_name, efficiency) or 0.0

    if predicted(1.0) < case.published[chip]:
        raise ValueError(f"case {case.name!r} on {chip}: even framework efficiency 1 predicts less than published")
    return _bisect(predicted, case.published[chip], 0.05, 1.0, tolerance)


def predict_ratio(case: ChipRatioCase, *, cache: bool = True) -> RatioPrediction:
    """Both chips' tokens/s per GPU for ``case``'s plan, each chip at the stack's efficiency fitted on it."""
    tokens_s, notes = {}, []
    for chip, cluster_name in RATIO_CHIPS:
        tokens_s[chip] = ratio_tokens_s(case, chip, cluster_name, cache=cache)
        feasible = tokens_s[chip] is not None
        notes.append(f"{chip} {tokens_s[chip] / case.published[chip] - 1:+.1%}" if feasible else f"{chip} infeasible")
    return RatioPrediction(case, tokens_s, "per-chip error " + ", ".join(notes))


def ratio_section(ratios: list[RatioPrediction]) -> list[str]:
    """The cross-chip ratio table: published H100 / A100 throughput of one stack's run against the prediction."""
    if not ratios:
        return []
    errors = [abs(r.error) for r in ratios if r.error is not None]
    stacks = sorted({r.case.stack for r in ratios})
    fits = {chip: get_stack(stacks[0]).fit_on(chip) for chip, _ in RATIO_CHIPS}
    calibrations = sorted({fit.calibration for fit in fits.values()})
    held = [r.error for r in ratios if r.error is not None and r.case.name not in calibrations] or [0.0]
    lines = ["", "## Cross-chip ratios (same stack, same plan)", "",
             "Published runs of one model and plan by one training stack on A100 and on H100 systems, against the",
             "ratio the model predicts on the `a100`/`dgx-a100` and `h100`/`dgx-h100` presets, each chip running the",
             f"stack's profile (`{', '.join(stacks)}`, `phaze_env/stacks.py`): its framework efficiency on each chip "
             "("
             + ", ".join(f"{chip} {fit.framework_efficiency:g}" for chip, fit in fits.items())
             + f") is fitted to one row, {', '.join(calibrations)} (its ratio is then fitted, not predicted),",
             "and its attention runs as the fused causal FlashAttention-class kernel (`phaze_env/attention.py`) at the",
             "fraction of each chip's bf16 peak the kernel's papers report ("
             + ", ".join(f"{chip} {fit.attention_efficiency:g}" for chip, fit in fits.items())
             + f"); every other row is held out. {sum(e <= RATIO_TOLERANCE for e in errors)} of {len(ratios)} ratios "
             f"within ±{RATIO_TOLERANCE:.0%} (mean absolute error {statistics.mean(errors):.1%}; over the held-out "
             f"rows {statistics.mean(abs(e) for e in held):.1%}).", "",
             "| case | seq | microbatch × GPUs, batch | recompute | published H100 / A100 | predicted | error | note | source |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in ratios:
        c = r.case
        predicted = "—" if r.predicted_ratio is None else f"{r.predicted_ratio:.3f}×"
        error = "—" if r.error is None else f"{r.error:+.1%}"
        kind = " (calibration)" if c.name in calibrations else ""
        lines.append(f"| {c.name}{kind} | {c.seq_len} | {c.microbatch} × {c.n_devices}, {c.global_batch} | {c.recompute} | "
                     f"{c.published_ratio:.3f}× | {predicted} | {error} | {r.note} | {c.source} |")
    a100, h100 = get_preset("a100"), get_preset("h100")
    gemm_ratio = h100.peak_flops * h100.gemm_efficiency / (a100.peak_flops * a100.gemm_efficiency)
    lines += ["", "The MPT models are traced as GPT-2-architecture models of the same shape (`ChipRatioCase.workload`);",
              "their runs shard weights and gradients (FSDP FULL_SHARD), which the plans write as ZeRO-1 with HBM",
              "capacity not binding (`RATIO_HBM_GB`).", "",
              "What moved the ratios (measured on these rows before each change): with both chips at efficiency 1 and",
              "the traced eager attention, 5 of 7 were within ±10 %, the two GEMM-bound sequence-1024 rows at +13.0 % and",
              "+16.2 %, while the 4,096-token rows came out right largely because the eager attention's `s × s` HBM traffic",
              "(at the chips' 1.68× bandwidth ratio) stood in for the attention kernel's slowness on H100. With the fused",
              "causal kernel every row's predicted ratio rose to within 20–27 % above the published one (both chips",
              f"still at efficiency 1), near the presets' sustained GEMM ratio {gemm_ratio:.2f}× (MAMF-measured bf16 matmul",
              "rates), while this stack's published H100 runs stay at 2.2–2.3× the A100's at every sequence length. That",
              "offset is the same on every row: the stack's kernels run further below the H100's measured best than",
              "below the A100's (its own table: 40–46 % MFU on H100, 55–64 % on A100), which the per-chip efficiency",
              f"carries; the held-out rows' errors then span {100 * (max(held) - min(held)):.1f} percentage points.", "",
              "Per chip (the note column), the rows run without activation checkpointing (MPT-1B and 3B, `selective`)",
              "are over-predicted by 18–27 % on both chips and the checkpointed ones (7B, 13B) are within ±7 %; the",
              "data cannot tell the two candidates apart (every non-checkpointed row is also a small model, whose",
              "unfused elementwise kernels — eager PyTorch layer norm, GELU, residual adds, which the model fuses into",
              "GEMM epilogues — are a larger share of the step), and the ratio is unaffected because both chips miss alike."]
    return lines


def _predict_all(cases, ratio_cases, step) -> tuple[list[Prediction], list]:
    """Every case's and chip-ratio case's prediction, each printed as it comes (``step(name)`` after each)."""
    predictions = []
    for case in cases:
        prediction = predict(case)
        predictions.append(prediction)
        error = "—" if prediction.error is None else f"{prediction.error:+.1%}"
        predicted = "—" if prediction.predicted is None else _figure(case.metric, prediction.predicted)
        print(f"{case.name:36s} {case.stack:18s} {case.accelerator:6s} {prediction.kind:11s} published "
              f"{_figure(case.metric, case.published):>8s}  predicted {predicted:>8s}  error {error:>7s}  {prediction.plan}  "
              f"{prediction.note[:100]}", flush=True)
        step(case.name)
    ratios = []
    for case in ratio_cases:
        ratio = predict_ratio(case)
        ratios.append(ratio)
        predicted = "—" if ratio.predicted_ratio is None else f"{ratio.predicted_ratio:.3f}"
        error = "—" if ratio.error is None else f"{ratio.error:+.1%}"
        print(f"{ratio.case.name:36s} published H100/A100 {ratio.case.published_ratio:.3f}  predicted {predicted:>6s}  "
              f"error {error:>7s}  {ratio.note}", flush=True)
        step(case.name)
    return predictions, ratios


@contextmanager
def _progress(total: int):
    """On a terminal, the CLIs' one progress display on stderr (:func:`phaze_env.cli.progress_display`): the cases with
    their total and a time left, then the sensitivities and the report; yields ``step(name)`` (``None``: the cases are
    done). Off a terminal, ``step`` does nothing and stdout keeps the report lines alone."""
    err = cli_console(stderr=True)
    if not err.is_terminal:
        yield lambda name: None
        return
    with progress_display(err) as bar:
        cases = bar.add_task(f"validating {total} published runs", total=total)

        def step(name: str | None) -> None:
            if name is None:
                bar.update(cases, completed=total)
                bar.add_task("the sensitivities (plans re-evaluated) and the report", total=None)
            else:
                done = int(bar.tasks[cases].completed) + 1
                bar.update(cases, completed=done, description=f"validating · {done} of {total} runs · {name}")
        yield step


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.validate", description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "validation.md"),
                        help="Markdown report path (default docs/validation.md of the repository)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    figure = out.parent / "figures" / "validation.png"
    try:
        cases = [get_case(name) for name in args.cases.split(",")] if args.cases else list(all_cases())
        if out.is_dir():
            raise ValueError(f"--out {out} is a directory; give the report's file path (….md)")
        for directory in (out.parent, figure.parent):  # before the predictions, not after them
            writable_directory(directory)
    except ValueError as exc:
        parser.error(str(exc))
    ratio_cases = [] if args.cases else list(RATIO_CASES)  # a --cases run is a subset
    with _progress(len(cases) + len(ratio_cases)) as step:
        predictions, ratios = _predict_all(cases, ratio_cases, step)
        step(None)  # the sensitivities re-evaluate plans: a phase of their own
        try:
            write_text_atomic(out, markdown(predictions, microbatch_sensitivity(predictions), ratios,
                                            interleave_sensitivity(predictions)))
            with atomic_path(figure) as temporary:
                plot(profiled(predictions), temporary)  # the H100 cases: a table of their own
        except OSError as exc:
            parser.exit(1, f"{parser.prog}: error: cannot write the report into {out.parent}: {exc.strerror or exc}\n")
    every, predictions = predictions, profiled(predictions)

    h100 = held_out_errors([p for p in every if p not in predictions])
    if h100:
        print(f"H100 and MoE (held out): mean absolute error {statistics.mean(h100):.1%} over {len(h100)} cases")
    for profile in STACKS.values():
        for fit in profile.fits:  # by stack and chip, as the report's profile table
            held = held_out_errors([p for p in every if p.case.accelerator in fit.chips], profile.name)
            if held:
                print(f"{profile.name} on {'/'.join(fit.chips)}: mean absolute error {statistics.mean(held):.1%} over "
                      f"{len(held)} held-out cases (calibration: {fit.calibration}); "
                      f"{sum(e <= TOLERANCE for e in held)} within ±{TOLERANCE:.0%}")
    for points in scaling_series(every):
        print(f"scaling trend {points[0].case.workload} ({points[0].case.stack}): per-GPU throughput vs the smallest "
              "scale, published / predicted: " + ", ".join(f"{p.case.n_devices} GPUs {p.published:.1%} / {p.predicted:.1%}"
                                                           for p in points))
    errors = held_out_errors(predictions)
    if errors:
        print(f"mean absolute error {statistics.mean(errors):.1%} over {len(errors)} held-out cases; "
              f"{sum(e <= TOLERANCE for e in errors)} within ±{TOLERANCE:.0%}; wrote {out}")
    return 0 if errors and not any(math.isnan(e) for e in errors) else 1


if __name__ == "__main__":
    raise SystemExit(main())
