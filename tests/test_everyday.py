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
    with pytest.raises(ValueError, match=r"buys \d\.\d+e\+\d+ chips of .* more than any buildable system") as refused:
        DesignSpace.named("system", budget_usd=1e300).arch_space()  # a count of 300 digits is shown as a float
    assert len(str(refused.value)) < 250


def test_a_budget_whose_watts_overflow_a_float_says_so(tmp_path):
    """``--budget-mw 1e308`` became an infinite budget in W, refused as "got inf" without saying why."""
    one_clear_line(run_cli("--space", "system", "--budget-mw", "1e308", "--quiet", "--out", str(tmp_path)), 2,
                   "a budget of 1e+308 MW overflows a float in W (at most 1.8e+302 MW)")


def test_a_budget_that_buys_no_whole_unit_is_one_line(tmp_path):
    """Issue 29: a budget that buys no whole topology unit of any design of the system space is refused in one line."""
    one_clear_line(run_cli("--space", "system", "--budget-mw", "0.0001", "--quiet", "--out", str(tmp_path)), 2,
                   "no design of the system space fits its area window and buys a whole topology unit at 0.0001 MW")


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


@pytest.fixture(scope="module")
def system_run(tmp_path_factory):
    """A small system-space search for throughput per $ on the tiny model, its console text and output directory."""
    from rich.console import Console

    from phaze_env.cluster import Cluster
    from phaze_env.workloads.registry import BUILTIN
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
    out = tmp_path_factory.mktemp("system")
    result = run_search(config, workers=1, out=out, progress=ConsoleProgress(console, config.score_text))
    return result, console.export_text(), out, config


def test_the_optimum_is_printed_and_written_in_its_objectives_unit(system_run):
    """``--objective throughput_per_usd`` printed "optimum 0.0 samples/s" (its score, tokens/s per $ over the
    sequence length, under the throughput's unit) and results.json did not name its objective."""
    from rich.console import Console

    from search.cli import comparison_table

    result, shown, _, _ = system_run
    best = result.best[TINY.name]
    per_usd = best.tokens_s / best.system["cluster_cost_usd"]
    assert f"optimum {per_usd:.3g} tokens/s per $" in shown and "samples/s" not in shown
    data = json.loads(result.to_json())
    assert data["objective"] == "throughput_per_usd"
    assert data["best"][TINY.name]["objectives"] == {"throughput_per_usd": pytest.approx(per_usd, rel=1e-12)}
    console = Console(record=True, width=300)
    console.print(comparison_table("t", best, result.baseline[TINY.name], result.objective))
    assert "throughput_per_usd (tokens/s per $)" in console.export_text()


def test_the_report_names_its_objective_and_gives_the_optimum_in_its_unit(system_run):
    """report.html of a ``--objective throughput_per_usd`` search named no objective and showed only samples/s: the
    best design looked chosen for a figure the baseline could beat. It now names the objective with its unit and
    sense, and gives both designs' figure for it, as the console's table does."""
    import html

    from search.objectives import figure_text, label

    result, _, out, _ = system_run
    page = html.unescape((out / "report.html").read_text())
    best, baseline = result.best[TINY.name], result.baseline[TINY.name]
    assert f"<b>objective</b> {label('throughput_per_usd', True)}</p>" in page
    assert "<th>throughput_per_usd</th><th>samples/s</th>" in page
    for design in (best, baseline):
        per_usd = design.tokens_s / design.system["cluster_cost_usd"]
        assert f"<td>{figure_text('throughput_per_usd', per_usd)}</td>" in page


