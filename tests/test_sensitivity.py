"""The verdict's sensitivity (``experiments.sensitivity``): each assumption's move re-runs the exact search or proves
it need not, a moved search is the one a fresh model gives (no nominal result leaks in through a cache), and the
table and the report show the ranges."""

from __future__ import annotations

import json
import os

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
    from phaze_env.workloads import registry

    monkeypatch.setenv("PHAZE_CACHE_DIR", str(tmp_path / "cache"))
    # the table's render resolves each row's workload by name (experiments.system_table.earlier_model): the tiny model
    # as a built-in, not left there by an earlier test
    monkeypatch.setitem(registry.BUILTIN, TINY.name, TINY)
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
    (True, ("--workload", "gpt2-xl"), "no stored sensitivity to add to for gpt2-xl (power)"),
    ("budget", ("--workload", "gpt2-xl"), "its stored budget (0.5 MW) is not the one the model gives today (1 MW)")])
def test_from_table_refuses_what_it_cannot_add_to_in_one_line(tmp_path, stored, args, message):
    """``--from-table`` adds cases to a stored row's sensitivity: no table, a row not stored, a budget of its own or a
    row with no sensitivity to add to is one line, exit 2, and nothing is written."""
    import subprocess
    import sys

    from experiments.system_table import TABLE_VERSION

    if stored:
        row = {"workload": "gpt2-xl", "kind": "power", "power_w": 1e6}
        if stored == "budget":  # a stored row whose cases' budgets cannot be rebuilt (the model's budget moved)
            row |= {"budget": {"power_w": 5e5, "cost_usd": None}, "sensitivity": {"cases": []}}
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


def _fake_verdict(answer_s: float):
    """A stand-in for :func:`verdict` that runs no search: the answer ``answer_s`` against every rival under the move."""
    from experiments.sensitivity import RIVALS, _with_rivals, rival_samples

    def fake(config, **_):
        figures = {"samples_s": answer_s, "chips": 1, "design": "d", "plan": "p", "exact": True,
                   "budget": config.space.budget.to_dict()}
        return _with_rivals(figures, rival_samples(config, RIVALS)) | {"elapsed_s": 0.0}
    return fake


def _stored_row(config: SearchConfig, nominal: dict, summary: dict) -> dict:
    """A stored table row (the fields :func:`stored_verdict` reads) with its sensitivity ``summary``."""
    from experiments.sensitivity import RIVALS
    from experiments.system_table import FLAGSHIPS

    columns = {n: {"feasible": s is not None, "samples_s": s} for n, s in nominal["references"].items()}
    return {"workload": "tiny", "kind": "power", "budget": config.space.budget.to_dict(), "exact": True,
            "best": {k: nominal[k] for k in ("samples_s", "chips", "design", "plan")},
            "references": {n: columns[n] for n in RIVALS if n not in FLAGSHIPS},
            "flagships": {n: columns[n] for n in FLAGSHIPS}, "sensitivity": summary}


