"""Property: the placement DP's time per batch never decreases when any layer gets slower.

This monotonicity is what makes ``phaze_env.evaluate.throughput_upper_bound`` an upper bound: it runs
the same exact placement DP on *lower bounds* of every layer's forward/backward latency (critical path
and core work, no ILP). Were a slower layer ever able to give a faster plan, the bound could fall below
the true throughput and the exact search would prune the optimum. Memory does not depend on latency,
so slowing layers down never changes whether a plan exists.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from phaze_env.placement import best_plan, best_plan_dag, best_plan_multi

REL = 1e-12  # float round-off of sums of the same terms in another order

layer = st.fixed_dictionaries({
    "fwd_s": st.floats(0.0, 2.0),
    "bwd_s": st.floats(0.01, 4.0),  # the DP refuses layers that take no time at all
    "param_bytes": st.integers(0, 50).map(float),
    "stash_bytes": st.integers(0, 40).map(float),
    "output_bytes": st.integers(0, 30).map(float),
})
# A slow-down of one layer: scale its forward and backward times and add to them (so a zero time can grow).
slowdown = st.tuples(st.one_of(st.just(1.0), st.floats(1.0, 4.0)), st.one_of(st.just(0.0), st.floats(0.0, 1.0)),
                     st.one_of(st.just(1.0), st.floats(1.0, 4.0)), st.one_of(st.just(0.0), st.floats(0.0, 1.0)))
system = st.fixed_dictionaries({
    "n_devices": st.integers(1, 16),
    "global_batch": st.integers(1, 16),
    "link_bandwidth_Bps": st.sampled_from([math.inf, 10.0, 100.0]),
    "link_latency_s": st.sampled_from([0.0, 0.01]),
    "allow_recompute": st.booleans(),
    "optimizer": st.sampled_from(["sgd", "adam"]),
})


def slower(layers: list[dict], slowdowns: list[tuple[float, float, float, float]]) -> list[dict]:
    """``layers`` with each one slowed down by its entry of ``slowdowns`` (missing entries: unchanged)."""
    out = []
    for i, base in enumerate(layers):
        fwd_scale, fwd_add, bwd_scale, bwd_add = slowdowns[i] if i < len(slowdowns) else (1.0, 0.0, 1.0, 0.0)
        out.append(base | {"fwd_s": base["fwd_s"] * fwd_scale + fwd_add, "bwd_s": base["bwd_s"] * bwd_scale + bwd_add})
    return out


def assert_not_faster(fast, slow) -> None:
    assert slow.feasible == fast.feasible, (fast.reason, slow.reason)
    if fast.feasible:
        assert slow.time_per_batch_s >= fast.time_per_batch_s * (1 - REL)
        assert slow.throughput_samples_s <= fast.throughput_samples_s * (1 + REL)


@settings(max_examples=150, deadline=None)
@given(st.lists(layer, min_size=1, max_size=8), st.lists(slowdown, max_size=8), system,
       st.sampled_from([1, 2]), st.integers(1, 4), st.integers(20, 400).map(float))
def test_chain_dp_never_gets_faster_when_layers_get_slower(layers, slowdowns, options, tensor_width, microbatch, hbm):
    fixed = dict(tensor_width=tensor_width, microbatch=microbatch, hbm_bytes=hbm, **options)
    assert_not_faster(best_plan(layers, **fixed), best_plan(slower(layers, slowdowns), **fixed))


DAGS = [
    (4, [(0, 1), (0, 2), (1, 3), (2, 3)]),  # diamond
    (5, [(0, 1), (2, 3), (1, 4), (3, 4)]),  # two branches joined at the end
]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(DAGS), st.lists(layer, min_size=5, max_size=5), st.lists(slowdown, max_size=5), system,
       st.integers(20, 400).map(float))
def test_dag_dp_never_gets_faster_when_layers_get_slower(dag, layers, slowdowns, options, hbm):
    count, edges = dag
    layers = layers[:count]
    fixed = dict(tensor_width=1, microbatch=1, hbm_bytes=hbm, **options)
    assert_not_faster(best_plan_dag(layers, edges, **fixed), best_plan_dag(slower(layers, slowdowns), edges, **fixed))


@settings(max_examples=40, deadline=None)
@given(st.lists(layer, min_size=1, max_size=6), st.lists(slowdown, max_size=6), system,
       st.lists(st.integers(20, 400).map(float), min_size=1, max_size=3))
def test_best_over_widths_microbatches_and_hbm_never_gets_faster(layers, slowdowns, options, capacities):
    """The bound's own entry point: the best plan over (tensor width, microbatch) variants and HBM sizes."""
    options = {k: v for k, v in options.items() if k != "allow_recompute"}

    def variants(chain: list[dict]) -> dict:
        # a width-t, microbatch-m variant: t-way split work and state, m-times the activations
        return {(t, m): [x | {"fwd_s": x["fwd_s"] * m / t, "bwd_s": x["bwd_s"] * m / t,
                              "param_bytes": x["param_bytes"] / t, "stash_bytes": x["stash_bytes"] * m / t}
                         for x in chain] for t in (1, 2) for m in (1, 2)}

    fast = best_plan_multi(variants(layers), hbm_bytes=capacities, **options)
    slow = best_plan_multi(variants(slower(layers, slowdowns)), hbm_bytes=capacities, **options)
    assert_not_faster(fast, slow)
