"""Data-parallel communication overlapped with the pass that produces or consumes it (``Stack.dp_comm_overlap``):
Megatron-Core's ``--overlap-grad-reduce`` / ``--overlap-param-gather`` with the distributed optimizer, PyTorch DDP's
bucketed all-reduce.

What the schedule does (NVIDIA/Megatron-LM ``megatron/core/distributed/distributed_data_parallel.py`` and
``param_and_grad_buffer.py``; ``megatron/core/pipeline_parallel/schedules.py``): the gradients sit in contiguous
buckets of :data:`MEGATRON_BUCKET_PARAMS` parameters, filled in backward order; in a stage's last microbatch (the
others run under ``no_sync``) a bucket's collective — the reduce-scatter with the distributed optimizer (ZeRO-1 here),
the all-reduce without it (ZeRO-0) — is launched on a communication stream as soon as its last gradient is ready,
while the backward pass of the layers before it runs; ``finalize_model_grads`` waits for all of them before the
optimizer step. The updated weights' all-gather (ZeRO-1) is launched bucket by bucket by the next step's forward
pre-hooks, each bucket gathered ahead of the layers that use it. Under the interleaved schedule each model chunk's
gradients are reduced when its own last backward microbatch ends (``is_last_microbatch_for_model_chunk``) and its
weights gathered before its first forward (``param_sync_func``).

The model (one link, collectives in launch order, each as long as :meth:`~phaze_env.cluster.Cluster.collective_s`
prices it; a layer's gradients become ready, and its weights are consumed, at an even rate through its backward or
forward pass; recomputation and pipeline sends are not counted as cover, as for ZeRO's overlap):

* a stage's exposed gradient collective after its last backward is ``max_k (Σ_{l ≤ k} c_l − Σ_{l < k} b_l)`` over its
  layers ``k`` in forward order (``c``: a layer's collective, ``b``: its backward time for one microbatch; the
  backward runs from the last layer to the first), with layer ``k``'s own buckets counted at their best
  (:func:`layer_exposure_s`): never less than its first layer's last bucket, never less than all the collectives less
  all the backward pass; the weights' all-gather delays the first forward by the same expression in ``(g, f)``;
* interleaved, ``v`` chunks of ``1/v`` of the stage each (the placement model's equal chunks): chunk ``j`` (``j`` from
  0, the last backward) has ``j·p`` chunk-backward passes after its own, so the stage exposes one chunk's ``E/v`` plus
  ``max(0, (v − 1)·(C − p·B)/v)`` (:func:`interleaved_exposed_s`); Calculon's ``data_par_overlap``
  (calculon-ai/calculon ``calculon/llm/llm.py``: the last block's collective exposed, the others hidden under the
  chunk's backward of ``pipeline_par`` microbatches) is the same structure with whole blocks;
* every stage is hidden only by its own passes (a later stage's head start in the pipeline's drain is not counted:
  conservative), and the batch pays the largest stage's exposed collectives + optimizer step.

The brute-force check (``tests/test_dp_overlap.py``) simulates the buckets and the link event by event. The floors of
this model that the search's bound of the DP takes (:func:`exposed_floor_s`, :func:`overlapped_collectives_floor`,
:func:`last_bucket_floor`; :func:`~phaze_env.placement.bounds.placement_time_bound_s` has the proof) sit here, beside
what they bound, so that a change of the overlap and of its floor is one change.
"""

from __future__ import annotations

import numpy as np

from phaze_env.placement.collectives import DataParallelPrices
from phaze_env.placement.inputs import GRADIENT_FACTOR

MEGATRON_BUCKET_PARAMS = 40_000_000
"""Parameters per gradient bucket: Megatron-Core's default ``bucket_size = max(40000000, 1000000 · dp_size)``
(``distributed_data_parallel.py``), "large enough to remain bandwidth-bound". Assumption: the 40M floor at every
data-parallel size (above 40 replicas Megatron-Core's buckets grow ``dp/40``-fold): more, smaller buckets, so more
per-collective latency exposed; a range of 1–``dp/40``× the bucket count at ``d > 40``. Bucket counts are per layer
(``ceil(params / 40M)``): a stage's small layers each count a bucket of their own (more latency, again conservative)."""

BUCKET_BYTES = 2 * MEGATRON_BUCKET_PARAMS
"""A bucket's parameters as weight bytes (bf16 weights, 2 bytes each, as :class:`~phaze_env.placement.inputs.LayerArrays`
counts ``param_bytes``)."""


OVERLAPPED_COLLECTIVES = {0: (("allreduce", GRADIENT_FACTOR, "bwd_s"),),
                          1: (("reducescatter", GRADIENT_FACTOR, "bwd_s"), ("allgather", 1.0, "fwd_s"))}
