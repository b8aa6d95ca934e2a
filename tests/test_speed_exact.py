"""The search's shortcuts change how much is computed, never the answer.

Layer-level branch and bound in ``evaluate``: a (tensor width, microbatch) variant is scheduled only when the
placement DP on its layers' cheap lower bounds could beat the best plan so far. Each test compares it with
scheduling every variant (the placement loop without ``lower_bound_layers``).
"""


import pytest

import phaze_env.evaluate as evaluate_module
from phaze_env.evaluate import evaluate
from phaze_env.hardware import TPUV4
from tiny import CLUSTER, SPACE, TINY

KNOBS = dict(microbatch=(1, 4), tensor_widths=(1, 2, 4), hbm_gb=(0.0625, 32.0))
ARCH = SPACE.arch_space()
ANSWER_FIELDS = ("feasible", "reason", "throughput_samples_s", "tokens_s", "mfu", "plan", "memory_bytes",
                 "time_breakdown_s", "accelerator", "energy_per_sample_j", "proven", "worst_gap",
                 "throughput_bound_samples_s")


def eager_evaluate(monkeypatch, *args, **kwargs):
    """``evaluate`` scheduling every variant, as before the shortcut (and not served from the cache)."""
    place = evaluate_module.best_plan_multi

    def place_every_variant(*a, lower_bound_layers=None, **k):
        return place(*a, **k)

    with monkeypatch.context() as patch:
        patch.setattr(evaluate_module, "best_plan_multi", place_every_variant)
        patch.setattr(evaluate_module._EVALUATIONS, "get", lambda key: None)
        return evaluate(*args, **kwargs)


@pytest.mark.parametrize("index", range(0, len(ARCH), 7))
def test_scheduling_only_the_variants_that_can_win_gives_the_same_answer(index, monkeypatch):
    accelerator = ARCH[index]
    lazy = evaluate(TINY, accelerator, CLUSTER, **KNOBS)
    eager = eager_evaluate(monkeypatch, TINY, accelerator, CLUSTER, **KNOBS)
    for name in ANSWER_FIELDS:
        assert getattr(lazy, name) == getattr(eager, name), name
    assert set(lazy.layer_timings) <= set(eager.layer_timings)
    for variant, timings in lazy.layer_timings.items():
        assert timings == eager.layer_timings[variant]


def test_the_shortcut_skips_variants_and_keeps_the_winner_scheduled(monkeypatch):
    lazy = evaluate(TINY, TPUV4, CLUSTER, **KNOBS)
    eager = eager_evaluate(monkeypatch, TINY, TPUV4, CLUSTER, **KNOBS)
    assert lazy.feasible and lazy.proven
    assert lazy.schedules < eager.schedules and len(lazy.layer_timings) < len(eager.layer_timings)
    assert f"t{lazy.plan.tensor_width}_m{lazy.plan.microbatch}" in lazy.layer_timings


def test_an_infeasible_design_keeps_its_reason(monkeypatch):
    knobs = dict(KNOBS, hbm_gb=(1e-4,))
    lazy = evaluate(TINY, TPUV4, CLUSTER, **knobs)
    eager = eager_evaluate(monkeypatch, TINY, TPUV4, CLUSTER, **knobs)
    assert not lazy.feasible and lazy.reason == eager.reason and lazy.schedules == 0


# --- the list schedule proven optimal without an ILP ----------------------------------------------

import random  # noqa: E402

import phaze_env.schedule as schedule_module  # noqa: E402
from phaze_env.schedule import solve_schedule  # noqa: E402
from phaze_env.schedule.bounds import lower_bound_s, pair_bound_s, precedence_work_bound_s  # noqa: E402
from phaze_env.schedule.problem import build_problem  # noqa: E402
from test_schedule import brute_force_makespan, random_instance  # noqa: E402


