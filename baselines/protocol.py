"""One protocol for every search strategy: ``ask() -> Design``, ``tell(design, evaluation)``.

In the spirit of Optuna's ask-and-tell interface, a strategy never evaluates anything itself: the
driver :func:`baselines.run_strategy` asks for a design, evaluates it through the one door
(:meth:`phaze_env.design.DesignSpace.evaluate`), tells the strategy the :class:`Evaluation`, and records the
best throughput so far after **every** evaluation, with wall time.

Budget and the area window (the rules every strategy is scored by):

* The budget counts **calls to the evaluator** — every ``tell`` is one evaluation, repeats included
  (an RL agent's env step is an evaluation even when it revisits a design).
* The area model is analytic and costs microseconds, so a strategy *may* reject designs outside the
  area window itself before proposing them (random search, the GAs, Spotlight, ConfuciuX and the
  Optuna samplers do). A design outside the window that *is* proposed is still one evaluation: it is
  not run, scores zero throughput, and the strategy is told ``None`` instead of an
  :class:`Evaluation` (nothing was evaluated). The SB3 agents pay for such steps, as an env step would.

Strategies that are naturally written as a loop (an SB3 ``learn`` call) are turned into ask/tell by
:class:`LoopStrategy`, which runs the loop in a worker thread that blocks on each evaluation.
"""

from __future__ import annotations

import inspect
import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

from phaze_env.design import Design, DesignSpace
from phaze_env.evaluate import Cluster, Evaluation
from phaze_env.hardware.system import OBJECTIVES
from phaze_env.workloads import Workload
from search.objectives import MINIMISED

THROUGHPUT = ("throughput",)
"""The objectives a run maximises unless told otherwise."""


@runtime_checkable
class Strategy(Protocol):
    """A search strategy over a :class:`DesignSpace` (maximising training throughput)."""

    def ask(self) -> Design:
        """The next design to evaluate."""

    def tell(self, design: Design, evaluation: Evaluation | None) -> None:
        """The evaluation of a design returned by :meth:`ask` (in the same order); ``None`` when the design
        was outside the area window and not evaluated (zero throughput)."""


def evaluate_in_window(design: Design, workload: Workload, cluster: Cluster, space: DesignSpace) -> Evaluation | None:
    """:meth:`DesignSpace.evaluate` of the design, or ``None`` (not evaluated, zero throughput) when it is outside
    the area window."""
    if not space.area_ok(design):
        return None
    return space.evaluate(design, workload, cluster)


def throughput_of(evaluation: Evaluation | None) -> float:
    """The throughput of a feasible evaluation, else 0."""
    return float(evaluation.throughput_samples_s) if evaluation is not None and evaluation.feasible else 0.0


def score_of(space: DesignSpace, design: Design, evaluation: Evaluation | None,
             objectives: tuple[str, ...] = THROUGHPUT) -> float:
    """What a single-objective strategy maximises: the first of ``objectives`` (a rate:
    :meth:`phaze_env.design.DesignSpace.objective_score` — throughput, or per W or per $ of the built system) of a feasible
    evaluation, else 0."""
    value = throughput_of(evaluation)
    return space.objective_score(design, value, objectives[0]) if value > 0 else 0.0


def check_objectives(objectives: tuple[str, ...], space: DesignSpace) -> tuple[str, ...]:
    """``objectives`` as a tuple whose first (what single-objective strategies maximise) is a rate the space can
    score; ``ValueError`` (one line) otherwise."""
    objectives = tuple(objectives)
    if not objectives or objectives[0] not in OBJECTIVES or objectives[0] in MINIMISED:  # area is minimised too
        raise ValueError(f"a strategy maximises a rate first: objectives must start with one of "
                         f"{', '.join(o for o in OBJECTIVES if o not in MINIMISED)}, got {objectives!r}")
    # the space can score it: PHAZE's spaces refuse a rate per W or per $ (ValueError, one line)
    space.objective_score(space.decode([0] * len(space.knobs)), 1.0, objectives[0])
    return objectives


