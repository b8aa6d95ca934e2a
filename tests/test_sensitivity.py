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
