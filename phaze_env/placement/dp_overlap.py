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

The model (one link; a layer's gradients become ready, and its weights are consumed, at an even rate through its
backward or forward pass; recomputation and pipeline sends are not counted as cover — conservative: under recompute
the last backward's rerun would hide more, as it does for ZeRO-2/3's per-layer collectives
(:data:`~phaze_env.placement.inputs.RERUN_COVER`), but a stage's sync would then depend on the recompute mode
the DP picks for it by memory):

* a stage's gradients sit in buffers of their own — the dense weights', and at ``e > 1`` the expert shard's apart
  (:data:`Stream`) — cut into buckets of :func:`bucket_bytes` (40M parameters, more above 40 replicas) across its layers in backward order, the last bucket of
  each buffer partial (``param_and_grad_buffer.py`` fills a bucket until it holds ``bucket_size`` parameters, whatever
  layers they come from); bucket ``k`` is ready at ``τ_k``, when its last byte's gradient is, and the link serves the
  ready collectives back to back, so the stage's exposed collectives after its last backward are
  ``max(0, max_k (Σ_{τ_i ≥ τ_k} cost_i − (T − τ_k)))`` (:func:`exposed_s`; ``T`` its backward pass): never less than
  its last bucket, ready when the backward ends, never less than all the collectives less all the backward pass. The
  weights' all-gather delays the first forward by the same expression in the forward pass;
* every stage ``(a, b)`` of a chain at once (:func:`stage_exposed_s`): a bucket's position counted from the stage's
  end depends on ``b`` alone, so its term splits into a part of the stage and a part of ``b`` and the bucket, linear
  in the bucket within a layer; a running maximum over the layers gives every ``a`` (``O(L²)``);
* interleaved, ``v`` chunks of ``1/v`` of the stage each (the placement model's equal chunks), each with its own
  buffers (Megatron-Core keeps one per model chunk): ``v`` times a chunk's exposure is the stage's with ``v``-fold
  buckets and fixed parts; chunk ``j`` (``j`` from 0, the last backward) has ``j·p`` chunk-backward passes after its
  own, so the stage exposes one chunk's ``E/v`` plus ``max(0, (v − 1)·(C − p·B)/v)``
  (:func:`interleaved_exposed_s`); Calculon's ``data_par_overlap`` (calculon-ai/calculon ``calculon/llm/llm.py``: the
  last block's collective exposed, the others hidden under the chunk's backward of ``pipeline_par`` microbatches) is
  the same structure with whole blocks;
* every stage is hidden only by its own passes (a later stage's head start in the pipeline's drain is not counted:
  conservative), and the batch pays the largest stage's exposed collectives + optimizer step.

The brute-force check (``tests/test_dp_overlap.py``, ``tests/dp_overlap_oracle.py``) simulates the buffers, their
buckets across layers and the link event by event, one buffer and two, plain and interleaved. The floors of
this model that the search's bound of the DP takes (:func:`exposed_floor_s`, :func:`overlapped_collectives_floor`,
:func:`last_bucket_floor`; :func:`~phaze_env.placement.bounds.placement_time_bound_s` has the proof) sit here, beside
what they bound, so that a change of the overlap and of its floor is one change.
"""

from __future__ import annotations

import numpy as np

from phaze_env.placement.collectives import DataParallelPrices
from phaze_env.placement.inputs import GRADIENT_FACTOR

MEGATRON_BUCKET_PARAMS = 40_000_000
"""Parameters per gradient bucket, at least: Megatron-Core's default ``bucket_size = max(40000000, 1000000 · dp_size)``
(NVIDIA/Megatron-LM ``megatron/core/distributed/distributed_data_parallel_config.py``, ``bucket_size``: "If
unspecified, MCore uses a default value of max(40000000, 1000000 * dp_size) parameters (larger DP sizes need larger
buckets to ensure collectives do not become latency-bound)"; ``dp_size`` the data-parallel group, context-parallel
ranks included), used by :func:`bucket_bytes`. A bucket is cut at exactly that many parameters here, where
Megatron-Core closes it at the first parameter that fills it (a bucket holds whole tensors, so up to one tensor more)
and gives a shared embedding a bucket of its own: the difference is at most a tensor's bytes per bucket. The expert
buffer's buckets take the same size (one ``bucket_size`` per model)."""

