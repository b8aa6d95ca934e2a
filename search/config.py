"""What an exact search is asked: workloads, cluster, design space, solver settings (:class:`SearchConfig`)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math

import numpy as np
from dataclasses import dataclass, field
from typing import Any, Iterable

from phaze_env.cache import code_key
from phaze_env.design import DesignSpace, SystemArchSpace, SystemDesignSpace
from phaze_env.evaluate import DEFAULT_TIME_LIMIT_S, Cluster
from phaze_env.hardware import ArchSpace
from phaze_env.hardware.system import OBJECTIVES
from phaze_env.placement.rules import expert_plan_error, valid_tensor_widths
from phaze_env.plan_spec import PlanSpec
from phaze_env.workloads import TENSOR_WIDTHS, Workload, get_workload, model_graph
from phaze_env.workloads.trace import TensorParallelError
from search.bounds import search_plan_error
from search.objectives import AREA, check_pareto_objectives, figure_text, score_figure

DEFAULT_WORKLOAD = "gpt2-xl"
AGGREGATES = ("mean", "geomean")
SEARCH_MODULE = "search.run"
"""The module that runs a search: :func:`~phaze_env.cache.code_version` of it and of all it imports is in every
search's signature."""


def splittable_widths(workloads: Iterable[str | Workload], widths: Iterable[int],
                      seq_len: int | None = None) -> tuple[tuple[int, ...], list[str]]:
    """The ``widths`` at which every workload's traced operators can be split, and one line per workload that narrows
    them. A model with a matmul that has no Megatron role (OLMoE's q_norm over the whole hidden size, say) runs at
    tensor-parallel width 1 only (:func:`~phaze_env.workloads.model.check_tensor_width`): a search over the default
    widths would stop at its first ``t > 1`` instead. What makes a model unsplittable does not depend on the width,
    so one graph at the smallest ``t > 1`` decides (cached on disk: the search reuses it)."""
    widths = tuple(widths)
    wider = [t for t in widths if t > 1]
    if not wider:
        return widths, []
    notes = []
    for workload in map(get_workload, workloads):
        if not (splits := [t for t in valid_tensor_widths(workload, wider, math.inf) if t > 1]):
            continue  # no width above 1 divides its heads: the search's own check speaks for it
        try:
            model_graph(workload, seq_len=seq_len, tensor_width=min(splits))
        except TensorParallelError as exc:
            notes.append(f"note: {workload.name} is searched at tensor-parallel width 1 only ({exc}; "
                         "--tensor-widths chooses the widths)")
    return ((1,) if 1 in widths else ()) if notes else widths, notes


