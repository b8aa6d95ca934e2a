"""The verdict's sensitivity (``experiments.sensitivity``): each assumption's move re-runs the exact search or proves
it need not, a moved search is the one a fresh model gives (no nominal result leaks in through a cache), and the
table and the report show the ranges."""

from __future__ import annotations

import json

import pytest

from experiments.sensitivity import row_sensitivity, row_summary, search_inputs, verdict
from experiments.system_table import render, table_row
from phaze_env.assumptions import ASSUMPTIONS, moved
from search.config import SearchConfig
from search.report import SENSITIVITY_FILE, rebuild, sensitivity_section, tornado_bars
from test_system_space import TRAINING, WIDTHS, small_space
from tiny import TINY


def _config() -> SearchConfig:
    space = small_space(link_GBps=(50.0,), number_format=("bf16",), hbm_generation=("hbm3e",))
    return SearchConfig(workloads=(TINY,), cluster=TRAINING, space=space, tensor_widths=WIDTHS)


def test_a_cost_move_leaves_an_iso_power_search_unchanged_and_a_power_move_does_not():
    nominal = search_inputs(_config())
    with moved("hbm_usd_per_gb", ASSUMPTIONS["hbm_usd_per_gb"].high):
        assert search_inputs(_config()) == nominal
    with moved("pue", ASSUMPTIONS["pue"].high):
        assert search_inputs(_config()) != nominal
    with moved("design_framework_efficiency", ASSUMPTIONS["design_framework_efficiency"].low):
        assert search_inputs(_config()) != nominal  # the designs' clusters carry the efficiency
    assert search_inputs(_config()) == nominal


@pytest.mark.slow
def test_row_sensitivity_is_exact_and_a_moved_search_is_the_fresh_models(tmp_path, monkeypatch):
    monkeypatch.setenv("PHAZE_CACHE_DIR", str(tmp_path / "cache"))
    chosen = [ASSUMPTIONS[n] for n in ("pue", "hbm_usd_per_gb", "design_framework_efficiency")]
    data = row_sensitivity(_config, "power", workers=1, directory=tmp_path / "out", assumptions=chosen,
                           say=lambda text: None)
    cases = {(c["assumption"], c["end"]): c for c in data["cases"]}
    assert set(cases) == {("pue", "low"), ("pue", "high"), ("hbm_usd_per_gb", "low"), ("hbm_usd_per_gb", "high"),
                          ("design_framework_efficiency", "low")}
    assert cases[("hbm_usd_per_gb", "high")]["status"] == "inputs unchanged"
    assert cases[("pue", "high")]["status"] == "exact" and data["exact"]
    slower = cases[("design_framework_efficiency", "low")]
    assert all(slower["ratios"][n] < r for n, r in data["nominal"]["ratios"].items())  # only the designs slow down
    for name, span in data["ranges"].items():
        assert span["low"] <= span["nominal"] <= span["high"]
        assert span["low"] == min([data["nominal"]["ratios"][name]] + [c["ratios"][name] for c in data["cases"]])
    # the file the report charts, the report's tornado and the table's range cell
    assert json.loads((tmp_path / "out" / SENSITIVITY_FILE).read_text())["ranges"] == data["ranges"]
    page = rebuild(tmp_path / "out").read_text(encoding="utf-8")
    assert 'id="tornado-0"' in page and "Sensitivity of the verdict" in page
    config = _config()
    row = table_row(config, "power", config.space.budget.power_w, workers=1, out=tmp_path / "table")
    text = render([row | {"sensitivity": row_summary(data)}])
    span = data["ranges"]["h100"]
    assert f"({span['low']:.2f}–{span['high']:.2f})" in text and "## Sensitivity of each verdict" in text
    # the moved case, computed again with no cache at all, is the same: nothing nominal leaked in
    monkeypatch.setenv("PHAZE_CACHE", "0")
    with moved("design_framework_efficiency", slower["value"]):
        fresh = verdict(_config(), workers=1, out=tmp_path / "fresh")
    assert fresh["samples_s"] == slower["samples_s"] < data["nominal"]["samples_s"]
    assert fresh["references"] == slower["references"] == data["nominal"]["references"]


