"""One cache policy (phaze_env.cache): one bounded in-memory LRU per namespace, shared by every handle, and
every bypass — ``cache=False``, ``PHAZE_CACHE=0``, an env's ``fresh`` replay — skips every layer (graphs,
schedules, placements, evaluations; memory and disk)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gymnasium as gym
import pytest

import phaze_env.env  # noqa: F401 - registers the ids
from phaze_env.cache import MEMORY_ENTRIES_ENV, DiskCache
from phaze_env.design import Design, DesignSpace
from phaze_env.evaluate import Cluster, evaluate, throughput_upper_bound
from phaze_env.hardware import TPUV4
from phaze_env.workloads import custom_workload

CLUSTER = Cluster(n_devices=16, global_batch=64)
KNOBS = dict(microbatch=(1,), tensor_widths=(1, 2))
# The space of tests/test_env.py and tests/test_objective.py (shared evaluations); 40 of its 48 designs are in the window.
SPACE = DesignSpace.reduced(num_tc=(1, 4, 16), tc_width=(32, 128), tc_depth=(128,), num_vc=(1, 4), buffer_mb=(64,),
                            hbm_gb=(32.0, 80.0), microbatch=(1,), recompute=(False, True))
DESIGN = Design(4, 32, 128, 1, 64, 32.0, 1, True)  # inside the area window
# evaluate runs the placement DP uncached (it caches the whole evaluation); a bound schedules nothing
LAYERS = {evaluate: {"trace", "eager-traffic", "graphs", "schedule", "evaluations"},
          throughput_upper_bound: {"trace", "eager-traffic", "graphs", "bounds"}}


@pytest.fixture(scope="module")
def tiny():
    return custom_workload("tiny-gpt2", "GPT2Config", "GPT2LMHeadModel", 64, n_embd=128, n_layer=4, n_head=4,
                           n_inner=512, vocab_size=1000, n_positions=64)


@pytest.fixture
def spy(monkeypatch):
    """Every DiskCache call as ``(namespace, "hit" | "miss" | "put")``."""
    calls: list[tuple[str, str]] = []
    get, put = DiskCache.get, DiskCache.put

    def spy_get(self, key):
        value = get(self, key)
        calls.append((self.namespace, "miss" if value is None else "hit"))
        return value

    def spy_put(self, key, value):
        calls.append((self.namespace, "put"))
        put(self, key, value)

    monkeypatch.setattr(DiskCache, "get", spy_get)
    monkeypatch.setattr(DiskCache, "put", spy_put)
    return calls


def _files(root: Path) -> set[Path]:
    return set(root.rglob("*.pkl"))


# --- the bypasses -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("function", [evaluate, throughput_upper_bound], ids=lambda f: f.__name__)
def test_cache_false_touches_no_layer(function, tiny, fresh_cache, spy):
    warm = function(tiny, TPUV4, CLUSTER, **KNOBS)
    assert {namespace for namespace, op in spy if op == "put"} == LAYERS[function]  # the spy sees every layer
    spy.clear()
    files = _files(fresh_cache)
    cold = function(tiny, TPUV4, CLUSTER, **KNOBS, cache=False)
    assert spy == []
    assert _files(fresh_cache) == files
    if function is evaluate:
        assert not cold.from_cache and cold.schedules > 0 and cold.throughput_samples_s == warm.throughput_samples_s
    else:
        assert cold == warm


def test_phaze_cache_0_serves_and_stores_nothing(tiny, fresh_cache, spy, monkeypatch):
    warm = evaluate(tiny, TPUV4, CLUSTER, **KNOBS)  # every layer holds this evaluation's entries, in memory and on disk
    spy.clear()
    files = _files(fresh_cache)
    in_memory = {namespace: len(DiskCache(namespace).memory) for namespace in LAYERS[evaluate]}
    monkeypatch.setenv("PHAZE_CACHE", "0")
    again = evaluate(tiny, TPUV4, CLUSTER, **KNOBS)
    assert {namespace for namespace, op in spy if op == "miss"} == LAYERS[evaluate]  # every layer asked ...
    assert "hit" not in {op for _, op in spy}  # ... none answered
    assert _files(fresh_cache) == files
    assert {namespace: len(DiskCache(namespace).memory) for namespace in LAYERS[evaluate]} == in_memory
    assert not again.from_cache and again.throughput_samples_s == warm.throughput_samples_s


def test_phaze_cache_0_skips_the_memory_too(fresh_cache, monkeypatch):
    store = DiskCache("probe")
    store.put("key", "remembered")
    monkeypatch.setenv("PHAZE_CACHE", "0")
    assert store.get("key") is None
    store.put("other", "value")
    monkeypatch.delenv("PHAZE_CACHE")
    assert store.get("other") is None and store.get("key") == "remembered"


def test_fresh_replay_touches_no_layer(tiny, spy):
    env = gym.make("phaze_env/ArchSearch-v0", workload=tiny, cluster=CLUSTER, space=SPACE,
                   evaluate_kwargs={"tensor_widths": KNOBS["tensor_widths"]}).unwrapped
    env.reset(seed=0)
    info = env.step(SPACE.encode(DESIGN))[4]
    assert info["evaluated"] and spy  # a step asks the cache
    spy.clear()
    assert env.validate(env.state, fresh=True)
    assert spy == []


def test_evaluate_kwargs_cache_false_makes_a_fresh_env(tiny, spy):
    env = gym.make("phaze_env/ArchSearch-v0", workload=tiny, cluster=CLUSTER, space=SPACE,
                   evaluate_kwargs={"cache": False, "tensor_widths": KNOBS["tensor_widths"]}).unwrapped
    env.reset(seed=0)
    info = env.step(SPACE.encode(DESIGN))[4]
    assert info["evaluated"] and info["baseline"] is not None
    assert spy == []


# --- the memory layer --------------------------------------------------------------------------------------
def _forget_on_disk(store: DiskCache, key: str) -> None:
    store._path(key).unlink()


def test_memory_is_bounded_and_evicted_entries_come_from_disk(fresh_cache):
    store = DiskCache("lru", memory_entries=4)
    for i in range(10):
        store.put(f"k{i}", i)
    assert len(store.memory) == 4
    assert [store.get(f"k{i}") for i in range(10)] == list(range(10))  # k0…k5 read back from disk
    assert len(store.memory) == 4
    _forget_on_disk(store, "k0")
    _forget_on_disk(store, "k9")
    assert store.get("k9") == 9  # most recently used: still in memory
    assert store.get("k0") is None  # evicted: only the disk had it


def test_memory_bound_from_the_environment(fresh_cache, monkeypatch):
    monkeypatch.setenv(MEMORY_ENTRIES_ENV, "3")
    store = DiskCache("lru-env")
    for i in range(5):
        store.put(f"k{i}", i)
    assert len(store.memory) == 3
    monkeypatch.setenv(MEMORY_ENTRIES_ENV, "0")  # no memory at all: every get reads the disk
    off = DiskCache("lru-off")
    off.put("key", 1)
    assert len(off.memory) == 0 and off.get("key") == 1
    monkeypatch.setenv(MEMORY_ENTRIES_ENV, "many")
    with pytest.raises(ValueError, match=MEMORY_ENTRIES_ENV):
        off.put("key", 1)
    with pytest.raises(ValueError, match="memory_entries"):
        DiskCache("lru", memory_entries=-1)


def test_handles_of_one_namespace_share_one_memory(fresh_cache, tmp_path):
    first, second = DiskCache("shared"), DiskCache("shared")
    first.put("key", "value")
    _forget_on_disk(first, "key")
    assert second.get("key") == "value" and second.memory is first.memory
    assert DiskCache("shared", root=tmp_path / "elsewhere").get("key") is None  # another directory, another memory
    second.clear_memory()
    assert first.get("key") is None


# --- a long env run ----------------------------------------------------------------------------------------
def _bench():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_env_memory.py"
    spec = importlib.util.spec_from_file_location("bench_env_memory", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_random_policy_run_keeps_memory_flat(tiny, fresh_cache, monkeypatch):
    """2,000 random steps with the memory capped at 64 entries per namespace (so schedules are evicted):
    once every design has been seen (by step 500), the resident set grows by less than 4 MiB."""
    monkeypatch.setenv(MEMORY_ENTRIES_ENV, "64")
    env = gym.make("phaze_env/ArchSearch-v0", workload=tiny, cluster=CLUSTER, space=SPACE).unwrapped
    rows = {row["step"]: row for row in _bench().rss_curve(env, steps=2_000, every=250)}
    assert rows[500]["designs_evaluated"] == rows[2_000]["designs_evaluated"] == SPACE.designs
    assert rows[2_000]["rss_mb"] - rows[500]["rss_mb"] < 4.0
    assert max(row["memory_entries_max"] for row in rows.values()) <= 64
    assert rows[2_000]["memory_entries_total"] > 64  # several namespaces in use, each capped


def test_search_bounds_are_cached_under_everything_they_depend_on(fresh_cache, monkeypatch):
    """A warm search reads its bounds back; another cluster, device cap, model constant or bound code is a miss."""
    import dataclasses

    import numpy as np

    from phaze_env.hardware import area
    from search import bounds
    from tests.tiny import CLUSTER as TINY_CLUSTER, SPACE as TINY_SPACE, TINY

    arch = TINY_SPACE.arch_space()
    computed = []
    compute = bounds._variant_throughput_bounds

    def counted(*args, **kwargs):
        computed.append(1)
        return compute(*args, **kwargs)

    monkeypatch.setattr(bounds, "_variant_throughput_bounds", counted)

    def run(cluster=TINY_CLUSTER, **kw):
        return bounds.variant_throughput_bounds(TINY, arch, cluster, microbatch=(1, 4), tensor_widths=(1, 2), **kw)

    first = run()
    bounds.DiskCache("search-bounds").clear_memory()  # read back from disk
    again = run()
    assert len(computed) == 1 and again.keys() == first.keys()
    assert all(np.array_equal(again[v], first[v]) for v in first)
    with pytest.raises(ValueError):  # shared through the memory: read-only
        next(iter(again.values()))[0] = 0.0
    run(dataclasses.replace(TINY_CLUSTER, link_bandwidth_Bps=8e9))
    run(device_caps=np.full(len(arch), 8))
    monkeypatch.setattr(area, "FP8_MAC_AREA_FACTOR", area.FP8_MAC_AREA_FACTOR * 2)  # any model constant
    run()
    monkeypatch.undo()
    monkeypatch.setattr(bounds, "_variant_throughput_bounds", counted)
    monkeypatch.setattr(bounds, "bounds_code_version", lambda: "another")  # bounds.py, pricing or collectives edited
    run()
    assert len(computed) == 5
    # the code a bound runs through is hashed into its key: the bound formulas, the pricing, the collectives and the
    # placement's pipeline formulas it calls
    assert {bounds.__name__, bounds.price_ops.__module__, bounds.Cluster.__module__, "phaze_env.comm",
            bounds.pipeline_send_s.__module__, bounds.pipeline_time_s.__module__} <= set(bounds.BOUND_CODE_MODULES)
