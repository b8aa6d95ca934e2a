"""Chip area, power and cost of an accelerator together with its system-level parts.

An :class:`~phaze_env.hardware.accelerator.Accelerator` fixes the cores and the buffer; a :class:`ChipSystem`
adds what the chip needs around them — the process node, HBM stacks (and the PHYs on the die), chip-to-chip
links and whether the cores are TPU-like systolic cores or GPU SIMT cores. :func:`chip_estimate` returns:

* **die area** = compute (the existing area model of :mod:`.area`, shrunk to the node, times the core style's
  area factor) + HBM PHYs and controllers + SerDes lanes + a fixed IO/misc block, checked against the
  reticle limit;
* **power** (TDP-like, every unit busy) = per-event dynamic energies of :mod:`.energy` × peak rates (MACs,
  SRAM streams, vector lanes) scaled to the node and core style + HBM pJ/bit × bandwidth + SerDes pJ/bit ×
  link bandwidth + leakage per mm²;
* **cost** = wafer cost / good dies per wafer (dies per 300 mm wafer with edge loss, negative-binomial
  yield) + HBM $/GB × capacity + package, assembly and test by interposer area (dies + HBM sites), all over the
  package's assembly yield (a failed bond scraps the known-good dies and stacks).

``SYSTEMS`` holds the system fields of the tpuv4, a100 and h100 presets and ``PUBLISHED`` the figures they
are checked against (``docs/cost_model.md``, written by ``python -m experiments.cost_table``). Calibration:
the SIMT area factor is derived from GA100's die-photo block areas, so the A100 die area checks the
bookkeeping rather than predicting; H100 (another node, another SerDes, the same factor) and TPUv4 are the
predictions. Every constant cites its source or says "assumption" with its sensitivity.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np

from phaze_env.hardware import area, energy
from phaze_env.hardware.accelerator import GB200_CLOCK_HZ, Accelerator, get_preset


@dataclass(frozen=True)
class ProcessNode:
    """A foundry node: densities and dynamic energy relative to N7, wafer cost and defect density."""

    name: str
    logic_density_gain: float  # standard-cell logic per mm², relative to N7
    sram_density_gain: float  # high-density SRAM bits per mm², relative to N7
    energy_factor: float  # dynamic energy per event, relative to N7 at the same speed
    wafer_cost_usd: float  # one processed 300 mm wafer
    defect_density_per_cm2: float  # D0 of the negative-binomial yield model
    volume_year: int | None = None  # first year of volume production (None: a variant for a sensitivity study)

    def __post_init__(self) -> None:
        for name in ("logic_density_gain", "sram_density_gain", "energy_factor", "wafer_cost_usd"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"ProcessNode.{name} must be a positive number, got {value!r}")
        if not isinstance(self.defect_density_per_cm2, (int, float)) or self.defect_density_per_cm2 < 0:
            raise ValueError(f"ProcessNode.defect_density_per_cm2 must be ≥ 0, got {self.defect_density_per_cm2!r}")


N7 = ProcessNode("N7", logic_density_gain=1.0, sram_density_gain=1.0, energy_factor=1.0, wafer_cost_usd=9346.0,
                 defect_density_per_cm2=0.09, volume_year=2018)
"""TSMC N7, the reference node of :mod:`.area` and :mod:`.energy`. Wafer cost $9,346 per 300 mm wafer (Khan &
Mann, "AI Chips: What They Are and Why They Matter", CSET 2020, foundry sale price per wafer); D0 = 0.09
defects/cm², which TSMC reported for N7 three quarters into volume production (VLSI Symposium 2019, as
reported by AnandTech, "'Better Yield on 5nm than 7nm': TSMC Update on Defect Rates for N5", 2020-08-25). Volume
production from 2018 (TSMC, "TSMC's 7nm ... volume production", Q2 2018 earnings and press: N7 entered volume
production in April 2018)."""
N5 = ProcessNode("N5", logic_density_gain=1.8, sram_density_gain=0.027 / 0.021, energy_factor=0.7,
                 wafer_cost_usd=16988.0, defect_density_per_cm2=0.10, volume_year=2020)
"""TSMC N5: "up to 80 % logic density gain" and "30 % power reduction" at the same speed over N7 (TSMC, as
reported by AnandTech 2020-08-25 and TSMC's N5 announcements); high-density SRAM bit cell 0.021 µm² against
N7's 0.027 µm² (TSMC, IEDM 2019 and IEDM 2016), a 1.29× gain. Wafer cost $16,988 (Khan & Mann, CSET 2020).
D0 = 0.10 defects/cm² (TSMC Technology Symposium 2020: 0.10–0.11 and falling, same AnandTech report).
Sensitivity: a chip-level density gain of 1.5× (GH100's 80 B transistors on 814 mm² against GA100's 54.2 B on
826 mm², which also counts Hopper's new features) instead of 1.8× for logic grows the modelled H100 die by
≈ 15 %, past the reticle limit (docs/cost_model.md). Volume production from 2020 (TSMC: N5 in volume production
in Q2 2020, same AnandTech report)."""
N6_OVER_N7_LOGIC_DENSITY = 1.18
"""TSMC N6 over N7: "18 % higher logic density" (TSMC press release "TSMC Announces 6-nanometer Process", 2019-04-16),
design rules compatible with N7. SRAM keeps N7's bit cell (assumption: the press release claims logic density only;
range 1.0–1.1×)."""
N6 = ProcessNode("N6", logic_density_gain=N6_OVER_N7_LOGIC_DENSITY, sram_density_gain=N7.sram_density_gain,
                 energy_factor=N7.energy_factor, wafer_cost_usd=N7.wafer_cost_usd,
                 defect_density_per_cm2=N7.defect_density_per_cm2, volume_year=2020)
"""TSMC N6, the N7-family node of AMD's I/O dies (MI300X's four IODs: AMD CDNA 3 white paper, 2023): N7's SRAM,
1.18× its logic density (:data:`N6_OVER_N7_LOGIC_DENSITY`). Volume production 2020 (same press release: "volume
production in 2020"). Energy, wafer cost and D0: N7's (assumption — TSMC claims no power gain for N6, whose EUV layers
replace multi-patterning at a similar wafer price; ranges: energy 0.9–1.0× N7, wafer $9,000–10,500, D0 0.07–0.09/cm²,
TSMC reporting N6's defect density at N7's level)."""
N4P_OVER_N5_DENSITY = 1.06
"""TSMC N4P over N5: "a 6 % increase in transistor density" (TSMC press release "TSMC Extends Its 5nm Family With
A New Enhanced-Performance N4P Process", 2021-10-26). Applied to logic; SRAM keeps N5's bit cell (assumption: N4P
is an optical shrink of the N5 family, whose SRAM did not shrink)."""
N4P_OVER_N5_ENERGY = 0.78
"""TSMC N4P over N5: "a 22 % improvement in power efficiency" (same TSMC press release, 2021-10-26), i.e. 0.78×
N5's energy per event at the same speed."""
N4P = ProcessNode("N4P", logic_density_gain=N5.logic_density_gain * N4P_OVER_N5_DENSITY,
                  sram_density_gain=N5.sram_density_gain, energy_factor=N5.energy_factor * N4P_OVER_N5_ENERGY,
                  wafer_cost_usd=N5.wafer_cost_usd, defect_density_per_cm2=N5.defect_density_per_cm2, volume_year=2022)
