"""One cache policy (phaze_env.cache): keys derived from the code that computes each entry (an edited copy of the
project gets fresh answers, an unchanged one its cached answers), one bounded in-memory LRU per namespace, shared
by every handle, and every bypass — ``cache=False``, ``PHAZE_CACHE=0``, an env's ``fresh`` replay — skips every
layer (graphs, schedules, placements, evaluations; memory and disk)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import re
import shutil
from pathlib import Path

import gymnasium as gym
import pytest

import phaze_env.env  # noqa: F401 - registers the ids
from phaze_env import cache
from phaze_env.cache import MEMORY_ENTRIES_ENV, PROJECT_PACKAGES, DiskCache, code_closure, code_version
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
LAYERS = {evaluate: {"trace", "eager-traffic", "graphs", "schedule", "evaluations", "bound-timings"},
          throughput_upper_bound: {"trace", "eager-traffic", "graphs", "bounds", "bound-timings"}}


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
def _load_benchmark(name: str):
    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_random_policy_run_keeps_memory_flat(tiny, fresh_cache, monkeypatch):
    """2,000 random steps with the memory capped at 64 entries per namespace (so schedules are evicted):
    once every design has been seen (by step 500), the resident set grows by less than 4 MiB."""
    monkeypatch.setenv(MEMORY_ENTRIES_ENV, "64")
    env = gym.make("phaze_env/ArchSearch-v0", workload=tiny, cluster=CLUSTER, space=SPACE).unwrapped
    rows = {row["step"]: row for row in _load_benchmark("bench_env_memory").rss_curve(env, steps=2_000, every=250)}
    assert rows[500]["designs_evaluated"] == rows[2_000]["designs_evaluated"] == SPACE.designs
    assert rows[2_000]["rss_mb"] - rows[500]["rss_mb"] < 4.0
    assert max(row["memory_entries_max"] for row in rows.values()) <= 64
    assert rows[2_000]["memory_entries_total"] > 64  # several namespaces in use, each capped


def test_search_bounds_are_cached_under_everything_they_depend_on(fresh_cache, monkeypatch):
    """A warm search reads its bounds back; another cluster, device cap or code it runs through is a miss."""
    import numpy as np

    from phaze_env.hardware import area, estimator
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
    run(TINY_CLUSTER.replace(link_bandwidth_Bps=8e9))
    run(device_caps=np.full(len(arch), 8))
    _edit_code(monkeypatch, estimator.__name__)  # the estimator's source edited
    run()
    assert len(computed) == 4
    # the code a bound runs through is hashed into its key: the bound formulas, the pricing, the collectives, the
    # per-operator estimator and the area model
    assert {bounds.__name__, "phaze_env.pricing", bounds.Cluster.__module__, "phaze_env.comm", "phaze_env.placement.bounds",
            "phaze_env.placement.collectives", "phaze_env.placement.inputs", "phaze_env.schedule.bounds",
            estimator.__name__, area.__name__} <= set(code_closure(bounds.__name__))


# --- keys derived from the code ---------------------------------------------------------------------------
REPO = Path(__file__).resolve().parents[1]


def _edit_code(monkeypatch, module: str) -> None:
    """Let the cache see ``module``'s source as edited: every fingerprint whose closure holds it changes."""
    real = cache.code_version
    monkeypatch.setattr(cache, "code_version",
                        lambda *modules: real(*modules) + ("-edited" if module in code_closure(*modules) else ""))


def test_the_evaluation_key_covers_the_whole_model_and_only_it():
    from phaze_env import attention, comm, context_parallel, evaluate as evaluate_module, pricing, stacks
    from phaze_env import cluster as cluster_module
    from phaze_env.hardware import accelerator, area, energy, estimator, number_format
    from phaze_env.placement import inputs, search as placement_search
    from phaze_env.schedule import ilp
    from phaze_env.workloads import build, trace

    closure = set(code_closure(evaluate_module.__name__))
    model = {estimator, area, energy, number_format, accelerator, placement_search, inputs, comm, cluster_module,
             context_parallel, attention, stacks, pricing, ilp, trace, build, cache}
    assert {module.__name__ for module in model} <= closure
    # what does not compute an evaluation is not in its key: editing the env or the search keeps the evaluations
    assert not {name for name in closure if name.startswith(("phaze_env.env", "search", "baselines"))}
    # and a trace does not depend on the accelerator model: editing the estimator keeps the traced graphs
    assert estimator.__name__ not in code_closure(build.__name__) and trace.__name__ in code_closure(build.__name__)


def test_the_import_reading_agrees_with_the_layering_test():
    """The closure follows the imports ``tests/test_layering.py`` reads with ``ast`` (top level, in functions)."""
    from tests.test_layering import GRAPH

    def reachable(module: str) -> set[str]:
        seen, pending = set(), [module]
        while pending:
            if (name := pending.pop()) not in seen:
                seen.add(name)
                pending.extend(GRAPH[name])
        return seen

    assert set(GRAPH) == set(cache._project_modules())
    for module in GRAPH:
        assert set(code_closure(module)) == reachable(module), module


