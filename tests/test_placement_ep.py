"""Expert parallelism ``e``: the all-to-all, the notation, the DP against a brute force, and the what-if CLI."""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import replace
from types import SimpleNamespace

import collective_oracle as oracle
import numpy as np
import pytest

from phaze_env import comm, placement
from phaze_env.cluster import Cluster, get_cluster
from phaze_env.placement import Settings
from phaze_env.plan_spec import PlanSpec, PlanSyntaxError
from test_placement import OPTIMIZER_FACTOR, STEP_FACTOR, _compositions, _inputs, records

EXPERTS = 4  # routed experts of the random instances: e ∈ {1, 2, 4}
DEGREES = (1, 2, 4)
MODES = ("none", "selective", "full")


# ---------------------------------------------------------------- the all-to-all
def test_alltoall_is_the_pairwise_exchange_cost():
    """(g−1)/g · S / B + (g−1)·α (Thakur et al. 2005); a bidirectional ring is bounded by its bisection, g/4 · S / B."""
    assert comm.alltoall_s(800.0, 4, 100.0, 0.5) == pytest.approx(3 / 4 * 8 + 3 * 0.5)
    assert comm.alltoall_s(800.0, 1, 100.0, 0.5) == 0.0
    assert comm.alltoall_s(800.0, 16, 100.0, ring=True) == pytest.approx(16 / 4 * 8)
    assert comm.alltoall_s(800.0, 2, 100.0, ring=True) == pytest.approx(1 / 2 * 8)
    assert comm.collective_s("alltoall", 800.0, 4, 100.0, 0.5) == comm.alltoall_s(800.0, 4, 100.0, 0.5)


def test_cluster_alltoall_is_one_phase_per_level_spanned():
    """A DGX group of 16 ranks one apart spans 8 GPUs of a node and 2 nodes: an NVLink phase and an InfiniBand phase,
    each exchanging the whole buffer; 8 ranks two apart span 4 GPUs of each of 2 nodes."""
    cluster = get_cluster("dgx-h100", 64)
    node, fabric = cluster.network.levels
    size = 64e6
    nvlink = lambda k: comm.alltoall_s(size, k, node.bandwidth_Bps, node.latency_s)  # noqa: E731
    infiniband = lambda k: comm.alltoall_s(size, k, fabric.bandwidth_Bps, fabric.latency_s)  # noqa: E731
    assert cluster.network.collective_s("alltoall", size, 16) == pytest.approx(nvlink(8) + infiniband(2))
    assert cluster.network.collective_s("alltoall", size, 8, stride=2) == pytest.approx(nvlink(4) + infiniband(2))
    assert cluster.network.collective_s("alltoall", size, 8) == pytest.approx(nvlink(8))
    flat = Cluster(n_devices=8, link_bandwidth_Bps=100.0, link_latency_s=0.5)
    assert flat.network.collective_s("alltoall", 800.0, 4) == comm.alltoall_s(800.0, 4, 100.0, 0.5)
    torus = get_cluster("tpuv4-pod", 64)  # 4×4×4: 4 ranks one apart are one ring of the first dimension
    level = torus.network.levels[0]
    assert torus.network.collective_s("alltoall", size, 4) == pytest.approx(
        comm.alltoall_s(size, 4, level.bandwidth_Bps, level.latency_s, ring=True))


# ---------------------------------------------------------------- the notation
@pytest.mark.parametrize("text", ["t2p4d8e8m1+sp+rc=selective", "t2p4d8m1", "e4", "d8e2", "t2+e=auto", ""])
def test_notation_round_trips_with_e(text):
    spec = PlanSpec.parse(text)
    assert PlanSpec.parse(str(spec)) == spec


