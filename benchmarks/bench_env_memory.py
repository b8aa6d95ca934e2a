"""Resident memory of a long random-policy run of ``phaze_env/ArchSearch-v0``: flat, because the cache is bounded.

``python benchmarks/bench_env_memory.py [--workload bert-large] [--steps 20000] [--every 1000] [--out DIR]``

A seeded random policy steps the one-shot env (``reset`` + ``step``) over a small space —
``DesignSpace.reduced`` with one microbatch size and one HBM capacity, 144 knob combinations — on 64
devices (global batch 512). Every ``--every`` steps it records the process's resident set (``VmRSS``), the
distinct designs evaluated so far and the entries the cache holds in memory (its fullest namespace and the
total over namespaces; each namespace is capped at ``PHAZE_CACHE_MEMORY_ENTRIES``, :mod:`phaze_env.cache`). Prints the curve
as a table and writes ``env_memory.csv`` and ``env_memory.png`` in ``--out`` (default
``out/bench-env-memory``). The cache is a fresh temporary directory unless ``--cache-dir`` is given, so the
first visit of each design really evaluates it.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

COLUMNS = ("step", "rss_mb", "designs_evaluated", "memory_entries_max", "memory_entries_total")


def rss_mb() -> float:
    """This process's resident set now (``VmRSS``, MiB), not its peak."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        raise RuntimeError("measuring the resident set needs /proc/self/status (Linux)") from None
    kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    return kib / 1024


def rss_curve(env: Any, steps: int, every: int, seed: int = 0) -> Iterator[dict[str, float]]:
    """Step the one-shot ``env`` with uniformly random actions ``steps`` times (a ``reset`` before each),
    yielding a row of :data:`COLUMNS` after every ``every`` steps."""
    from phaze_env.cache import cache_root, memory_entry_counts

    if steps <= 0 or every <= 0:
        raise ValueError(f"steps and every must be positive, got {steps} and {every}")
    env.action_space.seed(seed)
    env.reset(seed=seed)
    evaluated: set[tuple] = set()
    for step in range(1, steps + 1):
        _, _, _, _, info = env.step(env.action_space.sample())
        if info["evaluated"]:
            evaluated.add(tuple(info["design"].values()))
        env.reset()
        if step % every == 0:
            root = cache_root()  # this run's cache only, not other directories the process has used
            counts = [n for directory, n in memory_entry_counts().items() if Path(directory).parent == root]
            yield {"step": step, "rss_mb": rss_mb(), "designs_evaluated": len(evaluated),
                   "memory_entries_max": max(counts, default=0), "memory_entries_total": sum(counts)}


def write_csv(rows: list[dict[str, float]], path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def plot(rows: list[dict[str, float]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [row["step"] for row in rows]
    fig, left = plt.subplots(figsize=(7, 4))
    left.plot(steps, [row["rss_mb"] for row in rows], "o-", color="tab:blue", label="resident set (MiB)")
    left.set_xlabel("env steps")
    left.set_ylabel("resident set (MiB)", color="tab:blue")
    left.set_ylim(0, 1.15 * max(row["rss_mb"] for row in rows))
    right = left.twinx()
    right.plot(steps, [row["memory_entries_total"] for row in rows], "s--", color="tab:red",
               label="cache entries in memory (all namespaces)")
    right.set_ylabel("cache entries in memory", color="tab:red")
    right.set_ylim(0, 1.15 * max(max(row["memory_entries_total"] for row in rows), 1))
    lines = left.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    labels = left.get_legend_handles_labels()[1] + right.get_legend_handles_labels()[1]
    left.legend(lines, labels, loc="lower right", fontsize=8)
    left.set_title(title, fontsize=10)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="bert-large")
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--every", type=int, default=1_000, help="steps between RSS samples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="out/bench-env-memory")
    parser.add_argument("--cache-dir", default=None, help="cache directory (default: a fresh temporary directory)")
    args = parser.parse_args(argv)
    if args.steps <= 0 or args.every <= 0:
        parser.error(f"--steps and --every must be positive, got {args.steps} and {args.every}")
    os.environ["PHAZE_CACHE_DIR"] = args.cache_dir or tempfile.mkdtemp(prefix="phaze-bench-env-memory-")

    import gymnasium as gym

    import phaze_env.env  # noqa: F401 - registers the ids
    from phaze_env.cache import memory_entries_limit
    from phaze_env.design import DesignSpace
    from phaze_env.evaluate import Cluster

    space = DesignSpace.reduced(hbm_gb=(80.0,), microbatch=(1,))
    try:
        env = gym.make("phaze_env/ArchSearch-v0", workload=args.workload,
                       cluster=Cluster(n_devices=64, global_batch=512), space=space).unwrapped
    except ValueError as exc:
        parser.error(str(exc))
    print(f"{args.workload}, {len(space)} knob combinations ({space.designs} in the area window), 64 devices; "
          f"cache {os.environ['PHAZE_CACHE_DIR']}, at most {memory_entries_limit()} entries in memory per namespace")
    print(f"{'step':>7} {'RSS MiB':>9} {'designs':>8} {'mem max':>8} {'mem total':>10}")
    rows = []
    for row in rss_curve(env, args.steps, args.every, args.seed):  # printed as it goes: a long run shows progress
        rows.append(row)
        print(f"{row['step']:>7} {row['rss_mb']:>9.1f} {row['designs_evaluated']:>8} {row['memory_entries_max']:>8} "
              f"{row['memory_entries_total']:>10}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out / "env_memory.csv")
    plot(rows, out / "env_memory.png", f"ArchSearch-v0, random policy, {args.workload}: resident set per "
                                       f"{args.every:,} steps")
    print(f"wrote {out / 'env_memory.csv'} and {out / 'env_memory.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