"""Per ZeRO stage the stack overlaps (0 and 1), its once-per-batch collectives as ``(kind, payload per weight byte,
the pass that hides it)``: ZeRO-0's gradient all-reduce under the backward; ZeRO-1's gradient reduce-scatter under the
backward and its updated weights' all-gather under the next forward. The placement DP
(:meth:`~phaze_env.placement.prices.Prices.overlap_collectives_s`) and the search's bound
(:func:`~phaze_env.placement.bounds.placement_time_bound_s`) both price these."""


def bucket_counts(param_bytes: np.ndarray) -> np.ndarray:
    """Buckets per layer: ``ceil(param_bytes / BUCKET_BYTES)``, at least 1 for a layer with weights (0 without)."""
    return np.ceil(np.asarray(param_bytes, dtype=float) / BUCKET_BYTES)


def layer_exposure_s(comm_s: np.ndarray, cover_s: np.ndarray, buckets: np.ndarray) -> np.ndarray:
    """Per layer, what its own buckets can leave exposed past the end of its pass: ``n`` equal buckets of ``c/n``
    ready at ``b/n, 2b/n, … , b`` of its pass (backward order) leave ``c − b·(n−1)/n`` when ``c > b`` (the link falls
    behind from the first bucket on) and the last bucket's ``c/n`` otherwise; 0 for a layer without weights."""
    comm_s, cover_s, buckets = (np.asarray(x, dtype=float) for x in (comm_s, cover_s, buckets))
    n = np.maximum(buckets, 1.0)
    hidden = np.where(n > 1, cover_s, 0.0) * (n - 1) / n  # an unbounded pass (inf) hides all but the last bucket
    return np.where(buckets > 0, np.maximum(comm_s - hidden, comm_s / n), 0.0)


def exposed_s(comm_s, cover_s, buckets) -> float:
    """The closed form for one stage's layers in forward order: ``max(0, max_k (own_k + Σ_{l<k} (c_l − b_l)))``."""
    comm_s, cover_s = np.asarray(comm_s, dtype=float), np.asarray(cover_s, dtype=float)
    if not len(comm_s):
        return 0.0
    before = np.concatenate(([0.0], np.cumsum(comm_s - cover_s)[:-1]))
    return float(max(0.0, (layer_exposure_s(comm_s, cover_s, buckets) + before).max()))


def stage_exposed_s(member: np.ndarray, valid: np.ndarray, comm_s: np.ndarray, cover_s: np.ndarray,
                    buckets: np.ndarray, chain: bool) -> np.ndarray:
    """:func:`exposed_s` of every stage ``(a, b)`` of a :class:`~phaze_env.placement.stages.StageTable` (its
    ``member``/``valid``/``chain``) at once, its layers taken in index order (0 where no stage).

    With ``P_k(x) = Σ_{l < k, l ∈ x} (c_l − b_l)`` the stage ``b \\ a`` exposes ``max_{k ∈ b∖a} (own_k + P_k(b) −
    P_k(a))``; on a chain ``P_k(b) = S_k`` for every ``k < b``, so row ``a`` is a running maximum (one pass)."""
    own = layer_exposure_s(comm_s, cover_s, buckets)
    if len(own) and np.isposinf(cover_s).all():  # unbounded passes (Settings.unbounded_overlap_cover): every term
        # but the stage's first layer's has an infinite pass before it, so only that layer's last bucket is exposed
        if chain:
            first = np.concatenate((own, [0.0]))[:len(member)]
            return np.where(valid, first[:, None], 0.0)
        result = np.zeros(valid.shape)
        for k in reversed(range(len(own))):  # the smallest index of each stage written last
            result = np.where(member[None, :, k] & ~member[:, None, k], own[k], result)
        return np.where(valid, result, 0.0)
    slack = np.asarray(comm_s, dtype=float) - np.asarray(cover_s, dtype=float)
    prefix = np.concatenate(([0.0], np.cumsum(slack)))  # S_k: the layers before k
    if chain:  # downset x = the first x layers; stage (a, b) = layers a … b−1
        size = len(member)
        value = np.where(np.arange(len(own))[None, :] >= np.arange(size)[:, None], (own + prefix[:-1])[None, :], -np.inf)
        running = np.maximum.accumulate(value, axis=1)  # [a, k]: max over a ≤ l ≤ k
        result = np.full(valid.shape, -np.inf)
        result[:, 1:] = running - prefix[:size, None]
    else:
        inside_prefix = member.astype(float) @ np.where(np.arange(len(own))[:, None] < np.arange(len(own))[None, :],
                                                         slack[:, None], 0.0)  # [x, k] = P_k(x)
        result = np.full(valid.shape, -np.inf)
        for k in range(len(own)):
            holds = member[None, :, k] & ~member[:, None, k]
            result = np.where(holds, np.maximum(result, own[k] + inside_prefix[None, :, k] - inside_prefix[:, None, k]),
                              result)
    return np.where(valid, np.maximum(result, 0.0), 0.0)