MEGATRON_BUCKET_PARAMS_PER_REPLICA = 1_000_000
"""Parameters per bucket per data-parallel replica, Megatron-Core's default above 40 replicas
(:data:`MEGATRON_BUCKET_PARAMS` has the source): at 1,024 replicas a bucket holds 1.024 billion parameters, so a
1.5-billion-parameter model has two and the overlap hides little."""

BUCKET_BYTES = 2 * MEGATRON_BUCKET_PARAMS
"""The smallest bucket as weight bytes (bf16 weights, 2 bytes each, as :class:`~phaze_env.placement.inputs.LayerArrays`
counts ``param_bytes``): :func:`bucket_bytes` up to 40 replicas."""


def bucket_bytes(replicas):
    """A gradient bucket's weight bytes at ``replicas`` data-parallel ranks holding the same weights (``d·c``),
    elementwise: ``2 · max(40M, 1M · replicas)`` (:data:`MEGATRON_BUCKET_PARAMS`)."""
    return 2.0 * np.maximum(MEGATRON_BUCKET_PARAMS, MEGATRON_BUCKET_PARAMS_PER_REPLICA * np.asarray(replicas, dtype=float))


OVERLAPPED_COLLECTIVES = {0: (("allreduce", GRADIENT_FACTOR, "bwd_s"),),
                          1: (("reducescatter", GRADIENT_FACTOR, "bwd_s"), ("allgather", 1.0, "fwd_s"))}
"""Per ZeRO stage the stack overlaps (0 and 1), its once-per-batch collectives as ``(kind, payload per weight byte,
the pass that hides it)``: ZeRO-0's gradient all-reduce under the backward; ZeRO-1's gradient reduce-scatter under the
backward and its updated weights' all-gather under the next forward. The placement DP
(:meth:`~phaze_env.placement.prices.Prices.overlap_collectives_s`) and the search's bound
(:func:`~phaze_env.placement.bounds.placement_time_bound_s`) both price these."""


def bucket_counts(param_bytes, bucket_bytes=BUCKET_BYTES) -> np.ndarray:
    """Buckets of a gradient buffer of ``param_bytes`` weight bytes: ``ceil(param_bytes / bucket_bytes)`` (0 without
    weights), elementwise. A stage's (a model chunk's) buffer is cut into buckets across its layers."""
    return np.ceil(np.asarray(param_bytes, dtype=float) / bucket_bytes)


Stream = tuple[np.ndarray, float, float]
"""One gradient buffer's layers as the overlap prices them: ``(bytes, fixed_s, per_byte_s)``, ``bytes`` the weight
bytes of each layer (forward order) in this buffer, a bucket of ``x`` bytes costing ``fixed_s + per_byte_s·x`` on
the link (the collective's per-byte part times its payload per weight byte). Megatron-Core keeps the dense and the
expert-parallel weights in buffers of their own (``expert_parallel_buffers``), each with its buckets and its
data-parallel group."""


def _events(streams, cover_s: np.ndarray, bucket_bytes: float):
    """Every bucket of one stage's buffers: its ready time (from the start of the stage's backward pass, its layers
    run last to first; a bucket is ready when its last byte's gradient is, a layer's gradients ready at an even rate
    through its backward) and its collective's time. ``cover_s`` finite."""
    cover = np.asarray(cover_s, dtype=float)[::-1]
    elapsed = np.concatenate(([0.0], np.cumsum(cover)))
    times, costs = [], []
    for layer_bytes, fixed_s, per_byte_s in streams:
        x = np.asarray(layer_bytes, dtype=float)[::-1]
        total = float(x.sum())
        if not total > 0:
            continue
        ends = np.minimum(np.arange(1, int(bucket_counts(total, bucket_bytes)) + 1) * bucket_bytes, total)
        filled = np.concatenate(([0.0], np.cumsum(x)))
        at = np.clip(np.searchsorted(filled, ends, side="left") - 1, 0, len(x) - 1)  # filled[at] < end <= filled[at+1]
        times.append(elapsed[at] + (ends - filled[at]) / x[at] * cover[at])
        costs.append(fixed_s + per_byte_s * np.diff(np.concatenate(([0.0], ends))))
    return (np.concatenate(times), np.concatenate(costs)) if times else (np.zeros(0), np.zeros(0))


