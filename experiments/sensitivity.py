"""How each system-table verdict moves over its assumptions' ranges: ``python -m experiments.sensitivity``.

For one row of ``docs/system_table.json`` (a workload at a budget kind) and every assumption of
:data:`phaze_env.assumptions.ASSUMPTIONS` at each end of its range (:func:`phaze_env.assumptions.moved`), the row's
verdict — the exact system-space search's best throughput over each rival's at the same budget (:data:`RIVALS`: the
references TPUv4, A100, H100 and the 2024–25 flagships) — is computed again:

* **exact**: the search is re-run (:func:`search.run.run_search`, proven or saying it is not) and the rivals
  re-evaluated, all under the moved assumption (its iso-cost budget too: the H100 cluster's cost moves with a cost
  assumption);
* **answer unchanged**: when the move leaves every input of the search as it was at nominal — the budget, every row's
  chip (accelerator) and cluster (chip count, links, training stack and efficiency) and objective divisor
  (:func:`search_inputs`) — the answer is the nominal one, exactly, and only the rivals whose own chip or cluster the
  move changes are evaluated again (e.g. the V–f exponent: only the power-capped flagships);
* **inputs unchanged**: when it changes no rival either, the nominal verdict, and nothing is re-run (e.g. a cost
  assumption at iso-power: chip counts follow power).
* **lower bound** (``--reevaluate``, for a row whose search takes too long to run once per case): where the move
  changes the search's inputs, the nominal answer's design is evaluated again under it (its chip and chip count at the
  moved budget, through the search's own path) instead of searching; it is a row of the moved space, so the moved
  search's answer is at least as high, and each ratio a lower bound on the moved verdict's.

Without ``--reevaluate`` nothing is bounded or estimated: each figure is a proven search's or the nominal one for the
reason above, and a search that is not proven is marked so. Outputs: ``<out>/<workload>/<kind>/sensitivity.json`` (the format
:func:`search.report.sensitivity_section` charts) and that search's ``report.html`` rebuilt with the tornado chart;
the row's ``sensitivity`` summary in ``<docs>/system_table.json`` (``system_table.md`` re-rendered) and the tornado
charts of every row with one in ``<docs>/figures/system_sensitivity.{html,png}``.

``--from-table`` adds cases to a stored row's sensitivity without re-running its nominal search: the row's stored
answer, references and flagship columns are the nominal (:func:`stored_verdict`), the cases' searches run only where
the move changes the search's inputs, and the row keeps its other cases (:func:`merged_summary`; the table names the
assumptions a row, or a rival's range, lacks: :func:`uncovered`).

``--rivals-only`` (with ``--from-table``) adds the flagships' ratios to a stored row's cases of a run before they were
set against, without running any search: each case's stored answer against each flagship under the case's move, the
flagship's nominal figure where the move leaves its inputs as at nominal and evaluated again where not
(:func:`rivals_from_cases`).

    python -m experiments.sensitivity --workload gpt2-xl --kind power --workers 2
    python -m experiments.sensitivity --from-table --workload gpt2-xl --assumption voltage_frequency_exponent --workers 1
    python -m experiments.sensitivity --from-table --rivals-only --workload gpt2-xl --workers 1
    python -m experiments.sensitivity --from-table --reevaluate --workload gpt3-175b --workers 2
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from experiments.system_table import (FLAGSHIP_LABELS, FLAGSHIPS, KINDS, REFERENCE_LABELS, REFERENCES, RIVAL_LABELS,
                                      best_reference, case_signature,
                                      budget_for, load_rows, power_budget_w, row_key, search_config, select_rows,
                                      stored_row_config, uncovered, write_docs)
from phaze_env.assumptions import ASSUMPTIONS, Assumption, moved
from phaze_env.cli import OneLineParser, positive_float, positive_int
from phaze_env.design import SYSTEM_FIELDS, reference_system
from phaze_env.evaluate import Evaluation
from phaze_env.files import write_text_atomic, writable_directory
from phaze_env.hardware import Accelerator
from phaze_env.hardware.system import RIVAL_NUMBER_FORMATS, SystemBudget
from phaze_env.workloads import get_workload
from search.config import SearchConfig
from search.report import SENSITIVITY_FILE, rebuild, tornado_bars, tornado_figures
from search.run import run_search
from search.tasks import evaluate_design

STATUSES = ("exact", "answer unchanged", "inputs unchanged")
"""How a case's figures were obtained (module docstring) when they are exact; :data:`LOWER_BOUND` is not exact but
says what it is, anything else is "NOT PROVEN"."""
LOWER_BOUND = "lower bound"
"""The status of a case whose answer is the nominal answer's design evaluated again under the move, not searched again
(``--reevaluate``, :func:`reevaluated_verdict`): the design is in the moved space, so its throughput is a lower bound
on the moved search's answer, and every ratio over a rival (each rival evaluated as in an exact case) a lower bound on
the moved verdict's."""
RIVALS = REFERENCES + FLAGSHIPS
"""Every system a verdict sets the answer against: the table's same-node references and the 2024–25 flagships."""


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def search_inputs(config: SearchConfig) -> dict[str, str]:
    """Digests of everything a system-space search's answer and each rival's evaluation are functions of, beside the
    search's arguments (which no assumption moves): ``answer``, the budget, each row's accelerator and cluster
    (:meth:`SystemArchSpace.cluster`) and objective divisor; per rival of :data:`RIVALS`, its accelerator and cluster
    in each of its number formats at that budget. Each evaluation is a function of these (the content-addressed cache
    keys it by them), so an equal digest means an equal answer, or an equal rival's throughput."""
    arch, budget = config.arch, config.space.budget
    rows = [[arch.points[i].accelerator.to_dict(), arch.cluster(i, config.cluster).to_dict()] for i in range(len(arch))]
    divisors = [float(d).hex() for d in config.objective_divisors()]  # all 1 for throughput; a per-W or per-$ objective's
    return {"answer": _digest([budget.to_dict(), rows, divisors])} | rival_inputs(config, RIVALS)