"""TSMC N4P, the N5-family node of 2022 (volume production 2022: same TSMC press release): 1.91× N7's logic
density, 0.55× its energy per event (N5's figures × :data:`N4P_OVER_N5_DENSITY` and × :data:`N4P_OVER_N5_ENERGY`).
Wafer cost and D0: N5's (assumption, no separate public figure; N4P reuses N5's tools with fewer masks, so the wafer
costs the same or less: range $15,000–17,000; D0 of a mature N5-family line, range 0.07–0.10/cm²)."""
N3E_OVER_N5_DENSITY = 1.6
"""TSMC N3E over N5: "1.6× logic density" (TSMC 2022 Technology Symposium, as reported by AnandTech, "TSMC Roadmap
Update: N3E in 2024, N2 in 2026, Major Changes Incoming", 2022-04-22). SRAM does not shrink: N3E's high-density bit
cell is 0.021 µm², N5's (TSMC, IEDM 2022, as reported by WikiChip Fuse, "TSMC's N3E ... SRAM bit cell", 2022-12)."""
N3E_OVER_N5_ENERGY = 0.66
"""TSMC N3E over N5: "34 % power reduction" at the same speed (same TSMC 2022 Technology Symposium figures)."""
N3_WAFER_COST_USD = 20_000.0
"""A TSMC N3 wafer: ≈ $20,000, the analyst estimate the trade press reported when N3 ramped (DigiTimes, as reported
by Tom's Hardware, "TSMC Will Reportedly Charge $20,000 Per 3nm Wafer", 2022-12). Assumption: no foundry price list
is public; range $18,000–25,000 (a 25 % move of the wafer moves the die cost by 25 %)."""
N3 = ProcessNode("N3", logic_density_gain=N5.logic_density_gain * N3E_OVER_N5_DENSITY,
                 sram_density_gain=N5.sram_density_gain, energy_factor=N5.energy_factor * N3E_OVER_N5_ENERGY,
                 wafer_cost_usd=N3_WAFER_COST_USD, defect_density_per_cm2=N5.defect_density_per_cm2, volume_year=2023)
"""TSMC N3 (its N3E flavour, the one accelerators use): 2.88× N7's logic density, N5's SRAM density, 0.46× N7's energy
per event, $20,000 wafers. Volume production: N3E from Q4 2023 (TSMC Q4 2023 earnings; N3B from December 2022).
D0 = N5's 0.10/cm² (assumption: TSMC stated N3's defect density tracks N5's at the same point of its ramp, 2022
Technology Symposium; range 0.08–0.20/cm², which moves an 800 mm² die's yield from 0.54 to 0.27)."""
NODES: dict[str, ProcessNode] = {"N7": N7, "N6": N6, "N5": N5, "4N": replace(N5, name="4N", volume_year=2022), "N4P": N4P,
                                 "4NP": replace(N4P, name="4NP", volume_year=2024), "N3": N3}
"""Nodes by name. NVIDIA's 4N (H100) and 4NP (B200) are customised TSMC N5-family processes with no separate public
density, energy, cost or D0 figures: they take N5's and N4P's (assumption), with the year of their first product
(H100 2022, B200 2024)."""


class UnknownNodeError(ValueError):
    """A process node the cost model has no data for."""


def get_node(name: str | ProcessNode) -> ProcessNode:
    """The node called ``name`` (a :class:`ProcessNode` is returned as is); a node without data raises
    :class:`UnknownNodeError` naming the nodes that have it."""
    if isinstance(name, ProcessNode):
        return name
    key = str(name).strip().upper()
    if key not in NODES:
        raise UnknownNodeError(f"no process data for node {name!r}; nodes with density, energy, wafer cost and D0: "
                               f"{', '.join(NODES)}")
    return NODES[key]


DESIGN_NRE_USD: dict[str, float] = {"N7": 249e6, "N5": 476e6, "N3": 590e6}
"""Non-recurring engineering of a large chip at a node — architecture, IP qualification, verification, physical
design, software, prototype (mask set and first wafers), validation: IBS (International Business Strategies) 2023
estimates as reported by the trade press (techovedas, "2nm Chip Design Costs $725 Million", 2023: 7 nm ≈ $249 M, 2 nm
≈ $725 M; the same IBS chart gives 5 nm ≈ $476 M and 3 nm ≈ $590 M — read from the reports, not the chart). N5-family
nodes (4N, N4P, 4NP) take N5's. Assumption range ×0.3–×1: the figures are for a complex SoC with its software, and
"headline numbers appear to be significantly inflated" for accelerators of replicated MAC arrays (Semiconductor
Engineering, "What Will That Chip Cost?", 2023)."""
NRE_NODE_FAMILY = {"N7": "N7", "N6": "N7", "N5": "N5", "4N": "N5", "N4P": "N5", "4NP": "N5", "N3": "N3"}
"""Which :data:`DESIGN_NRE_USD` figure each node of :data:`NODES` takes."""


def nre_usd_per_chip(node: str | ProcessNode, chips: int) -> float:
    """A custom chip's NRE at ``node`` amortised over ``chips`` chips built (:data:`DESIGN_NRE_USD`); a node without
    an NRE figure raises :class:`UnknownNodeError`."""
    if isinstance(chips, bool) or not isinstance(chips, int) or chips < 1:
        raise ValueError(f"NRE is amortised over a positive whole number of chips, got {chips!r}")
    name = get_node(node).name
    if name not in NRE_NODE_FAMILY:
        raise UnknownNodeError(f"no NRE figure for node {name!r}; nodes with one: {', '.join(NRE_NODE_FAMILY)}")
    return DESIGN_NRE_USD[NRE_NODE_FAMILY[name]] / chips


@dataclass(frozen=True)
class SerdesKind:
    """A chip-to-chip SerDes lane: its rate per direction and the die area of one lane pair (TX + RX)."""

    name: str
    lane_bps: float
    lane_pair_area_mm2: float
    first_year: int  # the first year an accelerator shipped with these lanes


SERDES: dict[str, SerdesKind] = {
    "50G-NRZ": SerdesKind("50G-NRZ", 50e9, area.SERDES_50G_NRZ_LANE_AREA_MM2, 2020),
    "100G-PAM4": SerdesKind("100G-PAM4", 100e9, area.SERDES_100G_PAM4_LANE_AREA_MM2, 2022),
    "200G-PAM4": SerdesKind("200G-PAM4", 200e9, area.SERDES_200G_PAM4_LANE_AREA_MM2, 2024),
}
"""SerDes lanes by name and the year an accelerator first shipped with them: NVLink3 (A100, 2020) uses 50 Gb/s NRZ
pairs, NVLink4 (H100, 2022) 100 Gb/s PAM4 pairs (NVIDIA A100 and H100 whitepapers), NVLink5 (B200, 2024) 200 Gb/s
PAM4 pairs (NVIDIA Blackwell architecture technical brief, 2024: 18 links of 100 GB/s, "two 200 Gb/s lanes per
direction" per link; :data:`B200_NVLINKS`); areas from :mod:`.area`."""

CORE_STYLES = ("systolic", "simt")
"""How a chip's cores are built: TPU-like systolic arrays (the template of :mod:`.area`) or GPU SIMT cores."""

SIMT_AREA_FACTOR = area.GA100_CORE_BLOCKS_MM2 / get_preset("a100").area_mm2
"""1.76: the area of a GPU's programmable cores per unit of the template's compute area — GA100's SM array,
crossbar and L2 on its die photo (672.0 mm², :data:`.area.GA100_CORE_BLOCKS_MM2`) over the a100 preset's
tensor cores, vector cores and buffer in the template (382.7 mm²). It stands for what SIMT cores carry and a
systolic array does not: register files, schedulers, FP64/INT pipes, L1 tags, texture units, a crossbar.
Calibrated on GA100 (so the A100 die area is bookkeeping, not a prediction); the same factor scales the core
blocks' dynamic power (assumption: power follows active area at the template's activity)."""
CORE_AREA_FACTORS = {"systolic": 1.0, "simt": SIMT_AREA_FACTOR}
"""The template (:mod:`.area`) is a TPU core, so a systolic chip takes it as is."""