def test_each_area_has_one_name_and_one_meaning_in_every_output(system_run):
    """"area mm²" was the cores and buffer in the console and results.json but the whole die in report.html and
    evaluations.csv. Now ``area_mm2`` / "architecture mm² (cores + buffer)" is the former everywhere and
    ``chip_area_mm2`` / "die mm² (whole chip)" the latter (the system space's area objective)."""
    import csv

    from rich.console import Console

    from phaze_env.hardware import Accelerator
    from search.cli import comparison_table
    from search.objectives import ARCHITECTURE_AREA_LABEL, DIE_AREA_LABEL

    result, _, out, _ = system_run
    best = json.loads((out / "results.json").read_text())["best"][TINY.name]
    assert best["area_mm2"] == pytest.approx(Accelerator.from_dict(best["accelerator"]).area_mm2)
    assert best["system"]["chip_area_mm2"] > best["area_mm2"]
    rows = [r for r in csv.DictReader((out / "evaluations.csv").open()) if r["status"] == "evaluated"
            and r["plan"] == best["plan"]["notation"] and float(r["throughput_samples_s"]) == best["throughput_samples_s"]]
    assert rows and float(rows[0]["area_mm2"]) == pytest.approx(best["area_mm2"])
    assert float(rows[0]["chip_area_mm2"]) == pytest.approx(best["system"]["chip_area_mm2"])
    page = (out / "report.html").read_text()
    assert f"<th>{DIE_AREA_LABEL}</th>" in page and "<th>area mm²</th>" not in page
    console = Console(record=True, width=300)
    console.print(comparison_table("t", result.best[TINY.name], result.baseline[TINY.name], result.objective))
    text = console.export_text()
    assert ARCHITECTURE_AREA_LABEL in text and DIE_AREA_LABEL in text and "area mm²" not in text


def test_the_report_hover_tells_system_designs_apart(system_run):
    """Two system designs with the same cores (here: 50 or 100 GB/s links, torus or switched) had the same hover."""
    result, _, out, _ = system_run
    page = (out / "report.html").read_text().replace("\\u002f", "/")  # plotly's JSON escapes the slash
    best = result.best[TINY.name]
    line = (f"die {best.system['chip_area_mm2']:.0f} mm² · HBM {best.system['hbm_gb']:g} GiB at "
            f"{best.system['hbm_bandwidth_Bps'] / 1e12:.2f} TB/s · 6×{best.system['link_GBps']:g} GB/s links · "
            f"{best.system['topology']} · {best.system['n_devices']:,} chips")
    # plotly writes its JSON with orjson when installed (non-ASCII as is), else with the json module (escaped)
    def shown(text: str) -> bool:
        return text in page or json.dumps(text)[1:-1] in page

    assert shown(line)
    assert shown("6×50 GB/s links") and shown("6×100 GB/s links")  # the evaluated designs differ in their links


TINY_ARGS = ["--workload", TINY.name, "--space", "reduced", "--devices", "16", "--batch", "64", "--microbatch", "1",
             "--hbm-gb", "32", "--tensor-widths", "1", "--workers", "1", "--quiet"]


@pytest.fixture
def tiny_registered():
    from phaze_env.workloads.registry import BUILTIN

    BUILTIN.setdefault(TINY.name, TINY)


@pytest.mark.parametrize("offset", [8192, 3 * 4096])
def test_a_damaged_results_store_is_one_clear_message(tiny_registered, tmp_path, capsys, offset):
    """A results.db damaged part-way (a page overwritten) once ended in sqlite3.DatabaseError or a JSON error: now
    one line naming the file and what to do, status 2; ``--fresh`` starts afresh."""
    from search.phaze import main

    args = [*TINY_ARGS, "--out", str(tmp_path)]
    assert main(args) == 0
    db = tmp_path / "results.db"
    data = bytearray(db.read_bytes())
    assert len(data) > offset + 3000
    data[offset:offset + 3000] = b"Z" * 3000
    db.write_bytes(bytes(data))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(args)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"the results store {db} is damaged" in err and "--fresh" in err and "move it away" in err
    assert main([*args, "--fresh"]) == 0


def test_ctrl_c_before_any_design_names_no_store(tiny_registered, tmp_path, capsys, monkeypatch):
    """Ctrl-C while tracing or bounding: nothing is saved yet, and results.db may not exist — the line said
    "0 designs saved in …/results.db"."""
    import search.cli
    from search.phaze import main

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(search.cli, "run_search", interrupted)
    assert main([*TINY_ARGS, "--out", str(tmp_path / "new")]) == 130
    err = capsys.readouterr().err
    assert err == "interrupted before any design was evaluated — nothing saved; rerun the same command to start again\n"


