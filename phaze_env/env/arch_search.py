"""``phaze_env/ArchSearch-v0``: design a training accelerator (and how to train on it) in one step."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from phaze_env.design import Design
from phaze_env.env.base import DEFAULT_WORKLOAD, ArchSearchBase
from phaze_env.env.core import Outcome, Scorer, result_space, workload_features, workload_space


class ArchSearchEnv(ArchSearchBase):
    """
    ## Description

    One-shot co-design of a training accelerator with PHAZE's evaluator: the agent picks every knob at once
    — tensor-core count, width and depth, vector-core count, on-chip buffer, HBM capacity, microbatch size
    and whether activation recompute is allowed — and the design is evaluated on a workload (e.g. GPT-2 XL)
    and a cluster (e.g. 1024 devices) by :func:`phaze_env.design.evaluate_design`: per-layer ILP schedules and
    the exact data × pipeline × tensor placement DP. The episode is one step (a contextual bandit); with a
    list of workloads each episode takes the next one, so a policy learns designs per workload.

    ## Action Space

    ``MultiDiscrete(space.nvec)``: one index per knob of ``space.knobs`` into its value lists (``space`` is a
    :class:`~phaze_env.design.DesignSpace`; PHAZE's full space by default, knobs ``num_tc, tc_width, tc_depth,
    num_vc, buffer_mb, hbm_gb, microbatch, recompute``: 13 × 8 × 8 × 13 × 7 × 3 × 4 × 2; a space with more
    knobs, such as the system space, widens the action and observation alike).

    ``action_masks()`` returns the concatenation of per-knob boolean masks (the format sb3-contrib's
    ``MaskablePPO`` takes for ``MultiDiscrete``): a value is masked out when **no** choice of the other knobs
    puts the design inside the area window. Per-knob masks cannot express the joint window exactly (a
    combination of individually allowed values can still be too large or too small), so such designs can be
    chosen; they are not evaluated and get the area penalty below. ``ArchSearchSeq-v0`` masks exactly.

    ## Observation Space

    ``Dict`` with

    * ``"workload"``: ``Box(0, 1, (5,), float32)`` — log2 hidden size / 16, log2 layers / 8, log2 heads / 8,
      log2 sequence length / 17, log10 parameter count / 13;
    * ``"design"``: ``MultiDiscrete(space.nvec)`` — the knob indices of the design just evaluated (zeros
      after ``reset``);
    * ``"result"``: ``Box(0, 1e6, (3,), float32)`` — its reward ratio (0 unless feasible), area / the design's
      area budget and a feasible flag (zeros after ``reset``).

    With ``flatten=True`` (ids ``phaze_env/ArchSearchFlat-v0``) the same content as one float32 ``Box``
    (discrete parts one-hot), for SB3's ``MlpPolicy``.

    ## Rewards

    Feasible designs score a positive ratio against the space's baseline
    (:meth:`~phaze_env.design.DesignSpace.evaluate_baseline`; PHAZE's spaces: the TPUv4-like accelerator on the
    same workload, cluster and knob lists), so the baseline scores 1: ``reward="throughput"`` the throughput ratio;
    ``"perf_per_area"`` the throughput ratio divided by area / the design's area budget; ``"energy"`` baseline energy per
    sample divided by the design's; ``"throughput_per_w"`` / ``"throughput_per_usd"`` (the system space) the design's
    throughput per watt or dollar of its built system over the baseline system's (TPUv4 at the space's budget).
    ``reward=None`` (the default) is a benchmark task's objective, else ``"throughput"``. Designs inside the area window whose placement is infeasible (nothing
    fits in HBM, …) get ``-infeasible_penalty``; designs outside the window are not evaluated and get
    ``-infeasible_penalty · (1 + min(overshoot, 10))`` with ``overshoot`` the relative area violation
    (:meth:`DesignSpace.overshoot`). Rewards are always finite. When the baseline itself has no feasible
    placement there is nothing to normalise by: ratios use 1 sample/s (and 1 J/sample), a warning says so
    and ``info["baseline"]["feasible"]`` is False. Evaluator errors are raised, never scored.

    ## Episode End

    After the single step (``terminated=True``). There is no truncation.

    ## Arguments

    ``gymnasium.make("phaze_env/ArchSearch-v0", workload="gpt2-xl", cluster=None, reward=None,
    infeasible_penalty=1.0, space=None, flatten=False, evaluate_kwargs=None, render_mode=None, task=None)``

    * ``workload``: a built-in name, a :class:`~phaze_env.workloads.Workload`, or a list of them cycled per
      episode (a seeded ``reset`` restarts the cycle; ``reset(options={"workload": name})`` picks one);
    * ``cluster``: a :class:`~phaze_env.evaluate.Cluster` or its dict (default PHAZE's 1024 devices);
    * ``space``: a :class:`~phaze_env.design.DesignSpace` (default PHAZE's full space);
    * ``evaluate_kwargs``: passed to :func:`evaluate` (``solver``, ``time_limit_s``, ``tensor_widths``, …);
      unknown names, and the knobs each design sets, raise ``ValueError``;
    * ``task``: a benchmark task's name (:data:`phaze_env.tasks.TASKS`), which sets the workload, cluster and
      space (give none of them); ``env.unwrapped.task`` is the :class:`~phaze_env.tasks.Task` (its certified
      optimum: :func:`phaze_env.tasks.load_reference`).

    ``info`` carries the design, the reward ratio, the area, the plan and the full
    :class:`~phaze_env.evaluate.Evaluation` as a dict (without its run-dependent ``timings_s`` and
    ``from_cache``), or ``None`` when the design was not evaluated. ``info["proven"]`` is False when the
    reward rests on an operator schedule whose ILP stopped before proving it optimal (the throughput is
    achieved, not proven best; :attr:`Evaluation.proven`). ``env.state`` records the episode
    (JSON via ``state.to_json()``); ``env.validate(state)`` replays and checks it.

    ## Version History

    * v0: Initial version; ``task=NAME`` (a benchmark task) added without changing any episode; the rewards
      ``throughput_per_w`` and ``throughput_per_usd`` (system space) added, and a task's episodes reward its
      objective (``reward=None``, the default: the task's, else throughput).
    """

    env_id = "phaze_env/ArchSearch-v0"

    def __init__(self, workload: Any = DEFAULT_WORKLOAD, cluster=None, **kwargs: Any):
        super().__init__(workload, cluster, **kwargs)
        self.env_id = "phaze_env/ArchSearchFlat-v0" if self.flatten else "phaze_env/ArchSearch-v0"
        self.action_space = spaces.MultiDiscrete(self.space.nvec)
        self._masks = np.concatenate(self.space.area_tables().knob_masks(self.space))

    def _observation_dict_space(self) -> spaces.Dict:
        return spaces.Dict({"workload": workload_space(), "design": spaces.MultiDiscrete(self.space.nvec),
                            "result": result_space()})

    def _observation_dict(self) -> dict[str, Any]:
        design = (np.asarray(self.space.encode(self._last_design), dtype=np.int64) if self._last_design is not None
                  else np.zeros(len(self.space.knobs), dtype=np.int64))
        return {"workload": workload_features(self.workload), "design": design,
                "result": self.scorer.result_obs(self._last_outcome)}

    def action_masks(self) -> np.ndarray:
        """Concatenated per-knob masks (length ``sum(space.nvec)``); see the class docstring."""
        return self._masks.copy()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._start_episode(seed, options)
        return self._observe(), self._info()

    def step(self, action):
        indices = np.asarray(action, dtype=np.int64).reshape(-1)
        design, outcome = self._play(self.scorer, indices)
        self._actions = [indices.tolist()]
        self._last_design, self._last_outcome, self._done = design, outcome, True
        return self._observe(), float(outcome.reward), True, False, self._info()

    def _play(self, scorer: Scorer, indices) -> tuple[Design, Outcome]:
        design = self.space.decode([int(i) for i in indices])
        return design, scorer.score(design)

    def _replay(self, scorer: Scorer, actions: list):
        if len(actions) != 1:
            raise ValueError(f"a one-shot episode has exactly one action, got {len(actions)}")
        return self._play(scorer, actions[0])
