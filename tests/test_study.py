"""The comparison study runs end to end and writes every output; the exact optimum bounds every strategy."""

from __future__ import annotations

import csv

import pytest

from baselines import STRATEGIES
from experiments.compare_strategies import COLUMNS, evaluations_to, main, summarise


def test_quick_study_end_to_end(tmp_path):
    out = tmp_path / "study"
    assert main(["--quick", "--seeds", "1", "--budget", "5", "--out", str(out), "--quiet"]) == 0
    for name in ("results.csv", "summary.md", "convergence.png", "evals_to_99.png", "exact.json"):
        assert (out / name).stat().st_size > 0, name
    with open(out / "results.csv") as handle:
        reader = csv.DictReader(handle)
        assert tuple(reader.fieldnames) == COLUMNS
        rows = list(reader)
    available = {name for name, spec in STRATEGIES.items() if spec.available}
    assert {r["strategy"] for r in rows} == available
    assert len(rows) == len(available) * 5
    for r in rows:
        assert 0 <= float(r["best_normalized"]) <= 1 + 1e-9, r
        assert float(r["best_throughput"]) >= 0 and float(r["wall_s"]) >= 0
    summary = (out / "summary.md").read_text()
    assert all(f"| {name} |" in summary for name in available)


def test_bad_arguments_exit_2_with_one_line(capsys):
    for argv in (["--strategy", "nope"], ["--budget", "0"], ["--workload", "gpt5"]):
        with pytest.raises(SystemExit) as exc:
            main(argv + ["--out", "/tmp/unused-study"])
        assert exc.value.code == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_summary_thresholds():
    assert evaluations_to([0.5, 0.96, 0.99, 1.0], 0.95) == 2
    assert evaluations_to([0.5, 0.96, 0.99, 1.0], 1.0) == 4
    assert evaluations_to([0.5, 0.9], 0.95) is None
    rows = [{"workload": "w", "strategy": "s", "seed": seed, "evaluation": i + 1, "best_throughput": v,
             "best_normalized": v, "wall_s": float(i)} for seed, run in enumerate([[0.5, 1.0], [0.5, 0.9]])
            for i, v in enumerate(run)]
    (entry,) = summarise(rows)
    assert entry["reached_100"] == 1 and entry["evals_to_100"] == 2 and entry["evals_to_100_censored"] == 2
    assert entry["final_mean"] == pytest.approx(0.95) and entry["gap_mean"] == pytest.approx(0.05)


def test_paper_table_writes_outputs_and_exact_bounds_spotlight(tmp_path):
    import json

    from experiments.paper_table import main as paper_main

    out = tmp_path / "paper"
    assert paper_main(["--workload", "tiny-gpt2", "--devices", "16", "--batch", "64", "--budget", "4", "--seeds", "1",
                       "--out", str(out)]) == 0
    for name in ("paper_table.md", "paper_table.json", "paper_table.png"):
        assert (out / name).stat().st_size > 0
    (row,) = json.loads((out / "paper_table.json").read_text())["rows"]
    assert 0 < row["spotlight"] <= row["phaze"] * (1 + 1e-9) and row["tpuv4"] > 0
