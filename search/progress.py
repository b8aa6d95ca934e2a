"""How a search reports what it is doing: phases, each with a total and a time left.

An exact search has four phases: **tracing** the model's graphs (a total: the (tensor width, microbatch)
variants), **bounding** (a vectorised throughput upper bound for every architecture, one variant at a time — the
system space: one tensor width and row group at a time — a total), **evaluating candidates** (best bound first,
until a feasible incumbent exists) and **proving optimality** (evaluating only the designs whose bound still
exceeds the incumbent). How many designs the last two need is not known in advance: progress reports the designs
checked and *at most* how many are left (those in flight and those whose bound still beats the incumbent, a number
that falls faster as the incumbent improves), and the time left as an upper limit (``ETA ≤``) at the rate so far —
never a count of the whole space the search never reaches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable


class SearchProgress:
    """Receives a search's events; this base class ignores them (silent runs, tests)."""

    def resumed(self, records: int, path: Path) -> None:
        """``records`` designs were read back from the results store at ``path``."""

    def tracing(self, workload: str, done: int, total: int) -> None:
        """``done`` of the ``total`` (tensor width, microbatch) graphs of ``workload`` are traced."""

    def bounding(self, workload: str, architectures: int) -> None:
        """Bounding ``architectures`` architectures on ``workload`` starts."""

    def bounded(self, workload: str, done: int, total: int) -> None:
        """``done`` of the ``total`` parts of ``workload``'s bounds are computed (variants: tensor width × microbatch;
        the system space: tensor width × row group)."""

    def searching(self, label: str, done: int, in_flight: int, remaining: int, incumbent: float | None,
                  next_bound: float | None) -> None:
        """A design finished: ``remaining`` unvisited designs have a bound above the incumbent (None: none yet);
        ``next_bound`` is the largest of them."""

    def finished(self, label: str, visited: int, architectures: int, incumbent: float | None) -> None:
        """The phase ``label`` is over: ``visited`` of ``architectures`` were visited, the rest pruned."""

    def close(self) -> None:
        """Release the terminal (also after an interruption)."""


def samples_text(score: float) -> str:
    """A throughput score as the console shows it (the default objective's unit)."""
    return f"{score:,.1f} samples/s"


def phase_status(incumbent: float | None, next_bound: float | None, remaining: int,
                 score_text: Callable[[float], str] = samples_text) -> tuple[str, str]:
    """The phase name and the status line for an incumbent, the best remaining bound and how many designs'
    bounds still exceed the incumbent; ``score_text`` writes a score in the objective's unit
    (:meth:`search.config.SearchConfig.score_text`)."""
    if incumbent is None or incumbent <= 0:
        return "evaluating candidates", "no feasible design yet"
    status = f"best {score_text(incumbent)}"
    if next_bound is not None:
        status += (f" · bound left {score_text(next_bound)} ({next_bound / incumbent - 1:.1%} better) on "
                   f"{remaining:,} designs")
    return "proving optimality", status


class ConsoleProgress(SearchProgress):
    """A rich live display on ``console`` (:func:`phaze_env.cli.progress_display`): one line per phase and
    workload, each with a bar, the elapsed time and the time left — for tracing and bounding over their variants;
    for the search over the designs checked of *checked + at most left*, whose time left is an upper limit."""

    def __init__(self, console, score_text: Callable[[float], str] = samples_text) -> None:
        from phaze_env.cli import progress_display

        self._bar = progress_display(console)
        self._tasks: dict[str, int] = {}
        self._architectures: dict[str, int] = {}
        self._score_text = score_text
        self._bar.start()

    def _show(self, key: str, text: str, done: int | None = None, total: int | None = None,
              at_most: bool = False) -> None:
        if key not in self._tasks:
            self._tasks[key] = self._bar.add_task(text, total=None)
        self._bar.update(self._tasks[key], description=text, total=total, completed=done or 0, at_most=at_most)

    def _end(self, prefix: str) -> None:
        """Mark the phases whose key starts with ``prefix`` done (a phase ends when the next starts)."""
        for key in [k for k in self._tasks if k.startswith(prefix)]:
            task = self._bar.tasks[self._tasks[key]]
            self._show(key, task.description, done=1, total=1)
            del self._tasks[key]

    def resumed(self, records: int, path: Path) -> None:
        self._bar.console.print(f"resumed {records:,} designs from {path}", highlight=False)

    def tracing(self, workload: str, done: int, total: int) -> None:
        self._show(f"tracing {workload}", f"[bold]{workload}[/bold]: tracing the model · {done} of {total} "
                                          "(tensor width, microbatch) graphs", done=done, total=total)

    def bounding(self, workload: str, architectures: int) -> None:
        self._end("tracing ")
        self._end("bounding ")
        self._architectures[workload] = architectures
        self._show(f"bounding {workload}", f"[bold]{workload}[/bold]: bounding {architectures:,} architectures")

    def bounded(self, workload: str, done: int, total: int) -> None:
        self._show(f"bounding {workload}", f"[bold]{workload}[/bold]: bounding {self._architectures[workload]:,} "
                                           f"architectures · part {done} of {total}", done=done, total=total)

    def searching(self, label, done, in_flight, remaining, incumbent, next_bound) -> None:
        self._end("tracing ")
        self._end("bounding ")
        phase, status = phase_status(incumbent, next_bound, remaining, self._score_text)
        left = in_flight + remaining
        self._show(label, f"[bold]{label}[/bold]: {phase} · {done:,} checked, at most {left:,} left "
                          f"({in_flight} running) · {status}", done=done, total=max(done + left, 1), at_most=True)

    def finished(self, label, visited, architectures, incumbent) -> None:
        best = f"optimum {self._score_text(incumbent)}" if incumbent else "no feasible design"
        self._show(label, f"[bold]{label}[/bold]: {best} · {visited:,} of {architectures:,} architectures visited, "
                          f"{architectures - visited:,} pruned by bounds", done=1, total=1)

    def close(self) -> None:
        self._bar.stop()
