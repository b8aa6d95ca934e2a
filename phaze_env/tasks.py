"""Named benchmark tasks with certified optima: a workload, a design space, a budget and an objective.

A :class:`Task` fixes everything a search is scored on — the workload (four small models, two dense and two
mixture-of-experts, so an exact search of each task takes seconds to a minute), the design space (PHAZE's full
knob lists at an area budget, or the system space at a power or money budget), the cluster's training fields and
the objective (training throughput, or two objectives whose exact Pareto front is the reference). Each task's
certified optimum (or front) is stored as data in ``phaze_env/task_optima/<file>.json``, written by
``python -m experiments.task_optima`` (which runs ``search.phaze`` and can ``--check`` them), and read with
:func:`load_reference`.

A task's **version** (:attr:`Task.version`) is a content key of its definition and of the model's code — the
source of :mod:`phaze_env.design` and of every project module it imports (the evaluator, the placement DP, the
hardware, power and cost models: :func:`phaze_env.cache.code_version`). A stored reference carries the version it
was computed under; when the model changes, :func:`load_reference` refuses it in one line naming the command that
regenerates it, so a score is never normalised by an optimum of another model.

The faces take a task by name: ``gymnasium.make("phaze_env/ArchSearch-v0", task=NAME)``,
``make_objective(task=NAME)``, ``python -m experiments.leaderboard --task NAME|all``.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from phaze_env.cache import code_key
from phaze_env.design import Design, DesignSpace, SystemDesignSpace
from phaze_env.evaluate import Cluster
from phaze_env.hardware.space import area_budget_mm2
from phaze_env.hardware.system import AREA_OBJECTIVE, SystemBudget
from phaze_env.workloads import Workload, custom_workload

OPTIMA_DIR = Path(__file__).with_name("task_optima")
"""Where the certified optima and fronts live (one JSON per task, :meth:`Task.file_name`)."""
MODEL_MODULE = "phaze_env.design"
"""The module whose code (with everything it imports: evaluator, placement, hardware, power and cost) a task's
optimum is a function of: :attr:`Task.version` hashes it."""
REGENERATE = "python -m experiments.task_optima"
"""The command that recomputes (and with ``--check`` verifies) the stored optima."""
TASK_DEVICES = 16
TASK_GLOBAL_BATCH = 64
"""PHAZE's-space tasks run on 16 devices with a global batch of 64 sequences (the test suite's tiny cluster); a
system-space design's chips are its own (the budget buys them), the batch is the same."""


def _tiny(name: str, config_class: str, model_class: str, **config: Any) -> Workload:
    return custom_workload(name, config_class, model_class, 64, vocab_size=1000, **config)


@functools.cache
def tiny_workloads() -> dict[str, Workload]:
    """The tasks' models: small enough that a task's exact search takes seconds, with the structure of the real
    ones (GPT-2 and Llama blocks; Mixtral's top-2 of 8 experts, and a wider Mixtral routing top-1 of 4). Sequence
    64. (A tiny Qwen-MoE with its shared expert took 20–70 s per evaluation, OLMoE's q/k norms do not split
    tensor-parallel: neither fits a task.)"""
    return {w.name: w for w in (
        _tiny("tiny-gpt2", "GPT2Config", "GPT2LMHeadModel", n_embd=128, n_layer=4, n_head=4, n_inner=512,
              n_positions=64),
        _tiny("tiny-llama", "LlamaConfig", "LlamaForCausalLM", hidden_size=128, num_hidden_layers=4,
              num_attention_heads=4, num_key_value_heads=4, intermediate_size=352, max_position_embeddings=64,
              tie_word_embeddings=False),
        _tiny("tiny-mixtral", "MixtralConfig", "MixtralForCausalLM", hidden_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=4, intermediate_size=256, num_local_experts=8,
              num_experts_per_tok=2, max_position_embeddings=64, sliding_window=None, tie_word_embeddings=False),
        _tiny("tiny-mixtral-e4", "MixtralConfig", "MixtralForCausalLM", hidden_size=192, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=4, intermediate_size=384, num_local_experts=4,
              num_experts_per_tok=1, max_position_embeddings=64, sliding_window=None, tie_word_embeddings=False),
    )}


