"""``python -m search.phaze``: the exact search's command line — options, console progress and summary.

Bad input exits with one line and status 2; Ctrl-C exits with one line and status 130 (every design
evaluated so far is in ``results.db``, and rerunning the same command resumes from it). A search that finishes
without a feasible design for some workload writes its outputs, says why on stderr and exits with status 1, so a
script can tell "no answer" from an answer.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any

from phaze_env.cli import (HiddenAlias, OneLineParser, add_cluster_size_options, add_system_budget_options, console,
                           float_list, int_list, positive_float, positive_int, print_output)
from phaze_env.design import SPACE_NAMES, DesignSpace
from phaze_env.cluster import cluster_names, get_cluster
from phaze_env.evaluate import BREAKDOWN_LABELS, DEFAULT_TIME_LIMIT_S
from phaze_env.files import writable_directory
from phaze_env.hardware import Accelerator, UnknownPresetError, get_preset, preset_names
from phaze_env.hardware.accelerator import NOTATION_LEGEND
from phaze_env.hardware.energy import DYNAMIC_ENERGY_LABEL
from phaze_env.hardware.system import OBJECTIVES, WALL_ENERGY_LABEL
from phaze_env.placement.inputs import uneven_batch_note
from phaze_env.hardware.cost import NODES
from phaze_env.hardware.system import SYSTEM_NODE
from phaze_env.stacks import DEFAULT_SYSTEM_STACK
from phaze_env.workloads import TENSOR_WIDTHS, get_workload, workload_names
from search.config import AGGREGATES, DEFAULT_WORKLOAD, SearchConfig, splittable_widths
from search.objectives import (ARCHITECTURE_AREA_LABEL, AREA, DIE_AREA_LABEL, MINIMISED, PARETO_OBJECTIVES, UNITS,
                               area_label, objective_value, parse_objectives)
from search.outputs import baseline_label
from search.result import DesignResult, SearchResult
from search.run import run_search
from search.store import ResultsStore

DEFAULT_OUT_ROOT = Path("out/phaze")  # each search writes to a directory of its own under it (SearchConfig.run_name)
INTERRUPTED = 130  # the shell's status for a program ended by SIGINT
NO_FEASIBLE_DESIGN = 1  # the search ran to the end but some workload has no design that can train (reason on stderr)



def megawatts_w(mw: float) -> float:
    """``mw`` megawatts in W (``--budget-mw``): a finite value whose watts overflow a float is refused by name, instead
    of becoming an infinite budget."""
    watts = mw * 1e6
    if math.isinf(watts) and math.isfinite(mw):
        raise ValueError(f"a budget of {mw:g} MW overflows a float in W (at most {sys.float_info.max / 1e6:.3g} MW)")
    return watts

def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m search.phaze",
        description="Exact (provably best) co-search of accelerator architecture and training placement.")
    parser.add_argument("--workload", action="append", metavar="NAME",
                        help=f"workload to optimise for (repeatable; default {DEFAULT_WORKLOAD}); one of: {', '.join(workload_names())}")
    add_cluster_size_options(parser, devices=1024, batch=4096)
    parser.add_argument("--seq", type=positive_int, default=None, help="sequence length (default: the workload's own)")
    parser.add_argument("--cluster", default="phaze", metavar="NAME",
                        help="interconnect preset (default phaze: the paper's flat ring at 4 GB/s per device); one of: "
                             f"{', '.join(cluster_names())}")
    parser.add_argument("--link-GBps", type=positive_float, default=None, dest="link_GBps", metavar="GBPS",
                        help="per-device (inter-node) link bandwidth in GB/s, gigabytes per second "
                             "(default: the cluster preset's; phaze 4)")
    parser.add_argument("--link-gbps", type=positive_float, dest="link_GBps", action=HiddenAlias,
                        new="--link-GBps (the value is, and always was, in GB/s)")
    parser.add_argument("--link-latency-us", type=float, default=None, metavar="US",
                        help="per-step (inter-node) link latency in µs (default: the cluster preset's; phaze 0)")
    parser.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd", help="optimizer state (default sgd)")
    add_system_budget_options(parser)
    parser.add_argument("--node", default=None, metavar="NODE",
                        help=f"system space: the process node every design is built at, one of {', '.join(NODES)} "
                             f"(hardware.cost.NODES: logic/SRAM density, energy per event, wafer price and D0; default "
                             f"{SYSTEM_NODE}, the node of the template the cores come from)")
    parser.add_argument("--objective", choices=OBJECTIVES, default="throughput",
                        help="system space: what the best design maximises — throughput at the budget (default), "
                             "throughput per W or per $, or minimises energy or carbon (operational + embodied) "
                             "per token")
    parser.add_argument("--space", choices=SPACE_NAMES, default="full",
                        help="PHAZE's full space (default), or DesignSpace.reduced() (576 knob combinations) for "
                             "quick looks")
    parser.add_argument("--preset", default="tpuv4", metavar="NAME",
                        help=f"base accelerator for the fields the search does not vary (HBM bandwidth, clock; "
                             f"default tpuv4); one of: {', '.join(preset_names())}")
    parser.add_argument("--area-budget", type=positive_float, default=None, metavar="MM2",
                        help="area budget in mm² (default: the TPUv4-like configuration's area)")
    parser.add_argument("--microbatch", type=int_list, default=None, metavar="SIZES",
                        help="microbatch sizes (default: the space's; full space 1,2,4,8)")
    parser.add_argument("--microbatches", type=int_list, dest="microbatch", action=HiddenAlias, new="--microbatch")
    parser.add_argument("--hbm-gb", type=float_list, default=None, metavar="GIB",
                        help="HBM capacities in GiB, 2**30 bytes (default: the space's; full space 32,64,80)")
    parser.add_argument("--tensor-widths", type=int_list, default=None, metavar="WIDTHS",
                        help=f"tensor-parallel widths (default {','.join(map(str, TENSOR_WIDTHS))}, or 1 alone for a "
                             "model whose traced matmuls cannot all be split)")
    parser.add_argument("--no-recompute", action="store_true",
                        help="forbid activation recomputation (default: the space's, recompute allowed)")
    parser.add_argument("--plan", default=None, metavar="SPEC",
                        help="the plan space every evaluation searches, in the plan notation (default: PHAZE's — "
                             "t, p, d, microbatch and per-stage none|full recompute, e = 1); e.g. "
                             "'+e=auto+rc=none|full' adds expert parallelism, its +rc replacing --no-recompute; "
                             "c and ZeRO-2/3 are refused (the search's bounds assume c1, ZeRO 0/1); the system "
                             "space's default is its stack's plan space (--stack)")
    parser.add_argument("--objectives", default=None, metavar="A,B[,C]",
                        help="Pareto mode: the exact front over two or more of "
                             f"{', '.join(PARETO_OBJECTIVES)} (minimised: {', '.join(MINIMISED)}; all but throughput "
                             "and area need --space system), e.g. throughput,area or "
                             "throughput,carbon_per_token,area; one name is --objective (default: none, the best "
                             "design)")
    parser.add_argument("--aggregate", choices=AGGREGATES, default="mean", help="multi-workload objective (default mean)")
    parser.add_argument("--workers", type=positive_int, default=os.cpu_count() or 1, metavar="N",
                        help=f"local worker processes (default: the CPU count, {os.cpu_count() or 1} here)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="Dask scheduler address, tcp://host:8786 (default: none, local processes)")
    parser.add_argument("--solver", choices=("cbc", "highs"), default="cbc", help="ILP solver (default cbc)")
    parser.add_argument("--time-limit", type=positive_float, default=DEFAULT_TIME_LIMIT_S, metavar="S",
                        help=f"seconds per ILP (default {DEFAULT_TIME_LIMIT_S:g})")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output directory, relative to the current directory (default {DEFAULT_OUT_ROOT}/ and a "
                             "directory named after the search, e.g. out/phaze/gpt2-xl-1f3a9c0e: the same command "
                             "resumes there, another search never replaces it)")
    parser.add_argument("--fresh", action="store_true",
                        help="discard the results store (results.db) in the output directory and start afresh "
                             "(default: resume from it)")
    parser.add_argument("--json", action="store_true", help="print results.json to stdout (default: tables)")
    parser.add_argument("--quiet", action="store_true", help="no progress display (default: shown)")
    return parser


def config_from_args(args: argparse.Namespace) -> SearchConfig:
    workloads = args.workload or [DEFAULT_WORKLOAD]
    for name in workloads:
        get_workload(name)
    objective, objectives = args.objective, ()
    if args.objectives is not None:
        objectives = parse_objectives(args.objectives)
        if args.objective != "throughput":
            raise ValueError("give --objective (the best design) or --objectives (a Pareto front), not both")
        if len(objectives) == 1:
            (objective,), objectives = objectives, ()
            if objective == AREA:
                raise ValueError("area alone is no search (the smallest design wins); pair it with another objective, "
                                 "e.g. --objectives throughput,area")
    if args.link_latency_us is not None and args.link_latency_us < 0:
        raise ValueError("--link-latency-us must be non-negative")
    try:
        base = get_preset(args.preset)
    except UnknownPresetError as exc:
        raise ValueError(str(exc)) from None
    cluster = get_cluster(args.cluster, args.devices, global_batch=args.batch, optimizer=args.optimizer)
    links = {name: value for name, value in (
        ("link_bandwidth_Bps", None if args.link_GBps is None else args.link_GBps * 1e9),
        ("link_latency_s", None if args.link_latency_us is None else args.link_latency_us * 1e-6)) if value is not None}
    cluster = cluster.replace(**links)
    overrides: dict[str, Any] = {"base": base}
    system = args.space == "system"
    if system:
        if args.hbm_gb is not None or args.area_budget is not None:
            raise ValueError("--hbm-gb and --area-budget do not apply to the system space (HBM stacks and the die "
                             "area are its knobs)")
        overrides |= {"budget_w": None if args.budget_mw is None else megawatts_w(args.budget_mw),
                      "budget_usd": args.budget_usd, "nre_chips": args.nre_chips,
                      "stack": args.stack or DEFAULT_SYSTEM_STACK, "node": args.node or SYSTEM_NODE}
    elif objective != "throughput":  # from --objective, or --objectives naming one
        raise ValueError(f"the {objective} objective needs --space system (its designs have a power and a cost)")
    elif args.budget_mw is not None or args.budget_usd is not None:
        raise ValueError("--budget-mw and --budget-usd apply to --space system only")
    elif args.node is not None:
        raise ValueError("--node applies to --space system only (PHAZE's spaces are the TPUv4 template's, N7)")
    elif args.nre_chips is not None:
        raise ValueError("--nre-chips applies to --space system only")
    elif args.stack is not None:
        raise ValueError("--stack applies to --space system only (PHAZE's spaces run its plan space on the --cluster "
                         "preset's stack)")
    for name, value in (("microbatch", args.microbatch), ("hbm_gb", args.hbm_gb), ("budget_mm2", args.area_budget),
                        ("recompute", (False,) if args.no_recompute else None)):
        if value is not None:
            overrides[name] = value
    if args.plan is not None and args.no_recompute:
        raise ValueError("--no-recompute does not apply with --plan: the plan's +rc=... sets recompute")
    plan = args.plan  # the text: SearchConfig parses it (a PlanSyntaxError is a ValueError), refusing +e=auto if dense
    space = DesignSpace.named(args.space, **overrides)
    if system and not len(space.arch_space()):
        raise ValueError(f"no design of the system space fits its area window and buys a whole topology unit "
                         f"at {space.budget.describe()}")
    if not len(space.arch_space()):
        raise ValueError(f"no architecture of the {args.space} space fits the area window "
                         f"({space.area_window_lower:g}·{space.budget_mm2:.1f} mm² … {space.budget_mm2:.1f} mm²)")
    tensor_widths = args.tensor_widths
    if tensor_widths is None:  # the default widths, narrowed (and said so) for a model that cannot be split
        tensor_widths, notes = splittable_widths(workloads, TENSOR_WIDTHS, args.seq)
        for note in notes:
            print(note, file=sys.stderr)
    return SearchConfig(workloads=tuple(workloads), cluster=cluster, space=space, tensor_widths=tensor_widths,
                        seq_len=args.seq, aggregate=args.aggregate, pareto=bool(objectives), solver=args.solver,
                        time_limit_s=args.time_limit, objective=objective, plan=plan,
                        **({"objectives": objectives} if objectives else {}))


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # before the search started (parsing, tracing): nothing to save yet
        print("interrupted", file=sys.stderr)
        return INTERRUPTED


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
        out = writable_directory(args.out if args.out is not None else DEFAULT_OUT_ROOT / config.run_name())
        if args.fresh:
            discard_store(out / "results.db")
    except ValueError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    from search.progress import ConsoleProgress, SearchProgress

    out_console = console()
    try:
        progress = SearchProgress() if args.quiet or args.json else ConsoleProgress(out_console, config.score_text)
        result = run_search(config, workers=args.workers, scheduler=args.scheduler, out=out, progress=progress)
    except ValueError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    except KeyboardInterrupt:
        print(interrupted_line(out / "results.db", config), file=sys.stderr)
        return INTERRUPTED
    if args.json:
        print_output(result.to_json())
    else:
        print_summary(result, out, out_console)
    if reasons := infeasible_reasons(result):
        for line in reasons:
            print(line, file=sys.stderr)
        return NO_FEASIBLE_DESIGN
    return 0


def infeasible_reasons(result: SearchResult) -> list[str]:
    """One line per workload for which the search found no feasible design, with the reason its best-bound design
    gave (empty when every workload has an answer)."""
    designs = result.shared.per_workload if result.shared is not None else result.best
    lines = [f"{name}: no feasible design — {design.reason if design is not None else 'none could train'}"
             for name, design in designs.items() if design is None or not design.feasible]
    if result.mode == "shared" and result.shared is None:
        lines.append(f"no single design trains all of {', '.join(result.workloads)}")
    lines += [f"{name}: no feasible design on the Pareto front" for name, front in result.pareto.items() if not front]
    return lines


def discard_store(db: Path) -> None:
    """``--fresh``: remove the results store ``db`` (ValueError, one line, when it cannot be removed)."""
    try:
        db.unlink(missing_ok=True)
    except OSError as exc:
        raise ValueError(f"--fresh: cannot remove {db}: {exc.strerror or exc}") from None


def interrupted_line(db: Path, config: SearchConfig) -> str:
    """What Ctrl-C leaves: the designs saved in ``db`` (only when some are: an interruption while tracing or
    bounding has saved none, and may come before ``db`` exists)."""
    saved = ResultsStore.count(db, config.signatures())
    if not saved:
        return "interrupted before any design was evaluated — nothing saved; rerun the same command to start again"
    return f"interrupted — {saved:,} designs saved in {db}; rerun the same command to resume"


# --------------------------------------------------------------------------------------------- summary

def comparison_table(title: str, best: DesignResult | None, baseline: DesignResult, objective: str = "throughput"):
    """Best design vs the baseline, one metric per row (fits a narrow terminal); an objective other than
    throughput is the first row, in its unit."""
    from rich.table import Table

    table = Table(title=title, caption=NOTATION_LEGEND)
    table.add_column("")
    table.add_column("best", justify="right")
    table.add_column(baseline_label(baseline), justify="right")

    def cells(d: DesignResult | None, key: str) -> str:
        if d is None or not d.feasible:
            return "infeasible" if key == "samples/s" else ""
        p = d.plan
        figures = {
            "samples/s": f"{d.throughput_samples_s:,.1f}", "tokens/s": f"{d.tokens_s:,.0f}", "MFU": d.mfu_text,
            ARCHITECTURE_AREA_LABEL: f"{d.area_mm2:.1f}", "plan": p.notation,
            "recompute stages": f"{sum(p.recompute)} of {p.pipeline_stages}",
        }
        if key == objective_key:
            return figure(objective_value(d, objective))
        return {**figures, **system_cells(d), **Accelerator.from_dict(d.accelerator).notation_parts()}.get(key, "")

    objective_key = f"{objective} ({UNITS[objective]})"
    keys = ([objective_key] if objective != "throughput" else []) + [
        "samples/s", "tokens/s", "MFU", ARCHITECTURE_AREA_LABEL, "tensor cores", "vector cores", "buffer", "HBM", "plan",
        "recompute stages"]
    if baseline.system is not None:
        after_area = keys.index(ARCHITECTURE_AREA_LABEL) + 1
        keys[after_area:after_area] = list(system_cells(baseline))
    for key in keys:
        table.add_row(key, cells(best, key), cells(baseline, key))
    return table


def system_cells(d: DesignResult) -> dict[str, str]:
    """A system-space design's system rows (nothing for a PHAZE-space design)."""
    s = d.system
    if s is None:
        return {}
    die = f"{s['chip_area_mm2']:.0f}" + (f" of {s['die_area_mm2']:g}" if s["die_area_mm2"] is not None else "")
    return {DIE_AREA_LABEL: die, "HBM stacks": f"{s['hbm_stacks']}×{s['hbm_generation'].upper()} "
                                          f"({s['hbm_bandwidth_Bps'] / 1e12:.2f} TB/s)",
            "links": f"{s['links']}×{s['link_GBps']:g} GB/s", "topology": s["topology"],
            "chips": f"{s['n_devices']:,}" + (f" ({s['pods']} pods)" if s.get("pods", 1) > 1 else ""),
            "chip power W": f"{s['chip_power_w']:.0f}",
            "chip cost $": f"{s['chip_cost_usd']:,.0f}",
            "cluster MW": f"{s['cluster_power_w'] / 1e6:.2f}", "cluster $M": f"{s['cluster_cost_usd'] / 1e6:.1f}",
            WALL_ENERGY_LABEL: f"{s['energy_per_token_j']:.3g}" if "energy_per_token_j" in s else "",
            "g CO2e/token": f"{s['carbon_per_token_g']:.3g}" if "carbon_per_token_g" in s else ""}