def layer_like_instance(rng: random.Random):
    """Ops that split well over their cores (as a layer's GEMMs and vector ops do), chains with side branches."""
    n, n_tc, n_vc = rng.randint(3, 7), rng.choice([1, 2, 4]), rng.choice([1, 2])
    ops = []
    for unit in rng.choices(["tc", "vc", "tc+vc", "comm"], weights=[3, 3, 3, 1], k=n):
        latency = float(rng.randint(1, 40))
        cores = {"tc": n_tc, "vc": n_vc, "tc+vc": min(n_tc, n_vc)}.get(unit, 1)
        ops.append({"unit": unit, "latency_s": latency, "latency_parallel_s": latency / cores * rng.choice([1.0, 1.1, 1.5])})
    edges = [(i, i + 1) for i in range(n - 1) if rng.random() < 0.7]
    edges += [(i, j) for i in range(n) for j in range(i + 2, n) if rng.random() < 0.2]
    return ops, edges, n_tc, n_vc


@pytest.mark.parametrize("make", [random_instance, layer_like_instance], ids=["random", "layer_like"])
@pytest.mark.parametrize("seed", range(40))
def test_new_bounds_never_exceed_the_brute_force_optimum(make, seed):
    ops, edges, n_tc, n_vc = make(random.Random(seed)) if make is layer_like_instance else make(random.Random(seed), 7)
    optimum = brute_force_makespan(ops, edges, n_tc, n_vc)
    problem = build_problem(ops, edges, n_tc, n_vc)
    for bound in (precedence_work_bound_s, pair_bound_s, lower_bound_s):
        assert bound(problem) <= optimum * (1 + 1e-12), bound.__name__


def test_a_schedule_proven_without_an_ilp_is_the_optimum():
    proven_without = 0
    for seed in range(60):
        ops, edges, n_tc, n_vc = layer_like_instance(random.Random(seed))
        schedule = solve_schedule(ops, edges, n_tc, n_vc, cache=False)
        assert schedule.makespan_s == pytest.approx(brute_force_makespan(ops, edges, n_tc, n_vc), rel=1e-9)
        proven_without += schedule.method == "fast_path"
    assert proven_without >= 30  # the shortcut is taken, and each time it is right


def test_a_short_op_beside_a_long_parallel_op_needs_no_ilp(monkeypatch):
    # After op 0, the long op 1 runs fastest split over both vector cores, so op 2 must wait for it (or
    # go first): 1 + 34 + 0.25; one core each would be slower (1 + 47). The critical path (1 + 34) and the
    # work bound cannot show the list schedule optimal; the pair bound can.
    ops = [{"unit": "vc", "latency_s": 2.0, "latency_parallel_s": 1.0},
           {"unit": "vc", "latency_s": 47.0, "latency_parallel_s": 34.0},
           {"unit": "vc", "latency_s": 0.5, "latency_parallel_s": 0.25}]
    edges = [(0, 1), (0, 2)]
    monkeypatch.setattr(schedule_module, "solve_ilp", lambda *a, **k: pytest.fail("the ILP was called"))
    schedule = solve_schedule(ops, edges, 8, 2, cache=False)
    assert schedule.method == "fast_path" and schedule.makespan_s == pytest.approx(35.25)
    assert schedule.makespan_s == pytest.approx(brute_force_makespan(ops, edges, 8, 2))


# --- the search's vectorised first bound --------------------------------------------------------------

import numpy as np  # noqa: E402

from phaze_env.pricing import layer_time_bounds_s, price_ops  # noqa: E402
from phaze_env.schedule import makespan_lower_bound  # noqa: E402
from phaze_env.workloads import model_graph  # noqa: E402


