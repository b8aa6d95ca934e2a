"""The search's objectives: what a best-design search maximises and what a Pareto front trades off.

Every objective but area is the training throughput over a figure the design and the budget fix before any
evaluation (:meth:`~phaze_env.hardware.system.SystemPoint.objective_divisor`: 1, watts, dollars, or the joules
and grams of CO2e per second whose ratio to the token rate energy and carbon per token are), so a throughput
upper bound divided by it bounds the objective. Area (mm²: the architecture's in PHAZE's spaces, the whole
built die in the system space) is known exactly for every design. Energy and carbon per token and area are
minimised, the others maximised.

Internally every objective is turned into a *score* to maximise: ``throughput / divisor`` (for energy and
carbon per token the reciprocal of the figure up to the token/sample factor, which orders designs the same
way) and ``-area``. :func:`non_dominated` finds a front over scores; :func:`objective_value` gives a result's
figure in its own unit and sense (what ``results.json`` and the report show).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from phaze_env.hardware.system import AREA_OBJECTIVE, OBJECTIVES

# ``DesignResult`` in annotations is search.result.DesignResult, not imported: search.result imports this module.

AREA = AREA_OBJECTIVE
PARETO_OBJECTIVES = OBJECTIVES + (AREA,)
"""What ``--objectives A,B[,C]`` may name: any of :data:`~phaze_env.hardware.system.OBJECTIVES` plus area."""
MINIMISED = ("energy_per_token", "carbon_per_token", AREA)
"""The objectives a front minimises (the others it maximises)."""
UNITS = {"throughput": "samples/s", "throughput_per_w": "tokens/s per W", "throughput_per_usd": "tokens/s per $",
         "energy_per_token": "J/token", "carbon_per_token": "g CO2e/token", AREA: "mm²"}
LABELS = {"throughput": "training throughput", "throughput_per_w": "throughput per W",
          "throughput_per_usd": "throughput per $", "energy_per_token": "wall energy per token",
          "carbon_per_token": "carbon per token (operational + embodied)", AREA: "area"}
SYSTEM_FIGURES = {"throughput_per_w": "tokens_per_s_per_w", "throughput_per_usd": "tokens_per_s_per_usd",
                  "energy_per_token": "energy_per_token_j", "carbon_per_token": "carbon_per_token_g"}
"""The key of each system objective's figure in a system-space result's ``system``
(:meth:`~phaze_env.hardware.system.SystemPoint.figures`)."""


def parse_objectives(text: str) -> tuple[str, ...]:
    """``"throughput,carbon_per_token,area"`` → the names, refused (ValueError, one line) when one is unknown or
    named twice."""
    names = tuple(part.strip() for part in text.split(","))
    unknown = [name for name in names if name not in PARETO_OBJECTIVES]
    if unknown:
        raise ValueError(f"unknown objective {unknown[0]!r}; choose from {', '.join(PARETO_OBJECTIVES)}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"objective {repeated[0]!r} is named twice in {text!r}")
    return names


def check_pareto_objectives(objectives: Sequence[str]) -> None:
    """A front needs two or more distinct known objectives (ValueError otherwise)."""
    parse_objectives(",".join(objectives))
    if len(objectives) < 2:
        raise ValueError(f"a Pareto front needs at least two objectives, got {', '.join(objectives) or 'none'}")


def label(name: str, system: bool = False) -> str:
    """Axis label: what it is, its unit and its sense, e.g. ``carbon per token (…) (g CO2e/token, lower is better)``;
    the area objective says which area (:func:`area_label`: the whole die in the system space)."""
    sense = "lower" if name in MINIMISED else "higher"
    if name == AREA:
        return f"{area_label(system)}, {sense} is better"
    return f"{LABELS[name]} ({UNITS[name]}, {sense} is better)"


def short_label(name: str, system: bool = False) -> str:
    """What objective ``name`` is in a few words (a hover, a title): :data:`LABELS`, the area saying which one."""
    return ("die area" if system else "architecture area") if name == AREA else LABELS[name]


ARCHITECTURE_AREA_LABEL = "architecture mm² (cores + buffer)"
"""A result's ``area_mm2`` in every space (results.json, evaluations.csv, the console): the accelerator's cores and
buffer (:attr:`phaze_env.hardware.Accelerator.area_mm2`)."""
DIE_AREA_LABEL = "die mm² (whole chip)"
"""The system space's ``chip_area_mm2``: the whole built die (cores and buffer, HBM PHYs, SerDes, IO), what its area
objective, report and plot use; shown as "built of the die knob", e.g. ``793 of 800``."""


def area_label(system: bool) -> str:
    """The label of the area objective (:func:`plotted_area`): the whole die in the system space, else the
    architecture's area."""
    return DIE_AREA_LABEL if system else ARCHITECTURE_AREA_LABEL


