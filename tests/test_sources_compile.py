"""Every project source compiles with warnings as errors: an invalid escape such as ``"\\*"`` in a string is a
DeprecationWarning on Python 3.11 (a SyntaxWarning from 3.12, an error later), shown to every user who imports it."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(path for folder in ("phaze_env", "search", "experiments", "baselines", "benchmarks", "scripts", "tests")
                 for path in (ROOT / folder).rglob("*.py"))


def test_the_project_has_sources():
    assert len(SOURCES) > 50 and ROOT / "search" / "cli.py" in SOURCES


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(ROOT)))
def test_compiles_without_warnings(path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compile(path.read_text(encoding="utf-8"), str(path), "exec")
    assert [f"line {w.lineno}: {w.message}" for w in caught] == []