def test_rivals_only_fills_the_flagship_ranges_from_the_stored_answers_and_runs_no_search(tmp_path, monkeypatch):
    """``--rivals-only``: a stored row whose cases predate the flagships gets each flagship's ratio under each case's
    move — the same a full run gives — from the case's stored answer, evaluating only the rivals the move changes and
    never a search; a case whose ratios imply two answers is refused."""
    import experiments.sensitivity as sensitivity
    from experiments.sensitivity import RIVALS, REFERENCES, case_answer, rivals_from_cases, row_summary
    from experiments.system_table import FLAGSHIPS, _without_rivals, uncovered

    monkeypatch.setenv("PHAZE_CACHE_DIR", str(tmp_path / "cache"))
    nominal = _stored_like(_config())
    chosen = [ASSUMPTIONS[n] for n in ("pue", "hbm_usd_per_gb", "host_w.dgx-h100", "voltage_frequency_exponent")]
    with monkeypatch.context() as patch:  # the full run, every case's answer 1.2× the nominal's (no search)
        patch.setattr(sensitivity, "verdict", _fake_verdict(1.2 * nominal["samples_s"]))
        full = row_sensitivity(_config, "power", workers=1, directory=tmp_path / "full", assumptions=chosen,
                               say=lambda text: None, nominal=nominal)
    truth = {(c["assumption"], c["end"]): c for c in full["cases"]}
    assert {c["status"] for c in truth.values()} == {"exact", "inputs unchanged", "answer unchanged"}
    # stored as a run before the flagships: no flagship ratio, no answer, except the V–f exponent's case (kept)
    older = _without_rivals(row_summary(full), FLAGSHIPS)
    older["cases"] = [{k: v for k, v in c.items() if k != "samples_s"} | (
        {"ratios": truth[(c["assumption"], c["end"])]["ratios"]} if c["assumption"] == "voltage_frequency_exponent"
        else {}) for c in older["cases"]]
    row = _stored_row(_config(), nominal, older)
    nominal_inputs = search_inputs(_config())

    def no_search(*args, **kwargs):
        raise AssertionError("--rivals-only ran a search")

    evaluated = []
    rival_samples = sensitivity.rival_samples
    monkeypatch.setattr(sensitivity, "run_search", no_search)
    monkeypatch.setattr(sensitivity, "verdict", no_search)
    monkeypatch.setattr(sensitivity, "rival_samples", lambda config, names: evaluated.append(
        (os.environ.get("PHAZE_MOVED_ASSUMPTIONS"), list(names))) or rival_samples(config, names))
    summary = rivals_from_cases(row, _config, say=lambda text: None)
    for case in summary["cases"]:
        expected = truth[(case["assumption"], case["end"])]
        assert case["ratios"].keys() == expected["ratios"].keys()
        for name, ratio in expected["ratios"].items():
            assert case["ratios"][name] == pytest.approx(ratio, rel=1e-12), (case["assumption"], case["end"], name)
    assert summary["ranges"].keys() == full["ranges"].keys()
    for name in full["ranges"]:
        for end in ("nominal", "low", "high"):
            assert summary["ranges"][name][end] == pytest.approx(full["ranges"][name][end], rel=1e-12)
    assert not {k: v for k, v in uncovered(summary).items() if k in FLAGSHIPS}
    # only the rivals a move changes are evaluated: none at a cost move at iso-power, H100 (and the platforms on its
    # host) at the DGX H100 host's, and the V–f case (it has the flagships) is not touched
    moves = [env for env, _ in evaluated]  # one evaluation per case that moves a rival
    assert len(moves) == len(set(moves)) and not any('"hbm_usd_per_gb"' in env or '"voltage_frequency_exponent"' in env
                                                     for env in moves)
    host = [names for env, names in evaluated if '"host_w.dgx-h100"' in env]
    assert "h100" in host[0] and not {"tpuv4", "a100"} & set(host[0])
    for end in ("low", "high"):
        with moved("pue", ASSUMPTIONS["pue"].ends()[end]):
            changed = search_inputs(_config())
        (names,) = [names for env, names in evaluated if ASSUMPTIONS["pue"].ends()[end].hex() in env]
        assert set(names) == {n for n in RIVALS if changed[n] != nominal_inputs[n] and n in nominal["ratios"]}
    # a stored case whose ratios over two references imply different answers is another model's: refused
    # (kept as it is, said, and the table names it as not covered for the flagships)
    (k,) = [k for k, c in enumerate(row["sensitivity"]["cases"]) if c["assumption"] == "host_w.dgx-h100"]  # one end
    row["sensitivity"]["cases"][k]["ratios"]["tpuv4"] *= 1.01
    with pytest.raises(ValueError, match="implies different answers"):
        case_answer(row["sensitivity"]["cases"][k], {n: nominal["references"][n] for n in REFERENCES})
    said = []
    summary = rivals_from_cases(row, _config, say=said.append)
    refused = row["sensitivity"]["cases"][k]
    assert summary["cases"][k] == refused and any("implies different answers" in text for text in said)
    assert all(refused["assumption"] in uncovered(summary)[n] for n in FLAGSHIPS if n in summary["ranges"])


