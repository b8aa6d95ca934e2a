"""The benchmark tasks: the registry, the stored certified optima (current, reproducible, never beaten), the faces
that take ``task=``, the board's statistics, the leaderboard's bad-input lines and a smoke run of it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import phaze_env.cache
import phaze_env.env  # noqa: F401 - registers the env ids
from baselines import run_strategy
from experiments.task_board import (aggregate, check_bounded, dominates_front, normalised_curve,
                                    probability_of_improvement, separated)
from phaze_env.cache import code_closure
from phaze_env.objective import make_objective
from phaze_env.tasks import (DENSE, MODEL_MODULE, MOE, REGENERATE, TASKS, TaskError, get_task, hypervolume_2d,
                             load_reference, reference_path, reference_point)

REPO = Path(__file__).resolve().parents[1]
SINGLE = "tiny-gpt2/full-a05/throughput"
FRONT = "tiny-gpt2/full-a10/throughput+area"


def _cli(*argv: str, cwd: Path = REPO, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *argv], cwd=cwd, capture_output=True, text=True, timeout=timeout)


# --- the registry --------------------------------------------------------------------------------------------------

def test_registry_covers_workloads_spaces_budgets_and_objectives():
    tasks = list(TASKS.values())
    assert len(tasks) >= 24
    assert {t.workload for t in tasks} == set(DENSE + MOE)
    assert {t.space for t in tasks} == {"full", "system"}
    assert sum(t.multi_objective for t in tasks) >= 4
    assert {o for t in tasks for o in t.objectives} >= {"throughput", "throughput_per_w", "throughput_per_usd", "area"}
    assert {(t.budget_w is not None, t.budget_usd is not None) for t in tasks if t.is_system} == {(True, False), (False, True)}
    assert len({t.area_fraction for t in tasks if not t.is_system}) >= 2
    alone = {t.objective for t in tasks if not t.multi_objective}
    assert alone == {"throughput", "throughput_per_w", "throughput_per_usd"}  # each rate is a task of its own


def test_every_task_has_a_current_stored_reference():
    """Fails after a model change until ``python -m experiments.task_optima`` has regenerated them."""
    for name in TASKS:
        reference = load_reference(name)
        assert reference.version == get_task(name).version
        assert all(s[0] > 0 for s in reference.scores)
        # a two-objective task tests a trade-off: its exact front holds at least two designs (throughput against
        # throughput per $ at 20 kW collapsed to one under session 54's stack, so those two tasks became throughput
        # against die area)
        assert len(reference.scores) >= 2 if get_task(name).multi_objective else len(reference.scores) == 1, name


def test_version_follows_the_model_code(monkeypatch):
    """The version hashes the model's code (evaluator, placement, hardware, power and cost): a change there is a new
    version, and the stored reference is refused as stale in one line naming the command."""
    closure = code_closure(MODEL_MODULE)
    assert {"phaze_env.evaluate", "phaze_env.hardware.system", "phaze_env.hardware.area"} <= set(closure)
    assert any(name.startswith("phaze_env.placement") for name in closure)
    task = get_task(SINGLE)
    before = task.version
    monkeypatch.setattr(phaze_env.cache, "code_version", lambda *modules: "another-model")
    assert task.version != before
    with pytest.raises(TaskError, match=rf"stale .*{re.escape(REGENERATE)} --task {re.escape(SINGLE)}$"):
        load_reference(task)


def test_unknown_task_is_one_clear_error():
    with pytest.raises(TaskError, match="unknown task 'nope'; known: tiny-gpt2/"):
        get_task("nope")


def test_hypervolume_2d_is_exact():
    assert hypervolume_2d([(2.0, 1.0)], (0.0, 0.0)) == 2.0
    assert hypervolume_2d([(2.0, 1.0), (1.0, 2.0)], (0.0, 0.0)) == 3.0  # 2·1 + 1·(2−1)
    assert hypervolume_2d([(2.0, 1.0), (1.0, 0.5)], (0.0, 0.0)) == 2.0  # a dominated point adds nothing
    assert hypervolume_2d([(-1.0, 5.0)], (0.0, 0.0)) == 0.0  # behind the reference corner


def test_the_front_scores_one_and_a_dominating_point_is_caught():
    reference = load_reference(FRONT)
    task = reference.task
    assert reference.normalised(reference.scores) == pytest.approx(1.0)
    assert reference.normalised(reference.scores[:1]) < 1.0
    designs = list(reference.designs)
    throughputs = [s[0] for s in reference.scores]
    assert normalised_curve(task, reference, designs, throughputs)[-1] == pytest.approx(1.0)
    assert not dominates_front(task, reference, designs, throughputs)
    faster = [t * 1.01 for t in throughputs]  # the same designs, 1 % faster: they would dominate the front
    assert dominates_front(task, reference, designs, faster)
    corner = reference_point(task, reference.scores)
    assert corner[0] == 0.0 and corner[1] < min(s[1] for s in reference.scores)


# --- no strategy ever exceeds a certified optimum ----------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", list(TASKS))
def test_no_design_beats_the_certified_reference(name):
    """Random search over the task never beats the certified optimum nor dominates the exact front, and the
    stored answer re-evaluates to what is stored (the cross-check of the exact search, every task)."""
    from experiments.task_optima import check

    task = get_task(name)
    reference = load_reference(task)
    assert check(task, reference_path(task).parent) is None
    trace = run_strategy("random", task.workload_spec(), task.cluster(), task.design_space(), 4, seed=1)
    curve = normalised_curve(task, reference, trace.designs, trace.throughput)
    assert max(curve) <= 1 + 1e-9
    if task.multi_objective:
        assert not dominates_front(task, reference, trace.designs, trace.throughput)


def test_check_bounded_flags_a_run_above_the_optimum():
    runs = [{"task": "t", "strategy": "s", "seed": 0, "curve": [0.5, 1.0], "beats_reference": False},
            {"task": "t", "strategy": "bad", "seed": 1, "curve": [0.5, 1.01], "beats_reference": False}]
    (line,) = check_bounded(runs)
    assert line.startswith("bad (seed 1) beat the certified reference of t")


# --- the faces ---------------------------------------------------------------------------------------------------

def test_env_and_objective_take_a_task():
    task = get_task(SINGLE)
    env = gym.make("phaze_env/ArchSearch-v0", task=SINGLE)
    assert env.unwrapped.task == task
    assert env.unwrapped.space == task.design_space() and env.unwrapped.cluster == task.cluster()
    assert env.unwrapped.workload == task.workload_spec()
    objective = make_objective(task=FRONT)
    assert objective.multi_objective and objective.space == get_task(FRONT).design_space()
    assert not make_objective(task=SINGLE).multi_objective
    with pytest.raises(ValueError, match="sets the workload, the cluster and the space"):
        gym.make("phaze_env/ArchSearch-v0", task=SINGLE, space=task.design_space())
    with pytest.raises(ValueError, match="sets the workload, the cluster, the space and the objectives"):
        make_objective("gpt2-xl", task=SINGLE)
    with pytest.raises(TaskError, match="unknown task"):
        gym.make("phaze_env/ArchSearchSeq-v0", task="nope")


# --- statistics --------------------------------------------------------------------------------------------------

def _runs(scores: dict[str, dict[str, list[float]]]) -> list[dict]:
    return [{"task": task, "strategy": strategy, "seed": seed, "curve": [value], "wall_s": 1.0}
            for task, by in scores.items() for strategy, values in by.items() for seed, value in enumerate(values)]


def test_probability_of_improvement_and_separation():
    x = np.array([[1.0, 1.0], [0.9, 0.9]])
    assert probability_of_improvement(x, x) == pytest.approx(0.5)
    assert probability_of_improvement(x, x - 0.5) == pytest.approx(1.0)
    runs = _runs({"a": {"good": [0.99, 1.0, 0.98], "bad": [0.5, 0.6, 0.55], "same": [0.5, 0.6, 0.55]},
                  "b": {"good": [1.0, 1.0, 0.97], "bad": [0.7, 0.6, 0.65], "same": [0.7, 0.6, 0.65]}})
    board = aggregate(runs, np.random.default_rng(0))
    rows = {r["strategy"]: r for r in board["strategies"]}
    assert [r["strategy"] for r in board["strategies"]][0] == "good"
    assert rows["good"]["ci"][0] <= rows["good"]["mean"] <= rows["good"]["ci"][1]
    assert board["probability_of_improvement"]["good>bad"]["p"] == 1.0
    assert board["probability_of_improvement"]["bad>same"]["p"] == 0.5
    lines = separated(board)
    assert lines[0].startswith("good vs ") and lines[0].endswith("— separated")
    assert lines[1].endswith("— not separated")


# --- the command lines -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--task", "nope"], "error: unknown task 'nope'"),
    (["--task", SINGLE, "--strategy", "optuna_bruteforce"],
     "error: strategy 'optuna_bruteforce' cannot run task tiny-gpt2/full-a05/throughput: it enumerates the space"),
    (["--task", SINGLE, "--strategy", "no_such"], "error: unknown strategy 'no_such'"),
])
def test_leaderboard_refuses_bad_input_in_one_line(argv, message, capsys, tmp_path):
    from experiments.leaderboard import main

    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--docs", str(tmp_path / "docs"), "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_leaderboard_refuses_a_stale_optimum_in_one_line(capsys, tmp_path):
    from experiments.leaderboard import main

    stale = tmp_path / "optima"
    stale.mkdir()
    data = json.loads(reference_path(get_task(SINGLE)).read_text()) | {"version": "0123456789abcdef"}
    (stale / get_task(SINGLE).file_name()).write_text(json.dumps(data))
    with pytest.raises(SystemExit) as exit_:
        main(["--task", SINGLE, "--optima", str(stale), "--docs", str(tmp_path / "docs"), "--out", str(tmp_path / "o")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "stored optimum is stale (version 0123456789abcdef" in err
    assert err.endswith(f"regenerate it: {REGENERATE} --task {SINGLE}")


def test_task_optima_check_refuses_a_stale_reference(tmp_path):
    from experiments.task_optima import main

    stale = tmp_path / "optima"
    stale.mkdir()
    data = json.loads(reference_path(get_task(SINGLE)).read_text()) | {"version": "0123456789abcdef"}
    (stale / get_task(SINGLE).file_name()).write_text(json.dumps(data))
    assert main(["--check", "--task", SINGLE, "--dir", str(stale)]) == 1


def test_task_optima_takes_every_task_flag(tmp_path, capsys):
    """``--task`` repeated is every task named (it kept only the last one: the first was silently dropped), with the
    comma form and a name given twice once."""
    from experiments.task_optima import main

    stale = tmp_path / "optima"
    stale.mkdir()
    other = "tiny-llama/full-a05/throughput"
    for name in (SINGLE, other):
        data = json.loads(reference_path(get_task(name)).read_text()) | {"version": "0123456789abcdef"}
        (stale / get_task(name).file_name()).write_text(json.dumps(data))
    assert main(["--check", "--task", SINGLE, "--task", f"{other},{SINGLE}", "--dir", str(stale)]) == 1
    captured = capsys.readouterr()
    assert "0 of 2 stored references current" in captured.out
    assert SINGLE in captured.err and other in captured.err


def test_leaderboard_takes_every_task_flag(capsys, tmp_path):
    """The leaderboard's ``--task`` repeated names every task: a bad one after a good one is still refused."""
    from experiments.leaderboard import main

    with pytest.raises(SystemExit) as exit_:
        main(["--task", SINGLE, "--task", "nope", "--docs", str(tmp_path / "docs"), "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2 and "error: unknown task 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_leaderboard_smoke_subset_writes_the_board_the_page_and_the_readme_table(tmp_path):
    """The CI smoke subset: two tasks (one front), three strategies, two seeds, six evaluations, through the CLI;
    then the page renders in headless Chromium."""
    docs = tmp_path / "docs"
    (docs / "guides").mkdir(parents=True)
    marked = "intro\n<!-- task-leaderboard:start -->\nold\n<!-- task-leaderboard:end -->\nafter\n"
    (tmp_path / "README.md").write_text(marked)
    (docs / "guides" / "results.md").write_text(marked)
    from experiments.leaderboard import run_store

    old_store = run_store(tmp_path / "out", get_task(SINGLE))
    old_store.parent.mkdir(parents=True)
    old_store.write_text('{"key": "from an earlier board"}\n')
    done = _cli("experiments.leaderboard", "--task", f"{SINGLE},{FRONT}", "--strategy", "random", "--strategy",
                "genetic", "--strategy", "optuna_tpe", "--seeds", "2", "--budget", "6", "--jobs", "2", "--quiet",
                "--fresh", "--docs", str(docs), "--out", str(tmp_path / "out"), timeout=110)
    assert done.returncode == 0, done.stderr[-3000:]
    # --fresh forgets the earlier board's runs but stores its own, so an interrupted fresh board resumes
    for task in (SINGLE, FRONT):
        lines = run_store(tmp_path / "out", get_task(task)).read_text().splitlines()
        assert len(lines) == 3 * 2 and "from an earlier board" not in "".join(lines)
    board = json.loads((docs / "leaderboard" / "tasks.json").read_text())
    assert board["meta"]["tasks"] == [SINGLE, FRONT]
    assert {e["strategy"] for e in board["per_task"]} == {"random", "genetic", "optuna_tpe"}
    assert all(0 <= e["mean"] <= 1 + 1e-9 for e in board["per_task"])
    assert len(board["curves"][FRONT]["random"]["mean"]) == 6
    markdown = (docs / "leaderboard.md").read_text()
    assert f"### `{FRONT}`" in markdown and "exact front of" in markdown
    assert "No run exceeds its task's certified optimum or exact front: the highest normalised score of the 12 " \
        "runs is" in markdown
    readme = (tmp_path / "README.md").read_text()
    assert "old" not in readme and "| strategy | mean normalised score [95 % CI]" in readme and readme.endswith("after\n")
    assert "](../leaderboard.md)" in (docs / "guides" / "results.md").read_text()
    page = (docs / "leaderboard" / "board.html").read_text()
    assert not re.search(r"<script[^>]+src=", page) and "Plotly" in page
    from test_report import _chromium

    chromium = _chromium()
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
                          (docs / "leaderboard" / "board.html").resolve().as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('class="plot-container plotly"') >= 3, "the charts did not render"
    assert "convergence-1" in dom.stdout and "improvement" in dom.stdout


def test_readme_guide_and_docs_leaderboard_equal_the_board():
    """The README's and the results guide's aggregate and docs/leaderboard.md are generated from
    docs/leaderboard/tasks.json (a re-run of the board that is not re-rendered fails here)."""
    from experiments import leaderboard_page as page

    board = json.loads((REPO / "docs" / "leaderboard" / "tasks.json").read_text())
    generalisation = REPO / "docs" / "leaderboard" / "generalisation.json"
    if generalisation.is_file():
        board["generalisation"] = json.loads(generalisation.read_text())
    table = page.readme_table(board)
    assert f"{page.MARK_START}\n{table}\n{page.MARK_END}" in (REPO / "README.md").read_text()
    guide = (REPO / "docs" / "guides" / "results.md").read_text()
    assert f"{page.MARK_START}\n{table.replace('](docs/', '](../')}\n{page.MARK_END}" in guide
    assert (REPO / "docs" / "leaderboard.md").read_text() == page.markdown(board)
    assert set(board["meta"]["tasks"]) <= set(TASKS) and board["meta"]["seeds"] >= 5


@pytest.mark.slow
def test_generalisation_smoke_writes_the_table(tmp_path):
    """Train both agents briefly, then zero-shot, fine-tuned and from-scratch runs on the held-out workloads."""
    from experiments.generalisation import AGENTS, HELD_OUT_TASKS, MODES, main

    assert main(["--train-evaluations", "8", "--budget", "3", "--seeds", "2", "--docs", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "leaderboard" / "generalisation.json").read_text())
    assert {(r["agent"], r["task"]) for r in result["rows"]} == {(a, t) for a in AGENTS for t in HELD_OUT_TASKS}
    for row in result["rows"]:
        for mode in MODES:
            assert len(row[mode]["scores"]) == 2 and all(0 <= s <= 1 + 1e-9 for s in row[mode]["scores"])


# --- the task's objective everywhere ------------------------------------------------------------------------------

PER_USD = "tiny-gpt2/system-20kW/throughput_per_usd"
PER_W_FRONT = "tiny-llama/system-20kW/throughput_per_w+area"


def test_a_rate_task_is_scored_and_searched_by_its_rate():
    """On a throughput-per-$ task every face maximises throughput per $ of the built system: a strategy's feedback,
    the Optuna objective's value, the env's reward (over the TPUv4 baseline system's), the board's curve."""
    from baselines import make_strategy
    task = get_task(PER_USD)
    space, workload, cluster = task.design_space(), task.workload_spec(), task.cluster()
    trace = run_strategy("random", workload, cluster, space, 3, seed=0, objectives=task.objectives)
    design, evaluation = trace.best_design, trace.best_evaluation
    per_usd = evaluation.throughput_samples_s / space.point(design).objective_divisor("throughput_per_usd")
    assert space.objective_score(design, evaluation.throughput_samples_s, "throughput_per_usd") == pytest.approx(per_usd)

    strategy = make_strategy("spotlight", space=space, seed=0, budget=3, workload=workload, cluster=cluster,
                             objectives=task.objectives)
    strategy.tell(design, evaluation)
    assert strategy.observed[design] == pytest.approx(per_usd)  # the GP's target is the rate, not the throughput

    objective = make_objective(task=PER_USD)
    assert objective.directions == ["maximize"]
    assert objective.record(design).values == pytest.approx((per_usd,))

    env = gym.make("phaze_env/ArchSearch-v0", task=PER_USD)
    scorer = env.unwrapped.scorer
    assert scorer.reward == "throughput_per_usd"
    outcome = scorer.score(design)
    assert outcome.reward == pytest.approx(per_usd / scorer.baseline_rate)

    curve = normalised_curve(task, load_reference(task), trace.designs, trace.throughput)
    best = max(space.objective_score(d, t, "throughput_per_usd") for d, t in zip(trace.designs, trace.throughput) if t > 0)
    assert curve[-1] == pytest.approx(best / load_reference(task).optimum) and curve[-1] <= 1 + 1e-9


def test_a_front_task_makes_optuna_pareto_over_its_own_objectives():
    objective = make_objective(task=PER_W_FRONT)
    assert objective.objectives == ("throughput_per_w", "area") and objective.directions == ["maximize", "minimize"]


def test_a_strategy_that_only_maximises_throughput_is_refused_another_objective():
    from phaze_env.design import DesignSpace

    class ThroughputOnly:
        def __init__(self, space, seed=0):
            self.space = space

        def ask(self):
            return self.space.sample(np.random.default_rng(0))

        def tell(self, design, evaluation):
            pass

    task = get_task(PER_USD)
    with pytest.raises(ValueError, match="maximises throughput only"):
        run_strategy(ThroughputOnly, task.workload_spec(), task.cluster(), task.design_space(), 1,
                     objectives=task.objectives)
    with pytest.raises(ValueError, match="needs the system space"):  # PHAZE's space has no watts or dollars
        run_strategy("random", task.workload_spec(), None, DesignSpace(), 1, objectives=("throughput_per_w",))
    with pytest.raises(ValueError, match="maximises a rate first"):
        run_strategy("random", task.workload_spec(), None, DesignSpace(), 1, objectives=("area", "throughput"))
    with pytest.raises(ValueError, match="needs the system space"):
        gym.make("phaze_env/ArchSearch-v0", workload="gpt2-xl", reward="throughput_per_usd")
    with pytest.raises(TaskError, match="needs the system space"):
        from phaze_env.tasks import Task
        Task("x", "tiny-gpt2", "full", ("throughput_per_w",), area_fraction=0.1)


def test_a_board_resumes_from_its_stored_runs(tmp_path):
    """Finished runs are appended to the task's store; the same board again reuses them (no run is repeated), a
    different budget is a new run, and a line cut short by an interrupted write is run again."""
    from experiments.task_board import load_runs, run_key, run_task

    task, store = get_task(SINGLE), tmp_path / "runs.jsonl"
    reference = load_reference(task)
    lines: list[str] = []
    first = run_task(task, reference, ["random"], 2, 2, lines.append, store)
    assert len(load_runs(store)) == 2 and not any("stored run" in line for line in lines)
    lines.clear()
    again = run_task(task, reference, ["random"], 2, 2, lines.append, store)
    assert again == first and all("stored run" in line for line in lines)
    assert run_key(task, "random", 0, 3) != run_key(task, "random", 0, 2) != run_key(task, "genetic", 0, 2)
    store.write_text(store.read_text().splitlines()[0] + "\n" + store.read_text().splitlines()[1][:40])
    lines.clear()
    run_task(task, reference, ["random"], 2, 2, lines.append, store)
    assert ["stored run" in line for line in lines] == [True, False]


def test_a_rate_task_whose_first_design_buys_no_chip_still_runs():
    """Every strategy probes that the space scores the task's rate on the space's first design; on
    tiny-llama/system-150k$/throughput_per_w that design buys no chip at the budget, and the probe divided by its
    zero watts (the full leaderboard crashed there after 40 min)."""
    from baselines.protocol import check_objectives

    task = get_task("tiny-llama/system-150k$/throughput_per_w")
    space = task.design_space()
    first = space.decode([0] * len(space.knobs))
    assert space.point(first).objective_divisor("throughput_per_w") == 0  # the case this test is about
    assert space.objective_score(first, 1.0, "throughput_per_w") == 0.0  # no chip, no rate: the worst score, not 0 / 0
    assert check_objectives(task.objectives, space) == task.objectives
    with pytest.raises(ValueError, match="needs the system space"):
        check_objectives(("throughput_per_usd",), get_task(SINGLE).design_space())
