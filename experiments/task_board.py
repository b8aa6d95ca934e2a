"""Every strategy on every benchmark task, scored against the task's stored certified optimum or exact front.

For one task (:mod:`phaze_env.tasks`) each strategy runs ``seeds`` times for ``budget`` evaluations through
:func:`baselines.run_strategy`; after each evaluation the run's **normalised score** is what the designs evaluated
so far reach of the stored reference (:meth:`phaze_env.tasks.Reference.normalised`): the best throughput over the
certified optimum, or on a two-objective task the hypervolume of the evaluated designs' scores over the exact
front's (the same reference corner). Strategies are told the task's objectives (:func:`baselines.run_strategy`):
single-objective ones maximise the task's objective (throughput, or per W or per $ of the built system), and on a
two-objective task its first, so the score says how much of the exact front their evaluations cover; NSGA-II
trades the front's two.

Statistics (:func:`aggregate`), in the spirit of Agarwal et al. 2021 ("Deep RL at the edge of the statistical
precipice", rliable): per task the mean over seeds with a 95 % bootstrap interval (seeds resampled); over tasks
the mean normalised score with a stratified bootstrap interval (seeds resampled within each task) and the
probability of improvement ``P(X > Y)`` — over tasks, the chance that a run of X scores above a run of Y (ties
count half) — with its interval. A normalised score above 1 would mean a strategy beat a certified optimum: the
board refuses it (:func:`check_bounded`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from baselines import STRATEGIES, run_strategy
from phaze_env.cache import code_version
from phaze_env.tasks import Reference, Task, design_scores, hypervolume_2d, reference_point

FEEDBACK = "task-objective"
"""What strategies are told on a board this code runs (``meta.feedback``): the task's objective (a board without it
was run when every strategy maximised throughput, NSGA-II throughput and area)."""
TOLERANCE = 1e-9
BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95


def strategy_error(name: str, task: Task) -> str | None:
    """Why strategy ``name`` cannot run ``task`` (one line), or ``None``."""
    from baselines.optuna_samplers import BRUTE_FORCE_MAX_DESIGNS

    if name not in STRATEGIES:
        return f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}"
    spec = STRATEGIES[name]
    if not spec.available:
        return f"strategy {name!r} needs {', '.join(spec.requires)} (not installed)"
    combinations = task.design_space().combinations
    if spec.small_spaces_only and combinations > BRUTE_FORCE_MAX_DESIGNS:
        return (f"strategy {name!r} cannot run task {task.name}: it enumerates the space, which has {combinations:,} "
                f"knob combinations (at most {BRUTE_FORCE_MAX_DESIGNS:,})")
    return None


def default_strategies(task: Task) -> list[str]:
    """Every registered strategy that can run the task."""
    return [name for name in STRATEGIES if strategy_error(name, task) is None]


def normalised_curve(task: Task, reference: Reference, designs: Sequence, throughputs: Sequence[float]) -> list[float]:
    """The run's normalised score after each evaluation (best / optimum, or hypervolume ratio)."""
    if not task.multi_objective:
        best, curve = 0.0, []
        for design, throughput in zip(designs, throughputs):
            if throughput > 0:
                best = max(best, design_scores(task, design, throughput)[0])
            curve.append(best / reference.optimum)
        return curve
    corner = reference_point(task, reference.scores)
    whole = reference.hypervolume
    found: list[tuple[float, ...]] = []
    curve = []
    for design, throughput in zip(designs, throughputs):
        if throughput > 0:
            found.append(design_scores(task, design, throughput))
        curve.append(hypervolume_2d(found, corner) / whole if found else 0.0)
    return curve


def dominates_front(task: Task, reference: Reference, designs: Sequence, throughputs: Sequence[float]) -> bool:
    """Some evaluated design strictly dominates a point of the exact front (≥ in every score and > in one, beyond
    rounding): the front would then not be exact."""
    front = np.asarray(reference.scores)
    slack = TOLERANCE * np.maximum(np.abs(front), 1.0)
    for design, throughput in zip(designs, throughputs):
        if throughput > 0:
            scores = np.asarray(design_scores(task, design, throughput))
            if ((scores >= front - slack).all(axis=1) & (scores > front + slack).any(axis=1)).any():
                return True
    return False


def run_key(task: Task, strategy: str, seed: int, budget: int) -> str:
    """What a stored run answers: the task (its version: its definition and the model's code), the strategy, seed and
    budget, and the code that ran it (this module's closure — the protocol, the task scores — and the strategy's own
    module, which the registry imports lazily). Any change to one of them is a new key, so a resumed board never
    mixes runs of another model or strategy code."""
    module = STRATEGIES[strategy].target.split(":")[0]
    payload = [code_version(__name__, module), task.name, task.version, strategy, int(seed), int(budget),
               STRATEGIES[strategy].defaults]
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:24]


