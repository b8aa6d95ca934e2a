"""Data-parallel collectives overlapped with the passes (``Stack.dp_comm_overlap``, the megatron-core profile): the
closed form of :mod:`phaze_env.placement.dp_overlap` against an event simulation of buckets on one link
(``dp_overlap_oracle``), per stage and for every stage of a table at once; the knob refused where the stack lacks it."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from dp_overlap_oracle import delayed_forward_s, exposed_backward_s
from hypothesis import given, settings
from hypothesis import strategies as st

from phaze_env.cluster import Cluster
from phaze_env.placement.dp_overlap import (bucket_counts, exposed_floor_s, exposed_s, interleaved_exposed_s,
                                            interleaved_floor_s, pace_floor_curve, pace_floor_s, stage_collectives_s,
                                            stage_exposed_s)
from phaze_env.placement.stages import chain_stages
from phaze_env.plan_spec import PlanRules
from phaze_env.stacks import STACKS

BUCKET = 4.0  # bytes per bucket in these small cases: a layer's 0-10 bytes span up to three buckets
layer = st.tuples(st.floats(0.0, 5.0), st.integers(0, 10), st.integers(0, 10))  # (pass, dense bytes, expert bytes)
stage_layers = st.lists(layer, min_size=1, max_size=6)
prices = st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0))  # a bucket's (fixed, per byte)


def _streams(layers, dense, expert):
    """The closed form's buffers and the oracle's layers and costs: one buffer (the dense one, every byte) when
    ``expert`` is None, else the dense and the expert buffers apart."""
    passes = np.array([p for p, _, _ in layers], dtype=float)
    if expert is None:
        sizes = [(float(x + y),) for _, x, y in layers]
        streams = [(np.array([s[0] for s in sizes]), *dense)]
    else:
        sizes = [(float(x), float(y)) for _, x, y in layers]
        streams = [(np.array([s[0] for s in sizes]), *dense), (np.array([s[1] for s in sizes]), *expert)]
    costs = [lambda size, f=f, b=b: f + b * size for _, f, b in streams]
    return passes, streams, [(p, s) for p, s in zip(passes, sizes)], costs


def _closed(streams, passes, stages=1, interleave=1, bucket=BUCKET):
    """Prices.overlap_syncs's composition for one stage: a chunk at v-fold buckets and fixed parts, the backlog."""
    v = interleave
    chunked = [(x, v * f, b) for x, f, b in streams]
    one = exposed_s(chunked, passes, v * bucket)
    total = sum(float(bucket_counts(x.sum(), v * bucket)) * v * f + b * x.sum() for x, f, b in streams)
    return float(interleaved_exposed_s(one, total, passes.sum(), stages, v))


@settings(max_examples=300, deadline=None)
@given(stage_layers, prices, st.none() | prices, st.integers(1, 6), st.integers(1, 4))
def test_closed_form_matches_the_event_simulation_backward_and_forward(layers, dense, expert, stages, interleave):
    """Buckets across layers, one buffer or the dense and expert buffers on one link, plain and interleaved."""
    passes, streams, sim, costs = _streams(layers, dense, expert)
    closed = _closed(streams, passes, stages, interleave)
    assert closed == pytest.approx(exposed_backward_s(sim, costs, BUCKET, stages, interleave), abs=1e-9)
    assert closed == pytest.approx(delayed_forward_s(sim, costs, BUCKET, stages, interleave), abs=1e-9)


def test_what_the_schedule_cannot_hide_is_exposed():
    """The last bucket's collective at least; all of it less the whole backward pass at least; nothing hides it
    without a pass to hide under; small layers share a bucket (one fixed part, not one per layer)."""
    one = [(1.0, 0.0)]  # a bucket costs 1 s + 0 s per byte
    sim = [(3.0, (4.0,)), (3.0, (4.0,))]  # two layers of one bucket each, 3 s of backward each
    assert exposed_backward_s(sim, [lambda x: 1.0], BUCKET) == pytest.approx(1.0)  # the first layer's bucket
    passes, streams = np.array([3.0, 3.0]), [(np.array([4.0, 4.0]), *one[0])]
    assert _closed(streams, passes) == pytest.approx(1.0)
    heavy = [(np.array([4.0, 4.0]), 4.0, 0.0)]
    assert _closed(heavy, np.array([1.0, 1.0])) == pytest.approx(8.0 - 1.0)  # the second bucket waits for the first
    assert _closed([(np.array([12.0]), 0.0, 1 / 6)], np.array([0.0])) == pytest.approx(2.0)
    assert _closed([(np.array([0.0]), 1.0, 1.0)], np.array([2.0])) == 0.0
    tiny = [(np.full(8, 0.5), 1.0, 0.0)]  # eight half-byte layers fill one bucket: one fixed part, exposed at the end
    assert _closed(tiny, np.full(8, 1.0)) == pytest.approx(1.0)
    assert float(stage_collectives_s(chain_stages(_arrays(8)), tiny)[0, 8]) == pytest.approx(1.0)


