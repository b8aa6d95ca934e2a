"""Event simulation of data-parallel collectives overlapped with the passes (``Cluster.dp_comm_overlap``), written from
the schedule as Megatron-Core runs it (``megatron/core/distributed/param_and_grad_buffer.py``: a bucket's collective is
launched when its last gradient is ready, on one communication stream, in order; ``schedules.py``: a model chunk's
gradients are reduced from its own last backward microbatch on, its weights gathered before its first forward), not
from ``phaze_env.placement.dp_overlap``'s closed form: the oracle the tests compare that closed form and the placement
DP with.

A stage is a list of layers in forward order, each ``(collective_s, pass_s, buckets)``: ``buckets`` equal pieces of
its collective, the ``j``-th ready ``j/buckets`` of the way through its backward pass (the backward runs the layers in
reverse) — or, for the weights' all-gather, the ``j``-th needed at the start of the ``j``-th piece of its forward pass.
Interleaved (``v`` chunks over ``p`` stages), each chunk is the stage's layers with ``1/v`` of every time, and the
device's last backward passes are, chunk ``v−1`` down to 0, each chunk's last microbatch preceded by ``p − 1`` other
microbatches of that chunk (Megatron-LM's interleaved cooldown); the first forwards mirror it.
"""

from __future__ import annotations

import math


def exposed_backward_s(layers, stages: int = 1, interleave: int = 1) -> float:
    """Seconds the last bucket's collective ends after the last backward pass ends (0 if before)."""
    v, now, link_free = interleave, 0.0, 0.0
    for chunk in range(v - 1, -1, -1):
        if chunk < v - 1:  # the other microbatches of this chunk: backward passes that launch nothing
            now += (stages - 1) * sum(b for _, b, _ in layers) / v
        for collective, pass_s, buckets in reversed(layers):  # the chunk's last microbatch, last layer first
            n = math.ceil(buckets)
            if n <= 0:
                now += pass_s / v
                continue
            for _ in range(n):
                now += pass_s / v / n  # this piece of the layer's gradients is ready
                link_free = max(link_free, now) + collective / v / n
    return max(0.0, link_free - now)


def delayed_forward_s(layers, stages: int = 1, interleave: int = 1) -> float:
    """Seconds the first forward passes end later than without the all-gathers (all launched at the step's start,
    one after another on the link; a piece of the forward waits for its bucket)."""
    v, now, link_free, work = interleave, 0.0, 0.0, 0.0
    for chunk in range(v):
        for collective, pass_s, buckets in layers:  # the chunk's first microbatch, first layer first
            n = math.ceil(buckets)
            if n <= 0:
                now += pass_s / v
                work += pass_s / v
                continue
            for _ in range(n):
                link_free += collective / v / n  # the bucket has arrived
                now = max(now, link_free) + pass_s / v / n
                work += pass_s / v / n
        if chunk < v - 1:  # its other microbatches before the next chunk's first
            now += (stages - 1) * sum(b for _, b, _ in layers) / v
            work += (stages - 1) * sum(b for _, b, _ in layers) / v
    return max(0.0, now - work)
