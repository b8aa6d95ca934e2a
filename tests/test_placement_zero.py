"""ZeRO stages 0–3 in the placement DP: brute force on tiny chains, the ZeRO paper's memory table, the CLI."""

from __future__ import annotations

import contextlib
import io
import json
import math
from dataclasses import replace

import numpy as np
import pytest
from collective_oracle import allgather_s, allreduce_s, hierarchical_s
from test_placement import (_check_against, _settings, best_plan, best_plan_dag, brute_force_chain, brute_force_dag,
                            records)
from tiny import TINY

from phaze_env import placement
from phaze_env.cluster import get_cluster
from phaze_env.plan_spec import PlanSpec

ZERO_CHOICES = (None, 0, 1, 2, 3)


def _random_instance(rng: np.random.Generator) -> tuple[list[dict], dict]:
    """A chain of 1–4 layers and options where ZeRO's memory and traffic both matter (a slow link, tight HBM)."""
    layers = []
    for _ in range(int(rng.integers(1, 5))):
        stash = float(rng.integers(0, 30))
        attention = float(rng.integers(0, int(stash) + 1))
        fwd = float(rng.uniform(0.0, 2.0))
        layers.append({"fwd_s": fwd, "bwd_s": float(rng.uniform(0.01, 4.0)), "param_bytes": float(rng.integers(0, 60)),
                       "stash_bytes": stash, "attention_stash_bytes": attention,
                       "attention_fwd_s": fwd * float(rng.uniform(0.0, 1.0)), "output_bytes": float(rng.integers(0, 30))})
    options = {
        "n_devices": int(rng.integers(1, 9)),
        "tensor_width": int(rng.choice([1, 2])),
        "global_batch": int(rng.integers(1, 13)),
        "microbatch": int(rng.integers(1, 4)),
        "hbm_bytes": float(rng.integers(20, 500)),
        "link_bandwidth_Bps": float(rng.choice([math.inf, 10.0, 30.0, 100.0])),
        "link_latency_s": float(rng.choice([0.0, 0.01])),
        "optimizer": str(rng.choice(["sgd", "adam"])),
        "recompute": str(rng.choice(["none", "full", "auto"])),
        "zero": ZERO_CHOICES[int(rng.integers(len(ZERO_CHOICES)))],
        "interleave": [1, 2, None][int(rng.integers(3))],
        "hbm_bandwidth_Bps": [None, 50.0][int(rng.integers(2))],
    }
    return layers, options


def test_every_zero_stage_matches_brute_force_on_random_chains():
    """300 seeded instances (every ZeRO choice ~60 times): the DP's best time and feasibility equal the
    brute force over every (d, p, v, ZeRO stage, partition, recompute modes)."""
    rng = np.random.default_rng(2024)
    chosen = {stage: 0 for stage in range(4)}
    for _ in range(300):
        layers, options = _random_instance(rng)
        plan = best_plan(layers, **options)
        _check_against(brute_force_chain(layers, **options), plan)
        if plan.feasible:
            spec = PlanSpec.parse(plan.notation)
            assert spec.zero == plan.zero and (plan.zero == 0 or plan.data_parallel > 1)
            assert options["zero"] is None or plan.zero in (options["zero"], 0)
            assert math.isclose(sum(plan.time_breakdown_s.values()), plan.time_per_batch_s, rel_tol=1e-9)
            assert math.isclose(sum(v for k, v in plan.memory_bytes.items() if k != "total"), plan.memory_bytes["total"])
            chosen[plan.zero] += 1
    assert all(chosen.values()), chosen  # every stage was the answer somewhere: the instances exercise them all


def _pinned(layers, zero, d, **options):
    """The best plan with ``p = 1``, ``d`` and the ZeRO stage pinned (no recompute, no SP)."""
    pinned = PlanSpec(p=1, d=d, recompute="none", sequence_parallel=False, zero=zero)
    return placement.best_plan(records(layers), replace(_settings(**options), plan=pinned))


def test_auto_is_the_best_pinned_stage():
    """``+zero=auto`` answers the fastest of ``+zero1``, ``+zero2``, ``+zero3`` (ZeRO-0 is never faster than ZeRO-1)."""
    rng = np.random.default_rng(7)
    for _ in range(60):
        layers, options = _random_instance(rng)
        times = {}
        for zero in ZERO_CHOICES:
            plan = best_plan(layers, **{**options, "zero": zero})
            times[zero] = plan.time_per_batch_s if plan.feasible else math.inf
        assert times[None] == min(times[1], times[2], times[3]) <= times[0]


