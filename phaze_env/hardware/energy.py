"""Dynamic energy per operator (joules): the second objective next to latency.

Per-event energies for a 7 nm-class bf16 accelerator, scaled from Horowitz, "Computing's energy
problem", ISSCC 2014 (45 nm: fp16 multiply 1.1 pJ, fp32 add 0.9 pJ, 8 KB SRAM 64-bit read 10 pJ) by
≈ 0.25 for 45 → 7 nm logic, and from published DRAM/SerDes figures:

* ``MAC_PJ`` 0.5 pJ — one bf16 multiply with fp32 accumulation (2.0 pJ at 45 nm × 0.25).
* ``VECTOR_LANE_CYCLE_PJ`` 1.0 pJ — one fp32 ALU operation plus its vector-register-file accesses.
* ``SRAM_PJ_PER_BYTE`` 1.0 pJ — on-chip buffer access including wires across a large (MB-scale) array.
* ``HBM_PJ_PER_BYTE`` 31 pJ — HBM2 ≈ 3.9 pJ/bit (O'Connor et al., MICRO 2017).
* ``LINK_PJ_PER_BYTE`` 40 pJ — chip-to-chip SerDes ≈ 5 pJ/bit.
* ``FP8_MAC_PJ`` 0.25 pJ — one FP8 MAC on FP8 tensor cores (:mod:`phaze_env.hardware.number_format`): half a
  bf16 MAC, the H100's ratio at its power limit (1,979 TFLOP/s FP8 and 989.4 bf16 at the same 700 W TDP,
  NVIDIA H100 datasheet; assumption that the rest of the chip's power is the same in both). FP8 operands cross
  the buffer and HBM in 1 byte; the cast of each FP8 GEMM's activation operand reads and writes HBM.

Leakage/static power and clocking are not modelled per operator (dynamic energy only). GEMM SRAM traffic
counts what the arrays read and write per fold under the chosen dataflow (stationary tile + both streamed
edges) plus the HBM traffic written into the buffer.

For a chip's TDP-like power (:mod:`phaze_env.hardware.cost`), :func:`full_rate_power_terms_w` prices every
unit busy every cycle with the same per-event energies, and ``LEAKAGE_W_PER_MM2`` adds static power per mm²
of die. Nothing above changes, so per-operator energies and the search's results do not move.
"""

from __future__ import annotations

import numpy as np

from phaze_env import comm
from phaze_env.hardware.accelerator import Accelerator
from phaze_env.hardware.estimator import (
    DATAFLOWS,
    _ceil_div,
    best_systolic_cycles,
    buffer_share_bytes,
    dataflow_dims,
    gemm_hbm_bytes,
    op_traffic_floor_bytes,
    operand_bytes,
    spilled_bytes,
    vector_cycles_per_element,
)
from phaze_env.hardware.number_format import FP8_MAC_RATE, fp8_cast_bytes, fp8_flags
from phaze_env.workloads.graph import Gemm, Op

MAC_PJ = 0.5
VECTOR_LANE_CYCLE_PJ = 1.0
SRAM_PJ_PER_BYTE = 1.0
HBM_PJ_PER_BYTE = 31.0
LINK_PJ_PER_BYTE = 40.0
FP8_MAC_PJ = MAC_PJ / FP8_MAC_RATE
PJ = 1e-12
DYNAMIC_ENERGY_LABEL = "chip dynamic energy/sample (operators only: no static power, host or PUE)"
"""What ``Evaluation.energy_per_sample_j`` is, wherever it is shown: the operators' dynamic energy on the chip
(this module's per-event energies), not the wall-power energy per token of a system-space design
(:data:`phaze_env.hardware.system.WALL_ENERGY_LABEL`); the two are different measures and are not compared."""
LEAKAGE_W_PER_MM2 = 0.1
"""Static (leakage) power per mm² of die at operating temperature, 7–5 nm class: 0.1 W/mm², i.e. ≈ 80 W on an
≈ 800 mm² die, a fifth of an A100's 400 W TDP. Assumption (no vendor publishes a leakage split), a round value
not fitted to any chip; ±50 % moves an ≈ 800 mm² die's modelled power by ≈ ±40 W and TPUv4's by ≈ ±19 W
(docs/cost_model.md, "Sensitivity")."""