@dataclass(frozen=True)
class SearchConfig:
    """One search: ``workloads`` (names), the ``cluster``, the ``space`` (every knob's values, the area
    window and the base accelerator), tensor-parallel widths, sequence length, the multi-workload
    ``aggregate``, Pareto mode and the front's ``objectives`` (two or more of
    :data:`~search.objectives.PARETO_OBJECTIVES`; all but throughput and area need the system space), ILP settings, and the ``plan`` every evaluation uses (None: PHAZE's plan space;
    a :class:`PlanSpec` or its string, e.g. ``"+e=auto+rc=none|full"`` = PHAZE's space with expert parallelism:
    its recompute field then replaces the space's recompute knob)."""

    workloads: tuple[Workload, ...]  # names or Workload values (custom models); stored as Workloads
    cluster: Cluster = field(default_factory=Cluster)
    space: DesignSpace = field(default_factory=DesignSpace)
    tensor_widths: tuple[int, ...] = TENSOR_WIDTHS
    seq_len: int | None = None
    aggregate: str = "mean"
    pareto: bool = False
    objectives: tuple[str, ...] = ("throughput", "area")  # Pareto mode's (ignored otherwise)
    second_bound: bool = True
    solver: str = "cbc"
    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    objective: str = "throughput"  # system space: any of hardware.system.OBJECTIVES
    plan: PlanSpec | None = None

    def __post_init__(self) -> None:
        workloads = {w.name: w for w in map(get_workload, self.workloads)}
        if not workloads:
            raise ValueError("a search needs at least one workload")
        object.__setattr__(self, "workloads", tuple(workloads.values()))
        if self.plan is None and isinstance(self.space, SystemDesignSpace):  # the space's stack: its plan freedom
            object.__setattr__(self, "plan", self.space.stack_plan(workload=self.workloads[0]))
        if self.plan is not None:
            object.__setattr__(self, "plan", self._checked_plan(self.plan))
        object.__setattr__(self, "tensor_widths", tuple(self.tensor_widths))
        self._check_tensor_widths()
        if isinstance(self.space, SystemDesignSpace) and len(self.workloads) > 1:
            raise ValueError("the system space searches one workload at a time (each design's cluster and HBM are "
                             "part of the design); run one search per workload")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        object.__setattr__(self, "objectives", tuple(self.objectives))
        if not self.pareto and self.objectives != ("throughput", AREA):
            raise ValueError(f"objectives {', '.join(self.objectives)} make a Pareto front: set pareto=True (the best "
                             "design maximises `objective`)")
        if self.pareto:
            check_pareto_objectives(self.objectives)
            system_only = [name for name in self.objectives if name not in ("throughput", AREA)]
            if system_only and not self.is_system:
                raise ValueError(f"the {system_only[0]} objective needs the system space (its designs have a power and "
                                 "a cost)")
        if self.objective != "throughput":
            if not isinstance(self.space, SystemDesignSpace) or self.pareto:
                raise ValueError(f"the {self.objective} objective needs the system space (its designs have a power "
                                 "and a cost) and the best-design mode (a Pareto front names it among its objectives)")
            # the ILP-free second bound compares throughput with the incumbent: another objective's units
            object.__setattr__(self, "second_bound", False)
        if self.aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {', '.join(AGGREGATES)}, got {self.aggregate!r}")

    def _check_tensor_widths(self) -> None:
        """Refuse (ValueError) tensor widths of which none can split a workload (``valid_tensor_widths``: a power of
        two dividing its attention heads, at most the devices): every design would be infeasible for that reason."""
        devices = math.inf if self.is_system else self.cluster.n_devices  # a system row's chips are its own
        for workload in self.workloads:
            if not valid_tensor_widths(workload, self.tensor_widths, devices):
                raise ValueError(f"no tensor width in {','.join(map(str, self.tensor_widths))} splits {workload.name}'s "
                                 f"{workload.num_heads or 1} attention heads (a width must be a power of two dividing "
                                 "the heads, at most the devices): every design would be infeasible")

    def _checked_plan(self, plan: PlanSpec | str) -> PlanSpec:
        """The plan as a :class:`PlanSpec`, refused (ValueError) when the search's bounds or a workload cannot take it
        (its string saying ``+e=auto`` on a dense model too: :func:`~phaze_env.evaluate.expert_plan_error`)."""
        explicit_auto = isinstance(plan, str)  # parsed text leaves e free only when it says +e=auto
        plan = PlanSpec.parse(plan) if isinstance(plan, str) else plan
        if not isinstance(plan, PlanSpec):
            raise TypeError(f"plan must be a PlanSpec or its string (e.g. '+e=auto+rc=none|full'), got {type(plan).__name__}")
        if error := search_plan_error(plan):
            raise ValueError(f"plan {plan}: {error}")
        if plan.devices is not None and not self.is_system and plan.devices != self.cluster.n_devices:
            raise ValueError(f"plan {plan} uses t·c·p·d = {plan.devices} devices but the cluster has {self.cluster.n_devices}")
        for workload in self.workloads:
            if error := expert_plan_error(plan, workload, explicit_auto):
                raise ValueError(f"plan {plan}: {error}")
        return plan

    @property
    def names(self) -> tuple[str, ...]:
        """The workloads' names (how results and the results store key them)."""
        return tuple(w.name for w in self.workloads)

    def workload(self, name: str) -> Workload:
        return self.workloads[self.names.index(name)]

    @property
    def arch(self) -> ArchSpace | SystemArchSpace:
        """The in-window architectures the search visits (the system space: its rows)."""
        return self.space.arch_space()

    @property
    def is_system(self) -> bool:
        return isinstance(self.space, SystemDesignSpace)

    @property
    def mode(self) -> str:
        """``"pareto"``, ``"shared"`` (one design for several workloads) or ``"best"``."""
        return "pareto" if self.pareto else "shared" if len(self.workloads) > 1 else "best"

    def arguments(self) -> dict[str, Any]:
        """What the answer depends on (the resume signature): not workers, output or progress."""
        return {
            "workloads": [w.to_dict() for w in self.workloads], "cluster": self.cluster.to_dict(), "space": self.space.to_dict(),
            "tensor_widths": list(self.tensor_widths), "seq_len": self.seq_len, "aggregate": self.aggregate,
            "pareto": self.pareto, "solver": self.solver, "time_limit_s": self.time_limit_s,
        } | ({"objective": self.objective} if self.objective != "throughput" else {}) | (
            {"objectives": list(self.objectives)} if self.pareto and self.objectives != ("throughput", AREA) else {}) | (
            {"plan": self.plan.to_dict()} if self.plan is not None else {})  # no plan: old searches still resume

    def run_name(self) -> str:
        """A directory name of its own for this search, the same for the same arguments (so the same command resumes
        from it) and different for different ones: the workloads, the space family, the objective or front, and 8 hex
        digits of :meth:`arguments` (e.g. ``gpt2-xl-1f3a9c0e``, ``gpt2-xl-system-throughput_per_usd-…``)."""
        digest = hashlib.sha256(json.dumps(self.arguments(), sort_keys=True).encode()).hexdigest()[:8]
        what = (["front", *self.objectives] if self.pareto else [self.objective] if self.objective != "throughput"
                else [])
        return "-".join(["+".join(self.names), *(["system"] if self.is_system else []), *what, digest])

    @property
    def signature(self) -> str:
        # the code of the run and of everything it imports (the evaluator, the bounds, the power and cost model that
        # sets a system row's chip count): a search resumes only rows computed by the same code
        return code_key(SEARCH_MODULE, "search", self.arguments())

    def objective_divisors(self, objective: str | None = None) -> np.ndarray:
        """Per row of :attr:`arch`: what the throughput is divided by for ``objective`` (default :attr:`objective`;
        all 1 for throughput)."""
        objective = objective or self.objective
        if objective == "throughput":
            return np.ones(len(self.arch))
        return np.array([point.objective_divisor(objective) for point in self.arch.points])

    def score_text(self, score: float) -> str:
        """A best-design search's score (throughput over :meth:`objective_divisors`) as :attr:`objective`'s figure
        with its unit, as the console reports incumbents and bounds (the system space has one workload)."""
        tokens_per_sample = self.seq_len or self.workloads[0].seq_len
        return figure_text(self.objective, score_figure(self.objective, score, tokens_per_sample))

    def per_capacity(self) -> list[SearchConfig]:
        """The one-design (shared) mode searches each HBM capacity on its own: one config per capacity."""
        return [dataclasses.replace(self, space=dataclasses.replace(self.space, hbm_gb=(capacity,)))
                for capacity in self.space.hbm_gb]

    def signatures(self) -> list[str]:
        """Every signature under which this search stores rows in ``results.db``."""
        extra = [c.signature for c in self.per_capacity()] if self.mode == "shared" else []
        return [self.signature, *extra]

    def task(self, workload: str, index: int, prune_below: float | None) -> dict[str, Any]:
        """The unit of work for :func:`search.tasks.evaluate_design` (plain data: it crosses processes)."""
        space, arch = self.space, self.arch
        accelerator = arch[index]
        system = isinstance(arch, SystemArchSpace)  # a system row has its own cluster (chips at the budget) and HBM
        cluster = arch.cluster(index, self.cluster) if system else self.cluster
        hbm_gb = [accelerator.hbm_gb] if system else list(space.hbm_gb)
        return {"workload": self.workload(workload), "accelerator": accelerator.to_dict(), "cluster": cluster.to_dict(),
                "microbatch": list(space.microbatch), "recompute": list(space.recompute), "hbm_gb": hbm_gb,
                "tensor_widths": list(self.tensor_widths), "seq_len": self.seq_len, "solver": self.solver,
                "time_limit_s": self.time_limit_s, "prune_below": prune_below,
                "plan": None if self.plan is None else self.plan.to_dict()}


def aggregate(values: Iterable[float], how: str) -> float:
    """The multi-workload objective: arithmetic or geometric mean (0 if any workload is infeasible)."""
    values = list(values)
    if how == "geomean":
        return 0.0 if min(values) <= 0 else float(math.exp(sum(math.log(v) for v in values) / len(values)))
    return float(sum(values) / len(values))
