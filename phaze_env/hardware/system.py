"""The training system around a chip: HBM generations, the per-chip share of a cluster budget, the chip count.

The system design space (``DesignSpace.named("system")``, knobs in
:data:`phaze_env.hardware.space.SYSTEM_KNOBS`) builds each design from a :class:`SystemChoice` — die area,
HBM stacks × generation, chip-to-chip links × bandwidth, the cluster's topology family — and the architecture
knobs PHAZE searches. From them:

* the **chip**: the accelerator with the generation's HBM capacity and bandwidth, and a
  :class:`~phaze_env.hardware.cost.ChipSystem` (node :data:`SYSTEM_NODE`, systolic cores, SerDes
  :data:`SYSTEM_SERDES`) whose HBM PHYs, SerDes and IO leave ``die − periphery`` mm² for the compute: the
  area window of the architecture knobs (:meth:`SystemChoice.compute_budget_mm2`);
* the **chip count**: ``floor(budget / per-chip share)`` rounded down to what the topology builds
  (:func:`devices_supported`: whole 4×4×4 torus cubes in equal pods of at most :data:`TORUS_POD_CHIPS`, whole
  8-chip switch domains); the
  per-chip share of a power budget is ``(chip TDP + host share + scale-out network share) × PUE``
  (:func:`wall_power_per_chip_w`), of a money budget ``chip cost + host share + network share``
  (:func:`cost_per_chip_usd`), the host and network of the design's :class:`SystemFamily` (TPU v4's hosts for a
  torus, DGX H100 nodes on NDR InfiniBand for a switched system; each reference its own family's);
* the **cluster**: :func:`phaze_env.cluster.point_cluster` from the chip's links (the cluster floor builds it;
  this module stays on the hardware floor).

Every constant cites its source or says "assumption" with its sensitivity (``docs/system_space.md``).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass
from typing import Any

from phaze_env.hardware import area
from phaze_env.hardware.accelerator import (A100_GEMM_EFFICIENCY, HBM2_EFFICIENCY, HBM3_EFFICIENCY, Accelerator,
                                            get_preset)
from phaze_env.hardware.cost import (A100_NVLINKS, B200_NVLINKS, H100_NVLINKS, NVLINK5_LINK_BPS,
                                     MI300X_ENGINE_CLOCK_HZ, NVLINK_LINK_BPS, PUBLISHED, SYSTEMS, ChipEstimate,
                                     ChipSystem, chip_estimate, compute_die_area_mm2, nre_usd_per_chip,
                                     periphery_area_mm2, power_capped)
from phaze_env.hardware.number_format import check_number_format


TOPOLOGIES = ("torus", "switched")
"""The system space's cluster families (built by :func:`phaze_env.cluster.system_cluster`): a 3-D torus of direct
chip-to-chip links (TPU pods) and a two-tier switched network (DGX: a scale-up switch domain per node, a
scale-out NIC per chip)."""
TORUS_CUBE_SIDE = 4
"""A system-space torus is made of whole 4×4×4 cubes of 64 chips, the unit TPUv4 pods are built from and
joined by optical circuit switches (Jouppi et al. 2023)."""
TORUS_POD_CHIPS = 4096
"""The largest torus the system space builds: one TPU v4 pod of 4,096 chips, 64 cubes of 4×4×4 joined by
optical circuit switches ("TPU v4 supercomputers ... 4096 chips", 64 racks of one 4×4×4 cube each, 48 OCSes;
Jouppi et al., "TPU v4: An Optically Reconfigurable Supercomputer for Machine Learning with Hardware Support
for Embeddings", ISCA 2023, §1–2). A job on more chips runs on several pods (slices) over the data-centre network,
as PaLM did on two pods (Chowdhery et al. 2022 §4) and Cloud TPU Multislice does: a system-space torus of ``n``
chips is :func:`torus_pods` equal pods. A multiple of the cube (:func:`topology_unit`)."""
TORUS_NEIGHBOURS = 6
"""A 3-D torus chip has two neighbours per dimension; its links are split evenly over the six."""
SCALE_UP_DOMAIN = 8
"""Chips per scale-up (switch) domain of the switched family: the 8 GPUs of a DGX A100 / DGX H100 node on
NVSwitch (NVIDIA DGX A100 and DGX H100 datasheets)."""


def topology_unit(topology: str) -> int:
    """The chip count of a topology family is a multiple of this (whole torus cubes, whole switch domains)."""
    if topology == "torus":
        return TORUS_CUBE_SIDE ** 3
    if topology == "switched":
        return SCALE_UP_DOMAIN
    raise ValueError(f"unknown topology {topology!r}; choose from {', '.join(TOPOLOGIES)}")


def torus_pods(n_devices: int, pod_chips: int | None = None) -> int:
    """The pods (slices) a system-space torus of ``n_devices`` chips is built as: ``⌈n / pod_chips⌉`` equal
    pods of whole cubes, joined by the data-centre network (one pod up to ``pod_chips``, ``None``:
    :data:`TORUS_POD_CHIPS`; a family's own pod: :attr:`SystemFamily.domain_chips`). Raises if ``n_devices`` does not
    split so (:func:`devices_supported` only returns counts that do)."""
    unit = topology_unit("torus")
    pod_chips = pod_chips or TORUS_POD_CHIPS
    pods = max(1, -(-int(n_devices) // pod_chips))
    if n_devices < unit or n_devices % (pods * unit):
        raise ValueError(f"a torus of {n_devices} chips is {pods} pod(s) of at most {pod_chips}, which must be "
                         f"equal and hold whole 4×4×4 cubes of {unit}: {n_devices} chips do not split so")
    return pods


def devices_supported(topology: str, affordable: int, domain_chips: int | None = None) -> int:
    """The most chips ≤ ``affordable`` the family builds (0 if not one unit): whole units (switch domains, torus
    cubes); a torus of more than :data:`TORUS_POD_CHIPS` chips is :func:`torus_pods` equal pods, so its count is
    the largest one that splits into ``⌈n / pod⌉`` equal pods of whole cubes.

    With ``u`` affordable cubes, ``c`` cubes per pod and ``p = ⌈u / c⌉`` pods: ``p`` pods of ``⌊u / p⌋`` cubes when
    that still needs ``p`` pods (``p·⌊u/p⌋ > c·(p−1)``), else ``p − 1`` full pods — the larger of the two, which is
    the most any pod count allows (more pods than ``p`` do not fit ``u``; fewer hold at most ``c·(p−1)``). It loses
    fewer than ``p`` cubes to the equal split, never grows when the budget shrinks, and the budget pays for every
    chip counted (the cluster's power and cost are this count's, :attr:`SystemPoint.cluster_power_w`).

    ``domain_chips`` is the family's scale-up domain (:attr:`SystemFamily.domain_chips`; ``None``: the topology's
    default): a switched family's unit (8 for a DGX, 72 for a GB200 NVL72), a torus family's pod (4,096 for TPU v4,
    8,960 for TPU v5p)."""
    unit = topology_unit(topology) if topology == "torus" or domain_chips is None else domain_chips
    units = max(0, int(affordable)) // unit
    if topology == "torus" and units:
        per_pod = (domain_chips or TORUS_POD_CHIPS) // unit
        pods = -(-units // per_pod)
        units = max(pods * (units // pods), per_pod * (pods - 1))
    return units * unit


@dataclass(frozen=True)
class HbmGeneration:
    """One HBM stack of a generation: capacity (GiB), nominal bandwidth (1,024 data pins × pin rate) and the
    achievable fraction of it."""

    name: str
    stack_gb: float
    pin_rate_bps: float
    efficiency: float
    source: str
    first_year: int | None = None  # the year the generation first shipped on an accelerator (None: not known)

    @property
    def stack_bandwidth_Bps(self) -> float:
        return HBM_DATA_PINS * self.pin_rate_bps / 8


HBM_DATA_PINS = 1024
"""Data pins of one HBM stack's interface, every generation up to HBM3e (JEDEC JESD235 / JESD238)."""
HBM_GENERATIONS: dict[str, HbmGeneration] = {
    "hbm2": HbmGeneration("hbm2", 8.0, 2.4e9, HBM2_EFFICIENCY,
                          "JEDEC JESD235A (HBM2, up to 2.4 Gb/s per pin: 307 GB/s per stack); Samsung 'Aquabolt' "
                          "8 GB 2.4 Gb/s stacks (2018); TPU v4's four stacks (32 GiB, ≈ 1.2 TB/s). First shipped on "
                          "an accelerator in 2016 (NVIDIA Tesla P100, HBM2; Samsung HBM2 mass production Jan 2016)",
                          first_year=2016),
    "hbm2e": HbmGeneration("hbm2e", 16.0, 3.2e9, HBM2_EFFICIENCY,
                           "JEDEC JESD235C (HBM2E, 3.2 Gb/s per pin, 409.6 GB/s per stack); Samsung HBM2E "
                           "'Flashbolt' 16 GB 8-high stacks (2020); the A100 80 GB's five stacks. First shipped "
                           "2020 (Samsung Flashbolt mass production Feb 2020; A100 80 GB Nov 2020)", first_year=2020),
    "hbm3": HbmGeneration("hbm3", 16.0, 6.4e9, HBM3_EFFICIENCY,
                          "JEDEC JESD238 (HBM3, Jan 2022: 6.4 Gb/s per pin, 819 GB/s per stack); SK hynix 16 GB "
                          "8-high HBM3 as on the H100 SXM (5 × 16 GB = 80 GB). First shipped 2022 (SK hynix HBM3 mass "
                          "production June 2022, for the H100)", first_year=2022),
    "hbm3e": HbmGeneration("hbm3e", 24.0, 9.2e9, HBM3_EFFICIENCY,
                           "Micron HBM3E 24 GB 8-high (2024 datasheet/press: > 9.2 Gb/s per pin, > 1.2 TB/s per "
                           "stack); SK hynix HBM3E 9.2 Gb/s. Efficiency: HBM3's measured 0.90 (assumption). First "
                           "shipped 2024 (Micron HBM3E volume production Feb 2024, for the H200; B200 2024)",
                           first_year=2024),
}
"""HBM generations by name (capacity per stack in GiB: HBM capacities are binary, a 16 GB stack is 16 Gib dies
× 8). The PHY area per stack is :data:`phaze_env.hardware.area.HBM_PHY_AREA_MM2` for every generation (the
1,024-bit interface is kept; assumption stated there); $/GB and pJ/bit are :mod:`.cost`'s and :mod:`.energy`'s,
the same for every generation (assumption: HBM3e costs more per GB and less energy per bit, so a budget
buys slightly fewer HBM3e chips than modelled)."""

SYSTEM_NODE = "N7"
"""The system space's process node: TSMC N7, the node of the TPUv4-like template the architecture knobs, the
clock and the per-event energies come from (so nothing is scaled across nodes)."""
SYSTEM_SERDES = "100G-PAM4"
"""The system space's chip-to-chip lanes: 100 Gb/s PAM4 pairs, NVLink4's (H100 whitepaper); a link of
``B`` GB/s (both directions) takes ``⌈B·8/2 / 100 Gb/s⌉`` lane pairs (:attr:`ChipSystem.lane_pairs`)."""
SYSTEM_GEMM_EFFICIENCY = A100_GEMM_EFFICIENCY
"""Every design of the system space, and the TPUv4 baseline it is compared against, sustains the A100's
measured 85.9 % of its tensor cores' nominal rate (MAMF). The tpuv4 preset keeps 1.0 (no TPUv4 measurement
exists; PHAZE's space reproduces with it): in the system space no design wins by an efficiency assumption
the reference chips do not get."""
DESIGN_GEMM_EFFICIENCY = SYSTEM_GEMM_EFFICIENCY
"""The GEMM efficiency of the system space's searched chips: :data:`SYSTEM_GEMM_EFFICIENCY`, the same as the
references' (a rule: a searched chip has no measurement). A name of its own so that a sensitivity study moves the
designs' alone (:data:`phaze_env.assumptions.ASSUMPTIONS`: range 0.801, H100's measured, to 1.0): the references
stay pinned by their framework efficiencies fitted to published runs at :data:`SYSTEM_GEMM_EFFICIENCY`."""
WALL_ENERGY_LABEL = "wall energy J/token (chips at TDP + host + network, × PUE)"
"""What a system-space design's ``energy_per_token_j`` (:meth:`SystemPoint.figures`) is, wherever it is shown: the
cluster's power at the wall (every chip at its TDP-like power plus its host's and scale-out network's share, times
:data:`PUE`) over the
token rate, not the chip's dynamic operator energy (:data:`phaze_env.hardware.energy.DYNAMIC_ENERGY_LABEL`)."""

PUE = 1.1
"""Power usage effectiveness of the data centre (cooling, power distribution): Google reports a fleet-wide
trailing-twelve-month PUE of 1.10 (Google Data Centers, "Efficiency", 2023); Meta reports 1.08–1.10 in its
sustainability reports. The chip count at a power budget scales with 1/PUE."""
# --- each family's system around its chips: host and scale-out network -----------------------------------

@dataclass(frozen=True)
class HostShare:
    """What one chip's share of its host costs beyond the chip: CPUs, DRAM, NICs, node switches, fans and
    power-supply losses, in power (W, at the system's plug, before PUE) and capital (USD), for a host serving
    ``chips_per_host`` chips."""

    name: str
    chips_per_host: int
    w_per_chip: float
    usd_per_chip: float
    source: str


@dataclass(frozen=True)
class FatTree:
    """A non-blocking folded-Clos (fat-tree) network of ``radix``-port switches of ``port_bps`` ports: ``L`` tiers
    join up to ``radix · (radix/2)^(L−1)`` endpoints (Al-Fares et al., "A Scalable, Commodity Data Center Network
    Architecture", SIGCOMM 2008: half of each lower switch's ports go up), so an endpoint uses ``2L − 1`` switch
    ports (a leaf port down, and per tier above an up and a down port). Every switch port carries an optical
    transceiver. Each endpoint is a NIC of ``nic_w`` and ``nic_usd`` (the adapter with its own transceiver), charged
    per NIC port of a family whatever the cluster's size (:meth:`SystemFamily.nic_w_per_chip`)."""

    name: str
    port_bps: float
    radix: int
    switch_w: float
    switch_usd: float
    transceiver_w: float
    transceiver_usd: float
    source: str
    nic_w: float
    nic_usd: float

    def __post_init__(self) -> None:
        if isinstance(self.radix, bool) or not isinstance(self.radix, int) or self.radix < 4 or self.radix % 2:
            raise ValueError(f"a fat tree's switches need an even radix of at least 4 ports, got {self.radix!r}")
        for name in ("port_bps", "switch_w", "switch_usd", "transceiver_w", "transceiver_usd", "nic_w", "nic_usd"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"FatTree.{name} must be a finite non-negative number, got {value!r}")

    def max_endpoints(self, tiers: int) -> int:
        return self.radix * (self.radix // 2) ** (tiers - 1)

    def tiers(self, endpoints: float) -> int:
        """The fewest tiers that join ``endpoints`` (≥ 1)."""
        tiers = 1
        while self.max_endpoints(tiers) < endpoints:
            tiers += 1
        return tiers

    def ports_per_endpoint(self, endpoints: float) -> int:
        return 2 * self.tiers(endpoints) - 1

    def port_w(self) -> float:
        """One switch port with its transceiver: the switch's power over its ports, plus the module."""
        return self.switch_w / self.radix + self.transceiver_w

    def port_usd(self) -> float:
        return self.switch_usd / self.radix + self.transceiver_usd


TPUV4_CHIP_MEAN_W = 170.0
"""TPU v4's mean chip power on Google's production workloads, 170 W (192 W maximum, ``cost.PUBLISHED["tpuv4"]``):
Jouppi et al., ISCA 2023 (Table 3, as quoted by Google Cloud's TPU v4 documentation and G. Lockwood's TPUv4
notes). The chip side of :data:`TPUV4_SYSTEM_W_PER_CHIP`: both are averages over running workloads."""
TPUV4_SYSTEM_W_PER_CHIP = 326.0
"""≈ 326 W per TPU v4 chip measured at the system — the chip with its share of the host (one host per 4 chips:
PaLM's 6,144 chips on 1,536 hosts, Chowdhery et al. 2022 §4), its DRAM, NIC, fans and power supplies — in
Google's published training energy accounting (Patterson et al., "The Carbon Footprint of Machine Learning
Training Will Plateau, Then Shrink", IEEE Computer 2022; Epoch AI's hardware notes), the figure the project's
design notes (DESIGN.md, "Reference facts for fair rivals") give; not re-read from the paper in this change.
Assumption range 280–380 W (its host share 110–210 W)."""
DGX_A100_MAX_W = 6_500.0
"""A DGX A100's maximum system power, 6.5 kW with its 8 A100 SXM4 GPUs (NVIDIA DGX A100 datasheet; its six
3 kW supplies, half redundant)."""
DGX_H100_MAX_W = 10_200.0
"""A DGX H100's maximum system power, ≈ 10.2 kW with its 8 H100 SXM5 GPUs (NVIDIA DGX H100 datasheet)."""
DGX_HOST_USD_PER_CHIP = 5_000.0
"""Per-GPU share of a DGX-style node around its GPUs and beyond its NVSwitches and compute NICs (2 CPUs, 1–2 TB DRAM,
2 storage NICs, NVMe, chassis, supplies): $5,000. Assumption (no public bill of materials); range $2,500–10,000: it
dominates a modelled chip's manufacturing cost (≈ $1.0–2.7 k), so a money budget buys more chips at $2,500 and fewer
at $10,000. The NVSwitches (:data:`SCALE_UP_SWITCH_USD_PER_BPS`) and the compute NIC (:class:`FatTree`'s
``nic_usd``) are charged apart, on top. A floor check, not a fit: the node's two Xeon Platinum 8480-class CPUs at
Intel's $10,710 recommended customer price (8480+, Intel ARK) alone are $2,700 per GPU, so the value sits in the
lower half of its range."""
CONNECTX7_W = 20.0
"""A single-port 400 Gb/s NDR ConnectX-7 adapter (PCIe Gen5 x16, OSFP), without its optical module: 20 W. Assumption
(NVIDIA's ConnectX-7 user manual tabulates each card's power; not re-read in this change): range 15–25 W."""
CONNECTX7_USD = 2_000.0
"""A single-port 400 Gb/s ConnectX-7 adapter's price: $2,000. Assumption (reseller list prices of
MCX75310AAS-NEAT-class cards; no NVIDIA price list): range $1,200–3,000."""
NDR_NIC_MODULE_W = 9.0
"""The 400G OSFP module at the NIC end: 9 W (NVIDIA MMS4X00-NS400 product specification: "draws 9 Watts maximum or 9
Watts typical" in 400 Gb/s mode)."""
CONNECTX6_W = 15.0
"""A single-port 200 Gb/s HDR ConnectX-6 adapter (PCIe Gen4 x16, QSFP56), without its module: 15 W. Assumption (the
ConnectX-6 user manual's power class, not re-read here): range 10–20 W."""
CONNECTX6_USD = 1_200.0
"""A single-port 200 Gb/s ConnectX-6 adapter's price: $1,200. Assumption (reseller list prices): range $800–1,800."""
NDR_FAT_TREE = FatTree(
    "ndr-400g", 400e9, 64, switch_w=750.0, switch_usd=25_000.0, transceiver_w=17.0 / 2, transceiver_usd=500.0,
    source="NVIDIA Quantum-2 QM9700: 64 ports of 400 Gb/s NDR in 32 OSFP cages (QM97xx user manual); its cages take "
           "class-8 (17 W) twin-port 2×400G transceivers (same manual; MMS4X00-NS), 8.5 W per 400G port (the NIC "
           "side's MMS4X00-NS400 draws 9 W: its product specification). Assumptions: the switch without optics "
           "750 W (range 500–1,100 W: a 51.2 Tb/s ASIC with fans and supplies); $25,000 per switch (range "
           "$15–40 k) and $500 per 400G transceiver port (range $300–1,000), no public price list. NIC: a ConnectX-7 "
           "(CONNECTX7_W, CONNECTX7_USD) with its 400G module (NDR_NIC_MODULE_W, the switch side's $500)",
    nic_w=CONNECTX7_W + NDR_NIC_MODULE_W, nic_usd=CONNECTX7_USD + 500.0)
"""The scale-out network of the switched family and the H100 reference (one 400 Gb/s NIC per GPU, DGX H100
SuperPOD's compute fabric), and the data-centre network of a multi-pod torus."""
HDR_FAT_TREE = FatTree(
    "hdr-200g", 200e9, 40, switch_w=250.0, switch_usd=15_000.0, transceiver_w=4.5, transceiver_usd=300.0,
    source="NVIDIA Quantum QM8700: 40 ports of 200 Gb/s HDR (QM87xx user manual). Assumptions: the switch without "
           "optics 250 W (range 200–400 W), a 200G QSFP56 SR4 transceiver 4.5 W (range 4–5 W), $15,000 per switch "
           "(range $10–25 k) and $300 per transceiver (range $200–600). NIC: a ConnectX-6 (CONNECTX6_W, "
           "CONNECTX6_USD) with its 200G module (4.5 W, $300 as the switch side's)",
    nic_w=CONNECTX6_W + 4.5, nic_usd=CONNECTX6_USD + 300.0)
"""The A100 reference's scale-out network: one 200 Gb/s HDR NIC per GPU on QM8700-class switches (DGX A100
SuperPOD)."""


SCALE_UP_SWITCH_W_PER_BPS = NDR_FAT_TREE.switch_w / (2 * NDR_FAT_TREE.radix * NDR_FAT_TREE.port_bps / 8)
"""Power of a scale-up (NVSwitch) port per byte/s it switches, both directions together: the NDR switch's, 750 W over
64 ports × 400 Gb/s × 2 directions = 14.6 pJ/bit (:data:`NDR_FAT_TREE`: a 64-port crossbar of 100G-PAM4 SerDes with
SHARP engines, as the third-generation NVSwitch is — 64 NVLink4 ports on TSMC 4N, NVIDIA Hot Chips 34, 2022, and
NVIDIA's "Upgrading Multi-GPU Interconnectivity with the Third-Generation NVSwitch", 2022). Assumption: NVIDIA
publishes no NVSwitch power; it follows the NDR switch's range (500–1,100 W: 9.8–21.5 pJ/bit), i.e. 70–155 W per
H100's 900 GB/s (105 W at the value)."""
SCALE_UP_SWITCH_USD_PER_BPS = 1_500.0 / 900e9
"""Capital cost of the scale-up switch per byte/s of a GPU's NVLink bandwidth: $1,500 per H100's 900 GB/s — a DGX
H100's 4 NVSwitch chips on their baseboard at ≈ $3,000 each over 8 GPUs. Assumption (no public price); range
$750–3,000 per 900 GB/s."""
TPUV4_OCS_POWER_SHARE = 0.03
"""TPU v4's optical circuit switches and their optics are "< 3 % of system power" (Jouppi et al., "TPU v4: An
Optically Reconfigurable Supercomputer ...", ISCA 2023, abstract and §2). Assumption: the bound taken as the value
(against the torus); range 0–3 %."""
TPUV4_OCS_COST_SHARE = 0.05
"""TPU v4's optical circuit switches and their optics are "< 5 % of system cost" (same paper, abstract and §2).
Assumption: the bound taken as the value (against the torus); range 0–5 %."""


@dataclass(frozen=True)
class ScaleUpFabric:
    """What a chip's own (scale-up) links plug into, per chip, in proportion to what the links carry: a switch's
    ports per byte/s (NVSwitch: :attr:`w_per_Bps`, :attr:`usd_per_Bps`) or an optical circuit switch's ports per
    link (OCS, bandwidth-transparent: :attr:`w_per_link`, :attr:`usd_per_link`). So a design with more link
    bandwidth pays for more switch, and each reference pays its own fabric's share (:meth:`w_per_chip`)."""

    name: str
    w_per_Bps: float
    usd_per_Bps: float
    w_per_link: float
    usd_per_link: float
    source: str

    def __post_init__(self) -> None:
        for name in ("w_per_Bps", "usd_per_Bps", "w_per_link", "usd_per_link"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"ScaleUpFabric.{name} must be a finite non-negative number, got {value!r}")

    def w_per_chip(self, links: int, link_total_Bps: float) -> float:
        return self.w_per_Bps * link_total_Bps + self.w_per_link * links

    def usd_per_chip(self, links: int, link_total_Bps: float) -> float:
        return self.usd_per_Bps * link_total_Bps + self.usd_per_link * links


def _nvswitch(name: str, source: str) -> ScaleUpFabric:
    return ScaleUpFabric(name, SCALE_UP_SWITCH_W_PER_BPS, SCALE_UP_SWITCH_USD_PER_BPS, 0.0, 0.0, source)


NVSWITCH_GEN2 = _nvswitch("nvswitch-gen2", "DGX A100: 6 second-generation NVSwitches for 8 GPUs × 600 GB/s (NVIDIA DGX "
                                           "A100 datasheet); power and cost per byte/s as the third generation's "
                                           "(SCALE_UP_SWITCH_W_PER_BPS, SCALE_UP_SWITCH_USD_PER_BPS; assumption, "
                                           "their ranges)")
"""The A100 reference's scale-up switch (DGX A100's NVSwitches), per byte/s of NVLink bandwidth."""
NVSWITCH_GEN3 = _nvswitch("nvswitch-gen3", "DGX H100: 4 third-generation NVSwitches (64 NVLink4 ports each) for 8 GPUs "
                                           "× 900 GB/s (NVIDIA DGX H100 datasheet; Hot Chips 34, 2022)")
"""The switched family's scale-up switch: a design's NVLink bandwidth × the NVSwitch's power and cost per byte/s."""
_TPUV4_CHIP_SYSTEM, _ = SYSTEMS["tpuv4"]
TPUV4_OCS_W_PER_CHIP = TPUV4_OCS_POWER_SHARE * TPUV4_SYSTEM_W_PER_CHIP
"""≈ 9.8 W: TPU v4's OCS share of its measured system power per chip (:data:`TPUV4_OCS_POWER_SHARE` ×
:data:`TPUV4_SYSTEM_W_PER_CHIP`, which is taken to include it: a whole-system figure)."""
TPUV4_HOST_USD_PER_CHIP = 5_000.0
"""TPU v4 host cost per chip (4 chips per host): $5,000, an assumption (no TPU host bill of materials is public; order
of a 2-socket server with its DRAM and NIC over 4 chips; range $2,500–10,000)."""
TPUV4_OCS = ScaleUpFabric(
    "tpuv4-ocs", 0.0, 0.0, TPUV4_OCS_W_PER_CHIP / _TPUV4_CHIP_SYSTEM.links,
    TPUV4_OCS_COST_SHARE / (1 - TPUV4_OCS_COST_SHARE) * (
        chip_estimate(get_preset("tpuv4"), _TPUV4_CHIP_SYSTEM).total_cost_usd + TPUV4_HOST_USD_PER_CHIP
        + NDR_FAT_TREE.nic_usd / 4)
    / _TPUV4_CHIP_SYSTEM.links,
    "TPU v4's 48 optical circuit switches per 4,096-chip pod (Jouppi et al., ISCA 2023): per ICI link (an OCS is "
    "blind to the rate, its ports follow the fibres), TPU v4's 6 links carrying TPUV4_OCS_POWER_SHARE of its "
    "measured system power and TPUV4_OCS_COST_SHARE of its system cost (the modelled tpuv4 chip + its host + its "
    "NIC share)")
"""The torus family's scale-up fabric: TPU v4's OCS, per link (a torus of 12 links per chip needs twice the ports)."""

TPUV4_HOST = HostShare(
    "tpuv4-host", 4, TPUV4_SYSTEM_W_PER_CHIP - TPUV4_CHIP_MEAN_W - TPUV4_OCS_W_PER_CHIP - NDR_FAT_TREE.nic_w / 4,
    TPUV4_HOST_USD_PER_CHIP,
    "TPU v4 host (4 chips per host): power = the measured system power per chip less the chip's mean, its OCS share "
    "and a quarter of the host's NIC (TPUV4_SYSTEM_W_PER_CHIP − TPUV4_CHIP_MEAN_W − TPUV4_OCS_W_PER_CHIP − NIC/4 = "
    "139 W; Patterson et al. 2022, Jouppi et al. 2023); cost TPUV4_HOST_USD_PER_CHIP (assumption, range "
    "$2,500–10,000), its NIC charged apart")
"""The torus family's host: TPU v4's, what a TPU-v4-like system (the tpuv4 reference and every torus design of the
system space) pays per chip beyond the chip and its OCS share."""
def dgx_host_w_per_chip(node_max_w: float, gpu_tdp_w: float, switch: ScaleUpFabric, nvlinks: int,
                        fat_tree: FatTree, link_Bps: float = NVLINK_LINK_BPS, gpus: int = SCALE_UP_DOMAIN) -> float:
    """One GPU's share of a DGX-style node's power beyond the GPU, its NVSwitch share and its compute NIC (which the
    scale-up fabric and the NIC charge apart): ``(node max − gpus × GPU TDP) / gpus − NVSwitch share − NIC``, for
    ``nvlinks`` links of ``link_Bps`` per direction (NVLink 3/4 by default; NVLink 5's for Blackwell) and ``gpus`` per
    node (a DGX's 8; a GB200 NVL72 rack's 72)."""
    return ((node_max_w - gpus * gpu_tdp_w) / gpus
            - switch.w_per_chip(nvlinks, nvlinks * 2 * link_Bps) - fat_tree.nic_w)


DGX_A100_HOST = HostShare(
    "dgx-a100", SCALE_UP_DOMAIN,
    dgx_host_w_per_chip(DGX_A100_MAX_W, PUBLISHED["a100"].power_w, NVSWITCH_GEN2, A100_NVLINKS, HDR_FAT_TREE),
    DGX_HOST_USD_PER_CHIP,
    "DGX A100: (6.5 kW max − 8 × 400 W A100 TDP) / 8 = 412.5 W per GPU (2 AMD EPYC 7742, 1 TB DRAM, 6 NVSwitches, "
    "9 ConnectX-6 NICs, fans, supplies; NVIDIA DGX A100 datasheet) less its NVSwitch share (NVSWITCH_GEN2 at "
    "600 GB/s) and its compute NIC (HDR_FAT_TREE.nic_w), which the scale-up fabric and the NIC charge; cost "
    "DGX_HOST_USD_PER_CHIP (assumption, its range)")
"""The A100 reference's host: a DGX A100 node's, per GPU, without its NVSwitches and compute NIC."""
DGX_H100_HOST = HostShare(
    "dgx-h100", SCALE_UP_DOMAIN,
    dgx_host_w_per_chip(DGX_H100_MAX_W, PUBLISHED["h100"].power_w, NVSWITCH_GEN3, H100_NVLINKS, NDR_FAT_TREE),
    DGX_HOST_USD_PER_CHIP,
    "DGX H100: (10.2 kW max − 8 × 700 W H100 TDP) / 8 = 575 W per GPU (2 Xeon 8480C, 2 TB DRAM, 4 NVSwitches, "
    "8 + 2 ConnectX-7 NICs, fans, supplies; NVIDIA DGX H100 datasheet) less its NVSwitch share (NVSWITCH_GEN3 at "
    "900 GB/s) and its compute NIC (NDR_FAT_TREE.nic_w), which the scale-up fabric and the NIC charge; cost "
    "DGX_HOST_USD_PER_CHIP (assumption, its range)")
"""The H100 reference's host and the switched family's: a DGX H100 node's, per GPU, without its NVSwitches and
compute NIC (the
system space's switched designs are 8-chip switch domains of its generation: 100G-PAM4 SerDes, 400 Gb/s NICs; each
pays the NVSwitch its own link bandwidth needs)."""


# --- the 2024–25 flagships' own systems (rivals "against the best you can buy") ------------------------------------
DGX_B200_MAX_W = 14_300.0
"""A DGX B200's maximum system power, 14.3 kW with its 8 B200 GPUs at 1,000 W (NVIDIA DGX B200 user guide,
"Introduction to NVIDIA DGX B200 Systems", power specifications: "14.3 kW max.", six 3.3 kW supplies in 5+1; 2 Xeon
8570, 2 TB DRAM, 2 fifth-generation NVLink switches, 8 single-port ConnectX-7 400 Gb/s cards, 2 BlueField-3)."""
NVSWITCH_GEN4 = _nvswitch("nvswitch-gen4", "DGX B200: 2 fifth-generation NVLink switch chips (14.4 TB/s aggregate) for 8 "
                                           "GPUs × 1.8 TB/s (NVIDIA DGX B200 user guide); GB200 NVL72: 9 NVLink switch "
                                           "trays of 2 chips for 72 GPUs × 1.8 TB/s (NVIDIA DGX GB200 user guide). Power "
                                           "and cost per byte/s as the third generation's (assumption, "
                                           "SCALE_UP_SWITCH_W_PER_BPS and SCALE_UP_SWITCH_USD_PER_BPS's ranges)")
"""The Blackwell systems' scale-up switch (NVLink 5 switches), per byte/s of NVLink bandwidth. The split between it
and the host does not move a Blackwell system's power per chip: the host is the datasheet's system power less it."""
DGX_B200_HOST = HostShare(
    "dgx-b200", SCALE_UP_DOMAIN,
    dgx_host_w_per_chip(DGX_B200_MAX_W, PUBLISHED["b200"].power_w, NVSWITCH_GEN4, B200_NVLINKS, NDR_FAT_TREE,
                        NVLINK5_LINK_BPS),
    DGX_HOST_USD_PER_CHIP,
    "DGX B200: (14.3 kW max − 8 × 1,000 W B200 TDP) / 8 = 787.5 W per GPU (NVIDIA DGX B200 user guide) less its NVLink "
    "switch share (NVSWITCH_GEN4 at 1.8 TB/s) and its compute NIC (NDR_FAT_TREE.nic_w: 8 ConnectX-7 400G per node); "
    "cost DGX_HOST_USD_PER_CHIP (assumption, its range)")
"""The B200 rival's host: a DGX B200 node's, per GPU, without its NVLink switches and compute NIC."""
GB200_NVL72_CHIPS = 72
"""GPUs in one GB200 NVL72 rack, one NVLink domain: 18 compute trays of 2 Grace CPUs and 4 Blackwell GPUs, joined by
9 NVLink switch trays (NVIDIA DGX GB200 user guide, "Hardware": "72-GPU NVL domains")."""
GB200_NVL72_RACK_W = 120_000.0
"""A GB200 NVL72 rack's power: ≈ 120 kW (NVIDIA at GTC 2024, as reported by ServeTheHome and Tom's Hardware:
"consumes 120 kW"). Assumption on its exact value — NVIDIA's GB200 NVL72 datasheet gives no rack power; OEM racks
quote up to ≈ 132 kW: range 120–132 kW, i.e. 467–633 W per GPU beyond its 1,200 W. Consistency check: a GB200
superchip (1 Grace + 2 GPUs) is rated 2,700 W, so Grace with its LPDDR5X takes ≈ 150 W per GPU of that."""
GB200_NVL72_HOST = HostShare(
    "gb200-nvl72", GB200_NVL72_CHIPS // 18,
    dgx_host_w_per_chip(GB200_NVL72_RACK_W, PUBLISHED["gb200"].power_w, NVSWITCH_GEN4, B200_NVLINKS, NDR_FAT_TREE,
                        NVLINK5_LINK_BPS, GB200_NVL72_CHIPS),
    DGX_HOST_USD_PER_CHIP,
    "GB200 NVL72: (GB200_NVL72_RACK_W − 72 × 1,200 W) / 72 = 467 W per GPU (assumption, range 467–633 W: 120–132 kW "
    "racks) less its NVLink switch share (NVSWITCH_GEN4 at 1.8 TB/s) and its compute NIC (NDR_FAT_TREE.nic_w: 4 "
    "ConnectX-7 400G per compute tray of 4 GPUs, NVIDIA DGX GB200 user guide); the rest is half a Grace CPU with its "
    "LPDDR5X, the trays' BlueField-3, fans, pumps and power shelves; cost DGX_HOST_USD_PER_CHIP (assumption, its range)")
"""The GB200 rival's host: its compute tray's and rack's share per GPU (4 GPUs per tray), without the NVLink switch
trays and compute NICs."""
TPUV5P_POD_CHIPS = 8960
"""Chips in one TPU v5p pod: 8,960 in a 3-D torus (Cloud TPU v5p documentation: "8,960 chips per pod"; its largest
slice 16×20×28, i.e. 140 cubes of 4×4×4 — :func:`phaze_env.cluster.torus_dims` of 8,960 gives those sides)."""
TPUV5P_HOST = HostShare(
    "tpuv5p-host", 4, TPUV4_HOST.w_per_chip, TPUV4_HOST_USD_PER_CHIP,
    "TPU v5p host: 4 chips per host (Cloud TPU v5p documentation: a v5p host/VM holds 4 chips). Assumption: TPU v4's "
    "host power and cost per chip (TPUV4_HOST) — Google publishes no v5p system power; range 110–250 W per chip (a "
    "2-socket host with its DRAM and fans over 4 chips, up to twice TPU v4's for chips of ≈ 1.5× the power) and "
    "$2,500–10,000")
"""The TPU v5p rival's host: TPU v4's carried over (assumption, its range)."""
MI300X_PLATFORM_CHIPS = 8
"""GPUs in one AMD Instinct MI300X platform: 8 OAM modules on a universal baseboard, each GPU joined to the 7 others
by one Infinity Fabric link of 128 GB/s (AMD Instinct MI300X data sheet / platform brief, 2023: 896 GB/s per GPU)."""
MI300X_MESH = ScaleUpFabric(
    "infinity-fabric-mesh", 0.0, 0.0, 0.0, 0.0,
    "AMD Instinct MI300X platform: a full mesh of Infinity Fabric links between the 8 GPUs (AMD MI300X data sheet), no "
    "switch chip: the links' SerDes are the GPUs' own (in their chip power and area); the baseboard's traces are in "
    "the host's cost (assumption, range $0–500 per GPU)")
"""The MI300X rival's scale-up fabric: a switchless full mesh, nothing beyond the chips' own SerDes."""
MI300X_HOST = HostShare(
    "mi300x-platform", MI300X_PLATFORM_CHIPS, DGX_H100_HOST.w_per_chip, DGX_HOST_USD_PER_CHIP,
    "MI300X platform (8 × 750 W MI300X on one baseboard, 2 x86 CPUs, 8 × 400G NICs as OEM servers ship it: Dell "
    "PowerEdge XE9680, Supermicro AS-8125GS-TNMR2). Assumption: DGX H100's host share per GPU (DGX_H100_HOST: the same "
    "class of 8-GPU x86 server around 700–750 W GPUs) — AMD publishes no platform power in the sources used here; "
    "range 300–600 W per GPU; cost DGX_HOST_USD_PER_CHIP (assumption, its range)")
"""The MI300X rival's host: DGX H100's per-GPU host carried over (assumption, its range)."""


@dataclass(frozen=True)
class SystemFamily:
    """A system family: its chips' topology, the host each chip shares (:class:`HostShare`), the scale-out
    network (:class:`FatTree`) its chips reach through ``network_ports_per_chip`` NIC ports once the cluster
    outgrows :attr:`network_above_chips` (one switch domain; one torus pod), and the scale-up fabric its chips'
    own links plug into (:class:`ScaleUpFabric`: NVSwitch, OCS). Power and cost per chip beyond the chip are
    :meth:`overhead_w_per_chip` and :meth:`overhead_usd_per_chip`; they never fall as the cluster grows.
    ``domain_chips``: the chips of one scale-up domain — a switched family's node (``None``: :data:`SCALE_UP_DOMAIN`,
    a DGX's 8; a GB200 NVL72's 72), a torus family's pod (``None``: :data:`TORUS_POD_CHIPS`; TPU v5p's 8,960)."""

    name: str
    topology: str
    host: HostShare
    network: FatTree
    network_ports_per_chip: float
    scale_up: ScaleUpFabric
    domain_chips: int | None = None

    def __post_init__(self) -> None:
        unit = topology_unit(self.topology)  # an unknown topology raises with the known ones
        ports = self.network_ports_per_chip
        if isinstance(ports, bool) or not isinstance(ports, (int, float)) or not 0 < ports < math.inf:
            raise ValueError(f"a system family's chips need a positive number of network ports each, got {ports!r}")
        domain = self.domain_chips
        if domain is not None and (isinstance(domain, bool) or not isinstance(domain, int) or domain < 1
                                   or (self.topology == "torus" and domain % unit)):
            raise ValueError(f"a {self.topology} family's scale-up domain is a positive whole number of chips"
                             f"{f' in whole cubes of {unit}' if self.topology == 'torus' else ''}, got {domain!r}")

    @property
    def network_above_chips(self) -> int:
        """The largest cluster the family builds without its scale-out network: one torus pod or one switch domain
        (:attr:`domain_chips`; by default :data:`TORUS_POD_CHIPS`, :data:`SCALE_UP_DOMAIN`)."""
        if self.domain_chips is not None:
            return self.domain_chips
        return TORUS_POD_CHIPS if self.topology == "torus" else SCALE_UP_DOMAIN

    @property
    def unit(self) -> int:
        """The chip count of this family's clusters is a multiple of this: whole torus cubes, whole switch domains."""
        return topology_unit(self.topology) if self.topology == "torus" else self.network_above_chips

    def network_ports(self, n_devices: int) -> float:
        """NIC ports on the scale-out network (0 while the cluster fits one switch domain or torus pod)."""
        return n_devices * self.network_ports_per_chip if n_devices > self.network_above_chips else 0.0

    def network_w_per_chip(self, n_devices: int) -> float:
        ports = self.network_ports(n_devices)
        return self.network_ports_per_chip * self.network.ports_per_endpoint(ports) * self.network.port_w() if ports else 0.0

    def network_usd_per_chip(self, n_devices: int) -> float:
        ports = self.network_ports(n_devices)
        return self.network_ports_per_chip * self.network.ports_per_endpoint(ports) * self.network.port_usd() if ports else 0.0

    def scale_up_w_per_chip(self, estimate: ChipEstimate) -> float:
        """The scale-up fabric's share for ``estimate``'s links (:meth:`ScaleUpFabric.w_per_chip`)."""
        return self.scale_up.w_per_chip(estimate.links, estimate.link_total_Bps)

    def scale_up_usd_per_chip(self, estimate: ChipEstimate) -> float:
        return self.scale_up.usd_per_chip(estimate.links, estimate.link_total_Bps)

    @property
    def nic_w_per_chip(self) -> float:
        """The chip's share of its NICs (``network_ports_per_chip`` × the network's ``nic_w``), whatever the size."""
        return self.network_ports_per_chip * self.network.nic_w

    @property
    def nic_usd_per_chip(self) -> float:
        return self.network_ports_per_chip * self.network.nic_usd

    def overhead_w_per_chip(self, estimate: ChipEstimate, n_devices: int) -> float:
        """Host share + scale-up fabric + NIC + scale-out network per chip of ``estimate`` (W, before PUE) in a
        cluster of ``n_devices``."""
        return (self.host.w_per_chip + self.scale_up_w_per_chip(estimate) + self.nic_w_per_chip
                + self.network_w_per_chip(n_devices))

    def overhead_usd_per_chip(self, estimate: ChipEstimate, n_devices: int) -> float:
        return (self.host.usd_per_chip + self.scale_up_usd_per_chip(estimate) + self.nic_usd_per_chip
                + self.network_usd_per_chip(n_devices))

    def steps(self):
        """The chip counts up to which the overhead per chip is constant, ascending and endless: the largest
        cluster without a scale-out network, then the largest each more tier of the network joins."""
        yield self.network_above_chips
        tiers = 1
        while True:
            chips = math.floor(self.network.max_endpoints(tiers) / self.network_ports_per_chip)
            if chips > self.network_above_chips:
                yield chips
            tiers += 1


SYSTEM_FAMILIES: dict[str, SystemFamily] = {
    "tpuv4-torus": SystemFamily("tpuv4-torus", "torus", TPUV4_HOST, NDR_FAT_TREE,
                                network_ports_per_chip=1 / TPUV4_HOST.chips_per_host, scale_up=TPUV4_OCS),
    "dgx-a100": SystemFamily("dgx-a100", "switched", DGX_A100_HOST, HDR_FAT_TREE, network_ports_per_chip=1.0,
                             scale_up=NVSWITCH_GEN2),
    "dgx-h100": SystemFamily("dgx-h100", "switched", DGX_H100_HOST, NDR_FAT_TREE, network_ports_per_chip=1.0,
                             scale_up=NVSWITCH_GEN3),
    "dgx-b200": SystemFamily("dgx-b200", "switched", DGX_B200_HOST, NDR_FAT_TREE, network_ports_per_chip=1.0,
                             scale_up=NVSWITCH_GEN4),
    "gb200-nvl72": SystemFamily("gb200-nvl72", "switched", GB200_NVL72_HOST, NDR_FAT_TREE, network_ports_per_chip=1.0,
                                scale_up=NVSWITCH_GEN4, domain_chips=GB200_NVL72_CHIPS),
    "tpuv5p-torus": SystemFamily("tpuv5p-torus", "torus", TPUV5P_HOST, NDR_FAT_TREE,
                                 network_ports_per_chip=1 / TPUV5P_HOST.chips_per_host, scale_up=TPUV4_OCS,
                                 domain_chips=TPUV5P_POD_CHIPS),
    "mi300x-platform": SystemFamily("mi300x-platform", "switched", MI300X_HOST, NDR_FAT_TREE,
                                    network_ports_per_chip=1.0, scale_up=MI300X_MESH, domain_chips=MI300X_PLATFORM_CHIPS),
}
"""The system families by name. TPU v4 torus: its hosts of 4 chips; its pods' optical circuit switches per ICI link
(:data:`TPUV4_OCS`: the paper's bounds of 3 % of system power, 5 % of cost, Jouppi et al. 2023); several pods join over the data-centre network, one port per host (assumption: a 400 Gb/s-class port per host of
4 chips, above PaLM's measured 53 Gb/s burst per host, ``cluster.TPUV4_DCN_PER_CHIP_BPS``) on a fat tree of
:data:`NDR_FAT_TREE`'s switches and optics. DGX A100 / DGX H100: their nodes' hosts, one compute NIC per GPU on
the HDR / NDR fat tree once the cluster is more than one node (NVIDIA DGX SuperPOD reference architectures). The
2024–25 flagships' (rivals only, :data:`FLAGSHIP_FAMILIES`): DGX B200 and GB200 NVL72 (72-GPU NVLink domains) on the
NDR fat tree, TPU v5p in pods of 8,960 with TPU v4's OCS per link (assumption: the same optical switching, range
0–3 % of power as TPU v4's), the MI300X platform's switchless mesh of 8."""
TOPOLOGY_FAMILIES = {"torus": "tpuv4-torus", "switched": "dgx-h100"}
"""The family a system-space design of each topology is built as: a torus with TPU v4's hosts and data-centre
network; a switched system as DGX H100 nodes on NDR InfiniBand (its generation: 100G-PAM4 SerDes, HBM3/3E)."""


def topology_family(topology: str) -> SystemFamily:
    """The family a system-space design of ``topology`` is built as (:data:`TOPOLOGY_FAMILIES`)."""
    topology_unit(topology)  # an unknown topology raises with the known ones
    return SYSTEM_FAMILIES[TOPOLOGY_FAMILIES[topology]]


DEFAULT_BUDGET_W = 10e6
"""The default cluster budget at the wall: 10 MW, what ≈ 7,000 H100-class chips draw with their hosts, network and
cooling (≈ 1.4 kW each: :func:`wall_power_per_chip_w`): a large LLM training cluster of today."""


AREA_OBJECTIVE = "area"
"""The minimised objective a front may trade besides the system rates (mm²: the architecture's in PHAZE's spaces, the
whole built die in the system space); the one definition :mod:`search.objectives` and :mod:`phaze_env.tasks` name."""
OBJECTIVES = ("throughput", "throughput_per_w", "throughput_per_usd", "energy_per_token", "carbon_per_token")
"""What a system search maximises (the last two: minimises). Each is the throughput over a figure fixed by the
design and the budget (:func:`objective_divisor`), so the exact search's bounds divide by it too."""
GRID_G_CO2E_PER_KWH = 390.0
"""Operational carbon intensity: 390 g CO2e per kWh, the US average of 2022 (EIA, "How much carbon dioxide is
produced per kilowatthour of U.S. electricity generation?": 0.86 lb/kWh). Data centres on low-carbon contracts
reach ≈ 100 g/kWh or less; the operational part of carbon per token scales with it."""
EMBODIED_KG_CO2E_PER_CHIP = 150.0
"""Embodied carbon per accelerator: 150 kg CO2e, the per-GPU (A100) figure Luccioni et al. use for BLOOM's
training ("Estimating the Carbon Footprint of BLOOM", JMLR 2023). Assumption for every chip of the space (die
size and HBM stacks change it): embodied is 0.7 % of a 1 kW chip's carbon at 390 g/kWh, so ×2 adds < 1 %."""
LIFETIME_YEARS = 6.0
"""Years over which a chip's embodied carbon is amortised: 6, the useful life Alphabet and Microsoft set for
their servers in 2022 (annual reports). Assumption for accelerators."""
SECONDS_PER_YEAR = 365.25 * 24 * 3600


@dataclass(frozen=True)
class SystemBudget:
    """A cluster budget: power at the wall (W) or capital cost (USD); exactly one is set. ``nre_chips`` (default
    ``None``: off) charges each custom chip — every design of the system space, not the references — its node's
    design and mask-set cost amortised over that many chips built (:func:`~phaze_env.hardware.cost.nre_usd_per_chip`).

    Off by default: the NRE figures are for complex SoCs with their software and overstate a replicated-array
    accelerator's (:data:`~phaze_env.hardware.cost.DESIGN_NRE_USD`'s range), the volume a chip is amortised over is the
    builder's choice rather than a property of the design, and the references' own NRE is spread over 10⁵–10⁶ chips
    sold. So the default compares silicon at its manufacturing cost, and ``--nre-chips N`` asks "what if I build N"."""

    power_w: float | None = DEFAULT_BUDGET_W
    cost_usd: float | None = None
    nre_chips: int | None = None

    def __post_init__(self) -> None:
        if (self.power_w is None) == (self.cost_usd is None):
            raise ValueError("a system budget is either power (W) or cost (USD), exactly one of them")
        value = self.power_w if self.power_w is not None else self.cost_usd
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"the system budget must be a positive finite number of "
                             f"{'W' if self.power_w is not None else 'USD'}, got {value!r}")
        chips = self.nre_chips
        if chips is not None and (isinstance(chips, bool) or not isinstance(chips, int) or chips < 1):
            raise ValueError(f"NRE is amortised over a positive whole number of chips, got {chips!r}")

    @classmethod
    def of(cls, budget_w: float | None = None, budget_usd: float | None = None,
           nre_chips: int | None = None) -> SystemBudget:
        """From the CLI/space options: the money budget when given, else the power budget (default 10 MW)."""
        if budget_usd is not None:
            if budget_w is not None:
                raise ValueError("give a power budget or a cost budget, not both")
            return cls(power_w=None, cost_usd=budget_usd, nre_chips=nre_chips)
        return cls(power_w=DEFAULT_BUDGET_W if budget_w is None else budget_w, nre_chips=nre_chips)

    def per_chip(self, estimate: ChipEstimate, family: SystemFamily, n_devices: int) -> float:
        """What one chip of a ``family`` cluster of ``n_devices`` takes of this budget (W at the wall, or USD)."""
        if self.power_w is not None:
            return wall_power_per_chip_w(estimate, family, n_devices)
        return cost_per_chip_usd(estimate, family, n_devices)

    def affordable(self, estimate: ChipEstimate, family: SystemFamily) -> int:
        """The most chips ``n`` the budget pays for, ``n × per_chip(n) ≤ budget``, before the topology's rounding.

        The share per chip is constant between the family's :meth:`SystemFamily.steps` and never falls, so on each
        step ``(lo, hi]`` the most is ``min(⌊budget / share⌋, hi)``; the first step that the budget does not fill
        is the last one any chip count reaches (every later share is as large)."""
        total = self.power_w if self.power_w is not None else self.cost_usd
        lo = 0
        for hi in family.steps():
            chips = math.floor(total / self.per_chip(estimate, family, lo + 1) * (1 + 1e-12))  # exact fits kept
            if chips < hi:
                return max(lo, chips)
            lo = hi
        raise AssertionError("SystemFamily.steps is endless")

    def describe(self) -> str:
        budget = f"{self.power_w / 1e6:g} MW" if self.power_w is not None else f"${self.cost_usd / 1e6:g} M"
        return budget + (f" (custom chips with NRE over {self.nre_chips:,})" if self.nre_chips is not None else "")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; ``nre_chips`` only when set, so a budget without NRE keeps the form (and the stored results'
        signatures) it had before the knob."""
        data: dict[str, Any] = {"power_w": self.power_w, "cost_usd": self.cost_usd}
        return data | ({"nre_chips": self.nre_chips} if self.nre_chips is not None else {})


def wall_power_per_chip_w(estimate: ChipEstimate, family: SystemFamily, n_devices: int) -> float:
    """A chip's share of a power budget at the wall in a ``family`` cluster of ``n_devices``: ``(chip TDP + host share
    + scale-up fabric + scale-out network share) × PUE`` (:meth:`SystemFamily.overhead_w_per_chip`)."""
    return (estimate.total_power_w + family.overhead_w_per_chip(estimate, n_devices)) * PUE


def cost_per_chip_usd(estimate: ChipEstimate, family: SystemFamily, n_devices: int) -> float:
    """A chip's share of a money budget: its cost (die, HBM, package) + its host's, scale-up fabric's and scale-out
    network's share (:meth:`SystemFamily.overhead_usd_per_chip`)."""
    return estimate.total_cost_usd + family.overhead_usd_per_chip(estimate, n_devices)


