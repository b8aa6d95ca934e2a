"""What the architecture-search environments share: options, workload features, area masks, rewards, state.

Both environments score a :class:`~phaze_env.design.Design` of any :class:`~phaze_env.design.DesignSpace`
(PHAZE's or one with more knobs: they read its knob order, area knobs and window from the space) the same
way (:class:`Scorer`):

* outside the area window → **not evaluated**; reward ``-infeasible_penalty · (1 + min(overshoot, 10))``
  (``overshoot`` is :meth:`DesignSpace.overshoot`, the relative area violation);
* inside the window, infeasible placement (nothing fits in HBM, …) → reward ``-infeasible_penalty``;
* feasible → a positive ratio against the space's baseline (:meth:`DesignSpace.evaluate_baseline`: the
  TPUv4-like accelerator on the same workload, cluster and knob lists for PHAZE's spaces) (``throughput``:
  throughput ratio; ``perf_per_area``: throughput ratio / area fraction of the design's area budget;
  ``energy``: baseline energy per sample / energy per sample). So every feasible design outranks every
  infeasible one, and the baseline scores 1.

Evaluations go through :meth:`DesignSpace.evaluate` (:func:`phaze_env.design.evaluate_design`), whose cache (bounded in memory, persistent on
disk: :mod:`phaze_env.cache`) makes re-stepping a known design a lookup; the envs keep no memo of their own.
A ``fresh`` scorer bypasses every cache layer, for its designs and its baseline.
"""

from __future__ import annotations

import functools
import json
import math
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np
from gymnasium import spaces

from phaze_env.design import Design, DesignSpace, SystemDesignSpace, evaluate_options, reference_system
from phaze_env.evaluate import Cluster, Evaluation
from phaze_env.workloads import Workload, get_workload

REWARDS = ("throughput", "perf_per_area", "energy", "throughput_per_w", "throughput_per_usd")
SYSTEM_REWARDS = ("throughput_per_w", "throughput_per_usd")
"""Rewards that need a built system's watts and dollars (the system space's; :meth:`phaze_env.design.DesignSpace.objective_score`)."""
OVERSHOOT_CAP = 10.0
OBS_CAP = 1e6  # observation ceiling for ratios (a Box needs finite bounds for most agents)
# Evaluation fields that depend on the run, not on the design (kept out of ``info`` so it is deterministic).
RUN_DEPENDENT_FIELDS = ("timings_s", "from_cache")


# --- options --------------------------------------------------------------------------------------------
def as_workloads(workload: Any) -> list[Workload]:
    """A workload name / :class:`Workload`, or a non-empty list of them, as a list of workloads."""
    items = list(workload) if isinstance(workload, (list, tuple)) else [workload]
    if not items:
        raise ValueError("workload list must not be empty")
    return [get_workload(w) for w in items]


def as_cluster(cluster: Cluster | dict[str, Any] | None) -> Cluster:
    if cluster is None:
        return Cluster()
    if isinstance(cluster, Cluster):
        return cluster
    if isinstance(cluster, dict):
        return Cluster.from_dict(cluster)
    raise TypeError(f"cluster must be a Cluster or a dict, got {type(cluster).__name__}")


def as_space(space: DesignSpace | dict[str, Any] | None) -> DesignSpace:
    if space is None:
        return DesignSpace()
    if isinstance(space, DesignSpace):
        return space
    if isinstance(space, dict):
        return DesignSpace(**space)
    raise TypeError(f"space must be a DesignSpace or a dict of knob lists, got {type(space).__name__}")


def workload_ref(workload: Workload) -> str | dict[str, Any]:
    """How a state file names a workload: its name when built in, else its full definition."""
    try:
        if get_workload(workload.name) == workload:
            return workload.name
    except ValueError:
        pass
    return workload.to_dict()


def workload_from_ref(ref: str | dict[str, Any]) -> Workload:
    return get_workload(ref) if isinstance(ref, str) else Workload.from_dict(ref)


# --- workload features ----------------------------------------------------------------------------------
WORKLOAD_FEATURES = ("log2_hidden/16", "log2_layers/8", "log2_heads/8", "log2_seq_len/17", "log10_params/13")


def _config_int(cfg: dict[str, Any], keys: Sequence[str], default: int) -> int:
    return next((int(cfg[k]) for k in keys if k in cfg and cfg[k] is not None), default)


def workload_features(workload: Workload) -> np.ndarray:
    """Five numbers in [0, 1]: log-scaled hidden size, layers, heads, sequence length and parameter count."""
    cfg = workload.config_dict
    hidden = _config_int(cfg, ("n_embd", "hidden_size", "d_model"), 1)
    heads = workload.num_heads or 1
    vocab = _config_int(cfg, ("vocab_size",), 0)
    layers = workload.num_layers
    params = workload.published_params or 12 * layers * hidden * hidden + vocab * hidden  # transformer estimate
    raw = [math.log2(max(hidden, 1)) / 16, math.log2(max(layers, 1)) / 8, math.log2(max(heads, 1)) / 8,
           math.log2(max(workload.seq_len, 1)) / 17, math.log10(max(params, 1)) / 13]
    return np.clip(np.asarray(raw, dtype=np.float32), 0.0, 1.0)


