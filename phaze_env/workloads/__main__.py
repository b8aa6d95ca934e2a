"""``python -m phaze_env.workloads MODEL [--seq N] [--microbatch N] [--tensor-width T] [--json]``: per-layer
summary (``--mbs`` and ``--tmp`` are hidden old spellings)."""

from __future__ import annotations

import json
import sys

from phaze_env.cli import HiddenAlias, OneLineParser, console, positive_int, print_output
from phaze_env.workloads.build import model_graph, model_summary
from phaze_env.workloads.registry import get_workload, workload_names


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="python -m phaze_env.workloads",
                           description="Trace a model into per-layer operator graphs and summarise them.")
    parser.add_argument("model", help=f"built-in workload: {', '.join(workload_names())}")
    parser.add_argument("--seq", type=positive_int, default=None, help="sequence length (default: the model's own)")
    parser.add_argument("--microbatch", dest="mbs", type=positive_int, default=1, help="microbatch size (default 1)")
    parser.add_argument("--mbs", dest="mbs", type=positive_int, action=HiddenAlias, new="--microbatch")
    parser.add_argument("--tensor-width", dest="tmp", type=positive_int, default=1,
                        help="tensor-parallel width (default 1)")
    parser.add_argument("--tmp", dest="tmp", type=positive_int, action=HiddenAlias, new="--tensor-width")
    parser.add_argument("--json", action="store_true", help="print JSON (default: a table)")
    parser.add_argument("--no-cache", action="store_true",
                        help="trace again even when a cached graph exists (default: use the cache)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        get_workload(args.model)
        graph = model_graph(args.model, seq_len=args.seq, microbatch=args.mbs, tensor_width=args.tmp,
                            cache=not args.no_cache)
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary = model_summary(graph)
    if args.json:
        print_output(json.dumps(summary, indent=2))
    else:
        _print_table(summary)
    return 0


def _print_table(summary: dict) -> None:
    from rich.table import Table

    table = Table(title=f"{summary['model']} · seq {summary['seq_len']} · microbatch {summary['microbatch']} · "
                        f"tensor width {summary['tensor_width']}")
    for column in ("layer", "×", "M params", "GFLOP fwd", "GFLOP bwd", "stash MiB", "out MiB", "ops f/b"):
        table.add_column(column, justify="right")
    for layer in summary["layers"]:
        table.add_row(layer["name"], str(layer["repeat"]), f"{layer['params'] / 1e6:,.1f}", f"{layer['flops_fwd'] / 1e9:,.1f}",
                      f"{layer['flops_bwd'] / 1e9:,.1f}", f"{layer['activation_stash_bytes'] / 2**20:,.1f}",
                      f"{layer['output_bytes'] / 2**20:,.2f}", f"{layer['num_ops']}/{layer['num_bwd_ops']}")
    out = console()
    out.print(table)
    out.print(f"parameters per device: {summary['params_total']:,} · layers: {summary['num_layers']} · "
              f"training FLOPs per sample: {summary['flops_total_per_sample'] / 1e12:,.2f} TFLOP")


if __name__ == "__main__":
    sys.exit(main())
