"""``report.html``: a search's answer as one self-contained interactive page (Plotly, its script embedded, no
network), written next to ``results.json``.

Per workload: every evaluated feasible design in the plane of two objectives — a Pareto search's own (a third
colours the points), else throughput against area — with the front highlighted (a Pareto search's exact front
over all its objectives, else the throughput–area front of the evaluated designs) and the baseline marked,
each point's hover naming its design, plan, figures and proof; and the time per batch of the answer and of the
baseline, part by part. The header says what was searched, on which
cluster, whether the answer is proven, and the search's counts.

A system-space search whose verdict's sensitivity was computed (``OUT/sensitivity.json``, written by
``python -m experiments.sensitivity``) also gets a tornado chart per reference system: how the throughput ratio of
the answer over that reference moves when each assumption is at the low or the high end of its range
(:func:`sensitivity_section`).

``python -m search.report OUT`` writes ``OUT/report.html`` again from ``OUT/results.json`` and ``OUT/results.db``.
"""

from __future__ import annotations

import dataclasses
import html
import json
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from phaze_env.cli import OneLineParser
from phaze_env.cluster import Cluster
from phaze_env.design import DesignSpace, SystemDesignSpace
from phaze_env.evaluate import BREAKDOWN_LABELS, Evaluation
from phaze_env.files import write_text_atomic
from phaze_env.hardware import Accelerator, get_preset, preset_names
from phaze_env.hardware.accelerator import NOTATION_LEGEND
from phaze_env.hardware.system import SystemPoint
from search.config import SearchConfig
from search.objectives import (AREA, LABELS, MINIMISED, UNITS, area_label, evaluated_figures, figure_text,
                               label as label_of, non_dominated, objective_value, plotted_area, short_label)
from search.result import DesignResult, SearchResult, system_line
from search.store import DesignRecord, ResultsStore

HOVER = ("%{customdata[0]}<br>plan %{customdata[1]}<br>%{customdata[3]}<br>"
         "schedules %{customdata[2]}<extra>%{fullData.name}</extra>")
PLOT_CONFIG = {"displaylogo": False, "responsive": True}
STYLE = ("body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1300px;color:#222}"
         "h1{font-size:1.4em}h2{font-size:1.15em;border-top:1px solid #ccc;padding-top:.8em}"
         ".proven{color:#17692f}.unproven{color:#b00020;font-weight:600}"
         "pre{white-space:pre-wrap;background:#f6f6f6;padding:.6em}table{border-collapse:collapse;font-size:.9em}"
         "td,th{padding:.2em .7em;border-bottom:1px solid #ddd;text-align:left}.legend{color:#666;font-size:.85em}")


def baseline_label(baseline: DesignResult) -> str:
    """What the baseline really is: the preset evaluated (matched on every field but HBM, which the search
    picks from the space's capacities) and its HBM capacity, e.g. ``baseline (tpuv4 preset, 32 GiB)``; an
    infeasible baseline has no chosen capacity."""
    acc = baseline.accelerator
    if baseline.system is not None:  # the system space's reference: the TPUv4 chip in its own torus at the budget
        return f"baseline (TPUv4 chip, {baseline.system['n_devices']:,} in a torus, {acc['hbm_gb']:g} GiB)"
    name = next((n for n in preset_names() if {**get_preset(n).to_dict(), "hbm_gb": acc["hbm_gb"]} == acc), None)
    what = f"{name} preset" if name else "custom accelerator"
    return f"baseline ({what}, {acc['hbm_gb']:g} GiB)" if baseline.feasible else f"baseline ({what})"


def write_report(path: Path, result: SearchResult, records: dict[tuple[str, int], DesignRecord],
                 config: SearchConfig) -> None:
    """Write :func:`report_html` to ``path`` atomically."""
    points = config.arch.points if config.is_system else None
    write_text_atomic(path, report_html(result, records, config.cluster, Path(path).parent, points))