def test_tight_memory_picks_the_stage_that_fits():
    """Two layers of 40 weight bytes on d = 4 with Adam (state 6x): ZeRO-1 needs 80 + 80 + 480/4 = 280 B, ZeRO-2
    80 + 80/4 + 480/4 + one layer's 40-byte gradient = 260 B, ZeRO-3 640/4 + 3·40 = 280 B, each + 4 B of stash.
    With 270 B only ZeRO-2 fits, and auto finds it."""
    layers = [{"fwd_s": 1.0, "bwd_s": 2.0, "param_bytes": 40.0, "stash_bytes": 2.0, "output_bytes": 1.0}] * 2
    options = dict(n_devices=4, tensor_width=1, global_batch=16, microbatch=1, hbm_bytes=270.0,
                   link_bandwidth_Bps=10.0, optimizer="adam")
    totals = {zero: _pinned(layers, zero, 4, **options) for zero in (1, 2, 3)}
    assert not totals[1].feasible and not totals[3].feasible and totals[2].feasible
    assert totals[2].memory_bytes["total"] == 264.0 and totals[2].memory_bytes["zero_buffers"] == 40.0
    assert _pinned(layers, None, 4, **options).notation == totals[2].notation


def test_every_zero_stage_matches_brute_force_on_random_dags():
    """Branching layer graphs (stages are downset differences): 60 seeded instances, still exact."""
    rng = np.random.default_rng(99)
    graphs = [[(0, 1), (0, 2), (1, 3), (2, 3)], [(0, 1), (0, 2), (2, 3)], [(0, 2), (1, 2), (2, 3)]]
    feasible = 0
    for _ in range(60):
        layers, options = _random_instance(rng)
        layers = (layers * 4)[:4]
        edges = graphs[int(rng.integers(len(graphs)))]
        plan = best_plan_dag(layers, edges, **options)
        _check_against(brute_force_dag(layers, edges, **options), plan)
        feasible += plan.feasible
    assert feasible >= 20  # the instances exercise real plans, not only "nothing fits"


# ---------------------------------------------------------------- the ZeRO paper's table
# Rajbhandari et al. 2020 §5, Figure 1: Ψ = 7.5 B parameters, N_d = 64, K = 12 (mixed-precision Adam).
PSI, N_D = 7.5e9, 64
PAPER_GB = {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9}


@pytest.mark.parametrize("zero", range(4))
def test_memory_per_device_reproduces_the_zero_papers_table(zero):
    settings = _settings(n_devices=N_D, global_batch=N_D, tensor_width=1, microbatch=1, hbm_bytes=1e15,
                         link_bandwidth_Bps=math.inf, optimizer="adam")
    state_gb = 2 * PSI * settings.state_factor(N_D, zero) / 1e9  # bf16 weights: 2 bytes per parameter
    assert round(state_gb, 1) == PAPER_GB[zero]


@pytest.mark.parametrize("zero", range(4))
def test_a_plan_reports_the_papers_memory(zero):
    """The same numbers in a plan's memory breakdown (one layer of Ψ parameters, no activations)."""
    layers = [{"fwd_s": 1.0, "bwd_s": 2.0, "param_bytes": 2 * PSI, "stash_bytes": 0.0, "output_bytes": 0.0}]
    plan = _pinned(layers, zero, N_D, n_devices=N_D, global_batch=N_D, tensor_width=1, microbatch=1, hbm_bytes=1e15,
                   link_bandwidth_Bps=1e11, optimizer="adam")
    memory = plan.memory_bytes
    assert plan.zero == zero and PlanSpec.parse(plan.notation).zero == zero
    assert round((memory["weights"] + memory["gradients"] + memory["optimizer"]) / 1e9, 1) == PAPER_GB[zero]