def test_each_search_writes_to_a_directory_of_its_own_and_the_same_command_resumes(tiny_registered, tmp_path,
                                                                                    monkeypatch, capsys):
    """Every README example wrote to out/phaze and silently replaced the last one's results."""
    from search.phaze import main

    monkeypatch.chdir(tmp_path)
    assert main(TINY_ARGS) == 0
    assert main(["32" if arg == "64" else arg for arg in TINY_ARGS]) == 0  # another search: --batch 32
    runs = sorted(p for p in (tmp_path / "out" / "phaze").iterdir())
    assert len(runs) == 2 and all((run / "results.json").exists() for run in runs)
    assert all(run.name.startswith(f"{TINY.name}-") for run in runs)
    capsys.readouterr()
    assert main([*TINY_ARGS[:-1]]) == 0  # the first command again, with progress: it resumes from its directory
    out = capsys.readouterr().out
    assert "resumed" in out and len(list((tmp_path / "out" / "phaze").iterdir())) == 2


def test_expert_parallelism_on_a_dense_model_is_refused_alike(tmp_path):
    """``+e=auto`` on a dense model silently became e = 1 while ``e8`` was refused."""
    for plan in ("+e=auto+rc=none|full", "e8+rc=none|full"):
        one_clear_line(run_cli("--plan", plan, "--quiet", "--out", str(tmp_path)), 2, "gpt2-xl")
    one_clear_line(run_cli("--plan", "+e=auto+rc=none|full", "--quiet", "--out", str(tmp_path)), 2, "dense")
    out = subprocess.run([sys.executable, "-m", "phaze_env.evaluate", "--workload", "gpt2-xl", "--plan", "t1p1+e=auto"],
                         capture_output=True, text=True)
    one_clear_line(out, 2, "dense")


def test_a_batch_that_does_not_split_over_the_replicas_is_reported(tiny_registered, capsys):
    """Decision (issue 27, everyday use): a plan whose d·m does not divide the global batch stays allowed — its
    padded slots are idle time the plan's time already counts, and a stack that lets replicas run uneven counts
    runs it; refusing it would make the free search's answer impossible to pin — but it is never silent: the
    evaluator's report and the search's "why" lines say so."""
    from phaze_env.evaluate import main as evaluate_main
    from phaze_env.placement.inputs import uneven_batch_note

    assert uneven_batch_note(64, 4, 2) == ""
    note = uneven_batch_note(4096, 78, 1)
    assert "d=78" in note and "53 microbatches" in note and "38 of the 4,134 sample slots are idle" in note
    args = ["--workload", TINY.name, "--preset", "tpuv4", "--cluster", "phaze", "--devices", "3", "--batch", "8",
            "--plan", "t1p1d3m1"]
    assert evaluate_main(args) == 0
    assert "batch split     the global batch of 8 does not split evenly over d=3" in capsys.readouterr().out
    assert evaluate_main([*args, "--json"]) == 0
    assert "9 sample slots" in json.loads(capsys.readouterr().out)["batch_split"]
    assert evaluate_main([*args[:-1], "t1p1d2m1", "--devices", "2"]) == 0
    assert "batch split" not in capsys.readouterr().out