def plotted_area(design: DesignResult) -> float:
    """The area of a result: the architecture's (PHAZE's spaces), the whole built die (system space, whose rows
    record it)."""
    return design.system["chip_area_mm2"] if design.system is not None else design.area_mm2


def objective_value(design: DesignResult, name: str) -> float:
    """A feasible result's figure for objective ``name`` in :data:`UNITS` (the sense of :data:`MINIMISED`)."""
    if name == "throughput":
        return design.throughput_samples_s
    if name == AREA:
        return plotted_area(design)
    if design.system is None or SYSTEM_FIGURES[name] not in design.system:
        raise ValueError(f"the {name} objective needs a feasible system-space design (a power and a cost)")
    return design.system[SYSTEM_FIGURES[name]]


def score_figure(name: str, score: float, tokens_per_sample: int) -> float:
    """Objective ``name``'s figure (:data:`UNITS`) of a search *score* ``throughput / divisor`` (samples/s over
    :meth:`~phaze_env.hardware.system.SystemPoint.objective_divisor`): the per-W and per-$ figures count tokens,
    energy and carbon per token are the reciprocal (``inf`` for a zero score)."""
    if name in ("throughput", AREA):
        return score
    per_token = score * tokens_per_sample
    if name in ("throughput_per_w", "throughput_per_usd"):
        return per_token
    return 1 / per_token if per_token > 0 else float("inf")


def figure_text(name: str, value: float) -> str:
    """``value`` of objective ``name`` with its unit, e.g. ``"29,203.6 samples/s"`` or ``"4.97 tokens/s per $"``."""
    number = f"{value:,.1f}" if name in ("throughput", AREA) else f"{value:.3g}"
    return f"{number} {UNITS[name]}"


def evaluated_figures(throughput_samples_s: float, tokens_s: float, area_mm2: float, point=None) -> dict[str, float]:
    """Every objective's figure of a feasible evaluated design (:data:`UNITS`): throughput and area, and with the
    design's :class:`~phaze_env.hardware.system.SystemPoint` (system space) the per-W, per-$, energy and carbon
    figures (:meth:`~phaze_env.hardware.system.SystemPoint.figures`, what a result's ``system`` carries)."""
    values = {"throughput": throughput_samples_s, AREA: area_mm2}
    if point is not None:
        figures = point.figures(tokens_s)
        values |= {name: figures[key] for name, key in SYSTEM_FIGURES.items()}
    return values


def non_dominated(scores: np.ndarray) -> list[int]:
    """Rows of ``scores`` (n × k, every column maximised) on the Pareto front, in row order: no other row is
    ≥ in every column and > in one, and no earlier row is equal (one row per front point: the first)."""
    scores = np.asarray(scores, dtype=np.float64)
    front = []
    for i, row in enumerate(scores):
        at_least = (scores >= row).all(axis=1)
        dominated = (at_least & (scores > row).any(axis=1)).any()
        repeated = (at_least[:i] & (scores[:i] <= row).all(axis=1)).any()
        if not dominated and not repeated:
            front.append(i)
    return front
