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
  a plan or removes plans, never the reverse, so leaving them out keeps ``time`` a lower bound — but for the fewest
  stages the memory allows (a system space's groups, which know each row's HBM: ``p`` stages must hold the model's least
  weights, gradients and optimizer state, :func:`~phaze_env.placement.bounds.least_state_bytes`; what removes the
  shallow pipelines a large model cannot fit, whose bound would otherwise stand far above what any plan reaches);
* the all-reduce is the DP's own (:func:`~phaze_env.placement.collectives.collective_affine`, the cluster's collective
  as ``fixed + per_byte · S``) at the smallest gradient share ``P/p`` any stage can hold (the collective's time grows
  with its payload), on the stride ``t`` the DP uses; the pipeline time, ``m_r`` and a pipeline send are the DP's
  own functions too (:func:`~phaze_env.placement.inputs.pipeline_time_s`, :func:`~phaze_env.placement.inputs.
  microbatches_per_replica`, :func:`~phaze_env.placement.collectives.pipeline_send_s`): the bound cannot drift from the
  model it bounds (:func:`~phaze_env.placement.bounds.placement_time_bound_s` sits beside them);
* expert parallelism ``e`` (a searched plan that leaves ``e`` free or pins it): the layers' compute is bounded on
  the graph at ``e`` (its experts at the per-rank shape, ``E/e`` experts on ``e·C`` tokens, which the evaluator
  schedules), each MoE layer's all-to-alls are added at what they leave exposed beside its bound
  (:func:`with_alltoalls_s`), and the sync shrinks — dense bytes are all-reduced over ``d``,
  the ``1/e`` expert shard over the ``d/e`` expert replicas ``t·e`` apart, and only ``d`` that ``e`` divides
  exist. The largest stage's sync is at least the stages' mean, ``dense/p`` over ``d`` plus
  ``experts/(e·p)`` over ``d/e`` (both affine in the bytes), so the bound is taken per ``e`` and the
  minimum time over the plan's ``e`` kept. The bound prices the ZeRO-0/1 all-reduce, so a searched plan
  must pin ZeRO to 0 or 1 (:func:`search_plan_error`);
* a stack that overlaps the data-parallel collectives with the passes (``Stack.dp_comm_overlap``): the pipeline plus
  what one microbatch's passes cannot hide, from the buckets every partition holds at least (the search passes every layer's dense and
  expert bytes; :func:`~phaze_env.placement.bounds.placement_time_bound_s` has the proof). On a torus family the
  bounding cluster has no latency (:func:`bounding_cluster`), so there the buckets' fixed parts count 0: the overlap's
  latency-bound collectives of small layers are not priced on tori (valid, loose);
* what the evaluator's layer chain adds at the chip's streaming bandwidth outside the traced graph — each backward
  pass's weight-gradient accumulation (:func:`phaze_env.evaluate.main_grad_accumulation_s`) and an MoE layer's
  memory-bound expert kernels (the local sort/unsort and the activation, :func:`phaze_env.moe_dispatch.
  expert_kernel_bytes`) — is added to each layer's bound exactly (:func:`with_streaming_s`: the group's architectures
  share their HBM, so the term is one number per layer); every later step of the bound is nondecreasing in it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from phaze_env.cache import DiskCache, code_key
from phaze_env.cluster import Level, Network
from phaze_env.design import SystemArchSpace
from phaze_env.evaluate import Cluster
from phaze_env.hardware import ArchSpace
from phaze_env.hardware.space import ARCH_KNOBS
from phaze_env.evaluate import main_grad_accumulation_s
from phaze_env.moe_dispatch import dispatch_s, expert_kernel_bytes, exposed_alltoall_s
from phaze_env.hardware.accelerator import GB_BYTES
from phaze_env.hardware.number_format import fp8_weight_copy_factor
from phaze_env.placement.bounds import least_state_bytes, placement_time_bound_s
from phaze_env.placement.collectives import level_send_bound_s
from phaze_env.placement.inputs import GRADIENT_FACTOR, Settings
from phaze_env.placement.rules import pipeline_split, searched_degrees
from phaze_env.plan_spec import PlanSpec, phaze_plan
from phaze_env.pricing import shared_layer_time_bounds_s
from phaze_env.workloads import Workload, get_workload, model_graph

