"""Korthikanti et al. 2022, Table 5, side by side with Calculon on the same instance (data + one report section).

Calculon (Isaev et al., SC'23; calculon-ai/calculon) validates its own model on the same eight runs: the 22B, 175B,
530B and 1T Megatron models on A100, with full recompute and with sequence parallelism + selective recompute, each
at the paper's plan (its ``validation/seqsel/tab5/*.json``). Its figures here were produced by running Calculon
itself (``calculon llm-validation``, its ``Validation.seqsel_tab5`` on ``systems/a100_80g.json``) at commit
:data:`CALCULON_COMMIT`; nothing of Calculon's code is part of this repository. The published batch times are
Table 5's (as Calculon's validation tabulates them); ours are ``experiments.validate``'s predictions of the
``korthikanti22-*`` cases (an MFU prediction is converted to a batch time by the same ratio).
"""

from __future__ import annotations

import statistics

CALCULON_COMMIT = "caa4b11f8fe1fee3ba57adaacb7590d7deabd053"
"""calculon-ai/calculon at 2024-02-22 (the last commit of its main branch as mirrored here)."""

# model -> mode -> (published batch time s, Calculon's predicted batch time s)
TABLE5: dict[str, dict[str, tuple[float, float]]] = {
    "22b": {"full": (1.42, 1.40), "selective-sp": (1.10, 1.14)},
    "175b": {"full": (18.13, 18.03), "selective-sp": (13.75, 13.64)},
    "530b": {"full": (49.05, 49.89), "selective-sp": (37.83, 34.47)},
    "1t": {"full": (94.42, 90.08), "selective-sp": (71.49, 66.04)},
}
"""Korthikanti et al. 2022 Table 5 batch times and Calculon's, as ``calculon llm-validation`` printed them at
:data:`CALCULON_COMMIT` (columns Profile and Calc; Calculon's average |error| over the eight: 3.65 %)."""


def case_name(size: str, mode: str) -> str:
    """The validation case of one Table 5 cell."""
    return f"korthikanti22-{size}-{mode}"


def our_batch_time_s(published_s: float, error: float) -> float:
    """Our predicted batch time from a case's relative error on its rate metric (MFU or sequences/s): a rate
    ``(1 + e)`` times the published one is a time ``1/(1 + e)`` times the published one."""
    return published_s / (1.0 + error)


def section(errors: dict[str, float]) -> list[str]:
    """The report's side-by-side table; ``errors``: case name → our relative error on the case's metric."""
    rows, ours, theirs = [], [], []
    for size, modes in TABLE5.items():
        for mode, (published_s, calculon_s) in modes.items():
            name = case_name(size, mode)
            if name not in errors:
                continue
            our_s = our_batch_time_s(published_s, errors[name])
            ours.append(abs(our_s / published_s - 1))
            theirs.append(abs(calculon_s / published_s - 1))
            rows.append(f"| {size} | {mode} | {published_s:g} | {our_s:.2f} ({our_s / published_s - 1:+.1%}) | "
                        f"{calculon_s:g} ({calculon_s / published_s - 1:+.1%}) |")
    if not rows:
        return []
    return ["", "## Korthikanti et al. 2022 Table 5 beside Calculon", "",
            "The same eight runs (A100, the paper's plans) as Calculon's own validation predicts them, run here at "
            f"calculon-ai/calculon `{CALCULON_COMMIT[:9]}` (`experiments/calculon_reference.py`). Batch time in "
            f"seconds. Mean absolute error: ours {statistics.mean(ours):.1%}, Calculon's {statistics.mean(theirs):.1%} "
            f"over {len(rows)} runs.", "",
            "| model | recompute | published | ours | Calculon |", "|---|---|---|---|---|", *rows, "",
            "Why ours is high at 530B and 1T, term by term (the LM head's stage, GEMM wave quantisation, and the "
            "two terms the model now prices: the attention dropout kernel the trace lacks, and full recompute "
            "rerunning the transformer layers only, not the LM head), with the same terms for Megatron-LM's 2021 runs "
            "of these models: [table5_scaling.md](table5_scaling.md) (`python -m experiments.table5_scaling`).", ""]


__all__ = ["CALCULON_COMMIT", "TABLE5", "case_name", "our_batch_time_s", "section"]
