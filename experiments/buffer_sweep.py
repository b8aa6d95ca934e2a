"""Buffer sweep: one design's training throughput as its on-chip buffer goes from 2 to 128 MiB.

For each buffer size the design (default: the TPUv4-like preset) is evaluated end to end
(:func:`phaze_env.evaluate.evaluate`, PHAZE's default cluster and knobs) and one transformer layer is
explained at the chosen plan (:func:`phaze_env.explain.explain_layer`). Throughput may only change where
the model says operands spill: the rows also list the layer's HBM busy time and the bytes its vector
operators spill out of their buffer share at that plan.

    python -m experiments.buffer_sweep --preset tpuv4 --workload gpt2-xl --out out/buffer-sweep

Writes ``buffer_sweep.csv`` and ``buffer_sweep.png`` in ``--out`` (``--figure`` copies the plot, e.g. to
``docs/figures/buffer_sweep.png``).
"""

from __future__ import annotations

import csv
import shutil
import sys
from pathlib import Path

from phaze_env.cli import OneLineParser, print_output
from phaze_env.evaluate import Cluster, evaluate
from phaze_env.explain import explain_layer
from phaze_env.hardware.accelerator import PRESETS, UnknownPresetError, get_preset
from phaze_env.hardware.estimator import accelerator_table, vector_terms
from phaze_env.hardware.space import BUFFER_MB_VALUES
from phaze_env.workloads import model_graph

COLUMNS = ("buffer_mb", "area_mm2", "throughput_samples_s", "tensor_width", "microbatch", "layer_ms", "layer_hbm_ms",
           "layer_spill_mb", "layer_spill_mb_t1m1", "layer_ms_t1m1")


def spilled_mb(workload: str, acc, tensor_width: int, microbatch: int, layer: str = "block") -> float:
    """MiB a layer's vector ops spill to HBM when split over all vector cores (fwd + bwd)."""
    graph = model_graph(workload, microbatch=microbatch, tensor_width=tensor_width)
    chosen = next(item for item in graph.layers if item.name == layer)
    total = 0.0
    for dag in (chosen.fwd, chosen.bwd):
        table = accelerator_table(dag.ops, acc)
        terms = vector_terms(dag.ops, table.vc_configs, acc.effective_hbm_bandwidth_Bps, acc.clock_hz, acc.bytes_per_element)
        total += float(terms.spill_all_bytes.sum())
    return total / 2**20


def sweep(preset: str, workload: str) -> list[dict]:
    rows = []
    for buffer_mb in BUFFER_MB_VALUES:
        acc = get_preset(preset).replace(buffer_mb=buffer_mb)
        evaluation = evaluate(workload, acc)
        t, m = evaluation.plan.tensor_width, evaluation.plan.microbatch
        at_plan = evaluation.explain()
        unsharded = explain_layer(workload, acc, tensor_width=1, microbatch=1)
        rows.append({
            "buffer_mb": buffer_mb, "area_mm2": round(acc.area_mm2, 1),
            "throughput_samples_s": round(evaluation.throughput_samples_s, 1), "tensor_width": t, "microbatch": m,
            "layer_ms": round(at_plan.time_s * 1e3, 4), "layer_hbm_ms": round(at_plan.busy_s["hbm"] * 1e3, 4),
            "layer_spill_mb": round(spilled_mb(workload, acc, t, m), 2),
            "layer_spill_mb_t1m1": round(spilled_mb(workload, acc, 1, 1), 2),
            "layer_ms_t1m1": round(unsharded.time_s * 1e3, 4),
        })
    return rows


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    buffers = [r["buffer_mb"] for r in rows]
    fig, left = plt.subplots(figsize=(7, 4), layout="constrained")
    left.plot(buffers, [r["throughput_samples_s"] for r in rows], "o-", color="tab:blue", label="throughput (best plan)")
    left.set_xscale("log", base=2)
    left.set_xticks(buffers, [str(b) for b in buffers])
    left.set_xlabel("on-chip buffer (MiB)")
    left.set_ylabel("samples/s", color="tab:blue")
    right = left.twinx()
    right.plot(buffers, [r["layer_spill_mb_t1m1"] for r in rows], "s--", color="tab:red", label="spilled MiB / layer (t=1, m=1)")
    right.plot(buffers, [r["layer_spill_mb"] for r in rows], "^:", color="tab:orange", label="spilled MiB / layer (best plan)")
    right.set_ylabel("vector operands spilled to HBM (MiB per layer)", color="tab:red")
    lines = left.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    labels = left.get_legend_handles_labels()[1] + right.get_legend_handles_labels()[1]
    left.legend(lines, labels, loc="center right", fontsize=8)
    left.set_title(title, fontsize=10)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="python -m experiments.buffer_sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tpuv4", help=f"one of: {', '.join(PRESETS)} (default tpuv4)")
    parser.add_argument("--workload", default="gpt2-xl", help="built-in workload (default gpt2-xl)")
    parser.add_argument("--out", default="out/buffer-sweep",
                        help="output directory, relative to the current directory (default out/buffer-sweep)")
    parser.add_argument("--figure", default=None,
                        help="also copy the plot here, e.g. docs/figures/buffer_sweep.png (default: no copy)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        get_preset(args.preset)
        rows = sweep(args.preset, args.workload)
    except (UnknownPresetError, ValueError) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "buffer_sweep.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    cluster = Cluster()  # what evaluate() uses when given none
    plot(rows, out / "buffer_sweep.png",
         f"{args.workload} on the {args.preset} preset, buffer swept · {cluster.n_devices:,} devices "
         f"({cluster.network.link_bandwidth_Bps / 1e9:g} GB/s links), global batch {cluster.setup.global_batch:,}")
    if args.figure:
        shutil.copyfile(out / "buffer_sweep.png", args.figure)
    print_output("\n".join([",".join(COLUMNS)] + [",".join(str(r[c]) for c in COLUMNS) for r in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
