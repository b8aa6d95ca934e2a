"""The placement DP's shortcuts for speed are exact: each bound it prunes with is a bound, each shared table
equals what it stands for (the brute-force tests check the answers; these check the pieces directly, so a
shortcut that is wrong on some instance fails here even when the brute force's instances do not reach it)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from test_placement import records
from test_placement_combined import _instance

from phaze_env.cluster import Cluster
from phaze_env.placement import LayerCost, Settings
from phaze_env.placement.inputs import GRADIENT_FACTOR, layer_arrays
from phaze_env.placement.collectives import expert_collective_affine, expert_group
from phaze_env.placement.search import PlacementSearch, _Best
from phaze_env.placement.stages import chain_stages
from phaze_env.plan_spec import PlanSpec


def _searches(seed: int, **stack):
    """The placement searches of one random instance of the combined test (c, e ∈ {1, 2}, every ZeRO stage free), on
    its cluster with the ``stack`` fields changed."""
    variants, cluster, options = _instance(np.random.default_rng(seed))
    cluster = Cluster.from_dict(cluster.to_dict() | stack)
    for (c, e), layers in variants.items():
        if options["tensor_width"] * c > cluster.n_devices:
            continue
        plan = PlanSpec(recompute=options["recompute"], sequence_parallel=False, zero=None, c=None, e=None,
                        interleave=options["interleave"])
        settings = Settings(cluster, options["tensor_width"], options["microbatch"], options["hbm_bytes"], plan,
                            hbm_bandwidth_Bps=options["hbm_bandwidth_Bps"], context_parallel=c, expert_parallel=e)
        arrays = layer_arrays(records(layers))
        yield PlacementSearch(arrays, chain_stages(arrays), settings, max_stages=len(arrays))


def _slowest_stage_s(search: PlacementSearch, shape) -> float:
    """The shape's own min-max stage time (its DP with its memory, p2p and ZeRO traffic)."""
    costs, dp = search.costing.variant(shape)
    if shape.interleave == 1:
        return dp.min_stage_time(shape.microbatches, shape.stages)
    return dp.constrained(shape.stages, search._stage_values(shape, costs))[0]


def test_the_average_stage_bound_never_exceeds_a_shapes_slowest_stage():
    """Every ZeRO-2/3 shape of 40 random instances: ``_average_stage_s`` (what lets a shape be pruned before its own
    DP is built) is at most the slowest stage of its best partition."""
    checked = 0
    for seed in range(40):
        for search in _searches(seed):
            for shape, *_ in search._candidates():
                slowest_s = _slowest_stage_s(search, shape)
                if math.isfinite(slowest_s):
                    assert search._average_stage_s(shape) <= slowest_s * (1 + 1e-12), (seed, shape, slowest_s)
                    checked += shape.zero >= 2
    assert checked > 100, checked  # the instances reach many feasible ZeRO-2/3 shapes


def test_the_overlapped_sync_floors_kept_from_the_candidates_are_the_shape_by_shape_ones():
    """Under ``dp_comm_overlap`` the candidates' vectorised sync floors are kept for ``_bound_s``: each equals what it
    prices shape by shape (``_overlapped_sync_floor_s``), on 30 random instances."""
    checked = 0
    for seed in range(30):
        for search in _searches(seed, dp_comm_overlap=True):
            shapes = [shape for shape, *_ in search._candidates()]
            for shape in shapes:
                if search.prices.overlaps(shape.zero):
                    key = (shape.stages, shape.data_parallel, shape.zero, shape.interleave)
                    assert search._sync_floor[key] == pytest.approx(search._overlapped_sync_floor_s(shape), rel=1e-12, abs=0)
                    checked += 1
    assert checked > 100, checked


def test_the_average_stage_bound_is_reached_by_some_zero3_shape():
    """The bound is not vacuous: on some instance it exceeds the shared loosest DP's bound (it prunes)."""
    tighter = 0
    for seed in range(40):
        for search in _searches(seed):
            for shape, *_ in search._candidates():
                if shape.zero >= 2:
                    m_lo = 1 << (shape.microbatches.bit_length() - 1)
                    tighter += search._average_stage_s(shape) > search.loosest_dp.min_stage_time(m_lo, shape.stages)
    assert tighter