def test_tornado_bars_are_widest_first_and_a_broken_file_is_one_line(tmp_path):
    data = {"workload": "w", "budget": "1 MW", "references": {"h100": "H100"}, "nominal": {"ratios": {"h100": 2.0}},
            "cases": [{"assumption": "a", "label": "A", "unit": "W", "end": "low", "value": 1.0, "nominal_value": 2.0,
                       "status": "exact", "ratios": {"h100": 1.9}},
                      {"assumption": "b", "label": "B", "unit": "", "end": "high", "value": 3.0, "nominal_value": 2.0,
                       "status": "inputs unchanged", "ratios": {"h100": 2.5}}]}
    bars = tornado_bars(data, "h100")
    assert [b["assumption"] for b in bars] == ["b", "a"] and bars[1]["high"] is None and bars[1]["low"] == 1.9
    (tmp_path / SENSITIVITY_FILE).write_text(json.dumps(data))
    assert 'id="tornado-0"' in sensitivity_section(tmp_path)
    (tmp_path / SENSITIVITY_FILE).write_text("{broken")
    assert "cannot read" in sensitivity_section(tmp_path)
    assert sensitivity_section(tmp_path / "none") == ""


def test_the_vf_exponent_moves_only_the_capped_flagships_not_the_search_or_the_references():
    """The V–f exponent prices a chip run below its silicon's top clock: only the power-capped flagships (and B200's
    bin). Every design and TPUv4, A100, H100 and TPU v5p keep their inputs, so a case needs no search."""
    nominal = search_inputs(_config())
    with moved("voltage_frequency_exponent", ASSUMPTIONS["voltage_frequency_exponent"].low):
        inputs = search_inputs(_config())
    assert {name for name in nominal if inputs[name] != nominal[name]} == {"b200", "gb200", "mi300x"}


def _stored_like(config: SearchConfig) -> dict:
    """A nominal verdict as a stored row holds one (:func:`stored_verdict`'s form), without a search: the H100's
    throughput stands in for the answer's."""
    from experiments.sensitivity import RIVALS, _with_rivals, rival_samples

    references = rival_samples(config, RIVALS)
    figures = {"samples_s": references["h100"], "chips": 1, "design": "d", "plan": "p", "exact": True,
               "budget": config.space.budget.to_dict()}
    return _with_rivals(figures, references) | {"elapsed_s": 0.0}


def test_a_case_that_moves_only_rivals_keeps_the_answer_and_evaluates_them_again(tmp_path, monkeypatch):
    from experiments.sensitivity import merged_summary
    from experiments.system_table import sensitivity_text, uncovered

    monkeypatch.setenv("PHAZE_CACHE_DIR", str(tmp_path / "cache"))
    exponent = ASSUMPTIONS["voltage_frequency_exponent"]
    nominal = _stored_like(_config())
    data = row_sensitivity(_config, "power", workers=1, directory=tmp_path / "out", assumptions=[exponent],
                           say=lambda text: None, nominal=nominal)
    (case,) = data["cases"]
    assert case["status"] == "answer unchanged" and case["samples_s"] == nominal["samples_s"] and data["exact"]
    for name in ("tpuv4", "a100", "h100", "tpuv5p"):
        assert case["ratios"][name] == nominal["ratios"][name]
    for name in ("b200", "mi300x"):  # slower at the lower clock the measured exponent gives: the answer's ratio rises
        assert case["ratios"][name] > nominal["ratios"][name]
        assert data["ranges"][name]["high_by"] == "voltage_frequency_exponent low"
    with moved("voltage_frequency_exponent", exponent.low):
        assert case["references"]["mi300x"] == _stored_like(_config())["references"]["mi300x"]  # fresh, as the model
    # added to a stored summary of a run before the flagships: kept cases, and the table names what is not covered
    older = {"ranges": {"h100": data["ranges"]["h100"]}, "exact": True, "elapsed_s": 5.0,
             "cases": [{"assumption": "pue", "end": "low", "ratios": {"h100": 2.0}, "status": "exact", "label": "PUE",
                        "unit": "", "value": 1.08, "nominal_value": 1.1, "wall_s": 5.0}]}
    summary = merged_summary(older, data)
    assert [c["assumption"] for c in summary["cases"]] == ["pue", "voltage_frequency_exponent"]
    assert summary["ranges"]["h100"]["low"] == min(2.0, nominal["ratios"]["h100"])
    missing = uncovered(summary)
    assert "pue" not in missing[""] and "voltage_frequency_exponent" not in missing[""]
    assert missing["mi300x"] == ["pue"] and "h100" not in missing
    row = {"workload": "tiny", "budget_label": "0.1 MW", "sensitivity": summary}
    text = sensitivity_text([row, {"workload": "other", "budget_label": "1 MW"}])
    assert "No sensitivity run yet: other at 1 MW." in text
    assert "`voltage_frequency_exponent`" in text and "answer unchanged 1" in text
    assert f"{summary['ranges']['mi300x']['low']:.2f}–{summary['ranges']['mi300x']['high']:.2f}×" in text