WAFER_DIAMETER_MM = 300.0
"""The wafer every leading-edge logic node runs on (the CSET wafer costs are per 300 mm wafer)."""
NEGATIVE_BINOMIAL_ALPHA = 4.0
"""Defect clustering α of the negative-binomial yield ``(1 + D0·A/α)^−α``: 4.0, the value Hennessy &
Patterson's *Computer Architecture: A Quantitative Approach* (4th/5th ed., §1.6) give for multi-level-metal
CMOS. Sensitivity: for an 826 mm² die at D0 = 0.09, α = 1 / 4 / ∞ (Poisson) give yields 0.57 / 0.51 / 0.48."""
HBM_USD_PER_GB = 15.0
"""HBM price per GB: $15. Public H100 cost breakdowns put its 80 GB of HBM3 at ≈ $1,400–1,500, i.e. ≈ $15–18/GB
(Silicon Analysts' "Cost Bridge", built on Raymond James / TrendForce / Epoch AI estimates; trade-press summaries
of 2023 analyst estimates quote ≈ $15/GB). Weak (assumption): LLMCompass's cost model (ISCA 2024) uses $7/GB,
and HBM2 in 2020 (A100, TPUv4) may have cost less; docs/cost_model.md gives the chip cost at $7 and $20/GB."""
PACKAGE_USD = 750.0
"""2.5D package (CoWoS-S interposer, substrate), assembly and test of the H100: $750, analysts' estimate for the
H100's CoWoS-S (≈ $720–750 in public cost breakdowns, 2023–2024). The anchor of :data:`PACKAGE_USD_PER_MM2`: other
chips pay by their interposer's area (±50 % moves the H100's cost by ±$375)."""
HBM_STACK_FOOTPRINT_MM2 = 11.0 * 11.0
"""Interposer area one HBM stack site takes: 11 × 11 mm, the HBM3 known-good-stack package outline (JEDEC JESD238,
HBM3, 2022; SK hynix and Micron HBM3/HBM3E 11 × 11 mm packages). HBM2/HBM2E stacks are 7.75 × 11.87 mm (92 mm²,
JESD235): assumption — every generation takes HBM3's 121 mm² (range 92–121 mm²; the system space's stacks are
HBM2E–HBM3E and the package is sized for the larger)."""
INTERPOSER_AREA_OVERHEAD = 1.2
"""Interposer area over the dies' and stacks' own footprints: die-to-stack spacing, keep-out and the seal ring.
Assumption, range 1.1–1.4 (GH100's 814 mm² with six 121 mm² HBM3 sites is 1,540 mm² of parts; TSMC's CoWoS-S reached
≈ 2,500 mm², 3× the reticle, for such packages: TSMC Technology Symposium 2021, as reported by AnandTech)."""


def interposer_area_mm2(silicon_mm2: float, hbm_sites: int) -> float:
    """The interposer a chip of ``silicon_mm2`` (all its dies) and ``hbm_sites`` HBM sites sits on (mm²)."""
    return (silicon_mm2 + hbm_sites * HBM_STACK_FOOTPRINT_MM2) * INTERPOSER_AREA_OVERHEAD


H100_HBM_SITES = 6
"""The H100 SXM5's HBM sites: six (five HBM3 stacks and one spacer; NVIDIA H100 whitepaper: "five stacks", the package
photo shows six sites)."""
PACKAGE_USD_PER_MM2 = PACKAGE_USD / interposer_area_mm2(814.0, H100_HBM_SITES)
"""2.5D package, assembly and test per mm² of interposer: $0.41, the H100's :data:`PACKAGE_USD` over its interposer
(GH100's published 814 mm² and six HBM sites, :func:`interposer_area_mm2`). Assumption that the whole package cost
(interposer, substrate, bonding, molding, test) grows with the interposer's area: range ×0.5–×1.5 (the H100 anchor's
own uncertainty); a 400 mm² die with four stacks pays ≈ 60 % of the H100's package, a B200 ≈ 150 %."""
PACKAGE_BOND_YIELD = 0.99
"""Assembly yield per component bonded to the interposer (each die and each HBM stack): 0.99. A failed bond scraps
the package with its known-good dies and stacks, so a chip of ``n`` components costs its parts over ``0.99^n``
(five HBM stacks and a die: +6 %). Assumption (TSMC does not publish CoWoS assembly yield; trade-press figures for a
mature CoWoS-S line are 98–99+ %): range 0.98–0.998 per component."""


TPUV4_ICI_LINKS = 6
"""Inter-chip-interconnect links per TPU v4 chip: two per dimension of its 3-D torus (Jouppi et al., "TPU v4: An
Optically Reconfigurable Supercomputer for Machine Learning with Hardware Support for Embeddings", ISCA 2023)."""
TPUV4_ICI_LINK_BPS = 50e9
"""One TPU v4 ICI link's bandwidth *in each direction*: 50 GB/s = 400 Gb/s (Jouppi et al., ISCA 2023; G. Lockwood's
TPUv4 notes, https://glennklockwood.com/garden/processors/TPUv4: ICI "provides 400G bandwidth in each direction";
Austin et al., "How to Scale Your Model", Google DeepMind 2025, https://jax-ml.github.io/scaling-book/tpus/, table
"ICI BW/link": TPU v4p 4.5e10 bytes/s one-way, 9e10 bidirectional — the achievable figure under the nominal 50).
The ``tpuv4-pod`` cluster preset (:mod:`phaze_env.cluster`) uses it per direction as it is; the tpuv4
:class:`ChipSystem` (both directions together) takes twice it."""
NVLINK_LINK_BPS = 25e9
"""One NVLink 3 or NVLink 4 link's bandwidth *in each direction*: 25 GB/s — "50 GB/s per link" counted in both
directions (NVIDIA A100 whitepaper: 12 NVLink 3 links, 600 GB/s total; NVIDIA H100 whitepaper: 18 NVLink 4 links,
900 GB/s total). The DGX cluster presets' per-GPU NVLink bandwidths are links × this."""
A100_NVLINKS = 12
"""NVLink 3 links per A100 SXM4 (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020)."""
H100_NVLINKS = 18
"""NVLink 4 links per H100 SXM5 (NVIDIA H100 Tensor Core GPU Architecture whitepaper, 2022)."""
B200_NVLINKS = 18
"""NVLink 5 links per B200: 18 links of 100 GB/s (both directions together), 1.8 TB/s per GPU, each link two 200 Gb/s
PAM4 lane pairs per direction (NVIDIA Blackwell architecture technical brief, 2024; HGX B200 datasheet)."""
NVLINK5_LINK_BPS = 50e9
"""One NVLink 5 link's bandwidth in each direction: 50 GB/s (100 GB/s both ways, same brief)."""
B200_D2D_BPS = 10e12
"""B200's die-to-die link (NV-HBI) between its two dies: "10 TB/s" (NVIDIA Blackwell technical brief and GTC 2024
keynote), read as both directions together (assumption; per direction it would be 20 TB/s and the interface's area
and power twice :data:`phaze_env.hardware.area.D2D_SHORELINE_BPS_PER_MM`'s and :data:`energy.D2D_PJ_PER_BIT`'s
share: +8 mm², +40 W)."""
MI300X_IF_LINKS = 7
"""AMD Infinity Fabric links per MI300X: 7, each 128 GB/s both directions together (896 GB/s peer-to-peer per GPU in
an 8-GPU platform; AMD Instinct MI300X data sheet, 2023)."""
MI300X_IF_LINK_BPS = 128e9
"""One MI300X Infinity Fabric link, both directions together (same data sheet)."""
MI300X_POWER_W = 750.0
"""The MI300X's total board power: 750 W (AMD Instinct MI300X data sheet, 2023)."""
MI300X_ENGINE_CLOCK_HZ = 2.1e9
"""The MI300X's peak engine clock, at which its 304 CUs reach the published 1,307.4 TFLOP/s dense bf16 (AMD Instinct
MI300X data sheet, 2023: "Peak Engine Clock 2100 MHz")."""
MI300X_GEMM_MEDIAN_CLOCKS_HZ = {"fp16": 1115e6, "bf16": 1207e6, "fp8": 1230e6}
"""The MI300X's measured median engine clock (lowest XCD) under a dense GEMM of normally distributed data, within its
750 W, by format: AMD ROCm blog, "Measuring Max-Achievable FLOPs – Part 2" (Sander, Masters, Poursartip, Ho,
2025-02-28), Table 1 (https://rocm.blogs.amd.com/software-tools-optimization/measuring-max-achievable-flops-part2/
README.html; 708 TFLOP/s BF16 at 1,207 MHz, 94 % of that clock's peak). A check of :func:`power_capped`'s clock, which
is not fitted to it."""
MI300X_XCDS = 8
"""Compute dies (XCDs) per MI300X: 8 on TSMC N5, 38 of each XCD's 40 CUs enabled (304 CUs), 3-D hybrid-bonded two to
an I/O die (AMD CDNA 3 architecture white paper, 2023; Smith et al., "AMD Instinct MI300 Series Modular Chiplet
Package – HPC and AI Accelerator for Exa-Class Systems", ISSCC 2024, paper 2.1)."""
MI300X_IODS = 4
"""I/O dies (IODs) per MI300X: 4 on TSMC N6, each with two HBM3 stacks' controllers and PHYs and 64 MB of the 256 MB
Infinity Cache, joined by Infinity Fabric AP (AMD CDNA 3 architecture white paper, 2023; Smith et al., ISSCC 2024)."""
MI300X_XCD_AREA_MM2 = 115.0
"""One MI300X XCD: ≈ 115 mm² (SemiAnalysis, "AMD MI300 – Taming The Hype", 2023; AMD publishes transistor counts,
not mm²). Approximate: range 110–120 mm²."""
MI300X_IOD_AREA_MM2 = 370.0
"""One MI300X IOD: ≈ 370 mm² (same SemiAnalysis estimate from the package shots; AMD gives no mm² figure).
Approximate: range 350–390 mm²."""
MI300X_IOD_D2D_BPS = 5.3e12
"""Die-to-die traffic each MI300X IOD exchanges with the other three (both directions together): the chip's HBM
bandwidth, 5.3 TB/s. Assumption — every XCD's memory interleaves over all 8 stacks, so ¾ of its accesses cross to
another IOD; range 2.6–10.6 TB/s (AMD quotes the Infinity Fabric AP only as "up to 17 TB/s" of peak bandwidth,
CDNA 3 white paper)."""
TPUV5P_ICI_LINKS = 6
"""ICI links per TPU v5p chip: a 3-D torus (Cloud TPU v5p documentation: "3D torus", pods of 8,960 chips), two
links per dimension as TPU v4."""
TPUV5P_ICI_CHIP_BPS = 1200e9
"""A TPU v5p chip's ICI bandwidth, both directions together: 1,200 GB/s ("bidirectional inter-chip interconnect
bandwidth per chip 1,200 GBps", Cloud TPU v5p documentation; 4,800 Gb/s per direction), i.e. 100 GB/s per link and
direction over :data:`TPUV5P_ICI_LINKS`."""


