"""Search strategies behind one ask/tell protocol, and the registry the comparison study runs.

``STRATEGIES[name].build(space=..., seed=..., budget=..., workload=..., cluster=..., **overrides)`` makes a
:class:`~baselines.protocol.Strategy`; :func:`~baselines.protocol.run_strategy` drives one for a budget of
evaluations. Every entry documents its default hyper-parameters (``defaults``); the exact optimum every
strategy is scored against is :func:`baselines.exact.exact_optimum` (``search.phaze``).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import Any

from baselines.protocol import Strategy, Trace, construct, run_strategy


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
    _spec("optuna_nsga2", "baselines.optuna_samplers:OptunaStrategy", "Optuna NSGA-II on (throughput, area)",
          defaults=dict(sampler="nsga2")),
    _spec("optuna_random", "baselines.optuna_samplers:OptunaStrategy", "Optuna RandomSampler",
          defaults=dict(sampler="random")),
    _spec("optuna_bruteforce", "baselines.optuna_samplers:OptunaStrategy", "Optuna BruteForceSampler (small spaces)",
          defaults=dict(sampler="bruteforce"), small_spaces_only=True),
)}

__all__ = ["STRATEGIES", "StrategySpec", "Strategy", "Trace", "run_strategy"]
