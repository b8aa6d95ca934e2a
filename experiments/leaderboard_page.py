"""The task leaderboard as a self-contained HTML page and as Markdown, both from one board (``tasks.json``).

:func:`page_html` embeds plotly.js (nothing fetched: the page opens offline) and shows the aggregate (mean
normalised score with its interval, mean rank, cost per run), the probability-of-improvement matrix, the
generalisation table, and per task the convergence curves (mean over seeds, 95 % bootstrap band) and the table.
:func:`markdown` writes the same figures for ``docs/leaderboard.md``; :func:`readme_table` the aggregate the
README and the results guide carry between their ``<!-- task-leaderboard -->`` markers (:func:`replace_marked`).
"""

from __future__ import annotations

import html
import re
from typing import Any

MARK_START = "<!-- task-leaderboard:start -->"
MARK_END = "<!-- task-leaderboard:end -->"
STYLE = ("body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
         "table{border-collapse:collapse;margin:1em 0;font-size:14px}td,th{border:1px solid #ccc;padding:3px 8px;"
         "text-align:right}td:first-child,th:first-child{text-align:left}h2{margin-top:2em}.note{color:#555}")
PLOT_CONFIG = {"displaylogo": False, "responsive": True}


def _e(text: Any) -> str:
    return html.escape(str(text))


def _ci(entry: dict[str, Any]) -> str:
    return f"{entry['mean']:.3f} [{entry['ci'][0]:.3f}, {entry['ci'][1]:.3f}]"


def _meta_sentence(board: dict[str, Any]) -> str:
    meta = board["meta"]
    return (f"{len(meta['tasks'])} tasks × {len(meta['strategies'])} strategies × {meta['seeds']} seeds × "
            f"{meta['budget']} evaluations; wall time {meta['elapsed_s'] / 60:.1f} min with {meta['jobs']} "
            f"process(es) on a {meta['cores']}-core machine shared with other work. Command: `{board['command']}`. "
            f"{_bounded_sentence(board)}")


def _bounded_sentence(board: dict[str, Any]) -> str:
    """The cross-check of the exact search on every task: no run scored above its task's certified optimum or front
    (:func:`experiments.task_board.check_bounded` refuses to write a board where one did)."""
    entries = board["per_task"]
    runs = sum(len(e["scores"]) for e in entries)
    highest = max(e["max"] for e in entries)
    reached = sum(1 for e in entries if e["max"] >= 1 - 1e-9)
    return (f"No run exceeds its task's certified optimum or exact front: the highest normalised score of the {runs:,} "
            f"runs is {highest:.6f}, and {reached} (task, strategy) pairs reach it in at least one seed.")


def aggregate_rows(board: dict[str, Any]) -> list[list[str]]:
    """The aggregate table's rows: strategy, mean normalised score [95 % interval], mean rank, mean wall time per
    run (the cost; Optuna's GP and the Spotlight GPs included)."""
    walls: dict[str, list[float]] = {}
    for entry in board["per_task"]:
        walls.setdefault(entry["strategy"], []).append(entry["wall_s"])
    return [[r["strategy"], _ci(r), f"{r['mean_rank']:.1f}", f"{sum(walls[r['strategy']]) / len(walls[r['strategy']]):.1f}"]
            for r in board["aggregate"]["strategies"]]


AGGREGATE_HEADER = ["strategy", "mean normalised score [95 % CI]", "mean rank", "wall s / run"]


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def generalisation_rows(result: dict[str, Any]) -> list[list[str]]:
    rows = []
    for entry in result["rows"]:
        rows.append([entry["agent"], entry["task"], *(_ci(entry[mode]) for mode in ("zero_shot", "fine_tuned", "scratch"))])
    return rows


GENERALISATION_HEADER = ["agent", "held-out task", "zero-shot", "fine-tuned", "from scratch"]


