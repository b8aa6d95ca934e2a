"""Vectorised throughput upper bounds for every architecture of a space at once (no ILP, no DP).

For one (tensor width ``t``, microbatch ``m``) and every architecture ``a``:

* each layer's forward/backward makespan is at least ``max(critical path with every op at its
  shortest mode, Σ core-time per core type / cores of that type)`` — the schedule ILP's own bounds;
* for any placement with ``p`` stages and ``d`` replicas (``d·p·t ≤ N``), ``m_r = ⌈B/(d·m)⌉`` and the
  1F1B rule give ``time ≥ (m_r + p − 1)·S_a(p) + allreduce(P / p, d)`` where ``S_a(p)`` bounds the
  slowest stage (its share ``T_a/p`` of the summed layer time, its slowest layer, the ``⌈n/p⌉`` fastest
  layers some stage must hold) and ``P`` is the gradient bytes (some stage holds at least ``P/p``);
  memory, recompute and p2p only add.

So ``B / min_{p,d} time`` bounds the throughput the placement DP can reach, for every ``t`` and ``m``;
the maximum over them bounds the architecture. Among ``d`` with the same ``m_r`` the smallest is enough
(the all-reduce grows with ``d``).

Why each term stays a valid bound with what the evaluator adds on top of PHAZE's model:

* ``framework_efficiency``: operators are priced by :func:`phaze_env.pricing.price_ops`, the very function the
  evaluator schedules with, so the per-op latencies (device parts divided by the efficiency) are identical
  and the DAG bounds hold for them as for any latencies;
* the optimizer step (``Settings.optimizer_step_s``), recompute, the tensor-parallel collectives' share of
  the stage time, p2p beyond one boundary tensor and the memory limit are left out: each only adds time to
  a plan or removes plans, never the reverse, so leaving them out keeps ``time`` a lower bound;
* the all-reduce is the DP's own (:func:`~phaze_env.placement.search.collective_affine`, the cluster's collective
  as ``fixed + per_byte · S``) at the smallest gradient share ``P/p`` any stage can hold (the collective's time grows
  with its payload), on the stride ``t`` the DP uses; the pipeline time, ``m_r`` and a pipeline send are the DP's
  own functions too (:func:`~phaze_env.placement.inputs.pipeline_time_s`, :func:`~phaze_env.placement.inputs.
  microbatches_per_replica`, :func:`~phaze_env.placement.search.pipeline_send_s`): the bound cannot drift from the
  model it bounds;
* expert parallelism ``e`` (a searched plan that leaves ``e`` free or pins it): the layers' compute is the same
  at every ``e`` and the all-to-alls only add, but the sync shrinks — dense bytes are all-reduced over ``d``,
  the ``1/e`` expert shard over the ``d/e`` expert replicas ``t·e`` apart, and only ``d`` that ``e`` divides
  exist. The largest stage's sync is at least the stages' mean, ``dense/p`` over ``d`` plus
  ``experts/(e·p)`` over ``d/e`` (both affine in the bytes), so the bound is taken per ``e`` and the
  minimum time over the plan's ``e`` kept. The bound prices the ZeRO-0/1 all-reduce, so a searched plan
  must pin ZeRO to 0 or 1 (:func:`search_plan_error`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from graphlib import TopologicalSorter

import numpy as np

from phaze_env.cache import DiskCache, code_key
from phaze_env.design import SystemArchSpace
from phaze_env.evaluate import Cluster, expert_parallel_degrees, valid_tensor_widths
from phaze_env.hardware import ArchSpace
from phaze_env.hardware.space import ARCH_KNOBS
from phaze_env.placement.inputs import GRADIENT_FACTOR, microbatches_per_replica, pipeline_slots, pipeline_time_s
from phaze_env.placement.search import collective_affine, expert_collective_affine, pipeline_send_s
from phaze_env.plan_spec import PlanSpec
from phaze_env.pricing import price_ops
from phaze_env.workloads import OpGraph, Workload, get_workload, model_graph

CORE_UNITS = {"tc": ("tc", "tc+vc"), "vc": ("vc", "tc+vc")}
_VARIANT_BOUNDS = DiskCache("search-bounds")
""":func:`variant_throughput_bounds` per space, cluster and knobs: a warm search skips its bounding phase."""


def _space_key(space: ArchSpace) -> dict:
    """What an :class:`ArchSpace`'s architectures (and their order) are made of."""
    return {name: list(getattr(space, name)) for name in ARCH_KNOBS} | {
        "budget_mm2": space.budget_mm2, "area_window_lower": space.area_window_lower, "base": space.base.to_dict()}