def report_html(result: SearchResult, records: dict[tuple[str, int], DesignRecord], cluster: Cluster,
                out: Path, points: Sequence[SystemPoint] | None = None) -> str:
    """The whole page (for the search whose outputs are in ``out``): header, then per workload the front chart
    (:func:`chart_axes`) and the time-breakdown bars. ``points``: the system space's rows' chips at the budget
    (``SystemArchSpace.points``), which give the evaluated designs' power, cost and carbon figures."""
    import plotly.offline

    sections = []
    for number, name in enumerate(result.workloads):
        answer, answer_label = _answer(result, name)
        baseline = result.baseline.get(name)
        figures = [_front_chart(name, result, records, answer, answer_label, baseline, points)]
        if answer is not None and answer.feasible:
            figures.append(_time_breakdown(name, answer, answer_label, baseline))
        plots = "\n".join(f.to_html(full_html=False, include_plotlyjs=False, config=PLOT_CONFIG,
                                     div_id=f"chart-{number}-{k}")  # not random: the same search, the same page
                           for k, f in enumerate(figures))
        objective = "throughput" if result.mode == "pareto" else result.objective  # a front has no one objective
        table = _answer_table(answer, answer_label, baseline, objective)
        sections.append(f"<section><h2>{_e(name)}</h2>\n{table}\n{plots}"
                        "</section>")
    sections.append(sensitivity_section(out))
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f"<title>phaze search: {_e(', '.join(result.workloads))}</title>\n<style>{STYLE}</style>\n"
            f"<script>{plotly.offline.get_plotlyjs()}</script>\n</head><body>\n{_header(result, cluster, out)}\n"
            + "\n".join(sections) + f"\n<p class=\"legend\">{_e(NOTATION_LEGEND)}</p>\n</body></html>\n")


def _e(text: Any) -> str:
    return html.escape(str(text))


def _answer(result: SearchResult, name: str) -> tuple[DesignResult | None, str]:
    """The design the page compares with the baseline: the best design, the shared design's result on this
    workload, or (Pareto mode) the fastest design on the front."""
    if result.shared is not None:
        return result.shared.per_workload.get(name), "shared design"
    if result.mode == "pareto":
        front = result.pareto.get(name, ())
        return max(front, key=lambda d: d.throughput_samples_s, default=None), "fastest on the front"
    return result.best.get(name), "best design"


def _header(result: SearchResult, cluster: Cluster, out: Path) -> str:
    knobs = "; ".join(f"{knob} {', '.join(f'{v:g}' if isinstance(v, float) else str(v) for v in values)}"
                      for knob, values in result.space.items() if isinstance(values, list) and knob != "knobs")
    status = ('<p class="proven">exact: proven</p>' if result.exact
              else '<p class="unproven">exact: NOT PROVEN (see below)</p>')
    lines = result.exactness_lines()
    details = f"<pre>{_e(chr(10).join(lines))}</pre>" if lines else ""
    shared = (f"<p>one design for every workload, best {_e(result.shared.how)} throughput "
              f"{result.shared.throughput_samples_s:,.1f} samples/s</p>" if result.shared is not None else "")
    # the shared design is searched once per HBM capacity
    unit = "(workload, architecture, HBM capacity)" if result.shared is not None else "(workload, architecture)"
    counts = {
        "architectures in the area window": f"{result.architectures:,} ({result.designs:,} designs with the "
                                            "microbatch, recompute and HBM knobs)",
        "never evaluated": f"{result.pruning_ratio:.2%} of the architectures",
        f"evaluations, one per {unit}": f"{result.evaluations:,} ({result.evaluations_this_run:,} this run, "
                                           f"{result.resumed_records:,} records resumed from results.db)",
        "pruned by the ILP-free placement bound": f"{result.pruned_by_placement_bound:,}",
        "ILP solves": f"{result.ilp_solves:,}", "elapsed": f"{result.elapsed_s:.1f} s", "outputs": f"{out}/"}
    rows = "".join(f"<tr><th>{_e(key)}</th><td>{_e(value)}</td></tr>" for key, value in counts.items())
    if "budget_mm2" in result.space:
        system = f"<p><b>cluster</b> {_e(cluster.describe())}; global batch {cluster.setup.global_batch:,}</p>\n"
        window = f"area budget {result.space['budget_mm2']:.1f} mm²"
    else:  # the system space: each design on the cluster its budget buys
        budget = result.space["budget"]
        spend = (f"{budget['power_w'] / 1e6:g} MW at the wall" if budget["power_w"] is not None
                 else f"${budget['cost_usd']:,.0f}")
        system = (f"<p><b>cluster</b> each design's own, the chips {_e(spend)} buys; global batch "
                  f"{cluster.setup.global_batch:,}</p>\n")
        window = "area window: the compute block within die − HBM PHYs − SerDes − IO"
    system_space = "budget_mm2" not in result.space
    names = result.objectives if result.mode == "pareto" else (result.objective,)
    goal = "; ".join(label_of(name, system_space) for name in names)
    return (f"<h1>phaze exact search ({_e(result.mode)} mode): {_e(', '.join(result.workloads))}</h1>\n"
            f"<p><b>objective{'s' if len(names) > 1 else ''}</b> {_e(goal)}</p>\n"
            f"{system}<p><b>space</b> {_e(knobs)}; {_e(window)}</p>\n"
            f"{status}{details}\n{shared}<table>{rows}</table>")