def load_runs(store: Path) -> dict[str, dict[str, Any]]:
    """The runs stored in ``store`` (one JSON object per line) by :func:`run_key`; a line cut short by an interrupted
    write is skipped (that run is simply run again)."""
    runs: dict[str, dict[str, Any]] = {}
    if store.is_file():
        for line in store.read_text().splitlines():
            try:
                run = json.loads(line)
                runs[run["key"]] = run
            except (ValueError, KeyError, TypeError):
                continue
    return runs


def _append_run(store: Path, run: dict[str, Any]) -> None:
    """Append one finished run as a line, flushed to disk before the next run starts."""
    store.parent.mkdir(parents=True, exist_ok=True)
    with store.open("a") as handle:
        handle.write(json.dumps(run) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def run_task(task: Task, reference: Reference, strategies: Sequence[str], seeds: int, budget: int,
             log: Callable[[str], None] = lambda line: None, store: Path | None = None) -> list[dict[str, Any]]:
    """Every (strategy, seed) of one task: ``{"task", "strategy", "seed", "curve", "wall_s", "evaluations",
    "beats_reference", "key"}`` per run; ``log`` gets one line per finished run. With ``store`` (a JSON-lines file)
    each finished run is appended to it and a run already stored under its :func:`run_key` is taken from it instead
    of run again: an interrupted board resumes where it stopped."""
    workload, cluster, space = task.workload_spec(), task.cluster(), task.design_space()
    stored = load_runs(store) if store is not None else {}
    runs = []
    for strategy in strategies:
        for seed in range(seeds):
            key = run_key(task, strategy, seed, budget)
            if key in stored:
                runs.append(stored[key])
                log(f"{task.name} · {strategy} · seed {seed}: {stored[key]['curve'][-1]:.3f} (stored run)")
                continue
            started = time.perf_counter()
            trace = run_strategy(strategy, workload, cluster, space, budget, seed, name=strategy,
                                 objectives=task.objectives)
            curve = normalised_curve(task, reference, trace.designs, trace.throughput)
            beats = (dominates_front(task, reference, trace.designs, trace.throughput) if task.multi_objective
                     else curve[-1] > 1 + TOLERANCE)
            runs.append({"task": task.name, "strategy": strategy, "seed": seed, "curve": curve,
                         "wall_s": time.perf_counter() - started, "evaluations": len(curve), "beats_reference": beats,
                         "key": key})
            if store is not None:
                _append_run(store, runs[-1])
            log(f"{task.name} · {strategy} · seed {seed}: {curve[-1]:.3f} in {runs[-1]['wall_s']:.1f} s")
    return runs


def check_bounded(runs: Sequence[dict[str, Any]]) -> list[str]:
    """One line per run that beat its task's certified reference (empty when none did)."""
    return [f"{r['strategy']} (seed {r['seed']}) beat the certified reference of {r['task']} "
            f"(normalised {max(r['curve']):.12f}): the exact search or the stored reference is wrong"
            for r in runs if r["beats_reference"] or max(r["curve"]) > 1 + TOLERANCE]


# --- statistics ----------------------------------------------------------------------------------------------------

def _interval(samples: np.ndarray) -> list[float]:
    tail = (1 - CONFIDENCE) / 2 * 100
    return [float(np.percentile(samples, tail)), float(np.percentile(samples, 100 - tail))]


def score_table(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, np.ndarray]]:
    """``{task: {strategy: final scores over seeds}}`` (seed order)."""
    table: dict[str, dict[str, list[float]]] = {}
    for run in sorted(runs, key=lambda r: r["seed"]):
        table.setdefault(run["task"], {}).setdefault(run["strategy"], []).append(run["curve"][-1])
    return {t: {s: np.asarray(v) for s, v in by.items()} for t, by in table.items()}


def per_task(runs: Sequence[dict[str, Any]], rng: np.random.Generator) -> list[dict[str, Any]]:
    """Per (task, strategy): mean, min, max over seeds, a 95 % bootstrap interval of the mean, mean wall time."""
    table = score_table(runs)
    walls: dict[tuple[str, str], list[float]] = {}
    for run in runs:
        walls.setdefault((run["task"], run["strategy"]), []).append(run["wall_s"])
    entries = []
    for task, by_strategy in table.items():
        for strategy, scores in by_strategy.items():
            means = rng.choice(scores, (BOOTSTRAP_SAMPLES, len(scores))).mean(axis=1)
            entries.append({"task": task, "strategy": strategy, "seeds": len(scores), "scores": scores.tolist(),
                            "mean": float(scores.mean()), "min": float(scores.min()), "max": float(scores.max()),
                            "ci": _interval(means), "wall_s": float(np.mean(walls[(task, strategy)]))})
    entries.sort(key=lambda e: (e["task"], -e["mean"], e["strategy"]))
    return entries