def test_a_flagship_range_lacking_one_end_of_an_assumption_says_which():
    """A case :func:`rivals_from_cases` refused leaves that end out of the flagships' ranges: the table and the README
    name the assumption and the end, not the assumption as covered."""
    from experiments.sensitivity import readme_flagship_ranges
    from experiments.system_table import _lacking_text, uncovered

    cases = [{"assumption": "pue", "end": "low", "ratios": {"h100": 2.0, "b200": 0.9}},
             {"assumption": "pue", "end": "high", "ratios": {"h100": 1.5}},
             {"assumption": "mac_pj", "end": "low", "ratios": {"h100": 1.9}}]
    summary = {"ranges": {"h100": {}, "b200": {"nominal": 1.1, "low": 0.9, "low_by": "pue low", "high": 1.1,
                                                "high_by": "nominal"}}, "cases": cases}
    missing = uncovered(summary)
    assert missing["b200"] == ["pue high", "mac_pj"] and "h100" not in missing
    assert _lacking_text({"b200": missing["b200"]}) == "every case but `pue` high, `mac_pj`"
    assert _lacking_text({"b200": [], "mi300x": []}) == "every case"
    row = {"workload": "w", "kind": "power", "budget_label": "1 MW", "sensitivity": summary}
    assert readme_flagship_ranges([row]) == ("w at 1 MW 0.90–1.10× B200 (DGX) (not over mac_pj, pue high). "
                                             "Over these ranges 1 of 1 flagship verdicts turn (one end below 1×, "
                                             "the other above): w at 1 MW vs B200 (DGX); their low ends: pue low (1).")


