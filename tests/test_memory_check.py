"""Per-GPU memory term by term against published figures (experiments.memory_check), and the per-stage breakdown
the placement DP reports (Plan.stage_memory)."""

from __future__ import annotations

import pytest

from experiments.memory_check import (FRONTIER_CASES, MEGATRON_CASES, TOLERANCE, ZERO_FIGURE_GB, main, summary_line,
                                      megatron_theoretical_bytes, plan_need, stage_terms, zero_model_states_bytes)
from experiments.validation_cases import get_case
from phaze_env import placement
from phaze_env.cluster import Cluster
from phaze_env.hardware.accelerator import GB_BYTES
from phaze_env.placement import Settings
from phaze_env.placement.inputs import GRADIENT_FACTOR, in_flight_units
from phaze_env.plan_spec import PlanSpec

KORTHIKANTI = [name for name in MEGATRON_CASES if name.startswith("korthikanti22")]


@pytest.mark.parametrize("zero", sorted(ZERO_FIGURE_GB))
def test_model_states_match_zero_figure_1(zero):
    """Rajbhandari et al. 2020 Figure 1 (7.5 B parameters, 64 GPUs, Adam): 120, 31.4, 16.6 and 1.9 GB per device."""
    assert zero_model_states_bytes(zero) / 1e9 == pytest.approx(ZERO_FIGURE_GB[zero], rel=0.015)


def test_in_flight_units_are_megatrons_warmup_plus_one():
    """1F1B: the stage s-th from the end holds min(s, m) microbatches; interleaved: Megatron's warm-up forwards
    (p − rank − 1)·2 + (v − 1)·p plus the steady state's one, capped at all v·m chunks — for the first stage
    p + (p − 1)/v microbatches (Korthikanti et al. 2022 §4.2.3), for the last (v − 1)·p + 1 chunks."""
    assert [in_flight_units(s, 4, 3) for s in (1, 2, 3, 4)] == [1, 2, 3, 3]
    p, v, m = 16, 8, 32
    assert in_flight_units(p, p, m, v) / v == pytest.approx(p + (p - 1) / v)
    assert in_flight_units(1, p, m, v) == (v - 1) * p + 1
    assert in_flight_units(p, p, 16, v) == v * 16  # every chunk of every microbatch: m = p caps the warm-up


def test_stage_memory_is_each_stage_term_by_term():
    """Four equal layers on two stages (1F1B, 4 microbatches): the first stage holds 2 microbatches of its two layers'
    stash, the second 1; weights, bf16 gradients and Adam's 12 bytes per parameter (6× the bf16 weights) per stage;
    the worst stage is memory_bytes."""
    gib = float(GB_BYTES)
    layer = placement.LayerCost(fwd_s=1.0, bwd_s=2.0, param_bytes=gib, stash_bytes=3 * gib, output_bytes=1e3)
    cluster = Cluster(n_devices=2, global_batch=4, optimizer="adam", link_bandwidth_Bps=1e12)
    settings = Settings(cluster, 1, 1, 100 * gib, PlanSpec(p=2, d=1, recompute="none"))
    plan = placement.best_plan([layer] * 4, settings)
    assert plan.feasible and [len(group) for group in plan.stage_layers] == [2, 2]
    first, second = plan.stage_memory
    for stage, in_flight in ((first, 2), (second, 1)):
        assert stage["weights"] == pytest.approx(2 * gib)
        assert stage["gradients"] == pytest.approx(2 * gib * GRADIENT_FACTOR)
        assert stage["optimizer"] == pytest.approx(2 * 6 * gib)
        assert stage["activations"] == pytest.approx(in_flight * 2 * 3 * gib)
    assert plan.stage_memory_bytes == tuple(stage["total"] for stage in plan.stage_memory)
    assert plan.memory_bytes == first


def test_interleaved_stage_memory_holds_megatrons_warmup_chunks():
    """The same four layers interleaved (v = 2, one layer per chunk): the first stage holds 2·1 + 1·2 + 1 = 5 chunks
    of 3 GiB, the second 3 — Megatron's warm-up count, not whole microbatches."""
    gib = float(GB_BYTES)
    layer = placement.LayerCost(fwd_s=1.0, bwd_s=2.0, param_bytes=gib, stash_bytes=3 * gib, output_bytes=1e3)
    cluster = Cluster(n_devices=2, global_batch=4, optimizer="adam", link_bandwidth_Bps=1e12)
    settings = Settings(cluster, 1, 1, 100 * gib, PlanSpec(p=2, d=1, recompute="none", interleave=2))
    plan = placement.best_plan([layer] * 4, settings)
    assert plan.feasible and plan.interleave == 2
    assert [stage["activations"] for stage in plan.stage_memory] == pytest.approx([5 * 3 * gib, 3 * 3 * gib])


@pytest.mark.slow
@pytest.mark.parametrize("name", MEGATRON_CASES)
def test_terms_match_megatrons_memory_report(name):
    """Against Megatron-LM's report for the first pipeline stage: weights, optimizer state and activations (Korthikanti
    et al. 2022 Table 2 with sequence parallelism and selective recompute, the interleaving penalty) each within ±10 %;
    gradients half of Megatron's (bf16 against its fp32 main gradients: the documented gap)."""
    case = get_case(name)
    evaluation, _ = plan_need(case)
    first = stage_terms(evaluation)[0]
    published = megatron_theoretical_bytes(case)
    for term in ("weights", "optimizer", "activations"):
        assert first.term(term) == pytest.approx(published[term], rel=TOLERANCE), term
    assert first.gradients == pytest.approx(published["gradients"] * GRADIENT_FACTOR / 2, rel=TOLERANCE)


@pytest.mark.slow
@pytest.mark.parametrize("name", KORTHIKANTI)
def test_korthikanti_plans_total_matches_megatrons_report(name):
    """The whole first stage of Korthikanti et al.'s A100 plans (no data parallelism: the optimizer state dominates)
    within ±10 % of Megatron-LM's report, its fp32 gradients included."""
    case = get_case(name)
    evaluation, fits = plan_need(case)
    assert fits
    assert stage_terms(evaluation)[0].total == pytest.approx(megatron_theoretical_bytes(case)["total"], rel=TOLERANCE)


@pytest.mark.slow
@pytest.mark.parametrize("name", FRONTIER_CASES)
def test_published_frontier_plan_fits_80_gib(name):
    """The plans trained on 80 GB H100s fit 80 GiB (before the stash of fused kernels: 90–115 GiB)."""
    evaluation, fits = plan_need(get_case(name))
    assert fits, evaluation.reason
    assert max(stage.total for stage in stage_terms(evaluation)) <= 80 * GB_BYTES


def test_summary_counts_the_configurations_within_tolerance():
    line = summary_line({"a": 0.05, "b": -0.12, "c": 0.10})
    assert line == "2 of 3 configurations match their published total within ±10%; outside: b -12.0%."


@pytest.mark.slow
def test_report_prints_and_writes_every_configuration(capsys, tmp_path):
    out_file = tmp_path / "memory.md"
    assert main(["--out", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert all(f"| {name}" in out for name in MEGATRON_CASES + FRONTIER_CASES)
    assert out_file.read_text() == out


@pytest.mark.parametrize("argv", [["--bogus"], ["--out"]])
def test_report_refuses_bad_arguments_in_one_line(capsys, argv):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m experiments.memory_check: error:") and err.count("\n") == 1


def test_report_refuses_a_directory_as_out(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        main(["--out", str(tmp_path)])
    assert exit_.value.code == 2 and "is a directory" in capsys.readouterr().err
