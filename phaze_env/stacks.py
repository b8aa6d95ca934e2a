"""Training-stack profiles: what a named training software adds to the hardware model.

A :class:`StackProfile` holds the two kinds of thing a stack decides:

* **structure**, modelled exactly by the placement DP through :class:`phaze_env.cluster.Cluster` fields —
  whether the stack has Megatron-LM's interleaved 1F1B schedule (``interleaved_schedule``; DeepSpeed's
  ``PipelineEngine`` runs plain 1F1B only) and whether it splits a pipeline send over the tensor-parallel
  ranks' NICs and all-gathers it inside the node (``pipeline_scatter_gather``: Megatron-LM's scatter/gather,
  Narayanan et al. 2021 §4.1; DeepSpeed's ``pipe_partitioned``, on by default), and which pipeline schedule it runs
  (``pipeline_schedule``: 1F1B, or DeepSeek-V3's bidirectional DualPipe, ``deepseek-hai-llm``);
* **one efficiency per chip**, ``framework_efficiency`` (see :class:`phaze_env.cluster.Cluster`): what an
  end-to-end step of that stack loses against the operator model, *fitted to one published run* of the stack on
  that chip (``calibration``, a case of ``experiments.validation_cases``) and checked on its other published runs
  on that chip. A stack's efficiency does not carry across chips (the same Megatron-LM code reaches a different
  fraction of the model on A100 and H100: :data:`MEGATRON_H100_EFFICIENCY`), so each chip has its own
  :class:`ChipFit`, and a profile applied on a chip it was not fitted on is refused.

Neither stack of the published runs overlaps the data-parallel gradient all-reduce with the backward pass
in a pipeline: Megatron-LM of 2021–22 reduces after the pipeline flush (``--overlap-grad-reduce`` came with
Megatron-Core in 2023), and DeepSpeed's ``PipelineEngine`` runs ``ReduceGrads`` as its own instruction after
the last backward. The DP prices it after the flush; an overlapping stack would need its own field. PyTorch FSDP
(no pipeline) runs ZeRO-3: its per-layer all-gathers and reduce-scatter (and, under hybrid sharding, the shard's
all-reduce across the replica groups) overlap each layer's compute, its rerun included under recompute, which the DP
prices per layer for every ZeRO-3 plan (:meth:`phaze_env.placement.zero_traffic.ZeroTraffic.zero_comm_s`), so it
needs no field of its own.

``python -m phaze_env.evaluate --stack NAME`` applies a profile (its efficiency on the ``--preset`` chip); without
``--stack`` the cluster preset keeps its own settings (``dgx-a100`` carries Megatron-LM's A100 efficiency, the
others 1).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace

from phaze_env.cluster import MEGATRON_A100_EFFICIENCY, MOE_ONLY_KNOBS, Cluster, Stack
from phaze_env.hardware.accelerator import A100_SMS, PRESETS, Accelerator
from phaze_env.plan_spec import PlanRules, PlanSpec

MEGATRON_DEEPSPEED_A100_EFFICIENCY = 0.634
"""Achieved fraction of the a100 preset's per-operator speed in Megatron-DeepSpeed training (Megatron-LM's
tensor-parallel layers in DeepSpeed's ``PipelineEngine``), *fitted to one published measurement*: Smith et
al. 2022 (MT-NLG, arXiv:2201.11990) §2.4, the 530B model with batch 1920 on 280 DGX A100 nodes, 60.1 s per
iteration (``experiments.validation_cases``: ``smith22-mtnlg-530b-280nodes``; the fit, 0.6341, is
``experiments.validation_fit.fit_efficiency``, with full recompute rerunning the transformer layers only —
DeepSpeed's pipeline checkpoints Megatron-DeepSpeed's ``checkpointable_layers``, its transformer layers — where the
LM head's recompute fitted 0.6444); held out on 350 and 420 nodes and
on BLOOM 176B. It is lower than Megatron-LM's 0.807 on the same A100s; what the difference stands for is not
measured separately. Candidates the model does not price: ``PipelineEngine``'s point-to-point transfers are
blocking (``deepspeed/runtime/pipe/p2p.py``: ``async_op`` must be False; ``dist.broadcast`` in two-rank groups on
PyTorch < 1.8), issued as instructions between the compute instructions rather than overlapped with them, and
each instruction is scheduled from Python."""

PYTORCH_FSDP_A100_EFFICIENCY = 0.854
"""Achieved fraction of the a100 preset's per-operator speed in PyTorch FSDP training (IBM's fms-fsdp, eager PyTorch
2.2-era nightlies), *fitted to one published measurement*: the Llama 2 34B run of the PyTorch blog "Maximizing
training throughput using PyTorch FSDP" (2024-03-13, Table 1, and fms-fsdp README.md at commit 5e522b4): 700
tokens/s per GPU on 128 A100 80 GB with 400 Gb/s between nodes, FULL_SHARD over all 128 GPUs, batch 2 per GPU, every
block checkpointed (``experiments.validation_cases``: ``fms-fsdp-mar24-llama2-34b``; the fit, 0.8544, is
``experiments.validation_fit.fit_efficiency``, with the checkpoint rerunning the blocks only — fms-fsdp's
``apply_fsdp_checkpointing`` wraps the decoder layers, not the LM head; 0.8569 with the head rerun). A FULL_SHARD run, so no hybrid-shard all-reduce enters the fit, which
leaves :data:`PYTORCH_FSDP_HSDP_EXPOSURE` to the HSDP 7B row. Held out: the other five rows of fms-fsdp's February and
March tables (7B, 13B at batch 1, 34B at batch 8, 70B at batches 6 and 2). Its structure is modelled, not folded in:
ZeRO-3's per-layer all-gathers and reduce-scatter overlapping each layer's compute (FSDP's prefetch), HSDP's shard
groups and the replicas' all-reduce (``PlanSpec.shard_group``) with :data:`PYTORCH_FSDP_HSDP_EXPOSURE` of it not
hidden, SDPA's FlashAttention-2 causal kernel (:data:`FLASH_ATTENTION2_A100_EFFICIENCY`, :mod:`phaze_env.attention`),
eager PyTorch's unfused elementwise kernels (``unfused_elementwise``: fms-fsdp's ``use_torch_compile`` is False in
``fms_fsdp/config/training.py`` at both benchmark commits, 0d31998 and 5e522b4; their traffic counted at the
dispatcher, :mod:`phaze_env.workloads.eager`), the checkpointing as published (every block, or none), the cluster's
400 Gb/s per node (``ibm-a100``). History: fitted to the 7B row with neither the eager kernels nor the exposure, the
same rule gave 0.66 and the FULL_SHARD rows came out 15–23 % slow."""

PYTORCH_FSDP_H100_EFFICIENCY = 0.709
"""The same stack's efficiency on the h100 preset, fitted by the same rule to the same row of the blog's Table 1 H100
column (fms-fsdp README.md at commit 5e522b4, 'H100 96 GPUs with 800 Gbps'): Llama 2 34B, 1,550 tokens/s per GPU on
96 H100 80 GB, FULL_SHARD, batch 2, every block checkpointed (``fms-fsdp-mar24-llama2-34b-h100``; the fit, 0.7086, is
``experiments.validation_fit.fit_efficiency``, the blocks rerun and not the LM head; 0.7111 with the head rerun), with FlashAttention-2 at :data:`FLASH_ATTENTION2_H100_EFFICIENCY`, the
eager elementwise kernels and :data:`PYTORCH_FSDP_HSDP_EXPOSURE` carried over from A100 (not refitted); held out on the
column's 7B (HSDP) and 70B rows. It is lower than the A100's: the blog "hypothesize[s] that the HBM bandwidth of
H100s is the cause for the reduced HFU/MFU" (312 vs 989 TFLOP/s but 2.0 vs 3.35 TB/s, the blog's figures); the
eager kernels are the HBM-bound share the model prices (26 % of the 7B step on H100 against 14 % on A100), and what
the lower factor still stands for is not measured separately here."""

PYTORCH_FSDP_HSDP_EXPOSURE = 0.39
"""Fraction of HSDP's cross-node all-reduce (each layer's gradient shard, issued from FSDP's post-backward hook on its
own stream) that the backward pass does not hide in fms-fsdp's runs, *fitted to one published measurement*: the HSDP
Llama 2 7B row on A100 (3,700 tokens/s per GPU, ``fms-fsdp-mar24-llama2-7b``; the fit, 0.3922 — 0.4026 before the
efficiency's refit for the checkpoint not rerunning the LM head — is
``experiments.validation_fit.fit_exposure`` at :data:`PYTORCH_FSDP_A100_EFFICIENCY`). Why not 0: the model's per-layer
overlap (the all-reduce costs nothing while it is shorter than the layer's backward) predicts the HSDP rows faster than
the FULL_SHARD rows by more than published; the cause inside the runs (NCCL kernels taking SMs and HBM bandwidth from
the GEMMs they overlap, the all-reduce queued behind the next layer's reduce-scatter) is not separated. Checked on what
it was not fitted to: the 13B HSDP row at batch 1, where the all-reduce is twice the share of the step (−4 %), the
H100 7B HSDP row with the H100 efficiency fitted on a FULL_SHARD row (+3 %), and the share of that H100 step the
model then leaves exposed, 12 %, against the blog's own H100 traces: "a 10% gap due to network 'peeking' out" (PyTorch
blog, 2024-03-13). Fully exposed (after the backward pass, the jax-xla structure) puts every HSDP row 14–21 % slow
(``experiments.fsdp_hsdp_sensitivity``)."""

MEGATRON_H100_EFFICIENCY = 0.986
"""Achieved fraction of the h100 preset's per-operator speed in NeMo's own GPT model of 2023 (Transformer Engine's
layers, Apex's distributed Adam; not Megatron-Core's model, whose runs take ``megatron-core``:
``experiments.validation_cases.MEGATRON_CORE_MODEL_RUNS``), *fitted to one published measurement*: NVIDIA's MLPerf
Training v3.1 GPT-3 175B submission on 768 H100 GPUs, FP8, its median logged step (``experiments.validation_cases``:
``mlperf31-gpt3-175b-fp8-768``; the fit, 0.9864, is ``experiments.validation_fit.fit_efficiency``). Chosen as the
smallest scale of the newest round of that model, where the part of the step that does not shrink with the
microbatches weighs least; chosen after the round's errors at the profile's previous fit were known (0.97, fitted to
DGX Cloud's bf16 GPT-3 run at 512 GPUs, which trains Megatron-Core's model and moved to ``megatron-core``; the 768-GPU
run was then −1.2 %). Held out: the round's other scales (4,096 to 10,752 GPUs, Azure's too) and v3.0's (NeMo 1.17).
It is higher than Megatron-LM's 0.807 on A100; what the difference stands for is not measured separately. The
candidate the sources support: the 2023 stack overlaps what the 2021-22 one exposed — TE's userbuffers overlap the
tensor-parallel all-gathers/reduce-scatters with the GEMMs (``tp_comm_overlap``), NeMo overlaps the interleaved
schedule's pipeline sends (``overlap_p2p_comm``) and Apex's distributed Adam the data-parallel reduce-scatter
(``overlap_grad_sync``) — while the model adds every one of them in full, so the factor stands for the compute the
run loses *net of* the communication it hides."""

JAX_XLA_TPUV4_EFFICIENCY = 0.818
"""Achieved fraction of the tpuv4 preset's per-operator speed in JAX/XLA training with MaxText, *fitted to one
published measurement*: the 22B model on one v4-128 slice (64 chips), 156 TFLOP/s per chip = 56.7 % MFU
(AI-Hypercomputer/maxtext README at commit d3f68fe2c; ``experiments.validation_cases``: ``maxtext-22b-1xv4-128``;
the exact fit is 0.8184, ``experiments.validation_fit.fit_efficiency``, with full rematerialisation rerunning the
decoder layers only, not the LM head — MaxText remats its decoder layer; 0.8203 with the head rerun); held out on the 52B model on one v4-384 slice and on the multi-slice runs (22B on 2, 4
and 8 v4-128 slices, 52B on 2 v4-384 slices). The tpuv4 preset's MXUs run at their
nominal rate (``gemm_efficiency`` 1: no public TPU v4 GEMM microbenchmark), so this factor also carries what the
MXUs lose on these shapes, besides what an end-to-end XLA step adds (the layer's fusions as XLA forms them, the
per-layer all-gathers' HBM traffic, the step's host synchronisation)."""


MEGATRON_LM_RULES = PlanRules(uniform_stages=True, interleave_min_stages=2, zero_stages=(0, 1), whole_microbatches=True,
                              stack="megatron-lm")
"""Megatron-LM and Megatron-Core (NVIDIA/Megatron-LM ``megatron/model/transformer.py`` of 2021-22 and Megatron-Core's
``TransformerBlock`` alike assert "num_layers must be divisible by pipeline_model_parallel_size": every pipeline stage
holds ``num_layers / p`` transformer layers); ``num_layers_per_virtual_pipeline_stage`` divides each stage's layers;
the optimizer state is replicated (ZeRO-0) or sharded by ``--use-distributed-optimizer`` (ZeRO-1); ZeRO-2/3 are not
part of it. Interleaving from ``p = 2``: Megatron-LM of 2021-22 asserted "pipeline-model-parallel size should be
greater than 2 with interleaved schedule", Megatron-Core relaxed it to ``p > 2`` only "when interleaved schedule is
used and p2p communication overlap is disabled" (``--overlap-p2p-communication``, on in NeMo's and Megatron-Bridge's
recipes, whose published Qwen3 runs interleave at ``p = 2``); the profile's H100 fit is Megatron-Core, so ``p = 2`` is
allowed (an A100-era plan with ``v > 1`` at ``p = 2`` would need the newer code)."""
MEGATRON_CORE_RULES = replace(MEGATRON_LM_RULES, stack="megatron-core", microbatch_groups=True)
"""Megatron-Core's plan rules are Megatron-LM's (the same ``TransformerBlock`` split, distributed optimizer, microbatch
calculator) but for the interleaved schedule's microbatch groups (``PlanRules.microbatch_groups``: from Megatron-Core
v0.10, NVIDIA/Megatron-LM MR !2117, any ``m_r ≥ p`` interleaves, where Megatron-LM needs ``m_r`` a multiple of ``p``);
its account-for-embedding/loss split (``PlanRules.embedding_loss_in_split``) is a per-run flag, off by default as in
Megatron-Core."""
DEEPSPEED_PIPELINE_RULES = PlanRules(zero_stages=(0, 1), whole_microbatches=True, stack="megatron-deepspeed")
"""DeepSpeed's ``PipelineEngine`` (microsoft/DeepSpeed ``deepspeed/runtime/pipe/engine.py``): plain 1F1B over a
``PipelineModule`` whose ``partition_method`` places layers freely (uniform, by parameters or by type); with pipeline
parallelism it runs ZeRO-1 at most ("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism", the engine's
assertion)."""
FSDP_RULES = PlanRules(pipeline=False, zero_stages=(0, 2, 3), whole_microbatches=True, stack="PyTorch FSDP")
"""PyTorch FSDP (``torch.distributed.fsdp``): no pipeline; ``NO_SHARD``, ``SHARD_GRAD_OP`` and ``FULL_SHARD`` /
``HYBRID_SHARD`` are ZeRO-0, -2 and -3 (Zhao et al. 2023, §3); it has no optimizer-only sharding."""
MAXTEXT_RULES = PlanRules(pipeline=False, zero_stages=(0, 3), whole_microbatches=True, stack="jax-xla")
"""MaxText at commit d3f68fe2c: one pjit step with no pipeline parallelism; data parallelism (ZeRO-0) or fully
sharded data parallelism (``ici_fsdp_parallelism``: weights, gradients and state sharded, ZeRO-3)."""


class UnfittedChipError(ValueError):
    """A stack profile applied on a chip its efficiency was never fitted on."""


@dataclass(frozen=True)
class ChipFit:
    """A stack's efficiency on one chip, fitted to one published run of the stack on that chip, and the attention
    kernel the stack runs there (``attention_efficiency``: 0 = the traced eager attention; above 0 a fused causal
    kernel sustaining that fraction of the chip's bf16 peak, :mod:`phaze_env.attention`, from the kernel's published
    figures — not fitted), and whether the stack runs attention dropout as a kernel of its own there
    (``attention_dropout_kernel``: unfused attention with dropout, ``Stack.attention_dropout_kernel``), and whether the
    efficiency was fitted with the GEMMs' wave quantisation priced (``gemm_wave_sms``: the chip's SMs, 0 = not priced,
    the efficiency absorbs it; ``Stack.gemm_wave_sms``)."""

    chips: tuple[str, ...]  # accelerator presets of that chip (the same silicon in another number format counts)
    framework_efficiency: float
    calibration: str  # the published run (a validation or chip-ratio case name) the efficiency is fitted to
    attention_efficiency: float = 0.0
    attention_dropout_kernel: bool = False
    gemm_wave_sms: int = 0  # the chip's SMs when the efficiency was fitted with GEMM wave quantisation priced (0: not)


FLASH_ATTENTION2_A100_EFFICIENCY = 0.50
"""Fraction of the A100's bf16 peak a FlashAttention-2-class kernel sustains on the attention FLOPs it computes:
Dao 2023 (FlashAttention-2, arXiv:2307.08691), abstract: "reaching 50-73% of the theoretical maximum FLOPs/s on
A100". The low end is taken — assumption: training runs the causal forward *and* backward kernels, and the paper's
figures put the backward and the causal runs at the low end of that range."""
FLASH_ATTENTION2_H100_EFFICIENCY = 0.35
"""The same Ampere-era kernel class on H100: Shah et al. 2024 (FlashAttention-3, arXiv:2407.08608), abstract:
"FlashAttention-2 achieving only 35% utilization on H100 GPUs" (it uses none of Hopper's wgmma/TMA, which
FlashAttention-3 needs to reach 75 %)."""
TE_FUSED_ATTENTION_H100_EFFICIENCY = 0.55
"""Fraction of the H100's bf16 peak Transformer Engine's fused attention (cuDNN's flash-attention kernels for Hopper,
``NVTE_FUSED_ATTN``, the default of Megatron-Core's ``TEDotProductAttention``) sustains on the attention FLOPs of a
causal forward and backward pass. Shah et al. 2024 (FlashAttention-3, arXiv:2407.08608): the Hopper-specific kernel
class reaches "up to 740 TFLOPs/s (75% utilization)" in the bf16 forward pass, its backward 1.5–1.75× FlashAttention-2's
(which runs at 35 % on H100, :data:`FLASH_ATTENTION2_H100_EFFICIENCY`), i.e. 0.52–0.61, and the paper's causal runs sit
below its non-causal ones. Assumption: 0.55, the backward pass's range (it carries 2.5 of the 3.5 FLOP shares of a
forward + backward pass), range 0.50–0.65; not fitted."""
TPU_FLASH_ATTENTION_EFFICIENCY = 0.50
"""Fraction of a TPU v4's bf16 peak a flash-class fused causal attention kernel sustains on the attention FLOPs it
computes — the rate the system stack gives TPU v4 and, through :meth:`SystemStack.design_fit`, every searched chip
(whose cores copy TPU v4's). The kernel exists in practice: MaxText runs JAX's Pallas splash attention on TPU by
default (``attention: 'autoselected'`` → ``tpu_flash_attention`` over
``jax.experimental.pallas.ops.tpu.splash_attention``: google/maxtext ``MaxText/configs/base.yml`` and
``MaxText/layers/attentions.py`` at e64f6813, 2024-10). Its 2023 TPU v4 runs, the system stack's calibration there, did
not: ``dot_product_attention`` writes the ``bhqk`` scores (``MaxText/layers.py`` at d3f68fe2c), so those runs are
priced with the eager attention they ran (``experiments.rival_runs.rival_cluster``).
*Assumption*, no published measurement on TPU v4 found: the rate FlashAttention-2 reaches on A100
(:data:`FLASH_ATTENTION2_A100_EFFICIENCY`, the low end of Dao 2023's 50–73 %) — a first flash-class kernel on a matrix
unit fed from on-chip memory, with the softmax on the vector units beside it; range 0.35 (FlashAttention-2's rate on a
chip it was not written for, :data:`FLASH_ATTENTION2_H100_EFFICIENCY`) to 0.65 (above Transformer Engine's Hopper
kernel, :data:`TE_FUSED_ATTENTION_H100_EFFICIENCY`)."""
LLM_FOUNDRY_A100_EFFICIENCY = 0.853
"""Achieved fraction of the a100 preset's per-operator speed in llm-foundry training (Composer, PyTorch FSDP
FULL_SHARD, FlashAttention-class attention), *fitted to one published measurement*: MPT-7B at sequence 4096 on
8 A100 80GB, 3,684 tokens/s per GPU (mosaicml/llm-foundry scripts/train/benchmarking/README.md; the chip-ratio case
``llm-foundry-mpt-7b-s4096``; the fit, 0.8527, is ``experiments.validation_fit.fit_ratio_efficiency``, with activation
checkpointing rerunning the blocks only, not the LM head; 0.8587 with the head rerun). Chosen before looking at
the others: the middle model size at the table's most common sequence length."""
LLM_FOUNDRY_H100_EFFICIENCY = 0.710
"""The same stack on H100, fitted to the same run's H100 figure (8,611 tokens/s per GPU, same README and plan; the fit
is 0.7104 with the plan as the stack runs it, FULL_SHARD = ZeRO-3, and the checkpoint rerunning the blocks only —
0.7153 with the LM head rerun, 0.72 when the ratio cases ran ZeRO-1, which FSDP does not have).
Lower than on A100: the stack's own table has it at 40–46 % MFU on H100 and 55–64 % on A100 for the same models and
plans, i.e. its H100 kernels run further below the chip's measured best than its A100 kernels do (the a100 and h100
presets carry the MAMF-measured GEMM rates, 85.9 % and 80.1 % of peak). Which kernels lose it the sources do not
say; with one factor per chip fitted on one row, the other six rows' H100/A100 ratios are held out."""

MEGATRON_CORE_H100_EFFICIENCY = 0.806
"""Achieved fraction of the h100 preset's per-operator speed in Megatron-Core training as NeMo 25.x / Megatron-Bridge
runs it, *fitted to one published measurement*: Llama 3 70B on 64 H100 (DGX-H100), FP8 with current scaling, TP 4, PP 8,
VP 5, GBS 128, sequence 8192: 1,619 tokens/s per GPU (NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md,
'25.09 NeMo Container'; ``experiments.validation_cases``: ``bridge2509-llama3-70b-fp8-64``; the fit, 0.8063, is
``experiments.validation_fit.fit_efficiency``), with each microbatch's weight gradients accumulated into the bf16
main-gradient buffer (:data:`MEGATRON_CORE_MAIN_GRAD_BYTES`), with sequence parallelism's norms, residual adds and FP8 casts on the
rank's ``s/t`` tokens, the gathered FP8 tensors transposed (``sequence_parallel_kernels``,
:func:`~phaze_env.hardware.number_format.fp8_cast_bytes`) and one FP8 cast per Transformer Engine module input
(``Op.cast_shared``), with Transformer Engine's fused attention at
:data:`TE_FUSED_ATTENTION_H100_EFFICIENCY` (cited, not fitted) and its tensor-parallel collectives overlapped with their
GEMMs (``tp_comm_overlap``, modelled: :func:`phaze_env.hardware.estimator.chunked_exposed_s`). Held out: the same model
in two later releases (GBS 128 and 256) and Llama 3.1 405B on 1,024 H100 (TP 8, PP 8, CP 2, VP 8) in three releases.
History: with the TP collectives priced exposed the same rule fitted 0.983 and the 405B rows came out −2.4 % to +0.9 %
(with the overlap +3.5 % to +7.0 %); with the data-parallel reduce-scatter and all-gather also overlapped
(``dp_comm_overlap``) the fit moved from 0.8785 to 0.8772 and the 405B rows to +6.0 % to +11.5 %. With every norm,
residual add and FP8 cast priced on all ``s`` tokens on each of the 4 tensor ranks and one cast per traced q, k, v,
gate and up GEMM (before issue 28's audit), the same rule fitted 0.8772: those kernels were over-priced by about 11 %
of this run's step, far more than in a TP-1 run, so the factor was too high for every narrower-hidden run
(docs/fidelity.md, "Per-token kernels at hidden 4096"). Without the weight-gradient accumulation
(:data:`MEGATRON_CORE_MAIN_GRAD_BYTES`, issue 28, 2026-12-07) it fitted 0.7833: the accumulation is 2.6 % of this run's
step at 8,192 tokens per microbatch and 10.9 % of NeMo's FP8 GPT-3 step at 2,048 (6.8 % of its bf16 twin's), which
one factor could not carry (docs/fidelity.md, "Weight-gradient accumulation"). What the factor still stands for is not measured
separately."""

MEGATRON_CORE_MAIN_GRAD_BYTES = 4.0
"""HBM bytes per weight that each microbatch's backward pass moves to accumulate the weight gradients into the
main-gradient buffer, in Megatron-Core as Megatron-Bridge's performance recipes run it
(``Stack.main_grad_accumulation_bytes``): the buffer is read and written once per microbatch, 2 bytes each way.
Sources: the weight-gradient GEMM accumulates into the parameter's ``main_grad`` (``gradient_accumulation_fusion`` →
Transformer Engine's ``fuse_wgrad_accumulation``, ``accumulate_into_main_grad``: NVIDIA/Megatron-LM
``megatron/core/extensions/transformer_engine.py`` at d98e8a64dd); the buffer holds the gradients in the parameters'
dtype, bf16, unless ``grad_reduce_in_fp32`` (``megatron/core/distributed/param_and_grad_buffer.py``,
``group_params_for_buffers``: "torch.float if grad_reduce_in_fp32, else param.dtype"; 8 bytes then), which the
performance recipes turn off (NVIDIA-NeMo/Megatron-Bridge ``src/megatron/bridge/perf_recipes/_common.py`` at
067f987df: ``cfg.ddp.grad_reduce_in_fp32 = False``). NeMo 1.x's distributed Adam, which the 2023–24 NeMo runs used,
keeps its gradient buffer in ``grad_sync_dtype``, bf16 in their configs (``conf/optim/distributed_fused_adam.yaml`` of
NVIDIA's MLPerf v3.1 GPT-3 submission; ``gpt3_175b_hydra.yaml`` of NVIDIA/dgxc-benchmarking).

Priced in series with the backward pass, at the chip's achieved HBM bandwidth: an upper bound. The accumulation is
the weight-gradient GEMM's epilogue, each output tile's ``main_grad`` read and written after its K loop, and the K of
a weight gradient is the microbatch's tokens: at 2,048 tokens a 128 × 256 FP8 tile reads and writes 128 KB of bf16
accumulator, at a 132nd of the H100's 3.35 TB/s about 5 µs, against the 11 µs of its 134 MFLOP at a 132nd of the FP8
MAMF (about half as long), at 8,192 tokens an eighth; a kernel that overlaps one tile's epilogue with the next tile's
main loop hides part of it, which is then in the fitted efficiency. Tested against held-out runs, not fitted: the
profile refitted on its own calibration run (0.7833 → 0.8063) predicts the FP8-over-bf16 speed-up of NeMo's GPT-3
runs 1.60× (1.68× without; published 1.42–1.48×) and their per-step time 6–13 % fast where it was 17–24 %
(docs/fidelity.md, 'Weight-gradient accumulation'; ``python -m experiments.h100_profiles``)."""

MEGATRON_CORE_HOST_OP_S = 72.78e-6
"""Host seconds per traced operator of Megatron-Core as Megatron-Bridge runs it on DGX H100 without CUDA graphs
(``Stack.host_op_s``, :mod:`phaze_env.host`: a transformer layer's pass takes at least its traced operators times
this, and each device-to-host sync of the expert dispatch stalls the device), *fitted to one published run*:
Qwen3-30B-A3B on 16 H100, FP8, EP 16 (``bridge2604-qwen3-30b-a3b-fp8`` on this profile with its recipe's HybridEP
dispatch and no all-to-all overlap, the ``megatron-core-deepep`` variant; the fit, 72.78 µs, is
``experiments.validation_fit.fit_host_op_s``, at this profile's efficiency, which the host term leaves unchanged: its
calibration run's layers are device-bound). Held out: the same model's 26.02.01 row (EP 8, PP 2, VP 12, all-to-all
overlap) and every other run of the profile. The recipe runs without CUDA graphs: NVIDIA-NeMo/Megatron-Bridge
``scripts/performance/configs/qwen/qwen3_workload_base_configs.py`` (at 01b2977e5) sets no ``cuda_graph_impl`` in
``QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1``, where its H100 BF16 twin and every Blackwell preset set
``cuda_graph_impl="transformer_engine"`` with ``cuda_graph_scope=["moe_router", "moe_preprocess"]`` — the Megatron-Core
MoE README's remedy for the "CPU Overhead Bottleneck" (``--cuda-graph-impl transformer_engine --cuda-graph-modules attn
moe_router moe_preprocess``).

What it stands for: the host work Megatron-Core issues per operator of the traced (Hugging Face) layer, which is
more than one eager kernel launch: a PyTorch operator costs about 5–25 µs of host time before its kernel is queued
(Python, autograd, the ATen dispatcher, the driver's launch: J. Huang, "From PyTorch op to kernel launch",
jiahuanglin.xyz, lesson 18), and Transformer Engine's FP8 modules issue several kernels per traced GEMM (the
current-scaling amax and cast of each operand, the transposes), plus router and dispatcher bookkeeping the trace does
not have (its auxiliary loss, the token counts). 72.78 µs is 3–15 such launches per traced operator; the count of
kernels Megatron-Core actually issues per layer is not measured here (no GPU), so the figure is a fit, not a
derivation. Dense layers of the profile's runs are unaffected (their kernels are long: device time above the issue
time in both passes; ``tests/test_host_bound.py``)."""


FITTED_FIELDS = ("framework_efficiency", "attention_efficiency", "attention_dropout_kernel", "gemm_wave_sms")
"""The :class:`~phaze_env.cluster.Stack` fields a profile has per chip (its :class:`ChipFit`: the efficiency fitted
there, the attention kernel it runs there); a profile sets each of the others itself."""


@dataclass(frozen=True)
class StackProfile:
    """One training stack: its structural options, its efficiency fitted per chip and where both come from.
    ``fits[0]`` is the stack's home chip (the one ``apply`` without a chip uses)."""

    name: str
    interleaved_schedule: bool
    pipeline_scatter_gather: bool
    fits: tuple[ChipFit, ...]
    sources: str
    hybrid_allreduce_overlapped: bool = True  # hybrid sharding's cross-group all-reduce: in the backward, or after it
    unfused_elementwise: bool = False  # eager PyTorch: every elementwise operator its own kernel (a Stack field)
    hybrid_allreduce_exposure: float = 0.0  # share of the overlapped hybrid-shard all-reduce not hidden (a Stack field)
    exposure_calibration: str = ""  # the published run hybrid_allreduce_exposure is fitted to ("" = not fitted: 0)
    plan_rules: PlanRules = PlanRules()  # the plans it can run (pipeline split, interleaving, ZeRO stages; a Stack field)
    tp_comm_overlap: bool = False  # tensor-parallel collectives chunked and overlapped with their GEMMs (a Stack field)
    dp_comm_overlap: bool = False  # data-parallel collectives per bucket under the backward/forward passes (a Stack field)
    moe_dispatch: str = "alltoall"  # expert parallelism's token dispatch: flat or node-deduplicated (a Stack field)
    moe_node_limit: int = 0  # node-limited routing: a token's experts on at most this many nodes (0: no limit)
    moe_alltoall_overlap: bool = False  # the dispatch/combine hidden under another microbatch's compute (a Stack field)
    moe_comm_sm_share: float = 0.0  # compute units the overlapped communication kernels hold (a Stack field)
    sequence_parallel_kernels: bool = False  # norms, residuals and FP8 casts on s/t tokens at t > 1 (a Stack field)
    host_op_s: float = 0.0  # host issue time per traced operator, eager kernels (0: CUDA graphs / not modelled; a Stack field)
    host_calibration: str = ""  # the published run host_op_s is fitted to ("" = not fitted)
    pipeline_schedule: str = "1f1b"  # "1f1b" or DeepSeek-V3's bidirectional "dualpipe" (a Stack field)
    recompute_norms_up_projections: bool = False  # RMSNorm and MLA up-projections rerun in the backward (a Stack field)
    folded_experts: bool = False  # experts whole (expert TP 1), EP over the t·c·d ranks: MoE parallel folding (a Stack field)
    recompute_moe: bool = False  # every MoE block rerun in the backward pass, its input kept (a Stack field)
    moe_probs_in_activation: bool = False  # routing weights multiplied into the experts' activation (a Stack field)
    main_grad_accumulation_bytes: float = 0.0  # HBM bytes per weight each microbatch's gradient accumulation moves
    variant_of: str = ""  # another profile this one is, but for its MoE dispatch: its fits (and calibration) are that one's

    def __post_init__(self) -> None:
        if not self.fits:
            raise ValueError(f"stack {self.name!r} needs an efficiency fitted on at least one chip")
        try:  # its structure is a Stack's: validated by Stack, once
            self.stack(self.fits[0])
        except ValueError as error:
            raise ValueError(f"stack {self.name!r}: {str(error).removeprefix('cluster ')}") from None

    def workload_error(self, workload) -> str:
        """Why this stack's knobs cannot run ``workload`` ("" when they can): node-limited routing and the all-to-all
        overlap act on a mixture-of-experts model's token dispatch, which a dense model does not have."""
        if workload.num_experts:
            return ""
        if self.moe_node_limit:
            return (f"stack {self.name!r}: moe_node_limit={self.moe_node_limit} (node-limited routing) needs a "
                    f"mixture-of-experts model; {workload.name} is dense")
        if self.moe_alltoall_overlap or self.moe_comm_sm_share:
            return (f"stack {self.name!r}: moe_alltoall_overlap (the expert all-to-all hidden under compute) needs a "
                    f"mixture-of-experts model; {workload.name} is dense")
        for knob, what in MOE_ONLY_KNOBS.items():
            if getattr(self, knob):
                return f"stack {self.name!r}: {knob} ({what}) needs a mixture-of-experts model; {workload.name} is dense"
        return ""

    @property
    def framework_efficiency(self) -> float:
        """The efficiency on the home chip (``fits[0]``)."""
        return self.fits[0].framework_efficiency

    @property
    def calibration(self) -> str:
        """The published run the home chip's efficiency is fitted to."""
        return self.fits[0].calibration

    def fit_on(self, chip: str) -> ChipFit | None:
        """The fit for accelerator preset ``chip`` (case-insensitive, as preset names are; ``None``: never fitted
        there)."""
        chip = chip.strip().lower()
        return next((fit for fit in self.fits if chip in fit.chips), None)

    def structure(self, cluster: Cluster) -> Cluster:
        """``cluster`` with this stack's structure; its efficiencies (framework, attention kernel) left as they are."""
        return cluster.replace(stack=replace(cluster.stack, **self._structure()))

    def _structure(self) -> dict:
        """The :class:`~phaze_env.cluster.Stack` fields this profile sets whatever the chip: every one but the
        efficiencies fitted per chip (:data:`FITTED_FIELDS`)."""
        return {name: getattr(self, name) for name in Stack.__dataclass_fields__ if name not in FITTED_FIELDS}

    def stack(self, fit: ChipFit) -> Stack:
        """The training stack this profile runs with ``fit``'s efficiencies."""
        return Stack(**self._structure(), **{name: getattr(fit, name) for name in FITTED_FIELDS})

    def apply(self, cluster: Cluster, chip: str | None = None) -> Cluster:
        """``cluster`` running this stack on accelerator preset ``chip`` (default: the home chip): its structure, its
        efficiency fitted on that chip and its attention kernel there; a chip it was never fitted on is refused
        (one-line error)."""
        fit = self.fits[0] if chip is None else self.fit_on(chip)
        if fit is None:
            fitted = ", ".join(c for f in self.fits for c in f.chips)
            raise UnfittedChipError(f"training stack {self.name!r} has no efficiency fitted on {chip!r} (fitted on: "
                                    f"{fitted}); give the framework efficiency explicitly (--framework-efficiency F, "
                                    "or the cluster's framework_efficiency)")
        return cluster.replace(stack=self.stack(fit))


STACKS: dict[str, StackProfile] = {
    profile.name: profile
    for profile in (
        StackProfile(
            name="megatron-lm", interleaved_schedule=True, pipeline_scatter_gather=True,
            plan_rules=MEGATRON_LM_RULES,
            fits=(ChipFit(("a100",), MEGATRON_A100_EFFICIENCY, "korthikanti22-175b-full",
                          attention_dropout_kernel=True, gemm_wave_sms=A100_SMS),
                  ChipFit(("h100", "h100-fp8"), MEGATRON_H100_EFFICIENCY, "mlperf31-gpt3-175b-fp8-768")),
            sources="NVIDIA/Megatron-LM (2021-22): interleaved 1F1B and scatter/gather, Narayanan et al. 2021 "
                    "(arXiv:2104.04473) §2.2.2 and §4.1; gradient all-reduce after the pipeline flush "
                    "(--overlap-grad-reduce only from Megatron-Core, 2023); efficiency: "
                    "phaze_env.cluster.MEGATRON_A100_EFFICIENCY on A100, MEGATRON_H100_EFFICIENCY on H100 "
                    "(NeMo's own GPT model in NVIDIA's MLPerf Training v3.1 GPT-3 submission)"),
        StackProfile(
            name="megatron-core", interleaved_schedule=True, pipeline_scatter_gather=True,
            plan_rules=MEGATRON_CORE_RULES, tp_comm_overlap=True, dp_comm_overlap=True, sequence_parallel_kernels=True,
            host_op_s=MEGATRON_CORE_HOST_OP_S, host_calibration="bridge2604-qwen3-30b-a3b-fp8",
            moe_probs_in_activation=True, main_grad_accumulation_bytes=MEGATRON_CORE_MAIN_GRAD_BYTES,
            fits=(ChipFit(("h100", "h100-fp8"), MEGATRON_CORE_H100_EFFICIENCY, "bridge2509-llama3-70b-fp8-64",
                          TE_FUSED_ATTENTION_H100_EFFICIENCY),),
            sources="NVIDIA/Megatron-LM's Megatron-Core as NeMo 25.x / Megatron-Bridge run it (scripts/performance "
                    "recipes): interleaved 1F1B with p2p overlap, sequence parallelism, the distributed optimizer, "
                    "Transformer Engine (FP8, cuDNN fused attention: TE_FUSED_ATTENTION_H100_EFFICIENCY), tensor-parallel "
                    "communication overlapped with its GEMMs by Transformer Engine's userbuffers (tp_comm_overlap: the "
                    "Llama 3 70B and 405B performance recipes enable it, NeMo's MegatronCommOverlapCallback / "
                    "Megatron-Bridge CommOverlapConfig with the userbuffers configs for H100), the data-parallel "
                    "reduce-scatter and all-gather per bucket under the backward and forward passes (dp_comm_overlap: "
                    "--overlap-grad-reduce / --overlap-param-gather, on in the same recipes), sequence parallelism's "
                    "norms, residual adds and FP8 casts on s/t tokens (sequence_parallel_kernels: Megatron-LM "
                    "megatron/training/arguments.py asserts 'Tensor parallel communication/GEMM overlap can happen only "
                    "when sequence parallelism is enabled'); kernels issued eagerly from the host, no CUDA graphs "
                    "(host_op_s: MEGATRON_CORE_HOST_OP_S); the MoE experts' grouped MLP multiplies the router's "
                    "probabilities into its activation, so the combine keeps no expert output (moe_probs_in_activation: "
                    "megatron/core/transformer/moe/experts.py: activation_func_with_probs at NVIDIA/Megatron-LM 1e057005, "
                    "May 2025, the Megatron-MoE-ModelZoo's commit; TEGroupedMLP's bias_act_func with permuted_probs at "
                    "d98e8a64dd; the "
                    "Megatron-Bridge releases validated here, 25.09 and later, ship Megatron-Core after it); each "
                    "microbatch's weight gradients accumulated into the bf16 main-gradient buffer "
                    "(main_grad_accumulation_bytes: MEGATRON_CORE_MAIN_GRAD_BYTES); efficiency: "
                    "MEGATRON_CORE_H100_EFFICIENCY"),
        StackProfile(
            name="megatron-deepspeed", interleaved_schedule=False, pipeline_scatter_gather=True,
            plan_rules=DEEPSPEED_PIPELINE_RULES,
            fits=(ChipFit(("a100",), MEGATRON_DEEPSPEED_A100_EFFICIENCY, "smith22-mtnlg-530b-280nodes"),),
            sources="microsoft/DeepSpeed deepspeed/runtime/pipe (PipelineEngine, TrainSchedule: plain 1F1B, no "
                    "interleaving; pipe_partitioned activations are sent 1/t per tensor rank and all-gathered; "
                    "ReduceGrads after the last backward); Smith et al. 2022 (MT-NLG, arXiv:2201.11990) §2.3: "
                    "DeepSpeed pipeline and data parallelism with Megatron-LM tensor slicing; efficiency: "
                    "MEGATRON_DEEPSPEED_A100_EFFICIENCY"),
        StackProfile(
            name="pytorch-fsdp", interleaved_schedule=False, pipeline_scatter_gather=False, unfused_elementwise=True,
            plan_rules=FSDP_RULES,
            hybrid_allreduce_exposure=PYTORCH_FSDP_HSDP_EXPOSURE, exposure_calibration="fms-fsdp-mar24-llama2-7b",
            fits=(ChipFit(("a100",), PYTORCH_FSDP_A100_EFFICIENCY, "fms-fsdp-mar24-llama2-34b",
                          FLASH_ATTENTION2_A100_EFFICIENCY),
                  ChipFit(("h100",), PYTORCH_FSDP_H100_EFFICIENCY, "fms-fsdp-mar24-llama2-34b-h100",
                          FLASH_ATTENTION2_H100_EFFICIENCY)),
            sources="pytorch/pytorch torch/distributed/fsdp (FullyShardedDataParallel: FULL_SHARD and HYBRID_SHARD, "
                    "reshard_after_forward, BACKWARD_PRE prefetch, limit_all_gathers; post-backward reduce-scatter then "
                    "the replicas' all-reduce under HYBRID_SHARD); Zhao et al. 2023 (PyTorch FSDP, VLDB, "
                    "arXiv:2304.11277) §3-4: per-unit all-gather and reduce-scatter overlapped with compute by "
                    "prefetching; foundation-model-stack/fms-fsdp main_training.py, fms_fsdp/policies (one unit per "
                    "block, bf16 mixed precision, block-level activation checkpointing; fms_fsdp/config/training.py "
                    "use_torch_compile = False at the benchmark commits: eager kernels, unfused_elementwise); no "
                    "pipeline (p = 1: the structural pipeline fields are off); SDPA's FlashAttention-2 (causal): "
                    "FLASH_ATTENTION2_A100_EFFICIENCY, FLASH_ATTENTION2_H100_EFFICIENCY; efficiency: "
                    "PYTORCH_FSDP_A100_EFFICIENCY on A100, PYTORCH_FSDP_H100_EFFICIENCY on H100; HSDP all-reduce exposure: "
                    "PYTORCH_FSDP_HSDP_EXPOSURE"),
        StackProfile(
            name="jax-xla", interleaved_schedule=False, pipeline_scatter_gather=False, hybrid_allreduce_overlapped=False,
            plan_rules=MAXTEXT_RULES,
            fits=(ChipFit(("tpuv4",), JAX_XLA_TPUV4_EFFICIENCY, "maxtext-22b-1xv4-128"),),
            sources="AI-Hypercomputer/maxtext at commit d3f68fe2c (2023): MaxText/train.py (one pjit train step, no "
                    "pipeline parallelism, so neither pipeline option applies; no gradient accumulation), "
                    "MaxText/configs/*v4*.sh (FSDP over each slice's chips, ici_fsdp_parallelism, with "
                    "--xla_enable_async_all_gather=true: each layer's weight all-gather overlaps compute, as the "
                    "placement's ZeRO-3 prices it; data parallelism across slices over the data-centre network, "
                    "dcn_data_parallelism: hybrid sharding, one shard group per slice); the gradient shards' "
                    "all-reduce across slices once after the backward pass, not overlapped "
                    "(hybrid_allreduce_overlapped=False): Chowdhery et al. 2022 (PaLM, arXiv:2204.02311) §4 on the same "
                    "TPU v4 + JAX stack, the cross-pod gradient transfer 'does not start until each core finishes "
                    "computing the gradients'; overlapped per layer instead (as PyTorch's HYBRID_SHARD), the model "
                    "predicts no per-chip loss from 1 to 8 slices where MaxText published 6.2 % (docs/validation.md); "
                    "efficiency: JAX_XLA_TPUV4_EFFICIENCY"),
        StackProfile(
            name="llm-foundry", interleaved_schedule=False, pipeline_scatter_gather=False,
            plan_rules=FSDP_RULES,
            fits=(ChipFit(("a100",), LLM_FOUNDRY_A100_EFFICIENCY, "llm-foundry-mpt-7b-s4096",
                          FLASH_ATTENTION2_A100_EFFICIENCY),
                  ChipFit(("h100",), LLM_FOUNDRY_H100_EFFICIENCY, "llm-foundry-mpt-7b-s4096",
                          FLASH_ATTENTION2_H100_EFFICIENCY)),
            sources="mosaicml/llm-foundry (Composer trainer, PyTorch FSDP FULL_SHARD, no pipeline; MPT models with "
                    "FlashAttention-class causal attention, attn_impl 'triton' or 'flash' in its benchmark script "
                    "scripts/train/benchmarking/submit_benchmarks.py); its benchmark README's A100 and H100 tables; "
                    "efficiencies: LLM_FOUNDRY_A100_EFFICIENCY, LLM_FOUNDRY_H100_EFFICIENCY; attention kernel: "
                    "FLASH_ATTENTION2_A100_EFFICIENCY, FLASH_ATTENTION2_H100_EFFICIENCY"),
    )
}


MEGATRON_LM_2021_A100_EFFICIENCY = 0.825
"""Achieved fraction of the a100 preset's per-operator speed in Megatron-LM training *as released for Narayanan et al.
2021* (SC'21, arXiv:2104.04473: the runs of its Table 1 and Table 2 on NVIDIA's Selene, DGX A100), *fitted to one
published measurement*: its Table 2 GPT-3 175B row on 384 A100 (TP 8, PP 12, batch 1,536, 153 TFLOP/s per GPU;
``experiments.validation_cases``: ``narayanan21-table2-175b-384``; the fit, 0.8248, is
``experiments.validation_fit.fit_efficiency``),
with the same structure, GEMM wave quantisation and attention-dropout kernel as the 2022 release's fit
(:data:`~phaze_env.cluster.MEGATRON_A100_EFFICIENCY`). Chosen as the 2021 run of the 2022 calibration's model at the
series' smallest scale (the least data-parallel synchronisation); held out on the rest of Table 2 (175B on 768 and
1,536 GPUs, 530B on 560, 1,120 and 2,240) and the ten rows of Table 1 (1.7B–1T). Why a fit of its own: at the 2022
fit every 2021 run comes out 3–13 % fast, the same model on the same chips and cluster a year earlier (Korthikanti et
al. 2022 report the 2022 code's 175B full-recompute step at 18.13 s per batch of 64 on 64 GPUs, i.e. faster per GPU
than any 2021 row of that model); with one efficiency for both releases, the size dependence that GEMM wave
quantisation explains in the 2022 rows is masked in the 2021 ones (``experiments.table5_scaling``). What the
release's difference stands for (kernels, fusions, the PyTorch and NCCL of the NGC container of the day) is not
measured separately: the papers do not name their code versions."""


def _dispatch_variant(parent: StackProfile, name: str, sources: str, **knobs) -> StackProfile:
    """``parent`` with another expert dispatch or expert grid (``knobs``: ``moe_dispatch``, ``moe_node_limit``,
    ``moe_alltoall_overlap``, ``folded_experts``): the same structure otherwise and the same fits — nothing refitted,
    the calibration stays the parent's run."""
    return replace(parent, name=name, sources=f"{parent.name}'s structure and fits; {sources}", variant_of=parent.name,
                   **knobs)


STACKS["megatron-lm-2021"] = replace(
    STACKS["megatron-lm"], name="megatron-lm-2021",
    fits=(ChipFit(("a100",), MEGATRON_LM_2021_A100_EFFICIENCY, "narayanan21-table2-175b-384",
                  attention_dropout_kernel=True, gemm_wave_sms=A100_SMS),),
    sources="NVIDIA/Megatron-LM as released for Narayanan et al. 2021 (arXiv:2104.04473; examples/sc21): megatron-lm's "
            "structure (interleaved 1F1B, scatter/gather, gradient all-reduce after the pipeline flush), its own A100 "
            "efficiency: MEGATRON_LM_2021_A100_EFFICIENCY")
STACKS = {name: STACKS[name] for name in ("megatron-lm", "megatron-lm-2021", *(n for n in STACKS if n not in
                                                                              ("megatron-lm", "megatron-lm-2021")))}
STACKS["megatron-core-deepep"] = _dispatch_variant(
    STACKS["megatron-core"], "megatron-core-deepep", moe_dispatch="hierarchical",
    sources="Megatron-Core's flex token dispatcher (--moe-token-dispatcher-type flex with the deepep or hybridep "
            "backend; NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py, MoEFlexTokenDispatcher): each "
            "token crosses InfiniBand once per destination node and is fanned out over NVLink (deepseek-ai/DeepEP; "
            "phaze_env.moe_dispatch); the all-to-all not overlapped (Megatron-Bridge's Qwen3-30B-A3B H100 FP8 V1 recipe, "
            "scripts/performance/configs/qwen/qwen3_workload_base_configs.py at 5f3b336f9: "
            "moe_flex_dispatcher_backend='hybridep', moe_a2a_overlap=False)")
MEGATRON_CORE_DEEPEP_SM_SHARE = 20 / 132
"""Share of the H100's 132 SMs that Megatron-Core's DeepEP kernels hold: ``moe_deepep_num_sms`` "Number of SMs to use
for DeepEP", default 20 (NVIDIA/Megatron-LM ``megatron/core/transformer/transformer_config.py``, ``--moe-deepep-num-sms``;
deepseek-ai/DeepEP's ``Buffer.num_sms`` likewise defaults to 20). Overlapped with another microbatch's compute
(``moe_alltoall_overlap``), that computation runs on the other 112 meanwhile (``Stack.moe_comm_sm_share``); not
overlapped, the kernels run between the computations and take nothing from them."""
STACKS["megatron-core-deepep-a2a-overlap"] = _dispatch_variant(
    STACKS["megatron-core"], "megatron-core-deepep-a2a-overlap", moe_dispatch="hierarchical",
    moe_alltoall_overlap=True, moe_comm_sm_share=MEGATRON_CORE_DEEPEP_SM_SHARE,
    sources="the flex dispatcher as megatron-core-deepep, with the dispatch and combine of one microbatch under another's "
            "compute (Megatron-Core's --overlap-moe-expert-parallel-comm with --delay-wgrad-compute; Megatron-Bridge "
            "at tag v0.3.0, the 26.02 release's Qwen3-30B-A3B H100 FP8 plan: moe_a2a_overlap=True, "
            "moe_flex_dispatcher_backend='deepep', scripts/performance/utils/overrides.py), its DeepEP kernels holding "
            "MEGATRON_CORE_DEEPEP_SM_SHARE of the SMs meanwhile")


FOLDED_EXPERTS_SOURCE = ("with its expert grid folded over the t·c·d ranks at expert tensor parallelism 1 (Megatron-Core's "
                         "MoE parallel folding, --expert-tensor-parallel-size 1: Liu et al. 2025, arXiv:2504.14960; "
                         "yanring/Megatron-MoE-ModelZoo model_configs/benchmarking/Qwen3-235B-A22B.yaml at 1ed4179f7)")
for _parent in ("megatron-core", "megatron-core-deepep", "megatron-core-deepep-a2a-overlap"):
    STACKS[f"{_parent}-folded"] = _dispatch_variant(STACKS[_parent], f"{_parent}-folded", folded_experts=True,
                                                    sources=FOLDED_EXPERTS_SOURCE)
    STACKS[f"{_parent}-folded"] = replace(STACKS[f"{_parent}-folded"], variant_of=STACKS[_parent].variant_of or _parent)


DEEPSEEK_COMM_SM_SHARE = 20 / 132
"""Share of the H800's 132 SMs that DeepSeek-V3's training holds for the overlapped all-to-all: "only 20 SMs are
sufficient to fully utilize the bandwidths of IB and NVLink" (arXiv:2412.19437 §3.2.2, "Efficient Implementation of
Cross-Node All-to-All Communication"); the computation runs on the other 112 meanwhile."""
DEEPSEEK_PIPELINE_RULES = PlanRules(uniform_stages=False, zero_stages=(0, 1), whole_microbatches=True,
                                    stack="deepseek-hai-llm")
"""DeepSeek-V3's HAI-LLM (arXiv:2412.19437 §3.2): 16-way pipeline over 61 layers (so not ``L/p`` per stage), ZeRO-1
data parallelism, whole microbatches."""

STACKS["deepseek-hai-llm"] = replace(
    _dispatch_variant(
        STACKS["megatron-core"], "deepseek-hai-llm", moe_dispatch="hierarchical", moe_node_limit=4,
        moe_alltoall_overlap=True, moe_comm_sm_share=DEEPSEEK_COMM_SM_SHARE,
        sources="DeepSeek-V3's own framework HAI-LLM as arXiv:2412.19437 §3.2 describes it: node-limited routing to at "
                "most M = 4 nodes (§2.1.2), each token over IB once per node and NVLink inside it (§3.2.2), DualPipe's "
                "paired forward and backward chunks hiding the all-to-all (§3.2.1) with DEEPSEEK_COMM_SM_SHARE of the SMs "
                "on communication, DualPipe's bidirectional pipeline with its bubble, weights and in-flight activations as "
                "Table 2 gives them (pipeline_schedule), RMSNorm and the MLA up-projections recomputed in the backward pass "
                "(§3.2.3, recompute_norms_up_projections), stages of uneven layer counts (DEEPSEEK_PIPELINE_RULES); kernels and efficiency: "
                "megatron-core's H100 fit with its fused attention (a 2024 stack training MLA at 4K in FP8 runs a "
                "flash-class attention kernel; which one is not published), assumed (HAI-LLM has no other published "
                "run to fit to; the H800 is the H100's die)"),
    plan_rules=DEEPSEEK_PIPELINE_RULES, interleaved_schedule=False,
    # DualPipe (arXiv:2412.19437 §3.2.1, Table 2): bubble (PP/2 − 1)(F&B + B − 3W) against 1F1B's (PP − 1)(F + B),
    # parameters 2× and PP + 1 microbatches of activations per device, no interleaving
    pipeline_schedule="dualpipe",
    # §3.2.3: "We recompute all RMSNorm operations and MLA up-projections during back-propagation"
    recompute_norms_up_projections=True,
    # HAI-LLM's combine is not published: the traced one (out × routing weights) keeps the experts' outputs
    moe_probs_in_activation=False,
    dp_comm_overlap=False,
    host_op_s=0.0, host_calibration="")  # HAI-LLM's host path (CUDA graphs or not) is not published; megatron-core's host fit is not carried
# to it  # HAI-LLM's data-parallel overlap is not published (arXiv:2412.19437 §3.2 describes DualPipe's
# overlap of the expert all-to-all and pipeline sends only): its gradient collectives stay priced after the flush


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


# --- the stack the system space runs on every chip ----------------------------------------------------------------

@dataclass(frozen=True)
class SystemStack:
    """A training stack as the system space runs it on *every* chip — each searched design and each reference (TPUv4,
    A100, H100) alike, so a verdict compares chips, not software:

    * ``structure``: the profile whose structural fields the clusters take (:meth:`StackProfile.structure`), with
      ``plan_rules`` (which plans it runs) — e.g. ``STACKS["megatron-core"]``; only its structure: its own fits (on the
      validation's presets, with their own GEMM efficiencies) are not this stack's;
    * ``plan``: the plan freedom every evaluation searches, in the plan notation (:class:`PlanSpec`);
    * ``fits``: its framework efficiency per reference chip, *fitted through the system table's own path* — the chip at
      :data:`~phaze_env.hardware.system.SYSTEM_GEMM_EFFICIENCY`, in its family's reference cluster
      (:func:`~phaze_env.cluster.reference_cluster`) — to one published run on that chip
      (``python -m experiments.rival_runs --fit``); its other published runs are held out (``experiments.rival_runs``).

    A searched chip has no published run, hence no fitted efficiency. The rule (:meth:`design_fit`): it takes the
    efficiency fitted on the chip its cores come from — the system space's base preset, whose tensor and vector cores,
    buffer organisation and clock every design copies (TPUv4's by default) — and, when the stack has no fit on that
    preset, the fit on the stack's first chip; ``search.phaze`` prints which (:meth:`design_note`)."""

    name: str
    structure: StackProfile
    plan: str
    fits: tuple[ChipFit, ...]
    sources: str
    design_efficiency: float | None = None
    """The searched chips' framework efficiency when set (a sensitivity study's move,
    :data:`phaze_env.assumptions.ASSUMPTIONS`); ``None``: :meth:`design_fit`'s rule."""
    design_attention_efficiency: float | None = None
    """The searched chips' fused attention rate when set (a sensitivity study's move); ``None``: the fit's
    (:meth:`design_fit`: TPU v4's, :data:`TPU_FLASH_ATTENTION_EFFICIENCY`)."""

    def __post_init__(self) -> None:
        if not self.fits:
            raise ValueError(f"system stack {self.name!r} needs an efficiency fitted on at least one chip")
        PlanSpec.parse(self.plan)  # a bad notation fails here, at import, not in a search

    def plan_spec(self, recompute_allowed: bool = True) -> PlanSpec:
        """The plan freedom; without ``recompute_allowed`` (a design's recompute knob off, ``--no-recompute``) full
        recompute is dropped from its modes (the stack's fused attention, priced as selective recompute, stays)."""
        spec = PlanSpec.parse(self.plan)
        if recompute_allowed:
            return spec
        modes = [mode for mode in spec.recompute_modes if mode != "full"] or ["none"]
        return replace(spec, recompute="|".join(modes))

    def fit_on(self, chip: str) -> ChipFit | None:
        chip = chip.strip().lower()
        return next((fit for fit in self.fits if chip in fit.chips), None)

    def rival_fit(self, chip: str) -> tuple[ChipFit | None, str]:
        """The fit rival chip ``chip`` runs at and the chip it was fitted on: its own, else the one
        :data:`CARRIED_FITS` carries to it (a 2024–25 flagship with no published run through this path)."""
        key = chip.strip().lower()
        own = self.fit_on(key)
        if own is not None or key not in CARRIED_FITS:
            return own, key
        return self.fit_on(CARRIED_FITS[key]), CARRIED_FITS[key]

    def training(self, base: Cluster, chip: str) -> Cluster:
        """``base`` (its global batch and optimizer) running this stack on reference chip ``chip``: the structure, the
        plan rules and the efficiency fitted on that chip, or carried to it (:meth:`rival_fit`; a chip with neither is
        refused: :class:`UnfittedChipError`)."""
        fit, _ = self.rival_fit(chip)
        if fit is None:
            fitted = ", ".join(c for f in self.fits for c in f.chips)
            raise UnfittedChipError(f"system stack {self.name!r} has no efficiency fitted on {chip!r} (fitted on: "
                                    f"{fitted})")
        return base.replace(stack=self.structure.stack(fit))

    def design_fit(self, template: Accelerator) -> tuple[ChipFit, str]:
        """The fit a searched chip built from ``template`` (the system space's base) takes, and the preset whose fit it
        is (the class docstring's rule)."""
        names = [name for name, (preset, _) in PRESETS.items() if preset == template]
        for name in names:
            if (fit := self.fit_on(name)) is not None:
                return fit, name
        return self.fits[0], self.fits[0].chips[0]

    def design_training(self, base: Cluster, template: Accelerator) -> Cluster:
        """``base`` running this stack on a searched chip built from ``template`` (:meth:`design_fit`, or
        :attr:`design_efficiency` and :attr:`design_attention_efficiency` when set)."""
        training = self.training(base, self.design_fit(template)[1])
        if self.design_attention_efficiency is not None:
            training = training.replace(attention_efficiency=self.design_attention_efficiency)
        if self.design_efficiency is None:
            return training
        return replace(training, framework_efficiency=self.design_efficiency)

    def design_note(self, template: Accelerator) -> str:
        """One line for a search's output: the efficiency the searched chips run at and why."""
        fit, chip = self.design_fit(template)
        copied = any(preset == template and self.fit_on(name) for name, (preset, _) in PRESETS.items())
        why = (f"the fit on {chip}, whose cores the designs are built from" if copied else
               f"the fit on {chip}, the stack's first chip: it has none on the designs' base chip")
        return (f"training stack {self.name}: plan space {self.plan_spec()}; framework efficiency "
                f"{fit.framework_efficiency:g} for the searched chips (no published run: {why}), "
                + ", ".join(f"{f.chips[0]} {f.framework_efficiency:g}" for f in self.fits) + " for the references")

    def to_dict(self) -> dict:
        return {"name": self.name, "plan": self.plan,
                "fits": {fit.chips[0]: fit.framework_efficiency for fit in self.fits}}


CARRIED_FITS = {"b200": "h100", "b200-fp8": "h100", "gb200": "h100", "mi300x": "h100", "tpuv5p": "tpuv4"}
"""The 2024–25 flagships (rivals "against the best you can buy", ``hardware.system.FLAGSHIP_TOPOLOGIES``) have no
published run fitted through the system table's path, so each runs at the fit of the chip its software stack and
silicon descend from. *Assumption*, stated with the table: Blackwell and MI300X at the H100's Megatron-Core fit (the
same stack; MI300X through ROCm's Megatron port), TPU v5p at TPU v4's MaxText fit (the same JAX/XLA stack and MXU
design). Range ±15 % of the carried value (assumption: no published run of these chips is checked here; a younger
software stack, as ROCm's or Blackwell's first year, sits at the low end)."""

SYSTEM_MEGATRON_CORE_RULES = replace(MEGATRON_CORE_RULES, whole_microbatches=False)
"""Megatron-Core's plan rules as the system space applies them: Megatron-LM's uniform stages, interleaving and ZeRO-0/1,
but a data-parallel degree whose ``d·m`` does not divide the global batch is allowed, each replica's last microbatch
padded and the idle slots counted as time (PHAZE's rule, :func:`~phaze_env.placement.inputs.uneven_batch_note`).
Megatron's microbatch calculator refuses such a split; a deployment picks a batch its replicas divide instead. The
system table fixes one global batch (4,096) for systems whose budgets buy any chip count, so with the whole-microbatch
rule a system of, e.g., 700 chips could use only 512 of them (``d`` a power of two) and the verdict would rank chip counts
by their powers of two; with padding it uses them all and pays for the uneven split in idle slots. *Assumption* of the
system table, the same for every design and reference; the rival runs (``experiments.rival_runs``) divide their batch."""

MEGATRON_CORE_SYSTEM_H100_EFFICIENCY = 0.7616
"""Megatron-Core's framework efficiency on H100 *through the system table's path* (the h100 chip at
SYSTEM_GEMM_EFFICIENCY in the dgx-h100 reference cluster), fitted to NVIDIA's DGX Cloud GPT-3 175B bf16 run on 512
H100 (``dgxc-gpt3-175b-bf16-512``, its plan pinned, under this stack's structure: TP communication overlapped with its
GEMMs, sequence parallelism's norms and residual adds on ``s/t`` tokens, the data-parallel collectives overlapped with
the passes, :data:`SYSTEM_DP_COMM_OVERLAP`, and Transformer Engine's fused attention at
:data:`TE_FUSED_ATTENTION_H100_EFFICIENCY`, which the run used: NeMo 24.05 with ``mcore_gpt``):
and each microbatch's weight-gradient accumulation, :data:`SYSTEM_MAIN_GRAD_ACCUMULATION_BYTES`):
``python -m experiments.rival_runs --fit`` gives 0.7616 (0.7000 with the fused kernel and no accumulation; 0.7945
before either, 2026-12-07: the eager attention it priced instead was slower, so the factor was higher, and at 8,192
tokens it put NVIDIA's Llama 3.1 runs 16–52 % slow, docs/rival_runs.md; 0.8230 before
the data-parallel overlap hid part of that run's gradient reduce-scatter and weight all-gather; 0.8505 before the stack
ran SP's kernels on ``s/t`` tokens, :data:`SYSTEM_SEQUENCE_PARALLEL_KERNELS`: the same run priced with less exposed
work needs a lower factor). Held out: the recipe's other four bf16 scales and its five FP8 runs
(``experiments.rival_runs``, docs/rival_runs.md; the FP8 run on 2,048 GPUs is +12.5 %, the weak-scaling gap the
validation has on the same rows). Below the validation's ``megatron-core`` fit on the same run (0.8108,
``python -m experiments.h100_profiles --calibrate dgxc-gpt3-175b-bf16-512``: the h100 preset with the same overlaps,
fused attention and weight-gradient accumulation) because the
table's H100 runs its GEMMs at SYSTEM_GEMM_EFFICIENCY (0.859), not its own measured 0.801 — the same run, on a faster
chip model, needs a lower factor."""
MEGATRON_CORE_SYSTEM_A100_EFFICIENCY = 0.735
"""Megatron-LM's efficiency on A100 through the system table's path (dgx-a100 reference cluster), fitted to
Korthikanti et al. 2022 Table 5, GPT 175B with full recompute on 64 A100 (``korthikanti22-175b-full``); held out: its
selective-recompute row and Narayanan et al. 2021 Table 2's 175B rows on 384, 768 and 1,536 A100 (153, 149 and 141
TFLOP/s per GPU, i.e. 45–49 % of the bf16 peak). The fit (``python -m experiments.rival_runs --fit``), 0.7350 with
each microbatch's weight-gradient accumulation priced (:data:`SYSTEM_MAIN_GRAD_ACCUMULATION_BYTES`; 0.7124 without it,
0.7172 before full recompute stopped rerunning the LM head, which Megatron-Core's checkpoint does not wrap), is below the validation's
:data:`~phaze_env.cluster.MEGATRON_A100_EFFICIENCY` (0.807; the same chip model and cluster) because this stack overlaps
its TP communication with the GEMMs, which the 2022 code did not: the factor absorbs it (it is this stack's figure on
the A100, calibrated so the published run is reproduced, not a claim that the 2022 code overlapped). The 2022 runs
attended with Megatron-LM's eager kernels (its fused softmax; FlashAttention came later), so they are fitted and checked
with the traced eager attention they ran (``experiments.rival_runs.published_attention``); the table's A100 runs
FlashAttention-2 (:data:`FLASH_ATTENTION2_A100_EFFICIENCY`) at this factor."""
MEGATRON_CORE_SYSTEM_TPUV4_EFFICIENCY = 0.946
"""The efficiency of TPU v4's production stack (JAX/XLA, MaxText) through the system table's path (the tpuv4 chip at
SYSTEM_GEMM_EFFICIENCY instead of the preset's 1, in the torus the table builds: ICI at NCCL_EFFICIENCY), fitted to
MaxText's 22B run on one v4-128 slice (``maxtext-22b-1xv4-128``, its published FSDP plan under the jax-xla structure);
held out: the 52B run on one v4-384 slice. The fit (``python -m experiments.rival_runs --fit``), 0.9462 (0.9484 with
the LM head rematerialised too), is above the validation's :data:`JAX_XLA_TPUV4_EFFICIENCY`
(0.818) because the table's TPU v4 runs its MXUs at 0.859 of their nominal rate, where the validation's preset runs them
at 1 (0.818 / 0.859 ≈ 0.95: the product, what the run reaches, is the same). *Assumption*: no Megatron-style stack has published TPU v4 runs, so the
efficiency of the stack that does is carried to the system stack's plan freedom on that chip (the same silicon, its
kernels compiled by XLA either way); PaLM 540B (46.2 % MFU) cannot be checked: its 2-D weight sharding is not a plan of
this model (``experiments.validation_cases.NEEDS_2D_SHARDING``). The 2023 runs attended with XLA's dot-product
attention (scores written out, :data:`TPU_FLASH_ATTENTION_EFFICIENCY`) and are fitted and checked with it; the table's TPU
v4, and the searched chips at this factor, run a fused kernel at :data:`TPU_FLASH_ATTENTION_EFFICIENCY`."""

SYSTEM_DP_COMM_OVERLAP = True
"""Whether the system space's megatron-core stack overlaps its data-parallel collectives with the passes
(``Stack.dp_comm_overlap``, as the validation profile ``STACKS["megatron-core"]`` does): on, as Megatron-Core runs with
``--overlap-grad-reduce`` and ``--overlap-param-gather`` (the gradient reduce-scatter under the backward, bucket by bucket
as it fills, the updated weights' all-gather under the next forward; per model chunk when interleaved,
:mod:`phaze_env.placement.dp_overlap`), for every system design and every reference alike. The H100 fit was redone
with it (:data:`MEGATRON_CORE_SYSTEM_H100_EFFICIENCY`, 0.823 -> 0.7945: its calibration run hides part of its sync);
A100's and TPU v4's calibration runs are unchanged by it (0.7124, 0.9462).

* exactness: the DP on lower-bound latencies prices the exposure at its floor (``Settings.unbounded_overlap_cover``:
  every stage leaves its dense buffer's last bucket) and, at least, the floor a pace gives (a stage hides its
  collectives under no more than the slowest stage's time, and the interleaved chunks' backlog grows as the passes
  shrink: :meth:`~phaze_env.placement.prices.Prices.overlap_pace_floor_s`), and stays a proven bound
  (``tests/test_bound_property.py`` against the DP on slower layers, ``tests/test_bounds_hold.py``);
* speed: the system searches run within minutes with it on (bert-large at 1 MW 109.4 s cold on one worker, 18
  evaluations; docs/changelog.md, session 46).

Turned on at session 46: the table's rows were searched again with it, each row's sensitivity cases from before say so
(``experiments.system_table``: the cases computed by an earlier code are counted as such) until renewed."""

SYSTEM_SEQUENCE_PARALLEL_KERNELS = True
"""Whether the system space's megatron-core stack prices sequence parallelism's norms, residual adds and FP8 casts on
``s/t`` tokens (``Stack.sequence_parallel_kernels``, as the validation profile ``STACKS["megatron-core"]`` does since
issue 28): on, as Megatron-Core with Transformer Engine runs them (its TP communication overlap requires sequence
parallelism). The system fits were refitted with it (``python -m experiments.rival_runs --fit``, 2026-12-05): H100
0.8505 -> 0.8230 (its calibration run is TP 4 with sequence parallelism); A100 and TPU v4 unchanged (0.7124, 0.9462:
Korthikanti et al.'s full-recompute row ran without sequence parallelism and is priced as it ran, MaxText's run has no
tensor parallelism)."""

SYSTEM_HOST_OP_S = 0.0
"""The system space's megatron-core stack prices no host issue time (``Stack.host_op_s`` 0, where the validation
profile ``STACKS["megatron-core"]`` has :data:`MEGATRON_CORE_HOST_OP_S`): its fits (``python -m experiments.rival_runs
--fit``) were made without it, on dense runs whose layers are device-bound, and a searched chip's host is not a
knob of the space. A known limitation, the same for every design and reference: a fast searched chip running a
fine-grained MoE model would be held back by the host, which the table does not charge."""

SYSTEM_MAIN_GRAD_ACCUMULATION_BYTES = MEGATRON_CORE_MAIN_GRAD_BYTES
"""The system space's megatron-core stack prices each microbatch's weight-gradient accumulation into the bf16
main-gradient buffer (``Stack.main_grad_accumulation_bytes``, as the validation profile ``STACKS["megatron-core"]``
does: :data:`MEGATRON_CORE_MAIN_GRAD_BYTES`, its sources there), on every design and reference alike: the
accumulation costs a chip in proportion to its HBM bandwidth against its compute, so leaving it out flattered a design
with little bandwidth per FLOP most. Turned on 2026-12-07 together with the fused attention kernel on every chip
(:class:`SystemStack`'s fits), the fits redone (``python -m experiments.rival_runs --fit``): H100 0.7945 (eager
attention, no accumulation) → 0.7000 (fused only) → 0.7616 (both), A100 0.7124 → 0.7350, TPU v4 0.9462 unchanged
(MaxText's calibration run accumulates nothing: one microbatch). With the fused kernel alone the H100 FP8 rivals came
out +12 … +19 % (the lower factor sped up their FP8 GEMMs with the bf16 attention); with the accumulation, which is a
larger share of an FP8 step, +6 … +12.5 % (docs/rival_runs.md)."""

SYSTEM_STACKS: dict[str, SystemStack] = {
    stack.name: stack
    for stack in (
        SystemStack(
            name="megatron-core",
            structure=replace(STACKS["megatron-core"], plan_rules=SYSTEM_MEGATRON_CORE_RULES,
                              dp_comm_overlap=SYSTEM_DP_COMM_OVERLAP, host_op_s=SYSTEM_HOST_OP_S,
                              sequence_parallel_kernels=SYSTEM_SEQUENCE_PARALLEL_KERNELS,
                              main_grad_accumulation_bytes=SYSTEM_MAIN_GRAD_ACCUMULATION_BYTES),
            plan="+v=auto+sp=auto+zero1+rc=selective|full",
            fits=(ChipFit(("tpuv4",), MEGATRON_CORE_SYSTEM_TPUV4_EFFICIENCY, "maxtext-22b-1xv4-128",
                          TPU_FLASH_ATTENTION_EFFICIENCY),
                  ChipFit(("a100",), MEGATRON_CORE_SYSTEM_A100_EFFICIENCY, "korthikanti22-175b-full",
                          FLASH_ATTENTION2_A100_EFFICIENCY),
                  ChipFit(("h100", "h100-fp8"), MEGATRON_CORE_SYSTEM_H100_EFFICIENCY, "dgxc-gpt3-175b-bf16-512",
                          TE_FUSED_ATTENTION_H100_EFFICIENCY)),
            sources="NVIDIA/Megatron-LM megatron/core (2024-25): interleaved 1F1B (--num-layers-per-virtual-pipeline-"
                    "stage, v searched; at any m_r >= p microbatches per replica, --microbatch-group-size-per-virtual-"
                    "pipeline-stage: PlanRules.microbatch_groups), sequence parallelism (--sequence-parallel, on with t > 1), the distributed "
                    "optimizer (--use-distributed-optimizer: ZeRO-1), a fused causal attention kernel on every chip at its "
                    "cited rate (ChipFit.attention_efficiency: Transformer Engine's on H100, FlashAttention-2 on A100, "
                    "Pallas flash attention on TPU v4 and the searched chips, TPU_FLASH_ATTENTION_EFFICIENCY; no s×s "
                    "scores kept, recomputed in its backward, phaze_env.attention) and optional full recompute (--recompute-granularity full); pipeline sends scattered over "
                    "the tensor ranks (Narayanan et al. 2021 §4.1); plan rules: SYSTEM_MEGATRON_CORE_RULES; efficiency per "
                    "chip: MEGATRON_CORE_SYSTEM_*_EFFICIENCY; data-parallel collectives overlapped with the passes "
                    "(--overlap-grad-reduce, --overlap-param-gather: SYSTEM_DP_COMM_OVERLAP)"),
    )
}
DEFAULT_SYSTEM_STACK = "megatron-core"
"""The stack ``search.phaze --space system`` and the system space's faces run unless told otherwise (``--stack``)."""
PHAZE_STACK = "phaze"
"""``--stack phaze``: no stack — PHAZE's plan space (t, p, d, microbatch, none|full recompute), eager attention and the
base cluster's framework efficiency (1) on every chip (the system table before issue 29)."""


def system_stack_names() -> list[str]:
    return [*SYSTEM_STACKS, PHAZE_STACK]


def get_system_stack(name: str | None) -> SystemStack | None:
    """The system stack called ``name`` (``None`` or ``"phaze"``: no stack, PHAZE's); a one-line error otherwise."""
    if name is None or str(name).strip().lower() == PHAZE_STACK:
        return None
    key = str(name).strip().lower()
    if key not in SYSTEM_STACKS:
        close = difflib.get_close_matches(key, system_stack_names(), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise UnknownStackError(f"unknown system training stack {name!r}.{hint} Known: {', '.join(system_stack_names())}")
    return SYSTEM_STACKS[key]



__all__ = ["CARRIED_FITS", "DEFAULT_SYSTEM_STACK", "PHAZE_STACK", "SYSTEM_STACKS", "SystemStack", "get_system_stack", "system_stack_names",
           "STACKS", "ChipFit", "StackProfile", "UnfittedChipError", "UnknownStackError", "get_stack", "stack_names"]
