"""Do the RL agents transfer? Train ConfuciuX and PPO on some tasks, score them on held-out workloads.

The tasks share PHAZE's full space at 10 % of TPUv4's area (:mod:`phaze_env.tasks`), so one policy can act on all
of them. Each agent is trained once (seed 0) for ``--train-evaluations`` evaluations spread over the training tasks
(ConfuciuX: REINFORCE on each training task in turn with one policy; PPO: the flat env cycling the training
workloads, whose observation carries the workload's features), then on each held-out task it runs ``--budget``
evaluations, ``--seeds`` times, three ways:

* **zero-shot**: the trained policy sampled, never updated;
* **fine-tuned**: the trained policy keeps learning (ConfuciuX with its GA stage, PPO's ``learn``);
* **from scratch**: the registry's agent (:data:`baselines.STRATEGIES`) with the same budget.

Scores are the task board's (:func:`experiments.task_board.normalised_curve`): best found over the stored certified
optimum, mean over seeds with a 95 % bootstrap interval. Writes ``<docs>/leaderboard/generalisation.json`` and, when
the task board exists, re-renders the leaderboard pages with the table.

    python -m experiments.generalisation                      # defaults below
    python -m experiments.generalisation --train-evaluations 20 --budget 5 --seeds 2   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from baselines import run_strategy
from baselines.confuciux import ConfuciuX
from baselines.protocol import Trace, evaluate_in_window
from baselines.sb3_agents import SB3Strategy, make_env, make_model, model_class
from experiments.task_board import BOOTSTRAP_SAMPLES, normalised_curve
from phaze_env.cli import OneLineParser, positive_int
from phaze_env.design import Design
from phaze_env.files import write_text_atomic
from phaze_env.tasks import Task, TaskError, get_task, load_reference

TRAIN_TASKS = ("tiny-gpt2/full-a10/throughput", "tiny-mixtral/full-a10/throughput")
HELD_OUT_TASKS = ("tiny-llama/full-a10/throughput", "tiny-mixtral-e4/full-a10/throughput")
"""One dense and one mixture-of-experts model on each side of the split; all four share one space."""
AGENTS = ("confuciux", "ppo")
MODES = ("zero_shot", "fine_tuned", "scratch")


# --- training ------------------------------------------------------------------------------------------------------

def train_confuciux(tasks: Sequence[Task], evaluations: int, seed: int = 0) -> dict:
    """One ConfuciuX policy trained by REINFORCE on each task in turn (two rounds); its ``policy`` state dict."""
    state = None
    rounds = 2
    chunk = max(1, evaluations // (rounds * len(tasks)))
    for _ in range(rounds):
        for task in tasks:
            agent = ConfuciuX(task.design_space(), seed=seed, budget=chunk, rl_fraction=1.0)
            if state is not None:
                agent.policy.load_state_dict(state)
            for _ in range(chunk):
                design = agent.ask()
                agent.tell(design, evaluate_in_window(design, task.workload_spec(), task.cluster(), task.design_space()))
            state = agent.policy.state_dict()
    return state


def train_ppo(tasks: Sequence[Task], evaluations: int, path: Path, seed: int = 0) -> Path:
    """PPO on the flat env cycling the training tasks' workloads (one env step = one evaluation); saved to ``path``."""
    first = tasks[0]
    env = make_env([t.workload_spec() for t in tasks], first.cluster(), first.design_space())
    model = make_model("ppo", env, seed)
    model.learn(total_timesteps=evaluations)
    model.save(path)
    env.close()
    return path


# --- the three ways of running on a held-out task ------------------------------------------------------------------

class ConfuciuXFrom(ConfuciuX):
    """ConfuciuX starting from a trained policy; ``learning=False`` samples it without updates (zero-shot)."""

    def __init__(self, space, seed: int = 0, budget: int = 100, *, policy: dict, learning: bool = True):
        super().__init__(space, seed=seed, budget=budget, **({} if learning else {"rl_fraction": 1.0, "lr": 0.0}))
        self.policy.load_state_dict(policy)


class PolicySampler:
    """Zero-shot PPO: each ask samples the trained policy's action for the task's observation (no updates)."""

    name = "ppo-zero-shot"

    def __init__(self, task: Task, path: Path, seed: int):
        self.env = make_env(task.workload_spec(), task.cluster(), task.design_space())
        self.model = model_class("ppo").load(path, device="cpu")
        self.model.set_random_seed(seed)
        self.observation, _ = self.env.reset(seed=seed)

    def ask(self) -> Design:
        action, _ = self.model.predict(self.observation, deterministic=False)
        return self.env.unwrapped.space.decode([int(a) for a in action])

    def tell(self, design: Design, evaluation) -> None:
        pass

    def close(self) -> None:
        self.env.close()