def test_the_front_plots_title_fits_its_figure(system_run):
    """The system-space PNG's title ran past the figure's edge and was cut; the best design of a per-$ search was
    one dot among the others."""
    import matplotlib.pyplot as plt

    from search.outputs import front_figure
    from search.store import ResultsStore

    result, _, out, config = system_run
    store = ResultsStore(out / "results.db", config.signature, config.arguments())
    try:
        records = store.load()
    finally:
        store.close()
    fig = front_figure(result, records, config)
    try:
        fig.canvas.draw()
        figure_box = fig.bbox
        for ax in fig.axes:
            box = ax.title.get_window_extent()
            assert figure_box.x0 <= box.x0 and box.x1 <= figure_box.x1, ax.title.get_text()
            assert "system space" in ax.title.get_text()
        # the answer of a per-$ search is not the front's top: it is marked, with its figure in the objective's unit
        best = result.best[TINY.name]
        per_usd = best.tokens_s / best.system["cluster_cost_usd"]
        marked = [c for c in fig.axes[0].collections if c.get_label() == f"best design: {per_usd:.3g} tokens/s per $"]
        assert len(marked) == 1
        assert marked[0].get_offsets().tolist() == [[best.system["chip_area_mm2"], best.throughput_samples_s]]
    finally:
        plt.close(fig)


