"""The analytic estimator: SCALE-Sim fold counts, roofline bounds, monotonicity, table = scalar path."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phaze_env.comm import allreduce_s
from phaze_env.hardware.accelerator import TPUV4, get_preset
from phaze_env.hardware.energy import op_energy_j
from phaze_env.hardware.estimator import (
    graph_latencies_s,
    latency_table,
    matmul_estimate,
    matmul_latency_s,
    op_latency_s,
    systolic_cycles,
)
from phaze_env.hardware.space import ArchSpace
from phaze_env.hardware.synthetic import gpt_layer_ops
from phaze_env.workloads.graph import Gemm, Op, OpGraph

FWD, BWD = gpt_layer_ops(seq=512, tensor_width=2)
LAYER_OPS = FWD + BWD


def scale_sim_cycles(M, K, N, R, C, dataflow):
    """SCALE-Sim v1 (Samajdar et al. 2018) analytical runtime for an R×C array, written independently:
    (2R + C + T − 2) · ⌈Sr/R⌉ · ⌈Sc/C⌉ with OS: Sr=M, Sc=N, T=K; WS: Sr=K, Sc=N, T=M; IS: Sr=K, Sc=M, T=N."""
    Sr, Sc, T = {"os": (M, N, K), "ws": (K, N, M), "is": (K, M, N)}[dataflow]
    return (2 * R + C + T - 2) * math.ceil(Sr / R) * math.ceil(Sc / C)


@pytest.mark.parametrize("dataflow", ["os", "ws", "is"])
@pytest.mark.parametrize("M,K,N,R,C", [(512, 768, 3072, 128, 128), (1, 4096, 4096, 128, 128), (100, 37, 300, 32, 16),
                                       (8192, 8192, 8192, 256, 256), (7, 7, 7, 2, 64), (4096, 64, 4096, 16, 128)])
def test_one_core_cycles_match_scale_sim(M, K, N, R, C, dataflow):
    assert int(systolic_cycles(1, M, K, N, R, C, 1, dataflow)) == scale_sim_cycles(M, K, N, R, C, dataflow)
    assert int(systolic_cycles(3, M, K, N, R, C, 1, dataflow)) == 3 * scale_sim_cycles(M, K, N, R, C, dataflow)


@settings(max_examples=60, deadline=None)
@given(M=st.integers(1, 5000), K=st.integers(1, 5000), N=st.integers(1, 5000),
       R=st.sampled_from([2, 8, 32, 128, 256]), C=st.sampled_from([2, 8, 32, 128, 256]))
def test_best_dataflow_is_the_scale_sim_minimum(M, K, N, R, C):
    acc = TPUV4.replace(tc_depth=R, tc_width=C)
    est = matmul_estimate(acc, M, K, N)
    assert est.compute_cycles == min(scale_sim_cycles(M, K, N, R, C, d) for d in ("os", "ws", "is"))
    assert est.compute_cycles == scale_sim_cycles(M, K, N, R, C, est.dataflow)


def test_large_square_gemm_reaches_most_of_peak():
    for cores in (1, TPUV4.num_tc):
        seconds = matmul_latency_s(TPUV4, 8192, 8192, 8192, cores=cores)
        utilisation = 2 * 8192**3 / seconds / (TPUV4.peak_flops * cores / TPUV4.num_tc)
        assert 0.8 < utilisation <= 1.0


def test_small_gemm_is_memory_bound_on_tpuv4():
    est = matmul_estimate(TPUV4, 1, 8192, 8192, cores=8)  # a matrix-vector product
    assert est.memory_s > est.compute_s
    assert est.latency_s >= 2 * 8192 * 8192 / TPUV4.hbm_bandwidth_Bps


@settings(max_examples=80, deadline=None)
@given(M=st.integers(1, 20000), K=st.integers(1, 20000), N=st.integers(1, 20000), batch=st.integers(1, 16),
       preset=st.sampled_from(["tpuv4", "tpuv4i", "a100", "phaze-small"]), all_cores=st.booleans())
def test_gemm_never_beats_peak_compute_or_bandwidth(M, K, N, batch, preset, all_cores):
    acc = get_preset(preset)
    cores = acc.num_tc if all_cores else 1
    seconds = matmul_latency_s(acc, M, K, N, batch=batch, cores=cores)
    peak_flops = 2.0 * cores * acc.tc_width * acc.tc_depth * acc.clock_hz * acc.gemm_efficiency
    assert seconds >= 2.0 * batch * M * K * N / peak_flops * (1 - 1e-12)
    assert seconds >= acc.bytes_per_element * batch * (M * K + K * N + M * N) / acc.effective_hbm_bandwidth_Bps * (1 - 1e-12)


def test_every_layer_op_respects_its_bounds_on_every_preset():
    for name in ("tpuv4", "tpuv4i", "a100", "h100", "phaze-small"):
        acc = get_preset(name)
        one, all_cores = graph_latencies_s(OpGraph(tuple(LAYER_OPS), ()), acc, link_bandwidth_Bps=50e9)
        for op, t1, ta in zip(LAYER_OPS, one, all_cores):
            assert ta <= t1 * (1 + 1e-12), op.name
            if op.unit in ("tc", "tc+vc"):
                assert ta >= op.gemm_flops / (acc.peak_flops * acc.gemm_efficiency) * (1 - 1e-12), op.name
                assert ta >= (op.bytes_read + op.bytes_written) / acc.effective_hbm_bandwidth_Bps * (1 - 1e-12), op.name
            if op.unit == "vc":  # only what exceeds the vector cores' buffer share crosses HBM
                share = acc.buffer_bytes * acc.num_vc / (acc.num_tc + acc.num_vc)
                spill = max(op.bytes_read + op.bytes_written - share, 0)
                assert ta >= spill / acc.effective_hbm_bandwidth_Bps * (1 - 1e-12), op.name
            if op.unit in ("vc", "tc+vc"):
                assert ta >= op.vector_elements / acc.peak_vector_elements_per_s * (1 - 1e-12), op.name


def _pow2(lo, hi):
    return st.integers(lo, hi).map(lambda e: 2**e)


@settings(max_examples=60, deadline=None)
@given(op_index=st.integers(0, len(LAYER_OPS) - 1), num_tc=_pow2(0, 6), num_vc=_pow2(0, 6), width=_pow2(1, 8),
       depth=_pow2(1, 8), buffer_mb=_pow2(1, 6), bw=st.sampled_from([1e11, 6e11, 1.2e12]))
def test_more_cores_bandwidth_or_buffer_never_slow_an_op_down(op_index, num_tc, num_vc, width, depth, buffer_mb, bw):
    op = LAYER_OPS[op_index]
    acc = TPUV4.replace(num_tc=num_tc, num_vc=num_vc, tc_width=width, vc_width=width, tc_depth=depth,
                        buffer_mb=buffer_mb, hbm_bandwidth_Bps=bw)
    bigger = {False: [acc.replace(buffer_mb=2 * buffer_mb), acc.replace(hbm_bandwidth_Bps=2 * bw)],
              True: [acc.replace(num_vc=2 * num_vc), acc.replace(buffer_mb=2 * buffer_mb), acc.replace(hbm_bandwidth_Bps=2 * bw)]}
    if op.unit != "vc":  # a vector op's buffer share shrinks as cores are added (fair sharing)
        bigger[False] += [acc.replace(num_tc=2 * num_tc), acc.replace(num_vc=2 * num_vc)]
        bigger[True] += [acc.replace(num_tc=2 * num_tc)]
    for parallel in (False, True):
        base = op_latency_s(op, acc, parallel=parallel, link_bandwidth_Bps=50e9)
        for other in bigger[parallel]:
            assert op_latency_s(op, other, parallel=parallel, link_bandwidth_Bps=50e9) <= base * (1 + 1e-12)


@settings(max_examples=40, deadline=None)
@given(M=st.integers(1, 9000), K=st.integers(1, 9000), N=st.integers(1, 9000), cores=st.integers(1, 64))
def test_gemm_time_non_increasing_in_cores(M, K, N, cores):
    acc = TPUV4.replace(num_tc=128)
    assert matmul_latency_s(acc, M, K, N, cores=cores + 1) <= matmul_latency_s(acc, M, K, N, cores=cores) * (1 + 1e-12)


def test_table_equals_the_per_accelerator_path():
    space = ArchSpace()
    tc, tc_index = space.tc_configs
    vc, vc_index = space.vc_configs
    table = latency_table(LAYER_OPS, tc, vc, link_bandwidth_Bps=50e9)
    one, all_cores = table.latencies_s(tc_index, vc_index)
    assert one.shape == all_cores.shape == (len(LAYER_OPS), len(space))
    rng = np.random.default_rng(1)
    for i in rng.integers(0, len(space), 12).tolist() + [space.index(TPUV4)]:
        acc = space[i]
        scalar_one, scalar_all = graph_latencies_s(OpGraph(tuple(LAYER_OPS), ()), acc, link_bandwidth_Bps=50e9)
        np.testing.assert_allclose(one[:, i], scalar_one, rtol=1e-12)
        np.testing.assert_allclose(all_cores[:, i], scalar_all, rtol=1e-12)
    assert (all_cores <= one * (1 + 1e-12)).all() and (one > 0).any()


def test_fused_epilogue_overlaps_its_gemm_tile_by_tile():
    gemm = Gemm(1, 2048, 1600, 6400)
    plain = Op(name="fc1", kind="matmul", unit="tc", gemms=(gemm,), flops=gemm.flops)
    fused = Op(name="fc1+gelu", kind="matmul", unit="tc+vc", gemms=(gemm,), vector_elements=2048 * 6400, vector_kind="gelu", flops=gemm.flops)
    tiles = 2048 // 128 * (6400 // 128)  # output tiles of 128×128
    for parallel, cores in ((False, 1), (True, 2)):
        epilogue = math.ceil(2048 * 6400 / (128 * 8 * cores)) * 8 / TPUV4.clock_hz  # gelu: 8 cycles per element
        gemm_s = op_latency_s(plain, TPUV4, parallel=parallel)
        expected = max(gemm_s, epilogue) + min(gemm_s, epilogue) / tiles
        assert op_latency_s(fused, TPUV4, parallel=parallel) == pytest.approx(expected)
        assert op_latency_s(fused, TPUV4, parallel=parallel) < gemm_s + epilogue


def test_vector_op_counts_sublanes_and_keeps_what_fits_on_chip():
    softmax = Op(name="softmax", kind="softmax", unit="vc", vector_elements=2**20, vector_kind="softmax",
                 bytes_read=2**21, bytes_written=2**21)
    # 4 MiB of operands fit in one core's share (128 MiB / 10 cores): compute only, 1024 elements per cycle.
    assert op_latency_s(softmax, TPUV4) == pytest.approx(2**20 / 1024 * 5 / TPUV4.clock_hz)
    # With a 2 MB buffer the share is 0.2 MiB: the rest spills to HBM at the achievable bandwidth.
    small = TPUV4.replace(buffer_mb=2)
    spill = 2**22 - 2 * 2**20 / 10
    assert op_latency_s(softmax, small) == pytest.approx(max(2**20 / 1024 * 5 / TPUV4.clock_hz, spill / small.effective_hbm_bandwidth_Bps))
    # Split over both vector cores it holds two shares.
    spill_all = 2**22 - 2 * 2 * 2**20 / 10
    assert op_latency_s(softmax, small, parallel=True) == pytest.approx(spill_all / small.effective_hbm_bandwidth_Bps)


def test_buffer_matters_only_where_operands_spill():
    big = Op(name="scores.softmax", kind="softmax", unit="vc", vector_elements=25 * 1024 * 1024, vector_kind="softmax",
             bytes_read=2 * 25 * 1024 * 1024, bytes_written=2 * 25 * 1024 * 1024)
    times = [op_latency_s(big, TPUV4.replace(buffer_mb=mb), parallel=True) for mb in (2, 8, 32, 128)]
    assert times == sorted(times, reverse=True) and times[0] > 1.3 * times[-1]
    tiny = Op(name="bias", kind="elementwise", unit="vc", vector_elements=4096, vector_kind="add", bytes_read=8192, bytes_written=8192)
    assert len({op_latency_s(tiny, TPUV4.replace(buffer_mb=mb)) for mb in (2, 8, 32, 128)}) == 1


@pytest.mark.parametrize("preset,measured", [("a100", 0.859), ("h100", 0.801)])
def test_large_gemm_matches_published_measured_efficiency(preset, measured):
    """Bekman's MAMF table (ml-engineering): best measured bf16 matmul 267.9/312 (A100 SXM), 792.1/989 (H100 SXM)."""
    acc = get_preset(preset)
    achieved = 2 * 8192**3 / matmul_latency_s(acc, 8192, 8192, 8192, cores=acc.num_tc) / acc.peak_flops
    assert achieved == pytest.approx(measured, rel=0.05)


