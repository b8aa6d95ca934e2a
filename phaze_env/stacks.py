"""Training-stack profiles: what a named training software adds to the hardware model.

A :class:`StackProfile` holds the two kinds of thing a stack decides:

* **structure**, modelled exactly by the placement DP through :class:`phaze_env.cluster.Cluster` fields —
  whether the stack has Megatron-LM's interleaved 1F1B schedule (``interleaved_schedule``; DeepSpeed's
  ``PipelineEngine`` runs plain 1F1B only) and whether it splits a pipeline send over the tensor-parallel
  ranks' NICs and all-gathers it inside the node (``pipeline_scatter_gather``: Megatron-LM's scatter/gather,
  Narayanan et al. 2021 §4.1; DeepSpeed's ``pipe_partitioned``, on by default);
* **one efficiency**, ``framework_efficiency`` (see :class:`phaze_env.cluster.Cluster`): what an end-to-end
  step of that stack loses against the operator model, *fitted to one published run* of the stack
  (``calibration``, a case of ``experiments.validation_cases``) and checked on its other published runs.

Neither stack of the published runs overlaps the data-parallel gradient all-reduce with the backward pass
in a pipeline: Megatron-LM of 2021–22 reduces after the pipeline flush (``--overlap-grad-reduce`` came with
Megatron-Core in 2023), and DeepSpeed's ``PipelineEngine`` runs ``ReduceGrads`` as its own instruction after
the last backward. The DP prices it after the flush; an overlapping stack would need its own field.

``python -m phaze_env.evaluate --stack NAME`` applies a profile; without ``--stack`` the cluster preset keeps
its own settings (``dgx-a100`` carries Megatron-LM's efficiency, the others 1).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace

from phaze_env.cluster import MEGATRON_A100_EFFICIENCY, Cluster

MEGATRON_DEEPSPEED_A100_EFFICIENCY = 0.645
"""Achieved fraction of the a100 preset's per-operator speed in Megatron-DeepSpeed training (Megatron-LM's
tensor-parallel layers in DeepSpeed's ``PipelineEngine``), *fitted to one published measurement*: Smith et
al. 2022 (MT-NLG, arXiv:2201.11990) §2.4, the 530B model with batch 1920 on 280 DGX A100 nodes, 60.1 s per
iteration (``experiments.validation_cases``: ``smith22-mtnlg-530b-280nodes``); held out on 350 and 420 nodes and
on BLOOM 176B. It is lower than Megatron-LM's 0.79 on the same A100s; what the difference stands for is not
measured separately. Candidates the model does not price: ``PipelineEngine``'s point-to-point transfers are
blocking (``deepspeed/runtime/pipe/p2p.py``: ``async_op`` must be False; ``dist.broadcast`` in two-rank groups on
PyTorch < 1.8), issued as instructions between the compute instructions rather than overlapped with them, and
each instruction is scheduled from Python."""

PYTORCH_FSDP_A100_EFFICIENCY = 0.802
"""Achieved fraction of the a100 preset's per-operator speed in PyTorch FSDP training (IBM's fms-fsdp, eager PyTorch
2.2-era nightlies, SDPA FlashAttention-2), *fitted to one published measurement*: the Llama 2 7B run of the PyTorch
blog "Maximizing training throughput using PyTorch FSDP" (2024-03-13, Table 1, and fms-fsdp README.md at commit
5e522b4): 3,700 tokens/s per GPU on 128 A100 80 GB with 400 Gb/s between nodes, HSDP over the 8 GPUs of a node, batch
2 per GPU, no activation checkpointing (``experiments.validation_cases``: ``fms-fsdp-mar24-llama2-7b``; the run the
blog trained to 2T tokens; the exact fit is 0.8017). Held out: the other six rows of fms-fsdp's February and March tables (13B, 34B, 70B, and
the February 7B). Its structure is modelled, not folded in: ZeRO-3's per-layer all-gathers and reduce-scatter
overlapping each layer's compute (FSDP's prefetch), HSDP's shard groups and the replicas' all-reduce
(``PlanSpec.shard_group``), the checkpointing as published (every block, or none with FlashAttention's recompute),
the cluster's 400 Gb/s per node (``ibm-a100``). What the factor stands for is not measured separately; candidates the
model does not price: un-fused elementwise kernels of eager PyTorch (RMSNorm, rotary embeddings, SwiGLU — the trace
fuses each into its matmul's epilogue), kernel launches from Python, NCCL kernels sharing the SMs with the overlapped
compute."""


@dataclass(frozen=True)
class StackProfile:
    """One training stack: its structural options, its fitted efficiency and where both come from."""

    name: str
    framework_efficiency: float
    interleaved_schedule: bool
    pipeline_scatter_gather: bool
    calibration: str  # the published run (a validation case name) framework_efficiency is fitted to
    sources: str

    def apply(self, cluster: Cluster) -> Cluster:
        """``cluster`` running this stack."""
        return replace(cluster, framework_efficiency=self.framework_efficiency,
                       interleaved_schedule=self.interleaved_schedule,
                       pipeline_scatter_gather=self.pipeline_scatter_gather)


STACKS: dict[str, StackProfile] = {
    profile.name: profile
    for profile in (
        StackProfile(
            name="megatron-lm", framework_efficiency=MEGATRON_A100_EFFICIENCY, interleaved_schedule=True,
            pipeline_scatter_gather=True, calibration="korthikanti22-175b-full",
            sources="NVIDIA/Megatron-LM (2021-22): interleaved 1F1B and scatter/gather, Narayanan et al. 2021 "
                    "(arXiv:2104.04473) §2.2.2 and §4.1; gradient all-reduce after the pipeline flush "
                    "(--overlap-grad-reduce only from Megatron-Core, 2023); efficiency: "
                    "phaze_env.cluster.MEGATRON_A100_EFFICIENCY"),
        StackProfile(
            name="megatron-deepspeed", framework_efficiency=MEGATRON_DEEPSPEED_A100_EFFICIENCY,
            interleaved_schedule=False, pipeline_scatter_gather=True, calibration="smith22-mtnlg-530b-280nodes",
            sources="microsoft/DeepSpeed deepspeed/runtime/pipe (PipelineEngine, TrainSchedule: plain 1F1B, no "
                    "interleaving; pipe_partitioned activations are sent 1/t per tensor rank and all-gathered; "
                    "ReduceGrads after the last backward); Smith et al. 2022 (MT-NLG, arXiv:2201.11990) §2.3: "
                    "DeepSpeed pipeline and data parallelism with Megatron-LM tensor slicing; efficiency: "
                    "MEGATRON_DEEPSPEED_A100_EFFICIENCY"),
        StackProfile(
            name="pytorch-fsdp", framework_efficiency=PYTORCH_FSDP_A100_EFFICIENCY, interleaved_schedule=False,
            pipeline_scatter_gather=False, calibration="fms-fsdp-mar24-llama2-7b",
            sources="pytorch/pytorch torch/distributed/fsdp (FullyShardedDataParallel: FULL_SHARD and HYBRID_SHARD, "
                    "reshard_after_forward, BACKWARD_PRE prefetch, limit_all_gathers; post-backward reduce-scatter then "
                    "the replicas' all-reduce under HYBRID_SHARD); Zhao et al. 2023 (PyTorch FSDP, VLDB, "
                    "arXiv:2304.11277) §3-4: per-unit all-gather and reduce-scatter overlapped with compute by "
                    "prefetching; foundation-model-stack/fms-fsdp main_training.py, fms_fsdp/policies (one unit per "
                    "block, bf16 mixed precision, block-level activation checkpointing); no pipeline (p = 1: the "
                    "structural pipeline fields are off); efficiency: PYTORCH_FSDP_A100_EFFICIENCY"),
    )
}


class UnknownStackError(ValueError):
    """A training-stack name that has no profile."""


def stack_names() -> list[str]:
    return list(STACKS)


def get_stack(name: str) -> StackProfile:
    """The profile called ``name`` (a one-line error naming the known ones otherwise)."""
    key = str(name).strip().lower()
    if key not in STACKS:
        close = difflib.get_close_matches(key, STACKS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise UnknownStackError(f"unknown training stack {name!r}.{hint} Known stacks: {', '.join(STACKS)}")
    return STACKS[key]


__all__ = ["STACKS", "StackProfile", "UnknownStackError", "get_stack", "stack_names"]