def links_per_direction_Bps(links: int, link_bandwidth_Bps: float) -> float:
    """A chip's link bandwidth in each direction from ``links`` links of ``link_bandwidth_Bps`` in both directions
    together (:class:`ChipSystem`'s convention): ``links · bandwidth / 2``."""
    return links * link_bandwidth_Bps / 2


class ReticleLimitError(ValueError):
    """A monolithic die larger than the reticle limit (it cannot be exposed in one shot)."""


@dataclass(frozen=True)
class ChipSystem:
    """The system-level fields a chip estimate needs beyond the :class:`Accelerator`.

    ``node`` is a name of ``NODES`` or a :class:`ProcessNode` (e.g. a variant for a sensitivity study).
    ``hbm_stacks`` are the populated stacks; ``hbm_phys`` the HBM interfaces on the die (a GPU die may carry
    one more than it populates; ``None`` = ``hbm_stacks``). ``link_bandwidth_Bps`` is one link's bandwidth in
    both directions together (NVIDIA's convention: NVLink3 50 GB/s per link, 600 GB/s over 12 links; a TPU v4 ICI
    link of 50 GB/s in each direction is 100 GB/s in it); :attr:`per_direction_Bps` is the chip's bandwidth in
    each direction, what a cluster's links carry.

    ``dies`` splits the chip into that many identical dies on one package (B200: two reticle-limited dies): each
    die carries its share of the compute, HBM interfaces and SerDes, its own IO/misc block and a die-to-die
    interface of ``d2d_bandwidth_Bps`` (the bandwidth each die exchanges with the others, both directions
    together; 0 for one die). The reticle limit and the yield apply per die.

    ``top_clock_hz`` is the clock of the silicon's top bin when the chip is that silicon sold at a lower clock (B200:
    the GB200's dies at 0.9× its clock): the per-event energies hold at the top bin, and the lower bin runs at a lower
    voltage (:func:`phaze_env.hardware.energy.dvfs_energy_factor`). ``None``: the chip is its silicon's top bin.

    ``silicon_clock_hz`` is the clock the vendor's compute silicon runs at when the preset's arrays are an equivalent
    count at another clock (the mi300x preset: 512 arrays at 1.247 GHz for 304 CUs at 2.1 GHz): the compute logic's
    area scales by the preset's clock over it (the same rate from fewer, faster arrays); the energy per operation and
    the buffer do not move. ``None``: the preset's arrays are the silicon's.

    ``base_dies`` > 0 builds a 3-D stack: the ``dies`` compute dies (``node``) carry the compute logic only and sit
    on ``base_dies`` base dies built at ``base_node`` (MI300X: 8 N5 XCDs on 4 N6 IODs), which carry the buffer (the
    last-level cache), the HBM interfaces, the SerDes, an IO/misc block each and the die-to-die interfaces between
    them (``d2d_bandwidth_Bps`` is then each base die's). A base die is at least as large as the compute dies it
    carries (:func:`chip_area_mm2`); the interposer carries the base dies and the HBM stacks.
    """

    node: str | ProcessNode = "N7"
    hbm_stacks: int = 4
    hbm_phys: int | None = None
    links: int = 6
    link_bandwidth_Bps: float = 50e9
    serdes: str = "50G-NRZ"
    core_style: str = "systolic"
    dies: int = 1
    d2d_bandwidth_Bps: float = 0.0
    top_clock_hz: float | None = None
    silicon_clock_hz: float | None = None
    base_node: str | ProcessNode | None = None
    base_dies: int = 0

    def __post_init__(self) -> None:
        for name in ("top_clock_hz", "silicon_clock_hz"):
            clock = getattr(self, name)
            if clock is not None and (isinstance(clock, bool) or not isinstance(clock, (int, float))
                                      or not 0 < clock < math.inf):
                raise ValueError(f"ChipSystem.{name} must be a positive clock (Hz) or None, got {clock!r}")
        if isinstance(self.base_dies, bool) or not isinstance(self.base_dies, int) or self.base_dies < 0:
            raise ValueError(f"ChipSystem.base_dies must be a non-negative integer, got {self.base_dies!r}")
        if (self.base_node is None) != (self.base_dies == 0):
            raise ValueError(f"ChipSystem.base_node and base_dies go together (base dies at a node), got "
                             f"base_node={self.base_node!r}, base_dies={self.base_dies!r}")
        if self.base_node is not None and not isinstance(self.base_node, ProcessNode) and self.base_node not in NODES:
            raise UnknownNodeError(f"ChipSystem.base_node must be a ProcessNode or one of {', '.join(NODES)}, "
                                   f"got {self.base_node!r}")
        if not isinstance(self.node, ProcessNode) and self.node not in NODES:
            raise UnknownNodeError(f"ChipSystem.node must be a ProcessNode or one of {', '.join(NODES)} (the nodes "
                                   f"with density, energy, wafer cost and D0), got {self.node!r}")
        if isinstance(self.dies, bool) or not isinstance(self.dies, int) or self.dies < 1:
            raise ValueError(f"ChipSystem.dies must be a positive integer, got {self.dies!r}")
        d2d = self.d2d_bandwidth_Bps
        if isinstance(d2d, bool) or not isinstance(d2d, (int, float)) or not 0 <= d2d < math.inf or \
                (self.io_dies > 1) != (d2d > 0):
            raise ValueError(f"ChipSystem.d2d_bandwidth_Bps must be positive for a chip of several dies (base dies on "
                             f"a 3-D stack) and 0 for one, got {d2d!r} with {self.io_dies} die(s)")
        if self.serdes not in SERDES:
            raise ValueError(f"ChipSystem.serdes must be one of {', '.join(SERDES)}, got {self.serdes!r}")
        if self.core_style not in CORE_STYLES:
            raise ValueError(f"ChipSystem.core_style must be one of {', '.join(CORE_STYLES)}, got {self.core_style!r}")
        for name in ("hbm_stacks", "links"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"ChipSystem.{name} must be a non-negative integer, got {value!r}")
        if self.hbm_phys is not None and (isinstance(self.hbm_phys, bool) or not isinstance(self.hbm_phys, int)
                                          or self.hbm_phys < self.hbm_stacks):
            raise ValueError(f"ChipSystem.hbm_phys must be an integer ≥ hbm_stacks ({self.hbm_stacks}), "
                             f"got {self.hbm_phys!r}")
        bandwidth = self.link_bandwidth_Bps
        if isinstance(bandwidth, bool) or not isinstance(bandwidth, (int, float)) or not bandwidth > 0:
            raise ValueError(f"ChipSystem.link_bandwidth_Bps must be positive, got {self.link_bandwidth_Bps!r}")

    @property
    def process(self) -> ProcessNode:
        return get_node(self.node)

    @property
    def io_process(self) -> ProcessNode:
        """The node of the dies that carry the buffer, HBM interfaces and SerDes: the base dies' on a 3-D stack."""
        return self.process if self.base_node is None else get_node(self.base_node)

    @property
    def io_dies(self) -> int:
        """The dies that carry an IO/misc block and the die-to-die interfaces: the base dies on a 3-D stack."""
        return self.base_dies or self.dies

    @property
    def die_hbm_phys(self) -> int:
        return self.hbm_stacks if self.hbm_phys is None else self.hbm_phys

    @property
    def lane_pairs(self) -> int:
        """SerDes lane pairs: per link, enough lanes for half the link's bandwidth in each direction."""
        per_direction_bps = links_per_direction_Bps(1, self.link_bandwidth_Bps) * 8
        # the tolerance keeps an exact fit (200 Gb/s over 50 Gb/s lanes) from rounding up on float noise
        return self.links * math.ceil(per_direction_bps / SERDES[self.serdes].lane_bps - 1e-9)

    @property
    def link_total_Bps(self) -> float:
        return self.links * self.link_bandwidth_Bps

    @property
    def per_direction_Bps(self) -> float:
        """All links' bandwidth in each direction (:func:`links_per_direction_Bps`)."""
        return links_per_direction_Bps(self.links, self.link_bandwidth_Bps)


