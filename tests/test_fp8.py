"""FP8 tensor cores (the Transformer-Engine recipe of phaze_env.hardware.number_format): the rule, the estimator's
rate, casts and traffic, area, energy and memory; bf16 stays the default and prices exactly as before."""

import numpy as np
import pytest

from phaze_env.cluster import get_cluster
from phaze_env.evaluate import evaluate
from phaze_env.hardware import area, get_preset
from phaze_env.hardware.accelerator import TPUV4, Accelerator
from phaze_env.hardware.energy import FP8_MAC_PJ, MAC_PJ, gemm_energy_j, op_energy_j
from phaze_env.hardware.estimator import accelerator_table, matmul_estimate
from phaze_env.hardware.number_format import (FP8_CAST_HBM_BYTES_PER_ELEMENT, FP8_MAC_RATE, cast_elements,
                                              fp8_flags, fp8_weight_copy_factor)
from phaze_env.plan_spec import PlanSpec
from phaze_env.pricing import price_ops
from phaze_env.workloads import model_graph
from phaze_env.workloads.graph import Gemm
from tests.tiny import TINY

H100 = get_preset("h100")
H100_FP8 = H100.replace(number_format="fp8")


@pytest.fixture(scope="module")
def graph():
    return model_graph(TINY, microbatch=2, tensor_width=2)


def test_default_is_bf16_and_fp8_round_trips():
    assert Accelerator().number_format == "bf16" and TPUV4.notation() == Accelerator().notation()
    assert Accelerator.from_dict(H100_FP8.to_dict()) == H100_FP8
    assert "fp8" in H100_FP8.notation() and "fp8" not in H100.notation()
    with pytest.raises(ValueError, match="number_format must be one of bf16, fp8, got 'fp16'"):
        H100.replace(number_format="fp16")


def test_h100_fp8_peak_is_the_datasheet_figure():
    assert get_preset("h100-fp8") == H100_FP8
    assert H100_FP8.fp8_peak_flops == pytest.approx(1979e12, rel=1e-3)  # NVIDIA H100 SXM datasheet, dense FP8
    assert H100.fp8_peak_flops == 0.0


def test_the_rule_blocks_linear_gemms_only(graph):
    layers = {layer.name: layer for layer in graph.layers}
    block = layers["block"]
    for dag in (block.fwd, block.bwd):
        flags = fp8_flags(dag.ops, "block", "fp8")
        assert {op.kind for op, fp8 in zip(dag.ops, flags) if fp8} == {"matmul"}
        assert not any(fp8 for op, fp8 in zip(dag.ops, flags) if op.kind == "bmm")  # attention stays bf16
        assert sum(flags) == 4  # QKV, attention output, FC1, FC2
    for name in ("pre", "post"):  # embedding, LM head and loss stay bf16
        assert not any(fp8_flags(layers[name].fwd.ops + layers[name].bwd.ops, name, "fp8"))
    assert not any(fp8_flags(block.fwd.ops, "block", "bf16"))
    with pytest.raises(ValueError, match="needs the name of their layer"):
        fp8_flags(block.fwd.ops, None, "fp8")


def test_cast_operand_is_the_activation_of_the_first_gemm(graph):
    block = next(layer for layer in graph.layers if layer.name == "block")
    tokens = graph.microbatch * graph.seq_len
    for op in block.fwd.ops + block.bwd.ops:
        if fp8_flags([op], "block", "fp8")[0]:
            first = op.gemms[0]
            assert first.batch * first.m == tokens  # X (forward) and dY (dgrad) have one row per token
            assert cast_elements(op) == tokens * first.k


def test_large_gemm_runs_twice_as_fast_and_small_ones_do_not():
    large = [matmul_estimate(acc, 8192, 8192, 8192, cores=acc.num_tc) for acc in (H100, H100_FP8)]
    assert large[0].compute_s == pytest.approx(FP8_MAC_RATE * large[1].compute_s)
    assert large[0].latency_s / large[1].latency_s == pytest.approx(FP8_MAC_RATE, rel=0.01)
    assert large[1].traffic_bytes < large[0].traffic_bytes  # 1-byte operands
    thin = [matmul_estimate(acc, 8192, 8192, 16, cores=acc.num_tc) for acc in (H100, H100_FP8)]  # memory-bound
    assert 1.0 < thin[0].latency_s / thin[1].latency_s < FP8_MAC_RATE


