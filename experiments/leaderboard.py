"""The strategy leaderboard: how close each search strategy gets to the certified optimum, by evaluation budget.

**Tasks** (``--task NAME|all``, the benchmark): every strategy that can run a task (:mod:`phaze_env.tasks`) runs
``--seeds`` times for ``--budget`` evaluations; each run is scored against the task's *stored* certified optimum or
exact front (:mod:`experiments.task_board`: normalised scores, hypervolume ratios, bootstrap intervals, the
aggregate over tasks and the probability of improvement). Outputs: ``<docs>/leaderboard/tasks.json`` (every figure),
``<docs>/leaderboard.md``, the self-contained page ``<docs>/leaderboard/board.html``, the aggregate between the
markers of ``README.md`` and ``<docs>/guides/results.md`` (:mod:`experiments.leaderboard_page`), and every run's
curve in ``<out>/runs.json``. An unknown task, a stale stored optimum or a strategy that cannot run a task's space
is refused in one line before anything runs.

    python -m experiments.leaderboard --task all --jobs 2   # resumable: finished runs are kept in <out>/runs
    python -m experiments.leaderboard --task core --budget 30 --jobs 2   # the published board (8 tasks)
    python -m experiments.leaderboard --task tiny-gpt2/full-a05/throughput --strategy random --seeds 2 --budget 10

**Spaces** (``--space``, one workload's study without a task):

Every strategy (:data:`baselines.STRATEGIES`) runs ``--seeds`` times for the largest of ``--budgets``
evaluations through :func:`experiments.compare_strategies.run_study` (the same driver, exact optimum and
``results.csv``); its score at each budget *b* is the best throughput it found in its first *b* evaluations
divided by the optimum ``search.phaze`` certifies for the same space (:func:`baselines.exact.exact_optimum`):
1.0 = found the optimum. A run is scored at every budget of one run (anytime performance): strategies that plan
by their budget (ConfuciuX's RL share, the SB3 agents) plan for the largest.

Per (workload, budget, strategy) the leaderboard reports the mean, standard deviation, min and max over
seeds, and where strategies **separate**: A beats B at a budget when A's worst seed is above B's best seed
(non-overlapping ranges over the seeds), so a "beats" count is not a coin flip of one seed.

Outputs, all in ``<out>``: ``results.csv``, ``exact.json`` and the study's plots (as ``compare_strategies``),
``leaderboard.json`` (the scores; written atomically), ``leaderboard.md`` and ``leaderboard-<space>.png``. The
documentation's leaderboard is the task board's (above).

    # PHAZE's reduced space (cheap: tiny GPT-2 on 16 devices)
    python -m experiments.leaderboard --space reduced --workload tiny-gpt2 --devices 16 --batch 64
    # the system space at a 10 MW budget
    python -m experiments.leaderboard --space system --workload gpt2-xl --budget-mw 10
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from baselines import STRATEGIES
from experiments import leaderboard_page as page
from experiments.task_board import (FEEDBACK, aggregate, check_bounded, default_strategies, mean_curves, per_task, run_task,
                                    separated, strategy_error)
from baselines.workloads import resolve_workload
from experiments.compare_strategies import INTERRUPTED, TOLERANCE, plot, run_study, summarise
from phaze_env.cli import OneLineParser, add_cluster_size_options, add_system_budget_options, console, positive_int
from phaze_env.design import SPACE_NAMES, named_space
from phaze_env.evaluate import Cluster
from phaze_env.files import atomic_path, write_text_atomic
from phaze_env.tasks import OPTIMA_DIR, Reference, Task, get_task, load_reference, task_names
from phaze_env.workloads import workload_names

DEFAULT_STRATEGIES = ("random", "optuna_tpe", "optuna_cmaes", "optuna_qmc", "genetic", "confuciux", "ppo")
"""Uniform random, three Optuna samplers (TPE, CMA-ES, quasi-random Sobol), the evolutionary baseline, ConfuciuX
(RL + GA) and an SB3 RL agent. Optuna's GPSampler (``--strategy optuna_gp``) refits its GP every trial: hundreds of
trials cost far more than the evaluations on a busy machine, so QMC stands in for it by default."""
DEFAULT_BUDGETS = (50, 200)
TASK_BUDGET = 50
TASK_SEEDS = 5
LEADERBOARD_VERSION = 1


def score_at(rows: list[dict[str, Any]], budgets: Sequence[int]) -> list[dict[str, Any]]:
    """Per (workload, budget, strategy): the normalised best after ``budget`` evaluations, over the seeds
    (``scores`` in seed order, mean, std, min, max) and the strategies it beats (worst seed above their best)."""
    at: dict[tuple[str, int, str], dict[int, float]] = {}
    for row in rows:
        evaluation = int(row["evaluation"])
        if evaluation in budgets:
            at.setdefault((row["workload"], evaluation, row["strategy"]), {})[int(row["seed"])] = float(
                row["best_normalized"])
    entries = []
    for (workload, budget, strategy), by_seed in at.items():
        scores = [by_seed[s] for s in sorted(by_seed)]
        entries.append({"workload": workload, "budget": budget, "strategy": strategy, "seeds": len(scores),
                        "scores": scores, "mean": float(np.mean(scores)), "std": float(np.std(scores)),
                        "min": float(np.min(scores)), "max": float(np.max(scores))})
    for entry in entries:
        rivals = [e for e in entries if (e["workload"], e["budget"]) == (entry["workload"], entry["budget"])]
        entry["beats"] = sorted(e["strategy"] for e in rivals if entry["min"] > e["max"] + TOLERANCE)
    entries.sort(key=lambda e: (e["workload"], e["budget"], -e["mean"], e["strategy"]))
    return entries


def separation(entries: list[dict[str, Any]]) -> list[str]:
    """One sentence per (workload, budget): the spread of the means and which strategies separate."""
    lines = []
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for entry in entries:
        groups.setdefault((entry["workload"], entry["budget"]), []).append(entry)
    for (workload, budget), group in groups.items():
        top, bottom = group[0], group[-1]
        pairs = [f"{e['strategy']} > {', '.join(e['beats'])}" for e in group if e["beats"]]
        verdict = "; ".join(pairs) if pairs else "no strategy separates from another (every seed range overlaps)"
        lines.append(f"{workload} after {budget} evaluations: means from {bottom['mean']:.3f} ({bottom['strategy']}) "
                     f"to {top['mean']:.3f} ({top['strategy']}); separated (worst seed above the other's best): "
                     f"{verdict}.")
    return lines


def markdown_section(board: dict[str, Any]) -> str:
    meta = board["meta"]
    cluster = meta["cluster"]
    devices = (f"each design's chips at a {meta['system_budget']} budget" if meta.get("system_budget")
               else f"cluster {cluster['n_devices']:,} devices")
    lines = [f"## `{board['space']}` space", "",
             f"`{board['command']}` — {len(meta['strategies'])} strategies × {meta['seeds']} seeds, scored after "
             f"{' and '.join(map(str, board['budgets']))} evaluations; {meta['space_designs']:,} designs in the area "
             f"window; {devices}, global batch {cluster['global_batch']:,}; study wall time {meta['elapsed_s']:.0f} s "
             "(a loaded machine; the exact search's time below is not in it).", ""]
    for name, optimum in meta["optima"].items():
        proven = "certified" if optimum["proven"] else "NOT proven (an ILP stopped early)"
        lines.append(f"* {name}: optimum {optimum['throughput_samples_s']:,.1f} samples/s ({proven}; "
                     f"the exact search: {optimum['exact_evaluations']} evaluations, {optimum['exact_elapsed_s']:.0f} s "
                     "when first run — a cached answer costs nothing)")
    lines += ["", "| workload | budget | strategy | mean | std | min | max | beats |", "|---|---:|---|---:|---:|---:|---:|---|"]
    for e in board["entries"]:
        lines.append(f"| {e['workload']} | {e['budget']} | {e['strategy']} | {e['mean']:.4f} | {e['std']:.4f} | "
                     f"{e['min']:.4f} | {e['max']:.4f} | {', '.join(e['beats']) or '–'} |")
    lines += ["", "Where they separate:", ""] + [f"* {line}" for line in board["separation"]]
    lines += ["", f"![leaderboard, {board['space']} space](figures/leaderboard-{board['space']}.png)", ""]
    return "\n".join(lines)


def markdown(boards: list[dict[str, Any]]) -> str:
    head = ["# Strategy leaderboard", "",
            "Fraction of the certified optimum (`search.phaze`, the same design space) that each strategy's best "
            "design reaches after a budget of evaluations; mean, standard deviation, min and max over seeds. "
            "*beats*: the strategies whose best seed is below this one's worst seed at that budget. Every run lasts "
            "the largest budget; the smaller budget scores its first evaluations (strategies that plan by their budget "
            "plan for the largest). Written by `python -m experiments.leaderboard` (one section per space; the JSON "
            "beside this file in `leaderboard/` holds every score).", ""]
    return "\n".join(head + [markdown_section(b) for b in boards])


def plot_board(board: dict[str, Any], path: Path) -> None:
    """Mean (bar) and min–max over seeds (error bar) per strategy, one panel per (workload, budget)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments.compare_strategies import strategy_styles

    panels = list(dict.fromkeys((e["workload"], e["budget"]) for e in board["entries"]))
    strategies = list(board["meta"]["strategies"])
    styles = strategy_styles(strategies)
    fig, axes = plt.subplots(1, len(panels), figsize=(0.55 * len(strategies) * len(panels) + 2, 4.2), squeeze=False,
                             sharey=True, layout="constrained")
    for ax, (workload, budget) in zip(axes[0], panels):
        by_name = {e["strategy"]: e for e in board["entries"] if (e["workload"], e["budget"]) == (workload, budget)}
        names = [s for s in strategies if s in by_name]
        means = np.array([by_name[s]["mean"] for s in names])
        low = means - np.array([by_name[s]["min"] for s in names])
        high = np.array([by_name[s]["max"] for s in names]) - means
        ax.bar(range(len(names)), means, color=[styles[s]["color"] for s in names], yerr=[low, high], capsize=3)
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.set_xticks(range(len(names)), names, rotation=40, ha="right", fontsize=8)
        ax.set_title(f"{workload} · {budget} evaluations", fontsize=9)
    bottom = min(e["min"] for e in board["entries"])
    axes[0][0].set(ylabel="best / certified optimum\n(mean; bars: min–max over seeds)",
                   ylim=(max(0.0, math.floor(bottom * 20) / 20 - 0.05), 1.02))
    fig.suptitle(f"Strategy leaderboard · {board['space']} space · {board['meta']['seeds']} seeds", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as temporary:
        fig.savefig(temporary, dpi=110)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m experiments.leaderboard", description=__doc__.split("\n")[0])
    parser.add_argument("--space", choices=SPACE_NAMES, default="reduced", help="design space (default reduced)")
    parser.add_argument("--workload", action="append", metavar="NAME",
                        help=f"repeatable; default gpt2-xl; one of tiny-gpt2, {', '.join(workload_names())}")
    parser.add_argument("--strategy", action="append", metavar="NAME",
                        help=f"repeatable; default {', '.join(DEFAULT_STRATEGIES)}; any of {', '.join(STRATEGIES)}")
    parser.add_argument("--task", action="append", metavar="NAME|all|core", default=None,
                        help="benchmark task(s), repeatable: a name, names separated by commas, all, or core "
                             "(phaze_env.tasks)")
    parser.add_argument("--budget", type=positive_int, default=TASK_BUDGET,
                        help=f"tasks: evaluations per run (default {TASK_BUDGET})")
    parser.add_argument("--jobs", type=positive_int, default=1, help="tasks: processes running tasks (default 1)")
    parser.add_argument("--optima", type=Path, default=OPTIMA_DIR,
                        help="tasks: where the stored certified optima are (default phaze_env/task_optima)")
    parser.add_argument("--seeds", type=positive_int, default=None,
                        help=f"seeds per strategy (default {TASK_SEEDS} on tasks, 3 on a space)")
    parser.add_argument("--budgets", default=",".join(map(str, DEFAULT_BUDGETS)), metavar="B1,B2",
                        help="evaluation budgets to score at, comma-separated (default 50,200); runs last the largest")
    add_system_budget_options(parser)
    add_cluster_size_options(parser, devices=1024, batch=4096)
    parser.add_argument("--exact-workers", type=positive_int, default=1, metavar="N",
                        help="processes for the exact search (default 1)")
    parser.add_argument("--out", type=Path, default=None,
                        help="study directory (results.csv, exact.json, plots; default out/leaderboard/<space>)")
    parser.add_argument("--docs", type=Path, default=Path("docs"),
                        help="tasks: where leaderboard.md and leaderboard/ go; README.md beside it gets the aggregate "
                             "(default docs)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (default: shown, on stderr)")
    parser.add_argument("--fresh", action="store_true",
                        help="tasks: run every run again, replacing the stored ones (default: a run stored in "
                             "<out>/runs under the same task version, strategy, seed, budget and code is reused, so "
                             "an interrupted board resumes; a fresh board stores its runs too)")
    return parser


def parse_budgets(text: str) -> tuple[int, ...]:
    try:
        budgets = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise ValueError(f"--budgets must be positive integers separated by commas, got {text!r}") from None
    if not budgets or budgets[0] < 1:
        raise ValueError(f"--budgets must be positive integers separated by commas, got {text!r}")
    return budgets


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    argv_list = list(sys.argv[1:] if argv is None else argv)
    if args.task is not None:
        return task_main(parser, args, argv_list)
    args.seeds = args.seeds or 3
    try:
        budgets = parse_budgets(args.budgets)
        space = named_space(args.space, args.budget_mw, args.budget_usd, args.stack, nre_chips=args.nre_chips)
        workloads = list(dict.fromkeys(args.workload or ["gpt2-xl"]))
        for name in workloads:
            resolve_workload(name)
        strategies = list(dict.fromkeys(args.strategy or DEFAULT_STRATEGIES))
        for name in strategies:
            if name not in STRATEGIES:
                raise ValueError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}")
            if not STRATEGIES[name].available:
                raise ValueError(f"strategy {name!r} needs {', '.join(STRATEGIES[name].requires)} (not installed)")
        cluster = Cluster(n_devices=args.devices, global_batch=args.batch)
        out = args.out or Path("out/leaderboard") / args.space
        out.mkdir(parents=True, exist_ok=True)
    except (ValueError, OSError) as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    import torch

    torch.set_num_threads(1)  # tiny models; threads only contend with the evaluator
    started = time.perf_counter()
    result = run_study(workloads, strategies, args.seeds, budgets[-1], space, cluster, out,
                       exact_workers=args.exact_workers, progress=not args.quiet)
    rows, meta = result["rows"], result["meta"]
    if meta["interrupted"] or not rows:
        print(f"interrupted · finished runs are in {out / 'results.csv'}; the leaderboard needs every run",
              file=sys.stderr)
        return INTERRUPTED
    summary = summarise(rows)
    plot(rows, summary, out, meta)
    worst = max(float(r["best_normalized"]) for r in rows)
    if worst > 1 + TOLERANCE:
        print(f"error: a strategy beat the exact optimum (normalised {worst:.12f}) — the exact search is wrong",
              file=sys.stderr)
        return 1
    entries = score_at(rows, budgets)
    meta = meta | {"elapsed_s": time.perf_counter() - started,
                   "system_budget": space.budget.describe() if args.space == "system" else None}
    board = {"version": LEADERBOARD_VERSION, "space": args.space, "budgets": list(budgets),
             "command": "python -m experiments.leaderboard " + " ".join(argv_list), "meta": meta,
             "entries": entries, "separation": separation(entries)}
    write_text_atomic(out / "leaderboard.json", json.dumps(board, indent=2, default=str))
    plot_board(board, out / f"leaderboard-{args.space}.png")
    write_text_atomic(out / "leaderboard.md", markdown([board]).replace("figures/leaderboard-", "leaderboard-"))
    for line in board["separation"]:
        console().print(line)
    print(f"leaderboard: {out / 'leaderboard.md'}, {out / 'leaderboard.json'}, {out / f'leaderboard-{args.space}.png'} "
          f"· study in {out}/")
    return 0


