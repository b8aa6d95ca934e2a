"""Why the long-context runs with context parallelism come out fast: ``python -m experiments.long_context_gap``.

The validation's NeMo 24.03 rows (Llama 2 7B in FP8 at 128K–1M tokens, CP 4–32) are predicted above the published
TFLOP/s per GPU (by how much: their rows of docs/validation.md and this command's table; 43–49 % on 2026-12-05, before
issue 28 priced sequence parallelism's kernels on s/t tokens: docs/fidelity.md). The same NeMo table also publishes the same model, container and system at 4K–64K tokens
(CP 1–2), where the attention scores are 14–67 % of the FLOP count instead of 84–97 %, and its 2025 revision gives each
row's global batch (:data:`NEMO_TABLE`). This predicts every row of that table on the validation's profile and
measures what each candidate cause moves:

* **FLOP count** — the error if NeMo had counted the causal half of the scores (``causal count``) instead of the full
  ``s × s`` (NeMo's own formula counts them in full: :data:`NEMO_FLOP_FORMULA`);
* **attention kernel rate** — the error with FlashAttention-2's rate on H100 (``FA2 rate``) in place of the
  profile's Hopper fused-attention rate;
* **ring exchange** — each hop's key/value send against the attention block it hides behind (``send / block``,
  forward; a ratio below 1 is hidden, the model's ``cp_comm``);
* **the whole stack** — the framework efficiency fitted to each row alone (``fitted eff.``; the profile's is
  :data:`~phaze_env.stacks.MEGATRON_CORE_H100_EFFICIENCY`): if one sequence-independent factor explains every row, the
  fitted efficiencies agree across 4K → 1M tokens whatever the attention share.

A diagnostic: no profile and no case is changed (``tests/test_long_context_gap.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from experiments.validation_cases import ValidationCase, _bridge_llama3, get_case, nemo_long_case
from experiments.validation_fit import (_dims, case_cluster, error_with, fit_efficiency, megatron_core_flops, predict)
from phaze_env.cli import OneLineParser
from phaze_env.context_parallel import kv_bytes_per_token
from phaze_env.hardware import get_preset
from phaze_env.stacks import FLASH_ATTENTION2_H100_EFFICIENCY, MEGATRON_CORE_H100_EFFICIENCY, STACKS
from phaze_env.workloads import get_workload

NEMO_TABLE: tuple[tuple[int, int, int, int, int, int, float], ...] = (
    # K   GBS  t  p  d  c  TFLOP/s per GPU (with-CP columns)
    (4, 1024, 1, 1, 4, 1, 768),
    (8, 512, 1, 2, 4, 1, 730),
    (16, 256, 2, 1, 8, 1, 660),
    (32, 128, 2, 1, 8, 2, 610),
    (64, 64, 4, 1, 8, 2, 574),
    (128, 32, 4, 1, 8, 4, 555),
    (256, 16, 4, 1, 8, 8, 549),
    (512, 8, 8, 1, 4, 16, 549),
    (1024, 4, 8, 1, 4, 32, 536),
)
"""NVIDIA/NeMo docs/source/performance/performance_long_sequence.md at commit
19fadb67b09ba94c55094d34df119d6f9c565068 (2025-05-08; its H100 TFLOP/s and plans are those of 0aa26711, the
validation cases' source; the 'Batch Size' column came with 14d427f575, 2025-04-28), "LLAMA2-7B (FP8) - H100", NeMo
24.03.01 on DGX-H100, #GPUs = K: the sequence in K tokens, the global batch, and the with-CP TP, PP, DP, CP and
TFLOP/s per GPU. The 128K–1M rows are the validation's cases."""

NEMO_FLOP_FORMULA = ("NVIDIA/NeMo nemo/collections/common/metrics/perf_metrics.py (added 2024-08-04, d8995496ac, the "
                     "release line of the table's 2024-10 write-up), FLOPsMeasurementCallback._llama2: gbs·s·L·h²·(12 + "
                     "12·g/a + 18·ffn/h + 12·s/h + 6·V/(L·h)) — the full s×s scores (12·s/h), as Megatron-Core's "
                     "num_floating_point_operations; NeMo 24.03 (v1.23.0) itself has no FLOP counter")


@dataclass(frozen=True)
class Row:
    case: ValidationCase
    score_share: float  # the full s×s scores' share of the FLOP count
    error: float  # the validation profile
    causal_count_error: float  # the same prediction if the count had the causal half of the scores
    fa2_error: float  # the profile with FlashAttention-2's H100 rate for the fused attention
    send_over_block: float  # forward ring hop: K/V send time over the attention block it overlaps (0 at c = 1)
    fitted_efficiency: float | None  # the framework efficiency that predicts this row exactly (None: not fitted)


def table_case(k: int, batch: int, tensor: int, pipeline: int, data: int, context: int, tflops: float) -> ValidationCase:
    """A row of :data:`NEMO_TABLE` as a case: the validation's own where it has it, else the same constructor."""
    case = nemo_long_case(k, k, tensor, data, context, tflops, batch)
    return replace(case, pipeline=pipeline, data=data) if pipeline > 1 else case


def score_flops(case: ValidationCase) -> float:
    """The full ``s × s`` score FLOPs of Megatron-Core's count (its ``12·B·s·l·h²·(s/h)·q`` term)."""
    layers, hidden, _, seq = _dims(case)
    cfg = get_workload(case.workload).config_dict
    heads = int(cfg["num_attention_heads"])
    query_ratio = (cfg.get("head_dim") or hidden // heads) * heads / hidden
    return 12 * case.global_batch * seq * layers * hidden**2 * (seq / hidden) * query_ratio


def send_over_block(case: ValidationCase, attention_efficiency: float) -> float:
    """One forward ring hop: the key/value chunk's send (``Network.p2p_s`` as ``ring_exposed_s`` prices it) over the
    attention block it overlaps — half of a ``(s/c) × (s/c)`` block pair per rank and step (Megatron-Core's
    load-balanced chunks), two GEMMs, at ``attention_efficiency × framework efficiency`` of the bf16 peak."""
    if case.context == 1:
        return 0.0
    cluster = case_cluster(case)
    workload = get_workload(case.workload)
    local = case.seq_len // case.context
    hop_bytes = kv_bytes_per_token(workload, case.tensor, 2) * local
    send_s = cluster.network.p2p_s(hop_bytes, stride=case.tensor, hops=case.context - 1)
    cfg = workload.config_dict
    head_dim = cfg.get("head_dim") or int(cfg["hidden_size"]) // workload.num_heads
    block_flops = 2 * 2 * local * (local // 2) * head_dim * (workload.num_heads // case.tensor)
    rate = get_preset(case.accelerator).peak_flops * attention_efficiency * cluster.stack.framework_efficiency
    return send_s / (block_flops / rate)


def score_share(case: ValidationCase) -> float:
    """The full ``s × s`` scores' share of the case's Megatron-Core FLOP count."""
    return score_flops(case) / megatron_core_flops(case)


def causal_count_error(error: float, share: float) -> float:
    """The error of the same predicted time if the count had the causal half of the scores, ``share`` of the count in
    full (the metric is count / time: the same time, ``1 − share/2`` of the count)."""
    return (1 + error) * (1 - share / 2) - 1


def row(case: ValidationCase, *, fit: bool = True, **cluster_fields) -> Row:
    """The case's row; ``cluster_fields`` override its cluster's (``host_op_s=0.0``: the host never limits)."""
    error = error_with(case, **cluster_fields) if cluster_fields else predict(case).error
    share = score_share(case)
    causal = causal_count_error(error, share)
    fitted = fit_efficiency(case, tolerance=1e-3, **cluster_fields) if fit else None
    return Row(case, share, error, causal,
               error_with(case, attention_efficiency=FLASH_ATTENTION2_H100_EFFICIENCY, **cluster_fields),
               send_over_block(case, case_cluster(case).stack.attention_efficiency), fitted)


def rows(*, fit: bool = True, **cluster_fields) -> list[Row]:
    return [row(table_case(*spec), fit=fit, **cluster_fields) for spec in NEMO_TABLE]


BRIDGE_LLAMA3_8B = (("25.09", 14079), ("25.11", 14451))
"""Megatron-Bridge's Llama 3 8B rows on DGX-H100 (FP8 with current scaling, 8 GPUs, GBS 128, MBS 1, sequence 8192,
FSDP 8, TP 1, PP 1, CP 1): tokens/s per GPU per release (docs/performance-summary-archive.md at commit
0a25f911b2ed6c6905a539504fdb8e5b40e3438b, '25.09 NeMo Container' and '25.11 NeMo Container', System: DGX-H100).
The same hidden size (4096) as Llama 2 7B, in the megatron-core profile's own release line."""


def bridge_llama3_8b(release: str, tokens_s: float) -> ValidationCase:
    """A :data:`BRIDGE_LLAMA3_8B` row as a case (the validation's Megatron-Bridge constructor): FSDP over the 8 GPUs
    is ZeRO-3, which the profile's rules (stages 0 and 1) are widened to admit, as the Llama 3 paper cases widen them
    for ZeRO-2."""
    case = _bridge_llama3(release, "LLAMA3_8B", "llama3-8b", 8, 128, 1, 1, 1, 1, tokens_s)
    return replace(case, zero=3, rules=(("zero_stages", (0, 1, 3)),))


def other_runs() -> list[tuple[str, float, float]]:
    """Runs outside the table on the same profile — (name, error, FA2-rate error): a model of the same hidden size in
    the profile's own releases (:data:`BRIDGE_LLAMA3_8B`), the same model at 4K in NeMo 24.07 (its validation case
    runs the megatron-lm profile), and the Llama 3 405B paper's 8K and 131K-with-CP-16 rows."""
    cases = [bridge_llama3_8b(*spec) for spec in BRIDGE_LLAMA3_8B]
    cases += [replace(get_case(name), stack="megatron-core")
              for name in ("nemo2407-llama2-7b-fp8", "llama3-405b-paper-16384", "llama3-405b-paper-16384-cp16")]
    return [(case.name, predict(case).error,
             error_with(case, attention_efficiency=FLASH_ATTENTION2_H100_EFFICIENCY)) for case in cases]


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.long_context_gap", description=__doc__.splitlines()[0])
    parser.add_argument("--no-fit", action="store_true", help="skip the per-row efficiency fits (faster)")
    args = parser.parse_args(argv)
    profile = STACKS["megatron-core"].fits[0]
    print(f"megatron-core profile on H100: framework efficiency {MEGATRON_CORE_H100_EFFICIENCY}, fused attention at "
          f"{profile.attention_efficiency} of the bf16 peak; FA2 rate {FLASH_ATTENTION2_H100_EFFICIENCY}")
    print("| sequence | plan | GBS | scores in the count | error | causal count | FA2 rate | send / block | fitted eff. |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows(fit=not args.no_fit):
        c = r.case
        fitted = "—" if r.fitted_efficiency is None else f"{r.fitted_efficiency:.3f}"
        print(f"| {c.seq_len // 1024}K | t{c.tensor}p{c.pipeline}d{c.data}c{c.context} | {c.global_batch} | "
              f"{r.score_share:.0%} | {r.error:+.1%} | {r.causal_count_error:+.1%} | {r.fa2_error:+.1%} | "
              f"{r.send_over_block:.2f} | {fitted} |")
    print()
    for name, error, fa2 in other_runs():
        print(f"{name} on megatron-core: {error:+.1%}; with the FA2 rate {fa2:+.1%}")
    print(f"\nFLOP count: {NEMO_FLOP_FORMULA}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
