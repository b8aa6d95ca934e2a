"""Orchestrating an exact search: trace once, bound, run the mode's loops, evaluate the baseline, write outputs.

:func:`run_search` is the whole search as a function: a :class:`~search.config.SearchConfig` in, a
:class:`~search.result.SearchResult` out (and ``results.json``, ``evaluations.csv``,
``throughput_vs_area.png`` and ``results.db`` in ``out`` when given).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from phaze_env.design import reference_system
from phaze_env.evaluate import Evaluation
from phaze_env.hardware.system import RIVAL_HBM_GENERATIONS, SystemPoint
from phaze_env.workloads import prepare_graphs
from search.config import SearchConfig, aggregate
from search.exact import ExactSearch, certify
from search.objectives import AREA
from search.executors import make_executor
from search.outputs import write_outputs
from search.progress import SearchProgress
from search.result import DesignResult, SearchResult, SharedDesign
from search.store import DesignRecord, ResultsStore


def run_search(config: SearchConfig, *, workers: int = 1, scheduler: str | None = None, out: Path | None = None,
               progress: SearchProgress | None = None) -> SearchResult:
    """Run the exact search (``workers`` local processes, or a Dask ``scheduler``); resumable from ``out``."""
    progress = progress or SearchProgress()
    started = time.perf_counter()
    for workload in config.workloads:  # trace once here; workers read the graphs from the disk cache
        prepare_graphs(workload, config.tensor_widths, config.space.microbatch, seq_len=config.seq_len,
                       done=lambda finished, total, name=workload.name: progress.tracing(name, finished, total))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)  # the results store opens out/results.db: the directory must exist
    db = out / "results.db" if out else None
    if db is not None and (resumed := ResultsStore.count(db, config.signatures())):
        progress.resumed(resumed, db)
    store = ResultsStore(db, config.signature, config.arguments()) if db else None
    window = max(2, 2 * max(workers, 1))
    try:
        with make_executor(workers, scheduler) as executor:
            search = ExactSearch(config, executor, store, progress)
            search.compute_bounds()
            best: dict[str, DesignResult | None] = {}
            pareto: dict[str, tuple[DesignResult, ...]] = {}
            shared, extra = None, {}
            if config.mode == "pareto":
                divisors = {objective: config.objective_divisors(objective) for objective in config.objectives
                            if objective != AREA}
                for name in config.names:
                    front, _ = search.pareto(name, window, config.objectives, divisors)
                    pareto[name] = tuple(_design(search.records[(name, i)], config, i) for i in front)
            else:
                divisors = config.objective_divisors()
                for name in config.names:
                    index, _, _ = search.maximise([name], search.bounds[name] / divisors,
                                                  _objective_value(search, name, divisors), name, window)
                    best[name] = _design(search.records[(name, index)], config, index) if index is not None else None
                if config.mode == "shared":
                    shared, extra = _search_shared_design(config, search, executor, db, progress, window)
            baseline = {name: _baseline(config, name) for name in config.names}
    finally:
        progress.close()
        if store:
            store.close()
    evaluated = [r for r in [*search.records.values(), *extra.values()] if r.is_evaluated]
    best_values = {name: design.throughput_samples_s if design is not None and design.proven else None
                   for name, design in best.items()}
    exact, unproven = certify(config.mode, best_values, {**search.records, **extra})
    result = SearchResult(
        mode=config.mode, workloads=config.names, exact=exact, unproven=tuple(unproven), architectures=len(config.arch),
        designs=config.space.designs, best=best, shared=shared, pareto=pareto, baseline=baseline,
        evaluations=len(evaluated), evaluations_this_run=search.counters["evaluations"],
        pruned_by_placement_bound=sum(1 for r in search.records.values() if not r.is_evaluated),
        ilp_solves=sum(r.evaluation.ilp_solves for r in evaluated),
        dp_calls_this_run=search.counters["dp_calls"], bound_dp_calls_this_run=search.counters["bound_dp_calls"],
        pruning_ratio=1 - len({i for (_, i), r in search.records.items() if r.is_evaluated}) / len(config.arch),
        resumed_records=search.resumed, elapsed_s=time.perf_counter() - started, space=config.space.to_dict(),
        cluster=config.cluster.to_dict(), objectives=config.objectives if config.pareto else (),
        objective=config.objective)
    if out:
        write_outputs(out, result, search.records, config)
    return result


def _objective_value(search: ExactSearch, name: str, divisors: np.ndarray):
    """The value the best-design loop maximises: throughput over the row's objective divisor (1: throughput)."""
    if np.all(divisors == 1):
        return lambda evs: evs[name].throughput_samples_s

    def value(evs: dict[str, Evaluation]) -> float:
        evaluation = evs[name]  # the loop hands evaluations, not rows: find the row that holds this one
        index = next(i for (w, i), r in search.records.items() if w == name and r.evaluation is evaluation)
        return evaluation.throughput_samples_s / divisors[index]
    return value