def exposed_s(streams, cover_s, bucket_bytes: float = BUCKET_BYTES) -> float:
    """What one stage's bucketed collectives leave exposed past the end of its last backward pass (its layers in
    forward order, ``streams`` as :data:`Stream`, ``cover_s`` each layer's pass).

    The buckets of ``bucket_bytes`` run across the layers in backward order, the last one of each buffer partial; each
    is launched when ready, the link serving them back to back (work-conserving: the buffers' collectives share it),
    so it ends at ``max_k (τ_k + Σ_{τ_i ≥ τ_k} cost_i)`` and the exposure is
    ``max(0, max_k (Σ_{τ_i ≥ τ_k} cost_i − (T − τ_k)))`` (``T`` the whole pass). The weights' all-gather before the
    first forward is the mirror image: the same expression in the forward pass (the buckets gathered in the order the
    forward needs them). Every pass unbounded (``inf``, ``Settings.unbounded_overlap_cover``): only the buckets ready
    at the very end stay exposed, the last one of each buffer with bytes in the stage's first layer."""
    cover = np.asarray(cover_s, dtype=float)
    if len(cover) and np.isposinf(cover).all():
        return float(sum(_last_bucket_s(np.asarray(x, dtype=float).sum(), f, b, bucket_bytes)
                         for x, f, b in streams if np.asarray(x, dtype=float)[0] > 0))
    times, costs = _events(streams, cover, bucket_bytes)
    if not len(times):
        return 0.0
    order = np.argsort(times, kind="stable")
    later = np.cumsum(costs[order][::-1])[::-1]  # the buckets ready at or after each one
    return float(max(0.0, (later - (cover.sum() - times[order])).max()))


def _last_bucket_s(total, fixed_s, per_byte_s, bucket_bytes):
    """The collective of a buffer's last (partial) bucket, elementwise (0 for an empty buffer)."""
    total = np.asarray(total, dtype=float)
    return np.where(total > 0, fixed_s + per_byte_s * (total - (bucket_counts(total, bucket_bytes) - 1) * bucket_bytes),
                    0.0)


def stage_collectives_s(table, streams, bucket_bytes: float = BUCKET_BYTES) -> np.ndarray:
    """Every stage's bucketed collectives of a :class:`~phaze_env.placement.stages.StageTable`: per buffer
    ``⌈P/bucket⌉`` fixed parts and the bytes' part (0 where no stage)."""
    total = np.zeros(table.valid.shape)
    for layer_bytes, fixed_s, per_byte_s in streams:
        size = table.layer_sum(np.asarray(layer_bytes, dtype=float))
        total = total + bucket_counts(size, bucket_bytes) * fixed_s + per_byte_s * size
    return np.where(table.valid, total, 0.0)


def _first_with_bytes(layer_bytes: np.ndarray) -> np.ndarray:
    """Per index ``k`` of ``0 … L``, the first layer at or after ``k`` with bytes (``L`` where none)."""
    count = len(layer_bytes)
    index = np.where(np.asarray(layer_bytes) > 0, np.arange(count), count)
    return np.minimum.accumulate(np.append(index, count)[::-1])[::-1]


def _chain_exposed_s(layer_bytes, fixed_s, per_byte_s, cover_s, bucket_bytes) -> np.ndarray:
    """:func:`exposed_s` of every stage ``(a, b)`` (layers ``a … b−1``) of a chain, one buffer, as a ``(L+1)²`` matrix
    (``-inf`` where ``a ≥ b``). With bucket ``j`` of a stage ending at ``b`` ready at ``τ_j`` (positions counted from
    ``b`` backward: they depend on ``b`` only) the term of an interior bucket is
    ``(n−j+1)·f + β·(P − (j−1)·B) − (T − τ_j) = [(n+1)·f + β·(P+B) − T] + [τ_j − j·(f + β·B)]``: a part of the stage
    and a part ``g_b(j)`` of ``b`` and ``j`` alone, linear in ``j`` within a layer (so its maximum over a layer's
    buckets is at the first or last of them) and maximised over the stage's layers by a running maximum. The bucket
    at ``j = n`` (where ``P`` is a multiple of ``B``) gives the last bucket's own term, which is added apart: the last
    bucket, ready at the end of the stage's first layer with bytes, less the passes of the weightless layers before it."""
    x = np.asarray(layer_bytes, dtype=float)
    c = np.asarray(cover_s, dtype=float)
    count = len(x)
    filled = np.concatenate(([0.0], np.cumsum(x)))  # S: bytes of the layers before each index
    elapsed = np.concatenate(([0.0], np.cumsum(c)))  # the same for the passes
    B, step = bucket_bytes, fixed_s + per_byte_s * bucket_bytes
    ends = np.arange(count + 1)[:, None]  # b
    layer = np.arange(count)[None, :]  # l
    inside = layer < ends
    low = filled[ends] - filled[layer + 1]  # layer l's positions from b: (low, high]
    high = filled[ends] - filled[layer]
    started = elapsed[ends] - elapsed[layer + 1]  # its backward starts
    has = inside & (x[None, :] > 0)
    safe = np.where(x > 0, x, 1.0)[None, :]
    best = np.full((count + 1, count), -np.inf)
    for j in (np.floor(low / B) + 1, np.floor(high / B)):
        tau = started + (j * B - low) / safe * c[None, :]
        ok = has & (j * B > low) & (j * B <= high)
        best = np.maximum(best, np.where(ok, tau - j * step, -np.inf))
    running = np.maximum.accumulate(best[:, ::-1], axis=1)[:, ::-1]  # [b, a]: max over a <= l < b
    size = filled[None, :] - filled[:, None]  # [a, b]: P
    passes = elapsed[None, :] - elapsed[:, None]  # T
    n = bucket_counts(size, B)
    interior = (n + 1) * fixed_s + per_byte_s * (size + B) - passes + np.concatenate(
        (running.T, np.full((1, count + 1), -np.inf)), axis=0)
    # the last bucket: ready at the end of the stage's first layer with bytes (nxt[a]), the passes before it after
    nxt = _first_with_bytes(x)
    waits = elapsed[nxt][:, None] - elapsed[:, None]  # [a]: the weightless layers' passes from a to nxt[a]
    last = np.where(size > 0, fixed_s + per_byte_s * (size - (n - 1) * B) - waits, -np.inf)
    result = np.maximum(interior, last)
    return np.where(np.arange(count + 1)[:, None] < np.arange(count + 1)[None, :], result, -np.inf)


