"""The 2024–25 flagships as rivals ("against the best you can buy", issue 29 item 4): each built as its own published
system (DGX B200, GB200 NVL72, TPU v5p pod, MI300X platform), evaluated like the table's references, and the system
table's flagship part on a tiny instance."""

from __future__ import annotations

import dataclasses
import math

import pytest

from phaze_env.cluster import point_cluster
from phaze_env.hardware import cost
from phaze_env.hardware.system import (DGX_B200_MAX_W, FLAGSHIP_FAMILIES, FLAGSHIP_TOPOLOGIES, GB200_NVL72_RACK_W, PUE,
                                       SYSTEM_FAMILIES, SystemBudget, UnknownRivalError, reference_point,
                                       wall_power_per_chip_w)
from phaze_env.stacks import CARRIED_FITS, SYSTEM_STACKS
from search.config import SearchConfig
from tests.test_system_space import TRAINING, WIDTHS, small_space
from tests.tiny import TINY

FLAGSHIPS = tuple(FLAGSHIP_TOPOLOGIES)

OVERHEAD_RANGES_W = {
    "b200": (DGX_B200_MAX_W / 8 - 1000.0, DGX_B200_MAX_W / 8 - 1000.0),  # DGX B200 datasheet, exactly
    "gb200": (120e3 / 72 - 1200.0, 132e3 / 72 - 1200.0),  # 120–132 kW racks of 72 × 1,200 W
    "tpuv5p": (110.0, 250.0 + 20.0),  # the host's stated range, plus its OCS and NIC shares
    "mi300x": (300.0, 600.0 + 30.0),  # the host's stated range, plus its NIC
}
"""Each flagship system's power per chip beyond the chip, in one scale-up domain (no scale-out network), at the plug:
its cited figure or stated range (``hardware.system``'s docstrings)."""


def one_domain(name: str):
    """The flagship's chip estimate and family, and the chips of one scale-up domain."""
    point = reference_point(name, SystemBudget(power_w=1e6))
    return point.estimate, point.family, point.family.network_above_chips


@pytest.mark.parametrize("name", FLAGSHIPS)
def test_each_flagship_systems_overhead_per_chip_is_in_its_cited_range(name):
    estimate, family, chips = one_domain(name)
    assert family == SYSTEM_FAMILIES[FLAGSHIP_FAMILIES[name]]
    overhead = wall_power_per_chip_w(estimate, family, chips) / PUE - estimate.total_power_w
    low, high = OVERHEAD_RANGES_W[name]
    assert low - 1e-6 <= overhead <= high + 1e-6, overhead
    assert family.network_w_per_chip(chips) == 0 < family.network_w_per_chip(chips + family.unit)


@pytest.mark.parametrize("name,system_w,gpus", [("b200", DGX_B200_MAX_W, 8), ("gb200", GB200_NVL72_RACK_W, 72)])
def test_blackwell_wall_power_per_chip_is_the_published_systems_within_the_chip_models_error(name, system_w, gpus):
    """A DGX B200 (14.3 kW / 8) and a GB200 NVL72 rack (120 kW / 72) per GPU at the wall: the published system power
    with the modelled chip in place of the datasheet's (within ±20 %, ``test_generations``) and PUE."""
    estimate, family, chips = one_domain(name)
    published = system_w / gpus * PUE
    error = (estimate.total_power_w - cost.PUBLISHED[name].power_w) * PUE
    assert wall_power_per_chip_w(estimate, family, chips) == pytest.approx(published + error, rel=1e-9)
    assert 0.85 * published < wall_power_per_chip_w(estimate, family, chips) < 1.2 * published


def test_each_flagship_is_deployed_at_its_own_domain_and_node():
    domains = {name: reference_point(name, SystemBudget(power_w=1e6)).family.network_above_chips for name in FLAGSHIPS}
    assert domains == {"b200": 8, "gb200": 72, "tpuv5p": 8960, "mi300x": 8}
    nodes = {name: reference_point(name, SystemBudget(power_w=1e6)).chip_system.process.name for name in FLAGSHIPS}
    assert nodes == {"b200": "4NP", "gb200": "4NP", "tpuv5p": "N5", "mi300x": "N5"}
    gb200 = reference_point("gb200", SystemBudget(power_w=1e6))
    assert gb200.n_devices % 72 == 0
    cluster = point_cluster(gb200)
    assert cluster.network.devices_per_node == 72 and cluster.n_devices == gb200.n_devices
    with pytest.raises(ValueError, match="scale-up domain"):
        dataclasses.replace(SYSTEM_FAMILIES["tpuv5p-torus"], domain_chips=100)


def test_a_budget_below_one_nvl72_rack_builds_none_and_says_why():
    point = reference_point("gb200", SystemBudget(power_w=100e3))
    assert point.n_devices == 0 and "not one whole switched unit of 72" in point.unbuildable_reason


def test_flagships_run_the_stack_at_the_fit_carried_to_them_and_say_so():
    stack = SYSTEM_STACKS["megatron-core"]
    for name in FLAGSHIPS:
        fit, chip = stack.rival_fit(name)
        assert chip == CARRIED_FITS[name] and fit is stack.fit_on(CARRIED_FITS[name])
    assert stack.rival_fit("h100")[1] == "h100"  # a fitted chip keeps its own