def exposed_floor_s(comm_total_s, cover_total_s, interleave=1):
    """A lower bound on what a stage leaves exposed, from its totals alone: ``max(0, C − B)/v`` (``C``: the stage's
    collectives of one kind, ``B``: one microbatch's pass that hides them, ``v``: the interleave), elementwise.

    Valid for every split of ``C`` and ``B`` over the stage's layers, every bucket count and every depth ``p``:

    * :func:`exposed_s` ``≥ C − B``: take ``k`` its last layer with weights; that layer's own term
      (:func:`layer_exposure_s`) is at least ``c_k − b_k`` (``n`` buckets: ``c_k − b_k·(n−1)/n ≥ c_k − b_k``), so the
      maximum is at least ``Σ_{l ≤ k} (c_l − b_l)``, and the layers after ``k`` carry no collective, only pass
      (``− b_l ≤ 0``): ``≥ C − B``. It is also ``≥ 0``;
    * :func:`interleaved_exposed_s` is ``E/v`` plus a term ``≥ 0``, and ``E ≥ max(0, C − B)``.

    A stage with several kinds (ZeRO-1: the reduce-scatter under ``B``, the all-gather under ``F``) exposes at least
    the sum of the floors, and ``max(0, x) + max(0, y) ≥ max(0, x + y)``: at least the floor of the summed
    collectives under ``F + B``."""
    comm_total_s, cover_total_s = np.asarray(comm_total_s, dtype=float), np.asarray(cover_total_s, dtype=float)
    return np.maximum(0.0, comm_total_s - cover_total_s) / np.asarray(interleave)


def interleaved_exposed_s(exposed, comm_total_s, cover_total_s, stages: int, interleave: int):
    """A stage of ``v`` equal chunks (each ``1/v`` of every layer's collective and pass): the last chunk exposes
    ``E/v`` (one chunk's :func:`exposed_s`: homogeneous of degree one), and chunk ``j`` has ``j·p`` chunk passes after
    its own to hide under, so the link's backlog adds ``max(0, (v − 1)·(C − p·B)/v)`` (``C``, ``B``: the stage's
    collectives and pass). ``v = 1``: ``exposed`` itself. Elementwise."""
    if interleave == 1:
        return exposed
    v = interleave
    return np.asarray(exposed) / v + np.maximum(0.0, (v - 1) * (np.asarray(comm_total_s) - stages
                                                                 * np.asarray(cover_total_s)) / v)


def bucket_totals(repeats: np.ndarray, expert_parallel: int, dense_gradient_bytes: float, expert_gradient_bytes: float,
                  layer_param_bytes: np.ndarray | None, layer_expert_param_bytes: np.ndarray | None) -> tuple[float, float]:
    """The buckets of every layer of the model, dense and (``e > 1``) expert ones, as the DP counts them
    (:func:`bucket_counts` per layer: its dense bytes, its ``1/e`` expert shard, each
    repeat a layer of its own); without the per-layer bytes, ``⌈total / BUCKET_BYTES⌉`` (``Σ⌈x_l⌉ ≥ ⌈Σx_l⌉``)."""
    e = expert_parallel
    if layer_param_bytes is None:
        experts = expert_gradient_bytes / GRADIENT_FACTOR / e if e > 1 else 0.0
        return float(bucket_counts(dense_gradient_bytes / GRADIENT_FACTOR)), float(bucket_counts(experts))
    params = np.asarray(layer_param_bytes, dtype=float)
    experts = (np.asarray(layer_expert_param_bytes, dtype=float) if e > 1 and layer_expert_param_bytes is not None
               else np.zeros_like(params))
    return (float((bucket_counts(params - experts) * repeats).sum()),
            float((bucket_counts(experts / e) * repeats).sum()))


