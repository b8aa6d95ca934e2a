"""A design point and the design space: the one definition every search face uses.

Every search face (exact search, Gymnasium envs, Optuna objective, baselines) speaks the same two
values: a :class:`Design` (what to build and how to train on it) and a :class:`DesignSpace` (the
ordered value list of each knob, the area window and the base accelerator, with index ↔ design encoding
for ``MultiDiscrete`` actions). The value lists and the window rule themselves live in
:mod:`phaze_env.hardware.space`; ``DesignSpace()`` is PHAZE's full space and ``DesignSpace.reduced()``
the small one every ``--space reduced`` option means.

Faces are generic over the space: they read the knob order from :attr:`DesignSpace.knobs`, the prefix of it
that decides the area window from :attr:`DesignSpace.area_knobs`, and evaluate through
:meth:`DesignSpace.evaluate` / :meth:`DesignSpace.evaluate_baseline`; a space with more knobs plugs in by
setting those and :meth:`DesignSpace.area_terms` (its area and area budget per design). :func:`evaluate_design` is
:func:`phaze_env.evaluate.evaluate` restricted to the design's own microbatch size, recompute setting
and HBM capacity — so the best design of a space has exactly the throughput ``search.phaze`` reports
for that space. See ``docs/design.md``.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from phaze_env.cluster import point_cluster, reference_cluster
from phaze_env.evaluate import Cluster, Evaluation, EvaluationOptions, evaluate, unbuilt_evaluation
from phaze_env.hardware import TPUV4, Accelerator, ArchSpace
from phaze_env.hardware.area import arch_area_mm2
from phaze_env.hardware.cost import compute_die_area_mm2, get_node
from phaze_env.hardware.space import (AREA_WINDOW_LOWER, ARCH_KNOBS, BUFFER_MB_VALUES, HBM_GB_VALUES, KNOBS,
                                      MICROBATCH_VALUES, NUM_TC_VALUES, NUM_VC_VALUES, RECOMPUTE_VALUES,
                                      SYSTEM_AREA_KNOBS, SYSTEM_DEFAULT_VALUES, SYSTEM_KNOBS,
                                      TC_DIM_VALUES, area_budget_mm2, area_overshoot, area_slack, in_area_window)
from phaze_env.hardware.system import (AREA_OBJECTIVE, SYSTEM_NODE, SystemBudget, SystemChoice, SystemPoint,
                                       check_rival, reference_point, system_point)
from phaze_env.plan_spec import PlanSpec
from phaze_env.stacks import DEFAULT_SYSTEM_STACK, SystemStack, get_system_stack
from phaze_env.workloads import Workload, get_workload

SPACE_NAMES = ("full", "reduced", "system")
SYSTEM_FIELDS = ("die_area_mm2", "hbm_stacks", "hbm_generation", "links", "link_GBps", "topology", "number_format")
"""The :class:`Design` fields only system-space designs set (:class:`~phaze_env.hardware.system.SystemChoice`)."""


@dataclass(frozen=True)
class Design:
    """Tensor cores (count × width × depth), vector cores (count; width = tensor-core width), on-chip
    buffer (MB), HBM capacity (GiB), microbatch size and whether activation recompute is allowed (fields in
    :data:`KNOBS` order)."""

    num_tc: int
    tc_width: int
    tc_depth: int
    num_vc: int
    buffer_mb: int
    hbm_gb: float
    microbatch: int
    recompute: bool
    # system-space knobs (None in PHAZE's spaces; the HBM capacity is then stacks × the generation's)
    die_area_mm2: float | None = None
    hbm_stacks: int | None = None
    hbm_generation: str | None = None
    links: int | None = None
    link_GBps: float | None = None
    topology: str | None = None
    number_format: str | None = None

    @property
    def is_system(self) -> bool:
        """A design of the system space (its system fields are set)."""
        return self.topology is not None

    def system_choice(self) -> SystemChoice:
        if not self.is_system:
            raise ValueError(f"{self} is not a system-space design (its system fields are unset)")
        return SystemChoice(**{name: getattr(self, name) for name in SYSTEM_FIELDS})

    def architecture(self, base: Accelerator = TPUV4) -> Accelerator:
        """``base`` with the architecture knobs (cores, buffer, HBM capacity) and nothing of the system knobs."""
        return base.replace(num_tc=self.num_tc, tc_width=self.tc_width, tc_depth=self.tc_depth, num_vc=self.num_vc,
                            vc_width=self.tc_width, buffer_mb=self.buffer_mb, hbm_gb=float(self.hbm_gb))

    def accelerator(self, base: Accelerator = TPUV4) -> Accelerator:
        """The chip: :meth:`architecture`; a system design also takes its HBM (capacity, bandwidth, efficiency) and
        the system space's GEMM efficiency (:meth:`SystemChoice.accelerator`)."""
        arch = self.architecture(base)
        return self.system_choice().accelerator(arch) if self.is_system else arch

    def __str__(self) -> str:
        """:meth:`Accelerator.notation` plus the training knobs (env ``render``, studies, Optuna)."""
        system = f" · {self.system_choice().describe()}" if self.is_system else ""
        return (f"{self.accelerator().notation()}{system} · microbatch {self.microbatch} · "
                f"recompute {'allowed' if self.recompute else 'off'}")

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set (a field left at ``None`` belongs to another space's knobs and is omitted, so
        a design's JSON reads the same whichever fields later spaces add)."""
        return {name: value for name, value in asdict(self).items() if value is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Design:
        """Inverse of :meth:`to_dict`: omitted fields with a default take it; unknown or missing ones raise."""
        known = {f.name: f for f in fields(cls)}
        unknown = set(data) - set(known)
        if unknown:
            raise ValueError(f"unknown design fields {sorted(unknown)}; expected {sorted(known)}")
        missing = sorted(name for name, f in known.items() if name not in data and f.default is MISSING)
        if missing:
            raise ValueError(f"design fields {missing} missing; expected {sorted(known)}")
        return cls(**data)


@dataclass(frozen=True)
class AreaTables:
    """``ok[i_1, …, i_n]`` (inside the window) and ``overshoot[...]`` over the indices of a space's
    :attr:`~DesignSpace.area_knobs` (PHAZE: ``[i_tc, i_w, i_d, i_vc, i_buf]``)."""

    ok: np.ndarray
    overshoot: np.ndarray

    @functools.cached_property
    def inside(self) -> np.ndarray:
        """Flat indices of the in-window combinations (:meth:`DesignSpace.sample` draws among them)."""
        return np.flatnonzero(self.ok)

    def knob_masks(self, space: DesignSpace) -> list[np.ndarray]:
        """Per knob of ``space.knobs``: values with at least one completion inside the window (others: all True)."""
        masks = []
        area_knobs = space.area_knobs
        for name in space.knobs:
            if name in area_knobs:
                axis = area_knobs.index(name)
                masks.append(self.ok.any(axis=tuple(a for a in range(len(area_knobs)) if a != axis)))
            else:
                masks.append(np.ones(len(space.values(name)), dtype=bool))
        return masks

    def prefix(self, indices: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """For the next area knob after the ``indices`` of the previous ones: which values keep a completion
        inside the window, and each value's smallest overshoot over all completions."""
        ok = self.ok[tuple(indices)]
        over = self.overshoot[tuple(indices)]
        n = ok.shape[0]
        return ok.reshape(n, -1).any(axis=1), over.reshape(n, -1).min(axis=1)


@dataclass(frozen=True)
class DesignSpace:
    """Ordered value lists per knob in :attr:`knobs` order (PHAZE's space by default), the area window and the
    base accelerator. ``len(space)`` and iteration count the same designs: those inside the area window.

    ``base`` supplies every accelerator field the knobs do not set (HBM bandwidth, clock, element size);
    ``budget_mm2`` is the area budget (default: the TPUv4-like configuration's architecture area).
    """

    num_tc: tuple[int, ...] = NUM_TC_VALUES
    tc_width: tuple[int, ...] = TC_DIM_VALUES
    tc_depth: tuple[int, ...] = TC_DIM_VALUES
    num_vc: tuple[int, ...] = NUM_VC_VALUES
    buffer_mb: tuple[int, ...] = BUFFER_MB_VALUES
    hbm_gb: tuple[float, ...] = HBM_GB_VALUES
    microbatch: tuple[int, ...] = MICROBATCH_VALUES
    recompute: tuple[bool, ...] = RECOMPUTE_VALUES
    budget_mm2: float = field(default_factory=area_budget_mm2)
    area_window_lower: float = AREA_WINDOW_LOWER
    base: Accelerator = TPUV4

    def __post_init__(self) -> None:
        for name in self.knobs:
            values = tuple(getattr(self, name))
            if not values:
                raise ValueError(f"{type(self).__name__}.{name} must list at least one value")
            if len(set(values)) != len(values):
                raise ValueError(f"{type(self).__name__}.{name} has duplicate values: {values}")
            object.__setattr__(self, name, values)
        if any(isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1 for m in self.microbatch):
            raise ValueError(f"{type(self).__name__}.microbatch must be positive integers, got {self.microbatch}")
        if any(not h > 0 for h in self.hbm_gb):
            raise ValueError(f"{type(self).__name__}.hbm_gb must be positive, got {self.hbm_gb}")
        if not self.budget_mm2 > 0:
            raise ValueError(f"area budget must be positive, got {self.budget_mm2!r} mm²")
        if not isinstance(self.base, Accelerator):
            raise TypeError(f"DesignSpace.base must be an Accelerator, got {type(self.base).__name__}")

    # --- named spaces ------------------------------------------------------------------------------
    @classmethod
    def reduced(cls, **overrides: Any) -> DesignSpace:
        """The small space every ``--space reduced`` means (576 knob combinations; tests, smoke runs,
        brute-force checks). ``overrides`` replace individual value lists."""
        values = dict(num_tc=(1, 4, 16), tc_width=(32, 128), tc_depth=(32, 128), num_vc=(1, 4, 16), buffer_mb=(8, 64),
                      hbm_gb=(32.0, 80.0), microbatch=(1, 4), recompute=(False, True))
        return cls(**(values | overrides))

    @classmethod
    def named(cls, name: str, **overrides: Any) -> DesignSpace:
        """``"full"`` (PHAZE's space), ``"reduced"`` or ``"system"`` (:class:`SystemDesignSpace`; its
        ``budget_w`` / ``budget_usd`` set the cluster budget), with ``overrides`` (value lists, budget, base)."""
        if name == "full":
            return cls(**overrides)
        if name == "reduced":
            return cls.reduced(**overrides)
        if name == "system":
            budget = SystemBudget.of(overrides.pop("budget_w", None), overrides.pop("budget_usd", None),
                                     overrides.pop("nre_chips", None))
            return SystemDesignSpace(budget=budget, **overrides)
        raise ValueError(f"unknown space {name!r}; choose from {', '.join(SPACE_NAMES)}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: value lists, budget, window, the base accelerator and the knob order (which numbers the
        architectures and actions, so a stored index never outlives a change of it)."""
        return {name: list(self.values(name)) for name in self.knobs} | {
            "budget_mm2": self.budget_mm2, "area_window_lower": self.area_window_lower, "base": self.base.to_dict(),
            "knobs": list(self.knobs)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DesignSpace:
        """Inverse of :meth:`to_dict` (of this space or of :class:`SystemDesignSpace`, which its ``"space"`` names)."""
        knobs = {name: tuple(data[name]) for name in data["knobs"]}
        common = {"area_window_lower": data["area_window_lower"], "base": Accelerator.from_dict(data["base"])}
        if data.get("space") == "system":  # a space stored before it had a stack ran PHAZE's plan space
            return SystemDesignSpace(**knobs, budget=SystemBudget(**data["budget"]), stack=data.get("stack", "phaze"),
                                     node=data.get("node", SYSTEM_NODE), **common)
        return DesignSpace(**knobs, budget_mm2=data["budget_mm2"], **common)

    # --- knobs ---------------------------------------------------------------------------------------
    @property
    def knobs(self) -> tuple[str, ...]:
        """This space's knob order (the :class:`Design` fields it sets; numbers actions and stored indices):
        :attr:`area_knobs` first, then :attr:`other_knobs`."""
        return KNOBS

    @property
    def area_knobs(self) -> tuple[str, ...]:
        """The prefix of :attr:`knobs` that decides whether a design is inside the area window (a knob-per-step
        agent knows the window after the last of them)."""
        return ARCH_KNOBS

    @property
    def other_knobs(self) -> tuple[str, ...]:
        """The knobs after :attr:`area_knobs` (they never move a design across the area window)."""
        return self.knobs[len(self.area_knobs):]

    @property
    def nvec(self) -> list[int]:
        """Number of choices per knob (a ``gymnasium.spaces.MultiDiscrete`` shape)."""
        return [len(self.values(name)) for name in self.knobs]

    def values(self, knob: str) -> tuple:
        if knob not in self.knobs:
            raise ValueError(f"unknown knob {knob!r}; this space's knobs: {', '.join(self.knobs)}")
        return getattr(self, knob)

    def decode(self, indices: Sequence[int]) -> Design:
        knobs = self.knobs
        if len(indices) != len(knobs):
            raise ValueError(f"expected {len(knobs)} knob indices ({', '.join(knobs)}), got {len(indices)}")
        kwargs = {}
        for name, index in zip(knobs, indices):
            options = self.values(name)
            if not 0 <= int(index) < len(options):
                raise ValueError(f"index {index} out of range for knob {name} ({len(options)} values)")
            kwargs[name] = options[int(index)]
        return self._design(kwargs)

    def _design(self, knobs: dict[str, Any]) -> Design:
        """The design with these knob values (a space whose designs carry derived fields sets them here)."""
        return Design(**knobs)

    def encode(self, design: Design) -> list[int]:
        try:
            return [self.values(name).index(getattr(design, name)) for name in self.knobs]
        except ValueError:
            raise ValueError(f"{design} is not in this design space") from None

    def __contains__(self, design: object) -> bool:
        """A design whose every knob value is in the lists and whose area is inside the window."""
        if not isinstance(design, Design):
            return False
        return all(getattr(design, name) in self.values(name) for name in self.knobs) and self.area_ok(design)

    # --- area and the area window ---------------------------------------------------------------------
    def area_terms(self, columns: Mapping[str, Any]) -> tuple[Any, Any]:
        """Architecture area and area budget (mm²) of designs given by their :attr:`area_knobs` values (scalars,
        or numpy arrays of one shape: vectorised). PHAZE's budget is one number; a space whose budget depends on
        its knobs returns it per design. Every window rule of the space applies these two figures."""
        area = arch_area_mm2(columns["num_tc"], columns["tc_width"], columns["tc_depth"], columns["num_vc"],
                             columns["tc_width"], columns["buffer_mb"], self.base.vc_sublanes)
        return area, self.budget_mm2

    def _window_terms(self, design: Design) -> tuple[Any, Any, float, float]:
        """``(num_tc, num_vc, area, budget)`` of one design: what the window rules take."""
        columns = {name: getattr(design, name) for name in self.area_knobs}
        area, budget = self.area_terms(columns)
        return columns["num_tc"], columns["num_vc"], float(area), float(budget)

    def objective_score(self, design: Design, throughput_samples_s: float, objective: str) -> float:
        """A design's score on one objective, maximised as the exact search maximises it: throughput (samples/s) or
        minus the architecture's area (:data:`~phaze_env.hardware.system.AREA_OBJECTIVE`); the rates per W and per $
        need a built system (:meth:`SystemDesignSpace.objective_score`). The one definition every strategy, the env,
        the Optuna objective and the benchmark tasks score a design by."""
        if objective == "throughput":
            return float(throughput_samples_s)
        if objective == AREA_OBJECTIVE:
            return -float(self.area_mm2(design))
        raise ValueError(f"objective {objective!r} needs the system space (a built system's watts and dollars); "
                         "PHAZE's spaces score throughput and area")

    def area_mm2(self, design: Design) -> float:
        """The design's architecture area on this space's base (whose vector-core depth the area counts)."""
        return self._window_terms(design)[2]

    def area_budget_for(self, design: Design) -> float:
        """The area budget the design's architecture must fit (PHAZE: :attr:`budget_mm2` for every design)."""
        return self._window_terms(design)[3]

    def area_fraction(self, design: Design) -> float:
        """:meth:`area_mm2` / :meth:`area_budget_for` (``inf`` when nothing fits: a budget ≤ 0)."""
        budget = self.area_budget_for(design)
        return self.area_mm2(design) / budget if budget > 0 else math.inf

    def area_ok(self, design: Design) -> bool:
        """Inside the area window (:func:`phaze_env.hardware.space.in_area_window`)."""
        return bool(in_area_window(*self._window_terms(design), self.area_window_lower))

    def overshoot(self, design: Design) -> float:
        """Relative area violation (0 inside the window; :func:`phaze_env.hardware.space.area_overshoot`)."""
        return float(area_overshoot(*self._window_terms(design), self.area_window_lower))

    def area_slack(self, design: Design) -> float:
        """Relative distance to the nearest active window edge (≥ 0 inside; :func:`~phaze_env.hardware.space.area_slack`)."""
        return float(area_slack(*self._window_terms(design), self.area_window_lower))

    def area_tables(self) -> AreaTables:
        """:meth:`area_ok` / :meth:`overshoot` over every combination of the area knobs (cached)."""
        return _area_tables(self)

    # --- counting and enumeration ----------------------------------------------------------------------
    def __len__(self) -> int:
        """:attr:`designs`: what iterating the space yields."""
        return self.designs

    @property
    def combinations(self) -> int:
        """Knob combinations, inside the area window or not (what a ``MultiDiscrete`` action or a brute-force
        sampler over the indices enumerates)."""
        return math.prod(self.nvec)

    @property
    def knob_settings(self) -> int:
        """Combinations of the knobs that do not set the area (:attr:`other_knobs`)."""
        return math.prod(len(self.values(name)) for name in self.other_knobs)

    @property
    def designs(self) -> int:
        """Designs inside the area window: in-window combinations of the area knobs × :attr:`knob_settings`."""
        return int(self.area_tables().ok.sum()) * self.knob_settings

    def __iter__(self) -> Iterator[Design]:
        """Every design inside the area window, in knob-index order."""
        area_values = [self.values(name) for name in self.area_knobs]
        other_values = [self.values(name) for name in self.other_knobs]
        for indices in zip(*np.nonzero(self.area_tables().ok)):  # row-major: knob-index order
            head = {name: options[i] for name, options, i in zip(self.area_knobs, area_values, indices)}
            for tail in itertools.product(*other_values):
                yield self._design(head | dict(zip(self.other_knobs, tail)))

    def sample(self, rng: np.random.Generator, *, feasible_area: bool = True) -> Design:
        """A design drawn uniformly from the space, or (``feasible_area``) from the designs inside the area window:
        the area knobs' indices uniformly among the in-window combinations (:meth:`area_tables`), the other knobs
        uniformly — the distribution of rejection sampling without its tries (at a 5 % window most draws were
        rejected, and a strategy's candidate pools spent most of their time there)."""
        if not feasible_area:
            return self.decode([int(rng.integers(n)) for n in self.nvec])
        inside = self.area_tables().inside
        if inside.size == 0:
            raise RuntimeError("no design lies inside the area window")
        prefix = np.unravel_index(int(inside[rng.integers(inside.size)]), self.area_tables().ok.shape)
        return self.decode([int(i) for i in prefix] + [int(rng.integers(len(self.values(k)))) for k in self.other_knobs])

    def arch_space(self) -> ArchSpace:
        """The in-window architectures (same value lists, window and base) that ``search.phaze`` visits."""
        return _arch_space(self.num_tc, self.num_vc, self.tc_width, self.tc_depth, self.buffer_mb, self.budget_mm2,
                           self.area_window_lower, self.base)


    # --- evaluation: the one door every face goes through --------------------------------------------------
    def evaluate(self, design: Design, workload: str | Workload, cluster: Cluster | None = None,
                 **kwargs: Any) -> Evaluation:
        """:func:`evaluate_design` of one design of this space (on its base); ``kwargs``: :func:`evaluate` options."""
        return evaluate_design(design, workload, cluster, base=self.base, **kwargs)

    def evaluate_baseline(self, workload: str | Workload, cluster: Cluster | None = None,
                          **kwargs: Any) -> Evaluation:
        """The reference design this space's results are compared with: the TPUv4-like accelerator, best over the
        space's microbatch sizes, recompute settings and HBM capacities (``search.phaze``'s baseline)."""
        return evaluate(workload, TPUV4, cluster, microbatch=self.values("microbatch"),
                        recompute=self.values("recompute"), hbm_gb=self.values("hbm_gb"), **kwargs)


def _system_field(values: Sequence) -> Any:
    return field(default=tuple(values))


@dataclass(frozen=True)
class SystemDesignSpace(DesignSpace):
    """The system design space: :data:`SYSTEM_KNOBS` — die area, HBM stacks, links per chip, bandwidth per
    link and the tensor cores' number format (the area knobs), PHAZE's architecture knobs, then HBM generation,
    topology family, microbatch and recompute — at a cluster ``budget`` that sets every design's chip count
    (:mod:`phaze_env.hardware.system`). The window of the architecture knobs is PHAZE's rule applied to the
    compute block on the die against ``die − HBM PHYs − SerDes − IO`` (``budget_mm2`` and ``hbm_gb`` are
    unused: the budget follows the die, the capacity the stacks). ``len``, iteration, encoding and sampling work
    over :attr:`knobs` as in PHAZE's spaces."""

    num_tc: tuple[int, ...] = _system_field(SYSTEM_DEFAULT_VALUES["num_tc"])
    tc_width: tuple[int, ...] = _system_field(SYSTEM_DEFAULT_VALUES["tc_width"])
    tc_depth: tuple[int, ...] = _system_field(SYSTEM_DEFAULT_VALUES["tc_depth"])
    num_vc: tuple[int, ...] = _system_field(SYSTEM_DEFAULT_VALUES["num_vc"])
    buffer_mb: tuple[int, ...] = _system_field(SYSTEM_DEFAULT_VALUES["buffer_mb"])
    die_area_mm2: tuple[float, ...] = _system_field(SYSTEM_DEFAULT_VALUES["die_area_mm2"])
    hbm_stacks: tuple[int, ...] = _system_field(SYSTEM_DEFAULT_VALUES["hbm_stacks"])
    links: tuple[int, ...] = _system_field(SYSTEM_DEFAULT_VALUES["links"])
    link_GBps: tuple[float, ...] = _system_field(SYSTEM_DEFAULT_VALUES["link_GBps"])
    hbm_generation: tuple[str, ...] = _system_field(SYSTEM_DEFAULT_VALUES["hbm_generation"])
    topology: tuple[str, ...] = _system_field(SYSTEM_DEFAULT_VALUES["topology"])
    number_format: tuple[str, ...] = _system_field(SYSTEM_DEFAULT_VALUES["number_format"])
    budget: SystemBudget = field(default_factory=SystemBudget)
    stack: str = DEFAULT_SYSTEM_STACK  # the training stack every design and reference runs ("phaze": PHAZE's, none)
    node: str = SYSTEM_NODE  # the process node every design is built at (a name of hardware.cost.NODES)

    def __post_init__(self) -> None:
        get_system_stack(self.stack)  # an unknown name: one line naming the known ones
        object.__setattr__(self, "node", get_node(self.node).name)  # a node without data: one line naming those with
        super().__post_init__()  # every knob's list (the system fields are knobs): non-empty, no duplicates
        for choice in itertools.product(*(getattr(self, name) for name in SYSTEM_FIELDS)):
            SystemChoice(*choice)  # every combination must be a valid system (torus links, reticle, names)
        if not isinstance(self.budget, SystemBudget):
            raise TypeError(f"SystemDesignSpace.budget must be a SystemBudget, got {type(self.budget).__name__}")

    @property
    def knobs(self) -> tuple[str, ...]:
        return SYSTEM_KNOBS

    @property
    def area_knobs(self) -> tuple[str, ...]:
        return SYSTEM_AREA_KNOBS + ARCH_KNOBS

    def to_dict(self) -> dict[str, Any]:
        return {name: list(getattr(self, name)) for name in SYSTEM_KNOBS} | {
            "space": "system", "budget": self.budget.to_dict(), "area_window_lower": self.area_window_lower,
            "base": self.base.to_dict(), "knobs": list(SYSTEM_KNOBS), "stack": self.stack} | (
            {"node": self.node} if self.node != SYSTEM_NODE else {})  # the default node: stored spaces keep their dict

    # --- the training stack: the same on every chip ---------------------------------------------------------
    @property
    def system_stack(self) -> SystemStack | None:
        """The stack every design and reference of this space runs (None: PHAZE's plan space and the given cluster's
        efficiency, no stack)."""
        return get_system_stack(self.stack)

    def stack_plan(self, recompute_allowed: bool | None = None, workload: str | Workload | None = None) -> PlanSpec | None:
        """The plan freedom every evaluation of this space searches (None: PHAZE's); ``recompute_allowed`` defaults to
        the space's recompute knob allowing it; a mixture-of-experts ``workload`` also searches its expert-parallel
        degree (as Megatron-Core's ``--expert-model-parallel-size``)."""
        stack = self.system_stack
        if stack is None:
            return None
        plan = stack.plan_spec(True in self.recompute if recompute_allowed is None else recompute_allowed)
        moe = workload is not None and get_workload(workload).num_experts
        return dataclasses.replace(plan, e=None) if moe else plan

    def design_training(self, cluster: Cluster | None) -> Cluster:
        """``cluster``'s setup running this space's stack on a searched chip (its efficiency by
        :meth:`~phaze_env.stacks.SystemStack.design_fit`); unchanged without a stack."""
        stack, cluster = self.system_stack, cluster or Cluster()
        return cluster if stack is None else stack.design_training(cluster, self.base)

    def reference_training(self, name: str, cluster: Cluster | None) -> Cluster:
        """``cluster``'s setup running this space's stack on reference chip ``name`` (an unknown rival: one
        :class:`~phaze_env.hardware.system.UnknownRivalError` line)."""
        check_rival(name)
        stack, cluster = self.system_stack, cluster or Cluster()
        return cluster if stack is None else stack.training(cluster, name)

    def stack_note(self) -> str:
        """One line on the stack this space runs and the efficiency its searched chips take (the output says so)."""
        stack = self.system_stack
        if stack is None:
            return ("training stack phaze: PHAZE's plan space (t, p, d, microbatch, none|full recompute), eager "
                    "attention, the cluster's framework efficiency on every chip")
        return stack.design_note(self.base)

    def _design(self, knobs: dict[str, Any]) -> Design:
        choice = SystemChoice(**{name: knobs[name] for name in SYSTEM_FIELDS})
        return Design(**knobs, hbm_gb=choice.hbm_gb)

    # --- the window: the compute block against die − periphery ------------------------------------------
    def _window_terms(self, design: Design) -> tuple[Any, Any, float, float]:
        """``(num_tc, num_vc, area, budget)``: the compute block of the design's die (mm²; the window quantity of the
        system space, so :meth:`area_mm2`) and its budget, die − HBM PHYs − SerDes − IO (≤ 0: nothing fits;
        :meth:`area_budget_for`)."""
        arch, choice = design.architecture(self.base), design.system_choice()
        area, budget = choice.window_terms_mm2(arch, self.node)
        return design.num_tc, design.num_vc, area, budget

    def _window(self, design: Design, rule) -> float:
        num_tc, num_vc, area, budget = self._window_terms(design)
        if budget <= 0:  # the periphery fills the die: no compute fits
            return {in_area_window: False, area_overshoot: math.inf, area_slack: -math.inf}[rule]
        return rule(num_tc, num_vc, area, budget, self.area_window_lower)

    def area_ok(self, design: Design) -> bool:
        return bool(self._window(design, in_area_window))

    def overshoot(self, design: Design) -> float:
        return float(self._window(design, area_overshoot))

    def area_slack(self, design: Design) -> float:
        return float(self._window(design, area_slack))

    def area_tables(self) -> AreaTables:
        return _system_area_tables(self)

    def arch_space(self) -> SystemArchSpace:
        """The search's rows: every in-window design without its microbatch and recompute (which one
        evaluation covers), whose budget buys at least one topology unit."""
        return _system_arch_space(self)

    # --- the system at the budget -------------------------------------------------------------------------
    def objective_score(self, design: Design, throughput_samples_s: float, objective: str) -> float:
        """:meth:`DesignSpace.objective_score` in the system space: the rates over the built system's watts or dollars
        (:meth:`~phaze_env.hardware.system.SystemPoint.objective_divisor`), the area the whole built die's. A design
        whose budget buys no chip trains nothing and spends nothing: its rate scores 0 (the worst), not 0 / 0."""
        if objective == "throughput":
            return float(throughput_samples_s)
        point = self.point(design)
        if objective == AREA_OBJECTIVE:
            return -float(point.estimate.die_area_mm2)
        divisor = point.objective_divisor(objective)
        return float(throughput_samples_s) / divisor if divisor > 0 else 0.0

    def point(self, design: Design) -> SystemPoint:
        """The design's chip (at this space's node) and chip count at this space's budget."""
        chip, chip_system, topology = design.accelerator(self.base), design.system_choice().chip_system(self.node), \
            design.topology
        return system_point(chip, chip_system, topology, self.budget)

    def evaluate(self, design: Design, workload: str | Workload, cluster: Cluster | None = None,
                 **kwargs: Any) -> Evaluation:
        """:func:`evaluate_design` at this space's base and budget, running its stack (its plan freedom unless
        ``plan`` is given: full recompute only where the design's recompute knob allows it)."""
        if self.system_stack is not None and kwargs.get("plan") is None:
            kwargs["plan"] = self.stack_plan(bool(design.recompute), workload)
        return evaluate_design(design, workload, self.design_training(cluster), base=self.base, budget=self.budget,
                               node=self.node, **kwargs)

    def evaluate_baseline(self, workload: str | Workload, cluster: Cluster | None = None,
                          **kwargs: Any) -> Evaluation:
        """The TPUv4 chip in a torus at this space's budget (:func:`reference_system` of ``"tpuv4"``,
        ``search.phaze``'s system baseline), best over the space's microbatch sizes and recompute settings."""
        return self.evaluate_reference("tpuv4", workload, cluster, **kwargs)

    def evaluate_reference(self, name: str, workload: str | Workload, cluster: Cluster | None = None,
                           number_format: str = "bf16", **kwargs: Any) -> Evaluation:
        """Reference system ``name`` (TPUv4 torus, A100 or H100 DGX:
        :data:`~phaze_env.hardware.system.REFERENCE_TOPOLOGIES`) with the chips this space's budget buys
        (:func:`~phaze_env.hardware.system.reference_point`) on its cluster
        (:func:`~phaze_env.cluster.reference_cluster`; ``cluster`` gives the setup and the stack), training in
        ``number_format``, best over the space's microbatch sizes and recompute settings; infeasible (saying so)
        when the budget buys not one whole node or torus cube of the reference chip."""
        point, built = reference_system(name, self.budget, number_format, self.reference_training(name, cluster))
        if built is None:
            return unbuilt_evaluation(workload, point.accelerator, point.topology, f"{name}: {point.unbuildable_reason}")
        if self.system_stack is not None and kwargs.get("plan") is None:
            kwargs["plan"] = self.stack_plan(workload=workload)
        return evaluate(workload, point.accelerator, built, microbatch=self.microbatch,
                        recompute=self.recompute, hbm_gb=(point.accelerator.hbm_gb,), **kwargs)


@dataclass(frozen=True)
class SystemArchSpace:
    """The rows the exact search visits in the system space, in knob-index order: each a design without its
    microbatch and recompute, with its :class:`SystemPoint` (chip, chip count). ``len``, ``space[i]`` (the
    accelerator) and ``arrays["area_mm2"]`` (the whole die) as :class:`ArchSpace`; rows whose budget buys no
    topology unit are left out (they cannot train at all)."""

    space: SystemDesignSpace
    designs: tuple[Design, ...]
    points: tuple[SystemPoint, ...]
    arrays: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.designs)

    def __getitem__(self, i: int) -> Accelerator:
        return self.points[i].accelerator

    def cluster(self, i: int, base: Cluster | None = None) -> Cluster:
        """Row ``i``'s cluster: its point's network with ``base``'s setup running the space's stack."""
        return point_cluster(self.points[i], self.space.design_training(base))

    def system_summary(self, i: int) -> dict[str, Any]:
        """Row ``i``'s system knobs and figures (what results carry as ``system``)."""
        return self.designs[i].system_choice().to_dict() | self.points[i].summary()


MAX_SYSTEM_CHIPS = 10_000_000
"""The most chips a system-space design may be built with: 10 million. Assumption, 50× the largest training
cluster reported built (xAI's Colossus, 200,000 GPUs in 2025) and beyond any announced one; a budget that buys
more is a typo (e.g. ``--budget-mw 1e30``), and counts beyond 2**63 overflow the search's integer arrays."""


@functools.lru_cache(maxsize=8)
def _system_arch_space(space: SystemDesignSpace) -> SystemArchSpace:
    designs, points = [], []
    for design in space:
        if design.microbatch != space.microbatch[0] or design.recompute != space.recompute[0]:
            continue  # one row per design head; the row's evaluation covers every microbatch and recompute
        point = space.point(design)
        if point.n_devices > MAX_SYSTEM_CHIPS:
            count = f"{point.n_devices:,}" if point.n_devices < 1e12 else f"{float(point.n_devices):.3g}"
            raise ValueError(f"a {space.budget.describe()} budget buys {count} chips of "
                             f"{design.system_choice().describe()}, more than any buildable system "
                             f"({MAX_SYSTEM_CHIPS:,} chips at most): give a smaller budget")
        if point.n_devices >= 1:
            designs.append(design)
            points.append(point)
    area = np.array([p.estimate.die_area_mm2 for p in points], dtype=np.float64)
    area.setflags(write=False)
    return SystemArchSpace(space, tuple(designs), tuple(points), {"area_mm2": area})


@functools.lru_cache(maxsize=8)
def _system_area_tables(space: SystemDesignSpace) -> AreaTables:
    grids = np.meshgrid(*(np.asarray(space.values(k), dtype=np.int64) for k in ARCH_KNOBS), indexing="ij")
    arch = dict(zip(ARCH_KNOBS, grids))
    system_shape = [len(space.values(k)) for k in SYSTEM_AREA_KNOBS]
    ok = np.zeros(system_shape + list(grids[0].shape), dtype=bool)
    overshoot = np.full(ok.shape, np.inf)
    for combo in itertools.product(*(range(n) for n in system_shape)):
        knobs = {name: space.values(name)[i] for name, i in zip(SYSTEM_AREA_KNOBS, combo)}
        choice = SystemChoice(**knobs, hbm_generation=space.hbm_generation[0], topology=space.topology[0])
        budget = choice.compute_budget_mm2(space.node)
        if budget <= 0:
            continue
        arch_area = arch_area_mm2(arch["num_tc"], arch["tc_width"], arch["tc_depth"], arch["num_vc"], arch["tc_width"],
                                  arch["buffer_mb"], space.base.vc_sublanes, choice.number_format)
        compute = compute_die_area_mm2(arch_area, arch["buffer_mb"], choice.chip_system(space.node))
        ok[combo] = in_area_window(arch["num_tc"], arch["num_vc"], compute, budget, space.area_window_lower)
        overshoot[combo] = area_overshoot(arch["num_tc"], arch["num_vc"], compute, budget, space.area_window_lower)
    ok.setflags(write=False)
    overshoot.setflags(write=False)
    return AreaTables(ok, overshoot)


@functools.lru_cache(maxsize=16)
def _arch_space(num_tc, num_vc, tc_width, tc_depth, buffer_mb, budget_mm2, lower, base) -> ArchSpace:
    return ArchSpace(num_tc=num_tc, num_vc=num_vc, tc_width=tc_width, tc_depth=tc_depth, buffer_mb=buffer_mb,
                     budget_mm2=budget_mm2, area_window_lower=lower, base=base)


@functools.lru_cache(maxsize=32)
def _area_tables(space: DesignSpace) -> AreaTables:
    # index grids, then values: knob values need not be numbers (a format name, …)
    grids = np.meshgrid(*(np.arange(len(space.values(k))) for k in space.area_knobs), indexing="ij")
    columns = {k: np.asarray(space.values(k))[grid] for k, grid in zip(space.area_knobs, grids)}
    area, budget = space.area_terms(columns)
    area = np.asarray(area, dtype=np.float64)
    ok = in_area_window(columns["num_tc"], columns["num_vc"], area, budget, space.area_window_lower)
    overshoot = area_overshoot(columns["num_tc"], columns["num_vc"], area, budget, space.area_window_lower)
    ok.setflags(write=False)
    overshoot.setflags(write=False)
    return AreaTables(ok, overshoot)


def named_space(name: str, budget_mw: float | None = None, budget_usd: float | None = None,
                stack: str | None = None, nre_chips: int | None = None) -> DesignSpace:
    """What a CLI's ``--space NAME [--budget-mw MW | --budget-usd USD] [--stack NAME]`` means:
    :meth:`DesignSpace.named`, the system space at a power (MW) or capital (USD) budget (default: its own) running
    ``stack`` (default :data:`~phaze_env.stacks.DEFAULT_SYSTEM_STACK`); a budget or stack for another space raises."""
    if name != "system":
        if budget_mw is not None or budget_usd is not None:
            raise ValueError("--budget-mw and --budget-usd apply to the system space only")
        if nre_chips is not None:
            raise ValueError("--nre-chips applies to the system space only")
        if stack is not None:
            raise ValueError("--stack applies to the system space only")
        return DesignSpace.named(name)
    return DesignSpace.named("system", budget_w=None if budget_mw is None else budget_mw * 1e6, budget_usd=budget_usd,
                             stack=stack or DEFAULT_SYSTEM_STACK, nre_chips=nre_chips)


# evaluate()'s knob arguments that a Design sets itself; the rest of its keywords are free options.
_DESIGN_SET = ("microbatch", "recompute", "hbm_gb")
_EVALUATE_OPTIONS = tuple(f.name for f in fields(EvaluationOptions) if f.name not in _DESIGN_SET)


def evaluate_options(options: dict[str, Any] | None) -> dict[str, Any]:
    """Check extra :func:`evaluate` keywords for :func:`evaluate_design` and make them hashable.

    Unknown names and the knobs a design sets itself raise ``ValueError``; list values become tuples, so
    the options can key a cache (a list would raise ``TypeError: unhashable`` deep inside one).
    """
    options = dict(options or {})
    for name in options:
        if name in _DESIGN_SET:
            raise ValueError(f"evaluate option {name!r} is set by each design; change the DesignSpace instead")
        if name not in _EVALUATE_OPTIONS:
            raise ValueError(f"unknown evaluate option {name!r}; known: {', '.join(_EVALUATE_OPTIONS)}")
    return {name: tuple(value) if isinstance(value, (list, set, frozenset)) else value
            for name, value in options.items()}


def reference_system(name: str, budget: SystemBudget, number_format: str = "bf16",
                     cluster: Cluster | None = None) -> tuple[SystemPoint, Cluster | None]:
    """Reference system ``name`` (:data:`~phaze_env.hardware.system.REFERENCE_TOPOLOGIES`) at ``budget`` training in
    ``number_format``: its chip and chip count (:func:`~phaze_env.hardware.system.reference_point`) and its cluster
    (:func:`~phaze_env.cluster.reference_cluster`; ``cluster`` gives the setup and the stack), or ``None`` for the
    cluster when the budget buys not one whole node or torus cube (``point.unbuildable_reason`` says why). The one
    build of a reference: :meth:`SystemDesignSpace.evaluate_reference`, ``search.run`` (baseline and references)
    and ``experiments.system_table`` all call it."""
    point = reference_point(name, budget, number_format)
    return point, (None if point.unbuildable_reason else reference_cluster(name, point, cluster))


def evaluate_design(design: Design, workload: str | Workload, cluster: Cluster | None = None, *,
                    base: Accelerator = TPUV4, budget: SystemBudget | None = None, node: str = SYSTEM_NODE,
                    **kwargs: Any) -> Evaluation:
    """:func:`evaluate` of one design point (its own microbatch size, recompute setting and HBM capacity) on
    ``base`` with the design's knobs set.

    A system-space design runs on its own cluster: its topology with the chips ``budget`` buys (default
    :class:`SystemBudget`'s 10 MW; ``SystemDesignSpace.evaluate`` passes the space's), ``cluster`` supplying
    only its setup (global batch, optimizer) and its whole stack. A budget that buys no whole
    topology unit gives an infeasible evaluation saying so (:func:`~phaze_env.evaluate.unbuilt_evaluation`); ``node`` is
    the process node its chip is built at (``SystemDesignSpace.evaluate`` passes the space's)."""
    accelerator = design.accelerator(base)
    if design.is_system:
        point = system_point(accelerator, design.system_choice().chip_system(node), design.topology,
                             budget or SystemBudget())
        if point.unbuildable_reason:
            return unbuilt_evaluation(workload, point.accelerator, point.topology, point.unbuildable_reason)
        cluster = point_cluster(point, cluster)
    elif budget is not None:
        raise ValueError("a budget applies to system-space designs only")
    return evaluate(workload, accelerator, cluster, microbatch=(design.microbatch,),
                    recompute=(design.recompute,), hbm_gb=(design.hbm_gb,), **kwargs)
