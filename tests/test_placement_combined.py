"""Context parallelism c, expert parallelism e and ZeRO stages 0–3 together: the placement DP against an
independent brute force on tiny random chains, every knob free (c ∈ {1, 2}, e ∈ {1, 2}, ZeRO stage, d, p, v,
the partition and each stage's recompute mode).

The brute force is written from the model's statement, not from the DP's code: rank order tp-cp-ep-dp-pp
(Megatron-Core). A plan uses ``t·c·p·d`` devices, ``e`` divides ``d``; pipeline neighbours are ``t·c·d`` apart;
dense weights are replicated on the ``d·c`` ranks ``t`` apart; an expert shard on the ``d·c/e`` ranks made of
the ``c`` context-parallel ranks (``t`` apart) times the ``d/e`` data-parallel ranks ``t·c·e`` apart. ZeRO-z
shards (optimizer state, gradients, weights) over each part's own replicas; ZeRO-2/3 traffic and the
collective after the flush are priced on the network levels each group spans (its positions listed here).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import collective_oracle as oracle
import numpy as np
import pytest

from phaze_env import placement
from phaze_env.cluster import OPTIMIZERS, Cluster
from phaze_env.placement import Settings
from phaze_env.plan_spec import PlanSpec
from test_placement import records

BUFFERS = {0: 0.0, 1: 0.0, 2: 1.0, 3: 3.0}  # ZeRO-2: a layer's whole gradient; ZeRO-3: + two layers' gathered weights


def _group_s(cluster: Cluster, kind: str, payload: float, positions: list[int]) -> float:
    """A hierarchical ring collective over the devices at ``positions`` (one ring per level spanned, inner first;
    the published formulas of :mod:`collective_oracle`, not the code under test)."""
    return oracle.hierarchical_s(cluster.network.levels, kind, payload, positions)


def _instance(rng: np.random.Generator):
    """Base layers (some with routed experts) and their pricing at each (c, e); a small hierarchical cluster."""
    base = []
    for _ in range(int(rng.integers(1, 4))):
        params = float(rng.integers(0, 60))
        stash = float(rng.integers(0, 30))
        fwd = float(rng.uniform(0.0, 2.0))
        base.append({"fwd_s": fwd, "bwd_s": float(rng.uniform(0.01, 4.0)), "param_bytes": params,
                     "expert_param_bytes": float(rng.integers(0, int(params) + 1)) if rng.uniform() < 0.7 else 0.0,
                     "routed_bytes": float(rng.integers(0, 40)), "stash_bytes": stash,
                     "attention_stash_bytes": float(rng.integers(0, int(stash) + 1)),
                     "attention_fwd_s": fwd * float(rng.uniform()), "output_bytes": float(rng.integers(0, 30))})
    cluster = Cluster(n_devices=int(rng.choice([4, 8])), global_batch=int(rng.integers(1, 13)),
                      devices_per_node=int(rng.choice([1, 2, 4])), node_bandwidth_Bps=float(rng.choice([30.0, 1e4])),
                      link_bandwidth_Bps=float(rng.choice([10.0, 100.0])), link_latency_s=float(rng.choice([0.0, 0.01])),
                      optimizer=str(rng.choice(["sgd", "adam"])))
    speedup = {1: 1.0, 2: float(rng.uniform(1.2, 2.0))}  # a rank at c = 2 runs half the tokens, a bit less than 2x faster
    variants = {}
    for c, e in itertools.product((1, 2), (1, 2)):
        layers = []
        for layer in base:
            alltoall = layer["routed_bytes"] * (e - 1) / e / 50.0 / c  # any per-layer price: the DP takes it as given
            experts = layer["expert_param_bytes"] / e
            layers.append({"fwd_s": layer["fwd_s"] / speedup[c] + 2 * alltoall,
                           "bwd_s": layer["bwd_s"] / speedup[c] + 2 * alltoall,
                           "param_bytes": layer["param_bytes"] - layer["expert_param_bytes"] + experts,
                           "expert_param_bytes": experts, "ep_comm_s": 4 * alltoall,
                           "stash_bytes": layer["stash_bytes"] / c, "attention_stash_bytes": layer["attention_stash_bytes"] / c,
                           "attention_fwd_s": layer["attention_fwd_s"] / speedup[c],
                           "output_bytes": layer["output_bytes"] / c})
        variants[(c, e)] = layers
    options = {"tensor_width": int(rng.choice([1, 2])), "microbatch": int(rng.integers(1, 3)),
               "hbm_bytes": float(rng.integers(60, 600)), "recompute": str(rng.choice(["none", "full", "auto"])),
               "interleave": [1, None][int(rng.integers(2))], "hbm_bandwidth_Bps": [None, 50.0][int(rng.integers(2))]}
    return variants, cluster, options


def _compositions(n: int, parts: int):
    for cuts in itertools.combinations(range(1, n), parts - 1):
        bounds = (0, *cuts, n)
        yield [list(range(bounds[i], bounds[i + 1])) for i in range(parts)]


def _send_s(cluster: Cluster, t: int, stride: int, p: int, payload: float) -> float:
    level = cluster.network.p2p_level(stride, max(p - 1, 1))
    if t == 1 or len(cluster.network.levels) == 1:
        return oracle.p2p_s(payload, level.p2p_bandwidth_Bps, level.latency_s)
    return (oracle.p2p_s(payload / t, level.p2p_bandwidth_Bps, level.latency_s)
            + oracle.hierarchical_s(cluster.network.levels, "allgather", payload, list(range(t))))


def brute_force(variants, cluster: Cluster, options) -> float:
    t, m, hbm, bandwidth = options["tensor_width"], options["microbatch"], options["hbm_bytes"], options["hbm_bandwidth_Bps"]
    optimizer = OPTIMIZERS[cluster.setup.optimizer]
    modes = ("none", "selective", "full") if options["recompute"] == "auto" else tuple(options["recompute"].split("|"))
    N, B = cluster.n_devices, cluster.setup.global_batch
    best = math.inf
    for (c, e), layers in variants.items():
        inputs = [layers[0]["output_bytes"]] + [layer["output_bytes"] for layer in layers[:-1]]
        folded = cluster.stack.folded_experts  # Megatron-Core's folded expert grid: e | t·c·d, order tp-ep-dp-pp
        for d in (d for d in range(1, N // (t * c) + 1) if (t * c * d if folded else d) % e == 0):
            m_r = -(-B // (d * m))
            dense_group = [i * t for i in range(d * c)]
            if folded:  # an expert shard on the t·c·d/e ranks e apart
                expert_group = [i * e for i in range(t * c * d // e)]
                replicas = {False: d * c, True: t * c * d // e}
            else:
                expert_group = [i * t + j * t * c * e for i in range(c) for j in range(d // e)]
                replicas = {False: d * c, True: d * c // e}
            for zero, p in itertools.product(range(4), range(1, min(len(layers), N // (t * c * d)) + 1)):
                if zero and d * c == 1:
                    continue

                def sharded(stage: int, expert: bool) -> int:
                    return replicas[expert] if zero >= stage else 1

                def state(size: float, expert: bool) -> float:
                    return size * (1 / sharded(3, expert) + 1 / sharded(2, expert) + optimizer.state_factor / sharded(1, expert))

                def collective(kind: str, size: float, expert: bool) -> float:
                    return _group_s(cluster, kind, size, expert_group if expert else dense_group)

                def sync(size: float, expert: bool) -> float:
                    kind = {0: "allreduce", 1: "allreduce", 2: "allgather", 3: None}[zero]
                    step = 0.0 if bandwidth is None else size * optimizer.step_factor / sharded(1, expert) / bandwidth
                    return step + (collective(kind, size, expert) if kind else 0.0)

                for v in (range(1, len(layers) + 1) if options["interleave"] is None else (options["interleave"],)):
                    if v > 1 and (p == 1 or m_r % p):
                        continue
                    units = [min(p - k, m_r) if v == 1 else min(2 * (p - k - 1) + (v - 1) * p + 1, v * m_r) for k in range(p)]
                    for groups in _compositions(len(layers), p):
                        if any(len(group) % v for group in groups):
                            continue  # each stage's layers split into v equal chunks
                        stages = []
                        for k, group in enumerate(groups):
                            total = lambda key: sum(layers[i].get(key, 0.0) for i in group)  # noqa: E731
                            experts = total("expert_param_bytes") if e > 1 else 0.0  # at e = 1 one collective for all
                            dense = total("param_bytes") - experts
                            fixed = state(dense, False) + state(experts, True) + BUFFERS[zero] * max(
                                layers[i]["param_bytes"] for i in group)
                            stash = total("stash_bytes")
                            fits = {"none": fixed + units[k] * stash / v <= hbm,
                                    "selective": fixed + units[k] * (stash - total("attention_stash_bytes")) / v <= hbm,
                                    "full": fixed + max(layers[i]["stash_bytes"] for i in group)
                                    + units[k] * sum(inputs[i] for i in group) / v <= hbm}
                            # a layer's rerun (selective: its attention core; full: its forward) covers its
                            # backward collectives too
                            rerun = {"none": lambda i: 0.0, "selective": lambda i: layers[i].get("attention_fwd_s", 0.0),
                                     "full": lambda i: layers[i]["fwd_s"]}
                            traffic = dict.fromkeys(rerun, 0.0)
                            for i, mode in itertools.product(group if zero >= 2 else (), rerun):
                                layer_experts = layers[i]["expert_param_bytes"] if e > 1 else 0.0
                                layer_dense = layers[i]["param_bytes"] - layer_experts
                                gather = collective("allgather", layer_dense, False) + collective("allgather", layer_experts, True)
                                scatter = (collective("reducescatter", layer_dense, False)
                                           + collective("reducescatter", layer_experts, True))
                                cover = layers[i]["bwd_s"] + rerun[mode](i)
                                if zero == 2:
                                    traffic[mode] += max(0.0, scatter - cover)
                                else:
                                    traffic[mode] += (max(0.0, gather - layers[i]["fwd_s"])
                                                      + max(0.0, gather + scatter - cover))
                            send = (_send_s(cluster, t, t * c * d, p, layers[group[-1]]["output_bytes"])
                                    if group[-1] < len(layers) - 1 else 0.0) \
                                + (_send_s(cluster, t, t * c * d, p, inputs[group[0]]) if group[0] > 0 else 0.0)
                            plain = total("fwd_s") + total("bwd_s") + v * send
                            times = {"none": plain + traffic["none"],
                                     "selective": plain + traffic["selective"] + total("attention_fwd_s"),
                                     "full": plain + traffic["full"] + total("fwd_s")}
                            allowed = [times[mode] for mode in modes if fits[mode]]
                            if not allowed:
                                break
                            stages.append((min(allowed), sync(dense, False) + sync(experts, True)))
                        else:
                            slowest = max(time for time, _ in stages)
                            best = min(best, (m_r + (p - 1) / v) * slowest + max(s for _, s in stages))
    return best


def assert_dp_equals_brute_force(variants, cluster, options):
    """The DP's plan with c, e ∈ {1, 2}, the ZeRO stage and every other degree free on ``cluster`` has the brute
    force's time per batch (or both find none): the plan, or None when infeasible."""
    plan_spec = PlanSpec(recompute=options["recompute"], sequence_parallel=False, zero=None, c=None, e=None,
                         interleave=options["interleave"])
    settings = Settings(cluster, options["tensor_width"], options["microbatch"], options["hbm_bytes"], plan_spec,
                        hbm_bandwidth_Bps=options["hbm_bandwidth_Bps"])
    plan = placement.best_plan_multi(lambda t, m, c, e: records(variants[(c, e)]), settings, tensor_widths=[options["tensor_width"]],
                                     microbatches=[options["microbatch"]], context_parallels=(1, 2), expert_parallels=(1, 2))
    expected = brute_force(variants, cluster, options)
    if math.isinf(expected):
        assert not plan.feasible and plan.reason
        return None
    assert plan.feasible, plan.reason
    assert math.isclose(plan.time_per_batch_s, expected, rel_tol=1e-9, abs_tol=1e-12), (plan.notation, plan.time_per_batch_s,
                                                                                       expected)
    return plan


