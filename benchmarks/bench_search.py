"""Exact search wall and CPU time: a cold run (empty cache: traces, schedules, placements all computed) and a
warm rerun (same cache, fresh output directory, so the SQLite resume store does not help). CPU time (user +
sys of the search and its workers and solvers) is less sensitive than wall time to other jobs on the machine.

Usage: ``python benchmarks/bench_search.py [--workload gpt2-xl] [--workers 2] [--space full|reduced]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(args: argparse.Namespace, cache: str, out: str) -> tuple[float, float, dict]:
    started, cpu_before = time.perf_counter(), _children_cpu_s()
    subprocess.run([sys.executable, "-m", "search.phaze", "--workload", args.workload, "--workers", str(args.workers),
                    "--space", args.space, "--out", out, "--quiet"], check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "PHAZE_CACHE_DIR": cache})
    elapsed, cpu_s = time.perf_counter() - started, _children_cpu_s() - cpu_before
    with open(os.path.join(out, "results.json")) as handle:
        return elapsed, cpu_s, json.load(handle)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", default="gpt2-xl")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--space", default="full")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out1, tempfile.TemporaryDirectory() as out2:
        cold_s, cold_cpu_s, result = run(args, cache, out1)
        warm_s, warm_cpu_s, again = run(args, cache, out2)
    best, again_best = result["best"][args.workload], again["best"][args.workload]
    assert again_best["throughput_samples_s"] == best["throughput_samples_s"]
    print(f"{args.workload} ({args.space} space, {result['architectures']} architectures, {result['designs']} designs), "
          f"{args.workers} workers")
    print(f"cold {cold_s:.1f} s (CPU {cold_cpu_s:.1f} s) · warm {warm_s:.1f} s (CPU {warm_cpu_s:.1f} s) · exact "
          f"{result['exact']} · evaluations {result['evaluations']} · pruned by the placement "
          f"bound {result['pruned_by_placement_bound']} · ILP solves {result['ilp_solves']} · DP calls "
          f"{result['dp_calls_this_run']} (+ {result['bound_dp_calls_this_run']} on lower bounds) · pruning ratio "
          f"{result['pruning_ratio']:.4f}")
    print(f"best {best['throughput_samples_s']:,.1f} samples/s vs TPUv4 "
          f"{result['baseline'][args.workload]['throughput_samples_s']:,.1f}")


if __name__ == "__main__":
    main()
