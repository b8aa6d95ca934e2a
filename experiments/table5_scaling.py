"""Why Korthikanti et al. 2022 Table 5 is over-predicted at 530B and 1T: each term of our model, measured per row.

``python -m experiments.table5_scaling`` evaluates every ``korthikanti22-*`` case on its own cluster (the case's,
as ``experiments.validate`` does) and prints, per row:

* **slowest / middle device** — the pipeline's per-microbatch time on the slowest device and on a middle one
  (``Evaluation.plan["stage_times_s"]``). Megatron-LM (2022) puts the embedding on the first and the LM head +
  loss on the last stage and splits the transformer layers evenly, as the model does; the batch time is
  ``(m_r + (p−1)/v) · max c``, so ``1 − middle/slowest`` is the share of the batch time the LM head's stage adds;
* **LM-head recompute** — the LM head's forward, which the model repeats under full recompute; Megatron-LM's
  checkpointing wraps the transformer layers only (``ParallelTransformer._checkpointed_forward``), so this is a
  share of the batch time the model adds that the run did not spend;
* **per-layer efficiency, ours and published** — a transformer layer's model FLOPs (forward, backward and what the
  recompute mode repeats) over its time at the A100's 312 TFLOP/s; the published one removes from the published
  per-device time the same non-layer terms as ours (LM head, embedding, p2p sends) and divides the rest by the
  layers of the slowest device;
* **GEMM share** — the layer's compute-bound tensor-core operators (the four weight GEMMs and their gradients) in
  its time; the rest is tensor-parallel all-reduces, the memory-bound attention matmuls and elementwise kernels;
* **wave quantisation** — a FLOP-weighted ``tiles / (SMs · ⌈tiles / SMs⌉)`` of those GEMMs with cuBLAS's
  256×128 output tiles on the A100's 108 SMs (:data:`A100_SMS`, :data:`CUBLAS_TILE`): the fraction of the last
  wave's SMs that do work. The model does not price it (its A100 is 128 arrays of 32×32; the framework efficiency,
  fitted on 175B, absorbs the 175B shapes' loss). ``if waves`` rescales the model's GEMM times by
  ``quantisation(175B) / quantisation(row)`` (the framework efficiency refitted on 175B keeps 175B unchanged) and
  re-forms the slowest device's time: a first-order estimate, not a re-evaluation.

Nothing here changes a prediction; the figures are the analysis behind docs/validation.md's Table 5 section.
"""

from __future__ import annotations

import math
import statistics
import sys

from experiments.calculon_reference import TABLE5, case_name
from experiments.validation_cases import get_case
from experiments.validation_fit import case_accelerator, case_cluster, evaluation_with, published_time_s
from phaze_env.explain import explain_layer
from phaze_env.workloads import get_workload, model_graph

A100_SMS = 108
"""Streaming multiprocessors of an A100 SXM (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020, Table 3)."""
CUBLAS_TILE = (256, 128)
"""Output tile of cuBLAS's large bf16 GEMM kernels on A100 (the kernel name ``ampere_bf16_s16816gemm_bf16_256x128_
ldg8_f2f_stages_64x3`` in Nsight profiles of Megatron-LM GEMMs): an *assumption* for every GEMM here; cuBLAS's
heuristic picks 128×128 or 128×256 for some shapes, which changes each quantisation figure by a few points."""
CALIBRATION_SIZE = "175b"
"""The model whose full-recompute row the megatron-lm A100 efficiency is fitted to."""


def wave_quantisation(m: int, n: int, sms: int = A100_SMS, tile: tuple[int, int] = CUBLAS_TILE) -> float:
    """Fraction of the SM-waves of an ``m × n`` output that do work: ``tiles / (sms · ⌈tiles / sms⌉)``."""
    big, small = max(m, n), min(m, n)
    tiles = math.ceil(big / tile[0]) * math.ceil(small / tile[1])
    return tiles / (sms * math.ceil(tiles / sms))


