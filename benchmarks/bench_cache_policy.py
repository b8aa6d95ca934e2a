"""The cache policy's two figures: what the code fingerprint costs, and whether an edited model is served stale.

``python benchmarks/bench_cache_policy.py [--revision REV] [--workload tiny|NAME]``

* **fingerprint**: in a fresh interpreter, :func:`phaze_env.cache.code_version` of every module that fills a
  cache (its first call reads and hashes the sources; later calls are a memo lookup).
* **stale-answer demo**: ``phaze_env`` of ``--revision`` (default ``HEAD``; ``git archive``, so only committed
  code) is copied twice into a temporary directory; one copy has every GEMM take twice the cycles
  (:data:`GEMM_CYCLES`). ``evaluate`` runs in a fresh interpreter on the original copy (cold), on the edited
  copy with the same cache directory, and on the edited copy with an empty one (the true answer). With keys
  derived from the code the second answer is the third; with hand-bumped versions it was the first.

``tiny`` is a 4-layer GPT-2 on 16 devices (seconds); a built-in name (``gpt2-xl``) runs on TPUv4 and the
default cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCERS = ("phaze_env.workloads.build", "phaze_env.schedule", "phaze_env.placement.api", "phaze_env.evaluate",
             "phaze_env.hardware.zigzag_backend", "search.bounds", "search.run", "baselines.exact")
"""Every module that fills a cache or signs a search (each calls ``code_key(__name__, ...)``)."""
GEMM_CYCLES = ("    return best\n\n\ndef best_systolic_cycles", "    return 2 * best\n\n\ndef best_systolic_cycles")
"""Every GEMM takes twice the cycles (the end of ``phaze_env/hardware/estimator.py``'s ``systolic_cycles``)."""
HBM_ENERGY = ("\nHBM_PJ_PER_BYTE = 31.0\n", "\nHBM_PJ_PER_BYTE = 62.0\n")
"""Every HBM byte costs twice the energy (a constant of ``phaze_env/hardware/energy.py``)."""
EVALUATE_SCRIPT = """
import json, sys, time
import phaze_env
from phaze_env.evaluate import Cluster, evaluate
from phaze_env.hardware import TPUV4
from phaze_env.workloads import custom_workload
try:
    from phaze_env.cache import code_version
except ImportError:  # a revision from before the keys followed the code
    code_version = None

name = sys.argv[1]
tiny = name == "tiny"
workload = custom_workload("tiny-gpt2", "GPT2Config", "GPT2LMHeadModel", 64, n_embd=128, n_layer=4, n_head=4,
                           n_inner=512, vocab_size=1000, n_positions=64) if tiny else name
knobs = dict(microbatch=(1,), tensor_widths=(1, 2)) if tiny else {}
started = time.perf_counter()
result = evaluate(workload, TPUV4, Cluster(n_devices=16, global_batch=64) if tiny else Cluster(), **knobs)
print(json.dumps({"package": phaze_env.__file__, "version": code_version and code_version("phaze_env.evaluate"),
                  "throughput_samples_s": result.throughput_samples_s, "from_cache": result.from_cache,
                  "energy_per_sample_j": result.energy_per_sample_j, "evaluate_s": time.perf_counter() - started}))
"""


def export_package(destination: Path, revision: str = "HEAD") -> Path:
    """``phaze_env`` as committed at ``revision``, under ``destination`` (made), which is returned."""
    destination.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "phaze_env"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(destination)], input=archive.stdout, check=True)
    return destination


def edit(root: Path, relative: str, change: tuple[str, str]) -> None:
    """Replace ``change[0]`` (found exactly once) by ``change[1]`` in ``root/relative``."""
    path = root / relative
    text = path.read_text()
    if text.count(change[0]) != 1:
        raise ValueError(f"{relative} no longer reads {change[0]!r} once: update the edit")
    path.write_text(text.replace(*change))


def evaluate_in(root: Path, cache_dir: Path, workload: str = "tiny") -> dict:
    """:data:`EVALUATE_SCRIPT` run by a fresh interpreter on the project copy at ``root`` (checked: the copy's
    package is the one imported) with the cache in ``cache_dir``; plus ``entries``, the files in the cache."""
    env = {**os.environ, "PHAZE_CACHE_DIR": str(cache_dir), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([sys.executable, "-c", EVALUATE_SCRIPT, workload], cwd=root, env=env, capture_output=True,
                          text=True, timeout=3600)
    if done.returncode:
        raise RuntimeError(f"the evaluation in {root} failed:\n{done.stderr}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(answer["package"]).resolve().is_relative_to(root.resolve()):
        raise RuntimeError(f"{root}'s interpreter imported {answer['package']}, not the copy")
    return answer | {"entries": len(list(cache_dir.rglob("*.pkl")))}


def fingerprint_ms() -> dict[str, float]:
    """Milliseconds of each producer's first :func:`code_version` in a fresh interpreter (in :data:`PRODUCERS`
    order: later ones reuse the sources already read), the total, and one memoised call."""
    script = f"""
import json, time
from phaze_env.cache import code_version
times = {{}}
for module in {PRODUCERS!r}:
    started = time.perf_counter()
    code_version(module)
    times[module] = (time.perf_counter() - started) * 1e3
started = time.perf_counter()
for _ in range(10000):
    code_version("phaze_env.evaluate")
times["memoised call"] = (time.perf_counter() - started) / 10000 * 1e3
print(json.dumps(times))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    times = json.loads(done.stdout)
    return times | {"total": sum(value for key, value in times.items() if key != "memoised call")}


def stale_demo(revision: str, workload: str) -> list[tuple[str, dict]]:
    with tempfile.TemporaryDirectory(prefix="bench-cache-policy-") as temporary:
        root = Path(temporary)
        original, edited = export_package(root / "original", revision), export_package(root / "edited", revision)
        edit(edited, "phaze_env/hardware/estimator.py", GEMM_CYCLES)
        return [("original, cold cache", evaluate_in(original, root / "shared", workload)),
                ("GEMMs ×2, same cache", evaluate_in(edited, root / "shared", workload)),
                ("GEMMs ×2, empty cache", evaluate_in(edited, root / "empty", workload))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--revision", default="HEAD", help="git revision whose phaze_env the demo copies")
    parser.add_argument("--workload", default="tiny", help="'tiny' (default) or a built-in workload name")
    args = parser.parse_args(argv)
    try:
        times = fingerprint_ms()
        print("code fingerprint of this checkout, first call per producer (ms): " + ", ".join(
            f"{name} {value:.1f}" for name, value in times.items() if name not in ("total", "memoised call")))
        print(f"  all producers {times['total']:.1f} ms; a memoised call {times['memoised call'] * 1e3:.2f} µs")
    except subprocess.CalledProcessError as exc:  # a checkout from before code_version
        print(f"code fingerprint: not measurable here ({exc.stderr.strip().splitlines()[-1]})")
    try:
        rows = stale_demo(args.revision, args.workload)
    except (subprocess.CalledProcessError, RuntimeError, ValueError) as exc:
        parser.exit(1, f"{parser.prog}: error: {getattr(exc, 'stderr', None) or exc}\n")
    print(f"stale-answer demo, phaze_env at {args.revision}, workload {args.workload}:")
    for label, row in rows:
        print(f"  {label:<22} {row['throughput_samples_s']:>12,.1f} samples/s  "
              f"{'cache hit' if row['from_cache'] else 'computed':<9}  evaluate {row['evaluate_s']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
