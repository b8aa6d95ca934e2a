"""What the host adds to the MoE runs of the stack that issues its kernels eagerly: ``python -m experiments.moe_stack_gap``.

Megatron-Bridge's Qwen3-30B-A3B rows of the 2026 releases run the ``megatron-core`` profile in the validation (the
stack they ran: Transformer Engine's fused attention, the tensor- and data-parallel overlaps, its H100 efficiency fitted
to a dense Llama 3 70B FP8 run) with the expert dispatch and all-to-all overlap of their recipes (the
``megatron-core-deepep`` and ``megatron-core-deepep-a2a-overlap`` variants, whose sources cite the recipes). That
profile issues its kernels from the host (``Stack.host_op_s``, :mod:`phaze_env.host`, fitted to the first row, held out
on the second). This prints each row's error with the host, with the host never limiting (``host_op_s`` 0), the host's
share of the step, and the time per layer and microbatch (forward + backward) the published step leaves beyond the
prediction. A diagnostic: no profile and no case is changed. (25.11's row of the same model is left out: its figure is
the slower software of that release, a known gap of its own.)
"""

from __future__ import annotations

from experiments.validation_cases import get_case
from experiments.validation_fit import evaluation_with, metric_value, published_time_s
from phaze_env.cli import OneLineParser
from phaze_env.workloads import get_workload

ROWS = ("bridge2604-qwen3-30b-a3b-fp8", "bridge260201-qwen3-30b-a3b-fp8")
"""The host's calibration row (26.04, EP 16) and its held-out row (26.02.01, EP 8, PP 2, VP 12, all-to-all overlap)."""


def _step_s(case, **fields) -> float:
    """The case's step on its own stack, with ``fields`` overriding the cluster's (``host_op_s=0.0``: no host)."""
    evaluation = evaluation_with(case, **fields)
    if not evaluation.feasible:
        raise ValueError(f"{case.name} on {case.stack}: {evaluation.reason}")
    return evaluation.plan.time_per_batch_s


def row(name: str) -> dict:
    """One row: published, the prediction on the case's stack and its error, and the unpriced time per layer and
    microbatch (``gap_ms``); the same with the host never limiting (``device_only_*``), and the host's share of the
    step (``host_share``)."""
    case = get_case(name)
    predicted_s = _step_s(case)
    device_s = _step_s(case, host_op_s=0.0)
    layer_microbatches = case.microbatches_per_replica * get_workload(case.workload).num_layers / case.pipeline
    return {"case": name, "stack": case.stack, "published": case.published, "on_stack": metric_value(case, predicted_s),
            "on_stack_error": metric_value(case, predicted_s) / case.published - 1,
            "gap_ms": (published_time_s(case) - predicted_s) / layer_microbatches * 1e3,
            "device_only_error": metric_value(case, device_s) / case.published - 1,
            "device_only_gap_ms": (published_time_s(case) - device_s) / layer_microbatches * 1e3,
            "device_only_ms": device_s / layer_microbatches * 1e3,
            "host_share": 1 - device_s / predicted_s}


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.moe_stack_gap", description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    for name in ROWS:
        r = row(name)
        print(f"{name}: published {r['published']:,.0f} tokens/s per GPU; {r['stack']} {r['on_stack']:,.0f} "
              f"({r['on_stack_error']:+.1%}), {r['gap_ms']:.2f} ms per layer and microbatch (fwd + bwd) not priced; "
              f"the host {r['host_share']:.0%} of the step (without it {r['device_only_error']:+.1%}, "
              f"{r['device_only_gap_ms']:.2f} ms not priced)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