@dataclass(frozen=True)
class PublishedChip:
    """What a chip's vendor or paper publishes: die area (or only a bound) and power, each with its source."""

    die_area_mm2: float | None  # None where only a bound is public
    die_area_bound_mm2: float | None  # a published upper bound ("< 600 mm²")
    area_source: str
    power_w: float | None  # None where the vendor publishes none
    power_kind: str  # "TDP", "max chip power"
    power_source: str

    @property
    def power_limit_w(self) -> float | None:
        """The published power when it is a limit the chip's power management enforces (:data:`POWER_LIMIT_KINDS`),
        else ``None`` (a measured maximum, or nothing published)."""
        return self.power_w if self.power_kind in POWER_LIMIT_KINDS else None


POWER_LIMIT_KINDS = ("TDP", "TBP")
"""Published power figures that are limits the chip holds itself within, by lowering its clock and voltage (DVFS):
NVIDIA's TDP is the SXM GPU's default power limit, which its power management enforces (NVIDIA DGX B200 user guide,
"Managing Power Capping": the VBIOS "defines the maximum possible TGP", the GPU's PMU "selects the most conservative
policy to cap" its power; its example GPU reads "DefaultSetPoint": 700 W, the H100's TDP), AMD's total board power
(TBP) the MI300X's (AMD, "Measuring Max-Achievable FLOPs – Part 2", ROCm blog, 2025: "the power management
system reduces the clock speed when running dense tensor-core logic"; its measurements are "on the AMD Instinct MI300X
(750W)"). TPU v4's "max chip power" is a measured maximum, not a limit."""


SYSTEMS: dict[str, tuple[ChipSystem, str]] = {
    "tpuv4": (
        ChipSystem(node="N7", hbm_stacks=4, links=TPUV4_ICI_LINKS, link_bandwidth_Bps=2 * TPUV4_ICI_LINK_BPS,
                   serdes="50G-NRZ", core_style="systolic"),
        "TPUv4 (Jouppi et al., ISCA 2023): 7 nm, 4 HBM2 stacks (the paper's package photo: the ASIC plus 4 HBM "
        "stacks), 6 ICI links of 50 GB/s in each direction (100 GB/s both ways, 600 GB/s per chip; the tpuv4-pod "
        "preset's), eight lane pairs per link; ICI lane rate 50 Gb/s NRZ is an assumption (NVLink3's, same node "
        "and year).",
    ),
    "a100": (
        ChipSystem(node="N7", hbm_stacks=5, hbm_phys=6, links=A100_NVLINKS, link_bandwidth_Bps=2 * NVLINK_LINK_BPS,
                   serdes="50G-NRZ", core_style="simt"),
        "A100 SXM4 80 GB (NVIDIA A100 whitepaper): TSMC N7, GA100 die with 6 HBM2e interfaces of which 5 are "
        "populated, 12 NVLink3 links × 50 GB/s (600 GB/s) of four 50 Gb/s NRZ pairs per direction.",
    ),
    "h100": (
        ChipSystem(node="4N", hbm_stacks=5, hbm_phys=6, links=H100_NVLINKS, link_bandwidth_Bps=2 * NVLINK_LINK_BPS,
                   serdes="100G-PAM4", core_style="simt"),
        "H100 SXM5 (NVIDIA H100 whitepaper): TSMC 4N, GH100 die with 6 HBM3 interfaces of which 5 are populated, "
        "18 NVLink4 links × 50 GB/s (900 GB/s) of two 100 Gb/s PAM4 pairs per direction.",
    ),
    "b200": (
        ChipSystem(node="4NP", hbm_stacks=8, links=B200_NVLINKS, link_bandwidth_Bps=2 * NVLINK5_LINK_BPS,
                   serdes="200G-PAM4", core_style="simt", dies=2, d2d_bandwidth_Bps=B200_D2D_BPS,
                   top_clock_hz=GB200_CLOCK_HZ),
        "B200 (NVIDIA Blackwell technical brief 2024, HGX B200 datasheet): TSMC 4NP, two reticle-limited dies joined "
        "by the 10 TB/s NV-HBI, 8 HBM3e stacks (four per die), 18 NVLink5 links × 100 GB/s (1.8 TB/s) of two "
        "200 Gb/s PAM4 pairs per direction; each die its own IO/misc block. The GB200's silicon binned to 0.9× its "
        "clock (2.25 against 2.5 PFLOP/s dense bf16, the two datasheets), hence at a lower voltage (top_clock_hz).",
    ),
    "gb200": (
        ChipSystem(node="4NP", hbm_stacks=8, links=B200_NVLINKS, link_bandwidth_Bps=2 * NVLINK5_LINK_BPS,
                   serdes="200G-PAM4", core_style="simt", dies=2, d2d_bandwidth_Bps=B200_D2D_BPS),
        "A GB200 NVL72's Blackwell GPU (NVIDIA GB200 NVL72 datasheet): the B200's two dies, HBM3e stacks and NVLink5 "
        "links (1.8 TB/s per GPU into the 72-GPU NVLink domain) at the GB200's higher clock and 1,200 W limit.",
    ),
    "mi300x": (
        ChipSystem(node="N5", hbm_stacks=8, links=MI300X_IF_LINKS, link_bandwidth_Bps=MI300X_IF_LINK_BPS,
                   serdes="50G-NRZ", core_style="simt", dies=MI300X_XCDS, d2d_bandwidth_Bps=MI300X_IOD_D2D_BPS,
                   silicon_clock_hz=MI300X_ENGINE_CLOCK_HZ, base_node="N6", base_dies=MI300X_IODS),
        "MI300X (AMD Instinct MI300X data sheet and CDNA 3 white paper, 2023; Smith et al., ISSCC 2024): 8 XCDs on "
        "TSMC N5 (304 CUs at 2.1 GHz, the preset's 512 arrays at 1.247 GHz as silicon) 3-D stacked on 4 IODs on N6 "
        "that hold the 256 MB Infinity Cache, the 8 HBM3 interfaces (192 GB, 5.3 TB/s), the 7 Infinity Fabric links "
        "of 128 GB/s and 5.3 TB/s of IOD-to-IOD traffic each (assumption, MI300X_IOD_D2D_BPS); CoWoS-S-class "
        "interposer under the IODs and stacks. Assumptions: GA100's SIMT core factor; Infinity Fabric lanes (32 "
        "Gb/s class) take the 50G NRZ lane's area.",
    ),
    "tpuv5p": (
        ChipSystem(node="N5", hbm_stacks=6, links=TPUV5P_ICI_LINKS,
                   link_bandwidth_Bps=TPUV5P_ICI_CHIP_BPS / TPUV5P_ICI_LINKS, serdes="100G-PAM4", core_style="systolic"),
        "TPU v5p (Cloud TPU v5p documentation): 95 GB HBM2e at 2,765 GB/s = 6 stacks of 16 GB at 3.6 Gb/s per pin "
        "(460.8 GB/s each; the stack count is read from the bandwidth), 6 ICI links of 100 GB/s per direction "
        "(1,200 GB/s per chip). Assumptions: TSMC N5 (Google does not disclose the node; range N7–N4P), 100 Gb/s "
        "PAM4 lanes (8 pairs per link).",
    ),
}
"""System-level fields of the presets that have public system data (keyed like ``accelerator.PRESETS``)."""

