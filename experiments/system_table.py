"""Best system per model vs TPUv4, A100 and H100 systems (and the 2024–25 flagships) at the same power and cost.

For each workload the exact system-space search (:func:`search.run.run_search`, ``--space system``) runs at a
power budget (1 MW; gpt3-175b 10 MW) and at the **iso-cost** budget of that power: the capital cost of the H100
DGX cluster the power budget buys (:func:`iso_cost_usd`), so the H100 column is the same system in both tables
and the question at iso-cost is "for the money a 1 MW H100 cluster costs, what else could one build?". Each
reference system (:data:`~phaze_env.hardware.system.REFERENCE_TOPOLOGIES`: TPUv4 in a torus as the search's own
baseline, A100 and H100 in DGX clusters) gets the chip count its budget buys from the same power and cost models
the designs get (:func:`~phaze_env.design.reference_system`), the same GEMM efficiency
(:data:`~phaze_env.hardware.system.SYSTEM_GEMM_EFFICIENCY`), the same training stack (its plan freedom and its
efficiency fitted on that chip, :class:`~phaze_env.stacks.SystemStack`) and its best plan under the search's knobs
(:func:`search.run.evaluate_reference`).

"Why it wins" is derived, not written: throughput = MFU × chips used × peak per chip in the chip's number format
(FP8 for an FP8 system: :func:`~phaze_env.hardware.number_format.format_peak_flops`) / model FLOPs per sample
(:attr:`phaze_env.evaluate.Evaluation.mfu`'s definition), so the ratio of two systems is exactly the
product of three factors (:func:`factors`), and the MFU factor is read off the time per batch split into
compute, network and pipeline bubble (:data:`TIME_GROUPS`) and the block layer's operators split into compute-,
memory- and latency-bound (:func:`phaze_env.explain.explain_layer`).

"Against the best you can buy": each row's answer is also set against the 2024–25 flagships (:data:`FLAGSHIPS`:
B200 in DGX B200 nodes, GB200 NVL72 racks, TPU v5p pods, MI300X platforms), each as its own system at its own node
with the chips the row's budget buys (:func:`flagship_rivals`); a row kept from an earlier run gets them without its
search being re-run.

Outputs: ``<docs>/system_table.json`` (every row, rewritten atomically after each) and ``<docs>/system_table.md``
(rebuilt from the JSON); each search's ``results.json``/``results.db`` under ``<out>/<workload>/<power|cost>``.
A finished row whose search signature is unchanged is kept; an interrupted search resumes from its
``results.db``. A row searched again keeps its sensitivity when its answer and every rival reproduce the nominal the
cases were run around (:func:`sensitivity_kept`; the table counts the cases computed by the row's own code).

    python -m experiments.system_table --workers 2                       # the four README models at 1 MW
    python -m experiments.system_table --workload gpt3-175b --workers 2  # adds gpt3-175b at 10 MW
    python -m experiments.system_table --rescore-flagships               # only the stored rows' flagship columns
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from experiments.cost_table import table
from experiments.validation_cases import get_case
from experiments.validation_stats import TOLERANCE
from phaze_env.cli import OneLineParser, console, positive_float, positive_int
from phaze_env.cluster import NCCL_EFFICIENCY, TPUV4_DCN_PER_CHIP_BPS, Cluster, point_cluster
from phaze_env.design import SYSTEM_FIELDS, SystemDesignSpace, reference_system
from phaze_env.evaluate import BREAKDOWN_LABELS, evaluate
from phaze_env.explain import BOUNDS, explain_layer
from phaze_env.files import write_text_atomic, writable_directory
from phaze_env.hardware import Accelerator, energy
from phaze_env.hardware.accelerator import H100_GEMM_EFFICIENCY, get_preset
from phaze_env.hardware.cost import (MI300X_GEMM_MEDIAN_CLOCKS_HZ, MI300X_POWER_W, NODES,
                                     PUBLISHED, SYSTEMS, TPUV4_ICI_LINK_BPS, TPUV4_ICI_LINKS, chip_estimate,
                                     compute_die_area_mm2, periphery_area_mm2)
from phaze_env.hardware.number_format import FORMAT_NAMES, FP8_MAC_RATE, mfu_text
from phaze_env.hardware.space import in_area_window
from phaze_env.hardware.system import (FLAGSHIP_CHIP_SYSTEMS, FLAGSHIP_FAMILIES, FLAGSHIP_TOPOLOGIES, PUE,
                                       REFERENCE_FAMILIES, RIVAL_NUMBER_FORMATS, SYSTEM_FAMILIES,
                                       REFERENCE_TOPOLOGIES, SYSTEM_GEMM_EFFICIENCY, SYSTEM_NODE, TORUS_POD_CHIPS,
                                       TOPOLOGY_FAMILIES, SystemBudget, SystemChoice, check_rival, choice_point,
                                       mi300x_engine_clock_hz, reference_point, system_point)
from phaze_env.stacks import CARRIED_FITS, DEFAULT_SYSTEM_STACK, get_system_stack
from phaze_env.workloads import Workload, get_workload
from search import cli as search_cli
from search.config import SearchConfig
from search.result import DesignResult
from search.run import evaluate_reference, run_search

DEFAULT_WORKLOADS = ("gpt2-xl", "bert-large", "opt-1.3b", "llama2-7b")
"""The README's workloads; gpt3-175b is added with ``--workload gpt3-175b`` (its 10 MW search is the slow one)."""
DEFAULT_POWER_MW = 1.0
POWER_MW = {"gpt3-175b": 10.0}
"""Workloads searched at another power budget than :data:`DEFAULT_POWER_MW`: gpt3-175b at 10 MW (issue 18's
setting; 1 MW buys too few chips to hold its batch well)."""
KINDS = ("power", "cost")
"""iso-power (the power budget) and iso-cost (:func:`iso_cost_usd` of that power)."""
ISO_COST_REFERENCE = "h100"
"""The reference whose cluster's capital cost at the power budget is the iso-cost budget."""
REFERENCES = tuple(REFERENCE_TOPOLOGIES)
TIME_GROUPS = {"compute": ("compute", "recompute", "optimizer"),
               "network": ("tp_comm", "cp_comm", "ep_comm", "p2p", "zero_comm", "dp_allreduce"),
               "bubble": ("bubble",)}
"""The parts of the time per batch (:data:`phaze_env.evaluate.BREAKDOWN_LABELS`) in three groups: the chips
computing (with recompute and the optimizer step), the network (every collective and pipeline send) and the
pipeline bubble."""
TABLE_VERSION = 5
"""5 (rows may also hold ``same_node``, the space searched at each reference's own node, ``flagships``, the 2024–25
flagships at the row's budget, and ``sensitivity``; all optional, so the published rows stay readable): every system runs the system stack (:data:`~phaze_env.stacks.DEFAULT_SYSTEM_STACK`: its plan freedom, fused
attention and efficiency per chip; version 4 ran PHAZE's plan space, eager attention and efficiency 1 everywhere);
4: each system's wall power per chip from its own family's host and scale-out network (``SystemFamily``; version 3
charged every chip DGX H100's host and no network): rows of another version are recomputed, not kept."""
REFERENCE_LABELS = {"tpuv4": "TPUv4", "a100": "A100", "h100": "H100"}
REFERENCE_SUFFIXES = {"tpuv4": "torus", "a100": "DGX", "h100": "DGX (4N, bf16/FP8)"}
"""What the README's headline table says of each reference beside its name."""

if sorted(part for parts in TIME_GROUPS.values() for part in parts) != sorted(BREAKDOWN_LABELS):
    raise ImportError("experiments.system_table.TIME_GROUPS must assign every part of BREAKDOWN_LABELS once")


def power_budget_w(workload: str, override_mw: float | None = None) -> float:
    return search_cli.megawatts_w(override_mw if override_mw is not None else POWER_MW.get(workload, DEFAULT_POWER_MW))


def iso_cost_usd(power_w: float) -> float:
    """The iso-cost budget of a power budget: what the :data:`ISO_COST_REFERENCE` cluster the power buys costs
    (chips × (modelled chip cost + host and network share), :attr:`SystemPoint.cluster_cost_usd`)."""
    point, _ = reference_system(ISO_COST_REFERENCE, SystemBudget(power_w=power_w))
    if point.n_devices < 1:  # no cluster, so no cost to match: a one-line ValueError, not a zero budget
        raise ValueError(f"no iso-cost budget at {power_w / 1e6:g} MW: the {REFERENCE_LABELS[ISO_COST_REFERENCE]} "
                         f"cluster it sets has no chips ({point.unbuildable_reason})")
    return point.cluster_cost_usd


def budget_for(kind: str, power_w: float) -> SystemBudget:
    if kind == "power":
        return SystemBudget(power_w=power_w)
    if kind == "cost":
        return SystemBudget(power_w=None, cost_usd=iso_cost_usd(power_w))
    raise ValueError(f"unknown budget kind {kind!r}; choose from {', '.join(KINDS)}")


def search_config(workload: str, budget: SystemBudget, node: str | None = None) -> SearchConfig:
    """The system-space search ``python -m search.phaze --space system --workload W --budget-... [--node NODE]`` runs
    (the CLI's own defaults: the phaze cluster's training fields, global batch 4096, SGD; node N7)."""
    flag = ["--budget-mw", repr(budget.power_w / 1e6)] if budget.power_w is not None else \
        ["--budget-usd", repr(budget.cost_usd)]
    argv = ["--space", "system", "--workload", workload, *flag, *(["--node", node] if node else [])]
    return search_cli.config_from_args(search_cli.build_parser().parse_args(argv))


def command(workload: str, budget: SystemBudget, node: str | None = None) -> str:
    flag = f"--budget-mw {budget.power_w / 1e6:g}" if budget.power_w is not None else f"--budget-usd {budget.cost_usd:.0f}"
    return (f"python -m search.phaze --space system --workload {workload} {flag}{f' --node {node}' if node else ''} "
            "--workers 2")


