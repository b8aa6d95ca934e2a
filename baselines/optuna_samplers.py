"""Optuna samplers as strategies, through :func:`phaze_env.objective.make_objective`.

Each ``ask`` takes a trial from an Optuna study (``study.ask()``), lets the objective suggest the design
(:meth:`PhazeObjective.suggest`), and each ``tell`` scores the trial *with the objective itself* (its
``__call__`` re-reads the already-suggested parameters, sets the area/placement constraints and user
attributes; the evaluation is a cache hit after the driver's) and ``study.tell``s the value.

Designs outside the area window are rejected before they are proposed: the trial is completed through the
objective (which never evaluates them: zero throughput, violated area constraint) so the sampler learns
from it, and another trial is asked — at most ``max_rejections`` times, then the design is proposed
anyway and the driver charges it as a zero-throughput evaluation.

Samplers (:func:`phaze_env.objective.make_sampler`): ``tpe`` (multivariate TPE), ``gp`` (GPSampler),
``cmaes`` (CmaEsSampler; needs the ``cmaes`` package), ``qmc`` (scrambled Sobol quasi-random points), ``nsga2`` (NSGA-II on the run's two objectives, or
(its objective, area) — the multi-objective form), ``random`` and ``bruteforce`` (BruteForceSampler; small spaces only). GP, CMA-ES and
QMC see the ordered knobs as integer indices (:data:`phaze_env.objective.INDEX_ENCODED`), the others as
categories.
"""

from __future__ import annotations

from typing import Any

import optuna

from phaze_env.design import Design, DesignSpace
from phaze_env.evaluate import Cluster, Evaluation
from baselines.protocol import THROUGHPUT
from phaze_env.objective import INDEX_ENCODED, make_objective, make_sampler
from phaze_env.tasks import AREA_OBJECTIVE
from phaze_env.workloads import Workload

BRUTE_FORCE_MAX_DESIGNS = 5000


class OptunaStrategy:
    """Ask/tell over an Optuna study with the sampler ``sampler`` (a short name, see the module docstring)."""

    def __init__(self, space: DesignSpace, seed: int = 0, *, workload: Workload, cluster: Cluster, sampler: str = "tpe",
                 storage: Any = None, study_name: str | None = None, max_rejections: int = 500,
                 objectives: tuple[str, ...] = THROUGHPUT):
        if sampler == "bruteforce" and space.combinations > BRUTE_FORCE_MAX_DESIGNS:
            raise ValueError(f"bruteforce needs a small space (≤ {BRUTE_FORCE_MAX_DESIGNS} knob combinations), "
                             f"this one has {space.combinations}")
        self.name = f"optuna_{sampler}"
        self.space = space
        self.multi_objective = sampler == "nsga2"
        # NSGA-II trades the run's objectives (with area when it has one); the others maximise the first
        studied = (tuple(objectives) if len(objectives) > 1 else (objectives[0], AREA_OBJECTIVE)) \
            if self.multi_objective else tuple(objectives[:1])
        self.objective = make_objective(workload, cluster, space=space, objectives=studied,
                                        encoding="index" if sampler in INDEX_ENCODED else "categorical")
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.study = optuna.create_study(directions=self.objective.directions, storage=storage, study_name=study_name,
                                         load_if_exists=study_name is not None,
                                         sampler=make_sampler(sampler, seed=seed, multi_objective=self.multi_objective))
        self.max_rejections = max_rejections
        self.rejected = 0
        self._trial: optuna.trial.Trial | None = None

    def ask(self) -> Design:
        for attempt in range(self.max_rejections + 1):
            trial = self.study.ask()
            design = self.objective.suggest(trial)
            if self.space.area_ok(design) or attempt == self.max_rejections:
                break  # after max_rejections the design is proposed as it is: the driver charges it, tell() records it
            self.rejected += 1
            self.study.tell(trial, self.objective(trial))  # free: the objective does not evaluate it
        self._trial = trial
        return design

    def tell(self, design: Design, evaluation: Evaluation | None) -> None:
        trial, self._trial = self._trial, None
        if trial is None:
            raise RuntimeError("tell() without a pending ask()")
        self.study.tell(trial, self.objective(trial))
