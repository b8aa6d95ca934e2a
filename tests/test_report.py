"""``report.html``: every search writes it, self-contained (plotly.js embedded, nothing fetched), naming the answer;
and headless Chromium renders its charts.

The rendering test skips, saying why, where Chromium is not installed; with ``PHAZE_REQUIRE_CHROMIUM=1`` (CI)
that is a failure instead.
"""

from __future__ import annotations

import dataclasses
import html
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from phaze_env.evaluate import BREAKDOWN_LABELS
from phaze_env.hardware import Accelerator
from search.outputs import baseline_label
from search.phaze import SearchConfig, run_search
from search.report import front_indices, main, report_html
from search.result import SharedDesign, UnprovenDesign
from search.store import ResultsStore
from tiny import CLUSTER, SPACE, TINY



def _chromium() -> str:
    """Chromium's path; skips (a machine without it) or fails where the test is required to run (CI)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        reason = "chromium not found on PATH (Debian: apt-get install chromium)"
        if os.environ.get("PHAZE_REQUIRE_CHROMIUM") == "1":
            pytest.fail(f"PHAZE_REQUIRE_CHROMIUM=1 but {reason}")
        pytest.skip(reason)
    return path


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """One tiny exact search (best mode) with its outputs; the cache is private to this module."""
    root = tmp_path_factory.mktemp("report")
    patch = pytest.MonkeyPatch()
    patch.setenv("PHAZE_CACHE_DIR", str(root / "cache"))
    try:
        out = root / "out"
        out.mkdir()
        result = run_search(SearchConfig(workloads=[TINY], cluster=CLUSTER, space=SPACE, tensor_widths=(1, 2)), out=out)
    finally:
        patch.undo()
    return out, result


def test_report_is_self_contained_and_names_the_answer(searched):
    out, result = searched
    page = (out / "report.html").read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]+src=", page), "every script must be inline: the page works offline"
    assert not re.search(r"<link[^>]+href=\"?https?:", page)
    assert "Plotly" in page and len(page) > 3_000_000, "plotly.js must be embedded"
    best = result.best[TINY.name]
    assert best is not None and best.feasible
    for text in (Accelerator.from_dict(best.accelerator).notation(), best.plan.notation,
                 baseline_label(result.baseline[TINY.name]), *BREAKDOWN_LABELS.values()):
        assert text in page, text
    assert ("exact: proven" if result.exact else "exact: NOT PROVEN") in page
    assert f"<td>{result.evaluations:,} (" in page


def test_every_mode_reports_its_answer_and_an_unproven_answer_says_so(searched):
    out, result = searched
    config = SearchConfig(workloads=[TINY], cluster=CLUSTER, space=SPACE, tensor_widths=(1, 2))
    records = _records(out, config)
    best = result.best[TINY.name]
    slower = dataclasses.replace(best, throughput_samples_s=best.throughput_samples_s / 2, area_mm2=best.area_mm2 / 2,
                                 plan=dataclasses.replace(best.plan, notation="t9p9d9m9"))
    pareto = dataclasses.replace(result, mode="pareto", best={}, pareto={TINY.name: (slower, best)})
    page = report_html(pareto, records, CLUSTER, out)
    assert "fastest on the front" in page and "Pareto front, exact (2)" in page and "t9p9d9m9" in page
    shared = dataclasses.replace(result, mode="shared", shared=SharedDesign(
        how="mean", throughput_samples_s=slower.throughput_samples_s, accelerator=slower.accelerator,
        per_workload={TINY.name: slower}))
    page = report_html(shared, records, CLUSTER, out)
    assert "shared design" in page and "one design for every workload" in page and "t9p9d9m9" in page
    unproven_row = UnprovenDesign(workload=TINY.name, index=0, accelerator=best.accelerator, schedules=(),
                                  throughput_samples_s=best.throughput_samples_s, worst_gap=0.03, blocks_exact=True,
                                  throughput_bound_samples_s=best.throughput_samples_s * 1.1)
    unproven = dataclasses.replace(result, exact=False, unproven=(unproven_row,),
                                   best={TINY.name: dataclasses.replace(best, proven=False, worst_gap=0.03)})
    page = report_html(unproven, records, CLUSTER, out)
    assert "exact: NOT PROVEN" in page and "NOT PROVEN (worst gap 3.00%)" in page
    assert html.escape(unproven.exactness_lines()[1]) in page
    baseline = result.baseline[TINY.name]
    nothing = dataclasses.replace(result, best={TINY.name: None}, baseline={TINY.name: dataclasses.replace(
        baseline, feasible=False, reason="does not fit in HBM")})
    page = report_html(nothing, records, CLUSTER, out)
    assert "none found" in page and "infeasible: does not fit in HBM" in page and "time per batch, part by part" not in page


def test_rebuild_writes_the_same_report_from_the_out_directory(searched, tmp_path, capsys):
    out, _ = searched
    written = (out / "report.html").read_text(encoding="utf-8")
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("results.json", "results.db"):
        (copy / name).write_bytes((out / name).read_bytes())
    assert main([str(copy)]) == 0
    assert capsys.readouterr().out.strip() == str(copy / "report.html")
    # the same page but for the output directory the header names
    assert (copy / "report.html").read_text(encoding="utf-8") == written.replace(str(out), str(copy))
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path / "empty")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "cannot read" in error and "results.json" in error


def _records(out, config):
    """The search's records as the results store holds them (what write_outputs was given)."""
    store = ResultsStore(out / "results.db", config.signature, config.arguments())
    try:
        return store.load()
    finally:
        store.close()


