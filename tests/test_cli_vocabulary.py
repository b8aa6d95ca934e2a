"""Every CLI speaks one vocabulary: the same flag names (old spellings hidden but still accepted), each
option's default in ``--help``, one design notation, piped output not cut at 80 columns, and a study that
keeps its finished runs when interrupted."""

from __future__ import annotations

import argparse
import csv
import io
import os
import subprocess
import sys
import textwrap

import pytest

from phaze_env.design import Design
from phaze_env.hardware.energy import DYNAMIC_ENERGY_LABEL

CLI_PARSERS = {
    "search.phaze": "search.cli",
    "experiments.compare_strategies": "experiments.compare_strategies",
    "experiments.paper_table": "experiments.paper_table",
    "experiments.optuna_distributed": "experiments.optuna_distributed",
    "experiments.buffer_sweep": "experiments.buffer_sweep",
    "experiments.cost_table": "experiments.cost_table",
    "experiments.system_table": "experiments.system_table",
    "experiments.sensitivity": "experiments.sensitivity",
    "search.report": "search.report",
    "baselines.train": "baselines.train",
    "phaze_env.objective": "phaze_env.objective",
    "phaze_env.workloads": "phaze_env.workloads.__main__",
}
CLUSTER_SIZE_CLIS = ("search.phaze", "experiments.compare_strategies", "experiments.paper_table",
                     "experiments.optuna_distributed", "baselines.train", "phaze_env.objective")
REQUIRED_ARGS = {"baselines.train": ["ppo"], "experiments.optuna_distributed": ["--storage", "sqlite://", "--study-name", "s"]}
DESIGN = Design(num_tc=16, tc_width=32, tc_depth=64, num_vc=8, buffer_mb=64, hbm_gb=80.0, microbatch=2, recompute=True)


def parser_of(cli: str) -> argparse.ArgumentParser:
    import importlib

    return importlib.import_module(CLI_PARSERS[cli]).build_parser()


def shown_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.help is not argparse.SUPPRESS
            and not isinstance(a, argparse._HelpAction)]


