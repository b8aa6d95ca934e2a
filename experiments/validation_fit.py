"""Predicting a published training run and fitting a stack's efficiency to one (:mod:`experiments.validate`).

A case's plan is pinned on its accelerator and cluster presets running its training stack's profile, ``evaluate``
predicts the time per batch, and the prediction is converted to the case's metric with the *authors'* formula
(:func:`metric_value`); a profile's efficiency (or hybrid-shard exposure) on a chip is the value at which its
calibration case is predicted exactly (:func:`fit_efficiency`, :func:`fit_exposure`, bisection). The statistics over
the predictions are in :mod:`experiments.validation_stats`, the report in :mod:`experiments.validation_report`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from experiments.validation_cases import ChipRatioCase, ValidationCase, get_case
from phaze_env.cluster import get_cluster
from phaze_env.evaluate import Evaluation, evaluate
from phaze_env.hardware import Accelerator, get_preset
from phaze_env.plan_spec import PlanSpec
from phaze_env.stacks import STACKS, get_stack
from phaze_env.workloads import get_workload, model_graph
CALIBRATION_CASES = {**{fit.calibration: profile.name for profile in STACKS.values() for fit in profile.fits},
                     **{profile.exposure_calibration: profile.name for profile in STACKS.values()
                        if profile.exposure_calibration},
                     **{profile.host_calibration: profile.name for profile in STACKS.values()
                        if profile.host_calibration and not profile.variant_of}}
"""Case → the stack profile whose efficiency (on that case's chip), hybrid all-reduce exposure or host cost per operator
is fitted to it; reported, but left out of every mean error."""
CALIBRATION_CASE = STACKS["megatron-lm"].calibration
"""The case ``phaze_env.cluster.MEGATRON_A100_EFFICIENCY`` (the dgx-a100 preset's own efficiency) is fitted to."""
SKIPPED = "skipped: needs "  # the note of a case with a ``requires`` (listed as data, not predicted)
PUBLISHED_PEAK_FLOPS = {
    "a100": 312e12,  # A100 bf16 dense tensor-core peak, the figure Korthikanti et al. 2022 divide by
    "tpuv4": 275e12,  # TPU v4 bf16 peak per chip, the figure Chowdhery et al. 2022 divide by
}


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
    """The case's plan as published. Its ``e`` is pinned where the case's stack can place it (``e | d``, or
    ``e | t·c·d`` on a stack that folds its expert grid); otherwise it stays free — such a run needs the folded grid
    and is data (``ValidationCase.requires``)."""
    ranks = case.tensor * case.context * case.data if STACKS[case.stack].folded_experts else case.data
    return PlanSpec(t=case.tensor, p=case.pipeline, d=case.data, microbatch=case.microbatch, interleave=case.interleave,
                    recompute=case.recompute, sequence_parallel=case.sequence_parallel, zero=case.zero,
                    shard_group=case.shard_group, c=case.context,
                    e=case.expert_parallel if ranks % case.expert_parallel == 0 else None)


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
    if case.metric in MCORE_METRICS:
        return megatron_core_flops(case) / (time_per_batch_s * case.n_devices) / 1e12
    raise ValueError(f"case {case.name!r}: no formula here for metric {case.metric!r}")


def six_n_flops(case: ValidationCase) -> float:
    """Model FLOPs of one batch as MaxText counts them (``MaxText/train.py`` at commit d3f68fe2c: ``6 ·
    num_model_parameters · max_target_length · per_device_batch_size`` per device): ``6·P`` per token, ``P`` every
    parameter of the model (the traced graph's, the shared embedding once), no attention term."""
    params = model_graph(case.workload, seq_len=case.seq_len).params_total
    return 6 * params * case.global_batch * case.seq_len


MCORE_METRICS = ("mcore_tflops_per_device", "mcore_causal_tflops_per_device")
"""The metrics counted by Megatron-LM's ``num_floating_point_operations`` (:func:`megatron_core_flops`)."""


def megatron_core_flops(case: ValidationCase) -> float:
    """Model FLOPs of one batch as Megatron-Core v0.8 counts them (``megatron/training/training.py``,
    ``num_floating_point_operations`` at NVIDIA/Megatron-LM commit 0b981f9c53): ``12·B·s·l·h²·(attention + MLP +
    logit)`` with the query projection, grouped-query K/V and the full (not causal) s×s score terms, the routed
    experts' SwiGLU MLP × top-k, and the vocabulary padded to a multiple of 128; no recompute. That version counts
    no shared experts, so a model with them has no such figure. Metric ``mcore_causal_tflops_per_device``: the count
    since Megatron-LM MR !2789 (commit 8873b55d6a, 2025-03-06, "Fixes in number of floating-point operation estimates
    for MoE and attention layer"; still so at 1e057005, the ModelZoo's Qwen3-235B runs): the score terms halved,
    ``s/(2h)`` ("Only half of the attention matrix is non-zero"), for a model without shared experts or dense layers
    the same otherwise."""
    cfg = get_workload(case.workload).config_dict
    if cfg.get("shared_expert_intermediate_size") or cfg.get("n_shared_experts"):
        raise ValueError(f"case {case.name!r}: Megatron-Core v0.8's FLOP count has no shared experts")
    if case.metric == "mcore_causal_tflops_per_device" and get_workload(case.workload).leading_dense_layers:
        raise ValueError(f"case {case.name!r}: the causal count here has no dense layers")
    layers, hidden, vocab, seq = _dims(case)
    heads = int(cfg["num_attention_heads"])
    query_ratio = (cfg.get("head_dim") or hidden // heads) * heads / hidden
    kv_ratio = int(cfg.get("num_key_value_heads") or heads) / heads
    ffn = int(cfg.get("moe_intermediate_size") or cfg["intermediate_size"])
    routed = int(cfg.get("num_experts_per_tok", 1))
    padded_vocab = math.ceil(vocab / (128 * case.tensor)) * 128 * case.tensor
    scores = seq / hidden / (2 if case.metric == "mcore_causal_tflops_per_device" else 1)
    attention = (1 + kv_ratio + scores) * query_ratio
    mlp = ffn / hidden * routed * 3 / 2  # SwiGLU: three h×ffn GEMMs where a plain MLP has two
    logit = padded_vocab / (2 * layers * hidden)
    return 12 * case.global_batch * seq * layers * hidden**2 * (attention + mlp + logit)


def is_moe(case: ValidationCase) -> bool:
    return int(get_workload(case.workload).config_dict.get("num_experts_per_tok") or 0) > 0


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
    if case.rules:  # what the run's stack set otherwise than its profile, as the case's source publishes it
        cluster = cluster.replace(plan_rules=replace(cluster.stack.plan_rules, **dict(case.rules)))
    if case.stack_knobs:
        cluster = cluster.replace(stack=replace(cluster.stack, **dict(case.stack_knobs)))
    return cluster


def case_accelerator(case: ValidationCase):
    """The case's accelerator preset in the case's number format."""
    return get_preset(case.accelerator).replace(number_format=case.number_format)


def _predictor(case: ValidationCase, field: str, **cluster_fields):
    """``value → the case's predicted metric`` with the cluster field ``field`` set to ``value`` (a number or a flag;
    the case's cluster with ``cluster_fields`` changed); an infeasible prediction raises."""
    cluster = case_cluster(case).replace(**cluster_fields)
    accelerator = case_accelerator(case)

    def predicted(value) -> float:
        evaluation = evaluate(case.workload, accelerator, cluster.replace(**{field: value}), plan=plan_of(case),
                              seq_len=case.seq_len)
        if not evaluation.feasible:
            raise ValueError(f"case {case.name!r} is infeasible in the model: {evaluation.reason}")
        return metric_value(case, evaluation.plan.time_per_batch_s)

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
    """The hybrid-shard all-reduce exposure (``Stack.hybrid_allreduce_exposure``) at which ``case`` is predicted
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


def fit_host_op_s(case: ValidationCase, *, tolerance: float = 1e-7, **cluster_fields) -> float:
    """The host issue time per traced operator (``Stack.host_op_s``, :mod:`phaze_env.host`) at which ``case`` is
    predicted exactly, at its cluster's efficiency (bisection in [0, 1 ms]: the predicted throughput falls as the host
    slows): how a stack profile's host cost is fitted to one run. ``cluster_fields`` as :func:`fit_efficiency`."""
    predicted = _predictor(case, "host_op_s", **cluster_fields)
    if predicted(0.0) < case.published:
        raise ValueError(f"case {case.name!r}: even with the host never limiting the model predicts less than the "
                         "published figure")
    return _bisect(predicted, case.published, 0.0, 1e-3, tolerance)


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
    time_s = evaluation.plan.time_per_batch_s
    parts = evaluation.time_breakdown_s
    largest = sorted(parts, key=parts.get, reverse=True)[:3]
    note = ", ".join(f"{key} {parts[key] / time_s:.0%}" for key in largest)
    efficiency = compute_efficiency(case, evaluation)
    note += f"; compute at {efficiency:.0%} of {'the bf16 ' if case.number_format == 'fp8' else ''}peak"
    layers = tuple(len(group) for group in evaluation.plan.stage_layers)
    return Prediction(case, evaluation.plan.notation, metric_value(case, time_s), time_s, note, efficiency, layers)


def compute_efficiency(case: ValidationCase, evaluation: Evaluation) -> float:
    """How fast the model runs the layers' arithmetic: the model FLOPs one device does per batch over ``compute``
    time × the published peak — the figure that sets most of the error. The model FLOPs are the authors' count where
    the metric is theirs (Korthikanti's formula for a GPT-shaped ``tflops_per_device`` or ``mfu`` case, MaxText's 6·N,
    Megatron-Core's count for a MoE case published in its TFLOP/s); otherwise (``samples_s``, ``tokens_s_per_device``: Llama's SwiGLU and
    grouped-query shapes, which the GPT formula miscounts by −6 … +16 %) the traced model's own, as ``Evaluation.mfu``
    counts them."""
    if is_moe(case) and case.metric in MCORE_METRICS:  # Megatron-Core's count: routed experts only
        flops = megatron_core_flops(case) / case.n_devices
    elif case.metric == "mfu_6n":  # the authors' count (its model's attention width is not Korthikanti's h)
        flops = six_n_flops(case) / case.n_devices
    elif case.metric in ("tflops_per_device", "mfu"):
        layers, hidden, vocab, seq = _dims(case)
        flops = 72 * case.global_batch * seq * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (12 * layers * hidden))
        flops /= case.n_devices
    else:  # Evaluation.mfu: model FLOPs per second over the peak of the design's format, per device used
        flops = evaluation.mfu * evaluation.peak_flops * evaluation.plan.time_per_batch_s
    # The bf16 peak for every case, FP8 ones too (the note says "of the bf16 peak" for them): the authors' peaks
    # are bf16 figures, and Evaluation.peak_flops is the FP8 peak for an FP8 design.
    peak = PUBLISHED_PEAK_FLOPS.get(case.accelerator, Accelerator.from_dict(evaluation.accelerator).peak_flops)
    return flops / (evaluation.time_breakdown_s["compute"] * peak)


def published_time_s(case: ValidationCase) -> float:
    """The published time per batch, back from the published metric with the authors' formula."""
    reference_s = 1.0
    return reference_s * metric_value(case, reference_s) / case.published


def evaluation_with(case: ValidationCase, *, hbm_gb: float | None = None, **cluster_fields) -> Evaluation:
    """``case``'s pinned plan evaluated on its cluster with ``cluster_fields`` changed (a sensitivity or an alternative
    structure, e.g. ``hybrid_allreduce_overlapped=True``: PyTorch's HYBRID_SHARD instead of the stack's own), at its
    chip's HBM or at ``hbm_gb`` GiB (e.g. far above its need: the plan's time with memory not binding)."""
    cluster = case_cluster(case).replace(**cluster_fields)
    return evaluate(case.workload, case_accelerator(case), cluster, plan=plan_of(case), seq_len=case.seq_len,
                    hbm_gb=hbm_gb)


def metric_with(case: ValidationCase, *, hbm_gb: float | None = None, **cluster_fields) -> float:
    """``case``'s metric predicted on its cluster with ``cluster_fields`` changed (:func:`evaluation_with`)."""
    return metric_value(case, evaluation_with(case, hbm_gb=hbm_gb, **cluster_fields).plan.time_per_batch_s)


def error_with(case: ValidationCase, *, hbm_gb: float | None = None, **cluster_fields) -> float:
    """The error ``case`` would have on its cluster with ``cluster_fields`` changed (:func:`evaluation_with`)."""
    return metric_with(case, hbm_gb=hbm_gb, **cluster_fields) / case.published - 1


def predicted_compile_gain(case_name: str) -> float:
    """Step time with the elementwise operators unfused over fused, minus 1, at the case's plan and the profile's
    fitted efficiency (the case's metric is a rate, so the time ratio is its inverse)."""
    predicted = _predictor(get_case(case_name), "unfused_elementwise")
    return predicted(False) / predicted(True) - 1.0


def h100_exposed_share() -> float:
    """Share of the H100 7B HSDP step (fms-fsdp-mar24-llama2-7b-h100) that the profile's all-reduce exposure adds."""
    predicted = _predictor(get_case("fms-fsdp-mar24-llama2-7b-h100"), "hybrid_allreduce_exposure")
    return 1.0 - predicted(STACKS["pytorch-fsdp"].hybrid_allreduce_exposure) / predicted(0.0)
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
        cluster = cluster.replace(framework_efficiency=framework_efficiency)
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
