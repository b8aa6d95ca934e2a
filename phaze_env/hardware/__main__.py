"""``python -m phaze_env.hardware [--preset NAME] [--node NODE [--year YEAR]] [--json]``: describe an accelerator and
the search space.

Prints the preset's fields, its area against the PHAZE budget, peak FLOP/s, on-chip and HBM figures and
the number of architectures inside the area window. ``--json`` writes one JSON object instead. ``--node`` (and
``--year``, default the node's first year of volume production) prices the preset's chip at another node
(:class:`phaze_env.hardware.generations.Technology`): its die area, power and cost there.

``python -m phaze_env.hardware explain ...`` is the older name of ``python -m phaze_env.explain_cli ...`` (one
layer's time split by unit): it runs that command in a child process with the same arguments, because the
explain view schedules and prices a layer — floors above the hardware model, which never imports them.

Bad input (unknown preset, workload or layer, a node without data, a year before the node) prints one line on
stderr and exits with status 2.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from phaze_env.cli import OneLineParser, console, print_output
from phaze_env.hardware.accelerator import PRESETS, Accelerator, UnknownPresetError, get_preset, preset_description
from dataclasses import replace

from phaze_env.hardware.cost import NODES, chip_estimate, get_node, preset_estimate, preset_system
from phaze_env.hardware.generations import Technology
from phaze_env.hardware.space import ArchSpace, area_budget_mm2, knob_settings

EXPLAIN_MODULE = "phaze_env.explain_cli"


def summary(preset: str, technology: Technology | None = None) -> dict:
    """The preset's figures; with ``technology``, also its chip at that node (None without system data)."""
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
        "fp8_peak_flops": acc.fp8_peak_flops,
        "peak_vector_elements_per_s": acc.peak_vector_elements_per_s,
        "vector_elements_per_cycle": acc.vector_elements_per_cycle,
        "area": acc.area_mm2,
        "area_budget": budget,
        "area_fraction_of_budget": acc.area_mm2 / budget,
        "die_area_mm2": _die_area_mm2(preset),
        "in_space": acc in space,
        "buffer_bytes": acc.buffer_bytes,
        "hbm_bytes": acc.hbm_bytes,
        "hbm_bandwidth_Bps": acc.hbm_bandwidth_Bps,
        "ridge_flops_per_byte": acc.peak_flops / acc.hbm_bandwidth_Bps,
        "space_size": len(space),
        "space_points_with_knobs": len(space) * knob_settings(),
        "space_enumeration_s": enumerate_s,
        **({"technology": technology.to_dict(), "at_node": _at_node(preset, technology)} if technology else {}),
    }


def _at_node(preset: str, technology: Technology) -> dict | None:
    """The preset's chip (its published system fields) built at ``technology``'s node: die area, power, cost."""
    try:
        system = preset_system(preset)
    except KeyError:
        return None
    estimate = chip_estimate(get_preset(preset), replace(system, node=technology.node), allow_over_reticle=True)
    return {"die_area_mm2": estimate.die_area_mm2, "dies": estimate.dies, "fits_reticle": estimate.fits_reticle,
            "power_w": estimate.total_power_w, "cost_usd": estimate.total_cost_usd}


def _die_area_mm2(preset: str) -> float | None:
    """The whole die of ``preset`` by :mod:`phaze_env.hardware.cost` (None: no public system data for it)."""
    try:
        return preset_estimate(preset).die_area_mm2
    except KeyError:
        return None


def _print_table(info: dict) -> None:
    from rich.table import Table

    acc = info["accelerator"]
    parts = Accelerator.from_dict(acc).notation_parts()
    table = Table(title=f"accelerator preset {info['preset']!r}", show_header=True)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows = [
        ("tensor cores", f"{parts['tensor cores']} (count×(width×depth))"),
        ("vector cores", f"{parts['vector cores']} (count×lanes)"),
        ("clock", f"{acc['clock_hz'] / 1e9:.3g} GHz"),
        ("peak (tensor cores)", f"{info['peak_flops'] / 1e12:.1f} TFLOP/s"
                                + (f" bf16, {info['fp8_peak_flops'] / 1e12:.1f} FP8" if info["fp8_peak_flops"] else "")),
        ("vector cores: elements/cycle", f"{info['vector_elements_per_cycle']:,} ({acc['vc_sublanes']} sublanes per lane)"),
        ("peak (vector cores)", f"{info['peak_vector_elements_per_s'] / 1e9:.1f} G elem/s"),
        ("efficiencies (GEMM, HBM)", f"{acc['gemm_efficiency']:.1%} of peak, {acc['hbm_efficiency']:.0%} of nominal"),
        ("on-chip buffer", parts["buffer"]),
        ("HBM", f"{parts['HBM']} at {acc['hbm_bandwidth_Bps'] / 1e12:.3g} TB/s"),
        ("ridge point", f"{info['ridge_flops_per_byte']:.0f} FLOP/B"),
        ("area (cores + buffer)", f"{info['area']:.1f} mm² ({100 * info['area_fraction_of_budget']:.0f} % of budget)"),
        ("area budget (TPUv4-like)", f"{info['area_budget']:.1f} mm²"),
        ("die estimate (cost model)", "–" if info["die_area_mm2"] is None else f"{info['die_area_mm2']:.1f} mm²"),
        *_at_node_rows(info),
        ("in PHAZE's space", "yes" if info["in_space"] else "no"),
        ("search space", f"{info['space_size']:,} architectures ({info['space_points_with_knobs']:,} with knobs)"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    out = console()
    out.print(table)
    out.print(info["description"])


def _at_node_rows(info: dict) -> list[tuple[str, str]]:
    if "technology" not in info:
        return []
    label = f"chip at {info['technology']['node']} ({info['technology']['year']})"
    chip = info["at_node"]
    if chip is None:
        return [(label, "– (no system data for this preset)")]
    reticle = "" if chip["fits_reticle"] else ", over the reticle"
    dies = f" on {chip['dies']} dies" if chip["dies"] > 1 else ""
    return [(label, f"{chip['die_area_mm2']:.0f} mm²{dies}{reticle} · {chip['power_w']:.0f} W · ${chip['cost_usd']:,.0f}")]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "explain":
        return subprocess.run([sys.executable, "-m", EXPLAIN_MODULE, *argv[1:]]).returncode
    parser = OneLineParser(prog="python -m phaze_env.hardware", description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tpuv4", help=f"one of: {', '.join(PRESETS)} (default tpuv4)")
    parser.add_argument("--node", help=f"price the preset's chip at this process node ({', '.join(NODES)})")
    parser.add_argument("--year", type=int, help="the year of --node's chip (default: the node's first volume year)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args(argv)
    if args.year is not None and args.node is None:
        print("error: --year needs --node", file=sys.stderr)
        return 2
    try:
        technology = None
        if args.node is not None:
            year = args.year if args.year is not None else get_node(args.node).volume_year
            technology = Technology(args.node, year)
        info = summary(args.preset, technology)
    except (UnknownPresetError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print_output(json.dumps(info, indent=2))
    else:
        _print_table(info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