@dataclass
class Trace:
    """The record of one run: per evaluation, the design's throughput, the best so far and wall time."""

    strategy: str
    workload: str
    seed: int
    throughput: list[float] = field(default_factory=list)
    best_throughput: list[float] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    designs: list[Design] = field(default_factory=list)
    best_design: Design | None = None
    best_evaluation: Evaluation | None = None

    def record(self, design: Design, evaluation: Evaluation | None, wall_s: float) -> None:
        value = throughput_of(evaluation)
        previous = self.best_throughput[-1] if self.best_throughput else 0.0
        if value > previous or self.best_design is None:
            self.best_design, self.best_evaluation = design, evaluation
        self.throughput.append(value)
        self.best_throughput.append(max(previous, value))
        self.wall_s.append(wall_s)
        self.designs.append(design)

    @property
    def best(self) -> float:
        return self.best_throughput[-1] if self.best_throughput else 0.0


StrategyFactory = Callable[..., Strategy]


# What the driver knows about a run; a strategy receives each of these only if its constructor names it.
# ``objectives``: what the run is scored by (a benchmark task's, :attr:`phaze_env.tasks.Task.objectives`); a
# strategy that does not take it maximises throughput and is refused any other objective.
RUN_CONTEXT = ("space", "seed", "budget", "workload", "cluster", "objectives")


def construct(factory: StrategyFactory, name: str, arguments: dict[str, Any]) -> Strategy:
    """``factory(**arguments)`` where the run context (:data:`RUN_CONTEXT`) is passed only to factories that
    take it and every other argument is a hyper-parameter the factory must accept — a misspelled one
    raises ``ValueError`` instead of being ignored."""
    parameters = inspect.signature(factory).parameters
    named = {p for p, spec in parameters.items() if spec.kind in (spec.POSITIONAL_OR_KEYWORD, spec.KEYWORD_ONLY)}
    open_ended = any(spec.kind is spec.VAR_KEYWORD for spec in parameters.values())
    unknown = sorted(k for k in arguments if k not in RUN_CONTEXT and k not in named and not open_ended)
    if tuple(arguments.get("objectives", THROUGHPUT)) != THROUGHPUT and "objectives" not in named:
        raise ValueError(f"strategy {name!r} maximises throughput only; it cannot be scored by "
                         f"{', '.join(arguments['objectives'])}")
    if unknown:
        known = sorted(named - set(RUN_CONTEXT))
        raise ValueError(f"strategy {name!r} has no hyper-parameter {', '.join(map(repr, unknown))}; "
                         f"known: {', '.join(known) or 'none'}")
    return factory(**{k: v for k, v in arguments.items() if k not in RUN_CONTEXT or k in named})


class _Stop(Exception):
    """Raised inside a :class:`LoopStrategy`'s worker thread to end its loop."""


_STOP = object()  # what close() hands the loop instead of an evaluation (None means "not evaluated")


class LoopStrategy:
    """Ask/tell for a strategy written as a loop ``run(evaluate)``, where ``evaluate(design) -> Evaluation``.

    The loop runs in a daemon thread; each ``evaluate`` call hands the design to :meth:`ask` and blocks
    until :meth:`tell` delivers its evaluation. :meth:`close` stops the loop by raising inside it.
    """

    name = "loop"

    def __init__(self) -> None:
        self._designs: queue.Queue = queue.Queue(maxsize=1)
        self._evaluations: queue.Queue = queue.Queue(maxsize=1)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._closed = False

    def run(self, evaluate: Callable[[Design], Evaluation]) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _evaluate(self, design: Design) -> Evaluation | None:
        self._designs.put(design)
        evaluation = self._evaluations.get()
        if evaluation is _STOP:
            raise _Stop
        return evaluation

    def _main(self) -> None:
        try:
            self.run(self._evaluate)
            self._error = RuntimeError(f"{self.name}: the training loop ended before the evaluation budget")
        except _Stop:
            return
        except BaseException as exc:  # noqa: BLE001 - re-raised in the driver's thread by ask()
            self._error = exc
        self._designs.put(None)

    def ask(self) -> Design:
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name=f"{self.name}-loop", daemon=True)
            self._thread.start()
        design = self._designs.get()
        if design is None:
            raise RuntimeError(f"{self.name} loop failed: {self._error!r}") from self._error
        return design

    def tell(self, design: Design, evaluation: Evaluation | None) -> None:
        self._evaluations.put(evaluation)

    def close(self) -> None:
        if self._thread is not None and not self._closed:
            self._closed = True
            if self._thread.is_alive():
                # blocks until the loop has taken the last evaluation; the loop's next step then stops
                self._evaluations.put(_STOP, timeout=30)
                self._thread.join(timeout=30)