def _chain_exposed_buffers_s(streams, cover_s, bucket_bytes) -> np.ndarray:
    """:func:`exposed_s` of every stage ``(a, b)`` of a chain with several buffers on one link, as a ``(L+1)²`` matrix
    (``-inf`` where ``a ≥ b``): per stage end ``b``, every bucket of the longest stage ending there (its positions and
    ready times counted from ``b``: the same for every ``a``) and each stage's last buckets, the term of each for every
    ``a`` at once (``O(L·J)`` per ``b``, ``J`` the buckets). A bucket's own buffer counts its index; another buffer
    counts its buckets ready at or after it: those from the first one ready then, or only its last (partial) bucket
    when that is the stage's last and is ready no earlier, or none."""
    cover = np.asarray(cover_s, dtype=float)
    count, B = len(cover), bucket_bytes
    data = []
    for x, fixed_s, per_byte_s in streams:
        x = np.asarray(x, dtype=float)
        nxt = _first_with_bytes(x)
        data.append((x, np.concatenate(([0.0], np.cumsum(x))), nxt, fixed_s, per_byte_s))
    result = np.full((count + 1, count + 1), -np.inf)
    for b in range(1, count + 1):
        starts = np.arange(b)
        back = np.concatenate(([0.0], np.cumsum(cover[b - 1::-1])))  # [k]: the backward of the last k layers before b
        passes = back[b - starts]
        sizes, counts, lasts, events = [], [], [], []
        for x, filled, nxt, fixed_s, per_byte_s in data:
            size = filled[b] - filled[starts]
            sizes.append(size)
            counts.append(bucket_counts(size, B))
            first = np.minimum(nxt[starts], b - 1)  # the stage's first layer with bytes: its last bucket is ready then
            lasts.append(np.where(nxt[starts] < b, back[b - first], -np.inf))
            index = np.arange(1, int(np.floor(size[0] / B)) + 1, dtype=float)  # the longest stage's full buckets
            y = filled[b] - index * B  # where each one's last byte sits, as a forward prefix
            layer = np.clip(np.searchsorted(filled, y, side="right") - 1, 0, b - 1)
            ready = back[b - layer - 1] + (filled[layer + 1] - y) / np.where(x[layer] > 0, x[layer], 1.0) * cover[layer]
            events.append((index, ready))

        def later_s(s, ready, own=None):  # [a, e]: buffer s's collectives ready at or after `ready` ([a, e] or [e])
            _, _, _, fixed_s, per_byte_s = data[s]
            n, size, last = counts[s][:, None], sizes[s][:, None], lasts[s][:, None]
            if own is None:
                first = np.searchsorted(events[s][1], ready, side="left") + 1.0
                k = np.minimum(first, n)
                counted = (size > 0) & (ready <= last)
            else:
                k, counted = own, size > 0
            return np.where(counted, (n - k + 1) * fixed_s + per_byte_s * (size - (k - 1) * B), 0.0)

        best = np.full(b, -np.inf)
        for s, (index, ready) in enumerate(events):
            if len(index):  # the full buckets, each where the stage holds it
                total = sum(later_s(r, ready[None, :], index[None, :] if r == s else None) for r in range(len(data)))
                value = np.where(index[None, :] * B <= sizes[s][:, None], total - (passes[:, None] - ready[None, :]),
                                 -np.inf)
                best = np.maximum(best, value.max(axis=1))
            ready_last = lasts[s][:, None]  # each stage's last bucket of this buffer
            own = counts[s][:, None]
            total = sum(later_s(r, ready_last, own if r == s else None)
                        for r in range(len(data)))
            best = np.maximum(best, np.where(sizes[s] > 0, total[:, 0] - (passes - lasts[s]), -np.inf))
        result[:b, b] = best
    return result


