"""Compare search strategies against the exact optimum: convergence, evaluations to 95/99/100 %, final gap.

For every workload × strategy × seed, a strategy (:data:`baselines.STRATEGIES`) runs for ``--budget``
evaluations through :func:`baselines.run_strategy`; the best throughput so far after each evaluation is
normalised by the exact optimum of the same design space (:func:`baselines.exact.exact_optimum`, i.e.
``search.phaze``) — so ``best_normalized`` ≤ 1 always, and a value above 1 would expose a bug in the
exact search.

Outputs in ``--out``: ``results.csv`` (one row per workload × strategy × seed × evaluation: ``workload,
strategy, seed, evaluation, best_throughput, best_normalized, wall_s``; each run's rows are written when
it finishes, so Ctrl-C keeps every finished run and still writes the summary and plots of those),
``summary.md`` (also printed with rich), ``exact.json`` (the optima), ``convergence.png`` (mean best-so-far
with min–max seed bands) and ``evals_to_99.png``.

    # CI smoke test of every strategy (tiny GPT-2, 16 devices, reduced space, 2 seeds × 20 evaluations)
    python -m experiments.compare_strategies --quick --out out/study-quick
    # the full study (≈ 1–2 h on 2 cores with a cold cache; see docs/study.md)
    python -m experiments.compare_strategies --seeds 5 --budget 100 --out out/study

Wall times are measured with the persistent evaluation cache in whatever state it is, so they mostly show
each strategy's own overhead plus the cold evaluations it triggered; evaluation counts are the fair metric.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from phaze_env.cli import OneLineParser, add_cluster_size_options, add_system_budget_options, console, positive_int
from baselines import STRATEGIES, run_strategy
from baselines.exact import exact_optimum
from baselines.workloads import resolve_workload
from phaze_env.design import SPACE_NAMES, Design, DesignSpace, named_space
from phaze_env.evaluate import Cluster
from phaze_env.files import write_text_atomic
from phaze_env.hardware.accelerator import NOTATION_LEGEND
from phaze_env.workloads import workload_names

DEFAULT_WORKLOADS = ("bert-large", "gpt2-xl", "opt-1.3b", "llama2-7b")
THRESHOLDS = (0.95, 0.99, 1.0)
COLUMNS = ("workload", "strategy", "seed", "evaluation", "best_throughput", "best_normalized", "wall_s")
TOLERANCE = 1e-9
INTERRUPTED = 130  # the shell's status for a program ended by SIGINT


def default_strategies(space: DesignSpace) -> list[str]:
    """Every registered strategy whose packages are installed (brute force only on small spaces)."""
    from baselines.optuna_samplers import BRUTE_FORCE_MAX_DESIGNS

    return [name for name, spec in STRATEGIES.items()
            if spec.available and not (spec.small_spaces_only and space.combinations > BRUTE_FORCE_MAX_DESIGNS)]


def evaluations_to(normalized: Sequence[float], threshold: float) -> int | None:
    """1-based evaluation at which best-so-far first reaches ``threshold`` of the optimum (None: never)."""
    for i, value in enumerate(normalized):
        if value >= threshold - TOLERANCE:
            return i + 1
    return None


def run_study(workloads: list[str], strategies: list[str], seeds: int, budget: int, space: DesignSpace,
              cluster: Cluster, out: Path, *, exact_workers: int = 1, progress: bool = True) -> dict[str, Any]:
    """Run every (workload, strategy, seed); write ``results.csv`` and ``exact.json``; return rows and optima.

    ``results.csv`` gets each run's rows as soon as the run finishes (flushed), so an interrupted study
    keeps every finished run. Ctrl-C ends the study early: the result then holds the finished runs and
    ``meta["interrupted"]`` is True (``exact.json`` says so too).
    """
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    optima: dict[str, dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    runs = [(w, s, k) for w in workloads for s in strategies for k in range(seeds)]
    bar = _progress(progress, len(runs) * budget)
    interrupted = False
    try:
        with open(out / "results.csv", "w", newline="") as handle:
            writer = csv.DictWriter(handle, COLUMNS)
            writer.writeheader()
            handle.flush()
            for name in workloads:
                workload = resolve_workload(name)
                bar.describe(f"exact optimum of {name}")
                exact = exact_optimum(workload, cluster, space, workers=exact_workers)
                optimum = exact["throughput_samples_s"]
                optima[name] = {"throughput_samples_s": optimum,
                                "design": exact["design"].to_dict() if exact["design"] else None,
                                "exact_evaluations": exact["evaluations"], "exact_elapsed_s": exact["elapsed_s"],
                                "proven": exact["exact"]}
                if not exact["exact"]:
                    print(f"warning: the reference optimum of {name} is not proven (an ILP stopped early): "
                          "best/optimum ratios above 1 are possible; rerun on an idle machine", file=sys.stderr)
                if optimum <= 0:
                    raise RuntimeError(f"{name}: no feasible design in the space, nothing to normalise by")
                for strategy in strategies:
                    for seed in range(seeds):
                        bar.describe(f"{name} · {strategy} · seed {seed}")
                        trace = run_strategy(strategy, workload, cluster, space, budget, seed, name=strategy,
                                             callback=lambda _: bar.advance())
                        run_rows = [{"workload": name, "strategy": strategy, "seed": seed, "evaluation": i + 1,
                                     "best_throughput": best, "best_normalized": best / optimum, "wall_s": wall}
                                    for i, (best, wall) in enumerate(zip(trace.best_throughput, trace.wall_s))]
                        writer.writerows(run_rows)
                        handle.flush()  # a finished run is on disk before the next one starts
                        rows.extend(run_rows)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.stop()
    elapsed = time.perf_counter() - started
    meta = {"workloads": workloads, "strategies": strategies, "seeds": seeds, "budget": budget,
            "cluster": cluster.to_dict(), "space_designs": len(space), "optima": optima, "elapsed_s": elapsed,
            "interrupted": interrupted}
    write_text_atomic(out / "exact.json", json.dumps(meta, indent=2, default=str))
    return {"rows": rows, "meta": meta}


# ----------------------------------------------------------------------------------------------- summary

def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (workload, strategy): final normalised best (mean, min), evaluations and wall time to each
    threshold (median over the seeds that reach it, and how many do), final gap."""
    runs: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for row in rows:
        runs.setdefault((row["workload"], row["strategy"], int(row["seed"])), []).append(row)
    groups: dict[tuple[str, str], list[list[dict[str, Any]]]] = {}
    for (workload, strategy, _), run in runs.items():
        run.sort(key=lambda r: int(r["evaluation"]))
        groups.setdefault((workload, strategy), []).append(run)
    summary = []
    for (workload, strategy), group in groups.items():
        finals = [float(run[-1]["best_normalized"]) for run in group]
        entry = {"workload": workload, "strategy": strategy, "seeds": len(group), "budget": len(group[0]),
                 "final_mean": float(np.mean(finals)), "final_min": float(np.min(finals)),
                 "gap_mean": float(np.mean([1 - f for f in finals])),
                 "max_normalized": max(float(r["best_normalized"]) for run in group for r in run),
                 "wall_s_mean": float(np.mean([float(run[-1]["wall_s"]) for run in group]))}
        for threshold in THRESHOLDS:
            normalized = [[float(r["best_normalized"]) for r in run] for run in group]
            reached = [(evaluations_to(n, threshold), run) for n, run in zip(normalized, group)]
            hits = [(e, run) for e, run in reached if e is not None]
            key = f"{round(threshold * 100)}"
            entry[f"evals_to_{key}"] = float(np.median([e for e, _ in hits])) if hits else None
            entry[f"wall_to_{key}"] = float(np.median([float(run[e - 1]["wall_s"]) for e, run in hits])) if hits else None
            entry[f"reached_{key}"] = len(hits)
            # censored mean for plots: a seed that never reaches the threshold counts as the budget
            entry[f"evals_to_{key}_censored"] = float(np.mean([e if e is not None else len(run) for e, run in reached]))
        summary.append(entry)
    summary.sort(key=lambda e: (e["workload"], -e["final_mean"], e["evals_to_99_censored"]))
    return summary