def rival_inputs(config: SearchConfig, names: Sequence[str]) -> dict[str, str]:
    """:func:`search_inputs`' digests of rivals ``names`` alone (without the answer's, which builds every row of the
    space)."""
    budget = config.space.budget
    digests = {}
    for name in names:
        systems = []
        for number_format in RIVAL_NUMBER_FORMATS[name]:
            point, cluster = reference_system(name, budget, number_format,
                                              config.space.reference_training(name, config.cluster))
            systems.append([number_format, point.accelerator.to_dict(),
                            cluster.to_dict() if cluster is not None else point.unbuildable_reason])
        digests[name] = _digest([budget.to_dict(), systems])
    return digests


def rival_samples(config: SearchConfig, names: Sequence[str]) -> dict[str, float | None]:
    """Each rival's best throughput at the config's budget (:func:`experiments.system_table.best_reference`; None: not
    built)."""
    (workload,) = config.names
    out = {}
    for name in names:
        design, _, _ = best_reference(config, workload, name, config.space.budget)
        out[name] = design.throughput_samples_s if design.feasible else None
    return out


def _with_rivals(figures: dict[str, Any], references: dict[str, float | None]) -> dict[str, Any]:
    """``figures`` (an answer's) with its rivals' throughputs and the ratios over them."""
    return figures | {"references": references,
                      "ratios": {n: figures["samples_s"] / s for n, s in references.items() if s}}


def verdict(config: SearchConfig, *, workers: int, out: Path, progress=None) -> dict[str, Any]:
    """The row's verdict under the model as it is now: the exact search's answer, each rival's best throughput at
    the same budget (:data:`RIVALS`) and the ratios."""
    (workload,) = config.names
    started = time.perf_counter()
    result = run_search(config, workers=workers, out=out, progress=progress)
    best = result.best[workload]
    if best is None or not best.feasible:
        raise ValueError(f"no feasible system for {workload} at {config.space.budget.describe()}")
    figures = {"samples_s": best.throughput_samples_s, "chips": best.system["n_devices"],
               "design": Accelerator.from_dict(best.accelerator).notation(), "plan": best.plan.notation,
               "exact": result.exact, "budget": config.space.budget.to_dict(), "knobs": design_knobs(best.accelerator,
                                                                                                    best.system)}
    return _with_rivals(figures, rival_samples(config, RIVALS)) | {"elapsed_s": time.perf_counter() - started}


DESIGN_KNOBS = ("num_tc", "tc_width", "tc_depth", "num_vc", "buffer_mb")
"""The accelerator knobs that, with the system fields (:data:`~phaze_env.design.SYSTEM_FIELDS`), name a row of the
system space whatever an assumption does to its chip (clock, efficiency, power) or its chip count."""


def design_knobs(accelerator: dict[str, Any], system: dict[str, Any]) -> dict[str, Any]:
    """The knobs naming an answer's design in the system space (:data:`DESIGN_KNOBS` and the system fields)."""
    return {k: accelerator[k] for k in DESIGN_KNOBS} | {k: system[k] for k in SYSTEM_FIELDS}


def design_index(config: SearchConfig, knobs: dict[str, Any]) -> int | None:
    """The row of ``config``'s system space whose design has ``knobs`` (None: the space has no such row, e.g. the
    budget buys none of its units under a move)."""
    for i, design in enumerate(config.arch.designs):
        if all(getattr(design, k) == v for k, v in knobs.items()):
            return i
    return None


def reevaluated_verdict(config: SearchConfig, nominal: dict[str, Any],
                        moved_rivals: Sequence[str] | None = None) -> dict[str, Any]:
    """The nominal answer's design evaluated again in ``config``'s space (a moved assumption's), through the search's
    own path (:func:`search.tasks.evaluate_design`: its chip and chip count at the budget, the space's stack and
    knobs), with every rival at that budget: figures as :func:`verdict`'s, the answer a lower bound on the moved
    search's (:data:`LOWER_BOUND`). ``moved_rivals``: the rivals whose inputs the move changes (:func:`search_inputs`),
    evaluated again, the others' figures the nominal's (default: every rival evaluated). A ``ValueError`` when the nominal holds no design knobs (a stored row of an older
    table) or the moved space has no such row, or it is infeasible there."""
    (workload,) = config.names
    started = time.perf_counter()
    if "knobs" not in nominal:
        raise ValueError("the nominal answer names no design (a table row stored before its accelerator and system "
                         "were): run it without --reevaluate")
    index = design_index(config, nominal["knobs"])
    if index is None:
        raise ValueError(f"the nominal design {nominal['design']} is not in the moved space (its budget buys none of "
                         "its units): run it without --reevaluate")
    evaluation = Evaluation.from_dict(evaluate_design(config.task(workload, index, None))["evaluation"])
    if not evaluation.feasible:
        raise ValueError(f"the nominal design {nominal['design']} cannot train under the move ({evaluation.reason}): "
                         "run it without --reevaluate")
    point = config.arch.points[index]
    figures = {"samples_s": evaluation.throughput_samples_s, "chips": point.n_devices, "design": nominal["design"],
               "plan": evaluation.plan.notation, "exact": False, "budget": config.space.budget.to_dict(),
               "knobs": nominal["knobs"]}
    references = rival_samples(config, RIVALS) if moved_rivals is None else \
        nominal["references"] | rival_samples(config, moved_rivals)
    return _with_rivals(figures, references) | {"elapsed_s": time.perf_counter() - started}


