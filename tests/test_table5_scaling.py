"""The Table 5 analysis (experiments.table5_scaling): its two hand-checkable terms, and its decomposition reproducing
the calibration row (where the published and our per-layer efficiency must agree)."""

from __future__ import annotations

import pytest

from experiments import table5_scaling as t5
from experiments.calculon_reference import case_name
from experiments.validation_cases import get_case


def test_wave_quantisation_counts_the_idle_sms_of_the_last_wave():
    from phaze_env.hardware.estimator import wave_quantisation

    # 2048 × 4608 (175B's QKV GEMM per GPU at t = 8): 8 × 36 = 288 tiles of 256 × 128 on 108 SMs = 3 waves
    assert wave_quantisation(2048, 4608, 108) == pytest.approx(288 / 324)
    assert wave_quantisation(4608, 2048, 108) == wave_quantisation(2048, 4608, 108)  # the long side takes the 256
    assert wave_quantisation(256 * 108, 128, 108) == 1.0  # exactly one full wave
    assert wave_quantisation(256, 128, 108) == pytest.approx(1 / 108)
    assert wave_quantisation(256, 128, 108, batch=216) == 1.0  # a batched GEMM's tiles fill two waves


@pytest.mark.parametrize("size, scores", [("175b", 12 * 2048 ** 2), ("22b", 4 * 8 * 2048 ** 2)])
def test_the_models_attention_dropout_is_korthikantis_mask_and_output_per_pass(size, scores):
    """175B at t = 8: 12 heads per GPU × 2048² scores (22B: 8 heads, microbatch 4); 5 bytes per score each way
    (Korthikanti et al. 2022 §4.1: the mask, 1 byte, and the 2-byte output), at the stream rate the evaluator uses."""
    from experiments.validation_fit import case_accelerator, case_cluster
    from phaze_env.workloads import model_graph

    case = get_case(case_name(size, "full"))
    graph = model_graph(case.workload, seq_len=case.seq_len, microbatch=case.microbatch, tensor_width=case.tensor)
    streaming_Bps = case_accelerator(case).effective_hbm_bandwidth_Bps * case_cluster(case).stack.framework_efficiency
    fwd_s, bwd_s = t5.model_dropout_s(case, graph)
    assert fwd_s * streaming_Bps == pytest.approx(5 * scores) and bwd_s * streaming_Bps == pytest.approx(5 * scores)


@pytest.mark.slow
def test_the_calibration_row_has_the_published_per_layer_efficiency_and_without_waves_keeps_it():
    terms = t5.row(case_name("175b", "full"))
    assert terms["published_layer_eff"] == pytest.approx(terms["layer_eff"], rel=0.01)  # fitted there
    assert 0.0 < terms["head_share"] < 0.05 and terms["dropout_s"] > 0
    errors, efficiencies = t5.without_waves((case_name("175b", "full"), case_name("1t", "full")))
    assert errors[case_name("175b", "full")] == pytest.approx(0.0, abs=0.002)  # refitted on it
    # the model before the waves: its efficiency on 175B was 0.807 and 1T came out 10.5 % slow
    assert efficiencies["megatron-lm"] == pytest.approx(0.807, abs=0.002)
    assert errors[case_name("1t", "full")] == pytest.approx(0.105, abs=0.005)
    line, row_errors = t5._line("175b full", terms, errors[case_name("175b", "full")], 18.03)
    assert line.startswith("| 175b full | 18.13 | 18.14 (+0.0%) | 18.13 (+0.0%) |") and line.endswith("| 18.03 (-0.6%) |")
    assert row_errors[0] < 0.005


def test_the_stack_prices_each_gemms_waves_and_a_stack_without_them_does_not():
    import dataclasses

    import phaze_env.pricing as pricing
    from experiments.validation_fit import case_accelerator, case_cluster
    from phaze_env.workloads import model_graph

    case = get_case(case_name("175b", "full"))
    block = next(layer for layer in model_graph(case.workload, seq_len=2048, tensor_width=8).layers
                 if layer.name == "block")
    ops = block.fwd.ops
    qkv = next(i for i, op in enumerate(ops) if op.gemms and op.gemms[0].n == 3 * 12288 // 8)
    cluster = case_cluster(case)
    assert cluster.stack.gemm_wave_sms == 108  # the megatron-lm profile's A100 fit

    def compute_s(sms):
        stack = dataclasses.replace(cluster.stack, gemm_wave_sms=sms)
        priced = pricing.price_ops(ops, case_accelerator(case), cluster.replace(stack=stack), layer="block")
        return float(priced.tensor.compute_all_s[qkv, 0])

    from phaze_env.hardware.estimator import wave_quantisation
    assert compute_s(108) == pytest.approx(compute_s(0) / wave_quantisation(2048, 3 * 12288 // 8, 108))
    with pytest.raises(ValueError, match="gemm_wave_sms"):
        dataclasses.replace(cluster.stack, gemm_wave_sms=-1)


def test_the_term_line_pairs_each_term_and_merges_the_sync_columns():
    ours = dict.fromkeys(t5.TERMS, 1.0)
    theirs = dict.fromkeys(t5.TERMS, 0.5)
    assert t5.term_line("x", ours, theirs) == ("| x | 1.00 / 0.50 | 1.00 / 0.50 | 1.00 / 0.50 | 1.00 / 0.50 | "
                                              "1.00 / 0.50 | 2.00 / 1.00 | 7.00 / 3.50 |")


def test_the_gemm_rest_split_solves_both_rows_and_the_implied_speedup_is_relative():
    small = {"gemm_s": 2.0, "layer_s": 3.0, "published_layer_s": 2 * 0.5 + 1 * 2.0}
    large = {"gemm_s": 8.0, "layer_s": 10.0, "published_layer_s": 8 * 0.5 + 2 * 2.0}
    assert t5.gemm_rest_scales(small, large) == pytest.approx((0.5, 2.0))
    # GEMMs twice as fast as ours at the large row, as fast as ours at the reference: a speed-up of 2
    reference = {"gemm_s": 2.0, "layer_s": 3.0, "published_layer_s": 3.0}
    row = {"gemm_s": 8.0, "layer_s": 10.0, "published_layer_s": 6.0}
    assert t5.implied_gemm_speedup(row, reference) == pytest.approx(2.0)
    assert t5.implied_gemm_speedup(reference, reference) == pytest.approx(1.0)


def test_the_implied_speedup_without_the_head_adds_the_heads_time_per_layer_back():
    reference = {"gemm_s": 2.0, "layer_s": 3.0, "published_layer_s": 3.0, "head_s": 0.0, "layers_on_slowest": 1}
    # published per layer 4.5 once the head's 1.0 s over 2 layers is added back: (4.5 − 2) / 8 against (3 − 1) / 2
    row = {"gemm_s": 8.0, "layer_s": 10.0, "published_layer_s": 4.0, "head_s": 1.0, "layers_on_slowest": 2}
    assert t5.implied_gemm_speedup(row, reference, head_paces=False) == pytest.approx(1.0 / (2.5 / 8))
    assert t5.implied_gemm_speedup(row, reference) == pytest.approx(1.0 / (2.0 / 8))