def test_memory_bound_softmax_runs_at_measured_bandwidth():
    """A100 80 GB SXM: 1.80 TB/s measured for streaming kernels (NVIDIA developer forum, Nsight-confirmed)."""
    acc = get_preset("a100")
    rows, cols = 8 * 16 * 2048, 2048  # attention scores of 16 heads × 8 sequences: 1 GiB, far beyond the buffer
    footprint = 2 * 2 * rows * cols
    softmax = Op(name="softmax", kind="softmax", unit="vc", vector_elements=rows * cols, vector_kind="softmax",
                 bytes_read=footprint // 2, bytes_written=footprint // 2)
    achieved_Bps = footprint / op_latency_s(softmax, acc, parallel=True)
    assert achieved_Bps == pytest.approx(1.80e12, rel=0.10)


def test_comm_ops_use_the_ring_model():
    op = Op(name="ar", kind="comm", unit="comm", comm_kind="allreduce", comm_bytes=2**26, comm_group=8)
    expected = allreduce_s(2**26, 8, 50e9, 1e-6)
    assert op_latency_s(op, TPUV4, link_bandwidth_Bps=50e9, link_latency_s=1e-6) == pytest.approx(expected)
    assert op_latency_s(op, TPUV4, parallel=True, link_bandwidth_Bps=50e9, link_latency_s=1e-6) == pytest.approx(expected)
    with pytest.raises(ValueError, match="link_bandwidth_Bps"):
        op_latency_s(op, TPUV4)
    assert op_latency_s(Op(name="view", kind="data", unit="none"), TPUV4) == 0.0


def test_matmul_latency_validates_arguments():
    with pytest.raises(ValueError, match="cores"):
        matmul_latency_s(TPUV4, 128, 128, 128, cores=16)
    with pytest.raises(ValueError, match="M"):
        matmul_latency_s(TPUV4, 0, 128, 128)


def test_energy_is_positive_and_dominated_by_hbm_for_matvec():
    matvec = Op(name="mv", kind="matmul", unit="tc", gemms=(Gemm(1, 1, 8192, 8192),), flops=2 * 8192 * 8192)
    energy = op_energy_j(matvec, TPUV4)
    hbm_floor = 2 * 8192 * 8192 * 31e-12
    assert hbm_floor < energy < 2 * hbm_floor
    for op in LAYER_OPS:
        assert op_energy_j(op, TPUV4) >= 0
    big = Op(name="mm", kind="matmul", unit="tc", gemms=(Gemm(1, 4096, 4096, 4096),), flops=2 * 4096**3)
    assert op_energy_j(big, TPUV4) > 4096**3 * 0.5e-12  # at least the MAC energy


def test_hbm_traffic_depends_on_the_buffer():
    n = 4096
    compulsory = 2 * 3 * n * n
    # 128 MB: a whole operand (32 MiB) fits in the resident half, so each operand crosses HBM once.
    assert matmul_estimate(TPUV4, n, n, n).traffic_bytes == compulsory
    # 2 MB: the best schedule keeps a 512×512 fp32 output block (1 MiB, the resident half) on chip and
    # re-fetches A and B once per block column/row: 8 + 8 + 1 passes of n² elements.
    small = TPUV4.replace(buffer_mb=2)
    assert matmul_estimate(small, n, n, n).traffic_bytes == 2 * n * n * (8 + 8 + 1)
    assert matmul_latency_s(small.replace(hbm_bandwidth_Bps=1e10), n, n, n) > matmul_latency_s(TPUV4.replace(hbm_bandwidth_Bps=1e10), n, n, n)


def test_one_vector_cost_table_for_the_tracer_kinds():
    from phaze_env.hardware.estimator import VECTOR_CYCLES_PER_ELEMENT
    from phaze_env.workloads.graph import VECTOR_KINDS
    from phaze_env.workloads.trace import VECTOR_OPS

    assert set(VECTOR_CYCLES_PER_ELEMENT) == set(VECTOR_KINDS)
    assert {kind for _, kind, _ in VECTOR_OPS.values()} <= set(VECTOR_KINDS)  # every traced kind has a cost
    with pytest.raises(ValueError, match="layernorm"):
        op_latency_s(Op(name="ln", kind="norm", unit="vc", vector_elements=8, vector_kind="layernorm"), TPUV4)