def stage_exposed_s(table, streams, cover_s, bucket_bytes: float = BUCKET_BYTES) -> np.ndarray:
    """:func:`exposed_s` of every stage ``(a, b)`` of a :class:`~phaze_env.placement.stages.StageTable` at once, its
    layers taken in index order (0 where no stage). A chain with one buffer holding bytes: a running maximum
    (:func:`_chain_exposed_s`, ``O(L²)``); with several, per stage end (:func:`_chain_exposed_buffers_s`); every pass
    unbounded: each stage's first layer's last buckets; a DAG's downsets: stage by stage."""
    cover = np.asarray(cover_s, dtype=float)
    streams = [(np.asarray(x, dtype=float), f, b) for x, f, b in streams if np.asarray(x, dtype=float).sum() > 0]
    valid = table.valid
    if not streams:
        return np.zeros(valid.shape)
    if len(cover) and np.isposinf(cover).all():
        result = np.zeros(valid.shape)
        first = np.zeros(valid.shape, dtype=int)  # [a, b]: the stage's first layer (the smallest index written last)
        for k in reversed(range(len(cover))):
            first = np.where(table.member[None, :, k] & ~table.member[:, None, k], k, first)
        for x, f, b in streams:
            result = result + np.where(x[first] > 0, _last_bucket_s(table.layer_sum(x), f, b, bucket_bytes), 0.0)
        return np.where(valid, result, 0.0)
    if table.chain and len(streams) == 1:
        x, f, b = streams[0]
        return np.where(valid, np.maximum(_chain_exposed_s(x, f, b, cover, bucket_bytes), 0.0), 0.0)
    if table.chain:
        return np.where(valid, np.maximum(_chain_exposed_buffers_s(streams, cover, bucket_bytes), 0.0), 0.0)
    result = np.zeros(valid.shape)
    for a, b in zip(*np.nonzero(valid)):
        layers = np.flatnonzero(table.member[b] & ~table.member[a])
        result[a, b] = exposed_s([(x[layers], f, per) for x, f, per in streams], cover[layers], bucket_bytes)
    return result


def exposed_floor_s(comm_total_s, cover_total_s, interleave=1):
    """A lower bound on what a stage leaves exposed, from its totals alone: ``max(0, C − B)/v`` (``C``: the stage's
    collectives of one kind, ``B``: one microbatch's pass that hides them, ``v``: the interleave), elementwise.

    Valid for every split of ``C`` and ``B`` over the stage's layers, every bucket count and every depth ``p``:

    * :func:`exposed_s` ``≥ C − B``: the term of the first bucket ready counts every bucket (all are ready at or
      after it) less the pass left after it, at most ``B``. It is also ``≥ 0``;
    * :func:`interleaved_exposed_s` is ``E/v`` plus a term ``≥ 0``, and ``E ≥ max(0, C − B)``.

    A stage with several kinds (ZeRO-1: the reduce-scatter under ``B``, the all-gather under ``F``) exposes at least
    the sum of the floors, and ``max(0, x) + max(0, y) ≥ max(0, x + y)``: at least the floor of the summed
    collectives under ``F + B``."""
    comm_total_s, cover_total_s = np.asarray(comm_total_s, dtype=float), np.asarray(cover_total_s, dtype=float)
    return np.maximum(0.0, comm_total_s - cover_total_s) / np.asarray(interleave)