def stored_verdict(row: dict[str, Any]) -> dict[str, Any]:
    """The verdict a stored table row holds (its answer, references and flagship columns), as :func:`verdict` gives
    it: the nominal of a sensitivity run that does not re-run the row's search (``--from-table``)."""
    best = row["best"]
    references = {n: (r["samples_s"] if r.get("feasible") else None) for n, r in row["references"].items()}
    references |= {n: (r["samples_s"] if r.get("feasible") else None) for n, r in row.get("flagships", {}).items()}
    figures = {"samples_s": best["samples_s"], "chips": best["chips"], "design": best["design"], "plan": best["plan"],
               "exact": row["exact"], "budget": row["budget"]}
    if "accelerator" in best and "system" in best:
        figures["knobs"] = design_knobs(best["accelerator"], best["system"])
    return _with_rivals(figures, references) | {"elapsed_s": 0.0}


def row_sensitivity(config_at: Callable[[], SearchConfig], kind: str, *, workers: int, directory: Path,
                    assumptions: Sequence[Assumption] | None = None,
                    say: Callable[[str], None] = print, nominal: dict[str, Any] | None = None,
                    reevaluate: bool = False) -> dict[str, Any]:
    """The verdict of the search ``config_at()`` builds (called under each move: its budget may follow it, as the
    iso-cost budget does) at nominal and at each end of each assumption's range (module docstring), with the range of
    every ratio over all of them; written to ``directory/sensitivity.json`` (the nominal search's outputs go to
    ``directory``, each case's under ``directory/sensitivity/``). ``nominal``: the nominal verdict when it is already
    known (:func:`stored_verdict`), so the nominal search is not re-run. ``reevaluate``: a case whose move changes the
    search's inputs evaluates the nominal answer's design again instead of searching (:func:`reevaluated_verdict`,
    status :data:`LOWER_BOUND`): for a row whose search takes too long to run once per case."""
    started = time.perf_counter()
    nominal_config = config_at()
    (workload,) = nominal_config.names
    nominal_inputs = search_inputs(nominal_config)
    if nominal is None:
        nominal = verdict(nominal_config, workers=workers, out=directory)
    say(f"nominal: {_ratios_text(nominal['ratios'])} ({nominal['elapsed_s']:.0f} s)")
    cases = []
    for assumption in assumptions or ASSUMPTIONS.values():
        for end, value in assumption.ends().items():
            case_started = time.perf_counter()
            with moved(assumption.name, value):
                config = config_at()
                inputs = search_inputs(config)
                moved_rivals = [n for n in RIVALS if inputs[n] != nominal_inputs[n]]
                if inputs["answer"] != nominal_inputs["answer"] and reevaluate:
                    figures, status = reevaluated_verdict(config, nominal, moved_rivals), LOWER_BOUND
                elif inputs["answer"] != nominal_inputs["answer"]:
                    figures = verdict(config, workers=workers, out=directory / "sensitivity" / f"{assumption.name}-{end}")
                    status = "exact" if figures["exact"] else "NOT PROVEN"
                elif moved_rivals:  # the answer is the nominal one, exactly; only the moved rivals are evaluated again
                    references = nominal["references"] | rival_samples(config, moved_rivals)
                    figures = _with_rivals(nominal, references) | {"elapsed_s": time.perf_counter() - case_started}
                    status = "answer unchanged"
                else:
                    figures, status = nominal | {"elapsed_s": 0.0}, "inputs unchanged"
            case = {"assumption": assumption.name, "label": assumption.label, "unit": assumption.unit, "end": end,
                    "value": value, "nominal_value": assumption.nominal, "status": status,
                    "wall_s": time.perf_counter() - case_started} | figures
            cases.append(case)
            say(f"{assumption.describe(value)} ({end}): {_ratios_text(case['ratios'])} [{status}, "
                f"{case['wall_s']:.0f} s]")
    data = {"workload": workload, "kind": kind, "budget": nominal_config.space.budget.describe(),
            "references": {n: RIVAL_LABELS[n] for n in RIVALS}, "nominal": nominal, "cases": cases,
            "ranges": ranges(nominal, cases), "exact": all(c["status"] in STATUSES for c in cases) and nominal["exact"],
            "lower_bounds": sum(c["status"] == LOWER_BOUND for c in cases),
            "proven": nominal["exact"] and all(c["status"] in STATUSES + (LOWER_BOUND,) for c in cases),
            "signature": nominal_config.signature, "elapsed_s": time.perf_counter() - started}
    write_text_atomic(writable_directory(directory) / SENSITIVITY_FILE, json.dumps(data, indent=1, allow_nan=False) + "\n")
    return data