@dataclass(frozen=True)
class SystemChoice:
    """The system knobs of one design: die area (mm²), HBM stacks × generation, links per chip × bandwidth per
    link (GB/s, both directions together), the cluster's topology family and the tensor cores' number format
    (:mod:`phaze_env.hardware.number_format`)."""

    die_area_mm2: float
    hbm_stacks: int
    hbm_generation: str
    links: int
    link_GBps: float
    topology: str
    number_format: str = "bf16"

    def __post_init__(self) -> None:
        check_number_format(self.number_format)
        if self.hbm_generation not in HBM_GENERATIONS:
            raise ValueError(f"unknown HBM generation {self.hbm_generation!r}; choose from {', '.join(HBM_GENERATIONS)}")
        if self.topology not in TOPOLOGIES:
            raise ValueError(f"unknown topology {self.topology!r}; choose from {', '.join(TOPOLOGIES)}")
        if not 0 < self.die_area_mm2 <= area.RETICLE_LIMIT_MM2:
            raise ValueError(f"die area must be in (0, {area.RETICLE_LIMIT_MM2:.0f}] mm² (the reticle limit), "
                             f"got {self.die_area_mm2!r}")
        if isinstance(self.hbm_stacks, bool) or not isinstance(self.hbm_stacks, int) or self.hbm_stacks < 1:
            raise ValueError(f"HBM stacks must be a positive integer, got {self.hbm_stacks!r}")
        if self.topology == "torus" and self.links % TORUS_NEIGHBOURS:
            raise ValueError(f"a 3-D torus needs links in multiples of {TORUS_NEIGHBOURS} per chip, got {self.links}")

    @property
    def generation(self) -> HbmGeneration:
        return HBM_GENERATIONS[self.hbm_generation]

    @property
    def hbm_gb(self) -> float:
        return self.hbm_stacks * self.generation.stack_gb

    @property
    def link_bandwidth_Bps(self) -> float:
        return self.link_GBps * 1e9

    def chip_system(self, node: str = SYSTEM_NODE) -> ChipSystem:
        """The chip built at ``node`` (default the system space's, :data:`SYSTEM_NODE`; a name of ``cost.NODES``)."""
        return ChipSystem(node=node, hbm_stacks=self.hbm_stacks, links=self.links,
                          link_bandwidth_Bps=self.link_bandwidth_Bps, serdes=SYSTEM_SERDES, core_style="systolic")

    def compute_budget_mm2(self, node: str = SYSTEM_NODE) -> float:
        """The die area left for the compute block: die − HBM PHYs/controllers − SerDes − IO (may be ≤ 0)."""
        return self.die_area_mm2 - sum(periphery_area_mm2(self.chip_system(node)).values())

    def window_terms_mm2(self, arch: Accelerator, node: str = SYSTEM_NODE) -> tuple[float, float]:
        """What the system space's area window compares for ``arch``'s cores and buffer on this die: the compute
        block (at ``node``, this choice's core style and number format) and its budget, :meth:`compute_budget_mm2`."""
        chip = self.accelerator(arch)
        compute = compute_die_area_mm2(chip.area_mm2, chip.buffer_mb, self.chip_system(node))
        return float(compute), self.compute_budget_mm2(node)

    def accelerator(self, arch: Accelerator) -> Accelerator:
        """``arch``'s cores and buffer with this choice's HBM, number format and the searched chips' GEMM
        efficiency (:data:`DESIGN_GEMM_EFFICIENCY`)."""
        generation = self.generation
        return arch.replace(hbm_gb=self.hbm_gb, hbm_bandwidth_Bps=self.hbm_stacks * generation.stack_bandwidth_Bps,
                            hbm_efficiency=generation.efficiency, gemm_efficiency=DESIGN_GEMM_EFFICIENCY,
                            number_format=self.number_format)

    def to_dict(self) -> dict[str, Any]:
        return {"die_area_mm2": self.die_area_mm2, "hbm_stacks": self.hbm_stacks, "hbm_generation": self.hbm_generation,
                "links": self.links, "link_GBps": self.link_GBps, "topology": self.topology,
                "number_format": self.number_format}

    def describe(self) -> str:
        return (f"{self.die_area_mm2:g} mm² die · {self.hbm_stacks}×{self.hbm_generation.upper()} · "
                f"{self.links}×{self.link_GBps:g} GB/s links · {self.topology}")