def _is_gemm(op) -> bool:
    return op.unit in ("tc", "tc+vc") and op.bound == "compute"


def layer_terms(case) -> dict[str, float]:
    """A transformer layer of ``case`` on its cluster: time (recompute included), GEMM time, FLOPs, quantisation."""
    accelerator, cluster = case_accelerator(case), case_cluster(case)
    explained = explain_layer(case.workload, accelerator, cluster, layer="block", tensor_width=case.tensor,
                              microbatch=case.microbatch, seq_len=case.seq_len)
    graph = model_graph(get_workload(case.workload), seq_len=case.seq_len, microbatch=case.microbatch,
                        tensor_width=case.tensor)
    block = next(item for item in graph.layers if item.name == "block")
    gemm_ops = {("fwd", op.name): op for op in block.fwd.ops} | {("bwd", op.name): op for op in block.bwd.ops}
    fwd_gemm_s = sum(o.latency_s for o in explained.ops if o.direction == "fwd" and _is_gemm(o))
    bwd_gemm_s = sum(o.latency_s for o in explained.ops if o.direction == "bwd" and _is_gemm(o))
    attention_fwd_s = sum(o.latency_s for o in explained.ops if o.direction == "fwd" and o.name in ("matmul", "softmax", "matmul_1"))
    full = case.recompute == "full"
    repeat_s = explained.fwd_s if full else attention_fwd_s
    fwd_flops = sum(op.gemm_flops for op in block.fwd.ops)
    bwd_flops = sum(op.gemm_flops for op in block.bwd.ops)
    weighted, total = 0.0, 0.0
    for (direction, name), op in gemm_ops.items():
        scheduled = next((o for o in explained.ops if o.direction == direction and o.name == name), None)
        if scheduled is None or not _is_gemm(scheduled):
            continue
        for gemm in op.gemms:
            weighted += gemm.flops * wave_quantisation(gemm.m, gemm.n)
            total += gemm.flops
    comm_fwd_s = sum(o.latency_s for o in explained.ops if o.direction == "fwd" and o.unit == "comm")
    comm_bwd_s = sum(o.latency_s for o in explained.ops if o.direction == "bwd" and o.unit == "comm")
    return {"time_s": explained.time_s + repeat_s, "comm_s": comm_bwd_s + comm_fwd_s * (2 if full else 1),
            "passes": 3 if full else 2,
            "gemm_s": bwd_gemm_s + fwd_gemm_s * (2 if full else 1),
            "flops": bwd_flops + fwd_flops * (2 if full else 1),
            "quantisation": weighted / total}


def row(name: str) -> dict[str, float]:
    """Every term of one validation case of the megatron-lm stack (see the module docstring)."""
    case = get_case(name)
    evaluation = evaluation_with(case)
    plan = evaluation.plan
    times = [float(t) for t in plan["stage_times_s"]]
    slowest, middle = max(times), statistics.median(times)
    layers = layer_terms(case)
    layers_on_slowest = case_layers(case) // case.pipeline
    overhead_s = slowest - layers_on_slowest * layers["time_s"]  # LM head (+ its recompute), p2p sends
    steady = plan["microbatches_per_replica"] + (case.pipeline - 1) / case.interleave
    published_c = published_time_s(case) / steady
    published_layer_s = (published_c - overhead_s) / layers_on_slowest
    peak = case_accelerator(case).peak_flops
    dropout_s = attention_dropout_bytes(case) / (case_accelerator(case).effective_hbm_bandwidth_Bps
                                                  * case_cluster(case).stack.framework_efficiency)
    head = evaluation.layer_timings[f"t{case.tensor}_m{case.microbatch}"]["post"]
    head_recompute_s = float(head["fwd_s"]) if case.recompute == "full" and case.pipeline > 1 else 0.0
    return {"ours_s": plan["time_per_batch_s"], "published_s": published_time_s(case), "steady": steady,
            "slowest_s": slowest, "middle_s": middle, "overhead_s": overhead_s,
            "head_share": 1 - middle / slowest if case.pipeline > 1 else 0.0,
            "head_recompute_s": head_recompute_s, "head_recompute_share": head_recompute_s / slowest,
            "layer_eff": layers["flops"] / (peak * layers["time_s"]),
            "published_layer_eff": layers["flops"] / (peak * published_layer_s),
            "gemm_share": layers["gemm_s"] / layers["time_s"], "quantisation": layers["quantisation"],
            "layers_on_slowest": layers_on_slowest, "layer_s": layers["time_s"], "gemm_s": layers["gemm_s"],
            "comm_s": layers["comm_s"], "dropout_s": dropout_s, "published_layer_s": published_layer_s, "passes": layers["passes"]}