def _schedule_bound_s(layer, accelerator, cluster, rerun=None) -> float:
    """The schedule's own cheap bound of ``layer`` (fwd + bwd) on one architecture, plus, with ``rerun``, the forward
    operators it selects at their faster mode (a fused kernel's score rerun)."""
    total = 0.0
    for dag in (layer.fwd, layer.bwd):
        one, all_cores = price_ops(dag.ops, accelerator, cluster, edges=dag.edges).table.latencies_s(0, 0)
        ops = [{"unit": op.unit, "latency_s": float(a), "latency_parallel_s": float(b)}
               for op, a, b in zip(dag.ops, one, all_cores)]
        total += makespan_lower_bound(ops, dag.edges, accelerator.num_tc, accelerator.num_vc) if ops else 0.0
        if rerun is not None and dag is layer.fwd:
            total += sum(min(a, b) for op, a, b in zip(dag.ops, one, all_cores) if rerun(op))
    return total


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("tensor_width", [1, 2])
def test_vectorised_layer_bounds_are_the_schedules_cheap_bounds(tensor_width, overlap):
    """Every architecture's layer bound equals the one the schedule computes (fwd + bwd), so it is valid
    (and as tight) wherever that one is — with the tensor-parallel collectives overlapped too (each architecture's
    own GEMM latencies hide them)."""
    cluster = CLUSTER.replace(tp_comm_overlap=overlap)
    graph = model_graph(TINY, microbatch=2, tensor_width=tensor_width)
    vectorised = layer_time_bounds_s(graph, ARCH, cluster)
    for index in range(0, len(ARCH), 5):
        accelerator = ARCH[index]
        for row, layer in enumerate(graph.layers):
            scalar = _schedule_bound_s(layer, accelerator, cluster)
            assert vectorised[row, index] == pytest.approx(scalar, rel=1e-9), (layer.name, index)
            assert vectorised[row, index] <= scalar * (1 + 1e-12)


@pytest.mark.parametrize("tensor_width", [1, 2])
def test_a_fused_kernels_rerun_is_in_the_layer_bound_and_it_stays_below_the_evaluation(tensor_width):
    """With a fused attention kernel the backward reruns the scores in every recompute mode: the vectorised bound adds
    each architecture's rerun exactly as the evaluation does (the schedules' cheap bounds plus it) and stays at or
    below the layer time the evaluation schedules."""
    from phaze_env.attention import recomputed_by_backward
    from phaze_env.evaluate import evaluate

    cluster = CLUSTER.replace(attention_efficiency=0.5)
    graph = model_graph(TINY, microbatch=1, tensor_width=tensor_width)
    vectorised = layer_time_bounds_s(graph, ARCH, cluster, recompute_modes=("selective",))
    for index in range(0, len(ARCH), 7):
        accelerator = ARCH[index]
        timings = evaluate(TINY, accelerator, cluster, microbatch=(1,), tensor_widths=(tensor_width,),
                           hbm_gb=(32.0,), cache=False).layer_timings[f"t{tensor_width}_m1"]
        for row, layer in enumerate(graph.layers):
            scalar = _schedule_bound_s(layer, accelerator, cluster, rerun=recomputed_by_backward)
            assert vectorised[row, index] == pytest.approx(scalar, rel=1e-9), (layer.name, index)
            timed = timings[layer.name]["fwd_s"] + timings[layer.name]["bwd_s"]
            assert vectorised[row, index] <= timed * (1 + 1e-9), (layer.name, index)


# --- the second bound over the variants the first bound cannot exclude -------------------------------

from search.bounds import variant_throughput_bounds, variants_above  # noqa: E402


@pytest.mark.parametrize("overlap", [False, True])
def test_each_variants_first_bound_holds_its_evaluation(overlap):
    knobs = dict(KNOBS, hbm_gb=(32.0,))
    cluster = CLUSTER.replace(tp_comm_overlap=overlap)
    per_variant = variant_throughput_bounds(TINY, ARCH, cluster, microbatch=knobs["microbatch"],
                                            tensor_widths=knobs["tensor_widths"])
    assert set(per_variant) == {(t, m) for t in (1, 2, 4) for m in (1, 4)}
    for index in (0, 18, 36):
        for (t, m), bound in per_variant.items():
            ev = evaluate(TINY, ARCH[index], cluster, **dict(knobs, tensor_widths=(t,), microbatch=(m,)))
            assert ev.throughput_samples_s <= bound[index]
        floor = float(np.median([bound[index] for bound in per_variant.values()]))
        kept, rest = variants_above(per_variant, index, floor)
        for (t, m), bound in per_variant.items():
            if bound[index] > floor:
                assert t in kept["tensor_widths"] and m in kept["microbatch"]
            else:
                assert bound[index] <= rest <= floor
