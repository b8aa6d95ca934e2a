"""Technology generations: "this design at node X, in year Y".

A :class:`Technology` names a process node (:data:`phaze_env.hardware.cost.NODES`: density, energy per event,
wafer cost and D0) and a year. The year decides what else the chip can be built with: the HBM generations
(:data:`phaze_env.hardware.system.HBM_GENERATIONS`) and chip-to-chip SerDes (:data:`phaze_env.hardware.cost.SERDES`)
that had shipped on an accelerator by then, each with its first shipping year. So the system space and the table
can ask the two questions of issue 29 — "at the same node and year" as a rival, and "against the best you can
buy" — with one value:

* :meth:`Technology.chip_system` builds a :class:`~phaze_env.hardware.system.SystemChoice` at this node with the
  year's fastest SerDes, and refuses an HBM generation that had not shipped by the year;
* :meth:`Technology.compute_budget_mm2` is the choice's compute-area budget at this node (the area window);
* :data:`REFERENCE_TECHNOLOGIES` gives every rival with system data (``cost.SYSTEMS``) its own node and year.

A node without data, a year before the node's volume production, or an HBM generation not shipping by the year is
one :class:`ValueError` naming what is known (:class:`~phaze_env.hardware.cost.UnknownNodeError` for the node).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from phaze_env.hardware.cost import NODES, SERDES, SYSTEMS, ChipSystem, ProcessNode, get_node, periphery_area_mm2
from phaze_env.hardware.system import HBM_GENERATIONS, SystemChoice


@dataclass(frozen=True)
class Technology:
    """A process node (a name of ``cost.NODES``) in a year (the year the chip ships)."""

    node: str
    year: int

    def __post_init__(self) -> None:
        process = get_node(self.node)  # a node without data raises UnknownNodeError with the known ones
        object.__setattr__(self, "node", process.name)
        if isinstance(self.year, bool) or not isinstance(self.year, int):
            raise ValueError(f"Technology.year must be an integer year, got {self.year!r}")
        if process.volume_year is not None and self.year < process.volume_year:
            raise ValueError(f"{process.name} entered volume production in {process.volume_year}: no {process.name} "
                             f"chip ships in {self.year}")
        if not self.hbm_generations:
            first = min(g.first_year for g in HBM_GENERATIONS.values() if g.first_year is not None)
            raise ValueError(f"no HBM generation had shipped by {self.year} (the first, in {first})")

    @property
    def process(self) -> ProcessNode:
        return get_node(self.node)

    @property
    def hbm_generations(self) -> tuple[str, ...]:
        """The HBM generations shipping by :attr:`year`, oldest first."""
        shipped = [g for g in HBM_GENERATIONS.values() if g.first_year is not None and g.first_year <= self.year]
        return tuple(g.name for g in sorted(shipped, key=lambda g: g.first_year))

    @property
    def newest_hbm(self) -> str:
        return self.hbm_generations[-1]

    @property
    def serdes(self) -> str:
        """The fastest SerDes lane shipping by :attr:`year` (the oldest kind if none had: 50G NRZ predates the
        table)."""
        shipped = [k for k in SERDES.values() if k.first_year <= self.year] or [min(SERDES.values(),
                                                                                    key=lambda k: k.first_year)]
        return max(shipped, key=lambda k: k.lane_bps).name

    def check_hbm(self, generation: str) -> None:
        """Raise unless HBM ``generation`` had shipped by :attr:`year`."""
        if generation not in HBM_GENERATIONS:
            raise ValueError(f"unknown HBM generation {generation!r}; choose from {', '.join(HBM_GENERATIONS)}")
        if generation not in self.hbm_generations:
            raise ValueError(f"{generation} first shipped in {HBM_GENERATIONS[generation].first_year}, after "
                             f"{self.year}; by {self.year}: {', '.join(self.hbm_generations)}")

    def chip_system(self, choice: SystemChoice) -> ChipSystem:
        """``choice``'s chip at this node with this year's SerDes (systolic cores, as the system space's)."""
        self.check_hbm(choice.hbm_generation)
        return replace(choice.chip_system(), node=self.node, serdes=self.serdes)

    def compute_budget_mm2(self, choice: SystemChoice) -> float:
        """The die area ``choice`` leaves for the compute block at this node (:meth:`SystemChoice.compute_budget_mm2`
        with this technology's chip system)."""
        return choice.die_area_mm2 - sum(periphery_area_mm2(self.chip_system(choice)).values())

    def describe(self) -> str:
        return f"{self.node} · {self.year} ({', '.join(h.upper() for h in self.hbm_generations)}; {self.serdes})"

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "year": self.year}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Technology:
        unknown = sorted(set(data) - {"node", "year"})
        if unknown:
            raise ValueError(f"unknown Technology field(s): {', '.join(unknown)}")
        return cls(**data)


REFERENCE_YEARS = {"tpuv4": 2021, "a100": 2020, "h100": 2022, "b200": 2024, "gb200": 2024, "tpuv5p": 2023,
                   "mi300x": 2023}
"""The year each rival with system data shipped: TPU v4 deployed 2020, announced and in Cloud 2021 (Jouppi et al.,
ISCA 2023; 2021 taken: its pods' first public use); A100 May 2020 (NVIDIA GTC 2020); H100 2022 (shipping from Q3
2022, NVIDIA); B200 and GB200 2024 (Blackwell shipping from NVIDIA's Q4 of fiscal 2025, Nov 2024–Jan 2025); TPU v5p December 2023 (Google Cloud announcement,
2023-12-06); MI300X December 2023 (AMD "Advancing AI" launch, 2023-12-06, shipping to cloud and OEM customers from
then; its node is its compute dies' N5)."""
REFERENCE_TECHNOLOGIES: dict[str, Technology] = {
    name: Technology(SYSTEMS[name][0].process.name, year) for name, year in REFERENCE_YEARS.items()}
"""Each rival's own node and year (its ``cost.SYSTEMS`` node): the "same node and year" a design is compared at."""


def technology(node: str, year: int) -> Technology:
    """:class:`Technology` from a CLI/table option (the same validation, one clear error)."""
    return Technology(node, year)


__all__ = ["NODES", "REFERENCE_TECHNOLOGIES", "REFERENCE_YEARS", "Technology", "technology"]
