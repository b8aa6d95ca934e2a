"""The one door: ``evaluate(workload, accelerator, cluster, ...) -> Evaluation``.

Pipeline (docs/design.md): per tensor-parallel width ``t`` and microbatch size ``m`` the workload is traced
into per-layer fused DAGs (cached); every operator's one-core and all-cores latency is estimated on the
accelerator; each layer's forward and backward DAGs are scheduled by the ILP (cached); the placement DP
then finds the best data × pipeline × tensor plan over ``t``, ``m``, recompute and HBM capacity.
Whole evaluations are cached on disk, keyed by everything they depend on, so re-evaluating a design
is a lookup.

:func:`throughput_upper_bound` runs the same pipeline with each layer's *lower-bound* makespan instead
of its ILP schedule. The placement DP's time per batch never decreases when a layer gets slower, so this
is a valid upper bound on the throughput ``evaluate`` returns — the exact search prunes with it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable

from phaze_env.cache import DiskCache, content_key
from phaze_env.hardware import Accelerator, op_energy_j
from phaze_env.hardware.estimator import accelerator_table
from phaze_env.hardware.space import HBM_GB_VALUES as DEFAULT_HBM_GB, MICROBATCH_VALUES as DEFAULT_MICROBATCHES
from phaze_env.placement import Plan, best_plan
from phaze_env.schedule import makespan_lower_bound, schedule_graph
from phaze_env.workloads import TENSOR_WIDTHS, Layer, Workload, get_workload, model_graph

EVALUATION_VERSION = 2
GB = 1e9
DEFAULT_TIME_LIMIT_S = 10.0

_EVALUATIONS = DiskCache("evaluations")
_BOUNDS = DiskCache("bounds")


@dataclass(frozen=True)
class Cluster:
    """The system: identical accelerators on a ring interconnect, and the training batch it runs.

    Defaults are PHAZE's: 1024 accelerators, global batch 4096, 4 GB/s links, SGD-like optimizer state.
    """

    n_devices: int = 1024
    link_bandwidth_Bps: float = 4e9
    link_latency_s: float = 0.0
    global_batch: int = 4096
    optimizer: str = "sgd"

    def __post_init__(self) -> None:
        for name in ("n_devices", "global_batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"cluster {name} must be a positive integer, got {value!r}")
        if not self.link_bandwidth_Bps > 0:
            raise ValueError(f"cluster link_bandwidth_Bps must be positive, got {self.link_bandwidth_Bps!r}")
        if not self.link_latency_s >= 0:
            raise ValueError(f"cluster link_latency_s must be non-negative, got {self.link_latency_s!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Cluster:
        return cls(**data)


@dataclass(frozen=True)
class LayerTiming:
    """One layer's schedule on one accelerator at one (tensor width, microbatch)."""

    fwd_s: float
    bwd_s: float
    fwd_lower_bound_s: float
    bwd_lower_bound_s: float
    fwd_method: str
    bwd_method: str
    fwd_optimal: bool
    bwd_optimal: bool


@dataclass(frozen=True)
class Evaluation:
    """Everything known about one design on one workload (seconds, bytes, joules, mm²)."""

    workload: str
    accelerator: dict[str, Any]
    cluster: dict[str, Any]
    feasible: bool
    reason: str
    throughput_samples_s: float
    tokens_s: float
    mfu: float
    area_mm2: float
    peak_flops: float
    energy_per_sample_j: float
    plan: dict[str, Any]
    memory_bytes: dict[str, float]
    layer_timings: dict[str, dict[str, dict[str, Any]]]  # "t{t}_m{m}" → layer name → LayerTiming fields
    timings_s: dict[str, float]
    ilp_solves: int
    schedules: int
    dp_calls: int = 0  # placement DP calls (one per tensor width × microbatch × HBM capacity)
    knobs: dict[str, Any] = field(default_factory=dict)
    from_cache: bool = False

    @property
    def hbm_gb(self) -> float:
        return float(self.plan.get("hbm_bytes", 0.0)) / GB

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        if not self.feasible:
            return f"{self.workload}: infeasible ({self.reason})"
        p = self.plan
        return (f"{self.workload}: {self.throughput_samples_s:,.1f} samples/s ({self.tokens_s:,.0f} tokens/s, "
                f"MFU {self.mfu:.1%}), t={p['tensor_width']} p={p['pipeline_stages']} d={p['data_parallel']} "
                f"m={p['microbatch']}, area {self.area_mm2:.1f} mm²")