@dataclass(frozen=True)
class SystemPoint:
    """A chip built into a cluster at a budget: the accelerator, its chip system, the topology, the chip
    estimate, how many chips the budget buys (0: not even one topology unit) and the system family whose host and
    scale-out network each chip pays for (:class:`SystemFamily`, of the topology)."""

    accelerator: Accelerator
    chip_system: ChipSystem
    topology: str
    estimate: ChipEstimate
    n_devices: int
    budget: SystemBudget
    family: SystemFamily

    def __post_init__(self) -> None:
        if self.family.topology != self.topology:
            raise ValueError(f"a {self.topology} system cannot be built as the {self.family.name} family "
                             f"({self.family.topology})")

    @property
    def unbuildable_reason(self) -> str:
        """Why no cluster can be built at this point ("" when one can): the budget buys no whole topology unit."""
        if self.n_devices >= 1:
            return ""
        unit = "W at the wall" if self.budget.power_w is not None else "USD"
        affordable = self.budget.affordable(self.estimate, self.family)
        share = self.budget.per_chip(self.estimate, self.family, max(1, affordable))
        return (f"a {self.budget.describe()} budget buys {affordable:,} of these chips "
                f"({share:,.0f} {unit} each), not one whole {self.topology} unit of "
                f"{self.family.unit}: no cluster to train on")

    @property
    def pods(self) -> int:
        """The pods (slices over the data-centre network) the cluster is built as: :func:`torus_pods` (of the
        family's pod) for a torus, 1 for a switched family (its nodes are already joined by its scale-out network) and
        for no chips."""
        if self.topology == "torus" and self.n_devices:
            return torus_pods(self.n_devices, self.family.network_above_chips)
        return 1

    @property
    def wall_power_per_chip_w(self) -> float:
        """Each chip's share of the cluster's power at the wall (:func:`wall_power_per_chip_w` at this count)."""
        return wall_power_per_chip_w(self.estimate, self.family, self.n_devices)

    @property
    def cost_per_chip_usd(self) -> float:
        return cost_per_chip_usd(self.estimate, self.family, self.n_devices)

    @property
    def cluster_power_w(self) -> float:
        return self.n_devices * self.wall_power_per_chip_w

    @property
    def cluster_cost_usd(self) -> float:
        return self.n_devices * self.cost_per_chip_usd

    @property
    def carbon_g_per_s(self) -> float:
        """Operational (cluster power × grid intensity) plus embodied carbon (amortised over the lifetime)."""
        operational = self.cluster_power_w * GRID_G_CO2E_PER_KWH / 3.6e6
        embodied = self.n_devices * EMBODIED_KG_CO2E_PER_CHIP * 1e3 / (LIFETIME_YEARS * SECONDS_PER_YEAR)
        return operational + embodied

    def objective_divisor(self, objective: str) -> float:
        """The figure the throughput is divided by for ``objective`` (1 for throughput): watts, dollars, or
        for energy and carbon per token (minimised) the joules and grams per second whose ratio to the
        token rate they are — so maximising ``throughput / divisor`` minimises them."""
        divisors = {"throughput": 1.0, "throughput_per_w": self.cluster_power_w,
                    "throughput_per_usd": self.cluster_cost_usd, "energy_per_token": self.cluster_power_w,
                    "carbon_per_token": self.carbon_g_per_s}
        if objective not in divisors:
            raise ValueError(f"unknown objective {objective!r}; choose from {', '.join(OBJECTIVES)}")
        return divisors[objective]

    def figures(self, tokens_s: float) -> dict[str, float]:
        """Every objective's figure at ``tokens_s``: throughput per W and per $ (tokens), J and g CO2e per token."""
        if not tokens_s > 0:
            return {}
        return {"tokens_per_s_per_w": tokens_s / self.cluster_power_w,
                "tokens_per_s_per_usd": tokens_s / self.cluster_cost_usd,
                "energy_per_token_j": self.cluster_power_w / tokens_s,
                "carbon_per_token_g": self.carbon_g_per_s / tokens_s}

    def summary(self) -> dict[str, Any]:
        """The system fields results carry: chip area/power/cost, chips, the cluster's power and cost."""
        return {"topology": self.topology, "n_devices": self.n_devices, "pods": self.pods, "budget": self.budget.to_dict(),
                "chip_area_mm2": self.estimate.die_area_mm2, "chip_power_w": self.estimate.total_power_w,
                "chip_cost_usd": self.estimate.total_cost_usd,
                "wall_power_per_chip_w": self.wall_power_per_chip_w, "cost_per_chip_usd": self.cost_per_chip_usd,
                "family": self.family.name, "host_w_per_chip": self.family.host.w_per_chip,
                "scale_up_w_per_chip": self.family.scale_up_w_per_chip(self.estimate),
                "nic_w_per_chip": self.family.nic_w_per_chip, "nic_usd_per_chip": self.family.nic_usd_per_chip,
                "network_w_per_chip": self.family.network_w_per_chip(self.n_devices),
                "host_usd_per_chip": self.family.host.usd_per_chip,
                "scale_up_usd_per_chip": self.family.scale_up_usd_per_chip(self.estimate),
                "network_usd_per_chip": self.family.network_usd_per_chip(self.n_devices),
                "cluster_power_w": self.cluster_power_w, "cluster_cost_usd": self.cluster_cost_usd,
                "hbm_gb": self.accelerator.hbm_gb, "hbm_bandwidth_Bps": self.accelerator.hbm_bandwidth_Bps,
                "links": self.chip_system.links, "link_bandwidth_Bps": self.chip_system.link_bandwidth_Bps}


