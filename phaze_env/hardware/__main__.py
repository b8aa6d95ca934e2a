"""``python -m phaze_env.hardware [--preset NAME] [--json]``: describe an accelerator and the search space.

Prints the preset's fields, its area against the PHAZE budget, peak FLOP/s, on-chip and HBM figures and
the number of architectures inside the area window. ``--json`` writes one JSON object instead. An
unknown preset prints one line on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from phaze_env.cli import print_output
from phaze_env.design import DesignSpace
from phaze_env.hardware.accelerator import PRESETS, UnknownPresetError, get_preset, preset_description
from phaze_env.hardware.space import ArchSpace, area_budget_mm2


def summary(preset: str) -> dict:
    acc = get_preset(preset)
    start = time.perf_counter()
    space = ArchSpace()
    enumerate_s = time.perf_counter() - start
    budget = area_budget_mm2()
    return {
        "preset": preset.strip().lower(),
        "description": preset_description(preset),
        "accelerator": acc.to_dict(),
        "peak_flops": acc.peak_flops,
        "peak_vector_elements_per_s": acc.peak_vector_elements_per_s,
        "area": acc.area_mm2,
        "area_budget": budget,
        "area_fraction_of_budget": acc.area_mm2 / budget,
        "die_area_mm2": acc.die_area_mm2,
        "in_space": acc in space,
        "buffer_bytes": acc.buffer_bytes,
        "hbm_bytes": acc.hbm_bytes,
        "hbm_bandwidth_Bps": acc.hbm_bandwidth_Bps,
        "ridge_flops_per_byte": acc.peak_flops / acc.hbm_bandwidth_Bps,
        "space_size": len(space),
        "space_points_with_knobs": len(space) * DesignSpace().knob_settings,
        "space_enumeration_s": enumerate_s,
    }


def _print_table(info: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    acc = info["accelerator"]
    table = Table(title=f"accelerator preset {info['preset']!r}", show_header=True)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows = [
        ("tensor cores", f"{acc['num_tc']} × {acc['tc_depth']}×{acc['tc_width']} (rows×cols)"),
        ("vector cores", f"{acc['num_vc']} × {acc['vc_width']} lanes"),
        ("clock", f"{acc['clock_hz'] / 1e9:.3g} GHz"),
        ("peak (tensor cores)", f"{info['peak_flops'] / 1e12:.1f} TFLOP/s"),
        ("peak (vector cores)", f"{info['peak_vector_elements_per_s'] / 1e9:.1f} G elem/s"),
        ("on-chip buffer", f"{acc['buffer_mb']} MB"),
        ("HBM", f"{acc['hbm_gb']:g} GB at {acc['hbm_bandwidth_Bps'] / 1e12:.3g} TB/s"),
        ("ridge point", f"{info['ridge_flops_per_byte']:.0f} FLOP/B"),
        ("area (cores + buffer)", f"{info['area']:.1f} mm² ({100 * info['area_fraction_of_budget']:.0f} % of budget)"),
        ("area budget (TPUv4-like)", f"{info['area_budget']:.1f} mm²"),
        ("die estimate (+ uncore)", f"{info['die_area_mm2']:.1f} mm²"),
        ("in PHAZE's space", "yes" if info["in_space"] else "no"),
        ("search space", f"{info['space_size']:,} architectures ({info['space_points_with_knobs']:,} with knobs)"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console = Console()
    console.print(table)
    console.print(info["description"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m phaze_env.hardware", description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tpuv4", help=f"one of: {', '.join(PRESETS)} (default tpuv4)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args(argv)
    try:
        info = summary(args.preset)
    except UnknownPresetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print_output(json.dumps(info, indent=2))
    else:
        _print_table(info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
