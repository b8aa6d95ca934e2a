"""Die-area model of a PHAZE accelerator (mm², 7 nm class).

Two quantities:

* ``arch_area_mm2`` — the area of what the search varies: tensor cores, vector cores and the on-chip
  buffer. The PHAZE area window (``0.3·budget ≤ area ≤ budget``) is applied to this quantity, with the
  budget equal to the TPUv4-like configuration's value. A fixed uncore term would shift every design by
  the same amount and make the 0.3 lower bound nearly vacuous, so it is kept out of the window.
* the whole die — ``arch_area_mm2`` plus HBM PHYs and controllers per stack, SerDes per link and a fixed
  IO/misc block — is :func:`phaze_env.hardware.cost.chip_area_mm2` (constants below), checked against the
  published die areas of A100, H100 and TPUv4 (docs/cost_model.md).

Constants are order-of-magnitude estimates for a 7 nm process, then calibrated so that the TPUv4-like
preset lands near 400 mm² (TPUv4 is a 7 nm die of "< 400 mm²"-class size; Jouppi et al., ISCA 2023,
report it below 600 mm²):

* ``MAC_AREA_MM2`` (1.0e-3 mm² = 1000 µm²): one bf16 multiplier, fp32 accumulator adder and the
  systolic pipeline registers. An A100 (826 mm², 7 nm) spends roughly a quarter of its die on
  ~110 k dense fp16/bf16 FMA lanes, ≈ 1.9e-3 mm² each including FP64/INT/sparsity support that a
  bf16-only MXU does not need; half of that is our figure.
* ``TC_EDGE_AREA_MM2_PER_LANE`` (2e-3 mm²): per row and per column of an array — input skew FIFOs,
  weight staging, output accumulators at the array edge.
* ``TC_CORE_OVERHEAD_MM2`` (0.5 mm²): per tensor core — sequencer, instruction buffer, buffer port.
* ``VC_SUBLANE_AREA_MM2`` (6.25e-3 mm²): per element a vector core processes per cycle (one sublane of
  one lane) — an fp32 ALU, a transcendental-unit slice and its vector-register-file slice. A TPU lane is
  8 sublanes deep (0.05 mm² per lane), so a ``width``-lane core costs ``width · sublanes · 6.25e-3`` mm²
  and area and speed scale with the same ``width · sublanes`` product.
* ``VC_CORE_OVERHEAD_MM2`` (0.5 mm²): per vector core — issue logic and buffer port.
* ``SRAM_AREA_MM2_PER_MB`` (0.875 mm²/MB): on-chip buffer including periphery and wiring. The TPUv4i
  floorplan (Jouppi et al., ISCA 2021) shows its 128 MiB CMEM taking ≈ 28 % of a ≈ 400 mm² die.
  (Raw 7 nm high-density bit cells are ≈ 0.027 µm², i.e. ≈ 0.23 mm²/MB before periphery.)

With these, the TPUv4-like preset has an architecture area of ≈ 265 mm² (the budget). All functions
accept numpy arrays and broadcast.

The chip-level model of :mod:`phaze_env.hardware.cost` splits the uncore into parts that follow the system
design — HBM PHYs and controllers per stack, SerDes lanes per link, a fixed IO/misc block — measured from
the GA100 die (the constants below, each citing its source). It replaces the earlier single fixed uncore
(135 mm²); every function above is unchanged, so PHAZE's area window and the search results do not move.
"""

from __future__ import annotations

import numpy as np

from phaze_env.hardware.number_format import check_number_format

