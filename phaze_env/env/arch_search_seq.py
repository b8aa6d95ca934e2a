"""``phaze_env/ArchSearchSeq-v0``: design a training accelerator one knob per step (ConfuciuX-style)."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from phaze_env.design import Design
from phaze_env.env.base import DEFAULT_WORKLOAD, ArchSearchBase
from phaze_env.env.core import Outcome, Scorer, knob_space, result_space, workload_features, workload_space


class ArchSearchSeqEnv(ArchSearchBase):
    """
    ## Description

    Sequential co-design of a training accelerator, as in ConfuciuX (Kao et al., MICRO 2020): the agent
    picks one knob per step in ``space.knobs`` order — for PHAZE's spaces tensor-core count, tensor-core width,
    depth, vector-core count, on-chip buffer, HBM capacity, microbatch size, recompute — and after the last
    knob the design is evaluated by PHAZE's evaluator (:meth:`~phaze_env.design.DesignSpace.evaluate`) on a
    workload and a cluster. Because the area window depends only on the first knobs (``space.area_knobs``:
    PHAZE's five architecture knobs; the system space puts the die, memory, link and format knobs that set the
    area budget before them), it is checked as soon as it is decided: a choice after which no completion fits
    the window ends the episode at once.

    ## Action Space

    ``Discrete(max(space.nvec))``: the index of the current knob's value. Knobs with fewer values only
    accept the first ``space.nvec[k]`` indices. ``action_masks()`` is exact: it allows an index iff it is in
    range for the current knob **and** at least one completion of the choices so far lies inside the area
    window (for sb3-contrib's ``MaskablePPO``). An out-of-range index ends the episode with the worst
    reward ``-infeasible_penalty · 11``.

    ## Observation Space

    ``Dict`` with

    * ``"workload"``: ``Box(0, 1, (5,), float32)`` — as in ``ArchSearch-v0``;
    * ``"choices"``: ``MultiDiscrete(space.nvec + 1)`` — per knob 0 if not chosen yet, else 1 + its index;
    * ``"knob"``: ``Discrete(len(space.knobs) + 1)`` — the knob to choose next (``len(space.knobs)`` once the
      episode has ended);
    * ``"result"``: ``Box(0, 1e6, (3,), float32)`` — the final reward ratio, area / budget and feasible flag
      (zeros until the end).

    With ``flatten=True`` (id ``phaze_env/ArchSearchSeqFlat-v0``) one float32 ``Box`` (one-hot parts).

    ## Rewards

    0 for every intermediate step. The last step scores the design as ``ArchSearch-v0`` does: a positive
    ratio vs the TPUv4-like baseline for feasible designs (``reward`` = ``"throughput"``,
    ``"perf_per_area"`` or ``"energy"``), ``-infeasible_penalty`` for an infeasible placement. A choice that
    leaves no completion inside the area window ends the episode with
    ``-infeasible_penalty · (1 + min(overshoot, 10))``, ``overshoot`` being the smallest relative area
    violation (:meth:`DesignSpace.overshoot`) over all completions of the choices so far — nothing is
    evaluated. Rewards are always finite.

    ## Episode End

    Terminates after the last knob, on an area-window violation or on an out-of-range index. No truncation.

    ## Arguments

    Same as ``ArchSearch-v0``: ``gymnasium.make("phaze_env/ArchSearchSeq-v0", workload="gpt2-xl",
    cluster=None, reward=None, infeasible_penalty=1.0, space=None, flatten=False,
    evaluate_kwargs=None, render_mode=None, task=None)``. ``info`` carries the design, plan and evaluation (as a dict)
    on the final step; ``env.state`` / ``env.validate(state)`` record and replay episodes.

    ## Version History

    * v0: Initial version; ``task=NAME`` (a benchmark task) added without changing any episode; the rewards
      ``throughput_per_w`` and ``throughput_per_usd`` (system space) added, and a task's episodes reward its
      objective (``reward=None``, the default: the task's, else throughput).
    """

    env_id = "phaze_env/ArchSearchSeq-v0"

    def __init__(self, workload: Any = DEFAULT_WORKLOAD, cluster=None, **kwargs: Any):
        super().__init__(workload, cluster, **kwargs)
        self.env_id = "phaze_env/ArchSearchSeqFlat-v0" if self.flatten else "phaze_env/ArchSearchSeq-v0"
        self._nvec = np.asarray(self.space.nvec, dtype=np.int64)
        self.action_space = spaces.Discrete(int(self._nvec.max()))
        self._tables = self.space.area_tables()
        self._area_knob_count = len(self.space.area_knobs)

    def _observation_dict_space(self) -> spaces.Dict:
        return spaces.Dict({"workload": workload_space(),
                            "choices": spaces.MultiDiscrete(np.asarray(self.space.nvec, dtype=np.int64) + 1),
                            "knob": knob_space(self.space), "result": result_space()})

    def _observation_dict(self) -> dict[str, Any]:
        choices = np.zeros(len(self._nvec), dtype=np.int64)
        for k, action in enumerate(self._actions):  # an out-of-range index (episode over) is not a choice
            choices[k] = action + 1 if 0 <= action < self._nvec[k] else 0
        knob = len(self._nvec) if self._done else len(self._actions)
        return {"workload": workload_features(self.workload), "choices": choices, "knob": knob,
                "result": self.scorer.result_obs(self._last_outcome)}

    def _allowed(self, prefix: list[int]) -> tuple[np.ndarray, np.ndarray | None]:
        """Allowed indices for the knob after ``prefix`` (length ``action_space.n``) and, for area knobs, each
        value's smallest overshoot over completions."""
        k = len(prefix)
        allowed = np.zeros(self.action_space.n, dtype=bool)
        if k >= len(self._nvec):
            return allowed, None
        if k < self._area_knob_count:
            ok, overshoot = self._tables.prefix(prefix)
            allowed[:len(ok)] = ok
            return allowed, overshoot
        allowed[:self._nvec[k]] = True
        return allowed, None

    def action_masks(self) -> np.ndarray:
        """Exact mask for the current knob (all ``True`` once the episode has ended, so agents never see an
        empty mask)."""
        if self._done:
            return np.ones(self.action_space.n, dtype=bool)
        return self._allowed(self._actions)[0]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._start_episode(seed, options)
        return self._observe(), self._info()

    def _advance(self, scorer: Scorer, prefix: list[int],
                 action: int) -> tuple[list[int], Design | None, Outcome | None]:
        """One choice: the new prefix and, when the episode ends, the design (if complete) and its outcome."""
        k = len(prefix)
        knobs = self.space.knobs
        if k >= len(knobs):
            raise RuntimeError("the episode is over; call reset()")
        if not 0 <= action < self._nvec[k]:
            outcome = Outcome(scorer.worst_reward, False, f"index {action} out of range for {knobs[k]}", 0.0, 0.0, 0.0,
                              0.0, None)
            return prefix + [action], None, outcome
        prefix = prefix + [action]
        if k < self._area_knob_count:
            ok, overshoot = self._tables.prefix(prefix[:-1])
            if not ok[action]:
                over = float(overshoot[action])
                chosen = {name: self.space.values(name)[i] for name, i in zip(knobs, prefix)}
                reason = f"no completion of {chosen} is inside the area window; not evaluated"
                return prefix, None, Outcome(scorer.area_penalty(over), False, reason, over, 0.0, 0.0, 0.0, None)
        if len(prefix) < len(knobs):
            return prefix, None, None
        design = self.space.decode(prefix)
        return prefix, design, scorer.score(design)

    def step(self, action):
        action = int(np.asarray(action).reshape(-1)[0])
        self._actions, design, outcome = self._advance(self.scorer, self._actions, action)
        if outcome is None:
            return self._observe(), 0.0, False, False, self._info()
        self._last_design, self._last_outcome, self._done = design, outcome, True
        info = self._info()
        if design is None:  # ended before a full design: report why
            info.update(feasible=False, reason=outcome.reason, evaluated=False, overshoot=outcome.overshoot,
                        evaluation=None, plan={})
        return self._observe(), float(outcome.reward), True, False, info

    def _replay(self, scorer: Scorer, actions: list):
        prefix: list[int] = []
        for action in actions:
            prefix, design, outcome = self._advance(scorer, prefix, int(action))
            if outcome is not None:
                return design, outcome
        return None, None