# --- the benchmark tasks ----------------------------------------------------------------------------------------

def _plan(args: argparse.Namespace) -> tuple[list[Task], dict[str, Reference], dict[str, list[str]]]:
    """The tasks, their stored references and each task's strategies; ``ValueError`` (one line) for an unknown
    task, a missing or stale reference, or a named strategy that cannot run a task."""
    tasks = [get_task(name) for name in task_names(args.task)]
    references = {task.name: load_reference(task, args.optima) for task in tasks}
    strategies = {}
    for task in tasks:
        if args.strategy:
            for name in dict.fromkeys(args.strategy):
                if error := strategy_error(name, task):
                    raise ValueError(error)
            strategies[task.name] = list(dict.fromkeys(args.strategy))
        else:
            strategies[task.name] = default_strategies(task)
    return tasks, references, strategies


def _task_runs(name: str, strategies: list[str], seeds: int, budget: int, optima: Path,
               verbose: bool, store: Path | None) -> list[dict[str, Any]]:
    """One task's runs (a worker process's unit); ``verbose``: a line per finished run on stderr; ``store``: the
    task's JSON-lines file of finished runs (resumed from, appended to)."""
    import torch

    torch.set_num_threads(1)  # tiny models; threads only contend with the evaluator
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if verbose else (lambda line: None)
    return run_task(get_task(name), load_reference(name, optima), strategies, seeds, budget, log, store)