_VARIANT_BOUNDS = DiskCache("search-bounds")
""":func:`variant_throughput_bounds` per space, cluster and knobs: a warm search skips its bounding phase."""


def _space_key(space: ArchSpace) -> dict:
    """What an :class:`ArchSpace`'s architectures (and their order) are made of."""
    return {name: list(getattr(space, name)) for name in ARCH_KNOBS} | {
        "budget_mm2": space.budget_mm2, "area_window_lower": space.area_window_lower, "base": space.base.to_dict()}


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
    network = cluster.network
    if not network.torus_dims:
        return cluster
    # The fastest level, as nominal per-direction link bandwidth (the flat ring achieves 2·link·efficiency; the DCN
    # level's bandwidth is already achieved).
    link_Bps = 2 * network.link_bandwidth_Bps
    if network.slices > 1:
        link_Bps = max(link_Bps, network.dcn_bandwidth_Bps / network.link_efficiency)
    # Only the network is replaced: the setup and the stack (efficiency, schedule, fused attention, overlap) are the
    # cluster's own, so the bound prices every layer as the evaluation does.
    ring = Network(n_devices=network.n_devices, link_bandwidth_Bps=link_Bps, link_efficiency=network.link_efficiency,
                   name="torus-bound")
    return Cluster(network=ring, setup=cluster.setup, stack=cluster.stack)


@dataclass(frozen=True)
class BoundingGroup:
    """Rows of a searched space bounded by one vectorised call (:func:`variant_throughput_bounds`): the architectures
    of ``space`` on ``cluster``, each placed on at most its ``device_caps`` devices (None: the cluster's); row
    ``rows[k]`` of the searched space is architecture ``columns[k]`` of ``space``. ``far_levels``: what the bounding
    cluster no longer shows of its rows' networks, as ``(span, levels)``: on every row, a pipeline whose span
    ``(p − 1)·t·d`` reaches ``span`` crosses one of ``levels`` (:func:`pod_levels`, :func:`far_sends`).
    ``device_memory``: per architecture, the most HBM bytes of the group's rows with it (None: not limited)."""

    space: ArchSpace
    cluster: Cluster
    device_caps: np.ndarray | None
    rows: np.ndarray
    columns: np.ndarray
    far_levels: tuple[tuple[int, tuple[Level, ...]], ...] = ()
    device_memory: np.ndarray | None = None


def bounding_groups(space: ArchSpace | SystemArchSpace, cluster: Cluster) -> list[BoundingGroup]:
    """The groups a space is bounded in: PHAZE's space is one (every architecture on ``cluster``); the system space's
    rows (``cluster``: only its setup and stack) are grouped.

    Rows sharing the HBM (bandwidth, efficiency), number format, topology and links share one group: their
    architectures (an :class:`ArchSpace` of the space's value lists up to the largest die of any row with that HBM and
    format, so that the groups on different networks share their layer bounds; on a base with that HBM)
    on :func:`bounding_cluster` of the largest chip count on the group's network, each architecture's placements capped
    at its own row's chip count (``device_caps``; the most chips of the group's rows with that architecture). The
    bounding cluster prices a group that fits a smaller count as that count's own (bounding) cluster does, so each
    row's bound is the one on its own chip count — valid whatever its die or architecture costs."""
    if not isinstance(space, SystemArchSpace):
        every = np.arange(len(space))
        return [BoundingGroup(space, cluster, None, every, every)]
    rows = space
    members_of: dict[tuple, list[int]] = {}
    largest: dict[tuple, int] = {}  # per network: its row with the most chips
    widest_mm2: dict[tuple, float] = {}  # per chip pricing (HBM, efficiency, format): its largest die
    for i, point in enumerate(rows.points):
        acc, system = point.accelerator, point.chip_system
        network = (point.topology, system.links, system.link_bandwidth_Bps)
        pricing = (acc.hbm_bandwidth_Bps, acc.hbm_efficiency, acc.gemm_efficiency, acc.number_format)
        members_of.setdefault((*pricing, *network), []).append(i)
        widest_mm2[pricing] = max(widest_mm2.get(pricing, 0.0), acc.area_mm2)
        if network not in largest or point.n_devices > rows.points[largest[network]].n_devices:
            largest[network] = i
    values = rows.space
    groups = []
    for key, members in members_of.items():
        # one cluster per network (the device caps bound each row), so the groups on it share collective prices
        group_cluster = bounding_cluster(rows.cluster(largest[key[4:]], cluster))
        archs = [rows[i] for i in members]
        # every network's group of one chip pricing on the same architectures (up to that pricing's largest die), so
        # that they share their layer bounds (pricing.shared_layer_time_bounds_s); a column of no member has no
        # placement either way
        arch_space = ArchSpace(num_tc=values.num_tc, tc_width=values.tc_width, tc_depth=values.tc_depth,
                               num_vc=values.num_vc, buffer_mb=values.buffer_mb,
                               budget_mm2=widest_mm2[key[:4]], area_window_lower=0.0, base=archs[0])
        knobs = arch_space.arrays  # each member's column: its architecture's knobs among the space's
        column_of = {key: k for k, key in enumerate(zip(*(knobs[name].tolist() for name in ARCH_KNOBS)))}
        columns = np.array([column_of[tuple(getattr(acc, name) for name in ARCH_KNOBS)] for acc in archs])
        caps = np.zeros(len(arch_space), dtype=np.int64)  # architectures of no member: no placement, bound 0
        np.maximum.at(caps, columns, [rows.points[i].n_devices for i in members])
        memory = np.zeros(len(arch_space))  # each column's most HBM among its rows (a column of none: no placement)
        np.maximum.at(memory, columns, [rows.points[i].accelerator.hbm_gb * GB_BYTES for i in members])
        groups.append(BoundingGroup(arch_space, group_cluster, caps, np.array(members), columns,
                                    pod_levels(rows, members, cluster), memory))
    return groups


