"""Stable-Baselines3 agents (PPO, A2C; sb3-contrib's MaskablePPO) on ``phaze_env/ArchSearchFlat-v0``.

The one-shot env (``ArchSearch-v0`` with a flat ``Box`` observation for ``MlpPolicy``) is a contextual
bandit: one step per episode, all knobs at once, reward = throughput ratio vs TPUv4 (negative penalties
for infeasible or out-of-window designs). Every env step is one evaluation of the budget: the agent's
``learn`` loop runs in a worker thread (:class:`baselines.protocol.LoopStrategy`) and a wrapper hands each
step's design to the driver and waits for its evaluation before the env scores it (a cache hit by then).
Out-of-window designs are charged as zero-throughput evaluations, as an env step would be.

Defaults are sized for budgets of tens to hundreds of evaluations: rollouts of ``n_steps=8`` (PPO,
MaskablePPO) or 4 (A2C) steps, ``gamma=0`` (one-step episodes), a 64×64 MLP, learning rate 3e-3,
entropy bonus 0.01. MaskablePPO uses the env's ``action_masks()`` (per-knob masks of values that have
some completion inside the area window).
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym

import phaze_env.env  # noqa: F401 - registers the env ids
from baselines.protocol import THROUGHPUT, LoopStrategy
from phaze_env.design import Design, DesignSpace
from phaze_env.evaluate import Cluster
from phaze_env.workloads import Workload

ENV_ID = "phaze_env/ArchSearchFlat-v0"

DEFAULTS: dict[str, dict[str, Any]] = {
    "ppo": dict(n_steps=8, batch_size=8, n_epochs=4, learning_rate=3e-3, gamma=0.0, gae_lambda=1.0, ent_coef=0.01),
    "maskable_ppo": dict(n_steps=8, batch_size=8, n_epochs=4, learning_rate=3e-3, gamma=0.0, gae_lambda=1.0,
                         ent_coef=0.01),
    "a2c": dict(n_steps=4, learning_rate=3e-3, gamma=0.0, gae_lambda=1.0, ent_coef=0.01),
}
POLICY_KWARGS = dict(net_arch=[64, 64])


class EvaluationHandshake(gym.Wrapper):
    """Before the env scores an action, hand its design to ``on_design`` (which may block or raise)."""

    def __init__(self, env: gym.Env, on_design: Callable[[Design], Any]):
        super().__init__(env)
        self.on_design = on_design

    def step(self, action):
        self.on_design(self.env.unwrapped.space.decode([int(a) for a in action]))
        return self.env.step(action)

    def action_masks(self):
        return self.env.unwrapped.action_masks()


def make_env(workload: Workload | str, cluster: Cluster | None, space: DesignSpace | None, **kwargs: Any) -> gym.Env:
    return gym.make(ENV_ID, workload=workload, cluster=cluster, space=space, **kwargs)


def make_model(algo: str, env: gym.Env, seed: int, **overrides: Any):
    """An SB3 model for ``algo`` in ``DEFAULTS`` with the documented hyper-parameters (``overrides`` win)."""
    if algo not in DEFAULTS:
        raise ValueError(f"unknown SB3 algorithm {algo!r}; choose from {', '.join(DEFAULTS)}")
    params = DEFAULTS[algo] | {"policy_kwargs": POLICY_KWARGS, "device": "cpu", "seed": seed, "verbose": 0} | overrides
    if algo == "ppo":
        from stable_baselines3 import PPO as cls
    elif algo == "a2c":
        from stable_baselines3 import A2C as cls
    else:
        from sb3_contrib import MaskablePPO as cls
    return cls("MlpPolicy", env, **params)


def model_class(algo: str):
    if algo == "ppo":
        from stable_baselines3 import PPO
        return PPO
    if algo == "a2c":
        from stable_baselines3 import A2C
        return A2C
    from sb3_contrib import MaskablePPO
    return MaskablePPO


class SB3Strategy(LoopStrategy):
    """``algo`` (``ppo``, ``a2c``, ``maskable_ppo``) trained for the evaluation budget, as ask/tell."""

    def __init__(self, space: DesignSpace, seed: int = 0, *, workload: Workload, cluster: Cluster, algo: str = "ppo",
                 budget: int = 100, objectives: tuple[str, ...] = THROUGHPUT, **overrides: Any):
        super().__init__()
        if algo not in DEFAULTS:
            raise ValueError(f"unknown SB3 algorithm {algo!r}; choose from {', '.join(DEFAULTS)}")
        self.name = algo
        self.algo = algo
        self.budget = budget
        self.seed = seed
        self.overrides = overrides
        # the env's reward is the run's first objective (its ratio to the baseline system's)
        self.env = EvaluationHandshake(make_env(workload, cluster, space, reward=objectives[0]), self._evaluate)
        self.model = make_model(algo, self.env, seed, **overrides)

    def run(self, evaluate) -> None:
        # More timesteps than the budget: the driver stops the loop (close) once the budget is spent.
        self.model.learn(total_timesteps=10 * self.budget + 1000)

    def close(self) -> None:
        super().close()
        self.env.close()
