"""Data-parallel collectives overlapped with the passes (``Stack.dp_comm_overlap``, the megatron-core profile): the
closed form of :mod:`phaze_env.placement.dp_overlap` against an event simulation of buckets on one link
(``dp_overlap_oracle``), per stage and for every stage of a table at once; the knob refused where the stack lacks it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_overlap_oracle import delayed_forward_s, exposed_backward_s
from hypothesis import given, settings
from hypothesis import strategies as st

from phaze_env.cluster import Cluster
from phaze_env.placement.dp_overlap import exposed_floor_s, exposed_s, interleaved_exposed_s, stage_exposed_s
from phaze_env.plan_spec import PlanRules
from phaze_env.stacks import STACKS

layer = st.tuples(st.floats(0.0, 5.0), st.floats(0.0, 5.0), st.integers(0, 4)).map(
    lambda x: (x[0] if x[2] else 0.0, x[1], x[2]))  # a layer without weights has no bucket and no collective
stage_layers = st.lists(layer, min_size=1, max_size=6)


def _closed(layers, stages=1, interleave=1):
    comm, cover, buckets = (np.array(x, dtype=float) for x in zip(*layers))
    one = exposed_s(comm, cover, buckets)
    return float(interleaved_exposed_s(one, comm.sum(), cover.sum(), stages, interleave))


@settings(max_examples=300, deadline=None)
@given(stage_layers)
def test_closed_form_matches_the_event_simulation_backward_and_forward(layers):
    assert _closed(layers) == pytest.approx(exposed_backward_s(layers), abs=1e-9)
    assert _closed(layers) == pytest.approx(delayed_forward_s(layers), abs=1e-9)


@settings(max_examples=300, deadline=None)
@given(stage_layers, st.integers(1, 6), st.integers(2, 4))
def test_interleaved_closed_form_matches_the_event_simulation(layers, stages, interleave):
    assert _closed(layers, stages, interleave) == pytest.approx(exposed_backward_s(layers, stages, interleave), abs=1e-9)
    assert _closed(layers, stages, interleave) == pytest.approx(delayed_forward_s(layers, stages, interleave), abs=1e-9)


def test_what_the_schedule_cannot_hide_is_exposed():
    """The last bucket's collective at least; all of it less the whole backward pass at least; nothing hides it
    without a pass to hide under."""
    layers = [(1.0, 3.0, 2), (1.0, 3.0, 2)]
    assert exposed_backward_s(layers) == pytest.approx(0.5)  # the first layer's last bucket
    assert _closed(layers) == pytest.approx(0.5)
    heavy = [(4.0, 1.0, 1), (4.0, 1.0, 1)]
    assert _closed(heavy) == pytest.approx(8.0 - 1.0)
    assert _closed([(2.0, 0.0, 3)]) == pytest.approx(2.0)
    assert _closed([(0.0, 2.0, 0)]) == 0.0


@settings(max_examples=100, deadline=None)
@given(st.lists(layer, min_size=1, max_size=6))
def test_every_stage_of_a_chain_at_once(layers):
    comm, cover, buckets = (np.array(x, dtype=float) for x in zip(*layers))
    size = len(layers) + 1
    member = np.tril(np.ones((size, len(layers)), dtype=bool), -1)  # downset x = the first x layers
    valid = np.triu(np.ones((size, size), dtype=bool), 1)
    for chain in (True, False):  # the chain's running maximum and the general downset path
        matrix = stage_exposed_s(member, valid, comm, cover, buckets, chain)
        for a in range(size):
            for b in range(a + 1, size):
                assert matrix[a, b] == pytest.approx(exposed_backward_s(layers[a:b]), abs=1e-9), (a, b, chain)


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
    assert math.isfinite(_closed([(1.0, 1.0, 1)]))



@settings(max_examples=300, deadline=None)
@given(stage_layers, st.integers(1, 6), st.integers(1, 4))
def test_the_floor_from_the_totals_never_exceeds_the_event_simulation(layers, stages, interleave):
    """:func:`exposed_floor_s` (what the search's bounds charge, from a stage's totals alone) is at most what the
    simulated buckets leave exposed, for every split over layers, bucket count, depth and interleave."""
    comm, cover = (sum(x) for x in list(zip(*layers))[:2])
    floor = float(exposed_floor_s(comm, cover, interleave))
    assert floor <= exposed_backward_s(layers, stages, interleave) + 1e-9
    assert floor <= delayed_forward_s(layers, stages, interleave) + 1e-9


def test_the_floor_is_what_many_buckets_leave():
    """A collective 4× its pass in 40 buckets leaves all of it less the pass, but the last bucket's share of the pass
    (3.025 s of 4 s under 1 s); the floor charges 3 s, at ``v = 2`` half of it; a pass longer than the collective: 0."""
    assert exposed_backward_s([(4.0, 1.0, 40)]) == pytest.approx(3.025)
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