def ranges(nominal: dict[str, Any], cases: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per rival: the ratio's lowest and highest over the nominal run and every case that has it (a case of a run
    before the flagships were set against has no flagship ratio: :func:`uncovered` names them), and the case giving
    each ("nominal" when no case moves it that way)."""
    out = {}
    for name, ratio in nominal["ratios"].items():
        points = [(ratio, "nominal")] + [(c["ratios"][name], f"{c['assumption']} {c['end']}") for c in cases
                                         if name in c["ratios"]]
        low, high = (end if end[0] != ratio else (ratio, "nominal") for end in (min(points), max(points)))
        out[name] = {"nominal": ratio, "low": low[0], "low_by": low[1], "high": high[0], "high_by": high[1]}
    return out


def merged_summary(stored: dict[str, Any] | None, data: dict[str, Any]) -> dict[str, Any]:
    """A row's stored sensitivity summary with ``data``'s cases added (a stored case of the same assumption and end
    replaced, its wall time taken out of the row's), the ranges over all of them around ``data``'s nominal."""
    if not stored:
        return row_summary(data)
    fresh = row_summary(data)
    ran = {(c["assumption"], c["end"]) for c in fresh["cases"]}
    replaced_s = sum(c["wall_s"] for c in stored["cases"] if (c["assumption"], c["end"]) in ran)
    cases = [c | {"signature": case_signature(c, stored)} for c in stored["cases"]
             if (c["assumption"], c["end"]) not in ran] + fresh["cases"]
    order = list(ASSUMPTIONS)
    cases.sort(key=lambda c: (order.index(c["assumption"]) if c["assumption"] in order else len(order), c["end"]))
    # exactness from the merged cases themselves (a stored case replaced takes its status with it) and the nominal's
    return {"ranges": ranges(data["nominal"], cases),
            "exact": fresh["exact"] and all(c["status"] in STATUSES for c in cases),
            "lower_bounds": sum(c["status"] == LOWER_BOUND for c in cases),
            "proven": fresh.get("proven", fresh["exact"]) and all(c["status"] in STATUSES + (LOWER_BOUND,)
                                                                   for c in cases),
            "signature": fresh["signature"] if all(c["signature"] == fresh["signature"] for c in cases) else None,
            "elapsed_s": stored["elapsed_s"] - replaced_s + fresh["elapsed_s"], "cases": cases}


def _case_rank(case: dict[str, Any], signature: str | None) -> tuple[bool, bool]:
    """How a case stands against another of the same assumption and end: on the row's code first, then exact (or
    another exact status) over a lower bound."""
    return case.get("signature") == signature, case["status"] in STATUSES


def merge_cases(row: dict[str, Any], other: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """``row``'s stored sensitivity with ``other``'s cases merged in, and how many of its cases changed: ``other`` is the
    same table row from another ``--docs`` directory (two processes ran different assumptions of one table side by side,
    each in its own copy). Per assumption and end the better case wins (:func:`_case_rank`: the row's code, then exact
    over a lower bound); two different cases that rank the same are a conflict. The rows' answers and signatures must be
    the same (else ``ValueError``: the copies hold different searches), and the ranges, counts and signature are
    recomputed from the merged cases around the row's stored verdict."""
    label = f"{row['workload']} ({row['kind']})"
    if row["best"] != other["best"] or row.get("signature") != other.get("signature"):
        raise ValueError(f"{label}: the two copies hold different answers or searches; merge only copies of one table")
    mine, theirs = row.get("sensitivity"), other.get("sensitivity")
    if not theirs:
        return mine, 0
    if not mine:
        return theirs, len(theirs["cases"])
    signature = row.get("signature")
    cases = {(c["assumption"], c["end"]): c for c in mine["cases"]}
    changed, elapsed_s = 0, mine["elapsed_s"]
    for case in theirs["cases"]:
        key = (case["assumption"], case["end"])
        current = cases.get(key)
        if current == case:
            continue
        if current is not None and _case_rank(case, signature) == _case_rank(current, signature):
            raise ValueError(f"{label}: {key[0]} {key[1]} differs between the copies with the same standing "
                             f"({case['status']}); re-run it in one")
        if current is None or _case_rank(case, signature) > _case_rank(current, signature):
            elapsed_s += case["wall_s"] - (current["wall_s"] if current is not None else 0.0)
            cases[key] = case
            changed += 1
    order = list(ASSUMPTIONS)
    merged = sorted(cases.values(), key=lambda c: (order.index(c["assumption"]) if c["assumption"] in order
                                                    else len(order), c["end"]))
    lower = sum(c["status"] == LOWER_BOUND for c in merged)
    summary = {"ranges": ranges(stored_verdict(row), merged),
               "exact": all(c["status"] in STATUSES for c in merged),
               "lower_bounds": lower,
               "proven": all(c["status"] in STATUSES + (LOWER_BOUND,) for c in merged),
               "signature": merged[0]["signature"] if len({c.get("signature") for c in merged}) == 1 else None,
               "elapsed_s": elapsed_s, "cases": merged}
    return summary, changed


def stored_config_at(row: dict[str, Any]) -> Callable[[], SearchConfig]:
    """The search config of a stored row as a case's move builds it (``config_at`` of :func:`row_sensitivity`): at the
    row's kind's budget of its stored power, so an iso-cost budget follows the move as the case's search had it (the
    H100 cluster's cost moves with a cost or power assumption). At nominal it must be the stored budget the row's answer
    was found at, else a one-line ``ValueError``."""
    def config_at() -> SearchConfig:
        return search_config(row["workload"], budget_for(row["kind"], row["power_w"]))

    budget = config_at().space.budget
    if budget.to_dict() != row["budget"]:
        raise ValueError(f"its stored budget ({SystemBudget(**row['budget']).describe()}) is not the one the model gives "
                         f"today ({budget.describe()}): its cases' budgets cannot be rebuilt; run it in full")
    return config_at


ANSWER_AGREEMENT = 1e-9
"""How closely the answers a stored case's ratios imply over each reference must agree (the rounding of a ratio and a
product): further apart, the references' throughputs today are not the ones the case was computed with."""


def case_answer(case: dict[str, Any], references: dict[str, float | None]) -> float:
    """The answer (the searched best samples/s) of a stored case: its ``samples_s`` where the case holds it, and its
    ratio over each reference of ``references`` (each one's throughput under the case's move) times that throughput;
    every one must give the same answer, else a ``ValueError`` (the case is another model's)."""
    implied = {n: case["ratios"][n] * s for n, s in references.items() if s and n in case["ratios"]}
    implied |= {"stored": case["samples_s"]} if "samples_s" in case else {}
    name = f"{case['assumption']} {case['end']}"
    if not implied:
        raise ValueError(f"its case {name} holds no answer and no ratio over a reference: run it in full")
    if max(implied.values()) - min(implied.values()) > ANSWER_AGREEMENT * max(implied.values()):
        found = ", ".join(f"{n} {a:,.6g}" for n, a in implied.items())
        raise ValueError(f"its case {name} implies different answers (samples/s) over its references ({found}): "
                         "computed with another model of them; run it in full")
    return implied.get("stored", next(iter(implied.values())))


