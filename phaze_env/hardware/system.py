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
  per-chip share of a power budget is ``(chip TDP + host share) × PUE`` (:func:`wall_power_per_chip_w`),
  of a money budget ``chip cost + host share`` (:func:`cost_per_chip_usd`);
* the **cluster**: :func:`phaze_env.cluster.point_cluster` from the chip's links (the cluster floor builds it;
  this module stays on the hardware floor).

Every constant cites its source or says "assumption" with its sensitivity (``docs/system_space.md``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from phaze_env.hardware import area
from phaze_env.hardware.accelerator import (A100_GEMM_EFFICIENCY, HBM2_EFFICIENCY, HBM3_EFFICIENCY, Accelerator,
                                            get_preset)
from phaze_env.hardware.cost import SYSTEMS, ChipEstimate, ChipSystem, chip_estimate, periphery_area_mm2
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


def torus_pods(n_devices: int) -> int:
    """The pods (slices) a system-space torus of ``n_devices`` chips is built as: ``⌈n / TORUS_POD_CHIPS⌉`` equal
    pods of whole cubes, joined by the data-centre network (one pod up to :data:`TORUS_POD_CHIPS`). Raises if
    ``n_devices`` does not split so (:func:`devices_supported` only returns counts that do)."""
    unit = topology_unit("torus")
    pods = max(1, -(-int(n_devices) // TORUS_POD_CHIPS))
    if n_devices < unit or n_devices % (pods * unit):
        raise ValueError(f"a torus of {n_devices} chips is {pods} pod(s) of at most {TORUS_POD_CHIPS}, which must be "
                         f"equal and hold whole 4×4×4 cubes of {unit}: {n_devices} chips do not split so")
    return pods


def devices_supported(topology: str, affordable: int) -> int:
    """The most chips ≤ ``affordable`` the family builds (0 if not one unit): whole units (switch domains, torus
    cubes); a torus of more than :data:`TORUS_POD_CHIPS` chips is :func:`torus_pods` equal pods, so its count is
    the largest one that splits into ``⌈n / pod⌉`` equal pods of whole cubes.

    With ``u`` affordable cubes, ``c`` cubes per pod and ``p = ⌈u / c⌉`` pods: ``p`` pods of ``⌊u / p⌋`` cubes when
    that still needs ``p`` pods (``p·⌊u/p⌋ > c·(p−1)``), else ``p − 1`` full pods — the larger of the two, which is
    the most any pod count allows (more pods than ``p`` do not fit ``u``; fewer hold at most ``c·(p−1)``). It loses
    fewer than ``p`` cubes to the equal split, never grows when the budget shrinks, and the budget pays for every
    chip counted (the cluster's power and cost are this count's, :attr:`SystemPoint.cluster_power_w`)."""
    unit = topology_unit(topology)
    units = max(0, int(affordable)) // unit
    if topology == "torus" and units:
        per_pod = TORUS_POD_CHIPS // unit
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

    @property
    def stack_bandwidth_Bps(self) -> float:
        return HBM_DATA_PINS * self.pin_rate_bps / 8


HBM_DATA_PINS = 1024
"""Data pins of one HBM stack's interface, every generation up to HBM3e (JEDEC JESD235 / JESD238)."""
HBM_GENERATIONS: dict[str, HbmGeneration] = {
    "hbm2e": HbmGeneration("hbm2e", 16.0, 3.2e9, HBM2_EFFICIENCY,
                           "JEDEC JESD235C (HBM2E, 3.2 Gb/s per pin, 409.6 GB/s per stack); Samsung HBM2E "
                           "'Flashbolt' 16 GB 8-high stacks (2020); the A100 80 GB's five stacks"),
    "hbm3": HbmGeneration("hbm3", 16.0, 6.4e9, HBM3_EFFICIENCY,
                          "JEDEC JESD238 (HBM3, Jan 2022: 6.4 Gb/s per pin, 819 GB/s per stack); SK hynix 16 GB "
                          "8-high HBM3 as on the H100 SXM (5 × 16 GB = 80 GB)"),
    "hbm3e": HbmGeneration("hbm3e", 24.0, 9.2e9, HBM3_EFFICIENCY,
                           "Micron HBM3E 24 GB 8-high (2024 datasheet/press: > 9.2 Gb/s per pin, > 1.2 TB/s per "
                           "stack); SK hynix HBM3E 9.2 Gb/s. Efficiency: HBM3's measured 0.90 (assumption)"),
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
HOST_W_PER_CHIP = (10_200.0 - 8 * 700.0) / 8
"""575 W per chip for everything in a server besides the accelerators — host CPUs, DRAM, NICs, node
switches, fans, power-supply losses: a DGX H100's 10.2 kW maximum system power (NVIDIA DGX H100 datasheet)
less its eight 700 W GPUs, per GPU. Applied to both topology families (assumption: a TPU host serves four
chips with less, so this favours neither family); −50 % / +50 % changes the chip count at 10 MW from 7,440 to
9,730 / 6,023 H100s (+31 % / −19 %) and from 12,101 to 19,603 / 8,751 TPUv4 chips (+62 % / −28 %): the share
weighs most on low-power chips (docs/system_space.md)."""
WALL_ENERGY_LABEL = "wall energy J/token (chips at TDP + host, × PUE)"
"""What a system-space design's ``energy_per_token_j`` (:meth:`SystemPoint.figures`) is, wherever it is shown: the
cluster's power at the wall (every chip at its TDP-like power plus its host share, times :data:`PUE`) over the
token rate, not the chip's dynamic operator energy (:data:`phaze_env.hardware.energy.DYNAMIC_ENERGY_LABEL`)."""

PUE = 1.1
"""Power usage effectiveness of the data centre (cooling, power distribution): Google reports a fleet-wide
trailing-twelve-month PUE of 1.10 (Google Data Centers, "Efficiency", 2023); Meta reports 1.08–1.10 in its
sustainability reports. The chip count at a power budget scales with 1/PUE."""
HOST_USD_PER_CHIP = 5_000.0
"""Per-chip share of the server around the accelerators (CPUs, DRAM, NIC, switch ports, chassis): $5,000.
Assumption (no public bill of materials; order of two server CPUs, 2 TB DRAM, eight 400 G NICs and their
switch ports over eight accelerators). It dominates a modelled chip's manufacturing cost (≈ $1.3–2.6 k), so
a money budget buys ≈ 1/3 more chips at $2,500 and ≈ 1/3 fewer at $10,000."""
DEFAULT_BUDGET_W = 10e6
"""The default cluster budget at the wall: 10 MW, what ≈ 7,000 H100-class chips draw with their hosts and
cooling ((700 W + 575 W) × 1.1 PUE ≈ 1.4 kW each): a large LLM training cluster of today."""


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
    """A cluster budget: power at the wall (W) or capital cost (USD); exactly one is set."""

    power_w: float | None = DEFAULT_BUDGET_W
    cost_usd: float | None = None

    def __post_init__(self) -> None:
        if (self.power_w is None) == (self.cost_usd is None):
            raise ValueError("a system budget is either power (W) or cost (USD), exactly one of them")
        value = self.power_w if self.power_w is not None else self.cost_usd
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"the system budget must be a positive finite number, got {value!r}")

    @classmethod
    def of(cls, budget_w: float | None = None, budget_usd: float | None = None) -> SystemBudget:
        """From the CLI/space options: the money budget when given, else the power budget (default 10 MW)."""
        if budget_usd is not None:
            if budget_w is not None:
                raise ValueError("give a power budget or a cost budget, not both")
            return cls(power_w=None, cost_usd=budget_usd)
        return cls(power_w=DEFAULT_BUDGET_W if budget_w is None else budget_w)

    def per_chip(self, estimate: ChipEstimate) -> float:
        """What one chip takes of this budget (W at the wall, or USD)."""
        return wall_power_per_chip_w(estimate) if self.power_w is not None else cost_per_chip_usd(estimate)

    def affordable(self, estimate: ChipEstimate) -> int:
        """Whole chips the budget pays for, before the topology's rounding."""
        total = self.power_w if self.power_w is not None else self.cost_usd
        return math.floor(total / self.per_chip(estimate) * (1 + 1e-12))  # an exact fit is not lost to round-off

    def describe(self) -> str:
        return f"{self.power_w / 1e6:g} MW" if self.power_w is not None else f"${self.cost_usd / 1e6:g} M"

    def to_dict(self) -> dict[str, Any]:
        return {"power_w": self.power_w, "cost_usd": self.cost_usd}


def wall_power_per_chip_w(estimate: ChipEstimate) -> float:
    """A chip's share of a power budget at the wall: ``(chip TDP + HOST_W_PER_CHIP) × PUE``."""
    return (estimate.total_power_w + HOST_W_PER_CHIP) * PUE


def cost_per_chip_usd(estimate: ChipEstimate) -> float:
    """A chip's share of a money budget: its cost (die, HBM, package) + ``HOST_USD_PER_CHIP``."""
    return estimate.total_cost_usd + HOST_USD_PER_CHIP


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

    def chip_system(self) -> ChipSystem:
        return ChipSystem(node=SYSTEM_NODE, hbm_stacks=self.hbm_stacks, links=self.links,
                          link_bandwidth_Bps=self.link_bandwidth_Bps, serdes=SYSTEM_SERDES, core_style="systolic")

    def compute_budget_mm2(self) -> float:
        """The die area left for the compute block: die − HBM PHYs/controllers − SerDes − IO (may be ≤ 0)."""
        return self.die_area_mm2 - sum(periphery_area_mm2(self.chip_system()).values())

    def accelerator(self, arch: Accelerator) -> Accelerator:
        """``arch``'s cores and buffer with this choice's HBM, number format and the system space's GEMM
        efficiency."""
        generation = self.generation
        return arch.replace(hbm_gb=self.hbm_gb, hbm_bandwidth_Bps=self.hbm_stacks * generation.stack_bandwidth_Bps,
                            hbm_efficiency=generation.efficiency, gemm_efficiency=SYSTEM_GEMM_EFFICIENCY,
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
    estimate and how many chips the budget buys (0: not even one topology unit)."""

    accelerator: Accelerator
    chip_system: ChipSystem
    topology: str
    estimate: ChipEstimate
    n_devices: int
    budget: SystemBudget

    @property
    def unbuildable_reason(self) -> str:
        """Why no cluster can be built at this point ("" when one can): the budget buys no whole topology unit."""
        if self.n_devices >= 1:
            return ""
        unit = "W at the wall" if self.budget.power_w is not None else "USD"
        return (f"a {self.budget.describe()} budget buys {self.budget.affordable(self.estimate):,} of these chips "
                f"({self.budget.per_chip(self.estimate):,.0f} {unit} each), not one whole {self.topology} unit of "
                f"{topology_unit(self.topology)}: no cluster to train on")

    @property
    def pods(self) -> int:
        """The pods (slices over the data-centre network) the cluster is built as: :func:`torus_pods` for a torus,
        1 for the switched family (its nodes are already joined by its scale-out network) and for no chips."""
        return torus_pods(self.n_devices) if self.topology == "torus" and self.n_devices else 1

    @property
    def cluster_power_w(self) -> float:
        return self.n_devices * wall_power_per_chip_w(self.estimate)

    @property
    def cluster_cost_usd(self) -> float:
        return self.n_devices * cost_per_chip_usd(self.estimate)

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
                "wall_power_per_chip_w": wall_power_per_chip_w(self.estimate),
                "cost_per_chip_usd": cost_per_chip_usd(self.estimate),
                "cluster_power_w": self.cluster_power_w, "cluster_cost_usd": self.cluster_cost_usd,
                "hbm_gb": self.accelerator.hbm_gb, "hbm_bandwidth_Bps": self.accelerator.hbm_bandwidth_Bps,
                "links": self.chip_system.links, "link_bandwidth_Bps": self.chip_system.link_bandwidth_Bps}


def system_point(accelerator: Accelerator, chip_system: ChipSystem, topology: str, budget: SystemBudget) -> SystemPoint:
    """``accelerator`` built as ``chip_system`` into a ``topology`` cluster with the chips ``budget`` buys."""
    estimate = chip_estimate(accelerator, chip_system)
    return SystemPoint(accelerator, chip_system, topology, estimate,
                       devices_supported(topology, budget.affordable(estimate)), budget)


def choice_point(choice: SystemChoice, arch: Accelerator, budget: SystemBudget) -> SystemPoint:
    """The point of a system-space design: ``arch``'s cores and buffer under ``choice``."""
    return system_point(choice.accelerator(arch), choice.chip_system(), choice.topology, budget)


REFERENCE_TOPOLOGIES = {"tpuv4": "torus", "a100": "switched", "h100": "switched"}
"""The reference systems the system space is compared against, by chip preset (``cost.SYSTEMS``: its published
system fields) and how that chip is deployed: TPUv4 in a 3-D torus (TPU v4 pods, Jouppi et al. 2023), A100 and
H100 in 8-GPU NVSwitch nodes joined by InfiniBand (DGX A100 / DGX H100 datasheets)."""
REFERENCE_HBM_GENERATIONS = {"tpuv4": "hbm2", "a100": "hbm2e", "h100": "hbm3"}
"""The reference chips' HBM generations, for labels (their capacity and bandwidth are the presets'): TPUv4 HBM2
(Jouppi et al. 2023), A100 80 GB HBM2e, H100 SXM HBM3 (NVIDIA datasheets)."""


REFERENCE_NUMBER_FORMATS = {"tpuv4": ("bf16",), "a100": ("bf16",), "h100": ("bf16", "fp8")}
"""The tensor-core formats each reference chip can train in: the H100's Transformer Engine FP8 (1,979 TFLOP/s
dense, NVIDIA H100 whitepaper; the ``h100-fp8`` preset); the A100 (A100 whitepaper: bf16, tf32, int8) and TPUv4's
bf16 MXUs (Jouppi et al. 2023) have no FP8. A design of the system space may pick FP8, so a comparison gives each
reference its best format too."""


def reference_point(name: str, budget: SystemBudget, number_format: str = "bf16") -> SystemPoint:
    """Reference chip ``name`` (a key of :data:`REFERENCE_TOPOLOGIES`) in its topology at ``budget``: the chip
    count from the same power and cost models the system space's designs get (:func:`system_point`, i.e. the
    *modelled* chip power and cost, not the datasheet's), at :data:`SYSTEM_GEMM_EFFICIENCY` like every design
    (the a100 preset's own measured value; for tpuv4 (1.0) and h100 (0.801 measured) it is the same basis, not
    their own). ``number_format`` (one of :data:`REFERENCE_NUMBER_FORMATS`) is the format it trains in; the chip
    estimate, hence the chip count, is the preset's whatever the format (FP8 is a mode of the same published
    chip, whose die already holds it)."""
    if name not in REFERENCE_TOPOLOGIES:
        raise ValueError(f"unknown reference system {name!r}; choose from {', '.join(REFERENCE_TOPOLOGIES)}")
    if number_format not in REFERENCE_NUMBER_FORMATS[name]:
        raise ValueError(f"the {name} reference trains in {' or '.join(REFERENCE_NUMBER_FORMATS[name])}, "
                         f"not {number_format!r}")
    chip_system, _ = SYSTEMS[name]
    point = system_point(get_preset(name).replace(gemm_efficiency=SYSTEM_GEMM_EFFICIENCY), chip_system,
                         REFERENCE_TOPOLOGIES[name], budget)
    if number_format == point.accelerator.number_format:
        return point
    return dataclasses.replace(point, accelerator=point.accelerator.replace(number_format=number_format))


def baseline_point(budget: SystemBudget) -> SystemPoint:
    """The reference of the system space: the TPUv4 chip (preset, its published system fields: 4 HBM2 stacks,
    6 ICI links) in a torus at the same budget, at :data:`SYSTEM_GEMM_EFFICIENCY` like every design."""
    return reference_point("tpuv4", budget)


__all__ = ["DEFAULT_BUDGET_W", "OBJECTIVES", "SCALE_UP_DOMAIN", "TOPOLOGIES", "TORUS_CUBE_SIDE", "TORUS_NEIGHBOURS",
           "TORUS_POD_CHIPS", "torus_pods",
           "devices_supported", "topology_unit", "HBM_GENERATIONS", "HOST_USD_PER_CHIP", "HOST_W_PER_CHIP", "PUE",
           "SYSTEM_GEMM_EFFICIENCY", "SYSTEM_NODE", "SYSTEM_SERDES", "HbmGeneration", "SystemBudget", "SystemChoice",
           "SystemPoint", "REFERENCE_HBM_GENERATIONS", "REFERENCE_NUMBER_FORMATS", "REFERENCE_TOPOLOGIES", "baseline_point", "reference_point", "choice_point", "cost_per_chip_usd", "system_point",
           "wall_power_per_chip_w"]
