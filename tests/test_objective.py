"""The Optuna objective: exactness vs search.phaze, constraint reporting, duplicates, storages, CLI."""

from __future__ import annotations

import warnings

import optuna
import pytest

from phaze_env import objective as objective_module
from phaze_env.design import KNOBS, Design, DesignSpace, evaluate_design
from phaze_env.evaluate import Cluster
from phaze_env.objective import (CONSTRAINT_NAMES, area_constraint, constraints_func, create_study, feasible_trials,
                                 main, make_objective, make_sampler)
from phaze_env.workloads import custom_workload
from search.phaze import SearchConfig, run_search

CLUSTER = Cluster(n_devices=16, global_batch=64)
# Same space as tests/test_env.py, so the two files share evaluations through the persistent cache.
SPACE = DesignSpace.reduced(num_tc=(1, 4, 16), tc_width=(32, 128), tc_depth=(128,), num_vc=(1, 4), buffer_mb=(64,),
                            hbm_gb=(32.0, 80.0), microbatch=(1,), recompute=(False, True))

optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


@pytest.fixture(scope="module")
def tiny():
    return custom_workload("tiny-gpt2", "GPT2Config", "GPT2LMHeadModel", 64, n_embd=128, n_layer=4, n_head=4,
                           n_inner=512, vocab_size=1000, n_positions=64)


def test_brute_force_best_equals_exact_search(tiny):
    objective = make_objective(tiny, CLUSTER, space=SPACE)
    study = create_study(objective, sampler=make_sampler("bruteforce", seed=0))
    study.optimize(objective)
    assert len(study.trials) == SPACE.combinations  # every knob combination, in the window or not
    exact = run_search(SearchConfig(workloads=[tiny], cluster=CLUSTER, space=SPACE), workers=1)
    best = exact.best[tiny.name]
    assert best.feasible
    assert study.best_value == pytest.approx(best.throughput_samples_s, rel=1e-12)
    arch = {k: best.accelerator[k] for k in ("num_tc", "tc_width", "tc_depth", "num_vc", "buffer_mb")}
    tied = [t for t in study.trials if t.value == study.best_value]
    assert any({k: t.user_attrs["design"][k] for k in arch} == arch for t in tied)
    # every in-window design was evaluated once, none outside
    assert objective.evaluations == len(SPACE)


def test_constraints_reported_for_area_violations(tiny):
    objective = make_objective(tiny, CLUSTER, space=SPACE)
    study = create_study(objective)
    outside = Design(16, 128, 128, 4, 64, 80.0, 1, False)
    inside = Design(4, 128, 128, 4, 64, 80.0, 1, False)
    assert not SPACE.area_ok(outside) and SPACE.area_ok(inside)
    for design in (outside, inside):
        study.enqueue_trial(design.to_dict())
    study.optimize(objective, n_trials=2)
    bad, good = study.trials
    assert bad.value == 0.0 and bad.user_attrs["constraints"][0] > 0 and not bad.user_attrs["evaluated"]
    assert bad.constraints == dict(zip(CONSTRAINT_NAMES, bad.user_attrs["constraints"]))
    assert bad.user_attrs["constraints"][0] == pytest.approx(SPACE.overshoot(outside))
    assert all(c <= 0 for c in good.constraints.values()) and good.user_attrs["plan"]["pipeline_stages"] >= 1
    assert constraints_func(bad) == bad.user_attrs["constraints"]
    assert study.best_trial.number == good.number and feasible_trials(study) == [study.trials[1]]


def test_area_constraint_sign_matches_window():
    space = DesignSpace.reduced()
    for design in space.__iter__():
        assert area_constraint(space, design) <= 0
    outside = [space.decode([a, b, c, d, e, 0, 0, 0]) for a in range(3) for b in range(2) for c in range(2)
               for d in range(3) for e in range(2)]
    for design in outside:
        assert (area_constraint(space, design) > 0) == (not space.area_ok(design))


def test_infeasible_placement_is_a_constraint_violation(tiny):
    space = DesignSpace.reduced(num_tc=(4,), tc_width=(128,), tc_depth=(128,), num_vc=(4,), buffer_mb=(64,),
                                hbm_gb=(1e-6,), microbatch=(1,), recompute=(False,))
    objective = make_objective(tiny, CLUSTER, space=space)
    study = create_study(objective)
    study.optimize(objective, n_trials=1)
    trial = study.trials[0]
    assert trial.value == 0.0 and trial.constraints["placement"] == 1.0 and trial.user_attrs["reason"]
    with pytest.raises(ValueError, match="No feasible trials"):
        study.best_trial  # noqa: B018


def test_duplicates_cost_a_cache_lookup(tiny):
    objective = make_objective(tiny, CLUSTER, space=SPACE)
    study = create_study(objective)
    design = Design(4, 32, 128, 1, 64, 32.0, 1, True)
    for _ in range(3):
        study.enqueue_trial(design.to_dict())
    study.optimize(objective, n_trials=3)
    assert objective.evaluations == 3 and objective.cache_hits >= 2  # the first may be cached by an earlier test
    assert len({t.value for t in study.trials}) == 1