def rivals_from_cases(row: dict[str, Any], config_at: Callable[[], SearchConfig],
                      names: Sequence[str] = FLAGSHIPS, *, assumptions: Sequence[Assumption] | None = None,
                      say: Callable[[str], None] = print) -> dict[str, Any]:
    """A stored row's sensitivity summary with rivals ``names``' ratios added to each stored case (of ``assumptions``;
    default all) that lacks them, without running any search (``--rivals-only``): the case's answer is the one it
    stores (:func:`case_answer`); each rival under the case's move is the row's nominal figure when the move leaves its
    inputs as at nominal (:func:`rival_inputs`) and is evaluated again otherwise (:func:`rival_samples`), at
    ``config_at()``'s budget (:func:`stored_config_at`). Every reference the move changes is evaluated again too, so
    :func:`case_answer` checks the case against today's model of them: a case it refuses is kept as it is, and said (the
    table names the assumptions a flagship's range lacks: :func:`uncovered`). The ranges are taken again over every
    case."""
    started = time.perf_counter()
    nominal = stored_verdict(row)
    nominal_inputs = rival_inputs(config_at(), RIVALS)
    chosen = {a.name for a in assumptions} if assumptions else None
    cases = []
    for case in row["sensitivity"]["cases"]:
        wanted = [n for n in names if n in nominal["ratios"] and n not in case["ratios"]]  # a range is around a nominal
        if not wanted or (chosen is not None and case["assumption"] not in chosen):
            cases.append(case)
            continue
        case_started = time.perf_counter()
        with moved(case["assumption"], case["value"]):
            config = config_at()
            inputs = rival_inputs(config, RIVALS)
            moved_rivals = {n for n in RIVALS if inputs[n] != nominal_inputs[n]}
            evaluated = [n for n in REFERENCES if n in moved_rivals and n in case["ratios"]] + \
                [n for n in wanted if n in moved_rivals]
            samples = {n: nominal["references"][n] for n in REFERENCES + tuple(wanted)}
            samples |= rival_samples(config, evaluated) if evaluated else {}
        stored = {"samples_s": nominal["samples_s"]} if case["status"] in STATUSES[1:] else {}  # the nominal's, exactly
        try:
            answer = case_answer(stored | case, {n: samples[n] for n in REFERENCES})
        except ValueError as exc:  # kept as it is: the table names the flagships' ranges it is not in (uncovered)
            say(f"{ASSUMPTIONS[case['assumption']].describe(case['value'])} ({case['end']}): no flagship added: {exc}")
            cases.append(case)
            continue
        added = {n: answer / samples[n] for n in wanted if samples[n]}
        wall_s = time.perf_counter() - case_started
        cases.append(case | {"samples_s": answer, "ratios": case["ratios"] | added, "wall_s": case["wall_s"] + wall_s})
        say(f"{ASSUMPTIONS[case['assumption']].describe(case['value'])} ({case['end']}): {_ratios_text(added)} "
            f"[evaluated: {', '.join(RIVAL_LABELS[n] for n in evaluated) or 'none'}; {wall_s:.0f} s]")
    summary = row["sensitivity"]
    return {"ranges": ranges(nominal, cases), "exact": summary["exact"],
            "lower_bounds": summary.get("lower_bounds", 0), "proven": summary.get("proven", summary["exact"]),
            "signature": summary.get("signature"),
            "elapsed_s": summary["elapsed_s"] + time.perf_counter() - started, "cases": cases}


def exactness_text(summary: dict[str, Any], *, short: bool = False) -> str:
    """How a row's sensitivity was obtained, in words: "exact", "N of M cases lower bounds (…)" (cases whose answer is
    the nominal design evaluated again: :data:`LOWER_BOUND`) or "NOT PROVEN" (a case's search or the nominal's is not).
    ``short``: the README's form, "" for exact and the lower bounds without their explanation."""
    bounds = summary.get("lower_bounds", 0)
    if summary["exact"]:
        return "" if short else "exact"
    if bounds and summary.get("proven", False):
        return f"{bounds} of {len(summary['cases'])} cases lower bounds" + (
            "" if short else " (the nominal design evaluated again under the move, not searched)")
    return "NOT PROVEN"


def _spans_text(summary: dict[str, Any]) -> str:
    return ", ".join(f"{RIVAL_LABELS[n]} {r['low']:.2f}–{r['high']:.2f}× (nominal {r['nominal']:.2f}×)"
                     for n, r in summary["ranges"].items())


def _ratios_text(ratios: dict[str, float]) -> str:
    return ", ".join(f"{r:.2f}× {RIVAL_LABELS[n]}" for n, r in ratios.items())


def row_summary(data: dict[str, Any]) -> dict[str, Any]:
    """What the table row keeps: the ranges, every case's ratios and status, the wall time, and the search signature
    of the code each case was computed by (its ``signature``: the run's, :func:`~experiments.system_table.case_signature`)."""
    return {"ranges": data["ranges"], "exact": data["exact"], "lower_bounds": data.get("lower_bounds", 0),
            "proven": data.get("proven", data["exact"]), "signature": data.get("signature"),
            "elapsed_s": data["elapsed_s"],
            "cases": [{k: c[k] for k in ("assumption", "label", "unit", "end", "value", "nominal_value", "status",
                                         "samples_s", "ratios", "wall_s")} | {"signature": case_signature(c, data)}
                      for c in data["cases"]]}


