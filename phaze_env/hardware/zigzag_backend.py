"""Optional second estimator: per-GEMM latency and energy from ZigZag's mapping search.

ZigZag (``pip install zigzag-dse six``; KU Leuven, Mei et al., IEEE TC 2021) searches temporal mappings
of a loop nest on a described memory hierarchy. We describe one tensor core of the accelerator as a
``tc_width × tc_depth`` MAC array (``K``/N on D1, the reduction ``C``/K on D2: weight-stationary, as a
TPU MXU) with what our array has:

* a **double-buffered weight register** per PE (two bf16 words: the next weight tile loads while the
  current one computes, the MXU's shadow weights);
* an **fp32 accumulator at the edge of each column** (``served_dimensions: [D2]``: shared by the column's
  PEs, which reduce spatially into it) holding ``tc_depth`` partial sums, one output tile's column;
* the on-chip buffer (shared by all operands, ports wide enough for the array's edges) and HBM
  (bandwidth in bits per cycle).

Per-access energies use :mod:`.energy`'s constants. Results are cached in the ``zigzag-gemm``
:class:`~phaze_env.cache.DiskCache` namespace, keyed by the model version and the description.

ZigZag models a single array: ``batch`` multiplies its latency and energy, and ``cores > 1`` scales
its one-core latency by the analytic model's all-core/one-core ratio. The earlier description (one
weight word per PE, a one-word output register) made ZigZag stall ≈ 50 % of cycles reloading weights
and round-tripping partial sums, the 1.5–2.1× "gap"; with the registers above ZigZag stays within a few
per cent of the ideal ``MNK / (rows · cols)`` cycles. What remains is the systolic fill/drain that the
analytic (SCALE-Sim v1) model charges per fold (``2R + C − 2`` cycles) and ZigZag does not model —
see docs/fidelity.md for the per-shape ratios.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from phaze_env.cache import DiskCache, code_key
from phaze_env.hardware import energy
from phaze_env.hardware.accelerator import Accelerator
from phaze_env.hardware.estimator import accelerator_table, matmul_estimate, pipelined_s
from phaze_env.workloads.graph import Op

LOOP_PRIME_FACTOR_LIMIT = 4  # LOMA search breadth; 6 took 10× longer with identical results on our shapes
_CACHE = DiskCache("zigzag-gemm")


@dataclass(frozen=True)
class ZigZagGemm:
    cycles: float
    latency_s: float
    energy_j: float


def available() -> bool:
    try:
        import zigzag.api  # noqa: F401
    except ImportError:
        return False
    return True


def _port(name: str, kind: str, bits: int, allocation: list[str]) -> str:
    lines = [f"      - name: {name}", f"        type: {kind}", f"        bandwidth_min: {min(bits, 64)}",
             f"        bandwidth_max: {bits}", "        allocation:"] + [f"          - {a}" for a in allocation]
    return "\n".join(lines)


def accelerator_yaml(acc: Accelerator) -> str:
    """ZigZag's hardware description of one tensor core of ``acc`` with its buffer and HBM."""
    bits = 8 * acc.bytes_per_element
    edge_bits = 64 * bits * (acc.tc_width + acc.tc_depth)  # ample: the array never starves on the buffer port
    hbm_bits_per_cycle = max(1, int(acc.hbm_bandwidth_Bps / acc.clock_hz * 8))
    sram_pj = energy.SRAM_PJ_PER_BYTE * 8  # per 64-bit word
    hbm_pj = energy.HBM_PJ_PER_BYTE * 8
    memories = f"""name: phaze_tensor_core
memories:
  rf_w:
    size: {2 * bits}
    r_cost: 0.02
    w_cost: 0.02
    area: 0
    latency: 1
    operands: [I2]
    ports:
{_port("r_port_1", "read", bits, ["I2, tl"])}
{_port("w_port_1", "write", bits, ["I2, fh"])}
    served_dimensions: []
  rf_o:
    size: {32 * acc.tc_depth}
    r_cost: 0.02
    w_cost: 0.02
    area: 0
    latency: 1
    operands: [O]
    ports:
{_port("r_port_1", "read", 32, ["O, tl"])}
{_port("r_port_2", "read", 32, ["O, th"])}
{_port("w_port_1", "write", 32, ["O, fh"])}
{_port("w_port_2", "write", 32, ["O, fl"])}
    served_dimensions: [D2]
  buffer:
    size: {acc.buffer_bytes * 8}
    r_cost: {sram_pj}
    w_cost: {sram_pj}
    area: 0
    latency: 1
    operands: [I1, I2, O]
    ports:
{_port("r_port_1", "read", edge_bits, ["I1, tl", "I2, tl", "O, tl", "O, th"])}
{_port("w_port_1", "write", edge_bits, ["I1, fh", "I2, fh", "O, fh", "O, fl"])}
    served_dimensions: [D1, D2]
  dram:
    size: {int(acc.hbm_bytes * 8)}
    r_cost: {hbm_pj}
    w_cost: {hbm_pj}
    area: 0
    latency: 1
    operands: [I1, I2, O]
    ports:
{_port("rw_port_1", "read_write", hbm_bits_per_cycle, ["I1, fh", "I1, tl", "I2, fh", "I2, tl", "O, fh", "O, tl", "O, fl", "O, th"])}
    served_dimensions: [D1, D2]
operational_array:
  unit_energy: {energy.MAC_PJ}
  unit_area: 1
  dimensions: [D1, D2]
  sizes: [{acc.tc_width}, {acc.tc_depth}]
"""
    return memories


