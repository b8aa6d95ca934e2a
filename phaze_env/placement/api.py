"""Plain-data entry points of the placement DP: ``best_plan``, ``best_plan_dag``, ``best_plan_multi``."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

from phaze_env.cache import DiskCache, content_key, model_version
from phaze_env.placement.inputs import layer_arrays, settings
from phaze_env.placement.plan import Plan, infeasible
from phaze_env.placement.search import PlacementSearch
from phaze_env.placement.stages import chain_stages, dag_stages

_CACHE_VERSION = 1
LayerList = Sequence[Mapping[str, Any]]


def _cached(cache: bool, parts: tuple, solve: Callable[[], Plan]) -> Plan:
    if not cache:
        return solve()
    store = DiskCache("placement")
    key = content_key("placement", _CACHE_VERSION, model_version(), *parts)
    plan = store.get(key)
    if plan is None:
        plan = solve()
        store.put(key, plan)
    return plan


def best_plan(
    layers: LayerList,
    *,
    n_devices: int,
    tensor_width: int,
    global_batch: int,
    microbatch: int,
    hbm_bytes: float,
    link_bandwidth_Bps: float,
    link_latency_s: float = 0.0,
    allow_recompute: bool = True,
    optimizer: str = "sgd",
    seq_len: int | None = None,
    model_flops_per_sample: float | None = None,
    peak_flops: float | None = None,
    cache: bool = False,
) -> Plan:
    """Highest-throughput 1F1B plan for a chain of layers at one tensor width and microbatch size.

    ``layers``: list, in execution order, of dicts ``{"fwd_s", "bwd_s", "param_bytes", "stash_bytes",
    "output_bytes"}`` (optionally ``"input_bytes"``, default: the previous layer's ``output_bytes``, or
    layer 0's own output), measured on one device at ``tensor_width`` with ``microbatch`` samples.
    Searches every data-parallel degree ``d`` and pipeline depth ``p ≤ len(layers)`` with
    ``d·p·tensor_width ≤ n_devices``, every contiguous partition and per-stage recompute, exactly.
    Microbatches per replica are ``ceil(global_batch / (d·microbatch))``. ``link_bandwidth_Bps=inf``
    means free communication. Invalid inputs raise ``ValueError``; when nothing fits, the plan has
    ``feasible=False`` and a ``reason``. ``cache=True`` memoises in ``DiskCache("placement")``.
    """
    config = settings(
        n_devices=n_devices, tensor_width=tensor_width, global_batch=global_batch, microbatch=microbatch,
        hbm_bytes=hbm_bytes, link_bandwidth_Bps=link_bandwidth_Bps, link_latency_s=link_latency_s,
        allow_recompute=allow_recompute, optimizer=optimizer, seq_len=seq_len,
        model_flops_per_sample=model_flops_per_sample, peak_flops=peak_flops,
    )
    arrays = layer_arrays(layers)

    def solve() -> Plan:
        table = chain_stages(arrays, config.link_bandwidth_Bps, config.link_latency_s)
        return PlacementSearch(arrays, table, config, max_stages=len(arrays)).run()

    return _cached(cache, ("chain", arrays, config), solve)


def best_plan_dag(
    layers: LayerList,
    edges: Iterable[tuple[int, int]],
    *,
    n_devices: int,
    tensor_width: int,
    global_batch: int,
    microbatch: int,
    hbm_bytes: float,
    link_bandwidth_Bps: float,
    link_latency_s: float = 0.0,
    allow_recompute: bool = True,
    optimizer: str = "sgd",
    seq_len: int | None = None,
    model_flops_per_sample: float | None = None,
    peak_flops: float | None = None,
    max_downsets: int = 2048,
    cache: bool = False,
) -> Plan:
    """Like :func:`best_plan` for a layer DAG (``edges``: ``(u, v)`` = layer u feeds layer v).

    Stages are differences of nested downsets (PHAZE's formulation); the DP is exact but its size is
    the number of downsets squared, so more than ``max_downsets`` downsets raise
    ``TooManyDownsetsError`` (a ``ValueError``) instead of running for hours. ``input_bytes`` is used
    only for graph sources and defaults to the source's own ``output_bytes`` (as for layer 0 of a chain;
    never another layer's output, since list order is not data flow); a stage's input is what its
    predecessors in earlier stages output.
    """
    config = settings(
        n_devices=n_devices, tensor_width=tensor_width, global_batch=global_batch, microbatch=microbatch,
        hbm_bytes=hbm_bytes, link_bandwidth_Bps=link_bandwidth_Bps, link_latency_s=link_latency_s,
        allow_recompute=allow_recompute, optimizer=optimizer, seq_len=seq_len,
        model_flops_per_sample=model_flops_per_sample, peak_flops=peak_flops,
    )
    arrays = layer_arrays(layers, chain=False)
    edge_list = tuple(tuple(edge) for edge in edges)

    def solve() -> Plan:
        table = dag_stages(arrays, edge_list, config.link_bandwidth_Bps, config.link_latency_s, max_downsets)
        return PlacementSearch(arrays, table, config, max_stages=len(arrays)).run()

    return _cached(cache, ("dag", arrays, edge_list, config), solve)


def best_plan_multi(
    layers: Mapping[tuple[int, int], LayerList] | Callable[[int, int], LayerList],
    *,
    tensor_widths: Iterable[int] | None = None,
    microbatches: Iterable[int] | None = None,
    recompute: Iterable[bool] = (False, True),
    hbm_bytes: float | Iterable[float],
    cache: bool = False,
    **kwargs: Any,
) -> Plan:
    """Best :func:`best_plan` over tensor widths × microbatch sizes × recompute choices × HBM sizes.

    ``layers`` maps ``(tensor_width, microbatch)`` to that variant's layer list, or is a callable
    ``(tensor_width, microbatch) -> layers``. With a mapping, ``tensor_widths`` / ``microbatches``
    default to the ones it holds (pairs it lacks are skipped); with a callable they are required.
    ``recompute`` lists the allowed settings; allowing recompute dominates forbidding it (a stage
    recomputes only when stashing does not fit), so only the most permissive one is solved.
    ``hbm_bytes`` may be one capacity or several; ties go to the smaller capacity, so the answer also
    says how much HBM the best throughput needs. The remaining keywords go to :func:`best_plan`.
    Returns the highest-throughput plan, or an infeasible plan whose reason lists why each failed.
    """
    if callable(layers):
        if tensor_widths is None or microbatches is None:
            raise ValueError("with a callable for layers, pass tensor_widths and microbatches")
        variants = [(t, m) for t in tensor_widths for m in microbatches]
        layers_for = layers
    else:
        keys = sorted(layers)
        widths = sorted({t for t, _ in keys}) if tensor_widths is None else list(tensor_widths)
        sizes = sorted({m for _, m in keys}) if microbatches is None else list(microbatches)
        variants = [(t, m) for t in widths for m in sizes if (t, m) in layers]
        layers_for = lambda t, m: layers[(t, m)]  # noqa: E731
    choices = list(recompute)
    if not choices:
        raise ValueError("recompute must list at least one of False, True")
    capacities = sorted([hbm_bytes] if isinstance(hbm_bytes, (int, float)) else list(hbm_bytes))
    if not variants or not capacities:
        raise ValueError("no (tensor_width, microbatch) variant or HBM capacity to search")
    best: Plan | None = None
    reasons = []
    for capacity in capacities:
        for t, m in variants:
            plan = best_plan(layers_for(t, m), tensor_width=t, microbatch=m, hbm_bytes=capacity,
                             allow_recompute=any(choices), cache=cache, **kwargs)
            if not plan.feasible:
                reasons.append(f"t={t}, m={m}, hbm={capacity:.4g}: {plan.reason}")
            elif best is None or plan.throughput_samples_s > best.throughput_samples_s:
                best = plan
    return best if best is not None else infeasible("; ".join(reasons))
