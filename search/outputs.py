"""What a search writes: ``results.json`` (:class:`~search.result.SearchResult`), ``evaluations.csv`` (every
visited design), ``throughput_vs_area.png`` and ``report.html`` (:mod:`search.report`)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from phaze_env.files import atomic_path, write_text_atomic
from search.config import SearchConfig
from search.objectives import ARCHITECTURE_AREA_LABEL, DIE_AREA_LABEL, figure_text, objective_value
from search.report import baseline_label, front_indices, plotted_area, write_report
from search.result import SearchResult
from search.store import DesignRecord

CSV_COLUMNS = ("arch_index", "workload", "status", "num_tc", "tc_width", "tc_depth", "num_vc", "vc_width", "buffer_mb",
               "hbm_gb", "area_mm2", "feasible", "throughput_samples_s", "tokens_s", "mfu", "plan", "tensor_width",
               "pipeline_stages", "data_parallel", "microbatch", "energy_per_sample_j", "bound_samples_s")
SYSTEM_CSV_COLUMNS = ("chip_area_mm2", "die_area_mm2", "hbm_stacks", "hbm_generation", "links", "link_GBps", "topology",
                      "number_format", "n_devices", "chip_power_w", "chip_cost_usd", "cluster_power_w", "cluster_cost_usd")
"""The system space's columns after :data:`CSV_COLUMNS`. Areas, one name each in every output: ``area_mm2`` the
architecture's cores and buffer (:data:`~search.objectives.ARCHITECTURE_AREA_LABEL`, as in results.json),
``chip_area_mm2`` the whole built die (:data:`~search.objectives.DIE_AREA_LABEL`: what the system space's area
objective, report and plot use), ``die_area_mm2`` the die-size knob it is built within."""

TITLE_CHARACTERS = 70  # per line of a 6-inch panel's title at 9 pt (≈ 11 characters per inch)


def write_outputs(out: Path, result: SearchResult, records: dict[tuple[str, int], DesignRecord],
                  config: SearchConfig) -> None:
    write_text_atomic(out / "results.json", result.to_json())
    write_csv(out / "evaluations.csv", records, config)
    plot(out / "throughput_vs_area.png", result, records, config)
    write_report(out / "report.html", result, records, config)


def write_csv(path: Path, records: dict[tuple[str, int], DesignRecord], config: SearchConfig) -> None:
    columns = CSV_COLUMNS + (SYSTEM_CSV_COLUMNS if config.is_system else ())
    with atomic_path(path) as temporary, open(temporary, "w", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        for (workload, index), record in sorted(records.items()):
            acc = config.arch[index]
            row = {"arch_index": index, "workload": workload, "status": record.status, "num_tc": acc.num_tc,
                   "tc_width": acc.tc_width, "tc_depth": acc.tc_depth, "num_vc": acc.num_vc, "vc_width": acc.vc_width,
                   "buffer_mb": acc.buffer_mb, "area_mm2": acc.area_mm2, "bound_samples_s": record.bound_samples_s}
            if config.is_system:
                system = config.arch.system_summary(index)
                row.update({name: system[name] for name in SYSTEM_CSV_COLUMNS})
            ev = record.evaluation
            if ev:
                row.update(hbm_gb=ev.accelerator["hbm_gb"], feasible=ev.feasible,
                           throughput_samples_s=ev.throughput_samples_s, tokens_s=ev.tokens_s, mfu=ev.mfu,
                           energy_per_sample_j=ev.energy_per_sample_j)
                if (plan := ev.plan) is not None:  # none: infeasible, its plan cells empty
                    row.update(plan=plan.notation, tensor_width=plan.tensor_width, pipeline_stages=plan.pipeline_stages,
                               data_parallel=plan.data_parallel, microbatch=plan.microbatch)
            writer.writerow(row)


def plot(path: Path, result: SearchResult, records: dict[tuple[str, int], DesignRecord],
         config: SearchConfig) -> None:
    """``throughput_vs_area.png``: :func:`front_figure`, written atomically."""
    import matplotlib.pyplot as plt

    fig = front_figure(result, records, config)
    with atomic_path(path) as temporary:
        fig.savefig(temporary, dpi=120)
    plt.close(fig)


def front_figure(result: SearchResult, records: dict[tuple[str, int], DesignRecord], config: SearchConfig):
    """Per workload: every evaluated feasible design (area, throughput), their front, the best design (its figure for
    the objective in the legend: a design chosen per $ or per W is not the front's top) and the baseline as a star;
    each panel's title wrapped to its width (a long system-space title was cut at the figure's edge)."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cluster, space = config.cluster, config.space
    fig, axes = plt.subplots(1, len(config.names), figsize=(6 * len(config.names), 4.8), squeeze=False,
                             layout="constrained")
    for ax, name in zip(axes[0], config.names):
        points = sorted((r.area_mm2, r.throughput_samples_s) for (w, _), r in records.items() if w == name and r.feasible)
        if points:
            area, throughput = np.array(points).T
            ax.scatter(area, throughput, s=8, alpha=0.5, label=f"evaluated ({len(points)})")
            front = front_indices(points)  # as report.html draws it (at equal area only the faster design)
            front_a, front_t = [points[i][0] for i in front], [points[i][1] for i in front]
            exact = config.pareto and set(config.objectives) == {"throughput", "area"}  # else another front's
            label = "Pareto front (exact)" if exact else "throughput–area front of the evaluated designs"
            ax.step(front_a, front_t, where="post", color="C3", label=label)
        best = result.best.get(name)
        if best is not None and best.feasible:
            figure = figure_text(result.objective, objective_value(best, result.objective))
            ax.scatter([plotted_area(best)], [best.throughput_samples_s], marker="D", s=50, color="C1", zorder=3,
                       label=f"best design: {figure}")
        base = result.baseline.get(name)
        if base and base.feasible:
            ax.scatter([plotted_area(base)], [base.throughput_samples_s], marker="*", s=200, color="k",
                       label=baseline_label(base))
        if config.is_system:
            ax.set(xlabel=DIE_AREA_LABEL, ylabel="training throughput (samples/s)")
            title = (f"{name} · system space at {space.budget.describe()} (each design: the chips the budget buys), "
                     f"global batch {cluster.setup.global_batch:,}")
        else:
            ax.axvline(space.budget_mm2, color="0.5", lw=0.8, ls=":", label=f"area budget {space.budget_mm2:.1f} mm²")
            ax.set(xlabel=ARCHITECTURE_AREA_LABEL, ylabel="training throughput (samples/s)")
            title = (f"{name} · {cluster.n_devices:,} devices ({cluster.name}, "
                     f"{cluster.network.link_bandwidth_Bps / 1e9:g} GB/s links), global batch {cluster.setup.global_batch:,}")
        ax.set_title("\n".join(textwrap.wrap(title, TITLE_CHARACTERS)), fontsize=9)
        ax.legend(fontsize=8)
    return fig