def test_convergence_curves_are_told_apart_and_their_legend_is_readable():
    """14 strategies drew 13 look-alike colours (tab20's light pairs) without markers, legend at 8 pt."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb

    from experiments.compare_strategies import convergence_figure

    strategies = [f"strategy-{i}" for i in range(14)]
    rows = [{"workload": "w", "strategy": s, "seed": seed, "evaluation": n, "best_normalized": min(1.0, n / (10 + i))}
            for i, s in enumerate(strategies) for seed in (0, 1) for n in range(1, 21)]
    meta = {"cluster": {"n_devices": 16, "link_bandwidth_Bps": 4e9, "global_batch": 64}, "seeds": 2, "budget": 20,
            "space_designs": 100}
    fig = convergence_figure(rows, meta)
    try:
        lines = [line for line in fig.axes[0].get_lines() if line.get_label() in strategies]
        assert len(lines) == 14
        styles = [(to_rgb(line.get_color()), line.get_marker(), line.get_linestyle()) for line in lines]
        assert all(marker not in (None, "None", "") for _, marker, _ in styles)
        for i, (colour, marker, dash) in enumerate(styles):
            for other, other_marker, other_dash in styles[i + 1:]:
                alike = sum((a - b) ** 2 for a, b in zip(colour, other)) ** 0.5 < 0.3
                assert not alike or (marker != other_marker and dash != other_dash)
        assert fig.legends[0].get_texts()[0].get_fontsize() >= 10
    finally:
        plt.close(fig)


def test_tracing_and_bounding_report_a_total_and_give_the_same_bounds(tiny_registered):
    """Bounding showed only a spinner: it now runs variant by variant (tracing graph by graph) with a total, and the
    bounds are those of one joint call."""
    from phaze_env.cluster import Cluster
    from search.bounds import throughput_bounds
    from search.config import SearchConfig
    from search.exact import ExactSearch
    from search.progress import SearchProgress
    from search.run import run_search
    from tiny import SPACE

    class Recorder(SearchProgress):
        def __init__(self):
            self.events = []

        def tracing(self, workload, done, total):
            self.events.append(("tracing", done, total))

        def bounded(self, workload, done, total):
            self.events.append(("bounded", done, total))

    config = SearchConfig(workloads=[TINY.name], cluster=Cluster(n_devices=16, global_batch=64), space=SPACE,
                          tensor_widths=(1, 2))
    progress = Recorder()
    run_search(config, workers=1, progress=progress)
    variants = len(config.tensor_widths) * len(SPACE.microbatch)
    for kind in ("tracing", "bounded"):
        assert [e[1:] for e in progress.events if e[0] == kind] == [(i, variants) for i in range(1, variants + 1)]
    search = ExactSearch(config, executor=None)
    search.compute_bounds()
    joint = throughput_bounds(TINY, config.arch, config.cluster, microbatch=SPACE.microbatch, tensor_widths=(1, 2))
    assert (search.bounds[TINY.name] == joint).all()


def test_the_system_spaces_bounding_counts_its_row_groups(tiny_registered):
    """The system space bounded one tensor width per part: gpt2-xl (one width) showed "bounding 18,750
    architectures" with a spinner and no time left for 9 s, then "part 1 of 1". Its parts are now tensor width × row
    group, and the bounds are those of one joint call."""
    from phaze_env.cluster import Cluster
    from search.bounds import bounding_groups, throughput_bounds
    from search.config import SearchConfig
    from search.exact import ExactSearch
    from search.progress import SearchProgress

    class Recorder(SearchProgress):
        def __init__(self):
            self.events = []

        def bounded(self, workload, done, total):
            self.events.append((done, total))

    space = DesignSpace.named("system", budget_w=1e5, die_area_mm2=(600.0,), hbm_stacks=(4,), links=(6,),
                              link_GBps=(50.0, 100.0), number_format=("bf16",), hbm_generation=("hbm3e",),
                              topology=("torus", "switched"), num_tc=(4, 8), tc_width=(128,), tc_depth=(128,),
                              num_vc=(2,), buffer_mb=(128,), microbatch=(1,), recompute=(False,))
    config = SearchConfig(workloads=[TINY.name], cluster=Cluster(global_batch=64), space=space, tensor_widths=(1, 2))
    progress = Recorder()
    search = ExactSearch(config, executor=None, progress=progress)
    search.compute_bounds()
    groups = len(bounding_groups(config.arch, config.cluster))
    assert groups > 1
    total = 2 * groups
    assert progress.events == [(i, total) for i in range(1, total + 1)]
    joint = throughput_bounds(TINY, config.arch, config.cluster, microbatch=space.microbatch, tensor_widths=(1, 2),
                              plan=config.plan)
    assert (search.bounds[TINY.name] == joint).all()


def test_the_time_left_is_shown_and_marked_as_an_upper_limit_when_the_total_is_one():
    """No ETA anywhere: every phase now has one; the search's total is an upper limit (designs whose bound still
    beats the incumbent), so its time left reads ``≤``."""
    from rich.progress import Progress

    from phaze_env.cli import eta_column

    now = [0.0]
    column = eta_column()
    progress = Progress(column, get_time=lambda: now[0], auto_refresh=False)
    search = progress.add_task("search", total=100, at_most=True)
    trace = progress.add_task("trace", total=10)
    assert column.render(progress.tasks[search]).plain == "ETA …"
    for step in range(1, 5):
        now[0] = float(step)
        progress.update(search, completed=10 * step)
        progress.update(trace, completed=step)
    assert column.render(progress.tasks[search]).plain == "ETA ≤ 0:00:06"  # 60 left at 10 per second
    assert column.render(progress.tasks[trace]).plain == "ETA 0:00:06"


def test_the_evaluators_json_stays_clean_while_progress_goes_to_stderr(tiny_registered, monkeypatch, capsys):
    """``python -m phaze_env.evaluate --json`` was silent while it traced (10 s on gpt3-175b): on a terminal,
    stderr now shows the tracing with its total; stdout is the JSON alone."""
    import io

    from rich.console import Console

    import phaze_env.cli
    from phaze_env.evaluate import main

    stderr = io.StringIO()
    monkeypatch.setattr(phaze_env.cli, "console", lambda **kwargs: Console(file=stderr, force_terminal=True, width=200))
    assert main(["--workload", TINY.name, "--preset", "tpuv4", "--cluster", "phaze", "--devices", "4", "--batch", "8",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["feasible"]
    shown = stderr.getvalue()
    assert "tracing the model · " in shown and "(tensor width, microbatch) graphs" in shown
    assert "scheduling the layers and searching the plans" in shown


def test_the_evaluators_plan_search_shows_a_total_and_a_time_left(tiny_registered, monkeypatch):
    """The plan search after tracing was a spinner alone: 15 s for GPT-3 175B on 4,096 A100 (``evaluate``, every knob
    free). It now counts its (HBM capacity, t, m, c, e) variants against their total, with a time left; the hook is
    unset afterwards."""
    import io
    import re

    from rich.console import Console

    import phaze_env.cli
    import phaze_env.evaluate
    from phaze_env.evaluate import main

    stderr = io.StringIO()
    monkeypatch.setattr(phaze_env.cli, "console", lambda **kwargs: Console(file=stderr, force_terminal=True, width=250))
    assert main(["--workload", TINY.name, "--preset", "tpuv4", "--cluster", "phaze", "--devices", "4", "--batch", "24",
                 "--json"]) == 0
    shown = re.findall(r"searching the plans · variant (\d+) of (\d+)", stderr.getvalue())
    counts = [(int(a), int(b)) for a, b in shown]
    assert counts and counts[-1][0] == counts[-1][1] > 1 and len({total for _, total in counts}) == 1  # every one
    assert phaze_env.evaluate.PLAN_SEARCH_PROGRESS.get() is None


def test_the_docs_sample_outputs_use_the_current_labels():
    """docs/moe.md's sample output said "DP all-reduce" after the part was renamed "DP sync": every time-breakdown
    line of a documented ``phaze_env.evaluate`` output must name a part as the code does now."""
    import re
    from pathlib import Path

    from phaze_env.evaluate import BREAKDOWN_LABELS

    root = Path(__file__).resolve().parent.parent
    line = re.compile(r"^  (\S.*?)\s+[0-9.e+-]+ s\s+[0-9.]+%$")
    checked = 0
    for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for block in re.findall(r"```[^\n]*\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S):
            if "python -m phaze_env.evaluate" not in block:
                continue
            for text in block.splitlines():
                if match := line.match(text):
                    assert match.group(1) in BREAKDOWN_LABELS.values(), f"{page.name}: {text.strip()}"
                    checked += 1
    assert checked >= 9  # docs/moe.md's Mixtral what-if at least


def test_validation_shows_its_runs_with_a_total_and_a_time_left(monkeypatch):
    """``python -m experiments.validate`` printed nothing of its progress (minutes on 2 cores): on a terminal it now
    counts the runs against their total with a time left, then names the sensitivities phase; off a terminal it
    writes nothing to stderr (the report lines on stdout stay alone)."""
    import io

    from rich.console import Console

    from experiments import validate

    for terminal in (True, False):
        stderr = io.StringIO()
        monkeypatch.setattr(validate, "cli_console",
                            lambda **kwargs: Console(file=stderr, force_terminal=terminal, width=200))
        with validate._progress(2) as step:
            step("case-a")
            step("case-b")
            step(None)
        shown = stderr.getvalue()
        if terminal:
            assert "validating · 2 of 2 runs · case-b" in shown and "ETA" in shown and "the sensitivities" in shown
        else:
            assert shown == ""


def test_the_test_command_counts_its_install_steps_and_their_time(tmp_path):
    """``bash scripts/test.sh`` (the README's test command, and what ``.ci/run`` runs in a fresh venv) installed for
    minutes without a word (``pip -q``): each step now says its number against the total and the time elapsed, and
    an install's time when it is done. Run here with a stand-in ``python`` that records its arguments."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    log = tmp_path / "calls"
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text(f'#!/usr/bin/env bash\necho "$*" >> {log}\n')
    fake.chmod(0o755)
    done = subprocess.run(["bash", "scripts/test.sh", "-q", "-k", "nothing"], cwd=repo, capture_output=True, text=True,
                          env={"PATH": f"{fake.parent}:/usr/bin:/bin", "HOME": str(tmp_path)}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == ["-m pip install -q torch==2.13.0",
                                            "-m pip install -q -e .[test,dist,zigzag,docs]",
                                            "-m pytest -n auto --dist loadfile -q -k nothing"]
    steps = [line for line in done.stderr.splitlines() if line.startswith("test.sh: [")]
    assert [line.split("]")[0] for line in steps] == ["test.sh: [1/3"] * 2 + ["test.sh: [2/3"] * 2 + ["test.sh: [3/3"]
    assert all("(elapsed " in line for line in steps[::2]) and all(" done in " in line for line in steps[1:4:2])
    assert "finished in" in done.stderr
    ci = (repo / ".ci" / "run").read_text()
    assert 'bash scripts/test.sh "$@"' in ci  # CI runs the README's own test command
