"""The README's figures equal their sources, and its Python snippet runs as a reader would paste it.

The headline table (in the README and on the documentation's home page) is read against docs/system_table.json, the
file ``python -m experiments.system_table`` writes, so a re-run of that table makes a stale README fail here instead
of being retyped; the prose ranges beside it are checked against the same rows. The quick start's figures are checked
by running the quick start's own search (slow).
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.system_table import earlier_model, load_rows, readme_table
from phaze_env.hardware.system import DGX_HOST_USD_PER_CHIP

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
HOME = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
SNIPPETS = re.findall(r"^```python\n(.*?)^```", README, flags=re.DOTALL | re.MULTILINE)
ROWS = load_rows(REPO / "docs" / "system_table.json")
REFERENCES = ("tpuv4", "a100", "h100")  # the table's column order
HEADLINE_ROW = re.compile(r"^\| (?P<workload>[\w.-]+) \((?P<mw>[\d.]+) MW(?P<earlier>, earlier model)?\) \| (?P<samples>[\d,.]+) \| "
                          r"(?P<tpuv4>[\d.]+)× \| (?P<a100>[\d.]+)× \| (?P<h100>[\d.]+)× \| "
                          r"(?P<cost_tpuv4>[\d.]+)× / (?P<cost_a100>[\d.]+)× / (?P<cost_h100>[\d.]+)× \|$", re.MULTILINE)


def row(workload: str, kind: str) -> dict:
    return next(r for r in ROWS if r["workload"] == workload and r["kind"] == kind)


def ratio(source: dict, reference: str) -> float:
    """The best system's throughput over a reference's, as docs/system_table.md prints it (chips × peak × MFU)."""
    factors = source["best"]["factors"][reference]
    return factors["chips"] * factors["peak"] * factors["mfu"]


def headline(text: str) -> list[re.Match]:
    return list(HEADLINE_ROW.finditer(text))


@pytest.mark.parametrize("name, text", [("README.md", README), ("docs/index.md", HOME)])
def test_headline_table_is_the_one_the_table_renders(name, text):
    """The whole headline table, header included, is ``experiments.system_table.readme_table`` of the JSON."""
    assert readme_table(ROWS) in text, f"{name}'s headline table is not readme_table(docs/system_table.json)"


@pytest.mark.parametrize("name, text", [("README.md", README), ("docs/index.md", HOME)])
def test_headline_table_figures_equal_docs_system_table_json(name, text):
    rows = headline(text)
    assert [m["workload"] for m in rows] == sorted({r["workload"] for r in ROWS}, key=[r["workload"] for r in ROWS].index), \
        f"{name}'s headline table should have one row per model of docs/system_table.json, in its order"
    for m in rows:
        power, cost = row(m["workload"], "power"), row(m["workload"], "cost")
        where = f"{name}, {m['workload']}"
        assert float(m["mw"]) * 1e6 == power["power_w"], where
        assert bool(m["earlier"]) == (earlier_model(power) or earlier_model(cost)), \
            f"{where}: a row searched by an earlier model says so, and only such a row"
        assert m["samples"] == f"{power['best']['samples_s']:,.1f}", where
        assert power["exact"] and cost["exact"], f"{where}: the table says every row is proven"
        for reference in REFERENCES:
            assert m[reference] == f"{ratio(power, reference):.2f}", f"{where} vs {reference}"
            assert m[f"cost_{reference}"] == f"{ratio(cost, reference):.2f}", f"{where} iso-cost vs {reference}"


def test_headline_prose_ranges_equal_the_table():
    power = [row(r["workload"], "power") for r in ROWS if r["kind"] == "power"]
    cost = [row(r["workload"], "cost") for r in ROWS if r["kind"] == "cost"]

    def span(values, digits=2) -> str:
        return f"{min(values):.{digits}f}–{max(values):.{digits}f}×"

    assert f"It beats TPUv4 by {span([ratio(r, 'tpuv4') for r in power], 1)}" in README
    assert f"A100 by {span([ratio(r, 'a100') for r in power], 1)}" in README
    assert f"H100 by {span([ratio(r, 'h100') for r in power])}, mostly by" in README
    assert f"margins\nover H100 are {span([ratio(r, 'h100') for r in cost])}" in README
    assert f"the ${DGX_HOST_USD_PER_CHIP:,.0f} host share" in README


def test_headline_system_figures_equal_the_table():
    """The prose's per-family wall power, chip counts and network cost are the table's own figures (a range whose ends
    are equal is one figure; line breaks are spaces)."""
    text = " ".join(README.split())

    def thousands(value: float) -> str:
        return f"{value:,.0f}"

    def span(values, form=thousands) -> str:
        low, high = form(min(values)), form(max(values))
        return low if low == high else f"{low}–{high}"

    def wall(reference: str) -> list[float]:
        return [r["references"][reference]["system"]["wall_power_per_chip_w"] for r in ROWS]

    one_pod = [r["references"]["tpuv4"]["system"]["wall_power_per_chip_w"] for r in ROWS
               if r["references"]["tpuv4"]["system"]["pods"] == 1]
    pods = [r["references"]["tpuv4"]["system"]["wall_power_per_chip_w"] for r in ROWS
            if r["references"]["tpuv4"]["system"]["pods"] > 1]
    several = f", {max(pods):.0f} W over several pods" if pods else ""
    assert f"TPUv4: {max(one_pod):.0f} W per chip at the wall{several}" in text
    assert f"A100 DGX {span(wall('a100'))} W" in text
    assert f"H100 DGX {span(wall('h100'))} W" in text
    megawatt = [r for r in ROWS if r["kind"] == "power" and r["power_w"] == 1e6]
    chips = [r["best"]["chips"] for r in megawatt]
    watts = [round(r["best"]["chip_power_w"], -1) for r in megawatt]
    assert f"buys {span(chips)} of its {span(watts)} W chips" in text
    assert {r["references"]["tpuv4"]["chips"] for r in megawatt} == {2688} and "TPUv4 buys 2,688 chips per" in text
    power = [r for r in ROWS if r["kind"] == "power"]
    share = [r["best"]["chips"] / r["references"]["tpuv4"]["chips"] for r in power]
    assert f"with {span(share, lambda v: f'{v:.1f}')}× its chip count" in text
    network = [r["references"]["h100"]["system"]["network_usd_per_chip"] for r in ROWS]
    assert f"(${span(network, lambda v: f'{v / 1e3:.1f}')} k per GPU)" in text


def test_headline_check_fails_on_a_wrong_figure():
    wrong = README.replace(f"{row('gpt2-xl', 'power')['best']['samples_s']:,.1f}", "30,096.8", 1)
    with pytest.raises(AssertionError):
        test_headline_table_figures_equal_docs_system_table_json("README.md", wrong)


def test_readme_has_a_python_snippet_and_links_into_the_docs():
    assert len(SNIPPETS) >= 1
    for target in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (REPO / target).exists(), f"README links to {target}, which does not exist"


@pytest.mark.slow
@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda text: text.splitlines()[0][:40].strip())
def test_readme_snippet_runs_and_prints_its_result(snippet, tmp_path):
    done = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=os.environ | {"PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "a README snippet should print what it computed"
    assert list(tmp_path.iterdir()) == [], "a README snippet should not leave files behind"


@pytest.mark.slow
def test_quick_start_search_prints_the_figures_the_readme_states(tmp_path):
    """The quick start's ``python -m search.phaze`` (16 s cold on an idle machine, about a minute on a busy one; the
    session's cache, shared with the other tests)."""
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "search.phaze", "--workers", "1", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=900,
                          env=os.environ | {"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((out / "results.json").read_text(encoding="utf-8"))
    best, baseline = result["best"]["gpt2-xl"], result["baseline"]["gpt2-xl"]
    assert result["exact"]
    quick_start = README[README.index("## Quick start"):README.index("## What you get")]
    assert f"**{best['throughput_samples_s']:,.1f} samples/s**, against {baseline['throughput_samples_s']:,.1f}" in quick_start
    assert f"{result['architectures']:,} architectures" in quick_start


def test_validation_and_efficiency_figures_equal_their_sources():
    """The two validation errors the README quotes (and names apart) are docs/validation.md's, and the framework
    efficiencies it and the clusters page quote are the constants the presets and stacks use."""
    from phaze_env.cluster import MEGATRON_A100_EFFICIENCY, get_cluster
    from phaze_env.stacks import MEGATRON_H100_EFFICIENCY

    report = (REPO / "docs" / "validation.md").read_text(encoding="utf-8")
    overall = re.search(r"\*\*Mean absolute error: ([\d.]+)%\*\* over (\d+) held-out", report)
    megatron = re.search(r"^\| megatron-lm \| a100 \| [\d.]+ \| [^|]+ \| (\d+) \| \d+ \| ([\d.]+)% \|", report, re.MULTILINE)
    assert overall and megatron, "docs/validation.md's headline or its Megatron-LM A100 row changed shape"
    assert f"mean absolute error {overall[1]} % over {overall[2]} held-out published runs, all stacks" in README
    without = re.search(r"known gaps \(each with its cause below\): mean absolute error ([\d.]+)% over (\d+) cases", report)
    if without:
        assert f"{without[1]} % over\n  the {without[2]} that are not known gaps" in README
        assert f"{without[1]} % over the {without[2]} that are" in HOME
    assert f"{megatron[2]} %\n  over the {megatron[1]} Megatron-LM A100 runs of 2022" in README
    release_2021 = re.search(r"^\| megatron-lm-2021 \| a100 \| [\d.]+ \| [^|]+ \| (\d+) \| \d+ \| ([\d.]+)% \|", report,
                             re.MULTILINE)
    assert release_2021 and f"{release_2021[2]} % over the {release_2021[1]} of 2021" in README
    assert f"mean absolute error {overall[1]} % over {overall[2]} held-out published training runs" in HOME
    assert get_cluster("dgx-a100", 8).stack.framework_efficiency == MEGATRON_A100_EFFICIENCY
    assert f"Megatron-LM's fitted efficiency {MEGATRON_A100_EFFICIENCY:g}" in README
    clusters = (REPO / "docs" / "concepts" / "clusters.md").read_text(encoding="utf-8")
    assert f"**{MEGATRON_A100_EFFICIENCY:g}** (Megatron-LM on A100, fitted)" in clusters
    assert f"Megatron-LM is {MEGATRON_A100_EFFICIENCY:g} on A100 and {MEGATRON_H100_EFFICIENCY:g} on H100" in clusters
    assert get_cluster("dgx-h100", 8).stack.framework_efficiency == 1


def test_the_stack_efficiencies_quoted_are_the_fitted_constants():
    """The prose beside the headline table quotes each chip's fitted system-stack efficiency: the constants, not a copy
    that goes stale when a refit moves them."""
    from phaze_env.stacks import (MEGATRON_CORE_SYSTEM_A100_EFFICIENCY, MEGATRON_CORE_SYSTEM_H100_EFFICIENCY,
                                  MEGATRON_CORE_SYSTEM_TPUV4_EFFICIENCY)
    quoted = (f"TPUv4 {MEGATRON_CORE_SYSTEM_TPUV4_EFFICIENCY:.3f}, A100 {MEGATRON_CORE_SYSTEM_A100_EFFICIENCY:.3f}, "
              f"H100 {MEGATRON_CORE_SYSTEM_H100_EFFICIENCY:.3f}")
    assert quoted in " ".join(README.split())


def test_the_flagship_ranges_quoted_are_the_tables():
    """The README's "against the best you can buy" ranges are the iso-power rows' ratios to each flagship."""
    power = [r for r in ROWS if r["kind"] == "power" and r["power_w"] == 1e6]
    text = " ".join(README.split())
    for name, label in (("b200", "B200"), ("gb200", "GB200"), ("tpuv5p", "TPU v5p"), ("mi300x", "MI300X")):
        ratios = [r["flagships"][name]["ratio"] for r in power]
        assert f"{min(ratios):.2f}–{max(ratios):.2f}× {label}" in text, label


def test_the_sensitivity_ranges_quoted_are_the_tables():
    """The README's "how far each verdict moves" sentence is generated from the rows' sensitivity runs
    (:func:`experiments.sensitivity.readme_ranges`); a re-run of a row that is not re-quoted fails here."""
    from experiments.sensitivity import readme_ranges

    assert readme_ranges(ROWS) in " ".join(README.split())


def test_the_flagship_sensitivity_quoted_is_the_tables():
    """The README's sentence of how far each flagship verdict moves over the assumptions' ranges is generated from the
    rows' sensitivity (:func:`experiments.sensitivity.readme_flagship_ranges`)."""
    from experiments.sensitivity import readme_flagship_ranges

    assert readme_flagship_ranges(ROWS) in " ".join(README.split())


def test_the_rival_runs_error_quoted_is_the_reports():
    """The headline's claim that the table's path reproduces its rivals' published runs "within X %" quotes
    docs/rival_runs.md's largest held-out error (it said 5.6 % after a refit had moved it to 7.2 %)."""
    report = (REPO / "docs" / "rival_runs.md").read_text(encoding="utf-8")
    largest = re.search(r"Held-out runs: \d+, mean \|error\| [\d.]+%, largest ([\d.]+)%", report)
    assert largest, "docs/rival_runs.md's summary line changed shape"
    assert f"MaxText on TPU v4 within {largest[1]} %" in " ".join(README.split())
