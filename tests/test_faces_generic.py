"""Every face works on a space with more knobs than PHAZE's: the system space (13 knobs, string-valued ones,
an area budget per design) through the Gymnasium envs, the Optuna objective and every baseline."""

from __future__ import annotations

import json

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import phaze_env.env  # noqa: F401 - registers the env ids
from baselines import STRATEGIES, run_strategy
from baselines.exact import exact_optimum
from baselines.workloads import tiny_workload
from experiments.leaderboard import score_at, separation
from phaze_env.design import Design, DesignSpace
from phaze_env.env import ENV_IDS
from phaze_env.evaluate import Cluster
from phaze_env.hardware.space import KNOBS
from phaze_env.objective import make_objective, make_sampler

WORKLOAD = tiny_workload()
CLUSTER = Cluster(global_batch=64)  # the system space sets each design's chip count from its budget
# Small architecture lists (few distinct chips: evaluations stay cheap) and a 70 kW budget that buys every design
# at least one 64-chip torus unit, so the placements are small too; the system knobs keep their full lists.
SPACE = DesignSpace.named("system", budget_w=70e3, num_tc=(4, 8), tc_width=(128,), tc_depth=(128,), num_vc=(2,),
                          buffer_mb=(64, 128), microbatch=(1, 4))


def test_the_system_space_has_more_knobs_and_string_values():
    """What the rest of this file relies on: the space is wider than PHAZE's, with non-numeric knob values and a
    window decided by more than PHAZE's five architecture knobs."""
    assert len(SPACE.knobs) > len(KNOBS) and set(KNOBS) - {"hbm_gb"} <= set(SPACE.knobs)
    assert SPACE.area_knobs == SPACE.knobs[:len(SPACE.area_knobs)] and len(SPACE.area_knobs) > 5
    assert any(isinstance(v, str) for name in SPACE.knobs for v in SPACE.values(name))
    assert DesignSpace.reduced().knobs == KNOBS  # PHAZE's spaces keep their order


def test_designs_round_trip_through_json_and_indices():
    rng = np.random.default_rng(0)
    for _ in range(20):
        design = SPACE.sample(rng)
        assert design in SPACE and SPACE.decode(SPACE.encode(design)) == design
        assert Design.from_dict(json.loads(json.dumps(design.to_dict()))) == design
    phaze = DesignSpace.reduced().sample(rng)
    assert set(phaze.to_dict()) == set(KNOBS)  # unset system fields are omitted: old JSON reads the same
    with pytest.raises(ValueError, match="missing"):
        Design.from_dict({k: v for k, v in phaze.to_dict().items() if k != "num_tc"})


def test_iteration_and_len_agree_with_the_window():
    designs = list(SPACE)
    assert len(designs) == len(SPACE) == len(set(designs)) and 0 < len(SPACE) < SPACE.combinations
    assert all(SPACE.area_ok(d) for d in designs)
    assert designs == sorted(designs, key=SPACE.encode)  # knob-index order


@pytest.mark.slow
@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_gymnasium_env_checker_passes_on_the_system_space(env_id):
    env = gymnasium.make(env_id, workload=WORKLOAD, cluster=CLUSTER, space=SPACE, disable_env_checker=True)
    check_env(env.unwrapped, skip_render_check=True)
    assert env.unwrapped.space is SPACE


def test_one_shot_env_acts_and_masks_over_every_knob():
    env = gymnasium.make("phaze_env/ArchSearch-v0", workload=WORKLOAD, cluster=CLUSTER, space=SPACE).unwrapped
    assert list(env.action_space.nvec) == SPACE.nvec and env.action_masks().shape == (sum(SPACE.nvec),)
    env.reset(seed=0)
    design = SPACE.sample(np.random.default_rng(1))
    obs, reward, terminated, _, info = env.step(SPACE.encode(design))
    assert terminated and info["design"] == design.to_dict() and list(obs["design"]) == SPACE.encode(design)
    assert info["feasible"] and reward > 0
    assert obs["result"][1] == pytest.approx(SPACE.area_mm2(design) / SPACE.area_budget_for(design), rel=1e-6)
    assert env.validate(env.state)


def test_knob_per_step_env_knows_the_window_after_the_last_area_knob():
    """With exact masks every episode ends on a complete design inside the window; an unmasked choice that
    leaves no completion in it ends the episode as soon as the area knobs are decided."""
    env = gymnasium.make("phaze_env/ArchSearchSeq-v0", workload=WORKLOAD, cluster=CLUSTER, space=SPACE).unwrapped
    rng = np.random.default_rng(2)
    for episode in range(3):
        obs, _ = env.reset(seed=episode)
        steps, terminated = 0, False
        while not terminated:
            assert obs["knob"] == steps
            allowed = np.flatnonzero(env.action_masks())
            obs, _, terminated, _, info = env.step(int(rng.choice(allowed)))
            steps += 1
        assert steps == len(SPACE.knobs) and obs["knob"] == len(SPACE.knobs)
        assert info["feasible"] and Design.from_dict(info["design"]) in SPACE
    tables = SPACE.area_tables()  # a last area-knob value outside the window after a prefix that has completions
    *prefix, last = next(tuple(map(int, outside)) for outside in np.argwhere(~tables.ok)
                         if tables.prefix(list(outside[:-1]))[0].any())
    env.reset(seed=0)
    for action in prefix:
        assert env.step(action)[2] is False
    _, reward, terminated, _, info = env.step(last)
    assert terminated and reward < 0 and not info["evaluated"] and "area window" in info["reason"]