@pytest.mark.parametrize("name", FLAGSHIPS)
def test_each_flagship_builds_and_evaluates_on_a_small_model(name):
    from search.run import evaluate_reference

    budget = SystemBudget(power_w=2e5 if name != "gb200" else 3e5)  # at least one node / rack / cube
    space = dataclasses.replace(small_space(), budget=budget)
    config = SearchConfig(workloads=(TINY,), cluster=TRAINING, space=space, tensor_widths=WIDTHS)
    design = evaluate_reference(config, TINY.name, name)
    assert design.feasible and design.throughput_samples_s > 0
    assert design.system["n_devices"] == reference_point(name, budget).n_devices
    assert design.system["family"] == FLAGSHIP_FAMILIES[name]


def test_an_unknown_rival_is_one_clear_line_before_any_stack_is_looked_up():
    space = small_space()
    with pytest.raises(UnknownRivalError) as error:
        space.evaluate_reference("b300", TINY, TRAINING)
    assert str(error.value).startswith("unknown rival system 'b300'. Did you mean 'b200'?")
    assert "\n" not in str(error.value)


def test_the_tables_flagship_part_on_a_tiny_instance():
    from experiments.system_table import (FLAGSHIP_LABELS, flagship_rivals, flagships_text, render, system_figures)
    from phaze_env.design import reference_system
    from search.run import evaluate_reference

    budget = SystemBudget(power_w=3e5)
    space = dataclasses.replace(small_space(), budget=budget)
    config = SearchConfig(workloads=(TINY,), cluster=TRAINING, space=space, tensor_widths=WIDTHS)
    answer = evaluate_reference(config, TINY.name, "h100")  # stands in for a search's answer
    _, cluster = reference_system("h100", budget, "bf16", space.reference_training("h100", TRAINING))
    best = system_figures(TINY, answer, cluster)
    rivals = flagship_rivals(config, best)
    assert set(rivals) == set(FLAGSHIPS)
    for name, rival in rivals.items():
        assert rival["feasible"] and rival["chips"] == reference_point(name, budget).n_devices
        assert rival["ratio"] == pytest.approx(best["samples_s"] / rival["samples_s"])
        assert math.prod(rival["factors"].values()) == pytest.approx(rival["ratio"], rel=1e-9)
        assert rival["why"].startswith(f"{'wins' if rival['ratio'] >= 1 else 'loses'} {rival['ratio']:.2f}×")
        assert rival["samples_s"] == max(rival["samples_s_by_format"].values())
        assert rival["fit_from"] == CARRIED_FITS[name]
    row = {"workload": TINY.name, "budget_label": budget.describe(), "best": best, "flagships": rivals}
    text = flagships_text([row])
    assert "## Against the best you can buy" in text
    for name, rival in rivals.items():
        assert f"{rival['ratio']:.2f}×" in text and FLAGSHIP_LABELS[name] in text
    assert flagships_text([{**row, "flagships": {}}]) == ""
    assert callable(render)


@pytest.mark.parametrize("name,message", [("b300", "unknown rival system 'b300'. Did you mean 'b200'?"),
                                          ("h100", "'h100' is a same-node reference of every row, not a 2024–25 "
                                                   "flagship")])
def test_the_table_cli_refuses_an_unknown_flagship_in_one_line(tmp_path, name, message):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "experiments.system_table", "--flagship", name, "--docs",
                           str(tmp_path / "docs"), "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr
    assert not (tmp_path / "docs").exists()


def test_a_run_names_its_flagships_once_each_in_order():
    from experiments.system_table import FLAGSHIPS as TABLE_FLAGSHIPS, flagship_names

    assert flagship_names(None) == TABLE_FLAGSHIPS == FLAGSHIPS
    assert flagship_names(["mi300x", "b200", "mi300x"]) == ("mi300x", "b200")


def _tiny_table_row():
    """A stored-row stand-in on the tiny instance: an H100 cluster's figures as the answer, flagship columns marked
    stale (what a row of an earlier model holds), and the config it was run at."""
    from experiments.system_table import system_figures
    from phaze_env.design import reference_system
    from search.run import evaluate_reference

    budget = SystemBudget(power_w=3e5)
    space = dataclasses.replace(small_space(), budget=budget)
    config = SearchConfig(workloads=(TINY,), cluster=TRAINING, space=space, tensor_widths=WIDTHS)
    answer = evaluate_reference(config, TINY.name, "h100")
    _, cluster = reference_system("h100", budget, "bf16", space.reference_training("h100", TRAINING))
    stale = {"feasible": True, "ratio": 123.0}
    row = {"workload": TINY.name, "kind": "power", "budget": budget.to_dict(), "budget_label": budget.describe(),
           "power_w": 3e5, "signature": "an earlier model", "best": system_figures(TINY, answer, cluster),
           "references": {"h100": "kept"}, "flagships": {"b200": stale, "mi300x": stale}}
    return row, config