PUBLISHED: dict[str, PublishedChip] = {
    "tpuv4": PublishedChip(
        die_area_mm2=None, die_area_bound_mm2=600.0, area_source="Jouppi et al., ISCA 2023 (die < 600 mm²)",
        power_w=192.0, power_kind="max chip power",
        power_source="Jouppi et al., ISCA 2023, as quoted by G. Lockwood's TPUv4 notes (glennklockwood.com)"),
    "a100": PublishedChip(die_area_mm2=826.0, die_area_bound_mm2=None, area_source="NVIDIA A100 whitepaper",
                          power_w=400.0, power_kind="TDP", power_source="NVIDIA A100 SXM4 80 GB datasheet"),
    "h100": PublishedChip(die_area_mm2=814.0, die_area_bound_mm2=None, area_source="NVIDIA H100 whitepaper",
                          power_w=700.0, power_kind="TDP", power_source="NVIDIA H100 SXM5 datasheet"),
    "b200": PublishedChip(
        die_area_mm2=2 * 814.0, die_area_bound_mm2=None,
        area_source="two reticle-limited dies (NVIDIA Blackwell technical brief, 2024), \"a near doubling of the GPU "
                    "die area versus Hopper\" (TechInsights' HGX B200 teardown, 2025): 2 × GH100's 814 mm²",
        power_w=1000.0, power_kind="TDP", power_source="NVIDIA HGX B200 datasheet (up to 1,000 W per GPU)"),
    "gb200": PublishedChip(
        die_area_mm2=2 * 814.0, die_area_bound_mm2=None,
        area_source="the B200's dies (same silicon): 2 × GH100's 814 mm², as for b200",
        power_w=1200.0, power_kind="TDP",
        power_source="NVIDIA GB200 NVL72 datasheet / Blackwell technical brief (1,200 W per GPU in GB200)"),
    "mi300x": PublishedChip(
        die_area_mm2=MI300X_XCDS * MI300X_XCD_AREA_MM2 + MI300X_IODS * MI300X_IOD_AREA_MM2, die_area_bound_mm2=None,
        area_source="8 XCDs of ≈ 115 mm² + 4 IODs of ≈ 370 mm² (SemiAnalysis 2023; MI300X_XCD_AREA_MM2, "
                    "MI300X_IOD_AREA_MM2)",
        power_w=MI300X_POWER_W, power_kind="TBP", power_source="AMD Instinct MI300X data sheet (750 W)"),
    "tpuv5p": PublishedChip(
        die_area_mm2=None, die_area_bound_mm2=area.RETICLE_LIMIT_MM2,
        area_source="not published (Google discloses neither node nor die size); only the reticle limit bounds it",
        power_w=None, power_kind="chip power",
        power_source="not published (Cloud TPU v5p documentation gives no power; no Google paper found gives it)"),
}
"""Published die area and power of the presets in ``SYSTEMS`` (``None``: not published; the model's figure is then
a prediction with nothing to check it against, and the report says so)."""


# --- wafer, yield, die cost ------------------------------------------------------------------------------

def dies_per_wafer(die_area_mm2: float, wafer_diameter_mm: float = WAFER_DIAMETER_MM) -> int:
    """Whole dies on a round wafer, with edge loss (Hennessy & Patterson, §1.6):
    ``π·(d/2)²/A − π·d/√(2·A)``, rounded down."""
    if not die_area_mm2 > 0:
        raise ValueError(f"die area must be positive, got {die_area_mm2!r} mm²")
    gross = math.pi * (wafer_diameter_mm / 2) ** 2 / die_area_mm2 - math.pi * wafer_diameter_mm / math.sqrt(2 * die_area_mm2)
    return max(0, math.floor(gross))


def die_yield(die_area_mm2: float, defect_density_per_cm2: float, alpha: float = NEGATIVE_BINOMIAL_ALPHA) -> float:
    """Fraction of dies with no killer defect, negative binomial: ``(1 + D0·A/α)^−α`` (A in cm²)."""
    if not die_area_mm2 > 0 or defect_density_per_cm2 < 0 or not alpha > 0:
        raise ValueError(f"die_yield needs area > 0, D0 ≥ 0 and α > 0, got {die_area_mm2!r}, "
                         f"{defect_density_per_cm2!r}, {alpha!r}")
    return (1.0 + defect_density_per_cm2 * die_area_mm2 / 100.0 / alpha) ** -alpha


def good_die_cost_usd(die_area_mm2: float, node: ProcessNode, defect_density_per_cm2: float | None = None,
                      alpha: float = NEGATIVE_BINOMIAL_ALPHA) -> float:
    """Wafer cost over the good dies it yields (D0 defaults to the node's)."""
    d0 = node.defect_density_per_cm2 if defect_density_per_cm2 is None else defect_density_per_cm2
    good = dies_per_wafer(die_area_mm2) * die_yield(die_area_mm2, d0, alpha)
    if good <= 0:
        raise ValueError(f"a {die_area_mm2:.0f} mm² die does not fit on a {WAFER_DIAMETER_MM:.0f} mm wafer")
    return node.wafer_cost_usd / good


def check_reticle(die_area_mm2: float) -> None:
    """Raise :class:`ReticleLimitError` when a die exceeds the reticle limit."""
    if die_area_mm2 > area.RETICLE_LIMIT_MM2:
        raise ReticleLimitError(f"die of {die_area_mm2:.0f} mm² exceeds the reticle limit of "
                                f"{area.RETICLE_LIMIT_MM2:.0f} mm² (26 × 33 mm); split it into chiplets or shrink it")


# --- the chip estimate -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ChipEstimate:
    """Area (mm²), power (W) and cost (USD) of one chip, each with its breakdown by term."""

    area_mm2: dict[str, float]
    power_w: dict[str, float]
    cost_usd: dict[str, float]
    dies_per_wafer: int
    die_yield: float
    fits_reticle: bool
    dies: int = 1  # dies on the package; dies_per_wafer, die_yield and fits_reticle are one die's
    links: int = 0  # the chip's scale-up links and their bandwidth (both directions together): what its
    link_total_Bps: float = 0.0  # scale-up fabric must switch (system.ScaleUpFabric)
    base_dies: int = 0  # a 3-D stack's base dies and their area together (ChipSystem.base_dies); dies_per_wafer,
    base_area_mm2: float = 0.0  # die_yield and area_per_die_mm2 are then a compute die's

    @property
    def area_per_die_mm2(self) -> float:
        """One compute die's area (every die's on a chip of identical dies)."""
        return (self.die_area_mm2 - self.base_area_mm2) / self.dies

    @property
    def area_per_base_die_mm2(self) -> float:
        """One base die's area on a 3-D stack (0 without base dies)."""
        return self.base_area_mm2 / self.base_dies if self.base_dies else 0.0

    @property
    def die_area_mm2(self) -> float:
        """All the chip's silicon (every die together)."""
        return sum(self.area_mm2.values())

    @property
    def total_power_w(self) -> float:
        return sum(self.power_w.values())

    @property
    def total_cost_usd(self) -> float:
        return sum(self.cost_usd.values())

    def to_dict(self) -> dict:
        return {**asdict(self), "die_area_mm2": self.die_area_mm2, "total_power_w": self.total_power_w,
                "total_cost_usd": self.total_cost_usd}


