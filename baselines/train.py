"""Train one agent on the architecture-search env: ``python -m baselines.train ALGO --workload NAME --steps N``.

ALGO is ``confuciux`` (REINFORCE + GA, :mod:`baselines.confuciux`; one step = one evaluated design) or an
SB3 agent on ``phaze_env/ArchSearchFlat-v0`` (``ppo``, ``a2c``, ``maskable_ppo``; one step = one env step).

* a progress bar (rich; SB3's own for the SB3 agents);
* TensorBoard logs in ``--logdir`` (SB3's scalars, or ConfuciuX's reward / best throughput per step):
  ``tensorboard --logdir out/train`` — on by default when the ``tensorboard`` package is installed
  (``pip install -e ".[rl]"``), ``--no-tensorboard`` to turn them off, ``--tensorboard`` to insist;
* checkpoints every ``--checkpoint-every`` steps in ``--logdir/checkpoints`` (``last.zip`` for SB3,
  ``last.pt`` for ConfuciuX, plus ``best.json``); ``--resume`` continues from the last one, for
  ``--steps`` more steps (ConfuciuX's GA stage restarts from the designs seen so far); each file is replaced in
  one step, so a killed run leaves the previous checkpoint, never half of one;
* at the end, the best design found and its evaluation.

Bad arguments exit with status 2 and one line on stderr; a checkpoint that ``--resume`` cannot read, with
status 1 and one line.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from baselines.protocol import throughput_of
from phaze_env.cli import OneLineParser, add_cluster_size_options, add_system_budget_options, positive_int
from phaze_env.design import SPACE_NAMES, Design, DesignSpace, named_space
from phaze_env.evaluate import Cluster, Evaluation
from phaze_env.files import atomic_path, write_text_atomic

ALGOS = ("confuciux", "ppo", "a2c", "maskable_ppo")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m baselines.train", description=__doc__.split("\n")[0])
    parser.add_argument("algo", choices=ALGOS)
    parser.add_argument("--workload", default="gpt2-xl", help="built-in workload name, or tiny-gpt2 (default gpt2-xl)")
    parser.add_argument("--steps", type=positive_int, default=200, help="training steps = evaluations (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--space", choices=SPACE_NAMES, default="full", help="design space (default PHAZE's full)")
    add_system_budget_options(parser)
    add_cluster_size_options(parser, devices=1024, batch=4096)
    parser.add_argument("--logdir", type=Path, default=None,
                        help="TensorBoard + checkpoints, relative to the current directory (default out/train/ALGO)")
    parser.add_argument("--checkpoint-every", type=positive_int, default=50, metavar="STEPS",
                        help="steps between checkpoints (default 50)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the last checkpoint in --logdir (default: start afresh)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (default: shown)")
    parser.add_argument("--tensorboard", action=argparse.BooleanOptionalAction, default=None,
                        help="write TensorBoard logs (default: when the tensorboard package is installed)")
    return parser


def tensorboard_installed() -> bool:
    try:
        return importlib.util.find_spec("tensorboard") is not None
    except ValueError:  # a module registered without a spec (e.g. replaced in sys.modules)
        return False


def resolve_tensorboard(requested: bool | None) -> bool:
    """Whether to log to TensorBoard: as requested, or when installed; asking for it without it is an error."""
    if requested and not tensorboard_installed():
        raise ValueError("--tensorboard needs the tensorboard package: pip install -e \".[rl]\" (or pass --no-tensorboard)")
    return tensorboard_installed() if requested is None else requested


# ----------------------------------------------------------------------------------- checkpoints, best design

Loaded = TypeVar("Loaded")


class UnreadableCheckpoint(Exception):
    """A file ``--resume`` cannot load: cut short (a full disk, a copy), or not one this trainer wrote."""


def load_checkpoint(path: Path, load: Callable[[Path], Loaded]) -> Loaded:
    """``load(path)``; whatever it raises (torch, zipfile, pickle, json and SB3 each have their own errors)
    becomes one :class:`UnreadableCheckpoint` line that names the file and the way out."""
    try:
        return load(path)
    except Exception as exc:  # noqa: BLE001 - see above; the reason is kept in the message
        reason = next(iter(str(exc).splitlines()), "") or "no detail"
        raise UnreadableCheckpoint(f"--resume: cannot load {path} ({type(exc).__name__}: {reason}); "
                                   "run without --resume to start afresh (it overwrites the checkpoints)") from exc


class Best:
    """The best design seen (persisted as ``best.json`` next to the checkpoints); ``resume``: as last saved."""

    def __init__(self, path: Path, *, resume: bool):
        self.path = path
        self.design: Design | None = None
        self.throughput = 0.0
        if resume and path.exists():
            self.design, self.throughput = load_checkpoint(path, self._read)

    @staticmethod
    def _read(path: Path) -> tuple[Design | None, float]:
        data = json.loads(path.read_text())
        return (Design.from_dict(data["design"]) if data["design"] else None), float(data["throughput_samples_s"])

    def offer(self, design: Design, evaluation: Evaluation | None) -> None:
        value = throughput_of(evaluation)
        if self.design is None or value > self.throughput:
            self.design, self.throughput = design, float(value)

    def save(self) -> None:
        write_text_atomic(self.path, json.dumps({"design": self.design.to_dict() if self.design else None,
                                                 "throughput_samples_s": self.throughput}, indent=2))


# ---------------------------------------------------------------------------------------------- trainers

def train_confuciux(args, workload, cluster, space, logdir: Path, best: Best) -> None:
    import torch
    from rich.progress import Progress

    from baselines.confuciux import ConfuciuX
    from baselines.protocol import evaluate_in_window

    checkpoint = logdir / "checkpoints" / "last.pt"
    agent = ConfuciuX(space, seed=args.seed, budget=args.steps)
    start = 0
    if args.resume:
        def restore(path: Path) -> int:
            state = torch.load(path, weights_only=False)
            agent.load_state_dict(state["agent"])
            return state["step"]

        start = load_checkpoint(checkpoint, restore)
        agent.rl_budget += start  # the RL stage covers the same fraction of the extended run
    writer = None
    if args.tensorboard:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(str(logdir / "confuciux"))
    with Progress(disable=args.no_progress) as progress:
        task = progress.add_task("confuciux", total=args.steps)
        for step in range(start, start + args.steps):
            design = agent.ask()
            evaluation = evaluate_in_window(design, workload, cluster, space)
            agent.tell(design, evaluation)
            best.offer(design, evaluation)
            if writer is not None:
                writer.add_scalar("throughput_samples_s", throughput_of(evaluation), step)
                writer.add_scalar("best_throughput_samples_s", best.throughput, step)
            progress.update(task, advance=1, description=f"confuciux · best {best.throughput:,.1f} samples/s")
            if (step + 1) % args.checkpoint_every == 0 or step + 1 == start + args.steps:
                with atomic_path(checkpoint) as temporary:
                    torch.save({"agent": agent.state_dict(), "step": step + 1}, temporary)
                best.save()
    if writer is not None:
        writer.close()


def train_sb3(args, workload, cluster, space, logdir: Path, best: Best) -> None:
    import gymnasium as gym
    from stable_baselines3.common.callbacks import BaseCallback

    from baselines.sb3_agents import EvaluationHandshake, make_env, make_model, model_class

    def record(design: Design) -> None:
        if space.area_ok(design):  # the env evaluates it too; both hit the same cache
            best.offer(design, space.evaluate(design, workload, cluster))

    env: gym.Env = EvaluationHandshake(make_env(workload, cluster, space), record)
    checkpoint = logdir / "checkpoints" / "last.zip"

    def save(model) -> None:
        with atomic_path(checkpoint) as temporary:
            model.save(temporary)
        best.save()

    class Checkpoint(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps % args.checkpoint_every == 0:
                save(self.model)
            return True

    tensorboard_log = str(logdir) if args.tensorboard else None
    if args.resume:
        model = load_checkpoint(checkpoint, lambda path: model_class(args.algo).load(path, env=env, device="cpu"))
        model.tensorboard_log = tensorboard_log  # this run's choice, not the saved one
    else:
        model = make_model(args.algo, env, args.seed, tensorboard_log=tensorboard_log)
    model.learn(total_timesteps=args.steps, callback=Checkpoint(), progress_bar=not args.no_progress,
                reset_num_timesteps=not args.resume, tb_log_name=args.algo)
    save(model)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        from baselines.workloads import resolve_workload

        workload = resolve_workload(args.workload)
        cluster = Cluster(n_devices=args.devices, global_batch=args.batch)
        space = named_space(args.space, args.budget_mw, args.budget_usd, args.stack, nre_chips=args.nre_chips)
        logdir = args.logdir or Path("out/train") / args.algo
        (logdir / "checkpoints").mkdir(parents=True, exist_ok=True)
        last = logdir / "checkpoints" / ("last.pt" if args.algo == "confuciux" else "last.zip")
        if args.resume and not last.exists():
            raise ValueError(f"--resume: no checkpoint at {last}")
        args.tensorboard = resolve_tensorboard(args.tensorboard)
    except (ValueError, OSError) as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    import torch

    torch.set_num_threads(1)
    trainer = train_confuciux if args.algo == "confuciux" else train_sb3
    try:
        best = Best(logdir / "checkpoints" / "best.json", resume=args.resume)
        trainer(args, workload, cluster, space, logdir, best)
    except UnreadableCheckpoint as exc:
        parser.exit(1, f"{parser.prog}: error: {exc}\n")
    _report(best, workload, cluster, space, logdir, args.tensorboard)
    return 0


def _report(best: Best, workload, cluster: Cluster, space: DesignSpace, logdir: Path, tensorboard: bool) -> None:
    if best.design is None:
        print("no design evaluated")
        return
    evaluation = space.evaluate(best.design, workload, cluster)
    print(f"best design: {best.design}")
    print(f"  area {evaluation.area_mm2:.1f} mm² · {evaluation.summary()}")
    if tensorboard:
        print(f"checkpoints and TensorBoard logs in {logdir}/")
    else:
        print(f"checkpoints in {logdir}/ (no TensorBoard logs: pip install -e \".[rl]\" to get them)")


if __name__ == "__main__":
    sys.exit(main())