def test_the_zero_stage_loosest_dp_never_exceeds_a_shapes_slowest_stage():
    """Every ZeRO-1/2/3 shape (not DualPipe-paired) of 40 random instances: the loosest DP of its own ZeRO stage at
    ``m_lo`` (what prunes a shape before it gets a memory side of its own, ``_zero_prunes``) is at most the slowest
    stage of its best partition."""
    checked = 0
    for seed in range(40):
        for search in _searches(seed):
            for shape, *_ in search._candidates():
                if shape.zero == 0 or search.costing.paired(shape) is not None:
                    continue
                slowest_s = _slowest_stage_s(search, shape)
                if math.isfinite(slowest_s):
                    m_lo = 1 << (shape.microbatches.bit_length() - 1)
                    bound_s = search._zero_loosest_dp(shape.zero).min_stage_time(m_lo, shape.stages)
                    assert bound_s <= slowest_s * (1 + 1e-12), (seed, shape, bound_s, slowest_s)
                    checked += 1
    assert checked > 100, checked


def test_the_zero_stage_loosest_dp_is_tighter_than_the_shared_one_somewhere():
    """Not vacuous: on some instance the ZeRO stage's own loosest DP exceeds the shared loosest DP (it prunes)."""
    tighter = 0
    for seed in range(40):
        for search in _searches(seed):
            for shape, *_ in search._candidates():
                if shape.zero and search.costing.paired(shape) is None:
                    m_lo = 1 << (shape.microbatches.bit_length() - 1)
                    tighter += (search._zero_loosest_dp(shape.zero).min_stage_time(m_lo, shape.stages)
                                > search.loosest_dp.min_stage_time(m_lo, shape.stages))
    assert tighter


def _tying_instance(seed: int) -> PlacementSearch:
    """A search whose candidate plans tie often: identical layers on a flat cluster, every knob free."""
    rng = np.random.default_rng(seed)
    layer = LayerCost(fwd_s=1.0, bwd_s=2.0, param_bytes=float(rng.integers(1, 20)), stash_bytes=float(rng.integers(1, 9)),
                      output_bytes=float(rng.integers(0, 9)))
    cluster = Cluster(n_devices=int(rng.choice([4, 8])), global_batch=int(rng.choice([4, 8, 16])),
                      link_bandwidth_Bps=float(rng.choice([50.0, 1e6])), optimizer="adam")
    settings = Settings(cluster, 1, 1, float(rng.choice([60.0, 150.0, 1e4])), PlanSpec(interleave=None))
    arrays = layer_arrays([layer] * int(rng.integers(2, 7)))
    return PlacementSearch(arrays, chain_stages(arrays), settings, max_stages=len(arrays))


def test_equal_plans_are_broken_by_the_canonical_order_whatever_order_shapes_are_solved_in():
    """The search visits shapes by a tighter bound than the canonical order that breaks ties (``_Best``): solving every
    shape in a shuffled order keeps the plan the canonical order keeps (and so does the search), also among the ties
    these repeated-layer instances are full of."""
    tied = 0
    for seed in range(30):
        search = _tying_instance(seed)
        shapes = sorted((rank, shape) for shape, _, _, rank in search._candidates())
        optima = []
        for rank, shape in shapes:  # each shape alone: its own optimum
            alone = _Best()
            search._solve_shape(shape, alone)
            optima.append(alone.time_s)
        canonical, shuffled = _Best(), _Best()
        for rank, shape in shapes:  # the canonical order, no incumbent to prune: ties keep the first
            canonical.visiting = rank
            search._solve_shape(shape, canonical)
        for index in np.random.default_rng(seed).permutation(len(shapes)):
            shuffled.visiting, shape = shapes[index]
            search._solve_shape(shape, shuffled)
        assert (shuffled.time_s, shuffled.shape, shuffled.pairs) == (canonical.time_s, canonical.shape, canonical.pairs)
        found = _tying_instance(seed).run()
        if canonical.shape is None:
            assert not found.feasible
            continue
        assert (found.time_per_batch_s, found.data_parallel, found.pipeline_stages, found.zero, found.interleave) == (
            canonical.time_s, canonical.shape.data_parallel, canonical.shape.stages, canonical.shape.zero,
            canonical.shape.interleave)
        tied += optima.count(canonical.time_s) > 1
    assert tied >= 3, tied  # several instances have more than one shape reaching the optimum