TPU_VPU_SUBLANES = 8
"""TPU vector unit depth: each of the 128 lanes has 8 sublanes, so one (8 × 128) vector register is processed
per cycle (Norrie et al., "The design process for Google's training chips: TPUv2 and TPUv3", IEEE Micro
2021: the vector unit's registers and ALUs are 128 lanes × 8 sublanes); TPUv4 keeps this core (Jouppi et al.,
ISCA 2023). Two TensorCores give 2 × 128 × 8 = 2048 elements per cycle."""
MAC_AREA_MM2 = 1.0e-3
FP8_MAC_AREA_FACTOR = 1.25
"""Area of a MAC that does one bf16 or two FP8 multiply-accumulates per cycle (sharing one fp32 accumulator),
relative to a bf16-only MAC. Assumption, no published figure: the significand multiplier — 8×8 bits for bf16,
4×4 for FP8 E4M3 (FP8 formats, Micikevicius et al. 2022, arXiv:2209.05433) — grows by two 4×4 arrays (a quarter
of the 8×8 array each), and the alignment/normalisation and the accumulator it shares take about half of the
MAC. The H100 (814 mm²) doubles its tensor rate in FP8 on a die 1.5 % smaller than the A100's bf16-only 826 mm²
(NVIDIA datasheets), so the factor is well below 2. Sensitivity: MACs are half of the TPUv4-like design's
architecture area, so its FP8 variant is +12.4 % larger at 1.25, +4.9 % at 1.1 and +24.7 % at 1.5
(tests/test_fp8.py holds the calculation)."""
TC_EDGE_AREA_MM2_PER_LANE = 2.0e-3
TC_CORE_OVERHEAD_MM2 = 0.5
VC_SUBLANE_AREA_MM2 = 0.05 / 8
VC_CORE_OVERHEAD_MM2 = 0.5
SRAM_AREA_MM2_PER_MB = 0.875


def mac_area_mm2(number_format: str = "bf16") -> float:
    """Area of one MAC of the tensor cores' ``number_format`` (bf16-only, or bf16 + 2× FP8)."""
    return MAC_AREA_MM2 * (FP8_MAC_AREA_FACTOR if check_number_format(number_format) == "fp8" else 1.0)


def tensor_core_area_mm2(tc_width, tc_depth, number_format: str = "bf16"):
    """Area of one ``tc_width × tc_depth`` systolic tensor core of ``number_format`` MACs."""
    macs = np.multiply(tc_width, tc_depth)
    edge_lanes = np.add(tc_width, tc_depth)
    return macs * mac_area_mm2(number_format) + edge_lanes * TC_EDGE_AREA_MM2_PER_LANE + TC_CORE_OVERHEAD_MM2


def vector_core_area_mm2(vc_width, vc_sublanes=TPU_VPU_SUBLANES):
    """Area of one vector core with ``vc_width`` lanes of ``vc_sublanes`` sublanes."""
    return np.multiply(np.multiply(vc_width, vc_sublanes), VC_SUBLANE_AREA_MM2) + VC_CORE_OVERHEAD_MM2


def buffer_area_mm2(buffer_mb):
    """Area of the shared on-chip buffer (SRAM) of ``buffer_mb`` MB."""
    return np.multiply(buffer_mb, SRAM_AREA_MM2_PER_MB)


def arch_area_mm2(num_tc, tc_width, tc_depth, num_vc, vc_width, buffer_mb, vc_sublanes=TPU_VPU_SUBLANES,
                  number_format: str = "bf16"):
    """Area of the searched components: tensor cores + vector cores + on-chip buffer (the window quantity)."""
    return (
        np.multiply(num_tc, tensor_core_area_mm2(tc_width, tc_depth, number_format))
        + np.multiply(num_vc, vector_core_area_mm2(vc_width, vc_sublanes))
        + buffer_area_mm2(buffer_mb)
    )


# --- chip-level parts (used by phaze_env.hardware.cost; the search's area window does not use them) --------