def overlapped_collectives_floor(prices: DataParallelPrices, expert_parallel: int, data_parallel: np.ndarray,
                                 dense_gradient_bytes: float, expert_gradient_bytes: float,
                                 buckets: tuple[float, float]) -> tuple[np.ndarray, ...]:
    """Per data-parallel degree, ``(one, fixed, spread)`` such that the largest stage's overlapped collectives
    (:data:`OVERLAPPED_COLLECTIVES`, of ZeRO-0 or ZeRO-1: the lesser) of any
    ``p``-stage plan are at least ``max(one + fixed_per_byte/p, spread/p)`` (:func:`stage_share`): ``one`` a bucket's
    fixed part, the dense per-byte part kept aside in ``fixed`` (the stage with the most dense bytes holds ``1/p``
    of them), ``spread`` every bucket's fixed part and every byte's part, experts included (the stages' mean).
    Priced on the DP's own affine tables at ``data_parallel`` (``prices``: dense over the ``d`` replicas ``t`` apart,
    the expert shard over the ``d/e`` expert replicas ``t·e`` apart), the bytes as weights
    (``gradient / GRADIENT_FACTOR``); ``buckets``: the model's dense and expert buckets (:func:`bucket_totals`)."""
    e = expert_parallel
    dense_weights, expert_weights = dense_gradient_bytes / GRADIENT_FACTOR, expert_gradient_bytes / GRADIENT_FACTOR / e
    dense_buckets, expert_buckets = buckets
    per_zero = []
    for parts in OVERLAPPED_COLLECTIVES.values():
        one, dense, spread = (np.zeros(len(data_parallel)) for _ in range(3))
        for kind, per_param, _ in parts:
            fixed_s, per_byte_s = prices.dense[kind]
            one, dense = one + fixed_s, dense + per_byte_s * dense_weights * per_param
            spread = spread + dense_buckets * fixed_s + per_byte_s * dense_weights * per_param
            if e > 1 and expert_weights > 0:
                fixed_e, per_byte_e = prices.expert[kind]
                spread = spread + expert_buckets * fixed_e + per_byte_e * expert_weights * per_param
        if not dense_weights > 0:  # no stage holds a dense bucket
            one = np.zeros(len(data_parallel))
        per_zero.append((one, dense, spread))
    return tuple(np.minimum.reduce(parts) for parts in zip(*per_zero))


def last_bucket_floor(prices: DataParallelPrices, expert_parallel: int, data_parallel: np.ndarray,
                      layer_param_bytes, layer_expert_param_bytes) -> np.ndarray:
    """Per data-parallel degree of ``data_parallel`` (``prices`` at them), what every stage leaves exposed whatever its
    passes when every layer has weights: its first layer's last bucket of each overlapped collective
    (:func:`layer_exposure_s`: ``max(c − b·(n−1)/n, c/n) ≥ c/n`` with nothing before it
    in the stage; the weights' all-gather likewise before the first forward), so at least the least ``c_l/n_l`` over
    the layers, summed over the collectives, the lesser of ZeRO-0's and ZeRO-1's (``1/v`` of it interleaved: one chunk's
    first layer). 0 without the per-layer bytes or when some layer has none (a weightless first layer's pass could hide
    the next one's)."""
    if layer_param_bytes is None:
        return np.zeros(len(data_parallel))
    e = expert_parallel
    params = np.asarray(layer_param_bytes, dtype=float)
    whole_experts = (np.zeros_like(params) if layer_expert_param_bytes is None
                     else np.asarray(layer_expert_param_bytes, dtype=float))
    if not (params > 0).all():
        return np.zeros(len(data_parallel))
    # the DP's count (Prices.overlap_syncs): dense and expert-shard buckets apart, at every e
    buckets = bucket_counts(params - whole_experts) + bucket_counts(whole_experts / e)
    # its collectives (overlap_collectives_s): at e = 1 every byte over the d replicas
    experts = whole_experts / e if e > 1 else np.zeros_like(params)
    dense = params - whole_experts if e > 1 else params
    per_zero = []
    for parts in OVERLAPPED_COLLECTIVES.values():
        comm_s = np.zeros((len(data_parallel), len(params)))
        for kind, per_param, _ in parts:
            fixed_s, per_byte_s = prices.dense[kind]
            comm_s = comm_s + (bucket_counts(dense) * fixed_s[:, None] + per_byte_s[:, None] * dense * per_param)
            if e > 1 and experts.any():
                fixed_e, per_byte_e = prices.expert[kind]
                comm_s = comm_s + (bucket_counts(experts) * fixed_e[:, None] + per_byte_e[:, None] * experts * per_param)
        per_zero.append((comm_s / buckets).min(axis=1))
    return np.minimum.reduce(per_zero)


def stage_share(floor: tuple[np.ndarray, ...], stages: int) -> np.ndarray:
    """The largest stage's overlapped collectives at ``p`` stages, at least (:func:`overlapped_collectives_floor`)."""
    one, dense, spread = floor
    return np.maximum(one + dense / stages, spread / stages)


__all__ = ["BUCKET_BYTES", "MEGATRON_BUCKET_PARAMS", "OVERLAPPED_COLLECTIVES", "bucket_counts", "bucket_totals",
           "exposed_floor_s", "exposed_s", "interleaved_exposed_s", "last_bucket_floor", "layer_exposure_s",
           "overlapped_collectives_floor", "stage_exposed_s", "stage_share"]
