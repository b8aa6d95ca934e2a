"""ZigZag vs the analytic systolic model on the same GEMMs (one 128×128 tensor core of the TPUv4 preset).

``python benchmarks/zigzag_gap.py`` prints, per shape, the cycles of the analytic model (SCALE-Sim v1 folds
plus the exposed first/last tile), ZigZag's cycles on the description of :mod:`phaze_env.hardware.zigzag_backend`
(double-buffered weights, edge accumulators), the ideal ``M·K·N / (rows·cols)`` and the ratios; also the
energy ratio. The shapes are GPT-2 XL's layer GEMMs at t=1, m=1 (one head for the batched attention
GEMMs) and three reference shapes. Needs zigzag-dse; results are cached (``zigzag-gemm``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from phaze_env.hardware import TPUV4, zigzag_backend  # noqa: E402
from phaze_env.hardware.energy import gemm_energy_j  # noqa: E402
from phaze_env.hardware.estimator import matmul_estimate  # noqa: E402
from phaze_env.workloads.graph import Gemm  # noqa: E402

SHAPES = {  # name: (M, K, N)
    "qkv": (1024, 1600, 4800), "scores (1 head)": (1024, 64, 1024), "context (1 head)": (1024, 1024, 64),
    "proj": (1024, 1600, 1600), "fc1": (1024, 1600, 6400), "fc2": (1024, 6400, 1600),
    "square 1024": (1024, 1024, 1024), "square 2048": (2048, 2048, 2048), "skinny 128×8192×128": (128, 8192, 128),
}


def main() -> None:
    acc = TPUV4
    cells = acc.tc_width * acc.tc_depth
    print(f"| GEMM | M×K×N | analytic cycles | ZigZag cycles | ideal cycles | ZigZag / analytic | ZigZag / ideal | analytic / ideal | energy ZigZag / analytic |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, (m, k, n) in SHAPES.items():
        started = time.perf_counter()
        analytic = matmul_estimate(acc, m, k, n).latency_s * acc.clock_hz
        zz = zigzag_backend.gemm(acc, m, k, n)
        ideal = m * k * n / cells
        energy = zz.energy_j / gemm_energy_j(Gemm(1, m, k, n), acc)
        print(f"| {name} | {m}×{k}×{n} | {analytic:,.0f} | {zz.cycles:,.0f} | {ideal:,.0f} | {zz.cycles / analytic:.3f} | "
              f"{zz.cycles / ideal:.3f} | {analytic / ideal:.3f} | {energy:.2f} |", flush=True)
        print(f"  ({time.perf_counter() - started:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