def system_point(accelerator: Accelerator, chip_system: ChipSystem, topology: str, budget: SystemBudget,
                 family: SystemFamily | None = None, custom: bool = True) -> SystemPoint:
    """``accelerator`` built as ``chip_system`` into a ``topology`` cluster of ``family`` (default the topology's,
    :func:`topology_family`) with the chips ``budget`` buys. A ``custom`` chip (every design; not a reference chip
    bought off the shelf) pays its NRE when the budget amortises it (:attr:`SystemBudget.nre_chips`): an ``nre``
    term of its cost."""
    family = family or topology_family(topology)
    estimate = chip_estimate(accelerator, chip_system)
    if custom and budget.nre_chips is not None:
        nre = nre_usd_per_chip(chip_system.process, budget.nre_chips)
        estimate = dataclasses.replace(estimate, cost_usd={**estimate.cost_usd, "nre": nre})
    return SystemPoint(accelerator, chip_system, topology, estimate,
                       devices_supported(topology, budget.affordable(estimate, family), family.domain_chips), budget,
                       family)


def choice_point(choice: SystemChoice, arch: Accelerator, budget: SystemBudget, node: str = SYSTEM_NODE) -> SystemPoint:
    """The point of a system-space design: ``arch``'s cores and buffer under ``choice``, built at ``node``."""
    return system_point(choice.accelerator(arch), choice.chip_system(node), choice.topology, budget)


