"""Plain-data entry points of the placement DP: ``best_plan``, ``best_plan_dag``, ``best_plan_multi``.

Every search is described by value objects, not keyword lists: the layers, a :class:`Settings`
(cluster, tensor width, microbatch, HBM capacity, the pinned parts of the plan) and, for
``best_plan_multi``, the lists to search over. One tie rule (:func:`better`) everywhere.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from phaze_env.cache import DiskCache, code_key
from phaze_env.placement.inputs import LayerCost, Settings, layer_arrays
from phaze_env.placement.plan import Plan, infeasible
from phaze_env.placement.search import PlacementSearch
from phaze_env.placement.stages import chain_stages, dag_stages

_TIE_TOLERANCE = 1e-12  # relative: a later candidate must be this much faster to replace the incumbent
LayerList = Sequence[LayerCost]
_PLACEMENTS = DiskCache("placement")


def _cached(cache: bool, parts: tuple, solve: Callable[[], Plan | None]) -> Plan | None:
    """``solve()`` memoised on disk under ``parts`` (a ``None`` answer is returned but never stored)."""
    if not cache:
        return solve()
    key = code_key(__name__, "placement", *parts)
    plan = _PLACEMENTS.get(key)
    if plan is None:
        plan = solve()
        if plan is not None:
            _PLACEMENTS.put(key, plan)
    return plan


def _check(settings: Settings) -> None:
    if not isinstance(settings, Settings):
        raise ValueError(f"settings must be a placement Settings, got {type(settings).__name__}")


def best_plan(layers: LayerList, settings: Settings, *, cache: bool = False, must_beat: Plan | None = None) -> Plan | None:
    """Highest-throughput plan for a chain of layers at the settings' tensor width and microbatch size.

    ``layers``: list, in execution order, of :class:`~phaze_env.placement.inputs.LayerCost` records (forward and
    backward time, weight, stash and output bytes, optionally the input bytes — default: the previous layer's
    ``output_bytes``, or layer 0's own output — and the shares of :class:`~phaze_env.placement.inputs.LayerArrays`),
    measured on one device at ``settings.tensor_width`` with ``settings.microbatch`` samples. Searches every
    data-parallel degree ``d`` and pipeline depth ``p ≤ len(layers)`` with ``d·p·t ≤ n_devices`` that the
    plan does not pin, every contiguous partition, per-stage recompute mode and interleave, exactly.
    Invalid inputs raise ``ValueError`` (a layer that is not a ``LayerCost``: ``TypeError``); when nothing fits, the plan has ``feasible=False`` and a
    ``reason`` (with the memory a pinned plan would need). ``cache=True`` memoises on disk.

    ``must_beat``: a feasible incumbent (e.g. the best of other tensor widths). The search then only looks
    for a plan that :func:`better` would prefer to it, pruning against its time per batch from the start,
    and returns ``None`` when there is none; a plan it returns is still this search's exact optimum.
    """
    _check(settings)
    arrays = layer_arrays(layers)
    parts = ("chain", arrays, settings)

    def solve(cutoff_s: float = math.inf) -> Plan | None:
        return PlacementSearch(arrays, chain_stages(arrays), settings, max_stages=len(arrays)).run(cutoff_s)

    if must_beat is None or not must_beat.feasible:
        return _cached(cache, parts, solve)
    # better() needs a throughput above must_beat's by the tie tolerance: a time below this one. A stored
    # exact optimum is used as is; a pruned search that finds nothing (None) is never stored.
    cutoff_s = settings.global_batch / (must_beat.throughput_samples_s * (1 + _TIE_TOLERANCE))
    plan = _cached(cache, parts, lambda: solve(cutoff_s))
    return plan if plan is None or not plan.feasible or better(plan, must_beat) else None


def best_plan_dag(layers: LayerList, edges: Iterable[tuple[int, int]], settings: Settings, *,
                  max_downsets: int = 2048, cache: bool = False) -> Plan:
    """Like :func:`best_plan` for a layer DAG (``edges``: ``(u, v)`` = layer u feeds layer v).

    Stages are differences of nested downsets (PHAZE's formulation); the DP is exact but its size is
    the number of downsets squared, so more than ``max_downsets`` downsets raise
    ``TooManyDownsetsError`` (a ``ValueError``) instead of running for hours. ``input_bytes`` is used
    only for graph sources and defaults to the source's own ``output_bytes`` (as for layer 0 of a chain;
    never another layer's output, since list order is not data flow); a stage's input is what its
    predecessors in earlier stages output.
    """
    _check(settings)
    arrays = layer_arrays(layers, chain=False)
    edge_list = tuple(tuple(edge) for edge in edges)

    def solve() -> Plan:
        table = dag_stages(arrays, edge_list, max_downsets)
        return PlacementSearch(arrays, table, settings, max_stages=len(arrays)).run()

    return _cached(cache, ("dag", arrays, edge_list, settings), solve)


def better(candidate: Plan, incumbent: Plan | None) -> bool:
    """The one tie rule: a feasible candidate replaces the incumbent only if it is strictly faster
    (by more than a relative 1e-12), so among equal plans the first one searched is kept."""
    if not candidate.feasible:
        return False
    return incumbent is None or candidate.throughput_samples_s > incumbent.throughput_samples_s * (1 + _TIE_TOLERANCE)


def best_plan_multi(
    layers: Mapping[tuple[int, int], LayerList] | Callable[[int, int], LayerList],
    settings: Settings,
    *,
    tensor_widths: Iterable[int] | None = None,
    microbatches: Iterable[int] | None = None,
    hbm_bytes: Iterable[float] | None = None,
    variant_fields: Callable[..., Mapping[str, Any]] | None = None,
    context_parallels: Iterable[int] | None = None,
    expert_parallels: Iterable[int] | None = None,
    cache: bool = False,
    lower_bound_layers: Callable[..., LayerList] | None = None,
    calls: dict[str, int] | None = None,
) -> Plan:
    """Best :func:`best_plan` over tensor widths × microbatch sizes × context- and expert-parallel degrees × HBM
    capacities.

    ``settings`` is the template (its cluster, plan and flags are kept; ``tensor_width``,
    ``microbatch`` and ``hbm_bytes`` are replaced by each searched value; ``hbm_bytes=None`` keeps the
    template's). ``layers`` maps ``(tensor_width, microbatch)`` to that variant's layer list, or is a
    callable ``(tensor_width, microbatch) -> layers``. With a mapping, ``tensor_widths`` /
    ``microbatches`` default to the ones it holds (pairs it lacks are skipped); with a callable they are
    required. Capacities are searched smallest first and ties keep the first (:func:`better`), so the
    answer also says how much HBM the best throughput needs. ``variant_fields(t, m)`` gives further
    :class:`Settings` fields that depend on the variant (e.g. the model FLOPs per sample, which grow with
    Megatron's vocabulary padding at ``t``). Variants after the first are searched by branch and bound
    (``best_plan(..., must_beat=best so far)``), which returns the same optimum as searching each one
    alone. Returns the best plan, or an infeasible plan whose reason lists why each variant failed.

    ``context_parallels`` / ``expert_parallels``: the context- and expert-parallel degrees ``c`` and ``e`` to
    search (each priced by its own layers: per rank at ``c``; at ``e`` with the all-to-alls in the layer times
    and ``1/e`` of the expert bytes). Each one given adds its degree to the variant key, in the order
    ``(tensor_width, microbatch[, c][, e])``: the mapping's keys and the arguments of the ``layers`` and
    ``variant_fields`` callables; one left ``None`` is 1 and absent from the key (neither: ``(t, m)``).

    ``lower_bound_layers``: called like ``layers``, the variant's layers with every ``fwd_s``/``bwd_s`` at a lower
    bound of ``layers``' (e.g. before the layers are scheduled). A variant is then first searched on them, and
    ``layers`` is asked for only when that search finds a plan that could beat the incumbent: the DP's time
    never decreases when a layer gets slower, so a variant that cannot beat it on its lower bounds cannot on
    its layers either, and an infeasible one is infeasible either way (memory, not time, decides it). Under
    ``Stack.dp_comm_overlap`` (where a slower pass hides more of a stage's collectives) the lower-bound search
    prices the exposure at its floor (``Settings.unbounded_overlap_cover``), which no layer time moves. The
    answer is the same as without them.

    ``calls``: when given, ``calls["dp_calls"]`` grows by one per :func:`best_plan` run on ``layers`` and
    ``calls["bound_dp_calls"]`` per run on ``lower_bound_layers`` — the DP runs this branch and bound made.
    """
    _check(settings)
    calls = {"dp_calls": 0, "bound_dp_calls": 0} if calls is None else calls
    degrees = [(c, e) for c in ((1,) if context_parallels is None else tuple(context_parallels))
               for e in ((1,) if expert_parallels is None else tuple(expert_parallels))]

    def key_of(t: int, m: int, c: int, e: int) -> tuple[int, ...]:
        return ((t, m) + ((c,) if context_parallels is not None else ())
                + ((e,) if expert_parallels is not None else ()))

    if callable(layers):
        if tensor_widths is None or microbatches is None:
            raise ValueError("with a callable for layers, pass tensor_widths and microbatches")
        variants = [(t, m, c, e) for t in tensor_widths for m in microbatches for c, e in degrees]
        layers_for = layers
    else:
        keys = sorted(layers)
        widths = sorted({key[0] for key in keys}) if tensor_widths is None else list(tensor_widths)
        sizes = sorted({key[1] for key in keys}) if microbatches is None else list(microbatches)
        variants = [(t, m, c, e) for t in widths for m in sizes for c, e in degrees if key_of(t, m, c, e) in layers]
        layers_for = lambda *key: layers[key]  # noqa: E731
    capacities = sorted([settings.hbm_bytes] if hbm_bytes is None else list(hbm_bytes))
    if not variants or not capacities:
        raise ValueError("no (tensor_width, microbatch, context_parallel, expert_parallel) variant or HBM capacity "
                         "to search")
    best: Plan | None = None
    reasons = []
    for capacity in capacities:
        for t, m, c, e in variants:
            label = f"t{t}{f'c{c}' if c > 1 else ''}{f'e{e}' if e > 1 else ''}m{m}"
            if t * c > settings.n_devices:  # before pricing its layers: no plan of this variant exists
                reasons.append(f"{label}: t·c = {t * c} exceeds the {settings.n_devices} devices")
                continue
            key = key_of(t, m, c, e)
            extra = variant_fields(*key) if variant_fields is not None else {}
            variant = replace(settings, tensor_width=t, microbatch=m, context_parallel=c, expert_parallel=e,
                              hbm_bytes=capacity, **extra)
            plan = None
            if lower_bound_layers is not None:  # under the data-parallel overlap, its exposure at the floor
                bounding = (replace(variant, unbounded_overlap_cover=True) if variant.cluster.stack.dp_comm_overlap
                            else variant)
                plan = best_plan(lower_bound_layers(*key), bounding, cache=cache, must_beat=best)
                calls["bound_dp_calls"] += 1
            if lower_bound_layers is None or (plan is not None and plan.feasible):
                plan = best_plan(layers_for(*key), variant, cache=cache, must_beat=best)
                calls["dp_calls"] += 1
            if plan is None:  # nothing here beats the incumbent
                continue
            if not plan.feasible:
                reasons.append(f"{label}, {capacity / 2**30:.4g} GiB: {plan.reason}")
            elif better(plan, best):
                best = plan
    return best if best is not None else infeasible("; ".join(reasons))
