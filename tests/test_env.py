"""Gymnasium envs over the evaluator: API conformance, masks, rewards, state replay, SB3 smoke runs.

A tiny GPT-2 on 16 devices and a 48-point design space keep every evaluation cheap; the persistent
evaluation cache (a per-session temp dir, tests/conftest.py) makes repeats lookups.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections import Counter

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import phaze_env.env  # noqa: F401 - registers the ids
from phaze_env.design import Design, DesignSpace, evaluate_design
from phaze_env.env import ENV_IDS
from phaze_env.env.core import OVERSHOOT_CAP, ArchSearchState
from phaze_env.evaluate import Cluster, evaluate
from phaze_env.hardware import TPUV4
from phaze_env.workloads import custom_workload

CLUSTER = Cluster(n_devices=16, global_batch=64)
# 3·2·1·2·1·2·1·2 = 48 designs, 8 of them outside the area window (16 cores of 128×128 with 4 vector cores).
# One microbatch size: each one costs a trace of the model.
SPACE = DesignSpace.reduced(num_tc=(1, 4, 16), tc_width=(32, 128), tc_depth=(128,), num_vc=(1, 4), buffer_mb=(64,),
                            hbm_gb=(32.0, 80.0), microbatch=(1,), recompute=(False, True))


@pytest.fixture(scope="module")
def tiny():
    return custom_workload("tiny-gpt2", "GPT2Config", "GPT2LMHeadModel", 64, n_embd=128, n_layer=4, n_head=4,
                           n_inner=512, vocab_size=1000, n_positions=64)


def make(env_id, tiny, **kwargs):
    options = dict(workload=tiny, cluster=CLUSTER, space=SPACE) | kwargs
    return gym.make(env_id, **options)


def test_ids_registered_on_import():
    assert set(ENV_IDS) <= set(gym.registry)


def test_space_has_designs_on_both_sides_of_the_window():
    designs = [SPACE.decode(i) for i in itertools.product(*(range(n) for n in SPACE.nvec))]
    assert 0 < sum(not SPACE.area_ok(d) for d in designs) < len(designs)


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_gymnasium_check_env(env_id, tiny):
    from gymnasium.utils.env_checker import check_env

    check_env(make(env_id, tiny).unwrapped, skip_render_check=True)


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_sb3_check_env(env_id, tiny):
    from stable_baselines3.common.env_checker import check_env

    check_env(make(env_id, tiny).unwrapped, warn=False)


# --- area tables and masks ------------------------------------------------------------------------------
# (the window itself and the area tables are checked against brute force in tests/test_hardware_space.py)
def test_multidiscrete_masks_are_per_knob_projections_of_the_window(tiny):
    space = DesignSpace.reduced()
    env = make("phaze_env/ArchSearch-v0", tiny, space=space).unwrapped
    masks = np.split(env.action_masks(), np.cumsum(space.nvec)[:-1])
    inside = [idx for idx in itertools.product(*(range(n) for n in space.nvec[:5]))
              if space.area_ok(space.decode(list(idx) + [0, 0, 0]))]
    for axis, mask in enumerate(masks):
        expected = {idx[axis] for idx in inside} if axis < 5 else set(range(space.nvec[axis]))
        assert set(np.flatnonzero(mask)) == expected
    # in PHAZE's full space, 4096 of even the smallest tensor core (0.51 mm² each) exceed the budget
    full = make("phaze_env/ArchSearch-v0", tiny, space=DesignSpace()).unwrapped.action_masks()
    assert full.shape == (sum(DesignSpace().nvec),) and not full[len(DesignSpace().num_tc) - 1] and full[0]


def test_sequential_masks_are_exact(tiny):
    """Given any prefix, a value is allowed iff some completion is inside the window (brute force)."""
    space = DesignSpace.reduced(num_tc=(1, 4, 16, 64), num_vc=(1, 16, 256))
    env = make("phaze_env/ArchSearchSeq-v0", tiny, space=space).unwrapped
    inside = {idx for idx in itertools.product(*(range(n) for n in space.nvec[:5]))
              if space.area_ok(space.decode(list(idx) + [0, 0, 0]))}
    for k in range(5):
        for prefix in itertools.product(*(range(n) for n in space.nvec[:k])):
            if k and not any(idx[:k] == prefix for idx in inside):
                continue  # unreachable with masks
            env.reset(seed=0)
            for a in prefix:
                env.step(a)
            mask = env.action_masks()
            expected = {idx[k] for idx in inside if idx[:k] == prefix}
            assert set(np.flatnonzero(mask)) == expected, (prefix, mask)
    env.reset(seed=0)
    for k in range(8):
        env.step(int(np.flatnonzero(env.action_masks())[0]))
    assert env._done


def test_seq_area_violation_ends_early_with_smallest_overshoot(tiny):
    env = make("phaze_env/ArchSearchSeq-v0", tiny, space=DesignSpace()).unwrapped  # full PHAZE space
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(len(DesignSpace().num_tc) - 1)  # 4096 tensor cores
    assert terminated and not info["evaluated"] and info["evaluation"] is None
    assert info["overshoot"] > 0 and "area window" in info["reason"]
    # smallest overshoot over every completion = 4096 of the smallest tensor core + 1 vector core + 2 MB
    smallest = Design(4096, 2, 2, 1, 2, 32.0, 1, False)
    assert math.isclose(info["overshoot"], min(DesignSpace().overshoot(smallest), OVERSHOOT_CAP * 10), rel_tol=1e-9)
    assert reward == pytest.approx(-(1 + min(info["overshoot"], OVERSHOOT_CAP)))


def test_seq_out_of_range_index_gets_worst_reward(tiny):
    env = make("phaze_env/ArchSearchSeq-v0", tiny, infeasible_penalty=2.0).unwrapped
    env.reset(seed=0)
    for _ in range(5):
        env.step(int(np.flatnonzero(env.action_masks())[0]))
    assert env.action_space.n > SPACE.nvec[5]
    _, reward, terminated, _, info = env.step(env.action_space.n - 1)  # hbm_gb has a single value
    assert terminated and reward == -2.0 * (1 + OVERSHOOT_CAP) and "out of range" in info["reason"]


# --- rewards --------------------------------------------------------------------------------------------
def test_one_shot_outside_window_is_penalised_without_evaluation(tiny):
    env = make("phaze_env/ArchSearch-v0", tiny, space=DesignSpace(), infeasible_penalty=0.5).unwrapped
    env.reset(seed=0)
    action = np.array([12, 7, 7, 12, 6, 0, 0, 0])  # the largest of everything
    _, reward, terminated, _, info = env.step(action)
    assert terminated and not info["evaluated"] and info["evaluation"] is None
    assert reward == pytest.approx(-0.5 * (1 + OVERSHOOT_CAP))


def test_feasible_reward_is_throughput_ratio_and_info_carries_evaluation(tiny):
    env = make("phaze_env/ArchSearch-v0", tiny).unwrapped
    env.reset(seed=0)
    design = Design(4, 128, 128, 4, 64, 80.0, 1, True)
    action = SPACE.encode(design)
    obs, reward, terminated, _, info = env.step(action)
    assert info["feasible"] and info["evaluated"] and terminated
    assert reward == pytest.approx(info["evaluation"]["throughput_samples_s"] / info["baseline"]["throughput_samples_s"])
    # the same ratio from the evaluator itself: this design, over TPUv4 at its best knob setting of the space
    tpuv4 = evaluate(tiny, TPUV4, CLUSTER, microbatch=SPACE.microbatch, recompute=SPACE.recompute, hbm_gb=SPACE.hbm_gb)
    assert reward == pytest.approx(evaluate_design(design, tiny, CLUSTER).throughput_samples_s / tpuv4.throughput_samples_s)
    assert info["plan"] == info["evaluation"]["plan"] and info["plan"]["pipeline_stages"] >= 1
    assert obs["result"][2] == 1.0 and obs["result"][0] == pytest.approx(reward, rel=1e-6)
    assert list(obs["design"]) == action
    for kind in ("perf_per_area", "energy"):
        other = make("phaze_env/ArchSearch-v0", tiny, reward=kind).unwrapped
        other.reset(seed=0)
        r = other.step(action)[1]
        if kind == "perf_per_area":
            assert r == pytest.approx(reward / (info["area_mm2"] / SPACE.budget_mm2))
        else:
            ev, base = info["evaluation"], other.scorer.baseline
            assert r == pytest.approx(base["energy_per_sample_j"] / ev["energy_per_sample_j"]) and r > 0


def test_tpuv4_scores_one(tiny):
    """The baseline is the TPUv4-like design at its best knobs: the best of its knob settings scores 1."""
    space = DesignSpace(num_tc=(8,), tc_width=(128,), tc_depth=(128,), num_vc=(2,), buffer_mb=(128,),
                        hbm_gb=(32.0, 80.0), microbatch=(1,), recompute=(False, True))
    env = make("phaze_env/ArchSearch-v0", tiny, space=space).unwrapped
    rewards = []
    for hbm, recompute in itertools.product(range(2), range(2)):
        env.reset(seed=0)
        rewards.append(env.step([0, 0, 0, 0, 0, hbm, 0, recompute])[1])
    assert max(rewards) == pytest.approx(1.0, rel=1e-9)


def test_infeasible_placement_gets_penalty(tiny):
    space = DesignSpace.reduced(num_tc=(4,), tc_width=(128,), tc_depth=(128,), num_vc=(4,), buffer_mb=(64,),
                                hbm_gb=(1e-6,), microbatch=(1,), recompute=(False,))
    env = make("phaze_env/ArchSearch-v0", tiny, space=space, infeasible_penalty=3.0).unwrapped
    with pytest.warns(UserWarning, match="baseline infeasible"):
        env.reset(seed=0)
        _, reward, _, _, info = env.step([0] * 8)
    assert reward == -3.0 and not info["feasible"] and info["evaluated"] and info["reason"]


def test_bad_options_raise(tiny):
    with pytest.raises(ValueError, match="reward"):
        make("phaze_env/ArchSearch-v0", tiny, reward="speed")
    with pytest.raises(ValueError, match="infeasible_penalty"):
        make("phaze_env/ArchSearch-v0", tiny, infeasible_penalty=float("nan"))
    with pytest.raises(ValueError, match="unknown workload"):
        gym.make("phaze_env/ArchSearch-v0", workload="gpt-7")


def test_list_valued_evaluate_kwargs_work_and_bad_ones_raise(tiny):
    """A list is as good as a tuple (it used to raise inside an lru_cache and be reported as 'TPUv4 baseline
    infeasible', scaling every reward by 1); unknown or design-set options fail at construction."""
    action = SPACE.encode(Design(4, 128, 128, 4, 64, 80.0, 1, True))
    rewards = []
    for widths in ((1, 2), [1, 2]):
        env = make("phaze_env/ArchSearch-v0", tiny, evaluate_kwargs={"tensor_widths": widths}).unwrapped
        env.reset(seed=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "baseline infeasible" fallback
            _, reward, _, _, info = env.step(action)
        assert info["baseline"]["feasible"] and info["feasible"]
        rewards.append(reward)
    assert rewards[0] == rewards[1] and rewards[0] != 1.0
    assert rewards[0] == pytest.approx(info["throughput_samples_s"] / info["baseline"]["throughput_samples_s"])
    with pytest.raises(ValueError, match="unknown evaluate option 'tensor_width'"):
        make("phaze_env/ArchSearch-v0", tiny, evaluate_kwargs={"tensor_width": (1,)})
    with pytest.raises(ValueError, match="set by each design"):
        make("phaze_env/ArchSearch-v0", tiny, evaluate_kwargs={"hbm_gb": (32.0,)})


def test_evaluation_errors_propagate(tiny, monkeypatch):
    """A failing evaluator is a bug to see, not an 'infeasible' design or an infeasible baseline."""
    from phaze_env import design
    from phaze_env.env import core

    def broken(*args, **kwargs):
        raise RuntimeError("evaluator exploded")

    env = make("phaze_env/ArchSearch-v0", tiny, evaluate_kwargs={"time_limit_s": 7.0}).unwrapped  # uncached keys
    env.reset(seed=0)
    monkeypatch.setattr(design, "evaluate_design", broken)  # the door DesignSpace.evaluate goes through
    with pytest.raises(RuntimeError, match="exploded"):
        env.step(SPACE.encode(Design(4, 32, 128, 4, 64, 32.0, 1, False)))
    monkeypatch.setattr(design, "evaluate", broken)  # ... and DesignSpace.evaluate_baseline
    with pytest.raises(RuntimeError, match="exploded"):
        core.Scorer(tiny, CLUSTER, SPACE, evaluate_kwargs={"time_limit_s": 7.0}).baseline  # noqa: B018


def test_workload_list_is_cycled_and_seeded_reset_restarts(tiny):
    other = custom_workload("tiny-gpt2-wide", "GPT2Config", "GPT2LMHeadModel", 64, n_embd=256, n_layer=4, n_head=4,
                            n_inner=1024, vocab_size=1000, n_positions=64)
    env = make("phaze_env/ArchSearch-v0", tiny, workload=[tiny, other], cluster=CLUSTER.to_dict()).unwrapped
    names = []
    for seed in (0, None, None):
        obs, info = env.reset(seed=seed)
        names.append(info["workload"])
    assert names == ["tiny-gpt2", "tiny-gpt2-wide", "tiny-gpt2"]
    assert env.reset(seed=1)[1]["workload"] == "tiny-gpt2"
    assert env.reset(options={"workload": other})[1]["workload"] == "tiny-gpt2-wide"


# --- property: never raises, always finite -------------------------------------------------------------
@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_actions_never_raise_and_rewards_are_finite(env_id, tiny, data):
    env = _cached_env(env_id, tiny)
    seed = data.draw(st.integers(0, 2**31 - 1))
    env.action_space.seed(seed)
    for _ in range(12):  # 60 examples × 12 episodes × 4 ids ≈ 2900 episodes, ≈ 10 k steps
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
            assert math.isfinite(reward) and reward >= env.unwrapped.scorer.worst_reward
            assert env.observation_space.contains(obs)
            done = terminated or truncated
        assert env.unwrapped.state.reward == reward


_ENVS: dict = {}


def _cached_env(env_id, tiny):
    if env_id not in _ENVS:
        _ENVS[env_id] = make(env_id, tiny)
    return _ENVS[env_id]


# --- state replay ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("env_id", ["phaze_env/ArchSearch-v0", "phaze_env/ArchSearchSeq-v0"])
def test_state_round_trips_and_validates(env_id, tiny):
    env = make(env_id, tiny).unwrapped
    env.reset(seed=0)
    done = False
    while not done:
        mask = env.action_masks()
        action = env.action_space.sample(mask=mask.astype(np.int8)) if env_id.endswith("Seq-v0") else \
            SPACE.encode(Design(16, 32, 128, 1, 64, 80.0, 1, True))
        _, reward, done, _, _ = env.step(action)
    state = ArchSearchState.from_json(env.state.to_json())
    assert state == env.state and state.reward == reward and state.design is not None
    assert env.validate(state) and env.validate(state.to_json(), fresh=True)
    # a tampered record must fail
    forged = ArchSearchState(**{**state.__dict__, "reward": state.reward * 1.5 + 1})
    result = env.validate(forged)
    assert not result and any("reward" in e for e in result.errors)
    assert not env.validate(ArchSearchState(**{**state.__dict__, "actions": []}))


def test_state_of_early_ended_seq_episode_validates(tiny):
    env = make("phaze_env/ArchSearchSeq-v0", tiny, space=DesignSpace()).unwrapped
    env.reset(seed=0)
    env.step(12)
    state = env.state
    assert state.design is None and state.feasible is False and env.validate(state)


# --- SB3 smoke runs -------------------------------------------------------------------------------------
class _Recorder(gym.Wrapper):
    """Keeps the info and reward of every episode's last step."""

    def __init__(self, env):
        super().__init__(env)
        self.infos, self.rewards = [], []

    def step(self, action):
        result = self.env.step(action)
        if result[2]:
            self.infos.append(result[4])
            self.rewards.append(result[1])
        return result


def test_ppo_smoke(tiny):
    """PPO trains on the flat one-shot env; every step is a one-step episode whose reward is what the env's
    rules say (a throughput ratio vs TPUv4 when feasible, a penalty otherwise)."""
    from stable_baselines3 import PPO

    env = _Recorder(make("phaze_env/ArchSearchFlat-v0", tiny))
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=128)
    assert model.num_timesteps == 128 and len(env.infos) == 128
    for info, reward in zip(env.infos, env.rewards):
        if info["feasible"]:
            assert reward == pytest.approx(info["throughput_samples_s"] / info["baseline"]["throughput_samples_s"])
        else:
            assert reward < 0
    assert any(info["feasible"] for info in env.infos)


@pytest.mark.parametrize("env_id, policy, steps", [("phaze_env/ArchSearchSeq-v0", "MultiInputPolicy", 256),
                                                   ("phaze_env/ArchSearchFlat-v0", "MlpPolicy", 128)])
def test_maskable_ppo_smoke(env_id, policy, steps, tiny):
    from sb3_contrib import MaskablePPO

    env = _Recorder(make(env_id, tiny))
    model = MaskablePPO(policy, env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=steps)
    assert model.num_timesteps == steps and env.infos
    if env_id.endswith("Seq-v0"):  # exact masks: never an area violation
        assert all(info["evaluated"] for info in env.infos)
    for info, reward in zip(env.infos, env.rewards):  # the env's rules: a throughput ratio, or a penalty
        if info["feasible"]:
            assert reward == pytest.approx(info["throughput_samples_s"] / info["baseline"]["throughput_samples_s"])
        else:
            assert reward < 0


def test_sample_is_uniform_over_the_in_window_designs():
    """DesignSpace.sample draws the area knobs among the in-window combinations: every design it returns is inside
    the window, every in-window design of a small space is drawn, and each about as often as uniform sampling
    conditioned on the window (rejection sampling, what it replaced) would draw it."""
    space = DesignSpace.reduced(num_tc=(1, 4, 16), tc_width=(32, 128), tc_depth=(128,), num_vc=(1, 4), buffer_mb=(64,),
                                hbm_gb=(32.0,), microbatch=(1, 2), recompute=(False,))
    inside = [d for d in (space.decode(list(i)) for i in itertools.product(*map(range, space.nvec))) if space.area_ok(d)]
    assert 1 < len(inside) < space.combinations  # the window excludes some designs
    rng = np.random.default_rng(0)
    draws = 400 * len(inside)
    counts = Counter(space.sample(rng) for _ in range(draws))
    assert set(counts) == set(inside)
    for design in inside:  # binomial: mean 400, sd < 20; 5 sd either way
        assert abs(counts[design] - 400) < 100, (design, counts[design])