DENSE = ("tiny-gpt2", "tiny-llama")
MOE = ("tiny-mixtral", "tiny-mixtral-e4")


class TaskError(ValueError):
    """A task that cannot be used as asked (unknown, no stored reference, stale reference): one line."""


@dataclass(frozen=True)
class Task:
    """One benchmark task. ``space`` is ``"full"`` (PHAZE's knob lists, area budget ``area_fraction`` × the
    TPUv4-like architecture's) or ``"system"`` (at ``budget_w`` watts or ``budget_usd`` dollars);
    ``objectives``: one of :data:`~phaze_env.hardware.system.OBJECTIVES`' rates (maximised), or two of them and
    ``"area"`` (a front); :attr:`objective` is what a single-objective strategy maximises."""

    name: str
    workload: str
    space: str
    objectives: tuple[str, ...] = ("throughput",)
    area_fraction: float | None = None
    budget_w: float | None = None
    budget_usd: float | None = None

    @property
    def multi_objective(self) -> bool:
        return len(self.objectives) > 1

    @property
    def objective(self) -> str:
        """What a single-objective strategy maximises on this task: its objective, or a front's first one (on a
        two-objective task the board scores the hypervolume of everything it evaluated)."""
        return self.objectives[0]

    @property
    def is_system(self) -> bool:
        return self.space == "system"

    def __post_init__(self) -> None:
        system_only = [o for o in self.objectives if o not in ("throughput", AREA_OBJECTIVE)]
        if system_only and self.space != "system":
            raise TaskError(f"task {self.name}: objective {system_only[0]!r} needs the system space")

    def workload_spec(self) -> Workload:
        return tiny_workloads()[self.workload]

    def cluster(self) -> Cluster:
        return Cluster(n_devices=TASK_DEVICES, global_batch=TASK_GLOBAL_BATCH)

    def design_space(self) -> DesignSpace:
        return _design_space(self.space, self.area_fraction, self.budget_w, self.budget_usd)

    def definition(self) -> dict[str, Any]:
        """Everything the task's answer depends on besides the model's code (JSON-ready)."""
        return {"name": self.name, "workload": self.workload_spec().to_dict(), "cluster": self.cluster().to_dict(),
                "space": self.design_space().to_dict(), "objectives": list(self.objectives)}

    @property
    def version(self) -> str:
        """16 hex digits of a content key of :meth:`definition` and the model's code (:data:`MODEL_MODULE`)."""
        return code_key(MODEL_MODULE, "task", self.definition())[:16]

    def file_name(self) -> str:
        return self.name.replace("/", "__") + ".json"

    def describe(self) -> str:
        budget = (f"area ≤ {self.area_fraction:g} × TPUv4's" if self.space == "full" else
                  f"{self.budget_w / 1e3:g} kW" if self.budget_w else f"${self.budget_usd / 1e6:g}M")
        return f"{self.workload} · {self.space} space · {budget} · {' vs '.join(self.objectives)}"


@functools.lru_cache(maxsize=32)
def _design_space(space: str, area_fraction: float | None, budget_w: float | None,
                  budget_usd: float | None) -> DesignSpace:
    if space == "full":
        return DesignSpace(budget_mm2=area_budget_mm2() * area_fraction)
    return SystemDesignSpace(budget=SystemBudget.of(budget_w, budget_usd))