def case_layers(case) -> int:
    """Transformer layers of the case's model (its registry config)."""
    from experiments.validation_fit import _dims
    return _dims(case)[0]


def attention_dropout_bytes(case) -> float:
    """HBM bytes per layer and microbatch of Megatron-LM's attention dropout (``--attention-dropout`` 0.1, its default
    and the paper's: Korthikanti et al. 2022 §4.1 count its mask, ``a·s²·b`` bytes, and its output, ``2·a·s²·b``),
    which the traced graph lacks: on the ``E = b·(a/t)·s²`` scores of a device, the forward reads 2E and writes 2E + E
    (mask), the backward reads 2E + E and writes 2E; full and selective recompute repeat the forward (the attention
    core is what selective recompute repeats), no recompute does not."""
    heads = get_workload(case.workload).config_dict["n_head"]
    scores = case.microbatch * heads // case.tensor * case.seq_len ** 2
    forwards = 1 if case.recompute == "none" else 2
    return (5 * forwards + 5) * scores


def what_if_s(terms: dict[str, float], reference: float | None, head_recompute: bool = True,
              dropout: bool = False) -> float:
    """The batch time if GEMMs were priced with their wave quantisation (``reference``: the calibration row's, the
    efficiency refitted there: GEMM times scaled by ``reference / quantisation``; None: not), without the LM head's
    recompute when ``head_recompute`` is False, and with the attention dropout when ``dropout``: the slowest device's
    time re-formed, the steady state ``(m_r + (p−1)/v)`` times it replaced."""
    scale = 1.0 if reference is None else reference / terms["quantisation"]
    layer_s = terms["layer_s"] - terms["gemm_s"] * (1 - scale) + (terms["dropout_s"] if dropout else 0.0)
    slowest = terms["layers_on_slowest"] * layer_s + terms["overhead_s"]
    if not head_recompute:
        slowest -= terms["head_recompute_s"]
    return terms["ours_s"] - terms["steady"] * (terms["slowest_s"] - slowest)


def fixed_overhead(small: dict[str, float], large: dict[str, float]) -> tuple[float, float]:
    """(overhead s per layer, efficiency) solving ``published layer = device / e + comm + overhead`` at two rows: the
    alternative in which part of the framework efficiency is a fixed per-layer cost (launches, dispatch)."""
    efficiency = case_cluster(get_case(case_name(CALIBRATION_SIZE, "full"))).stack.framework_efficiency
    device = [(t["layer_s"] - t["comm_s"]) * efficiency for t in (small, large)]  # at efficiency 1
    target = [t["published_layer_s"] - t["comm_s"] for t in (small, large)]
    new_efficiency = (device[1] - device[0]) / (target[1] - target[0])
    return target[0] - device[0] / new_efficiency, new_efficiency


CROSS_CHECK = ("narayanan21-table2-175b-384", "narayanan21-table2-175b-768", "narayanan21-table2-175b-1536",
               "narayanan21-table2-530b-560", "narayanan21-table2-530b-1120", "narayanan21-table2-530b-2240")
"""The same stack, chip, models and tensor × pipeline splits a year earlier (Narayanan et al. 2021 Table 2): the held-out
rows a shape-dependent GEMM efficiency would move most."""


