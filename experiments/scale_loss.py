"""What grows with scale in the published strong-scaling series, priced term by term (``python -m
experiments.scale_loss``).

A strong-scaling series keeps the global batch ``B`` and grows the data-parallel degree ``d``: each replica runs
``m_r = B/(d·m)`` microbatches, so a time per batch of the form ``T(d) = F + b/d`` loses per-device throughput only
through ``F``, the time that does not shrink with ``d`` (the 1F1B bubble ``(p−1)·t_mb``, the data-parallel
collective, the optimizer step) and through whatever grows with scale. :func:`fixed_and_per_microbatch_s` reads
``F`` and the time per microbatch ``t_mb = b·m/B`` off the three published step times of a series (least squares of
``T·d = F·d + b``) and off the model's. The candidates for the part the model lacks, each priced here from its
source:

* **NCCL's collective latency at the series' ring lengths** (:func:`nccl_allreduce_latency_s`): NCCL's own tuning
  model, ring against tree, with its published constants (:data:`NCCL_TUNING`).
* **Stragglers and jitter** (:func:`jitter_s`, :func:`slowest_device_factor`): synchronous training waits at every
  synchronisation for the slowest participant, so i.i.d. per-rank noise costs the expected maximum of the ranks'
  draws (Hoefler, Schneider & Lumsdaine, "Characterizing the Influence of System Noise on Large-Scale Applications
  by Simulation", SC'10: a collective over ``P`` processes completes with the last one). Its constant, the
  relative spread ``σ`` of a rank's speed, is *fitted* on the MT-NLG series (:func:`sigma_to_close`) and checked on the
  two Megatron-LM series of Narayanan et al. 2021 Table 2 (held out), and set against its measured range:
  Sinha et al., "Not All GPUs Are Created Equal", SC'22 (arXiv:2208.11035) measure an 8 % average (22 % largest)
  performance variation between GPUs of one SKU in five clusters (:data:`MEASURED_GPU_VARIATION`).

The report also gives the model's ``F`` of the MT-NLG series at twice its unpublished microbatch
(:func:`model_fixed_s_at_microbatch`), and says which of the terms the published series can carry. Nothing here changes the cost model: a term is
adopted only if its fit on one series holds on the others (see the report's last lines).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from experiments.validation_cases import get_case
from experiments.validation_fit import Prediction, evaluation_with, predict, published_time_s
from experiments.validation_stats import TREND_TOLERANCE
from phaze_env.placement.inputs import microbatches_per_replica

NCCL_TUNING = ("NVIDIA/nccl src/graph/tuning.cc at commit 5067397c2676d5aed50042fc39e5c8ee96eb0027 (2026-06-11): "
               "ncclTunerConstantsDefaults, ncclTopoTuneModel, ncclTopoGetAlgoTime")
NCCL_BASE_LATENCY_S = 8.4e-6
"""``baseLatencies`` of the Ring and the Tree algorithms with the Simple protocol (the one NCCL picks for the
megabyte-to-gigabyte gradient buckets): 8.4 µs (:data:`NCCL_TUNING`)."""
NCCL_NET_STEP_LATENCY_S = 14e-6
"""``hwLatencies[NET]`` of Ring and Tree with Simple: 14 µs per inter-node step; with one rank per node (``ppn = 1``,
a data-parallel group of Megatron's rank order) NCCL prices every step with the Tree's NET figure, also 14 µs. The
net plugin's own ``latency`` property, added twice for Simple, is 0 for InfiniBand ("Not set",
src/transport/net_ib/init.cc) (:data:`NCCL_TUNING`)."""
NCCL_RING_PLATEAU = 1.4
"""``ncclTopoGetAlgoTime``: an inter-node Simple ring all-reduce of ≥ 64 bytes per channel and rank has its latency
multiplied by 1.4 on compute capability ≥ 8.0 ("plateau effect of ring") (:data:`NCCL_TUNING`)."""

MEASURED_GPU_VARIATION = (0.08, 0.22)
"""Average and largest performance variation between GPUs of one SKU measured in five HPC clusters (Summit, Vortex,
Frontera, Longhorn, Corona; > 90 % of their GPUs, 18,800 GPU-hours): Sinha et al., SC'22, arXiv:2208.11035, abstract.
Read here as the plausible range of ``σ``, the relative spread of a rank's speed (an *assumption* on how a spread
between GPUs maps to a standard deviation: a spread of 8 % is at most σ ≈ 8 %)."""

SERIES = {
    "megatron-deepspeed 530B (Smith et al. 2022, MT-NLG)": [f"smith22-mtnlg-530b-{n}nodes" for n in (280, 350, 420)],
    "megatron-lm 530B (Narayanan et al. 2021 Table 2)": [f"narayanan21-table2-530b-{g}" for g in (560, 1120, 2240)],
    "megatron-lm 175B (Narayanan et al. 2021 Table 2)": [f"narayanan21-table2-175b-{g}" for g in (384, 768, 1536)],
}
"""The published strong-scaling series (batch fixed, three data-parallel degrees); the first is the one the jitter's
``σ`` is fitted on (:data:`FIT_SERIES`), the others hold it out."""
FIT_SERIES = next(iter(SERIES))


# --- NCCL's latency at the series' ring lengths -------------------------------------------------------------------
def nccl_allreduce_latency_s(algorithm: str, ranks: int, nodes: int, intra_step_s: float = 3.4e-6) -> float:
    """NCCL's modelled latency of one all-reduce (Simple protocol) over ``ranks`` GPUs on ``nodes`` nodes, as
    ``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime`` price it (:data:`NCCL_TUNING`):

    * ring: ``base + (2(r−1) − 2(n−1))·intra + 2(n−1)·inter``, times :data:`NCCL_RING_PLATEAU` across nodes: it
      grows linearly with the ring's length;
    * tree: ``base + 2·((r/n − 1)·intra + ⌊log₂ n⌋·inter)``: it grows with the tree's depth.

    ``intra_step_s``: an NVLink step (``hwLatencies[NVLINK][Ring][Simple]`` = 3.4 µs; NCCL takes the larger of it and
    three times its 1 µs network post overhead on Intel hosts, 3 µs)."""
    if ranks < 1 or nodes < 1 or ranks % nodes:
        raise ValueError(f"an all-reduce needs whole nodes of ranks, got {ranks} ranks on {nodes} nodes")
    if ranks == 1:
        return 0.0
    inter_s = NCCL_NET_STEP_LATENCY_S
    if algorithm == "ring":
        steps, inter_steps = 2 * (ranks - 1), 2 * (nodes - 1)
        latency_s = NCCL_BASE_LATENCY_S + (steps - inter_steps) * intra_step_s + inter_steps * inter_s
        return latency_s * (NCCL_RING_PLATEAU if nodes > 1 else 1.0)
    if algorithm == "tree":
        return NCCL_BASE_LATENCY_S + 2 * ((ranks // nodes - 1) * intra_step_s + int(math.log2(nodes)) * inter_s)
    raise ValueError(f"unknown NCCL algorithm {algorithm!r}; expected ring or tree")


# --- stragglers and jitter ----------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def max_normal_moments(n: int) -> tuple[float, float]:
    """Mean and variance of the largest of ``n`` i.i.d. standard normal draws, by quadrature of its density
    ``n·φ(x)·Φ(x)^(n−1)`` (exact to ~1e-9 on the grid; a Monte-Carlo test checks it)."""
    if n < 1:
        raise ValueError(f"the maximum of {n} draws is undefined")
    x = np.linspace(-12.0, 12.0, 48_001)
    phi = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    cdf = 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    density = n * phi * cdf ** (n - 1)
    dx = x[1] - x[0]
    mean = float(np.sum(x * density) * dx)
    return mean, float(np.sum(x * x * density) * dx) - mean * mean


def jitter_s(sigma: float, step_s: float, steps: int, replica_ranks: int, replicas: int) -> float:
    """Expected time synchronous training loses to per-rank noise in one batch: each of ``steps`` pipeline steps
    (``m_r + p − 1`` of them, ``step_s`` each) waits for the slowest of the replica's ``replica_ranks = t·p`` ranks,
    whose times are i.i.d. ``step_s·(1 + σ·Z)`` (the tensor-parallel collectives and pipeline sends tie a replica's
    ranks step by step), and the batch waits for the slowest of the ``replicas`` replicas at the gradient
    all-reduce. With ``M`` the largest of ``t·p`` normal draws (mean ``μ_M``, variance ``v_M``): a replica's noise
    is ``σ·step_s·(steps·μ_M + √(steps·v_M)·Z')``, and the slowest replica adds ``E[max of d]`` of the ``Z'``."""
    if sigma < 0:
        raise ValueError(f"the spread of a rank's speed must be non-negative, got {sigma}")
    mean_m, var_m = max_normal_moments(replica_ranks)
    return sigma * step_s * (steps * mean_m + math.sqrt(steps * var_m) * max_normal_moments(replicas)[0])


def slowest_device_factor(sigma: float, devices: int) -> float:
    """A persistent straggler: the time factor when the whole job runs at the pace of its slowest of ``devices``
    GPUs whose speeds are i.i.d. with relative spread ``σ`` (every step of every replica waits for it through the
    collectives): ``1 + σ·E[max of N]``."""
    return 1.0 + sigma * max_normal_moments(devices)[0]


# --- the series -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scale:
    """One scale of a series: the case, its published and predicted time per batch, and the plan's shape."""

    name: str
    data: int
    devices: int
    microbatches: int  # per replica
    stages: int
    replica_ranks: int
    published_s: float
    predicted_s: float


def series_scales(names: list[str], prediction_of: Callable[[str], Prediction] = lambda name: predict(get_case(name))
                  ) -> list[Scale]:
    """The series' scales; ``prediction_of``: a case's prediction by name (a report passes the ones it has)."""
    scales = []
    for name in names:
        case = get_case(name)
        prediction = prediction_of(name)
        scales.append(Scale(name, case.data, case.n_devices, case.global_batch // (case.data * case.microbatch),
                            case.pipeline, case.tensor * case.pipeline, published_time_s(case),
                            prediction.time_per_batch_s))
    return scales


def fixed_and_per_microbatch_s(scales: list[Scale], times_s: list[float]) -> tuple[float, float]:
    """``(F, t_mb)`` of ``T(d) = F + m_r(d)·t_mb`` fitted to ``times_s`` by least squares of ``T·d`` on ``d``."""
    d = np.array([s.data for s in scales], float)
    fixed_s, intercept = np.polyfit(d, np.asarray(times_s) * d, 1)
    return float(fixed_s), float(intercept / (scales[0].microbatches * scales[0].data))


def split_by_microbatches(microbatches, times_s) -> tuple[float, float]:
    """``(F, t_mb)`` of ``T = F + m_r·t_mb`` fitted (least squares; exact through two points) to step times
    ``times_s`` at ``microbatches`` per replica — for runs whose batch per replica differs, where
    :func:`fixed_and_per_microbatch_s` is the strong-scaling form (``m_r·d`` fixed, fitted on ``T·d``)."""
    m = np.asarray(microbatches, dtype=float)
    if len(set(m.tolist())) < 2:
        raise ValueError("splitting a step needs at least two different microbatch counts")
    per_microbatch_s, fixed_s = np.polyfit(m, np.asarray(times_s, dtype=float), 1)
    return float(fixed_s), float(per_microbatch_s)


def split_cases(cases, times_s) -> tuple[float, float]:
    """:func:`split_by_microbatches` of validation cases' step times, each case's microbatches per replica counted
    from its batch, data-parallel degree and microbatch."""
    return split_by_microbatches([microbatches_per_replica(c.global_batch, c.data, c.microbatch) for c in cases],
                                 times_s)


def trend(scales: list[Scale], times_s: list[float]) -> list[float]:
    """Per-device throughput relative to the smallest scale (the validation's trend, batch fixed)."""
    per_device = [1.0 / (t * s.devices) for s, t in zip(scales, times_s)]
    return [value / per_device[0] for value in per_device]


def with_jitter(scales: list[Scale], sigma: float) -> list[float]:
    """The model's times per batch with :func:`jitter_s` added at each scale (``t_mb`` from the model's own fit)."""
    step_s = fixed_and_per_microbatch_s(scales, [s.predicted_s for s in scales])[1]
    return [s.predicted_s + jitter_s(sigma, step_s, s.microbatches + s.stages - 1, s.replica_ranks, s.data)
            for s in scales]


def with_slowest_device(scales: list[Scale], sigma: float) -> list[float]:
    return [s.predicted_s * slowest_device_factor(sigma, s.devices) for s in scales]


def worst_difference(scales: list[Scale], times_s: list[float]) -> float:
    """Largest |predicted − published| per-device trend over the series (a fraction: 0.01 = 1 point)."""
    published = trend(scales, [s.published_s for s in scales])
    return max(abs(a - b) for a, b in zip(trend(scales, times_s), published))


def sigma_to_close(scales: list[Scale], times_with, limit: float = 10.0) -> float | None:
    """The smallest ``σ`` ≤ ``limit`` (to 0.001) that brings the series' worst trend difference within the issue's
    3 points under ``times_with(scales, σ)``; None if none does (a scan: the objective is one-dimensional, cheap, and
    not monotone in general)."""
    for sigma in np.arange(0.0, limit + 1e-9, 0.001):
        if worst_difference(scales, times_with(scales, float(sigma))) <= TREND_TOLERANCE:
            return float(sigma)
    return None


def model_fixed_s_at_microbatch(names: list[str], factor: int) -> float:
    """The model's fixed part ``F`` of a series with every case's microbatch ``factor`` times larger (the same
    plans otherwise): where the unpublished microbatch would put the bubble."""
    scales, times = [], []
    for name in names:
        case = get_case(name)
        case = replace(case, microbatch=factor * case.microbatch)
        times.append(evaluation_with(case).plan.time_per_batch_s)
        scales.append(Scale(name, case.data, case.n_devices, case.global_batch // (case.data * case.microbatch),
                            case.pipeline, case.tensor * case.pipeline, published_time_s(case), times[-1]))
    return fixed_and_per_microbatch_s(scales, times)[0]


def report() -> list[str]:
    every = {label: series_scales(names) for label, names in SERIES.items()}
    lines = ["Fixed time per batch F and time per microbatch t_mb of T(d) = F + m_r·t_mb, published / model:"]
    for label, scales in every.items():
        published = fixed_and_per_microbatch_s(scales, [s.published_s for s in scales])
        model = fixed_and_per_microbatch_s(scales, [s.predicted_s for s in scales])
        lines.append(f"  {label}: F {published[0]:.2f} / {model[0]:.2f} s ({published[0] / published[1]:.1f} / "
                     f"{model[0] / model[1]:.1f} microbatch times; p−1 = {scales[0].stages - 1}), t_mb "
                     f"{published[1]:.4f} / {model[1]:.4f} s; worst trend difference "
                     f"{100 * worst_difference(scales, [s.predicted_s for s in scales]):.1f} pp")
    lines.append(f"  the model's F of {FIT_SERIES} at twice its (unpublished) microbatch: "
                 f"{model_fixed_s_at_microbatch(SERIES[FIT_SERIES], 2):.2f} s")
    lines.append("NCCL's all-reduce latency over each series' data-parallel group (one rank per node), ring / tree:")
    for label, scales in every.items():
        parts = [f"d={s.data}: {1e6 * nccl_allreduce_latency_s('ring', s.data, s.data):.0f} / "
                 f"{1e6 * nccl_allreduce_latency_s('tree', s.data, s.data):.0f} µs" for s in scales]
        lines.append(f"  {label}: " + ", ".join(parts))
    for model_name, times_with in (("per-rank jitter (jitter_s)", with_jitter),
                                   ("slowest device paces the job (slowest_device_factor)", with_slowest_device)):
        sigma = sigma_to_close(every[FIT_SERIES], times_with)
        fitted = "no σ ≤ 10 closes it" if sigma is None else f"σ = {sigma:.3f} closes it"
        lines.append(f"{model_name}, fitted on {FIT_SERIES}: {fitted} (measured GPU variation "
                     f"{MEASURED_GPU_VARIATION[0]:.0%} average, {MEASURED_GPU_VARIATION[1]:.0%} largest):")
        for label, scales in every.items():
            before = worst_difference(scales, [s.predicted_s for s in scales])
            at = {f"σ {v:.2f}": worst_difference(scales, times_with(scales, v))
                  for v in (MEASURED_GPU_VARIATION[1],) + (() if sigma is None else (sigma,))}
            lines.append(f"  {label}: worst trend difference {100 * before:.1f} pp; "
                         + ", ".join(f"{100 * value:.1f} pp at {key}" for key, value in at.items()))
    return lines


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    print("\n".join(report()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