def readme_ranges(rows: Sequence[dict[str, Any]]) -> str:
    """The README's sentence of how far each verdict moves: per table row with a sensitivity run, each ratio's range
    over every assumption's ends and the case that sets the H100 ratio's low end; then the rows not yet run. Generated
    from ``docs/system_table.json`` (``tests/test_readme.py`` holds the README to it)."""
    parts, missing, lows, turned, may = [], [], [], [], []
    for row in rows:
        label = f"{row['workload']} at {row['budget_label'] if row['kind'] == 'power' else 'iso-cost'}"
        summary = row.get("sensitivity")
        if not summary:
            missing.append(label)
            continue
        ranges = {n: r for n, r in summary["ranges"].items() if n in REFERENCES}  # the headline's columns
        bounded = {f"{c['assumption']} {c['end']}" for c in summary["cases"] if c["status"] == LOWER_BOUND}
        lows += [(r["low"], REFERENCE_LABELS[n], row["workload"], r["low_by"] in bounded) for n, r in ranges.items()]
        for n in ranges:
            found = turn(summary, n)
            if found:
                (turned if found == "turns" else may).append(f"{label} vs {REFERENCE_LABELS[n]}")
        text = ", ".join(f"{r['low']:.2f}–{r['high']:.2f}× {REFERENCE_LABELS[n]}" for n, r in ranges.items())
        low_by = ranges["h100"]["low_by"] if "h100" in ranges else None
        if low_by and low_by != "nominal":
            name, end = low_by.rsplit(" ", 1)
            case = next(c for c in summary["cases"] if c["assumption"] == name and c["end"] == end)
            assumption = ASSUMPTIONS[name]
            text += (f" (H100's low end: {assumption.label} {case['value']:,.6g}"
                     f"{' ' + assumption.unit if assumption.unit else ''})")
        exactness = exactness_text(summary, short=True)
        parts.append(f"{label} {text}" + (f" ({exactness})" if exactness else ""))
    sentence = "; ".join(parts) + "." if parts else "no row has a sensitivity run yet."
    if lows:
        low, reference, workload, bound = min(lows)
        found = ([f"{len(turned)} {'verdict turns' if len(turned) == 1 else 'verdicts turn'} ({', '.join(turned)})"]
                 if turned else []) + ([f"{len(may)} may turn, a lower bound below 1× not ruling it out "
                                        f"({', '.join(may)})"] if may else [])
        sentence += (f" Over these ranges {'; '.join(found) or 'no verdict turns'}: the lowest ratio is {low:.2f}×"
                     f"{' at least' if bound else ''} ({reference}, {workload}).")
    return sentence + (f" Not yet run: {', '.join(missing)}." if parts and missing else "")


def readme_flagship_ranges(rows: Sequence[dict[str, Any]]) -> str:
    """The README's sentence of how far each flagship verdict moves: per table row with a sensitivity, each flagship
    ratio's range over its cases (the cases a range lacks named: :func:`uncovered`), then the verdicts that turn over
    their range (one end below 1×, the other above) and the cases that set their low ends. Generated from
    ``docs/system_table.json`` (``tests/test_readme.py`` holds the README to it)."""
    parts, turns, may, low_ends, verdicts = [], {}, {}, {}, 0
    for row in rows:
        summary = row.get("sensitivity")
        spans = {n: r for n, r in (summary or {}).get("ranges", {}).items() if n in FLAGSHIPS}
        if not spans:
            continue
        label = f"{row['workload']} at {row['budget_label'] if row['kind'] == 'power' else 'iso-cost'}"
        lacking = sorted({m for n, missing in uncovered(summary).items() if n in spans for m in missing})
        bounds = summary.get("lower_bounds", 0)
        parts.append(f"{label} " + ", ".join(f"{r['low']:.2f}–{r['high']:.2f}× {FLAGSHIP_LABELS[n]}"
                                              for n, r in spans.items())
                     + (f" (not over {', '.join(lacking)})" if lacking else "")
                     + (f" ({bounds} of {len(summary['cases'])} cases lower bounds)" if bounds else ""))
        verdicts += len(spans)
        for name, span in spans.items():
            found = turn(summary, name)
            if found == "turns":
                turns.setdefault(label, []).append(FLAGSHIP_LABELS[name])
                low_ends[span["low_by"]] = low_ends.get(span["low_by"], 0) + 1
            elif found == "may turn":
                may.setdefault(label, []).append(FLAGSHIP_LABELS[name])
    if not parts:
        return "no row has a flagship sensitivity yet."
    maybe = "; ".join(f"{label} vs {', '.join(names)}" for label, names in may.items())
    more = (f" {sum(map(len, may.values()))} more may turn, a lower bound below 1× not ruling it out: {maybe}."
            if may else "")
    if not turns:
        return "; ".join(parts) + ". Over these ranges no flagship verdict turns." + more
    count = sum(len(names) for names in turns.values())
    turned = "; ".join(f"{label} vs {', '.join(names)}" for label, names in turns.items())
    lows = ", ".join(f"{by} ({n})" for by, n in sorted(low_ends.items(), key=lambda item: -item[1]))
    return ("; ".join(parts) + f". Over these ranges {count} of {verdicts} flagship verdicts turn (one end below 1×, "
            f"the other above): {turned}; their low ends: {lows}." + more)


def turn(summary: dict[str, Any], name: str) -> str | None:
    """Whether the verdict against rival ``name`` turns over a row's sensitivity: ``"turns"`` when a ratio that is
    exact (the nominal's or a case's not :data:`LOWER_BOUND`) is below 1× and another ratio is above (a lower bound
    above 1× is above); ``"may turn"`` when not, but a lower bound is below 1× (the moved search's answer may be
    higher: it neither shows nor rules out a turn); else None."""
    exact = [summary["ranges"][name]["nominal"]] + [c["ratios"][name] for c in summary["cases"]
                                                      if name in c["ratios"] and c.get("status") != LOWER_BOUND]
    bounds = [c["ratios"][name] for c in summary["cases"] if name in c["ratios"] and c.get("status") == LOWER_BOUND]
    if any(r < 1 for r in exact) and any(r > 1 for r in exact + bounds):
        return "turns"
    return "may turn" if any(r < 1 for r in bounds) else None


