"""Trace speed and memory: cold trace (no cache) and warm (disk cache) of every built-in workload.

Each cold trace runs in a fresh subprocess so its peak RSS is the trace's own. The one-time imports
(torch, transformers, the model's module, torch.export's first use on a trivial module) are timed
separately as "import s", since every process pays them once whatever it traces.
Usage: ``python benchmarks/bench_workloads.py [--repeats 3] [--models a,b]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, resource, sys, time
t0 = time.perf_counter()
import torch, transformers  # noqa: F401
from phaze_env.workloads import model_graph
from phaze_env.workloads.trace import build_meta_model
from phaze_env.workloads.registry import get_workload
w = get_workload(sys.argv[1])
build_meta_model(w)  # loads the model's module (import cost, paid once per process)
torch.export.export(torch.nn.Linear(2, 2), (torch.zeros(1, 2),), strict=False)  # torch.export's own first-use imports
t1 = time.perf_counter()
model_graph(w.name)
t2 = time.perf_counter()
from phaze_env.workloads.build import _graph_cache, _trace_cache
warm = []
for _ in range(5):
    _graph_cache.clear_memory(); _trace_cache.clear_memory()
    s = time.perf_counter(); model_graph(w.name); warm.append(time.perf_counter() - s)
print(json.dumps({"import_s": t1 - t0, "cold_s": t2 - t1, "warm_s": sorted(warm)[2],
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    from phaze_env.workloads import workload_names

    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", default=",".join(workload_names()))
    args = parser.parse_args()
    print(f"{'model':20s} {'import s':>9s} {'cold trace s':>13s} {'warm ms':>8s} {'peak RSS MB':>12s}")
    for model in args.models.split(","):
        runs = []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as cache:
                out = subprocess.run([sys.executable, "-c", CHILD, model], capture_output=True, text=True,
                                     env={**__import__("os").environ, "PHAZE_CACHE_DIR": cache}, check=True)
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{model:20s} {med['import_s']:9.2f} {med['cold_s']:13.2f} {med['warm_s'] * 1e3:8.1f} {med['rss_mb']:12.0f}")


if __name__ == "__main__":
    main()