def _answer_table(answer: DesignResult | None, answer_label: str, baseline: DesignResult | None,
                  objective: str = "throughput") -> str:
    """The answer against the baseline; an objective other than throughput is the first figure, in its unit (as
    the console's table and results.json give it)."""
    columns = [(answer_label, answer)] + ([(baseline_label(baseline), baseline)] if baseline is not None else [])
    own = objective != "throughput"

    def cells(d: DesignResult | None) -> list[str]:
        blank = [""] * (5 + own)
        if d is None:
            return ["none found", *blank]
        design = Accelerator.from_dict(d.accelerator).notation()
        if not d.feasible:
            return [design, f"infeasible: {d.reason}", *blank[1:]]
        figures = [figure_text(objective, objective_value(d, objective))] if own else []
        return [design, d.plan.notation, *figures, f"{d.throughput_samples_s:,.1f}", d.mfu_text,
                f"{plotted_area(d):.1f}", "proven" if d.proven else f"NOT PROVEN (worst gap {d.worst_gap:.2%})"]

    rows = "".join(f"<tr><th>{_e(label)}</th>" + "".join(f"<td>{_e(c)}</td>" for c in cells(d)) + "</tr>"
                   for label, d in columns)
    area = area_label(any(d is not None and d.system is not None for _, d in columns))
    heading = f"<th>{_e(objective)}</th>" if own else ""
    return (f"<table><tr><th></th><th>design</th><th>plan</th>{heading}<th>samples/s</th><th>MFU</th>"
            f"<th>{_e(area)}</th><th>schedules</th></tr>{rows}</table>")


def _hover(design: Evaluation | DesignResult, point: SystemPoint | None = None) -> list[str]:
    """What a point's hover shows beyond its coordinates: design (with a system-space design's die, HBM, links,
    topology and chips: :func:`~search.result.system_line`), plan and proof (of a recorded evaluation with its row's
    ``point``, or a result's design)."""
    system = design.system if isinstance(design, DesignResult) else None if point is None else point.summary()
    text = Accelerator.from_dict(design.accelerator).notation() + ("" if system is None else f"<br>{system_line(system)}")
    return [text, design.plan.notation, "proven" if design.proven else "NOT PROVEN"]