def run_store(out: Path, task: Task) -> Path:
    """Where a task's finished runs are kept between invocations (``<out>/runs/<task>.jsonl``)."""
    return out / "runs" / (Path(task.file_name()).stem + ".jsonl")


def _reference_summary(reference: Reference) -> dict[str, Any]:
    task = reference.task
    return {"description": task.describe(), "objectives": list(task.objectives), "version": reference.version,
            "optimum": reference.optimum if not task.multi_objective else None, "front_size": len(reference.scores),
            "exact_elapsed_s": reference.exact_elapsed_s, "exact_evaluations": reference.exact_evaluations}


def task_main(parser: argparse.ArgumentParser, args: argparse.Namespace, argv_list: list[str]) -> int:
    seeds = args.seeds or TASK_SEEDS
    try:
        tasks, references, strategies = _plan(args)
        out = args.out or Path("out/leaderboard/tasks")
        out.mkdir(parents=True, exist_ok=True)
        (args.docs / "leaderboard").mkdir(parents=True, exist_ok=True)
        if args.fresh:  # forget the stored runs, but keep storing this board's: an interrupted fresh board resumes
            for task in tasks:
                run_store(out, task).unlink(missing_ok=True)
    except (ValueError, OSError) as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    started = time.perf_counter()
    runs: list[dict[str, Any]] = []
    try:
        with ProcessPoolExecutor(args.jobs) as pool:
            futures = {pool.submit(_task_runs, t.name, strategies[t.name], seeds, args.budget, args.optima,
                                   not args.quiet, run_store(out, t)): t.name for t in tasks}
            for done, future in enumerate(as_completed(futures), 1):
                runs.extend(future.result())
                if not args.quiet:
                    elapsed = time.perf_counter() - started
                    print(f"[{done}/{len(tasks)}] {futures[future]} · elapsed {elapsed / 60:.1f} min · ETA "
                          f"{elapsed / done * (len(tasks) - done) / 60:.1f} min", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        print(f"interrupted · the leaderboard needs every run; the finished ones are kept in {out / 'runs'}: the same "
              "command resumes from them", file=sys.stderr)
        return INTERRUPTED
    elapsed = time.perf_counter() - started
    write_text_atomic(out / "runs.json", json.dumps(runs))
    if beaten := check_bounded(runs):
        for line in beaten:
            print(f"error: {line}", file=sys.stderr)
        return 1
    rng = np.random.default_rng(0)
    aggregate_ = aggregate(runs, rng)
    board = {"version": LEADERBOARD_VERSION, "command": "python -m experiments.leaderboard " + " ".join(argv_list),
             "meta": {"tasks": [t.name for t in tasks], "strategies": sorted({r["strategy"] for r in runs}),
                      "seeds": seeds, "budget": args.budget, "elapsed_s": elapsed, "jobs": args.jobs,
                      "cores": os.cpu_count(), "feedback": FEEDBACK},
             "references": {name: _reference_summary(ref) for name, ref in references.items()},
             "per_task": per_task(runs, rng), "aggregate": aggregate_, "separation": separated(aggregate_),
             "curves": mean_curves(runs, rng)}
    write_text_atomic(args.docs / "leaderboard" / "tasks.json", json.dumps(board, indent=1))
    written = render(args.docs)
    for line in board["separation"]:
        console().print(line)
    print(f"leaderboard: {', '.join(map(str, written))} · runs in {out / 'runs.json'} · {elapsed / 60:.1f} min")
    return 0


def render(docs: Path) -> list[Path]:
    """Write the Markdown, the page and the README/results-guide aggregate from ``<docs>/leaderboard/tasks.json``
    (and ``generalisation.json`` when present); the files written."""
    board = json.loads((docs / "leaderboard" / "tasks.json").read_text())
    generalisation = docs / "leaderboard" / "generalisation.json"
    if generalisation.is_file():
        board["generalisation"] = json.loads(generalisation.read_text())
    written = [docs / "leaderboard.md", docs / "leaderboard" / "board.html"]
    write_text_atomic(written[0], page.markdown(board))
    write_text_atomic(written[1], page.page_html(board))
    for path, docs_link in ((docs.parent / "README.md", "](docs/"), (docs / "guides" / "results.md", "](../")):
        if path.is_file() and page.MARK_START in (text := path.read_text()):
            write_text_atomic(path, page.replace_marked(text, page.readme_table(board).replace("](docs/", docs_link)))
            written.append(path)
    return written


if __name__ == "__main__":
    sys.exit(main())