def _arrays(count):
    from phaze_env.placement.inputs import LayerCost, layer_arrays

    return layer_arrays([LayerCost(fwd_s=1.0, bwd_s=1.0, param_bytes=1.0, stash_bytes=1.0, output_bytes=1.0)
                         for _ in range(count)], chain=True)


@settings(max_examples=150, deadline=None)
@given(st.lists(layer, min_size=1, max_size=6), prices, st.none() | prices)
def test_every_stage_of_a_chain_at_once(layers, dense, expert):
    """The chain's running maximum (one buffer) and the stage-by-stage path (two buffers, a DAG's downsets) against
    the event simulation of every stage."""
    passes, streams, sim, costs = _streams(layers, dense, expert)
    table = chain_stages(_arrays(len(layers)))
    size = len(layers) + 1
    for chain in (True, False):
        matrix = stage_exposed_s(replace(table, chain=chain), streams, passes, BUCKET)
        for a in range(size):
            for b in range(a + 1, size):
                assert matrix[a, b] == pytest.approx(exposed_backward_s(sim[a:b], costs, BUCKET), abs=1e-9), (a, b, chain)


def test_a_stack_that_lacks_the_overlap_refuses_it_in_one_line():
    for stack in ("megatron-lm", "megatron-deepspeed"):
        with pytest.raises(ValueError, match=f"stack '{stack}' cannot run dp_comm_overlap"):
            Cluster(dp_comm_overlap=True, plan_rules=PlanRules(stack=stack))
    assert STACKS["megatron-core"].structure(Cluster()).stack.dp_comm_overlap
    assert not any(STACKS[name].structure(Cluster()).stack.dp_comm_overlap for name in ("megatron-lm", "megatron-deepspeed"))
    assert "dp_comm_overlap" not in Cluster().to_dict()
    assert Cluster.from_dict(Cluster(dp_comm_overlap=True).to_dict()).stack.dp_comm_overlap
    with pytest.raises(ValueError, match="dp_comm_overlap must be True or False"):
        Cluster(dp_comm_overlap=1)
    assert math.isfinite(_closed([(np.array([1.0]), 1.0, 1.0)], np.array([1.0])))



@settings(max_examples=300, deadline=None)
@given(stage_layers, prices, st.none() | prices, st.integers(1, 6), st.integers(1, 4))
def test_the_floor_from_the_totals_never_exceeds_the_event_simulation(layers, dense, expert, stages, interleave):
    """:func:`exposed_floor_s` and :func:`interleaved_floor_s` (what the search's bounds charge, from a stage's totals
    alone: its chunks' ``v·⌈bytes/(v·bucket)⌉`` fixed parts per buffer and the bytes' part; the latter with the
    interleaved chunks' backlog) are at most what the simulated buckets leave exposed, for every split over layers,
    buffers, depth and interleave."""
    passes, streams, sim, costs = _streams(layers, dense, expert)
    v = interleave
    comm = sum(v * float(bucket_counts(x.sum(), v * BUCKET)) * f + b * x.sum() for x, f, b in streams)
    backward = exposed_backward_s(sim, costs, BUCKET, stages, interleave)
    forward = delayed_forward_s(sim, costs, BUCKET, stages, interleave)
    for floor in (float(exposed_floor_s(comm, passes.sum(), interleave)),
                  float(interleaved_floor_s(comm, passes.sum(), stages, interleave))):
        assert floor <= backward + 1e-9 and floor <= forward + 1e-9


def _stage_floor(comm_b, comm_f, backward_s, forward_s, stages, interleave):
    """A stage's exposure floor from its totals: each collective under its own pass (:func:`interleaved_floor_s`)."""
    return (sum(float(interleaved_floor_s(c, backward_s, stages, interleave)) for c in comm_b)
            + sum(float(interleaved_floor_s(c, forward_s, stages, interleave)) for c in comm_f))