def compute_area_mm2(acc: Accelerator, node: ProcessNode) -> dict[str, float]:
    """The template's compute area at ``node``: ``logic`` (tensor + vector cores) and ``sram`` (buffer)."""
    return {part: float(value) for part, value in node_compute_parts_mm2(acc.area_mm2, acc.buffer_mb, node).items()}


def node_compute_parts_mm2(arch_area_mm2, buffer_mb, node: ProcessNode) -> dict:
    """:func:`compute_area_mm2` from the template's architecture area and buffer size (numpy-vectorised, for
    the system space's area window over every architecture at once)."""
    sram = area.buffer_area_mm2(buffer_mb)
    return {"logic": (np.asarray(arch_area_mm2) - sram) / node.logic_density_gain, "sram": sram / node.sram_density_gain}


def compute_die_area_mm2(arch_area_mm2, buffer_mb, system: ChipSystem):
    """The compute block on the die: the template's area at the node × the core style's factor (vectorised)."""
    return sum(node_compute_parts_mm2(arch_area_mm2, buffer_mb, system.process).values()) * \
        CORE_AREA_FACTORS[system.core_style]


def periphery_area_mm2(system: ChipSystem) -> dict[str, float]:
    """The die's blocks outside the compute: HBM PHYs + controllers, SerDes, IO/misc (they follow the system
    fields only, so ``die − their sum`` is the compute-area budget of the system space; on a 3-D stack, the base
    dies' blocks at the base node)."""
    node = system.io_process
    return {
        "hbm_interfaces": float(area.hbm_interface_area_mm2(system.die_hbm_phys, node.logic_density_gain)),
        "serdes": float(area.serdes_area_mm2(system.lane_pairs, SERDES[system.serdes].lane_pair_area_mm2)),
        "io_misc": area.IO_MISC_AREA_MM2 * system.io_dies,
        "die_to_die": float(area.d2d_interface_area_mm2(system.d2d_bandwidth_Bps)) * system.io_dies,
    }


def silicon_array_scale(acc: Accelerator, system: ChipSystem) -> float:
    """The compute logic's area on the silicon over the preset's: ``acc.clock_hz / silicon_clock_hz`` (1 without a
    silicon clock; :class:`ChipSystem`)."""
    return 1.0 if system.silicon_clock_hz is None else acc.clock_hz / system.silicon_clock_hz


def chip_area_mm2(acc: Accelerator, system: ChipSystem) -> dict[str, float]:
    """Die area by block: compute (× the core style's factor), HBM PHYs + controllers, SerDes, IO/misc.

    On a 3-D stack (``base_dies``) ``compute`` is the compute dies' logic and the base dies carry ``cache`` (the
    buffer at the base node, a plain SRAM array: no core-style factor), ``stack_landing`` (what a base die needs
    beyond its cache to carry the compute dies above it: each base die is at least their footprint, assumption
    that they tile it with no gap, range +0–10 %) and the periphery beside the stack. The hybrid-bond interface between
    a compute die and its base die is priced in neither area nor energy (assumption: its bond pads sit inside the
    footprint, and its pJ/bit is unquantified here — a part of the modelled power this leaves out)."""
    sram_mm2 = area.buffer_area_mm2(acc.buffer_mb)
    arch_mm2 = acc.area_mm2 if system.silicon_clock_hz is None else \
        sram_mm2 + (acc.area_mm2 - sram_mm2) * silicon_array_scale(acc, system)  # the preset's arrays as silicon
    if system.base_dies == 0:
        return {"compute": float(compute_die_area_mm2(arch_mm2, acc.buffer_mb, system)), **periphery_area_mm2(system)}
    logic = node_compute_parts_mm2(arch_mm2, acc.buffer_mb, system.process)["logic"]
    compute = float(logic) * CORE_AREA_FACTORS[system.core_style]
    cache = float(sram_mm2) / system.io_process.sram_density_gain
    return {"compute": compute, "cache": cache, "stack_landing": max(0.0, compute - cache),
            **periphery_area_mm2(system)}


def bin_clock_ratio(acc: Accelerator, system: ChipSystem) -> float:
    """The chip's clock over its silicon's top bin (1 for a top-bin part, ``top_clock_hz`` unset); a clock above the
    top bin raises."""
    if system.top_clock_hz is None:
        return 1.0
    ratio = acc.clock_hz / system.top_clock_hz
    if ratio > 1 + 1e-12:
        raise ValueError(f"a chip clocked at {acc.clock_hz / 1e9:.3f} GHz is above its silicon's top bin "
                         f"({system.top_clock_hz / 1e9:.3f} GHz)")
    return ratio


def chip_power_w(acc: Accelerator, system: ChipSystem, die_area_mm2: float) -> dict[str, float]:
    """TDP-like power by term: core blocks (MACs, SRAM, vector; node- and style-scaled, and voltage-scaled for a part
    binned below its silicon's top clock: :func:`bin_clock_ratio`), HBM, links, leakage."""
    terms = energy.full_rate_power_terms_w(acc)
    ratio = bin_clock_ratio(acc, system)
    core_scale = system.process.energy_factor * CORE_AREA_FACTORS[system.core_style] * energy.dvfs_energy_factor(ratio)
    return {
        "mac": terms["mac"] * core_scale,
        "sram": terms["sram"] * core_scale,
        "vector": terms["vector"] * core_scale,
        "hbm": terms["hbm"],
        "links": energy.link_power_w(system.link_total_Bps),
        "die_to_die": energy.d2d_power_w(system.io_dies * system.d2d_bandwidth_Bps / 2),
        "leakage": energy.leakage_power_w(die_area_mm2) * energy.dvfs_static_factor(ratio),
    }


def package_yield(system: ChipSystem, bond_yield: float | None = None) -> float:
    """The fraction of packages assembled whole: ``bond_yield`` per die and per HBM stack (default
    :data:`PACKAGE_BOND_YIELD`, read at the call so a sensitivity sweep can set the module's value; a 3-D stack's
    compute dies each count one bond onto their base die, assumption: a hybrid bond as likely to fail as a 2.5-D one)."""
    bond_yield = PACKAGE_BOND_YIELD if bond_yield is None else bond_yield
    if not 0 < bond_yield <= 1:
        raise ValueError(f"the bond yield must be in (0, 1], got {bond_yield!r}")
    return bond_yield ** (system.dies + system.base_dies + system.hbm_stacks)


