"""How much of the iso-power verdict rests on the torus host: ``python -m experiments.host_sensitivity``.

A system-space torus design pays TPU v4's host share per chip (156 W: 326 W measured per chip at the system minus the
170 W chip; :data:`phaze_env.hardware.system.SYSTEM_FAMILIES`), a switched design DGX H100's (575 W). This rebuilds
every iso-power answer of ``docs/system_table.json`` that is a torus with another family's host instead (default
``dgx-h100``), with the same chip, links and topology: the chip count the budget then buys, and the same design
evaluated through the same path as the search (:func:`~phaze_env.hardware.system.system_point`,
:func:`~phaze_env.cluster.point_cluster`, :func:`~phaze_env.evaluate.evaluate` with the table's search settings),
against the row's H100 reference. It re-evaluates the answer, it does not search again: under that host another
design may do better, so each figure is a lower bound on the search's answer there.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from experiments.system_table import load_rows, search_config
from phaze_env.cli import OneLineParser
from phaze_env.cluster import point_cluster
from phaze_env.design import SYSTEM_FIELDS
from phaze_env.evaluate import evaluate
from phaze_env.hardware import Accelerator
from phaze_env.hardware.system import SYSTEM_FAMILIES, SystemBudget, SystemChoice, system_point

TABLE = Path(__file__).resolve().parents[1] / "docs" / "system_table.json"


def with_host(row: dict[str, Any], host_family: str) -> tuple[int, float]:
    """(chips, samples/s) of ``row``'s torus answer paying ``host_family``'s host per chip."""
    family = dataclasses.replace(SYSTEM_FAMILIES["tpuv4-torus"], host=SYSTEM_FAMILIES[host_family].host)
    budget = SystemBudget(**row["budget"])
    config = search_config(row["workload"], budget)
    choice = SystemChoice(**{name: row["best"]["system"][name] for name in SYSTEM_FIELDS})
    accelerator = Accelerator.from_dict(row["best"]["accelerator"])
    point = system_point(accelerator, choice.chip_system(), "torus", budget, family)
    evaluation = evaluate(row["workload"], point.accelerator,
                          point_cluster(point, config.space.design_training(config.cluster)),
                          microbatch=config.space.microbatch, recompute=config.space.recompute,
                          hbm_gb=(accelerator.hbm_gb,), tensor_widths=config.tensor_widths, seq_len=config.seq_len,
                          plan=config.plan)
    return point.n_devices, evaluation.throughput_samples_s


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.host_sensitivity", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="dgx-h100", choices=sorted(set(SYSTEM_FAMILIES) - {"tpuv4-torus"}),
                        help="the family whose host the torus answers pay instead (default dgx-h100)")
    parser.add_argument("--workload", action="append", metavar="NAME", help="only these rows (repeatable)")
    args = parser.parse_args(argv)
    rows = [row for row in load_rows(TABLE) if row["kind"] == "power" and row["best"]["system"]["topology"] == "torus"
            and (not args.workload or row["workload"] in args.workload)]
    if not rows:
        parser.error("no iso-power torus answer in docs/system_table.json for the workloads asked")
    for row in rows:
        started = time.perf_counter()
        chips, samples_s = with_host(row, args.host)
        h100 = row["references"]["h100"]["samples_s"]
        print(f"{row['workload']} ({row['budget_label']}): with {args.host}'s host {chips:,} chips (was "
              f"{row['best']['chips']:,}), {samples_s:,.1f} samples/s (was {row['best']['samples_s']:,.1f}): "
              f"{samples_s / h100:.2f}× H100 (was {row['best']['samples_s'] / h100:.2f}×) "
              f"[{time.perf_counter() - started:.0f} s]", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