def front_indices(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the ``(area, throughput)`` points (throughput > 0) no other point beats on both area (lower)
    and throughput (higher), by area: :func:`search.objectives.non_dominated` over ``(−area, throughput)``
    (at equal area only the faster design; of identical points the first)."""
    feasible = [i for i, (_, throughput) in enumerate(points) if throughput > 0]
    scores = np.array([(-points[i][0], points[i][1]) for i in feasible], dtype=np.float64).reshape(-1, 2)
    return sorted((feasible[k] for k in non_dominated(scores)), key=lambda i: (points[i][0], -points[i][1]))


def chart_axes(result: SearchResult) -> tuple[str, str, str | None]:
    """The front chart's x, y and colour objectives: a Pareto result's own (area on x when it is one of them,
    else the second on x and the first on y; a third objective colours the points), else throughput against
    area."""
    objectives = result.objectives if result.mode == "pareto" else ("throughput", AREA)
    if AREA in objectives:
        others = [name for name in objectives if name != AREA]
        return AREA, others[0], others[1] if len(others) > 1 else None
    return objectives[1], objectives[0], objectives[2] if len(objectives) > 2 else None


def _figures_text(values: dict[str, float], system: bool = False) -> str:
    return " · ".join(f"{short_label(name, system)} {value:,.4g} {UNITS[name]}" for name, value in values.items())


def _front_chart(name: str, result: SearchResult, records: dict[tuple[str, int], DesignRecord],
                 answer: DesignResult | None, answer_label: str, baseline: DesignResult | None,
                 points: Sequence[SystemPoint] | None):
    """Every evaluated feasible design in the plane of two objectives (:func:`chart_axes`), the front highlighted:
    a Pareto result's exact front over all its objectives, else the throughput–area front of the evaluated designs."""
    import plotly.graph_objects as go

    x, y, colour = chart_axes(result)
    shown = result.objectives if result.mode == "pareto" else ("throughput", AREA)
    if points is None and any(n not in ("throughput", AREA) for n in shown):
        raise ValueError(f"the {', '.join(shown)} figures of evaluated designs need the system space's points")
    feasible = [(i, r) for (w, i), r in sorted(records.items()) if w == name and r.feasible]
    values = [evaluated_figures(r.throughput_samples_s, r.evaluation.tokens_s, r.area_mm2,
                                None if points is None else points[i]) for i, r in feasible]
    system = points is not None
    hover = [_hover(r.evaluation, None if points is None else points[i]) + [_figures_text({n: v[n] for n in shown},
                                                                                               system)]
             for (i, r), v in zip(feasible, values)]
    marker = {"size": 6, "opacity": 0.45, "color": "#4c78a8"}
    if colour is not None and values:
        marker |= {"color": [v[colour] for v in values], "colorscale": "Viridis", "showscale": True,
                   "colorbar": {"title": {"text": f"{LABELS[colour]} ({UNITS[colour]})", "side": "right"}}}
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[v[x] for v in values], y=[v[y] for v in values], mode="markers",
                             name=f"evaluated ({len(values)})", marker=marker, customdata=hover, hovertemplate=HOVER))
    if result.mode == "pareto":  # the exact front the search proved
        front = sorted(result.pareto.get(name, ()), key=lambda d: objective_value(d, x))
        front_values = [result.objective_values(d) for d in front]
        front_hover = [_hover(d) + [_figures_text(v, system)] for d, v in zip(front, front_values)]
        label = f"Pareto front, exact ({len(front)})"
    else:
        indices = front_indices([(v[AREA], v["throughput"]) for v in values])
        front_values = [{n: values[i][n] for n in shown} for i in indices]
        front_hover = [hover[i] for i in indices]
        label = f"front of the evaluated designs ({len(indices)})"
    staircase = len(shown) == 2  # a two-objective front is a staircase; with more, its points need not be
    fig.add_trace(go.Scatter(x=[v[x] for v in front_values], y=[v[y] for v in front_values],
                             mode="lines+markers" if staircase else "markers", name=label, customdata=front_hover,
                             line={"shape": "hv" if x in MINIMISED else "vh",  # the edge of what the front dominates
                                   "color": "#e45756"},
                             marker={"size": 10, "color": "#e45756", "line": {"width": 1, "color": "black"}},
                             hovertemplate=HOVER))
    for design, label_, style in ((answer, answer_label, {"size": 16, "symbol": "diamond", "color": "#f58518",
                                                           "line": {"width": 1, "color": "black"}}),
                                  (baseline, baseline_label(baseline) if baseline is not None else "",
                                   {"size": 18, "symbol": "star", "color": "black"})):
        if design is None or not design.feasible or (design.system is None and points is not None):
            continue
        figures = {n: objective_value(design, n) for n in shown}
        fig.add_trace(go.Scatter(x=[figures[x]], y=[figures[y]], mode="markers", name=label_, marker=style,
                                 customdata=[_hover(design) + [_figures_text(figures, system)]], hovertemplate=HOVER))
    if x == AREA and "budget_mm2" in result.space:  # PHAZE's spaces: one area budget (the system space's follows each die)
        budget = result.space["budget_mm2"]
        fig.add_vline(x=budget, line={"dash": "dot", "color": "grey", "width": 1},
                      annotation_text=f"area budget {budget:.1f} mm²", annotation_position="bottom left")
    fig.update_layout(title=f"{name}: {short_label(y, system)} vs {short_label(x, system)}",
                      xaxis_title=label_of(x, system), yaxis_title=label_of(y, system),
                      template="plotly_white", height=520, legend={"orientation": "h", "y": -0.2})
    return fig