def test_rivals_only_needs_from_table(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "experiments.sensitivity", "--rivals-only", "--workload", "gpt2-xl",
                           "--docs", str(tmp_path), "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "it needs --from-table" in done.stderr


def test_reevaluate_is_a_lower_bound_on_each_moved_search_and_says_so(tmp_path, monkeypatch):
    """``--reevaluate``: a case whose move changes the search's inputs evaluates the nominal answer's design again
    instead of searching; the moved exact search can only do better, the rivals are the same, and the row says its
    cases are lower bounds (not "exact", not "NOT PROVEN")."""
    from experiments.sensitivity import (LOWER_BOUND, design_index, exactness_text, readme_flagship_ranges,
                                         readme_ranges, reevaluated_verdict, stored_verdict)

    monkeypatch.setenv("PHAZE_CACHE_DIR", str(tmp_path / "cache"))
    nominal = verdict(_config(), workers=1, out=tmp_path / "nominal")
    assert design_index(_config(), nominal["knobs"]) is not None
    chosen = [ASSUMPTIONS[n] for n in ("pue", "design_framework_efficiency", "hbm_usd_per_gb")]
    common = dict(workers=1, assumptions=chosen, say=lambda text: None, nominal=nominal)
    bound = row_sensitivity(_config, "power", directory=tmp_path / "bound", reevaluate=True, **common)
    exact = row_sensitivity(_config, "power", directory=tmp_path / "exact", **common)
    searched = 0
    for b, e in zip(bound["cases"], exact["cases"]):
        assert (b["assumption"], b["end"]) == (e["assumption"], e["end"])
        if e["status"] == "exact":
            searched += 1
            assert b["status"] == LOWER_BOUND and b["references"] == e["references"]
            assert b["samples_s"] <= e["samples_s"] * (1 + 1e-12)
            assert all(b["ratios"][n] <= e["ratios"][n] * (1 + 1e-12) for n in e["ratios"])
        else:  # a move the search does not see is not re-evaluated either
            assert b["status"] == e["status"] and b["samples_s"] == e["samples_s"]
    assert searched == 2 and bound["lower_bounds"] == 2  # PUE high and the efficiency's low end (its only one)
    slower = next(c for c in bound["cases"] if c["assumption"] == "design_framework_efficiency" and c["end"] == "low")
    assert slower["samples_s"] < nominal["samples_s"]  # the same design, evaluated under the move, is slower
    summary = row_summary(bound)
    assert summary["signature"] == _config().signature  # the code that computed the cases, for the table to keep them
    assert not summary["exact"] and summary["proven"] and exactness_text(summary).startswith("2 of 5 cases lower")
    row = {"workload": "tiny", "kind": "power", "budget_label": "0.1 MW", "sensitivity": summary}
    assert "(2 of 5 cases lower bounds)" in readme_ranges([row])
    assert "(2 of 5 cases lower bounds)" in readme_flagship_ranges([row])
    assert exactness_text(row_summary(exact)) == "exact"
    # a nominal that names no design (an older table's row), or a design the moved space lacks: one clear error
    with pytest.raises(ValueError, match="names no design"):
        reevaluated_verdict(_config(), {k: v for k, v in nominal.items() if k != "knobs"})
    with pytest.raises(ValueError, match="not in the moved space"):
        reevaluated_verdict(_config(), nominal | {"knobs": nominal["knobs"] | {"num_tc": 10**6}})
    stored = stored_verdict({"best": {"samples_s": 1.0, "chips": 1, "design": "d", "plan": "p",
                                      "accelerator": {k: 1 for k in ("num_tc", "tc_width", "tc_depth", "num_vc",
                                                                     "buffer_mb")},
                                      "system": {k: 1 for k in nominal["knobs"] if k not in ("num_tc", "tc_width",
                                                                                            "tc_depth", "num_vc",
                                                                                            "buffer_mb")}},
                             "references": {}, "exact": True, "budget": {}})
    assert set(stored["knobs"]) == set(nominal["knobs"])


def test_a_row_searched_again_keeps_its_sensitivity_only_around_the_same_nominal():
    """``python -m experiments.system_table`` replaces a row whose signature is not today's; the sensitivity it held is
    kept only around the new row's own ratios (its answer and every rival reproduced), whatever code computed its cases:
    the table then counts the cases computed by the row's code."""
    from experiments.system_table import moved_nominals, row_ratios, sensitivity_kept

    row = {"signature": "new", "best": {"samples_s": 300.0},
           "references": {"h100": {"feasible": True, "samples_s": 100.0}, "a100": {"feasible": False, "samples_s": 0}},
           "flagships": {"b200": {"feasible": True, "samples_s": 200.0}}}
    assert row_ratios(row) == {"h100": 3.0, "b200": 1.5}
    summary = {"signature": "new", "ranges": {"h100": {"nominal": 3.0}, "b200": {"nominal": 1.5}}, "cases": []}
    assert sensitivity_kept({"sensitivity": summary}, row) is summary
    older = summary | {"signature": "old"}
    assert sensitivity_kept({"sensitivity": older}, row) is older  # another code's cases around the same nominal
    assert sensitivity_kept({"sensitivity": summary | {"signature": None}}, row) is not None  # merged from two codes
    moved = summary | {"ranges": {"h100": {"nominal": 3.1}, "b200": {"nominal": 1.5}}}
    assert sensitivity_kept({"sensitivity": moved}, row) is None  # around another nominal
    assert moved_nominals(moved, row) == ["H100 3.1× -> 3×"]
    gone = summary | {"ranges": {"h100": {"nominal": 3.0}, "a100": {"nominal": 2.0}}}  # a rival now infeasible
    assert sensitivity_kept({"sensitivity": gone}, row) is None and moved_nominals(gone, row) == ["A100 2× -> none"]
    assert sensitivity_kept(None, row) is None and sensitivity_kept({}, row) is None


def test_each_case_carries_the_code_that_computed_it_and_the_table_counts_the_rows_own():
    """A sensitivity's cases each keep the search signature of the run that computed them (a stored case of a summary
    from before takes its summary's), the merged summary has one signature only when every case has it, and the
    table's "on the row's code" column counts a row's cases computed by its own code."""
    from experiments.sensitivity import merged_summary, row_summary
    from experiments.system_table import case_signature, cases_on_code, sensitivity_text

    case = {"assumption": "pue", "label": "PUE", "unit": "", "value": 1.08, "nominal_value": 1.1, "samples_s": 2.0,
            "ratios": {"h100": 2.0}, "wall_s": 1.0, "status": "exact"}
    fresh = {"nominal": {"ratios": {"h100": 1.5}}, "ranges": {"h100": {"nominal": 1.5, "low": 1.5, "high": 2.0,
                                                                      "low_by": "nominal", "high_by": "pue low"}},
             "exact": True, "signature": "today", "elapsed_s": 3.0, "cases": [case | {"end": "low"}]}
    summary = row_summary(fresh)
    assert [c["signature"] for c in summary["cases"]] == ["today"]
    stored = {"ranges": {}, "exact": True, "elapsed_s": 2.0, "signature": "before",  # cases without their own
              "cases": [case | {"end": "low"}, case | {"end": "high"}]}
    assert case_signature(stored["cases"][1], stored) == "before"
    merged = merged_summary(stored, fresh)  # the low end replaced by today's, the high end kept from before
    assert {c["end"]: c["signature"] for c in merged["cases"]} == {"low": "today", "high": "before"}
    assert merged["signature"] is None and cases_on_code(merged, "today") == 1 and cases_on_code(merged, "x") == 0
    renewed = merged_summary(merged, fresh | {"cases": [case | {"end": "low"}, case | {"end": "high"}]})
    assert renewed["signature"] == "today" and cases_on_code(renewed, "today") == 2
    text = sensitivity_text([{"workload": "tiny", "budget_label": "0.1 MW", "signature": "today", "sensitivity": merged}])
    assert "on the row's code" in text and "| 1 of 2 |" in text


def test_reevaluate_with_rivals_only_is_refused_in_one_line(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "experiments.sensitivity", "--from-table", "--rivals-only",
                           "--reevaluate", "--workload", "gpt2-xl", "--docs", str(tmp_path), "--out", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--reevaluate does not apply" in done.stderr


@pytest.mark.parametrize("ratios,expected", [
    ({"exact": [0.9, 1.2], "bound": []}, "turns"),
    ({"exact": [1.2, 1.3], "bound": [0.9]}, "may turn"),  # the moved search may do better than the bound
    ({"exact": [0.8, 0.9], "bound": [0.95]}, "may turn"),  # ... and may win
    ({"exact": [0.9], "bound": [1.05]}, "turns"),  # a lower bound above 1× is above
    ({"exact": [1.2, 1.3], "bound": [1.1]}, None),
    ({"exact": [0.8, 0.9], "bound": []}, None)])
def test_a_verdict_turns_only_on_exact_ratios_below_one_and_may_turn_on_a_bound(ratios, expected):
    from experiments.sensitivity import LOWER_BOUND, turn

    nominal, *others = ratios["exact"]
    cases = [{"assumption": "a", "end": "low", "status": "exact", "ratios": {"b200": r}} for r in others] + \
        [{"assumption": "b", "end": "high", "status": LOWER_BOUND, "ratios": {"b200": r}} for r in ratios["bound"]]
    assert turn({"ranges": {"b200": {"nominal": nominal}}, "cases": cases}, "b200") == expected


def test_exact_cases_replacing_every_lower_bound_make_the_row_exact_again():
    """``--from-table`` re-running every case of a row that had lower bounds: the merged summary is exact (its
    exactness follows the merged cases, not the stored summary's flag)."""
    from experiments.sensitivity import LOWER_BOUND, exactness_text, merged_summary

    case = {"assumption": "pue", "label": "PUE", "unit": "", "value": 1.08, "nominal_value": 1.1, "samples_s": 2.0,
            "ratios": {"h100": 2.0}, "wall_s": 1.0}
    stored = {"ranges": {}, "exact": False, "proven": True, "lower_bounds": 2, "elapsed_s": 2.0, "signature": "s",
              "cases": [case | {"end": "low", "status": LOWER_BOUND}, case | {"end": "high", "status": LOWER_BOUND}]}
    fresh = {"nominal": {"ratios": {"h100": 1.5}}, "ranges": {}, "exact": True, "proven": True, "lower_bounds": 0,
             "signature": "s", "elapsed_s": 3.0,
             "cases": [case | {"end": "low", "status": "exact"}, case | {"end": "high", "status": "exact"}]}
    merged = merged_summary(stored, fresh)
    assert merged["exact"] and merged["lower_bounds"] == 0 and exactness_text(merged) == "exact"
    partly = merged_summary(stored, fresh | {"cases": fresh["cases"][:1]})  # one bound left
    assert not partly["exact"] and partly["proven"] and partly["lower_bounds"] == 1
    assert exactness_text(partly).startswith("1 of 2 cases lower bounds")


def test_merge_takes_each_rows_better_cases_from_another_copy_and_refuses_a_conflict(tmp_path):
    """Two runs side by side each write their own --docs copy; --merge brings one's cases into the other: per
    assumption and end the case on the row's code, then exact over a lower bound; the ranges and counts recomputed;
    a copy of another search or a conflicting case is one clear error."""
    import copy
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from experiments.sensitivity import LOWER_BOUND, merge_cases, merge_docs
    from experiments.system_table import load_rows

    source = Path(__file__).resolve().parents[1] / "docs" / "system_table.json"
    main, other = tmp_path / "main", tmp_path / "other"
    for directory in (main, other):
        directory.mkdir()
        shutil.copy(source, directory / "system_table.json")
    rows = load_rows(other / "system_table.json")
    row = next(r for r in rows if r.get("sensitivity") and r["sensitivity"]["lower_bounds"])
    index, case = next((i, c) for i, c in enumerate(row["sensitivity"]["cases"]) if c["status"] == LOWER_BOUND)
    exact = dict(case, status="exact", signature=row["signature"], ratios={n: v * 1.5 for n, v in case["ratios"].items()})
    theirs = copy.deepcopy(row)
    theirs["sensitivity"]["cases"][index] = exact
    mine = copy.deepcopy(row)
    summary, changed = merge_cases(mine, theirs)
    assert changed == 1 and summary["lower_bounds"] == row["sensitivity"]["lower_bounds"] - 1
    assert exact in summary["cases"] and len(summary["cases"]) == len(row["sensitivity"]["cases"])
    assert any(r["high"] >= max(exact["ratios"].values()) for r in summary["ranges"].values())
    assert merge_cases(copy.deepcopy(theirs), mine)[1] == 0  # the lower bound never replaces the exact case
    clash = copy.deepcopy(row)
    clash["sensitivity"]["cases"][index] = dict(case, ratios={n: v * 0.5 for n, v in case["ratios"].items()})
    with pytest.raises(ValueError, match="differs between the copies"):
        merge_cases(copy.deepcopy(row), clash)
    moved_answer = copy.deepcopy(theirs)
    moved_answer["best"] = dict(moved_answer["best"], samples_s=1.0)
    with pytest.raises(ValueError, match="different answers"):
        merge_cases(copy.deepcopy(row), moved_answer)
    assert merge_docs(main, [other], say=lambda _: None) == 0  # identical copies: nothing to do, nothing written
    done = subprocess.run([sys.executable, "-m", "experiments.sensitivity", "--merge", str(other), "--workload",
                           "gpt2-xl", "--docs", str(main)], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--merge runs no search" in done.stderr
    done = subprocess.run([sys.executable, "-m", "experiments.sensitivity", "--merge", str(tmp_path / "none"),
                           "--docs", str(main)], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "holds no system_table.json" in done.stderr