def write_figures(docs: Path, rows: Sequence[dict[str, Any]]) -> None:
    """``<docs>/figures/system_sensitivity.html`` (interactive, one tornado per row and reference) and ``.png``."""
    import plotly.offline

    figures_dir = writable_directory(docs / "figures")
    charts = [(row, tornado_figures(_chart_data(row))) for row in rows if row.get("sensitivity")]
    if not charts:
        return
    body = "\n".join(f"<h2>{row['workload']} at {row['budget_label']}</h2>\n" + "\n".join(
        f.to_html(full_html=False, include_plotlyjs=False, div_id=f"tornado-{k}-{j}") for j, f in enumerate(figs))
        for k, (row, figs) in enumerate(charts))
    write_text_atomic(figures_dir / "system_sensitivity.html",
                      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Sensitivity of the "
                      f"system table's verdicts</title>\n<script>{plotly.offline.get_plotlyjs()}</script></head><body>\n"
                      f"{body}\n</body></html>\n")
    _write_png(figures_dir / "system_sensitivity.png", [row for row, _ in charts])


def _chart_data(row: dict[str, Any]) -> dict[str, Any]:
    """A table row's sensitivity in the form the report's tornado reads (:data:`search.report.SENSITIVITY_FILE`)."""
    s = row["sensitivity"]
    return {"workload": row["workload"], "budget": row["budget_label"],
            "references": {n: RIVAL_LABELS[n] for n in s["ranges"]},
            "nominal": {"ratios": {n: r["nominal"] for n, r in s["ranges"].items()}}, "cases": s["cases"]}