def test_front_is_the_points_nothing_beats():
    rng = np.random.default_rng(0)
    points = [tuple(p) for p in rng.integers(0, 8, size=(40, 2)).astype(float)]
    front = front_indices(points)
    beaten = {i for i, (a, t) in enumerate(points) for b, u in points if b <= a and u >= t and (b, u) != (a, t)}
    assert {points[i] for i in front} == {p for i, p in enumerate(points) if i not in beaten and p[1] > 0}
    assert [points[i][0] for i in front] == sorted(points[i][0] for i in front)


@pytest.mark.slow
def test_chromium_renders_the_charts(searched, tmp_path):
    chromium = _chromium()
    out, _ = searched
    url = (out / "report.html").resolve().as_uri()
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1000", "--virtual-time-budget=5000"]
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('class="main-svg"') >= 2, "Plotly drew no chart"  # the scatter and the breakdown bars
    assert "scatterlayer" in dom.stdout and "barlayer" in dom.stdout
    png = tmp_path / "report.png"
    shot = subprocess.run([*flags, f"--screenshot={png}", url], capture_output=True, text=True, timeout=120)
    assert shot.returncode == 0 and png.exists(), shot.stderr[-2000:]
    import matplotlib.image

    pixels = matplotlib.image.imread(png)
    assert pixels.shape[:2] == (1000, 1400)
    assert len(np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)) > 50, "the screenshot is blank"


