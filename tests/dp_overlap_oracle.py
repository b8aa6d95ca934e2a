"""Event simulation of data-parallel collectives overlapped with the passes (``Cluster.dp_comm_overlap``), written from
the schedule as Megatron-Core runs it, not from ``phaze_env.placement.dp_overlap``'s closed form: the oracle the tests
compare that closed form and the placement DP with.

What it simulates (NVIDIA/Megatron-LM ``megatron/core/distributed/param_and_grad_buffer.py``): each model chunk keeps
its gradients in contiguous buffers (the dense weights' and, apart, the expert-parallel weights'), cut into buckets of
``bucket`` bytes in backward order, across layers; a bucket's collective is launched as soon as its last gradient is
ready and the link serves the launched collectives back to back, in launch order; ``schedules.py``: a chunk's
gradients are reduced from its own last backward microbatch on, its weights gathered before its first forward.

A stage is a list of layers in forward order, each ``(pass_s, bytes)`` with ``bytes`` one weight-byte count per buffer;
``costs`` gives each buffer's collective time of a bucket as a function of its bytes. A layer's gradients become ready
at an even rate through its backward pass (the backward runs the layers in reverse); for the weights' all-gather, a
piece of the forward waits until every bucket holding one of its bytes has arrived, the buckets gathered one after
another from the step's start in the order the forward needs them. Interleaved (``v`` chunks over ``p`` stages), each
chunk is the stage's layers with ``1/v`` of every byte and time and buffers of its own, and the device's last backward
passes are, chunk ``v−1`` down to 0, each chunk's last microbatch preceded by ``p − 1`` other microbatches of that
chunk (Megatron-LM's interleaved cooldown); the first forwards mirror it.
"""

from __future__ import annotations

from fractions import Fraction


def _buckets(layers, bucket: float, v: int):
    """Per buffer, its buckets in backward order as ``(first, last)`` byte positions counted from the chunk's end
    (backward order), each layer's bytes scaled by ``1/v``."""
    streams = len(layers[0][1]) if layers else 0
    result = []
    for s in range(streams):
        total = sum(Fraction(x[s]) for _, x in layers) / v  # exact positions: a bucket ends where a layer does
        cuts, start = [], Fraction(0)
        while start < total:
            cuts.append((start, min(start + bucket, total)))
            start += bucket
        result.append(cuts)
    return result


def exposed_backward_s(layers, costs, bucket: float, stages: int = 1, interleave: int = 1) -> float:
    """Seconds the last bucket's collective ends after the last backward pass ends (0 if before)."""
    v, now, ready = interleave, 0.0, []
    for chunk in range(v - 1, -1, -1):
        if chunk < v - 1:  # the other microbatches of this chunk: backward passes that launch nothing
            now += (stages - 1) * sum(p for p, _ in layers) / v
        buckets = _buckets(layers, bucket, v)
        filled = [Fraction(0)] * len(buckets)
        for pass_s, sizes in reversed(layers):  # the chunk's last microbatch, last layer first
            pass_s, start = pass_s / v, now
            for s, cuts in enumerate(buckets):
                x = Fraction(sizes[s]) / v
                if x <= 0:
                    continue
                for first, last in cuts:  # a bucket whose last byte this layer produces
                    if filled[s] < last <= filled[s] + x:
                        ready.append((start + float((last - filled[s]) / x) * pass_s, costs[s](float(last - first))))
                filled[s] += x
            now = start + pass_s
    link_free = 0.0
    for launched, cost in sorted(ready):
        link_free = max(link_free, launched) + cost
    return max(0.0, link_free - now)


def delayed_forward_s(layers, costs, bucket: float, stages: int = 1, interleave: int = 1) -> float:
    """Seconds the first forward passes end later than without the all-gathers (all launched at the step's start,
    one after another on the link in the order the forward needs them; a piece of the forward waits for the buckets
    holding its bytes)."""
    v = interleave
    # the forward's pieces: each layer cut where a bucket of some buffer starts or ends, with the buckets it needs
    schedule, need = [], []  # schedule: (work_s, [bucket ids]) in forward order; need: (undelayed start, id, cost)
    work, ident = 0.0, 0
    for chunk in range(v):
        buckets = _buckets(layers, bucket, v)
        ids = [[None] * len(cuts) for cuts in buckets]
        totals = [sum(Fraction(x[s]) for _, x in layers) / v for s in range(len(buckets))]
        above = list(totals)  # per buffer, the backward position of the forward's progress (it runs from the top)
        for pass_s, sizes in layers:
            pass_s = pass_s / v
            points = {Fraction(0), Fraction(1)}
            for s, cuts in enumerate(buckets):
                x = Fraction(sizes[s]) / v
                if x > 0:
                    points |= {(above[s] - edge) / x for first, last in cuts for edge in (first, last)
                               if above[s] - x < edge < above[s]}
            points = sorted(points)
            for lo, hi in zip(points, points[1:]):
                wanted = []
                for s, cuts in enumerate(buckets):
                    x = Fraction(sizes[s]) / v
                    if x <= 0:
                        continue
                    middle = above[s] - (lo + hi) / 2 * x  # a byte of this piece, as a backward position
                    for k, (first, last) in enumerate(cuts):
                        if first < middle < last:
                            if ids[s][k] is None:
                                ids[s][k] = ident
                                need.append((work, ident, costs[s](float(last - first))))
                                ident += 1
                            wanted.append(ids[s][k])
                schedule.append((float(hi - lo) * pass_s, wanted))
                work += float(hi - lo) * pass_s
            for s in range(len(buckets)):
                above[s] -= Fraction(sizes[s]) / v
        if chunk < v - 1:  # its other microbatches before the next chunk's first
            schedule.append(((stages - 1) * sum(p for p, _ in layers) / v, []))
            work += (stages - 1) * sum(p for p, _ in layers) / v
    arrival, link = {}, 0.0
    for _, k, cost in sorted(need):
        link += cost
        arrival[k] = link
    now = 0.0
    for piece_s, wanted in schedule:
        now = max([now] + [arrival[k] for k in wanted]) + piece_s
    return max(0.0, now - work)