def pod_levels(rows: SystemArchSpace, members: list[int], cluster: Cluster) -> tuple[tuple[int, tuple[Level, ...]], ...]:
    """The data-centre level of the several-pod tori among ``members`` (rows of one network, bounded on the flat ring
    of :func:`bounding_cluster`, which drops it), as ``((span, levels),)``: ``span`` the most devices any member holds
    in one pod (a one-pod row: all of them), ``levels`` the members' distinct data-centre levels. A pipeline of span
    ``(p − 1)·t·d ≥ span`` cannot run on a one-pod member (its ``d·p·t`` devices would exceed the member's) and on a
    several-pod member leaves the first pod, so it crosses the data-centre level, the outermost
    (:func:`phaze_env.placement.collectives.far_send_bounds` has the proof). Empty when no member has several pods."""
    points = [rows.points[i] for i in members]
    if not any(point.topology == "torus" and point.pods > 1 for point in points):
        return ()
    span = max(point.n_devices // point.pods for point in points)
    first_of: dict[int, int] = {}  # one row per several-pod chip count: its cluster shows the data-centre level
    for i, point in zip(members, points):
        if point.pods > 1:
            first_of.setdefault(point.n_devices, i)
    levels = {rows.cluster(i, cluster).network.levels[-1] for i in first_of.values()}
    return ((span, tuple(sorted(levels, key=lambda level: (level.p2p_bandwidth_Bps, level.latency_s)))),)


def far_sends(far_levels, cluster: Cluster, payload_bytes: float, tensor_width: int) -> list[tuple[int, float]]:
    """``(span, send_s)`` of :func:`~phaze_env.placement.bounds.placement_time_bound_s` from a group's ``far_levels``:
    the cheapest pipeline message across any of the levels (:func:`~phaze_env.placement.collectives.
    level_send_bound_s` on the bounding ``cluster``)."""
    return [(span, min(level_send_bound_s(cluster, level, payload_bytes, tensor_width) for level in levels))
            for span, levels in far_levels]


def search_plan_error(plan: PlanSpec) -> str | None:
    """Why the search's bounds cannot hold for ``plan`` (None: they hold). They price the bubble of the cluster's
    pipeline schedule (1F1B's at each interleaving ``v`` the plan allows, or DualPipe's), the whole sequence on each rank (``c = 1``) and the ZeRO-0/1 all-reduce after
    the flush; recompute, sequence parallelism and memory only add time or remove plans, and ``e`` is bounded per
    degree."""
    if plan.c != 1:
        return "the search's bounds assume no context parallelism: pin c1 (drop c<k> and +c=auto)"
    if plan.zero not in (0, 1):
        return "the search's bounds price the ZeRO-0/1 all-reduce: pin ZeRO 0 or +zero1 (drop +zero2/3 and +zero=auto)"
    return None


def _check_plan(plan: PlanSpec | None) -> None:
    if plan is not None and (error := search_plan_error(plan)):
        raise ValueError(f"plan {plan}: {error}")


def variant_throughput_bounds(workload: str | Workload, space: ArchSpace, cluster: Cluster, *, microbatch,
                              tensor_widths, seq_len: int | None = None, plan: PlanSpec | None = None,
                              device_caps: np.ndarray | None = None, layer_memo: dict | None = None,
                              far_levels: tuple = (), device_memory: np.ndarray | None = None
                              ) -> dict[tuple[int, int], np.ndarray]:
    """Per (tensor width, microbatch): an upper bound on the throughput of every architecture of ``space`` with
    the placement restricted to that variant (:func:`throughput_bounds` is their maximum). ``plan`` None is PHAZE's
    plan space (:func:`~phaze_env.plan_spec.phaze_plan`: ``e = v = 1``), otherwise :func:`search_plan_error` must
    accept it; the bound is the best over the expert-parallel degrees it allows. ``device_caps``: per architecture,
    the devices its placements may use (:func:`placement_time_bound_s`; 0 throughput where none fits). ``layer_memo``:
    layer bounds shared with the other calls on the same workload and knobs
    (:func:`~phaze_env.pricing.shared_layer_time_bounds_s`; None: none shared). ``far_levels`` and ``device_memory``
    (per architecture, its HBM bytes: the fewest stages that hold the model's state; None: not limited): a bounding
    group's (:class:`BoundingGroup`)."""
    _check_plan(plan)
    workload = get_workload(workload)
    key = code_key(__name__, "search-bounds", workload.to_dict(), _space_key(space), cluster.to_dict(),
                   list(microbatch), list(tensor_widths), seq_len, None if plan is None else plan.to_dict(),
                   None if device_caps is None else np.asarray(device_caps, dtype=np.int64).tolist(),
                   *([[[span, [asdict(level) for level in levels]] for span, levels in far_levels]] if far_levels else []),
                   *([["memory", np.asarray(device_memory, dtype=float).tolist()]] if device_memory is not None else []))
    if (cached := _VARIANT_BOUNDS.get(key)) is not None:
        return cached
    bounds = _variant_throughput_bounds(workload, space, cluster, microbatch=microbatch, tensor_widths=tensor_widths,
                                        seq_len=seq_len, plan=plan, device_caps=device_caps, layer_memo=layer_memo,
                                        far_levels=far_levels, device_memory=device_memory)
    for array in bounds.values():  # shared through the cache's memory: nobody may change them in place
        array.setflags(write=False)
    _VARIANT_BOUNDS.put(key, bounds)
    return bounds


def _variant_throughput_bounds(workload: Workload, space: ArchSpace, cluster: Cluster, *, microbatch, tensor_widths,
                               seq_len: int | None, plan: PlanSpec | None,
                               device_caps: np.ndarray | None, layer_memo: dict | None = None,
                               far_levels: tuple = (), device_memory: np.ndarray | None = None
                               ) -> dict[tuple[int, int], np.ndarray]:
    """:func:`variant_throughput_bounds` computed (no cache)."""
    # without a plan, evaluate's (its recompute allowed: a superset of the plans evaluate may be asked for, so a bound)
    plan = phaze_plan() if plan is None else plan
    tensor_widths, microbatch = plan.narrow(tensor_widths, microbatch)  # a pinned degree narrows, as in evaluate
    widths, experts = searched_degrees(workload, tensor_widths, cluster.n_devices, plan.e)
    bounds = {}
    for t in widths:
        for m in microbatch:
            times_s = []
            for e in experts:  # each degree's own graph: its experts at the per-rank shape are priced differently
                graph = model_graph(workload, seq_len=seq_len, microbatch=m, tensor_width=t, expert_parallel=e,
                                    folded_experts=cluster.stack.folded_experts)
                total_layers, interleaves = pipeline_split(graph, cluster, plan)
                layer_s = shared_layer_time_bounds_s(graph, (t, m, e), space, cluster, plan.recompute_modes, layer_memo)
                layer_s = with_alltoalls_s(graph, with_streaming_s(graph, layer_s, space, cluster, e), cluster, e)
                repeats = np.array([layer.repeat for layer in graph.layers])
                gradient_bytes = GRADIENT_FACTOR * sum(layer.param_bytes * layer.repeat for layer in graph.layers)
                expert_bytes = GRADIENT_FACTOR * sum(layer.expert_param_bytes * layer.repeat for layer in graph.layers)
                # what can cross a stage boundary: a layer's output (not the loss) or its input (not the token ids)
                boundary_bytes = min([layer.output_bytes for layer in graph.layers[:-1]] +
                                     [layer.input_bytes for layer in graph.layers[1:]])
                layer_params = [layer.param_bytes for layer in graph.layers]
                layer_experts = [layer.expert_param_bytes for layer in graph.layers]
                # the space's one number format (a system space's group's)
                state_bytes = 0.0 if device_memory is None else least_state_of(graph, cluster, plan, e,
                                                                                space.base.number_format)
                times_s.append(placement_time_bound_s(layer_s, repeats, gradient_bytes, boundary_bytes, t, m, cluster,
                                                      expert_parallel=e, expert_gradient_bytes=expert_bytes,
                                                      device_caps=device_caps, interleaves=interleaves,
                                                      total_layers=total_layers,
                                                      layer_param_bytes=layer_params,
                                                      layer_expert_param_bytes=layer_experts,
                                                      far_sends=far_sends(far_levels, cluster, boundary_bytes, t),
                                                      state_bytes=state_bytes, device_memory=device_memory))
            time_s = np.min(times_s, axis=0)
            bounds[(t, m)] = cluster.setup.global_batch / time_s * (1 + 1e-9)  # round-off must never prune an exact tie
    return bounds


def least_state_of(graph, cluster: Cluster, plan: PlanSpec, expert_parallel: int, number_format: str) -> float:
    """:func:`~phaze_env.placement.bounds.least_state_bytes` of ``graph`` (one variant's layers) on ``cluster`` under
    ``plan``, with the FP8 weight copies the evaluator's DP counts for chips of ``number_format``
    (:func:`~phaze_env.hardware.number_format.fp8_weight_copy_factor`). A plan the DP refuses at the graph's tensor width
    raises here too, before any search."""
    settings = Settings(cluster, graph.tensor_width, graph.microbatch, 1.0, plan, context_parallel=plan.c or 1,
                        expert_parallel=expert_parallel,
                        weight_copy_factor=fp8_weight_copy_factor(graph, number_format))
    return least_state_bytes(settings, np.array([layer.repeat for layer in graph.layers]),
                             [layer.param_bytes for layer in graph.layers],
                             [layer.expert_param_bytes for layer in graph.layers])


def with_streaming_s(graph, layer_s: np.ndarray, space: ArchSpace, cluster: Cluster, expert_parallel: int
                     ) -> np.ndarray:
    """``layer_s`` (each layer's time bound per architecture of ``space``) with what the evaluator's layer chain
    (:func:`phaze_env.evaluate._layer_chain`) adds to each layer at the streaming bandwidth outside its traced graph:
    its backward pass's weight-gradient accumulation (:func:`~phaze_env.evaluate.main_grad_accumulation_s`) and an MoE
    layer's memory-bound expert kernels, forward and backward (:func:`~phaze_env.moe_dispatch.expert_kernel_bytes`),
    at the base's achieved HBM bandwidth times the stack's framework efficiency — the evaluator's ``streaming_Bps``;
    every architecture of a space (a bounding group's) has the base's HBM. A new array where anything is added (the
    input may be shared: :func:`~phaze_env.pricing.shared_layer_time_bounds_s`)."""
    streaming_Bps = space.base.effective_hbm_bandwidth_Bps * cluster.stack.framework_efficiency
    added = np.array([main_grad_accumulation_s(layer, expert_parallel, cluster, streaming_Bps)
                      + sum(expert_kernel_bytes(layer.routed_token_bytes, layer.routed_activation_bytes,
                                                layer.routed_experts, expert_parallel)) / streaming_Bps
                      for layer in graph.layers])
    return layer_s + added[:, None] if added.any() else layer_s


def with_alltoalls_s(graph, layer_s: np.ndarray, cluster: Cluster, expert_parallel: int) -> np.ndarray:
    """``layer_s`` (each layer's time bound per architecture) with, at ``e > 1``, each MoE layer's expert all-to-alls:
    the evaluator's layer adds to its passes ``c`` what its four exchanges leave exposed
    (:func:`~phaze_env.moe_dispatch.exposed_alltoall_s` of one dispatch, :func:`~phaze_env.moe_dispatch.dispatch_s` over
    the ``e`` ranks ``t`` apart, consecutive in a folded expert grid, :func:`phaze_env.evaluate._layer_chain`), and ``c + exposed(c)`` is nondecreasing in
    ``c`` (``c + 4a``, or ``max(c, 4a)`` when the stack overlaps them; a recompute ``R`` beside it only adds:
    ``max(c, 4a) + R ≥ max(c + R, 4a)``), so it is at least its value at the bound. The dispatch is priced on the
    bounding cluster, no slower than any row's (:func:`bounding_cluster`: a torus's all-to-all phases telescope too).
    A new array where a layer has exchanges (the input may be shared: :func:`~phaze_env.pricing.
    shared_layer_time_bounds_s`)."""
    if expert_parallel <= 1:
        return layer_s
    overlapped = cluster.stack.moe_alltoall_overlap
    rows = []
    for layer, row in zip(graph.layers, layer_s):
        stride = 1 if cluster.stack.folded_experts else graph.tensor_width  # as the evaluator's layer chain
        one_s = dispatch_s(cluster, layer.routed_token_bytes, expert_parallel, stride,
                           experts=layer.routed_experts, top_k=layer.experts_per_token)
        if one_s:  # the exposure once per distinct bound (architectures share many)
            values, inverse = np.unique(row, return_inverse=True)
            row = row + np.array([exposed_alltoall_s(one_s, c, overlapped) for c in values.tolist()])[inverse.ravel()]
        rows.append(row)
    return np.array(rows)


def throughput_bounds(workload: str | Workload, space: ArchSpace | SystemArchSpace, cluster: Cluster, *, microbatch,
                      tensor_widths, seq_len: int | None = None, plan: PlanSpec | None = None,
                      done: Callable[[int, int], None] | None = None) -> np.ndarray:
    """Upper bound on ``evaluate(..., plan=plan).throughput_samples_s`` for every architecture of ``space`` (every row
    of a system space, on its own cluster: ``cluster`` gives the setup and the stack): the best over the variants of
    :func:`row_variant_bounds` (same arguments)."""
    return best_of_variants(row_variant_bounds(workload, space, cluster, microbatch=microbatch,
                                               tensor_widths=tensor_widths, seq_len=seq_len, plan=plan, done=done),
                            len(space))


def row_variant_bounds(workload: str | Workload, space: ArchSpace | SystemArchSpace, cluster: Cluster, *, microbatch,
                       tensor_widths, seq_len: int | None = None, plan: PlanSpec | None = None,
                       done: Callable[[int, int], None] | None = None) -> dict[tuple[int, int], np.ndarray]:
    """Per (tensor width, microbatch): an upper bound on the throughput of every architecture of ``space`` (every row
    of a system space, on its own cluster) with the placement restricted to that variant (0 for a row whose group has no
    such variant), one :func:`variant_throughput_bounds` per :func:`bounding_groups` group; ``plan`` as there. So a
    system-space search narrows a design's second bound to the variants that can win (:func:`variants_above`), as
    PHAZE's spaces do. ``done(groups done, groups)`` after each group, for progress (a system space has about a hundred
    groups, seconds in all). ``workload``: a :class:`~phaze_env.workloads.Workload` or a built-in one's name
    (:func:`~phaze_env.workloads.get_workload`; anything else is a ``TypeError``)."""
    _check_plan(plan)
    workload = get_workload(workload)
    per_row: dict[tuple[int, int], np.ndarray] = {}
    groups = bounding_groups(space, cluster)
    layer_memo: dict = {}  # the groups' shared layer bounds (pricing.shared_layer_time_bounds_s)
    for finished, group in enumerate(groups, 1):
        per_variant = variant_throughput_bounds(workload, group.space, group.cluster, microbatch=microbatch,
                                                tensor_widths=tensor_widths, seq_len=seq_len, plan=plan,
                                                device_caps=group.device_caps, layer_memo=layer_memo,
                                                far_levels=group.far_levels, device_memory=group.device_memory)
        for variant, bound in per_variant.items():
            per_row.setdefault(variant, np.zeros(len(space)))[group.rows] = bound[group.columns]
        if done is not None:
            done(finished, len(groups))
    return per_row


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
