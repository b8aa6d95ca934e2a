"""Speed of the operator-scheduling ILP on GPT-style layer graphs (forward and backward).

``python benchmarks/bench_schedule.py [--repeats N] [--solver cbc|highs] [--json]`` solves a synthetic
GPT-2-XL-like layer (split Q/K/V projections, attention, fused FC1+GELU, all-reduces at tensor width
> 1) on several core configurations and prints the median solve time of N uncached solves, the
makespan, how it was found and the list schedule it started from. Latencies are plain data from a
roofline-style model (matmuls on 128×128 tensor cores, vector work on 128-wide vector cores at
1.05 GHz, lᴾ ≈ l / cores plus a split overhead), so the figures do not depend on the estimator.
:func:`bench` takes any plain-data graph, for reuse with traced graphs and estimated latencies.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from phaze_env.schedule import solve_schedule

CLOCK_HZ = 1.05e9
CORE_WIDTH = 128
SPLIT_OVERHEAD = 0.1  # an op split across cores runs ~10 % slower than a perfect split
LINK_BANDWIDTH_BPS = 50e9
BYTES_PER_ELEMENT = 2
VECTOR_CYCLES_PER_ELEMENT = {"norm": 6.0, "softmax": 8.0, "elementwise": 1.0, "gelu": 4.0}


def bench(graph_ops: list[dict], edges: list[tuple[int, int]], n_tc: int, n_vc: int, *, solver: str = "cbc",
          repeats: int = 5, time_limit_s: float = 10.0) -> dict:
    """Median-of-``repeats`` uncached solve time of one graph, with what the solve found."""
    times_s, schedule = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        schedule = solve_schedule(graph_ops, edges, n_tc, n_vc, solver=solver, time_limit_s=time_limit_s, cache=False)
        times_s.append(time.perf_counter() - started)
    return {
        "ops": len(graph_ops),
        "n_tc": n_tc,
        "n_vc": n_vc,
        "solver": solver,
        "median_s": statistics.median(times_s),
        "max_s": max(times_s),
        "makespan_s": schedule.makespan_s,
        "list_schedule_makespan_s": schedule.list_schedule_makespan_s,
        "lower_bound_s": schedule.lower_bound_s,
        "gap": schedule.gap,
        "method": schedule.method,
        "solver_calls": schedule.solver_calls,
    }


def _matmul(flops: float, n_tc: int, epilogue_elements: int = 0) -> tuple[str, float, int]:
    """(unit, one-core latency, vector elements of a fused epilogue) of a GEMM."""
    return ("tc+vc" if epilogue_elements else "tc"), flops / (2 * CORE_WIDTH * CORE_WIDTH * CLOCK_HZ), epilogue_elements


def _op(unit: str, latency_s: float, n_tc: int, n_vc: int) -> dict:
    cores = {"tc": n_tc, "vc": n_vc, "tc+vc": min(n_tc, n_vc)}.get(unit)
    if cores is None:
        return {"unit": unit, "latency_s": latency_s}
    parallel_s = latency_s if cores == 1 else latency_s / cores * (1 + SPLIT_OVERHEAD)
    return {"unit": unit, "latency_s": latency_s, "latency_parallel_s": parallel_s}


def gpt_layer(n_tc: int, n_vc: int, *, tensor_width: int = 1, hidden: int = 1600, heads: int = 25,
              ffn: int = 6400, seq: int = 1024) -> tuple[tuple[list[dict], list], tuple[list[dict], list]]:
    """((forward ops, edges), (backward ops, edges)) of a pre-LN GPT block at one tensor-parallel width."""
    h, hd, f = hidden // tensor_width, hidden // heads, ffn // tensor_width
    local_heads = max(1, heads // tensor_width)
    act, attn = seq * hidden, local_heads * seq * seq

    def vector(kind: str, elements: int) -> tuple[str, float]:
        return "vc", elements * VECTOR_CYCLES_PER_ELEMENT[kind] / (CORE_WIDTH * CLOCK_HZ)

    def gemm(m: int, k: int, n: int, batch: int = 1, epilogue: str = "") -> tuple[str, float]:
        tc_s = 2 * batch * m * k * n / (2 * CORE_WIDTH * CORE_WIDTH * CLOCK_HZ)
        epilogue_s = batch * m * n * VECTOR_CYCLES_PER_ELEMENT[epilogue] / (CORE_WIDTH * CLOCK_HZ) if epilogue else 0.0
        return ("tc+vc" if epilogue else "tc"), tc_s + epilogue_s

    allreduce_s = 2 * (tensor_width - 1) / tensor_width * act * BYTES_PER_ELEMENT / LINK_BANDWIDTH_BPS
    nodes = [  # (name, (unit, one-core latency), predecessors)
        ("ln1", vector("norm", act), []),
        ("q", gemm(seq, hidden, h, epilogue="elementwise"), ["ln1"]),
        ("k", gemm(seq, hidden, h, epilogue="elementwise"), ["ln1"]),
        ("v", gemm(seq, hidden, h, epilogue="elementwise"), ["ln1"]),
        ("scores", gemm(seq, hd, seq, batch=local_heads), ["q", "k"]),
        ("scale_mask", vector("elementwise", attn), ["scores"]),
        ("softmax", vector("softmax", attn), ["scale_mask"]),
        ("attn_dropout", vector("elementwise", attn), ["softmax"]),
        ("context", gemm(seq, seq, hd, batch=local_heads), ["attn_dropout", "v"]),
        ("proj", gemm(seq, h, hidden, epilogue="elementwise"), ["context"]),
        ("proj_allreduce", ("comm", allreduce_s), ["proj"]),
        ("residual1", vector("elementwise", 2 * act), ["proj_allreduce"]),
        ("ln2", vector("norm", act), ["residual1"]),
        ("fc1_gelu", gemm(seq, hidden, f, epilogue="gelu"), ["ln2"]),
        ("fc2", gemm(seq, f, hidden, epilogue="elementwise"), ["fc1_gelu"]),
        ("fc2_allreduce", ("comm", allreduce_s), ["fc2"]),
        ("residual2", vector("elementwise", 2 * act), ["fc2_allreduce", "residual1"]),
    ]
    if tensor_width == 1:  # no all-reduce: splice the comm ops out
        bypass = {"proj_allreduce": "proj", "fc2_allreduce": "fc2"}
        nodes = [(name, op, [bypass.get(p, p) for p in preds]) for name, op, preds in nodes if name not in bypass]
    index = {name: i for i, (name, _, _) in enumerate(nodes)}
    edges = [(index[p], index[name]) for name, _, preds in nodes for p in preds]
    fwd_ops = [_op(unit, latency_s, n_tc, n_vc) for _, (unit, latency_s), _ in nodes]
    # Backward op i is the gradient of forward op i: GEMMs compute dX and dW (2×), vector ops ~1.5×.
    bwd_ops = [
        _op(unit, latency_s * (2.0 if "tc" in unit else 1.5 if unit == "vc" else 1.0), n_tc, n_vc)
        for _, (unit, latency_s), _ in nodes
    ]
    return (fwd_ops, edges), (bwd_ops, [(j, i) for i, j in edges])


CONFIGS = [  # (n_tc, n_vc, tensor_width)
    (8, 2, 1),  # TPUv4-like core counts
    (8, 2, 4),
    (4, 4, 2),
    (2, 1, 8),
    (16, 16, 1),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--solver", choices=("cbc", "highs"), default="cbc")
    parser.add_argument("--time-limit-s", type=float, default=10.0)
    parser.add_argument("--json", action="store_true", help="print one JSON object per line instead of a table")
    args = parser.parse_args()
    if not args.json:
        print(f"{'graph':<22}{'ops':>4}{'median ms':>11}{'max ms':>9}  {'method':<12}{'calls':>5}"
              f"{'makespan µs':>13}{'list µs':>10}{'gap':>9}")
    for n_tc, n_vc, tensor_width in CONFIGS:
        for direction, (ops, edges) in zip(("fwd", "bwd"), gpt_layer(n_tc, n_vc, tensor_width=tensor_width)):
            row = bench(ops, edges, n_tc, n_vc, solver=args.solver, repeats=args.repeats, time_limit_s=args.time_limit_s)
            row.update(direction=direction, tensor_width=tensor_width)
            if args.json:
                print(json.dumps(row))
            else:
                name = f"{direction} tc={n_tc} vc={n_vc} t={tensor_width}"
                print(f"{name:<22}{row['ops']:>4}{row['median_s'] * 1e3:>11.1f}{row['max_s'] * 1e3:>9.1f}  {row['method']:<12}"
                      f"{row['solver_calls']:>5}{row['makespan_s'] * 1e6:>13.1f}{row['list_schedule_makespan_s'] * 1e6:>10.1f}"
                      f"{row['gap']:>9.1e}")


if __name__ == "__main__":
    main()