@pytest.mark.slow
def test_chromium_renders_the_sensitivity_tornado(searched, tmp_path):
    """A search with a sensitivity.json next to it: report.html gains one tornado per reference, and Chromium draws
    them (a bar per assumption, both ends of its range)."""
    import json

    from search.report import SENSITIVITY_FILE, rebuild

    chromium = _chromium()
    out, _ = searched
    copy = tmp_path / "out"
    copy.mkdir()
    for name in ("results.json", "results.db"):
        (copy / name).write_bytes((out / name).read_bytes())
    cases = [{"assumption": name, "label": name, "unit": "", "end": end, "value": value, "nominal_value": 1.0,
              "status": "exact", "ratios": {"h100": ratio, "a100": ratio * 2}}
             for name, end, value, ratio in (("pue", "low", 0.9, 1.4), ("pue", "high", 1.4, 1.8),
                                             ("hbm", "low", 0.5, 1.55))]
    (copy / SENSITIVITY_FILE).write_text(json.dumps({
        "workload": "tiny", "budget": "1 MW", "references": {"a100": "A100", "h100": "H100"},
        "nominal": {"ratios": {"h100": 1.6, "a100": 3.2}}, "cases": cases}))
    page = rebuild(copy).read_text(encoding="utf-8")
    assert 'id="tornado-0"' in page and 'id="tornado-1"' in page
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1000", "--virtual-time-budget=5000"]
    dom = subprocess.run([*flags, "--dump-dom", (copy / "report.html").resolve().as_uri()], capture_output=True,
                         text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    tornado = dom.stdout[dom.stdout.index('id="tornado-0"'):]
    assert 'class="main-svg"' in tornado, "Plotly drew no tornado"
    assert tornado.count('class="main-svg"') >= 2 and "barlayer" in tornado  # one chart per reference, drawn as bars
    assert re.search(r'class="point"', tornado), "the tornado has no bars"


def test_missing_chromium_skips_or_fails_when_required(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("PHAZE_REQUIRE_CHROMIUM", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium not found"):
        _chromium()
    monkeypatch.setenv("PHAZE_REQUIRE_CHROMIUM", "1")
    with pytest.raises(pytest.fail.Exception, match="PHAZE_REQUIRE_CHROMIUM=1 but chromium not found"):
        _chromium()


@pytest.mark.slow
def test_a_system_front_over_three_objectives_is_charted_and_rebuilt(tmp_path, monkeypatch):
    """Pareto mode over throughput, carbon per token and area on a small system space: the chart plots throughput
    against area coloured by carbon per token, every front design in it with its figures in the hover;
    ``python -m search.report`` rebuilds the same page from the out directory."""
    from plotly.io.json import to_json_plotly
    from test_system_space import TRAINING, WIDTHS, small_space

    monkeypatch.setenv("PHAZE_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "out"
    out.mkdir()
    objectives = ("throughput", "carbon_per_token", "area")
    result = run_search(SearchConfig(workloads=(TINY,), cluster=TRAINING, space=small_space(), tensor_widths=WIDTHS,
                                     pareto=True, objectives=objectives), out=out)
    page = (out / "report.html").read_text(encoding="utf-8")
    front = result.pareto[TINY.name]
    assert result.exact and front and f"Pareto front, exact ({len(front)})" in page
    def charted(text: str) -> bool:  # as the chart's JSON spells it ("/" and non-ASCII escaped)
        return to_json_plotly(text)[1:-1] in page

    assert charted("training throughput vs die area") and charted("carbon per token (operational + embodied) (g CO2e/token")
    for design in front:
        assert charted(design.plan.notation)
        assert charted(f"carbon per token (operational + embodied) {design.system['carbon_per_token_g']:,.4g} g CO2e/token")
    written = page
    (out / "report.html").unlink()
    assert main([str(out)]) == 0
    assert (out / "report.html").read_text(encoding="utf-8") == written


def test_front_indices_is_the_area_throughput_front_by_brute_force():
    """The chart's front: the feasible points no other point beats on both area (≤) and throughput (≥, one
    strictly), one per identical pair (the first), ordered by area; ties in area keep only the faster."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(0, 12))
        points = [(float(rng.choice([100, 200, 300, 400])), float(rng.choice([0, 1, 2, 3, 5]))) for _ in range(n)]
        expected = [i for i, (a, t) in enumerate(points) if t > 0
                    and not any((b <= a and u >= t and (b < a or u > t)) or ((b, u) == (a, t) and j < i)
                                for j, (b, u) in enumerate(points))]
        assert front_indices(points) == sorted(expected, key=lambda i: (points[i][0], -points[i][1]))