def figure(value: float) -> str:
    """A figure for a table: thousands separated and one decimal from 100 up, four significant digits below."""
    return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.4g}"


def why(best: DesignResult, baseline: DesignResult, global_batch: int | None = None) -> list[str]:
    """What bounds the best design's throughput, from its plan: time-per-batch shares, devices, energy, and a
    global batch that does not split evenly over the data-parallel replicas (:func:`uneven_batch_note`)."""
    parts = " · ".join(f"{BREAKDOWN_LABELS[part]} {share:.0%}" for part, share in best.time_shares.items()
                       if share >= 0.005)
    lines = [f"why: {best.plan.time_per_batch_s:.3g} s/batch = {parts}",
             f"     {best.plan.devices_used:,} of {best.devices_available:,} devices ({best.plan.notation})"]
    if baseline.feasible and baseline.energy_per_sample_j > 0:
        lines[-1] += (f" · {DYNAMIC_ENERGY_LABEL} {best.energy_per_sample_j / baseline.energy_per_sample_j:.2f}× "
                      f"the baseline's (higher = worse)")
    if global_batch and (note := uneven_batch_note(global_batch, best.plan.data_parallel, best.plan.microbatch)):
        lines.append(f"     {note}")
    return lines


def counts_line(result: SearchResult, out: Path) -> str:
    """The search's effort, saying what each count counts."""
    if result.shared is not None:  # the shared design is searched once per HBM capacity
        unit = "(workload, architecture, HBM capacity), each over every microbatch and recompute setting"
    else:
        unit = "(workload, architecture), each over every microbatch, recompute and HBM setting"
    proof = "proven" if result.exact else "NOT PROVEN (see below)"
    return (f"exact: {proof} · {result.architectures:,} architectures in the area window ({result.designs:,} "
            f"designs with the microbatch, recompute and HBM knobs), {result.pruning_ratio:.2%} never evaluated · "
            f"{result.evaluations:,} evaluations + {result.pruned_by_placement_bound:,} pruned by the ILP-free "
            f"placement bound, counted per {unit} · ILP solves {result.ilp_solves:,} · {result.elapsed_s:.1f} s · "
            f"results in {out}/")


