"""The options, workload cycling, rendering and state replay both architecture-search envs share."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from phaze_env.design import Design, DesignSpace
from phaze_env.env.core import (ArchSearchState, Flattener, Outcome, Scorer, ValidationResult, as_cluster, as_space,
                                as_workloads, compare_replay, workload_from_ref, workload_ref)
from phaze_env.evaluate import Cluster
from phaze_env.tasks import get_task
from phaze_env.workloads import Workload


DEFAULT_WORKLOAD = "gpt2-xl"


class ArchSearchBase(gym.Env):
    """Options (``workload``, ``cluster``, ``reward``, ``infeasible_penalty``, ``space``, ``flatten``,
    ``evaluate_kwargs``, or a benchmark ``task`` that sets the first two and the space), one :class:`Scorer` per workload, and the CompilerGym-style ``state``/``validate``."""

    metadata = {"render_modes": ["ansi"]}
    env_id = ""

    def __init__(self, workload: Any = DEFAULT_WORKLOAD, cluster: Cluster | dict[str, Any] | None = None, *,
                 reward: str | None = None, infeasible_penalty: float = 1.0, space: DesignSpace | None = None,
                 flatten: bool = False, evaluate_kwargs: dict[str, Any] | None = None, render_mode: str | None = None,
                 task: str | None = None):
        self.task = None
        if task is not None:  # a benchmark task fixes the workload, the cluster and the space (phaze_env.tasks)
            if cluster is not None or space is not None or workload != DEFAULT_WORKLOAD:
                raise ValueError(f"task={task!r} sets the workload, the cluster and the space: pass none of them")
            self.task = get_task(task)
            workload, cluster, space = self.task.workload_spec(), self.task.cluster(), self.task.design_space()
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.workloads: list[Workload] = as_workloads(workload)
        self.cluster = as_cluster(cluster)
        self.space = as_space(space)
        # the reward: as asked, else a task's objective (what its certified optimum maximises), else throughput
        self.reward_kind = reward if reward is not None else (self.task.objective if self.task else "throughput")
        self.infeasible_penalty = float(infeasible_penalty)
        self.evaluate_kwargs = dict(evaluate_kwargs or {})
        self.render_mode = render_mode
        self._scorers: dict[Workload, Scorer] = {}
        self.scorer = self._scorer(self.workloads[0])  # validates reward and penalty now, not at the first step
        self._episode = -1
        self.flatten = flatten
        self._dict_space = self._observation_dict_space()
        self._flattener = Flattener(self._dict_space) if flatten else None
        self.observation_space = self._flattener.box if flatten else self._dict_space
        self.reward_range = (self.scorer.worst_reward, float("inf"))
        self._last_outcome: Outcome | None = None
        self._last_design: Design | None = None
        self._actions: list = []
        self._done = False

    # --- hooks ----------------------------------------------------------------------------------------
    def _observation_dict_space(self) -> gym.spaces.Dict:
        raise NotImplementedError

    def _observation_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def _replay(self, scorer: Scorer, actions: list) -> tuple[Design | None, Outcome | None]:
        raise NotImplementedError

    # --- shared machinery -----------------------------------------------------------------------------
    def _scorer(self, workload: Workload) -> Scorer:
        if workload not in self._scorers:
            self._scorers[workload] = Scorer(workload, self.cluster, self.space, self.reward_kind,
                                             self.infeasible_penalty, self.evaluate_kwargs)
        return self._scorers[workload]

    @property
    def workload(self) -> Workload:
        return self.scorer.workload

    def _observe(self) -> Any:
        obs = self._observation_dict()
        return self._flattener(obs) if self._flattener else obs

    def _start_episode(self, seed: int | None, options: dict[str, Any] | None) -> None:
        """Pick the episode's workload: ``options["workload"]`` if given, else the next one in the cycle (a
        seeded reset restarts the cycle, so ``reset(seed=s)`` is reproducible)."""
        super().reset(seed=seed)
        if seed is not None:
            self._episode = -1
        self._episode += 1
        chosen = (options or {}).get("workload")
        workload = as_workloads(chosen)[0] if chosen is not None else self.workloads[self._episode % len(self.workloads)]
        self.scorer = self._scorer(workload)
        self._last_outcome = None
        self._last_design = None
        self._actions = []
        self._done = False

    def _info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"workload": self.workload.name}
        if self._last_outcome is not None and self._last_design is not None:
            o = self._last_outcome
            info.update(o.info(self._last_design, self.scorer.baseline if o.evaluation is not None else None))
        return info

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        if self._last_outcome is None or self._last_design is None:
            return f"{self.workload.name}: choices {self._actions}"
        o = self._last_outcome
        status = f"reward {o.reward:.4g}" + ("" if o.feasible else f" ({o.reason})")
        return f"{self.workload.name}: {self._last_design} area {o.area_mm2:.1f} mm², {status}"

    @property
    def state(self) -> ArchSearchState:
        """The current episode as a JSON-serialisable record (result fields ``None`` until it has ended)."""
        outcome = self._last_outcome if self._done else None
        return ArchSearchState(
            env_id=self.env_id, workload=workload_ref(self.workload), cluster=self.cluster.to_dict(),
            reward_kind=self.reward_kind, actions=[np.asarray(a).tolist() for a in self._actions],
            design=self._last_design.to_dict() if self._done and self._last_design else None,
            reward=outcome.reward if outcome else None,
            throughput_samples_s=outcome.evaluation.throughput_samples_s if outcome and outcome.evaluation else
            (0.0 if outcome else None),
            feasible=outcome.feasible if outcome else None)

    def validate(self, state: ArchSearchState | str, *, fresh: bool = False) -> ValidationResult:
        """Replay ``state``'s actions in this env's design space and check the design, reward, throughput and
        feasibility match. ``fresh`` re-evaluates the design and the baseline past every cache layer (memory and
        disk: graphs, schedules, placements, evaluations)."""
        if isinstance(state, str):
            state = ArchSearchState.from_json(state)
        try:
            scorer = Scorer(workload_from_ref(state.workload), as_cluster(state.cluster), self.space,
                            state.reward_kind, self.infeasible_penalty, self.evaluate_kwargs, fresh=fresh)
            design, outcome = self._replay(scorer, state.actions)
        except Exception as error:  # noqa: BLE001 - a malformed state is a failed validation, not a crash
            return ValidationResult(False, (f"replay failed: {type(error).__name__}: {error}",), None, None)
        if outcome is None:
            return ValidationResult(False, ("the actions do not finish an episode",), None, None)
        throughput = outcome.evaluation.throughput_samples_s if outcome.evaluation else 0.0
        return compare_replay(state, design, outcome.reward, throughput, outcome.feasible)