def dag_lower_bounds_s(dag: OpGraph, one_s: np.ndarray, all_s: np.ndarray, n_tc: np.ndarray,
                       n_vc: np.ndarray) -> np.ndarray:
    """Makespan lower bound of one DAG for every architecture (``one_s``/``all_s``: ops × archs).

    The schedule's own cheap bounds (:mod:`phaze_env.schedule.bounds`), vectorised: critical path, work per
    core type, release/tail times from ancestors' and descendants' work, and the pair bound.
    """
    n = len(dag.ops)
    if not n:
        return np.zeros(one_s.shape[1])
    shortest = np.minimum(one_s, all_s)
    preds: list[list[int]] = [[] for _ in dag.ops]
    succs: list[list[int]] = [[] for _ in dag.ops]
    for a, b in dag.edges:
        preds[b].append(a)
        succs[a].append(b)
    order = list(TopologicalSorter({i: preds[i] for i in range(n)}).static_order())
    below = np.zeros((n, n), dtype=bool)  # below[i, j]: j is reachable from i
    for i in reversed(order):
        for j in succs[i]:
            below[i, j] = True
            below[i] |= below[j]
    uses = {core: np.array([op.unit in CORE_UNITS[core] for op in dag.ops]) for core in ("tc", "vc")}
    cores = {"tc": n_tc, "vc": n_vc}
    # least core-time of each op on each core type: one core for one_s or every core for all_s
    work = {core: np.where(uses[core][:, None], np.minimum(one_s, cores[core] * all_s), 0.0) for core in cores}

    def spread_s(members: np.ndarray) -> np.ndarray:  # members: ops × ops mask → ops × archs
        return np.maximum(*(members.astype(float) @ work[core] / cores[core] for core in cores))

    from_ancestors, from_descendants = spread_s(below.T), spread_s(below)
    release = np.zeros_like(shortest)
    for j in order:
        release[j] = from_ancestors[j]
        for i in preds[j]:
            release[j] = np.maximum(release[j], release[i] + shortest[i])
    tail = np.zeros_like(shortest)
    for i in reversed(order):
        tail[i] = from_descendants[i]
        for j in succs[i]:
            tail[i] = np.maximum(tail[i], shortest[j] + tail[j])
    bound = (release + shortest + tail).max(axis=0)  # ≥ the critical path: release ≥ head, tail ≥ its own
    for core in cores:
        if uses[core].any():
            bound = np.maximum(bound, work[core].sum(axis=0) / cores[core])
    # pair bound: unordered ops sharing a core type overlap (one core each, one_s) or run one after the other
    one_core_mode = np.ones((n, len(n_tc)), dtype=bool)  # a mode on one core is admissible
    for i, op in enumerate(dag.ops):
        if op.unit in CORE_UNITS["tc"] or op.unit in CORE_UNITS["vc"]:
            single_core_types = np.all([cores[c] == 1 for c in cores if uses[c][i]], axis=0)
            one_core_mode[i] = ~((all_s[i] < one_s[i]) & single_core_types)
    for i in range(n):
        for j in range(i + 1, n):
            if below[i, j] or below[j, i] or not any(uses[c][i] and uses[c][j] for c in cores):
                continue
            overlap = np.where(one_core_mode[i] & one_core_mode[j],
                               np.maximum(release[i] + one_s[i] + tail[i], release[j] + one_s[j] + tail[j]), np.inf)
            i_first = np.maximum(release[i] + shortest[i], release[j]) + shortest[j] + tail[j]
            j_first = np.maximum(release[j] + shortest[j], release[i]) + shortest[i] + tail[i]
            bound = np.maximum(bound, np.minimum(overlap, np.minimum(i_first, j_first)))
    return bound