def _write_png(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """The same tornados as a static image (matplotlib): one panel per row and reference."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = max(len(row["sensitivity"]["ranges"]) for row in rows)
    n_assumptions = max(len({c["assumption"] for c in row["sensitivity"]["cases"]}) for row in rows)
    fig, axes = plt.subplots(len(rows), columns, squeeze=False,
                             figsize=(8.0 * columns, 0.32 * n_assumptions * len(rows) + 1.2 * len(rows)))
    panels = [(axes[i, j], row, name) for i, row in enumerate(rows)
              for j, name in enumerate(row["sensitivity"]["ranges"])]
    used = {ax for ax, _, _ in panels}
    for ax in axes.flat:
        if ax not in used:
            ax.axis("off")  # a row with fewer rivals than the widest
    for ax, row, name in panels:
        nominal, bars = row["sensitivity"]["ranges"][name]["nominal"], tornado_bars(_chart_data(row), name)
        labels = [b["label"] for b in bars]
        bounded = any(LOWER_BOUND in b["status"] for b in bars)
        for k, b in enumerate(bars):
            hatch = "///" if LOWER_BOUND in b["status"] else None  # the nominal design re-evaluated, not searched
            for end, colour in (("low", "#4c78a8"), ("high", "#e45756")):
                if b[end] is not None:
                    ax.barh(k, b[end] - nominal, left=nominal, color=colour, height=0.7, hatch=hatch,
                            edgecolor="white" if hatch else colour)
        ax.axvline(nominal, color="black", linewidth=1)
        ax.set_yticks(range(len(bars)), labels, fontsize=7)
        ax.set_ylim(n_assumptions - 0.5, -0.5)  # top down, one slot per assumption in every panel (bars as thick)
        ax.set_title(f"{row['workload']} {row['budget_label']}: vs {RIVAL_LABELS[name]}", fontsize=9)
        ax.set_xlabel("throughput ratio (blue: range low end, red: high end"
                      + ("; hatched: a lower bound, the design re-evaluated)" if bounded else ")"), fontsize=8)
    fig.tight_layout()
    temporary = path.with_suffix(".tmp.png")
    fig.savefig(temporary, dpi=110)
    plt.close(fig)
    temporary.replace(path)


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="python -m experiments.sensitivity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", action="append", metavar="NAME", default=None,
                        help="workload (repeatable; no default: required unless --merge)")
    parser.add_argument("--kind", action="append", choices=KINDS, default=None,
                        help="iso-power (power) and/or iso-cost (cost) rows (default both)")
    parser.add_argument("--budget-mw", type=positive_float, default=None, metavar="MW",
                        help="power budget (default the table's: 1 MW, gpt3-175b 10 MW)")
    parser.add_argument("--assumption", action="append", choices=sorted(ASSUMPTIONS), default=None,
                        help="only these assumptions (repeatable; default every one)")
    parser.add_argument("--from-table", action="store_true",
                        help="take each row's nominal verdict (answer, references, flagships) from the stored table "
                             "at its stored budget instead of re-running its search, and add these cases to the row's "
                             "stored sensitivity (its other cases kept); cheap for an assumption that leaves the "
                             "search's inputs as they are (e.g. voltage_frequency_exponent); default: run each row's "
                             "search at nominal")
    parser.add_argument("--rivals-only", action="store_true",
                        help="with --from-table: add the 2024–25 flagships' ratios to each stored case that lacks "
                             "them without running any search (the case's stored answer against each flagship under "
                             "its move: the nominal where the move leaves the flagship's inputs as they are, else "
                             "evaluated again); the stored cases are kept; default: run the assumptions' cases")
    parser.add_argument("--reevaluate", action="store_true",
                        help="where a move changes the search's inputs, evaluate the nominal answer's design again "
                             "under it instead of searching again (status 'lower bound': the design is in the moved "
                             "space, so each ratio is a lower bound on the moved verdict's); for a row whose search "
                             "takes too long to run once per case (gpt3-175b: ~30 min cold); default: search again")
    parser.add_argument("--workers", type=positive_int, default=2, metavar="N", help="search worker processes (default 2)")
    parser.add_argument("--out", type=Path, default=Path("out/system_table"),
                        help="search outputs, the table's (default out/system_table)")
    parser.add_argument("--docs", type=Path, default=Path("docs"),
                        help="where system_table.json/.md and figures/system_sensitivity.* are updated (default docs)")
    parser.add_argument("--merge", action="append", type=Path, default=None, metavar="DIR",
                        help="merge the sensitivity cases of DIR/system_table.json (another --docs copy of the same "
                             "table, e.g. of a run beside this one) into --docs, per assumption and end the case on the "
                             "row's code and exact over a lower bound (repeatable; default: none); runs no search")
    return parser


def readable_table(directory: Path) -> Path:
    """``directory`` if it holds a ``system_table.json`` (else one-line ``ValueError``)."""
    if not (directory / "system_table.json").is_file():
        raise ValueError(f"{directory} holds no system_table.json to merge")
    return directory


def merge_docs(docs: Path, others: Sequence[Path], say: Callable[[str], None] = print) -> int:
    """:func:`merge_cases` of every row of each of ``others``' ``system_table.json`` into ``docs``' (the docs and figures
    rewritten); the number of cases changed. A row of another copy that ``docs`` lacks is a ``ValueError``."""
    rows = {row_key(r): r for r in load_rows(docs / "system_table.json")}
    changed = 0
    for other in others:
        for row in load_rows(other / "system_table.json"):
            key = row_key(row)
            if key not in rows:
                raise ValueError(f"{other}: row {key[0]} ({key[1]}) is not in {docs / 'system_table.json'}")
            summary, count = merge_cases(rows[key], row)
            if count:
                rows[key]["sensitivity"] = summary
                say(f"{key[0]} ({key[1]}): {count} case{'s' if count != 1 else ''} from {other}")
                changed += count
    if changed:
        write_docs(docs, list(rows.values()))
        write_figures(docs, list(rows.values()))
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.merge:
        if args.workload or args.from_table or args.rivals_only or args.reevaluate or args.assumption:
            parser.exit(2, f"{parser.prog}: error: --merge runs no search: give it only --docs and the copies\n")
        try:
            changed = merge_docs(writable_directory(args.docs), [readable_table(d) for d in args.merge])
        except (ValueError, OSError) as exc:
            parser.exit(2, f"{parser.prog}: error: {exc}\n")
        print(f"{changed} case{'s' if changed != 1 else ''} merged into {args.docs / 'system_table.json'}")
        return 0
    if not args.workload:
        parser.exit(2, f"{parser.prog}: error: the following arguments are required: --workload\n")
    try:
        workloads = [get_workload(w).name for w in args.workload]
        docs, out = writable_directory(args.docs), writable_directory(args.out)
    except ValueError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    assumptions = [ASSUMPTIONS[name] for name in args.assumption] if args.assumption else None
    rows = {row_key(r): r for r in load_rows(docs / "system_table.json")}
    if args.rivals_only and not args.from_table:
        parser.exit(2, f"{parser.prog}: error: --rivals-only adds to a stored row's cases: it needs --from-table\n")
    if args.rivals_only and args.reevaluate:
        parser.exit(2, f"{parser.prog}: error: --rivals-only runs no case's search to replace: --reevaluate does not "
                       "apply\n")
    if args.from_table:
        try:
            if args.budget_mw is not None:
                raise ValueError("--from-table runs each stored row at its own budget; --budget-mw does not apply")
            chosen = select_rows(list(rows.values()), workloads, args.kind)
            bare = [f"{r['workload']} ({r['kind']})" for r in chosen if not r.get("sensitivity")]
            if bare and (assumptions or args.rivals_only):  # only some assumptions' cases would read as the whole range
                raise ValueError(f"no stored sensitivity to add to for {', '.join(bare)}: run it in full (without "
                                 "--from-table)")
            configs = {row_key(row): stored_config_at(row) for row in chosen}
        except ValueError as exc:
            parser.exit(2, f"{parser.prog}: error: {exc}\n")
        cells = [(row["workload"], row["kind"], row["power_w"], row) for row in chosen]
    else:
        cells = [(w, k, power_budget_w(w, args.budget_mw), None) for w in workloads for k in args.kind or KINDS]
        try:  # every row's budget and space up front: one that buys nothing or too much is refused before any search
            for workload, kind, power_w, _ in cells:
                search_config(workload, budget_for(kind, power_w))
        except ValueError as exc:
            parser.exit(2, f"{parser.prog}: error: {exc}\n")
    for workload, kind, power_w, stored in cells:
        earlier = stored is not None and stored.get("signature") != stored_row_config(stored).signature
        print(f"{workload} ({kind}):" + (" its stored answer is an earlier model's (its search signature differs); "
                                         "its flagship columns should be today's (--rescore-flagships)" if earlier
                                         else ""), flush=True)
        config_at = (lambda: search_config(workload, budget_for(kind, power_w))) if stored is None else \
            configs[(workload, kind)]
        if args.rivals_only:
            try:
                summary = rivals_from_cases(stored, config_at, assumptions=assumptions,
                                            say=lambda text: print(f"  {text}", flush=True))
            except ValueError as exc:
                parser.exit(1, f"{parser.prog}: error: {workload} ({kind}): {exc}\n")
            print(f"  range over the row's assumptions: {_spans_text(summary)}; {exactness_text(summary)}", flush=True)
            rows[(workload, kind)]["sensitivity"] = summary
            write_docs(docs, list(rows.values()))
            continue
        # a run from the table writes its own file beside the row's search outputs (a full run's report is kept)
        directory = out / workload / kind / ("from-table" if stored is not None else "")
        try:
            data = row_sensitivity(config_at, kind, workers=args.workers, directory=directory,
                                   assumptions=assumptions, say=lambda text: print(f"  {text}", flush=True),
                                   nominal=None if stored is None else stored_verdict(stored),
                                   reevaluate=args.reevaluate)
            if stored is None:
                rebuild(directory)
        except ValueError as exc:
            parser.exit(1, f"{parser.prog}: error: {workload} ({kind}): {exc}\n")
        row = rows.get((workload, kind))
        kept = row is not None and math.isclose(row["power_w"], power_w)
        summary = merged_summary(row.get("sensitivity"), data) if stored is not None else row_summary(data)
        print(f"  range over the {'row' if stored is not None else 'run'}'s assumptions: {_spans_text(summary)}; "
              f"{exactness_text(summary)}; {data['elapsed_s']:.0f} s", flush=True)
        if kept:
            row["sensitivity"] = summary
            write_docs(docs, list(rows.values()))
    write_figures(docs, list(rows.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