REFERENCE_TOPOLOGIES = {"tpuv4": "torus", "a100": "switched", "h100": "switched"}
"""The reference systems the system space is compared against, by chip preset (``cost.SYSTEMS``: its published
system fields) and how that chip is deployed: TPUv4 in a 3-D torus (TPU v4 pods, Jouppi et al. 2023), A100 and
H100 in 8-GPU NVSwitch nodes joined by InfiniBand (DGX A100 / DGX H100 datasheets)."""
REFERENCE_FAMILIES = {"tpuv4": "tpuv4-torus", "a100": "dgx-a100", "h100": "dgx-h100"}
"""The system family each reference chip is deployed as (:data:`SYSTEM_FAMILIES`): its own hosts and network."""
REFERENCE_HBM_GENERATIONS = {"tpuv4": "hbm2", "a100": "hbm2e", "h100": "hbm3"}
"""The reference chips' HBM generations, for labels (their capacity and bandwidth are the presets'): TPUv4 HBM2
(Jouppi et al. 2023), A100 80 GB HBM2e, H100 SXM HBM3 (NVIDIA datasheets)."""


REFERENCE_NUMBER_FORMATS = {"tpuv4": ("bf16",), "a100": ("bf16",), "h100": ("bf16", "fp8")}
"""The tensor-core formats each reference chip can train in: the H100's Transformer Engine FP8 (1,979 TFLOP/s
dense, NVIDIA H100 whitepaper; the ``h100-fp8`` preset); the A100 (A100 whitepaper: bf16, tf32, int8) and TPUv4's
bf16 MXUs (Jouppi et al. 2023) have no FP8. A design of the system space may pick FP8, so a comparison gives each
reference its best format too."""