# --- why a system wins ------------------------------------------------------------------------------------

def peak_flops(design: DesignResult) -> float:
    """The chip's peak in its number format: the basis of its MFU (``Accelerator.format_peak_flops``)."""
    return Accelerator.from_dict(design.accelerator).format_peak_flops


def factors(a: DesignResult, b: DesignResult) -> dict[str, float]:
    """``a``'s throughput over ``b``'s as the product of chips used × peak per chip in its number format × throughput
    per peak FLOP/s (``mfu``: the rest of the ratio, so the product is the ratio). That last factor is the MFU ratio when
    both count model FLOPs alike; MFU counts per-device FLOPs × tensor width, which differs by < 0.1 % between
    tensor widths, so it is checked against the MFU ratio to 1 % (a changed MFU definition raises)."""
    return _factors((a.throughput_samples_s, a.plan.devices_used, peak_flops(a), a.mfu),
                    (b.throughput_samples_s, b.plan.devices_used, peak_flops(b), b.mfu))


def figure_factors(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float]:
    """:func:`factors` of two systems from their stored figures (:func:`system_figures`: a row's ``best`` and a
    rival's), for a row kept from an earlier run whose search answer is not rebuilt."""
    return _factors(*((f["samples_s"], f["chips_used"], f["peak_tflops"], f["mfu"]) for f in (a, b)))