def generalisation_sentence(result: dict[str, Any]) -> str:
    return (f"Trained on {', '.join(result['train_tasks'])} ({result['train_evaluations']} evaluations each agent); "
            f"scored on held-out workloads after {result['budget']} evaluations, {result['seeds']} seeds: zero-shot (the "
            "trained policy sampled, no updates), fine-tuned (the trained policy keeps learning) and from scratch. "
            f"Command: `{result['command']}`; {result['elapsed_s'] / 60:.1f} min.")


def readme_table(board: dict[str, Any]) -> str:
    """The aggregate table and the separation sentences (README and results guide)."""
    lines = [f"Mean over tasks of the normalised score (best found / certified optimum; hypervolume ratio against the "
             f"exact front on the two-objective tasks), 95 % stratified-bootstrap interval. {_meta_sentence(board)} "
             "Every task, curve and table: [docs/leaderboard.md](docs/leaderboard.md) and the page "
             "[docs/leaderboard/board.html](docs/leaderboard/board.html).", ""]
    lines += _md_table(AGGREGATE_HEADER, aggregate_rows(board))
    lines += ["", "Neighbours in the ranking, separated or not (intervals apart, or a probability of improvement whose "
              "interval excludes ½):", ""] + [f"* {line}" for line in board["separation"]]
    return "\n".join(lines)


def replace_marked(text: str, content: str) -> str:
    """``text`` with what lies between :data:`MARK_START` and :data:`MARK_END` replaced by ``content``
    (``ValueError`` when the markers are missing)."""
    pattern = re.compile(re.escape(MARK_START) + r".*?" + re.escape(MARK_END), re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"no {MARK_START} … {MARK_END} markers")
    return pattern.sub(lambda _: f"{MARK_START}\n{content}\n{MARK_END}", text)


def _feedback_sentence(board: dict[str, Any]) -> str:
    """What the strategies maximised on this board's run (``meta.feedback``, :data:`experiments.task_board.FEEDBACK`)."""
    if board["meta"].get("feedback") == "task-objective":
        return ("Strategies maximise the task's objective (throughput, or throughput per W or per $ of the built "
                "system; on a two-objective task its first, NSGA-II both), so a two-objective score says how much of "
                "the front their evaluations cover.")
    return ("Strategies chase throughput (NSGA-II: throughput and area), so a two-objective score says how much of "
            "the front their evaluations cover.")


def markdown(board: dict[str, Any]) -> str:
    lines = ["# Strategy leaderboard", "",
             "Every strategy on every benchmark task ([the task registry](envs.md#benchmark-tasks)): the normalised "
             "score is the best throughput found over the task's **certified optimum** (stored in "
             "`phaze_env/task_optima/`, recomputed by `python -m experiments.task_optima`), or on a two-objective "
             "task the hypervolume of the evaluated designs over the **exact Pareto front**'s. "
             + _feedback_sentence(board) + " Intervals: 95 % bootstrap (seeds resampled; over tasks, stratified). "
             "Written by "
             "`python -m experiments.leaderboard --task NAME|core|all` (the run below); interactive page with the "
             "convergence curves: "
             "[leaderboard/board.html](leaderboard/board.html).", "", _meta_sentence(board), "", "## Aggregate", ""]
    lines += _md_table(AGGREGATE_HEADER, aggregate_rows(board))
    lines += ["", "Neighbours in the ranking:", ""] + [f"* {line}" for line in board["separation"]]
    if board.get("generalisation"):
        result = board["generalisation"]
        lines += ["", "## Generalisation to held-out workloads", "", generalisation_sentence(result), ""]
        lines += _md_table(GENERALISATION_HEADER, generalisation_rows(result))
    lines += ["", "## Per task", ""]
    references = board["references"]
    for task in board["meta"]["tasks"]:
        ref = references[task]
        what = (f"certified optimum {ref['optimum']:,.1f} samples/s" if len(ref["objectives"]) == 1 else
                f"exact front of {ref['front_size']} designs ({' vs '.join(ref['objectives'])})")
        lines += [f"### `{task}`", "", f"{ref['description']} — {what}; the exact search took "
                  f"{ref['exact_elapsed_s']:.0f} s ({ref['exact_evaluations']} evaluations).", ""]
        rows = [[e["strategy"], _ci(e), f"{e['min']:.3f}", f"{e['max']:.3f}", f"{e['wall_s']:.1f}"]
                for e in board["per_task"] if e["task"] == task]
        lines += _md_table(["strategy", "mean [95 % CI]", "min", "max", "wall s / run"], rows) + [""]
    return "\n".join(lines)


