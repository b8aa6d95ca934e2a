"""DualPipe as a stack structure (issue 28): the placement DP under ``Stack.pipeline_schedule = "dualpipe"`` against an
independent brute force written from DeepSeek-V3's Table 2 (arXiv:2412.19437 §3.2.1), its plan rules, its record, and
the search's bound under it."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_bound_property import assert_not_faster, layer, slowdown, slower
from test_placement import _batch_sync_s, _check_against as check_against, _compositions, _inputs, _modes, _stage_cost, records

from phaze_env import placement
from phaze_env.cluster import Cluster, Stack
from phaze_env.placement import LayerCost, Settings
from phaze_env.placement.bounds import placement_time_bound_s
from phaze_env.placement.inputs import GRADIENT_FACTOR, in_flight_units, pipeline_bubble_slots, pipeline_slots
from phaze_env.placement.pair_dp import PairSync
from phaze_env.plan_spec import PlanRules, PlanSpec
from phaze_env.stacks import STACKS


def best_plan(layers, settings_, **options):
    """The placement DP on these tests' layers: the brute forces read dicts, the DP takes its records."""
    typed = all(isinstance(layer, LayerCost) for layer in layers)
    return placement.best_plan(layers if typed else records(layers), settings_, **options)


# Written from the paper, not imported: Table 2's bubbles, with F&B = F + B, W = B/2 (Zero Bubble's halves of the
# backward pass) and B = 2F (two backward GEMMs per forward GEMM).
F, B = 1.0, 2.0
W, F_AND_B = B / 2, F + B


def table_2_bubble(stages: int) -> float:
    """DualPipe's bubble in stage times F + B: (PP/2 − 1)(F&B + B − 3W)."""
    return (stages / 2 - 1) * (F_AND_B + B - 3 * W) / (F + B)


def test_the_bubble_is_table_2s_and_shorter_than_1f1bs():
    for p in range(2, 65, 2):
        assert pipeline_bubble_slots(p, 1, "dualpipe") == pytest.approx(table_2_bubble(p))
        assert pipeline_bubble_slots(p, 1, "1f1b") == p - 1  # (PP − 1)(F + B)
        assert pipeline_slots(120, p, 1, "dualpipe") == pytest.approx(120 + table_2_bubble(p))
    assert pipeline_bubble_slots(16, 1, "dualpipe") == pytest.approx(14 / 3)  # DeepSeek-V3's PP 16: 7 × 2/3
    assert pipeline_bubble_slots(1, 1, "dualpipe") == 0  # one stage: no pipeline
    stages = np.array([1, 2, 4, 16])
    assert np.allclose(pipeline_slots(8, stages, 1, "dualpipe"), [8 + table_2_bubble(max(p, 2)) for p in stages])


