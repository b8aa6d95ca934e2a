"""Exact search of the accelerator architecture (and its placement) with the highest training throughput.

``python -m search.phaze [--workload NAME ...] [--out DIR] ...`` searches PHAZE's architecture space
(DESIGN.md) × microbatch size × recompute × HBM capacity and returns the **provably best** design:

1. every architecture gets a vectorised throughput upper bound (:mod:`search.bounds`);
2. architectures are visited best-bound first; each is evaluated exactly (ILP schedules + placement DP,
   :func:`phaze_env.evaluate.evaluate`), optionally after a second, ILP-free bound (the placement DP on
   layer-latency lower bounds) has failed to prune it;
3. the search stops when the next bound cannot beat the incumbent: every unvisited design is provably
   no better. Ties keep the smaller-area design.

Multi-workload mode optimises the mean (or geometric mean) throughput of one design across workloads,
and reports each workload's own best too. Pareto mode (``--objectives throughput,area``) returns the
non-dominated designs: visited in order of area, a design is pruned when a smaller-or-equal-area design
already reaches its bound.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from phaze_env.cache import content_key
from phaze_env.cli import OneLineParser, float_list, int_list, positive_float, positive_int, print_output
from phaze_env.design import SPACE_NAMES, DesignSpace
from phaze_env.evaluate import DEFAULT_TIME_LIMIT_S, Cluster, evaluate
from phaze_env.hardware import TPUV4, ArchSpace
from phaze_env.workloads import TENSOR_WIDTHS, get_workload, model_graph, workload_names
from search.bounds import throughput_bounds
from search.executors import make_executor
from search.store import ResultsStore
from search.tasks import evaluate_design

DEFAULT_WORKLOAD = "gpt2-xl"
AGGREGATES = ("mean", "geomean")


@dataclass
class SearchConfig:
    workloads: list[str]
    cluster: Cluster = field(default_factory=Cluster)
    space: DesignSpace = field(default_factory=DesignSpace)
    tensor_widths: tuple[int, ...] = TENSOR_WIDTHS
    seq_len: int | None = None
    aggregate: str = "mean"
    pareto: bool = False
    second_bound: bool = True
    solver: str = "cbc"
    time_limit_s: float = DEFAULT_TIME_LIMIT_S

    @property
    def arch(self) -> ArchSpace:
        """The in-window architectures the search visits."""
        return self.space.arch_space()

    def arguments(self) -> dict[str, Any]:
        """What the answer depends on (the resume signature): not workers, output or progress."""
        return {
            "workloads": self.workloads, "cluster": self.cluster.to_dict(), "space": self.space.to_dict(),
            "tensor_widths": list(self.tensor_widths), "seq_len": self.seq_len, "aggregate": self.aggregate,
            "pareto": self.pareto, "solver": self.solver, "time_limit_s": self.time_limit_s,
        }

    def task(self, workload: str, index: int, prune_below: float | None) -> dict[str, Any]:
        space = self.space
        return {"workload": workload, "accelerator": self.arch[index].to_dict(), "cluster": self.cluster.to_dict(),
                "microbatch": list(space.microbatch), "recompute": list(space.recompute), "hbm_gb": list(space.hbm_gb),
                "tensor_widths": list(self.tensor_widths), "seq_len": self.seq_len, "solver": self.solver,
                "time_limit_s": self.time_limit_s, "prune_below": prune_below}


def aggregate(values: Iterable[float], how: str) -> float:
    values = list(values)
    if how == "geomean":
        return 0.0 if min(values) <= 0 else float(math.exp(sum(math.log(v) for v in values) / len(values)))
    return float(sum(values) / len(values))


class _Progress:
    """A rich progress bar showing the incumbent (silent when disabled)."""

    def __init__(self, enabled: bool, total: int, label: str):
        self._bar = None
        if enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[status]}"), TimeElapsedColumn(), transient=False)
            self._bar.start()
            self._task = self._bar.add_task(label, total=total, status="")

    def update(self, advance: int, status: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=advance, status=status)

    def finish(self, status: str) -> None:
        if self._bar is not None:
            task = self._bar.tasks[0]
            self._bar.update(self._task, completed=task.total, status=status)
            self._bar.stop()


class ExactSearch:
    """Best-bound-first exact search over an :class:`ArchSpace` (see the module docstring)."""

    def __init__(self, config: SearchConfig, executor, store: ResultsStore | None = None, progress: bool = False):
        self.config = config
        self.executor = executor
        self.store = store
        self.progress = progress
        self.records: dict[tuple[str, int], dict[str, Any]] = store.load() if store else {}
        self.resumed = len(self.records)
        self.extra_records: dict[tuple[str, int, float], dict[str, Any]] = {}  # one-design searches per HBM capacity
        self.bounds: dict[str, np.ndarray] = {}
        self.counters = {"ilp_solves": 0, "evaluations": 0, "pruned_by_placement_bound": 0, "dp_calls": 0}

    # --- bounds ------------------------------------------------------------------------------------
    def compute_bounds(self) -> None:
        c = self.config
        for name in c.workloads:
            self.bounds[name] = throughput_bounds(get_workload(name), c.arch, c.cluster, microbatches=c.space.microbatch,
                                                  tensor_widths=c.tensor_widths, seq_len=c.seq_len)

    # --- one (workload, architecture) --------------------------------------------------------------
    def _submit(self, workload: str, index: int, prune_below: float | None):
        return self.executor.submit(evaluate_design, self.config.task(workload, index, prune_below))

    def _absorb(self, workload: str, index: int, result: dict[str, Any]) -> dict[str, Any]:
        area = float(self.config.arch.arrays["area_mm2"][index])
        self.counters["dp_calls"] += result.get("dp_calls", 0)
        if result["status"] == "pruned":
            record = {"status": "pruned", "throughput_samples_s": None, "bound_samples_s": result["bound"],
                      "area_mm2": area, "evaluation": None}
            self.counters["pruned_by_placement_bound"] += 1
        else:
            ev = result["evaluation"]
            record = {"status": "evaluated", "throughput_samples_s": ev["throughput_samples_s"], "bound_samples_s": None,
                      "area_mm2": area, "evaluation": ev}
            self.counters["evaluations"] += 1
            self.counters["ilp_solves"] += ev["ilp_solves"]
        self.records[(workload, index)] = record
        if self.store:
            self.store.record(workload, index, record["status"], throughput=record["throughput_samples_s"],
                              bound=record["bound_samples_s"], area=area, evaluation=record["evaluation"])
        return record

    # --- the best-bound-first loop -----------------------------------------------------------------
    def maximise(self, workloads: list[str], bound: np.ndarray, value: Callable[[dict[str, dict]], float],
                 label: str, window: int, floor: float = 0.0) -> tuple[int | None, float, int]:
        """Index of the architecture maximising ``value`` (ties: smaller area), its value, designs visited.

        Only designs that can beat ``floor`` (a value already reached elsewhere) are considered; when none
        can, the index is None.
        """
        order = np.lexsort((self.config.arch.arrays["area_mm2"], -bound))
        single = len(workloads) == 1 and self.config.second_bound
        best_index, best_value = None, 0.0
        areas = self.config.arch.arrays["area_mm2"]
        pending: dict[Any, tuple[str, int]] = {}
        waiting: dict[int, set[str]] = {}
        visited = 0
        bar = _Progress(self.progress, len(order), label)

        def consider(index: int) -> None:
            nonlocal best_index, best_value
            recs = {w: self.records[(w, index)] for w in workloads}
            if any(r["status"] == "pruned" for r in recs.values()):
                return
            v = value({w: r["evaluation"] for w, r in recs.items()})
            if best_index is None or v > best_value or (v == best_value and areas[index] < areas[best_index]):
                best_index, best_value = index, v

        position = 0
        while True:
            while position < len(order) and len(pending) < window:
                index = int(order[position])
                threshold = max(best_value, floor) if best_index is not None else (floor if floor > 0 else None)
                if threshold is not None and bound[index] <= threshold:
                    position = len(order)  # every remaining bound is ≤ this one: all pruned
                    break
                position += 1
                visited += 1
                missing = [w for w in workloads if (w, index) not in self.records]
                if not missing:
                    consider(index)
                    bar.update(1, self._status(best_value))
                    continue
                waiting[index] = set(missing)
                for w in missing:
                    pending[self._submit(w, index, best_value if single and best_index is not None else None)] = (w, index)
            if not pending:
                break
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for future in done:
                w, index = pending.pop(future)
                self._absorb(w, index, future.result())
                waiting[index].discard(w)
                if not waiting[index]:
                    del waiting[index]
                    consider(index)
                    bar.update(1, self._status(best_value))
        bar.finish(self._status(best_value) + f" · visited {visited} of {len(order)}")
        return best_index, best_value, visited

    def pareto(self, workload: str, window: int) -> tuple[list[int], int]:
        """Indices of the non-dominated (max throughput, min area) architectures, designs visited."""
        areas = self.config.arch.arrays["area_mm2"]
        bound = self.bounds[workload]
        order = np.lexsort((-bound, areas))
        running_best = 0.0
        pending: dict[Any, int] = {}
        visited = 0
        bar = _Progress(self.progress, len(order), f"pareto {workload}")
        position = 0
        while position < len(order) or pending:
            while position < len(order) and len(pending) < window:
                index = int(order[position])
                position += 1
                if bound[index] <= running_best:
                    bar.update(1, self._status(running_best))
                    continue
                visited += 1
                if (workload, index) in self.records:
                    running_best = max(running_best, self.records[(workload, index)]["throughput_samples_s"] or 0.0)
                    bar.update(1, self._status(running_best))
                    continue
                pending[self._submit(workload, index, None)] = index
            if not pending:
                continue
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for future in done:
                index = pending.pop(future)
                record = self._absorb(workload, index, future.result())
                running_best = max(running_best, record["throughput_samples_s"] or 0.0)
                bar.update(1, self._status(running_best))
        bar.finish(self._status(running_best))
        evaluated = [(areas[i], -(r["throughput_samples_s"] or 0.0), i) for (w, i), r in self.records.items()
                     if w == workload and r["status"] == "evaluated" and r["evaluation"]["feasible"]]
        front, best = [], 0.0
        for area, negative, index in sorted(evaluated):
            if -negative > best:
                front.append(index)
                best = -negative
        return front, visited

    @staticmethod
    def _status(value: float) -> str:
        return f"incumbent {value:,.1f} samples/s"


# --------------------------------------------------------------------------------------------- running

def run_search(config: SearchConfig, *, workers: int = 1, scheduler: str | None = None, out: Path | None = None,
               progress: bool = False) -> dict[str, Any]:
    """Run the exact search; returns the ``results.json`` content (and writes the files when ``out``)."""
    started = time.perf_counter()
    for name in config.workloads:  # trace once here; workers read the graphs from the disk cache
        for t in config.tensor_widths:
            for m in config.space.microbatch:
                try:
                    model_graph(name, seq_len=config.seq_len, microbatch=m, tensor_width=t)
                except ValueError:
                    pass  # that width does not divide this model; evaluate skips it too
    signature = content_key("search", config.arguments())
    store = ResultsStore(out / "results.db", signature, config.arguments()) if out else None
    window = max(2, 2 * max(workers, 1))
    with make_executor(workers, scheduler) as executor:
        search = ExactSearch(config, executor, store, progress)
        search.compute_bounds()
        result: dict[str, Any] = {"workloads": config.workloads, "exact": True, "space_size": len(config.arch),
                                  "points": config.space.designs, "resumed_records": search.resumed}
        if config.pareto:
            fronts = {}
            for name in config.workloads:
                front, _ = search.pareto(name, window)
                fronts[name] = [_design_summary(search.records[(name, i)]["evaluation"]) for i in front]
            result["pareto"] = fronts
        else:
            per_workload = {}
            for name in config.workloads:
                index, _, _ = search.maximise(
                    [name], search.bounds[name], lambda evs, n=name: evs[n]["throughput_samples_s"], f"search {name}", window)
                per_workload[name] = _design_summary(search.records[(name, index)]["evaluation"]) if index is not None else None
            if len(config.workloads) > 1:
                result.update(_search_one_design(config, search, executor, out, progress, window))
                result["per_workload_best"] = per_workload
            else:
                result["best"] = per_workload[config.workloads[0]]
        evaluated = [r for r in [*search.records.values(), *search.extra_records.values()] if r["status"] == "evaluated"]
        result.update({
            "evaluations": len(evaluated), "evaluations_this_run": search.counters["evaluations"],
            "pruned_by_placement_bound": sum(1 for r in search.records.values() if r["status"] == "pruned"),
            "ilp_solves": sum(r["evaluation"]["ilp_solves"] for r in evaluated),
            "dp_calls_this_run": search.counters["dp_calls"],
            "pruning_ratio": 1 - len({i for (_, i), r in search.records.items() if r["status"] == "evaluated"}) / len(config.arch),
        })
        result["baseline"] = {name: _design_summary(evaluate(name, TPUV4, config.cluster, microbatch_sizes=config.space.microbatch,
                                                             recompute=config.space.recompute, hbm_gb=config.space.hbm_gb,
                                                             tensor_widths=config.tensor_widths, seq_len=config.seq_len,
                                                             solver=config.solver, time_limit_s=config.time_limit_s).to_dict())
                              for name in config.workloads}
        if len(config.workloads) == 1 and not config.pareto:
            result["baseline"] = result["baseline"][config.workloads[0]]
    result["elapsed_s"] = time.perf_counter() - started
    if out:
        _write_outputs(out, result, search, config)
    if store:
        store.close()
    return result


def _search_one_design(config: SearchConfig, search: ExactSearch, executor, out: Path | None, progress: bool,
                       window: int) -> dict[str, Any]:
    """The single design (architecture and HBM capacity: both are hardware) with the best aggregate throughput.

    Microbatch size and recompute stay per workload (they are software settings); the HBM capacity must be
    the same for every workload, so each capacity is searched on its own, later ones only for designs that
    can beat the best aggregate found so far.
    """
    stacked = np.stack([search.bounds[n] for n in config.workloads])
    combined = np.array([aggregate(column, config.aggregate) for column in stacked.T]) * (1 + 1e-9)
    best: tuple[int, float, ExactSearch, float] | None = None
    for capacity in config.space.hbm_gb:
        sub_config = dataclasses.replace(config, space=dataclasses.replace(config.space, hbm_gb=(capacity,)))
        store = ResultsStore(out / "results.db", content_key("search", sub_config.arguments()), sub_config.arguments()) \
            if out else None
        sub = ExactSearch(sub_config, executor, store, progress)
        sub.bounds = search.bounds
        index, value, _ = sub.maximise(
            config.workloads, combined,
            lambda evs: aggregate((evs[n]["throughput_samples_s"] for n in config.workloads), config.aggregate),
            f"{config.aggregate} of {len(config.workloads)} at {capacity:g} GB", window,
            floor=best[1] if best else 0.0)
        search.counters["evaluations"] += sub.counters["evaluations"]
        search.counters["dp_calls"] += sub.counters["dp_calls"]
        search.extra_records.update({(w, i, capacity): r for (w, i), r in sub.records.items()})
        if index is not None and (best is None or value > best[1]):
            best = (index, value, sub, capacity)
        if store:
            store.close()
    if best is None:
        return {"best": None, "best_aggregate": None}
    index, value, sub, capacity = best
    return {"best": {n: _design_summary(sub.records[(n, index)]["evaluation"]) for n in config.workloads},
            "best_aggregate": {"how": config.aggregate, "throughput_samples_s": value,
                               "accelerator": config.arch[index].replace(hbm_gb=capacity).to_dict()}}


def _design_summary(evaluation: dict[str, Any]) -> dict[str, Any]:
    return {key: evaluation[key] for key in ("workload", "accelerator", "plan", "throughput_samples_s", "tokens_s", "mfu",
                                             "feasible", "reason", "energy_per_sample_j")} | {"area": evaluation["area_mm2"]}


CSV_COLUMNS = ("arch_index", "workload", "status", "num_tc", "tc_width", "tc_depth", "num_vc", "vc_width", "buffer_mb",
               "hbm_gb", "area_mm2", "feasible", "throughput_samples_s", "tokens_s", "mfu", "tensor_width",
               "pipeline_stages", "data_parallel", "microbatch", "energy_per_sample_j", "bound_samples_s")


def _write_outputs(out: Path, result: dict[str, Any], search: ExactSearch, config: SearchConfig) -> None:
    (out / "results.json").write_text(json.dumps(result, indent=2, default=float))
    with open(out / "evaluations.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, CSV_COLUMNS)
        writer.writeheader()
        for (workload, index), record in sorted(search.records.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            acc = config.arch[index]
            row = {"arch_index": index, "workload": workload, "status": record["status"], "num_tc": acc.num_tc,
                   "tc_width": acc.tc_width, "tc_depth": acc.tc_depth, "num_vc": acc.num_vc, "vc_width": acc.vc_width,
                   "buffer_mb": acc.buffer_mb, "area_mm2": record["area_mm2"], "bound_samples_s": record["bound_samples_s"]}
            ev = record["evaluation"]
            if ev:
                plan = ev["plan"] or {}
                row.update(hbm_gb=ev["accelerator"]["hbm_gb"], feasible=ev["feasible"],
                           throughput_samples_s=ev["throughput_samples_s"], tokens_s=ev["tokens_s"], mfu=ev["mfu"],
                           tensor_width=plan.get("tensor_width"), pipeline_stages=plan.get("pipeline_stages"),
                           data_parallel=plan.get("data_parallel"), microbatch=plan.get("microbatch"),
                           energy_per_sample_j=ev["energy_per_sample_j"])
            writer.writerow(row)
    _plot(out / "throughput_vs_area.png", result, search, config)


def _plot(path: Path, result: dict[str, Any], search: ExactSearch, config: SearchConfig) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(config.workloads), figsize=(6 * len(config.workloads), 4.5), squeeze=False)
    baselines = result["baseline"] if isinstance(result["baseline"], dict) and "workload" not in result["baseline"] \
        else {config.workloads[0]: result["baseline"]}
    for ax, name in zip(axes[0], config.workloads):
        points = sorted((r["area_mm2"], r["throughput_samples_s"]) for (w, _), r in search.records.items()
                        if w == name and r["status"] == "evaluated" and r["evaluation"]["feasible"])
        if points:
            area, throughput = np.array(points).T
            ax.scatter(area, throughput, s=8, alpha=0.5, label=f"evaluated ({len(points)})")
            front_a, front_t, best = [], [], 0.0
            for a, t in points:
                if t > best:
                    front_a.append(a)
                    front_t.append(t)
                    best = t
            label = "Pareto front (exact)" if config.pareto else "front of the evaluated designs"
            ax.step(front_a, front_t, where="post", color="C3", label=label)
        base = baselines.get(name)
        if base and base["feasible"]:
            ax.scatter([base["area"]], [base["throughput_samples_s"]], marker="*", s=200, color="k", label="TPUv4")
        ax.set(xlabel="area (mm²)", ylabel="training throughput (samples/s)", title=name)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------- CLI

def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m search.phaze",
        description="Exact (provably best) co-search of accelerator architecture and training placement.")
    parser.add_argument("--workload", action="append", metavar="NAME",
                        help=f"workload to optimise for (repeatable; default {DEFAULT_WORKLOAD}); one of: {', '.join(workload_names())}")
    parser.add_argument("--devices", type=positive_int, default=1024, help="accelerators in the cluster (default 1024)")
    parser.add_argument("--batch", type=positive_int, default=4096, help="global batch in samples (default 4096)")
    parser.add_argument("--seq", type=positive_int, default=None, help="sequence length (default: the workload's own)")
    parser.add_argument("--link-gbps", type=positive_float, default=4.0, help="interconnect bandwidth in GB/s (default 4)")
    parser.add_argument("--link-latency-us", type=float, default=0.0, help="interconnect latency in µs (default 0)")
    parser.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd", help="optimizer state (default sgd)")
    parser.add_argument("--microbatch", type=int_list, default=None,
                        help="microbatch sizes (default: the space's; full 1,2,4,8)")
    parser.add_argument("--microbatches", type=int_list, dest="microbatch", help=argparse.SUPPRESS)
    parser.add_argument("--hbm-gb", type=float_list, default=None, help="HBM capacities in GB (default: the space's; full 32,64,80)")
    parser.add_argument("--tensor-widths", type=int_list, default=TENSOR_WIDTHS, help="tensor-parallel widths (default 1,2,4,8)")
    parser.add_argument("--no-recompute", action="store_true", help="forbid activation recomputation")
    parser.add_argument("--space", choices=SPACE_NAMES, default="full",
                        help="full PHAZE space, or DesignSpace.reduced() (576 knob combinations) for quick looks")
    parser.add_argument("--objectives", default="throughput",
                        help="'throughput' (default) or 'throughput,area' for the Pareto front")
    parser.add_argument("--aggregate", choices=AGGREGATES, default="mean", help="multi-workload objective (default mean)")
    parser.add_argument("--workers", type=positive_int, default=os.cpu_count() or 1, help="local worker processes")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS", help="Dask scheduler address (tcp://host:8786)")
    parser.add_argument("--solver", choices=("cbc", "highs"), default="cbc", help="ILP solver (default cbc)")
    parser.add_argument("--time-limit", type=positive_float, default=DEFAULT_TIME_LIMIT_S, help="seconds per ILP")
    parser.add_argument("--out", type=Path, default=Path("out/phaze"), help="output directory (default out/phaze)")
    parser.add_argument("--json", action="store_true", help="print results.json to stdout instead of tables")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def config_from_args(args: argparse.Namespace) -> SearchConfig:
    workloads = args.workload or [DEFAULT_WORKLOAD]
    for name in workloads:
        get_workload(name)
    objectives = [o.strip() for o in args.objectives.split(",")]
    if objectives not in (["throughput"], ["throughput", "area"]):
        raise ValueError(f"--objectives must be 'throughput' or 'throughput,area', got {args.objectives!r}")
    if args.link_latency_us < 0:
        raise ValueError("--link-latency-us must be non-negative")
    cluster = Cluster(n_devices=args.devices, link_bandwidth_Bps=args.link_gbps * 1e9,
                      link_latency_s=args.link_latency_us * 1e-6, global_batch=args.batch, optimizer=args.optimizer)
    overrides = {name: value for name, value in (("microbatch", args.microbatch), ("hbm_gb", args.hbm_gb),
                                                 ("recompute", (False,) if args.no_recompute else None))
                 if value is not None}
    space = DesignSpace.named(args.space, **overrides)
    return SearchConfig(workloads=list(dict.fromkeys(workloads)), cluster=cluster, space=space,
                        tensor_widths=args.tensor_widths, seq_len=args.seq,
                        aggregate=args.aggregate, pareto=len(objectives) == 2, solver=args.solver,
                        time_limit_s=args.time_limit)


def _prepare_out(path: Path) -> Path:
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise ValueError(f"output directory {path} is not writable: {exc.strerror or exc}") from None
    return path


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
        out = _prepare_out(args.out)
    except ValueError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    try:
        result = run_search(config, workers=args.workers, scheduler=args.scheduler, out=out,
                            progress=not (args.quiet or args.json))
    except ValueError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    if args.json:
        print_output(json.dumps(result, indent=2, default=float))
    else:
        _print_summary(result, out)
    return 0


def _comparison_table(name: str, best: dict[str, Any] | None, baseline: dict[str, Any]):
    """Best design vs TPUv4, one metric per row (fits a narrow terminal)."""
    from rich.table import Table

    table = Table(title=f"{name}: best design vs TPUv4 (same placement DP)")
    table.add_column("")
    table.add_column("best", justify="right")
    table.add_column("TPUv4", justify="right")

    def cells(d, key):
        if d is None or not d["feasible"]:
            return "infeasible" if key == "samples/s" else ""
        a, p = d["accelerator"], d["plan"]
        return {
            "samples/s": f"{d['throughput_samples_s']:,.1f}", "tokens/s": f"{d['tokens_s']:,.0f}", "MFU": f"{d['mfu']:.1%}",
            "area mm²": f"{d['area']:.1f}", "tensor cores": f"{a['num_tc']} × {a['tc_width']}×{a['tc_depth']}",
            "vector cores": f"{a['num_vc']} × {a['vc_width']}", "buffer": f"{a['buffer_mb']} MB", "HBM": f"{a['hbm_gb']:g} GB",
            "plan (t·p·d, m)": f"{p['tensor_width']}·{p['pipeline_stages']}·{p['data_parallel']}, m={p['microbatch']}",
            "recompute stages": f"{sum(p['recompute'])} of {p['pipeline_stages']}",
        }[key]

    for key in ("samples/s", "tokens/s", "MFU", "area mm²", "tensor cores", "vector cores", "buffer", "HBM",
                "plan (t·p·d, m)", "recompute stages"):
        table.add_row(key, cells(best, key), cells(baseline, key))
    return table


def _print_summary(result: dict[str, Any], out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if "pareto" in result:
        for name, front in result["pareto"].items():
            table = Table(title=f"Pareto front (throughput, area) for {name}")
            for column in ("area mm²", "samples/s", "tc", "vc", "buffer MB", "plan"):
                table.add_column(column, justify="right")
            for d in front:
                a, p = d["accelerator"], d["plan"]
                table.add_row(f"{d['area']:.1f}", f"{d['throughput_samples_s']:,.1f}",
                              f"{a['num_tc']}×{a['tc_width']}×{a['tc_depth']}", f"{a['num_vc']}×{a['vc_width']}",
                              str(a["buffer_mb"]), f"t{p['tensor_width']} p{p['pipeline_stages']} d{p['data_parallel']} m{p['microbatch']}")
            console.print(table)
    else:
        best = result["best"]
        rows = best if isinstance(best, dict) and "workload" not in best else {result["workloads"][0]: best}
        baselines = result["baseline"] if "workload" not in result["baseline"] else {result["workloads"][0]: result["baseline"]}
        for name, design in rows.items():
            console.print(_comparison_table(name, design, baselines[name]))
    console.print(f"exact: {result['exact']} · evaluations {result['evaluations']} of {result['space_size']} architectures "
                  f"(pruning ratio {result['pruning_ratio']:.2%}) · ILP solves {result['ilp_solves']} · "
                  f"{result['elapsed_s']:.1f} s · results in {out}/")


if __name__ == "__main__":
    sys.exit(main())
