"""The README's Python snippets run as a reader would paste them, and show a result, so they cannot rot."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
SNIPPETS = re.findall(r"^```python\n(.*?)^```", README, flags=re.DOTALL | re.MULTILINE)


def test_readme_has_python_snippets():
    assert len(SNIPPETS) >= 3  # Gymnasium, Optuna, plain-data entry points


@pytest.mark.slow
@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda text: text.splitlines()[0][:40].strip())
def test_readme_snippet_runs_and_prints_its_result(snippet, tmp_path):
    done = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=os.environ | {"PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "a README snippet should print what it computed"
    assert list(tmp_path.iterdir()) == [], "a README snippet should not leave files behind"