def test_notation_e_absent_is_one_and_auto_is_free():
    assert PlanSpec.parse("t2p4d8m1").e == 1 and PlanSpec.parse("t2p4d8e8m1").e == 8
    assert PlanSpec.parse("t2+e=auto").e is None and PlanSpec().e is None
    assert "e=auto" in str(PlanSpec()) and PlanSpec.parse(str(PlanSpec())) == PlanSpec()
    assert str(PlanSpec.parse("t2p4d8e8m1")) == "t2p4d8e8m1" and str(PlanSpec.parse("t2p4d8e1m1")) == "t2p4d8m1"


@pytest.mark.parametrize("make", [lambda: PlanSpec.parse("t1p4d6e4m1"), lambda: PlanSpec(d=6, e=4)])
def test_e_that_does_not_divide_d_is_one_clear_error(make):
    """The notation holds every plan some stack runs: ``e`` dividing ``d``, or (``t`` and ``d`` pinned) ``t·c·d``, as
    a folded expert grid carves it (``t2p4d6e4m1``: a stack that does not fold refuses it, below)."""
    with pytest.raises(ValueError, match="e=4 must divide the data-parallel degree d=6"):
        make()


def test_bad_e_syntax_is_a_plan_syntax_error():
    for text in ("t2e0", "t2e2+e=auto"):
        with pytest.raises(PlanSyntaxError):
            PlanSpec.parse(text)