def _design(record: DesignRecord, config: SearchConfig | None = None, index: int | None = None) -> DesignResult:
    """The result of a record; a system-space row's also carries its system (knobs, chips, power, cost)."""
    design = DesignResult.from_evaluation(record.evaluation)
    if config is not None and config.is_system:
        system = config.arch.system_summary(index) | config.arch.points[index].figures(design.tokens_s)
        return dataclasses.replace(design, system=system)
    return design


def _baseline(config: SearchConfig, name: str) -> DesignResult:
    """The space's reference design under the same placement DP and knobs (:meth:`DesignSpace.evaluate_baseline`):
    the TPUv4-like accelerator on the search's cluster in PHAZE's spaces; in the system space the TPUv4 chip in a
    torus at the same budget (:func:`~phaze_env.design.reference_system`), with its system figures."""
    evaluation = config.space.evaluate_baseline(config.workload(name), config.cluster, tensor_widths=config.tensor_widths,
                                                seq_len=config.seq_len, solver=config.solver,
                                                time_limit_s=config.time_limit_s, plan=config.plan)  # the same plan space
    design = DesignResult.from_evaluation(evaluation)
    if not config.is_system:
        return design
    point, _ = reference_system("tpuv4", config.space.budget, cluster=config.cluster)
    return _with_system(design, "tpuv4", point)


def evaluate_reference(config: SearchConfig, workload: str, reference: str, number_format: str = "bf16") -> DesignResult:
    """Reference system ``reference`` of a system-space search (TPUv4 torus, A100 or H100 DGX at the search's
    budget: :meth:`SystemDesignSpace.evaluate_reference`) on ``workload`` in ``number_format``, with the same
    knobs and plan space as the search's designs and baseline; ``system`` carries its figures as a design's do."""
    evaluation = config.space.evaluate_reference(reference, config.workload(workload), config.cluster, number_format,
                                                 tensor_widths=config.tensor_widths, seq_len=config.seq_len,
                                                 solver=config.solver, time_limit_s=config.time_limit_s, plan=config.plan)
    point, _ = reference_system(reference, config.space.budget, number_format, config.cluster)
    return _with_system(DesignResult.from_evaluation(evaluation), reference, point)


def _with_system(design: DesignResult, reference: str, point: SystemPoint) -> DesignResult:
    """``design`` of reference chip ``reference`` at ``point`` with its system figures (as a design row's)."""
    system = {"die_area_mm2": None, "hbm_stacks": point.chip_system.hbm_stacks,
              "hbm_generation": RIVAL_HBM_GENERATIONS[reference], "links": point.chip_system.links,
              "link_GBps": point.chip_system.link_bandwidth_Bps / 1e9, "topology": point.topology}
    return dataclasses.replace(design, system=system | point.summary() | point.figures(design.tokens_s))


def _search_shared_design(config: SearchConfig, search: ExactSearch, executor, db: Path | None,
                          progress: SearchProgress, window: int) -> tuple[SharedDesign | None, dict]:
    """The single design (architecture and HBM capacity: both are hardware) with the best aggregate throughput.

    Microbatch size and recompute stay per workload (they are software settings); the HBM capacity must be
    the same for every workload, so each capacity is searched on its own, later ones only for designs that
    can beat the best aggregate found so far. Returns the design and every record of the sub-searches.
    """
    stacked = np.stack([search.bounds[n] for n in config.names])
    combined = np.array([aggregate(column, config.aggregate) for column in stacked.T]) * (1 + 1e-9)
    best: tuple[int, float, ExactSearch, float] | None = None
    records: dict[tuple[str, int, float], DesignRecord] = {}
    for sub_config in config.per_capacity():
        (capacity,) = sub_config.space.hbm_gb
        store = ResultsStore(db, sub_config.signature, sub_config.arguments()) if db else None
        try:
            sub = ExactSearch(sub_config, executor, store, progress)
            sub.bounds = search.bounds
            index, value, _ = sub.maximise(
                list(config.names), combined,
                lambda evs: aggregate((evs[n].throughput_samples_s for n in config.names), config.aggregate),
                f"{config.aggregate} of {len(config.names)} at {capacity:g} GiB HBM", window,
                floor=best[1] if best else 0.0)
        finally:
            if store:
                store.close()
        search.counters["evaluations"] += sub.counters["evaluations"]
        for counter in ("dp_calls", "bound_dp_calls"):
            search.counters[counter] += sub.counters[counter]
        records.update({(w, i, capacity): r for (w, i), r in sub.records.items()})
        if index is not None and (best is None or value > best[1]):
            best = (index, value, sub, capacity)
    if best is None:
        return None, records
    index, value, sub, capacity = best
    return SharedDesign(how=config.aggregate, throughput_samples_s=value,
                        accelerator=config.arch[index].replace(hbm_gb=capacity).to_dict(),
                        per_workload={n: _design(sub.records[(n, index)]) for n in config.names}), records
