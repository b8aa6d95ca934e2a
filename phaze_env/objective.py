"""An Optuna objective over PHAZE's evaluator, and ``python -m phaze_env.objective`` to run a study.

``make_objective(workload, cluster)`` returns a callable for ``study.optimize``. Each trial suggests every
knob of a :class:`~phaze_env.design.DesignSpace` (``space.knobs``: PHAZE's eight, or the system space's
more) with ``trial.suggest_categorical`` (or, with ``encoding="index"``, its index with ``suggest_int`` — for
CMA-ES and GP samplers, which treat ordered integers better than categories; knobs whose values are not
numbers, such as a number format or a topology family, have no order and stay categorical) and evaluates the
design with :meth:`DesignSpace.evaluate` (:func:`phaze_env.design.evaluate_design`).

Objective values: single-objective, the training throughput in samples/s (maximise); multi-objective,
``(throughput, area_mm2)`` (maximise, minimise) for Pareto studies; with ``objectives`` (or a benchmark task's), each
named one in its unit (:meth:`phaze_env.design.DesignSpace.objective_score`: throughput, per W or per $ of the built system
maximised, area minimised).

Infeasibility is reported through Optuna's constraint mechanism, not by a magic value alone. Every trial
gets two constraint values (feasible when ≤ 0), set with ``trial.set_constraint`` (Optuna ≥ 5, read by
TPE, NSGA-II, GP, CMA-ES and by ``study.best_trial(s)``) and stored in ``trial.user_attrs["constraints"]``
(for :func:`constraints_func`, the ``constraints_func=`` argument older samplers take):

* ``area``: > 0 outside the area window (the relative violation, :meth:`DesignSpace.overshoot`); inside,
  minus the relative slack to the nearest active window edge;
* ``placement``: -1 if a feasible placement exists, +1 if none does, 0 when not evaluated (outside the
  window the design is never evaluated).

The value returned for an infeasible trial is the throughput it achieves, **0 samples/s** (area as is in
the multi-objective form): it ranks below every feasible design, and ``study.best_trial`` skips it anyway
because its constraints are violated.

Each trial stores the design, plan and metrics as user attributes. Re-suggested designs are served by
:func:`evaluate`'s cache (bounded in memory, persistent on disk: :mod:`phaze_env.cache`), so duplicates cost a
lookup; the objective keeps no memo of its own.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from phaze_env.cli import (OneLineParser, add_cluster_size_options, add_system_budget_options, console as make_console,
                           positive_int)
from phaze_env.cluster import Network, Setup
from phaze_env.design import SPACE_NAMES, Design, DesignSpace, evaluate_options, named_space
from phaze_env.evaluate import Cluster, Evaluation
from phaze_env.hardware.cost import ReticleLimitError
from phaze_env.tasks import AREA_OBJECTIVE, get_task
from phaze_env.workloads import Workload, get_workload, workload_names

CONSTRAINT_NAMES = ("area", "placement")
ENCODINGS = ("categorical", "index")
SAMPLERS = ("tpe", "random", "gp", "cmaes", "qmc", "nsga2", "bruteforce")
INDEX_ENCODED = ("gp", "cmaes", "qmc")
"""Samplers that see ordered knobs as integer indices (``encoding="index"``): GP and CMA-ES model ordered
integers better than categories, and QMC spreads only numeric parameters (it samples categories at random)."""
INFEASIBLE_THROUGHPUT = 0.0  # what an infeasible design trains: nothing
DEFAULT_STORAGE = "sqlite:///out/optuna.db"


def area_constraint(space: DesignSpace, design: Design) -> float:
    """> 0 outside the area window (relative violation); ≤ 0 inside (minus the slack to the nearest edge)."""
    if not space.area_ok(design):
        return max(space.overshoot(design), 1e-12)  # strictly positive even if rounding makes the ratio ~0
    return -max(space.area_slack(design), 0.0)


def constraints_func(trial: Any) -> list[float]:
    """The constraint values this objective stored on ``trial`` (for samplers' ``constraints_func=``).

    Trials not run by this objective (no stored values) count as infeasible."""
    values = trial.user_attrs.get("constraints")
    return [float(v) for v in values] if values is not None else [1.0] * len(CONSTRAINT_NAMES)


@dataclass
class TrialRecord:
    """What one design contributes to a trial: objective values, constraints and user attributes."""

    values: tuple[float, ...]
    constraints: tuple[float, ...]
    attrs: dict[str, Any]


@dataclass
class PhazeObjective:
    """``study.optimize(objective)`` callable; see the module docstring."""

    workload: Workload
    cluster: Cluster
    space: DesignSpace
    multi_objective: bool = False
    encoding: str = "categorical"
    evaluate_kwargs: dict[str, Any] = field(default_factory=dict)
    evaluations: int = 0  # designs sent to the evaluator (inside the area window) ...
    cache_hits: int = 0  # ... of which its cache answered
    objectives: tuple[str, ...] = ()  # () → ("throughput",), or ("throughput", "area") when multi_objective

    def __post_init__(self) -> None:
        self.evaluate_kwargs = evaluate_options(self.evaluate_kwargs)
        if self.encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {', '.join(ENCODINGS)}, got {self.encoding!r}")
        if not self.objectives:
            self.objectives = ("throughput", AREA_OBJECTIVE) if self.multi_objective else ("throughput",)
        self.objectives = tuple(self.objectives)
        scorable = ("throughput", "throughput_per_w", "throughput_per_usd", AREA_OBJECTIVE)
        if any(o not in scorable for o in self.objectives) or len(set(self.objectives)) != len(self.objectives):
            raise ValueError(f"objectives must be distinct names among {', '.join(scorable)}, got {self.objectives!r}")
        if self.multi_objective and len(self.objectives) < 2:
            raise ValueError(f"a multi-objective study needs two or more objectives, got {self.objectives!r}")
        self.multi_objective = len(self.objectives) > 1

    @property
    def directions(self) -> list[str]:
        """Optuna's direction per objective: area minimised (mm²), the rates maximised."""
        return ["minimize" if o == AREA_OBJECTIVE else "maximize" for o in self.objectives]

    def objective_values(self, design: Design, throughput_samples_s: float) -> tuple[float, ...]:
        """The design's value per objective in its own unit (:meth:`~phaze_env.design.DesignSpace.objective_score`; area in mm²).
        A design that trains nothing (infeasible: outside the area window, or no placement fits) scores 0 on every rate
        without its system being built: a system design outside the window may need a die no reticle can expose, whose
        pricing raises :class:`~phaze_env.hardware.cost.ReticleLimitError` (its constraints already mark it
        infeasible); its area is the built die's, or its architecture's when no die can be built
        (:meth:`~phaze_env.design.DesignSpace.area_mm2`). A budget that buys no chip needs no guard here:
        :meth:`~phaze_env.design.SystemDesignSpace.objective_score` scores its rates 0 itself."""
        return tuple(abs(self._area_score(design)) if o == AREA_OBJECTIVE
                     else INFEASIBLE_THROUGHPUT if throughput_samples_s <= INFEASIBLE_THROUGHPUT  # nothing trained: its
                     else self.space.objective_score(design, throughput_samples_s, o)  # system may not be buildable
                     for o in self.objectives)

    def _area_score(self, design: Design) -> float:
        try:
            return self.space.objective_score(design, 0.0, AREA_OBJECTIVE)
        except ReticleLimitError:  # no die can be built: the architecture's area
            return -self.space.area_mm2(design)

    def suggest(self, trial: Any) -> Design:
        """The design this trial proposes (one suggestion per knob of ``space.knobs``)."""
        if self.encoding == "index":
            return self.space.decode([self._suggest_index(trial, name) for name in self.space.knobs])
        return self.space.decode([self.space.values(name).index(trial.suggest_categorical(name, list(self.space.values(name))))
                                  for name in self.space.knobs])

    def _suggest_index(self, trial: Any, name: str) -> int:
        values = self.space.values(name)
        if all(isinstance(v, (int, float)) for v in values):  # bool included: False < True is an order
            return trial.suggest_int(f"{name}_index", 0, len(values) - 1)
        return values.index(trial.suggest_categorical(name, list(values)))

    def record(self, design: Design) -> TrialRecord:
        """Evaluate ``design`` into objective values, constraints and attributes."""
        area = self.space.area_mm2(design)
        attrs: dict[str, Any] = {"design": design.to_dict(), "area_mm2": area,
                                 "area_fraction": self.space.area_fraction(design)}
        if not self.space.area_ok(design):
            evaluation: Evaluation | None = None
            placement, reason = 0.0, "outside the area window; not evaluated"
        else:
            evaluation = self.space.evaluate(design, self.workload, self.cluster, **self.evaluate_kwargs)
            self.evaluations += 1
            self.cache_hits += int(evaluation.from_cache)
            placement, reason = (-1.0, "") if evaluation.feasible else (1.0, evaluation.reason)
        constraints = (area_constraint(self.space, design), placement)
        feasible = all(c <= 0 for c in constraints)
        throughput = evaluation.throughput_samples_s if evaluation is not None and feasible else INFEASIBLE_THROUGHPUT
        attrs.update(feasible=feasible, reason=reason, evaluated=evaluation is not None,
                     throughput_samples_s=throughput, constraints=list(constraints))
        if evaluation is not None:
            attrs.update(tokens_s=evaluation.tokens_s, mfu=evaluation.mfu, mfu_basis=evaluation.mfu_basis,
                         energy_per_sample_j=evaluation.energy_per_sample_j, plan=evaluation.plan_dict(),
                         memory_bytes=evaluation.memory_bytes, proven=evaluation.proven,
                         worst_gap=evaluation.worst_gap)
        return TrialRecord(tuple(float(v) for v in self.objective_values(design, throughput)), constraints, attrs)

    def __call__(self, trial: Any) -> float | tuple[float, float]:
        design = self.suggest(trial)
        record = self.record(design)
        for key, value in record.attrs.items():
            trial.set_user_attr(key, value)
        if hasattr(trial, "set_constraint"):  # Optuna ≥ 5; older versions read constraints_func instead
            for name, value in zip(CONSTRAINT_NAMES, record.constraints):
                trial.set_constraint(name, value)
        return record.values if self.multi_objective else record.values[0]


def make_objective(workload: str | Workload | None = None, cluster: Cluster | dict[str, Any] | None = None, *,
                   space: DesignSpace | None = None, multi_objective: bool = False, encoding: str = "categorical",
                   evaluate_kwargs: dict[str, Any] | None = None, task: str | None = None,
                   objectives: Sequence[str] = ()) -> PhazeObjective:
    """An objective maximising throughput (or Pareto over throughput and area) of designs in ``space``, or over
    ``objectives`` (throughput, throughput per W or per $ of a built system, area; two or more make it Pareto).

    ``task``: a benchmark task's name (:data:`phaze_env.tasks.TASKS`) sets the workload, cluster, space and
    objectives (give none of them): the study optimises the task's objective, or is Pareto over a front's two."""
    if task is not None:
        if workload is not None or cluster is not None or space is not None or objectives:
            raise ValueError(f"task={task!r} sets the workload, the cluster, the space and the objectives: pass none "
                             "of them")
        chosen = get_task(task)
        workload, cluster, space = chosen.workload_spec(), chosen.cluster(), chosen.design_space()
        objectives = chosen.objectives
    elif workload is None:
        raise ValueError("make_objective needs a workload (or a task)")
    cluster = Cluster.from_dict(cluster) if isinstance(cluster, dict) else (cluster or Cluster())
    return PhazeObjective(get_workload(workload), cluster, space or DesignSpace(), multi_objective, encoding,
                          dict(evaluate_kwargs or {}), objectives=tuple(objectives))


def make_sampler(name: str, *, seed: int | None = None, multi_objective: bool = False):
    """An Optuna sampler by short name (``tpe``, ``random``, ``gp``, ``cmaes``, ``qmc``, ``nsga2``, ``bruteforce``).

    CMA-ES and QMC sample only the numeric knobs and draw the categorical ones (number format, HBM generation,
    topology, …) at random, by design: every space here has categorical knobs, so Optuna's per-trial warning about
    that fallback (three log lines per trial, thousands in a leaderboard run) is switched off."""
    import optuna

    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    if name == "cmaes":
        if multi_objective:
            raise ValueError("the cmaes sampler is single-objective; use nsga2, tpe, gp or random")
        try:
            import cmaes  # noqa: F401 - CmaEsSampler's own dependency
        except ImportError:
            raise ValueError("the cmaes sampler needs the 'cmaes' package (pip install cmaes)") from None
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    if name == "qmc":
        return optuna.samplers.QMCSampler(qmc_type="sobol", scramble=True, seed=seed, warn_independent_sampling=False)
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed)
    if name == "bruteforce":
        return optuna.samplers.BruteForceSampler(seed=seed)
    raise ValueError(f"unknown sampler {name!r}; choose from {', '.join(SAMPLERS)}")


