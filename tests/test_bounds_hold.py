"""Property: every lower bound on the time per batch holds, over random clusters of every network family.

The clusters: a flat ring, DGX-like nodes (two levels), 2-D and 3-D tori, several torus pods or switched slices
joined by a data-centre network, with or without Megatron's pipeline scatter/gather; tensor widths above 1 and
context × expert parallelism above 1. Two families of bounds:

* the system-space search's (:func:`phaze_env.placement.bounds.placement_time_bound_s`, also on
  :func:`search.bounds.bounding_cluster`): never above the placement DP's best time per batch for the plans it
  claims to bound (``v = 1``, ``c = 1``, ZeRO 0/1, any ``e``);
* the DP's own (:meth:`PlacementSearch._candidates`' bound per shape and :meth:`PlacementSearch._bound_s`): never
  above the exact optimum of the shape, and the pruned search (:meth:`PlacementSearch.run`) finds the best of the
  shapes' exact optima.

A bound above the true time would prune the optimum: the exact search would silently return a worse design.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from phaze_env.cluster import Cluster, get_cluster
from phaze_env.placement import LayerCost, Settings, best_plan
from phaze_env.placement.inputs import GRADIENT_FACTOR, layer_arrays
from phaze_env.placement.record import obviously_infeasible
from phaze_env.placement.search import PlacementSearch, _Best
from phaze_env.placement.stages import chain_stages
from phaze_env.plan_spec import PlanRules, PlanSpec
from phaze_env.placement.bounds import least_state_bytes, placement_time_bound_s
from phaze_env.placement.collectives import far_send_bounds, pipeline_send_s
from phaze_env.placement.rules import interleave_degrees
from search.bounds import bounding_cluster, far_sends

REL = 1e-9  # round-off of the same terms summed in another order


@st.composite
def clusters(draw, overlap: bool | None = None, **extra) -> Cluster:
    """A small cluster of one of the network families (every level's bandwidth and latency drawn); ``overlap``: its
    stack's ``dp_comm_overlap`` (None: drawn); ``extra``: more :class:`Cluster` fields."""
    kind = draw(st.sampled_from(["ring", "nodes", "torus", "pods", "node-slices"]))
    common = dict(global_batch=draw(st.sampled_from([1, 2, 5, 12, 48])), optimizer=draw(st.sampled_from(["sgd", "adam"])),
                  link_bandwidth_Bps=draw(st.sampled_from([10.0, 100.0, 1000.0])),
                  link_latency_s=draw(st.sampled_from([0.0, 0.01])), link_efficiency=draw(st.sampled_from([1.0, 0.8])),
                  pipeline_scatter_gather=draw(st.booleans()),  # data-parallel collectives hidden under the passes, or not
                  dp_comm_overlap=draw(st.booleans()) if overlap is None else overlap, **extra)
    dcn = dict(dcn_bandwidth_Bps=draw(st.sampled_from([5.0, 50.0, 5000.0])), dcn_latency_s=draw(st.sampled_from([0.0, 0.02])))
    if kind == "ring":
        return Cluster(n_devices=draw(st.integers(1, 12)), **common)
    if kind == "torus":
        dims = draw(st.sampled_from([(2, 2), (2, 4), (2, 2, 2), (2, 2, 4)]))
        return Cluster(n_devices=math.prod(dims), torus_dims=dims, **common)
    if kind == "pods":
        dims, slices = draw(st.sampled_from([(2, 2), (2, 2, 2)])), draw(st.sampled_from([2, 3]))
        return Cluster(n_devices=math.prod(dims) * slices, torus_dims=dims, slices=slices, **common, **dcn)
    per_node = draw(st.sampled_from([2, 4, 8] if kind == "nodes" else [2, 4]))
    nodes = draw(st.integers(1, 3))  # per slice
    slices = 1 if kind == "nodes" else 2
    node = dict(devices_per_node=per_node, node_bandwidth_Bps=draw(st.sampled_from([100.0, 1e4])),
                node_latency_s=draw(st.sampled_from([0.0, 0.001])), node_efficiency=draw(st.sampled_from([1.0, 0.8])))
    return Cluster(n_devices=per_node * nodes * slices, **node, **common,
                   **({} if slices == 1 else dict(slices=slices, **dcn)))


@st.composite
def chains(draw, experts: bool, most: int = 5) -> list[dict]:
    """2–``most`` layers (some with routed experts when ``experts``; the whole model's expert bytes, before ``÷ e``),
    light or heavy weights and boundary tensors, so that plans pipeline, replicate or both."""
    layers = []
    boundary = st.one_of(st.integers(0, 400), st.sampled_from([0, 1, 10]))
    weights = st.one_of(st.integers(0, 60), st.sampled_from([600, 6000]))
    for _ in range(draw(st.integers(2, most))):
        params, stash = float(draw(weights)), float(draw(st.integers(0, 30)))
        fwd = draw(st.floats(0.0, 2.0))
        layers.append({"fwd_s": fwd, "bwd_s": draw(st.floats(0.01, 4.0)), "param_bytes": params,
                       "expert_param_bytes": float(draw(st.integers(0, int(params)))) if experts else 0.0,
                       "stash_bytes": stash, "attention_stash_bytes": float(draw(st.integers(0, int(stash)))),
                       "attention_fwd_s": fwd * draw(st.floats(0.0, 1.0)),
                       "output_bytes": float(draw(boundary)), "input_bytes": float(draw(boundary))})
    return layers


def at_expert_parallel(layers: list[dict], e: int) -> list[LayerCost]:
    """A device's share at expert-parallel degree ``e``: ``1/e`` of each layer's routed experts (the placement's
    records of these dicts)."""
    return [LayerCost.from_dict(layer | {"param_bytes": layer["param_bytes"] - layer["expert_param_bytes"] * (1 - 1 / e),
                                         "expert_param_bytes": layer["expert_param_bytes"] / e}) for layer in layers]


def boundary_bytes(layers: list[dict]) -> float:
    """The smallest tensor that can cross a stage boundary (as :mod:`search.bounds` takes it)."""
    return min([layer["output_bytes"] for layer in layers[:-1]] + [layer["input_bytes"] for layer in layers[1:]])


def system_bound_s(layers: list[dict], cluster: Cluster, t: int, m: int, e: int, interleaves: tuple[int, ...] = (1,),
                   of: Cluster | None = None, hbm_bytes: float | None = None, plan: PlanSpec | None = None) -> float:
    """:func:`placement_time_bound_s` of ``layers`` (whole-model expert bytes) as the search calls it: each layer's
    forward + backward, the gradients, the smallest boundary tensor (``interleaves``: the ``v`` the plan may use, each
    layer a transformer layer). ``of``: the cluster that ``cluster`` (its :func:`bounding_cluster`) stands for, whose
    pods' data-centre level the search passes as a bounding group's (:func:`search.bounds.pod_levels`). ``hbm_bytes``
    (with the DP's ``plan``): the device memory, whose fewest stages the search's groups pass
    (:func:`least_state_bytes`)."""
    layer_s = np.array([[layer["fwd_s"] + layer["bwd_s"]] for layer in layers])
    gradient = GRADIENT_FACTOR * sum(layer["param_bytes"] for layer in layers)
    expert_gradient = GRADIENT_FACTOR * sum(layer["expert_param_bytes"] for layer in layers)
    boundary = boundary_bytes(layers)
    network = None if of is None else of.network
    pods = ((network.slice_devices, (network.levels[-1],)),) if network and network.torus_dims and network.slices > 1 \
        else ()
    return float(placement_time_bound_s(layer_s, np.ones(len(layers), dtype=np.int64), gradient, boundary, t, m, cluster,
                                        expert_parallel=e, expert_gradient_bytes=expert_gradient,
                                        interleaves=interleaves, total_layers=len(layers),
                                        layer_param_bytes=[layer["param_bytes"] for layer in layers],
                                        layer_expert_param_bytes=[layer["expert_param_bytes"] for layer in layers],
                                        far_sends=far_sends(pods, cluster, boundary, t),
                                        **memory_floor(layers, cluster, t, m, e, hbm_bytes, plan))[0])


def memory_floor(layers: list[dict], cluster: Cluster, t: int, m: int, e: int, hbm_bytes: float | None,
                 plan: PlanSpec | None) -> dict:
    """:func:`placement_time_bound_s`'s memory arguments as :func:`search.bounds.variant_throughput_bounds` builds
    them (none without ``hbm_bytes``)."""
    if hbm_bytes is None:
        return {}
    settings = Settings(cluster, t, m, 1.0, plan or PlanSpec(), expert_parallel=e)
    return {"state_bytes": least_state_bytes(settings, np.ones(len(layers)), [layer["param_bytes"] for layer in layers],
                                             [layer["expert_param_bytes"] for layer in layers]),
            "device_memory": np.array([hbm_bytes])}


def hbm_for(layers: list[dict], share: float) -> float:
    """HBM of ``share`` × (8 bytes per weight byte + 200): below 1 the whole model rarely fits one device, so the
    DP pipelines."""
    return share * (8 * sum(layer["param_bytes"] for layer in layers) + 200)


def assert_system_bound_holds(layers, cluster, t, m, e, zero, hbm_bytes, step_Bps, bounding):
    plan = PlanSpec(interleave=1, c=1, e=e, zero=zero)
    found = best_plan(at_expert_parallel(layers, e), Settings(cluster, t, m, hbm_bytes, plan, expert_parallel=e,
                                                              hbm_bandwidth_Bps=step_Bps))
    bound_s = system_bound_s(layers, bounding_cluster(cluster) if bounding else cluster, t, m, e,
                             of=cluster if bounding else None, hbm_bytes=hbm_bytes, plan=plan)
    if found.feasible:
        assert bound_s <= found.time_per_batch_s * (1 + REL), (found.notation, bound_s, found.time_per_batch_s)


SLOW_LAYER = {"fwd_s": 0.0, "bwd_s": 1.0, "param_bytes": 0.0, "expert_param_bytes": 0.0, "stash_bytes": 0.0,
              "attention_stash_bytes": 0.0, "attention_fwd_s": 0.0, "output_bytes": 0.0, "input_bytes": 0.0}


@settings(max_examples=400, deadline=None)
@given(chains(experts=True), clusters(), st.sampled_from([1, 2, 4]), st.integers(1, 3), st.sampled_from([1, 2]),
       st.sampled_from([0, 1]), st.sampled_from([0.2, 0.4, 0.7, 1.0, 4.0, 20.0]), st.sampled_from([None, 100.0]), st.booleans())
@example(layers=[SLOW_LAYER | {"param_bytes": 2.0}] + [SLOW_LAYER] * 3,  # found by this test: 4.33 s bound > 4.29 s
         cluster=Cluster(n_devices=8, torus_dims=(2, 2), slices=2, link_bandwidth_Bps=10.0, dcn_bandwidth_Bps=5.0,
                         dcn_latency_s=0.02, global_batch=5, pipeline_scatter_gather=False),
         t=1, m=1, e=1, zero=0, hbm_share=4.0, step_Bps=None, bounding=False)
def test_system_space_bound_never_exceeds_the_dp_time(layers, cluster, t, m, e, zero, hbm_share, step_Bps, bounding):
    """The search's placement bound on the cluster itself, and on its bounding cluster (the system space's: a
    torus or several pods as one flat ring), is at most the DP's best time over the plans it bounds."""
    bounding = bounding and bool(cluster.network.torus_dims)  # the system space bounds tori only through bounding_cluster
    assert_system_bound_holds(layers, cluster, t, m, e, zero, hbm_for(layers, hbm_share), step_Bps, bounding)


@settings(max_examples=300, deadline=None)
@given(chains(experts=True), clusters(folded_experts=True), st.sampled_from([1, 2, 4]), st.integers(1, 3),
       st.sampled_from([1, 2]), st.sampled_from([0, 1]), st.sampled_from([0.2, 0.4, 0.7, 1.0, 4.0, 20.0]),
       st.sampled_from([None, 100.0]), st.booleans())
def test_system_space_bound_holds_on_a_folded_expert_grid(layers, cluster, t, m, e, zero, hbm_share, step_Bps,
                                                            bounding):
    """The same on a stack whose expert grid is folded over the t·d ranks (``Stack.folded_experts``: e | t·d, the
    expert shards synced over the t·d/e ranks e apart): the bound takes the d the folded grid fits."""
    bounding = bounding and bool(cluster.network.torus_dims)
    assert_system_bound_holds(layers, cluster, t, m, e, zero, hbm_for(layers, hbm_share), step_Bps, bounding)


@settings(max_examples=400, deadline=None)
@given(st.data(), clusters(overlap=True, plan_rules=PlanRules(zero_stages=(0, 1))), st.sampled_from([1, 2]),
       st.integers(1, 3), st.sampled_from([1, 2]), st.sampled_from([0, 1]), st.sampled_from([None, 1]),
       st.sampled_from([0.2, 0.7, 4.0, 20.0]), st.sampled_from([None, 100.0]), st.booleans())
def test_overlapped_bound_never_exceeds_the_dp_time(data, cluster, t, m, e, zero, interleave, hbm_share, step_Bps,
                                                    bounding):
    """With the data-parallel collectives overlapped (``Stack.dp_comm_overlap``) the bound is the pipeline plus what
    one microbatch's passes cannot hide (:func:`placement_time_bound_s`): never above the DP's best time, on every
    network family (and its bounding cluster), at ``t > 1``, ``e > 1``, ZeRO 0 and 1, buckets of several layers' bytes
    (heavy layers: several buckets each, their fixed parts), interleaved or not."""
    layers = data.draw(chains(experts=True, most=8))
    bounding = bounding and bool(cluster.network.torus_dims)
    plan = PlanSpec(interleave=interleave, c=1, e=e, zero=zero, sequence_parallel=False)
    found = best_plan(at_expert_parallel(layers, e), Settings(cluster, t, m, hbm_for(layers, hbm_share), plan,
                                                              expert_parallel=e, hbm_bandwidth_Bps=step_Bps))
    interleaves = tuple(interleave_degrees(len(layers), interleave, True))
    bound_s = system_bound_s(layers, bounding_cluster(cluster) if bounding else cluster, t, m, e, interleaves,
                             of=cluster if bounding else None, hbm_bytes=hbm_for(layers, hbm_share), plan=plan)
    if found.feasible:
        assert bound_s <= found.time_per_batch_s * (1 + REL), (found.notation, bound_s, found.time_per_batch_s)


def test_overlapped_bound_counts_what_the_passes_cannot_hide():
    """Plain data parallelism of 4 equal layers on 8 ring-connected devices, 4 microbatches per replica, collectives
    3.5× a microbatch's passes: the DP's best plan pays the pipeline and most of the collectives; the bound is the
    pipeline plus the collectives less one microbatch's passes — within 5 % of the DP — where the larger of the two
    alone (the bound before) is 39 % below."""
    layer = {"fwd_s": 0.25, "bwd_s": 0.5, "param_bytes": 4.5e8, "expert_param_bytes": 0.0, "stash_bytes": 0.0,
             "output_bytes": 1e12, "input_bytes": 1e12}  # boundary tensors too large to pipeline
    layers = [layer] * 4
    cluster = Cluster(n_devices=8, global_batch=32, link_bandwidth_Bps=3e8, dp_comm_overlap=True,
                      plan_rules=PlanRules(zero_stages=(0, 1)))
    found = best_plan(at_expert_parallel(layers, 1), Settings(cluster, 1, 1, 1e15, PlanSpec(interleave=1, c=1, e=1, zero=1)))
    assert (found.pipeline_stages, found.data_parallel, found.microbatches_per_replica) == (1, 8, 4)
    bound_s = system_bound_s(layers, cluster, 1, 1, 1)
    work_s, collectives_s = 4 * 0.75, 2 * 7 / 8 * 4 * 4.5e8 / 3e8  # a microbatch's passes; reduce-scatter + all-gather
    assert collectives_s == pytest.approx(3.5 * work_s)
    assert bound_s == pytest.approx(4 * work_s + collectives_s - work_s)
    assert found.time_per_batch_s * 0.95 <= bound_s <= found.time_per_batch_s
    assert max(4 * work_s, collectives_s) < 0.62 * found.time_per_batch_s


def test_the_memory_floor_removes_the_depths_the_model_does_not_fit():
    """Four equal layers whose weights and gradients fill 2.5 devices' memory on 8 devices: no plan of fewer than 3
    stages fits, so the bound with the memory floor (:func:`least_state_bytes`, what a system space's groups pass) takes
    the 4-stage pipeline's bubble — above the bound without it (an unpipelined 8-way replica), and still at most the
    DP's time."""
    layer = {"fwd_s": 0.5, "bwd_s": 1.0, "param_bytes": 1e9, "expert_param_bytes": 0.0, "stash_bytes": 0.0,
             "attention_stash_bytes": 0.0, "attention_fwd_s": 0.0, "output_bytes": 1e3, "input_bytes": 1e3}
    layers = [layer] * 4
    cluster = Cluster(n_devices=8, global_batch=8, link_bandwidth_Bps=1e12)
    plan = PlanSpec(interleave=1, c=1, e=1, zero=0)
    settings = Settings(cluster, 1, 1, 1.0, plan)
    state = least_state_bytes(settings, np.ones(4), [1e9] * 4, [0.0] * 4)
    assert state == pytest.approx(4e9 * settings.state_factor(8, 0))
    hbm_bytes = state / 2.5
    found = best_plan(at_expert_parallel(layers, 1), Settings(cluster, 1, 1, hbm_bytes, plan))
    assert found.feasible and found.pipeline_stages >= 3
    loose_s = system_bound_s(layers, cluster, 1, 1, 1)
    floor_s = system_bound_s(layers, cluster, 1, 1, 1, hbm_bytes=hbm_bytes, plan=plan)
    assert loose_s < 0.8 * floor_s and floor_s <= found.time_per_batch_s * (1 + REL)


def test_pipeline_send_bound_on_a_tpuv4_pod_at_t2():
    """A TPUv4 pod slice of 4 chips at t = 2 where both the DP and the bound pipeline (p = 2, d = 1: a replica of
    1e12 weight bytes is too slow to all-reduce) and a send takes a third of a stage: Megatron's scatter/gather sends
    ``1/t`` of each message over one ICI link and all-gathers it on the ring (``S/2B + S/4B``, ¾ of a whole send), so
    a bound charging the whole payload per send (``S/B``) would claim more than the DP's time."""
    cluster = get_cluster("tpuv4-pod", 4, global_batch=16)
    assert cluster.stack.pipeline_scatter_gather and len(cluster.network.levels) > 1
    # bytes crossing the stage boundary: 0.4 s whole, 0.3 s scattered
    payload = 0.4 * cluster.network.levels[0].p2p_bandwidth_Bps
    layers = [{"fwd_s": 0.5, "bwd_s": 0.5, "param_bytes": 1e12, "expert_param_bytes": 0.0, "stash_bytes": 0.0,
               "output_bytes": payload, "input_bytes": payload} for _ in range(2)]
    found = best_plan(at_expert_parallel(layers, 1), Settings(cluster, 2, 1, 1e15, PlanSpec(interleave=1, c=1, e=1, zero=0)))
    assert (found.pipeline_stages, found.data_parallel) == (2, 1)
    assert system_bound_s(layers, cluster, 2, 1, 1) <= found.time_per_batch_s * (1 + REL)


def test_no_placement_at_an_expert_degree_bounds_nothing():
    """``e = 16`` at ``t = 2`` on 16 devices leaves no ``d`` that ``e`` divides: no placement, an infinite time (the
    throughput bound 0 for that degree), not an error."""
    layers = [SLOW_LAYER | {"param_bytes": 8.0, "expert_param_bytes": 4.0, "output_bytes": 1.0}] * 2
    assert system_bound_s(layers, Cluster(n_devices=16, global_batch=8), 2, 1, 16) == math.inf


def solve_every_shape(search: PlacementSearch) -> float:
    """Each candidate shape's exact optimum (no incumbent to prune against) is at least the bounds the search
    prunes it with; returns the best of them."""
    best_s = math.inf
    for shape, bound_s, _, _ in search._candidates():
        exact = _Best()
        search._solve_shape(shape, exact)
        assert bound_s <= exact.time_s * (1 + REL), (shape, bound_s, exact.time_s)
        assert search._bound_s(shape, 0.0) <= exact.time_s * (1 + REL), shape
        best_s = min(best_s, exact.time_s)
    return best_s


@settings(max_examples=500, deadline=None)
@given(chains(experts=True), clusters(), st.sampled_from([1, 2]), st.sampled_from([(1, 2), (2, 1), (2, 2)]),
       st.integers(1, 2), st.sampled_from([None, 0, 1, 2, 3]), st.sampled_from([1, None]),
       st.sampled_from([0.2, 0.4, 0.7, 1.0, 4.0, 20.0]), st.sampled_from([None, 100.0]), st.sampled_from(["none", "auto"]))
@example(layers=[{"fwd_s": 1e-3, "bwd_s": 1e-3, "param_bytes": 40.0, "expert_param_bytes": 20.0, "stash_bytes": 4.0,
                  "attention_stash_bytes": 0.0, "attention_fwd_s": 0.0, "output_bytes": 300.0, "input_bytes": 300.0}] * 4,
         cluster=get_cluster("dgx-a100", 16, global_batch=8), t=2, ce=(2, 2), m=1, zero=None, interleave=None,
         hbm_share=0.4, step_Bps=100.0, recompute="auto")
@example(layers=[{"fwd_s": 1e-3, "bwd_s": 1e-3, "param_bytes": 40.0, "expert_param_bytes": 20.0, "stash_bytes": 4.0,
                  "attention_stash_bytes": 0.0, "attention_fwd_s": 0.0, "output_bytes": 300.0, "input_bytes": 300.0}] * 4,
         cluster=Cluster(n_devices=4, global_batch=8, link_bandwidth_Bps=100.0), t=1, ce=(1, 2), m=1, zero=None,
         interleave=None, hbm_share=20.0, step_Bps=None, recompute="none")  # interleaved shapes paying v slow sends
def test_dp_bounds_never_exceed_a_shapes_optimum(layers, cluster, t, ce, m, zero, interleave, hbm_share, step_Bps,
                                                 recompute):
    """At t > 1 and c·e > 1 on every network family: the DP's shape bounds hold, and the pruned search returns the
    best exact shape optimum."""
    c, e = ce
    plan = PlanSpec(interleave=interleave, c=c, e=e, zero=zero, recompute=recompute)
    settings_ = Settings(cluster, t, m, hbm_for(layers, hbm_share), plan, context_parallel=c, expert_parallel=e,
                         hbm_bandwidth_Bps=step_Bps)
    arrays = layer_arrays(at_expert_parallel(layers, e))
    search = PlacementSearch(arrays, chain_stages(arrays), settings_, max_stages=len(layers))
    if obviously_infeasible(settings_, arrays, search.max_stages, search.costing.loosest_state):
        return
    best_s = solve_every_shape(search)
    found = search.run()
    if math.isinf(best_s):
        assert not found.feasible
    else:
        assert math.isclose(found.time_per_batch_s, best_s, rel_tol=REL), (found.notation, best_s)


@settings(max_examples=300, deadline=None)
@given(chains(experts=False), st.integers(2, 16), st.integers(1, 16), st.sampled_from([10.0, 100.0, 1000.0]),
       st.sampled_from([0.0, 0.01]), st.integers(1, 2), st.sampled_from([None, 0, 1]), st.sampled_from([1, None]),
       st.sampled_from([0.4, 1.0, 4.0, 20.0]), st.sampled_from(["none", "auto"]))
def test_dp_bounds_hold_on_lower_bound_layers_under_the_overlap(layers, devices, batch, link_Bps, latency_s, m, zero,
                                                                 interleave, hbm_share, recompute):
    """Under ``Stack.dp_comm_overlap`` at the unbounded cover (the DP on lower-bound layer times: the exposure's floor
    and the pace's, :meth:`Prices.overlap_pace_floor_s`): every shape's sorted bound, its own floor and
    ``_bound_s`` are at most its exact optimum, and the pruned search returns the best of them."""
    cluster = Cluster(n_devices=devices, global_batch=batch, link_bandwidth_Bps=link_Bps, link_latency_s=latency_s,
                      dp_comm_overlap=True, plan_rules=PlanRules(zero_stages=(0, 1)))
    plan = PlanSpec(interleave=interleave, zero=zero, recompute=recompute)
    settings_ = Settings(cluster, 1, m, hbm_for(layers, hbm_share), plan, unbounded_overlap_cover=True)
    arrays = layer_arrays([LayerCost.from_dict(layer) for layer in layers])
    search = PlacementSearch(arrays, chain_stages(arrays), settings_, max_stages=len(layers))
    if obviously_infeasible(settings_, arrays, search.max_stages, search.costing.loosest_state):
        return
    best_s = math.inf
    for shape, bound_s, floor_s, _ in search._candidates():
        exact = _Best()
        search._solve_shape(shape, exact)
        assert bound_s <= floor_s, shape
        assert floor_s <= exact.time_s * (1 + REL), (shape, floor_s, exact.time_s)
        assert search._bound_s(shape, 0.0) <= exact.time_s * (1 + REL), shape
        best_s = min(best_s, exact.time_s)
    found = search.run()
    if math.isinf(best_s):
        assert not found.feasible
    else:
        assert math.isclose(found.time_per_batch_s, best_s, rel_tol=REL), (found.notation, best_s)


def test_a_pipeline_inside_a_node_is_bounded_at_the_node_send():
    """Two heavy layers on two 4-chip nodes (fast inside a node, 1,000× slower between them), 2 samples: the DP's best
    pipelines the two layers over 2 stages × 2 replicas, whose sends stay inside a node (span ``(p − 1)·t·d = 2 < 4``).
    The bound prices those sends at the node's rate and equals the DP's time; one that took them across the nodes
    (its span rule off by a factor of 2) would exceed it."""
    layer = {"fwd_s": 0.5, "bwd_s": 0.5, "param_bytes": 1e4, "expert_param_bytes": 0.0, "stash_bytes": 0.0,
             "output_bytes": 1000.0, "input_bytes": 1000.0}
    cluster = Cluster(n_devices=8, devices_per_node=4, node_bandwidth_Bps=1e4, link_bandwidth_Bps=10.0, global_batch=2)
    found = best_plan(at_expert_parallel([layer] * 2, 1),
                      Settings(cluster, 1, 1, 1e9, PlanSpec(interleave=1, c=1, e=1, zero=0)))
    assert (found.pipeline_stages, found.data_parallel) == (2, 2)
    assert system_bound_s([layer] * 2, cluster, 1, 1, 1) == pytest.approx(found.time_per_batch_s, rel=1e-9)


@settings(max_examples=300, deadline=None)
@given(clusters(), st.integers(1, 40), st.integers(1, 12), st.sampled_from([1, 2, 4]), st.sampled_from([1.0, 1e3, 1e6]))
def test_far_send_bounds_hold_at_the_dp_level(cluster, stride, hops, t, payload):
    """:func:`far_send_bounds` against the DP's own level (:meth:`Network.p2p_level`, the outermost the sends cross):
    a pipeline whose span ``hops·stride`` reaches a pair's span sends at least the pair's time; one whose span stays
    inside the innermost level crosses only it (so the first pair's span is the least that may cross further)."""
    network = cluster.network
    if hops * stride >= network.n_devices:
        return  # no such pipeline on this cluster
    sent_s = pipeline_send_s(cluster, network.p2p_level(stride, hops), payload, t)
    for span, send_s in far_send_bounds(cluster, payload, t):
        if hops * stride >= span:
            assert sent_s >= send_s * (1 - REL), (span, stride, hops)
    if len(network.levels) > 1 and hops * stride < network.levels[0].size:
        assert network.p2p_level(stride, hops) == network.levels[0]