@pytest.mark.parametrize("sampler, encoding", [("tpe", "categorical"), ("gp", "index")])
def test_optuna_study_runs_on_the_system_space(sampler, encoding):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    objective = make_objective(WORKLOAD, CLUSTER, space=SPACE, encoding=encoding)
    study = optuna.create_study(directions=objective.directions, sampler=make_sampler(sampler, seed=0))
    study.optimize(objective, n_trials=5)
    assert len(study.trials) == 5 and all(t.state.name == "COMPLETE" for t in study.trials)
    string_knobs = {name for name in SPACE.knobs if isinstance(SPACE.values(name)[0], str)}
    for trial in study.trials:
        design = Design.from_dict(trial.user_attrs["design"])
        assert SPACE.encode(design) is not None
        if encoding == "index":  # ordered knobs by index, string knobs (no order) as categories
            assert string_knobs <= set(trial.params) and not any(f"{k}_index" in trial.params for k in string_knobs)
            assert {f"{k}_index" for k in SPACE.knobs if k not in string_knobs} <= set(trial.params)
        else:
            assert set(trial.params) == set(SPACE.knobs)
        if trial.user_attrs["feasible"]:
            assert trial.values[0] == pytest.approx(SPACE.evaluate(design, WORKLOAD, CLUSTER).throughput_samples_s)


@pytest.fixture(scope="module")
def optimum() -> float:
    """The certified optimum of the space, checked to be a design of it with exactly that throughput."""
    exact = exact_optimum(WORKLOAD, CLUSTER, SPACE)
    assert exact["exact"] and exact["design"] in SPACE
    evaluated = SPACE.evaluate(exact["design"], WORKLOAD, CLUSTER).throughput_samples_s
    assert evaluated == pytest.approx(exact["throughput_samples_s"], rel=1e-12)
    return exact["throughput_samples_s"]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(name for name, spec in STRATEGIES.items() if spec.available))
def test_every_baseline_runs_a_budget_of_10_on_the_system_space(name, optimum):
    trace = run_strategy(name, WORKLOAD, CLUSTER, SPACE, 10, seed=0)
    assert len(trace.throughput) == 10 and all(d.is_system for d in trace.designs)
    assert trace.best > 0 and trace.best_design in SPACE
    assert trace.best == pytest.approx(SPACE.evaluate(trace.best_design, WORKLOAD, CLUSTER).throughput_samples_s)
    assert trace.best <= optimum * (1 + 1e-9)


def test_leaderboard_scores_and_separation():
    """Scores are read at each budget; 'beats' needs the worst seed above the other's best."""
    rows = [{"workload": "w", "strategy": s, "seed": seed, "evaluation": e, "best_normalized": value}
            for s, values in {"a": [[0.5, 0.9], [0.6, 0.95]], "b": [[0.4, 0.92], [0.55, 0.93]]}.items()
            for seed, curve in enumerate(values) for e, value in enumerate(curve, start=1)]
    entries = {(e["budget"], e["strategy"]): e for e in score_at(rows, (1, 2))}
    assert entries[(1, "a")]["scores"] == [0.5, 0.6] and entries[(1, "a")]["mean"] == pytest.approx(0.55)
    assert entries[(1, "a")]["beats"] == [] and entries[(2, "b")]["beats"] == []  # ranges overlap
    rows += [{"workload": "w", "strategy": "c", "seed": seed, "evaluation": e, "best_normalized": 0.3}
             for seed in (0, 1) for e in (1, 2)]
    entries = {(e["budget"], e["strategy"]): e for e in score_at(rows, (1, 2))}
    assert entries[(1, "a")]["beats"] == ["c"] and entries[(2, "b")]["beats"] == ["c"]
    assert entries[(1, "c")]["beats"] == []
    lines = separation(score_at(rows, (2,)))
    assert len(lines) == 1 and "a > c" in lines[0] and "b > c" in lines[0]


@pytest.mark.parametrize("argv, message", [
    (["--budgets", "50,x"], "--budgets must be positive integers"),
    (["--budgets", "0,50"], "--budgets must be positive integers"),
    (["--space", "reduced", "--budget-mw", "1"], "apply to the system space only"),
    (["--strategy", "annealing"], "unknown strategy 'annealing'"),
])
def test_leaderboard_cli_rejects_bad_options_in_one_line(argv, message, capsys, tmp_path):
    from experiments.leaderboard import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv + ["--out", str(tmp_path / "out"), "--docs", str(tmp_path / "docs")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1 and message in err