def layer_time_bounds_s(graph, space: ArchSpace, cluster: Cluster, core_configs=None) -> np.ndarray:
    """Lower bound of each layer's fwd+bwd time (rows: the graph's layers) per architecture (columns).

    Operators are priced by :func:`phaze_env.pricing.price_ops`, the evaluator's own pricing: the same
    per-op latencies (framework efficiency included, collectives on the cluster's levels) for every
    architecture, so each entry bounds the schedule ``evaluate`` finds for that layer from below.
    ``core_configs``: ``(space.tc_configs(), space.vc_configs())`` when the caller already has them.
    """
    arrays = space.arrays
    (tc_rows, tc_index), (vc_rows, vc_index) = core_configs or (space.tc_configs(), space.vc_configs())
    rows = []
    for layer in graph.layers:
        layer_s = np.zeros(len(space))
        for dag in (layer.fwd, layer.bwd):
            if not dag.ops:
                continue
            priced = price_ops(dag.ops, space.base, cluster, tc_configs=tc_rows, vc_configs=vc_rows, layer=layer.name,
                               edges=dag.edges)
            one, all_cores = priced.latencies_s(tc_index.ravel(), vc_index.ravel())
            layer_s += dag_lower_bounds_s(dag, one, all_cores, arrays["num_tc"], arrays["num_vc"])
        rows.append(layer_s)
    return np.array(rows)


def p2p_bound_s(cluster: Cluster, payload_bytes: float, tensor_width: int) -> float:
    """A pipeline message is never faster than the DP's own send (:func:`pipeline_send_s`, Megatron's scatter/gather
    included) across the cheapest of the cluster's levels: whatever level a pipeline crosses, it is one of them."""
    return min(pipeline_send_s(cluster, level, payload_bytes, tensor_width) for level in cluster.levels)


def smallest_layers_s(layer_s: np.ndarray, repeats: np.ndarray, count) -> np.ndarray:
    """Per architecture, the summed time of the ``count`` fastest layers of the chain (repeats unrolled); ``count``
    an array of counts gives one row per count (the same sums, term by term, as one call per count)."""
    order = np.argsort(layer_s, axis=0)
    times = np.take_along_axis(layer_s, order, axis=0)
    counts = repeats[order]
    remaining = np.multiply.outer(np.asarray(count), np.ones(layer_s.shape[1], dtype=np.int64))
    total = np.zeros(remaining.shape)
    for row in range(layer_s.shape[0]):
        take = np.minimum(remaining, counts[row])
        total += take * times[row]
        remaining -= take
    return total


