"""Everyday use, as a new user meets it: bad input refused up front in one line, no traceback; a search that
finds nothing says why; every figure in its objective's unit (issue 27, "Everyday use")."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from phaze_env.design import DesignSpace
from tiny import TINY


def run_cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "search.phaze", *args], capture_output=True, text=True, cwd=cwd)


def one_clear_line(out: subprocess.CompletedProcess, status: int, message: str) -> None:
    assert out.returncode == status, out.stderr
    assert "Traceback" not in out.stderr and message in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_a_budget_beyond_any_buildable_system_is_refused_up_front(tmp_path):
    """``--budget-mw 1e30`` once ended in an OverflowError from deep in the bounds."""
    with pytest.raises(ValueError, match="more than any buildable system"):
        DesignSpace.named("system", budget_w=1e36).arch_space()
    one_clear_line(run_cli("--space", "system", "--budget-mw", "1e30", "--quiet", "--out", str(tmp_path)), 2,
                   "more than any buildable system")


def test_tensor_widths_that_split_no_head_count_are_refused(tmp_path):
    """gpt2-xl has 25 heads: ``--tensor-widths 2`` made every design infeasible and exited 0 without a word why."""
    one_clear_line(run_cli("--tensor-widths", "2", "--quiet", "--out", str(tmp_path)), 2, "25 attention heads")


def test_a_search_without_a_feasible_design_says_why_and_exits_1(tmp_path, capsys):
    """Every design infeasible (HBM of a few KiB): the console says why and the exit status is 1 (the search ran to
    the end but has no answer; bad input is 2). Outputs are still written."""
    from phaze_env.workloads.registry import BUILTIN
    from search.phaze import main

    BUILTIN.setdefault(TINY.name, TINY)
    args = ["--workload", TINY.name, "--space", "reduced", "--devices", "16", "--batch", "64", "--microbatch", "1",
            "--hbm-gb", "0.000001", "--tensor-widths", "1", "--workers", "1", "--quiet", "--out", str(tmp_path)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert f"{TINY.name}: no feasible design — " in err and "HBM" in err
    assert not json.loads((tmp_path / "results.json").read_text())["best"][TINY.name]["feasible"]


def test_the_optimum_is_printed_and_written_in_its_objectives_unit(capsys):
    """``--objective throughput_per_usd`` printed "optimum 0.0 samples/s" (its score, tokens/s per $ over the
    sequence length, under the throughput's unit) and results.json did not name its objective."""
    from rich.console import Console

    from phaze_env.cluster import Cluster
    from phaze_env.workloads.registry import BUILTIN
    from search.cli import comparison_table
    from search.config import SearchConfig
    from search.progress import ConsoleProgress
    from search.run import run_search

    BUILTIN.setdefault(TINY.name, TINY)
    space = DesignSpace.named("system", budget_w=1e5, die_area_mm2=(600.0,), hbm_stacks=(4,), links=(6,),
                              link_GBps=(50.0, 100.0), number_format=("bf16",), hbm_generation=("hbm3e",),
                              topology=("torus", "switched"), num_tc=(4, 8), tc_width=(128,), tc_depth=(128,),
                              num_vc=(2,), buffer_mb=(128,), microbatch=(1,), recompute=(False,))
    config = SearchConfig(workloads=[TINY.name], cluster=Cluster(global_batch=64), space=space, tensor_widths=(1,),
                          objective="throughput_per_usd")
    console = Console(record=True, width=300)
    result = run_search(config, workers=1, progress=ConsoleProgress(console, config.score_text))
    best = result.best[TINY.name]
    per_usd = best.tokens_s / best.system["cluster_cost_usd"]
    shown = console.export_text()
    assert f"optimum {per_usd:.3g} tokens/s per $" in shown and "samples/s" not in shown
    data = json.loads(result.to_json())
    assert data["objective"] == "throughput_per_usd"
    assert data["best"][TINY.name]["objectives"] == {"throughput_per_usd": pytest.approx(per_usd, rel=1e-12)}
    console = Console(record=True, width=300)
    console.print(comparison_table("t", best, result.baseline[TINY.name], result.objective))
    assert "throughput_per_usd (tokens/s per $)" in console.export_text()