def _fmt(value: float | None, spec: str = ".0f") -> str:
    return "–" if value is None else format(value, spec)


SUMMARY_HEADER = ("workload", "strategy", "final (mean)", "final (min)", "gap", "evals→95%", "evals→99%",
                  "evals→100%", "wall→99% (s)", "wall total (s)")


def summary_rows(summary: list[dict[str, Any]]) -> list[list[str]]:
    table = []
    for e in summary:
        k = e["seeds"]
        table.append([e["workload"], e["strategy"], f"{e['final_mean']:.4f}", f"{e['final_min']:.4f}",
                      f"{e['gap_mean']:.2%}",
                      f"{_fmt(e['evals_to_95'])} ({e['reached_95']}/{k})", f"{_fmt(e['evals_to_99'])} ({e['reached_99']}/{k})",
                      f"{_fmt(e['evals_to_100'])} ({e['reached_100']}/{k})", _fmt(e["wall_to_99"], ".1f"),
                      f"{e['wall_s_mean']:.1f}"])
    return table


def markdown_summary(summary: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [f"# Strategy comparison ({meta['seeds']} seeds × {meta['budget']} evaluations, "
             f"{meta['space_designs']} knob combinations, cluster {meta['cluster']['n_devices']} devices, "
             f"global batch {meta['cluster']['global_batch']})", "",
             "Best throughput so far normalised by the exact optimum (`search.phaze`). evals→X%: median "
             "evaluations over the seeds that reach X % of the optimum (seeds reaching / seeds); gap = "
             "1 − final normalised best (mean over seeds).", "",
             "| exact optimum | samples/s | design |", "|---|---|---|"]
    for name, o in meta["optima"].items():
        design = Design.from_dict(o["design"]) if o["design"] else "no feasible design"
        lines.append(f"| {name} | {o['throughput_samples_s']:,.1f} | {design} |")
    lines += ["", f"Designs: {NOTATION_LEGEND}."]
    if meta.get("interrupted"):
        lines += ["", "**Interrupted**: only the runs that finished are summarised."]
    lines += ["", "| " + " | ".join(SUMMARY_HEADER) + " |", "|" + "---|" * len(SUMMARY_HEADER)]
    lines += ["| " + " | ".join(row) + " |" for row in summary_rows(summary)]
    lines += ["", f"Study wall time: {meta['elapsed_s']:.1f} s."]
    return "\n".join(lines) + "\n"


def print_summary(summary: list[dict[str, Any]]) -> None:
    from rich.table import Table

    table = Table(title="Strategies vs the exact optimum (normalised best throughput)")
    for column in SUMMARY_HEADER:
        table.add_column(column, justify="left" if column in ("workload", "strategy") else "right")
    for row in summary_rows(summary):
        table.add_row(*row)
    console().print(table)


# ------------------------------------------------------------------------------------------------- plots

def study_title(meta: dict[str, Any]) -> str:
    """What a figure shows: cluster, budget and seeds (the workload is each panel's own title)."""
    cluster = meta["cluster"]
    seeds = f"{meta['seeds']} seed{'s' if meta['seeds'] > 1 else ''}"
    return (f"{cluster['n_devices']:,} devices ({cluster['link_bandwidth_Bps'] / 1e9:g} GB/s links), global batch "
            f"{cluster['global_batch']:,} · {seeds} × {meta['budget']} evaluations · "
            f"{meta['space_designs']:,} knob combinations")


STRATEGY_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", "h", ">")
"""Markers for the strategies' curves: 11, one more than the palette's colours, so a colour that comes back has
another marker."""
LEGEND_FONTSIZE = 10  # points: the legend of 14+ strategies stays readable next to a 6.5-inch panel


def strategy_styles(strategies: Sequence[str]) -> dict[str, dict[str, Any]]:
    """A colour, marker and line style per strategy, so 14+ curves stay distinguishable: tab10's ten qualitative
    colours (no light look-alike pairs), :data:`STRATEGY_MARKERS` (11) and four line styles cycling alongside — up
    to 15 strategies, two whose colours are alike (tab10's blue and cyan, red, brown and grey) or equal differ in
    both marker and line style."""
    import matplotlib.pyplot as plt

    palette = plt.get_cmap("tab10").colors
    linestyles = ("-", "--", "-.", ":")
    return {s: {"color": palette[i % len(palette)], "marker": STRATEGY_MARKERS[i % len(STRATEGY_MARKERS)],
                "ls": linestyles[i % len(linestyles)]} for i, s in enumerate(strategies)}


def convergence_figure(rows: list[dict[str, Any]], meta: dict[str, Any]):
    """Best so far per strategy (mean, min–max band over seeds), one panel per workload, one legend for all."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    styles = strategy_styles(strategies)
    fig, axes = plt.subplots(1, len(workloads), figsize=(6.5 * len(workloads) + 3.5, 5.2), squeeze=False,
                             layout="constrained")
    for ax, workload in zip(axes[0], workloads):
        for strategy in strategies:
            runs: dict[int, list[float]] = {}
            for r in rows:
                if r["workload"] == workload and r["strategy"] == strategy:
                    runs.setdefault(int(r["seed"]), []).append(float(r["best_normalized"]))
            if not runs:
                continue
            length = min(len(v) for v in runs.values())
            curves = np.array([v[:length] for v in runs.values()])
            x = np.arange(1, length + 1)
            ax.plot(x, curves.mean(0), label=strategy, lw=1.6, markersize=5, markevery=max(1, length // 8),
                    **styles[strategy])
            ax.fill_between(x, curves.min(0), curves.max(0), color=styles[strategy]["color"], alpha=0.08)
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set(title=workload, xlabel="evaluations", ylabel="best throughput / exact optimum", ylim=(0, 1.02))
    fig.suptitle(f"Best so far (mean, min–max over seeds)\n{study_title(meta)}", fontsize=10)
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside right center", fontsize=LEGEND_FONTSIZE,
               handlelength=3.5)
    return fig


def plot(rows: list[dict[str, Any]], summary: list[dict[str, Any]], out: Path, meta: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    fig = convergence_figure(rows, meta)
    fig.savefig(out / "convergence.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(strategies) * len(workloads) ** 0.5 + 3), 4.5),
                           layout="constrained")
    width = 0.8 / max(len(workloads), 1)
    by_key = {(e["workload"], e["strategy"]): e for e in summary}
    for i, workload in enumerate(workloads):
        values = [by_key[(workload, s)]["evals_to_99_censored"] if (workload, s) in by_key else np.nan for s in strategies]
        ax.bar(np.arange(len(strategies)) + i * width, values, width, label=workload)
    budget = max(int(r["evaluation"]) for r in rows)
    ax.axhline(budget, color="k", lw=0.8, ls="--", label=f"budget ({budget}): not reached")
    ax.set_xticks(np.arange(len(strategies)) + width * (len(workloads) - 1) / 2, strategies, rotation=40, ha="right")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(ylabel="evaluations to 99 % of the optimum\n(mean over seeds; unreached = budget)",
           title=f"{', '.join(workloads)} · {study_title(meta)}")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=LEGEND_FONTSIZE)
    fig.savefig(out / "evals_to_99.png", dpi=110)
    plt.close(fig)


class _progress:
    """A rich progress bar over the study's strategy evaluations, with an ETA (silent when disabled)."""

    def __init__(self, enabled: bool, total: int):
        self._bar = None
        if enabled:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("evaluations"), TimeElapsedColumn(), TextColumn("ETA"),
                                 TimeRemainingColumn(), console=console(stderr=True))
            self._bar.start()
            self._task = self._bar.add_task("study", total=total)

    def describe(self, text: str) -> None:
        if self._bar:
            self._bar.update(self._task, description=text)

    def advance(self) -> None:
        if self._bar:
            self._bar.advance(self._task)

    def stop(self) -> None:
        if self._bar:
            self._bar.stop()


