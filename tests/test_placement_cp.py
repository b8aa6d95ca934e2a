"""Context parallelism ``c`` in the placement DP: exact against brute force, pinned or free, clear errors.

The brute force is written from the model's statement (placement.search's docstring and the issue), not from
the DP's code: every context-parallel degree, data-parallel degree, pipeline depth, interleave, contiguous
partition and per-stage recompute mode is enumerated on a two-level cluster (nodes of ``g`` devices), with
Megatron-Core's rank order (tensor innermost, then context, data, pipeline).
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from phaze_env import placement
from phaze_env.cluster import Cluster
from phaze_env.placement import LayerCost, Settings
from phaze_env.plan_spec import PlanSpec, PlanSyntaxError
from test_placement import records

# From the sources the placement docstrings cite: ZeRO's optimizer state as a multiple of the bf16 weights
# (SGD one bf16 momentum, Adam 12 bytes/param = 6x) and the update traffic (5x and 14x); bf16 gradients (1x).
STATE = {"sgd": 1.0, "adam": 6.0}
STEP = {"sgd": 5.0, "adam": 14.0}
DEGREES = (1, 2, 4)


# ---------------------------------------------------------------- the network, from first principles
def _levels_spanned(cluster: Cluster, ranks: list[int]) -> list[int]:
    """(positions inside a node, nodes) the ranks cover."""
    g = cluster.network.devices_per_node
    return [len({r % g for r in ranks}), len({r // g for r in ranks})]


def _level_links(cluster: Cluster):
    """(bandwidth, latency) of the intra-node level and of the inter-node level."""
    return [(cluster.network.node_bandwidth_Bps * cluster.network.node_efficiency, cluster.network.node_latency_s),
            (cluster.network.link_bandwidth_Bps * cluster.network.link_efficiency, cluster.network.link_latency_s)]


def _ring_s(cluster: Cluster, payload: float, ranks: list[int], reduce: bool) -> float:
    """Hierarchical ring all-reduce (or all-gather: half of it) over ``ranks``, level by level on the shard."""
    total, shard = 0.0, payload
    for k, (bandwidth, latency) in zip(_levels_spanned(cluster, ranks), _level_links(cluster)):
        if k > 1:
            factor = 2.0 if reduce else 1.0
            total += factor * ((k - 1) / k * shard / bandwidth + (k - 1) * latency)
            shard /= k
    return total if payload > 0 and len(ranks) > 1 else 0.0


def _send_s(cluster: Cluster, payload: float, stride: int, stages: int, t: int) -> float:
    """A pipeline send between neighbours ``stride`` apart: the slowest level any neighbour pair crosses;
    across nodes with ``t > 1``, Megatron's scatter/gather (1/t per rank, then an all-gather in the group)."""
    if stages == 1 or payload == 0:
        return 0.0
    g = cluster.network.devices_per_node
    crosses = any((i * stride) // g != ((i + 1) * stride) // g for i in range(stages - 1))
    bandwidth, latency = _level_links(cluster)[1 if crosses else 0]
    if t == 1 or cluster.network.devices_per_node == 1:
        return latency + payload / bandwidth
    return latency + payload / t / bandwidth + _ring_s(cluster, payload, list(range(t)), reduce=False)


# ---------------------------------------------------------------- brute force
def _stage(layers, group, mode, units, v, t, sp):
    total = lambda key: sum(layers[i].get(key, 0.0) for i in group)  # noqa: E731
    split = (1 - 1 / t) if sp else 0.0
    stash = total("stash_bytes") - total("replicated_stash_bytes") * split
    inputs = [layers[i - 1]["output_bytes"] if i else layers[0]["output_bytes"] for i in group]
    kept = sum(inputs) / t if sp else sum(inputs)
    largest = max(layers[i]["stash_bytes"] - layers[i].get("replicated_stash_bytes", 0.0) * split for i in group)
    extra = {"none": 0.0, "selective": total("attention_fwd_s"), "full": total("fwd_s")}[mode]
    activations = {"none": units * stash / v, "selective": units * (stash - total("attention_stash_bytes")) / v,
                   "full": largest + units * kept / v}[mode]
    return total("fwd_s") + total("bwd_s") + extra, activations, total("param_bytes")


def brute_force(variants, cluster: Cluster, hbm_bytes: float, plan: PlanSpec, hbm_bandwidth_Bps: float | None):
    """Smallest time per batch over every plan of ``variants[(t, c)]`` (microbatch 1), and its (t, c, d, p, v)."""
    best, where = math.inf, None
    N, B, optimizer = cluster.n_devices, cluster.setup.global_batch, cluster.setup.optimizer
    modes = plan.recompute_modes
    for (t, c), layers in sorted(variants.items()):
        last = len(layers) - 1
        sp = t > 1 if plan.sequence_parallel is None else plan.sequence_parallel
        for d in range(1, N // (t * c) + 1):
            replicas = d * c  # ranks holding the same weights
            shards = replicas if plan.zero == 1 else 1  # ZeRO-2/3 are tested in test_placement_zero.py
            m_r = -(-B // d)
            for p in range(1, min(len(layers), N // (t * c * d)) + 1):
                for v in (range(1, len(layers) + 1) if plan.interleave is None else (plan.interleave,)):
                    if v > 1 and (p == 1 or m_r % p):
                        continue
                    units = [min(p - k, m_r) if v == 1 else min(2 * (p - k - 1) + (v - 1) * p + 1, v * m_r)
                             for k in range(p)]
                    for cuts in itertools.combinations(range(1, len(layers)), p - 1):
                        bounds = (0, *cuts, len(layers))
                        groups = [range(bounds[k], bounds[k + 1]) for k in range(p)]
                        if any(len(group) % v for group in groups):
                            continue  # each stage's layers split into v equal chunks
                        for chosen in itertools.product(modes, repeat=p):
                            times, fits, params = [], True, []
                            for k, group in enumerate(groups):
                                time, activations, weights = _stage(layers, group, chosen[k], units[k], v, t, sp)
                                memory = weights * (2.0 + STATE[optimizer] / shards) + activations
                                fits &= memory <= hbm_bytes
                                forward = layers[group[-1]]["output_bytes"] if group[-1] < last else 0.0
                                backward = layers[group[0] - 1]["output_bytes"] if group[0] > 0 else 0.0
                                sends = sum(_send_s(cluster, payload, t * c * d, p, t) for payload in (forward, backward))
                                times.append(time + v * sends)
                                params.append(weights)
                            if not fits:
                                continue
                            largest = max(params)
                            sync = _ring_s(cluster, largest, [j * t for j in range(replicas)], reduce=True)
                            if hbm_bandwidth_Bps:
                                sync += largest * STEP[optimizer] / shards / hbm_bandwidth_Bps
                            total = (m_r + (p - 1) / v) * max(times) + sync
                            if total < best:
                                best, where = total, (t, c, d, p, v)
    return best, where


# ---------------------------------------------------------------- instances
def _instance(rng: np.random.Generator):
    """A random chain priced at every (t, c): work and activations shrink with c, a ring exchange is exposed."""
    n_layers = int(rng.integers(1, 5))
    base = []
    for _ in range(n_layers):
        stash = float(rng.integers(0, 40))
        attention = float(rng.integers(0, int(stash) + 1))
        fwd = float(rng.uniform(0.05, 2.0))
        base.append({"fwd_s": fwd, "bwd_s": float(rng.uniform(0.05, 4.0)), "param_bytes": float(rng.integers(0, 50)),
                     "stash_bytes": stash, "attention_stash_bytes": attention,
                     "replicated_stash_bytes": float(rng.integers(0, int(stash - attention) + 1)),
                     "attention_fwd_s": fwd * float(rng.uniform(0, 1)), "output_bytes": float(rng.integers(0, 30))})
    variants = {}
    for t in (1, 2):
        for c in DEGREES:
            scale = 1.0 / (t * c)
            ring = float(rng.uniform(0.0, 0.3)) * (c > 1)
            layers = []
            for layer in base:
                fwd, bwd = layer["fwd_s"] * scale + ring, layer["bwd_s"] * scale + 2 * ring
                layers.append({"fwd_s": fwd, "bwd_s": bwd, "param_bytes": layer["param_bytes"] / t,
                               "stash_bytes": layer["stash_bytes"] * scale,
                               "attention_stash_bytes": layer["attention_stash_bytes"] * scale,
                               "replicated_stash_bytes": layer["replicated_stash_bytes"] * scale,
                               "attention_fwd_s": layer["attention_fwd_s"] * scale + ring, "cp_comm_s": 3 * ring,
                               "output_bytes": layer["output_bytes"] * scale})
            variants[(t, c)] = layers
    n_devices = int(rng.choice([2, 4, 8]))
    cluster = Cluster(n_devices=n_devices, global_batch=int(rng.integers(1, 9)), optimizer=str(rng.choice(["sgd", "adam"])),
                      devices_per_node=int(rng.choice([1, 2, 4])) if n_devices > 2 else 1,
                      node_bandwidth_Bps=float(rng.choice([50.0, 500.0])), link_bandwidth_Bps=float(rng.choice([5.0, 50.0])),
                      link_latency_s=float(rng.choice([0.0, 0.01])))
    plan = PlanSpec(recompute=str(rng.choice(["none", "full", "none|full", "auto"])),
                    sequence_parallel=[None, True, False][int(rng.integers(3))],
                    zero=[0, 1][int(rng.integers(2))], interleave=[1, 1, None][int(rng.integers(3))],
                    c=None)
    hbm_bytes = float(rng.integers(20, 300))
    hbm_bandwidth = [None, 50.0][int(rng.integers(2))]
    return variants, cluster, plan, hbm_bytes, hbm_bandwidth


def _search(variants, cluster, plan, hbm_bytes, hbm_bandwidth, degrees=DEGREES):
    template = Settings(cluster, 1, 1, hbm_bytes, plan, hbm_bandwidth_Bps=hbm_bandwidth, context_parallel=degrees[0])
    return placement.best_plan_multi(lambda t, m, c: records(variants[(t, c)]), template, tensor_widths=(1, 2),
                                     microbatches=(1,), context_parallels=degrees)


@pytest.mark.parametrize("seed", range(60))
def test_free_context_parallel_matches_brute_force(seed):
    """The DP with ``c`` free equals the exhaustive search over every degree, partition and recompute mode."""
    variants, cluster, plan, hbm_bytes, hbm_bandwidth = _instance(np.random.default_rng(seed))
    expected, where = brute_force(variants, cluster, hbm_bytes, plan, hbm_bandwidth)
    found = _search(variants, cluster, plan, hbm_bytes, hbm_bandwidth)
    if math.isinf(expected):
        assert not found.feasible and found.reason
        return
    assert found.feasible, found.reason
    assert math.isclose(found.time_per_batch_s, expected, rel_tol=1e-9), (found.notation, where)
    spec = PlanSpec.parse(found.notation)
    assert spec.c == found.context_parallel and spec.devices == found.devices_used
    assert found.devices_used == found.tensor_width * found.context_parallel * found.pipeline_stages * found.data_parallel
    assert found.devices_used <= cluster.n_devices
    assert math.isclose(sum(found.time_breakdown_s.values()), found.time_per_batch_s, rel_tol=1e-9)


def test_the_instances_exercise_context_parallelism():
    """Some optimum of the property test above has c > 1 and some has c = 1 (else it proves little)."""
    chosen = set()
    for seed in range(60):
        variants, cluster, plan, hbm_bytes, hbm_bandwidth = _instance(np.random.default_rng(seed))
        expected, where = brute_force(variants, cluster, hbm_bytes, plan, hbm_bandwidth)
        if where is not None:
            chosen.add(where[1])
    assert {1} < chosen


@pytest.mark.parametrize("seed", range(20))
def test_pinned_context_parallel_matches_brute_force_at_that_degree(seed):
    variants, cluster, plan, hbm_bytes, hbm_bandwidth = _instance(np.random.default_rng(1000 + seed))
    c = DEGREES[seed % len(DEGREES)]
    pinned = PlanSpec(**{**plan.to_dict(), "c": c})
    expected, _ = brute_force({key: v for key, v in variants.items() if key[1] == c}, cluster, hbm_bytes, pinned,
                              hbm_bandwidth)
    found = _search(variants, cluster, pinned, hbm_bytes, hbm_bandwidth, degrees=(c,))
    if math.isinf(expected):
        assert not found.feasible and found.reason
    else:
        assert found.feasible and found.context_parallel == c
        assert math.isclose(found.time_per_batch_s, expected, rel_tol=1e-9)


def test_context_ranks_all_reduce_gradients_and_share_zero1_shards():
    """One layer, c = 2 on 2 devices: the gradient all-reduce runs over the 2 context ranks (same weights)
    and ZeRO-1 halves the optimizer state, exactly as two data-parallel replicas would."""
    layer = LayerCost(fwd_s=1.0, bwd_s=2.0, param_bytes=8.0, stash_bytes=0.0, output_bytes=0.0)
    cluster = Cluster(n_devices=2, global_batch=1, link_bandwidth_Bps=4.0, optimizer="adam")
    settings = Settings(cluster, 1, 1, 1e9, PlanSpec(t=1, c=2, p=1, d=1, microbatch=1, zero=1), context_parallel=2)
    plan = placement.best_plan([layer], settings)
    assert plan.feasible and plan.devices_used == 2 and plan.notation == "t1c2p1d1m1+zero1"
    assert math.isclose(plan.allreduce_s, 2 * (2 - 1) / 2 * 8.0 / 4.0)  # ring all-reduce of 8 bytes over 2 ranks
    assert plan.memory_bytes["optimizer"] == pytest.approx(8.0 * STATE["adam"] / 2)


def test_cp_comm_is_reported_inside_the_time_per_batch():
    layer = LayerCost(fwd_s=1.0, bwd_s=2.0, param_bytes=0.0, stash_bytes=0.0, output_bytes=0.0, cp_comm_s=0.5)
    settings = Settings(Cluster(n_devices=2, global_batch=3), 1, 1, 1e9, PlanSpec(c=2), context_parallel=2)
    plan = placement.best_plan([layer], settings)
    assert plan.time_breakdown_s["cp_comm"] == pytest.approx(3 * 0.5)
    assert plan.time_breakdown_s["compute"] == pytest.approx(3 * 2.5)


# ---------------------------------------------------------------- errors and notation
def test_clear_errors():
    cluster = Cluster(n_devices=4, global_batch=4)
    with pytest.raises(ValueError, match="pins c=2 but this search is at c=1"):
        Settings(cluster, 1, 1, 1e9, PlanSpec(c=2))
    with pytest.raises(ValueError, match="context_parallel must be a positive integer"):
        Settings(cluster, 1, 1, 1e9, context_parallel=0)
    with pytest.raises(ValueError, match="plan c must be a positive integer"):
        PlanSpec(c=0)
    with pytest.raises(PlanSyntaxError, match="positive"):
        PlanSpec.parse("t1c0p1d1m1")
    layer = LayerCost(fwd_s=1.0, bwd_s=1.0, param_bytes=0.0, stash_bytes=0.0, output_bytes=0.0)
    too_wide = placement.best_plan([layer], Settings(cluster, 2, 1, 1e9, PlanSpec(c=None), context_parallel=4))
    assert not too_wide.feasible and "context parallel 4 exceeds the 4 devices" in too_wide.reason
    wrong_count = placement.best_plan([layer], Settings(cluster, 1, 1, 1e9, PlanSpec(t=1, c=2, p=1, d=1), context_parallel=2))
    assert not wrong_count.feasible and "t·c·p·d = 2 devices" in wrong_count.reason
    with pytest.raises(ValueError, match="tp_comm_s \\+ cp_comm_s \\+ ep_comm_s must not exceed"):
        placement.best_plan([dataclasses.replace(layer, cp_comm_s=3.0)], Settings(cluster, 1, 1, 1e9))


@pytest.mark.parametrize("text", ["t8c8p1d1m1+rc=selective", "t2c4p2d1m1v2+sp+zero1", "t8p8d1m1", "c2", "t4+c=auto"])
def test_notation_round_trip(text):
    spec = PlanSpec.parse(text)
    assert str(spec) == text and PlanSpec.parse(str(spec)) == spec


def test_notation_c_absent_is_one_and_auto_is_free():
    assert PlanSpec.parse("t8p8d1m1").c == 1
    assert PlanSpec.parse("t8p1d1m1+c=auto").c is None
    assert PlanSpec.parse("t8c1p1d1m1") == PlanSpec.parse("t8p1d1m1")
    assert PlanSpec.parse("t8c8p1d1m1").devices == 64
    with pytest.raises(PlanSyntaxError):
        PlanSpec.parse("t8c2p1d1m1+c=auto")  # a pinned c cannot also be left to the DP


# ---------------------------------------------------------------- one rank's layers, the ring, the evaluator
from phaze_env import context_parallel  # noqa: E402
from phaze_env.evaluate import _model_flops_per_sample, evaluate, main  # noqa: E402
from phaze_env.hardware import get_preset  # noqa: E402
from phaze_env.workloads import custom_workload, get_workload, model_graph  # noqa: E402

# hidden 96 and head size 24: no activation of 48-256 tokens is square, so only (s, s) scores count as attention
TINY_LLAMA = custom_workload("tiny-llama-cp", "LlamaConfig", "LlamaForCausalLM", 256, hidden_size=96,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=344,
                             vocab_size=1000, max_position_embeddings=4096)


@pytest.mark.parametrize("c", [2, 4])
def test_a_rank_does_one_cth_of_the_work_and_stash(c):
    """Traced at s/c with the attention core over all s keys, a rank's FLOPs and stash are exactly 1/c of the layer's."""
    whole = model_graph(TINY_LLAMA, seq_len=256, microbatch=2, tensor_width=2, cache=False)
    rank = context_parallel.rank_graph(model_graph(TINY_LLAMA, seq_len=256 // c, microbatch=2, tensor_width=2,
                                                   cache=False), c)
    assert _model_flops_per_sample(rank, c) == _model_flops_per_sample(whole)
    for mine, full in zip(rank.layers, whole.layers):
        assert mine.param_bytes == full.param_bytes
        assert c * mine.activation_stash_bytes == full.activation_stash_bytes
        assert c * mine.stash_attention_bytes == full.stash_attention_bytes
        assert c * (mine.flops_fwd + mine.flops_bwd) == full.flops_fwd + full.flops_bwd
    block = next(layer for layer in rank.layers if layer.name == "block")
    assert any(map(context_parallel.is_attention_core, block.fwd.ops))


def test_ring_exposes_only_what_the_attention_block_does_not_hide():
    cluster = Cluster(n_devices=8, link_bandwidth_Bps=100.0, link_latency_s=0.5)
    send_s = 0.5 + 200.0 / 100.0  # one hop of 200 bytes
    assert context_parallel.ring_exposed_s(4.0, 200.0, cluster, 1, 4) == pytest.approx(3 * (send_s - 4.0 / 4))
    assert context_parallel.ring_exposed_s(40.0, 200.0, cluster, 1, 4) == 0.0  # 10 s blocks hide a 2.5 s send
    assert context_parallel.ring_exposed_s(4.0, 200.0, cluster, 1, 1) == 0.0
    assert context_parallel.ring_exposed_s(4.0, 0.0, cluster, 1, 4) == 0.0  # a layer without attention


def test_kv_chunk_and_degree_rules():
    llama3 = get_workload("llama3-8b")  # 8 key/value heads of 128: K and V of a token on one of 8 tensor ranks
    assert context_parallel.kv_bytes_per_token(llama3, 8, 2) == 2 * 1 * 128 * 2
    assert context_parallel.kv_bytes_per_token(llama3, 1, 2) == 2 * 8 * 128 * 2
    assert context_parallel.valid_context_parallels(4096, (1, 2, 4, 8, 16)) == [1, 2, 4, 8, 16]
    assert context_parallel.valid_context_parallels(20, (1, 2, 4, 8)) == [1, 2]
    assert "2c = 8 equal chunks" in context_parallel.context_parallel_error(100, 4)


@pytest.mark.parametrize("name, published", [("llama3-8b", 8_030_261_248), ("llama3-70b", 70_553_706_496),
                                           ("llama3-405b", 405_853_388_800)])
def test_llama3_parameters_are_exact(name, published):
    """Counted on the HF model built on meta from the registry's config (no download)."""
    import torch
    import transformers

    workload = get_workload(name)
    config = getattr(transformers, workload.config_class)(**workload.config_dict)
    with torch.device("meta"):
        model = getattr(transformers, workload.model_class)(config)
    assert sum(p.numel() for p in model.parameters()) == published == workload.published_params


def test_evaluate_prices_context_parallel_plans(fresh_cache):
    """Same model FLOPs per sample at c = 1 and c = 2; tokens count the whole sequence; the ring is reported."""
    cluster = Cluster(n_devices=4, global_batch=4, link_bandwidth_Bps=1e9)
    results = {}
    for c in (1, 2):
        plan = PlanSpec(t=1, c=c, p=1, d=4 // c, microbatch=1, recompute="none")
        results[c] = evaluate(TINY_LLAMA, get_preset("h100"), cluster, plan=plan, seq_len=256)
    for c, evaluation in results.items():
        assert evaluation.feasible, evaluation.reason
        assert evaluation.plan.devices_used == 4 and evaluation.plan.context_parallel == c
        assert evaluation.tokens_s == pytest.approx(evaluation.throughput_samples_s * 256)
        assert "cp_comm" in evaluation.time_breakdown_s
    model_flops = {c: e.mfu * e.peak_flops * 4 / e.throughput_samples_s for c, e in results.items()}
    assert model_flops[2] == pytest.approx(model_flops[1], rel=1e-12)
    assert results[2].time_breakdown_s["cp_comm"] > 0  # 1 GB/s links cannot hide the key/value hops
    assert results[2].memory_bytes["activations"] < results[1].memory_bytes["activations"]


def test_evaluate_rejects_a_degree_that_does_not_split_the_sequence(capsys):
    with pytest.raises(ValueError, match="2c = 6 equal chunks"):
        evaluate(TINY_LLAMA, get_preset("h100"), Cluster(n_devices=3), plan=PlanSpec(c=3), seq_len=256)
    with pytest.raises(SystemExit) as exit_:
        main(["--workload", "llama3-8b", "--devices", "3", "--plan", "t1c3p1d1m1"])
    assert exit_.value.code != 0
    assert "2c = 6 equal chunks" in capsys.readouterr().err.strip().splitlines()[-1]
