"""Search strategies behind one ask/tell protocol, and the registry the comparison study runs.

``STRATEGIES[name].build(space=..., seed=..., budget=..., workload=..., cluster=..., objectives=..., **overrides)``
makes a :class:`~baselines.protocol.Strategy`; :func:`run_strategy` drives one for a budget of evaluations. Every entry documents its default hyper-parameters (``defaults``); the exact optimum every
strategy is scored against is :func:`baselines.exact.exact_optimum` (``search.phaze``).
"""

from __future__ import annotations

import importlib
import importlib.util
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from baselines.protocol import (THROUGHPUT, Strategy, StrategyFactory, Trace, check_objectives, construct,
                                evaluate_in_window)
from phaze_env.design import Design, DesignSpace
from phaze_env.evaluate import Cluster
from phaze_env.workloads import Workload, get_workload


@dataclass(frozen=True)
class StrategySpec:
    """A registry entry: ``module:Class`` (imported lazily), default hyper-parameters, what it needs."""

    name: str
    target: str
    defaults: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    requires: tuple[str, ...] = ()  # importable modules it needs beyond the core dependencies
    small_spaces_only: bool = False

    @property
    def available(self) -> bool:
        return all(importlib.util.find_spec(module) is not None for module in self.requires)

    def build(self, **arguments: Any) -> Strategy:
        """The strategy for ``arguments``: the run context (``space``, ``seed``, ``budget``, ``workload``,
        ``cluster``; each passed only if the strategy takes it) and hyper-parameters overriding
        :attr:`defaults`. A misspelled hyper-parameter raises ``ValueError``."""
        missing = [m for m in self.requires if importlib.util.find_spec(m) is None]
        if missing:
            raise ValueError(f"strategy {self.name!r} needs the package(s) {', '.join(missing)} (pip install ...)")
        module, cls = self.target.split(":")
        factory = getattr(importlib.import_module(module), cls)
        return construct(factory, self.name, self.defaults | arguments)


def _spec(name: str, target: str, description: str, **kwargs: Any) -> StrategySpec:
    return StrategySpec(name=name, target=target, description=description, **kwargs)


STRATEGIES: dict[str, StrategySpec] = {spec.name: spec for spec in (
    _spec("random", "baselines.random_search:RandomSearch", "uniform over in-window designs, no repeats"),
    _spec("genetic", "baselines.genetic:GeneticAlgorithm", "generational GA, tournament 3, uniform crossover 0.9, "
          "±1-index mutation 1/8 per knob, elite 2", defaults=dict(population=10, elite=2, crossover=0.9, tournament=3)),
    _spec("confuciux", "baselines.confuciux:ConfuciuX", "REINFORCE, LSTM(32) knob-per-step policy with exact area "
          "masks, then GA fine-tuning (last 30% of the budget)",
          defaults=dict(rl_fraction=0.7, lr=0.02, batch=2, entropy=0.01, hidden=32, ga_population=6, ga_mutation=0.25)),
    _spec("spotlight", "baselines.spotlight:Spotlight", "GP (Matern-5/2 ARD) on domain features, EI over a pool of "
          "300 in-window designs + incumbent neighbours, 5 random warm-up, 10% exploration",
          defaults=dict(domain_features=True, warmup=5, explore=0.1, pool=300, restarts=3, refit_every=3)),
    _spec("vanilla_bo", "baselines.spotlight:Spotlight", "Spotlight's ablation: the same GP/EI on raw knob indices",
          defaults=dict(domain_features=False, warmup=5, explore=0.1, pool=300, restarts=3, refit_every=3)),
    _spec("ppo", "baselines.sb3_agents:SB3Strategy", "SB3 PPO on ArchSearchFlat-v0 (n_steps 8, batch 8, 4 epochs, "
          "lr 3e-3, gamma 0, ent 0.01, MLP 64×64)", defaults=dict(algo="ppo")),
    _spec("a2c", "baselines.sb3_agents:SB3Strategy", "SB3 A2C on ArchSearchFlat-v0 (n_steps 4, lr 3e-3, gamma 0, "
          "ent 0.01, MLP 64×64)", defaults=dict(algo="a2c")),
    _spec("maskable_ppo", "baselines.sb3_agents:SB3Strategy", "sb3-contrib MaskablePPO with the env's per-knob "
          "area masks (PPO settings)", defaults=dict(algo="maskable_ppo")),
    _spec("optuna_tpe", "baselines.optuna_samplers:OptunaStrategy", "Optuna multivariate TPE (categorical knobs)",
          defaults=dict(sampler="tpe")),
    _spec("optuna_gp", "baselines.optuna_samplers:OptunaStrategy", "Optuna GPSampler (knob indices)",
          defaults=dict(sampler="gp")),
    _spec("optuna_cmaes", "baselines.optuna_samplers:OptunaStrategy", "Optuna CmaEsSampler (knob indices)",
          defaults=dict(sampler="cmaes"), requires=("cmaes",)),
    _spec("optuna_qmc", "baselines.optuna_samplers:OptunaStrategy", "Optuna QMCSampler (scrambled Sobol, knob "
          "indices)", defaults=dict(sampler="qmc")),
    _spec("optuna_nsga2", "baselines.optuna_samplers:OptunaStrategy", "Optuna NSGA-II on a front's two objectives "
          "(else the objective and area)",
          defaults=dict(sampler="nsga2")),
    _spec("optuna_random", "baselines.optuna_samplers:OptunaStrategy", "Optuna RandomSampler",
          defaults=dict(sampler="random")),
    _spec("optuna_bruteforce", "baselines.optuna_samplers:OptunaStrategy", "Optuna BruteForceSampler (small spaces)",
          defaults=dict(sampler="bruteforce"), small_spaces_only=True),
)}


