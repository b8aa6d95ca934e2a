"""The one result type of an exact search, for every mode: :class:`SearchResult` (JSON round-trip).

Every mode fills the same fields: ``best`` (each workload's own best design; empty in Pareto mode),
``shared`` (multi-workload mode: the single design with the best aggregate; else ``None``), ``pareto``
(Pareto mode: each workload's front over ``objectives``, each design with its figure per objective; else
empty) and ``baseline`` (the TPUv4-like accelerator on each
workload, same placement DP and knobs). Designs are :class:`DesignResult` values; areas are in mm².
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from phaze_env.hardware import Accelerator
from phaze_env.hardware.number_format import mfu_basis, mfu_text
from phaze_env.evaluate import Evaluation
from phaze_env.placement import Plan
from phaze_env.placement.plan import plan_or_none
from search.objectives import objective_value

MODES = ("best", "shared", "pareto")


def time_shares(plan: Plan) -> dict[str, float]:
    """Each part of the time per batch (:attr:`phaze_env.placement.Plan.time_breakdown_s`: compute, recompute,
    tensor-parallel collectives, pipeline p2p and bubble, data-parallel all-reduce, optimizer step) as a
    share of it; the parts add up to the whole."""
    return {part: seconds / plan.time_per_batch_s for part, seconds in plan.time_breakdown_s.items()}


def system_line(summary: dict[str, Any]) -> str:
    """A system-space design's system in one line (:meth:`~phaze_env.hardware.system.SystemPoint.summary`'s fields):
    die, HBM, links, topology and chips — what tells two system designs with the same cores apart."""
    pods = summary.get("pods", 1)
    links = f"{summary['links']}×{summary['link_bandwidth_Bps'] / 1e9:g} GB/s links"
    return (f"die {summary['chip_area_mm2']:.0f} mm² · HBM {summary['hbm_gb']:g} GiB at "
            f"{summary['hbm_bandwidth_Bps'] / 1e12:.2f} TB/s · {links} · {summary['topology']} · "
            f"{summary['n_devices']:,} chips" + (f" ({pods} pods)" if pods > 1 else ""))


@dataclass(frozen=True)
class DesignResult:
    """One design on one workload: its accelerator (dict), plan and figures (SI units, area in mm²).

    ``plan`` is the placement's :class:`~phaze_env.placement.Plan` (``None`` when infeasible), held in
    ``results.json`` as :meth:`Plan.to_dict <phaze_env.placement.Plan.to_dict>` (``{}`` when there is none, as
    ``Evaluation.to_dict`` holds it) and read back through :meth:`Plan.from_dict <phaze_env.placement.Plan.from_dict>`.
    """

    workload: str
    feasible: bool
    reason: str
    throughput_samples_s: float
    tokens_s: float
    mfu: float
    area_mm2: float
    energy_per_sample_j: float
    devices_available: int
    accelerator: dict[str, Any]
    plan: Plan | None
    proven: bool = True  # every layer schedule behind the figures is proven optimal (Evaluation.proven)
    worst_gap: float = 0.0
    system: dict[str, Any] | None = None  # system space: knobs, chips at the budget, power, cost (SystemPoint.summary)

    def __post_init__(self) -> None:
        if self.plan is not None and not isinstance(self.plan, Plan):
            hint = " (Plan.from_dict reads one from its dict)" if isinstance(self.plan, dict) else ""
            raise TypeError(f"DesignResult.plan must be a Plan or None, got {type(self.plan).__name__}{hint}")

    @classmethod
    def from_evaluation(cls, evaluation: Evaluation) -> DesignResult:
        """From an :class:`~phaze_env.evaluate.Evaluation` (what the search records and stores)."""
        return cls(workload=evaluation.workload, feasible=evaluation.feasible, reason=evaluation.reason,
                   throughput_samples_s=evaluation.throughput_samples_s, tokens_s=evaluation.tokens_s,
                   mfu=evaluation.mfu, area_mm2=evaluation.area_mm2, energy_per_sample_j=evaluation.energy_per_sample_j,
                   devices_available=evaluation.cluster["n_devices"], accelerator=evaluation.accelerator,
                   plan=evaluation.plan, proven=evaluation.proven, worst_gap=evaluation.worst_gap)

    @property
    def time_shares(self) -> dict[str, float]:
        return time_shares(self.plan)

    @property
    def number_format(self) -> str:
        return Accelerator.from_dict(self.accelerator).number_format

    @property
    def mfu_text(self) -> str:
        """``mfu`` with its basis (``Evaluation.mfu``: the peak of the design's number format), e.g.
        ``"57.5% of the FP8 peak"``."""
        return mfu_text(self.mfu, self.number_format)

    def to_dict(self) -> dict[str, Any]:
        """Every field (``system`` only for a system-space design, so PHAZE-space results are as before), and for a
        feasible design its time shares and what its ``mfu`` counts against (``mfu_basis``)."""
        data = {k: v for k, v in asdict(self).items() if not (k == "system" and v is None)}
        data["plan"] = self.plan.to_dict() if self.plan is not None else {}  # in place: the keys keep their order
        return data | ({"time_shares": self.time_shares,
                        "mfu_basis": mfu_basis(self.number_format)} if self.feasible else {})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DesignResult:
        """Inverse of :meth:`to_dict` (what it adds besides the fields is derived, and ignored here)."""
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        return cls(**values | {"plan": plan_or_none(data["plan"])})


@dataclass(frozen=True)
class UnprovenDesign:
    """A design whose figures rest on schedules not proven optimal (a row of :attr:`SearchResult.unproven`): the
    throughput its schedules achieve, its proven upper bound, the worst schedule gap, the unproven schedules
    (``Evaluation.unproven``), and whether it costs the answer its exactness (``blocks_exact``: it is the answer, or
    its bound reaches the answer's throughput)."""

    workload: str
    index: int  # the architecture's index in the search's space
    accelerator: dict[str, Any]
    throughput_samples_s: float
    throughput_bound_samples_s: float
    worst_gap: float
    schedules: tuple[str, ...]
    blocks_exact: bool

    @classmethod
    def of(cls, workload: str, index: int, evaluation: Evaluation, blocks_exact: bool) -> UnprovenDesign:
        return cls(workload=workload, index=int(index), accelerator=evaluation.accelerator,
                   throughput_samples_s=evaluation.throughput_samples_s,
                   throughput_bound_samples_s=evaluation.throughput_bound_samples_s, worst_gap=evaluation.worst_gap,
                   schedules=tuple(evaluation.unproven), blocks_exact=blocks_exact)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"schedules": list(self.schedules)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UnprovenDesign:
        return cls(**data | {"schedules": tuple(data["schedules"])})


@dataclass(frozen=True)
class SharedDesign:
    """Multi-workload mode: one design (architecture and HBM capacity) for every workload, best ``how``-aggregate
    throughput; ``per_workload`` holds each workload's result on it (its own microbatch and recompute)."""

    how: str
    throughput_samples_s: float
    accelerator: dict[str, Any]
    per_workload: dict[str, DesignResult]

    def to_dict(self) -> dict[str, Any]:
        return {"how": self.how, "throughput_samples_s": self.throughput_samples_s, "accelerator": self.accelerator,
                "per_workload": {w: d.to_dict() for w, d in self.per_workload.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SharedDesign:
        return cls(how=data["how"], throughput_samples_s=data["throughput_samples_s"], accelerator=data["accelerator"],
                   per_workload={w: DesignResult.from_dict(d) for w, d in data["per_workload"].items()})


@dataclass(frozen=True)
class SearchResult:
    """What ``search.phaze`` answers (and writes as ``results.json``); the same fields in every mode.

    Counts: ``architectures`` in the area window, ``designs`` = architectures × knob settings;
    ``evaluations`` (architecture × workload pairs evaluated, including resumed ones), of which
    ``evaluations_this_run``; ``pruned_by_placement_bound`` (pruned by the ILP-free bound, unevaluated);
    ``pruning_ratio`` (architectures never evaluated / architectures); ``resumed_records`` read from
    ``results.db``; the placement DP runs this run made, ``dp_calls_this_run`` on scheduled layer latencies and
    ``bound_dp_calls_this_run`` on lower bounds (ILP-free bounds, the variant-level branch and bound).

    ``exact`` is True only when the answer is proven: the reported best design's schedules are all proven
    optimal, and every evaluated design resting on an unproven schedule (an ILP stopped by its time limit,
    a stall or a solver failure) has a proven upper bound (``Evaluation.throughput_bound_samples_s``) that
    cannot beat the answer (Pareto and multi-workload modes: no unproven design at all). ``unproven`` lists
    every design that rests on an unproven schedule, whether or not it costs exactness (``blocks_exact``).
    """

    mode: str
    workloads: tuple[str, ...]
    exact: bool
    architectures: int
    designs: int
    best: dict[str, DesignResult | None]
    shared: SharedDesign | None
    pareto: dict[str, tuple[DesignResult, ...]]
    baseline: dict[str, DesignResult]
    evaluations: int
    evaluations_this_run: int
    pruned_by_placement_bound: int
    ilp_solves: int
    dp_calls_this_run: int
    pruning_ratio: float
    resumed_records: int
    elapsed_s: float
    space: dict[str, Any] = field(default_factory=dict)  # DesignSpace.to_dict(): what was searched
    cluster: dict[str, Any] = field(default_factory=dict)  # Cluster.to_dict(): on which system
    unproven: tuple[UnprovenDesign, ...] = ()  # search.exact.certify's rows
    objectives: tuple[str, ...] = ()  # Pareto mode: the front's objectives (search.objectives); else empty
    objective: str = "throughput"  # best and shared modes: what the best design maximises (search.objectives)
    bound_dp_calls_this_run: int = 0  # placement DP runs on lower-bound latencies (dp_calls_this_run: on scheduled ones)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        object.__setattr__(self, "workloads", tuple(self.workloads))
        object.__setattr__(self, "unproven", tuple(self.unproven))
        # a Pareto result written before fronts took other objectives traded throughput against area
        objectives = tuple(self.objectives) or (("throughput", "area") if self.mode == "pareto" else ())
        object.__setattr__(self, "objectives", objectives)
        # strict JSON has no Infinity: a cluster level that is absent has infinite bandwidth → null
        object.__setattr__(self, "cluster", {k: None if isinstance(v, float) and not math.isfinite(v) else v
                                             for k, v in self.cluster.items()})

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["workloads"] = list(self.workloads)
        data["unproven"] = [row.to_dict() for row in self.unproven]
        data["best"] = {w: d.to_dict() | self._objective_figure(d) if d else None for w, d in self.best.items()}
        data["shared"] = self.shared.to_dict() if self.shared else None
        data["objectives"] = list(self.objectives)
        data["pareto"] = {w: [d.to_dict() | {"objectives": self.objective_values(d)} for d in front]
                          for w, front in self.pareto.items()}
        data["baseline"] = {w: d.to_dict() | self._objective_figure(d) for w, d in self.baseline.items()}
        return data

    def _objective_figure(self, design: DesignResult) -> dict[str, Any]:
        """A feasible best-mode design's figure for :attr:`objective` as ``{"objectives": {name: value}}`` (the shape
        a front design's figures have), nothing otherwise."""
        if self.mode == "pareto" or not design.feasible:
            return {}
        return {"objectives": {self.objective: objective_value(design, self.objective)}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchResult:
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        values["best"] = {w: DesignResult.from_dict(d) if d else None for w, d in data["best"].items()}
        values["shared"] = SharedDesign.from_dict(data["shared"]) if data["shared"] else None
        values["pareto"] = {w: tuple(DesignResult.from_dict(d) for d in front) for w, front in data["pareto"].items()}
        values["baseline"] = {w: DesignResult.from_dict(d) for w, d in data["baseline"].items()}
        values["unproven"] = tuple(UnprovenDesign.from_dict(row) for row in data.get("unproven", ()))
        return cls(**values)

    def objective_values(self, design: DesignResult) -> dict[str, float]:
        """A front design's figure per objective of :attr:`objectives`, in :data:`search.objectives.UNITS`."""
        return {name: objective_value(design, name) for name in self.objectives}

    def exactness_lines(self) -> list[str]:
        """What a reader must know about the proof: nothing when exact and every design proven; else which
        designs rest on unproven schedules and whether that leaves the answer unproven."""
        baseline = [f"the baseline's figures for {name} rest on unproven schedules (worst gap {d.worst_gap:.2%}): "
                    "its throughput is achieved, not proven optimal" for name, d in self.baseline.items() if not d.proven]
        if not self.unproven:
            return baseline
        blocking = [row for row in self.unproven if row.blocks_exact]
        head = (f"NOT PROVEN: {len(blocking)} of the designs below may beat the answer or are the answer, and rest on "
                "ILP schedules not proven optimal (time limit, stall or solver failure)" if not self.exact else
                f"exact: proven, though {len(self.unproven)} evaluated design(s) rest on unproven schedules; their proven "
                "upper bounds cannot beat the answer")
        lines = [head]
        for row in self.unproven:
            design = Accelerator.from_dict(row.accelerator).notation()
            lines.append(f"  {row.workload} design #{row.index} ({design}): {row.throughput_samples_s:,.1f} "
                         f"samples/s achieved, ≤ {row.throughput_bound_samples_s:,.1f} proven, worst schedule gap "
                         f"{row.worst_gap:.2%}{'' if row.blocks_exact else ' (cannot beat the answer)'}")
        if not self.exact:
            lines.append("  run again when the machine is idle or with a larger --time-limit: unproven results are never "
                         "cached or resumed as final, so the rerun solves them again")
        return lines + baseline

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> SearchResult:
        return cls.from_dict(json.loads(text))