def _time_breakdown(name: str, answer: DesignResult, answer_label: str, baseline: DesignResult | None):
    """Stacked bars: seconds per batch in each part (:data:`~phaze_env.evaluate.BREAKDOWN_LABELS`)."""
    import plotly.graph_objects as go

    bars = [(answer_label, answer)] + ([(baseline_label(baseline), baseline)]
                                       if baseline is not None and baseline.feasible else [])
    fig = go.Figure()
    for part, label in BREAKDOWN_LABELS.items():
        seconds = [d.plan.time_breakdown_s[part] for _, d in bars]
        fig.add_trace(go.Bar(y=[b for b, _ in bars], x=seconds, name=label, orientation="h",
                             customdata=[d.time_shares[part] for _, d in bars],
                             hovertemplate=f"{label}: %{{x:.4g}} s (%{{customdata:.1%}} of the batch)<extra></extra>"))
    fig.update_layout(barmode="stack", title=f"{name}: time per batch, part by part", xaxis_title="seconds per batch",
                      template="plotly_white", height=170 + 70 * len(bars), yaxis={"autorange": "reversed"},
                      legend={"orientation": "h", "y": -0.35, "traceorder": "normal"})
    return fig


# --------------------------------------------------------------------------------------------- sensitivity

SENSITIVITY_FILE = "sensitivity.json"
"""The verdict's sensitivity next to a search's outputs: ``{"workload", "budget", "references": {name: label},
"nominal": {"ratios": {name: ratio}}, "cases": [{"assumption", "label", "unit", "end": "low"|"high", "value",
"nominal_value", "status", "ratios": {name: ratio}}, …]}`` (``experiments.sensitivity`` writes it)."""


def sensitivity_section(out: Path) -> str:
    """The tornado charts of ``out/sensitivity.json`` with a line on how its figures were obtained ("" when there is
    none; a file that cannot be read says so on the page instead of failing the report)."""
    path = Path(out) / SENSITIVITY_FILE
    if not path.is_file():
        return ""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        figures = tornado_figures(data)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"<section><h2>Sensitivity</h2><p class=\"unproven\">cannot read {_e(path)}: {_e(exc)}</p></section>"
    statuses = sorted({c["status"] for c in data["cases"]})
    note = (f"{len(data['cases'])} cases ({', '.join(statuses)}): each assumption at the low and the high end of its "
            "range, the search re-run exactly (or, where the move leaves every input of the search unchanged, the "
            "nominal answer, against the rivals the move changes evaluated again)")
    plots = "\n".join(f.to_html(full_html=False, include_plotlyjs=False, config=PLOT_CONFIG, div_id=f"tornado-{k}")
                      for k, f in enumerate(figures))
    return (f"<section><h2>Sensitivity of the verdict: {_e(data['workload'])} at {_e(data['budget'])}</h2>\n"
            f"<p>{_e(note)}</p>\n{plots}</section>")


def tornado_bars(data: dict[str, Any], reference: str) -> list[dict[str, Any]]:
    """Per assumption of ``data`` (:data:`SENSITIVITY_FILE`'s form) with a case that has a ratio vs ``reference`` (a
    case run before that rival was set against has none: no bar, rather than one saying it did not move): its label
    with its range, and the ratio vs ``reference`` at the low and at the high end of the range (None where that end is
    the nominal value), the widest swing first."""
    nominal = data["nominal"]["ratios"][reference]
    bars: dict[str, dict[str, Any]] = {}
    covered = {case["assumption"] for case in data["cases"] if reference in case["ratios"]}
    for case in (case for case in data["cases"] if case["assumption"] in covered):
        bar = bars.setdefault(case["assumption"], {"assumption": case["assumption"], "low": None, "high": None,
                                                   "values": {}, "status": set()})
        bar[case["end"]] = case["ratios"].get(reference)
        bar["values"][case["end"]] = case["value"]
        bar["status"].add(case["status"])
        unit = f" {case['unit']}" if case["unit"] else ""
        bar["label"] = case["label"]
        bar["range"] = f"{_number(case['nominal_value'])}{unit}"
    for bar in bars.values():
        ends = "–".join(_number(bar["values"][e]) for e in ("low", "high") if e in bar["values"])
        bar["label"] = f"{bar['label']} ({bar['range']}; {ends})"
        bar["status"] = ", ".join(sorted(bar["status"]))
    swing = lambda b: max(abs((b[e] if b[e] is not None else nominal) - nominal) for e in ("low", "high"))  # noqa: E731
    return sorted(bars.values(), key=lambda b: -swing(b))