# ---------------------------------------------------------------- the traffic of each stage
def test_each_stage_moves_what_it_should():
    """ZeRO-0/1: one all-reduce per batch; ZeRO-2: per-microbatch reduce-scatters (here larger than the backward:
    exposed) and a weight all-gather after the flush; ZeRO-3: no batch collective, per-microbatch all-gathers."""
    bandwidth, d, m_r, params = 10.0, 4, 2, 50.0
    layers = [{"fwd_s": 0.5, "bwd_s": 1.0, "param_bytes": params, "stash_bytes": 1.0, "output_bytes": 1.0}]
    plans = {}
    for zero in range(4):
        plans[zero] = _pinned(layers, zero, d, n_devices=d, global_batch=d * m_r, tensor_width=1, microbatch=1,
                              hbm_bytes=1e6, link_bandwidth_Bps=bandwidth, optimizer="adam")
    gather = allgather_s(params, d, bandwidth)  # 3.75 s: more than the 0.5 s forward and the 1 s backward
    for zero in (0, 1):
        assert plans[zero].time_breakdown_s["dp_allreduce"] == pytest.approx(allreduce_s(params, d, bandwidth))
        assert plans[zero].time_breakdown_s["zero_comm"] == 0.0
    assert plans[2].time_breakdown_s["dp_allreduce"] == pytest.approx(gather)
    assert plans[2].time_breakdown_s["zero_comm"] == pytest.approx(m_r * (gather - 1.0))
    assert plans[3].time_breakdown_s["dp_allreduce"] == 0.0
    assert plans[3].time_breakdown_s["zero_comm"] == pytest.approx(m_r * ((gather - 0.5) + (2 * gather - 1.0)))


def test_zero3_traffic_is_priced_on_the_levels_its_group_spans():
    """On a DGX cluster (8 GPUs per node, then InfiniBand) with t = 2, the d = 8 data-parallel group spans two
    nodes: each layer's all-gathers and reduce-scatter are the cluster's hierarchical collectives at stride t."""
    cluster = get_cluster("dgx-a100", 16, global_batch=8, optimizer="adam")
    layers = [{"fwd_s": 1e-4, "bwd_s": 2e-4, "param_bytes": 4e8 * (1 + i), "stash_bytes": 1e6, "output_bytes": 1e6}
              for i in range(3)]
    pinned = PlanSpec(t=2, p=1, d=8, microbatch=1, recompute="none", sequence_parallel=False, zero=3)
    plan = placement.best_plan(records(layers), placement.Settings(cluster, 2, 1, 1e15, pinned))
    exposed = 0.0
    for layer in layers:
        gather = hierarchical_s(cluster.network.levels, "allgather", layer["param_bytes"], list(range(0, 16, 2)))
        scatter = hierarchical_s(cluster.network.levels, "reducescatter", layer["param_bytes"], list(range(0, 16, 2)))
        exposed += max(0.0, gather - layer["fwd_s"]) + max(0.0, gather + scatter - layer["bwd_s"])
    assert cluster.network.extents(8, 2)[1] == 2  # the group does cross nodes
    assert plan.time_breakdown_s["zero_comm"] == pytest.approx(plan.microbatches_per_replica * exposed, rel=1e-9)