# --------------------------------------------------------------------------------------------------- CLI

def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m experiments.compare_strategies", description=__doc__.split("\n")[0])
    parser.add_argument("--workload", action="append", metavar="NAME",
                        help=f"repeatable; default {', '.join(DEFAULT_WORKLOADS)}; one of tiny-gpt2, {', '.join(workload_names())}")
    parser.add_argument("--strategy", action="append", metavar="NAME",
                        help=f"repeatable; default every available one of: {', '.join(STRATEGIES)}")
    parser.add_argument("--seeds", type=positive_int, default=5, help="seeds per strategy (default 5)")
    parser.add_argument("--budget", type=positive_int, default=100, help="evaluations per run (default 100)")
    parser.add_argument("--space", choices=SPACE_NAMES, default="reduced",
                        help="DesignSpace.reduced() (576 knob combinations, 464 inside the area window; default), PHAZE's "
                             "full space or the system space")
    add_system_budget_options(parser)
    add_cluster_size_options(parser, devices=1024, batch=4096)
    parser.add_argument("--exact-workers", type=positive_int, default=1, metavar="N",
                        help="processes for the exact search (default 1)")
    parser.add_argument("--quick", action="store_true",
                        help="CI smoke test: tiny-gpt2, 16 devices, batch 64, reduced space, 2 seeds × 20 evaluations, "
                             "every strategy (overrides the options above unless given explicitly; default off)")
    parser.add_argument("--out", type=Path, default=Path("out/study"),
                        help="output directory, relative to the current directory (default out/study)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (default: shown, on stderr)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    argv_list = list(sys.argv[1:] if argv is None else argv)
    given = {a.split("=")[0] for a in argv_list if a.startswith("--")}
    if args.quick:
        args.workload = args.workload or ["tiny-gpt2"]
        args.devices = args.devices if given & {"--devices", "--n-devices"} else 16
        args.batch = args.batch if given & {"--batch", "--global-batch"} else 64
        args.seeds = args.seeds if "--seeds" in given else 2
        args.budget = args.budget if "--budget" in given else 20
    workloads = list(dict.fromkeys(args.workload or DEFAULT_WORKLOADS))
    try:
        for name in workloads:
            resolve_workload(name)
        cluster = Cluster(n_devices=args.devices, global_batch=args.batch)
        space = named_space(args.space, args.budget_mw, args.budget_usd, args.stack, nre_chips=args.nre_chips)
        strategies = list(dict.fromkeys(args.strategy or default_strategies(space)))
        for name in strategies:
            if name not in STRATEGIES:
                raise ValueError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}")
            if not STRATEGIES[name].available:
                raise ValueError(f"strategy {name!r} needs {', '.join(STRATEGIES[name].requires)} (not installed)")
        args.out.mkdir(parents=True, exist_ok=True)
    except (ValueError, OSError) as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    import torch

    torch.set_num_threads(1)  # tiny models; threads only contend with the evaluator
    result = run_study(workloads, strategies, args.seeds, args.budget, space, cluster, args.out,
                       exact_workers=args.exact_workers, progress=not args.quiet)
    if not result["rows"]:
        print(f"interrupted before any run finished · {args.out / 'results.csv'} has no rows", file=sys.stderr)
        return INTERRUPTED
    summary = summarise(result["rows"])
    (args.out / "summary.md").write_text(markdown_summary(summary, result["meta"]))
    plot(result["rows"], summary, args.out, result["meta"])
    print_summary(summary)
    runs = len({(r["workload"], r["strategy"], r["seed"]) for r in result["rows"]})
    print(f"study: {runs} runs, {len(result['rows'])} rows, {result['meta']['elapsed_s']:.1f} s · outputs in {args.out}/")
    worst = max((e["max_normalized"] for e in summary), default=0.0)
    if worst > 1 + TOLERANCE:
        print(f"error: a strategy beat the exact optimum (normalised {worst:.12f}) — the exact search is wrong",
              file=sys.stderr)
        return 1
    if result["meta"]["interrupted"]:
        print(f"interrupted · the {runs} finished runs are in {args.out / 'results.csv'} and summarised", file=sys.stderr)
        return INTERRUPTED
    return 0


if __name__ == "__main__":
    sys.exit(main())
