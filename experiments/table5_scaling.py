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
    from phaze_env.workloads import get_workload, model_graph
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
    return {"time_s": explained.time_s + repeat_s,
            "gemm_s": bwd_gemm_s + fwd_gemm_s * (2 if full else 1),
            "flops": bwd_flops + fwd_flops * (2 if full else 1),
            "quantisation": weighted / total}


def row(size: str, mode: str) -> dict[str, float]:
    """Every term of one Table 5 cell (see the module docstring)."""
    case = get_case(case_name(size, mode))
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
    head = next(item for item in evaluation.layer_timings[f"t{case.tensor}_m{case.microbatch}"].items() if item[0] == "post")[1]
    head_recompute_s = float(head["fwd_s"]) if case.recompute == "full" and case.pipeline > 1 else 0.0
    return {"ours_s": evaluation.plan["time_per_batch_s"], "published_s": published_time_s(case),
            "slowest_s": slowest, "middle_s": middle, "overhead_s": overhead_s,
            "head_share": 1 - middle / slowest if case.pipeline > 1 else 0.0,
            "head_recompute_share": head_recompute_s / slowest,
            "layer_eff": layers["flops"] / (peak * layers["time_s"]),
            "published_layer_eff": layers["flops"] / (peak * published_layer_s),
            "gemm_share": layers["gemm_s"] / layers["time_s"], "quantisation": layers["quantisation"],
            "layers_on_slowest": layers_on_slowest, "layer_s": layers["time_s"], "gemm_s": layers["gemm_s"]}


def case_layers(case) -> int:
    """Transformer layers of the case's model (its registry config)."""
    from experiments.validation_fit import _dims
    return _dims(case)[0]


def with_waves(terms: dict[str, float], reference: float) -> float:
    """The batch time if GEMMs were priced with their wave quantisation, the efficiency refitted on 175B."""
    scale = reference / terms["quantisation"]
    layer_s = terms["layer_s"] - terms["gemm_s"] * (1 - scale)
    slowest = terms["layers_on_slowest"] * layer_s + terms["overhead_s"]
    return terms["ours_s"] * slowest / terms["slowest_s"]


def main() -> int:
    rows = {(size, mode): row(size, mode) for size, modes in TABLE5.items() for mode in modes}
    reference = rows[(CALIBRATION_SIZE, "full")]["quantisation"]
    print("| model | recompute | published s | ours | LM-head stage share | LM-head recompute | layer eff ours | "
          "layer eff published | GEMM share | wave quantisation | if waves | Calculon |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    errors = {"ours": [], "waves": [], "calculon": []}
    for (size, mode), t in rows.items():
        waves_s = with_waves(t, reference)
        calculon_s = TABLE5[size][mode][1]
        errors["ours"].append(abs(t["ours_s"] / t["published_s"] - 1))
        errors["waves"].append(abs(waves_s / t["published_s"] - 1))
        errors["calculon"].append(abs(calculon_s / t["published_s"] - 1))
        print(f"| {size} | {mode} | {t['published_s']:.2f} | {t['ours_s']:.2f} ({t['ours_s'] / t['published_s'] - 1:+.1%}) | "
              f"+{t['head_share']:.1%} | {t['head_recompute_share']:.1%} | {t['layer_eff']:.1%} | "
              f"{t['published_layer_eff']:.1%} | {t['gemm_share']:.0%} | {t['quantisation']:.3f} | "
              f"{waves_s:.2f} ({waves_s / t['published_s'] - 1:+.1%}) | {calculon_s:g} ({calculon_s / t['published_s'] - 1:+.1%}) |")
    print()
    print("MAE: " + ", ".join(f"{k} {statistics.mean(v):.1%}" for k, v in errors.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