def _factors(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> dict[str, float]:
    """The three factors of ``(samples/s, chips used, peak, MFU)`` a over b (:func:`factors`' definition and check)."""
    ratio = a[0] / b[0]
    out = {"chips": a[1] / b[1], "peak": a[2] / b[2]}
    out["mfu"] = ratio / (out["chips"] * out["peak"])
    if not math.isclose(out["mfu"], a[3] / b[3], rel_tol=1e-2):
        raise ValueError(f"throughput ratio {ratio:.6g} is not chips × peak × MFU "
                         f"{out['chips'] * out['peak'] * a[3] / b[3]:.6g}")
    return out


def time_groups(design: DesignResult) -> dict[str, float]:
    """Shares of the time per batch in :data:`TIME_GROUPS`."""
    shares = design.time_shares
    return {group: sum(shares.get(part, 0.0) for part in parts) for group, parts in TIME_GROUPS.items()}


def block_bound(workload: Workload, design: DesignResult, cluster: Cluster) -> dict[str, float]:
    """Shares of the block layer's operator time that are compute-, memory- (HBM) and latency-bound, at the
    design's plan (tensor width, microbatch) on its cluster: :func:`phaze_env.explain.explain_layer`."""
    explanation = explain_layer(workload, Accelerator.from_dict(design.accelerator), cluster, layer="block",
                                tensor_width=design.plan.tensor_width, microbatch=design.plan.microbatch)
    total = sum(explanation.bound_s.values()) or 1.0
    return {bound: explanation.bound_s[bound] / total for bound in BOUNDS}


def why(best: dict[str, Any], ref: dict[str, Any]) -> str:
    """One line: wins/loses by how much, the three factors largest first, and the time-per-batch groups that
    explain the MFU factor (from the rows' stored figures)."""
    f = best["factors"]
    ratio = math.prod(f.values())
    words = {"chips": f"{f['chips']:.2f}× the chips used ({best['chips_used']:,} vs {ref['chips_used']:,})",
             "peak": f"{f['peak']:.2f}× the peak per chip ({best['peak_tflops']:,.0f} {FORMAT_NAMES[best['number_format']]} "
                     f"vs {ref['peak_tflops']:,.0f} {FORMAT_NAMES[ref['number_format']]} TFLOP/s)",
             "mfu": f"{f['mfu']:.2f}× the MFU ({mfu_text(best['mfu'], best['number_format'])} vs "
                    f"{mfu_text(ref['mfu'], ref['number_format'])})"}
    order = sorted(f, key=lambda k: -abs(math.log(f[k])))
    groups = " / ".join(f"{best['time_groups'][g]:.0%}" for g in TIME_GROUPS)
    ref_groups = " / ".join(f"{ref['time_groups'][g]:.0%}" for g in TIME_GROUPS)
    memory = f"block {best['block_bound']['memory']:.0%} vs {ref['block_bound']['memory']:.0%} memory-bound"
    return (f"{'wins' if ratio >= 1 else 'loses'} {ratio:.2f}×: " + ", ".join(words[k] for k in order)
            + f"; batch compute/network/bubble {groups} vs {ref_groups}; {memory}")


# --- a row ----------------------------------------------------------------------------------------------

def system_figures(workload: Workload, design: DesignResult, cluster: Cluster) -> dict[str, Any]:
    """What the table shows of one system (search answer or reference), from its :class:`DesignResult`."""
    acc = Accelerator.from_dict(design.accelerator)
    s = design.system
    return {"samples_s": design.throughput_samples_s, "chips": s["n_devices"], "chips_used": design.plan.devices_used,
            "peak_tflops": acc.format_peak_flops / 1e12, "mfu": design.mfu, "number_format": acc.number_format,
            "design": acc.notation(), "accelerator": design.accelerator, "plan": design.plan.notation,
            "proven": design.proven,
            "chip_power_w": s["chip_power_w"], "chip_cost_usd": s["chip_cost_usd"],
            "cluster_power_w": s["cluster_power_w"], "cluster_cost_usd": s["cluster_cost_usd"],
            "system": s, "time_groups": time_groups(design), "block_bound": block_bound(workload, design, cluster),
            "time_per_batch_s": design.plan.time_per_batch_s}


def answer_choice(best: DesignResult) -> SystemChoice:
    """The system knobs (:data:`~phaze_env.design.SYSTEM_FIELDS`) of a system-space search's answer."""
    return SystemChoice(**{name: best.system[name] for name in SYSTEM_FIELDS})


def best_cluster(config: SearchConfig, best: DesignResult) -> Cluster:
    """The cluster the search evaluated its answer on, rebuilt from the answer's system knobs as the space builds
    every row (:func:`~phaze_env.hardware.system.choice_point`, :func:`~phaze_env.cluster.point_cluster`)."""
    point = choice_point(answer_choice(best), Accelerator.from_dict(best.accelerator), config.space.budget,
                         config.space.node)
    if point.n_devices != best.system["n_devices"]:
        raise ValueError(f"rebuilt {point.n_devices} chips for the answer, the search had {best.system['n_devices']}")
    return point_cluster(point, config.space.design_training(config.cluster))


SENSITIVITY_NODE = "4N"
"""The node of the sensitivity row: the best N7 design's architecture built at H100's node (:data:`NODES`)."""


def node_sensitivity(config: SearchConfig, best: DesignResult, node: str = SENSITIVITY_NODE) -> dict[str, Any]:
    """The search's answer built at ``node`` instead of :data:`SYSTEM_NODE`: the same architecture and system knobs,
    the node's densities, energy per event, wafer cost and D0 (:data:`phaze_env.hardware.cost.NODES`), hence
    its own die, power, cost and chip count at the budget, evaluated with its best plan. ``in_window``: the
    compute block still fills the die's area window, i.e. the design belongs to the same space built at
    ``node``, so its throughput is a lower bound on that space's optimum (not searched here)."""
    choice = answer_choice(best)
    accelerator = choice.accelerator(Accelerator.from_dict(best.accelerator))
    chip_system = dataclasses.replace(choice.chip_system(), node=node)
    point = system_point(accelerator, chip_system, choice.topology, config.space.budget)
    compute = float(compute_die_area_mm2(accelerator.area_mm2, accelerator.buffer_mb, chip_system))
    room = choice.die_area_mm2 - sum(periphery_area_mm2(chip_system).values())
    in_window = bool(room > 0 and in_area_window(accelerator.num_tc, accelerator.num_vc, compute, room,
                                                 config.space.area_window_lower))
    if point.n_devices < 1:
        return {"node": node, "chips": 0, "samples_s": 0.0, "in_window": in_window}
    space = config.space
    evaluation = evaluate(config.workload(best.workload), accelerator,
                          point_cluster(point, config.space.design_training(config.cluster)),
                          microbatch=space.microbatch, recompute=space.recompute, hbm_gb=(accelerator.hbm_gb,),
                          tensor_widths=config.tensor_widths, seq_len=config.seq_len, solver=config.solver,
                          time_limit_s=config.time_limit_s, plan=config.plan)
    return {"node": node, "chips": point.n_devices, "samples_s": evaluation.throughput_samples_s,
            "plan": evaluation.plan.notation if evaluation.plan else "", "proven": evaluation.proven, "in_window": in_window,
            "die_mm2": point.estimate.die_area_mm2, "chip_power_w": point.estimate.total_power_w,
            "chip_cost_usd": point.estimate.total_cost_usd}


def best_reference(config: SearchConfig, workload: str, name: str,
                   budget: SystemBudget) -> tuple[DesignResult, Cluster, dict[str, float]]:
    """Reference ``name`` at ``budget`` in the number format it trains fastest in (of
    :data:`~phaze_env.hardware.system.RIVAL_NUMBER_FORMATS`), its cluster and its throughput per format."""
    results = {}
    for number_format in RIVAL_NUMBER_FORMATS[name]:
        _, cluster = reference_system(name, budget, number_format, config.space.reference_training(name, config.cluster))
        results[number_format] = (evaluate_reference(config, workload, name, number_format), cluster)
    by_format = {f: d.throughput_samples_s for f, (d, _) in results.items()}
    design, cluster = results[max(by_format, key=by_format.get)]
    return design, cluster, by_format


def table_row(config: SearchConfig, kind: str, power_w: float, *, workers: int, out: Path,
              progress=None, flagships: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the system-space search ``config`` (one workload, at the ``kind`` budget of ``power_w``:
    :func:`search_config`), evaluate the references and the ``flagships`` (default all) at its budget and explain the
    ratios: one table row."""
    (workload,) = config.names
    budget = config.space.budget
    started = time.perf_counter()
    result = run_search(config, workers=workers, out=out / workload / kind, progress=progress)
    best = result.best[workload]
    if best is None or not best.feasible:
        raise ValueError(f"no feasible system for {workload} at {budget.describe()}")
    figures = system_figures(config.workload(workload), best, best_cluster(config, best))
    row = {"workload": workload, "kind": kind, "budget": budget.to_dict(), "budget_label": budget.describe(),
           "power_w": power_w, "signature": config.signature, "command": command(workload, budget),
           "exact": result.exact, "evaluations": result.evaluations,
           "pruned_by_placement_bound": result.pruned_by_placement_bound, "ilp_solves": result.ilp_solves,
           "search_s": result.elapsed_s, "best": figures | {"factors": {}}, "references": {}, "why": {}}
    for name in REFERENCES:
        design, cluster, by_format = best_reference(config, workload, name, budget)
        if not design.feasible:
            row["references"][name] = {"feasible": False, "reason": design.reason, "chips": design.devices_available}
            continue
        row["references"][name] = system_figures(config.workload(workload), design, cluster) | {"feasible": True,
                                                                               "samples_s_by_format": by_format}
        row["best"]["factors"][name] = factors(best, design)
        row["why"][name] = why(row["best"] | {"factors": row["best"]["factors"][name]}, row["references"][name])
    row["flagships"] = flagship_rivals(config, row["best"], flagship_names(flagships))
    row["node_sensitivity"] = node_sensitivity(config, best)
    row["same_node"] = same_node(config, kind, row, workers=workers, out=out, progress=progress)
    row["elapsed_s"] = time.perf_counter() - started
    return row


FLAGSHIPS = tuple(FLAGSHIP_TOPOLOGIES)
"""The 2024–25 flagships each row's answer is also set against — "against the best you can buy" (issue 29 item 4):
each built as its own system (:data:`~phaze_env.hardware.system.FLAGSHIP_FAMILIES`) at its own node, with the chips
the row's budget buys, running the same stack at the efficiency carried to it (:data:`~phaze_env.stacks.CARRIED_FITS`)."""
FLAGSHIP_LABELS = {"b200": "B200 (DGX)", "gb200": "GB200 NVL72", "tpuv5p": "TPU v5p", "mi300x": "MI300X"}
RIVAL_LABELS = REFERENCE_LABELS | FLAGSHIP_LABELS
"""Every rival's label: the same-node references' and the 2024–25 flagships'."""
FLAGSHIP_PUBLISHED_W = {name: PUBLISHED[name].power_w for name in ("b200", "gb200", "tpuv5p")} | {"mi300x": MI300X_POWER_W}
"""Each flagship's published chip power (``cost.PUBLISHED``; AMD's 750 W for the MI300X, ``cost.MI300X_POWER_W``; None:
not published), set beside its modelled power in the table: the chip count at a power budget follows the model's."""


def flagship_names(names: Sequence[str] | None) -> tuple[str, ...]:
    """The flagships a run sets the rows against (default :data:`FLAGSHIPS`); an unknown rival, or a same-node
    reference named as one, is a one-line ``ValueError``."""
    if not names:
        return FLAGSHIPS
    for name in names:
        check_rival(name)  # an unknown rival: UnknownRivalError naming the known ones
        if name not in FLAGSHIPS:
            raise ValueError(f"{name!r} is a same-node reference of every row, not a 2024–25 flagship; flagships: "
                             f"{', '.join(FLAGSHIPS)}")
    return tuple(dict.fromkeys(names))


def flagship_rivals(config: SearchConfig, best: dict[str, Any], names: Sequence[str] = FLAGSHIPS) -> dict[str, Any]:
    """Each flagship of ``names`` (default :data:`FLAGSHIPS`) at the row's budget in its fastest number format
    (:func:`best_reference`), its figures and the row's answer (``best``: :func:`system_figures`) over it — the ratio,
    its three factors (:func:`figure_factors`) and why — plus the chip whose stack efficiency it runs at
    (``fit_from``)."""
    (workload,) = config.names
    stack = config.space.system_stack
    out: dict[str, Any] = {}
    for name in flagship_names(names):
        design, cluster, by_format = best_reference(config, workload, name, config.space.budget)
        if not design.feasible:
            out[name] = {"feasible": False, "reason": design.reason, "chips": design.devices_available}
            continue
        rival = system_figures(config.workload(workload), design, cluster) | {
            "feasible": True, "samples_s_by_format": by_format,
            "fit_from": stack.rival_fit(name)[1] if stack is not None else None}
        found = figure_factors(best, rival)
        out[name] = rival | {"factors": found, "ratio": best["samples_s"] / rival["samples_s"],
                             "why": why(best | {"factors": found}, rival)}
    return out


def stored_row_config(row: dict[str, Any]) -> SearchConfig:
    """The search config of a stored row at the budget it was run at (its ``budget``, not one recomputed: an iso-cost
    budget follows the H100 model, and the row's answer was found at the stored one)."""
    return search_config(row["workload"], SystemBudget(**row["budget"]))


def select_rows(rows: Sequence[dict[str, Any]], workloads: Sequence[str] | None,
                kinds: Sequence[str] | None) -> list[dict[str, Any]]:
    """The stored rows of ``workloads`` × ``kinds`` (None: every stored one of them); a named pair (a workload with no
    stored row at all, or a workload and a kind both named) with no stored row is a one-line ``ValueError`` naming the
    stored ones."""
    if not rows:
        raise ValueError("no stored table to rescore: run the table first (python -m experiments.system_table)")
    by_key = {row_key(r): r for r in rows}
    chosen, missing = [], []
    for workload in workloads or dict.fromkeys(r["workload"] for r in rows):
        keys = [(workload, k) for k in (kinds or KINDS) if (workloads and kinds) or (workload, k) in by_key]
        if workloads and not keys:  # a named workload with no stored row of any kind
            keys = [(workload, "/".join(KINDS))]
        missing += [f"{w} ({k})" for w, k in keys if (w, k) not in by_key]
        chosen += [by_key[key] for key in keys if key in by_key]
    if missing:
        raise ValueError(f"no stored row {', '.join(missing)}; stored: {', '.join(f'{w} ({k})' for w, k in by_key)}")
    return chosen


def rescore_flagships(rows: Sequence[dict[str, Any]], names: Sequence[str] = FLAGSHIPS, *,
                      config_for=stored_row_config, say=print) -> list[dict[str, Any]]:
    """``rows`` with the flagship columns ``names`` re-evaluated with the model as it is now (power caps, stacks) against
    each row's stored answer at its stored budget (:func:`flagship_rivals`); the answer, its references and the other
    columns are kept as stored (not re-searched: a row whose search signature differs from today's says so). New row
    dicts; nothing is written."""
    names = flagship_names(names)
    out = []
    for row in rows:
        config = config_for(row)
        fresh = flagship_rivals(config, row["best"], names)
        old = row.get("flagships", {})
        changes = ", ".join(f"{FLAGSHIP_LABELS[n]} {_ratio_text(old.get(n))} -> {_ratio_text(fresh[n])}" for n in names)
        kept = "" if row.get("signature") == config.signature else " (its answer from an earlier model: re-search to renew it)"
        renewed = row | {"flagships": old | fresh}
        ranges = row.get("sensitivity", {}).get("ranges", {})
        stale = moved_rivals({"ranges": {n: r for n, r in ranges.items() if n in names}},
                             {"best": row["best"], "references": {}, "flagships": fresh})
        if stale:  # a range around another nominal would be a silent wrong answer: dropped, and the table says so
            renewed["sensitivity"] = _without_rivals(row["sensitivity"], stale)
            kept += (f"; its sensitivity's {', '.join(FLAGSHIP_LABELS[n] for n in stale)} range dropped (around the old "
                     "ratio: python -m experiments.sensitivity --from-table adds it again)")
        say(f"{row['workload']} ({row['kind']}, {row['budget_label']}): {changes}{kept}")
        out.append(renewed)
    return out


def row_ratios(row: dict[str, Any]) -> dict[str, float]:
    """A row's answer over each rival it has a feasible figure for (references and flagships), as a sensitivity's
    nominal ratios are."""
    rivals = row["references"] | row.get("flagships", {})
    return {n: row["best"]["samples_s"] / r["samples_s"] for n, r in rivals.items() if r.get("feasible") and r["samples_s"]}


def sensitivity_kept(stored: dict[str, Any] | None, row: dict[str, Any]) -> dict[str, Any] | None:
    """The stored row's sensitivity when the row searched again keeps it: when it is around the same nominal (every
    range's nominal ratio is the freshly computed ``row``'s, to 1e-9: the answer and each rival reproduce), else None
    (dropped: its ranges would be around another verdict). Its cases stay as they were computed, each with the search
    signature of its code (:func:`case_signature`): a case of an earlier code is kept, and the
    table counts the cases computed by the row's own code (:func:`cases_on_code`), so a reader sees which ranges rest
    on an earlier code's cases."""
    summary = (stored or {}).get("sensitivity")
    return summary if summary and not moved_nominals(summary, row) else None


def moved_rivals(summary: dict[str, Any], row: dict[str, Any]) -> list[str]:
    """The rivals of a sensitivity's ranges whose nominal ratio is not ``row``'s (to 1e-9), or that ``row`` has no
    feasible figure for: the one rule by which a stored range is around another verdict (a re-searched row's kept
    sensitivity, :func:`sensitivity_kept`, and a re-scored flagship's, :func:`rescore_flagships`)."""
    ratios = row_ratios(row)
    return [n for n, r in summary["ranges"].items()
            if n not in ratios or not math.isclose(r["nominal"], ratios[n], rel_tol=1e-9)]


def moved_nominals(summary: dict[str, Any], row: dict[str, Any]) -> list[str]:
    """Each of :func:`moved_rivals` as "H100 1.04× -> 1.05×" (or "-> none" when the row has no feasible figure for it)."""
    ratios = row_ratios(row)
    return [f"{RIVAL_LABELS.get(n, n)} {summary['ranges'][n]['nominal']:.4g}× -> "
            + (f"{ratios[n]:.4g}×" if n in ratios else "none") for n in moved_rivals(summary, row)]


def case_signature(case: dict[str, Any], summary: dict[str, Any]) -> str | None:
    """The search signature of the code that computed a sensitivity ``case`` (the nominal search config's at its run,
    ``SearchConfig.signature``): its own, else its summary's (a summary from before cases carried theirs: None when
    that summary's cases came from more than one code)."""
    return case.get("signature", summary.get("signature"))


def cases_on_code(summary: dict[str, Any], signature: str | None) -> int:
    """How many of a sensitivity's cases were computed by the code of search signature ``signature`` (a row's)."""
    return sum(case_signature(case, summary) == signature for case in summary["cases"])


def _without_rivals(summary: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """A sensitivity summary with rivals ``names``' ranges and case ratios removed."""
    cases = [c | {"ratios": {n: r for n, r in c["ratios"].items() if n not in names}} for c in summary["cases"]]
    return summary | {"ranges": {n: r for n, r in summary["ranges"].items() if n not in names}, "cases": cases}


def _ratio_text(rival: dict[str, Any] | None) -> str:
    if rival is None:
        return "none"
    return f"{rival['ratio']:.3f}×" if rival.get("feasible") else "not built"


SAME_NODE_REFERENCES = {name: SYSTEMS[name][0].process.name for name in REFERENCES}
"""Each reference's own process node (``cost.SYSTEMS``): TPUv4 and A100 N7, H100 4N."""


def same_node(config: SearchConfig, kind: str, row: dict[str, Any], *, workers: int, out: Path,
              progress=None) -> dict[str, Any]:
    """Per reference whose node is not the space's (H100: 4N): the exact search of the same space built at that node
    (``--node``), its answer and its ratio to the reference at the same budget. The references of the space's own node
    (TPUv4, A100 at N7) are compared at the same node by the row itself."""
    (workload,) = config.names
    out_row = {}
    for name, node in SAME_NODE_REFERENCES.items():
        reference = row["references"].get(name, {})
        if node == config.space.node or not reference.get("feasible"):
            continue
        at_node = dataclasses.replace(config, space=dataclasses.replace(config.space, node=node))
        result = run_search(at_node, workers=workers, out=out / workload / kind / f"node-{node}", progress=progress)
        best = result.best[workload]
        if best is None or not best.feasible:
            out_row[name] = {"node": node, "feasible": False}
            continue
        out_row[name] = {"node": node, "feasible": True, "samples_s": best.throughput_samples_s,
                         "chips": best.system["n_devices"], "design": Accelerator.from_dict(best.accelerator).notation(),
                         "plan": best.plan.notation, "exact": result.exact, "search_s": result.elapsed_s,
                         "die_mm2": best.system["chip_area_mm2"], "chip_power_w": best.system["chip_power_w"],
                         "ratio": best.throughput_samples_s / reference["samples_s"],
                         "command": command(workload, config.space.budget, node)}
    return out_row


# --- the document -----------------------------------------------------------------------------------------

def row_key(row: dict[str, Any]) -> tuple[str, str]:
    return row["workload"], row["kind"]


def sorted_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    order = list(DEFAULT_WORKLOADS) + sorted({r["workload"] for r in rows} - set(DEFAULT_WORKLOADS))
    return sorted(rows, key=lambda r: (KINDS.index(r["kind"]), order.index(r["workload"])))


def _system_label(figures: dict[str, Any]) -> str:
    s = figures["system"]
    die = f"{s['chip_area_mm2']:.0f}" + (f"/{s['die_area_mm2']:g}" if s.get("die_area_mm2") else "")
    return (f"{figures['design']} · {die} mm² · {s['hbm_stacks']}×{s['hbm_generation'].upper()} · "
            f"{s['links']}×{s['link_GBps']:g} GB/s {s['topology']}")


def _chips_label(figures: dict[str, Any]) -> str:
    """The chip count, and the pods a torus of more than one pod is built as (``SystemPoint.pods``)."""
    pods = figures.get("system", {}).get("pods", 1)
    return f"{figures['chips']:,}" + (f" ({pods} pods)" if pods > 1 else "")


def _wall_label(figures: dict[str, Any]) -> str:
    """A system's wall power per chip and its parts: (chip + host + scale-up fabric + NICs and scale-out network) × PUE,
    from its summary (:attr:`~phaze_env.hardware.system.SystemPoint.wall_power_per_chip_w`; rows written before the
    scale-up fabric was charged have no such part)."""
    s = figures["system"]
    scale_up = f" + {s['scale_up_w_per_chip']:.0f}" if "scale_up_w_per_chip" in s else ""
    network = s["network_w_per_chip"] + s.get("nic_w_per_chip", 0.0)
    return (f"{s['wall_power_per_chip_w']:,.0f} W ({s['chip_power_w']:.0f} + {s['host_w_per_chip']:.0f}{scale_up} + "
            f"{network:.0f})")


def _families_text() -> str:
    """The host and scale-out network of every family (:data:`~phaze_env.hardware.system.SYSTEM_FAMILIES`)."""
    return "; ".join(
        f"{f.name} ({f.topology}): host {f.host.w_per_chip:.1f} W / ${f.host.usd_per_chip:,.0f} per chip "
        f"({f.host.chips_per_host} chips per host), scale-up fabric {f.scale_up.name} "
        f"({f.scale_up.w_per_Bps * 1e9:.3f} W and ${f.scale_up.usd_per_Bps * 1e9:.2f} per GB/s of link bandwidth, "
        f"{f.scale_up.w_per_link:.2f} W and ${f.scale_up.usd_per_link:,.0f} per link), "
        f"{f.network_ports_per_chip:g} NIC port per chip ({f.network.nic_w:.0f} W / ${f.network.nic_usd:,.0f} per NIC "
        f"with its module) on the {f.network.name} fat "
        f"tree of {f.network.radix}-port switches ({f.network.port_w():.1f} W / ${f.network.port_usd():,.0f} per switch "
        f"port with its optics, 2L − 1 ports per NIC port over L tiers) above {f.network_above_chips:,} chips"
        for f in SYSTEM_FAMILIES.values())


STACK = get_system_stack(DEFAULT_SYSTEM_STACK)
"""The stack the table's searches run (the search command line's default)."""


def _fits_text() -> str:
    return "; ".join(f"{fit.chips[0]} {fit.framework_efficiency:g} (`{fit.calibration}`)" for fit in STACK.fits)


def _attention_text() -> str:
    return ", ".join(f"{fit.chips[0]} {fit.attention_efficiency:g}" for fit in STACK.fits)


def _design_fit_text() -> str:
    fit, chip = STACK.design_fit(SystemDesignSpace().base)
    return f"{chip}'s, {fit.framework_efficiency:g}"


def _ratio_cell(row: dict[str, Any], name: str) -> str:
    """The ratio vs reference ``name``, and its range over the assumptions when the row's sensitivity was run
    (``python -m experiments.sensitivity``)."""
    ratio = math.prod(row["best"]["factors"][name].values())
    span = row.get("sensitivity", {}).get("ranges", {}).get(name)
    return f"{ratio:.2f}×" + (f" ({span['low']:.2f}–{span['high']:.2f})" if span else "")


def same_node_text(rows: Sequence[dict[str, Any]]) -> str:
    """The section comparing each reference with the space searched at the reference's own node ("" when no row has
    it): TPUv4 and A100 against the N7 answer (the main table's), H100 against the 4N search."""
    done = [r for r in rows if r.get("same_node")]
    if not done:
        return ""
    body = []
    for r in done:
        cells = []
        for name in REFERENCES:
            at = r["same_node"].get(name)
            if at is None:
                cells.append(_ratio_cell(r, name) + f" ({SAME_NODE_REFERENCES[name]})" if name in r["best"]["factors"]
                             else "—")
            elif at["feasible"]:
                cells.append(f"{at['ratio']:.2f}× ({at['node']}: {at['design']}, {at['die_mm2']:.0f} mm², "
                             f"{at['chip_power_w']:.0f} W, {at['chips']:,} chips, {at['samples_s']:,.1f} samples/s, "
                             f"{'proven' if at['exact'] else 'NOT PROVEN'})")
            else:
                cells.append(f"infeasible at {at['node']}")
        body.append([r["workload"], r["budget_label"], *cells])
    commands = "\n".join(sorted({f"    {at['command']}" for r in done for at in r["same_node"].values()
                                  if at.get("command")}))
    return f"""## At the same node

Each reference against the space *searched* at the reference's own node (`python -m search.phaze --space system
--node NODE`): TPUv4 and A100 are N7 chips, so their column is the main table's; H100 is a 4N chip, so its column is
the exact search of the same space built at 4N (`hardware.cost.NODES["4N"]`: N5's density, energy and wafer price, an
assumption). Same node is not same year: the space's HBM3E (2024) and 100G-PAM4 SerDes (2022) are newer than TPUv4's
and A100's HBM2/HBM2e and 50G NRZ lanes. Against the 2024–25 flagships: "Against the best you can buy" below.

{table(["workload", "budget", *[f"vs {REFERENCE_LABELS[n]} ({SAME_NODE_REFERENCES[n]})" for n in REFERENCES]], body)}

{commands}

"""


def _flagship_cell(rival: dict[str, Any] | None, span: dict[str, Any] | None = None) -> str:
    """A flagship's ratio with its system's figures, and the ratio's range over the assumptions run for it
    (``span``, the row's sensitivity range; "Sensitivity of each verdict" says which)."""
    if rival is None:
        return "—"
    if not rival["feasible"]:
        return f"not built ({rival['reason']})"
    spread = f" (range {span['low']:.2f}–{span['high']:.2f})" if span else ""
    return (f"{rival['ratio']:.2f}×{spread} ({_chips_label(rival)} chips, {FORMAT_NAMES[rival['number_format']]}, "
            f"{rival['samples_s']:,.1f} samples/s, {mfu_text(rival['mfu'], rival['number_format'])}, "
            f"{_wall_label(rival)})")


def flagships_text(rows: Sequence[dict[str, Any]]) -> str:
    """The section "against the best you can buy": each row's answer over each 2024–25 flagship at the same budget
    ("" when no row has them)."""
    done = [r for r in rows if r.get("flagships")]
    if not done:
        return ""
    body = [[r["workload"], r["budget_label"], f"{r['best']['samples_s']:,.1f}",
             *[_flagship_cell(r["flagships"].get(name), r.get("sensitivity", {}).get("ranges", {}).get(name))
               for name in FLAGSHIPS]] for r in done]
    whys = [[r["workload"], r["budget_label"], FLAGSHIP_LABELS[n], f["why"]]
            for r in done for n, f in r["flagships"].items() if f.get("feasible")]
    chips = []
    for name in FLAGSHIPS:
        family = SYSTEM_FAMILIES[FLAGSHIP_FAMILIES[name]]
        chip = FLAGSHIP_CHIP_SYSTEMS[name]
        point = reference_point(name, SystemBudget())
        modelled_w = point.estimate.total_power_w
        published_w = FLAGSHIP_PUBLISHED_W[name]
        power = (f"chip {modelled_w:,.0f} W modelled, {published_w:,.0f} W published ({modelled_w / published_w - 1:+.0%})"
                 if published_w else f"chip {modelled_w:,.0f} W modelled, no published power")
        clock_ratio = point.accelerator.clock_hz / get_preset(name).clock_hz
        if clock_ratio < 1:  # capped at its published limit (rival_chip)
            nominal_w = chip_estimate(get_preset(name), chip).total_power_w
            power = (f"chip {modelled_w:,.0f} W modelled within its {published_w:,.0f} W published limit "
                     f"({nominal_w:,.0f} W at its nominal clock, {nominal_w / published_w - 1:+.0%}: it runs at "
                     f"{clock_ratio:.3f}× that clock)")
        chips.append(f"{FLAGSHIP_LABELS[name]}: {chip.process.name}, {power}; `{family.name}` (host "
                     f"{family.host.w_per_chip:.0f} W per chip, {family.network_above_chips:,}-chip scale-up domain, "
                     f"fabric {family.scale_up.name}), stack efficiency carried from {CARRIED_FITS.get(name, name)}")
    from phaze_env.assumptions import MEASURED_EXPONENT

    mi300x_mhz = mi300x_engine_clock_hz() / 1e6
    measured_mhz = "–".join(f"{min_max(MI300X_GEMM_MEDIAN_CLOCKS_HZ.values()) / 1e6:,.0f}" for min_max in (min, max))
    return f"""## Against the best you can buy: the 2024–25 flagships

Each row's answer (the search above: the space's {SYSTEM_NODE} chip with 2024's HBM3E) against the flagships one can
buy in 2024–25, each as its own system at its own node, with the chips the row's budget buys from the same power and
cost models (`hardware.system.reference_point`; the *modelled* chip power and cost, as every system here), the same
stack and plan freedom, in its fastest number format. Ratio > 1: the searched system is faster. Wall power per chip:
(chip + host + scale-up + network) × PUE.
{chr(10).join(f"* {c}." for c in chips)}
* Assumptions (each cited with its range in `hardware.system` and `stacks.CARRIED_FITS`): no flagship has a published
  run fitted through this table's path, so each runs at the efficiency fitted on the chip its stack descends from;
  the GB200 rack's power (120 kW, range 120–132 kW), TPU v5p's host (TPU v4's; Google publishes no v5p power) and the
  MI300X platform's host (DGX H100's) are assumptions; the MI300X chip is built as AMD builds it (8 N5 XCDs on 4 N6 IODs,
  `hardware.system.MI300X_RIVAL_SYSTEM`; its die areas within ±20 % of the published, `docs/cost_model.md`). A
  flagship whose modelled power at its nominal clock exceeds its published TDP / TBP runs, as the real chip's power
  management makes it, at the clock whose modelled power meets that limit (`hardware.system.rival_chip`; dynamic
  power ∝ f·V², V ∝ f^k, k = {energy.VOLTAGE_FREQUENCY_EXPONENT:g} in a range 0–1): the MI300X at
  {mi300x_mhz:,.0f} MHz of its 2,100 MHz peak, against the {measured_mhz} MHz medians AMD measures under dense GEMMs
  within its 750 W (ROCm blog "Measuring Max-Achievable FLOPs – Part 2", 2025; `cost.MI300X_GEMM_MEDIAN_CLOCKS_HZ`).
  k = 1 is the top of its range, in the rivals' favour; the sensitivity below moves it to k = {MEASURED_EXPONENT:.3f},
  at which the capped MI300X runs at the measured bf16 median (`assumptions.MEASURED_EXPONENT`). The "range" in a
  cell is the ratio's over the row's sensitivity cases ("Sensitivity of each verdict" names any it lacks). Not the same node: the flagships' 4NP / N5 silicon against the space's {SYSTEM_NODE}.

{table(["workload", "budget", "answer samples/s", *[f"vs {FLAGSHIP_LABELS[n]}" for n in FLAGSHIPS]], body)}

{table(["workload", "budget", "vs", "why"], whys)}

"""


def uncovered(summary: dict[str, Any]) -> dict[str, list[str]]:
    """What a row's sensitivity lacks, so the table can say it: under ``""`` the assumptions of
    :data:`~phaze_env.assumptions.ASSUMPTIONS` with no case at all; under each rival of its ranges each assumption none
    of whose cases has a ratio for it (run before that rival was set against), or ``"<assumption> <end>"`` for a case
    of an assumption whose other end has one (``experiments.sensitivity.rivals_from_cases`` refused it); only non-empty
    entries."""
    from phaze_env.assumptions import ASSUMPTIONS

    run = dict.fromkeys(c["assumption"] for c in summary["cases"])
    out = {"": [name for name in ASSUMPTIONS if name not in run]}
    for rival in summary["ranges"]:
        out[rival] = []
        for name in run:
            lacking = [c["end"] for c in summary["cases"] if c["assumption"] == name and rival not in c["ratios"]]
            ends = sum(c["assumption"] == name for c in summary["cases"])
            out[rival] += [name] if len(lacking) == ends else [f"{name} {end}" for end in lacking]
    return {key: names for key, names in out.items() if names}


def _lacking_text(lacking: dict[str, list[str]]) -> str:
    """The cases each flagship's range is not over (:func:`uncovered`), as a table cell."""
    def names(missing: list[str]) -> str:
        return ", ".join(f"`{m.split()[0]}`{' ' + m.split()[1] if ' ' in m else ''}" for m in missing)

    if not any(lacking.values()):
        return "every case"
    if len({tuple(m) for m in lacking.values()}) == 1:
        return f"every case but {names(next(iter(lacking.values())))}"
    return "; ".join(f"{FLAGSHIP_LABELS[n]}: every case but {names(m)}" if m else f"{FLAGSHIP_LABELS[n]}: every case"
                     for n, m in lacking.items())


def sensitivity_text(rows: Sequence[dict[str, Any]]) -> str:
    """The section on the verdicts' sensitivity: each assumption with its range and source
    (:data:`phaze_env.assumptions.ASSUMPTIONS`), and per row that was run the ratio's range per reference, what moves
    it most and how each figure was obtained ("" when no row has run)."""
    from phaze_env.assumptions import ASSUMPTIONS

    done = [r for r in rows if r.get("sensitivity")]
    assumptions = table(["assumption", "what", "nominal", "low", "high", "unit", "range from"],
                        [[f"`{a.name}`", a.label, f"{a.nominal:,.4g}", f"{a.low:,.4g}", f"{a.high:,.4g}", a.unit, a.source]
                         for a in ASSUMPTIONS.values()])
    if not done:  # no row has cases (a re-run row whose nominal moved drops them): say so, keep the assumptions' ranges
        return f"""## Sensitivity of each verdict

No row's sensitivity is run on this table's model yet: a row the table runs again keeps the cases it had only when its
answer and every rival reproduce their nominal. `python -m experiments.sensitivity --workload W --kind power|cost` moves
each assumption below, one at a time, to each end of its range and re-runs the exact search (`phaze_env.assumptions`).

{assumptions}

"""

    def span(s: dict[str, Any], name: str) -> str:
        if name not in s["ranges"]:
            return "—"
        r = s["ranges"][name]
        return (f"{r['low']:.2f}–{r['high']:.2f}× (nominal {r['nominal']:.2f}×; low: {r['low_by']}, "
                f"high: {r['high_by']})")

    body, flagship_body = [], []
    for r in done:
        s, missing = r["sensitivity"], uncovered(r["sensitivity"])
        statuses = {}
        for case in s["cases"]:
            statuses[case["status"]] = statuses.get(case["status"], 0) + 1
        body.append([r["workload"], r["budget_label"], *[span(s, n) for n in REFERENCES],
                     ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())),
                     f"{cases_on_code(s, r.get('signature'))} of {len(s['cases'])}", f"{s['elapsed_s']:.0f} s",
                     ", ".join(f"`{n}`" for n in missing.get("", [])) or "none"])
        lacking = {name: missing.get(name, []) for name in FLAGSHIPS if name in s["ranges"]}
        if lacking:
            flagship_body.append([r["workload"], r["budget_label"], *[span(s, n) for n in FLAGSHIPS],
                                  _lacking_text(lacking)])
    not_run = [f"{r['workload']} at {r['budget_label']}" for r in rows if not r.get("sensitivity")]
    flagships = "" if not flagship_body else f"""Against the 2024–25 flagships, over the cases that have them (every
case run since the flagships were set against; a case stored before them gets their ratios from its stored answer with
no search re-run, `python -m experiments.sensitivity --from-table --rivals-only`, unless its ratios over the three
references no longer imply one answer with today's model of them); the last column names what each flagship's range
lacks:

{table(["workload", "budget", *[f"vs {FLAGSHIP_LABELS[n]}" for n in FLAGSHIPS], "cases in the range"], flagship_body)}

"""
    return f"""## Sensitivity of each verdict

Each row's ratios with every assumption below moved, one at a time, to each end of its range
(`python -m experiments.sensitivity --workload W --kind power|cost`; `phaze_env.assumptions`): the exact search re-run
under the move with every rival ("exact"); where the move leaves every input of the search as at nominal (the budget,
every row's chip and cluster) the nominal answer, exactly, against the rivals whose own chip or cluster the move
changes evaluated again ("answer unchanged": e.g. the V–f exponent, which moves only the power-capped flagships) or,
when it changes none, the nominal verdict ("inputs unchanged"). `--from-table` adds cases to a stored row with its
stored answer as the nominal. `--reevaluate`, for a row whose search is too long to run once per case, evaluates the
nominal answer's design again under a move that changes the search's inputs instead of searching ("lower bound": the
design is in the moved space, so the search's answer there is at least as high, and each ratio and each range end is a
lower bound on the moved verdict's). The range is the lowest and highest ratio over the nominal run and every case; the
tornado charts are in `docs/figures/system_sensitivity.html` (`.png`) and in each search's `report.html`. A row searched
again (`python -m experiments.system_table`) keeps its cases only when its answer and every rival's figure reproduce the
nominal the cases were run around; "on the row's code" counts the cases computed by the code that computed the row (its
search signature), the others an earlier code's (`python -m experiments.sensitivity --workload W --kind K` renews
them).

{assumptions}

{table(["workload", "budget", *[f"vs {REFERENCE_LABELS[n]}" for n in REFERENCES], "cases", "on the row's code",
        "wall", "not run"], body)}

{flagships}{f"No sensitivity run yet: {', '.join(not_run)}." + chr(10) + chr(10) if not_run else ""}"""


def earlier_model(row: dict[str, Any]) -> bool:
    """Whether a stored row's answer was searched by an earlier model than today's (its search signature is not
    today's config's at its budget: e.g. a row kept when a re-run of the table was stopped); False for a row that names
    no signature or no budget."""
    if "signature" not in row or "budget" not in row:
        return False
    return row["signature"] != stored_row_config(row).signature


def render(rows: Sequence[dict[str, Any]]) -> str:
    """docs/system_table.md from the rows (every figure from the JSON); a row searched by an earlier model says so in
    its ``exact`` cell (:func:`earlier_model`)."""
    rows = sorted_rows(rows)
    sections = []
    for kind in KINDS:
        body = [[r["workload"], r["budget_label"], _system_label(r["best"]), _chips_label(r["best"]),
                 r["best"]["plan"], f"{r['best']['samples_s']:,.1f}",
                 ("proven" if r["exact"] else "NOT PROVEN")
                 + (" on an earlier model (re-search to renew it)" if earlier_model(r) else ""),
                 *[_ratio_cell(r, n) if n in r["best"]["factors"] else "infeasible" for n in REFERENCES]]
                for r in rows if r["kind"] == kind]
        if body:
            title = "iso-power" if kind == "power" else "iso-cost"
            sections.append(f"### {title}\n\n" + table(
                ["workload", "budget", "best system (design · die built/knob · HBM · links topology)", "chips", "plan",
                 "samples/s", "exact", *[f"vs {REFERENCE_LABELS[n]}" for n in REFERENCES]], body))
    references = [[r["workload"], r["budget_label"], REFERENCE_LABELS[n],
                   *([_chips_label(ref), ref["number_format"], ref["plan"], f"{ref['samples_s']:,.1f}",
                      mfu_text(ref["mfu"], ref["number_format"]),
                      " / ".join(f"{ref['time_groups'][g]:.0%}" for g in TIME_GROUPS),
                      f"{ref['block_bound']['memory']:.0%}", _wall_label(ref), "yes" if ref["proven"] else "no"]
                     if ref["feasible"] else [f"{ref['chips']:,}", "", "—", f"infeasible: {ref['reason']}", "", "", "", "",
                                              ""])]
                  for r in rows for n, ref in r["references"].items()]
    bests = [[r["workload"], r["budget_label"], mfu_text(r["best"]["mfu"], r["best"]["number_format"]),
              " / ".join(f"{r['best']['time_groups'][g]:.0%}" for g in TIME_GROUPS),
              f"{r['best']['block_bound']['memory']:.0%}", _wall_label(r["best"]),
              f"${r['best']['chip_cost_usd']:,.0f}", r["evaluations"], r["pruned_by_placement_bound"], r["ilp_solves"],
              f"{r['search_s']:.0f} s"] for r in rows]
    nodes = [[r["workload"], r["budget_label"], f"{r['best']['samples_s']:,.1f}", f"{r['best']['chips']:,}",
              f"{n['die_mm2']:.0f} mm² · {n['chip_power_w']:.0f} W · ${n['chip_cost_usd']:,.0f}", f"{n['chips']:,}",
              f"{n['samples_s']:,.1f}", n["plan"], "yes" if n["in_window"] else "no",
              f"{n['samples_s'] / r['references']['h100']['samples_s']:.2f}×" if r["references"]["h100"].get("feasible")
              else "—"]
             for r in rows if (n := r.get("node_sensitivity")) and n["chips"] > 0]
    whys = [[r["workload"], r["budget_label"], REFERENCE_LABELS[n], text] for r in rows for n, text in r["why"].items()]
    chip_powers = ", ".join(f"{REFERENCE_LABELS[n]} {ref['chip_power_w']:.0f} W / ${ref['chip_cost_usd']:,.0f}"
                            for n, ref in (rows[0]["references"].items() if rows else ()) if ref.get("feasible"))
    commands = "\n".join(sorted({f"    {r['command']}" for r in rows}))
    budgets = sorted({(r["power_w"], iso_cost_usd(r["power_w"])) for r in rows})
    iso = "; ".join(f"{w / 1e6:g} MW → ${usd / 1e6:.2f} M" for w, usd in budgets)
    return f"""# Best systems vs TPUv4, A100 and H100 (and the 2024–25 flagships) at iso-power and iso-cost

Written by `python -m experiments.system_table` (issue 18 item 6) from `docs/system_table.json`; every figure
below is from that run on this 2-core machine. Each row is one exact system-space search (its command below;
`exact` is `results.json`'s) and the three reference systems evaluated at the same budget.

## Basis of the comparison

* **Budgets.** Power at the wall: {DEFAULT_POWER_MW:g} MW ({', '.join(f'{w} {mw:g} MW' for w, mw in POWER_MW.items())}).
  **Iso-cost** is the capital cost of the {REFERENCE_LABELS[ISO_COST_REFERENCE]} DGX cluster that power buys, in the same cost
  model ({iso}), so the {REFERENCE_LABELS[ISO_COST_REFERENCE]} column is the same system in both tables and the iso-cost question
  is "for the money a {DEFAULT_POWER_MW:g} MW {REFERENCE_LABELS[ISO_COST_REFERENCE]} cluster costs, what is the best system?".
* **Chip counts.** Every system, designs and references alike, gets the most chips `n` with `n × per-chip share(n)
  ≤ budget` (`SystemBudget.affordable`: the share steps up with the network's tiers), rounded down to whole topology units (`hardware.system.devices_supported`) from the *modelled* chip power and cost
  (`hardware.cost.chip_estimate`; `docs/cost_model.md`: {chip_powers}),
  plus the host's and the scale-out network's share of its own family, and PUE {PUE:g} (`docs/system_space.md`):
  {_families_text()}.
  The references are built as their own families ({", ".join(f"{REFERENCE_LABELS[n]} {f}" for n, f in REFERENCE_FAMILIES.items())}),
  every design as its topology's (`hardware.system.TOPOLOGY_FAMILIES`: torus {TOPOLOGY_FAMILIES["torus"]}, switched
  {TOPOLOGY_FAMILIES["switched"]}). The cost model prices manufacturing
  (wafer, HBM, package), not vendors' prices, so the host's and network's shares dominate a chip's cost and iso-cost
  favours many cheap chips.
* **Same efficiencies.** Every chip sustains {SYSTEM_GEMM_EFFICIENCY:.1%} of its tensor cores' nominal rate
  (`SYSTEM_GEMM_EFFICIENCY`, the A100's measured MAMF): the A100's own value; the TPUv4 preset's 1.0 and the H100's
  measured {H100_GEMM_EFFICIENCY:.1%} are replaced by it, so the H100 column is up to
  {SYSTEM_GEMM_EFFICIENCY / H100_GEMM_EFFICIENCY - 1:.0%} optimistic for H100 where GEMMs bind.
  Every cluster achieves NCCL's {NCCL_EFFICIENCY:g} of the line rate.
* **Same training stack.** Every system, designs and references alike, runs `{STACK.name}`
  (`phaze_env.stacks.SYSTEM_STACKS`) with the same plan freedom, `{STACK.plan_spec()}`: interleaved 1F1B (`v` searched
  where the stack can run it: at any `m_r ≥ p` microbatches per replica, Megatron-Core's microbatch groups,
  `PlanRules.microbatch_groups`), sequence parallelism, the distributed optimizer (ZeRO-1), a fused causal attention
  kernel on every chip at its cited fraction of the bf16 peak ({_attention_text()}; the searched chips take TPU v4's,
  an assumption: `stacks.TPU_FLASH_ATTENTION_EFFICIENCY`), each microbatch's weight gradients accumulated into the bf16
  main-gradient buffer (`stacks.SYSTEM_MAIN_GRAD_ACCUMULATION_BYTES`) and optional full recompute. Its framework efficiency is fitted per
  chip *through this table's own path* (the chip at the GEMM efficiency above, in its reference cluster) to one
  published run of that chip — {_fits_text()} — and checked on the chips' other published runs
  (`python -m experiments.rival_runs`, `docs/rival_runs.md`). A searched chip has no published run: it takes the
  efficiency fitted on the chip its cores are built from ({_design_fit_text()}), a rule, not a measurement.
* **Same number formats.** A design may pick FP8 tensor cores (Transformer-Engine recipe, paying 1.25× MAC area);
  the H100 trains in bf16 or FP8, whichever is faster (its chip count is the preset's either way: FP8 is a mode of
  the published chip); TPUv4 and A100 have no FP8 (`hardware.system.REFERENCE_NUMBER_FORMATS`).
* **Same training.** Global batch 4096, SGD state, microbatch 1–8, each system's best plan in the stack's plan space
  by the same placement DP. Megatron-Core's stage rules (uniform stages, `v` dividing each stage's layers), except
  that a replica count whose `d·m` does not divide the batch pads its last microbatch, the idle slots counted as time
  (`stacks.SYSTEM_MEGATRON_CORE_RULES`, an assumption: a deployment would pick a batch its replicas divide; requiring
  it here would idle up to a third of a system's chips whenever its count is not a power of two).
* **Clusters.** TPUv4: `search.phaze`'s system baseline (4 HBM2 stacks, 32 GiB, {TPUV4_ICI_LINKS} ICI links of
  {TPUV4_ICI_LINK_BPS / 1e9:g} GB/s per direction, as the `tpuv4-pod` preset, in a torus of 4×4×4 cubes of at most one {TORUS_POD_CHIPS:,}-chip pod; more chips are equal pods
  joined by the data-centre network at {TPUV4_DCN_PER_CHIP_BPS / 1e9:.2f} GB/s per chip, PaLM's measured cross-pod rate:
  `hardware.system.torus_pods`). A100 / H100: the `dgx-a100` / `dgx-h100` presets (NVLink 3 300 GB/s / NVLink 4
  450 GB/s per GPU and direction in 8-GPU nodes, HDR 200 Gb/s / NDR 400 Gb/s InfiniBand per GPU) with the chip
  count the budget buys, 80 GB HBM2e / HBM3.
* **Process node.** The system space is built at TSMC {SYSTEM_NODE} (`hardware.system.SYSTEM_NODE`), the node of
  the template its cores, clock and per-event energies come from — as TPUv4 and A100 are, so those two comparisons
  are same-node. H100 is TSMC 4N: in the cost model {NODES["4N"].logic_density_gain:g}× N7's logic density and
  {NODES["4N"].energy_factor:g}× its energy per event (`hardware.cost.N5`; 4N takes N5's figures, an
  assumption), i.e. more peak per mm² and per watt than any design here can have. The verdict against H100 is
  therefore an N7 design against a 4N chip. The node is not a knob of the search (its results here are N7's); what
  it is worth is shown below by building each answer at {SENSITIVITY_NODE} ("Process node").

## Best system vs the references (throughput ratio, higher = the best system is faster)

{chr(10).join(section + chr(10) for section in sections)}
Designs: `Accelerator.notation()` (tensor cores count×(width×depth), vector cores count×lanes, buffer, HBM;
`fp8` = FP8 tensor cores, Transformer-Engine recipe); die built/knob in mm²; plans in the plan notation.

## The best systems' figures

{table(["workload", "budget", "MFU", "batch compute / network / bubble", "block memory-bound",
         "wall W/chip (chip + host + scale-up + network) × PUE", "chip cost", "evaluated", "pruned by 2nd bound", "ILP solves", "search wall*"], bests)}

\\* wall time of the run that wrote the row, with whatever the shared cache held then (not a cold-run figure;
`docs/system_space.md` has cold timings).

## The references

{table(["workload", "budget", "reference", "chips", "format", "plan", "samples/s", "MFU", "batch compute / network / bubble",
         "block memory-bound", "wall W/chip (chip + host + scale-up + network) × PUE", "proven"], references)}

{published_mfu_text(rows)}## Why each wins or loses

Throughput is MFU × chips used × peak per chip / model FLOPs per sample, with the peak and the MFU both in the
chip's number format (an FP8 chip's FP8 peak, {FP8_MAC_RATE:g}× its bf16 peak: `hardware.number_format.format_peak_flops`),
so the ratio is exactly the product of the three factors named (largest effect first) and no MFU exceeds 100 %.
The MFU factor is read off the time per batch (compute incl. recompute and the optimizer step / network: every
collective and pipeline send / pipeline bubble) and the share of the block layer's operator time that is HBM-bound
(`phaze_env.explain.explain_layer` at the plan's t and m).

{table(["workload", "budget", "vs", "why"], whys)}

{same_node_text(rows)}{flagships_text(rows)}{sensitivity_text(rows)}## Process node: the same answer built at {SENSITIVITY_NODE}

What the node is worth: each row's answer (architecture and system knobs unchanged) built at {SENSITIVITY_NODE} instead of
{SYSTEM_NODE} — {NODES[SENSITIVITY_NODE].logic_density_gain:g}× logic density,
{NODES[SENSITIVITY_NODE].energy_factor:g}× energy per event,
${NODES[SENSITIVITY_NODE].wafer_cost_usd:,.0f} wafers (`hardware.cost`) — so a smaller die, less power, another cost and chip
count at the same budget, and its best plan. Not a search: where the design stays in the area window of its die
("in window") it is one design of the same space built at {SENSITIVITY_NODE}, so its throughput is a lower bound on that
space's optimum; the clock (1.05 GHz) is kept, an assumption on the conservative side.

{table(["workload", "budget", f"{SYSTEM_NODE} answer samples/s", f"{SYSTEM_NODE} chips",
         f"at {SENSITIVITY_NODE}: die · chip power · chip cost", "chips", "samples/s", "plan", "in window", "vs H100"], nodes)}

## Commands

{commands}

(each also through `python -m experiments.system_table --workers 2`, which runs them, evaluates the references and
writes this page; `--workload gpt3-175b` adds gpt3-175b at 10 MW.)
"""


PALM_CASE = "chowdhery22-palm-540b"
"""The published end-to-end MFU the TPUv4 reference is held to (issue 29): PaLM 540B on 6,144 TPU v4 chips
(``experiments.validation_cases``, its source there)."""
PALM_HFU = 0.578
"""PaLM 540B's hardware FLOP utilisation on TPU v4, the rematerialised FLOPs counted (Chowdhery et al. 2022,
arXiv:2204.02311, Table 3: MFU 46.2 %, HFU 57.8 %): what the chips ran, against the MFU's what the model needed."""
MFU_CHECK_WORKLOAD = "gpt3-175b"
"""The rows whose TPUv4 reference is held to PaLM's MFU: the table's largest model, the only one near PaLM's scale
(the small models at 1 MW run less than a sequence per chip, where no published run sits)."""
MFU_CHECK_TOLERANCE = TOLERANCE
"""Issue 29's bound on a reference's distance from a published end-to-end MFU of its chip: the validation's ±15 %
(:data:`experiments.validation_stats.TOLERANCE`)."""


def tpuv4_published_mfus() -> list[Any]:
    """Every published end-to-end MFU of TPU v4 among the validation cases (issue 29 item 2 names both: PaLM 540B,
    and MaxText's 2023 runs of 22B and 52B models), from ``experiments.validation_cases``, none retyped."""
    from experiments.validation_cases import TPU_CASES
    return [case for case in TPU_CASES if case.metric in ("mfu", "mfu_6n")]


def published_mfu_text(rows: Sequence[dict[str, Any]]) -> str:
    """The TPUv4 reference of each gpt3-175b row against TPU v4's published end-to-end MFUs, from the stored rows:
    PaLM 540B's (2022; another model, no pipelining, rematerialised: its HFU 57.8 % is printed beside) and the span
    of MaxText's six (2023, 22B and 52B, full rematerialisation, the ``mfu_6n`` count without attention), and whether
    each row lies within ±15 % of PaLM's, of some MaxText run's, and inside the published span. What the reference
    runs: the stack's interleaving at any ``m_r ≥ p`` (Megatron-Core's microbatch groups,
    :attr:`~phaze_env.plan_spec.PlanRules.microbatch_groups`); under Megatron-LM's rule (``m_r`` a multiple of
    ``p``) the gpt3-175b reference at 10 MW could not interleave its 8 microbatches over 6 stages and was
    bubble-bound."""
    palm = get_case(PALM_CASE)
    maxtext = [case for case in tpuv4_published_mfus() if case.name != PALM_CASE]
    low = min([palm.published] + [c.published for c in maxtext])
    high = max([palm.published] + [c.published for c in maxtext])
    cells = []
    for row in rows:
        reference = row.get("references", {}).get("tpuv4")
        if row["workload"] != MFU_CHECK_WORKLOAD or not reference or not reference.get("mfu"):
            continue
        mfu = reference["mfu"]
        label = f"{row['workload']} at {row['budget_label'] if row['kind'] == 'power' else 'iso-cost'}"
        near = [c for c in maxtext if abs(mfu / c.published - 1) <= MFU_CHECK_TOLERANCE]
        against_maxtext = (f"within ±{MFU_CHECK_TOLERANCE:.0%} of {len(near)} of MaxText's {len(maxtext)} "
                           f"({min(mfu / c.published - 1 for c in maxtext):+.1%} to "
                           f"{max(mfu / c.published - 1 for c in maxtext):+.1%})") if maxtext else ""
        palm_ok = abs(mfu / palm.published - 1) <= MFU_CHECK_TOLERANCE
        cells.append(f"{label} {mfu:.1%} ({mfu / palm.published - 1:+.1%} against PaLM's MFU, "
                     f"{'within' if palm_ok else 'outside'} ±{MFU_CHECK_TOLERANCE:.0%}; {against_maxtext}; "
                     f"{'inside' if low <= mfu <= high else 'outside'} the published span; "
                     f"`{reference['plan']}` on {reference['chips_used']:,} chips"
                     + (f", pipeline bubble {reference['time_groups']['bubble']:.0%} of the batch"
                        if reference.get("time_groups", {}).get("bubble") is not None else "") + ")")
    if not cells:
        return ""
    maxtext_span = (f" and MaxText's {len(maxtext)} runs of 2023 ({min(c.published for c in maxtext):.1%}–"
                    f"{max(c.published for c in maxtext):.1%}, 22B and 52B models, fully rematerialised, FSDP)"
                    if maxtext else "")
    return (f"The {MFU_CHECK_WORKLOAD} rows' TPUv4 reference against TPU v4's published end-to-end MFUs: PaLM 540B's "
            f"{palm.published:.1%} (`{PALM_CASE}`: 2022, another model, no pipelining, rematerialised: its HFU "
            f"{PALM_HFU:.1%})" + maxtext_span + " (`experiments/validation_cases.py`): " + "; ".join(cells) +
            ". Neither published run is gpt3-175b on the reference's plan: PaLM's is the lower end (a 2022 stack that "
            "recomputed a fifth of its FLOPs), MaxText's, whose 22B run the TPUv4 efficiency is fitted to, the upper; the "
            "rows differ by their bubble (fewer chips at iso-cost: more microbatches per replica). It interleaves at any number of "
            "microbatches per replica at least the pipeline depth, as Megatron-Core's microbatch groups allow "
            "(`PlanRules.microbatch_groups`, Megatron-Core v0.10); under Megatron-LM's older rule (a multiple of the "
            "depth) the gpt3-175b reference at 10 MW could not interleave and was bubble-bound.\n\n")


def readme_table(rows: Sequence[dict[str, Any]]) -> str:
    """The README's (and the documentation home page's) headline table from the rows: one line per model, its
    iso-power answer and ratios, then its iso-cost ratios (``docs/system_table.md`` has every figure behind them;
    tests/test_readme.py holds both pages to this text); a model either of whose rows was searched by an earlier model
    than today's (:func:`earlier_model`) says so beside its budget."""
    rows = sorted_rows(rows)
    by_key = {row_key(r): r for r in rows}

    def ratios(row: dict[str, Any] | None) -> list[str]:
        return [f"{math.prod(row['best']['factors'][n].values()):.2f}×" if row and n in row["best"]["factors"]
                else "—" for n in REFERENCES]

    body = []
    for workload in dict.fromkeys(r["workload"] for r in rows):
        power, cost = by_key.get((workload, "power")), by_key.get((workload, "cost"))
        if power is None:
            continue
        earlier = ", earlier model" if earlier_model(power) or (cost is not None and earlier_model(cost)) else ""
        body.append([f"{workload} ({power['power_w'] / 1e6:g} MW{earlier})", f"{power['best']['samples_s']:,.1f}",
                     *ratios(power), " / ".join(ratios(cost))])
    header = ["model (power)", "best system, samples/s",
              *[f"vs {REFERENCE_LABELS[n]}{' ' + REFERENCE_SUFFIXES[n] if n in REFERENCE_SUFFIXES else ''}"
                for n in REFERENCES],
              "iso-cost: vs " + " / ".join(REFERENCE_LABELS[n] for n in REFERENCES)]
    return table(header, body)


def load_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("version") != TABLE_VERSION:
        return []  # another layout: recomputed
    return list(data["rows"])


def write_docs(docs: Path, rows: Sequence[dict[str, Any]]) -> None:
    rows = sorted_rows(rows)
    write_text_atomic(docs / "system_table.json",
                      json.dumps({"version": TABLE_VERSION, "rows": rows}, indent=1, allow_nan=False) + "\n")
    write_text_atomic(docs / "system_table.md", render(rows))


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m experiments.system_table", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", action="append", default=None, metavar="NAME",
                        help=f"workload (repeatable; default {', '.join(DEFAULT_WORKLOADS)})")
    parser.add_argument("--budget-mw", type=positive_float, default=None, metavar="MW",
                        help=f"power budget for every workload (default {DEFAULT_POWER_MW:g} MW, "
                             + ", ".join(f"{w} {mw:g} MW" for w, mw in POWER_MW.items()) + ")")
    parser.add_argument("--kind", action="append", choices=KINDS, default=None,
                        help="iso-power (power) and/or iso-cost (cost) rows (default both)")
    parser.add_argument("--flagship", action="append", default=None, metavar="NAME",
                        help=f"2024–25 flagship each row is also set against (repeatable; default {', '.join(FLAGSHIPS)})")
    parser.add_argument("--workers", type=positive_int, default=2, metavar="N", help="search worker processes (default 2)")
    parser.add_argument("--out", type=Path, default=Path("out/system_table"),
                        help="search outputs, one directory per row (default out/system_table)")
    parser.add_argument("--docs", type=Path, default=Path("docs"),
                        help="where system_table.md and .json are written (default docs)")
    parser.add_argument("--render", action="store_true",
                        help="only rebuild system_table.md from the JSON (default: search, evaluate and write)")
    parser.add_argument("--rescore-flagships", action="store_true",
                        help="only re-evaluate the stored rows' flagship columns (--workload/--kind/--flagship select; "
                             "default every stored row and flagship) with today's model against each row's stored "
                             "answer and budget, and rewrite the table (no search)")
    parser.add_argument("--quiet", action="store_true", help="no search progress display (default: shown)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        workloads = [get_workload(w).name for w in (args.workload or DEFAULT_WORKLOADS)]
        flagships = flagship_names(args.flagship)
        docs, out = writable_directory(args.docs), writable_directory(args.out)
    except ValueError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    rows = {row_key(r): r for r in load_rows(docs / "system_table.json")}
    if args.render:
        write_docs(docs, list(rows.values()))
        return 0
    if args.rescore_flagships:
        return _rescore_main(parser, args, rows, docs)
    from search.progress import ConsoleProgress, SearchProgress

    out_console = console()
    cells = [(w, k) for w in workloads for k in (args.kind or KINDS)]
    try:  # every cell's budget and space up front: a budget that buys nothing or too much is refused before any search
        configs = {(w, k): search_config(w, budget_for(k, power_budget_w(w, args.budget_mw))) for w, k in cells}
    except ValueError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    started = time.perf_counter()
    for done, (workload, kind) in enumerate(cells):
        power_w = power_budget_w(workload, args.budget_mw)
        config = configs[(workload, kind)]
        budget = config.space.budget
        label = f"[{done + 1}/{len(cells)}] {workload} at {budget.describe()} ({'iso-power' if kind == 'power' else 'iso-cost'})"
        kept = rows.get((workload, kind))
        if kept is not None and kept["signature"] == config.signature and kept["power_w"] == power_w:
            added = ""
            missing = [name for name in flagships if name not in kept.get("flagships", {})]
            if missing:  # a row of a run before the flagships (or without these): only they are evaluated
                kept["flagships"] = kept.get("flagships", {}) | flagship_rivals(config, kept["best"], missing)
                write_docs(docs, list(rows.values()))
                added = f", {', '.join(FLAGSHIP_LABELS[name] for name in missing)} added"
            out_console.print(f"{label}: kept from {docs / 'system_table.json'}{added}", highlight=False)
            continue
        out_console.print(f"{label}: searching … ({time.perf_counter() - started:.0f} s so far)", highlight=False)
        progress = SearchProgress() if args.quiet else ConsoleProgress(out_console)
        try:
            row = table_row(config, kind, power_w, workers=args.workers, out=out,
                            progress=progress, flagships=flagships)
        except ValueError as exc:
            parser.exit(1, f"{parser.prog}: error: {workload} ({kind}): {exc}\n")
        except KeyboardInterrupt:
            print(f"interrupted — finished rows are in {docs / 'system_table.json'}; the search resumes from "
                  f"{out / workload / kind / 'results.db'}", file=sys.stderr)
            return 130
        kept_sensitivity = sensitivity_kept(kept, row)
        if kept_sensitivity:
            row["sensitivity"] = kept_sensitivity
            out_console.print(f"{label}: its sensitivity kept (its nominal reproduced; "
                              f"{cases_on_code(kept_sensitivity, row['signature'])} of "
                              f"{len(kept_sensitivity['cases'])} cases computed by this code)", highlight=False)
        elif kept is not None and kept.get("sensitivity"):
            moved = moved_nominals(kept["sensitivity"], row)
            out_console.print(f"{label}: its sensitivity dropped (its nominal moved: {', '.join(moved)}; python -m "
                              f"experiments.sensitivity --workload {workload} --kind {kind} runs it again)",
                              highlight=False)
        rows[(workload, kind)] = row
        write_docs(docs, list(rows.values()))
        ratios = ", ".join(f"{math.prod(f.values()):.2f}× {REFERENCE_LABELS[n]}" for n, f in row["best"]["factors"].items())
        out_console.print(f"{label}: {row['best']['samples_s']:,.1f} samples/s on {row['best']['chips']:,} chips, "
                          f"{'exact' if row['exact'] else 'NOT PROVEN'}; {ratios} ({row['elapsed_s']:.0f} s)",
                          highlight=False)
    write_docs(docs, list(rows.values()))
    return 0


def _rescore_main(parser: argparse.ArgumentParser, args: argparse.Namespace, rows: dict[tuple[str, str], Any],
                  docs: Path) -> int:
    """``--rescore-flagships``: the selected stored rows' flagship columns renewed (:func:`rescore_flagships`), the
    table rewritten once at the end (an error leaves it as it was)."""
    if args.budget_mw is not None:
        parser.exit(2, f"{parser.prog}: error: --rescore-flagships re-evaluates each stored row at its own budget; "
                       "--budget-mw does not apply\n")
    started = time.perf_counter()
    try:
        workloads = [get_workload(w).name for w in args.workload] if args.workload else None
        chosen = select_rows(list(rows.values()), workloads, args.kind)
        names = flagship_names(args.flagship)
    except ValueError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    try:
        fresh = rescore_flagships(chosen, names, say=lambda text: print(text, flush=True))
    except ValueError as exc:
        parser.exit(1, f"{parser.prog}: error: {exc}\n")
    write_docs(docs, list((rows | {row_key(r): r for r in fresh}).values()))
    print(f"rescored {len(fresh)} row(s) in {time.perf_counter() - started:.0f} s; wrote {docs / 'system_table.json'} "
          f"and .md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