def test_fp8_ops_pay_their_cast_and_bf16_ops_price_unchanged(graph):
    block = next(layer for layer in graph.layers if layer.name == "block")
    ops = block.fwd.ops
    bf16 = price_ops(ops, H100, get_cluster("dgx-h100", 8))
    fp8 = price_ops(ops, H100_FP8, get_cluster("dgx-h100", 8), layer="block")
    flags = np.array(fp8_flags(ops, "block", "fp8"))
    hbm_Bps = H100.effective_hbm_bandwidth_Bps
    expected_cast = [cast_elements(op) * FP8_CAST_HBM_BYTES_PER_ELEMENT / hbm_Bps if f else 0.0 for op, f in zip(ops, flags)]
    assert fp8.tensor.cast_s[:, 0] == pytest.approx(expected_cast)
    one_bf16, _ = bf16.latencies_s()
    one_fp8, _ = fp8.latencies_s()
    assert np.array_equal(one_bf16[~flags], one_fp8[~flags])  # attention, norms, softmax: bf16 on both
    assert np.all(fp8.tensor.compute_one_s[flags, 0] < bf16.tensor.compute_one_s[flags, 0])
    # a bf16 accelerator prices the same with or without the layer name
    named = accelerator_table(ops, H100, link_bandwidth_Bps=1e11, layer="block").latencies_s(0, 0)[0]
    assert np.array_equal(named, accelerator_table(ops, H100, link_bandwidth_Bps=1e11).latencies_s(0, 0)[0])


def test_mac_area_per_format_and_its_documented_sensitivity(monkeypatch):
    macs = 128 * 128
    grown = area.tensor_core_area_mm2(128, 128, "fp8") - area.tensor_core_area_mm2(128, 128)
    assert grown == pytest.approx(macs * area.MAC_AREA_MM2 * (area.FP8_MAC_AREA_FACTOR - 1))
    documented = {1.1: 0.049, 1.25: 0.124, 1.5: 0.247}  # FP8_MAC_AREA_FACTOR's docstring
    for factor, growth in documented.items():
        monkeypatch.setattr(area, "FP8_MAC_AREA_FACTOR", factor)
        assert TPUV4.replace(number_format="fp8").area_mm2 / TPUV4.area_mm2 - 1 == pytest.approx(growth, abs=5e-4)


def test_fp8_energy_halves_the_macs_and_charges_the_cast(graph):
    gemm = Gemm(1, 4096, 4096, 4096)
    saved = gemm_energy_j(gemm, H100) - gemm_energy_j(gemm, H100, fp8=True)
    assert saved > gemm.flops / 2 * (MAC_PJ - FP8_MAC_PJ) * 1e-12  # MACs, and fewer operand bytes too
    block = next(layer for layer in graph.layers if layer.name == "block")
    op = next(op for op in block.fwd.ops if fp8_flags([op], "block", "fp8")[0])
    with pytest.raises(ValueError, match="needs the name of their layer"):
        op_energy_j(op, H100_FP8)
    assert op_energy_j(op, H100_FP8, layer="post") == op_energy_j(op, H100)  # outside the blocks: bf16


def test_fp8_weight_copies_count_in_memory(graph):
    factor = fp8_weight_copy_factor(graph, "fp8")
    assert fp8_weight_copy_factor(graph, "bf16") == 0.0
    assert 0.9 < factor <= 1.0  # 2 bytes per FP8 weight over its 2 bf16 bytes; norms and biases have none
    cluster = get_cluster("dgx-h100", 8, global_batch=16, optimizer="adam")
    plan = PlanSpec(t=2, p=1, d=4, microbatch=2, recompute="none", zero=1)
    memory = {fmt: evaluate(TINY, H100.replace(number_format=fmt), cluster, plan=plan).memory_bytes
              for fmt in ("bf16", "fp8")}
    assert memory["fp8"]["weights"] == pytest.approx(memory["bf16"]["weights"] * (1 + factor))
    assert memory["fp8"]["optimizer"] == pytest.approx(memory["bf16"]["optimizer"])


def test_no_fp8_design_reports_mfu_above_100_percent():
    """MFU counts model FLOPs against the peak of the format the design's GEMMs run in (number_format.
    format_peak_flops). One 16×16 FP8 tensor core is compute-bound on the tiny GPT-2: it trains faster than its bf16
    peak (on that basis its MFU would read ≈ 148 %), and on its FP8 peak it stays at most 100 %, said next to it."""
    from phaze_env.cluster import Cluster
    from phaze_env.evaluate import _model_flops_per_sample
    from phaze_env.hardware.number_format import format_peak_flops

    for number_format in ("fp8", "bf16"):
        acc = Accelerator(num_tc=1, tc_width=16, tc_depth=16, num_vc=64, number_format=number_format)
        evaluation = evaluate(TINY, acc, Cluster(n_devices=1, global_batch=8))
        plan = evaluation.plan
        flops_s = evaluation.throughput_samples_s * _model_flops_per_sample(
            model_graph(TINY, microbatch=plan.microbatch, tensor_width=plan.tensor_width))
        assert evaluation.peak_flops == acc.format_peak_flops == format_peak_flops(acc.peak_flops, number_format)
        assert evaluation.mfu == pytest.approx(flops_s / acc.format_peak_flops, rel=1e-9)
        assert 0 < evaluation.mfu <= 1
        name = "FP8" if number_format == "fp8" else "bf16"
        assert evaluation.mfu_basis == f"of the {name} peak" and f"of the {name} peak" in evaluation.summary()
        if number_format == "fp8":
            assert acc.format_peak_flops == FP8_MAC_RATE * acc.peak_flops == acc.fp8_peak_flops
            assert flops_s > acc.peak_flops  # above its bf16 peak: the bf16 basis would read over 100 %