def dualpipe_peaks(stages: int, chunks: int, half_rank: int) -> tuple[int, int]:
    """Replay of deepseek-ai/DualPipe ``dualpipe.py`` ``DualPipe.step``'s eight steps on a rank ``half_rank`` from its
    nearer end (written from that file, not imported): the microbatches of its phase-0 chunk (pipeline position
    ``half_rank``) and its phase-1 chunk (position ``p − 1 − half_rank``) held between a forward and its backward, at
    the device's peak (a fused forward-and-backward counts its forward first). Asserts one state peaks both."""
    n, h = stages // 2, half_rank
    held, seen = [0, 0], []

    def forward(phase):
        held[phase] += 1
        seen.append(tuple(held))

    def backward(phase):
        held[phase] -= 1

    for _ in range((n - h - 1) * 2):  # step 1: nF0
        forward(0)
    for _ in range(h + 1):  # step 2: nF0F1
        forward(0), forward(1)
    for _ in range(n - h - 1):  # step 3: nB1W1F1
        backward(1), forward(1)
    for _ in range(chunks // 2 - stages + h + 1):  # step 4: nF0B1F1B0
        forward(0), backward(1), forward(1), backward(0)
    for _ in range(n - h - 1):  # step 5: nB1F1B0
        backward(1), forward(1), backward(0)
    for _ in range(h + 1):  # step 6: nB1B0
        backward(1), backward(0)
    for _ in range(n - h - 1):  # step 7: nWB0
        backward(0)
    assert held == [0, 0]
    peak = max(seen, key=sum)
    assert peak == (max(x for x, _ in seen), max(y for _, y in seen))  # one state holds both chunks' peaks
    return peak


@pytest.mark.parametrize("stages", [2, 4, 6, 8, 16])
def test_each_chunk_holds_its_own_s_microbatches_and_each_device_p_plus_one(stages):
    """Table 2's activation column, PP + 1 per device, as DualPipe's schedule holds it: the chunk ``s``-th from the end
    holds ``s`` microbatches (1F1B's count), and device ``h`` holds the chunks ``s = p − h`` and ``s = h + 1``."""
    for chunks in (2 * stages, 2 * stages + 2, 4 * stages):
        for h in range(stages // 2):
            early, late = dualpipe_peaks(stages, chunks, h)
            assert (early, late) == (in_flight_units(stages - h, stages, chunks), in_flight_units(h + 1, stages, chunks))
            assert early + late == stages + 1


def test_the_stack_field_is_checked_and_said():
    with pytest.raises(ValueError, match="pipeline_schedule must be one of 1f1b, dualpipe"):
        Stack(pipeline_schedule="zb-v")
    with pytest.raises(ValueError, match="runs no interleaved stages"):
        Stack(pipeline_schedule="dualpipe")  # the default stack interleaves
    with pytest.raises(ValueError, match="dp_comm_overlap is modelled on 1F1B's drain"):
        Stack(pipeline_schedule="dualpipe", interleaved_schedule=False, dp_comm_overlap=True)
    with pytest.raises(ValueError, match="needs a stack that pipelines"):
        Stack(pipeline_schedule="dualpipe", interleaved_schedule=False, plan_rules=PlanRules(pipeline=False))
    dualpipe = Stack(pipeline_schedule="dualpipe", interleaved_schedule=False)
    assert "DualPipe" in dualpipe.describe() and dualpipe.to_dict()["pipeline_schedule"] == "dualpipe"
    assert "pipeline_schedule" not in Stack().to_dict()  # 1F1B's cache keys stay what they were
    deepseek = STACKS["deepseek-hai-llm"]
    assert deepseek.pipeline_schedule == "dualpipe" and deepseek.stack(deepseek.fits[0]).pipeline_schedule == "dualpipe"
    assert all(profile.pipeline_schedule == "1f1b" for name, profile in STACKS.items() if name != "deepseek-hai-llm")


def dualpipe_cluster(**fields) -> Cluster:
    return Cluster(pipeline_schedule="dualpipe", interleaved_schedule=False, **fields)


def _settings(opts, **plan) -> Settings:
    cluster = dualpipe_cluster(n_devices=opts["n_devices"], global_batch=opts["global_batch"],
                               link_bandwidth_Bps=opts["link_bandwidth_Bps"], link_latency_s=opts["link_latency_s"],
                               optimizer=opts["optimizer"])
    spec = PlanSpec(recompute="none|full" if opts["allow_recompute"] else "none", sequence_parallel=False, zero=0,
                    p=opts.get("stages"), **plan)
    return Settings(cluster, opts["tensor_width"], opts["microbatch"], opts["hbm_bytes"], spec,
                    hbm_bandwidth_Bps=opts.get("hbm_bandwidth_Bps"))


def brute_force_dualpipe(layers, opts) -> float:
    """Smallest time per batch over every (d, p, partition, recompute modes) DualPipe runs: p = 1, or p even with an
    even m_r ≥ 2p (deepseek-ai/DualPipe's assertions); device k holds stage k and stage p − 1 − k (its weights,
    gradients and optimizer state, once each) and each stage's activations for the s microbatches it holds s-th from
    the end, which must fit together; a device runs half the microbatches through each of its two stages, so the batch
    takes m_r + Table 2's bubble times the slowest device's mean of its two stage times (ZeRO-0), and once per batch
    each device's replicas all-reduce (and step) the gradients of the two stages it holds, the batch waiting for the
    device that takes longest."""
    n, t, batch, m = opts["n_devices"], opts["tensor_width"], opts["global_batch"], opts["microbatch"]
    inputs, last = _inputs(layers), len(layers) - 1

    def boundary(groups, k):
        first, final = groups[k][0], groups[k][-1]
        return (layers[final]["output_bytes"] if final < last else 0.0, inputs[first] if first > 0 else 0.0,
                sum(inputs[i] for i in groups[k]))

    info, best = {"layers": layers, "boundary": boundary}, math.inf
    for d in range(1, n // t + 1):
        m_r = -(-batch // (d * m))
        for p in range(1, min(len(layers), n // (d * t)) + 1):
            if opts.get("stages") not in (None, p) or (p > 1 and (p % 2 or m_r % 2 or m_r < 2 * p)):
                continue
            for groups in _compositions(len(layers), p):
                for modes in itertools.product(_modes(opts), repeat=p):
                    costs = [_stage_cost(groups, k, modes[k], p - k, info, opts, d, 1) for k in range(p)]
                    device = [costs[k][1] + (costs[p - 1 - k][1] if p > 1 else 0.0) for k in range(p)]
                    if max(device) > opts["hbm_bytes"]:
                        continue
                    # each device runs half the microbatches through each of its stages: its pace is their mean
                    slowest = max((costs[k][0] + costs[p - 1 - k][0]) / 2 for k in range(p))
                    bubble = table_2_bubble(p) * slowest if p > 1 else 0.0
                    # each device reduces (and steps) both its stages' gradients over the replicas
                    held = [costs[k][2] + (costs[p - 1 - k][2] if p > 1 else 0.0) for k in range(p)]
                    sync = max(_batch_sync_s(params, d, 0, opts) for params in held)
                    best = min(best, m_r * slowest + bubble + sync)
    return best


# Layers, batches, links and HBM where pipelines of 2–6 stages run (slow links make replicas pay, m_r ≥ 2p needs
# batches) and memory binds (the mirror's state, p + 1 microbatches)
dualpipe_layer = st.fixed_dictionaries(
    {"fwd_s": st.floats(0.0, 2.0), "bwd_s": st.floats(0.01, 4.0), "param_bytes": st.integers(0, 20).map(float),
     "stash_bytes": st.integers(0, 20).map(float), "output_bytes": st.integers(0, 10).map(float)},
    optional={"input_bytes": st.integers(0, 10).map(float)})
dualpipe_options = st.fixed_dictionaries({
    "n_devices": st.integers(2, 16),
    "tensor_width": st.sampled_from([1, 2]),
    "global_batch": st.integers(4, 64),
    "microbatch": st.integers(1, 2),
    "hbm_bytes": st.integers(60, 600).map(float),
    "link_bandwidth_Bps": st.sampled_from([math.inf, 1.0, 10.0, 100.0]),
    "link_latency_s": st.sampled_from([0.0, 0.01]),
    "allow_recompute": st.booleans(),
    "optimizer": st.sampled_from(["sgd", "adam"]),
    "stages": st.sampled_from([None, None, 2, 4, 6]),  # pinned p (None: the DP's choice), so pipelines are searched
    "hbm_bandwidth_Bps": st.sampled_from([None, 1000.0]),  # the optimizer step timed, or not
})


@settings(max_examples=300, deadline=None)
@given(st.lists(dualpipe_layer, min_size=2, max_size=6), dualpipe_options)
def test_dualpipe_matches_brute_force(layers, options):
    check_against(brute_force_dualpipe(layers, options), best_plan(layers, _settings(options)))


def test_a_pipeline_dualpipe_wins_on_and_1f1b_pays_more_for():
    """Eight equal layers, eight devices behind a link so slow that one replica pays: DualPipe runs p = 8 with
    16 microbatches, its bubble 3 × 2/3 = 2 stage times against 1F1B's 7 (the brute force above agrees)."""
    layers = [{"fwd_s": 0.5, "bwd_s": 1.0, "param_bytes": 10.0, "stash_bytes": 1.0, "output_bytes": 0.0}] * 8
    options = {"n_devices": 8, "tensor_width": 1, "global_batch": 16, "microbatch": 1, "hbm_bytes": 1e12,
               "link_bandwidth_Bps": 1.0, "link_latency_s": 0.0, "allow_recompute": False, "optimizer": "sgd",
               "stages": None}
    plan = best_plan(layers, _settings(options))
    assert plan.notation.startswith("t1p8d1m1") and plan.time_per_batch_s == pytest.approx((16 + 2) * 1.5)
    assert plan.time_per_batch_s == pytest.approx(brute_force_dualpipe(layers, options))
    assert plan.bubble_fraction == pytest.approx(2 / 18)
    assert plan.time_breakdown_s["bubble"] == pytest.approx(2 * 1.5)
    one_f_one_b = best_plan(layers, Settings(Cluster(n_devices=8, global_batch=16, link_bandwidth_Bps=1.0,
                                                     interleaved_schedule=False), 1, 1, 1e12, _settings(options).plan))
    assert one_f_one_b.time_per_batch_s == pytest.approx((16 + 7) * 1.5)


def test_the_record_holds_a_stage_and_its_mirror_on_each_device():
    layers = [{"fwd_s": 1.0, "bwd_s": 2.0, "param_bytes": 10.0, "stash_bytes": 3.0, "output_bytes": 0.0}] * 4
    settings_ = Settings(dualpipe_cluster(n_devices=4, global_batch=8, link_bandwidth_Bps=math.inf, optimizer="adam"),
                         1, 1, 1e12, PlanSpec(p=4, d=1, recompute="none", zero=0, sequence_parallel=False))
    plan = best_plan(layers, settings_)
    for k, memory in enumerate(plan.stage_memory):  # one layer per stage: 10 bytes of weights, its own state once
        assert (memory["weights"], memory["gradients"], memory["optimizer"]) == pytest.approx((10.0, 10.0, 60.0))
        assert memory["activations"] == pytest.approx((4 - k) * 3.0)  # s = p − k microbatches, 1F1B's count
    # every device: two stages' state and p + 1 = 5 microbatches of activations
    assert plan.memory_bytes["total"] == pytest.approx(2 * 80.0 + 5 * 3.0)
    assert plan.memory_bytes["activations"] == pytest.approx(5 * 3.0)
    assert plan.time_per_batch_s == pytest.approx((8 + 2 / 3) * 3.0)


def test_a_heavy_first_stage_fits_beside_a_light_mirror():
    """Pair-aware memory: a device's limit is its two stages' sum, so stage 0 (p microbatches in flight) may hold more
    activations than a per-stage limit of half the device would let it, when its mirror (one microbatch) holds less.
    Four layers, p = 2: stage 0 holds 2 microbatches, stage 1 one; both stages sit on both devices, which run half
    the microbatches through each (any split takes the same time)."""
    layers = [{"fwd_s": 1.0, "bwd_s": 2.0, "param_bytes": 0.0, "stash_bytes": 10.0, "output_bytes": 0.0}] * 4
    # split 2 + 2 needs 2·20 + 1·20 = 60 on each device; 1 + 3 needs 2·10 + 30 = 50; 3 + 1 needs 60 + 10 = 70
    for hbm in (60.0, 55.0, 50.0):
        settings_ = Settings(dualpipe_cluster(n_devices=2, global_batch=4, link_bandwidth_Bps=math.inf), 1, 1, hbm,
                             PlanSpec(p=2, d=1, recompute="none", zero=0, sequence_parallel=False))
        plan = best_plan(layers, settings_)
        assert plan.feasible and plan.memory_bytes["total"] <= hbm
        assert plan.time_per_batch_s == pytest.approx(4 * 4 * 3.0 / 2)  # m_r = 4 slots of half the 4 layers
    settings_ = Settings(dualpipe_cluster(n_devices=2, global_batch=4, link_bandwidth_Bps=math.inf), 1, 1, 49.0,
                         PlanSpec(p=2, d=1, recompute="none", zero=0, sequence_parallel=False))
    plan = best_plan(layers, settings_)
    assert not plan.feasible and "needs 4.66e-08 GiB" in plan.reason  # 50 bytes: the 1 + 3 split


def test_a_device_runs_at_the_mean_of_its_stage_and_its_mirror():
    """deepseek-ai/DualPipe: each device runs half the microbatches through each of its two stages. Layers of 1, 1, 1
    and 5 stage times on four stages: the device holding stages 0 and 3 runs at (1 + 5)/2 = 3 per slot, not the slowest
    stage's 5; 8 microbatches and Table 2's bubble of (4/2 − 1)·2/3 slots, and the record's breakdown sums to it."""
    layers = [{"fwd_s": t / 3, "bwd_s": 2 * t / 3, "param_bytes": 0.0, "stash_bytes": 0.0, "output_bytes": 0.0}
              for t in (1.0, 1.0, 1.0, 5.0)]
    settings_ = Settings(dualpipe_cluster(n_devices=4, global_batch=8, link_bandwidth_Bps=math.inf), 1, 1, 1e12,
                         PlanSpec(p=4, d=1, recompute="none", zero=0, sequence_parallel=False))
    plan = best_plan(layers, settings_)
    assert plan.time_per_batch_s == pytest.approx((8 + 2 / 3) * 3.0)
    assert sum(plan.time_breakdown_s.values()) == pytest.approx(plan.time_per_batch_s)
    assert plan.time_breakdown_s["bubble"] == pytest.approx(2 / 3 * 3.0)


def test_a_device_syncs_its_two_stages_bytes_not_twice_the_largest_stage():
    """A device reduces and steps the bytes of the two stages it holds, ``P_k + P_{p−1−k}``, not ``2·max P``, and the
    search walks down that pair sync. Five layers of 3, 1, 1, 1, 4 stage times and 0, 6, 6, 0, 1 bytes on four stages,
    one replica (the sync is the optimizer step, 1 s per byte): the fastest pace, 3.5, pairs the two 6-byte layers on
    one device (a sync of 12; 2·max P = 12 or 24); splitting 2 | 1 | 1 | 1 paces 4.0 but syncs max(0 + 6 + 1, 6 + 0) = 7,
    and wins: (8 + 2/3)·4 + 7, against (8 + 2/3)·3.5 + 12 (the best when the sync was 2·max P: its 12 for 7)."""
    layers = [{"fwd_s": t / 3, "bwd_s": 2 * t / 3, "param_bytes": size, "stash_bytes": 0.0, "output_bytes": 0.0}
              for t, size in ((3.0, 0.0), (1.0, 6.0), (1.0, 6.0), (1.0, 0.0), (4.0, 1.0))]
    options = {"n_devices": 4, "tensor_width": 1, "global_batch": 8, "microbatch": 1, "hbm_bytes": 1e12,
               "link_bandwidth_Bps": math.inf, "link_latency_s": 0.0, "allow_recompute": False, "optimizer": "sgd",
               "stages": 4, "hbm_bandwidth_Bps": 5.0}  # SGD's step touches 5 bytes per weight byte: 1 s per byte
    plan = best_plan(layers, _settings(options))
    assert [len(stage) for stage in plan.stage_layers] == [2, 1, 1, 1]
    assert plan.time_per_batch_s == pytest.approx((8 + 2 / 3) * 4.0 + 7.0)
    assert plan.time_per_batch_s == pytest.approx(brute_force_dualpipe(layers, options))
    assert plan.time_breakdown_s["optimizer"] == pytest.approx(7.0)
    assert sum(plan.time_breakdown_s.values()) == pytest.approx(plan.time_per_batch_s)


def test_a_pair_sync_is_each_parts_line_at_the_two_stages_bytes_together():
    """``PairSync``: per part, ``fixed + per_byte · (x_k + x_{p−1−k})`` (0 s for a part neither stage holds), the same in
    the DP's blocks as for one partition; a sync that is not affine in the bytes is refused, not priced wrong."""
    dense = np.array([[0.0, 4.0, 9.0], [0.0, 0.0, 5.0], [0.0, 0.0, 0.0]])  # stages (0, 1), (0, 2), (1, 2)
    experts = np.array([[0.0, 0.0, 3.0], [0.0, 0.0, 3.0], [0.0, 0.0, 0.0]])
    sync = PairSync.affine([(dense, lambda x: 0.5 + 2.0 * x if x else 0.0),
                            (experts, lambda x: 0.25 + 1.0 * x if x else 0.0)])
    early, late = (0, 1), (1, 2)  # 4 dense bytes beside 5 dense and 3 expert bytes
    assert sync.largest([early, late]) == (pytest.approx(0.5 + 2.0 * 9 + 0.25 + 1.0 * 3), 0)
    assert sync.largest([early, early]) == (pytest.approx(0.5 + 2.0 * 8), 0)  # no experts: no expert collective
    limit = sync.largest([early, late])[0]
    blocks = sync.below((np.array([0]), 1), limit)[0]  # early stage (0, 1) beside every late stage
    assert not blocks[late] and not blocks[0, 2] and blocks[early]  # (0, 2): 13 dense bytes, 3 expert bytes
    with pytest.raises(ValueError, match="not affine"):
        PairSync.affine([(dense, lambda x: math.sqrt(x))])


@pytest.mark.parametrize("plan, rule", [
    (dict(p=3, d=1), "even number of pipeline stages"),
    (dict(p=4, d=2), "even number of pipeline stages"),  # m_r = 4 < 2p
])
def test_a_plan_dualpipe_cannot_run_is_refused_with_its_rule(plan, rule):
    layers = [{"fwd_s": 1.0, "bwd_s": 2.0, "param_bytes": 1.0, "stash_bytes": 1.0, "output_bytes": 1.0}] * 6
    settings_ = Settings(dualpipe_cluster(n_devices=plan["p"] * plan["d"], global_batch=8), 1, 1, 1e12,
                         PlanSpec(recompute="none", zero=0, **plan))
    result = best_plan(layers, settings_)
    assert not result.feasible and rule in result.reason and "DualPipe" in result.reason


def test_a_pinned_interleaving_is_refused_on_dualpipe():
    with pytest.raises(ValueError, match="no interleaved schedule"):
        Settings(dualpipe_cluster(n_devices=4, global_batch=8), 1, 1, 1e12, PlanSpec(p=4, interleave=2))


@settings(max_examples=100, deadline=None)
@given(st.lists(layer(), min_size=1, max_size=8), st.lists(slowdown, max_size=8), st.integers(1, 16),
       st.integers(1, 32), st.integers(20, 400))
def test_dualpipe_dp_never_gets_faster_when_layers_get_slower(layers, slowdowns, devices, batch, hbm):
    """The monotonicity evaluate's layer-level bound needs holds under DualPipe (its bubble share is a constant, not
    the layers' own backward/forward ratio)."""
    settings_ = Settings(dualpipe_cluster(n_devices=devices, global_batch=batch, link_bandwidth_Bps=100.0), 1, 1,
                         float(hbm), PlanSpec(recompute="auto"))
    assert_not_faster(best_plan(layers, settings_), best_plan(slower(layers, slowdowns), settings_))


def _bound_s(layers, settings_) -> float:
    layer_s = np.array([[layer["fwd_s"] + layer["bwd_s"]] for layer in layers])
    boundary = min(layer["output_bytes"] for layer in layers[:-1]) if len(layers) > 1 else 0.0
    return float(placement_time_bound_s(layer_s, np.ones(len(layers), dtype=np.int64),
                                        GRADIENT_FACTOR * sum(layer["param_bytes"] for layer in layers), boundary, 1,
                                        settings_.microbatch, settings_.cluster, total_layers=len(layers))[0])


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([2, 4, 6, 8]), st.data())
def test_the_search_bound_holds_for_dualpipe_plans(n_layers, data):
    """``placement_time_bound_s`` on a DualPipe stack never exceeds the DP's best time (the search's throughput bound
    stays an upper bound, so the exact search never prunes the optimum)."""
    layers = [{"fwd_s": data.draw(st.floats(0.01, 1.0)), "bwd_s": data.draw(st.floats(0.01, 2.0)),
               "param_bytes": float(data.draw(st.integers(0, 50))), "stash_bytes": 1.0,
               "output_bytes": float(data.draw(st.integers(0, 30)))} for _ in range(n_layers)]
    cluster = dualpipe_cluster(n_devices=data.draw(st.integers(1, 16)), global_batch=data.draw(st.integers(1, 64)),
                               link_bandwidth_Bps=data.draw(st.sampled_from([math.inf, 10.0, 1000.0])),
                               plan_rules=PlanRules(zero_stages=(0, 1), whole_microbatches=data.draw(st.booleans())))
    settings_ = Settings(cluster, 1, data.draw(st.integers(1, 2)), 1e12,
                         PlanSpec(recompute="none", zero=data.draw(st.sampled_from([0, 1])), sequence_parallel=False))
    plan = best_plan(layers, settings_)
    if plan.feasible:
        assert _bound_s(layers, settings_) <= plan.time_per_batch_s * (1 + 1e-9)


def test_a_1f1b_bound_would_not_hold_for_a_dualpipe_plan():
    """The failure the schedule-aware bound prevents: the eight-stage plan above takes 18 stage times under DualPipe,
    below the 23 that 1F1B's bubble allows."""
    layers = [{"fwd_s": 0.5, "bwd_s": 1.0, "param_bytes": 10.0, "stash_bytes": 1.0, "output_bytes": 0.0}] * 8
    settings_ = Settings(dualpipe_cluster(n_devices=8, global_batch=16, link_bandwidth_Bps=1.0), 1, 1, 1e12,
                         PlanSpec(recompute="none", zero=0, sequence_parallel=False))
    plan = best_plan(layers, settings_)
    one_f_one_b = Settings(Cluster(n_devices=8, global_batch=16, link_bandwidth_Bps=1.0, interleaved_schedule=False),
                           1, 1, 1e12, settings_.plan)
    assert _bound_s(layers, one_f_one_b) > plan.time_per_batch_s >= _bound_s(layers, settings_) * (1 - 1e-12)


def test_the_search_bounds_hold_on_a_dualpipe_stack():
    """``search.bounds.throughput_bounds`` ≥ the evaluated throughput on the tiny space under DualPipe, where the
    evaluator's plans pipeline (a link slow enough that replicas pay)."""
    from phaze_env.evaluate import evaluate
    from search.bounds import throughput_bounds
    from test_bounds_rules import TINY_LLAMA_6
    from tiny import SPACE

    cluster = dualpipe_cluster(n_devices=16, global_batch=64, link_bandwidth_Bps=1e9)
    plan, knobs, arch = PlanSpec.parse("+rc=none|full"), dict(microbatch=(1, 4), tensor_widths=(1, 2)), SPACE.arch_space()
    bounds = throughput_bounds(TINY_LLAMA_6, arch, cluster, plan=plan, **knobs)
    evaluations = {index: evaluate(TINY_LLAMA_6, arch[index], cluster, plan=plan, hbm_gb=(32.0,), **knobs)
                   for index in range(0, len(arch), 12)}
    assert any(evaluation.plan.pipeline_stages > 1 for evaluation in evaluations.values())  # DualPipe is exercised
    for index, evaluation in evaluations.items():
        assert 0 < evaluation.throughput_samples_s <= bounds[index]