def test_every_cache_keys_on_the_code_that_fills_it_and_nothing_is_bumped_by_hand():
    """Each module holding a DiskCache makes its keys with ``code_key(__name__, ...)``; no version number."""
    sources = {path: path.read_text() for package in PROJECT_PACKAGES for path in (REPO / package).rglob("*.py")}
    holders = [path for path, text in sources.items() if re.search(r"^_?\w+ = DiskCache\(", text, re.MULTILINE)]
    assert len(holders) >= 7  # traces/graphs, schedules, placements, evaluations, ZigZag, bounds, exact optimum
    for path in holders:
        assert "code_key(__name__," in sources[path], path
    assert not [path for path, text in sources.items() if "_content_key" in text and path.name != "cache.py"]
    bumped = re.compile(r"^_?[A-Z_]*(?:VERSION|REVISION)[A-Z_]* = ", re.MULTILINE)
    assert not [path for path, text in sources.items() if bumped.search(text) and not path.match("experiments/*")]
    # the benchmark measuring the fingerprint's cost names every module that keys on its code (and a search's)
    from search.config import SEARCH_MODULE

    keyed = {".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
             for path, text in sources.items() if "code_key(__name__," in text}
    assert keyed | {SEARCH_MODULE} == set(_load_benchmark("bench_cache_policy").PRODUCERS)


def test_the_fingerprint_is_taken_once_and_names_only_project_modules():
    assert code_version("phaze_env.evaluate") == code_version("phaze_env.evaluate")
    hits = code_version.cache_info().hits
    code_version("phaze_env.evaluate")
    assert code_version.cache_info().hits == hits + 1  # a lookup, not a hash of the source
    for name in ("numpy", "phaze_env.no_such_module", "phaze_env..evaluate"):
        with pytest.raises(ValueError, match="not modules of the project"):
            code_closure(name)


def test_an_edited_estimator_recomputes_the_evaluation_and_keeps_the_traces(tiny, fresh_cache, spy, monkeypatch):
    from phaze_env.hardware import estimator
    from phaze_env.workloads import trace

    first = evaluate(tiny, TPUV4, CLUSTER, **KNOBS)
    spy.clear()
    _edit_code(monkeypatch, estimator.__name__)
    again = evaluate(tiny, TPUV4, CLUSTER, **KNOBS)
    assert not again.from_cache and again.throughput_samples_s == first.throughput_samples_s  # only the key moved
    assert ("evaluations", "miss") in spy and ("evaluations", "put") in spy
    assert ("graphs", "hit") in spy and ("graphs", "miss") not in spy
    spy.clear()
    _edit_code(monkeypatch, trace.__name__)  # a tracing edit: the graphs are traced again, and what follows
    assert not evaluate(tiny, TPUV4, CLUSTER, **KNOBS).from_cache
    assert {("trace", "miss"), ("graphs", "miss"), ("evaluations", "miss")} <= set(spy)


def _copy_project(destination: Path) -> Path:
    """The working tree's ``phaze_env`` (what is under test, committed or not) under ``destination``."""
    shutil.copytree(REPO / "phaze_env", destination / "phaze_env", ignore=shutil.ignore_patterns("__pycache__"))
    return destination


@pytest.mark.slow  # four interpreters, each importing torch and transformers
def test_an_edited_copy_of_the_code_gets_fresh_answers_and_an_unchanged_one_cached_ones(tmp_path):
    """The same cache directory serves four interpreters: the original code (cold), an unchanged copy elsewhere (a
    hit: same answer, nothing new on disk), that copy with every GEMM twice as slow (a new answer, slower), then
    with HBM energy doubled (a new answer, more energy per sample)."""
    bench = _load_benchmark("bench_cache_policy")
    shared = tmp_path / "cache"
    first = bench.evaluate_in(_copy_project(tmp_path / "original"), shared)
    copy = _copy_project(tmp_path / "copy")
    again = bench.evaluate_in(copy, shared)
    assert not first["from_cache"] and again["from_cache"] and again["version"] == first["version"]
    assert again["throughput_samples_s"] == first["throughput_samples_s"] and again["entries"] == first["entries"]

    bench.edit(copy, "phaze_env/hardware/estimator.py", bench.GEMM_CYCLES)
    slower = bench.evaluate_in(copy, shared)
    assert not slower["from_cache"] and slower["version"] != first["version"]
    assert slower["throughput_samples_s"] < first["throughput_samples_s"] and slower["entries"] > first["entries"]

    bench.edit(copy, "phaze_env/hardware/energy.py", bench.HBM_ENERGY)
    hungrier = bench.evaluate_in(copy, shared)
    assert not hungrier["from_cache"] and hungrier["energy_per_sample_j"] > slower["energy_per_sample_j"]


def test_a_module_run_as_a_program_is_keyed_by_its_real_name(monkeypatch):
    """``python -m phaze_env.evaluate`` runs the module as ``__main__``: its cache keys are those of
    ``phaze_env.evaluate`` (found a crash: '__main__' is not a project module)."""
    import types

    main = types.ModuleType("__main__")
    main.__spec__ = types.SimpleNamespace(name="phaze_env.evaluate")
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert cache.code_key("__main__", "x") == cache.code_key("phaze_env.evaluate", "x")


@pytest.mark.slow
def test_the_evaluate_command_line_runs_an_evaluation(tmp_path):
    done = subprocess.run([sys.executable, "-m", "phaze_env.evaluate", "--workload", "gpt2-xl", "--devices", "8",
                           "--batch", "8", "--plan", "t1p1d8m1", "--json"], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PHAZE_CACHE_DIR": str(tmp_path)}, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["feasible"]
