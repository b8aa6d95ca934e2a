"""Compute (and check) the certified optimum or exact Pareto front of every benchmark task (:mod:`phaze_env.tasks`).

Each task's reference is stored as ``phaze_env/task_optima/<task>.json`` with the task's version (the model's code
and the task's definition), so a model change makes it stale and :func:`phaze_env.tasks.load_reference` refuses it.

    python -m experiments.task_optima                 # every task whose stored reference is missing or stale
    python -m experiments.task_optima --all           # recompute every task
    python -m experiments.task_optima --task NAME     # one task (or NAME,NAME,...)
    python -m experiments.task_optima --check         # each stored reference is current and its designs reproduce

Progress (task i of n, its time, elapsed and an ETA) goes to stderr. ``--check`` re-evaluates every stored design
and compares its throughput with the stored one (seconds); recomputing is what certifies (the exact search).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Sequence

from baselines.exact import design_of
from phaze_env.cli import OneLineParser, positive_int
from phaze_env.files import write_text_atomic
from phaze_env.tasks import (OPTIMA_DIR, Task, TaskError, get_task, load_reference, reference_path, reference_record,
                             task_names)
from search.phaze import SearchConfig, run_search

CHECK_TOLERANCE = 1e-9
"""Relative difference allowed between a stored throughput and its re-evaluation (floating-point noise only)."""


def search_config(task: Task) -> SearchConfig:
    """The exact search that certifies ``task``: best design, or the front over its two objectives."""
    pareto = task.multi_objective
    return SearchConfig(workloads=(task.workload_spec(),), cluster=task.cluster(), space=task.design_space(),
                        pareto=pareto, objectives=task.objectives if pareto else ("throughput", "area"),
                        objective="throughput" if pareto else task.objective)


def certify(task: Task, *, workers: int = 1) -> dict:
    """Run the exact search of ``task`` and return its reference record; ``RuntimeError`` if it is not proven."""
    config = search_config(task)
    result = run_search(config, workers=workers)
    if not result.exact:
        raise RuntimeError(f"task {task.name}: the exact search could not prove its answer (an ILP stopped early); "
                           "rerun on a less loaded machine")
    name = config.names[0]
    space = task.design_space()
    found = list(result.pareto[name]) if task.multi_objective else [result.best[name]]
    found = [d for d in found if d is not None and d.feasible]
    if not found:
        raise RuntimeError(f"task {task.name}: no feasible design in the space")
    designs = [design_of(d, space) for d in found]
    return reference_record(task, designs, [d.throughput_samples_s for d in found], elapsed_s=result.elapsed_s,
                            evaluations=result.evaluations)


def check(task: Task, directory: Path) -> str | None:
    """``None`` when the stored reference is current and each stored design re-evaluates to its stored
    throughput; else the one-line reason."""
    try:
        reference = load_reference(task, directory)
    except TaskError as error:
        return str(error)
    stored = json.loads(reference_path(task, directory).read_text())["throughput_samples_s"]
    space = task.design_space()
    for design, throughput in zip(reference.designs, stored):
        now = space.evaluate(design, task.workload_spec(), task.cluster()).throughput_samples_s
        if abs(now - throughput) > CHECK_TOLERANCE * max(abs(throughput), 1.0):
            return f"task {task.name}: stored design {design} re-evaluates to {now:,.3f} samples/s, stored {throughput:,.3f}"
    return None


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(round(seconds)), 60)
    return f"{minutes}m{seconds:02d}s"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m experiments.task_optima", description=__doc__.split("\n")[0])
    parser.add_argument("--task", action="append", default=None, metavar="NAME[,NAME]",
                        help="tasks to compute (repeatable; default: every task whose stored reference is missing or "
                             "stale)")
    parser.add_argument("--all", action="store_true", help="recompute every task, current or not")
    parser.add_argument("--check", action="store_true",
                        help="do not search: check every stored reference is current and its designs reproduce")
    parser.add_argument("--workers", type=positive_int, default=1, help="processes for each exact search (default 1)")
    parser.add_argument("--dir", type=Path, default=OPTIMA_DIR, help=f"where the references are (default {OPTIMA_DIR})")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        names = task_names(args.task or "all")
    except TaskError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    tasks = [get_task(name) for name in names]
    if args.check:
        failures = [reason for task in tasks if (reason := check(task, args.dir))]
        for reason in failures:
            print(reason, file=sys.stderr)
        print(f"{len(tasks) - len(failures)} of {len(tasks)} stored references current and reproduced")
        return 1 if failures else 0
    if not args.task and not args.all:
        tasks = [task for task in tasks if needs_computing(task, args.dir)]
    args.dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for i, task in enumerate(tasks, 1):
        begun = time.perf_counter()
        print(f"[{i}/{len(tasks)}] {task.name} ...", file=sys.stderr, flush=True)
        try:
            record = certify(task, workers=args.workers)
        except RuntimeError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        write_text_atomic(reference_path(task, args.dir), json.dumps(record, indent=1) + "\n")
        elapsed = time.perf_counter() - started
        eta = elapsed / i * (len(tasks) - i)
        print(f"[{i}/{len(tasks)}] {task.name}: {len(record['designs'])} design(s), {record['exact_evaluations']} "
              f"evaluations, {time.perf_counter() - begun:.1f} s · elapsed {_clock(elapsed)} · ETA {_clock(eta)}",
              file=sys.stderr, flush=True)
    print(f"{len(tasks)} task reference(s) written to {args.dir} in {_clock(time.perf_counter() - started)}")
    return 0


def needs_computing(task: Task, directory: Path) -> bool:
    """True when the task's stored reference is missing or stale (it needs computing)."""
    try:
        load_reference(task, directory)
    except TaskError:
        return True
    return False


if __name__ == "__main__":
    sys.exit(main())
