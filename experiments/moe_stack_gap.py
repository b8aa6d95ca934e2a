"""The MoE runs on the stack they ran, and what the model leaves unpriced: ``python -m experiments.moe_stack_gap``.

The validation predicts Megatron-Bridge's Qwen3-30B-A3B rows on the ``megatron-lm`` profile (its H100 efficiency
fitted to a dense GPT-3 run, the traced eager attention) or its dispatch variant. They ran Megatron-Core as
Megatron-Bridge runs it — the ``megatron-core`` profile: Transformer Engine's fused attention, the tensor- and
data-parallel overlaps, its H100 efficiency fitted to a dense Llama 3 70B FP8 run — with the expert dispatch and
all-to-all overlap of their recipe (:data:`RECIPES`). This prints each row's error on both, and on the megatron-core
profile the time per layer and microbatch (forward + backward) the published step leaves beyond the prediction: what
that profile does not price for these runs, per transformer layer a device runs. The profile issues its kernels from
the host (``Stack.host_op_s``, :mod:`phaze_env.host`, fitted to the first row): each row is also shown with the host
never limiting (``host_op_s`` 0), and the host's share of the step. A diagnostic: neither profile, nor any case, is
changed.
"""

from __future__ import annotations

from dataclasses import replace

from experiments.validation_cases import get_case
from experiments.validation_fit import evaluation_with, metric_value, predict, published_time_s
from phaze_env.cli import OneLineParser
from phaze_env.workloads import get_workload

RECIPES = {
    "bridge2604-qwen3-30b-a3b-fp8": (
        {"moe_dispatch": "hierarchical", "moe_alltoall_overlap": False},
        "NVIDIA-NeMo/Megatron-Bridge scripts/performance/configs/qwen/qwen3_workload_base_configs.py at 5f3b336f9: "
        "QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1, moe_flex_dispatcher_backend='hybridep', moe_a2a_overlap=False"),
    "bridge260201-qwen3-30b-a3b-fp8": (
        {"moe_dispatch": "hierarchical", "moe_alltoall_overlap": True},
        "the same file at tag v0.3.0 (2026-02-26; the 26.02 release's plan: PP 2, VP 12, EP 8, GBS 1024): "
        "moe_a2a_overlap=True (overlap_moe_expert_parallel_comm and delay_wgrad_compute, scripts/performance/utils/"
        "overrides.py), moe_flex_dispatcher_backend='deepep'"),
}
"""Each Bridge row's expert dispatch and all-to-all overlap as its recipe set them (the Cluster fields), and where."""


def _on_stack_s(case, **fields) -> float:
    """The case's step on the megatron-core profile with ``fields`` (the recipe's dispatch, and any override)."""
    evaluation = evaluation_with(replace(case, stack="megatron-core"), **fields)
    if not evaluation.feasible:
        raise ValueError(f"{case.name} on megatron-core: {evaluation.reason}")
    return evaluation.plan["time_per_batch_s"]


def row(name: str) -> dict:
    """One row: published, the validation's prediction and error, the megatron-core profile's with the recipe's
    dispatch, and the unpriced time per layer and microbatch on the latter (``gap_ms``); the same with the host never
    limiting (``device_only_*``), and the host's share of the profile's step (``host_share``)."""
    case = get_case(name)
    fields, _ = RECIPES[name]
    predicted_s = _on_stack_s(case, **fields)
    device_s = _on_stack_s(case, **fields, host_op_s=0.0)
    layer_microbatches = case.microbatches_per_replica * get_workload(case.workload).num_layers / case.pipeline
    return {"case": name, "published": case.published, "validation_error": predict(case).error,
            "validation_stack": case.stack, "on_stack": metric_value(case, predicted_s),
            "on_stack_error": metric_value(case, predicted_s) / case.published - 1,
            "gap_ms": (published_time_s(case) - predicted_s) / layer_microbatches * 1e3,
            "device_only_error": metric_value(case, device_s) / case.published - 1,
            "device_only_gap_ms": (published_time_s(case) - device_s) / layer_microbatches * 1e3,
            "device_only_ms": device_s / layer_microbatches * 1e3,
            "host_share": 1 - device_s / predicted_s}


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.moe_stack_gap", description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    for name, (fields, source) in RECIPES.items():
        r = row(name)
        print(f"{name}: published {r['published']:,.0f} tokens/s per GPU; {r['validation_stack']} "
              f"{r['validation_error']:+.1%}; megatron-core with {fields} {r['on_stack']:,.0f} ({r['on_stack_error']:+.1%}), "
              f"{r['gap_ms']:.2f} ms per layer and microbatch (fwd + bwd) not priced; the host {r['host_share']:.0%} of "
              f"the step (without it {r['device_only_error']:+.1%}, {r['device_only_gap_ms']:.2f} ms not priced); "
              f"recipe: {source}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
