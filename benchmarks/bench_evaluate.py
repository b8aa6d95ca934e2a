"""Evaluator speed: cached ``evaluate`` (target < 5 ms), cold TPUv4 evaluations, and the schedule ILP on
real traced layers (gpt2-xl, opt-1.3b, llama2-7b on TPUv4, CBC; target < 2 s each) with the share of the
space's architectures whose layer schedules are settled by the fast path (sampled).

Usage: ``python benchmarks/bench_evaluate.py [--repeats 5] [--sample 200]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np


def _median_s(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sample", type=int, default=200, help="architectures sampled for the fast-path share")
    args = parser.parse_args()

    from phaze_env.cache import DiskCache
    from phaze_env.evaluate import _EVALUATIONS, Cluster, evaluate
    from phaze_env.hardware import TPUV4, ArchSpace
    from phaze_env.hardware.estimator import accelerator_table
    from phaze_env.schedule import schedule_graph
    from phaze_env.workloads import model_graph

    cluster = Cluster()
    print("== evaluate on TPUv4 (1024 devices, batch 4096, all knobs)")
    for name in ("gpt2-xl", "opt-1.3b"):
        started = time.perf_counter()
        evaluation = evaluate(name, TPUV4, cluster)
        first = time.perf_counter() - started
        _EVALUATIONS.clear_memory()
        disk = _median_s(lambda: (_EVALUATIONS.clear_memory(), evaluate(name, TPUV4, cluster)), args.repeats)
        memory = _median_s(lambda: evaluate(name, TPUV4, cluster), args.repeats * 20)
        print(f"{name:10s} first call {first:7.2f} s (from_cache={evaluation.from_cache}) · cached from disk "
              f"{disk * 1e3:6.2f} ms · cached in memory {memory * 1e3:6.3f} ms · {evaluation.summary()}")

    print("== schedule ILP on real fused layers, TPUv4, CBC, no cache (median of", args.repeats, "solves)")
    for name in ("gpt2-xl", "opt-1.3b", "llama2-7b"):
        graph = model_graph(name)
        block = next(layer for layer in graph.layers if layer.name == "block")
        for direction in ("fwd", "bwd"):
            dag = getattr(block, direction)
            table = accelerator_table(dag.ops, TPUV4, link_bandwidth_Bps=cluster.network.link_bandwidth_Bps)
            one, all_cores = table.latencies_s(0, 0)
            results = []
            times = []
            for _ in range(args.repeats):
                with tempfile.TemporaryDirectory() as empty:
                    started = time.perf_counter()
                    results.append(schedule_graph(dag, one, all_cores, TPUV4.num_tc, TPUV4.num_vc, cache=DiskCache("s", empty)))
                    times.append(time.perf_counter() - started)
            s = results[-1]
            print(f"{name:10s} {direction} {len(dag.ops):2d} ops: {statistics.median(times) * 1e3:8.1f} ms · method {s.method} "
                  f"· optimal {s.optimal} · makespan {s.makespan_s * 1e3:.3f} ms (list schedule {s.list_schedule_makespan_s * 1e3:.3f})")

    print(f"== fast-path share over {args.sample} sampled architectures of the full space (every layer, fwd+bwd, m=1, t=1)")
    space = ArchSpace()
    rng = np.random.default_rng(0)
    picks = rng.choice(len(space), size=min(args.sample, len(space)), replace=False)
    for name in ("gpt2-xl", "opt-1.3b", "llama2-7b"):
        graph = model_graph(name)
        fast = total = 0
        started = time.perf_counter()
        for index in picks:
            acc = space[int(index)]
            for layer in graph.layers:
                for dag in (layer.fwd, layer.bwd):
                    table = accelerator_table(dag.ops, acc, link_bandwidth_Bps=cluster.network.link_bandwidth_Bps)
                    one, all_cores = table.latencies_s(0, 0)
                    s = schedule_graph(dag, one, all_cores, acc.num_tc, acc.num_vc, time_limit_s=10.0)
                    fast += s.method == "fast_path"
                    total += 1
        print(f"{name:10s} {fast}/{total} layer schedules settled by the fast path ({fast / total:.1%}); "
              f"{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
