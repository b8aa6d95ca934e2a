"""An embedded SQLite record of every design a search evaluated (or pruned), for resuming and analysis.

One row per (search signature, workload, architecture index). A search restarted with the same
arguments (same signature) reads its rows back and only evaluates what is missing, so a killed run
continues where it stopped and returns the same answer.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phaze_env.evaluate import Evaluation

SCHEMA = """
CREATE TABLE IF NOT EXISTS designs (
    signature TEXT NOT NULL,
    workload TEXT NOT NULL,
    arch_index INTEGER NOT NULL,
    status TEXT NOT NULL,            -- 'evaluated' | 'pruned'
    throughput_samples_s REAL,
    bound_samples_s REAL,
    area_mm2 REAL,
    evaluation TEXT,                 -- Evaluation.to_dict() as JSON (evaluated rows)
    PRIMARY KEY (signature, workload, arch_index)
);
CREATE TABLE IF NOT EXISTS searches (
    signature TEXT PRIMARY KEY,
    arguments TEXT NOT NULL
);
"""


@dataclass(frozen=True)
class DesignRecord:
    """One design a search visited (a ``designs`` row): ``"evaluated"``, with its :class:`Evaluation` (stored as
    ``Evaluation.to_dict()`` JSON, read back through ``Evaluation.from_dict``) and throughput, or ``"pruned"`` by its
    placement bound (``bound_samples_s``), never evaluated."""

    status: str
    throughput_samples_s: float | None
    bound_samples_s: float | None
    area_mm2: float | None
    evaluation: Evaluation | None

    @classmethod
    def evaluated(cls, evaluation: Evaluation, area_mm2: float) -> DesignRecord:
        return cls("evaluated", evaluation.throughput_samples_s, None, area_mm2, evaluation)

    @classmethod
    def pruned(cls, bound_samples_s: float, area_mm2: float) -> DesignRecord:
        return cls("pruned", None, bound_samples_s, area_mm2, None)

    @property
    def is_evaluated(self) -> bool:
        return self.status == "evaluated"

    @property
    def feasible(self) -> bool:
        """Evaluated, with a feasible plan."""
        return self.is_evaluated and bool(self.evaluation.feasible)

    @property
    def final(self) -> bool:
        """Not provisional: pruned, or evaluated on schedules all proven optimal (an unproven row is evaluated again
        when a search resumes)."""
        return not self.is_evaluated or bool(self.evaluation.proven)


def damaged(path: Path, problem: Exception | str) -> ValueError:
    """The one error of a store that cannot be read or written (a ValueError: the CLI prints it as one line, status
    2): which file, what is wrong, what to do."""
    return ValueError(f"the results store {path} is damaged ({problem}): move it away (e.g. mv {path} {path}.damaged) "
                      "or rerun with --fresh, and the search starts afresh")


class ResultsStore:
    """``designs`` rows keyed by (signature, workload, architecture index); a damaged file raises :func:`damaged`."""

    def __init__(self, path: Path | str, signature: str, arguments: dict[str, Any]):
        self.path = Path(path)
        self.signature = signature
        try:
            self._db = sqlite3.connect(self.path)
            self._db.executescript(SCHEMA)
            self._db.execute("INSERT OR IGNORE INTO searches VALUES (?, ?)", (signature, json.dumps(arguments, sort_keys=True)))
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            raise damaged(self.path, exc) from exc

    def load(self) -> dict[tuple[str, int], DesignRecord]:
        """Every recorded row of this search: (workload, index) → its record (evaluation parsed)."""
        out = {}
        try:
            rows = self._db.execute(
                "SELECT workload, arch_index, status, throughput_samples_s, bound_samples_s, area_mm2, evaluation "
                "FROM designs WHERE signature = ?", (self.signature,)).fetchall()
            for workload, index, status, throughput, bound, area, evaluation in rows:
                out[(workload, index)] = DesignRecord(status, throughput, bound, area,
                                                      Evaluation.from_dict(json.loads(evaluation)) if evaluation else None)
        except (sqlite3.DatabaseError, ValueError, TypeError, KeyError) as exc:  # a damaged page, a row whose JSON is cut
            # or is no evaluation
            raise damaged(self.path, exc) from exc
        return out

    def record(self, workload: str, index: int, record: DesignRecord) -> None:
        try:
            self._db.execute(
                "INSERT OR REPLACE INTO designs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (self.signature, workload, int(index), record.status, record.throughput_samples_s,
                 record.bound_samples_s, record.area_mm2,
                 json.dumps(record.evaluation.to_dict()) if record.evaluation is not None else None))
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            raise damaged(self.path, exc) from exc

    def close(self) -> None:
        self._db.close()

    @staticmethod
    def count(path: Path | str, signatures: list[str]) -> int:
        """Rows recorded under any of ``signatures`` in the store at ``path`` (0 if there is none yet)."""
        if not Path(path).exists():
            return 0
        try:
            with closing(sqlite3.connect(path)) as db:
                marks = ",".join("?" * len(signatures))
                return int(db.execute(f"SELECT COUNT(*) FROM designs WHERE signature IN ({marks})",
                                      signatures).fetchone()[0])
        except sqlite3.DatabaseError:
            return 0  # not a store (yet); opening it for writing reports the problem