MI300X_RIVAL_SYSTEM = SYSTEMS["mi300x"][0]
"""The MI300X as the rival is built: ``cost.SYSTEMS["mi300x"]``, as AMD builds it — 8 N5 XCDs at 2.1 GHz 3-D stacked
on 4 N6 IODs holding the Infinity Cache, HBM3 interfaces and Infinity Fabric (its die areas and power set against
the published ones in ``docs/cost_model.md``). Its modelled power at the data sheet's 2.1 GHz peak is above AMD's
750 W TBP (the TDP-like model prices every unit busy, with GA100's GPU core factor), so the rival runs as the real
chip does, at the clock that holds it within 750 W (:func:`rival_chip`, ``cost.power_capped``): its throughput falls
with the clock instead of its power rising above its TBP. Assumption: the V–f exponent (``energy.
VOLTAGE_FREQUENCY_EXPONENT``, k = 1, range 0–1), whose range brackets the median clocks AMD measures under dense GEMMs
(``cost.MI300X_GEMM_MEDIAN_CLOCKS_HZ``); k = 1 gives the highest clock of the range, in the rival's favour."""
FLAGSHIP_CHIP_SYSTEMS = {"b200": SYSTEMS["b200"][0], "gb200": SYSTEMS["gb200"][0], "tpuv5p": SYSTEMS["tpuv5p"][0],
                         "mi300x": MI300X_RIVAL_SYSTEM}