@pytest.mark.parametrize("seed", range(80))
def test_dp_with_c_e_and_zero_free_equals_brute_force(seed):
    plan = assert_dp_equals_brute_force(*_instance(np.random.default_rng(seed)))
    if plan is None:
        return
    assert math.isclose(sum(plan.time_breakdown_s.values()), plan.time_per_batch_s, rel_tol=1e-9)
    spec = PlanSpec.parse(plan.notation)
    assert (spec.c, spec.e, spec.zero) == (plan.context_parallel, plan.expert_parallel, plan.zero)
    assert plan.data_parallel % plan.expert_parallel == 0


@pytest.mark.parametrize("seed", range(200, 260))
def test_dp_on_a_folded_expert_grid_with_c_e_and_zero_equals_brute_force(seed):
    """The same with the stack's expert grid folded over the t·c·d ranks (``Stack.folded_experts``): e | t·c·d, the
    expert shard's gradients, ZeRO shards and ZeRO-2/3 collectives over the t·c·d/e ranks e apart."""
    variants, cluster, options = _instance(np.random.default_rng(seed))
    cluster = cluster.replace(stack=replace(cluster.stack, folded_experts=True))
    plan = assert_dp_equals_brute_force(variants, cluster, options)
    if plan is not None:
        assert (plan.tensor_width * plan.context_parallel * plan.data_parallel) % plan.expert_parallel == 0