def create_study(objective: PhazeObjective, *, sampler: Any = None, storage: Any = None,
                 study_name: str | None = None, load_if_exists: bool = True):
    """An Optuna study with the objective's directions (SQLite/PostgreSQL/in-memory storage, any URL)."""
    import optuna

    return optuna.create_study(directions=objective.directions, sampler=sampler, storage=storage,
                               study_name=study_name, load_if_exists=load_if_exists)


def feasible_trials(study: Any) -> list:
    import optuna

    return [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if all(v <= 0 for v in constraints_func(t))]


# --- CLI ------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m phaze_env.objective",
                            description="Optuna study over PHAZE's design space (throughput, or throughput × area).")
    parser.add_argument("--workload", default="gpt2-xl",
                        help=f"default gpt2-xl; one of: {', '.join(workload_names())}")
    parser.add_argument("--trials", type=positive_int, default=50, help="trials to run (default 50)")
    parser.add_argument("--sampler", choices=SAMPLERS, default="tpe", help="Optuna sampler (default tpe)")
    parser.add_argument("--storage", default=DEFAULT_STORAGE,
                        help="Optuna storage URL (sqlite:///…, postgresql://…) or 'memory'; a relative sqlite path "
                             "is relative to the current directory (default %(default)s)")
    parser.add_argument("--study-name", default=None, help="default: phaze-<workload>-<sampler>[-pareto]")
    parser.add_argument("--seed", type=int, default=0, help="sampler seed (default 0)")
    parser.add_argument("--multi-objective", action="store_true",
                        help="maximise throughput, minimise area (default: throughput only)")
    parser.add_argument("--space", choices=SPACE_NAMES, default="full", help="design space (default PHAZE's full)")
    add_system_budget_options(parser)
    add_cluster_size_options(parser, devices=Network.n_devices, batch=Setup.global_batch)
    parser.add_argument("--timeout", type=float, default=None,
                        help="stop after this many seconds (default: no limit, --trials decides)")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bar (default: trials done of --trials with an ETA, on a terminal)")
    return parser


