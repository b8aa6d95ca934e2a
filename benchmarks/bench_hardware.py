"""Speed of the accelerator model: space enumeration and the full latency table for one GPT-like layer.

``python benchmarks/bench_hardware.py [--repeats N]`` prints the median of N runs of (a) enumerating
PHAZE's architecture space and (b) the one-core/all-cores latency table of a synthetic GPT-2-XL-like
layer (≈ 20 forward + 20 backward ops) over every unique tensor-core and vector-core configuration,
plus the gather of per-architecture latencies for the whole space.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from phaze_env.design import DesignSpace
from phaze_env.hardware.estimator import latency_table
from phaze_env.hardware.space import ArchSpace
from phaze_env.hardware.synthetic import gpt_layer_ops


def _median_s(fn, repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    enumerate_s, space = _median_s(ArchSpace, args.repeats)
    tc, tc_index = space.tc_configs
    vc, vc_index = space.vc_configs
    fwd, bwd = gpt_layer_ops(tensor_width=2)
    ops = fwd + bwd
    table_s, table = _median_s(lambda: latency_table(ops, tc, vc, link_bandwidth_Bps=50e9), args.repeats)
    gather_s, _ = _median_s(lambda: table.latencies_s(tc_index, vc_index), args.repeats)

    print(f"space: {len(space):,} architectures in the area window ({DesignSpace().designs:,} designs with the "
          f"HBM, microbatch and recompute knobs); "
          f"enumeration {enumerate_s * 1e3:.1f} ms (median of {args.repeats})")
    print(f"unique configurations: {len(tc):,} tensor-core (num_tc, width, depth, buffer), {len(vc):,} vector-core (num_vc, width, sublanes, buffer, num_tc)")
    print(f"latency table: {len(ops)} ops ({len(fwd)} fwd + {len(bwd)} bwd) × all unique configs: "
          f"{table_s * 1e3:.1f} ms (median of {args.repeats})")
    print(f"per-architecture gather ({len(ops)} × {len(space):,} one-core + all-cores): {gather_s * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
