"""Speed of the Gymnasium env: ``env.step`` on a cached design and on new designs.

``python benchmarks/bench_env.py [--workload bert-large] [--new 5] [--repeats 200] [--cache-dir DIR]``

* warm-up: the TPUv4 baseline (traces the workload at every microbatch size and tensor width; reported);
* new designs: ``--new`` random in-window designs of PHAZE's full space, each stepped once
  (estimate + ILP schedules + placement DP; median and p95 of the step);
* cached: ``reset`` + ``step`` of those designs again ``--repeats`` times (median of the step).

By default the evaluation cache is a fresh temporary directory, so "new" really is new.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="bert-large")
    parser.add_argument("--new", type=int, default=5, help="random new designs to evaluate")
    parser.add_argument("--repeats", type=int, default=200, help="cached steps to time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", default=None, help="evaluation cache (default: a fresh temporary directory)")
    args = parser.parse_args()
    os.environ["PHAZE_CACHE_DIR"] = args.cache_dir or tempfile.mkdtemp(prefix="phaze-bench-env-")

    import gymnasium as gym
    import numpy as np

    import phaze_env.env  # noqa: F401 - registers the ids
    from phaze_env.design import DesignSpace

    env = gym.make("phaze_env/ArchSearch-v0", workload=args.workload).unwrapped
    space, rng = DesignSpace(), np.random.default_rng(args.seed)
    started = time.perf_counter()
    env.reset(seed=args.seed)
    baseline = env.scorer.baseline
    warmup_s = time.perf_counter() - started

    actions, new_s, feasible = [], [], 0
    for _ in range(args.new):
        action = np.asarray(space.encode(space.sample(rng)))
        env.reset()
        started = time.perf_counter()
        _, reward, _, _, info = env.step(action)
        new_s.append(time.perf_counter() - started)
        actions.append(action)
        feasible += info["feasible"]

    cached_s = []
    for i in range(args.repeats):
        env.reset()
        started = time.perf_counter()
        env.step(actions[i % len(actions)])
        cached_s.append(time.perf_counter() - started)

    print(f"workload {args.workload}, cluster {env.cluster.n_devices} devices, cache {os.environ['PHAZE_CACHE_DIR']}")
    print(f"warm-up (trace + TPUv4 baseline {baseline['throughput_samples_s']:,.1f} samples/s): {warmup_s:.2f} s")
    print(f"step, new design   ({args.new} designs, {feasible} feasible): median {statistics.median(new_s):.3f} s, "
          f"p95 {_p95(new_s):.3f} s, max {max(new_s):.3f} s")
    print(f"step, cached design ({args.repeats} steps): median {statistics.median(cached_s) * 1e3:.3f} ms, "
          f"p95 {_p95(cached_s) * 1e3:.3f} ms (target < 5 ms)")


if __name__ == "__main__":
    main()