def backlog_floor_s(comm_total_s, cover_total_s, stages, interleave):
    """The interleaved chunks' backlog of :func:`interleaved_exposed_s`, ``max(0, (v − 1)·(C − p·B)/v)`` (``C``, ``B``:
    the stage's collectives and the pass that hides them; 0 at ``v = 1``), elementwise: it depends on the totals
    alone, so it is its own floor."""
    v = np.asarray(interleave, dtype=float)
    with np.errstate(invalid="ignore"):  # an unbounded pass at v = 1 (0 · inf): masked out
        backlog = np.maximum(0.0, (v - 1) * (np.asarray(comm_total_s, dtype=float)
                                             - np.asarray(stages) * np.asarray(cover_total_s, dtype=float)) / v)
    return np.where(v > 1, backlog, 0.0)


def interleaved_floor_s(comm_total_s, cover_total_s, stages, interleave):
    """A lower bound on :func:`interleaved_exposed_s` from a stage's totals alone: :func:`exposed_floor_s` (``E/v ≥
    max(0, C − B)/v``) plus the chunks' backlog (:func:`backlog_floor_s`), elementwise. A maximum of affine functions
    of ``(C, B)``, so jointly convex (the stages' mean of it is at least its value at their mean ``C`` and ``B``:
    Jensen) and nonincreasing in ``B``, with its breakpoints in ``B`` at ``C`` and ``C/p``."""
    return (exposed_floor_s(comm_total_s, cover_total_s, interleave)
            + backlog_floor_s(comm_total_s, cover_total_s, stages, interleave))


def pace_floor_curve(sends_s, backward, forward, backward_s, forward_s, stages, interleave):
    """The exposure floor of :func:`pace_floor_s` as a function of the slowest stage's time ``X``, for each row of the
    arrays: ``(xs, values)``, each ``rows × K``, ``xs`` ascending from the least ``X`` a plan can take,
    ``B + F + sends``, and ``values`` the floor ``ψ(X − sends)`` there,

    ``ψ(Y) = min {Σ_{C ∈ backward} f(C, b) + Σ_{C ∈ forward} f(C, y) : b ≥ B, y ≥ F, b + y ≤ Y}``,

    ``f`` :func:`interleaved_floor_s`; ``backward`` / ``forward``: the stages' mean collectives (at least) hidden by the
    backward / the forward pass; ``B``, ``F``: the stages' mean backward and forward passes (at most what they really
    take: lower-bound layer times); ``sends``: what every stage's time holds besides (``v`` times the cheapest send).
    ``ψ`` is the infimal convolution of the two passes' convex piecewise linear floors (with ``b ≥ B``, ``y ≥ F``),
    so it is convex and piecewise linear with its kinks among the sums of theirs — ``B`` or a collective's ``C`` or
    ``C/p`` under the backward, plus ``F`` or one's under the forward —, which ``xs`` holds; ``ψ`` is 0 past the last
    (both passes then hide every collective), and at each kink the least over ``b`` is at an end of its interval or at a
    kink of either sum."""
    sends = np.atleast_1d(np.asarray(sends_s, dtype=float))
    rows = sends.shape
    lo_b, lo_f = (np.broadcast_to(np.asarray(x, dtype=float), rows) for x in (backward_s, forward_s))
    p = np.broadcast_to(np.asarray(stages, dtype=float), rows)
    v = np.broadcast_to(np.asarray(interleave, dtype=float), rows)
    backward = [np.broadcast_to(np.asarray(c, dtype=float), rows) for c in backward]
    forward = [np.broadcast_to(np.asarray(c, dtype=float), rows) for c in forward]

    def kinks(parts, low):
        return [low] + [c / q for c in parts for q in (1.0, p)]

    def floor(parts, passes, p, v):
        return sum((interleaved_floor_s(c[:, None], passes, p, v) for c in parts), np.zeros(passes.shape))

    ys = np.stack([kb + kf for kb in kinks(backward, lo_b) for kf in kinks(forward, lo_f)], axis=1)
    ys = np.sort(np.maximum(ys, (lo_b + lo_f)[:, None]), axis=1)  # Y = b + y >= B + F: none below
    top = np.maximum(ys - lo_f[:, None], lo_b[:, None])  # b in [B, Y − F]
    # b at a kink of the backward's floor, at the interval's upper end, or where y = Y − b is at one of the forward's
    candidates = ([np.broadcast_to(k[:, None], ys.shape) for k in kinks(backward, lo_b)] + [top]
                  + [ys - k[:, None] for k in kinks(forward, lo_f)[1:]])
    values = np.full(ys.shape, np.inf)
    for b in candidates:
        b = np.clip(b, lo_b[:, None], top)
        values = np.minimum(values, floor(backward, b, p[:, None], v[:, None])
                            + floor(forward, ys - b, p[:, None], v[:, None]))
    return ys + sends[:, None], values