@pytest.mark.parametrize("sampler", ["nsga2", "tpe"])
def test_multi_objective_pareto_front_is_feasible(tiny, sampler):
    objective = make_objective(tiny, CLUSTER, space=SPACE, multi_objective=True)
    study = create_study(objective, sampler=make_sampler(sampler, seed=1, multi_objective=True))
    study.optimize(objective, n_trials=20)
    front = study.best_trials
    assert front and all(all(c <= 0 for c in t.constraints.values()) for t in front)
    for t in front:  # the values are the design's own evaluation, looked up independently
        design = Design.from_dict(t.user_attrs["design"])
        assert t.values == [evaluate_design(design, tiny, CLUSTER).throughput_samples_s,
                            design.accelerator(SPACE.base).area_mm2]
    # the front is every feasible trial that no other feasible trial dominates (more throughput, less area)
    feasible = feasible_trials(study)

    def dominated(t):
        return any(u.values[0] >= t.values[0] and u.values[1] <= t.values[1] and u.values != t.values for u in feasible)

    assert sorted(t.number for t in front) == [t.number for t in feasible if not dominated(t)]


def test_index_encoding_and_constraints_func_sampler(tiny):
    objective = make_objective(tiny, CLUSTER, space=SPACE, encoding="index")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constraints_func= is deprecated in Optuna 5 (trial constraints suffice)
        sampler = optuna.samplers.TPESampler(seed=0, n_startup_trials=4, constraints_func=constraints_func)
    study = create_study(objective, sampler=sampler)
    study.optimize(objective, n_trials=8)
    assert all(set(t.params) == {f"{k}_index" for k in KNOBS} for t in study.trials)
    assert study.best_trial.user_attrs["feasible"]
    with pytest.raises(ValueError, match="encoding"):
        make_objective(tiny, CLUSTER, space=SPACE, encoding="onehot")


def test_sqlite_storage_persists_attrs_and_constraints(tiny, tmp_path):
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    storage = optuna.storages.RDBStorage(url)  # one engine for both runs (opening a SQLite storage is slow)
    objective = make_objective(tiny, CLUSTER, space=SPACE)
    study = create_study(objective, sampler=make_sampler("random", seed=0), storage=storage, study_name="s")
    study.optimize(objective, n_trials=3)
    # resuming adds trials to the same record
    again = create_study(objective, sampler=make_sampler("random", seed=1), storage=storage, study_name="s")
    again.optimize(objective, n_trials=1)
    loaded = optuna.load_study(study_name="s", storage=url)
    assert len(loaded.trials) == 4
    for before, after in zip(again.trials, loaded.trials):
        assert after.user_attrs == before.user_attrs and after.constraints == before.constraints
    assert all(len(t.constraints) == len(CONSTRAINT_NAMES) for t in loaded.trials)


@pytest.mark.parametrize("argv, message", [
    (["--workload", "gpt-7"], "unknown workload"),
    (["--trials", "0"], "positive integer"),
    (["--sampler", "annealing"], "invalid choice"),
    (["--storage", "nosuchdb://x", "--trials", "1"], "cannot open study"),
])
def test_cli_bad_arguments_exit_2_with_one_line(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_cli_runs_a_study(tiny, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(objective_module, "get_workload", lambda name: tiny)
    monkeypatch.setattr(objective_module.DesignSpace, "reduced", classmethod(lambda cls: SPACE))
    assert main(["--workload", "tiny", "--trials", "5", "--sampler", "random", "--space", "reduced", "--storage",
                 "memory", "--n-devices", "16", "--global-batch", "64"]) == 0
    out = capsys.readouterr().out
    assert "best design" in out and "5 trials" in out and "phaze-tiny-gpt2-random" in out


def test_a_system_design_no_reticle_can_expose_is_scored_infeasible_not_raised():
    """The whole-task leaderboard crashed on an Optuna trial whose out-of-window system design needs a 3,154 mm² die
    (ReticleLimitError from the cost model while scoring its objectives): it is now an infeasible record — no rate,
    its architecture's area — and the study goes on."""
    from phaze_env.hardware.cost import ReticleLimitError

    objective = make_objective(task="tiny-llama/system-20kW/throughput_per_w+area")
    space = objective.space
    design = space.decode([0 if name == "die_area_mm2" else len(space.values(name)) - 1 for name in space.knobs])
    with pytest.raises(ReticleLimitError):  # the design the test needs: no die can be built for it
        space.objective_score(design, 0.0, "area")
    record = objective.record(design)
    assert record.attrs["feasible"] is False and not record.attrs["evaluated"]
    assert record.values == (0.0, pytest.approx(space.area_mm2(design)))


def test_an_infeasible_design_has_no_rate_without_building_its_system(monkeypatch):
    """The core leaderboard crashed dividing by a system's watts where the budget bought no chip (ZeroDivisionError in
    objective_score): an infeasible design (nothing trained) scores 0 on every rate without its system being priced."""
    objective = make_objective(task="tiny-gpt2/system-20kW/throughput_per_usd")
    space = objective.space

    def no_system(design, throughput, name):  # what a budget that buys no chip did: a division by zero watts
        if name != "area":
            raise ZeroDivisionError("float division by zero")
        return -1.0

    monkeypatch.setattr(type(space), "objective_score", lambda self, *args: no_system(*args))
    design = space.decode([0 for _ in space.knobs])
    assert objective.objective_values(design, 0.0) == (0.0,)


@pytest.mark.parametrize("sampler", ["cmaes", "qmc"])
def test_cmaes_and_qmc_do_not_warn_on_every_trial(tiny, sampler, caplog):
    """CMA-ES and QMC draw the categorical knobs at random by design; Optuna's warning about it came three times per
    trial (thousands of lines in a leaderboard run)."""
    objective = make_objective(tiny, CLUSTER, space=SPACE)
    study = create_study(objective, sampler=make_sampler(sampler, seed=0))
    optuna.logging.enable_propagation()
    try:
        with caplog.at_level("WARNING", logger="optuna"):
            study.optimize(objective, n_trials=4)
    finally:
        optuna.logging.disable_propagation()
    assert len(study.trials) == 4
    assert not [r for r in caplog.records if "sampled independently" in r.getMessage()]