def make_strategy(strategy: Strategy | StrategyFactory | str, **arguments: Any) -> Strategy:
    if isinstance(strategy, str):
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
        return STRATEGIES[strategy].build(**arguments)
    if isinstance(strategy, Strategy) and not isinstance(strategy, type):
        return strategy
    if callable(strategy):
        return construct(strategy, getattr(strategy, "__name__", repr(strategy)), arguments)
    raise TypeError(f"not a strategy, factory or registry name: {strategy!r}")


def run_strategy(strategy: Strategy | StrategyFactory | str, workload: str | Workload, cluster: Cluster | None,
                 space: DesignSpace, budget: int, seed: int = 0, *, name: str | None = None,
                 callback: Callable[[Trace], None] | None = None, objectives: tuple[str, ...] = THROUGHPUT,
                 **hyper_parameters: Any) -> Trace:
    """Run ``strategy`` for ``budget`` evaluations and return the :class:`Trace`.

    ``strategy`` is a registry name (:data:`baselines.STRATEGIES`), a factory called as
    ``factory(space=..., seed=..., budget=..., workload=..., cluster=..., **hyper_parameters)``, or a ready
    :class:`Strategy` instance (then ``seed`` only labels the trace). ``callback(trace)`` runs after every
    evaluation. Strategies with a ``close()`` method are closed at the end, even on error. ``objectives``: what the
    run is scored by (a benchmark task's :attr:`~phaze_env.tasks.Task.objectives`); single-objective strategies
    maximise the first (:func:`~baselines.protocol.score_of`), and one that can only maximise throughput is refused
    any other (``ValueError``, one line).
    """
    if not isinstance(budget, (int, np.integer)) or isinstance(budget, bool) or budget <= 0:
        raise ValueError(f"budget must be a positive integer, got {budget!r}")
    workload = get_workload(workload)
    cluster = cluster if cluster is not None else Cluster()
    label = name or (strategy if isinstance(strategy, str) else getattr(strategy, "name", type(strategy).__name__))
    started = time.perf_counter()
    objectives = check_objectives(objectives, space)
    instance = make_strategy(strategy, space=space, seed=seed, budget=int(budget), workload=workload, cluster=cluster,
                             objectives=objectives, **hyper_parameters)
    trace = Trace(strategy=str(label), workload=workload.name, seed=int(seed))
    try:
        for _ in range(int(budget)):
            design = instance.ask()
            if not isinstance(design, Design):
                raise TypeError(f"{label}.ask() returned {type(design).__name__}, expected a Design")
            evaluation = evaluate_in_window(design, workload, cluster, space)
            instance.tell(design, evaluation)
            trace.record(design, evaluation, time.perf_counter() - started)
            if callback:
                callback(trace)
    finally:
        close = getattr(instance, "close", None)
        if close:
            close()
    return trace


__all__ = ["STRATEGIES", "StrategySpec", "Strategy", "Trace", "run_strategy"]
