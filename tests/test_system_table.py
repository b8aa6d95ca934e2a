"""The per-model table of best systems vs TPUv4/A100/H100 (``experiments.system_table``): the reference systems
get the designs' budget models, efficiencies and software basis; the "why" factors multiply to the ratio; a row
from a real (small) search renders and round-trips."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import pytest

from phaze_env.cluster import Cluster, get_cluster, reference_cluster
from phaze_env.hardware.system import (FLAGSHIP_TOPOLOGIES, REFERENCE_NUMBER_FORMATS, REFERENCE_TOPOLOGIES, RIVAL_NUMBER_FORMATS,
                                       RIVAL_TOPOLOGIES, SYSTEM_GEMM_EFFICIENCY, SystemBudget, UnknownRivalError,
                                       baseline_point, reference_point)
from search.config import SearchConfig
from search.run import evaluate_reference
from tests.test_system_space import BUDGET_W, TRAINING, WIDTHS, small_space
from tests.tiny import TINY


@pytest.mark.parametrize("budget", [SystemBudget(power_w=1e6), SystemBudget(power_w=None, cost_usd=5e6)])
def test_reference_points_buy_what_the_budget_pays_for_at_the_system_basis(budget):
    assert reference_point("tpuv4", budget) == baseline_point(budget)  # the search's baseline is one of them
    for name, topology in RIVAL_TOPOLOGIES.items():  # the table's references and the 2024–25 flagships
        point = reference_point(name, budget)
        more = point.n_devices + point.family.unit
        total = budget.power_w if budget.power_w is not None else budget.cost_usd
        assert point.n_devices % point.family.unit == 0 and point.n_devices > 0
        assert point.n_devices * budget.per_chip(point.estimate, point.family, point.n_devices) <= total
        assert total < more * budget.per_chip(point.estimate, point.family, more)
        assert point.accelerator.gemm_efficiency == SYSTEM_GEMM_EFFICIENCY and point.topology == topology
        for number_format in RIVAL_NUMBER_FORMATS[name]:  # FP8 is a mode of the same chip: same count
            other = reference_point(name, budget, number_format)
            assert other.accelerator.number_format == number_format and other.n_devices == point.n_devices
    with pytest.raises(ValueError, match="bf16"):
        reference_point("a100", budget, "fp8")
    with pytest.raises(ValueError, match="bf16"):
        reference_point("tpuv5p", budget, "fp8")
    with pytest.raises(UnknownRivalError, match="unknown rival system 'v100'[.].* Choose from .*b200, gb200, tpuv5p, "
                                                "mi300x") as error:
        reference_point("v100", budget)
    assert "\n" not in str(error.value)


def test_reference_clusters_run_on_the_designs_software_basis():
    budget = SystemBudget(power_w=1e6)
    base = Cluster(global_batch=4096)
    for name, preset in (("a100", "dgx-a100"), ("h100", "dgx-h100")):
        point = reference_point(name, budget)
        cluster = reference_cluster(name, point, base)
        assert cluster.name == preset and cluster.n_devices == point.n_devices and cluster.setup.global_batch == 4096
        assert cluster.stack.framework_efficiency == base.stack.framework_efficiency == 1.0
    assert get_cluster("dgx-a100", 8).stack.framework_efficiency < 1  # the preset's fitted stack factor is replaced
    assert reference_cluster("tpuv4", baseline_point(budget), base).name == "torus"


def test_iso_cost_is_what_the_anchor_cluster_costs_so_it_buys_the_same_chips():
    from experiments.system_table import ISO_COST_REFERENCE, budget_for, iso_cost_usd

    at_power = reference_point(ISO_COST_REFERENCE, budget_for("power", 1e6))
    at_cost = reference_point(ISO_COST_REFERENCE, budget_for("cost", 1e6))
    assert at_cost.n_devices == at_power.n_devices
    assert iso_cost_usd(1e6) == pytest.approx(at_power.cluster_cost_usd)
    with pytest.raises(ValueError, match="budget kind"):
        budget_for("carbon", 1e6)


@pytest.mark.slow
def test_factors_multiply_to_the_ratio_and_the_row_renders(tmp_path, monkeypatch):
    from experiments.system_table import factors, load_rows, render, table_row, write_docs
    from phaze_env.workloads import registry

    monkeypatch.setitem(registry.BUILTIN, TINY.name, TINY)  # the rendered row resolves its workload by name

    space = small_space(die_area_mm2=(600.0,), link_GBps=(50.0,), number_format=("bf16",), hbm_generation=("hbm3e",),
                        topology=("switched",))
    config = SearchConfig(workloads=(TINY,), cluster=TRAINING, space=space, tensor_widths=WIDTHS)
    row = table_row(config, "power", BUDGET_W, workers=1, out=tmp_path / "out")
    assert row["exact"] and row["best"]["samples_s"] > 0
    assert set(row["references"]) == set(REFERENCE_TOPOLOGIES) == set(row["why"])
    for name, ref in row["references"].items():
        assert ref["feasible"] and ref["chips"] == reference_point(name, space.budget).n_devices
        ratio = row["best"]["samples_s"] / ref["samples_s"]
        assert math.prod(row["best"]["factors"][name].values()) == pytest.approx(ratio, rel=1e-9)
        assert row["best"]["factors"][name]["mfu"] == pytest.approx(row["best"]["mfu"] / ref["mfu"], rel=1e-2)
        assert row["why"][name].startswith(f"{'wins' if ratio >= 1 else 'loses'} {ratio:.2f}×")
        assert ref["samples_s"] == max(ref["samples_s_by_format"].values())
        assert set(ref["samples_s_by_format"]) == set(REFERENCE_NUMBER_FORMATS[name])
        assert sum(ref["time_groups"].values()) == pytest.approx(1.0)
    design = evaluate_reference(config, TINY.name, "a100")
    with pytest.raises(ValueError, match="chips × peak × MFU"):  # the identity is checked, not assumed
        factors(design, dataclasses.replace(design, mfu=design.mfu * 1.1))
    node = row["node_sensitivity"]  # the answer at 4N: less power per chip, so a power budget buys at least as many
    assert node["node"] == "4N" and node["chip_power_w"] < row["best"]["chip_power_w"]
    assert node["chips"] >= row["best"]["chips"] and node["samples_s"] > 0
    at_4n = row["same_node"]["h100"]  # the same space searched at H100's node, against the same H100 reference
    assert set(row["same_node"]) == {"h100"} and at_4n["node"] == "4N" and at_4n["exact"]
    assert at_4n["ratio"] == pytest.approx(at_4n["samples_s"] / row["references"]["h100"]["samples_s"])
    if node["in_window"]:  # the N7 answer built at 4N is then a design of the 4N space: the search finds at least it
        assert at_4n["samples_s"] >= node["samples_s"] * (1 - 1e-9)
    write_docs(tmp_path, [row])
    assert load_rows(tmp_path / "system_table.json") == [row]
    text = (tmp_path / "system_table.md").read_text()
    assert f"{row['best']['samples_s']:,.1f}" in text and row["best"]["plan"] in text and row["why"]["h100"] in text
    assert set(row["flagships"]) == set(FLAGSHIP_TOPOLOGIES) and "## Against the best you can buy" in text
    for name, rival in row["flagships"].items():  # built at the row's budget, or saying why not
        assert rival["chips"] == reference_point(name, space.budget).n_devices
        assert (rival["why"] in text) if rival["feasible"] else (rival["reason"] in text)
    assert render([row]) == text


def test_cli_bad_workload_is_one_line_exit_2(tmp_path):
    done = subprocess.run([sys.executable, "-m", "experiments.system_table", "--workload", "nope", "--docs",
                           str(tmp_path / "docs"), "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "unknown workload 'nope'" in done.stderr
    assert not (tmp_path / "docs" / "system_table.json").exists()


@pytest.mark.parametrize("kind,budget_mw,message", [
    ("power", "0.0001", "no design of the system space fits its area window and buys a whole topology unit"),
    ("cost", "0.0001", "no iso-cost budget at 0.0001 MW: the H100 cluster it sets has no chips"),
    ("cost", "1e12", "more than any buildable system"),
    ("power", "1e308", "a budget of 1e+308 MW overflows a float in W")])
def test_cli_a_budget_that_buys_no_unit_or_too_many_is_one_line_before_any_search(tmp_path, kind, budget_mw, message):
    """Issue 29's bad input through the table's command line: a budget buying no whole unit (of any design, or of the
    H100 cluster that sets the iso-cost budget) and one whose chip count overflows are refused up front, exit 2, one
    line; nothing is written."""
    done = subprocess.run([sys.executable, "-m", "experiments.system_table", "--workload", "gpt2-xl", "--kind", kind,
                           "--budget-mw", budget_mw, "--quiet", "--docs", str(tmp_path / "docs"), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert not (tmp_path / "docs" / "system_table.json").exists()


def test_rows_of_another_table_version_are_recomputed_not_kept(tmp_path):
    """A row of version 3 (every chip charged DGX H100's host, no network) has other chip counts: not kept."""
    import json

    from experiments.system_table import TABLE_VERSION, load_rows

    for version in (2, 3):
        (tmp_path / "system_table.json").write_text(json.dumps({"version": version, "rows": [{"workload": "x"}]}))
        assert load_rows(tmp_path / "system_table.json") == [] and version != TABLE_VERSION


def test_the_published_table_has_no_mfu_above_100_percent():
    from pathlib import Path

    from experiments.system_table import load_rows

    rows = load_rows(Path(__file__).resolve().parents[1] / "docs" / "system_table.json")
    systems = [s for r in rows for s in [r["best"], *r["references"].values()] if s.get("feasible", True)]
    assert rows and any(s["number_format"] == "fp8" for s in systems)
    assert all(0 < s["mfu"] <= 1 for s in systems)


def test_the_three_reference_call_sites_build_the_same_system():
    """design.reference_system is the one build of a reference: SystemDesignSpace.evaluate_reference (its cluster
    and chip), search.run (the system figures of the baseline and each reference) and experiments.system_table
    (the cluster it explains a reference on) agree with it, for every reference and number format."""
    from experiments.system_table import best_reference, iso_cost_usd
    from phaze_env.design import reference_system
    from search.run import _baseline

    space = small_space(die_area_mm2=(600.0,), link_GBps=(50.0,), number_format=("bf16",), hbm_generation=("hbm3e",),
                        topology=("switched",), microbatch=(1,))
    config = SearchConfig(workloads=(TINY,), cluster=TRAINING, space=space, tensor_widths=(1,))
    for name in REFERENCE_TOPOLOGIES:
        for number_format in REFERENCE_NUMBER_FORMATS[name]:
            training = space.reference_training(name, TRAINING)  # the space's stack on this reference's chip
            assert training.stack.framework_efficiency == space.system_stack.fit_on(name).framework_efficiency
            point, cluster = reference_system(name, space.budget, number_format, training)
            assert point == reference_point(name, space.budget, number_format)
            assert cluster == reference_cluster(name, point, training)
            evaluation = space.evaluate_reference(name, TINY, TRAINING, number_format, tensor_widths=(1,))
            assert evaluation.cluster == cluster.to_dict()
            assert evaluation.accelerator == point.accelerator.replace(hbm_gb=evaluation.hbm_gb).to_dict()
            design = evaluate_reference(config, TINY.name, name, number_format)
            assert design.accelerator == evaluation.accelerator and design.devices_available == point.n_devices
            assert design.system["n_devices"] == point.n_devices and design.system["topology"] == point.topology
            assert design.system["cluster_power_w"] == point.cluster_power_w
        design, table_cluster, _ = best_reference(config, TINY.name, name, space.budget)
        assert table_cluster == reference_system(name, space.budget, design.number_format,
                                                 space.reference_training(name, TRAINING))[1]
    baseline = _baseline(config, TINY.name)
    assert baseline.system == evaluate_reference(config, TINY.name, "tpuv4").system
    assert iso_cost_usd(BUDGET_W) == reference_system("h100", SystemBudget(power_w=BUDGET_W))[0].cluster_cost_usd


def test_a_reference_the_budget_cannot_build_is_infeasible_not_an_error():
    from experiments.system_table import best_reference

    space = small_space(die_area_mm2=(600.0,), link_GBps=(50.0,), number_format=("bf16",), hbm_generation=("hbm3e",),
                        topology=("switched",), microbatch=(1,))
    space = dataclasses.replace(space, budget=SystemBudget(power_w=6e3))  # 4-7 chips: not one 8-GPU node
    config = SearchConfig(workloads=(TINY,), cluster=TRAINING, space=space, tensor_widths=(1,))
    for name in ("a100", "h100"):
        design, cluster, _ = best_reference(config, TINY.name, name, space.budget)
        assert not design.feasible and cluster is None and "not one whole switched unit of 8" in design.reason


def test_the_system_space_is_built_at_its_node_and_a_node_without_data_is_one_line(tmp_path):
    """``--node``: the space's chips at that node's density and energy (a 4N space fits more compute on the same die
    and its chips draw less); the node is in the space's dict only when not the default, so N7 searches keep their
    signature; an unknown node is one line, exit 2."""
    from phaze_env.design import DesignSpace

    n7 = small_space(number_format=("bf16",), hbm_generation=("hbm3e",))
    at_4n = dataclasses.replace(n7, node="4n")
    assert at_4n.node == "4N" and "node" not in n7.to_dict() and DesignSpace.from_dict(at_4n.to_dict()) == at_4n
    design = next(d for d in n7 if n7.area_ok(d))
    assert at_4n.point(design).estimate.die_area_mm2 < n7.point(design).estimate.die_area_mm2
    assert at_4n.point(design).estimate.total_power_w < n7.point(design).estimate.total_power_w
    assert at_4n.point(design).n_devices >= n7.point(design).n_devices
    done = subprocess.run([sys.executable, "-m", "search.phaze", "--space", "system", "--workload", "gpt2-xl", "--node",
                           "N2", "--out", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no process data for node 'N2'" in done.stderr


def test_the_gpt3_rows_tpuv4_reference_is_set_against_palms_published_mfu():
    """Issue 29's check, generated from the stored rows: only gpt3-175b's rows, the ratio to PaLM's 46.2 % and to
    MaxText's six runs taken from the validation cases (not retyped), each verdict computed from them."""
    from experiments.system_table import PALM_CASE, published_mfu_text, tpuv4_published_mfus
    from experiments.validation_cases import get_case

    def row(workload, mfu, kind="power"):
        return {"workload": workload, "kind": kind, "budget_label": "10 MW",
                "references": {"tpuv4": {"mfu": mfu, "plan": "t8p6d522m1v4", "chips_used": 25056,
                                         "time_groups": {"compute": 0.7, "network": 0.17, "bubble": 0.13}}}}
    text = published_mfu_text([row("gpt2-xl", 0.29), row("gpt3-175b", 0.459)])
    assert "gpt2-xl" not in text
    assert "gpt3-175b at 10 MW 45.9% (-0.6% against PaLM's MFU, within ±15%" in text  # to a tenth: +15.4 % is not "+15 %"
    assert "outside the published span" in text and "pipeline bubble 13% of the batch" in text  # 45.9 % < PaLM's 46.2 %
    assert f"{get_case(PALM_CASE).published:.1%}" in text
    maxtext = [c.published for c in tpuv4_published_mfus() if c.name != PALM_CASE]
    assert len(maxtext) == 6 and f"{min(maxtext):.1%}–{max(maxtext):.1%}" in text
    high = published_mfu_text([row("gpt3-175b", 0.55, "cost")])
    assert "iso-cost 55.0% (+19.0% against PaLM's MFU, outside ±15%" in high
    assert f"within ±15% of 6 of MaxText's 6" in high and "inside the published span" in high
    assert "within ±15% of 0 of MaxText's 6" in published_mfu_text([row("gpt3-175b", 0.80)])
    assert published_mfu_text([row("gpt2-xl", 0.29)]) == ""
