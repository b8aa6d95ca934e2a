"""Statistics over the validation's predictions (:mod:`experiments.validation_fit`): the held-out errors and their
tolerances, the headline's case selection, per-device scaling trends and their sensitivities, and the speed-ups two
published runs imply (selective recompute over full, FP8 over bf16)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from experiments.validation_cases import ValidationCase
from experiments.validation_fit import (Prediction, compute_efficiency, evaluation_with, metric_value, predict,
                                        published_time_s)
from phaze_env.stacks import STACKS, get_stack

TOLERANCE = 0.15  # the target: every case within ±15 % of the published figure
TREND_TOLERANCE = 0.03  # the target for a scaling series: per-GPU trend within 3 percentage points


def profiled(predictions: list[Prediction]) -> list[Prediction]:
    """The predictions the headline error and the main case table are over: every case on its stack's home chip
    (the profile's first fit; the H100 and MoE cases have sections of their own)."""
    return [p for p in predictions if p.case.requires or p.case.stack not in STACKS or on_home_chip(p.case)]


def on_home_chip(case: ValidationCase) -> bool:
    """Whether the case runs on its stack profile's home chip (``fits[0]``: A100, or TPU v4 for jax-xla)."""
    return case.accelerator in get_stack(case.stack).fits[0].chips


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
    """Series of ≥ 3 predicted cases of one run at several data-parallel degrees (same stack, model, sequence, chip,
    number format, ZeRO stage and other plan degrees, and the same measurement campaign), each as the per-device throughput trend relative to its smallest
    scale: a *strong*-scaling series keeps the global batch, a *weak*-scaling one the batch per replica (B/d)."""
    groups: dict[tuple, list[Prediction]] = {}
    for p in predictions:
        c = p.case
        if p.time_per_batch_s is not None:
            plan = (c.stack, c.workload, c.accelerator, c.cluster, c.number_format, c.zero, c.tensor, c.pipeline,
                    c.microbatch, c.interleave, c.recompute, c.sequence_parallel, c.seq_len, c.context,
                    c.expert_parallel, c.stack_knobs, c.campaign)  # a longer sequence over more CP ranks is another
            # run, and so is another campaign's (another release or cluster)
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


# --- H100, bf16 and FP8 ----------------------------------------------------------------------------------------
def _plan(case) -> tuple:
    """What two runs of one plan share, but the number format."""
    return (case.workload, case.n_devices, case.global_batch, case.tensor, case.pipeline, case.context, case.data,
            case.microbatch, case.interleave, case.seq_len)


def fp8_speedups(predictions: list[Prediction]) -> list[tuple[str, float, float]]:
    """(case, published, predicted) speed-up of each FP8 H100 case over the bf16 case of the same plan and scale."""
    by_name = {p.case.name: p for p in predictions}
    rows = []
    for name, fp8 in by_name.items():
        bf16 = by_name.get(name.replace("-fp8-", "-bf16-"))
        if (fp8.case.number_format != "fp8" or bf16 is None or bf16.case.number_format != "bf16"
                or None in (fp8.time_per_batch_s, bf16.time_per_batch_s) or _plan(fp8.case) != _plan(bf16.case)):
            continue  # no bf16 twin of the same plan and scale
        rows.append((name, published_time_s(bf16.case) / published_time_s(fp8.case), bf16.time_per_batch_s / fp8.time_per_batch_s))
    return rows


# --- the same run on two chips ----------------------------------------------------------------------------------
RATIO_TOLERANCE = 0.10  # the target: every predicted chip-to-chip ratio within ±10 % of the published one


@dataclass(frozen=True)
class EfficiencySensitivity:
    """The predicted A100 cases of one stack re-evaluated at another framework efficiency (1: the accelerator model
    alone; or another stack's fitted figure): their errors and how fast their layers' arithmetic then runs."""

    errors: tuple[float, ...]
    compute_efficiencies: tuple[float, ...]  # as :func:`~experiments.validation_fit.compute_efficiency` counts them

    @property
    def over(self) -> tuple[float, ...]:
        """The errors of the over-predicted cases (predicted faster than published)."""
        return tuple(error for error in self.errors if error > 0)


def at_efficiency(predictions: list[Prediction], stack: str | tuple[str, ...], efficiency: float,
                  **stack_fields) -> EfficiencySensitivity:
    """:class:`EfficiencySensitivity` of the predicted A100 cases of ``stack`` (a profile name or several) at
    ``efficiency`` (and ``stack_fields``, e.g. another fit's ``gemm_wave_sms``; each pinned plan evaluated again,
    :func:`~experiments.validation_fit.evaluation_with`): what a stack's fitted efficiency carries, for the report's
    prose, generated rather than typed."""
    stacks = (stack,) if isinstance(stack, str) else tuple(stack)
    errors, efficiencies = [], []
    for p in predictions:
        if p.case.stack not in stacks or p.case.accelerator != "a100" or p.error is None:
            continue
        evaluation = evaluation_with(p.case, framework_efficiency=efficiency, **stack_fields)
        errors.append(metric_value(p.case, evaluation.plan.time_per_batch_s) / p.case.published - 1)
        efficiencies.append(compute_efficiency(p.case, evaluation))
    return EfficiencySensitivity(tuple(errors), tuple(efficiencies))

