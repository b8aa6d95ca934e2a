"""Tests of the placement DP against an independent brute force, closed forms and properties."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import numpy as np
import pytest
from collective_oracle import allgather_s, allreduce_s, p2p_s
from dp_overlap_oracle import delayed_forward_s, exposed_backward_s
from hypothesis import example, given, settings
from hypothesis import strategies as st

from phaze_env import placement
from phaze_env.cluster import Cluster
from phaze_env.placement import LayerCost, Plan, Settings, TooManyDownsetsError, microbatches_per_replica
from phaze_env.plan_spec import PlanRules, PlanSpec

# Written from the docstrings' sources, not imported: ZeRO's 2 + 2 + 12 bytes/param for Adam (state = 6x
# the bf16 weights), one bf16 momentum for SGD; update traffic 28 and 10 bytes/param (14x and 5x).
# ZeRO stage k shards over the d replicas: 1 the optimizer state, 2 also the gradients, 3 also the weights.
OPTIMIZER_FACTOR = {"sgd": 1.0, "adam": 6.0}
STEP_FACTOR = {"sgd": 5.0, "adam": 14.0}
GB = 1e9
CLUSTER_KEYS = ("n_devices", "global_batch", "link_bandwidth_Bps", "link_latency_s", "optimizer")
PLAN_KEYS = ("recompute", "sequence_parallel", "zero", "interleave")


def _settings(n_devices, global_batch, tensor_width, microbatch, hbm_bytes, link_bandwidth_Bps, link_latency_s=0.0,
              optimizer="sgd", allow_recompute=True, recompute=None, sequence_parallel=False, zero=0,
              interleave=1, shard_group=None, hybrid_allreduce_overlapped=True, hybrid_allreduce_exposure=0.0,
              rules=None, dp_comm_overlap=False, **rest):
    """The value objects for the flat keyword options these tests draw (old ``allow_recompute`` = none|full)."""
    modes = recompute if recompute is not None else ("none|full" if allow_recompute else "none")
    cluster = Cluster(n_devices=n_devices, global_batch=global_batch, link_bandwidth_Bps=link_bandwidth_Bps,
                      link_latency_s=link_latency_s, optimizer=optimizer,
                      hybrid_allreduce_overlapped=hybrid_allreduce_overlapped,
                      hybrid_allreduce_exposure=hybrid_allreduce_exposure, plan_rules=rules or PlanRules(),
                      dp_comm_overlap=dp_comm_overlap)
    plan = PlanSpec(recompute=modes, sequence_parallel=sequence_parallel, zero=zero, interleave=interleave,
                    shard_group=shard_group)
    return Settings(cluster, tensor_width, microbatch, hbm_bytes, plan, **rest)


def records(layers):
    """The placement's layer records of these tests' layer dicts (the brute forces below read the dicts)."""
    return [LayerCost.from_dict(layer) for layer in layers]


def best_plan(layers, cache=False, **options):
    return placement.best_plan(records(layers), _settings(**options), cache=cache)


def best_plan_dag(layers, edges, max_downsets=2048, **options):
    return placement.best_plan_dag(records(layers), edges, _settings(**options), max_downsets=max_downsets)


def best_plan_multi(layers, tensor_widths=None, microbatches=None, hbm_bytes=(), **options):
    hbm = [hbm_bytes] if isinstance(hbm_bytes, float) else list(hbm_bytes)
    template = _settings(tensor_width=1, microbatch=1, hbm_bytes=hbm[0] if hbm else 1.0, **options)
    variants = ((lambda *key: records(layers(*key))) if callable(layers)
                else {key: records(chain) for key, chain in layers.items()})
    return placement.best_plan_multi(variants, template, tensor_widths=tensor_widths, microbatches=microbatches,
                                     hbm_bytes=hbm or None)


# ---------------------------------------------------------------- brute force, written from the issue text
def _inputs(layers):
    return [layer.get("input_bytes", layers[i - 1]["output_bytes"] if i else layer["output_bytes"])
            for i, layer in enumerate(layers)]


def _compositions(count, parts):
    """Every way to cut ``range(count)`` into ``parts`` contiguous non-empty groups."""
    for cuts in itertools.combinations(range(1, count), parts - 1):
        bounds = (0, *cuts, count)
        yield [tuple(range(bounds[k], bounds[k + 1])) for k in range(parts)]


def _stage_cost(groups, k, mode, units, info, opts, d, v, zero=0):
    """(time, memory, param bytes) of stage ``k`` given its layers, from first principles.

    ``units``: activation units in flight (a unit is 1/v of a microbatch). Memory: weights (ZeRO-3: /d) +
    gradients (ZeRO ≥ 2: /d) + optimizer state (ZeRO ≥ 1: /d) + ZeRO buffers (ZeRO-2: the largest layer's
    gradient, ZeRO-3: also two layers' gathered weights) + activations: none keeps the stash, selective the
    stash without the attention core, full every layer's input plus its largest layer's stash (rebuilt one
    layer at a time); sequence parallelism splits the non-tensor-parallel stash and the inputs t ways.
    Time: ZeRO-2/3 add, per layer and microbatch, what of its reduce-scatter (and ZeRO-3's two all-gathers)
    its forward and backward do not cover, the backward's with the layer's rerun (its attention core under selective
    recompute, its forward under full) as cover too. A hybrid shard group ``h`` (``opts["shard_group"]``, FSDP's HSDP) shards
    the state ``h`` ways, gathers and scatters over ``h`` ranks and all-reduces the ``1/h`` gradient shard over the
    ``d/h`` groups in the backward (or once after it, when ``opts["hybrid_allreduce_overlapped"]`` is False:
    :func:`_batch_sync_s`).
    """
    layers, stage = info["layers"], groups[k]
    total = lambda key: sum(layers[i].get(key, 0.0) for i in stage)  # noqa: E731
    fwd, bwd, params = total("fwd_s"), total("bwd_s"), total("param_bytes")
    t = opts["tensor_width"]
    sp = opts.get("sequence_parallel", False)
    sp = t > 1 if sp is None else sp
    stash = total("stash_bytes") - (total("replicated_stash_bytes") * (1 - 1 / t) if sp else 0.0)
    sent_forward, sent_backward, kept_input = info["boundary"](groups, k)
    kept_input = kept_input / t if sp else kept_input
    layer_stash = [layers[i]["stash_bytes"] - (layers[i].get("replicated_stash_bytes", 0.0) * (1 - 1 / t) if sp else 0.0)
                   for i in stage]
    bw, lat = opts["link_bandwidth_Bps"], opts.get("link_latency_s", 0.0)
    rerun = sum(layers[i].get("recompute_fwd_s", layers[i]["fwd_s"]) for i in stage)  # full: what it reruns
    extra = {"none": 0.0, "selective": total("attention_fwd_s"), "full": rerun}[mode]
    time = fwd + bwd + extra + v * (p2p_s(sent_forward, bw, lat) + p2p_s(sent_backward, bw, lat))
    h = opts.get("shard_group") or d
    layer_rerun = {"none": lambda i: 0.0, "selective": lambda i: layers[i].get("attention_fwd_s", 0.0),
                   "full": lambda i: layers[i].get("recompute_fwd_s", layers[i]["fwd_s"])}[mode]
    for i in stage if zero >= 2 else ():
        cover = layers[i]["bwd_s"] + layer_rerun(i)  # the backward pass and the layer's rerun before it
        gather = allgather_s(layers[i]["param_bytes"], h, bw, lat)  # weights; the gradient has as many bytes
        shard_allreduce = (allreduce_s(layers[i]["param_bytes"] / h, d // h, bw, lat)
                           if opts.get("hybrid_allreduce_overlapped", True) and h < d else 0.0)
        reduce = gather + shard_allreduce
        if zero == 2:
            time += max(0.0, reduce - cover)
        else:
            time += max(0.0, gather - layers[i]["fwd_s"]) + max(0.0, gather + reduce - cover)
            time += opts.get("hybrid_allreduce_exposure", 0.0) * shard_allreduce  # the share the backward does not hide
    activations = {"none": units * stash / v, "selective": units * (stash - total("attention_stash_bytes")) / v,
                   "full": max(layer_stash) + units * kept_input / v}[mode]
    weights, gradients, state = (params / (h if zero >= stage else 1) for stage in (3, 2, 1))
    largest_layer = max(layers[i]["param_bytes"] for i in stage)
    buffers = {0: 0.0, 1: 0.0, 2: largest_layer, 3: 3 * largest_layer}[zero]
    memory = weights + gradients + OPTIMIZER_FACTOR[opts.get("optimizer", "sgd")] * state + buffers + activations
    return time, memory, params


def _zero_stages(opts, d):
    """The ZeRO stages a plan with ``d`` replicas may use (auto: every stage the stack runs, 0–3 by default, each
    weighed; one replica has nothing to shard)."""
    zero = opts.get("zero", 0)
    rules = opts.get("rules") or PlanRules()
    return (0,) if d == 1 else rules.zero_stages if zero is None else (zero,)


def _batch_sync_s(largest, d, zero, opts):
    """Once per batch: all-reduce (ZeRO-0/1) or all-gather of the updated weights (ZeRO-2), + the optimizer step."""
    bw, lat = opts["link_bandwidth_Bps"], opts.get("link_latency_s", 0.0)
    sync = {0: allreduce_s, 1: allreduce_s, 2: allgather_s}[zero](largest, d, bw, lat) if zero < 3 else 0.0
    if zero == 3 and opts.get("shard_group") and not opts.get("hybrid_allreduce_overlapped", True):
        sync += allreduce_s(largest / opts["shard_group"], d // opts["shard_group"], bw, lat)  # the shards, after the flush
    if opts.get("hbm_bandwidth_Bps"):
        shards = (opts.get("shard_group") or d) if zero >= 1 else 1
        sync += largest * STEP_FACTOR[opts.get("optimizer", "sgd")] / shards / opts["hbm_bandwidth_Bps"]
    return sync


def bucket_bytes(d: int) -> float:
    """Megatron-Core's default gradient bucket, max(40M, 1M·dp_size) parameters, as bf16 weight bytes."""
    return 2 * max(40e6, 1e6 * d)


def _overlapped_sync_s(groups, layers, d, zero, p, v, opts):
    """Once per batch under ``dp_comm_overlap`` (ZeRO-0/1): the largest over the stages of what its buckets' collectives
    leave exposed after its last backward pass (ZeRO-0: all-reduce; ZeRO-1: reduce-scatter) and before its first
    forward pass (ZeRO-1: the weights' all-gather), its buckets cut across its layers, simulated
    (``dp_overlap_oracle``), + its optimizer step."""
    bw, lat = opts["link_bandwidth_Bps"], opts.get("link_latency_s", 0.0)
    grad = allreduce_s if zero == 0 else allgather_s  # a ring reduce-scatter takes an all-gather's time
    worst = 0.0
    for group in groups:
        params = [layers[i]["param_bytes"] for i in group]
        exposed = exposed_backward_s([(layers[i]["bwd_s"], (size,)) for size, i in zip(params, group)],
                                     [lambda size: grad(size, d, bw, lat)], bucket_bytes(d), p, v)
        if zero == 1:
            exposed += delayed_forward_s([(layers[i]["fwd_s"], (size,)) for size, i in zip(params, group)],
                                         [lambda size: allgather_s(size, d, bw, lat)], bucket_bytes(d), p, v)
        step = (sum(params) * STEP_FACTOR[opts.get("optimizer", "sgd")] / (d if zero else 1) / opts["hbm_bandwidth_Bps"]
                if opts.get("hbm_bandwidth_Bps") else 0.0)
        worst = max(worst, exposed + step)
    return worst


def _modes(opts):
    if opts.get("recompute") is not None:
        text = opts["recompute"]
        return ("none", "selective", "full") if text == "auto" else tuple(text.split("|"))
    return ("none", "full") if opts.get("allow_recompute", True) else ("none",)


def _brute_force(partitions_for, info, opts):
    """Smallest time per batch over every (d, p, v, partition, recompute mode vector)."""
    N, t, B, m = opts["n_devices"], opts["tensor_width"], opts["global_batch"], opts["microbatch"]
    interleave = opts.get("interleave", 1)
    rules = opts.get("rules") or PlanRules()
    layer_count = len(info["layers"])  # every layer is a transformer layer here
    best = math.inf
    partitions = {}  # p -> every partition into p stages (enumerated once, reused for every d)
    for d in range(1, N // t + 1):
        if opts.get("shard_group") and d % opts["shard_group"]:
            continue  # hybrid shard groups tile the replicas
        if rules.whole_microbatches and B % (d * m):
            continue  # the stack runs whole microbatches only
        m_r = -(-B // (d * m))
        for p in range(1, min(len(info["layers"]), N // (d * t)) + 1):
            if p > 1 and not rules.pipeline:
                break
            if p not in partitions:
                partitions[p] = list(partitions_for(p))
            for v in (range(1, len(info["layers"]) + 1) if interleave is None else (interleave,)):
                # Megatron's interleaved schedule: enough stages, and a microbatch group N that Megatron-Core's
                # schedules.py accepts (N in [p, m_r], m_r mod N 0 or >= p; the least: each extra one is one more
                # chunk in flight); Megatron-LM (no groups): N = p, m_r a multiple of p
                groups_n = [n for n in range(p, m_r + 1) if m_r % n == 0 or m_r % n >= p]
                group = (groups_n[0] if groups_n else None) if rules.microbatch_groups else (None if m_r % p else p)
                if v > 1 and (p < rules.interleave_min_stages or group is None):
                    continue
                units = [min(p - k, m_r) if v == 1 else min(2 * (p - k - 1) + (v - 1) * group + 1, v * m_r)
                         for k in range(p)]
                for groups, zero in itertools.product(partitions[p], _zero_stages(opts, d)):
                    if any(len(group) % v for group in groups):
                        continue  # a stage's layers split into v equal chunks (every layer counts as one here)
                    if rules.uniform_stages and any(len(group) * p != layer_count for group in groups):
                        continue  # every stage L/p layers
                    for modes in itertools.product(_modes(opts), repeat=p):
                        costs = [_stage_cost(groups, k, modes[k], units[k], info, opts, d, v, zero) for k in range(p)]
                        if any(memory > opts["hbm_bytes"] for _, memory, _ in costs):
                            continue
                        if opts.get("dp_comm_overlap") and zero <= 1:
                            sync = _overlapped_sync_s(groups, info["layers"], d, zero, p, v, opts)
                        else:
                            sync = _batch_sync_s(max(params for _, _, params in costs), d, zero, opts)
                        best = min(best, (m_r + (p - 1) / v) * max(time for time, _, _ in costs) + sync)
    return best


def brute_force_chain(layers, **opts):
    inputs = _inputs(layers)
    last = len(layers) - 1

    def boundary(groups, k):
        first, final = groups[k][0], groups[k][-1]
        return (layers[final]["output_bytes"] if final < last else 0.0, inputs[first] if first > 0 else 0.0,
                sum(inputs[i] for i in groups[k]))  # full recompute keeps every layer's input

    return _brute_force(lambda p: _compositions(len(layers), p), {"layers": layers, "boundary": boundary}, opts)


def _downset_chains(count, edges, parts):
    """Every sequence of ``parts`` non-empty stages whose prefixes are downsets of the DAG."""
    predecessors = {v: {u for u, w in edges if w == v} for v in range(count)}

    def extend(done, left):
        remaining = [v for v in range(count) if v not in done]
        if left == 1:
            yield [tuple(remaining)]
            return
        for size in range(1, len(remaining)):
            for stage in itertools.combinations(remaining, size):
                grown = done | set(stage)
                if all(predecessors[v] <= grown for v in stage):
                    for rest in extend(grown, left - 1):
                        yield [stage, *rest]

    yield from extend(set(), parts)


def brute_force_dag(layers, edges, **opts):
    successors = {u: {w for v, w in edges if v == u} for u in range(len(layers))}
    predecessors = {v: {u for u, w in edges if w == v} for v in range(len(layers))}

    def boundary(groups, k):
        stage, before = set(groups[k]), {v for g in groups[:k] for v in g}
        sent_forward = sum(layers[u]["output_bytes"] for u in stage if successors[u] - stage - before)
        received = {u for v in stage for u in predecessors[v] if u not in stage}
        sent_backward = sum(layers[u]["output_bytes"] for u in received)
        kept = sum(layers[v].get("input_bytes", layers[v]["output_bytes"]) if not predecessors[v]
                   else sum(layers[u]["output_bytes"] for u in predecessors[v]) for v in stage)
        return sent_forward, sent_backward, kept

    return _brute_force(lambda p: _downset_chains(len(layers), edges, p), {"layers": layers, "boundary": boundary}, opts)


# ---------------------------------------------------------------- instances
def _close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


layer_strategy = st.fixed_dictionaries(
    {
        "fwd_s": st.floats(0.0, 2.0),
        "bwd_s": st.floats(0.01, 4.0),
        "param_bytes": st.integers(0, 50).map(float),
        "stash_bytes": st.integers(0, 40).map(float),
        "output_bytes": st.integers(0, 30).map(float),
    },
    optional={"input_bytes": st.integers(0, 30).map(float)},
)

options_strategy = st.fixed_dictionaries(
    {
        "n_devices": st.integers(1, 16),
        "tensor_width": st.sampled_from([1, 2]),
        "global_batch": st.integers(1, 16),
        "microbatch": st.integers(1, 4),
        "hbm_bytes": st.integers(20, 400).map(float),
        "link_bandwidth_Bps": st.sampled_from([math.inf, 10.0, 100.0]),
        "link_latency_s": st.sampled_from([0.0, 0.01]),
        "allow_recompute": st.booleans(),
        "optimizer": st.sampled_from(["sgd", "adam"]),
    }
)


def _check_against(expected, plan):
    if math.isinf(expected):
        assert not plan.feasible and plan.reason and plan.throughput_samples_s == 0.0
    else:
        assert plan.feasible, plan.reason
        assert _close(plan.time_per_batch_s, expected), (plan.time_per_batch_s, expected)


@settings(max_examples=60, deadline=None)
@given(st.lists(layer_strategy, min_size=1, max_size=6), options_strategy)
def test_chain_matches_brute_force(layers, options):
    plan = best_plan(layers, **options)
    _check_against(brute_force_chain(layers, **options), plan)
    if plan.feasible:
        assert plan.data_parallel * plan.pipeline_stages * plan.tensor_width <= options["n_devices"]
        assert _close(plan.throughput_samples_s, options["global_batch"] / plan.time_per_batch_s)


@st.composite
def knob_layers(draw, max_size=5):
    """Layers with attention-core and replicated shares of the stash (what the new knobs act on)."""
    layers = []
    for _ in range(draw(st.integers(1, max_size))):
        stash = float(draw(st.integers(0, 40)))
        attention = float(draw(st.integers(0, int(stash))))
        fwd = draw(st.floats(0.0, 2.0))
        attention_fwd = fwd * draw(st.floats(0.0, 1.0))
        layer = {"fwd_s": fwd, "bwd_s": draw(st.floats(0.01, 4.0)),
                 "param_bytes": float(draw(st.integers(0, 50))), "stash_bytes": stash,
                 "attention_stash_bytes": attention,
                 "replicated_stash_bytes": float(draw(st.integers(0, int(stash - attention)))),
                 "attention_fwd_s": attention_fwd, "output_bytes": float(draw(st.integers(0, 30)))}
        if draw(st.booleans()):  # full recompute reruns only part of it (an embedding or LM head: none)
            layer["recompute_fwd_s"] = attention_fwd + (fwd - attention_fwd) * draw(st.floats(0.0, 1.0))
        layers.append(layer)
    return layers


knob_options = st.fixed_dictionaries(
    {
        "n_devices": st.integers(1, 8),
        "tensor_width": st.sampled_from([1, 2]),
        "global_batch": st.integers(1, 12),
        "microbatch": st.integers(1, 3),
        "hbm_bytes": st.integers(20, 400).map(float),
        "link_bandwidth_Bps": st.sampled_from([math.inf, 10.0, 100.0]),
        "link_latency_s": st.sampled_from([0.0, 0.01]),
        "optimizer": st.sampled_from(["sgd", "adam"]),
        "recompute": st.sampled_from(["none", "selective", "full", "none|full", "auto"]),
        "sequence_parallel": st.sampled_from([None, True, False]),
        "zero": st.sampled_from([None, 0, 1, 2, 3]),
        "interleave": st.sampled_from([1, 2, None]),
        "hbm_bandwidth_Bps": st.sampled_from([None, 50.0]),
    }
)


@settings(max_examples=200, deadline=None)
@given(knob_layers(), knob_options.map(lambda options: {**options, "zero": options["zero"] if options["zero"] in (0, 1)
                                                                 else None, "dp_comm_overlap": True,
                                                        "rules": PlanRules(zero_stages=(0, 1))}))
def test_chain_with_overlapped_data_parallel_collectives_matches_brute_force(layers, options):
    """``dp_comm_overlap``: every stage's exposed collectives (a matrix of its own, not a function of its bytes) walked
    exactly by the DP, against the brute force's event simulation of each stage's buckets."""
    plan = best_plan(layers, **options)
    _check_against(brute_force_chain(layers, **options), plan)
    if plan.feasible:
        assert math.isclose(sum(plan.time_breakdown_s.values()), plan.time_per_batch_s, rel_tol=1e-9)


@settings(max_examples=200, deadline=None)
@given(knob_layers(), knob_options)
def test_chain_with_every_knob_matches_brute_force(layers, options):
    """Recompute modes, sequence parallelism, ZeRO 0–3, interleaving and the optimizer step: still exact."""
    plan = best_plan(layers, **options)
    _check_against(brute_force_chain(layers, **options), plan)
    if plan.feasible:
        assert math.isclose(sum(plan.time_breakdown_s.values()), plan.time_per_batch_s, rel_tol=1e-9)
        assert PlanSpec.parse(plan.notation).devices == plan.devices_used


def test_a_dag_layer_is_not_declared_infeasible_by_an_input_it_does_not_checkpoint():
    """Found by Hypothesis: in a DAG only sources checkpoint their own ``input_bytes``; layer 1 (fed by layer 0's
    0-byte output) fits 264 B of Adam state + 1 B of rebuilt stash in 265 B, so the early per-layer check
    must not add its 1-byte ``input_bytes`` (it used to, and called the model infeasible)."""
    empty = {"fwd_s": 0.0, "bwd_s": 1.0, "param_bytes": 0.0, "stash_bytes": 0.0, "output_bytes": 0.0}
    layers = [dict(empty), {"fwd_s": 0.0, "bwd_s": 1.0, "param_bytes": 33.0, "stash_bytes": 1.0, "output_bytes": 1.0},
              dict(empty), dict(empty)]
    edges = [(0, 1), (0, 2), (1, 3), (2, 3)]
    options = dict(n_devices=2, tensor_width=1, global_batch=1, microbatch=1, hbm_bytes=265.0,
                   link_bandwidth_Bps=math.inf, optimizer="adam", recompute="full", zero=0)
    expected = brute_force_dag(layers, edges, **options)
    assert math.isfinite(expected)
    _check_against(expected, best_plan_dag(layers, edges, **options))


@settings(max_examples=80, deadline=None)
@given(knob_layers(), knob_options, st.sampled_from([0.5, 1.0, 1.0 + 1e-13, 1.5]))
def test_must_beat_returns_the_optimum_exactly_when_it_is_better(layers, options, ratio):
    """``must_beat`` (branch and bound across searches): None unless the search's own optimum beats the
    incumbent by the tie rule, and then that very optimum."""
    own = best_plan(layers, **options)
    if not own.feasible:
        return
    incumbent = dataclasses.replace(own, throughput_samples_s=own.throughput_samples_s / ratio)
    pruned = placement.best_plan(records(layers), _settings(**options), must_beat=incumbent)
    if placement.better(own, incumbent):
        assert pruned is not None and pruned.throughput_samples_s == own.throughput_samples_s
        assert pruned.notation == own.notation
    else:
        assert pruned is None


def test_eight_layers_sixteen_devices_matches_brute_force():
    layers = [{"fwd_s": 1.0 + (i % 3) * 0.5, "bwd_s": 2.0 + (i % 2), "param_bytes": 10.0 + 3 * i,
               "stash_bytes": 8.0 + (i * 5) % 7, "output_bytes": 4.0 + i % 4} for i in range(8)]
    for hbm in (60.0, 120.0, 400.0):
        options = dict(n_devices=16, tensor_width=1, global_batch=16, microbatch=1, hbm_bytes=hbm,
                       link_bandwidth_Bps=50.0, link_latency_s=0.001)
        _check_against(brute_force_chain(layers, **options), best_plan(layers, **options))


def test_allreduce_tradeoff_is_exact():
    """The min-max stage time alone picks a plan with a larger all-reduce; the exact optimum is 41 s, not 41.33 s."""
    shapes = [(1.0, 1.0, 100.0), (2.0, 2.0, 100.0), (0.0, 1.0, 200.0), (1.0, 3.0, 400.0)]
    layers = [{"fwd_s": f, "bwd_s": b, "param_bytes": w, "stash_bytes": 0.0, "output_bytes": 0.0} for f, b, w in shapes]
    options = dict(n_devices=8, tensor_width=1, global_batch=8, microbatch=1, hbm_bytes=1e9, link_bandwidth_Bps=30.0)
    plan = best_plan(layers, **options)
    assert brute_force_chain(layers, **options) == pytest.approx(41.0)
    _check_against(41.0, plan)


dag_cases = [
    # diamond: 0 -> {1, 2} -> 3
    (4, [(0, 1), (0, 2), (1, 3), (2, 3)]),
    # two branches of two layers joined at the end
    (5, [(0, 1), (2, 3), (1, 4), (3, 4)]),
    # a chain given as a DAG
    (4, [(0, 1), (1, 2), (2, 3)]),
]


def _zero_fwd_layer(bwd_s, param_bytes, stash_bytes, output_bytes):
    return {"fwd_s": 0.0, "bwd_s": bwd_s, "param_bytes": param_bytes, "stash_bytes": stash_bytes,
            "output_bytes": output_bytes}


# Two branches 0->1 and 2->3 joined at 4. Only stages {0,1,2} | {3,4} reach 1.5 s per microbatch; the
# first stage fits only by recomputing: 3·85 + 2·(inputs of sources 0 and 2) + 27 <= 282, i.e. the
# sources' inputs must be 0 (their own outputs). The DP used to give source 2 the output of layer 1
# (the previous layer in list order, on the other branch): 284 > 282, and it returned 6.0 s, not 4.5 s.
TWO_BRANCH_SOURCE_INPUT = (
    dag_cases[1],
    [_zero_fwd_layer(0.5, 45.0, 27.0, 0.0), _zero_fwd_layer(0.5, 40.0, 0.0, 1.0), _zero_fwd_layer(0.5, 0.0, 0.0, 0.0),
     _zero_fwd_layer(1.0, 0.0, 0.0, 0.0), _zero_fwd_layer(0.5, 0.0, 1.0, 0.0)],
    {"n_devices": 2, "tensor_width": 1, "global_batch": 2, "microbatch": 1, "hbm_bytes": 282.0,
     "link_bandwidth_Bps": math.inf, "link_latency_s": 0.0, "allow_recompute": True, "optimizer": "sgd"},
)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(dag_cases), st.lists(layer_strategy, min_size=5, max_size=5), options_strategy)
@example(*TWO_BRANCH_SOURCE_INPUT)
def test_dag_matches_brute_force(case, layers, options):
    """``input_bytes`` (when drawn) matters only for graph sources; absent, a source's input is its own output."""
    count, edges = case
    layers = layers[:count]
    _check_against(brute_force_dag(layers, edges, **options), best_plan_dag(layers, edges, **options))


def test_dag_source_input_defaults_to_its_own_output():
    case, layers, options = TWO_BRANCH_SOURCE_INPUT
    plan = best_plan_dag(layers, case[1], **options)
    assert plan.feasible and _close(plan.time_per_batch_s, 4.5), plan
    assert plan.stage_layers == ((0, 1, 2), (3, 4)) and plan.recompute == (True, False)
    assert plan.memory_bytes["activations"] == 27.0  # 2 microbatches · (0 + 0) source input + one stash


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(dag_cases), st.lists(layer_strategy, min_size=5, max_size=5), options_strategy,
       st.permutations(range(5)))
@example(*TWO_BRANCH_SOURCE_INPUT, [2, 3, 0, 1, 4])
def test_dag_plan_does_not_depend_on_layer_numbering(case, layers, options, permutation):
    """Renumbering the layers (and the edges with them) is the same graph: same best time per batch."""
    count, edges = case
    label = [v for v in permutation if v < count]  # layer i gets the new number label[i]
    renumbered = [None] * count
    for i, layer in enumerate(layers[:count]):
        renumbered[label[i]] = layer
    renumbered_edges = [(label[u], label[v]) for u, v in edges]
    original = best_plan_dag(layers[:count], edges, **options)
    other = best_plan_dag(renumbered, renumbered_edges, **options)
    assert original.feasible == other.feasible
    if original.feasible:
        assert _close(original.time_per_batch_s, other.time_per_batch_s)


@settings(max_examples=20, deadline=None)
@given(st.lists(layer_strategy, min_size=1, max_size=6), options_strategy)
def test_dag_path_on_a_chain_equals_chain_path(layers, options):
    layers = [{k: v for k, v in layer.items() if k != "input_bytes"} for layer in layers]
    edges = [(i, i + 1) for i in range(len(layers) - 1)]
    chain, dag = best_plan(layers, **options), best_plan_dag(layers, edges, **options)
    assert chain.feasible == dag.feasible
    if chain.feasible:
        assert _close(chain.time_per_batch_s, dag.time_per_batch_s)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(dag_cases), knob_layers(max_size=5).filter(lambda layers: len(layers) >= 4), knob_options)
def test_dag_with_every_knob_matches_brute_force(case, layers, options):
    count, edges = case
    layers = (layers * 2)[:count]
    _check_against(brute_force_dag(layers, edges, **options), best_plan_dag(layers, edges, **options))


# ---------------------------------------------------------------- closed forms and breakdown
@pytest.mark.parametrize("count, devices, batch, micro", [(8, 8, 64, 2), (12, 16, 40, 1), (5, 3, 7, 2)])
def test_identical_layers_without_communication_match_closed_form(count, devices, batch, micro):
    layer = {"fwd_s": 0.5, "bwd_s": 1.0, "param_bytes": 100.0, "stash_bytes": 10.0, "output_bytes": 50.0}
    plan = best_plan([dict(layer) for _ in range(count)], n_devices=devices, tensor_width=1, global_batch=batch,
                     microbatch=micro, hbm_bytes=1e12, link_bandwidth_Bps=math.inf)
    p, m_r = plan.pipeline_stages, plan.microbatches_per_replica
    assert m_r == microbatches_per_replica(batch, plan.data_parallel, micro)
    largest = max(last - first + 1 for first, last in plan.stage_bounds)
    assert math.isclose(plan.time_per_batch_s, (m_r + p - 1) * largest * 1.5)
    assert math.isclose(plan.bubble_fraction, (p - 1) / (m_r + p - 1))
    assert plan.allreduce_s == 0.0 and plan.p2p_s == 0.0
    expected = min((-(-batch // (d * micro)) + q - 1) * 1.5 * -(-count // q)
                   for d in range(1, devices + 1) for q in range(1, min(count, devices // d) + 1))
    assert math.isclose(plan.time_per_batch_s, expected)


def test_plan_breakdown_is_consistent():
    layers = [{"fwd_s": 0.03, "bwd_s": 0.06, "param_bytes": 4e9, "stash_bytes": 3e9, "output_bytes": 1e8}
              for _ in range(16)]
    plan = best_plan(layers, n_devices=64, tensor_width=1, global_batch=256, microbatch=1, hbm_bytes=64e9,
                     link_bandwidth_Bps=50e9, link_latency_s=1e-5, seq_len=2048, model_flops_per_sample=1e15,
                     peak_flops=275e12)
    assert plan.feasible
    slowest = max(plan.stage_times_s)
    slots = plan.microbatches_per_replica + plan.pipeline_stages - 1
    assert math.isclose(plan.time_per_batch_s, slots * slowest + plan.allreduce_s)
    assert plan.allreduce_s == max(plan.stage_allreduce_s) > 0
    assert plan.p2p_s > 0
    memory = plan.memory_bytes
    assert memory["weights"] == memory["gradients"] == memory["optimizer"]  # sgd: momentum = weights
    assert math.isclose(memory["total"], sum(memory[k] for k in ("weights", "gradients", "optimizer", "activations")))
    assert memory["total"] == max(plan.stage_memory_bytes) <= 64e9
    covered = [i for first, last in plan.stage_bounds for i in range(first, last + 1)]
    assert covered == list(range(16))
    assert len(plan.recompute) == len(plan.stage_times_s) == plan.pipeline_stages
    assert math.isclose(plan.tokens_s, plan.throughput_samples_s * 2048)
    assert math.isclose(plan.mfu, 1e15 * plan.throughput_samples_s / (275e12 * plan.devices_used))
    json.dumps(plan.to_dict())


def test_recompute_is_used_when_stashing_does_not_fit():
    layers = [{"fwd_s": 1.0, "bwd_s": 2.0, "param_bytes": 10.0, "stash_bytes": 100.0, "output_bytes": 1.0}
              for _ in range(2)]
    options = dict(n_devices=2, tensor_width=1, global_batch=8, microbatch=1, hbm_bytes=200.0,
                   link_bandwidth_Bps=math.inf)
    # Stashing never fits (two stages: 30 + 2·100 > 200; one: 60 + 200 > 200). Recomputing, one stage on
    # two replicas keeps both layer inputs (2·1) and one layer's stash (100): 60 + 102 ≤ 200, 4 × 8 s =
    # 32 s, faster than two stages (9 × 4 s).
    allowed = best_plan(layers, **options)
    assert allowed.feasible and allowed.recompute == (True,) and allowed.notation == "t1p1d2m1+rc=full"
    assert allowed.stage_times_s == (8.0,) and allowed.time_per_batch_s == 32.0
    assert allowed.memory_bytes["activations"] == 102.0
    forbidden = best_plan(layers, allow_recompute=False, **options)
    assert not forbidden.feasible and forbidden.reason


def test_adam_needs_more_memory_than_sgd():
    layers = [{"fwd_s": 1.0, "bwd_s": 2.0, "param_bytes": 100.0, "stash_bytes": 1.0, "output_bytes": 1.0}]
    options = dict(n_devices=1, tensor_width=1, global_batch=1, microbatch=1, hbm_bytes=500.0,
                   link_bandwidth_Bps=math.inf)
    assert best_plan(layers, optimizer="sgd", **options).memory_bytes["optimizer"] == 100.0
    adam = best_plan(layers, optimizer="adam", **options)
    assert not adam.feasible and "layer 0" in adam.reason


# ---------------------------------------------------------------- infeasible and invalid inputs
def test_layer_that_never_fits_gives_infeasible_plan():
    layers = [{"fwd_s": 1.0, "bwd_s": 1.0, "param_bytes": 10 * GB, "stash_bytes": 5 * GB, "output_bytes": 1.0}] * 3
    plan = best_plan(layers, n_devices=8, tensor_width=1, global_batch=8, microbatch=1, hbm_bytes=32 * GB,
                     link_bandwidth_Bps=4e9)
    assert isinstance(plan, Plan) and not plan.feasible
    assert "layer 0" in plan.reason and plan.throughput_samples_s == 0.0 and math.isinf(plan.time_per_batch_s)
    json.dumps(plan.to_dict())


def test_tensor_width_larger_than_cluster_is_infeasible():
    layers = [{"fwd_s": 1.0, "bwd_s": 1.0, "param_bytes": 1.0, "stash_bytes": 1.0, "output_bytes": 1.0}]
    plan = best_plan(layers, n_devices=4, tensor_width=8, global_batch=8, microbatch=1, hbm_bytes=1e9,
                     link_bandwidth_Bps=1e9)
    assert not plan.feasible and "tensor width" in plan.reason


GOOD_LAYER = {"fwd_s": 1.0, "bwd_s": 1.0, "param_bytes": 1.0, "stash_bytes": 1.0, "output_bytes": 1.0}
GOOD = dict(n_devices=4, tensor_width=1, global_batch=8, microbatch=1, hbm_bytes=1e9, link_bandwidth_Bps=1e9)


@pytest.mark.parametrize(
    "layers, overrides, message",
    [
        ([GOOD_LAYER], {"n_devices": 0}, "n_devices"),
        ([GOOD_LAYER], {"n_devices": -3}, "n_devices"),
        ([GOOD_LAYER], {"global_batch": 0}, "global_batch"),
        ([GOOD_LAYER], {"microbatch": 0}, "microbatch"),
        ([GOOD_LAYER], {"tensor_width": 1.5}, "tensor_width"),
        ([GOOD_LAYER], {"hbm_bytes": 0.0}, "hbm_bytes"),
        ([GOOD_LAYER], {"hbm_bytes": math.nan}, "NaN"),
        ([GOOD_LAYER], {"link_bandwidth_Bps": 0.0}, "bandwidth"),
        ([GOOD_LAYER], {"link_bandwidth_Bps": math.nan}, "bandwidth"),
        ([GOOD_LAYER], {"link_latency_s": -1.0}, "latency"),
        ([GOOD_LAYER], {"optimizer": "lion"}, "optimizer"),
        ([], {}, "non-empty"),
        ([{**GOOD_LAYER, "param_bytes": -1.0}], {}, "param_bytes"),
        ([{**GOOD_LAYER, "fwd_s": math.nan}], {}, "NaN"),
        ([{**GOOD_LAYER, "stash_bytes": math.inf}], {}, "stash_bytes"),
        ([{"fwd_s": 1.0}], {}, "missing"),
        ([{**GOOD_LAYER, "fwd_s": 0.0, "bwd_s": 0.0}], {}, "no time"),
    ],
)
def test_invalid_inputs_raise_value_error(layers, overrides, message):
    with pytest.raises(ValueError, match=message):
        best_plan(layers, **{**GOOD, **overrides})


def test_a_layer_must_be_a_record():
    """The placement reads LayerCost records: a dict (the old string-keyed layer) is a TypeError that names the
    record and how to make one, and from_dict refuses an unknown field (a misspelt key is not silently 0)."""
    with pytest.raises(TypeError, match=r"layer 1 must be a LayerCost, got dict \(LayerCost.from_dict"):
        placement.best_plan([LayerCost.from_dict(GOOD_LAYER), dict(GOOD_LAYER)], _settings(**GOOD))
    with pytest.raises(ValueError, match="unknown layer field 'fwd'"):
        LayerCost.from_dict({**GOOD_LAYER, "fwd": 1.0})


def test_too_many_downsets_is_a_clear_error():
    layers = [dict(GOOD_LAYER) for _ in range(20)]  # 20 independent layers: 2**20 downsets
    with pytest.raises(TooManyDownsetsError, match="downsets"):
        best_plan_dag(layers, [], max_downsets=1000, **GOOD)


def test_cyclic_graph_is_rejected():
    with pytest.raises(ValueError, match="cycle"):
        best_plan_dag([dict(GOOD_LAYER)] * 3, [(0, 1), (1, 2), (2, 0)], **GOOD)


def test_microbatches_per_replica_rounds_up():
    assert microbatches_per_replica(10, 3, 2) == 2
    assert microbatches_per_replica(4096, 1024, 8) == 1
    assert microbatches_per_replica(4096, 16, 1) == 256


# ---------------------------------------------------------------- monotonicity properties
@settings(max_examples=40, deadline=None)
@given(st.lists(layer_strategy, min_size=1, max_size=8), options_strategy, st.floats(1.0, 4.0))
def test_more_hbm_never_lowers_throughput(layers, options, factor):
    small = best_plan(layers, **options)
    large = best_plan(layers, **{**options, "hbm_bytes": options["hbm_bytes"] * factor})
    assert large.throughput_samples_s >= small.throughput_samples_s * (1 - 1e-12)


@settings(max_examples=40, deadline=None)
@given(st.lists(layer_strategy, min_size=1, max_size=8), options_strategy, st.floats(1.0, 100.0))
def test_more_bandwidth_never_lowers_throughput(layers, options, factor):
    options = {**options, "link_bandwidth_Bps": 10.0}
    slow = best_plan(layers, **options)
    fast = best_plan(layers, **{**options, "link_bandwidth_Bps": 10.0 * factor})
    free = best_plan(layers, **{**options, "link_bandwidth_Bps": math.inf})
    assert fast.throughput_samples_s >= slow.throughput_samples_s * (1 - 1e-12)
    assert free.throughput_samples_s >= fast.throughput_samples_s * (1 - 1e-12)


# ---------------------------------------------------------------- best_plan_multi and caching
def _variant(t, m):
    return [{"fwd_s": 0.03 * m / t, "bwd_s": 0.06 * m / t, "param_bytes": 2e9 / t, "stash_bytes": 2e9 * m / t,
             "output_bytes": 1e7 * m} for _ in range(8)]


MULTI = dict(n_devices=32, global_batch=64, link_bandwidth_Bps=10e9)


def test_multi_is_the_best_single_plan():
    variants = {(t, m): _variant(t, m) for t in (1, 2, 4) for m in (1, 2, 4)}
    best = best_plan_multi(variants, hbm_bytes=(16e9, 32e9), **MULTI)
    singles = [best_plan(layers, tensor_width=t, microbatch=m, hbm_bytes=h, **MULTI)
               for (t, m), layers in variants.items() for h in (16e9, 32e9)]
    assert best.feasible
    assert math.isclose(best.throughput_samples_s, max(p.throughput_samples_s for p in singles))
    same = best_plan_multi(_variant, tensor_widths=(1, 2, 4), microbatches=(1, 2, 4), hbm_bytes=(16e9, 32e9), **MULTI)
    assert same == best


def test_multi_reports_why_nothing_fits():
    plan = best_plan_multi(_variant, tensor_widths=(1, 2), microbatches=(1,), hbm_bytes=1e9, **MULTI)
    assert not plan.feasible and "t1m1" in plan.reason and "t2m1" in plan.reason
    with pytest.raises(ValueError, match="tensor_widths"):
        best_plan_multi(_variant, hbm_bytes=1e9, **MULTI)


def test_cached_result_equals_fresh_result(fresh_cache, monkeypatch):
    options = dict(tensor_width=1, microbatch=1, hbm_bytes=32e9, **MULTI)
    fresh = best_plan(_variant(1, 1), **options)
    assert best_plan(_variant(1, 1), cache=True, **options) == fresh
    assert any(fresh_cache.rglob("*.pkl"))

    def no_search(*_args, **_kwargs):
        raise AssertionError("the DP ran")

    monkeypatch.setattr("phaze_env.placement.api.PlacementSearch", no_search)
    assert best_plan(_variant(1, 1), cache=True, **options) == fresh  # a lookup
    with pytest.raises(AssertionError, match="the DP ran"):  # other settings: another key
        best_plan(_variant(1, 1), cache=True, **{**options, "hbm_bytes": 16e9})


# ---------------------------------------------------------------- plans a stack can run (PlanRules)
rules_strategy = st.builds(PlanRules, pipeline=st.booleans(), uniform_stages=st.booleans(),
                           interleave_min_stages=st.integers(2, 3),
                           zero_stages=st.sampled_from([(0, 1, 2, 3), (0, 1), (0, 2, 3), (0, 3), (1,)]),
                           whole_microbatches=st.booleans(), microbatch_groups=st.booleans())


@settings(max_examples=150, deadline=None)
@given(knob_layers(max_size=6), knob_options, rules_strategy)
def test_every_rule_set_matches_brute_force_over_its_runnable_plans(layers, options, rules):
    """Uniform stages, the interleaving's minimum depth, no pipeline, and the stack's ZeRO stages: the DP's optimum is
    the brute force's over exactly the plans those rules allow (a pinned knob the rules forbid is refused)."""
    options = {**options, "rules": rules}
    if options["zero"] not in (None, *rules.zero_stages) or (not rules.pipeline and (options["interleave"] or 1) > 1):
        with pytest.raises(ValueError, match="training stack"):
            best_plan(layers, **options)
        return
    plan = best_plan(layers, **options)
    _check_against(brute_force_chain(layers, **options), plan)
    if plan.feasible:
        counts = [len(stage) for stage in plan.stage_layers]
        assert all(count % plan.interleave == 0 for count in counts)
        assert not rules.uniform_stages or len(set(counts)) == 1
        assert plan.pipeline_stages == 1 or rules.pipeline
        assert plan.interleave == 1 or plan.pipeline_stages >= rules.interleave_min_stages
        assert plan.zero in rules.zero_stages or plan.data_parallel == 1
        assert not rules.whole_microbatches or options["global_batch"] % (plan.data_parallel * plan.microbatch) == 0


@settings(max_examples=60, deadline=None)
@given(knob_layers(max_size=6), knob_options)
def test_no_pinned_knob_beats_the_free_search(layers, options):
    """The free search (v, ZeRO stage, p and d left to the DP) is at least as fast as the best plan with any one of them
    pinned: it searches every runnable value of each."""
    free = best_plan(layers, **{**options, "interleave": None, "zero": None})
    for knob, values in (("interleave", range(1, len(layers) + 1)), ("zero", (0, 1, 2, 3))):
        for value in values:
            pinned = best_plan(layers, **{**options, "interleave": None, "zero": None, knob: value})
            if pinned.feasible:
                assert free.feasible and free.time_per_batch_s <= pinned.time_per_batch_s * (1 + 1e-9), (knob, value)


def test_a_split_counts_transformer_layers_only():
    """The embedding and the head count 0 layers: under uniform stages a 4-layer model on 2 stages puts 2 layers
    on each, the embedding with the first and the head with the last, and at v = 2 (p ≥ 2 allowed) each stage's 2
    layers split into 2 chunks; p = 3 cannot split 4 layers evenly."""
    block = {"fwd_s": 1.0, "bwd_s": 2.0, "param_bytes": 1.0, "stash_bytes": 1.0, "output_bytes": 1.0}
    ends = {**block, "fwd_s": 0.1, "bwd_s": 0.2, "transformer_layers": 0}
    layers = [ends, block, block, block, block, ends]
    rules = PlanRules(uniform_stages=True)
    options = dict(n_devices=2, global_batch=4, tensor_width=1, microbatch=1, hbm_bytes=1e9,
                   link_bandwidth_Bps=math.inf, rules=rules)

    def pinned(p, v=None):
        settings = _settings(**{**options, "n_devices": p})
        plan = PlanSpec(p=p, d=1, interleave=v, recompute="none", zero=0)
        return placement.best_plan(records(layers), dataclasses.replace(settings, plan=plan))

    plan = pinned(2)
    assert plan.stage_layers == ((0, 1, 2), (3, 4, 5)) and plan.interleave == 2  # v = 2 beats v = 1 (less bubble)
    assert pinned(2, 4).reason and not pinned(2, 4).feasible  # 2 layers per stage cannot make 4 chunks
    assert not pinned(3).feasible and "uniform" in pinned(3).reason  # 4 layers do not split into 3 equal stages
    free = placement.best_plan(records(layers), dataclasses.replace(_settings(**options), plan=PlanSpec(
        d=1, interleave=None, recompute="none", zero=0)))
    assert free.stage_layers == plan.stage_layers and free.interleave == 2


@settings(max_examples=40, deadline=None)
@given(rules_strategy, st.integers(1, 12), st.integers(1, 24))
def test_the_rule_messages_say_no_exactly_where_the_search_skips(rules, layers_count, microbatches):
    """The DP's vectorised rule check (RunnableShapes.runnable) and the one-by-one reasons (broken_rule) are the same
    rules."""
    from phaze_env.placement.search import PlacementSearch
    from phaze_env.placement.stages import chain_stages

    layer = {"fwd_s": 1.0, "bwd_s": 1.0, "param_bytes": 1.0, "stash_bytes": 1.0, "output_bytes": 1.0}
    arrays = placement.inputs.layer_arrays(records([layer] * layers_count))
    search = PlacementSearch(arrays, chain_stages(arrays), _settings(n_devices=16, global_batch=16, tensor_width=1,
                                                                   microbatch=1, hbm_bytes=1e9, link_bandwidth_Bps=1.0,
                                                                   zero=None, rules=rules), layers_count)
    stages = np.arange(1, layers_count + 1)
    for v in range(1, layers_count + 1):
        runnable = search.rules.runnable(stages, np.full(len(stages), microbatches), v)
        reasons = [search.rules.broken_rule(int(p), microbatches, v) for p in stages]
        assert list(runnable) == [not reason for reason in reasons], (v, reasons)