def array_sram_bytes(gemm: Gemm, acc: Accelerator, dataflow: str, fp8: bool = False) -> float:
    """Bytes the arrays exchange with the buffer for ``gemm`` under ``dataflow`` (one core's folds; FP8
    operands: 1 byte per element)."""
    b, m, k, n = gemm.as_tuple()
    rows, cols = acc.tc_depth, acc.tc_width
    spatial_rows, spatial_cols, streamed = dataflow_dims(dataflow, m, k, n)
    folds = b * int(_ceil_div(spatial_rows, rows)) * int(_ceil_div(spatial_cols, cols))
    per_fold = rows * cols + streamed * (rows + cols)
    return float(folds * per_fold * operand_bytes(acc.bytes_per_element, fp8))


def gemm_energy_j(gemm: Gemm, acc: Accelerator, fp8: bool = False) -> float:
    """MACs + array↔buffer traffic + HBM traffic (written through the buffer) of one GEMM (``fp8``: in FP8)."""
    b, m, k, n = gemm.as_tuple()
    _, choice = best_systolic_cycles(b, m, k, n, acc.tc_depth, acc.tc_width, 1)
    hbm_bytes = float(gemm_hbm_bytes(b, m, k, n, np.array([acc.buffer_bytes]), acc.bytes_per_element, fp8)[0])
    sram_bytes = array_sram_bytes(gemm, acc, DATAFLOWS[int(choice)], fp8) + hbm_bytes
    macs = gemm.flops / 2
    return PJ * (macs * (FP8_MAC_PJ if fp8 else MAC_PJ) + sram_bytes * SRAM_PJ_PER_BYTE + hbm_bytes * HBM_PJ_PER_BYTE)


def link_bytes_per_participant(op: Op) -> float:
    """Bytes each participant sends in its collective: the ring time of :mod:`phaze_env.comm` at 1 B/s."""
    return comm.collective_s(op.comm_kind, float(op.comm_bytes), op.comm_group, 1.0)


def op_energy_j(op: Op, acc: Accelerator, *, layer: str | None = None) -> float:
    """Dynamic energy of ``op`` on ``acc`` (joules); communication counts one participant's link bytes.

    A vector op's operands cross the buffer; what spills from the vector cores' buffer share (all of
    them, as when the op runs split over every vector core) also crosses HBM. ``layer`` (the op's layer name)
    is required on an FP8 accelerator.
    """
    if op.unit == "comm":
        return PJ * link_bytes_per_participant(op) * LINK_PJ_PER_BYTE if op.comm_group > 1 else 0.0
    energy = 0.0
    if op.unit in ("tc", "tc+vc"):
        (fp8,) = fp8_flags([op], layer, acc.number_format)
        energy += sum(gemm_energy_j(g, acc, fp8) for g in op.gemms)
        if fp8:
            energy += PJ * fp8_cast_bytes(op) * (HBM_PJ_PER_BYTE + SRAM_PJ_PER_BYTE)
    if op.unit in ("vc", "tc+vc"):
        energy += PJ * op.vector_elements * vector_cycles_per_element(op) * VECTOR_LANE_CYCLE_PJ
    if op.unit == "vc":
        footprint = op_traffic_floor_bytes(op, acc.bytes_per_element)
        share = buffer_share_bytes(acc.buffer_mb, acc.num_tc, acc.num_vc, acc.num_vc)
        energy += PJ * (footprint * SRAM_PJ_PER_BYTE + float(spilled_bytes(footprint, share)) * HBM_PJ_PER_BYTE)
    return energy