stage_totals = st.tuples(st.floats(0.05, 3.0), st.floats(0.05, 3.0), st.floats(0.0, 8.0), st.floats(0.0, 8.0))


@settings(max_examples=300, deadline=None)
@given(st.lists(stage_totals, min_size=1, max_size=5), st.floats(0.0, 1.0), st.floats(0.25, 8.0), st.integers(1, 4),
       st.booleans(), st.floats(0.0, 2.0), st.floats(0.0, 0.5))
def test_the_pace_floor_bounds_every_plan_whose_slowest_stage_is_slower(stages, shrink, slots, interleave, zero1,
                                                                         extra, send):
    """:func:`pace_floor_s` (the bound of the DP on lower-bound layer times under the overlap) against plans built
    stage by stage: each stage's real forward and backward, its collectives under each (ZeRO-1: the reduce-scatter
    under the backward and the all-gather under the forward; ZeRO-0: one under the backward), its exposure the floor
    of its own totals, the slowest stage holding its passes and ``v`` sends (and some slack more); the floor takes
    only the stages' means and passes shrunk to lower bounds, and a pace no slower than the plan's."""
    p, v = len(stages), interleave
    forward = np.array([f for f, _, _, _ in stages])
    backward = np.array([b for _, b, _, _ in stages])
    under_b = np.array([c for _, _, c, _ in stages])
    under_f = np.array([c for _, _, _, c in stages]) if zero1 else np.zeros(p)
    slowest = float((forward + backward).max()) + v * send + extra
    sync = max(_stage_floor([cb], [cf] if zero1 else [], b, f, p, v)
               for f, b, cb, cf in zip(forward, backward, under_b, under_f))
    real = slots * slowest + sync
    pace = float((shrink * (forward + backward)).max()) + v * send
    curve = pace_floor_curve(v * send, [under_b.mean()], [under_f.mean()] if zero1 else [], shrink * backward.mean(),
                             shrink * forward.mean(), p, v)
    floor = float(pace_floor_s(slots, pace, curve)[0])
    assert floor <= real * (1 + 1e-12) + 1e-12


@settings(max_examples=40, deadline=None)
@given(st.floats(0.0, 8.0), st.floats(0.0, 8.0), st.floats(0.05, 2.0), st.floats(0.05, 2.0), st.floats(0.0, 6.0),
       st.floats(0.25, 8.0), st.integers(1, 6), st.integers(1, 4), st.booleans(), st.floats(0.0, 0.5))
def test_the_pace_floor_is_the_least_over_every_slowest_stage_and_split(comm_b, comm_f, backward_s, forward_s, pace,
                                                                        slots, stages, interleave, zero1, send):
    """:func:`pace_floor_s` is exactly its minimum, ``min_X slots·X + min_b Σ f(C, b) + Σ f(C, X − sends − b)``,
    against a fine grid of ``X`` and ``b``: never above the grid's least (it is a least, at a kink of a convex piecewise
    linear function) and within the grid's resolution of it."""
    parts_f = [comm_f] if zero1 else []
    curve = pace_floor_curve(send, [comm_b], parts_f, backward_s, forward_s, stages, interleave)
    floor = float(pace_floor_s(slots, pace, curve)[0])
    start = max(pace, backward_s + forward_s + send)
    xs = np.linspace(start, start + 2 * (comm_b + comm_f + backward_s + forward_s) + 1.0, 801)
    best = math.inf
    for x in xs:
        budget = x - send
        bs = np.linspace(backward_s, budget - forward_s, 801)
        values = interleaved_floor_s(comm_b, bs, stages, interleave) + sum(
            interleaved_floor_s(c, budget - bs, stages, interleave) for c in parts_f)
        best = min(best, slots * x + float(values.min()))
    step = xs[1] - xs[0]
    slope = slots + 2 * stages + 2  # h's and the inner sum's slopes are at most this
    assert floor <= best + 1e-9
    assert best - floor <= slope * 2 * step + 1e-9


