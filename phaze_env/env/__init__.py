"""Gymnasium environments over PHAZE's evaluator, registered as ``phaze_env/<Name>-v0`` on ``import phaze_env.env``.

| id | one episode | action |
|---|---|---|
| ``phaze_env/ArchSearch-v0`` | one step: all knobs at once | ``MultiDiscrete(space.nvec)`` |
| ``phaze_env/ArchSearchFlat-v0`` | same, flat ``Box`` observation | same |
| ``phaze_env/ArchSearchSeq-v0`` | one knob per step (``len(space.knobs)`` steps) | ``Discrete(max(space.nvec))`` |
| ``phaze_env/ArchSearchSeqFlat-v0`` | same, flat ``Box`` observation | same |

Entry points are strings, so registering imports nothing heavy; the env modules load on ``gymnasium.make``.
Importing this package registers the ids, as Gymnasium's own ``gymnasium.envs`` does, so
``gymnasium.make("phaze_env.env:phaze_env/ArchSearch-v0")`` needs no import first. The evaluator below never
imports Gymnasium.
"""

from __future__ import annotations

import gymnasium as gym

ENV_IDS = {
    "phaze_env/ArchSearch-v0": ("phaze_env.env.arch_search:ArchSearchEnv", {}),
    "phaze_env/ArchSearchFlat-v0": ("phaze_env.env.arch_search:ArchSearchEnv", {"flatten": True}),
    "phaze_env/ArchSearchSeq-v0": ("phaze_env.env.arch_search_seq:ArchSearchSeqEnv", {}),
    "phaze_env/ArchSearchSeqFlat-v0": ("phaze_env.env.arch_search_seq:ArchSearchSeqEnv", {"flatten": True}),
}


def register_envs() -> list[str]:
    """Register every id in :data:`ENV_IDS` (idempotent); returns the ids."""
    for env_id, (entry_point, kwargs) in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, kwargs=kwargs, disable_env_checker=False)
    return list(ENV_IDS)


register_envs()

__all__ = ["ENV_IDS", "register_envs"]