def chip_estimate(acc: Accelerator, system: ChipSystem, *, defect_density_per_cm2: float | None = None,
                  alpha: float = NEGATIVE_BINOMIAL_ALPHA, hbm_usd_per_gb: float | None = None,
                  package_usd_per_mm2: float | None = None, bond_yield: float | None = None,
                  allow_over_reticle: bool = False) -> ChipEstimate:
    """Area, power and cost of ``acc`` built as ``system``. A die over the reticle limit raises
    :class:`ReticleLimitError` unless ``allow_over_reticle`` (then ``fits_reticle`` is False and the cost is
    that of a hypothetical monolithic die). D0 defaults to the node's; HBM $/GB, the package cost per mm² and the
    bond yield to :data:`HBM_USD_PER_GB`, :data:`PACKAGE_USD_PER_MM2` and :data:`PACKAGE_BOND_YIELD` as they are at
    the call (a sensitivity study moves them: :mod:`phaze_env.assumptions`)."""
    hbm_usd_per_gb = HBM_USD_PER_GB if hbm_usd_per_gb is None else hbm_usd_per_gb
    areas = chip_area_mm2(acc, system)
    silicon_mm2 = sum(areas.values())
    base_mm2 = silicon_mm2 - areas["compute"] if system.base_dies else 0.0
    per_die_mm2 = (silicon_mm2 - base_mm2) / system.dies
    per_base_die_mm2 = base_mm2 / system.base_dies if system.base_dies else 0.0
    if not allow_over_reticle:
        check_reticle(max(per_die_mm2, per_base_die_mm2))
    d0 = system.process.defect_density_per_cm2 if defect_density_per_cm2 is None else defect_density_per_cm2
    base_d0 = system.io_process.defect_density_per_cm2 if defect_density_per_cm2 is None else defect_density_per_cm2
    cost = {
        "die": system.dies * good_die_cost_usd(per_die_mm2, system.process, d0, alpha),
        "hbm": acc.hbm_gb * hbm_usd_per_gb,
        # the interposer carries the base dies of a 3-D stack (the compute dies sit on them), else every die
        "package": (PACKAGE_USD_PER_MM2 if package_usd_per_mm2 is None else package_usd_per_mm2)
        * interposer_area_mm2(base_mm2 or silicon_mm2, system.die_hbm_phys),
    }
    if system.base_dies:
        cost["base_dies"] = system.base_dies * good_die_cost_usd(per_base_die_mm2, system.io_process, base_d0, alpha)
    cost["assembly_yield"] = sum(cost.values()) * (package_yield(system, bond_yield) ** -1 - 1)
    return ChipEstimate(area_mm2=areas, power_w=chip_power_w(acc, system, silicon_mm2), cost_usd=cost,
                        dies_per_wafer=dies_per_wafer(per_die_mm2), die_yield=die_yield(per_die_mm2, d0, alpha),
                        fits_reticle=max(per_die_mm2, per_base_die_mm2) <= area.RETICLE_LIMIT_MM2, dies=system.dies,
                        links=system.links, link_total_Bps=system.link_total_Bps, base_dies=system.base_dies,
                        base_area_mm2=base_mm2)


def preset_system(name: str) -> ChipSystem:
    """The system fields of preset ``name``; a preset without public system data raises ``KeyError``."""
    key = name.strip().lower()
    get_preset(key)  # an unknown preset raises UnknownPresetError with its hint
    if key not in SYSTEMS:
        raise KeyError(f"no system data for preset {name!r}; presets with system data: {', '.join(SYSTEMS)}")
    return SYSTEMS[key][0]


def preset_estimate(name: str, **options) -> ChipEstimate:
    """:func:`chip_estimate` of preset ``name`` with its ``SYSTEMS`` fields (``options`` as there)."""
    return chip_estimate(get_preset(name), preset_system(name), **options)


# --- power limit: the clock a chip runs at within its published power ----------------------------------------------

LOWEST_CLOCK_RATIO = 300e6 / MI300X_ENGINE_CLOCK_HZ
"""The lowest clock a power-limited chip can drop to, over its top clock: 1/7, an AMD Instinct GPU's idle clock of
300 MHz ("a low idle frequency (300 MHz on AMD Instinct GPUs)", AMD ROCm blog "Measuring Max-Achievable FLOPs – Part
2", 2025) over the MI300X's 2,100 MHz peak engine clock. Assumption for other chips (the same fraction of their top
clock); it only bounds where :func:`power_capped` searches — a limit below the chip's power there is refused."""


class PowerLimitError(ValueError):
    """A power limit no clock of the chip meets: below its power at :data:`LOWEST_CLOCK_RATIO` of its clock (the
    HBM, links and die-to-die interfaces do not follow the core clock)."""


def capped_chip(acc: Accelerator, system: ChipSystem, clock_ratio: float) -> tuple[Accelerator, ChipSystem]:
    """``acc`` built as ``system`` run at ``clock_ratio`` (in (0, 1]) of its clock on the same silicon: the core clock
    (hence every peak rate) × ``clock_ratio`` at the voltage that clock needs — the silicon's top bin stays where it
    was (``top_clock_hz``, the nominal clock for a top-bin part), so :func:`bin_clock_ratio` and the DVFS factors of
    :mod:`.energy` price it — and the silicon itself unchanged (a ``silicon_clock_hz`` follows the clock, so the die
    area does not move). HBM and link bandwidth do not follow the core clock."""
    if not 0 < clock_ratio <= 1:
        raise ValueError(f"a clock ratio must be in (0, 1], got {clock_ratio!r}")
    if clock_ratio == 1:
        return acc, system
    silicon = None if system.silicon_clock_hz is None else system.silicon_clock_hz * clock_ratio
    return (acc.replace(clock_hz=acc.clock_hz * clock_ratio),
            replace(system, top_clock_hz=system.top_clock_hz or acc.clock_hz, silicon_clock_hz=silicon))


def capped_power_w(acc: Accelerator, system: ChipSystem, clock_ratio: float) -> float:
    """The TDP-like chip power (:func:`chip_power_w`) of ``acc`` as ``system`` run at ``clock_ratio`` of its clock
    (:func:`capped_chip`)."""
    capped_acc, capped_system = capped_chip(acc, system, clock_ratio)
    return sum(chip_power_w(capped_acc, capped_system, sum(chip_area_mm2(acc, system).values())).values())


def power_capped(acc: Accelerator, system: ChipSystem,
                 power_limit_w: float | None) -> tuple[Accelerator, ChipSystem]:
    """The chip as it runs under a published power limit (:attr:`PublishedChip.power_limit_w`; ``None``: no limit):
    unchanged when its TDP-like power at its clock is within the limit, else at the clock whose power meets it (its
    throughput falls with the clock; :func:`capped_chip`). The chip's power management does this (DVFS; AMD's
    MI300X runs dense GEMMs at a median 1,115–1,230 MHz of its 2,100 MHz peak within its 750 W, ROCm blog
    "Measuring Max-Achievable FLOPs – Part 2", 2025).

    Physics (stated, :mod:`.energy`): a block's dynamic power is its events per second (∝ f) × energy per event
    (∝ V²), static power ∝ V, with ``V ∝ f^k`` (:data:`~phaze_env.hardware.energy.VOLTAGE_FREQUENCY_EXPONENT`,
    k = 1, range 0–1: dynamic power ∝ f³ to ∝ f, static power falling as f or fixed); HBM, link and die-to-die power
    follow their bandwidths, not the core clock. The power rises monotonically with the clock, so bisection finds
    the clock to within 1e-12 of it. A limit below the chip's power at :data:`LOWEST_CLOCK_RATIO` of its clock
    raises :class:`PowerLimitError`."""
    if power_limit_w is None:
        return acc, system
    if isinstance(power_limit_w, bool) or not isinstance(power_limit_w, (int, float)) or \
            not 0 < power_limit_w < math.inf:
        raise ValueError(f"a power limit must be a positive power (W) or None, got {power_limit_w!r}")
    if capped_power_w(acc, system, 1.0) <= power_limit_w:
        return acc, system
    floor_w = capped_power_w(acc, system, LOWEST_CLOCK_RATIO)
    if floor_w > power_limit_w:
        fixed = chip_power_w(acc, system, sum(chip_area_mm2(acc, system).values()))
        clockless_w = fixed["hbm"] + fixed["links"] + fixed["die_to_die"]
        raise PowerLimitError(
            f"a power limit of {power_limit_w:,.0f} W is below what the chip draws at its lowest clock "
            f"({floor_w:,.0f} W at {LOWEST_CLOCK_RATIO:.3f} of its clock; its HBM, links and die-to-die interfaces "
            f"alone draw {clockless_w:,.0f} W, whatever the clock): no clock meets it")
    low, high = LOWEST_CLOCK_RATIO, 1.0
    while high - low > 1e-12:
        middle = (low + high) / 2
        low, high = (middle, high) if capped_power_w(acc, system, middle) <= power_limit_w else (low, middle)
    return capped_chip(acc, system, low)