def pace_floor_s(slots, pace_s, curve):
    """A lower bound on the time per batch of any ``p``-stage plan at interleave ``v`` whose slowest stage takes at
    least ``pace_s`` per microbatch, whatever its layers' passes: ``min_{X ≥ max(pace, xs_0)} slots·X + ψ`` at ``X``
    (``curve``: :func:`pace_floor_curve`, ``xs_0`` the least ``X`` a plan can take), elementwise over its rows.

    Proof: the plan takes ``slots·X + max_j sync_j``, ``X`` its slowest stage, at least ``pace`` and at least every stage's
    ``F_j + B_j + sends`` (so their mean). Stage ``j`` exposes at least ``Σ f(C_j, B_j) + Σ f(C_j, F_j)``
    (:func:`interleaved_floor_s`, per collective under its pass) with ``B_j + F_j ≤ X − sends`` and its passes at least
    their lower bounds: at least ``ψ_j(X − sends)``, the same minimum at its own ``C_j``, ``B_j``, ``F_j`` (``f`` is
    nondecreasing in ``C``). A partial minimum of a jointly convex function over a polyhedron, ``ψ_j`` is convex in
    ``(C_j, B_j, F_j)``: the largest stage's is at least the stages' mean, which is at least ``ψ`` at the means (Jensen).
    So the time is at least ``h(X) = slots·X + ψ(X − sends)`` at some ``X`` from ``max(pace, xs_0)`` on; ``h`` is convex
    and piecewise linear with the kinks of ``ψ``, so its least there is at that start or at a kink beyond it. ``ψ`` at
    the start: the largest of its segments' lines (a convex function is the maximum of them) and 0. Nondecreasing in
    ``pace`` (a least over a shrinking set)."""
    xs, values = curve
    slots = np.broadcast_to(np.asarray(slots, dtype=float), xs.shape[:1])
    start = np.maximum(np.broadcast_to(np.asarray(pace_s, dtype=float), xs.shape[:1]), xs[:, 0])
    width = np.diff(xs, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(width > 0, np.diff(values, axis=1) / np.where(width > 0, width, 1.0), 0.0)
    lines = np.where(width > 0, values[:, :-1] + slope * (start[:, None] - xs[:, :-1]), -np.inf)
    at_start = np.maximum(lines.max(axis=1, initial=-np.inf), values[:, -1])
    beyond = np.where(xs >= start[:, None], slots[:, None] * xs + values, np.inf).min(axis=1)
    return np.minimum(slots * start + at_start, beyond)


def interleaved_exposed_s(exposed, comm_total_s, cover_total_s, stages: int, interleave: int):
    """A stage of ``v`` equal chunks (each ``1/v`` of every layer's collective and pass): the last chunk exposes
    ``E/v`` (one chunk's :func:`exposed_s`: homogeneous of degree one), and chunk ``j`` has ``j·p`` chunk passes after
    its own to hide under, so the link's backlog adds ``max(0, (v − 1)·(C − p·B)/v)`` (``C``, ``B``: the stage's
    collectives and pass). ``v = 1``: ``exposed`` itself. Elementwise."""
    if interleave == 1:
        return exposed
    return np.asarray(exposed) / interleave + backlog_floor_s(comm_total_s, cover_total_s, stages, interleave)


def dense_and_expert_bytes(expert_parallel: int, layer_param_bytes, layer_expert_param_bytes
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Each layer's ``(dense, expert)`` weight bytes as the overlap's buffers hold them: the expert ones apart only at
    ``e > 1`` (at ``e = 1`` every byte is in the dense buffer). The one split of both the DP's overlap
    (:meth:`~phaze_env.placement.prices.Prices.overlap_collectives_s`) and its bounds."""
    params = np.asarray(layer_param_bytes, dtype=float)
    experts = (np.asarray(layer_expert_param_bytes, dtype=float) if expert_parallel > 1
               and layer_expert_param_bytes is not None else np.zeros_like(params))
    return params - experts, experts


def bucket_totals(repeats: np.ndarray, expert_parallel: int, dense_gradient_bytes: float, expert_gradient_bytes: float,
                  layer_param_bytes: np.ndarray | None, layer_expert_param_bytes: np.ndarray | None,
                  bucket: np.ndarray | float = BUCKET_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """At least the buckets of any partition of the model into stages (chunks), dense and (``e > 1``) expert ones, at
    each bucket size of ``bucket`` (:func:`bucket_bytes` per data-parallel degree): each stage's buffer holds
    ``⌈P_s / bucket⌉`` (:func:`stage_collectives_s`), and ``Σ_s ⌈P_s/B⌉ ≥ ⌈Σ_s P_s/B⌉`` (an interleaved stage's ``v``
    chunks likewise), so ``⌈total / bucket⌉`` of the dense bytes and of the ``1/e`` expert shard; with the per-layer
    bytes (``repeats`` of each) their totals."""
    e = expert_parallel
    if layer_param_bytes is None:
        dense, experts = dense_gradient_bytes / GRADIENT_FACTOR, expert_gradient_bytes / GRADIENT_FACTOR / e if e > 1 else 0.0
    else:
        layer_dense, layer_experts = dense_and_expert_bytes(e, layer_param_bytes, layer_expert_param_bytes)
        dense, experts = (layer_dense * repeats).sum(), (layer_experts / e * repeats).sum()
    return bucket_counts(dense, bucket), bucket_counts(experts, bucket)


def overlapped_collectives_floor(prices: DataParallelPrices, expert_parallel: int, data_parallel: np.ndarray,
                                 dense_gradient_bytes: float, expert_gradient_bytes: float,
                                 buckets: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, ...]:
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
    passes when every layer has dense weights: its dense buffer's last bucket, ready at the end of its first layer's
    backward with no pass after it (:func:`exposed_s`), costs at least one fixed part of each overlapped collective
    (the weights' all-gather likewise before the first forward), the lesser of ZeRO-0's and ZeRO-1's sums; an
    interleaved chunk's likewise (``(v·f + β·x)/v ≥ f``: :func:`interleaved_exposed_s`). 0 without the per-layer bytes
    or when some layer has no dense bytes (a first layer without them leaves its pass to hide the others)."""
    if layer_param_bytes is None:
        return np.zeros(len(data_parallel))
    if not (dense_and_expert_bytes(expert_parallel, layer_param_bytes, layer_expert_param_bytes)[0] > 0).all():
        return np.zeros(len(data_parallel))
    return np.minimum.reduce([sum(prices.dense[kind][0] for kind, _, _ in parts)
                              for parts in OVERLAPPED_COLLECTIVES.values()])


def single_bucket(repeats, expert_parallel: int, layer_param_bytes, layer_expert_param_bytes,
                  bucket: np.ndarray) -> np.ndarray:
    """Per bucket size of ``bucket`` (:func:`bucket_bytes` per data-parallel degree), whether every stage of every
    partition holds its dense weights in one bucket and leaves all of them exposed: every layer has dense weights (so
    a stage's first layer does, and its one bucket is ready only when its backward ends, needed when its forward
    begins) and the whole model's dense weights fit one bucket. There the largest stage's overlapped collectives are
    exposed in full, at least one fixed part and ``1/p`` of the dense bytes' part (``1/v`` of that and one fixed part
    interleaved: the last chunk's one bucket, :func:`interleaved_exposed_s`). False without the per-layer bytes."""
    if layer_param_bytes is None:
        return np.zeros(np.shape(bucket), dtype=bool)
    dense, _ = dense_and_expert_bytes(expert_parallel, layer_param_bytes, layer_expert_param_bytes)
    return (dense > 0).all() & (float((dense * np.asarray(repeats)).sum()) <= np.asarray(bucket, dtype=float))


def stage_share(floor: tuple[np.ndarray, ...], stages: int) -> np.ndarray:
    """The largest stage's overlapped collectives at ``p`` stages, at least (:func:`overlapped_collectives_floor`)."""
    one, dense, spread = floor
    return np.maximum(one + dense / stages, spread / stages)


__all__ = ["BUCKET_BYTES", "MEGATRON_BUCKET_PARAMS", "MEGATRON_BUCKET_PARAMS_PER_REPLICA", "OVERLAPPED_COLLECTIVES",
           "backlog_floor_s", "bucket_bytes", "bucket_counts", "bucket_totals", "dense_and_expert_bytes", "interleaved_floor_s", "pace_floor_curve", "pace_floor_s",
           "exposed_floor_s", "exposed_s", "interleaved_exposed_s", "last_bucket_floor", "stage_collectives_s",
           "stage_exposed_s", "stage_share", "overlapped_collectives_floor", "single_bucket", "Stream"]