class PPOFrom(SB3Strategy):
    """PPO fine-tuned from the trained weights: the registry's SB3 loop with the loaded model."""

    def __init__(self, task: Task, path: Path, seed: int, budget: int):
        super().__init__(task.design_space(), seed, workload=task.workload_spec(), cluster=task.cluster(),
                         algo="ppo", budget=budget)
        self.model = model_class("ppo").load(path, env=self.env, device="cpu")
        self.model.set_random_seed(seed)


def held_out_run(agent: str, mode: str, task: Task, seed: int, budget: int, trained: Any) -> Trace:
    """One run on a held-out task (``trained``: ConfuciuX's policy state, or the saved PPO model's path)."""
    workload, cluster, space = task.workload_spec(), task.cluster(), task.design_space()
    if mode == "scratch":
        strategy: Any = agent
    elif agent == "confuciux":
        strategy = ConfuciuXFrom(space, seed=seed, budget=budget, policy=trained, learning=mode == "fine_tuned")
    else:
        strategy = PolicySampler(task, trained, seed) if mode == "zero_shot" else PPOFrom(task, trained, seed, budget)
    return run_strategy(strategy, workload, cluster, space, budget, seed, name=f"{agent}-{mode}")


def _summary(scores: list[float], rng: np.random.Generator) -> dict[str, Any]:
    values = np.asarray(scores)
    means = rng.choice(values, (BOOTSTRAP_SAMPLES, len(values))).mean(axis=1)
    return {"mean": float(values.mean()), "ci": [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))],
            "scores": values.tolist()}


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m experiments.generalisation", description=__doc__.split("\n")[0])
    parser.add_argument("--train-evaluations", type=positive_int, default=200,
                        help="evaluations each agent trains for, over the training tasks (default 200)")
    parser.add_argument("--budget", type=positive_int, default=30,
                        help="evaluations on each held-out task per run (default 30)")
    parser.add_argument("--seeds", type=positive_int, default=5, help="seeds per held-out run (default 5)")
    parser.add_argument("--docs", type=Path, default=Path("docs"), help="where leaderboard/ goes (default docs)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    argv_list = list(sys.argv[1:] if argv is None else argv)
    try:
        train = [get_task(name) for name in TRAIN_TASKS]
        held_out = [get_task(name) for name in HELD_OUT_TASKS]
        references = {task.name: load_reference(task) for task in held_out}
        (args.docs / "leaderboard").mkdir(parents=True, exist_ok=True)
    except (TaskError, OSError) as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    import torch

    torch.set_num_threads(1)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        print(f"training ConfuciuX and PPO on {', '.join(TRAIN_TASKS)} ...", file=sys.stderr, flush=True)
        trained = {"confuciux": train_confuciux(train, args.train_evaluations),
                   "ppo": train_ppo(train, args.train_evaluations, Path(scratch) / "ppo.zip")}
        rng = np.random.default_rng(0)
        rows = []
        total = len(AGENTS) * len(held_out) * len(MODES)
        for agent in AGENTS:
            for task in held_out:
                row: dict[str, Any] = {"agent": agent, "task": task.name}
                for mode in MODES:
                    scores = []
                    for seed in range(args.seeds):
                        trace = held_out_run(agent, mode, task, seed, args.budget, trained[agent])
                        scores.append(normalised_curve(task, references[task.name], trace.designs, trace.throughput)[-1])
                    row[mode] = _summary(scores, rng)
                    print(f"[{len(rows) * len(MODES) + MODES.index(mode) + 1}/{total}] {agent} · {task.name} · {mode}: "
                          f"{row[mode]['mean']:.3f} · {(time.perf_counter() - started) / 60:.1f} min",
                          file=sys.stderr, flush=True)
                rows.append(row)
    result = {"command": "python -m experiments.generalisation " + " ".join(argv_list), "train_tasks": list(TRAIN_TASKS),
              "held_out_tasks": list(HELD_OUT_TASKS), "train_evaluations": args.train_evaluations,
              "budget": args.budget, "seeds": args.seeds, "rows": rows, "elapsed_s": time.perf_counter() - started}
    write_text_atomic(args.docs / "leaderboard" / "generalisation.json", json.dumps(result, indent=1))
    if (args.docs / "leaderboard" / "tasks.json").is_file():
        from experiments.leaderboard import render

        render(args.docs)
    for row in rows:
        print(f"{row['agent']:10s} {row['task']:36s} " + "  ".join(f"{m} {row[m]['mean']:.3f}" for m in MODES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
