"""experiments.h100_profiles: every H100 run on its validation profile and on megatron-core (a diagnostic)."""

from dataclasses import replace

import pytest

from experiments.h100_profiles import LEGACY, MODERN, Row, fp8_speedups, main, on_profile, rows, structure_errors
from experiments.validation_cases import get_case
from experiments.validation_fit import error_with, predict


def test_a_case_on_the_modern_profile_keeps_its_published_plan_and_changes_only_the_stack():
    case = get_case("mlperf31-gpt3-175b-fp8-768")  # a megatron-lm case
    assert case.stack == LEGACY
    moved = on_profile(case, MODERN)
    assert moved.stack == MODERN and replace(moved, stack=case.stack) == case
    (row,) = rows((case,))
    assert row.own_error == pytest.approx(predict(case).error) and row.legacy_error == row.own_error
    assert row.modern_error == pytest.approx(predict(moved).error) and row.modern_error != row.own_error
    (modern_row,) = rows((get_case("nemo2407-llama2-7b-fp8"),))  # a megatron-core case: its own is the modern one
    assert modern_row.modern_error == modern_row.own_error != modern_row.legacy_error
    # the data-parallel collectives exposed: never faster than hidden behind the passes (the metric is a rate)
    assert row.exposed_error <= row.modern_error + 1e-12 and modern_row.exposed_error <= modern_row.modern_error + 1e-12
    assert row.exposed_error == pytest.approx(error_with(moved, dp_comm_overlap=False))


def test_a_structure_the_plan_does_not_use_moves_nothing():
    """At TP 1 there is no tensor-parallel collective to expose and no sequence parallelism: switching those
    structures off leaves the prediction as it was; a structure the plan does use (the DP overlap) may move it."""
    case = get_case("nemo2407-llama2-7b-fp8")
    modern = predict(on_profile(case, MODERN)).error
    moved = structure_errors(case)
    assert moved["TP comm exposed"] == pytest.approx(modern, abs=1e-12)
    assert moved["SP kernels on all tokens"] == pytest.approx(modern, abs=1e-12)
    assert moved["DP comm exposed"] <= modern + 1e-12  # exposing communication never speeds a step up


def test_the_fp8_speed_up_is_the_published_one_moved_by_both_errors():
    bf16, fp8 = get_case("dgxc-gpt3-175b-bf16-128"), get_case("dgxc-gpt3-175b-fp8-128")
    (name, published, legacy, modern), = fp8_speedups([Row(bf16, 0.10, 0.10, 0.0), Row(fp8, 0.21, 0.21, 0.0)])
    assert name == fp8.name and published == pytest.approx(fp8.published / bf16.published)
    assert legacy == pytest.approx(published) and modern == pytest.approx(published * 1.21 / 1.10)
    assert fp8_speedups([Row(fp8, 0.0, 0.2, 0.0)]) == []  # no bf16 twin: no pair


@pytest.mark.parametrize("option", ["--structures", "--calibrate"])
def test_an_unknown_case_is_one_clear_line(option, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([option, "no-such-case"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no-such-case" in err


def test_each_modern_structure_only_hides_or_removes_a_cost():
    """The ladder from megatron-lm to megatron-core's structure on the GPT-3 pair at 128 GPUs: the first step is the
    pair's prediction on megatron-lm, and no step slows either step time down (fused attention, per-token kernels
    on s/t tokens and the overlaps each take time away; the plan is pinned)."""
    from experiments.h100_profiles import LADDER, ladder
    bf16, fp8 = get_case("dgxc-gpt3-175b-bf16-128"), get_case("dgxc-gpt3-175b-fp8-128")
    steps = ladder(bf16, fp8)
    assert [label for label, *_ in steps] == [label for label, _ in LADDER]
    assert steps[0][1] == pytest.approx(predict(on_profile(bf16, LEGACY)).error)
    assert steps[0][2] == pytest.approx(predict(on_profile(fp8, LEGACY)).error)
    hiding = steps[:-1]  # the last step adds a cost: the weight gradients' accumulation per microbatch
    for before, after in zip(hiding, hiding[1:]):
        assert after[1] >= before[1] - 1e-12 and after[2] >= before[2] - 1e-12, (before, after)
    assert hiding[-1][3] > hiding[0][3]  # the hidden costs are ones FP8 does not shorten: its speed-up grows
    # the accumulation is HBM time FP8 does not shorten either: it slows both, FP8 the more, and the speed-up falls
    (_, bf16_before, fp8_before, speedup_before), (label, bf16_after, fp8_after, speedup_after) = steps[-2:]
    assert label == "+ weight-gradient accumulation"
    assert bf16_after < bf16_before and fp8_after < fp8_before and speedup_after < speedup_before


def test_fitting_the_modern_profile_to_another_run_predicts_that_run_exactly():
    from experiments.h100_profiles import calibrated_on
    bf16 = get_case("dgxc-gpt3-175b-bf16-128")
    efficiency, errors = calibrated_on(bf16, (bf16, get_case("dgxc-gpt3-175b-fp8-128")))
    assert 0.05 < efficiency < 1.0 and abs(errors[bf16.name]) < 1e-3
    # FP8 runs the blocks' GEMMs faster and nothing else: at the same efficiency its error is the larger
    assert errors["dgxc-gpt3-175b-fp8-128"] > errors[bf16.name]


def test_the_part_per_step_lies_between_hidden_and_exposed_as_computed():
    """The MLPerf pair's part per step on megatron-core: exposing the data-parallel collectives adds to it, and the share
    is where the published one lies between the two (the published split recomputed here from the cases' step times)."""
    from experiments import scale_loss
    from experiments.gap_figures import MLPERF_PAIR
    from experiments.h100_profiles import part_per_step
    from experiments.validation_fit import published_time_s
    from phaze_env.placement.inputs import microbatches_per_replica

    split = part_per_step()
    assert split["exposed"] > split["hidden"] > 0
    cases = [get_case(name) for name in MLPERF_PAIR]
    microbatches = [microbatches_per_replica(c.global_batch, c.data, c.microbatch) for c in cases]
    assert microbatches[0] != microbatches[1]
    published, _ = scale_loss.split_by_microbatches(microbatches, [published_time_s(c) for c in cases])
    assert split["published"] == pytest.approx(published)
    assert split["share"] == pytest.approx((published - split["hidden"]) / (split["exposed"] - split["hidden"]))
    assert 0 < split["share"] < 1