def _convergence_figure(task: str, curves: dict[str, dict[str, list]]):
    import plotly.graph_objects as go
    from plotly.colors import qualitative

    palette = qualitative.Dark24
    fig = go.Figure()
    for i, (strategy, curve) in enumerate(sorted(curves.items())):
        colour = palette[i % len(palette)]
        x = list(range(1, len(curve["mean"]) + 1))
        fig.add_trace(go.Scatter(x=x + x[::-1], y=curve["high"] + curve["low"][::-1], fill="toself", line={"width": 0},
                                 fillcolor=colour, opacity=0.12, hoverinfo="skip", showlegend=False,
                                 legendgroup=strategy))
        fig.add_trace(go.Scatter(x=x, y=curve["mean"], name=strategy, line={"color": colour}, legendgroup=strategy))
    fig.add_hline(y=1.0, line_dash="dash", line_color="black")
    fig.update_layout(title=f"{task}: mean normalised score (95 % bootstrap band over seeds)",
                      xaxis_title="evaluations", yaxis_title="fraction of the certified reference",
                      template="plotly_white", height=430, margin={"t": 50})
    return fig


def _improvement_figure(board: dict[str, Any]):
    import plotly.graph_objects as go

    order = [r["strategy"] for r in board["aggregate"]["strategies"]]
    pi = board["aggregate"]["probability_of_improvement"]
    z = [[pi[f"{x}>{y}"]["p"] if x != y else None for y in order] for x in order]
    fig = go.Figure(go.Heatmap(z=z, x=order, y=order, zmin=0, zmax=1, colorscale="RdBu",
                               hovertemplate="P(%{y} > %{x}) = %{z:.2f}<extra></extra>"))
    fig.update_layout(title="Probability of improvement P(row > column), over tasks", template="plotly_white",
                      height=560, yaxis={"autorange": "reversed"})
    return fig


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def page_html(board: dict[str, Any]) -> str:
    """The whole page (self-contained: plotly.js inline, charts with fixed ids)."""
    import plotly.offline

    def plot(fig, ident: str) -> str:
        return fig.to_html(full_html=False, include_plotlyjs=False, config=PLOT_CONFIG, div_id=ident)

    parts = [f"<h1>phaze-gym strategy leaderboard</h1><p class=\"note\">{_e(_meta_sentence(board))}</p>",
             "<h2 id=\"aggregate\">Aggregate</h2>", _html_table(AGGREGATE_HEADER, aggregate_rows(board)),
             "<ul>" + "".join(f"<li>{_e(line)}</li>" for line in board["separation"]) + "</ul>",
             plot(_improvement_figure(board), "improvement")]
    if board.get("generalisation"):
        result = board["generalisation"]
        parts += ["<h2 id=\"generalisation\">Generalisation to held-out workloads</h2>",
                  f"<p class=\"note\">{_e(generalisation_sentence(result))}</p>",
                  _html_table(GENERALISATION_HEADER, generalisation_rows(result))]
    for number, task in enumerate(board["meta"]["tasks"]):
        ref = board["references"][task]
        rows = [[e["strategy"], _ci(e), f"{e['min']:.3f}", f"{e['max']:.3f}", f"{e['wall_s']:.1f}"]
                for e in board["per_task"] if e["task"] == task]
        parts += [f"<h2 id=\"task-{number}\">{_e(task)}</h2><p class=\"note\">{_e(ref['description'])}</p>",
                  plot(_convergence_figure(task, board["curves"][task]), f"convergence-{number}"),
                  _html_table(["strategy", "mean [95 % CI]", "min", "max", "wall s / run"], rows)]
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>phaze-gym leaderboard</title>\n"
            f"<style>{STYLE}</style>\n<script>{plotly.offline.get_plotlyjs()}</script>\n</head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")