"""The 2024–25 flagships' chips as the cost model builds them (``cost.SYSTEMS``' published system fields; the MI300X
:data:`MI300X_RIVAL_SYSTEM`)."""
FLAGSHIP_TOPOLOGIES = {"b200": "switched", "gb200": "switched", "tpuv5p": "torus", "mi300x": "switched"}
"""How each 2024–25 flagship is deployed: B200 in DGX B200 nodes, GB200 in NVL72 racks (a 72-GPU switch domain), TPU
v5p in its pods' 3-D torus (Cloud TPU v5p documentation), MI300X in 8-GPU platforms (a full mesh, modelled as a switch
domain of 8 with each GPU's 7 links: 448 GB/s per direction, what an all-to-all over the mesh moves; assumption)."""
FLAGSHIP_FAMILIES = {"b200": "dgx-b200", "gb200": "gb200-nvl72", "tpuv5p": "tpuv5p-torus", "mi300x": "mi300x-platform"}
"""The system family each flagship is deployed as (:data:`SYSTEM_FAMILIES`): its own hosts and network."""
FLAGSHIP_HBM_GENERATIONS = {"b200": "hbm3e", "gb200": "hbm3e", "tpuv5p": "hbm2e", "mi300x": "hbm3"}
"""The flagships' HBM generations, for labels (NVIDIA Blackwell brief: HBM3e; Cloud TPU v5p documentation: HBM2e;
AMD MI300X data sheet: HBM3)."""
FLAGSHIP_NUMBER_FORMATS = {"b200": ("bf16", "fp8"), "gb200": ("bf16", "fp8"), "tpuv5p": ("bf16",),
                           "mi300x": ("bf16", "fp8")}