def _line(label: str, t: dict[str, float], reference: dict[str, float], calculon_s: float | None) -> tuple[str, list[float]]:
    """One table row; each what-if is divided by its own ratio at the calibration row (the efficiency refitted there,
    to first order: it scales nearly the whole time)."""
    quantisation = reference["quantisation"]
    published = t["published_s"]
    cells, errors = [], [abs(t["ours_s"] / published - 1)]
    for kwargs in WHAT_IFS.values():
        kwargs = {"reference": quantisation if kwargs.get("reference") else None} | {
            k: v for k, v in kwargs.items() if k != "reference"}
        time_s = what_if_s(t, **kwargs) * reference["ours_s"] / what_if_s(reference, **kwargs)
        cells.append(f"{time_s:.2f} ({time_s / published - 1:+.1%})")
        errors.append(abs(time_s / published - 1))
    calculon = f"{calculon_s:g} ({calculon_s / published - 1:+.1%})" if calculon_s else "–"
    if calculon_s:
        errors.append(abs(calculon_s / published - 1))
    return (f"| {label} | {published:.2f} | {t['ours_s']:.2f} ({t['ours_s'] / published - 1:+.1%}) | "
            f"{t['head_share']:.1%} | {t['head_recompute_share']:.1%} | {t['dropout_s'] / t['layer_s']:.1%} | "
            f"{t['layer_eff']:.1%} | {t['published_layer_eff']:.1%} | {t['gemm_share']:.0%} | {t['quantisation']:.3f} | "
            + " | ".join(cells) + f" | {calculon} |", errors)


WHAT_IFS = {"if waves": {"reference": True}, "if dropout": {"dropout": True},
            "if head not recomputed": {"head_recompute": False},
            "if dropout, head not recomputed": {"dropout": True, "head_recompute": False},
            "if all three": {"reference": True, "dropout": True, "head_recompute": False}}
"""The first-order what-ifs, each normalised at the calibration row (the efficiency refitted there)."""
HEADER = ("| case | published s | ours | LM-head stage share | LM-head recompute | dropout / layer | layer eff ours | "
          "layer eff published | GEMM share | wave quantisation | " + " | ".join(WHAT_IFS) + " | Calculon |\n"
          + "|---" * (11 + len(WHAT_IFS)) + "|")


def main() -> int:
    rows = {(size, mode): row(case_name(size, mode)) for size, modes in TABLE5.items() for mode in modes}
    reference = rows[(CALIBRATION_SIZE, "full")]
    print(HEADER)
    errors = []
    for (size, mode), t in rows.items():
        line, row_errors = _line(f"{size} {mode}", t, reference, TABLE5[size][mode][1])
        print(line)
        errors.append(row_errors)
    print()
    print("Table 5 MAE: " + ", ".join(f"{k} {statistics.mean(e[i] for e in errors):.1%}"
                                       for i, k in enumerate(("ours", *WHAT_IFS, "Calculon"))))
    print()
    print(HEADER)
    cross = []
    for name in CROSS_CHECK:
        line, row_errors = _line(name, row(name), reference, None)
        print(line)
        cross.append(row_errors)
    print()
    print("Cross-check MAE: " + ", ".join(f"{k} {statistics.mean(e[i] for e in cross):.1%}"
                                          for i, k in enumerate(("ours", *WHAT_IFS))))
    print()
    overhead_s, efficiency = fixed_overhead(reference, rows[("1t", "full")])
    print(f"Fixed per-layer overhead that would make 175B and 1T (full recompute) consistent: {overhead_s * 1e3:.2f} ms "
          f"per layer ({overhead_s / reference['passes'] * 1e3:.2f} ms per pass), with the device-time efficiency "
          f"{efficiency:.3f} (now {case_cluster(get_case(case_name(CALIBRATION_SIZE, 'full'))).stack.framework_efficiency:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