def test_the_instances_exercise_c_e_and_zero_together():
    """The seeds above reach plans with c = 2 and e = 2 at once, and ZeRO-2/3 with e = 2 (not only the corners)."""
    seen = set()
    for seed in range(80):
        variants, cluster, options = _instance(np.random.default_rng(seed))
        settings = Settings(cluster, options["tensor_width"], options["microbatch"], options["hbm_bytes"],
                            PlanSpec(recompute=options["recompute"], sequence_parallel=False, zero=None, c=None, e=None,
                                     interleave=options["interleave"]), hbm_bandwidth_Bps=options["hbm_bandwidth_Bps"])
        plan = placement.best_plan_multi(lambda t, m, c, e: records(variants[(c, e)]), settings,
                                         tensor_widths=[options["tensor_width"]], microbatches=[options["microbatch"]],
                                         context_parallels=(1, 2), expert_parallels=(1, 2))
        if plan.feasible:
            seen.add((plan.context_parallel, plan.expert_parallel, plan.zero >= 2))
    assert (2, 2, False) in seen or (2, 2, True) in seen, seen
    assert (1, 2, True) in seen or (2, 2, True) in seen, seen


def test_expert_gradients_sync_over_context_ranks_and_data_ranks_t_c_e_apart():
    """Rank order tp-cp-ep-dp-pp on nodes of 2: at t1c2d2e2 the expert replicas are the two context-parallel ranks
    {0, 1} (one node, the fast level), the dense replicas all four ranks (two nodes); the EP all-to-all partners
    (ranks 0 and 2, t·c apart) are the evaluator's business, not the DP's."""
    cluster = Cluster(n_devices=4, global_batch=2, devices_per_node=2, node_bandwidth_Bps=1000.0,
                      link_bandwidth_Bps=10.0, optimizer="sgd")
    layer = {"fwd_s": 1.0, "bwd_s": 1.0, "param_bytes": 60.0, "expert_param_bytes": 40.0, "stash_bytes": 0.0,
             "output_bytes": 0.0}
    plan = placement.best_plan(records([layer]), Settings(cluster, 1, 1, 1e9, PlanSpec.parse("t1c2p1d2e2m1"),
                                                          context_parallel=2, expert_parallel=2))
    assert plan.notation == "t1c2p1d2e2m1"
    dense = oracle.allreduce_s(20.0, 2, 1000.0) + oracle.allreduce_s(10.0, 2, 10.0)  # 2 in a node, then 2 nodes
    experts = oracle.allreduce_s(40.0, 2, 1000.0)  # inside one node
    assert plan.time_breakdown_s["dp_allreduce"] == pytest.approx(dense + experts)
