"""``EvaluationOptions``: evaluate's and throughput_upper_bound's options as one object, validated in one place, the
same request (and cache key) whether given as an object or as keywords."""

from __future__ import annotations

import pytest
from tiny import CLUSTER, TINY

import phaze_env.evaluate as evaluate_module
from phaze_env.design import evaluate_options
from phaze_env.evaluate import EvaluationOptions, evaluate, throughput_upper_bound
from phaze_env.hardware import TPUV4
from phaze_env.plan_spec import PlanSpec


def _keys(monkeypatch) -> list[tuple]:
    """The parts each evaluate / throughput_upper_bound call keys its cache entry with, as they are made."""
    seen = []
    original = evaluate_module.code_key

    def spy(module, *parts):
        seen.append(parts)
        return original(module, *parts)

    monkeypatch.setattr(evaluate_module, "code_key", spy)
    return seen


@pytest.mark.parametrize("keywords", [dict(), dict(microbatch=[4, 1, 4], hbm_gb=32, tensor_widths=(2, 1)),
                                      dict(plan=PlanSpec.parse("t2p1d8m4"), microbatch=(1,), tensor_widths=(1,)),
                                      dict(recompute=(False,), context_parallels=(2, 1), seq_len=32)])
def test_an_options_object_is_the_same_request_as_its_keywords(monkeypatch, keywords):
    """The bound keys its cache by the request alone: an object and its keywords give one key (cached results stay
    valid), and a keyword given beside an object replaces that field."""
    keys = _keys(monkeypatch)
    as_keywords = throughput_upper_bound(TINY, TPUV4, CLUSTER, cache=False, **keywords)
    as_object = throughput_upper_bound(TINY, TPUV4, CLUSTER, options=EvaluationOptions(cache=False, **keywords))
    replaced = throughput_upper_bound(TINY, TPUV4, CLUSTER, options=EvaluationOptions(microbatch=(8,), cache=False),
                                      **{"microbatch": EvaluationOptions().microbatch, **keywords})
    assert keys[0] == keys[1] == keys[2] and as_keywords == as_object == replaced


def test_evaluate_takes_the_object_and_keys_it_as_its_keywords(monkeypatch):
    keys = _keys(monkeypatch)
    options = EvaluationOptions(microbatch=(4,), hbm_gb=(32.0,), tensor_widths=(1,), recompute=(False,))
    first = evaluate(TINY, TPUV4, CLUSTER, options=options)
    again = evaluate(TINY, TPUV4, CLUSTER, microbatch=(4,), hbm_gb=32.0, tensor_widths=[1], recompute=[False])
    requests = [parts for parts in keys if parts[0] == "evaluation"]  # not the layer timings a first evaluation keys
    assert len(requests) == 2 and requests[0] == requests[1]
    assert again.from_cache and again.throughput_samples_s == first.throughput_samples_s


def test_what_the_options_search():
    """Sorted without repeats, narrowed by a pinned plan (its t, m and c replace their lists); None: PHAZE's plan."""
    options = EvaluationOptions(plan=PlanSpec.parse("t2p1d8m4"), microbatch=[2, 1], tensor_widths=(4, 1, 4),
                                hbm_gb=[80, 40, 80])
    assert (options.widths, options.microbatches, options.capacities_gb, options.degrees) == ((2,), (4,), (40.0, 80.0),
                                                                                              (1,))
    assert EvaluationOptions(recompute=(False,)).search_plan.recompute == "none"
    assert EvaluationOptions().capacities_gb is None  # the accelerator's own
    assert hash(EvaluationOptions(microbatch=[1, 2])) == hash(EvaluationOptions(microbatch=(1, 2)))


@pytest.mark.parametrize("keywords, error, message", [
    (dict(microbatch=(0, 2)), ValueError, "microbatch sizes must be positive integers, got \\(0, 2\\)"),
    (dict(hbm_gb=[-1]), ValueError, "HBM capacities must be positive"),
    (dict(tensor_widths=()), ValueError, "tensor widths must be positive integers"),
    (dict(plan=PlanSpec(c=None), context_parallels=[]), ValueError, "context-parallel degrees must be positive"),
    (dict(recompute=()), ValueError, "recompute must list at least one of False, True"),
    (dict(plan="t1p1d1m1"), TypeError, "plan must be a PlanSpec"),
])
def test_bad_options_raise_once_before_any_workload_is_read(keywords, error, message):
    with pytest.raises(error, match=message):
        EvaluationOptions(**keywords)
    with pytest.raises(error, match=message):  # the same check behind the keywords
        evaluate("no-such-workload", TPUV4, CLUSTER, **keywords)


def test_a_pinned_microbatch_replaces_an_empty_list():
    """The plan narrows before the check: a pinned m needs no microbatch list (as before the options object)."""
    assert EvaluationOptions(plan=PlanSpec(microbatch=2), microbatch=()).microbatches == (2,)


def test_unknown_options_are_refused_by_name():
    with pytest.raises(TypeError, match="unknown evaluation option 'microbatches'; known: plan, microbatch"):
        evaluate(TINY, TPUV4, CLUSTER, microbatches=(1,))
    with pytest.raises(TypeError, match="options must be EvaluationOptions, got dict"):
        throughput_upper_bound(TINY, TPUV4, CLUSTER, options={"microbatch": (1,)})
    with pytest.raises(ValueError, match="unknown evaluate option 'microbatches'; known: plan, tensor_widths, seq_len, "
                                         "solver, time_limit_s, context_parallels, cache"):
        evaluate_options({"microbatches": (1,)})