def print_summary(result: SearchResult, out: Path, out_console=None) -> None:
    from rich.table import Table

    out_console = out_console or console()
    for name, front in result.pareto.items():
        objectives = result.objectives
        table = Table(title=f"Pareto front ({', '.join(objectives)}) for {name}, exact: no design of the space is "
                            "better in every objective", caption=NOTATION_LEGEND)
        is_system = result.space.get("space") == "system"
        system = [DIE_AREA_LABEL, "HBM stacks", "links", "topology", "chips"] if is_system else []
        columns = [area_label(is_system) if objective == AREA else f"{objective} ({UNITS[objective]})"
                   for objective in objectives] + [
            "tensor cores", "vector cores", "buffer", "HBM", *system, "plan"]
        for column in columns:
            table.add_column(column, justify="right")
        for d in front:
            parts = Accelerator.from_dict(d.accelerator).notation_parts() | system_cells(d)
            table.add_row(*(figure(objective_value(d, objective)) for objective in objectives),
                          *(parts[key] for key in ("tensor cores", "vector cores", "buffer", "HBM", *system)),
                          d.plan.notation)
        out_console.print(table)
    if result.shared is not None:
        shared = result.shared
        out_console.print(f"one design for {', '.join(result.workloads)}: {shared.how} "
                          f"{shared.throughput_samples_s:,.1f} samples/s", highlight=False)
        designs = shared.per_workload
        titles = {name: f"{name}: the shared design vs the baseline" for name in designs}
    else:
        designs = result.best
        titles = {name: f"{name}: best design vs the baseline (same placement DP)" for name in designs}
    for name, design in designs.items():
        out_console.print(comparison_table(titles[name], design, result.baseline[name], result.objective))
        if design is not None and design.feasible:
            for line in why(design, result.baseline[name], result.cluster.get("global_batch")):
                out_console.print(line, highlight=False)
    if result.space.get("space") == "system":  # which stack, and the efficiency the searched chips took and why
        out_console.print(DesignSpace.from_dict(result.space).stack_note(), highlight=False, markup=False)
    out_console.print(counts_line(result, out), highlight=False)
    for line in result.exactness_lines():
        out_console.print(line, highlight=False, markup=False)
