"""The exact search algorithm: best-bound-first over the architectures of a space, stopping on a proof.

1. every architecture gets a vectorised throughput upper bound (:mod:`search.bounds`);
2. architectures are visited best bound first (ties: smaller area); each is evaluated exactly (ILP
   schedules + placement DP, :func:`phaze_env.evaluate.evaluate`), optionally after a second, ILP-free
   bound (the placement DP on layer-latency lower bounds) has failed to prune it;
3. the search stops when the next bound cannot beat the incumbent: every unvisited design is provably no
   better. Ties keep the smaller-area design, then the earlier one (a total order, so the answer never depends on the
   order results arrive in).

Pareto mode (:meth:`ExactSearch.pareto`, any two or more of :data:`~search.objectives.PARETO_OBJECTIVES`)
prunes a design only when its bound vector is dominated by an evaluated design's scores.

Pruning stays sound when an ILP stops early: an unproven evaluation's throughput is still achieved by a
real schedule, so an incumbent never claims more than it has. Whether the *answer* is proven is decided
after the loops by :func:`certify`; unproven rows of ``results.db`` are evaluated again on resume.

:class:`ExactSearch` runs one of these loops over an executor (``submit`` → future);
:func:`search.run.run_search` orchestrates them.
"""

from __future__ import annotations

import math
from concurrent.futures import FIRST_COMPLETED, wait
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from phaze_env.design import SystemArchSpace
from phaze_env.evaluate import Evaluation
from phaze_env.placement.rules import valid_tensor_widths
from phaze_env.plan_spec import phaze_plan
from search.bounds import best_of_variants, row_variant_bounds, variant_throughput_bounds, variants_above
from search.config import SearchConfig
from search.objectives import AREA, non_dominated
from search.progress import SearchProgress
from search.result import UnprovenDesign
from search.store import DesignRecord, ResultsStore
from search.tasks import evaluate_design


def certify(mode: str, best_values: dict[str, float | None], records: dict[tuple, DesignRecord],
            ) -> tuple[bool, list[UnprovenDesign]]:
    """Is the search's answer proven? And every evaluated design that rests on an unproven schedule.

    ``best_values``: each workload's reported best throughput (best mode; ``None`` when nothing was found).
    ``records``: the search's records keyed ``(workload, index, …)``. In best mode an unproven design costs
    exactness only if it is the answer or its proven upper bound reaches the answer's throughput (it might
    be better); in the Pareto and multi-workload modes any unproven design does.
    """
    rows = []  # in (workload, index) order, not the order parallel workers happened to finish in
    for (workload, index, *_), record in sorted(records.items(), key=lambda item: item[0][:2]):
        evaluation = record.evaluation
        if not record.feasible or evaluation.proven:
            continue
        value = best_values.get(workload) if mode == "best" else None
        blocks = value is None or evaluation.throughput_bound_samples_s >= value
        rows.append(UnprovenDesign.of(workload, index, evaluation, blocks))
    return not any(row.blocks_exact for row in rows), rows