# Python modules of the PostgreSQL drivers SQLAlchemy knows, in order of preference ([dist] installs psycopg2).
POSTGRES_DRIVERS = ("psycopg2", "psycopg")


def storage_url(url: str) -> str:
    """An Optuna RDB URL ready to use: a plain ``postgresql://`` names the installed driver.

    SQLAlchemy resolves a bare ``postgresql://`` to its default driver (psycopg 3 since SQLAlchemy 2.1,
    psycopg2 before) and fails with an ImportError naming that driver even when the other one is
    installed; ``postgresql+psycopg2://…`` or ``postgresql+psycopg://…`` are passed through unchanged.
    A ``sqlite:///path`` gets its directory created.
    """
    import importlib.util

    if url.startswith("postgresql://"):
        driver = next((name for name in POSTGRES_DRIVERS if importlib.util.find_spec(name) is not None), None)
        if driver is None:
            raise ValueError("a postgresql:// storage needs a PostgreSQL driver: pip install -e \".[dist]\" "
                             "(psycopg2-binary) or psycopg")
        return f"postgresql+{driver}://" + url[len("postgresql://"):]
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///"):]).expanduser().parent.mkdir(parents=True, exist_ok=True)
    return url


def _storage(url: str):
    return None if url == "memory" else storage_url(url)