def workload_space() -> spaces.Box:
    return spaces.Box(0.0, 1.0, shape=(len(WORKLOAD_FEATURES),), dtype=np.float32)


RESULT_FIELDS = ("score_ratio", "area_fraction", "feasible")


def result_space() -> spaces.Box:
    """Last result: reward-kind ratio vs the baseline (0 if infeasible), area / the design's area budget, feasible
    flag."""
    return spaces.Box(0.0, OBS_CAP, shape=(len(RESULT_FIELDS),), dtype=np.float32)


def knob_space(space: DesignSpace) -> spaces.Discrete:
    """Which knob comes next in a knob-per-step episode: ``0 … len(space.knobs) - 1``, and
    ``len(space.knobs)`` once the episode has ended."""
    return spaces.Discrete(len(space.knobs) + 1)


# --- evaluation and reward ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    """One scored design: reward, whether it was evaluated, and what ``info`` reports."""

    reward: float
    feasible: bool
    reason: str
    overshoot: float
    area_mm2: float
    area_fraction: float  # area / the design's area budget (0 when no design was completed)
    score_ratio: float  # the reward kind's ratio vs the baseline (0 unless feasible)
    evaluation: Evaluation | None

    def info(self, design: Design, baseline: dict[str, float] | None) -> dict[str, Any]:
        """``baseline`` is only reported (and needed) for evaluated designs."""
        evaluation = None
        if self.evaluation is not None:
            evaluation = {k: v for k, v in self.evaluation.to_dict().items() if k not in RUN_DEPENDENT_FIELDS}
        return {"design": design.to_dict(), "feasible": self.feasible, "reason": self.reason,
                "evaluated": self.evaluation is not None, "area_mm2": self.area_mm2, "overshoot": self.overshoot,
                "score_ratio": self.score_ratio,
                "throughput_samples_s": self.evaluation.throughput_samples_s if self.evaluation else 0.0,
                "proven": self.evaluation.proven if self.evaluation else True,
                "plan": evaluation["plan"] if evaluation else {}, "evaluation": evaluation,
                "baseline": dict(baseline) if baseline is not None else None}


def _finite(x: float, default: float = 0.0) -> float:
    x = float(x)
    return x if math.isfinite(x) else default