@pytest.mark.parametrize("cli", sorted(CLI_PARSERS))
def test_help_states_every_options_default(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100000")  # one line per option: what --help prints is searchable as is
    parser = parser_of(cli)
    text = parser.format_help()
    for action in shown_options(parser):
        printed = parser._get_formatter()._expand_help(action)
        assert "default" in printed or action.required, f"{cli} {action.option_strings[0]}: {printed!r}"
        assert printed in text, f"{cli} {action.option_strings[0]}: not in --help as {printed!r}"


@pytest.mark.parametrize("cli", CLUSTER_SIZE_CLIS)
def test_devices_and_batch_are_the_names_and_old_spellings_still_parse(cli, capsys):
    parser = parser_of(cli)
    required = REQUIRED_ARGS.get(cli, [])
    new = parser.parse_args([*required, "--devices", "16", "--batch", "64"])
    old = parser.parse_args([*required, "--n-devices", "16", "--global-batch", "64"])
    assert (new.devices, new.batch) == (old.devices, old.batch) == (16, 64)
    assert "use --devices" in capsys.readouterr().err
    help_text = parser.format_help()
    assert "--devices" in help_text and "--batch" in help_text
    assert "--n-devices" not in help_text and "--global-batch" not in help_text
    defaults = parser.parse_args(required)
    assert (defaults.devices, defaults.batch) == (1024, 4096)


@pytest.mark.parametrize("cli, new, old", [
    ("phaze_env.workloads", ["gpt2-xl", "--microbatch", "4", "--tensor-width", "2"], ["gpt2-xl", "--mbs", "4", "--tmp", "2"]),
    ("search.phaze", ["--microbatch", "1,2", "--link-GBps", "8"], ["--microbatches", "1,2", "--link-gbps", "8"]),
])
def test_other_old_spellings_parse_to_the_same_values_and_are_hidden(cli, new, old):
    parser = parser_of(cli)
    assert vars(parser.parse_args(new)) == vars(parser.parse_args(old))
    help_text = parser.format_help()
    assert not any(flag in help_text.split() for flag in old if flag.startswith("--"))


def test_one_design_notation():
    acc = DESIGN.accelerator()
    parts = acc.notation_parts()
    assert acc.notation() == "16×(32×64) tc · 8×32 vc · 64 MiB buffer · 80 GiB HBM"
    assert all(part in acc.notation() for part in parts.values())
    assert str(DESIGN) == f"{acc.notation()} · microbatch 2 · recompute allowed"


def test_search_study_paper_table_and_env_print_the_same_notation():
    """The search's comparison table, the study's and paper table's Markdown and the env's render all show
    the notation of the one design."""
    from rich.console import Console

    import gymnasium as gym
    import phaze_env.env  # noqa: F401 - registers the env ids
    from experiments.compare_strategies import markdown_summary
    from experiments.paper_table import _design
    from phaze_env.design import DesignSpace
    from phaze_env.evaluate import Cluster
    from phaze_env.hardware import TPUV4
    from phaze_env.workloads import custom_workload
    from search.cli import comparison_table
    from phaze_env.placement import Plan
    from search.result import DesignResult

    parts = DESIGN.accelerator().notation_parts()
    feasible = dict(workload="w", feasible=True, reason="", throughput_samples_s=1.0, tokens_s=1.0, mfu=0.5,
                    area_mm2=1.0, energy_per_sample_j=1.0, devices_available=16,
                    plan=Plan(feasible=True, notation="t1p1d16m1", recompute=(False,), pipeline_stages=1))
    best = DesignResult(accelerator=DESIGN.accelerator().to_dict(), **feasible)
    baseline = DesignResult(accelerator=TPUV4.replace(hbm_gb=64.0).to_dict(), **feasible)
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(comparison_table("t", best, baseline))
    table = console.export_text()
    assert all(part in table for part in parts.values())
    assert "baseline (tpuv4 preset, 64 GiB)" in table and "TPUv4" not in table

    meta = {"seeds": 1, "budget": 1, "space_designs": 1, "cluster": {"n_devices": 16, "global_batch": 64},
            "optima": {"w": {"throughput_samples_s": 1.0, "design": DESIGN.to_dict()}}, "elapsed_s": 0.0}
    assert str(DESIGN) in markdown_summary([], meta)
    assert _design(DESIGN.to_dict()) == str(DESIGN)

    tiny = custom_workload("tiny-gpt2", "GPT2Config", "GPT2LMHeadModel", 64, n_embd=128, n_layer=4, n_head=4,
                           n_inner=512, vocab_size=1000, n_positions=64)
    space = DesignSpace.reduced(num_tc=(16,), tc_width=(32,), tc_depth=(64,), num_vc=(8,), buffer_mb=(64,),
                                hbm_gb=(80.0,), microbatch=(2,), recompute=(True,))
    env = gym.make("phaze_env/ArchSearch-v0", workload=tiny, cluster=Cluster(n_devices=16, global_batch=64),
                   space=space, render_mode="ansi").unwrapped
    env.reset(seed=0)
    _, _, _, _, info = env.step(env.action_space.sample())
    assert Design.from_dict(info["design"]) == DESIGN
    assert str(DESIGN) in env.render()


SEARCH_SCRIPT = textwrap.dedent("""
    import sys
    from phaze_env.workloads import custom_workload
    from phaze_env.workloads.registry import BUILTIN
    tiny = custom_workload("tiny-gpt2", "GPT2Config", "GPT2LMHeadModel", 64, n_embd=128, n_layer=4, n_head=4,
                           n_inner=512, vocab_size=1000, n_positions=64)
    BUILTIN.setdefault(tiny.name, tiny)
    from search.phaze import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.mark.slow
def test_search_output_piped_to_a_file_keeps_long_lines_whole(tmp_path):
    with open(tmp_path / "stdout.txt", "w") as stdout:
        done = subprocess.run([sys.executable, "-c", SEARCH_SCRIPT, "--workload", "tiny-gpt2", "--space", "reduced",
                               "--devices", "16", "--batch", "64", "--microbatch", "1", "--hbm-gb", "32",
                               "--tensor-widths", "1", "--workers", "1", "--out", str(tmp_path / "out")],
                              stdout=stdout, stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "stdout.txt").read_text().splitlines()
    counts = [line for line in lines if line.startswith("exact: proven")]
    assert len(counts) == 1 and len(counts[0]) > 80 and counts[0].endswith(f"results in {tmp_path / 'out'}/")
    assert any(DYNAMIC_ENERGY_LABEL in line and line.endswith("(higher = worse)") for line in lines)
    assert any("baseline (tpuv4 preset, 32 GiB)" in line for line in lines)


def test_interrupted_study_keeps_the_rows_of_its_finished_runs(tmp_path, monkeypatch, capsys):
    """Ctrl-C during the second run: the first run's rows are already on disk (checked from inside the second
    run, before the interrupt), the study exits 130 and summarises what finished."""
    import experiments.compare_strategies as study
    from baselines.protocol import Trace

    out = tmp_path / "study"
    calls = []

    def fake_run(strategy, workload, cluster, space, budget, seed, *, name=None, callback=None):
        calls.append((strategy, seed))
        if len(calls) == 2:
            with open(out / "results.csv") as handle:
                on_disk = list(csv.DictReader(handle))
            assert [(r["strategy"], r["seed"], r["evaluation"]) for r in on_disk] == \
                [("random", "0", str(i + 1)) for i in range(budget)]
            raise KeyboardInterrupt
        trace = Trace(strategy=name, workload=workload.name, seed=seed)
        for i in range(budget):
            trace.record(DESIGN, None, 0.1 * i)
            trace.best_throughput[-1] = 10.0 * (i + 1)
            if callback:
                callback(trace)
        return trace

    monkeypatch.setattr(study, "exact_optimum", lambda *a, **k: {"throughput_samples_s": 100.0, "design": DESIGN,
                                                                 "evaluations": 1, "elapsed_s": 0.0, "exact": True})
    monkeypatch.setattr(study, "run_strategy", fake_run)
    code = study.main(["--workload", "tiny-gpt2", "--strategy", "random", "--strategy", "genetic", "--seeds", "1",
                       "--budget", "3", "--devices", "16", "--batch", "64", "--out", str(out), "--quiet"])
    assert code == study.INTERRUPTED and len(calls) == 2
    with open(out / "results.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["strategy"], float(r["best_normalized"])) for r in rows] == [("random", 0.1), ("random", 0.2),
                                                                             ("random", 0.3)]
    assert "Interrupted" in (out / "summary.md").read_text() and "| random |" in (out / "summary.md").read_text()
    assert "interrupted" in capsys.readouterr().err


def test_console_names_each_energy_measure():
    """The why-line's chip dynamic energy per sample and the system rows' wall-power energy per token are two
    measures: each is shown under its own label (hardware.energy / hardware.system), never a bare "energy"."""
    from search.cli import system_cells, why
    from search.result import DesignResult
    from phaze_env.hardware import TPUV4
    from phaze_env.hardware.system import WALL_ENERGY_LABEL
    from phaze_env.placement import Plan

    plan = Plan(feasible=True, notation="t1p1d16m1", recompute=(False,), pipeline_stages=1, devices_used=16,
                time_per_batch_s=1.0, time_breakdown_s={"compute": 1.0})
    fields = dict(workload="w", feasible=True, reason="", throughput_samples_s=1.0, tokens_s=1.0, mfu=0.5,
                  area_mm2=1.0, devices_available=16, accelerator=TPUV4.to_dict(), plan=plan)
    best, baseline = DesignResult(energy_per_sample_j=2.0, **fields), DesignResult(energy_per_sample_j=1.0, **fields)
    line = why(best, baseline)[-1]
    assert f"{DYNAMIC_ENERGY_LABEL} 2.00× the baseline's" in line and "J/token" not in line
    system = {"chip_area_mm2": 600.0, "die_area_mm2": None, "hbm_stacks": 4, "hbm_generation": "hbm3",
              "hbm_bandwidth_Bps": 3e12, "links": 4, "link_GBps": 100.0, "topology": "torus", "n_devices": 16,
              "chip_power_w": 500.0, "chip_cost_usd": 2000.0, "cluster_power_w": 1e4, "cluster_cost_usd": 1e5,
              "energy_per_token_j": 0.25}
    cells = system_cells(DesignResult(energy_per_sample_j=1.0, system=system, **fields))
    assert cells[WALL_ENERGY_LABEL] == "0.25" and not any(k.startswith("energy") for k in cells)