def mapping_yaml(acc: Accelerator) -> str:
    return f"""- name: default
  spatial_mapping:
    D1:
      - K, {acc.tc_width}
    D2:
      - C, {acc.tc_depth}
  memory_operand_links:
    O: O
    W: I2
    I: I1
"""


def _workload(M: int, K: int, N: int, bits: int) -> list[dict]:
    # ZigZag's GEMM names: O[b][k] += I[b][c] * W[c][k] with b = M, c = K (reduction), k = N.
    return [{"id": 0, "name": "gemm", "operator_type": "Gemm", "equation": "O[b][k]+=I[b][c]*W[c][k]",
             "loop_dims": ["B", "C", "K"], "loop_sizes": [M, K, N],
             "operand_precision": {"I": bits, "W": bits, "O": 32, "O_final": bits}, "operand_source": {"I": 0}}]


def _run_zigzag(acc: Accelerator, M: int, K: int, N: int) -> tuple[float, float]:
    """(cycles, energy_pJ) of one GEMM on one tensor core, from ZigZag (not cached)."""
    from zigzag.api import get_hardware_performance_zigzag

    logging.getLogger("zigzag").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="phaze-zigzag-") as tmp:
        hw, mapping = Path(tmp, "accelerator.yaml"), Path(tmp, "mapping.yaml")
        hw.write_text(accelerator_yaml(acc))
        mapping.write_text(mapping_yaml(acc))
        energy_pj, cycles, _ = get_hardware_performance_zigzag(
            _workload(M, K, N, 8 * acc.bytes_per_element), str(hw), str(mapping), opt="latency",
            dump_folder=str(Path(tmp, "out")), lpf_limit=LOOP_PRIME_FACTOR_LIMIT, loma_show_progress_bar=False,
        )
    return float(cycles), float(energy_pj)


def gemm(acc: Accelerator, M: int, K: int, N: int, *, batch: int = 1) -> ZigZagGemm:
    """ZigZag's latency and energy for ``batch`` GEMMs ``M×K @ K×N`` on one tensor core (cached)."""
    if not available():
        raise ImportError("the ZigZag backend needs `pip install zigzag-dse six`")
    core = (acc.tc_width, acc.tc_depth, acc.buffer_mb, acc.hbm_bandwidth_Bps, acc.hbm_gb, acc.clock_hz, acc.bytes_per_element)
    key = code_key(__name__, "zigzag-gemm", accelerator_yaml(acc), metadata.version("zigzag-dse"), LOOP_PRIME_FACTOR_LIMIT, core, (M, K, N))
    result = _CACHE.get(key)
    if result is None:
        result = _run_zigzag(acc, M, K, N)
        _CACHE.put(key, result)
    cycles, energy_pj = result
    return ZigZagGemm(batch * cycles, batch * cycles / acc.clock_hz, batch * energy_pj * 1e-12)


def matmul_latency_s(acc: Accelerator, M: int, K: int, N: int, *, batch: int = 1, cores: int = 1) -> float:
    """ZigZag's one-core latency, scaled to ``cores`` by the analytic model's speed-up."""
    one_core = gemm(acc, M, K, N, batch=batch).latency_s
    if cores == 1:
        return one_core
    speedup = matmul_estimate(acc, M, K, N, batch=batch).latency_s / matmul_estimate(acc, M, K, N, batch=batch, cores=cores).latency_s
    return one_core / speedup


def op_latency_s(op: Op, acc: Accelerator, *, parallel: bool = False, link_bandwidth_Bps: float | None = None,
                 link_latency_s: float = 0.0) -> float:
    """The analytic op latency with its GEMM part replaced by ZigZag's (vector and communication parts stay
    analytic and overlap with it as in :func:`phaze_env.hardware.estimator.pipelined_s`)."""
    table = accelerator_table([op], acc, link_bandwidth_Bps=link_bandwidth_Bps, link_latency_s=link_latency_s)
    vector_s = float((table.vc_all_s if parallel else table.vc_one_s)[0, 0])
    tiles = float(table.tc_tiles[0, 0])
    cores = acc.num_tc if parallel else 1
    gemm_s = sum(matmul_latency_s(acc, g.m, g.k, g.n, batch=g.batch, cores=cores) for g in op.gemms)
    return float(pipelined_s(gemm_s, vector_s, tiles)) + float(table.comm_s[0])