# ---------------------------------------------------------------- random instances and an independent brute force
def _instance(rng):
    """A small chain whose middle layers are MoE layers (expert bytes and routed tokens), and its options."""
    count = int(rng.integers(1, 5))
    layers = []
    for index in range(count):
        moe = 0 < index < count - 1 or count == 1
        stash = float(rng.integers(0, 40))
        attention = float(rng.integers(0, stash + 1))
        fwd = float(rng.uniform(0.0, 2.0))
        params = float(rng.integers(0, 80 if moe else 20))  # MoE layers hold most of the parameters
        layers.append({"fwd_s": fwd, "bwd_s": float(rng.uniform(0.01, 4.0)), "param_bytes": params,
                       "expert_param_bytes": float(rng.integers(params // 2, params + 1)) if moe else 0.0,
                       "routed_bytes": float(rng.integers(1, 20)) if moe else 0.0,
                       "stash_bytes": stash, "attention_stash_bytes": attention,
                       "replicated_stash_bytes": float(rng.integers(0, stash - attention + 1)),
                       "attention_fwd_s": fwd * float(rng.uniform()), "output_bytes": float(rng.integers(0, 30))})
    n_devices = int(rng.choice([2, 4, 8]))
    cluster = Cluster(n_devices=n_devices, global_batch=int(rng.integers(1, 13)),
                      devices_per_node=int(rng.choice([1, 2, 4])), node_bandwidth_Bps=float(rng.choice([1e4, math.inf])),
                      link_bandwidth_Bps=float(rng.choice([100.0, 1000.0])),
                      link_latency_s=float(rng.choice([0.0, 0.01])), optimizer=str(rng.choice(["sgd", "adam"])))
    modes = [mode for mode in MODES if rng.uniform() < 0.6] or ["none"]
    options = {"tensor_width": int(rng.choice([1, 2])), "microbatch": int(rng.integers(1, 3)),
               "hbm_bytes": float(rng.integers(40, 600)), "recompute": "|".join(modes),
               "sequence_parallel": [None, True, False][int(rng.integers(3))],
               "zero1": [None, True, False][int(rng.integers(3))], "interleave": [1, 2, None][int(rng.integers(3))],
               "hbm_bandwidth_Bps": [None, 50.0][int(rng.integers(2))]}
    return layers, cluster, options


def _priced(layers, cluster, t, e):
    """The layers at expert-parallel degree ``e``: 1/e of the expert bytes, dispatch + combine forward and backward
    (over ranks ``t`` apart, or consecutive ones in a folded expert grid)."""
    out = []
    for layer in layers:
        stride = 1 if cluster.stack.folded_experts else t
        alltoall = cluster.network.collective_s("alltoall", layer["routed_bytes"], e, stride=stride)
        experts = layer["expert_param_bytes"] / e
        priced = {key: value for key, value in layer.items() if key != "routed_bytes"}
        priced.update(fwd_s=layer["fwd_s"] + 2 * alltoall, bwd_s=layer["bwd_s"] + 2 * alltoall,
                      param_bytes=layer["param_bytes"] - layer["expert_param_bytes"] + experts,
                      expert_param_bytes=experts, ep_comm_s=4 * alltoall)
        out.append(priced)
    return out


def _settings(cluster, options, e_pinned):
    """ZeRO pinned at stage 1 (``zero1`` None or True) or 0: this brute force has no ZeRO-2/3 traffic, which
    tests/test_placement_zero.py and tests/test_placement_combined.py cover."""
    plan = PlanSpec(recompute=options["recompute"], sequence_parallel=options["sequence_parallel"],
                    zero=0 if options["zero1"] is False else 1, interleave=options["interleave"], e=e_pinned,
                    p=options.get("stages"))
    return Settings(cluster, options["tensor_width"], options["microbatch"], options["hbm_bytes"], plan,
                    hbm_bandwidth_Bps=options["hbm_bandwidth_Bps"], expert_parallel=e_pinned or 1)


def _send_s(cluster, t, d, p, payload):
    """A pipeline message: across a level slower than the node's, Megatron's scatter/gather (1/t + all-gather)."""
    level = cluster.network.p2p_level(t * d, max(p - 1, 1))
    if t == 1 or len(cluster.network.levels) == 1:
        return oracle.p2p_s(payload, level.p2p_bandwidth_Bps, level.latency_s)
    return (oracle.p2p_s(payload / t, level.p2p_bandwidth_Bps, level.latency_s)
            + oracle.hierarchical_s(cluster.network.levels, "allgather", payload, list(range(t))))


def brute_force(layers, cluster, options, degrees):
    """Smallest time per batch over every (e, d with e | d, p, v, partition, recompute mode of each stage),
    written from the issue: expert bytes ÷ e per device, their gradients all-reduced over the d/e ranks t·e apart
    and their ZeRO-1 optimizer state sharded over them; dense bytes over d ranks t apart (at e = 1 all of a
    stage's bytes are one all-reduce). On a DualPipe stack (arXiv:2412.19437 Table 2): p = 1, or p even with an even
    m_r ≥ 2p; device k holds stage k and stage p − 1 − k, their state once each and each one's s microbatches
    in flight (s-th from the end), which must fit together, and runs half the microbatches through each (its pace
    their mean); each device's sync and step of its two stages' bytes together, the batch waiting for the longest;
    and a bubble of (p/2 − 1)(F&B + B − 3W) = (p/2 − 1)·2/3 stage times
    (F&B = F + B, W = B/2, B = 2F)."""
    dualpipe = cluster.stack.pipeline_schedule == "dualpipe"
    folded = cluster.stack.folded_experts  # the expert grid over all t·d ranks: e | t·d, shards on t·d/e ranks e apart
    t, m, hbm = options["tensor_width"], options["microbatch"], options["hbm_bytes"]
    zero1 = options["zero1"] in (None, True)
    sp = t > 1 if options["sequence_parallel"] is None else options["sequence_parallel"]
    state, step = OPTIMIZER_FACTOR[cluster.setup.optimizer], STEP_FACTOR[cluster.setup.optimizer]
    N, B = cluster.n_devices, cluster.setup.global_batch
    best = math.inf

    def allreduce(size, ranks, stride):  # the published ring formulas on each level the ranks span
        return oracle.hierarchical_s(cluster.network.levels, "allreduce", size, [i * stride for i in range(ranks)])

    for e in degrees:
        priced = _priced(layers, cluster, t, e)
        inputs = _inputs(priced)
        for d in (d for d in range(1, N // t + 1) if (t * d if folded else d) % e == 0):
            expert_ranks, expert_stride = (t * d // e, e) if folded else (d // e, t * e)
            m_r = -(-B // (d * m))
            for p in range(1, min(len(priced), N // (d * t)) + 1):
                if options.get("stages") not in (None, p) or (dualpipe and p > 1 and (p % 2 or m_r % 2 or m_r < 2 * p)):
                    continue
                copies = 2 if dualpipe and p > 1 else 1
                for v in (range(1, len(priced) + 1) if options["interleave"] is None else (options["interleave"],)):
                    if v > 1 and (p == 1 or m_r % p):
                        continue
                    units = [min(p - k, m_r) if v == 1 else min(2 * (p - k - 1) + (v - 1) * p + 1, v * m_r)
                             for k in range(p)]
                    for groups in _compositions(len(priced), p):
                        if any(len(group) % v for group in groups):
                            continue  # each stage's layers split into v equal chunks
                        stages = []
                        for k, group in enumerate(groups):
                            total = lambda key: sum(priced[i].get(key, 0.0) for i in group)  # noqa: E731
                            split = (1 - 1 / t) if sp else 0.0
                            stash = [priced[i]["stash_bytes"] - priced[i]["replicated_stash_bytes"] * split for i in group]
                            send = (_send_s(cluster, t, d, p, priced[group[-1]]["output_bytes"]) if group[-1] < len(priced) - 1 else 0.0) \
                                + (_send_s(cluster, t, d, p, inputs[group[0]]) if group[0] > 0 else 0.0)
                            kept = sum(inputs[i] for i in group) / (t if sp else 1)
                            experts = total("expert_param_bytes")
                            dense = total("param_bytes") - total("expert_param_bytes")
                            fixed = 2 * (dense + experts) + state * (dense / (d if zero1 else 1)
                                                                     + experts / (expert_ranks if zero1 else 1))
                            need = {"none": fixed + units[k] * sum(stash) / v,
                                    "selective": fixed + units[k] * (sum(stash) - total("attention_stash_bytes")) / v,
                                    "full": fixed + max(stash) + units[k] * kept / v}
                            plain = total("fwd_s") + total("bwd_s") + v * send
                            times = {"none": plain, "selective": plain + total("attention_fwd_s"), "full": plain + total("fwd_s")}
                            steps = lambda size, shards: 0.0 if not options["hbm_bandwidth_Bps"] else \
                                size * step / (shards if zero1 else 1) / options["hbm_bandwidth_Bps"]  # noqa: E731
                            stages.append(([(times[mode], need[mode]) for mode in options["recompute"].split("|")],
                                           (dense, experts)))

                        def sync(dense, experts):  # a device's collectives and step, after the flush
                            if e == 1:
                                return allreduce(dense + experts, d, t) + steps(dense + experts, d)
                            return (allreduce(dense, d, t) + steps(dense, d)
                                    + allreduce(experts, expert_ranks, expert_stride) + steps(experts, expert_ranks))

                        # DualPipe: device k syncs stage k's bytes and its mirror's together
                        held = [[stages[k][1]] + ([stages[p - 1 - k][1]] if copies == 2 else []) for k in range(p)]
                        syncs = [sync(*np.sum(device, axis=0)) for device in held]
                        slowest = _slowest([modes for modes, _ in stages], hbm, copies == 2)
                        if math.isfinite(slowest):
                            bubble = (p / 2 - 1) * 2 / 3 if copies == 2 else (p - 1) / v
                            best = min(best, (m_r + bubble) * slowest + max(syncs))
    return best


def _slowest(stages, hbm, paired):
    """The least pace of a partition whose stages offer ``(time, memory)`` per recompute mode: each stage's fastest
    mode that fits alone and the slowest stage, or on DualPipe (``paired``) each device's two stages k and p − 1 − k in
    the modes whose sum fits with the least mean time (the device runs half the microbatches through each) and the
    slowest device (inf: some stage or device does not fit)."""
    p = len(stages)
    if not paired:
        return max((min((time for time, need in modes if need <= hbm), default=math.inf) for modes in stages))
    return max(min(((a[0] + b[0]) / 2 for a in stages[k] for b in stages[p - 1 - k] if a[1] + b[1] <= hbm),
                   default=math.inf) for k in range(p))


def _dp(layers, cluster, options, degrees, e_pinned=None):
    settings = _settings(cluster, options, e_pinned)
    t, m = options["tensor_width"], options["microbatch"]
    return placement.best_plan_multi(lambda t_, m_, e: records(_priced(layers, cluster, t, e)), settings, tensor_widths=[t],
                                     microbatches=[m], expert_parallels=degrees)


def _check(expected, plan, folded=False):
    if math.isinf(expected):
        assert not plan.feasible and plan.reason
    else:
        assert plan.feasible, plan.reason
        assert math.isclose(plan.time_per_batch_s, expected, rel_tol=1e-9, abs_tol=1e-12), (plan.time_per_batch_s, expected)
        assert math.isclose(sum(plan.time_breakdown_s.values()), plan.time_per_batch_s, rel_tol=1e-9)
        assert (plan.data_parallel * (plan.tensor_width if folded else 1)) % plan.expert_parallel == 0
        assert PlanSpec.parse(plan.notation).e == plan.expert_parallel


@pytest.mark.parametrize("seed", range(60))
def test_dp_with_e_free_equals_brute_force(seed):
    """Every knob free, e among the divisors of the experts: the DP's best time is the brute force's."""
    layers, cluster, options = _instance(np.random.default_rng(seed))
    _check(brute_force(layers, cluster, options, DEGREES), _dp(layers, cluster, options, DEGREES))


def _folded(cluster):
    return cluster.replace(stack=replace(cluster.stack, folded_experts=True))


@pytest.mark.parametrize("seed", range(130, 190))
def test_dp_on_a_folded_expert_grid_equals_brute_force(seed):
    """Megatron-Core's folded expert grid (``Stack.folded_experts``): ``e`` dividing ``t·d`` (not ``d``), the expert
    shards synced and ZeRO-sharded over the ``t·d/e`` ranks ``e`` apart; e free and pinned."""
    layers, cluster, options = _instance(np.random.default_rng(seed))
    cluster = _folded(cluster)
    _check(brute_force(layers, cluster, options, DEGREES), _dp(layers, cluster, options, DEGREES), folded=True)
    e = int(np.random.default_rng(seed).choice(DEGREES))
    _check(brute_force(layers, cluster, options, (e,)), _dp(layers, cluster, options, (e,), e_pinned=e), folded=True)


def test_a_folded_grid_places_an_e_the_data_parallel_ranks_cannot_hold():
    """t = 2, d = 2, e = 4: refused by the unfolded grid (e ∤ d), placed by the folded one (e | t·d)."""
    layer = dict(fwd_s=1.0, bwd_s=2.0, param_bytes=8.0, expert_param_bytes=4.0, routed_bytes=2.0, stash_bytes=1.0,
                 attention_stash_bytes=0.0, replicated_stash_bytes=0.0, attention_fwd_s=0.0, output_bytes=1.0)
    cluster = Cluster(n_devices=4, global_batch=8, devices_per_node=4, link_bandwidth_Bps=100.0)
    options = {"tensor_width": 2, "microbatch": 1, "hbm_bytes": 1e6, "recompute": "none", "sequence_parallel": None,
               "zero1": True, "interleave": 1, "hbm_bandwidth_Bps": None, "stages": 1}
    assert not _dp([layer], cluster, options, (4,), e_pinned=4).feasible
    plan = _dp([layer], _folded(cluster), options, (4,), e_pinned=4)
    assert plan.feasible and (plan.tensor_width, plan.data_parallel, plan.expert_parallel) == (2, 2, 4)
    _check(brute_force([layer], _folded(cluster), options, (4,)), plan, folded=True)


@pytest.mark.parametrize("seed", range(90, 130))
def test_dualpipe_dp_with_e_equals_brute_force(seed):
    """DualPipe (issue 28) with expert parallelism: the sync walked on two byte counts, both copies synced."""
    layers, cluster, options = _instance(np.random.default_rng(seed))
    cluster = cluster.replace(pipeline_schedule="dualpipe", interleaved_schedule=False,
                              global_batch=4 * cluster.setup.global_batch)  # batches that fill pipelines (m_r ≥ 2p)
    options["interleave"] = 1
    options["stages"] = 2 if len(layers) > 1 and seed % 3 else None  # a pipeline pinned, or left to the DP
    _check(brute_force(layers, cluster, options, DEGREES), _dp(layers, cluster, options, DEGREES))


@pytest.mark.parametrize("seed", range(60, 90))
def test_dp_with_e_pinned_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    layers, cluster, options = _instance(rng)
    e = int(rng.choice(DEGREES))
    plan = _dp(layers, cluster, options, [e], e_pinned=e)
    _check(brute_force(layers, cluster, options, [e]), plan)
    assert not plan.feasible or plan.expert_parallel == e


@pytest.mark.parametrize("seed", range(90, 100))
def test_dag_path_on_a_chain_equals_chain_path_with_e(seed):
    """The DAG stages sum the expert bytes and all-to-alls the same way as the chain's."""
    rng = np.random.default_rng(seed)
    layers, cluster, options = _instance(rng)
    e = int(rng.choice(DEGREES[1:]))
    priced, settings = records(_priced(layers, cluster, options["tensor_width"], e)), _settings(cluster, options, e)
    chain, dag = placement.best_plan(priced, settings), placement.best_plan_dag(
        priced, [(i, i + 1) for i in range(len(priced) - 1)], settings)
    assert chain.feasible == dag.feasible
    assert not chain.feasible or math.isclose(chain.time_per_batch_s, dag.time_per_batch_s, rel_tol=1e-12)


def test_expert_parallelism_shards_expert_memory_and_adds_the_alltoalls():
    """One MoE layer of 80 expert bytes on 4 devices, d = 4: at e = 4 a device holds 20 of them, its optimizer
    state (ZeRO-1) is sharded over d/e = 1, and the four all-to-alls are in its time and the breakdown."""
    layer = {"fwd_s": 1.0, "bwd_s": 2.0, "param_bytes": 100.0, "expert_param_bytes": 80.0, "routed_bytes": 400.0,
             "stash_bytes": 0.0, "output_bytes": 0.0}
    cluster = Cluster(n_devices=4, global_batch=4, link_bandwidth_Bps=100.0, optimizer="adam")
    options = {"tensor_width": 1, "microbatch": 1, "hbm_bytes": 1e9, "recompute": "none", "sequence_parallel": False,
               "zero1": True, "interleave": 1, "hbm_bandwidth_Bps": None}
    plan = _dp([layer], cluster, options, [4], e_pinned=4)
    assert plan.notation == "t1p1d4e4m1+zero1" and plan.expert_parallel == 4
    assert plan.memory_bytes["weights"] == pytest.approx(20 + 20)
    assert plan.memory_bytes["optimizer"] == pytest.approx(6 * (20 / 4 + 20 / 1))
    alltoall = oracle.alltoall_s(400.0, 4, 100.0)
    assert plan.time_breakdown_s["ep_comm"] == pytest.approx(4 * alltoall)  # one microbatch per replica
    assert plan.time_breakdown_s["dp_allreduce"] == pytest.approx(oracle.allreduce_s(20.0, 4, 100.0))


# ---------------------------------------------------------------- infeasible e: clear reasons
def test_dp_reasons_for_an_e_that_cannot_be_placed():
    layer = placement.LayerCost(fwd_s=1.0, bwd_s=1.0, param_bytes=8.0, expert_param_bytes=4.0, stash_bytes=0.0,
                                output_bytes=0.0)
    cluster = Cluster(n_devices=4, global_batch=8)
    pinned_d = Settings(cluster, 1, 1, 1e9, PlanSpec(d=2, recompute="none"), expert_parallel=4)
    assert "does not divide the data-parallel degree d=2" in placement.best_plan([layer], pinned_d).reason
    too_wide = Settings(cluster, 2, 1, 1e9, PlanSpec(recompute="none"), expert_parallel=4)
    assert "exceeds the 2 data-parallel ranks" in placement.best_plan([layer], too_wide).reason
    too_deep = Settings(cluster, 1, 1, 1e9, PlanSpec(p=2, recompute="none"), expert_parallel=4)
    assert "exceeds the 2 data-parallel ranks of 4 devices at tensor width 1 and 2 pipeline stages" in \
        placement.best_plan([layer, layer], too_deep).reason
    with pytest.raises(ValueError, match="pins e=2 but this search is at e=1"):
        Settings(cluster, 1, 1, 1e9, PlanSpec(e=2))


def test_evaluate_refuses_an_e_that_does_not_divide_the_experts():
    from phaze_env.evaluate import evaluate
    from phaze_env.hardware import get_preset

    accelerator, cluster = get_preset("h100"), get_cluster("dgx-h100", 64)
    with pytest.raises(ValueError, match="e=3 does not divide mixtral-8x7b's 8 experts"):
        evaluate("mixtral-8x7b", accelerator, cluster, plan=PlanSpec.parse("t2e3"))
    with pytest.raises(ValueError, match="e=2 does not divide gpt2-xl's experts"):
        evaluate("gpt2-xl", accelerator, cluster, plan=PlanSpec.parse("t1e2"))


@pytest.mark.parametrize("args, message", [
    (["--workload", "gpt2-xl", "--plan", "t1e2"], "e=2 does not divide gpt2-xl's experts (dense: e=1)"),
    (["--workload", "mixtral-8x7b", "--devices", "48", "--plan", "t2p4d6e4m1"], "e=4 must divide the data-parallel degree d=6"),
    (["--workload", "mixtral-8x7b", "--plan", "t2e3"], "e=3 does not divide mixtral-8x7b's 8 experts"),
])
def test_cli_bad_e_is_one_line_exit_2(args, message, capsys):
    from phaze_env.evaluate import main

    with pytest.raises(SystemExit) as exit_:
        main(args)
    error = capsys.readouterr().err
    assert exit_.value.code == 2 and message in error and len(error.strip().splitlines()) == 1


def test_layer_chain_at_e_holds_a_share_of_the_experts_and_pays_the_alltoalls():
    from phaze_env.evaluate import LayerTiming, _layer_chain

    layer = SimpleNamespace(name="block", is_transformer_layer=True, repeat=2, param_bytes=1000, expert_param_bytes=800, routed_token_bytes=64e6,
                            routed_experts=8, experts_per_token=2, activation_stash_bytes=10, output_bytes=5, input_bytes=5, stash_attention_bytes=0,
                            stash_replicated_bytes=0, stash_kernel_bytes=0, stash_kernel_attention_bytes=0,
                            stash_kernel_replicated_bytes=0, routed_activation_bytes=0.0, stash_gemm_input_bytes=0,
                            stash_gemm_input_replicated_bytes=0)
    graph = SimpleNamespace(layers=(layer,), tensor_width=2)
    timing = LayerTiming(1.0, 2.0, 1.0, 2.0, "ilp", "ilp", True, True)
    cluster = get_cluster("dgx-h100", 64)
    same = _layer_chain(graph, {"block": timing}, cluster, 1)
    sharded = _layer_chain(graph, {"block": timing}, cluster, 8)
    alltoall = cluster.network.collective_s("alltoall", 64e6, 8, stride=2)
    assert len(sharded) == 2 and same[0].param_bytes == 1000 and same[0].ep_comm_s == 0
    assert sharded[0].param_bytes == 200 + 100 and sharded[0].expert_param_bytes == 100
    assert sharded[0].fwd_s == pytest.approx(1.0 + 2 * alltoall) and sharded[0].ep_comm_s == pytest.approx(4 * alltoall)


# ---------------------------------------------------------------- the what-if CLI (docs/moe.md)
WHAT_IF = ["--workload", "mixtral-8x7b", "--preset", "h100", "--cluster", "dgx-h100", "--devices", "64",
           "--batch", "256", "--plan", "t2p4d8e8m1+sp+rc=selective"]


@pytest.mark.slow
def test_what_if_cli_prints_the_alltoall_and_memory():
    result = subprocess.run([sys.executable, "-m", "phaze_env.evaluate", *WHAT_IF], capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("plan            t2p4d8e8m1+sp+rc=selective") for line in lines)
    alltoall = next(line for line in lines if line.strip().startswith("EP all-to-all"))
    assert float(alltoall.split()[2]) > 0
    assert any(line.startswith("memory/device") for line in lines)


# ---------------------------------------------------------------- what the layers report, and evaluate's search over e
def test_moe_layer_reports_its_expert_bytes_and_routed_tokens():
    """Small Mixtral (8 experts of a 64 → 96 SwiGLU, top-2, 32 tokens): experts 8·3·64·96 parameters, split t ways;
    routed tokens 32·2·64 elements at a uniform load; dense layers report neither."""
    from phaze_env.workloads import model_graph
    from test_workloads_moe import SMALL, TOKENS, small

    config = SMALL["mixtral"][2]
    experts = config["num_local_experts"] * 3 * config["hidden_size"] * config["intermediate_size"]
    routed = TOKENS * config["num_experts_per_tok"] * config["hidden_size"]
    for t in (1, 2):
        pre, block, post = model_graph(small("mixtral"), microbatch=1, tensor_width=t).layers
        assert block.expert_param_bytes == experts * 2 // t and block.routed_token_bytes == routed * 2
        assert pre.expert_param_bytes == post.expert_param_bytes == pre.routed_token_bytes == 0


@pytest.mark.slow
def test_evaluate_with_e_free_is_the_best_pinned_e():
    from phaze_env.evaluate import evaluate
    from phaze_env.hardware import get_preset
    from test_workloads_moe import small

    workload, accelerator = small("mixtral"), get_preset("tpuv4")
    cluster = get_cluster("dgx-h100", 16, global_batch=32, optimizer="adam")
    options = dict(microbatch=(1,), tensor_widths=(1,))
    free = evaluate(workload, accelerator, cluster, plan=PlanSpec(t=1, microbatch=1), **options)
    pinned = [evaluate(workload, accelerator, cluster, plan=PlanSpec(t=1, microbatch=1, e=e), **options)
              for e in (1, 2, 4, 8)]
    # every e (1, 2, 4, 8) searched: a lower-bound DP run each, a scheduled run only where that bound could win
    assert free.feasible and free.bound_dp_calls == 4 and 1 <= free.dp_calls <= 4
    assert free.throughput_samples_s == max(evaluation.throughput_samples_s for evaluation in pinned)
    assert free.plan.expert_parallel == PlanSpec.parse(free.plan.notation).e


@pytest.mark.parametrize("workload", ["mixtral-8x7b", "gpt2-xl"])
def test_the_graph_builder_and_the_plan_rules_refuse_an_e_alike(workload):
    """One rule (``Workload.expert_parallel_error``) for the layer chain's builder and the plan rules: the same
    message from both, and a degree below 1 is a clear error, not a ZeroDivisionError from the modulo."""
    from phaze_env.placement.rules import expert_plan_error
    from phaze_env.workloads import get_workload, model_graph

    model = get_workload(workload)
    for e in (3, 0):
        with pytest.raises(ValueError) as raised:
            model_graph(model, seq_len=128, expert_parallel=e)
        assert str(raised.value) == model.expert_parallel_error(e) != ""
    assert expert_plan_error(PlanSpec.parse("t1e3"), model) == model.expert_parallel_error(3)
    assert model.expert_parallel_error(1) == ""