def _number(value: float) -> str:
    """An assumption's value as a label shows it: thousands separated, four significant figures below 1,000."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def tornado_figures(data: dict[str, Any]) -> list:
    """One tornado chart per reference of ``data``: a bar per assumption from the nominal ratio to the ratio at the
    low (blue) and at the high (red) end of its range, the widest first."""
    import plotly.graph_objects as go

    figures = []
    for reference, label in data["references"].items():
        if reference not in data["nominal"]["ratios"]:
            continue
        nominal, bars = data["nominal"]["ratios"][reference], tornado_bars(data, reference)
        fig = go.Figure()
        for end, colour in (("low", "#4c78a8"), ("high", "#e45756")):
            shown = [b for b in bars if b[end] is not None]
            fig.add_trace(go.Bar(y=[b["label"] for b in shown], x=[b[end] - nominal for b in shown], base=nominal,
                                 orientation="h", name=f"{end} end of the range", marker={"color": colour},
                                 customdata=[[b[end], b["status"]] for b in shown],
                                 hovertemplate="%{y}<br>ratio %{customdata[0]:.3f}× (%{customdata[1]})<extra></extra>"))
        fig.add_vline(x=nominal, line={"color": "black", "width": 1},
                      annotation_text=f"nominal {nominal:.2f}×", annotation_position="top")
        fig.update_layout(title=f"{data['workload']} at {data['budget']}: throughput ratio vs {label}, each assumption "
                                "over its range", barmode="overlay", template="plotly_white",
                          xaxis_title=f"best system's throughput / {label}'s", yaxis={"autorange": "reversed"},
                          height=140 + 28 * len(bars), legend={"orientation": "h", "y": -0.15})
        figures.append(fig)
    return figures


# --------------------------------------------------------------------------------------------- rebuild

def rebuild(out: Path) -> Path:
    """Write ``out/report.html`` again from the search's ``results.json`` and its records in ``results.db``
    (the search whose stored arguments match the result); ``ValueError`` (one line) when they cannot be read."""
    out = Path(out)
    try:
        result = SearchResult.from_json((out / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"cannot read {out / 'results.json'}: {exc}") from exc
    db = out / "results.db"
    if not db.is_file():
        raise ValueError(f"{db} not found: the report needs the search's records")
    try:
        with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as connection:
            searches = connection.execute("SELECT signature, arguments FROM searches").fetchall()
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"results store {db} is not a usable SQLite database: {exc}") from exc
    stored = [(signature, json.loads(arguments)) for signature, arguments in searches]
    matching = [(signature, arguments) for signature, arguments in stored if _is_search_of(arguments, result)]
    if len(matching) != 1:
        raise ValueError(f"{db} holds {len(matching)} searches matching {out / 'results.json'} (need exactly one); "
                         "run the search again to write its report")
    ((signature, arguments),) = matching
    store = ResultsStore(db, signature, arguments)
    try:
        records = store.load()
    finally:
        store.close()
    space = DesignSpace.from_dict(result.space)
    points = space.arch_space().points if isinstance(space, SystemDesignSpace) else None
    path = out / "report.html"
    write_text_atomic(path, report_html(result, records, Cluster.from_dict(arguments["cluster"]), out, points))
    return path


def _is_search_of(arguments: dict[str, Any], result: SearchResult) -> bool:
    """Whether stored search arguments (SearchConfig.arguments) are those of the search that gave ``result``."""
    # SearchResult stores the cluster the way results.json can hold it (an absent level's infinite bandwidth is null)
    cluster = dataclasses.replace(result, cluster=arguments["cluster"]).cluster
    return ([w["name"] for w in arguments["workloads"]] == list(result.workloads) and arguments["space"] == result.space
            and cluster == result.cluster and arguments["pareto"] == (result.mode == "pareto")
            and (result.mode != "pareto" or tuple(arguments.get("objectives", ("throughput", AREA))) == result.objectives))


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="python -m search.report",
                           description="Write a search's report.html again from its output directory.")
    parser.add_argument("out", type=Path, help="the search's --out directory (results.json, results.db)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        print(rebuild(args.out))
    except ValueError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