@dataclass
class Scorer:
    """Scores designs of ``space`` on one workload and cluster with one reward kind; a ``fresh`` scorer
    re-evaluates everything (designs and baseline) past every cache layer (for replay checks), as does
    ``evaluate_kwargs={"cache": False}``."""

    workload: Workload
    cluster: Cluster
    space: DesignSpace
    reward: str = "throughput"
    infeasible_penalty: float = 1.0
    evaluate_kwargs: dict[str, Any] = field(default_factory=dict)
    fresh: bool = False

    def __post_init__(self) -> None:
        self.evaluate_kwargs = evaluate_options(self.evaluate_kwargs)
        self.fresh = self.fresh or not self.evaluate_kwargs.pop("cache", True)
        if self.reward not in REWARDS:
            raise ValueError(f"reward must be one of {', '.join(REWARDS)}, got {self.reward!r}")
        if self.reward in SYSTEM_REWARDS and not isinstance(self.space, SystemDesignSpace):
            raise ValueError(f"reward {self.reward!r} needs the system space (a built system's watts and dollars); "
                             f"this space scores {', '.join(r for r in REWARDS if r not in SYSTEM_REWARDS)}")
        if not (math.isfinite(self.infeasible_penalty) and self.infeasible_penalty >= 0):
            raise ValueError(f"infeasible_penalty must be a finite non-negative number, got {self.infeasible_penalty!r}")

    @functools.cached_property
    def baseline(self) -> dict[str, Any]:
        """Baseline throughput (samples/s) and energy (J/sample), and whether the baseline is feasible.

        Errors while evaluating it propagate. When the TPUv4-like design has no feasible placement on this
        workload and cluster (a real answer, e.g. a model too large for its HBM), there is nothing to
        normalise by: rewards then use 1 sample/s and 1 J/sample as the scale (absolute values), a warning
        says so and ``info["baseline"]["feasible"]`` is False."""
        ev = self.space.evaluate_baseline(self.workload, self.cluster, cache=not self.fresh, **self.evaluate_kwargs)
        if not ev.feasible or ev.throughput_samples_s <= 0:
            warnings.warn(f"baseline infeasible for {self.workload.name} ({ev.reason}); rewards use 1 sample/s "
                          "and 1 J/sample as the scale", stacklevel=2)
            return {"feasible": False, "throughput_samples_s": 1.0, "energy_per_sample_j": 1.0,
                    "area_mm2": ev.area_mm2}
        return {"feasible": True, "throughput_samples_s": ev.throughput_samples_s,
                "energy_per_sample_j": ev.energy_per_sample_j if ev.energy_per_sample_j > 0 else 1.0,
                "area_mm2": ev.area_mm2}

    @functools.cached_property
    def baseline_rate(self) -> float:
        """The baseline system's throughput per watt or dollar for a rate reward (the TPUv4 reference the space's
        budget buys, :func:`~phaze_env.design.reference_system`); 1 (absolute rates) when the baseline is infeasible,
        as for the other rewards."""
        base = self.baseline
        if not base["feasible"]:
            return 1.0
        point, _ = reference_system("tpuv4", self.space.budget)
        return base["throughput_samples_s"] / point.objective_divisor(self.reward)

    def area_penalty(self, overshoot: float) -> float:
        return -self.infeasible_penalty * (1.0 + min(_finite(overshoot, OVERSHOOT_CAP), OVERSHOOT_CAP))

    @property
    def worst_reward(self) -> float:
        return self.area_penalty(OVERSHOOT_CAP)

    def score(self, design: Design) -> Outcome:
        """Reward and result of ``design``."""
        area = _finite(self.space.area_mm2(design))
        fraction = _finite(self.space.area_fraction(design), OBS_CAP)
        overshoot = _finite(self.space.overshoot(design), OVERSHOOT_CAP)
        if overshoot > 0:  # outside the area window (the overshoot is 0 exactly inside it: hardware.space)
            return Outcome(self.area_penalty(overshoot), False,
                           f"outside the area window (overshoot {overshoot:.3g}); not evaluated", overshoot, area,
                           fraction, 0.0, None)
        ev = self.space.evaluate(design, self.workload, self.cluster, cache=not self.fresh, **self.evaluate_kwargs)
        if not ev.feasible or not ev.throughput_samples_s > 0:
            return Outcome(-self.infeasible_penalty, False, ev.reason or "no feasible plan", 0.0, area, fraction, 0.0,
                           ev)
        base = self.baseline
        ratio = ev.throughput_samples_s / base["throughput_samples_s"]
        if self.reward == "perf_per_area":
            ratio /= max(fraction, 1e-12)
        elif self.reward == "energy":
            ratio = base["energy_per_sample_j"] / ev.energy_per_sample_j if ev.energy_per_sample_j > 0 else 0.0
        elif self.reward in SYSTEM_REWARDS:  # the design's rate over the baseline system's (TPUv4 at the budget)
            ratio = self.space.objective_score(design, ev.throughput_samples_s, self.reward) / self.baseline_rate
        ratio = min(_finite(ratio), OBS_CAP)
        return Outcome(ratio, True, "", 0.0, area, fraction, ratio, ev)

    def result_obs(self, outcome: Outcome | None) -> np.ndarray:
        if outcome is None:
            return np.zeros(len(RESULT_FIELDS), dtype=np.float32)
        values = [outcome.score_ratio, outcome.area_fraction, float(outcome.feasible)]
        return np.clip(np.nan_to_num(np.asarray(values, dtype=np.float32)), 0.0, OBS_CAP)


# --- observations ---------------------------------------------------------------------------------------
class Flattener:
    """A ``Dict`` observation space and its float32 ``Box`` flattening (one-hot for discrete parts)."""

    def __init__(self, dict_space: spaces.Dict):
        self.dict_space = dict_space
        flat = spaces.flatten_space(dict_space)
        self.box = spaces.Box(flat.low.astype(np.float32), flat.high.astype(np.float32), dtype=np.float32)

    def __call__(self, obs: dict[str, Any]) -> np.ndarray:
        return spaces.flatten(self.dict_space, obs).astype(np.float32)


# --- state (CompilerGym-style) --------------------------------------------------------------------------
@dataclass(frozen=True)
class ArchSearchState:
    """A finished episode that can be written out (JSON) and replayed with ``env.validate(state)``."""

    env_id: str
    workload: str | dict[str, Any]
    cluster: dict[str, Any]
    reward_kind: str
    actions: list
    design: dict[str, Any] | None
    reward: float | None
    throughput_samples_s: float | None
    feasible: bool | None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ArchSearchState:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class ValidationResult:
    """What replaying a state found: ``ok`` when the replay reproduces the recorded design and result."""

    ok: bool
    errors: tuple[str, ...]
    reward: float | None
    throughput_samples_s: float | None

    def __bool__(self) -> bool:
        return self.ok


def compare_replay(state: ArchSearchState, design: Design | None, reward: float | None, throughput: float | None,
                   feasible: bool | None, rel_tol: float = 1e-9) -> ValidationResult:
    errors = []
    if state.design is not None and (design is None or design.to_dict() != state.design):
        errors.append(f"design {design.to_dict() if design else None} != recorded {state.design}")
    for name, got, want in (("reward", reward, state.reward), ("throughput_samples_s", throughput,
                                                                 state.throughput_samples_s)):
        if want is not None and (got is None or not math.isclose(got, want, rel_tol=rel_tol, abs_tol=1e-12)):
            errors.append(f"{name} {got} != recorded {want}")
    if state.feasible is not None and feasible != state.feasible:
        errors.append(f"feasible {feasible} != recorded {state.feasible}")
    return ValidationResult(not errors, tuple(errors), reward, throughput)