def test_the_floor_is_what_many_buckets_leave():
    """A collective 4× its pass in 40 buckets leaves all of it less the pass, but the last bucket's share of the pass
    (3.025 s of 4 s under 1 s); the floor charges 3 s, at ``v = 2`` half of it; a pass longer than the collective: 0."""
    assert exposed_backward_s([(1.0, (160.0,))], [lambda x: x / 40], BUCKET) == pytest.approx(3.025)
    assert float(exposed_floor_s(4.0, 1.0)) == 3.0 and float(exposed_floor_s(4.0, 1.0, 2)) == 1.5
    assert float(exposed_floor_s(1.0, 4.0)) == 0.0


def test_evaluate_under_the_overlap_prunes_on_lower_bounds_and_finds_the_brute_force_answer():
    """evaluate's layer-level branch and bound prunes a variant when the DP on its lower-bound layers cannot win;
    under the overlap that DP prices the exposure at its floor (Settings.unbounded_overlap_cover), so it bounds, and
    the answer is the best of every variant evaluated alone (nothing to prune against)."""
    from phaze_env.evaluate import evaluate
    from phaze_env.hardware.accelerator import get_preset
    from phaze_env.tasks import tiny_workloads

    acc = get_preset("a100")
    tiny = tiny_workloads()["tiny-gpt2"]
    cluster = Cluster(n_devices=8, global_batch=16, link_bandwidth_Bps=2e9, dp_comm_overlap=True)
    overlapped = evaluate(tiny, acc, cluster, microbatch=(1, 2), tensor_widths=(1, 2), cache=False)
    assert overlapped.feasible and overlapped.bound_dp_calls > 0
    alone = [evaluate(tiny, acc, cluster, microbatch=(m,), tensor_widths=(t,), cache=False)
             for m in (1, 2) for t in (1, 2)]
    assert overlapped.throughput_samples_s == max(e.throughput_samples_s for e in alone)


def test_the_search_trades_an_exposed_sync_off_even_when_its_floor_is_zero():
    """The fastest partition of p = 2 (stage times 2.9375 s / 3 s) leaves 0.4 s exposed; a slightly slower one
    (2.875 / 3.0625 s) leaves 0.2 s, for 6.325 s in all against 6.4 s. The exposure's floor is 0 here (every pass is
    unbounded, Settings.unbounded_overlap_cover), which once made the search skip the walk down the sync and report
    6.4 s."""
    from phaze_env.placement.api import best_plan
    from phaze_env.placement.inputs import LayerCost, Settings
    from phaze_env.plan_spec import PlanSpec

    layers = [LayerCost(fwd_s=0.0, bwd_s=b, param_bytes=p, stash_bytes=0.0, output_bytes=0.0)
              for b, p in [(0.875, 2), (1, 0), (1, 0), (0.0625, 2), (1, 0), (1, 0), (1, 0)]]
    cluster = Cluster(n_devices=4, global_batch=2, link_bandwidth_Bps=10.0, dp_comm_overlap=True,
                      plan_rules=PlanRules(uniform_stages=False, zero_stages=(0, 1)))
    for unbounded in (False, True):
        settings_ = Settings(cluster, 1, 1, 50.0, PlanSpec(recompute="none", interleave=1, p=2, d=2, zero=1),
                             unbounded_overlap_cover=unbounded)
        plan = best_plan(layers, settings_)
        assert plan.time_per_batch_s == pytest.approx(6.325) and plan.stage_layers == ((0, 1, 2), (3, 4, 5, 6))


def test_megatron_core_buckets_grow_past_forty_replicas():
    """max(40M, 1M·dp) parameters per bucket (Megatron-Core's default), as bf16 bytes: 80 MB up to 40 replicas, 2.048 GB
    at 1,024; a 1.5B-parameter stage at 1,024 replicas has two buckets, the second ready only at the end of its
    backward, so the overlap hides at most the first."""
    from phaze_env.placement.dp_overlap import bucket_bytes

    assert float(bucket_bytes(8)) == 80e6 and float(bucket_bytes(40)) == 80e6 and float(bucket_bytes(1024)) == 2.048e9
    assert float(bucket_counts(3e9, bucket_bytes(1024))) == 2 and float(bucket_counts(3e9, bucket_bytes(8))) == 38
    one_layer = [(np.array([3e9]), 0.0, 1e-9)]  # 3 s of collectives in all, under a 10 s backward
    assert exposed_s(one_layer, np.array([10.0]), float(bucket_bytes(1024))) == pytest.approx(0.952)  # 0.952e9 bytes
    assert exposed_s(one_layer, np.array([10.0]), float(bucket_bytes(8))) == pytest.approx(0.04)  # the last 40M
