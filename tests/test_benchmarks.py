"""Benchmarks are scripts, not tests, but they must keep running: the cheap one is run here end to end
(bench_hardware once broke on a renamed attribute without any test noticing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_hardware_runs_and_prints_its_figures():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_hardware.py"), "--repeats", "1"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "architectures in the area window" in done.stdout and "latency table" in done.stdout