def _build_tasks() -> dict[str, Task]:
    tasks: list[Task] = []
    for workload in DENSE + MOE:
        for fraction in (0.05, 0.1):
            tasks.append(Task(f"{workload}/full-a{round(fraction * 100):02d}/throughput", workload, "full",
                              area_fraction=fraction))
        tasks.append(Task(f"{workload}/system-20kW/throughput", workload, "system", budget_w=20e3))
        tasks.append(Task(f"{workload}/system-150k$/throughput", workload, "system", budget_usd=150e3))
    for workload in DENSE + MOE:
        tasks.append(Task(f"{workload}/full-a10/throughput+area", workload, "full", ("throughput", AREA_OBJECTIVE),
                          area_fraction=0.1))
    # throughput against die area at a power budget (throughput against throughput per $ there had one-point fronts
    # under session 54's stack: the fastest system was also the cheapest per sample, so it tested no trade-off)
    for workload, objectives in ((DENSE[0], ("throughput", AREA_OBJECTIVE)),
                                 (MOE[0], ("throughput", AREA_OBJECTIVE)),
                                 (DENSE[1], ("throughput_per_w", AREA_OBJECTIVE)),
                                 (MOE[1], ("throughput_per_w", AREA_OBJECTIVE))):
        tasks.append(Task(f"{workload}/system-20kW/{'+'.join(objectives)}", workload, "system", objectives,
                          budget_w=20e3))
    # the rates on their own: per $ at a power budget, per W at a money budget (at a power budget every design
    # spends about the budget, so per W would rank as throughput does; and likewise per $ at a money budget)
    for workload, objective, budget in ((DENSE[0], "throughput_per_usd", dict(budget_w=20e3)),
                                        (MOE[0], "throughput_per_usd", dict(budget_w=20e3)),
                                        (DENSE[1], "throughput_per_w", dict(budget_usd=150e3)),
                                        (MOE[1], "throughput_per_w", dict(budget_usd=150e3))):
        label = "system-20kW" if "budget_w" in budget else "system-150k$"
        tasks.append(Task(f"{workload}/{label}/{objective}", workload, "system", (objective,), **budget))
    return {task.name: task for task in tasks}


TASKS: dict[str, Task] = _build_tasks()
"""Every task by name (28): 4 workloads × (PHAZE's full space at 5 % and 10 % of TPUv4's area, the system space at
20 kW and at $150k) maximising throughput; 8 two-objective tasks with exact fronts (throughput vs area in PHAZE's
space; throughput vs die area and throughput per W vs die area in the system space at 20 kW); and 4 maximising a
rate alone in the system space (throughput per $ at 20 kW, throughput per W at $150k)."""


CORE_TASKS = ("tiny-gpt2/full-a05/throughput", "tiny-mixtral/system-150k$/throughput",
              "tiny-gpt2/full-a10/throughput+area", "tiny-llama/system-20kW/throughput_per_w+area")
"""``--task core``: a dense and a MoE model, PHAZE's space and the system space at a power and a money budget, one
throughput task and one front in each space — the subset whose every-strategy board (5 seeds, the GP strategies
included: ~60 s per run each on a loaded machine) fits an hour on a shared 2-core machine."""


def get_task(name: str | Task) -> Task:
    """The task called ``name`` (a :class:`Task` passes through); :class:`TaskError` naming the known ones."""
    if isinstance(name, Task):
        return name
    if name not in TASKS:
        raise TaskError(f"unknown task {name!r}; known: {', '.join(TASKS)}")
    return TASKS[name]


def task_names(patterns: str | Sequence[str] = "all") -> list[str]:
    """The tasks of one pattern or of several (a CLI's repeated ``--task``): ``"all"``, ``"core"``
    (:data:`CORE_TASKS`), one name, or names separated by commas (each checked; a name given twice is run once)."""
    names: list[str] = []
    for pattern in [patterns] if isinstance(patterns, str) else patterns:
        if pattern == "all":
            names += TASKS
        elif pattern == "core":
            names += CORE_TASKS
        else:
            names += [get_task(part.strip()).name for part in pattern.split(",") if part.strip()]
    return list(dict.fromkeys(names))


# --- objectives and the reference --------------------------------------------------------------------------------

def design_scores(task: Task, design: Design, throughput_samples_s: float) -> tuple[float, ...]:
    """The design's score per objective of ``task`` (:meth:`~phaze_env.design.DesignSpace.objective_score`)."""
    space = task.design_space()
    return tuple(space.objective_score(design, throughput_samples_s, name) for name in task.objectives)