@pytest.mark.parametrize("kind", ["allreduce", "allgather", "reducescatter"])
@pytest.mark.parametrize("t,c,e", [(1, 1, 2), (2, 1, 2), (1, 2, 2), (1, 1, 4), (2, 2, 1)])
def test_the_expert_collective_table_equals_the_collective(kind, t, c, e):
    """``fixed + per_byte · S`` from the shared table equals ``Cluster.collective_s`` over the expert replicas of
    every ``d`` on a two-level cluster (and a torus)."""
    clusters = [Cluster(n_devices=64, devices_per_node=4, node_bandwidth_Bps=300e9, node_latency_s=1e-6,
                        link_bandwidth_Bps=25e9, link_latency_s=5e-6),
                Cluster(n_devices=64, torus_dims=(4, 4, 4), link_bandwidth_Bps=50e9, link_latency_s=2e-6)]
    for cluster, size in itertools.product(clusters, (1.0, 3e6, 7.5e8)):
        table = expert_collective_affine(cluster, kind, t, c, e)
        fixed, per_byte = (part[::-1] for part in table.take(np.arange(cluster.n_devices // (t * c * e))[::-1]))
        for d in range(e, cluster.n_devices // (t * c) + 1, e):
            expected = cluster.network.collective_s(kind, size, **expert_group(t, c, e, d))
            assert math.isclose(fixed[d // e - 1] + per_byte[d // e - 1] * size, expected, rel_tol=1e-9, abs_tol=1e-18)


def test_the_zero_traffic_table_equals_each_layers_collectives():
    """The per-(d, layer) table of exposed ZeRO-2/3 traffic equals the model stated with ``Cluster.collective_s``:
    ZeRO-2 ``max(0, reduce-scatter − bwd)``, ZeRO-3 ``max(0, all-gather − fwd) + max(0, all-gather + reduce-scatter
    − bwd)``, dense bytes over the ``d·c`` ranks ``t`` apart, expert bytes over their own replicas (at ``e > 1``)."""
    checked = 0
    for seed in range(30):
        for search in _searches(seed):
            s, layers = search.settings, search.layers
            t, c, e = s.tensor_width, s.context_parallel, s.expert_parallel
            for d in range(e, s.n_devices // (t * c) + 1, e):
                for zero in (2, 3):
                    exposed = search.zero_traffic.layer_zero_comm_s(d, zero)
                    if d * c == 1:
                        assert exposed is None
                        continue
                    for k in range(len(layers)):
                        experts = float(layers.expert_param_bytes[k]) if e > 1 else 0.0
                        dense = float(layers.param_bytes[k]) - experts

                        def collective(kind: str, size_per_param: float) -> float:
                            network = s.cluster.network
                            return (network.collective_s(kind, dense * size_per_param, d * c, t)
                                    + network.collective_s(kind, experts * size_per_param, **expert_group(t, c, e, d)))

                        gather, scatter = collective("allgather", 1.0), collective("reducescatter", GRADIENT_FACTOR)
                        fwd, bwd = float(layers.fwd_s[k]), float(layers.bwd_s[k])
                        expected = (max(0.0, scatter - bwd) if zero == 2
                                    else max(0.0, gather - fwd) + max(0.0, gather + scatter - bwd))
                        assert math.isclose(exposed[k], expected, rel_tol=1e-9, abs_tol=1e-12), (seed, d, zero, k)
                        checked += expected > 0
    assert checked > 100, checked


def _repeated_blocks_search(pattern: list[dict], repeats: int, hbm_bytes: float) -> PlacementSearch:
    """A search on an embedding, ``repeats`` copies of ``pattern`` and a head (stages of equal size repeat), every
    ZeRO stage and recompute mode free, on 64 devices."""
    embedding = {"fwd_s": 0.1, "bwd_s": 0.2, "param_bytes": 7.0, "stash_bytes": 1.0, "output_bytes": 2.0}
    head = {"fwd_s": 0.3, "bwd_s": 0.5, "param_bytes": 9.0, "stash_bytes": 5.0, "output_bytes": 1.0}
    blocks = [block for _ in range(repeats) for block in pattern]
    layers = [LayerCost.from_dict(layer) for layer in [embedding, *blocks, head]]
    cluster = Cluster(n_devices=64, global_batch=64, link_bandwidth_Bps=100.0, optimizer="adam")
    settings = Settings(cluster, 1, 1, hbm_bytes, PlanSpec(recompute="auto", sequence_parallel=False, zero=None))
    arrays = layer_arrays(layers)
    return PlacementSearch(arrays, chain_stages(arrays), settings, max_stages=len(arrays))


@pytest.mark.parametrize("pattern", [
    [{"fwd_s": 1.0, "bwd_s": 2.0, "param_bytes": 4.0, "stash_bytes": 3.0, "attention_stash_bytes": 1.0,
      "attention_fwd_s": 0.25, "output_bytes": 2.0}],
    [{"fwd_s": 1.0, "bwd_s": 2.0, "param_bytes": 4.0, "stash_bytes": 3.0, "attention_stash_bytes": 1.0,
      "attention_fwd_s": 0.25, "output_bytes": 2.0},
     {"fwd_s": 0.5, "bwd_s": 1.0, "param_bytes": 6.0, "stash_bytes": 2.0, "attention_stash_bytes": 0.0,
      "attention_fwd_s": 0.0, "output_bytes": 2.0}],
    # stages of C+D and E+E differ only in their largest layer (the ZeRO-2/3 buffers)
    [{"fwd_s": 1.0, "bwd_s": 2.0, "param_bytes": params, "stash_bytes": 3.0, "output_bytes": 2.0}
     for params in (2.0, 8.0, 5.0, 5.0)],
])
@pytest.mark.parametrize("hbm_bytes", [60.0, 140.0, 400.0])
def test_grouped_memory_limits_equal_the_stage_by_stage_ones(pattern, hbm_bytes, monkeypatch):
    """A memory that prices each distinct combination of its stages' inputs once (a chain of repeated blocks has few)
    gives every stage, bit for bit, the limits, breakpoints and signature of one priced stage by stage; and the
    compact stage times equal the full matrices' entries."""
    from phaze_env.placement import stage_costs
    from phaze_env.placement.candidates import Shape

    memories = {}
    for group_after in (0, 10**9):  # grouped from the first memory on, or never
        monkeypatch.setattr(stage_costs, "_GROUP_AFTER", group_after)
        search = _repeated_blocks_search(pattern, 24 // len(pattern), hbm_bytes)
        memories[group_after] = [search.costing.memory_for(Shape(d, 2, 4, 1, zero))
                                 for zero, d in itertools.product((1, 2, 3), (2, 3, 8, 32))]
        if group_after == 0:  # the grouped side did group (fewer combinations than stages) for every buffer array
            groups = memories[0][0]._groups.values()
            assert len(groups) == 3 and all(inputs[-1] is not None for _, inputs in groups)
            costs, _ = search.costing.variant(Shape(8, 3, 4, 1, 2))
            for mode, times in zip(costs.modes, costs._times):
                assert np.array_equal(times, costs.memory.compact(costs.full_time[mode]))
    for grouped, plain in zip(memories[0], memories[10**9]):
        assert np.array_equal(np.array(grouped.limits).view(np.int64), np.array(plain.limits).view(np.int64))
        assert grouped.breakpoints == plain.breakpoints
        assert grouped.signature[1] == plain.signature[1]