def _normalise(workload, accelerator, cluster, microbatch_sizes, recompute, hbm_gb, tensor_widths):
    workload = get_workload(workload)
    if not isinstance(accelerator, Accelerator):
        raise TypeError(f"accelerator must be an Accelerator, got {type(accelerator).__name__}")
    cluster = cluster if cluster is not None else Cluster()
    if not isinstance(cluster, Cluster):
        raise TypeError(f"cluster must be a Cluster, got {type(cluster).__name__}")
    microbatches = tuple(sorted({int(m) for m in microbatch_sizes}))
    if not microbatches or min(microbatches) <= 0:
        raise ValueError(f"microbatch sizes must be positive integers, got {microbatch_sizes!r}")
    recompute = tuple(sorted({bool(r) for r in recompute}))
    if not recompute:
        raise ValueError("recompute must list at least one of False, True")
    capacities = (accelerator.hbm_gb,) if hbm_gb is None else tuple(sorted({float(h) for h in _as_tuple(hbm_gb)}))
    if not capacities or min(capacities) <= 0:
        raise ValueError(f"HBM capacities must be positive, got {hbm_gb!r}")
    widths = tuple(sorted({int(t) for t in tensor_widths}))
    if not widths or min(widths) <= 0:
        raise ValueError(f"tensor widths must be positive integers, got {tensor_widths!r}")
    return workload, cluster, microbatches, recompute, capacities, widths


def _as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, Iterable) and not isinstance(value, (str, bytes)) else (value,)


def valid_tensor_widths(workload: Workload, widths: Iterable[int], n_devices: int) -> list[int]:
    """Widths at which the workload can be split (heads and hidden sizes divide) and that fit the cluster."""
    cfg = workload.config_dict
    heads = next((int(cfg[k]) for k in ("num_attention_heads", "n_head") if k in cfg), 1)
    return [t for t in widths if t <= n_devices and t & (t - 1) == 0 and heads % t == 0]


def _layer_chain(graph, timings: dict[str, LayerTiming]) -> list[dict[str, float]]:
    chain = []
    for layer in graph.layers:
        timing = timings[layer.name]
        entry = {"fwd_s": timing.fwd_s, "bwd_s": timing.bwd_s, "param_bytes": float(layer.param_bytes),
                 "stash_bytes": float(layer.activation_stash_bytes), "output_bytes": float(layer.output_bytes),
                 "input_bytes": float(layer.input_bytes)}
        chain.extend([entry] * layer.repeat)
    return chain


def _time_layer(layer: Layer, acc: Accelerator, cluster: Cluster, *, bound_only: bool, solver: str,
                time_limit_s: float, counters: dict[str, float]) -> LayerTiming:
    results = {}
    for direction in ("fwd", "bwd"):
        dag = getattr(layer, direction)
        started = time.perf_counter()
        table = accelerator_table(dag.ops, acc, link_bandwidth_Bps=cluster.link_bandwidth_Bps,
                                  link_latency_s=cluster.link_latency_s)
        one, all_cores = table.latencies_s(0, 0)
        counters["estimate"] += time.perf_counter() - started
        started = time.perf_counter()
        if bound_only:
            ops = [{"unit": op.unit, "latency_s": float(a), "latency_parallel_s": float(b)}
                   for op, a, b in zip(dag.ops, one, all_cores)]
            bound = makespan_lower_bound(ops, dag.edges, acc.num_tc, acc.num_vc) if ops else 0.0
            results[direction] = (bound, bound, "bound", False)
        elif dag.ops:
            schedule = schedule_graph(dag, one, all_cores, acc.num_tc, acc.num_vc, solver=solver,
                                      time_limit_s=time_limit_s)
            counters["ilp_solves"] += schedule.solver_calls if not schedule.from_cache else 0
            counters["schedules"] += 1
            results[direction] = (schedule.makespan_s, schedule.lower_bound_s, schedule.method, schedule.optimal)
        else:
            results[direction] = (0.0, 0.0, "empty", True)
        counters["schedule"] += time.perf_counter() - started
    (f, flb, fm, fo), (b, blb, bm, bo) = results["fwd"], results["bwd"]
    return LayerTiming(f, b, flb, blb, fm, bm, fo, bo)