RETICLE_LIMIT_MM2 = 26.0 * 33.0
"""858 mm²: the largest die one lithography exposure prints (26 mm × 33 mm field of 193 nm immersion and EUV
scanners). A monolithic die above it cannot be made."""
HBM_PHY_AREA_MM2 = 58.0 / 6
"""9.67 mm² per 1024-bit HBM interface: GA100's six HBM2e PHYs measure 58.0 mm² on its die photo (Zhang et
al., "LLMCompass", ISCA 2024, Fig. 6a, die-photo breakdown in the artifact's ``die_area.csv``). A PHY is
analog and bump-limited: it does not shrink with the logic node, and HBM3 keeps the 1024-bit interface, so
the same area is assumed for HBM3 (assumption)."""
HBM_CONTROLLER_AREA_MM2 = 31.77 / 6
"""5.30 mm² per HBM interface at 7 nm: GA100's memory controllers measure 31.77 mm² for six stacks (same
die-photo breakdown). Controllers are logic and shrink with the node's logic density."""
SERDES_50G_NRZ_LANE_AREA_MM2 = 20.95 / 48
"""0.436 mm² per 50 Gb/s NRZ lane pair (one transmitter + one receiver): GA100's twelve NVLink3 links, four
50 Gb/s pairs per direction each (NVIDIA A100 whitepaper), measure 20.95 mm² of PHY on its die photo
(LLMCompass, Fig. 6a). The same lanes are assumed for TPUv4's ICI (same node and year; assumption)."""
SERDES_100G_PAM4_LANE_AREA_MM2 = 0.965 / 2
"""0.483 mm² per 100 Gb/s PAM4 lane pair: LLMCompass's cost model gives 0.965 mm² of PHY per NVLink4 link
(``nvlink4_phy_mm2_per_link_unit``), and an NVLink4 link is two 100 Gb/s pairs per direction (NVIDIA H100
whitepaper)."""
SERDES_200G_PAM4_LANE_AREA_MM2 = SERDES_100G_PAM4_LANE_AREA_MM2
"""0.483 mm² per 200 Gb/s PAM4 lane pair (NVLink5, B200): no die-photo figure is public, so it takes the 100 Gb/s
PAM4 pair's area (assumption: a 200G lane doubles the symbol rate on a newer node whose analog shrinks little;
range 0.4–0.8 mm², ±3 mm² over NVLink5's 36 pairs, < 0.3 % of a B200's silicon)."""
D2D_SHORELINE_BPS_PER_MM = 1317e9
"""Die-to-die bandwidth per mm of die edge on an advanced (silicon-bridge/interposer) package: 1,317 GB/s/mm, the
UCIe 1.0 advanced-package figure (Das Sharma et al., "Universal Chiplet Interconnect Express (UCIe): An Open
Industry Standard for Innovations with Chiplets at Package Level", IEEE Trans. CPMT 2022, Table: bandwidth
shoreline density at 32 GT/s, 45 µm bump pitch). NVIDIA's NV-HBI (B200) publishes only its 10 TB/s: it is assumed
to be as dense."""
D2D_DEPTH_MM = 1.0
"""Depth of a die-to-die interface's bump field and PHY from the die edge: 1 mm. Assumption (UCIe's advanced-package
module is ≈ 1 mm deep, same paper's module drawing); range 0.5–2 mm, i.e. ±4–8 mm² per B200 die (< 1 %)."""


def d2d_interface_area_mm2(bandwidth_Bps):
    """Area of a die-to-die interface carrying ``bandwidth_Bps`` (both directions together): the die edge it needs
    at :data:`D2D_SHORELINE_BPS_PER_MM` (read as both directions together, assumption: if UCIe's figure is per
    direction the interface is half as large) × :data:`D2D_DEPTH_MM`."""
    return np.divide(bandwidth_Bps, D2D_SHORELINE_BPS_PER_MM) * D2D_DEPTH_MM


IO_MISC_AREA_MM2 = 40.0
"""40 mm² of everything else on a large accelerator die — PCIe host interface, management and security
processors, clocking, fuses, test: GA100's "other" area on its die photo (LLMCompass, Fig. 6a). Applied to
every chip unscaled (mostly analog/IO; assumption). ±20 mm² moves an 800 mm² die by ±2.5 %."""
GA100_CORE_BLOCKS_MM2 = 476.25 + 76.44 + 119.31
"""672.0 mm²: GA100's SM array (476.25 mm², 128 SMs of 3.75 mm²), on-chip crossbar (76.44) and L2 (119.31)
on its die photo (LLMCompass, Fig. 6a) — the blocks the template's tensor cores, vector cores and buffer
stand for on a GPU. :mod:`phaze_env.hardware.cost` derives its SIMT area factor from this figure."""


def hbm_interface_area_mm2(hbm_phys, logic_density_gain=1.0):
    """Area of ``hbm_phys`` HBM PHY + controller pairs; the controllers shrink by ``logic_density_gain``
    (relative to 7 nm), the PHYs do not."""
    return np.multiply(hbm_phys, HBM_PHY_AREA_MM2 + np.divide(HBM_CONTROLLER_AREA_MM2, logic_density_gain))


def serdes_area_mm2(lane_pairs, lane_area_mm2):
    """Area of ``lane_pairs`` SerDes lane pairs of ``lane_area_mm2`` each (PHYs do not shrink with the node)."""
    return np.multiply(lane_pairs, lane_area_mm2)