class ExactSearch:
    """Best-bound-first exact search over ``config.arch``; records every visited design (and stores it)."""

    def __init__(self, config: SearchConfig, executor, store: ResultsStore | None = None,
                 progress: SearchProgress | None = None):
        self.config = config
        self.executor = executor
        self.store = store
        self.progress = progress or SearchProgress()
        loaded = store.load() if store else {}
        # a row resting on an unproven schedule is provisional: evaluated again, never resumed as final
        self.records: dict[tuple[str, int], DesignRecord] = {key: r for key, r in loaded.items() if r.final}
        self.resumed = len(self.records)
        self.bounds: dict[str, np.ndarray] = {}
        self.variant_bounds: dict[str, dict[tuple[int, int], np.ndarray]] = {}
        self.counters = {"ilp_solves": 0, "evaluations": 0, "pruned_by_placement_bound": 0, "dp_calls": 0,
                         "bound_dp_calls": 0}  # the DP runs this run made (search.tasks.evaluate_design)

    # --- bounds ------------------------------------------------------------------------------------
    def compute_bounds(self) -> None:
        """Every architecture's bound per workload, in parts so that progress has a total — a bound is the best over
        the (tensor width, microbatch) variants, each computed on its own either way: PHAZE's spaces one variant at a
        time; the system space one tensor width at a time, each reported row group by row group (a width's call walks
        every group: one part per width would be a single part of seconds, with no time left, for a model whose
        heads allow one width)."""
        c = self.config
        plan = c.plan
        widths, microbatches = (plan or phaze_plan()).narrow(c.tensor_widths, c.space.microbatch)
        system = isinstance(c.arch, SystemArchSpace)  # rows on their own clusters, bounded in groups
        devices = math.inf if system else c.cluster.n_devices
        for name in c.names:
            self.progress.bounding(name, len(c.arch))
            usable = valid_tensor_widths(c.workload(name), widths, devices)  # the others have no bound (none valid)
            parts = [((t,), microbatches) for t in usable] if system else [((t,), (m,)) for t in usable
                                                                          for m in microbatches]
            per_variant = {}
            for done, (part_widths, part_microbatches) in enumerate(parts, 1):
                options = dict(microbatch=part_microbatches, tensor_widths=part_widths, seq_len=c.seq_len, plan=plan)
                if system:
                    def group_done(groups_done: int, groups: int, before: int = done - 1) -> None:
                        self.progress.bounded(name, before * groups + groups_done, len(parts) * groups)

                    per_variant |= row_variant_bounds(c.workload(name), c.arch, c.cluster, **options, done=group_done)
                else:
                    per_variant |= variant_throughput_bounds(c.workload(name), c.arch, c.cluster, **options)
                    self.progress.bounded(name, done, len(parts))
            self.variant_bounds[name] = per_variant
            self.bounds[name] = best_of_variants(per_variant, len(c.arch))

    # --- one (workload, architecture) --------------------------------------------------------------
    def _submit(self, workload: str, index: int, prune_below: float | None):
        task = self.config.task(workload, index, prune_below)
        if prune_below is not None and workload in self.variant_bounds:
            # the placement bound needs only the variants whose first bound can beat prune_below (some can:
            # the design was submitted because its best one does)
            kept, rest_bound = variants_above(self.variant_bounds[workload], index, prune_below)
            if kept["tensor_widths"]:
                task["bound_knobs"], task["other_variants_bound"] = kept, rest_bound
        return self.executor.submit(evaluate_design, task)

    def _absorb(self, workload: str, index: int, result: dict[str, Any]) -> DesignRecord:
        area = float(self.config.arch.arrays["area_mm2"][index])
        self.counters["dp_calls"] += result["dp_calls"]
        self.counters["bound_dp_calls"] += result["bound_dp_calls"]
        if result["status"] == "pruned":
            record = DesignRecord.pruned(result["bound"], area)
            self.counters["pruned_by_placement_bound"] += 1
        else:
            ev = Evaluation.from_dict(result["evaluation"])  # a worker's answer, as plain data
            record = DesignRecord.evaluated(ev, area)
            self.counters["evaluations"] += 1
            self.counters["ilp_solves"] += ev.ilp_solves
        self.records[(workload, index)] = record
        if self.store:
            self.store.record(workload, index, record)
        return record

    # --- the best-bound-first loop -----------------------------------------------------------------
    def maximise(self, workloads: list[str], bound: np.ndarray, value: Callable[[dict[str, Evaluation]], float],
                 label: str, window: int, floor: float = 0.0) -> tuple[int | None, float, int]:
        """Index of the architecture maximising ``value`` (ties: smaller area, then smaller index), its value, designs
        visited.

        Only designs that can beat ``floor`` (a value already reached elsewhere) are considered; when none
        can, the index is None.
        """
        areas = self.config.arch.arrays["area_mm2"]
        order = np.lexsort((np.arange(len(bound)), areas, -bound))

        def key(index: int) -> tuple[float, int]:
            """The tie order among equal values (a total order, so the answer never depends on the order results
            arrive in): the smaller area, then the smaller index."""
            return float(areas[index]), index
        descending = bound[order]
        single = len(workloads) == 1 and self.config.second_bound
        best_index, best_value = None, 0.0
        pending: dict[Any, tuple[str, int]] = {}
        waiting: dict[int, set[str]] = {}
        visited = done = position = 0

        def threshold() -> float | None:
            return max(best_value, floor) if best_index is not None else (floor if floor > 0 else None)

        def report() -> None:
            limit = threshold()
            above = len(order) if limit is None else int(np.searchsorted(-descending, -limit, side="left"))
            remaining = max(above - position, 0)
            self.progress.searching(label, done, len(waiting), remaining,
                                    best_value if best_index is not None else None,
                                    float(descending[position]) if remaining else None)

        def consider(index: int) -> None:
            nonlocal best_index, best_value, done
            done += 1
            recs = {w: self.records[(w, index)] for w in workloads}
            if not all(r.is_evaluated for r in recs.values()):
                return
            v = value({w: r.evaluation for w, r in recs.items()})
            if best_index is None or v > best_value or (v == best_value and key(index) < key(best_index)):
                best_index, best_value = index, v

        def beaten(index: int, limit: float) -> bool:
            """Whether a design whose bound is ``bound[index]`` cannot become the answer: its bound is below the
            limit, or equal to the best value with a later place in the tie order (so an equal value loses)."""
            if bound[index] < limit:
                return True
            return bound[index] == limit and not (best_index is not None and limit == best_value
                                                   and key(index) < key(best_index))

        while True:
            while position < len(order) and len(pending) < window:
                index = int(order[position])
                limit = threshold()
                if limit is not None and beaten(index, limit):
                    # the order sorts by bound, then by the tie order: every remaining design is beaten too
                    position = len(order)
                    break
                position += 1
                visited += 1
                missing = [w for w in workloads if (w, index) not in self.records]
                if not missing:
                    consider(index)
                    continue
                waiting[index] = set(missing)
                for w in missing:
                    prune_below = None
                    if single and best_index is not None:
                        # a design earlier in the tie order wins an equal value: prune it only strictly below
                        prune_below = (best_value if key(index) > key(best_index)
                                       else float(np.nextafter(best_value, -np.inf)))
                    pending[self._submit(w, index, prune_below)] = (w, index)
            report()
            if not pending:
                break
            finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for future in finished:
                w, index = pending.pop(future)
                self._absorb(w, index, future.result())
                waiting[index].discard(w)
                if not waiting[index]:
                    del waiting[index]
                    consider(index)
        self.progress.finished(label, visited, len(order), best_value if best_index is not None else None)
        return best_index, best_value, visited

    def pareto(self, workload: str, window: int, objectives: Sequence[str] = ("throughput", AREA),
               divisors: Mapping[str, np.ndarray] | None = None) -> tuple[list[int], int]:
        """Indices of the architectures on the exact Pareto front over ``objectives``, and the designs visited.

        ``divisors[name]``: per architecture, what the throughput is divided by for each objective but area
        (:meth:`SearchConfig.objective_divisors`; missing: 1). Each objective is a score to maximise
        (:mod:`search.objectives`): ``throughput / divisor`` or ``−area``; a design's bound vector is its throughput
        upper bound over its divisors, with its exact area. A design is pruned (never evaluated) only when its
        bound vector is dominated by the scores of a design already evaluated — no better in every objective:
        it can then at best tie that design, which already stands for that point of the front. In throughput
        units: design ``i`` is pruned when its throughput bound is at most
        ``max_j min_k T_j · d_ik / d_jk`` over the evaluated feasible designs ``j`` (only those with
        ``area_j ≤ area_i`` when area is an objective); that threshold is also what its ILP-free placement bound
        must beat (``prune_below``). Evaluated designs only accumulate, so a pruned design stays dominated, and
        the front of the evaluated designs is the front of the whole space: proven, like the best design, when
        every evaluated schedule is (:func:`certify`). Visit order: area ascending when area is an objective (an
        evaluated design's area is then no larger), else best first-objective bound first; ties in every
        objective keep one design per point (the first visited)."""
        areas = self.config.arch.arrays["area_mm2"]
        bound = self.bounds[workload]
        rates = [name for name in objectives if name != AREA]
        per_rate = np.stack([np.asarray(divisors[name], dtype=np.float64) if divisors and name in divisors
                             else np.ones(len(bound)) for name in rates], axis=1)  # architectures × rate objectives
        with_area = AREA in objectives
        first = bound / per_rate[:, 0]
        order = np.lexsort((-first, areas)) if with_area else np.lexsort((areas, -first))
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        label = f"pareto {workload}"
        evaluated: dict[int, float] = {}  # every feasible evaluated design (resumed ones too): its throughput
        arrays: list[np.ndarray] = []  # their indices and throughputs, rebuilt when one is added

        def absorb(index: int, record: DesignRecord) -> None:
            if record.feasible:
                evaluated[index] = record.throughput_samples_s
                arrays.clear()

        def threshold(index: int) -> float:
            """The throughput design ``index`` must exceed to escape domination by an evaluated design (0: none)."""
            if not evaluated:
                return 0.0
            if not arrays:
                arrays.extend([np.fromiter(evaluated, dtype=np.int64), np.fromiter(evaluated.values(), dtype=np.float64)])
            known, throughput = arrays
            reach = (throughput[:, None] / per_rate[known] * per_rate[index]).min(axis=1)
            if with_area:
                reach = reach[areas[known] <= areas[index]]
            return float(reach.max()) if reach.size else 0.0

        for (w, index), record in self.records.items():
            if w == workload:
                absorb(index, record)
        pending: dict[Any, int] = {}
        visited = done = position = 0
        while position < len(order) or pending:
            while position < len(order) and len(pending) < window:
                index = int(order[position])
                position += 1
                limit = threshold(index)
                if bound[index] <= limit:
                    continue
                visited += 1
                if (workload, index) in self.records:
                    done += 1
                    continue
                prune_below = limit if self.config.second_bound and limit > 0 else None
                pending[self._submit(workload, index, prune_below)] = index
            self.progress.searching(label, done, len(pending), len(order) - position,
                                    max(evaluated.values(), default=0.0) or None, None)
            if not pending:
                continue
            finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for future in finished:
                index = pending.pop(future)
                absorb(index, self._absorb(workload, index, future.result()))
                done += 1
        self.progress.finished(label, visited, len(order), max(evaluated.values(), default=0.0) or None)
        indices = np.array(sorted(evaluated, key=lambda i: rank[i]), dtype=np.int64)
        throughput = np.array([evaluated[i] for i in indices], dtype=np.float64)
        scores = throughput[:, None] / per_rate[indices] if len(indices) else np.zeros((0, len(rates)))
        if with_area:
            scores = np.column_stack([scores, -areas[indices]])
        return [int(indices[k]) for k in non_dominated(scores)], visited
