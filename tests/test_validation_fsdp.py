"""The PyTorch FSDP profile (phaze_env.stacks "pytorch-fsdp") against IBM's fms-fsdp runs (experiments.validation_cases
FSDP_CASES): the two calibration runs reproduced (the efficiency on the FULL_SHARD 34B row, the HSDP all-reduce
exposure on the 7B row), every held-out run within ±15 % or a strict xfail with its cause, and the structure the profile
relies on — the ibm-a100 cluster's 400 Gb/s per node, HSDP's shard groups, the Llama 2 shapes.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from experiments.validation_fit import metric_value, plan_of, predict
from experiments.validation_report import STACK_GAPS, markdown
from experiments.validation_stats import TOLERANCE
from experiments.validation_cases import FSDP_CASES, FSDP_H100_CASES, PENDING_CASES, get_case
from phaze_env.cluster import get_cluster
from phaze_env.evaluate import evaluate
from phaze_env.hardware import get_preset
from phaze_env.stacks import STACKS, get_stack

PROFILE = STACKS["pytorch-fsdp"]
HELD_OUT = [case for case in FSDP_CASES if case.name not in (PROFILE.calibration, PROFILE.exposure_calibration)]


def test_the_profile_is_fitted_to_the_blogs_34b_and_7b_runs():
    """The efficiency on the FULL_SHARD 34B row (no hybrid all-reduce in it), the exposure on the HSDP 7B row."""
    calibration, exposure = get_case(PROFILE.calibration), get_case(PROFILE.exposure_calibration)
    assert (calibration.stack, calibration.workload, calibration.published, calibration.shard_group) == (
        "pytorch-fsdp", "llama2-34b", 700, None)
    assert (exposure.stack, exposure.workload, exposure.published, exposure.shard_group) == (
        "pytorch-fsdp", "llama2-7b", 3700, 8)
    for case in (calibration, exposure):
        prediction = predict(case)
        assert prediction.kind == "calibration" and abs(prediction.error) <= 0.01, prediction
    assert len(HELD_OUT) == 5


def test_the_exposure_constant_is_its_fit():
    """PYTORCH_FSDP_HSDP_EXPOSURE is experiments.validation_fit.fit_exposure of the 7B row at the A100 efficiency, to 2
    digits; the fit is 0 only if the model already reproduced the HSDP row (it does not: 0.40)."""
    from experiments.validation_fit import fit_exposure

    assert PROFILE.hybrid_allreduce_exposure == pytest.approx(fit_exposure(get_case(PROFILE.exposure_calibration)),
                                                              abs=0.005)
    assert PROFILE.hybrid_allreduce_exposure > 0.3


@pytest.mark.parametrize("case", [
    pytest.param(case, marks=pytest.mark.xfail(strict=True, reason=STACK_GAPS[case.name])) if case.name in STACK_GAPS
    else case for case in HELD_OUT], ids=lambda case: case.name)
def test_held_out_run_is_within_tolerance(case):
    prediction = predict(case)
    assert prediction.kind == "held-out"
    assert prediction.error is not None and abs(prediction.error) <= TOLERANCE, prediction


@pytest.mark.parametrize("case", [
    pytest.param(case, marks=pytest.mark.xfail(strict=True, reason=STACK_GAPS[case.name])) if case.name in STACK_GAPS
    else case for case in FSDP_H100_CASES], ids=lambda case: case.name)
def test_h100_column_is_fitted_on_its_34b_row_and_holds_on_the_others(case):
    """The March table's H100 column: the profile's H100 efficiency is fitted to its 34B row (the A100's rule), the
    exposure carried over from A100; the 7B (HSDP) and 70B rows are held out (within ±15 %, or a strict xfail)."""
    fit = PROFILE.fit_on("h100")
    prediction = predict(case)
    assert prediction.kind == ("calibration" if case.name == fit.calibration else "held-out")
    assert abs(prediction.error) <= (0.01 if prediction.kind == "calibration" else TOLERANCE), prediction


def test_at_least_two_held_out_runs_and_every_gap_is_an_fsdp_run_outside_the_band():
    within = [case for case in HELD_OUT if case.name not in STACK_GAPS]
    assert len(within) >= 2
    for name in STACK_GAPS:
        assert abs(predict(get_case(name)).error) > TOLERANCE  # a gap that closes must leave the list


def test_the_runs_use_the_fused_causal_attention_kernel():
    """fms-fsdp runs SDPA's FlashAttention-2: the profile prices it as the fused causal kernel on both chips."""
    from phaze_env.stacks import FLASH_ATTENTION2_A100_EFFICIENCY, FLASH_ATTENTION2_H100_EFFICIENCY

    assert PROFILE.fit_on("a100").attention_efficiency == FLASH_ATTENTION2_A100_EFFICIENCY
    assert PROFILE.fit_on("h100").attention_efficiency == FLASH_ATTENTION2_H100_EFFICIENCY
    cluster = get_stack("pytorch-fsdp").apply(get_cluster("ibm-a100", 128), "a100")
    assert cluster.stack.attention_efficiency == FLASH_ATTENTION2_A100_EFFICIENCY


def test_tokens_per_gpu_is_batch_times_sequence_over_time_and_gpus():
    case = get_case("fms-fsdp-feb24-llama2-70b")  # 6 sequences of 4096 per GPU
    assert metric_value(case, 2.0) == pytest.approx(6 * 4096 / 2.0)


def test_runs_are_the_published_plans():
    """HSDP rows shard over the 8 GPUs of a node (fms-fsdp's HYBRID_SHARD), FSDP rows over all 128; every block
    checkpointed where the table says so, FlashAttention's recompute only otherwise; one microbatch per step."""
    gpus = {"a100": 128, "h100": 96}
    for case in FSDP_CASES + FSDP_H100_CASES:
        plan = plan_of(case)
        assert (plan.zero, plan.t, plan.p, case.microbatches_per_replica) == (3, 1, 1, 1)
        assert plan.d == case.n_devices == gpus[case.accelerator] and case.cluster == f"ibm-{case.accelerator}"
        assert plan.shard_group in (8, None) and (plan.shard_group == 8) == ("HSDP" in case.source)
        assert case.recompute == ("full" if "checkpointing every block" in case.source else "selective")
    pending = [case for case in PENDING_CASES if case.stack == "pytorch-fsdp"]
    assert len(pending) == 2 and all(case.requires and predict(case).predicted is None for case in pending)


def test_hsdp_moves_less_over_the_nodes_than_full_sharding():
    """fms-fsdp's docs: HSDP is preferred for 7b and 13b, "HSDP will introduce lesser communications". On the 13b at
    batch 1 per GPU (the least compute to hide them behind) the model agrees: full sharding all-gathers and
    reduce-scatters every layer over the 400 Gb/s links; HSDP gathers inside the node and all-reduces only the 1/8
    gradient shard across nodes, so less of its traffic is exposed. (At the 7b's batch 2 both are hidden and full
    sharding wins by HSDP's 8-way instead of 128-way optimizer step.) With the profile's fitted exposure of that
    all-reduce the model reverses the 13B verdict (HSDP 2.51 s against full sharding's 2.13 s per step): a prediction
    the tables do not test (the February 13B row ran HSDP only)."""
    case = get_case("fms-fsdp-feb24-llama2-13b")
    cluster = get_stack("pytorch-fsdp").apply(get_cluster("ibm-a100", 128, global_batch=128, optimizer="adam"))
    cluster = cluster.replace(hybrid_allreduce_exposure=0.0)  # the traffic itself, all of it overlappable

    def run(shard_group):
        plan = replace(plan_of(case), shard_group=shard_group)
        return evaluate(case.workload, get_preset("a100"), cluster, plan=plan, seq_len=4096)

    hybrid, full = run(8), run(None)
    assert 0 < hybrid.time_breakdown_s["zero_comm"] < full.time_breakdown_s["zero_comm"]
    assert hybrid.plan.time_per_batch_s < full.plan.time_per_batch_s
    # HSDP keeps 8-way shards of the state: 16 bytes per parameter (bf16 weights and gradients, fp32 Adam) / 8
    memory = hybrid.memory_bytes
    assert memory["weights"] + memory["gradients"] + memory["optimizer"] == pytest.approx(16 * 13_015_864_320 / 8, rel=0.01)


def test_ibm_clusters_have_the_published_node_bandwidths():
    a100, h100 = get_cluster("ibm-a100", 128), get_cluster("ibm-h100", 96)
    assert [level.size for level in a100.network.levels] == [8, 16]
    assert [level.size for level in h100.network.levels] == [8, 12]
    # 400 and 800 Gb/s per node, shared by its 8 GPUs, at NCCL's 0.8
    assert a100.network.levels[1].bandwidth_Bps == pytest.approx(400e9 / 8 / 8 * 0.8)
    assert h100.network.levels[1].bandwidth_Bps == pytest.approx(800e9 / 8 / 8 * 0.8)


@pytest.mark.parametrize("name, published", [("llama2-34b", 33_743_970_304), ("llama2-70b", 68_976_648_192)])
def test_llama2_gqa_shapes_have_their_parameter_counts(name, published):
    """Counted on the HF model built on meta from the registry's config (no download): Llama-2-70b-hf's
    68,976,648,192 and fms-fsdp's llama2_34b (vocabulary 32,000)."""
    import torch
    import transformers

    from phaze_env.workloads import get_workload

    workload = get_workload(name)
    assert workload.config_dict["num_key_value_heads"] == 8
    config = getattr(transformers, workload.config_class)(**workload.config_dict)
    with torch.device("meta"):
        model = getattr(transformers, workload.model_class)(config)
    assert sum(p.numel() for p in model.parameters()) == published == workload.published_params


def test_the_report_has_the_fsdp_profile_and_its_gap():
    report = markdown([predict(case) for case in FSDP_CASES + FSDP_H100_CASES])
    row = next(line for line in report.splitlines() if line.startswith("| pytorch-fsdp |"))
    assert f"| {PROFILE.framework_efficiency:g} | {PROFILE.calibration} (" in row and f"| {len(HELD_OUT)} |" in row
    assert "## PyTorch FSDP (IBM fms-fsdp)" in report
    fsdp_gaps = [name for name in STACK_GAPS if name in {case.name for case in FSDP_CASES + FSDP_H100_CASES}]
    assert all(f"{name} (" in report for name in fsdp_gaps) and ("Why: " in report) == bool(fsdp_gaps)
    assert "published compile gain" in report
    assert all(f"| {case.name} |" in report for case in FSDP_H100_CASES)


@pytest.mark.slow
def test_predicted_compile_gains_track_the_published_ones():
    """The eager-over-fused step ratio (the model's counterpart of IBM's torch.compile gain; nothing fitted to it) is
    within 8 points of each published gain, and on A100 falls from 7B to 70B as the published one does; the report
    carries the comparison."""
    from experiments.validation_fit import predicted_compile_gain
    from experiments.validation_report import compile_gain_lines
    from experiments.validation_cases import COMPILE_GAINS

    predicted = {name: predicted_compile_gain(name) for name in COMPILE_GAINS}
    for name, published in COMPILE_GAINS.items():
        assert abs(predicted[name] - published) < 0.08, (name, predicted[name], published)
    assert predicted["fms-fsdp-mar24-llama2-7b"] > predicted["fms-fsdp-mar24-llama2-34b"] > \
        predicted["fms-fsdp-mar24-llama2-70b"]
    lines = compile_gain_lines()
    assert all(f"| {name} | {predicted[name]:+.1%} | {COMPILE_GAINS[name]:+.0%} |" in lines for name in COMPILE_GAINS)


@pytest.mark.slow
def test_a_fully_exposed_hsdp_allreduce_misses_the_hsdp_rows():
    """experiments.fsdp_hsdp_sensitivity: with HSDP's all-reduce after the backward pass (the other extreme) every HSDP
    row comes out more than 10 % slow, the FULL_SHARD rows unchanged; with the profile's exposure all within 10 %."""
    from experiments.fsdp_hsdp_sensitivity import errors

    hsdp = {case.name for case in FSDP_CASES if case.shard_group}
    _, after = errors(overlapped=False)
    _, profile = errors(overlapped=True)
    assert all(after[name] < -0.10 for name in hsdp)
    assert all(after[name] == pytest.approx(profile[name], abs=1e-9) for name in after if name not in hsdp)
    assert all(abs(error) < 0.10 for error in profile.values())
    assert STACKS["pytorch-fsdp"].hybrid_allreduce_overlapped and PROFILE.framework_efficiency == 0.854


def test_the_h100_exposed_share_is_near_the_blogs_trace():
    """Not fitted on H100: the share of the 7B HSDP step the A100-fitted exposure leaves on H100 is within 5 points of
    the 10 % the blog saw in its H100 traces."""
    from experiments.validation_fit import h100_exposed_share

    assert abs(h100_exposed_share() - 0.10) < 0.05