def test_rescoring_renews_only_the_named_flagship_columns_against_the_stored_answer():
    from experiments.system_table import flagship_rivals, rescore_flagships

    row, config = _tiny_table_row()
    said = []
    (fresh,) = rescore_flagships([row], ["mi300x"], config_for=lambda r: config, say=said.append)
    assert fresh["flagships"]["mi300x"] == flagship_rivals(config, row["best"], ["mi300x"])["mi300x"]
    assert fresh["flagships"]["b200"] == row["flagships"]["b200"]  # not named: kept as stored
    assert {k: v for k, v in fresh.items() if k != "flagships"} == {k: v for k, v in row.items() if k != "flagships"}
    assert row["flagships"]["mi300x"]["ratio"] == 123.0  # the input rows are not modified
    assert "MI300X 123.000× -> " in said[0] and "its answer from an earlier model" in said[0]
    # a stored sensitivity range around the old ratio is dropped (the table then names it as not run), not kept stale
    case = {"assumption": "voltage_frequency_exponent", "end": "low", "ratios": {"h100": 1.0, "mi300x": 150.0}}
    span = {"nominal": 123.0, "low": 123.0, "low_by": "nominal", "high": 150.0, "high_by": "voltage_frequency_exponent low"}
    row["sensitivity"] = {"ranges": {"h100": {"nominal": 1.0}, "mi300x": span}, "cases": [case], "exact": True,
                          "elapsed_s": 1.0}
    (fresh,) = rescore_flagships([row], ["mi300x"], config_for=lambda r: config, say=said.append)
    assert set(fresh["sensitivity"]["ranges"]) == {"h100"}
    assert fresh["sensitivity"]["cases"][0]["ratios"] == {"h100": 1.0}
    assert "MI300X range dropped" in said[-1] and row["sensitivity"]["ranges"]["mi300x"] == span


def test_rescore_selects_stored_rows_and_names_a_missing_one():
    from experiments.system_table import select_rows

    rows = [{"workload": "gpt2-xl", "kind": "power"}, {"workload": "gpt2-xl", "kind": "cost"},
            {"workload": "opt-1.3b", "kind": "power"}]
    assert select_rows(rows, None, None) == rows
    assert select_rows(rows, ["opt-1.3b"], None) == rows[2:]
    assert select_rows(rows, None, ["cost"]) == rows[1:2]
    with pytest.raises(ValueError, match=r"^no stored row opt-1.3b \(cost\); stored: gpt2-xl \(power\), "):
        select_rows(rows, ["opt-1.3b"], ["cost"])
    with pytest.raises(ValueError, match=r"^no stored row llama2-7b \(power/cost\)"):
        select_rows(rows, ["llama2-7b"], None)
    with pytest.raises(ValueError, match="no stored table to rescore"):
        select_rows([], None, None)


def _table_cli(*args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "experiments.system_table", "--rescore-flagships", *args],
                          capture_output=True, text=True)


def _stored_table(tmp_path, workload: str = "gpt2-xl", kind: str = "power"):
    """A one-row stored table in ``tmp_path``: the published table's row, as the rescore reads it."""
    import json
    from pathlib import Path

    from experiments.system_table import TABLE_VERSION, load_rows

    rows = [r for r in load_rows(Path(__file__).resolve().parents[1] / "docs" / "system_table.json")
            if (r["workload"], r["kind"]) == (workload, kind)]
    (tmp_path / "system_table.json").write_text(json.dumps({"version": TABLE_VERSION, "rows": rows}))
    return rows


@pytest.mark.parametrize("args,message", [
    ((), "no stored table to rescore"),
    (("--workload", "opt-1.3b"), "no stored row opt-1.3b (power/cost); stored: gpt2-xl (power)"),
    (("--budget-mw", "2"), "--budget-mw does not apply"),
    (("--flagship", "b300"), "unknown rival system 'b300'")])
def test_the_rescore_cli_refuses_bad_input_in_one_line(tmp_path, args, message):
    if args:
        _stored_table(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    done = _table_cli("--docs", str(tmp_path), *args)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


@pytest.mark.slow
def test_the_rescore_cli_rewrites_a_stored_tables_flagship_columns(tmp_path):
    """One stored row of the published table, in tmp: its MI300X column is evaluated again with today's model
    (here stale on purpose), everything else kept, and the JSON and the page rewritten."""
    import json

    from experiments.system_table import load_rows, render

    (row,) = _stored_table(tmp_path)
    stale = json.loads((tmp_path / "system_table.json").read_text())
    stale["rows"][0]["flagships"]["mi300x"]["ratio"] = 123.0
    (tmp_path / "system_table.json").write_text(json.dumps(stale))
    done = _table_cli("--docs", str(tmp_path), "--flagship", "mi300x")
    assert done.returncode == 0, done.stderr
    (fresh,) = load_rows(tmp_path / "system_table.json")
    assert fresh == row  # the published row is today's model's: the stale column is renewed to it, nothing else moves
    assert "MI300X 123.000× -> " in done.stdout
    assert (tmp_path / "system_table.md").read_text(encoding="utf-8") == render([fresh])
