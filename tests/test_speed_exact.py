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
    assert f"t{lazy.plan['tensor_width']}_m{lazy.plan['microbatch']}" in lazy.layer_timings


def test_an_infeasible_design_keeps_its_reason(monkeypatch):
    knobs = dict(KNOBS, hbm_gb=(1e-4,))
    lazy = evaluate(TINY, TPUV4, CLUSTER, **knobs)
    eager = eager_evaluate(monkeypatch, TINY, TPUV4, CLUSTER, **knobs)
    assert not lazy.feasible and lazy.reason == eager.reason and lazy.schedules == 0