def _energy_per_sample_j(graph, acc: Accelerator, tensor_width: int) -> float:
    per_microbatch = sum(layer.repeat * sum(op_energy_j(op, acc) for op in layer.fwd.ops + layer.bwd.ops)
                         for layer in graph.layers)
    return per_microbatch * tensor_width / graph.microbatch


def _model_flops_per_sample(graph) -> float:
    """Model FLOPs (forward + backward, no recompute) of one sample over the whole tensor group."""
    per_device = sum((layer.flops_fwd + layer.flops_bwd) * layer.repeat for layer in graph.layers)
    return per_device * graph.tensor_width / graph.microbatch


def _run(workload, acc, cluster, microbatches, recompute, capacities, widths, *, seq_len, bound_only, solver,
         time_limit_s) -> Evaluation:
    counters = {"trace": 0.0, "estimate": 0.0, "schedule": 0.0, "placement": 0.0, "ilp_solves": 0, "schedules": 0,
                "dp_calls": 0}
    best: Plan | None = None
    best_graph = None
    reasons: list[str] = []
    layer_timings: dict[str, dict[str, dict[str, Any]]] = {}
    usable = valid_tensor_widths(workload, widths, cluster.n_devices)
    if not usable:
        reasons.append(f"no tensor width in {list(widths)} divides {workload.name}'s attention heads")
    for t in usable:
        for m in microbatches:
            started = time.perf_counter()
            graph = model_graph(workload, seq_len=seq_len, microbatch=m, tensor_width=t)
            counters["trace"] += time.perf_counter() - started
            timings = {layer.name: _time_layer(layer, acc, cluster, bound_only=bound_only, solver=solver,
                                               time_limit_s=time_limit_s, counters=counters)
                       for layer in graph.layers}
            layer_timings[f"t{t}_m{m}"] = {name: asdict(timing) for name, timing in timings.items()}
            chain = _layer_chain(graph, timings)
            started = time.perf_counter()
            for capacity in capacities:
                plan = best_plan(chain, n_devices=cluster.n_devices, tensor_width=t, global_batch=cluster.global_batch,
                                 microbatch=m, hbm_bytes=capacity * GB, link_bandwidth_Bps=cluster.link_bandwidth_Bps,
                                 link_latency_s=cluster.link_latency_s, allow_recompute=any(recompute),
                                 optimizer=cluster.optimizer, seq_len=graph.seq_len,
                                 model_flops_per_sample=_model_flops_per_sample(graph), peak_flops=acc.peak_flops)
                counters["dp_calls"] += 1
                if not plan.feasible:
                    reasons.append(f"t={t} m={m} hbm={capacity:g} GB: {plan.reason}")
                elif best is None or plan.throughput_samples_s > best.throughput_samples_s * (1 + 1e-12):
                    best, best_graph = plan, graph
            counters["placement"] += time.perf_counter() - started
    timings_s = {k: counters[k] for k in ("trace", "estimate", "schedule", "placement")}
    common = dict(workload=workload.name, cluster=cluster.to_dict(), area_mm2=acc.area_mm2, peak_flops=acc.peak_flops,
                  layer_timings=layer_timings, timings_s=timings_s, ilp_solves=int(counters["ilp_solves"]),
                  schedules=int(counters["schedules"]), dp_calls=int(counters["dp_calls"]),
                  knobs={"microbatches": list(microbatches), "recompute": list(recompute),
                         "hbm_gb": list(capacities), "tensor_widths": list(widths)})
    if best is None:
        return Evaluation(accelerator=acc.to_dict(), feasible=False, reason="; ".join(reasons) or "no feasible plan",
                          throughput_samples_s=0.0, tokens_s=0.0, mfu=0.0, energy_per_sample_j=0.0, plan={},
                          memory_bytes={}, **common)
    chosen = acc.replace(hbm_gb=best.hbm_bytes / GB)
    return Evaluation(accelerator=chosen.to_dict(), feasible=True, reason="",
                      throughput_samples_s=best.throughput_samples_s, tokens_s=best.tokens_s or 0.0,
                      mfu=best.mfu or 0.0,
                      energy_per_sample_j=0.0 if bound_only else _energy_per_sample_j(best_graph, acc, best.tensor_width),
                      plan=best.to_dict(), memory_bytes=dict(best.memory_bytes), **common)


