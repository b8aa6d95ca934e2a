"""A lower bound on the placement DP's time per batch for every architecture of a space at once (no DP): what the
exact search prunes with (:mod:`search.bounds`).

Built from the DP's own formulas — the pipeline time and microbatches per replica (:mod:`phaze_env.placement.inputs`),
the data-parallel collectives and pipeline sends (:mod:`phaze_env.placement.collectives`), the floors of the overlapped
data-parallel collectives (:mod:`phaze_env.placement.dp_overlap`, beside the overlap model) — so the bound cannot drift
from the model it bounds; it sits beside them so that a change of the model and of its bound is one change. Why each
term is a valid bound: :mod:`search.bounds`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from phaze_env.cluster import Cluster
from phaze_env.placement.collectives import data_parallel_prices, far_send_bounds, p2p_bound_s
from phaze_env.placement.dp_overlap import (OVERLAPPED_COLLECTIVES, bucket_bytes, bucket_totals, exposed_floor_s,
                                            last_bucket_floor, overlapped_collectives_floor, single_bucket,
                                            stage_share)
from phaze_env.placement.inputs import Settings, microbatches_per_replica, pipeline_slots, pipeline_time_s
from phaze_env.placement.rules import runnable_interleavings


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


def least_state_bytes(settings: Settings, repeats: np.ndarray, layer_param_bytes, layer_expert_param_bytes) -> float:
    """The least weights, gradients and optimizer state that the devices of one tensor group hold for the whole model's
    layers (whole-model expert bytes: a device holds ``1/e`` of them) under ``settings`` (its tensor width, expert degree,
    plan and stack), at any placement on its cluster: the layers' bytes times
    :meth:`~phaze_env.placement.inputs.Settings.least_state_factor` at the most weight replicas the cluster holds
    (``n/t``; with the FP8 weight copies ``settings`` counts, no expert extra, no ZeRO buffers: each only adds). The ``p`` stages of any placement
    split these bytes among them, and the DP fits a stage only when its state (and more) is within its device's memory
    (:class:`~phaze_env.placement.stage_costs.StageMemory`), so ``p·memory ≥`` this for every placement it finds."""
    param, expert = np.asarray(layer_param_bytes, dtype=float), np.asarray(layer_expert_param_bytes, dtype=float)
    per_device = float(((param - expert + expert / settings.expert_parallel) * np.asarray(repeats)).sum())
    return per_device * settings.least_state_factor(max(1, settings.cluster.n_devices // settings.tensor_width))


def placement_time_bound_s(layer_s: np.ndarray, repeats: np.ndarray, gradient_bytes: float, boundary_bytes: float,
                           tensor_width: int, microbatch: int, cluster: Cluster, expert_parallel: int = 1,
                           expert_gradient_bytes: float = 0.0, device_caps: np.ndarray | None = None,
                           interleaves: tuple[int, ...] = (1,), total_layers: int = 0,
                           layer_param_bytes: np.ndarray | None = None,
                           layer_expert_param_bytes: np.ndarray | None = None,
                           far_sends: Sequence[tuple[int, float]] = (), state_bytes: float = 0.0,
                           device_memory: np.ndarray | None = None) -> np.ndarray:
    """Lower bound on the time per batch over every (p, d) placement, per architecture.

    Some stage holds at least its share ``T/p`` of the time, some stage holds at least ``⌈n/p⌉`` of the
    ``n`` layers (so at least the ``⌈n/p⌉`` fastest ones), and no stage is faster than its slowest layer.
    With ``p ≥ 2`` every stage also sends at least one boundary tensor (activations forward or input
    gradients backward) of at least ``boundary_bytes`` per microbatch, across the cheapest level of the cluster, or
    — where the pipeline's span ``(p − 1)·t·d`` reaches a level's inner devices — the cheapest level from that one out
    (:func:`~phaze_env.placement.collectives.far_send_bounds`: the DP's own level rule; ``far_sends``: more such
    ``(span, send_s)`` pairs the caller knows, e.g. the pods of the rows a bounding cluster stands for,
    :func:`search.bounds.bounding_groups`). The span grows with ``d``, so the send taken at the smallest ``d`` of a
    group of equal ``m_r`` is at most every other one's. At ``expert_parallel`` ``e > 1``
    only ``d`` that ``e`` divides count, and the ``expert_gradient_bytes`` part of ``gradient_bytes`` (the
    whole model's, at ``e = 1``) is all-reduced as its ``1/e`` shard over the ``d/e`` expert replicas.

    ``device_caps`` (per architecture, each ≤ ``cluster.n_devices``; default all ``cluster.n_devices``): only
    placements with ``d·p·t`` ≤ the architecture's cap count, so each column equals this bound on the same
    cluster with that many devices wherever the cluster prices the collectives of a group that fits the cap as
    it does at ``n_devices`` (:func:`search.bounds.bounding_cluster`'s families; :func:`search.bounds.bounding_groups`). An
    architecture with no placement gets ``inf``. ``device_memory`` (per architecture, bytes; default no limit): only
    depths ``p`` whose ``p·memory`` holds ``state_bytes`` (:func:`least_state_bytes`, at this cluster's devices: the
    most replicas of any architecture's placements) count — the DP fits no fewer stages.

    ``interleaves``: the interleaved-1F1B degrees ``v`` the plan may use (:func:`~phaze_env.placement.rules.
    interleave_degrees`; PHAZE's ``(1,)``), each where the cluster's stack can run it at ``(p, m_r)``
    (:func:`~phaze_env.placement.rules.runnable_shapes` over ``total_layers``: the DP's own rule). At ``v`` the pipeline
    takes ``m_r + (p − 1)/v`` slowest-stage times and every stage sends ``v`` times per microbatch, so its time is at
    least ``(m_r + (p − 1)/v)·Z + sync``: the DP's own pipeline time with its slowest stage
    ``Z = max_k(x_k + v·y_k)`` (``x_k`` stage ``k``'s passes, ``y_k`` its sends per chunk) at least
    ``max_k x_k + v·min_k y_k ≥ S(p) + v·send`` and at least the stages' mean: the passes sum to at least ``T`` and the
    ``p − 1`` boundaries are crossed by one message each way (the first and last stage send one way, every other stage
    both, :meth:`~phaze_env.placement.stages.StageTable.p2p_s`), each at least the cheapest send, so
    ``Z ≥ T/p + v·send·2(p − 1)/p`` (1F1B; under DualPipe a device runs two stages, and only the first form is taken).
    The bound is the least over the ``v`` the stack runs at ``p`` (:func:`~phaze_env.placement.rules.
    runnable_interleavings`), each priced on its own — the pipeline and the sync floor below at the same ``v``. A stack
    running DualPipe (``Stack.pipeline_schedule``) takes the
    DP's own ``m_r + (p/2 − 1)·κ`` slots (:func:`~phaze_env.placement.inputs.pipeline_slots`) at the ``(p, m_r)`` it
    runs (:func:`~phaze_env.placement.rules.runnable_shapes`), never 1F1B's larger bubble, on a pace of at least the
    average stage and half the slowest layer (a device's pace is the mean of its stage and its mirror's,
    :mod:`~phaze_env.placement.pair_dp`), and the same sync floor: a device syncs its two stages' bytes together
    (:class:`~phaze_env.placement.pair_dp.PairSync`), at least those of the stage holding the most, ``≥ P/p``.

    A cluster whose stack overlaps its data-parallel collectives with the passes (``Stack.dp_comm_overlap``) pays
    only what they leave exposed (:mod:`phaze_env.placement.dp_overlap`), and the bound is the pipeline plus a floor
    of that. Proof, for any plan of ``p`` stages at interleave ``v`` (ZeRO-0 or 1, the stages the overlap covers):
    its time is ``T = slots·X + max_j sync_j`` with ``X`` its slowest stage time (≥ ``S(p) + v·send`` above) and
    ``sync_j`` ≥ stage ``j``'s exposed collectives ≥ ``max(0, C_j − (F_j + B_j))/v``
    (:func:`~phaze_env.placement.dp_overlap.exposed_floor_s`: ``C_j`` its collectives of one microbatch's pass,
    ``F_j + B_j`` its forward and backward, which its stage time holds: ``F_j + B_j ≤ X``). So for the stage ``j``
    with the most collectives ``T ≥ g(X) = slots·X + max(0, C_j − X)/v``, nondecreasing in ``X`` (its slope is
    ``slots`` or ``slots − 1/v ≥ 0``: ``slots ≥ m_r ≥ 1``), hence ``≥ g(S(p) + v·send)``: the pipeline plus what one
    microbatch's passes cannot hide, ``(m_r + p − 2)·X + C_j`` at ``v = 1`` where the collectives exceed a stage
    time. ``C_j`` is at least ``C_low``, the larger of (i) the stage holding the most dense bytes — at least ``1/p``
    of them, so at least one bucket — at one fixed part plus its per-byte part, and (ii) the stages' mean, every
    bucket's fixed part (the stages' buffers hold at least ``⌈bytes / bucket⌉`` buckets in all at the bucket size of
    ``d`` replicas, :func:`~phaze_env.placement.dp_overlap.bucket_bytes`, as
    ``Σ⌈x_s⌉ ≥ ⌈Σx_s⌉``: :func:`~phaze_env.placement.dp_overlap.bucket_totals` of the dense bytes and, at ``e > 1``,
    of the ``1/e`` expert shard apart) plus the per-byte parts, the expert
    shard's over the ``d/e`` expert replicas included, over ``p``; the collectives are :data:`~phaze_env.placement.dp_overlap.
    OVERLAPPED_COLLECTIVES` on the DP's own affine tables, the lesser of ZeRO-0's and ZeRO-1's (the floor takes the
    stage time ``S(p) + v·send``, at most ``Z``: ``max(0, C − X)/v`` falls as ``X`` grows, so the smaller ``X`` keeps it a
    floor). Where every layer has dense weights and one bucket holds the whole model's
    (:func:`~phaze_env.placement.dp_overlap.single_bucket`: a small model at many replicas, whose buckets grow with
    them), every stage's collectives are exposed in full: the sync is then at least one fixed part and ``1/(p·v)`` of
    the dense bytes' part (the largest stage's last chunk).
    """
    n, batch, rules = cluster.n_devices, cluster.setup.global_batch, cluster.stack.plan_rules
    schedule = cluster.stack.pipeline_schedule
    caps = None if device_caps is None else np.asarray(device_caps, dtype=np.int64)
    if caps is not None and (caps.shape != (layer_s.shape[1],) or caps.max(initial=0) > n):
        raise ValueError(f"device_caps must give each of the {layer_s.shape[1]} architectures at most {n} devices")
    n_layers = int(repeats.sum())
    total_s = (layer_s * repeats[:, None]).sum(axis=0)
    slowest_s = layer_s.max(axis=0)
    best = np.full(total_s.shape, np.inf)
    e = expert_parallel
    # the smallest d for each m_r: the same list for every p, cut at p's largest d (a prefix keeps its firsts); the d
    # the expert grid fits: e | d, or e | t·d in a folded grid (these bounds take c = 1)
    d_all = np.arange(1, n // tensor_width + 1)
    d_all = d_all[(d_all * (tensor_width if cluster.stack.folded_experts else 1)) % e == 0]
    if not len(d_all):  # no d that e divides fits beside the tensor groups
        return best
    m_r_all = microbatches_per_replica(batch, d_all, microbatch)
    first = np.r_[True, m_r_all[1:] != m_r_all[:-1]]
    d_first, m_r_first = d_all[first], m_r_all[first]
    most = n if caps is None else int(caps.max(initial=0))
    # the depths p beside which the smallest d fits (d·p·t ≤ most), and the interleavings the stack runs at each
    depths = range(1, min(n_layers, most // (tensor_width * d_first[0])) + 1)
    shapes = [runnable_interleavings(p, m_r_first, interleaves, total_layers, rules, schedule) for p in depths]
    dense_bytes = gradient_bytes - (expert_gradient_bytes if e > 1 else 0.0)
    overlapped = cluster.stack.dp_comm_overlap  # the collectives under the passes (phaze_env.placement.dp_overlap)
    # the network's prices, taken at once: the DP's all-reduce (and the overlapped collectives) at each d, and the
    # cheapest pipeline send, which every stage of a pipeline (p > 1) pays
    kinds = {"allreduce"} | ({kind for parts in OVERLAPPED_COLLECTIVES.values() for kind, _, _ in parts}
                             if overlapped else set())
    prices = data_parallel_prices(cluster, sorted(kinds), tensor_width, e, d_first)
    send_s = p2p_bound_s(cluster, boundary_bytes, tensor_width)
    far = [*far_send_bounds(cluster, boundary_bytes, tensor_width), *far_sends]
    if overlapped:
        overlap_low_s = overlapped_collectives_floor(
            prices, e, d_first, dense_bytes, expert_gradient_bytes if e > 1 else 0.0,
            bucket_totals(repeats, e, dense_bytes, expert_gradient_bytes, layer_param_bytes, layer_expert_param_bytes,
                          bucket_bytes(d_first)))  # (the search's plans have c = 1: d replicas)
        last_bucket_s = last_bucket_floor(prices, e, d_first, layer_param_bytes, layer_expert_param_bytes)
        # where one bucket holds the whole model's dense weights, every stage's are exposed in full
        whole = single_bucket(repeats, e, layer_param_bytes, layer_expert_param_bytes, bucket_bytes(d_first))
    # the DP's all-reduce as fixed + per-byte parts (dense over the d ranks t apart; 0 s for no bytes)
    fixed_s, per_byte_s = prices.dense["allreduce"]
    if not dense_bytes > 0:  # (the optimizer step is not in this bound either)
        fixed_s, per_byte_s = np.zeros(len(d_first)), np.zeros(len(d_first))
    # the expert shard's all-reduce over the d/e expert replicas t·e apart, without its fixed part (a stage may hold
    # no experts)
    expert_s = prices.expert["allreduce"][1] * (expert_gradient_bytes / e) if e > 1 else np.zeros(len(d_first))
    crowded_all_s = smallest_layers_s(layer_s, repeats, [-(-n_layers // p) for p in depths])
    memory = None if device_memory is None else np.asarray(device_memory, dtype=float)
    if memory is not None and memory.shape != (layer_s.shape[1],):
        raise ValueError(f"device_memory must give each of the {layer_s.shape[1]} architectures its bytes")
    for p, interleavings in zip(depths, shapes):
        roomy = None if memory is None else p * memory >= state_bytes * (1 - 1e-12)  # (round-off never excludes a fit)
        if roomy is not None and not roomy.any():
            continue
        keep = d_first <= most // (tensor_width * p)
        m_r = m_r_first[keep]
        allreduce = per_byte_s[keep] * (dense_bytes / p) + fixed_s[keep] + expert_s[keep] / p
        crowded_s = crowded_all_s[p - 1]  # the ⌈n/p⌉ fastest layers some stage holds
        stage_s = np.maximum(np.maximum(total_s / p, slowest_s), crowded_s)
        if schedule == "dualpipe" and p > 1:  # a device's pace is a stage's mean with its mirror's: half a layer's
            stage_s = np.maximum(total_s / p, slowest_s / 2)
        # every stage's cheapest send per d (column): farther levels once the pipeline's span reaches them
        stage_send_s = np.full((int(keep.sum()), 1), send_s if p > 1 else 0.0)
        if p > 1:
            span = ((p - 1) * tensor_width * d_first[keep])[:, None]
            for reach, far_s in far:
                stage_send_s = np.where(span >= reach, np.maximum(stage_send_s, far_s), stage_send_s)
        for v, allowed in interleavings:
            slowest_stage_s = stage_s[None, :] + v * stage_send_s
            if overlapped:  # the pipeline + what one microbatch's passes cannot hide (see the docstring)
                largest_stage_s = stage_share(overlap_low_s, p)[keep][:, None]
                sync_s = np.maximum(exposed_floor_s(largest_stage_s, slowest_stage_s, v),
                                    last_bucket_s[keep][:, None] / v)
                one, dense, _ = (part[keep] for part in overlap_low_s)
                sync_s = np.maximum(sync_s, np.where(whole[keep], one + dense / (p * v), 0.0)[:, None])
            else:
                sync_s = allreduce[:, None]
            if p > 1 and schedule != "dualpipe":  # the stages' mean: the passes and both ways of every boundary
                slowest_stage_s = np.maximum(slowest_stage_s,
                                             (total_s / p)[None, :] + v * stage_send_s * (2 * (p - 1) / p))
            times = pipeline_time_s(pipeline_slots(m_r[:, None], p, v, schedule), slowest_stage_s, sync_s)
            times = np.where(allowed[keep][:, None], times, np.inf)
            if caps is not None:  # d·p·t within each architecture's devices
                times = np.where(d_first[keep][:, None] <= (caps // (tensor_width * p))[None, :], times, np.inf)
            if roomy is not None:  # p stages hold the model's least state within each architecture's memory
                times = np.where(roomy[None, :], times, np.inf)
            best = np.minimum(best, times.min(axis=0))
    return best


__all__ = ["least_state_bytes", "placement_time_bound_s", "smallest_layers_s"]
