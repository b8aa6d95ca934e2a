"""Exact search wall time: a cold run (empty cache: traces, schedules, placements all computed) and a
warm rerun (same cache, fresh output directory, so the SQLite resume store does not help).

Usage: ``python benchmarks/bench_search.py [--workload gpt2-xl] [--workers 2] [--space full|reduced]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def run(args: argparse.Namespace, cache: str, out: str) -> tuple[float, dict]:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "search.phaze", "--workload", args.workload, "--workers", str(args.workers),
                    "--space", args.space, "--out", out, "--quiet"], check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "PHAZE_CACHE_DIR": cache})
    elapsed = time.perf_counter() - started
    with open(os.path.join(out, "results.json")) as handle:
        return elapsed, json.load(handle)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", default="gpt2-xl")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--space", default="full")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out1, tempfile.TemporaryDirectory() as out2:
        cold_s, result = run(args, cache, out1)
        warm_s, again = run(args, cache, out2)
    best, again_best = result["best"][args.workload], again["best"][args.workload]
    assert again_best["throughput_samples_s"] == best["throughput_samples_s"]
    print(f"{args.workload} ({args.space} space, {result['architectures']} architectures, {result['designs']} designs), "
          f"{args.workers} workers")
    print(f"cold {cold_s:.1f} s · warm {warm_s:.1f} s · evaluations {result['evaluations']} · pruned by the placement "
          f"bound {result['pruned_by_placement_bound']} · ILP solves {result['ilp_solves']} · DP calls "
          f"{result['dp_calls_this_run']} · pruning ratio "
          f"{result['pruning_ratio']:.4f}")
    print(f"best {best['throughput_samples_s']:,.1f} samples/s vs TPUv4 "
          f"{result['baseline'][args.workload]['throughput_samples_s']:,.1f}")


if __name__ == "__main__":
    main()