def evaluate(workload: str | Workload, accelerator: Accelerator, cluster: Cluster | None = None, *,
             microbatch_sizes: Iterable[int] = DEFAULT_MICROBATCHES, recompute: Iterable[bool] = (False, True),
             hbm_gb: float | Iterable[float] | None = DEFAULT_HBM_GB, tensor_widths: Iterable[int] = TENSOR_WIDTHS,
             seq_len: int | None = None, solver: str = "cbc", time_limit_s: float = DEFAULT_TIME_LIMIT_S,
             cache: bool = True) -> Evaluation:
    """Best training throughput of ``workload`` on ``cluster`` accelerators of this architecture.

    Searches the placement (tensor width, pipeline stages and boundaries, data parallelism, per-stage
    recompute) for every microbatch size in ``microbatch_sizes``, every HBM capacity in ``hbm_gb`` (``None``:
    the accelerator's own) and the allowed ``recompute`` settings. Infeasible designs come back with
    ``feasible=False`` and the reason; invalid arguments raise ``ValueError``/``TypeError``.
    """
    workload, cluster, microbatches, recompute, capacities, widths = _normalise(
        workload, accelerator, cluster, microbatch_sizes, recompute, hbm_gb, tensor_widths)
    key = content_key("evaluation", EVALUATION_VERSION, workload.to_dict(), accelerator.to_dict(), cluster.to_dict(),
                      microbatches, recompute, capacities, widths, seq_len, solver, time_limit_s)
    if cache and (hit := _EVALUATIONS.get(key)) is not None:
        return hit if hit.from_cache else replace(hit, from_cache=True)
    result = _run(workload, accelerator, cluster, microbatches, recompute, capacities, widths, seq_len=seq_len,
                  bound_only=False, solver=solver, time_limit_s=time_limit_s)
    if cache:
        _EVALUATIONS.put(key, result)
    return result


def throughput_upper_bound(workload: str | Workload, accelerator: Accelerator, cluster: Cluster | None = None, *,
                           microbatch_sizes: Iterable[int] = DEFAULT_MICROBATCHES,
                           recompute: Iterable[bool] = (False, True),
                           hbm_gb: float | Iterable[float] | None = DEFAULT_HBM_GB,
                           tensor_widths: Iterable[int] = TENSOR_WIDTHS, seq_len: int | None = None,
                           cache: bool = True) -> float:
    """An upper bound on ``evaluate(...).throughput_samples_s`` without any ILP (0 when surely infeasible)."""
    workload, cluster, microbatches, recompute, capacities, widths = _normalise(
        workload, accelerator, cluster, microbatch_sizes, recompute, hbm_gb, tensor_widths)
    key = content_key("bound", EVALUATION_VERSION, workload.to_dict(), accelerator.to_dict(), cluster.to_dict(),
                      microbatches, recompute, capacities, widths, seq_len)
    if cache and (hit := _BOUNDS.get(key)) is not None:
        return hit
    result = _run(workload, accelerator, cluster, microbatches, recompute, capacities, widths, seq_len=seq_len,
                  bound_only=True, solver="cbc", time_limit_s=DEFAULT_TIME_LIMIT_S)
    bound = result.throughput_samples_s * (1 + 1e-9) if result.feasible else 0.0
    if cache:
        _BOUNDS.put(key, bound)
    return bound


__all__ = ["Cluster", "Evaluation", "LayerTiming", "evaluate", "throughput_upper_bound", "valid_tensor_widths"]
