"""``python -m phaze_env.explain_cli [--preset tpuv4] [--workload gpt2-xl] [--layer block] [--tensor-width 1]
[--microbatch 1] [--ops] [--json]``: one layer's time split by unit (tensor cores, vector cores, HBM, links),
what bounds it and the utilisation of each unit (:mod:`phaze_env.explain`).

``python -m phaze_env.hardware explain ...`` is the same command under its older name. Bad input (unknown
preset, workload or layer) prints one line on stderr and exits with status 2.
"""

from __future__ import annotations

import json
import sys

from phaze_env.cli import OneLineParser, positive_int, print_output
from phaze_env.explain import UNITS, explain_layer
from phaze_env.hardware.accelerator import PRESETS, UnknownPresetError, get_preset


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m phaze_env.explain_cli", description="one layer's time split by unit")
    parser.add_argument("--preset", default="tpuv4", help=f"one of: {', '.join(PRESETS)} (default tpuv4)")
    parser.add_argument("--workload", default="gpt2-xl", help="a built-in workload (default gpt2-xl)")
    parser.add_argument("--layer", default="block", help="layer name: pre, block or post (default block)")
    parser.add_argument("--tensor-width", type=positive_int, default=1, help="tensor-parallel width (default 1)")
    parser.add_argument("--microbatch", type=positive_int, default=1, help="microbatch size (default 1)")
    parser.add_argument("--ops", action="store_true", help="also list every operator")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        result = explain_layer(args.workload, get_preset(args.preset), layer=args.layer,
                               tensor_width=args.tensor_width, microbatch=args.microbatch)
    except (UnknownPresetError, ValueError) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print_output(json.dumps(result.to_dict(), indent=2))
        return 0
    lines = [result.summary()]
    if args.ops:
        lines.append(f"{'dir':3} {'op':34} {'unit':5} {'mode':4} {'time µs':>9} " + " ".join(f"{u[:8]:>9}" for u in UNITS) + "  bound")
        for op in result.ops:
            lines.append(f"{op.direction:3} {op.name[:34]:34} {op.unit:5} {'all' if op.parallel else 'one':4} {op.latency_s * 1e6:9.1f} "
                         f"{op.tensor_cores_s * 1e6:9.1f} {op.vector_cores_s * 1e6:9.1f} {op.hbm_s * 1e6:9.1f} "
                         f"{op.links_s * 1e6:9.1f}  {op.bound}")
    print_output("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