"""The tensor-core formats each flagship trains in: Blackwell's and the MI300X's FP8 (their data sheets: 4.5 / 5 and
2.6 PFLOP/s dense FP8); TPU v5p lists bf16 and int8, no FP8 (Cloud TPU v5p documentation)."""
RIVAL_TOPOLOGIES = REFERENCE_TOPOLOGIES | FLAGSHIP_TOPOLOGIES
"""Every rival :func:`reference_point` builds: the table's references (same node) and the 2024–25 flagships."""
RIVAL_FAMILIES = REFERENCE_FAMILIES | FLAGSHIP_FAMILIES
RIVAL_HBM_GENERATIONS = REFERENCE_HBM_GENERATIONS | FLAGSHIP_HBM_GENERATIONS
RIVAL_NUMBER_FORMATS = REFERENCE_NUMBER_FORMATS | FLAGSHIP_NUMBER_FORMATS


class UnknownRivalError(ValueError):
    """A rival system name :func:`reference_point` cannot build (one line naming the known ones)."""


def check_rival(name: str) -> None:
    """Raise :class:`UnknownRivalError` unless ``name`` is a rival :func:`reference_point` builds."""
    if name not in RIVAL_TOPOLOGIES:
        close = difflib.get_close_matches(str(name), RIVAL_TOPOLOGIES, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise UnknownRivalError(f"unknown rival system {name!r}.{hint} Choose from {', '.join(RIVAL_TOPOLOGIES)}")


def rival_chip(name: str) -> tuple[Accelerator, ChipSystem]:
    """Rival ``name``'s chip as it runs: its preset built as its chip system (:data:`FLAGSHIP_CHIP_SYSTEMS`, else
    ``cost.SYSTEMS``) within its published power limit (``cost.PUBLISHED[name].power_limit_w``: a TDP or TBP its
    power management enforces), i.e. at the clock whose modelled power meets the limit when the model's power at
    its nominal clock exceeds it (:func:`~phaze_env.hardware.cost.power_capped`: MI300X, B200 and GB200 today; A100
    and H100 are under theirs, TPU v4's published power is a measured maximum and TPU v5p has none)."""
    check_rival(name)
    chip_system = FLAGSHIP_CHIP_SYSTEMS[name] if name in FLAGSHIP_CHIP_SYSTEMS else SYSTEMS[name][0]
    published = PUBLISHED.get(name)
    return power_capped(get_preset(name), chip_system, published.power_limit_w if published else None)


def mi300x_engine_clock_hz() -> float:
    """The MI300X rival's engine clock as it runs within its TBP (:func:`rival_chip`): the data sheet's peak engine
    clock (``cost.MI300X_ENGINE_CLOCK_HZ``) × the capped clock over the preset's (the preset's arrays are an equivalent
    count at another clock, so only the ratio carries over) — the figure set against AMD's measured medians
    (``cost.MI300X_GEMM_MEDIAN_CLOCKS_HZ``)."""
    accelerator, _ = rival_chip("mi300x")
    return MI300X_ENGINE_CLOCK_HZ * accelerator.clock_hz / get_preset("mi300x").clock_hz


def reference_point(name: str, budget: SystemBudget, number_format: str = "bf16") -> SystemPoint:
    """Reference chip ``name`` (a key of :data:`RIVAL_TOPOLOGIES`: the table's references and the 2024–25
    flagships) in its topology and family at ``budget``: the chip
    count from the same power and cost models the system space's designs get (:func:`system_point`, i.e. the
    *modelled* chip power and cost, not the datasheet's; a chip whose modelled power exceeds its published limit
    runs at the clock that meets it, :func:`rival_chip`), at :data:`SYSTEM_GEMM_EFFICIENCY` like every design
    (the a100 preset's own measured value; for tpuv4 (1.0) and h100 (0.801 measured) it is the same basis, not
    their own). ``number_format`` (one of :data:`REFERENCE_NUMBER_FORMATS`) is the format it trains in; the chip
    estimate, hence the chip count, is the preset's whatever the format (FP8 is a mode of the same published
    chip, whose die already holds it)."""
    check_rival(name)
    if number_format not in RIVAL_NUMBER_FORMATS[name]:
        raise ValueError(f"the {name} reference trains in {' or '.join(RIVAL_NUMBER_FORMATS[name])}, "
                         f"not {number_format!r}")
    accelerator, chip_system = rival_chip(name)
    point = system_point(accelerator.replace(gemm_efficiency=SYSTEM_GEMM_EFFICIENCY), chip_system,
                         RIVAL_TOPOLOGIES[name], budget, SYSTEM_FAMILIES[RIVAL_FAMILIES[name]], custom=False)
    if number_format == point.accelerator.number_format:
        return point
    return dataclasses.replace(point, accelerator=point.accelerator.replace(number_format=number_format))


def baseline_point(budget: SystemBudget) -> SystemPoint:
    """The reference of the system space: the TPUv4 chip (preset, its published system fields: 4 HBM2 stacks,
    6 ICI links) in a torus at the same budget, at :data:`SYSTEM_GEMM_EFFICIENCY` like every design."""
    return reference_point("tpuv4", budget)


__all__ = ["DEFAULT_BUDGET_W", "OBJECTIVES", "SCALE_UP_DOMAIN", "TOPOLOGIES", "TORUS_CUBE_SIDE", "TORUS_NEIGHBOURS",
           "TORUS_POD_CHIPS", "torus_pods",
           "devices_supported", "topology_unit", "HBM_GENERATIONS", "PUE", "FatTree", "HostShare", "SystemFamily",
           "SYSTEM_FAMILIES", "TOPOLOGY_FAMILIES", "ScaleUpFabric", "NVSWITCH_GEN2", "NVSWITCH_GEN3", "TPUV4_OCS",
           "REFERENCE_FAMILIES", "topology_family", "SYSTEM_GEMM_EFFICIENCY", "DESIGN_GEMM_EFFICIENCY", "SYSTEM_NODE",
           "SYSTEM_SERDES", "HbmGeneration", "SystemBudget", "SystemChoice",
           "SystemPoint", "REFERENCE_HBM_GENERATIONS", "FLAGSHIP_CHIP_SYSTEMS", "FLAGSHIP_FAMILIES",
           "FLAGSHIP_HBM_GENERATIONS", "FLAGSHIP_NUMBER_FORMATS", "FLAGSHIP_TOPOLOGIES", "RIVAL_FAMILIES",
           "RIVAL_HBM_GENERATIONS", "RIVAL_NUMBER_FORMATS", "RIVAL_TOPOLOGIES", "UnknownRivalError", "check_rival", "mi300x_engine_clock_hz", "rival_chip", "REFERENCE_NUMBER_FORMATS", "REFERENCE_TOPOLOGIES", "baseline_point", "reference_point", "choice_point", "cost_per_chip_usd", "system_point",
           "wall_power_per_chip_w"]