# ---------------------------------------------------------------- the CLI
def test_cli_shows_a_pinned_zero3_plans_traffic_and_buffers():
    """``python -m phaze_env.evaluate --plan ...+zero3`` prints the ZeRO traffic and buffers (in-process: the
    tiny workload is registered here)."""
    from phaze_env.evaluate import main
    from phaze_env.workloads.registry import BUILTIN

    BUILTIN.setdefault(TINY.name, TINY)
    args = ["--workload", TINY.name, "--preset", "tpuv4", "--cluster", "phaze", "--devices", "8", "--batch", "16",
            "--plan", "t1p2d4m2+zero3"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main([*args, "--json"])
    info = json.loads(out.getvalue())
    assert status == 0 and info["plan"] == "t1p2d4m2+zero3"
    assert info["time_breakdown_s"]["zero_comm"] > 0 and info["time_breakdown_s"]["dp_allreduce"] == 0
    assert info["memory_bytes"]["zero_buffers"] > 0
    assert math.isclose(sum(info["time_breakdown_s"].values()), info["time_per_batch_s"], rel_tol=1e-9)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(args)
    text = out.getvalue()
    assert "t1p2d4m2+zero3" in text and "ZeRO comm" in text and "zero buffers" in text


# ---------------------------------------------------------------- hybrid sharding (FSDP's HSDP)
def test_hybrid_sharding_matches_brute_force_on_random_chains():
    """200 seeded instances with ZeRO-3 over shard groups of 2 or 4 replicas (``+shard<h>``): the DP's best time and
    feasibility equal the brute force over every d that the group divides, p, v, partition and recompute modes."""
    rng = np.random.default_rng(20)
    hybrid = 0
    for _ in range(200):
        layers, options = _random_instance(rng)
        options.update(zero=3, shard_group=int(rng.choice([2, 2, 4])), n_devices=int(rng.integers(4, 9)))
        plan = best_plan(layers, **options)
        _check_against(brute_force_chain(layers, **options), plan)
        if plan.feasible:
            spec = PlanSpec.parse(plan.notation)
            assert spec.shard_group == options["shard_group"] and plan.data_parallel % spec.shard_group == 0
            hybrid += plan.data_parallel > options["shard_group"]
            assert math.isclose(sum(plan.time_breakdown_s.values()), plan.time_per_batch_s, rel_tol=1e-9)
    assert hybrid >= 10  # the instances reach plans with several shard groups, not only d = h


@pytest.mark.parametrize("seed, structure", [
    (21, {"hybrid_allreduce_overlapped": False}),  # once after the backward pass (the jax-xla profile)
    (23, {"hybrid_allreduce_exposure": (0.25, 0.4, 1.0)}),  # overlapped, a share exposed (pytorch-fsdp: 0.40)
], ids=["after-backward", "partly-exposed"])
def test_hybrid_allreduce_structures_match_brute_force_on_random_chains(seed, structure):
    """The same instances in a stack that all-reduces the gradient shards once after the backward pass, not overlapped
    (``Stack.hybrid_allreduce_overlapped`` False), or overlaps it but leaves a share exposed
    (``Stack.hybrid_allreduce_exposure``, drawn per instance): the DP still equals the brute force."""
    rng = np.random.default_rng(seed)
    hybrid = 0
    for _ in range(200):
        layers, options = _random_instance(rng)
        options.update(zero=3, shard_group=int(rng.choice([2, 2, 4])), n_devices=int(rng.integers(4, 9)))
        options.update({key: float(rng.choice(value)) if isinstance(value, tuple) else value
                        for key, value in structure.items()})
        plan = best_plan(layers, **options)
        _check_against(brute_force_chain(layers, **options), plan)
        if plan.feasible:
            hybrid += plan.data_parallel > options["shard_group"]
            assert math.isclose(sum(plan.time_breakdown_s.values()), plan.time_per_batch_s, rel_tol=1e-9)
    assert hybrid >= 10


def test_the_exposed_share_adds_on_top_of_the_overlap():
    """The one-layer case of test_hybrid_sharding_prices_the_groups with half the shard all-reduce exposed: the
    layer's backward adds half the 20 B all-reduce over the 2 groups on top of what its compute does not cover."""
    layers = [{"fwd_s": 100.0, "bwd_s": 100.0, "param_bytes": 80.0, "stash_bytes": 0.0, "output_bytes": 0.0}]
    options = dict(n_devices=8, tensor_width=1, global_batch=8, microbatch=1, hbm_bytes=1e6, link_bandwidth_Bps=10.0,
                   optimizer="adam")
    spec = PlanSpec(p=1, d=8, recompute="none", sequence_parallel=False, zero=3, shard_group=4)
    hidden = placement.best_plan(records(layers), replace(_settings(**options), plan=spec))
    half = placement.best_plan(records(layers), replace(_settings(**options, hybrid_allreduce_exposure=0.5), plan=spec))
    assert hidden.time_breakdown_s["zero_comm"] == 0.0  # a 100 s layer hides every collective
    assert half.time_breakdown_s["zero_comm"] == pytest.approx(0.5 * allreduce_s(20.0, 2, 10.0, 0.0))
    no_groups = replace(spec, d=4)  # d = h: one shard group, nothing to all-reduce across groups
    assert placement.best_plan(records(layers), replace(_settings(**options, hybrid_allreduce_exposure=0.5),
                                                        plan=no_groups)
                               ).time_breakdown_s["zero_comm"] == 0.0


def test_hybrid_allreduce_after_the_backward_is_paid_once_per_batch():
    """The one-layer case below in a stack that does not overlap it: the 20 B shard's all-reduce over the 2 groups
    leaves the backward pass and is paid once, after the flush (``dp_allreduce``), whatever the microbatches."""
    layers = [{"fwd_s": 1.0, "bwd_s": 1.0, "param_bytes": 80.0, "stash_bytes": 0.0, "output_bytes": 0.0}]
    options = dict(n_devices=8, tensor_width=1, global_batch=16, microbatch=1, hbm_bytes=1e6, link_bandwidth_Bps=10.0,
                   optimizer="adam", hybrid_allreduce_overlapped=False)
    spec = PlanSpec(p=1, d=8, recompute="none", sequence_parallel=False, zero=3, shard_group=4)
    plan = placement.best_plan(records(layers), replace(_settings(**options), plan=spec))
    gather = allgather_s(80.0, 4, 10.0, 0.0)
    assert plan.time_breakdown_s["zero_comm"] == pytest.approx(2 * ((gather - 1.0) + (2 * gather - 1.0)))  # 2 microbatches
    assert plan.time_breakdown_s["dp_allreduce"] == pytest.approx(allreduce_s(20.0, 2, 10.0, 0.0))


def test_hybrid_sharding_prices_the_groups():
    """One layer of 80 bytes on 8 replicas of a 10 B/s ring, shard groups of 4: the state is sharded 4 ways, the
    gathers span 4 ranks and the gradient shard (20 B) is all-reduced over the 2 groups in the backward pass."""
    layers = [{"fwd_s": 1.0, "bwd_s": 1.0, "param_bytes": 80.0, "stash_bytes": 0.0, "output_bytes": 0.0}]
    options = dict(n_devices=8, tensor_width=1, global_batch=8, microbatch=1, hbm_bytes=1e6, link_bandwidth_Bps=10.0,
                   optimizer="adam")
    spec = PlanSpec(p=1, d=8, recompute="none", sequence_parallel=False, zero=3, shard_group=4)
    plan = placement.best_plan(records(layers), replace(_settings(**options), plan=spec))
    gather = allgather_s(80.0, 4, 10.0, 0.0)  # 3/4 · 80 / 10 = 6 s
    exposed = (gather - 1.0) + (gather + gather + allreduce_s(20.0, 2, 10.0, 0.0) - 1.0)
    assert plan.time_breakdown_s["zero_comm"] == pytest.approx(exposed)
    assert plan.memory_bytes["weights"] + plan.memory_bytes["gradients"] + plan.memory_bytes["optimizer"] == \
        pytest.approx(80.0 * (1 + 1 + 6) / 4)
    assert plan.notation == "t1p1d8m1+zero3+shard4"


def test_hybrid_sharding_is_checked():
    assert PlanSpec.parse("t1p1d16m2+zero3+shard8").shard_group == 8
    assert str(PlanSpec.parse("t1p1d16m2+zero3+shard8")) == "t1p1d16m2+zero3+shard8"
    with pytest.raises(ValueError, match="needs ZeRO stage 3"):
        PlanSpec.parse("t1p1d16m2+zero1+shard8")
    with pytest.raises(ValueError, match="must divide the weight replicas"):
        PlanSpec(d=12, zero=3, shard_group=8)
    with pytest.raises(ValueError, match="integer ≥ 2"):
        PlanSpec(zero=3, shard_group=1)


@pytest.mark.parametrize("mode", ["selective", "full"])
def test_a_rerun_covers_the_layers_backward_collectives(mode):
    """One layer of 80 bytes on 8 replicas of a 10 B/s ring (all-gather 7 s, reduce-scatter 7 s), forward 4 s with a
    3 s attention core, backward 8 s: the backward hides 8 of its 14 s of collectives; the layer's rerun (3 s
    selective, 4 s full) hides that much more, so the stage costs ``rerun + max(0, 14 − 8 − rerun)`` over the
    backward: 6 s either way, the report splitting it into recompute and ZeRO comm. The forward's all-gather (7 s
    against 4) is not helped by a rerun."""
    layers = [{"fwd_s": 4.0, "bwd_s": 8.0, "attention_fwd_s": 3.0, "param_bytes": 80.0, "stash_bytes": 0.0,
               "attention_stash_bytes": 0.0, "output_bytes": 0.0}]
    options = dict(n_devices=8, tensor_width=1, global_batch=8, microbatch=1, hbm_bytes=1e6, link_bandwidth_Bps=10.0,
                   optimizer="adam")
    gather = allgather_s(80.0, 8, 10.0, 0.0)
    assert gather == pytest.approx(7.0)
    plans = {rc: placement.best_plan(records(layers), replace(_settings(**options), plan=PlanSpec(
        p=1, d=8, recompute=rc, sequence_parallel=False, zero=3))) for rc in ("none", mode)}
    rerun = {"selective": 3.0, "full": 4.0}[mode]
    assert plans["none"].time_breakdown_s["zero_comm"] == pytest.approx((gather - 4.0) + (2 * gather - 8.0))
    assert plans[mode].time_breakdown_s["zero_comm"] == pytest.approx((gather - 4.0) + (2 * gather - 8.0 - rerun))
    assert plans[mode].time_breakdown_s["recompute"] == pytest.approx(rerun)
    assert plans[mode].time_per_batch_s == pytest.approx(plans["none"].time_per_batch_s)