def placement_time_bound_s(layer_s: np.ndarray, repeats: np.ndarray, gradient_bytes: float, boundary_bytes: float,
                           tensor_width: int, microbatch: int, cluster: Cluster, expert_parallel: int = 1,
                           expert_gradient_bytes: float = 0.0, device_caps: np.ndarray | None = None) -> np.ndarray:
    """Lower bound on the time per batch over every (p, d) placement, per architecture.

    Some stage holds at least its share ``T/p`` of the time, some stage holds at least ``⌈n/p⌉`` of the
    ``n`` layers (so at least the ``⌈n/p⌉`` fastest ones), and no stage is faster than its slowest layer.
    With ``p ≥ 2`` every stage also sends at least one boundary tensor (activations forward or input
    gradients backward) of at least ``boundary_bytes`` per microbatch. At ``expert_parallel`` ``e > 1``
    only ``d`` that ``e`` divides count, and the ``expert_gradient_bytes`` part of ``gradient_bytes`` (the
    whole model's, at ``e = 1``) is all-reduced as its ``1/e`` shard over the ``d/e`` expert replicas.

    ``device_caps`` (per architecture, each ≤ ``cluster.n_devices``; default all ``cluster.n_devices``): only
    placements with ``d·p·t`` ≤ the architecture's cap count, so each column equals this bound on the same
    cluster with that many devices wherever the cluster prices the collectives of a group that fits the cap as
    it does at ``n_devices`` (:func:`bounding_cluster`'s families; :func:`system_throughput_bounds`). An
    architecture with no placement gets ``inf``.
    """
    n, batch = cluster.n_devices, cluster.global_batch
    caps = None if device_caps is None else np.asarray(device_caps, dtype=np.int64)
    if caps is not None and (caps.shape != (layer_s.shape[1],) or caps.max(initial=0) > n):
        raise ValueError(f"device_caps must give each of the {layer_s.shape[1]} architectures at most {n} devices")
    n_layers = int(repeats.sum())
    total_s = (layer_s * repeats[:, None]).sum(axis=0)
    slowest_s = layer_s.max(axis=0)
    best = np.full(total_s.shape, np.inf)
    e = expert_parallel
    # the smallest d for each m_r: the same list for every p, cut at p's largest d (a prefix keeps its firsts)
    d_all = np.arange(e, n // tensor_width + 1, e)
    if not len(d_all):  # no d that e divides fits beside the tensor groups
        return best
    m_r_all = microbatches_per_replica(batch, d_all, microbatch)
    first = np.r_[True, m_r_all[1:] != m_r_all[:-1]]
    d_first, m_r_first = d_all[first], m_r_all[first]
    dense_bytes = gradient_bytes - (expert_gradient_bytes if e > 1 else 0.0)
    # the DP's all-reduce as fixed + per-byte parts (dense over the d ranks t apart; 0 s for no bytes)
    fixed_s, per_byte_s = collective_affine(cluster, "allreduce", tensor_width).take(d_first - 1)
    if not dense_bytes > 0:
        fixed_s, per_byte_s = np.zeros(len(d_first)), np.zeros(len(d_first))
    # the expert shard's all-reduce over the d/e expert replicas t·e apart, without its fixed part (a stage may hold
    # no experts)
    expert_s = (expert_collective_affine(cluster, "allreduce", tensor_width, 1, e).take(d_first // e - 1)[1]
                * (expert_gradient_bytes / e) if e > 1 else np.zeros(len(d_first)))
    most = n if caps is None else int(caps.max(initial=0))
    depths = range(1, min(n_layers, most // tensor_width) + 1)
    crowded_all_s = smallest_layers_s(layer_s, repeats, [-(-n_layers // p) for p in depths])
    for p in depths:
        keep = d_first <= most // (tensor_width * p)
        if not keep.any():  # no d that e divides fits beside p stages (nor beside more)
            break
        m_r = m_r_first[keep]
        allreduce = per_byte_s[keep] * (dense_bytes / p) + fixed_s[keep] + expert_s[keep] / p
        crowded_s = crowded_all_s[p - 1]  # the ⌈n/p⌉ fastest layers some stage holds
        stage_s = np.maximum(np.maximum(total_s / p, slowest_s), crowded_s)
        if p > 1:
            stage_s = stage_s + p2p_bound_s(cluster, boundary_bytes, tensor_width)
        times = pipeline_time_s(pipeline_slots(m_r, p)[:, None], stage_s[None, :], allreduce[:, None])
        if caps is not None:  # d·p·t within each architecture's devices
            times = np.where(d_first[keep][:, None] <= (caps // (tensor_width * p))[None, :], times, np.inf)
        best = np.minimum(best, times.min(axis=0))
    return best


def bounding_cluster(cluster: Cluster) -> Cluster:
    """A cluster no slower than ``cluster`` *and every smaller one of its family*, for the system space's
    bounds (one bound over designs whose budgets buy different chip counts).

    * torus: every level is a ring at the same achieved ``2·B``; a group's extents ``k_i`` multiply to at
      least its size ``g`` (its positions map one-to-one into their product), and the bandwidth terms
      telescope, ``Σ_i 2(k_i−1)/k_i · S/(Π_{j<i} k_j · 2B) = 2(1 − 1/Π k_i) · S/2B ≥ 2(g−1)/g · S/2B``: the
      flat ring at ``2B``, whatever the torus's shape. So a flat ring of ``2B`` (point-to-point ``2B`` ≥
      the torus's ``B``), no latency, is faster for every torus of up to ``n_devices`` chips;
    * several torus pods (``slices`` > 1, :func:`~phaze_env.hardware.system.torus_pods`): the data-centre network
      is one more level, whose achieved bandwidth ``B_dcn`` may be below (or above) the rings' ``2B``; the same
      telescoping with every level at the fastest, ``max(2B, B_dcn)``, bounds every collective (an all-to-all's
      phases too: ``Σ_i (k_i−1)/k_i ≥ 1 − 1/Π k_i``), and a pipeline send is never faster than the whole payload at
      that rate (sent whole across one level, or ``1/t`` of it across the DCN plus its all-gather over the ``t``
      ranks, ``S/(t·max) + (t−1)/t · S/max``). So the flat ring runs at ``max(2B, B_dcn)``; it bounds every
      one-pod torus of the family too, so one bounding cluster serves rows of one and of several pods;
    * switched: its two levels (8-chip domains, then nodes) price a group the same for any node count that
      holds it, so the cluster itself bounds every smaller one.

    Either way a larger ``n_devices`` only adds placements (``d·p·t ≤ N``)."""
    if not cluster.torus_dims:
        return cluster
    # The fastest level, as nominal per-direction link bandwidth (the flat ring achieves 2·link·efficiency; the DCN
    # level's bandwidth is already achieved).
    link_Bps = 2 * cluster.link_bandwidth_Bps
    if cluster.slices > 1:
        link_Bps = max(link_Bps, cluster.dcn_bandwidth_Bps / cluster.link_efficiency)
    # Only the network is replaced: the training fields and the stack's (efficiency, schedule, fused attention,
    # overlap) are the cluster's own, so the bound prices every layer as the evaluation does.
    return dataclasses.replace(cluster, link_bandwidth_Bps=link_Bps, link_latency_s=0.0, torus_dims=(),
                   devices_per_node=1, node_bandwidth_Bps=math.inf, node_latency_s=0.0, node_efficiency=1.0,
                   slices=1, dcn_bandwidth_Bps=math.inf, dcn_latency_s=0.0, name="torus-bound")


def system_throughput_bounds(workload: Workload, rows: SystemArchSpace, cluster: Cluster, *, microbatch,
                             tensor_widths, seq_len: int | None = None, plan: PlanSpec | None = None) -> np.ndarray:
    """Upper bound on every system-space row's throughput (``cluster``: the training fields only).

    Rows sharing the HBM (bandwidth, efficiency), number format, topology and links share one
    :func:`variant_throughput_bounds` call: over their architectures (an :class:`ArchSpace` of the space's value
    lists up to the largest of them, on a base with that HBM) on :func:`bounding_cluster` of the largest chip
    count on the group's network, each architecture's placements capped at its own row's chip count
    (``device_caps``; the most chips of the group's rows with that architecture). The bounding cluster prices a group that fits a
    smaller count as that count's own (bounding) cluster does, so each row's bound is the one on its own chip
    count — valid whatever its die or architecture costs."""
    groups: dict[tuple, list[int]] = {}
    largest: dict[tuple, int] = {}  # per network: its row with the most chips
    for i, point in enumerate(rows.points):
        acc, system = point.accelerator, point.chip_system
        network = (point.topology, system.links, system.link_bandwidth_Bps)
        groups.setdefault((acc.hbm_bandwidth_Bps, acc.hbm_efficiency, acc.gemm_efficiency, acc.number_format,
                           *network), []).append(i)
        if network not in largest or point.n_devices > rows.points[largest[network]].n_devices:
            largest[network] = i
    space = rows.space
    bound = np.zeros(len(rows))
    for key, members in groups.items():
        # one cluster per network (the device caps bound each row), so the groups on it share collective prices
        group_cluster = bounding_cluster(rows.cluster(largest[key[4:]], cluster))
        archs = [rows[i] for i in members]
        arch_space = ArchSpace(num_tc=space.num_tc, tc_width=space.tc_width, tc_depth=space.tc_depth,
                               num_vc=space.num_vc, buffer_mb=space.buffer_mb,
                               budget_mm2=max(acc.area_mm2 for acc in archs), area_window_lower=0.0, base=archs[0])
        columns = [arch_space.index(acc) for acc in archs]
        caps = np.zeros(len(arch_space), dtype=np.int64)  # architectures of no member: no placement, bound 0
        np.maximum.at(caps, columns, [rows.points[i].n_devices for i in members])
        per_variant = variant_throughput_bounds(workload, arch_space, group_cluster, microbatch=microbatch,
                                                tensor_widths=tensor_widths, seq_len=seq_len, plan=plan,
                                                device_caps=caps)
        bound[members] = best_of_variants(per_variant, len(arch_space))[columns]
    return bound


def search_plan_error(plan: PlanSpec) -> str | None:
    """Why the search's bounds cannot hold for ``plan`` (None: they hold). They price PHAZE's 1F1B bubble
    (``v = 1``), the whole sequence on each rank (``c = 1``) and the ZeRO-0/1 all-reduce after the flush;
    recompute, sequence parallelism and memory only add time or remove plans, and ``e`` is bounded per degree."""
    if plan.interleave != 1:
        return "the search's bounds assume no interleaving: pin v1 (drop v<k> and +v=auto)"
    if plan.c != 1:
        return "the search's bounds assume no context parallelism: pin c1 (drop c<k> and +c=auto)"
    if plan.zero not in (0, 1):
        return "the search's bounds price the ZeRO-0/1 all-reduce: pin ZeRO 0 or +zero1 (drop +zero2/3 and +zero=auto)"
    return None


def _check_plan(plan: PlanSpec | None) -> None:
    if plan is not None and (error := search_plan_error(plan)):
        raise ValueError(f"plan {plan}: {error}")


def variant_throughput_bounds(workload: Workload, space: ArchSpace, cluster: Cluster, *, microbatch, tensor_widths,
                              seq_len: int | None = None, plan: PlanSpec | None = None,
                              device_caps: np.ndarray | None = None) -> dict[tuple[int, int], np.ndarray]:
    """Per (tensor width, microbatch): an upper bound on the throughput of every architecture of ``space`` with
    the placement restricted to that variant (:func:`throughput_bounds` is their maximum). ``plan`` None is PHAZE's
    plan space (``e = 1``), otherwise :func:`search_plan_error` must accept it; the bound is the best over the
    expert-parallel degrees it allows. ``device_caps``: per architecture, the devices its placements may use
    (:func:`placement_time_bound_s`; 0 throughput where none fits)."""
    _check_plan(plan)
    key = code_key(__name__, "search-bounds", get_workload(workload).to_dict(), _space_key(space), cluster.to_dict(),
                   list(microbatch), list(tensor_widths), seq_len, None if plan is None else plan.to_dict(),
                   None if device_caps is None else np.asarray(device_caps, dtype=np.int64).tolist())
    if (cached := _VARIANT_BOUNDS.get(key)) is not None:
        return cached
    bounds = _variant_throughput_bounds(workload, space, cluster, microbatch=microbatch, tensor_widths=tensor_widths,
                                        seq_len=seq_len, plan=plan, device_caps=device_caps)
    for array in bounds.values():  # shared through the cache's memory: nobody may change them in place
        array.setflags(write=False)
    _VARIANT_BOUNDS.put(key, bounds)
    return bounds


def _variant_throughput_bounds(workload: Workload, space: ArchSpace, cluster: Cluster, *, microbatch, tensor_widths,
                               seq_len: int | None, plan: PlanSpec | None,
                               device_caps: np.ndarray | None) -> dict[tuple[int, int], np.ndarray]:
    """:func:`variant_throughput_bounds` computed (no cache)."""
    if plan is not None:  # a pinned degree narrows what evaluate searches, as it does there
        tensor_widths, microbatch = plan.narrow(tensor_widths, microbatch)
    experts = [1] if plan is None else (expert_parallel_degrees(workload, cluster.n_devices) if plan.e is None
                                        else [plan.e])
    bounds = {}
    core_configs = (space.tc_configs(), space.vc_configs())
    for t in valid_tensor_widths(workload, tensor_widths, cluster.n_devices):
        for m in microbatch:
            graph = model_graph(workload, seq_len=seq_len, microbatch=m, tensor_width=t)
            layer_s = layer_time_bounds_s(graph, space, cluster, core_configs)
            repeats = np.array([layer.repeat for layer in graph.layers])
            gradient_bytes = GRADIENT_FACTOR * sum(layer.param_bytes * layer.repeat for layer in graph.layers)
            expert_bytes = GRADIENT_FACTOR * sum(layer.expert_param_bytes * layer.repeat for layer in graph.layers)
            # what can cross a stage boundary: a layer's output (not the loss) or its input (not the token ids)
            boundary_bytes = min([layer.output_bytes for layer in graph.layers[:-1]] +
                                 [layer.input_bytes for layer in graph.layers[1:]])
            time_s = np.min([placement_time_bound_s(layer_s, repeats, gradient_bytes, boundary_bytes, t, m, cluster,
                                                    expert_parallel=e, expert_gradient_bytes=expert_bytes,
                                                    device_caps=device_caps)
                             for e in experts], axis=0)
            bounds[(t, m)] = cluster.global_batch / time_s * (1 + 1e-9)  # round-off must never prune an exact tie
    return bounds


def throughput_bounds(workload: Workload, space: ArchSpace | SystemArchSpace, cluster: Cluster, *, microbatch,
                      tensor_widths, seq_len: int | None = None, plan: PlanSpec | None = None) -> np.ndarray:
    """Upper bound on ``evaluate(..., plan=plan).throughput_samples_s`` for every architecture of ``space``
    (every row of a system space: :func:`system_throughput_bounds`); ``plan`` as :func:`variant_throughput_bounds`."""
    _check_plan(plan)
    if isinstance(space, SystemArchSpace):
        return system_throughput_bounds(workload, space, cluster, microbatch=microbatch, tensor_widths=tensor_widths,
                                        seq_len=seq_len, plan=plan)
    per_variant = variant_throughput_bounds(workload, space, cluster, microbatch=microbatch,
                                            tensor_widths=tensor_widths, seq_len=seq_len, plan=plan)
    return best_of_variants(per_variant, len(space))


def best_of_variants(per_variant: dict[tuple[int, int], np.ndarray], size: int) -> np.ndarray:
    """Each architecture's bound over every variant (0 when no variant is valid)."""
    return np.max(list(per_variant.values()), axis=0) if per_variant else np.zeros(size)


def variants_above(per_variant: dict[tuple[int, int], np.ndarray], index: int,
                   floor: float) -> tuple[dict[str, list[int]], float]:
    """The tensor widths and microbatch sizes of every variant whose bound for architecture ``index`` exceeds
    ``floor`` (all pairs of them: a superset), and the best bound of the others (≤ ``floor``: they cannot beat
    it, so a bound over the first decides whether the architecture can)."""
    above = [variant for variant, bound in per_variant.items() if bound[index] > floor]
    rest = max((float(bound[index]) for bound in per_variant.values() if bound[index] <= floor), default=0.0)
    return {"tensor_widths": sorted({t for t, _ in above}), "microbatch": sorted({m for _, m in above})}, rest