def reference_point(task: Task, front: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """The hypervolume's reference (worst) corner in score space: 0 for a rate, minus the largest area a design of
    the space may have (the area budget; the largest die knob in the system space)."""
    space = task.design_space()
    corner = []
    for name in task.objectives:
        if name != AREA_OBJECTIVE:
            corner.append(0.0)
        elif task.is_system:
            corner.append(-max(float(d) for d in space.values("die_area_mm2")))  # a built die is at most its knob
        else:
            corner.append(-float(space.budget_mm2))
    return tuple(corner)


def hypervolume_2d(points: Sequence[Sequence[float]], reference: Sequence[float]) -> float:
    """The area dominated by ``points`` (two maximised scores) above ``reference``: exact, by a sweep."""
    kept = sorted(((float(x), float(y)) for x, y in points if x > reference[0] and y > reference[1]), reverse=True)
    volume, best_y = 0.0, reference[1]
    for x, y in kept:  # x descending: each point adds the strip its y rises above every point to its right
        if y > best_y:
            volume += (x - reference[0]) * (y - best_y)
            best_y = y
    return volume


@dataclass(frozen=True)
class Reference:
    """A task's stored certified answer: the optimum's score and design, or the exact front's scores and designs."""

    task: Task
    version: str
    designs: tuple[Design, ...]
    scores: tuple[tuple[float, ...], ...]
    exact_elapsed_s: float
    exact_evaluations: int

    @property
    def optimum(self) -> float:
        """Single objective: the certified best score (:meth:`~phaze_env.design.DesignSpace.objective_score`: samples/s, or per W or per $)."""
        return self.scores[0][0]

    @property
    def hypervolume(self) -> float:
        return hypervolume_2d(self.scores, reference_point(self.task, self.scores))

    def normalised(self, found: Sequence[Sequence[float]]) -> float:
        """The fraction of the reference a set of found scores reaches: best / optimum, or the hypervolume ratio."""
        if not found:
            return 0.0
        if not self.task.multi_objective:
            return max(s[0] for s in found) / self.optimum
        return hypervolume_2d(found, reference_point(self.task, self.scores)) / self.hypervolume


def reference_path(task: Task, directory: Path = OPTIMA_DIR) -> Path:
    return directory / task.file_name()


def load_reference(name: str | Task, directory: Path = OPTIMA_DIR) -> Reference:
    """The stored certified optimum (or front) of a task, refused in one line (:class:`TaskError`) when it is
    missing or was computed under another model version."""
    task = get_task(name)
    path = reference_path(task, directory)
    if not path.is_file():
        raise TaskError(f"task {task.name}: no stored optimum ({path}); compute it: {REGENERATE} --task {task.name}")
    data = json.loads(path.read_text())
    if data.get("version") != task.version:
        raise TaskError(f"task {task.name}: the stored optimum is stale (version {data.get('version')}, the current "
                        f"model's is {task.version}); regenerate it: {REGENERATE} --task {task.name}")
    designs = tuple(Design.from_dict(d) for d in data["designs"])
    scores = tuple(tuple(float(v) for v in s) for s in data["scores"])
    if not designs or len(designs) != len(scores) or any(len(s) != len(task.objectives) for s in scores):
        raise TaskError(f"task {task.name}: {path} is malformed; regenerate it: {REGENERATE} --task {task.name}")
    return Reference(task, data["version"], designs, scores, float(data["exact_elapsed_s"]),
                     int(data["exact_evaluations"]))


def reference_record(task: Task, designs: Sequence[Design], throughputs: Sequence[float], *, elapsed_s: float,
                     evaluations: int) -> dict[str, Any]:
    """The JSON a stored reference is (:func:`load_reference` reads it)."""
    scores = [design_scores(task, d, t) for d, t in zip(designs, throughputs)]
    if not task.multi_objective and scores:
        scores = scores[:1]
        designs = list(designs)[:1]
    return {"task": task.name, "version": task.version, "description": task.describe(),
            "objectives": list(task.objectives), "designs": [d.to_dict() for d in designs],
            "throughput_samples_s": [float(t) for t in throughputs][:len(scores)], "scores": [list(s) for s in scores],
            "exact_elapsed_s": elapsed_s, "exact_evaluations": evaluations,
            "command": f"{REGENERATE} --task {task.name}"}