def full_rate_power_terms_w(acc: Accelerator) -> dict[str, float]:
    """Dynamic power (W) of ``acc`` with every unit busy every cycle, per term, at the per-event energies above:
    ``mac`` (every tensor-core MAC), ``sram`` (each array streams one row of operands in and one of results
    out per cycle, as :func:`array_sram_bytes` counts per fold, plus the HBM stream written through the buffer),
    ``vector`` (every lane-sublane) and ``hbm`` (the nominal bandwidth)."""
    array_bytes_per_s = acc.num_tc * (acc.tc_width + acc.tc_depth) * acc.bytes_per_element * acc.clock_hz
    return {
        "mac": PJ * MAC_PJ * acc.macs_per_cycle * acc.clock_hz,
        "sram": PJ * SRAM_PJ_PER_BYTE * (array_bytes_per_s + acc.hbm_bandwidth_Bps),
        "vector": PJ * VECTOR_LANE_CYCLE_PJ * acc.peak_vector_elements_per_s,
        "hbm": PJ * HBM_PJ_PER_BYTE * acc.hbm_bandwidth_Bps,
    }


VOLTAGE_FREQUENCY_EXPONENT = 1.0
"""How a chip's supply voltage follows its clock between the bins of one silicon: ``V ∝ f^k`` with k = 1, the
first-order dynamic voltage–frequency scaling of Hennessy & Patterson (*Computer Architecture: A Quantitative
Approach*, 5th ed., §1.5: dynamic energy ∝ ½·C·V², static power ∝ I_static·V; their worked example lowers voltage
and frequency by the same 15 % for 0.72× the energy per event and 0.61× the power). The per-event energies above
hold at the silicon's top bin (:attr:`phaze_env.hardware.cost.ChipSystem.top_clock_hz`); a part sold at a lower
clock runs at a lower voltage. Assumption: range 0 (the voltage does not follow the clock: energy per event
unchanged) to 1; B200 (the GB200's silicon at 0.9× its clock) is predicted at +21 % / +13 % / +6 % of its 1,000 W
for k = 0 / 0.5 / 1 (tests/test_generations.py). The MI300X's measured GEMM clock under its power limit implies a k
near the low end (``phaze_env.assumptions.MEASURED_EXPONENT``, the low end of the sensitivity study's range)."""


def dvfs_energy_factor(clock_ratio: float) -> float:
    """Dynamic energy per event of a part clocked at ``clock_ratio`` (≤ 1) of its silicon's top bin, relative to the
    top bin: ``V²`` with ``V ∝ f^k`` (:data:`VOLTAGE_FREQUENCY_EXPONENT`)."""
    return clock_ratio ** (2 * VOLTAGE_FREQUENCY_EXPONENT)


def dvfs_static_factor(clock_ratio: float) -> float:
    """Static (leakage) power of such a part relative to the top bin: ``∝ V`` at the same leakage current (Hennessy &
    Patterson §1.5; the current's own fall with voltage is left out, so this errs high)."""
    return clock_ratio ** VOLTAGE_FREQUENCY_EXPONENT


D2D_PJ_PER_BIT = 0.5
"""Energy of a die-to-die transfer on an advanced package: 0.5 pJ/bit, UCIe 1.0's advanced-package power efficiency
(Das Sharma et al., IEEE Trans. CPMT 2022). NV-HBI's is not published: assumption, range 0.25–1 pJ/bit (±20–40 W
on a B200's 10 TB/s)."""


def d2d_power_w(traffic_Bps: float) -> float:
    """Power (W) of die-to-die interfaces carrying ``traffic_Bps`` bytes/s between dies (each byte counted once)."""
    return PJ * D2D_PJ_PER_BIT * 8 * traffic_Bps


def link_power_w(link_Bps: float) -> float:
    """Power (W) of chip-to-chip links carrying ``link_Bps`` bytes/s in total (both directions)."""
    return PJ * LINK_PJ_PER_BYTE * link_Bps


def leakage_power_w(die_area_mm2: float) -> float:
    """Static power (W) of a die of ``die_area_mm2``."""
    return LEAKAGE_W_PER_MM2 * die_area_mm2