def _summary(study, objective: PhazeObjective, elapsed_s: float, storage: str) -> None:
    from rich.table import Table

    from phaze_env.hardware.accelerator import NOTATION_LEGEND

    console = make_console()
    trials = study.get_trials(deepcopy=False)
    feasible = feasible_trials(study)
    budget = getattr(objective.space, "budget", None)  # the system space: each design's chips at its budget
    devices = f"the chips a {budget.describe()} budget buys" if budget else f"{objective.cluster.n_devices} devices"
    console.print(f"[bold]{study.study_name}[/bold] — {objective.workload.name} on {devices}, storage {storage}")
    console.print(f"{len(trials)} trials ({len(feasible)} feasible), {objective.evaluations} evaluations this run "
                  f"({objective.cache_hits} served by the cache), {elapsed_s:.1f} s")
    if not feasible:
        console.print("[red]no feasible design found[/red]")
        return
    table = Table(show_header=True, header_style="bold", caption=NOTATION_LEGEND)
    best = sorted(study.best_trials, key=lambda t: t.user_attrs["area_mm2"]) if objective.multi_objective \
        else [study.best_trial]
    system = any(Design.from_dict(t.user_attrs["design"]).is_system for t in best)
    for column in ("trial", "samples/s", "area mm²", "tensor cores", "vector cores", "buffer", "HBM",
                   *(("system",) if system else ()), "microbatch", "recompute", "t×p×d"):
        table.add_column(column, justify="right")
    for trial in best:
        a, d, p = trial.user_attrs, Design.from_dict(trial.user_attrs["design"]), trial.user_attrs.get("plan", {})
        parts = d.accelerator(objective.space.base).notation_parts()
        table.add_row(str(trial.number), f"{a['throughput_samples_s']:,.1f}", f"{a['area_mm2']:.1f}",
                      parts["tensor cores"], parts["vector cores"], parts["buffer"], parts["HBM"],
                      *((d.system_choice().describe(),) if system else ()), str(d.microbatch), str(d.recompute),
                      f"{p.get('tensor_width')}×{p.get('pipeline_stages')}×{p.get('data_parallel')}")
    table.title = "Pareto front (throughput ↑, area ↓)" if objective.multi_objective else "best design"
    console.print(table)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        workload = get_workload(args.workload)
        cluster = Cluster(n_devices=args.devices, global_batch=args.batch)
        space = named_space(args.space, args.budget_mw, args.budget_usd, args.stack, nre_chips=args.nre_chips)
        sampler = make_sampler(args.sampler, seed=args.seed, multi_objective=args.multi_objective)
        if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
            raise ValueError(f"--timeout must be positive, got {args.timeout}")
    except ValueError as error:
        parser.error(str(error))
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    encoding = "index" if args.sampler in INDEX_ENCODED else "categorical"
    objective = make_objective(workload, cluster, space=space, multi_objective=args.multi_objective, encoding=encoding)
    name = args.study_name or f"phaze-{workload.name}-{args.sampler}" + ("-pareto" if args.multi_objective else "")
    try:
        study = create_study(objective, sampler=sampler, storage=_storage(args.storage), study_name=name)
    except Exception as error:  # noqa: BLE001 - bad storage URL, unreachable database, mismatched study
        parser.error(f"cannot open study {name!r} in {args.storage!r}: {type(error).__name__}: {error}".splitlines()[0])
    started = time.perf_counter()
    # Optuna's bar (tqdm, on stderr) redraws with carriage returns: only on a terminal, not into a log file
    study.optimize(objective, n_trials=args.trials, timeout=args.timeout,
                   show_progress_bar=not args.quiet and sys.stderr.isatty())
    _summary(study, objective, time.perf_counter() - started, args.storage)
    return 0


if __name__ == "__main__":
    sys.exit(main())