def _stratified(table: dict[str, dict[str, np.ndarray]], strategy: str, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap samples (BOOTSTRAP_SAMPLES × tasks × seeds) of one strategy's scores, seeds resampled per task."""
    per = []
    for by_strategy in table.values():
        scores = by_strategy[strategy]
        per.append(scores[rng.integers(0, len(scores), (BOOTSTRAP_SAMPLES, len(scores)))])
    return np.stack(per, axis=1)


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) (ties half) per leading index, averaged over tasks: ``x``, ``y`` are (..., tasks, seeds)."""
    greater = (x[..., :, :, None] > y[..., :, None, :]).mean(axis=(-1, -2))
    ties = (x[..., :, :, None] == y[..., :, None, :]).mean(axis=(-1, -2))
    return (greater + 0.5 * ties).mean(axis=-1)


def aggregate(runs: Sequence[dict[str, Any]], rng: np.random.Generator) -> dict[str, Any]:
    """Over tasks: each strategy's mean normalised score (interval: stratified bootstrap), its mean rank, and the
    probability of improvement between every pair (with intervals). Only tasks every strategy ran count."""
    table = score_table(runs)
    strategies = sorted({s for by in table.values() for s in by})
    table = {t: by for t, by in table.items() if all(s in by for s in strategies)}
    samples = {s: _stratified(table, s, rng) for s in strategies}
    means = {s: float(np.mean([table[t][s].mean() for t in table])) for s in strategies}
    ranks = {s: [] for s in strategies}
    for task, by in table.items():
        order = sorted(strategies, key=lambda s: -by[s].mean())
        for rank, s in enumerate(order, 1):
            ranks[s].append(rank)
    rows = [{"strategy": s, "mean": means[s], "ci": _interval(samples[s].mean(axis=(1, 2))),
             "mean_rank": float(np.mean(ranks[s])), "tasks": len(table)} for s in strategies]
    rows.sort(key=lambda r: -r["mean"])
    order = [r["strategy"] for r in rows]
    improvement = {}
    for x in order:
        for y in order:
            if x != y:
                point = probability_of_improvement(_stack(table, x), _stack(table, y))
                boot = probability_of_improvement(samples[x][:200], samples[y][:200])
                improvement[f"{x}>{y}"] = {"p": float(point), "ci": _interval(boot)}
    return {"strategies": rows, "probability_of_improvement": improvement, "tasks": list(table)}


def _stack(table: dict[str, dict[str, np.ndarray]], strategy: str) -> np.ndarray:
    """One strategy's scores as tasks × seeds (every task ran the same seeds)."""
    return np.stack([by[strategy] for by in table.values()])


def separated(board_aggregate: dict[str, Any]) -> list[str]:
    """Plain sentences: which strategies the aggregate separates (non-overlapping intervals of the mean normalised
    score; a probability of improvement whose interval excludes 0.5) and which it does not."""
    rows = board_aggregate["strategies"]
    lines = []
    for upper, lower in zip(rows, rows[1:]):
        apart = upper["ci"][0] > lower["ci"][1]
        pi = board_aggregate["probability_of_improvement"][f"{upper['strategy']}>{lower['strategy']}"]
        lines.append(f"{upper['strategy']} vs {lower['strategy']}: mean {upper['mean']:.3f} vs {lower['mean']:.3f}, "
                     f"P(improvement) {pi['p']:.2f} [{pi['ci'][0]:.2f}, {pi['ci'][1]:.2f}] — "
                     + ("separated" if apart or pi["ci"][0] > 0.5 else "not separated"))
    return lines


def mean_curves(runs: Sequence[dict[str, Any]], rng: np.random.Generator) -> dict[str, dict[str, dict[str, list]]]:
    """Per task and strategy: the mean normalised score after each evaluation and its 95 % bootstrap band."""
    grouped: dict[tuple[str, str], list[list[float]]] = {}
    for run in runs:
        grouped.setdefault((run["task"], run["strategy"]), []).append(run["curve"])
    curves: dict[str, dict[str, dict[str, list]]] = {}
    for (task, strategy), group in grouped.items():
        length = min(len(c) for c in group)
        values = np.asarray([c[:length] for c in group])
        boot = values[rng.integers(0, len(values), (BOOTSTRAP_SAMPLES // 4, len(values)))].mean(axis=1)
        tail = (1 - CONFIDENCE) / 2 * 100
        curves.setdefault(task, {})[strategy] = {
            "mean": values.mean(axis=0).round(6).tolist(), "low": np.percentile(boot, tail, axis=0).round(6).tolist(),
            "high": np.percentile(boot, 100 - tail, axis=0).round(6).tolist()}
    return curves