def test_a_range_end_no_case_moves_is_the_nominals():
    from experiments.sensitivity import ranges

    cases = [{"assumption": "a", "end": "low", "ratios": {"x": 2.0, "y": 1.5}},
             {"assumption": "b", "end": "high", "ratios": {"x": 2.5}}]
    found = ranges({"ratios": {"x": 2.0, "y": 1.0}}, cases)
    assert found["x"] == {"nominal": 2.0, "low": 2.0, "low_by": "nominal", "high": 2.5, "high_by": "b high"}
    assert found["y"] == {"nominal": 1.0, "low": 1.0, "low_by": "nominal", "high": 1.5, "high_by": "a low"}


@pytest.mark.parametrize("stored,args,message", [
    (False, ("--workload", "gpt2-xl"), "no stored table to rescore"),
    (True, ("--workload", "gpt2-xl", "--budget-mw", "2"), "--budget-mw does not apply"),
    (True, ("--workload", "opt-1.3b"), "no stored row opt-1.3b (power/cost); stored: gpt2-xl (power)"),
    (True, ("--workload", "gpt2-xl", "--kind", "cost"), "no stored row gpt2-xl (cost)"),
    (True, ("--workload", "gpt2-xl"), "no stored sensitivity to add to for gpt2-xl (power)")])
def test_from_table_refuses_what_it_cannot_add_to_in_one_line(tmp_path, stored, args, message):
    """``--from-table`` adds cases to a stored row's sensitivity: no table, a row not stored, a budget of its own or a
    row with no sensitivity to add to is one line, exit 2, and nothing is written."""
    import subprocess
    import sys

    from experiments.system_table import TABLE_VERSION

    if stored:
        row = {"workload": "gpt2-xl", "kind": "power", "power_w": 1e6}
        (tmp_path / "system_table.json").write_text(json.dumps({"version": TABLE_VERSION, "rows": [row]}))
    before = sorted(p.name for p in tmp_path.iterdir())
    done = subprocess.run([sys.executable, "-m", "experiments.sensitivity", "--from-table", *args, "--assumption",
                           "voltage_frequency_exponent", "--docs", str(tmp_path), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "out") == before


@pytest.mark.parametrize("kind,budget_mw,message", [
    ("cost", "0.0001", "no iso-cost budget at 0.0001 MW"), ("power", "1e12", "more than any buildable system")])
def test_a_budget_that_buys_no_unit_or_too_many_is_refused_before_any_search(tmp_path, kind, budget_mw, message):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "experiments.sensitivity", "--workload", "gpt2-xl", "--kind", kind,
                           "--budget-mw", budget_mw, "--docs", str(tmp_path / "docs"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert done.stdout == ""  # refused before the first row starts
