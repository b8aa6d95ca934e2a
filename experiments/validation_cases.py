"""Published large-model training runs to validate the performance model against (data only).

Each :class:`ValidationCase` is one measured run as its authors published it: the workload (a name in
:mod:`phaze_env.workloads.registry`), the hardware (accelerator preset and cluster preset names), the
plan (tensor × pipeline × data degrees, microbatch, interleaving, sequence parallelism, recompute) and
the measured figure with its metric. ``experiments.validate`` predicts each case and reports the error.

How each metric was computed by its authors (a prediction must use the same convention):

* ``tflops_per_device`` (Narayanan et al. 2021, Table 1) — *achieved* teraFLOP/s per GPU counting
  the recomputed forward pass (all Table 1 runs use full activation recomputation), with the paper's
  §5.1 formula for the FLOPs of one batch ``F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))`` (B batch,
  s sequence, l layers, h hidden, V vocabulary), divided by the iteration time and the GPU count.
* ``mfu`` (Korthikanti et al. 2022; Chowdhery et al. 2022) — model FLOPs utilisation: model FLOPs
  *without* recomputation per second, over the devices' peak (A100 bf16 312 TFLOP/s; TPUv4 275
  TFLOP/s). Korthikanti §6: model FLOPs per batch ``72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))``;
  Chowdhery Appendix B: ``6·N + 12·L·H·Q·T`` per token (N parameters, L layers, H heads, Q head size,
  T sequence length).
* ``mfu_6n`` (MaxText's README) — MFU with ``6·N`` model FLOPs per token (N every parameter, the shared embedding
  once; no attention term): MaxText's ``train.py`` logs ``6 · num_model_parameters · max_target_length ·
  per_device_batch_size`` FLOPs per device and step, over the step time and TPU v4's 275 TFLOP/s peak.
* ``samples_s`` — sequences per second: global batch over the published iteration time.
* ``tokens_s_per_device`` — tokens per second per GPU: global batch × sequence over the iteration time and
  the GPU count.
* ``mcore_tflops_per_device`` (Megatron-Core's MoE runs) — model teraFLOP/s per GPU as Megatron-LM's
  ``num_floating_point_operations`` counts them (active experts only, no recompute; the MCore v0.8 formula,
  ``experiments.validation_fit.megatron_core_flops``). Only the MoE cases (:data:`MOE_CASES`) use it.
* ``mcore_causal_tflops_per_device`` — the same from Megatron-LM's count since March 2025 (MR !2789): the attention
  scores counted causal, half the square (the Megatron-MoE-ModelZoo's Qwen3-235B-A22B runs of May 2025).

Cases with a ``requires`` note (:data:`PENDING_CASES`) are published runs
the model cannot express yet; ``experiments.validate`` lists them with that note instead of predicting them.

Every case names its training ``stack`` (a profile of :mod:`phaze_env.stacks`); the case a profile's
efficiency is fitted to is that profile's ``calibration``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal

from phaze_env.cluster import Stack
from phaze_env.hardware.number_format import NUMBER_FORMATS
from phaze_env.plan_spec import PlanRules
from phaze_env.stacks import FITTED_FIELDS
from phaze_env.workloads import Workload, custom_workload, get_workload
from phaze_env.workloads.registry import KORTHIKANTI_TABLE3, NARAYANAN_TABLE1

Recompute = Literal["full", "selective", "none"]
Metric = Literal["tflops_per_device", "mfu", "mfu_6n", "samples_s", "tokens_s_per_device", "mcore_tflops_per_device",
                 "mcore_causal_tflops_per_device"]

RECOMPUTE_MODES: tuple[str, ...] = ("full", "selective", "none")
METRICS: tuple[str, ...] = ("tflops_per_device", "mfu", "mfu_6n", "samples_s", "tokens_s_per_device",
                            "mcore_tflops_per_device", "mcore_causal_tflops_per_device")

# Where the plan details that a table leaves out were published.
NARAYANAN_SCRIPT = ("NVIDIA/Megatron-LM examples/sc21/run_table_1.sh (the script that produced Table 1): "
                    "TP, PP, MBS, GBS, nodes × 8 GPUs, --recompute-method uniform, "
                    "--num-layers-per-virtual-pipeline-stage")
KORTHIKANTI_MFU = "Korthikanti et al. 2022, Table 5 MFU with sequence parallelism + selective recompute (also the NVIDIA/Megatron-LM README table)"
KORTHIKANTI_TIMES = "Korthikanti et al. 2022, Table 5 iteration time (as tabulated in calculon-ai/calculon calculon/megatron/validation.py)"
CALCULON_PLANS = "microbatch and interleaving as in calculon-ai/calculon validation/<model>_seqsel.json (Isaev et al. SC'23)"


@dataclass(frozen=True)
class ValidationCase:
    """One published training run: workload, hardware, plan, and the figure its authors measured."""

    name: str
    workload: str  # a name in phaze_env.workloads.registry.BUILTIN
    seq_len: int
    accelerator: str  # accelerator preset name
    cluster: str  # cluster preset name
    n_devices: int
    global_batch: int  # sequences per optimizer step
    tensor: int
    pipeline: int
    data: int
    microbatch: int  # sequences per microbatch per data-parallel replica
    interleave: int = 1  # virtual pipeline stages per device (interleaved 1F1B); 1 = plain 1F1B
    sequence_parallel: bool = False
    microbatch_published: bool = True  # False: the run's source does not state it (the source says where it is from)
    interleave_published: bool = True  # False: the source does not state the pipeline schedule (the case runs `interleave`)
    interleave_alternative: int = 1  # with interleave_published False: the interleaving the same authors' scripts used
    # for this model and plan elsewhere, which experiments.validate reports as a sensitivity
    recompute: Recompute = "full"
    optimizer: str = "adam"
    metric: Metric = "tflops_per_device"
    published: float = 0.0  # in the metric's unit: TFLOP/s per device, a fraction (MFU), or sequences/s
    source: str = ""
    number_format: str = "bf16"  # the tensor cores' format the run used (phaze_env.hardware.number_format)
    zero: int = 0  # ZeRO stage over the data-parallel replicas (1: the optimizer state, as Megatron's distributed optimizer)
    stack: str = "megatron-lm"  # the training software (a profile name in phaze_env.stacks)
    requires: str = ""  # what the model still lacks to predict this run (empty: it can); such cases are data
    expert_parallel: int = 1  # expert-parallel degree (MoE): Megatron-Core's expert grid reuses the t × d ranks (expert TP 1)
    shard_group: int | None = None  # ZeRO-3 shard group of hybrid sharding (FSDP's HSDP; None: the whole d)
    slices: int = 1  # TPU slices joined by the data-centre network (Cloud TPU Multislice); 1: one slice or no TPU
    context: int = 1  # context-parallel degree (Megatron-Core's CP: the sequence split over c ranks, ring attention)
    rules: tuple[tuple[str, object], ...] = ()  # PlanRules fields the run's stack set otherwise than its profile
    # (published for the run: Megatron-Core's account-for-embedding/loss split, FSDP's sharded gradients), as pairs
    stack_knobs: tuple[tuple[str, object], ...] = ()  # structural Stack fields the run set otherwise than its profile
    # (published for the run: Megatron-Core's --recompute-modules layernorm), as pairs; never a fitted field
    campaign: str = ""  # the measurement campaign (one submission round and submitter, one table): a scaling series
    # is never drawn across two ("" : the runs' publication tells them apart by plan and batch alone)

    def __post_init__(self) -> None:
        if self.recompute not in RECOMPUTE_MODES:
            raise ValueError(f"case {self.name!r}: recompute must be one of {RECOMPUTE_MODES}, got {self.recompute!r}")
        if self.metric not in METRICS:
            raise ValueError(f"case {self.name!r}: metric must be one of {METRICS}, got {self.metric!r}")
        if self.published <= 0:
            raise ValueError(f"case {self.name!r}: the published figure must be positive, got {self.published}")
        if self.number_format not in NUMBER_FORMATS:
            raise ValueError(f"case {self.name!r}: number_format must be one of {NUMBER_FORMATS}, got {self.number_format!r}")
        if self.shard_group is not None and (self.zero != 3 or self.data % self.shard_group):
            raise ValueError(f"case {self.name!r}: a shard group ({self.shard_group}) needs ZeRO-3 and must divide the "
                             f"data-parallel degree {self.data}")
        if self.slices < 1 or self.n_devices % self.slices:
            raise ValueError(f"case {self.name!r}: {self.n_devices} devices cannot be split into {self.slices} slices")
        unknown = [name for name, _ in self.rules if name not in PlanRules.__dataclass_fields__ or name == "stack"]
        if unknown:
            raise ValueError(f"case {self.name!r}: rules names no PlanRules field: {', '.join(unknown)}")
        knobs = [name for name, _ in self.stack_knobs if name not in Stack.__dataclass_fields__
                 or name in FITTED_FIELDS or name in ("plan_rules", "host_op_s", "hybrid_allreduce_exposure")]
        if knobs:
            raise ValueError(f"case {self.name!r}: stack_knobs names no structural Stack field: {', '.join(knobs)}")
        if self.interleave_alternative < 1:
            raise ValueError(f"case {self.name!r}: interleave_alternative must be ≥ 1, got {self.interleave_alternative}")
        if self.context < 1 or self.tensor * self.pipeline * self.data * self.context != self.n_devices:
            if self.context > 1:
                raise ValueError(f"case {self.name!r}: t·p·d·c = {self.tensor}·{self.pipeline}·{self.data}·"
                                 f"{self.context} must be the {self.n_devices} devices")
        if self.expert_parallel < 1 or (self.tensor * self.context * self.data) % self.expert_parallel:
            raise ValueError(f"case {self.name!r}: expert_parallel {self.expert_parallel} must divide tensor × context × "
                             f"data = {self.tensor * self.context * self.data} (Megatron-Core folds those ranks into the "
                             f"expert grid)")

    @property
    def microbatches_per_replica(self) -> int:
        """Microbatches each data-parallel replica runs per optimizer step."""
        return self.global_batch // (self.data * self.microbatch)


def _narayanan(size: str, workload: str, row: int, tensor: int, pipeline: int, gpus: int, batch: int,
               microbatch: int, interleave: int, tflops: float) -> ValidationCase:
    return ValidationCase(
        name=f"narayanan21-{size}", workload=workload, seq_len=2048, accelerator="a100", cluster="dgx-a100",
        stack="megatron-lm-2021",
        n_devices=gpus, global_batch=batch, tensor=tensor, pipeline=pipeline, data=gpus // (tensor * pipeline),
        microbatch=microbatch, interleave=interleave, recompute="full", metric="tflops_per_device",
        published=tflops,
        source=f"{NARAYANAN_TABLE1}, row {row} ({size}): achieved {tflops:g} teraFLOP/s per GPU; plan from {NARAYANAN_SCRIPT}",
    )


def _korthikanti(size: str, workload: str, tensor: int, pipeline: int, batch: int, microbatch: int,
                 interleave: int, mfu_percent: float) -> ValidationCase:
    return ValidationCase(
        name=f"korthikanti22-{size}-selective-sp", workload=workload, seq_len=2048, accelerator="a100",
        cluster="dgx-a100", n_devices=tensor * pipeline, global_batch=batch, tensor=tensor, pipeline=pipeline,
        data=1, microbatch=microbatch, interleave=interleave, sequence_parallel=True, recompute="selective",
        metric="mfu", published=mfu_percent / 100,
        source=f"{KORTHIKANTI_MFU}, {size}: MFU {mfu_percent:g} %; configuration {KORTHIKANTI_TABLE3} ({size}, "
               f"data-parallel size 1); {CALCULON_PLANS}",
    )


def _korthikanti_full(size: str, workload: str, tensor: int, pipeline: int, batch: int, microbatch: int,
                      interleave: int, iteration_s: float) -> ValidationCase:
    return ValidationCase(
        name=f"korthikanti22-{size}-full", workload=workload, seq_len=2048, accelerator="a100", cluster="dgx-a100",
        n_devices=tensor * pipeline, global_batch=batch, tensor=tensor, pipeline=pipeline, data=1,
        microbatch=microbatch, interleave=interleave, sequence_parallel=False, recompute="full",
        metric="samples_s", published=batch / iteration_s,
        source=f"{KORTHIKANTI_TIMES}, {size} full recompute: {iteration_s:g} s per batch of {batch}; configuration "
               f"{KORTHIKANTI_TABLE3} ({size}); {CALCULON_PLANS.replace('_seqsel', '_full')}",
    )


SMITH_MTNLG = ("Smith et al. 2022 (MT-NLG, arXiv:2201.11990) §2.4 (as quoted in cli99/llm-analysis "
               "examples/megatron-turing-nlg/README.md): batch 1920 on 280, 350 and 420 DGX A100 nodes, 60.1, "
               "50.2 and 44.4 s per iteration = 126, 121 and 113 TFLOP/s per GPU; §2.3: 8-way tensor slicing "
               "within a node, 35-way pipeline across nodes (DeepSpeed), data parallelism for the rest; "
               "microbatch 1 is not stated there (it is the BigScience reconstruction of the run, "
               "bigscience-workshop/bigscience train/tr11-176B-ml chronicles, 'MICRO_BATCH_SIZE=1')")


NARAYANAN_TABLE2 = ("Narayanan et al. 2021 (SC'21, arXiv:2104.04473), Table 2, PTD-parallelism rows (the comparison "
                    "with ZeRO-3: one model at a fixed batch on 2× and 4× the GPUs, i.e. growing data parallelism): "
                    "{size} model, model-parallel size {mp}, batch {batch}, microbatch 1, {gpus} GPUs: achieved {tflops:g} "
                    "teraFLOP/s per GPU (the paper's §5.1 count, with the recomputed forward pass); the split of the "
                    "model-parallel size into tensor × pipeline is the authors' for the same model elsewhere ({split}); "
                    "the table does not state the pipeline schedule: the case runs Megatron-LM's default plain 1F1B "
                    "(no --num-layers-per-virtual-pipeline-stage), and the report shows it again with the interleaving "
                    "of that script ({alternative}) as a sensitivity; full recompute as every script of the paper")
NARAYANAN_175B_SPLIT = ("NVIDIA/Megatron-LM examples/sc21/run_figure_12.sh, the 175B GPT-3 model: TP=8, PP=12, MBS=1, "
                        "--recompute-method uniform")
NARAYANAN_530B_SPLIT = f"{NARAYANAN_SCRIPT}, row 9 (530B): TP 8, PP 35, microbatch 1"


def _narayanan_table2(size: str, workload: str, pipeline: int, batch: int, gpus: int, tflops: float,
                      interleave_alternative: int, split: str) -> ValidationCase:
    tensor = 8
    layers = get_workload(workload).config_dict["n_layer"]
    per_chunk = layers // (pipeline * interleave_alternative)
    layers_per_chunk = f"{per_chunk} layer{'s' if per_chunk > 1 else ''} per virtual stage"
    return ValidationCase(
        name=f"narayanan21-table2-{size}-{gpus}", workload=workload, seq_len=2048, accelerator="a100", cluster="dgx-a100",
        stack="megatron-lm-2021",
        n_devices=gpus, global_batch=batch, tensor=tensor, pipeline=pipeline, data=gpus // (tensor * pipeline),
        microbatch=1, interleave=1, interleave_published=False, interleave_alternative=interleave_alternative,
        recompute="full", metric="tflops_per_device", published=tflops,
        source=NARAYANAN_TABLE2.format(size=size, mp=tensor * pipeline, batch=batch, gpus=gpus, tflops=tflops,
                                       split=split, alternative=f"v = {interleave_alternative}, {layers_per_chunk}"),
    )


BIGSCIENCE_TR11 = ("bigscience-workshop/bigscience train/tr11-176B-ml (Megatron-DeepSpeed on Jean Zay): plan from "
                   "tr11-176B-ml.slurm (TP_SIZE=4, PP_SIZE=12, MICRO_BATCH_SIZE=2, GLOBAL_BATCH_SIZE=2048, "
                   "--checkpoint-activations, --bf16, DeepSpeed's bf16 optimizer 'implements its own zero stage 1') "
                   "on 48 nodes × 8 A100 80GB (README.md, Hardware); measured: README.md 'Important checkpoints', "
                   "iteration 85376: 'elapsed time per iteration (s): 104.70 | global batch size: 2048 | samples per "
                   "second: 19.561 | TFLOPs: 149.77'")


def _smith(nodes: int, iteration_s: float, tflops: float) -> ValidationCase:
    gpus = 8 * nodes
    return ValidationCase(
        name=f"smith22-mtnlg-530b-{nodes}nodes", workload="megatron-530b", seq_len=2048, accelerator="a100",
        cluster="dgx-a100", n_devices=gpus, global_batch=1920, tensor=8, pipeline=35, data=gpus // (8 * 35),
        microbatch=1, microbatch_published=False, interleave=1, recompute="full", metric="samples_s",
        published=1920 / iteration_s, stack="megatron-deepspeed",
        source=f"{SMITH_MTNLG}; this row: {nodes} nodes, {iteration_s:g} s per batch of 1920 ({tflops:g} TFLOP/s per GPU)",
    )


CASES: tuple[ValidationCase, ...] = (
    # Narayanan et al. 2021, Table 1 (weak scaling on Selene, DGX A100 80 GB nodes, full recompute).
    #          size    workload          row  t  p   GPUs  batch mbs  v  TFLOP/s per GPU
    _narayanan("1.7b", "megatron-1.7b", 1, 1, 1, 32, 512, 16, 1, 137),
    _narayanan("3.6b", "megatron-3.6b", 2, 2, 1, 64, 512, 16, 1, 138),
    _narayanan("7.5b", "megatron-7.5b", 3, 4, 1, 128, 512, 16, 1, 142),
    _narayanan("18b", "megatron-18b", 4, 8, 1, 256, 1024, 8, 1, 135),
    _narayanan("39b", "megatron-39b", 5, 8, 2, 512, 1536, 4, 1, 138),
    _narayanan("76b", "megatron-76b", 6, 8, 4, 1024, 1792, 2, 3, 140),  # 60/4 layers per stage, 5 per chunk
    _narayanan("145b", "megatron-145b", 7, 8, 8, 1536, 2304, 2, 2, 148),  # 80/8, 5 per chunk
    _narayanan("310b", "megatron-310b", 8, 8, 16, 1920, 2160, 1, 2, 155),  # 96/16, 3 per chunk
    _narayanan("530b", "megatron-530b", 9, 8, 35, 2520, 2520, 1, 3, 163),  # 105/35, 1 per chunk
    _narayanan("1t", "megatron-1t", 10, 8, 64, 3072, 3072, 1, 1, 163),
    # Korthikanti et al. 2022: sequence parallelism + selective recompute, data-parallel size 1.
    #            size    workload          t  p   batch mbs v  MFU %
    _korthikanti("22b", "megatron-22b", 8, 1, 4, 4, 1, 41.5),
    _korthikanti("175b", "megatron-175b", 8, 8, 64, 1, 3, 51.4),
    _korthikanti("530b", "megatron-530b", 8, 35, 280, 1, 3, 56.0),
    _korthikanti("1t", "megatron-1t", 8, 64, 512, 1, 1, 56.3),
    # The same runs with full recompute and no sequence parallelism (the paper's baseline rows).
    _korthikanti_full("22b", "megatron-22b", 8, 1, 4, 4, 1, 1.42),
    _korthikanti_full("175b", "megatron-175b", 8, 8, 64, 1, 3, 18.13),
    _korthikanti_full("530b", "megatron-530b", 8, 35, 280, 1, 3, 49.05),
    _korthikanti_full("1t", "megatron-1t", 8, 64, 512, 1, 1, 94.42),
    # Smith et al. 2022 (MT-NLG 530B, Megatron-DeepSpeed on Selene): one model and plan at three data-parallel
    # degrees with the batch fixed — a strong-scaling series (experiments.validate prints its trend).
    #      nodes  s/iteration  TFLOP/s per GPU
    _smith(280, 60.1, 126),
    _smith(350, 50.2, 121),
    _smith(420, 44.4, 113),
    # Narayanan et al. 2021, Table 2 (PTD parallelism): two models, each at a fixed batch on three GPU counts — two
    # Megatron-LM strong-scaling series on Selene (experiments.validate reports their per-GPU trends).
    #                  size    workload         p   batch  GPUs  TFLOP/s  v (sensitivity) t × p split from
    _narayanan_table2("175b", "megatron-175b", 12, 1536, 384, 153, 4, NARAYANAN_175B_SPLIT),
    _narayanan_table2("175b", "megatron-175b", 12, 1536, 768, 149, 4, NARAYANAN_175B_SPLIT),
    _narayanan_table2("175b", "megatron-175b", 12, 1536, 1536, 141, 4, NARAYANAN_175B_SPLIT),
    _narayanan_table2("530b", "megatron-530b", 35, 2240, 560, 171, 3, NARAYANAN_530B_SPLIT),
    _narayanan_table2("530b", "megatron-530b", 35, 2240, 1120, 167, 3, NARAYANAN_530B_SPLIT),
    _narayanan_table2("530b", "megatron-530b", 35, 2240, 2240, 159, 3, NARAYANAN_530B_SPLIT),
    # BLOOM 176B (BigScience 2022), Megatron-DeepSpeed with its ZeRO-1-like bf16 optimizer.
    ValidationCase(
        name="bigscience22-bloom-176b", workload="bloom-176b", seq_len=2048, accelerator="a100", cluster="jean-zay-a100",
        n_devices=384, global_batch=2048, tensor=4, pipeline=12, data=8, microbatch=2, interleave=1, recompute="full",
        zero=1, metric="samples_s", published=2048 / 104.70, stack="megatron-deepspeed", source=BIGSCIENCE_TR11),
)


# --- TPU v4: MaxText (JAX/XLA) and PaLM ---------------------------------------------------------------------------
MAXTEXT_V4 = ("AI-Hypercomputer/maxtext (then google/maxtext) README.md at commit d3f68fe2c (2023-05-01), 'Runtime "
              "Performance Results', https://github.com/AI-Hypercomputer/maxtext/blob/d3f68fe2c/README.md: {model} model on "
              "{slices}x {slice_type}: {tflops:g} TFLOP/sec/chip, MFU {mfu:g}%; run script MaxText/configs/{script}.sh at "
              "that commit (8xv4-128.sh: commit 047f0c762): {flags}, remat_policy=full; max_target_length 1024 "
              "(base.yml); v4-128 = 64 chips, v4-384 = 192 chips (the Cloud TPU v4 name counts TensorCores, 2 per chip)")
NEEDS_2D_SHARDING = ("12-way model parallelism, not a power of two (the placement's tensor widths are 1, 2, 4, 8, …), "
                     "and written by the authors as 2-D weight sharding, not Megatron's 1-D tensor parallelism")


def _maxtext(model: str, slices: int, chips_per_slice: int, per_device_batch: int, tflops: float, mfu_percent: float,
             script: str, flags: str) -> ValidationCase:
    """One MaxText run: FSDP over each slice's chips (ZeRO-3 with per-layer all-gathers overlapped: the scripts set
    ``--xla_enable_async_all_gather=true``), data parallelism across slices (hybrid sharding, a shard group per
    slice: weights and state replicated across slices, gradient shards all-reduced over the data-centre network),
    one microbatch of ``per_device_batch`` sequences per chip (MaxText 2023 has no gradient accumulation), full
    rematerialisation, Adam."""
    n = slices * chips_per_slice
    slice_type = f"v4-{2 * chips_per_slice}"
    return ValidationCase(
        name=f"maxtext-{model}-{slices}x{slice_type}", workload=f"maxtext-{model}", seq_len=1024, accelerator="tpuv4",
        cluster="tpuv4-pod", n_devices=n, global_batch=per_device_batch * n, tensor=1, pipeline=1, data=n,
        microbatch=per_device_batch, recompute="full", zero=3, optimizer="adam", metric="mfu_6n",
        published=mfu_percent / 100, stack="jax-xla", slices=slices,
        shard_group=chips_per_slice if slices > 1 else None,
        source=MAXTEXT_V4.format(model=model.upper(), slices=slices, slice_type=slice_type, tflops=tflops, mfu=mfu_percent,
                                 script=script, flags=flags))


_MAXTEXT_22B = "dcn_data_parallelism={slices} ici_fsdp_parallelism=64 per_device_batch_size=16 scale=3"
_MAXTEXT_52B = ("dcn_data_parallelism={slices} ici_fsdp_parallelism=192 ici_tensor_parallelism=1 per_device_batch_size=10 "
                "scale=4 base_num_decoder_layers=8 base_emb_dim=3072 base_mlp_dim=12288")

TPU_CASES: tuple[ValidationCase, ...] = (
    # MaxText's published TPU v4 results: one model per table at 1–8 slices (weak scaling: the batch grows with the
    # slices), the per-chip batch fixed.
    #         model slices chips/slice batch/chip TFLOP/s MFU %  script
    _maxtext("22b", 1, 64, 16, 156, 56.7, "1xv4-128", _MAXTEXT_22B.format(slices=1)),
    _maxtext("22b", 2, 64, 16, 152, 55.2, "2xv4-128", _MAXTEXT_22B.format(slices=2)),
    _maxtext("22b", 4, 64, 16, 149, 54.3, "4xv4-128", _MAXTEXT_22B.format(slices=4)),
    _maxtext("22b", 8, 64, 16, 146, 53.2, "8xv4-128", _MAXTEXT_22B.format(slices=8)),
    _maxtext("52b", 1, 192, 10, 154, 56.0, "1xv4-384", _MAXTEXT_52B.format(slices=1)),
    _maxtext("52b", 2, 192, 10, 162, 58.9, "2xv4-384", _MAXTEXT_52B.format(slices=2)),
    # Chowdhery et al. 2022 (PaLM 540B): 6144 TPU v4 chips in 2 pods; within each pod 12-way model
    # parallelism × 256-way fully sharded data parallelism, 2-way data parallelism across pods, no
    # pipelining; batch 2048 sequences of 2048 tokens (the last and longest phase of its batch schedule).
    # Its 12-way model parallelism is 2-D weight sharding (not Megatron's 1-D tensor parallelism), its
    # optimizer is Adafactor, and its rematerialisation is partial (HFU 57.8 % vs MFU 46.2 %, Table 3):
    # written here as tensor=12, Adam-sized state, selective recompute — the closest plan this model has.
    ValidationCase(
        name="chowdhery22-palm-540b", workload="palm-540b", seq_len=2048, accelerator="tpuv4", cluster="tpuv4-pod",
        n_devices=6144, global_batch=2048, tensor=12, pipeline=1, data=512, microbatch=4, interleave=1,
        sequence_parallel=False, recompute="selective", optimizer="adam", metric="mfu", published=0.462, stack="jax-xla",
        slices=2, requires=NEEDS_2D_SHARDING,
        source="Chowdhery et al. 2022 (PaLM, arXiv:2204.02311), Table 3: PaLM 540B MFU 46.2 % (HFU 57.8 %) on "
               "6144 TPU v4 chips; §4 (2 pods × 3072 chips, 12-way model × 256-way data parallel per pod); "
               "§5 (batch 512 → 1024 → 2048 sequences of 2048 tokens)",
    ),
)


MCORE_MOE_README = ("NVIDIA/Megatron-LM megatron/core/transformer/moe/README.md at commit 0b981f9c53 (2024-08-02): "
                    "'Mixtral 8X7B bf16 training to achieve 438 TFLOPS as of MCore v0.8', with the 'reference parallel "
                    "mappings of MCore v0.8' table (Mixtral 8x7B dropless, all-to-all dispatcher, BF16, 64 GPUs, "
                    "seq 4096, TP 1, EP 8, PP 4, VP 8, MBS 1, GBS 256) on 8×H100 80GB nodes, NVLink 4, 8×400 Gb/s IB; "
                    "the README's Mixtral example runs --use-distributed-optimizer (ZeRO-1) without recompute, and "
                    "TE's fused attention (written as selective recompute, as the H100 cases)")
MCORE_V09_README = ("NVIDIA/Megatron-LM megatron/core/transformer/moe/README.md at commit c230e0d7c2 (2024-11-21): "
                    "'This boosts Mixtral 8X7B bf16 training to achieve 468 TFLOPS as of MCore v0.9'; the page's reference "
                    "mapping (still titled MCore v0.8) and server are unchanged: Mixtral 8x7B dropless, all-to-all, BF16, "
                    "64 GPUs, seq 4096, TP 1, EP 8, PP 4, VP 8, MBS 1, GBS 256, 8×H100 80GB nodes, 8×400 Gb/s IB")
MOE_MODEL_ZOO_QWEN3 = ("yanring/Megatron-MoE-ModelZoo best_practice/qwen3/readme.md (Megatron-Core, commit 020b813), "
                       "H100 table: Qwen3-235B-A22B, BF16, 256 H100 GPUs, NVLink 4, InfiniBand 8×50 GB/s, seq 4096")
MOE_MODEL_ZOO_QWEN3_LONG = ("yanring/Megatron-MoE-ModelZoo best_practice/qwen3/readme.md (Megatron-Core, commit 020b813), "
                            "H100 'Long Context' table: Qwen3-235B-A22B, DeepEP, BF16, 32 nodes of 8 H100, NVLink 4, "
                            "InfiniBand 8×50 GB/s; its command: PP 8, VPP 4, EP 8, A2A_OVERLAP=0, --recompute-granularity "
                            "selective --recompute-modules layernorm moe; the 'forced balance' figure "
                            "(--moe-router-force-load-balancing: uniform routing, as the model prices it)")
MEGATRON_BRIDGE_QWEN3_30B = (
    "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md (commit 4ab94dfad36641cabdeb96452b21bf676aac4772), "
    "'{release} NeMo Container', Pre-Training, Qwen3_30B_a3B on DGX-H100: {gpus} GPUs, {fmt}, GBS {batch}, MBS {mbs}, "
    "sequence length 4096, TP 1, PP {p}, CP 1, VP {v}, EP {e}: {tokens:g} tokens/s per GPU; recompute and the optimizer "
    "are not on the page: the cases take fused attention (selective, as the H100 cases) and the distributed optimizer")


def _qwen3_235b(label: str, tensor: int, expert: int, pipeline: int, interleave: int, step_s: float | None, tflops: float,
                recompute: Recompute, *, seq: int = 4096, context: int = 1, batch: int = 2048, microbatch: int = 1,
                zero: int = 1, row: str = "", norms_recomputed: bool = False,
                moe_recomputed: bool = False) -> ValidationCase:
    dispatcher = "deepep" if "deepep" in label or seq > 4096 else "a2a"  # the long-context table's: DeepEP
    overlap = "-a2a-overlap" if label.endswith("a2a-overlap") else ""
    stack = f"megatron-core{'-deepep' if dispatcher == 'deepep' else ''}{overlap}-folded"
    data = 256 // (tensor * pipeline * context)
    figure = f"{step_s:g} s per step, {tflops:g} TFLOP/s per GPU" if step_s else f"{tflops:g} TFLOP/s per GPU"
    return ValidationCase(
        name=f"mcore-qwen3-235b-{label}", workload="qwen3-235b-a22b", seq_len=seq, accelerator="h100",
        cluster="dgx-h100", n_devices=256, global_batch=batch, tensor=tensor, pipeline=pipeline,
        data=data, microbatch=microbatch, interleave=interleave, sequence_parallel=tensor > 1,
        recompute=recompute, metric="mcore_causal_tflops_per_device", published=tflops, expert_parallel=expert,
        context=context, zero=zero,
        # the 94 + 2 split as the ModelZoo's config sets it; Megatron-FSDP (Megatron-Core's --use-megatron-fsdp) is
        # ZeRO-3, which the megatron-core profile's rules (its distributed optimizer: ZeRO-0/1) do not list
        rules=(("embedding_loss_in_split", True),) if pipeline > 1 else (("zero_stages", (0, 1, 3)),),
        # --recompute-modules layernorm: every RMSNorm rerun in the backward pass, its output not kept (Megatron-Core at
        # 1e057005, the rows' main, multiplies the routing weights into the experts' activation: the profile's own)
        stack_knobs=((("recompute_norms_up_projections", True),) if norms_recomputed else ())
        + ((("recompute_moe", True),) if moe_recomputed else ()),  # --recompute-modules moe: the MoE block rerun
        stack=stack,
        source=f"{MOE_MODEL_ZOO_QWEN3 if seq == 4096 else MOE_MODEL_ZOO_QWEN3_LONG}; row {row}TP {tensor}, CP {context}, "
               f"EP {expert}, PP {pipeline}, VPP {interleave}, MBS {microbatch}, GBS {batch}, sequence {seq}: {figure}")


def _bridge_qwen3_30b(release: str, batch: int, microbatch: int, pipeline: int, interleave: int, expert: int,
                      tokens_s: float, published_format: str = "FP8", stack: str = "megatron-core") -> ValidationCase:
    gpus, seq = 16, 4096
    return ValidationCase(
        name=f"bridge{release.replace('.', '')}-qwen3-30b-a3b-fp8", workload="qwen3-30b-a3b", seq_len=seq,
        accelerator="h100", cluster="dgx-h100", n_devices=gpus, global_batch=batch, tensor=1, pipeline=pipeline,
        data=gpus // pipeline, microbatch=microbatch, interleave=interleave, recompute="selective",
        metric="tokens_s_per_device", published=tokens_s, number_format="fp8", zero=1, expert_parallel=expert,
        stack=stack,
        source=MEGATRON_BRIDGE_QWEN3_30B.format(release=release, gpus=gpus, fmt=published_format, batch=batch,
                                                mbs=microbatch, p=pipeline, v=interleave if interleave > 1 else "n/a",
                                                e=expert, tokens=tokens_s))


MOE_CASES: tuple[ValidationCase, ...] = (
    # Published MoE training runs with their plans (issue 20 item 6), predicted with expert parallelism (issue 19) on
    # the h100 preset and dgx-h100 cluster. Megatron-Core's own runs (MCore v0.8 and v0.9, its all-to-all dispatcher)
    # run the megatron-core profile, as every H100 run of Megatron-Core's model does (MEGATRON_CORE_MODEL_RUNS).
    ValidationCase(
        name="mcore-mixtral-8x7b", workload="mixtral-8x7b", seq_len=4096, accelerator="h100", cluster="dgx-h100",
        n_devices=64, global_batch=256, tensor=1, pipeline=4, data=16, microbatch=1, interleave=8,
        recompute="selective", zero=1, metric="mcore_tflops_per_device", published=438.0, expert_parallel=8,
        stack="megatron-core",
        source=MCORE_MOE_README),
    # The same plan three months later (MCore v0.9): the software's gain on one plan, not an independent plan.
    ValidationCase(
        name="mcore-v09-mixtral-8x7b", workload="mixtral-8x7b", seq_len=4096, accelerator="h100", cluster="dgx-h100",
        n_devices=64, global_batch=256, tensor=1, pipeline=4, data=16, microbatch=1, interleave=8,
        recompute="selective", zero=1, metric="mcore_tflops_per_device", published=468.0, expert_parallel=8,
        stack="megatron-core",
        source=MCORE_V09_README),
    # Megatron-Bridge (Megatron-Core) Qwen3-30B-A3B on two DGX-H100 nodes, three releases with three plans. The same
    # plan as 26.02.01's ran at 5113 tokens/s per GPU in 26.02: the releases' software moves these figures.
    # Each row runs the megatron-core profile (the stack they ran, its kernels issued from the host: no CUDA graphs in
    # these H100 FP8 recipes) with its recipe's expert dispatch and all-to-all overlap; the 26.04 row is the run the
    # profile's host cost per operator is fitted to (StackProfile.host_calibration), the other two are held out.
    #                 release    batch mbs p  vp  ep  tokens/s per GPU
    # 26.04's recipe dispatches with HybridEP (Megatron-Bridge scripts/performance/configs/qwen/
    # qwen3_workload_base_configs.py at 5f3b336f9, 2026-04-28: QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1,
    # moe_flex_dispatcher_backend='hybridep', moe_a2a_overlap=False): its EP 16 spans two nodes, so the
    # node-deduplicated dispatch matters, and its all-to-all is not overlapped.
    _bridge_qwen3_30b("26.04", 1024, 1, 1, 1, 16, 8901, stack="megatron-core-deepep"),
    # 26.02.01's (tag v0.3.0): DeepEP's flex dispatch with the all-to-all under another microbatch's compute.
    _bridge_qwen3_30b("26.02.01", 1024, 1, 2, 12, 8, 9058, stack="megatron-core-deepep-a2a-overlap"),
    # 25.11's (scripts/performance/configs/qwen3/qwen3_30b_a3b_llm_pretrain.py of that release line, e.g. at
    # 4054233ae): no flex dispatcher and moe_a2a off, so Megatron-Core's default alltoall dispatcher, not overlapped.
    _bridge_qwen3_30b("25.11", 512, 2, 2, 24, 8, 5275, published_format="FP8-CS"),
    # Megatron-Bridge's Qwen3-235B-A22B on 256 H100 in FP8 (current scaling): the ModelZoo's cross-node plan at GBS 8192.
    # The recipe (v0.4.1, scripts/performance/configs/qwen/qwen3_workload_base_configs.py and qwen3_llm_pretrain.py,
    # QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2; src/megatron/bridge/recipes/qwen/qwen3_moe.py): expert tensor
    # parallelism 1 (a folded grid), the alltoall dispatcher with moe_a2a_overlap (the all-to-all under another
    # microbatch's compute), tp_comm_overlap off, no recompute, no CUDA graphs, the embedding/loss split, forced load
    # balancing. The NCCL all-to-all's SMs under the overlap are not published: none taken (moe_comm_sm_share 0).
    # The same plan logged 1633, 1611 and 1686 tokens/s per GPU in 26.02, 26.02.01 and 26.04.
    ValidationCase(
        name="bridge260401-qwen3-235b-a22b-fp8", workload="qwen3-235b-a22b", seq_len=4096, accelerator="h100",
        cluster="dgx-h100", n_devices=256, global_batch=8192, tensor=2, pipeline=8, data=16, microbatch=1,
        interleave=4, sequence_parallel=True, recompute="selective", metric="tokens_s_per_device", published=1712.0,
        number_format="fp8", zero=1, expert_parallel=32, stack="megatron-core-folded",
        rules=(("embedding_loss_in_split", True),),
        stack_knobs=(("moe_alltoall_overlap", True), ("tp_comm_overlap", False)),
        source="NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md (commit "
               "4ab94dfad36641cabdeb96452b21bf676aac4772), '26.04.01 NeMo Container', Pre-Training, Qwen3_235B_a22B on "
               "DGX-H100: 256 GPUs, FP8, GBS 8192, MBS 1, sequence length 4096, TP 2, PP 8, CP 1, VP 4, EP 32: 1712 "
               "tokens/s per GPU (253 model TFLOP/s); recipe at tag v0.4.1 (QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2: "
               "expert TP 1, alltoall dispatcher, moe_a2a_overlap, tp_comm_overlap off, no recompute)"),
    # DeepSeek-V3 pre-training (arXiv:2412.19437): "180K H800 GPU hours" per trillion tokens (§1, Table 1), i.e.
    # 10^12 / (180,000 × 3,600 s) = 1,543.2 tokens/s per GPU, on 2,048 H800 (§3.1) with 16-way pipeline (DualPipe),
    # 64-way expert parallelism over 8 nodes and ZeRO-1 data parallelism, no tensor parallelism (§3.2), FP8 GEMMs
    # (§3.3), sequence 4K and the final batch of 15,360 sequences (§4.2). Its microbatch is not published (1 taken);
    # it recomputes only RMSNorm and the MLA up-projections (§3.2.3; their cost not counted) and runs a fused attention
    # kernel (the stack's), whose s×s scores are never stashed: written "selective", as the H100 cases. Its AdamW keeps
    # the moments in BF16 and the master weights and gradients in FP32 (§3.3.3: the adamw-bf16-moments optimizer).
    ValidationCase(
        name="deepseek-v3-2048-h800", workload="deepseek-v3", seq_len=4096, accelerator="h100", cluster="dgx-h800",
        n_devices=2048, global_batch=15360, tensor=1, pipeline=16, data=128, microbatch=1, interleave=1,
        recompute="selective", metric="tokens_s_per_device", published=1e12 / (180_000 * 3600), number_format="fp8", zero=1,
        expert_parallel=64, stack="deepseek-hai-llm", optimizer="adamw-bf16-moments",
        source="DeepSeek-AI 2024, DeepSeek-V3 Technical Report (arXiv:2412.19437): Table 1 / §1 '180K H800 GPU hours' per "
               "trillion tokens; §3.1 2,048 NVIDIA H800 GPUs; §3.2 PP 16, EP 64 over 8 nodes, ZeRO-1 DP; §3.3 FP8; §4.2 "
               "sequence 4K, batch 15,360"),
    # Qwen3-235B-A22B (94 layers, 128 experts top-8). The ModelZoo's config (model_configs/benchmarking/
    # Qwen3-235B-A22B.yaml at 1ed4179f7) runs --expert-tensor-parallel-size 1, the distributed optimizer and
    # --account-for-embedding/loss-in-pipeline-split (94 + 2 layers over 8 × 4 or 32 × 3 chunks): each row runs the
    # megatron-core profile (nothing fitted to these runs) with its expert grid folded (megatron-core-*-folded) and the
    # row's dispatcher (DeepEP: the node-deduplicated flex dispatch; A2A: the flat all-to-all). The 4K rows do not say
    # whether the router was forced to balance (the long-context table gives both; the model routes uniformly). Recompute as
    # published: "norm, act" = selective recompute of layer norms and the expert activation (written as
    # "selective", with the norms rerun: Stack.recompute_norms_up_projections; the experts' activation is kept, more
    # memory than the run holds); the row listing none runs flash attention all the same (--use-flash-attn: no s×s
    # scores kept), written "selective" as the H100 cases are.
    #           label                     t  ep  p  vpp  s/step TFLOP/s recompute
    _qwen3_235b("tp2-ep32-pp8-deepep", 2, 32, 8, 4, 19.7, 245, "selective", row="'Cross-node EP strategy', ",
                norms_recomputed=True),
    # The same plan with the all-to-all under the other microbatch's compute ('+1f1b overlap': A2A_OVERLAP=1,
    # best_practice/qwen3/run_h100_235b.sh at bff12290).
    _qwen3_235b("tp2-ep32-pp8-deepep-a2a-overlap", 2, 32, 8, 4, 17.6, 276, "selective",
                row="'Cross-node EP strategy', '+1f1b overlap', ", norms_recomputed=True),
    # Megatron-FSDP (ZeRO-3 over the 128 data-parallel ranks), microbatch 4, full recompute.
    _qwen3_235b("tp2-ep8-fsdp-deepep", 2, 8, 1, 1, 17.6, 276, "full", microbatch=4, zero=3,
                row="'Intra-node EP strategy', FSDP On, EDP 32, "),  # Megatron-FSDP: ZeRO-3 (its rules widened below)
    _qwen3_235b("tp2-ep8-pp32-a2a", 2, 8, 32, 3, 24.2, 200, "selective", row="'Intra-node EP strategy', ",
                norms_recomputed=True),
    _qwen3_235b("tp4-ep8-pp8-deepep", 4, 8, 8, 4, 29.0, 167, "selective", row="'Intra-node EP strategy', "),
    # Long context on 256 H100 (the table's 32 nodes): TP 4, PP 8 × VPP 4, EP 8, CP growing with the sequence, GBS 256.
    *(_qwen3_235b(f"{seq // 1024}k-cp{cp}", 4, 8, 8, 4, None, tflops, "selective", seq=seq, context=cp, batch=256,
                  row="'Long Context', ", norms_recomputed=True, moe_recomputed=True)
      for seq, cp, tflops in ((16384, 1, 295), (32768, 2, 335), (65536, 4, 368), (131072, 8, 389))),
)


FMS_FSDP_FEB = ("foundation-model-stack/fms-fsdp README.md at commit 0d31998 (2024-02-21), throughput table: Llama 2 "
                "shapes, 128 × A100, sequence 4096, 'Batch Size' per GPU, the row's sharding strategy and activation "
                "checkpointing")
FMS_FSDP_MAR = ("foundation-model-stack/fms-fsdp README.md at commit 5e522b4 (2024-03-13), 'Training throughput "
                "benchmarks' ('A100 80G 128 GPUs with 400Gbps'), the same table as pytorch/pytorch.github.io "
                "_posts/2024-03-13-maximizing-training.md Table 1: sequence 4096, batch 2 per GPU, the row's sharding "
                "strategy and activation checkpointing")
FMS_FSDP_SETUP = ("PyTorch FSDP (fms-fsdp main_training.py: one FSDP unit per LLaMABlock, bf16 mixed precision "
                  "(bfSixteen: bf16 all-gathers and reduce-scatters), limit_all_gathers, backward prefetch by default, "
                  "'hsdp' = HYBRID_SHARD over the 8 GPUs of a node, 'fsdp' = FULL_SHARD; activation checkpointing "
                  "(fms_fsdp/policies/ac_handler.py) wraps every block when selective_checkpointing = 1, 'Full AC'), "
                  "AdamW in fp32, SDPA FlashAttention-2 (which keeps no s×s scores and recomputes them in its backward "
                  "pass: written as selective recompute, as the H100 cases); no gradient accumulation (one microbatch "
                  "per step)")
NEEDS_BLOCK_CHECKPOINTING = ("activation checkpointing of every n-th block only (fms-fsdp's selective_checkpointing = n; "
                             "the run's n is not published) — the model recomputes all of a stage's layers or none")


def _fms_fsdp(table: str, size: str, workload: str, per_gpu_batch: int, hybrid: bool, checkpointing: str,
              tokens_s: float, chip: str = "a100") -> ValidationCase:
    """One row of IBM's fms-fsdp benchmark tables (``table`` "feb24" or "mar24"); ``checkpointing`` "none", "every
    block" or "every n-th block"; ``chip`` "a100" (128 GPUs, cluster ibm-a100) or "h100" (the March table's H100
    column: 96 GPUs, ibm-h100)."""
    source = FMS_FSDP_FEB if table == "feb24" else FMS_FSDP_MAR
    if chip == "h100":
        source = source.replace("'A100 80G 128 GPUs with 400Gbps'", "'H100 96 GPUs with 800 Gbps'")
    gpus = 128 if chip == "a100" else 96
    recompute: Recompute = {"none": "selective", "every block": "full", "every n-th block": "full"}[checkpointing]
    return ValidationCase(
        name=f"fms-fsdp-{table}-llama2-{size}" + ("" if chip == "a100" else f"-{chip}"), workload=workload, seq_len=4096,
        accelerator=chip, cluster=f"ibm-{chip}", n_devices=gpus, global_batch=gpus * per_gpu_batch, tensor=1,
        pipeline=1, data=gpus, microbatch=per_gpu_batch,
        recompute=recompute, zero=3, shard_group=8 if hybrid else None, metric="tokens_s_per_device",
        published=tokens_s, stack="pytorch-fsdp",
        requires=NEEDS_BLOCK_CHECKPOINTING if checkpointing == "every n-th block" else "",
        source=f"{source}; row {size}: {'HSDP' if hybrid else 'FSDP'}, activation checkpointing {checkpointing}, "
               f"batch {per_gpu_batch}: {tokens_s:g} tokens/s per GPU; {FMS_FSDP_SETUP}")


FSDP_CASES: tuple[ValidationCase, ...] = (
    # IBM's PyTorch FSDP benchmarks on its A100 cluster (cluster preset ibm-a100), two tables a month apart: the
    # February rows (larger batches for 34b and 70b) and the March rows of the README and the PyTorch blog. The two
    # 7b rows are one plan measured twice (3760 and 3700 tokens/s per GPU).
    #         table    size   workload     batch  HSDP   checkpointing       tokens/s per GPU
    _fms_fsdp("feb24", "7b", "llama2-7b", 2, True, "none", 3760),
    _fms_fsdp("feb24", "13b", "llama2-13b", 1, True, "none", 1700),
    _fms_fsdp("feb24", "34b", "llama2-34b", 8, False, "every block", 772),
    _fms_fsdp("feb24", "70b", "llama2-70b", 6, False, "every block", 380),
    _fms_fsdp("mar24", "7b", "llama2-7b", 2, True, "none", 3700),
    _fms_fsdp("mar24", "34b", "llama2-34b", 2, False, "every block", 700),
    _fms_fsdp("mar24", "70b", "llama2-70b", 2, False, "every block", 370),
)


FSDP_H100_CASES: tuple[ValidationCase, ...] = (
    # The March table's H100 column: the same scripts and configurations on IBM's H100 cluster (96 GPUs, 800 Gb/s
    # between nodes; cluster preset ibm-h100).
    #         table    size   workload     batch  HSDP   checkpointing  tokens/s per GPU  chip
    _fms_fsdp("mar24", "7b", "llama2-7b", 2, True, "none", 7500, "h100"),
    _fms_fsdp("mar24", "34b", "llama2-34b", 2, False, "every block", 1550, "h100"),
    _fms_fsdp("mar24", "70b", "llama2-70b", 2, False, "every block", 800, "h100"),
)


PENDING_CASES: tuple[ValidationCase, ...] = (
    # The March 13b rows checkpoint every n-th block only ("Selective AC"; the blog: "checkpoint every n blocks").
    _fms_fsdp("mar24", "13b", "llama2-13b", 2, False, "every n-th block", 1800),
    _fms_fsdp("mar24", "13b", "llama2-13b", 2, False, "every n-th block", 3800, "h100"),
)


def all_cases() -> tuple[ValidationCase, ...]:
    """Every case of every list, in report order."""
    return CASES + FSDP_CASES + FSDP_H100_CASES + TPU_CASES + H100_CASES + MOE_CASES + PENDING_CASES


def case_names() -> list[str]:
    return [case.name for case in all_cases()]


def get_case(name: str) -> ValidationCase:
    """The case called ``name`` (a clear error otherwise: the closest known names, and where to list them all)."""
    for case in (*all_cases(), *FLAGSHIP_CASES):
        if case.name == name:
            return case
    names = case_names()
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.6) or names[:3]
    raise ValueError(f"unknown validation case {name!r}; known: {', '.join(close)}, … ({len(names)} cases: "
                     "python -m experiments.validate --list)")


# --- H100 runs, bf16 and FP8 ----------------------------------------------------------------------------------
MEGATRON_CORE_MODEL_RUNS = (
    "Which profile runs an H100 case is the software that trained it, read from the run's configuration, not from "
    "its error: every run of Megatron-Core's GPT model runs the megatron-core profile — NVIDIA's DGX Cloud GPT-3 175B "
    "recipe (NeMo 24.05: gpt3_175b_hydra.yaml, mcore_gpt true), NeMo 24.07's Llama 2 rows (NeMo-Framework-Launcher's "
    "llama2 configs, mcore_gpt true), NeMo 24.03's long-sequence rows, Megatron-Core's own Mixtral runs (MCore v0.8, "
    "v0.9) and Megatron-Bridge's — and NeMo's own GPT model of 2023, which the MLPerf Training v3.0 and v3.1 GPT-3 "
    "submissions train (MLPERF_NEMO_MODEL), runs the megatron-lm profile, fitted on H100 to one of them.")
"""Issue 28 item 6's rule: one modern H100 profile for every run of Megatron-Core's model (its efficiency fitted to one
of them, the others held out); ``tests/test_validation_cases.py`` checks that the H100 cases follow it."""

MLPERF_NEMO_MODEL = {
    "v3.0": "NeMo v1.17.0 (mlcommons/training_results_v3.0 NVIDIA/benchmarks/gpt3/implementations/pytorch/Dockerfile: "
            "NEMO_REVISION v1.17.0_pt_23.04), before Megatron-Core's GPT model entered NeMo",
    "v3.1": "NeMo r1.20.0 at bd0b818ac2eb420b1cea19eb8bcc6215c87b06d0 (mlcommons/training_results_v3.1 "
            "NVIDIA/benchmarks/gpt3/implementations/pytorch/Dockerfile: NEMO_REVISION, NEMO_BASE_VERSION r1.20.0), whose "
            "megatron_gpt_config.yaml has no mcore_gpt option (NVIDIA/NeMo v1.20.0; it came in v1.21.0, default False) "
            "and neither has the submission's conf/custom.yaml",
}
"""The NeMo of each MLPerf GPT-3 round: NeMo's own GPT model (Transformer Engine's layers, Apex's distributed Adam), not
Megatron-Core's (:data:`MEGATRON_CORE_MODEL_RUNS`)."""


# NVIDIA's DGX Cloud benchmarking recipe for NeMo Megatron GPT-3 175B publishes the same plan in bf16 and in FP8 at
# five scales. The recipe's config fixes the rest of the plan: no activation checkpointing, sequence parallelism,
# the distributed (ZeRO-1) Adam, Transformer Engine with FP8 "hybrid" (E4M3 forward, E5M2 gradients), TE's fused
# attention. Fused (flash) attention keeps no s×s scores and recomputes them in its backward pass — what this
# model's selective recompute prices — so the cases pin ``recompute="selective"``.
DGXC_GPT3 = ("NVIDIA/dgxc-benchmarking nemo_megatron/README_175b.md (commit 0b71cfda5163540778e2a3d2db59858bf62f96f7), "
             "\"NeMo Megatron {fmt} (TP=4,PP=8, MBS=1, VP=12, SEQ=2048)\" table: {gpus}x H100 GPUs (GBS={batch}), "
             "training step time {step:g} s; plan from nemo_megatron/gpt3_175b_hydra.yaml (commit 35a9aecc8d5b17d99d80f52f38c75ade0dbab7ae) "
             "(mcore_gpt true: Megatron-Core's GPT model in NeMo 24.05; activations_checkpoint_granularity null, "
             "sequence_parallel true, distributed_fused_adam)")


def _dgxc_gpt3(number_format: str, gpus: int, step_s: float) -> ValidationCase:
    batch = 2 * gpus  # the recipe: global batch = 16 per 8-GPU node
    return ValidationCase(
        name=f"dgxc-gpt3-175b-{number_format}-{gpus}", workload="nemo-gpt3-175b", seq_len=2048, accelerator="h100",
        cluster="dgx-h100", n_devices=gpus, global_batch=batch, tensor=4, pipeline=8, data=gpus // 32, microbatch=1,
        interleave=12, sequence_parallel=True, recompute="selective", metric="samples_s", published=batch / step_s,
        number_format=number_format, zero=1, stack="megatron-core",
        source=DGXC_GPT3.format(fmt=number_format.upper(), gpus=gpus, batch=batch, step=step_s))



# NVIDIA's MLPerf Training v3.1 GPT-3 175B submissions (NeMo 23.09 on Eos, DGX H100 with 400 Gb/s InfiniBand per GPU,
# and Azure's with NVIDIA on 1,344 ND H100 v5 VMs, the same node, configs and software), and v3.0's (NeMo 23.04: NVIDIA
# on DGX H100 at 512 and 768 GPUs, CoreWeave's HGX H100 at 768 to 3,584, the same plan through run_and_time.sh):
# the per-step training time is in the submission's own logs (``tracked_stats`` ``train_step_timing``, one entry per
# step, three runs per scale), the plan in its configs: TP 4, PP 8, VP 12 (conf/custom.yaml's
# ``virtual_pipeline_model_parallel_size`` default), microbatch 1, sequence 2048, sequence parallelism, no activation
# checkpointing (``activations_checkpoint_granularity`` null: Transformer Engine's fused attention, priced as selective
# recompute as above), FP8 hybrid with TP communication overlap, the distributed Adam (Apex ``distributed_fused_adam``,
# gradient and parameter sync overlapped, bf16 gradient sync): the DGX Cloud recipe's plan and stack. The global batch
# and the microbatches per replica are logged (``global_batch_size``, ``gradient_accumulation_steps``); the published
# figure is the median of every logged step of the three runs (``python -m experiments.mlperf_logs`` recomputes it from a
# clone of the repository). The model is NeMo's GPT-3 175B (``nemo-gpt3-175b``): the benchmark's C4 SentencePiece
# vocabulary is GPT-3's 50,257 tokens (MLPerf's reference reads its evaluation ids as a 50,257-token pass-through
# vocabulary), padded by NeMo to the same 50,688. Left out: v3.1's 512-GPU submission (eos_n64), whose logged batch
# (2048) is not the one its config in the repository gives (MINIBS 192: 3072), so its plan is not the published one.
MLPERF_GPT3 = ("mlcommons/training_results_{round} (commit {commit}) {submitter}/results/"
               "{directory}/gpt3/result_0..2.txt ({system}): GBS {batch} (logged), {ga} microbatches per "
               "replica (logged gradient_accumulation_steps), median train_step_timing {step:g} s over the three runs' "
               "{steps} logged steps; plan from {submitter}/benchmarks/gpt3/implementations/pytorch/config_DGXH100_"
               "{nodes}x8x{minibs}x4x8_mbs1.sh, config_common.sh, config_fp8.sh, {plan_files} (TP 4, PP 8, VP 12, "
               "MBS 1, sequence 2048, sequence parallel, no activation checkpointing, FP8 hybrid, TP comm overlap, "
               "distributed Adam with overlapped bf16 gradient sync)")
"""Where each MLPerf GPT-3 case comes from (:func:`_mlperf_gpt3`)."""

MLPERF_ROUNDS = {
    "v3.1": ("d06288b2bd675a9d88e0e6181f5bb5626b71ec19",
             "conf/custom.yaml and conf/optim/distributed_fused_adam.yaml"),
    "v3.0": ("63e326c400f5d8bb8c6070a9ab08332d4931152e",
             "config_tp_h100.sh, run_and_time.sh (the environment as hydra overrides: INTERLEAVED_PIPELINE 12, "
             "ACT_CKPT_GRANULARITY null, SEQ_PARALLEL True, TP_COMM_OVERLAP True, FP8 True) and "
             "conf/megatron_gpt_config.yaml's distributed_fused_adam"),
}
"""Each round's repository commit and the files beyond the per-scale config that fix the plan."""

MLPERF_SYSTEMS = {
    "NVIDIA": "DGX H100: 8 H100 SXM on NVLink 4, 8 × 400 Gb/s InfiniBand NDR per node (Eos in v3.1)",
    "Azure+NVIDIA": "Azure ND H100 v5: 8 H100 SXM on NVLink 4, 8 × 400 Gb/s InfiniBand NDR per VM",
    "NVIDIA_CoreWeave": "CoreWeave HGX H100: 8 H100 SXM on NVLink 4 and NVSwitch, 8 × 400 Gb/s InfiniBand NDR per node",
}
"""The submitters' systems (their ``systems/*.json``): the same node, the dgx-h100 preset's."""


def _mlperf_gpt3(round_: str, submitter: str, directory: str, nodes: int, batch: int, step_s: float, steps: int,
                 tag: str = "") -> ValidationCase:
    """One scale of an MLPerf Training GPT-3 175B submission (:data:`MLPERF_GPT3`): ``round_`` ``"v3.0"`` or
    ``"v3.1"``, ``tag`` told in the name when another submitter ran the same round's configs."""
    gpus, data = 8 * nodes, nodes * 8 // 32
    commit, plan_files = MLPERF_ROUNDS[round_]
    return ValidationCase(
        name=f"mlperf{round_[1:].replace('.', '')}-{tag}gpt3-175b-fp8-{gpus}", workload="nemo-gpt3-175b", seq_len=2048,
        accelerator="h100", cluster="dgx-h100", n_devices=gpus, global_batch=batch, tensor=4, pipeline=8, data=data,
        microbatch=1, interleave=12, sequence_parallel=True, recompute="selective", metric="samples_s",
        published=batch / step_s, number_format="fp8", zero=1, campaign=f"mlperf-{round_}-{submitter}",
        source=MLPERF_GPT3.format(round=round_, commit=commit, submitter=submitter, directory=directory,
                                  system=MLPERF_SYSTEMS[submitter], nodes=nodes, batch=batch, ga=batch // data,
                                  step=step_s, steps=steps, minibs=batch // data, plan_files=plan_files))


# NeMo's performance summary (24.07, DGX-H100, FP8) gives TP, PP, VP, microbatch and batch; recompute and the
# optimizer are not on the page: the cases take fused attention (selective, as above) and the distributed optimizer
# of NeMo's recipes, whose Llama 2 configs train Megatron-Core's GPT model.
NEMO_2407 = ("NVIDIA/NeMo docs/source/performance/performance_summary.md (commit 070a0bb168d405d653b9734c0017cf5078e77c0d), "
             "NeMo 24.07 pre-training at FP8 on DGX-H100: {model}, {gpus} GPUs, GBS {batch}, MBS 1, sequence length 4096, "
             "TP {t}, PP {p}, CP 1, VP {v}: {tokens:g} tokens/s per GPU; the model and optimizer from "
             "NVIDIA/NeMo-Framework-Launcher launcher_scripts/conf/training/llama/llama2_7b.yaml (commit "
             "064e676963bd7632cb57f1abf575e1205dfcc390: mcore_gpt true, transformer_engine true, use_flash_attention "
             "true, distributed_fused_adam with overlap_grad_sync and overlap_param_sync)")


def _nemo_llama2(model: str, workload: str, gpus: int, pipeline: int, interleave: int, tokens_s: float) -> ValidationCase:
    batch, seq = 128, 4096
    return ValidationCase(
        name=f"nemo2407-{workload}-fp8", workload=workload, seq_len=seq, accelerator="h100", cluster="dgx-h100",
        n_devices=gpus, global_batch=batch, tensor=1, pipeline=pipeline, data=gpus // pipeline, microbatch=1,
        interleave=interleave, recompute="selective", metric="samples_s", published=tokens_s * gpus / seq,
        number_format="fp8", zero=1, stack="megatron-core",
        source=NEMO_2407.format(model=model, gpus=gpus, batch=batch, t=1, p=pipeline, v=interleave, tokens=tokens_s))


# Megatron-Bridge's performance summary (NeMo 25.09–26.02 containers, DGX-H100, FP8 with current scaling): the Llama 3
# recipes' TP, PP, CP, VP, microbatch and batch. The recipes (scripts/performance, Megatron-Bridge) run sequence
# parallelism with TP, the distributed optimizer, Transformer Engine's fused attention (written as selective recompute,
# as the H100 cases above) and no activation recompute; the 405B recipe sets account_for_embedding_in_pipeline_split and
# account_for_loss_in_pipeline_split (126 + 2 layers over 8 stages of 8 chunks).
BRIDGE_PERF = ("NVIDIA-NeMo/Megatron-Bridge docs/performance-summary{page}.md (commit {commit}), '{release} NeMo Container', "
               "Pre-Training, DGX-H100, {model}: {gpus} GPUs, FP8, GBS {batch}, MBS 1, sequence length 8192, TP {t}, "
               "PP {p}, CP {c}, VP {v}: {tokens:g} tokens/s per GPU")
BRIDGE_ARCHIVE = ("-archive", "0a25f911b2ed6c6905a539504fdb8e5b40e3438b")


def _bridge_llama3(release: str, model: str, workload: str, gpus: int, batch: int, tensor: int, pipeline: int,
                   context: int, interleave: int, tokens_s: float) -> ValidationCase:
    seq = 8192
    page, commit = BRIDGE_ARCHIVE
    return ValidationCase(
        name=f"bridge{release.replace('.', '')}-{workload}-fp8-{gpus}", workload=workload, seq_len=seq,
        accelerator="h100", cluster="dgx-h100", n_devices=gpus, global_batch=batch, tensor=tensor, pipeline=pipeline,
        data=gpus // (tensor * pipeline * context), microbatch=1, interleave=interleave, sequence_parallel=tensor > 1,
        recompute="selective", metric="tokens_s_per_device", published=tokens_s, number_format="fp8", zero=1,
        context=context, rules=(("embedding_loss_in_split", True),) if workload == "llama3-405b" else (),
        stack="megatron-core",
        source=BRIDGE_PERF.format(page=page, commit=commit, release=release, model=model, gpus=gpus, batch=batch,
                                  t=tensor, p=pipeline, c=context, v=interleave, tokens=tokens_s))


# The same page's Llama 3 8B rows on DGX-H100 shard the model with Megatron-FSDP over the node (FSDP 8: parameters,
# gradients and optimizer state sharded over the 8 GPUs, TP, PP and CP 1, microbatch 1, GBS 128, GA 16): written as
# ZeRO-3 over the 8 data-parallel ranks, the profile's ZeRO stages widened for the run (Megatron-Core's own FSDP; the
# profile's plan rules stop at the distributed optimizer, ZeRO-1).
BRIDGE_PERF_FSDP = ("NVIDIA-NeMo/Megatron-Bridge docs/performance-summary{page}.md (commit {commit}), '{release} NeMo "
                    "Container', Pre-Training, DGX-H100, {model}: {gpus} GPUs, {precision}, GBS {batch}, MBS 1, sequence "
                    "length 8192, FSDP {gpus}, TP 1, PP 1, CP 1, VP n/a, GA {ga}: {tokens:g} tokens/s per GPU")


def _bridge_llama3_fsdp(release: str, model: str, workload: str, gpus: int, batch: int, precision: str,
                        tokens_s: float) -> ValidationCase:
    page, commit = BRIDGE_ARCHIVE
    return ValidationCase(
        name=f"bridge{release.replace('.', '')}-{workload}-fp8-{gpus}", workload=workload, seq_len=8192,
        accelerator="h100", cluster="dgx-h100", n_devices=gpus, global_batch=batch, tensor=1, pipeline=1, data=gpus,
        microbatch=1, recompute="selective", metric="tokens_s_per_device", published=tokens_s, number_format="fp8",
        zero=3, rules=(("zero_stages", (0, 1, 2, 3)),), stack="megatron-core",
        source=BRIDGE_PERF_FSDP.format(page=page, commit=commit, release=release, model=model, gpus=gpus,
                                       precision=precision, batch=batch, ga=batch // gpus, tokens=tokens_s))


# The Llama 3 paper's pre-training of the 405B model (Dubey et al. 2024, arXiv:2407.21783, Table 4: "Scaling
# configurations and MFU for each stage of Llama 3 405B pre-training"): 16M tokens per batch on 8,192 and 16,384 H100
# GPUs (Meta's Grand Teton servers, 8 GPUs on NVLink, 400 Gb/s RoCE per GPU: the dgx-h100 preset's fabric), BF16,
# TP 8, PP 16 with the interleaved schedule (§3.3.2; the first and last stage one layer fewer: the embedding/loss
# split), FSDP sharding the optimizer state and gradients (§3.3.2: "we shard the model, optimizer, and gradients", not
# resharding after the forward pass: ZeRO-2, which Megatron-Core does not offer, so the case widens its stack's ZeRO
# stages), no activation checkpointing with FlashAttention (selective). The table gives TFLOP/s per GPU (and MFU) without its FLOP convention: the cases count
# Megatron-Core's (full s×s scores); counting causal scores would lower the published figure's tokens by 4 % at 8K.
# Virtual stages: §3.3.2 reduces "one Transformer layer each from the first and the last stages. This means that the
# first model chunk on the first stage has only the embedding, and the last model chunk on the last stage has only
# output projection and loss calculation": chunks of one layer, v = 8 (126 + 2 layers over 16 stages of 8). Meta's
# training stack is its own (not published): the cases run the megatron-core profile's structure and H100 efficiency
# (an assumption: same 4D plan, same kinds of kernels; nothing fitted to them).
LLAMA3_TABLE4 = ("Dubey et al. 2024 (The Llama 3 Herd of Models, arXiv:2407.21783) Table 4 (also Balaji, 'Herding Llamas', "
                 "SC'24): {gpus} H100 GPUs, TP 8, CP {c}, PP 16, DP {d}, sequence {seq}, {batch_per_dp} sequences per DP "
                 "rank, 16M tokens per batch, {tflops:g} TFLOP/s per GPU ({mfu}% BF16 MFU)")


def _llama3_paper(gpus: int, context: int, seq: int, tflops: float, mfu: int) -> ValidationCase:
    tensor, pipeline, tokens = 8, 16, 16 * 2**20
    data = gpus // (tensor * pipeline * context)
    batch = tokens // seq
    return ValidationCase(
        name=f"llama3-405b-paper-{gpus}" + (f"-cp{context}" if context > 1 else ""), workload="llama3-405b", seq_len=seq,
        accelerator="h100", cluster="dgx-h100", n_devices=gpus, global_batch=batch, tensor=tensor, pipeline=pipeline,
        data=data, microbatch=1, interleave=8, sequence_parallel=True,
        microbatch_published=False, recompute="selective", metric="mcore_tflops_per_device", published=tflops,
        zero=2, context=context, rules=(("embedding_loss_in_split", True), ("zero_stages", (0, 1, 2))),
        stack="megatron-core",
        source=LLAMA3_TABLE4.format(gpus=gpus, c=context, d=data, seq=seq, batch_per_dp=batch // data, tflops=tflops,
                                    mfu=mfu))


# NeMo's long-sequence table (NeMo 24.03.01, DGX-H100, FP8): Llama 2 7B at 128K–1M tokens with context parallelism,
# TFLOP/s per GPU as NeMo counts them (NeMo's own formula counts the full s×s scores, as Megatron-Core's does:
# experiments.long_context_gap.NEMO_FLOP_FORMULA). TP, PP, DP, CP and the global batch are published (the batch in the
# table's 2025 revision, numbers unchanged); the microbatch (1) is not. The cases run the megatron-core profile
# (Transformer Engine's fused attention and its ring-exchange CP); its efficiency was fitted to a later release
# (25.09), so these are held out across releases.
NEMO_LONG_SEQUENCE = ("NVIDIA/NeMo docs/source/performance/performance_long_sequence.md (commit "
                      "0aa267117ae5f1ff9f8d8308ed3d1ba1ce939f82; the batch from commit "
                      "19fadb67b09ba94c55094d34df119d6f9c565068, 'Batch Size'), LLAMA2-7B (FP8), NeMo 24.03.01 on "
                      "DGX-H100, with-CP: sequence {k}K on {gpus} GPUs, batch {batch}, TP {t}, PP 1, DP {d}, CP {c}: "
                      "{tflops:g} TFLOP/s per GPU")


def nemo_long_case(k: int, gpus: int, tensor: int, data: int, context: int, tflops: float, batch: int) -> ValidationCase:
    """A with-CP row of NeMo's long-sequence table (:data:`NEMO_LONG_SEQUENCE`) as a case."""
    return ValidationCase(
        name=f"nemo2403-llama2-7b-fp8-{k}k-cp{context}", workload="llama2-7b", seq_len=k * 1024, accelerator="h100",
        cluster="dgx-h100", n_devices=gpus, global_batch=batch, tensor=tensor, pipeline=1, data=data, microbatch=1,
        microbatch_published=False, sequence_parallel=tensor > 1, recompute="selective",
        metric="mcore_tflops_per_device", published=tflops, number_format="fp8", zero=1, context=context,
        stack="megatron-core",
        source=NEMO_LONG_SEQUENCE.format(k=k, gpus=gpus, batch=batch, t=tensor, d=data, c=context, tflops=tflops))


# NVIDIA's DGX Cloud benchmarking recipes for Llama 3.1 8B, 70B and 405B on H100, two releases a quarter apart that
# publish the same models at the same scales with two different training stacks: v25.02 runs NeMo 24.12's Megatron-Core
# GPT model with Apex's distributed Adam (the hydra configs), v25.04 NeMo 2.0's recipes (performance mode) with
# Megatron-Core's own data-parallel wrapper and distributed optimizer (both overlapping the gradient reduce-scatter and
# the parameter all-gather). Each table is a weak-scaling series of one plan (the batch per replica fixed). Every row
# runs the megatron-core profile (MEGATRON_CORE_MODEL_RUNS), nothing fitted to them; the plans have no activation
# checkpointing and Transformer Engine's fused attention (written as selective recompute, as the H100 cases above).
DGXC_LLAMA31 = {
    "25.02": ("NVIDIA/dgxc-benchmarking llama3.1/README_{size}.md (commit 0b71cfda5163540778e2a3d2db59858bf62f96f7, "
              "release v25.02.01), 'Llama 3.1 {size} {fmt}' table: {gpus}x H100 GPUs, GBS {batch}, training step "
              "time {step:g} s; plan (TP {t}, PP {p}, CP {c}, VP {v}, MBS 1) and stack from llama3.1/llama3.1_{size}.yaml "
              "at the same commit (the nemo:24.12 container: mcore_gpt true, sequence parallelism with TP, no "
              "activation checkpointing, TE's fused attention, Apex's distributed_fused_adam with overlap_grad_sync "
              "and overlap_param_sync, grad_sync_dtype bf16)"),
    "25.04": ("NVIDIA/dgxc-benchmarking llama3.1/README.md (commit 741c886025a7665a1d690c05ff12ac29c1be7252, release "
              "v25.04), 'Llama 3.1 {size} {fmt}' table: {gpus}x H100 GPUs, training step time {step:g} s; plan from "
              "the README's configuration table (TP {t}, PP {p}, CP {c}, VP {v}, MBS 1, GBS {batch}); stack from "
              "llama3.1/pretrain_llama31.py and setup.sh at the same commit (NeMo 2.0 at d2b21556f2455b52ad7217f334bb66ea"
              "a13c0f83, llm.recipes pretrain_recipe(performance_mode=True): Megatron-Core's DistributedDataParallelConfig "
              "with overlap_grad_reduce and overlap_param_gather, the distributed optimizer, TP comm overlap, "
              "bf16_with_fp8_mixed with grad_reduce_in_fp32 False for FP8; the 405B recipe's "
              "account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split)"),
}
"""Where each DGX Cloud Llama 3.1 case comes from (:func:`_dgxc_llama31`), per release."""

DGXC_LLAMA31_WORKLOADS = {"8b": "llama3-8b", "70b": "llama3-70b", "405b": "llama3-405b"}
"""Llama 3.1's architectures at 8,192 tokens are Llama 3's (the same widths, depths, heads and vocabulary)."""


def _dgxc_llama31(release: str, size: str, number_format: str, tensor: int, pipeline: int, context: int,
                  interleave: int, rows: tuple[tuple[int, int, float], ...]) -> tuple[ValidationCase, ...]:
    """One table of :data:`DGXC_LLAMA31`: ``rows`` of ``(GPUs, global batch, step time in s)``."""
    split = (("embedding_loss_in_split", True),) if release == "25.04" and size == "405b" else ()
    return tuple(ValidationCase(
        name=f"dgxc{release.replace('.', '')}-llama31-{size}-{number_format}-{gpus}",
        workload=DGXC_LLAMA31_WORKLOADS[size], seq_len=8192, accelerator="h100", cluster="dgx-h100", n_devices=gpus,
        global_batch=batch, tensor=tensor, pipeline=pipeline, data=gpus // (tensor * pipeline * context), microbatch=1,
        interleave=interleave, sequence_parallel=tensor > 1, recompute="selective", metric="samples_s",
        published=batch / step_s, number_format=number_format, zero=1, context=context, rules=split,
        stack="megatron-core", campaign=f"dgxc-v{release}-llama31-{size}-{number_format}",
        source=DGXC_LLAMA31[release].format(size=size, fmt=number_format.upper(), gpus=gpus, batch=batch, step=step_s,
                                            t=tensor, p=pipeline, c=context, v=interleave if interleave > 1 else "n/a"))
        for gpus, batch, step_s in rows)


def _weak(gpus: tuple[int, ...], batch_per_gpu: int, steps: tuple[float, ...]) -> tuple[tuple[int, int, float], ...]:
    return tuple((g, batch_per_gpu * g, step) for g, step in zip(gpus, steps, strict=True))


DGXC_LLAMA31_CASES: tuple[ValidationCase, ...] = (
    #             release size  format  t  p  c  v   (GPUs, GBS, published step time in s)
    *_dgxc_llama31("25.02", "8b", "bf16", 1, 1, 2, 1, _weak((8, 16, 32, 64, 128), 16, (12.78, 12.99, 13.00, 13.00, 13.16))),
    *_dgxc_llama31("25.02", "8b", "fp8", 1, 1, 2, 1, _weak((8, 16, 32, 64, 128), 16, (9.44, 9.47, 9.60, 9.64, 9.73))),
    *_dgxc_llama31("25.02", "70b", "bf16", 4, 4, 2, 5, _weak((64, 128, 256, 512, 1024, 2048), 2,
                                                              (14.61, 14.70, 14.72, 14.80, 14.86, 14.84))),
    *_dgxc_llama31("25.02", "70b", "fp8", 4, 4, 2, 5, _weak((64, 128, 256, 512, 1024, 2048), 2,
                                                             (10.46, 10.52, 10.75, 10.76, 10.83, 10.99))),
    *_dgxc_llama31("25.02", "405b", "bf16", 8, 9, 2, 7, ((576, 252, 17.50), (1152, 504, 17.60), (2304, 1008, 17.70))),
    *_dgxc_llama31("25.02", "405b", "fp8", 8, 9, 2, 7, ((576, 252, 11.00), (1152, 504, 11.10), (2304, 1008, 11.20))),
    *_dgxc_llama31("25.04", "8b", "bf16", 1, 1, 2, 1, _weak((8, 16, 32, 64, 128), 16, (12.27, 12.3, 12.32, 12.33, 12.33))),
    *_dgxc_llama31("25.04", "8b", "fp8", 1, 1, 2, 1, _weak((8, 16, 32, 64, 128), 16, (9.33, 9.36, 9.43, 9.48, 9.54))),
    *_dgxc_llama31("25.04", "70b", "bf16", 4, 4, 2, 5, _weak((64, 128, 256, 512, 1024, 2048), 2,
                                                              (14.66, 14.67, 14.68, 14.67, 14.65, 14.66))),
    *_dgxc_llama31("25.04", "70b", "fp8", 4, 8, 1, 5, _weak((64, 128, 256, 512, 1024, 2048), 2,
                                                             (9.86, 9.95, 10.0, 10.07, 10.08, 10.15))),
    *_dgxc_llama31("25.04", "405b", "bf16", 8, 8, 2, 8, ((512, 256, 19.78), (1024, 512, 19.84), (2048, 1024, 19.87))),
    *_dgxc_llama31("25.04", "405b", "fp8", 8, 8, 2, 8, ((512, 256, 12.37), (1024, 512, 12.42), (2048, 1024, 12.56))),
)
"""The DGX Cloud Llama 3.1 rows (:data:`DGXC_LLAMA31`): 56 runs in twelve weak-scaling series, 8 to 2,304 GPUs."""


H100_CASES: tuple[ValidationCase, ...] = (
    #          format  GPUs  step time (s)
    _dgxc_gpt3("bf16", 128, 8.309),
    _dgxc_gpt3("bf16", 256, 8.408),
    _dgxc_gpt3("bf16", 512, 8.42),
    _dgxc_gpt3("bf16", 1024, 8.453),
    _dgxc_gpt3("bf16", 2048, 8.49),
    _dgxc_gpt3("fp8", 128, 5.626),
    _dgxc_gpt3("fp8", 256, 5.725),
    _dgxc_gpt3("fp8", 512, 5.774),
    _dgxc_gpt3("fp8", 1024, 5.82),
    _dgxc_gpt3("fp8", 2048, 5.96),
    #            round   submitter   results directory                 nodes GBS median step (s) steps logged
    _mlperf_gpt3("v3.1", "NVIDIA", "eos_n96_ngc23.09_nemo", 96, 3072, 11.0751, 600),
    _mlperf_gpt3("v3.1", "NVIDIA", "eos-dfw_n512_ngc23.09_nemo", 512, 2048, 1.6088, 864),
    _mlperf_gpt3("v3.1", "NVIDIA", "eos-dfw_n768_ngc23.09_nemo", 768, 3072, 1.6153, 600),
    _mlperf_gpt3("v3.1", "NVIDIA", "eos-dfw_n1024_ngc23.09_nemo", 1024, 4096, 1.6193, 474),
    _mlperf_gpt3("v3.1", "NVIDIA", "eos-dfw_n1280_ngc23.09_nemo", 1280, 2560, 0.9256, 690),
    _mlperf_gpt3("v3.1", "NVIDIA", "eos-dfw_n1344_ngc23.09_nemo", 1344, 2688, 0.9296, 660),
    _mlperf_gpt3("v3.1", "Azure+NVIDIA", "ND_H100_v5_n1344_pytorch", 1344, 2688, 0.9473, 660, tag="azure-"),
    _mlperf_gpt3("v3.0", "NVIDIA", "dgxh100_n64_nemo", 64, 2048, 12.0769, 864),
    _mlperf_gpt3("v3.0", "NVIDIA", "dgxh100_n96_nemo", 96, 3072, 12.1261, 592),
    _mlperf_gpt3("v3.0", "NVIDIA_CoreWeave", "coreweave_hgxh100_n96_ngc23.04_pytorch", 96, 3072, 12.2993, 600,
                 tag="coreweave-"),
    _mlperf_gpt3("v3.0", "NVIDIA_CoreWeave", "coreweave_hgxh100_n192_ngc23.04_pytorch", 192, 3072, 6.3376, 616,
                 tag="coreweave-"),
    _mlperf_gpt3("v3.0", "NVIDIA_CoreWeave", "coreweave_hgxh100_n448_ngc23.04_pytorch", 448, 2688, 2.5976, 660,
                 tag="coreweave-"),
    #            model         workload     GPUs PP VP  tokens/s per GPU
    _nemo_llama2("LLAMA2-7B", "llama2-7b", 8, 1, 1, 16847),
    _nemo_llama2("LLAMA2-13B", "llama2-13b", 16, 4, 10, 8646),
    #              release   model            workload       GPUs  GBS  t  p  c  v  tokens/s per GPU
    _bridge_llama3("25.09", "LLAMA3_70B", "llama3-70b", 64, 128, 4, 8, 1, 5, 1619),
    _bridge_llama3("25.11", "LLAMA3_70B", "llama3-70b", 64, 128, 4, 8, 1, 5, 1602),
    _bridge_llama3("26.02", "LLAMA3_70B", "llama3-70b", 64, 256, 4, 8, 1, 5, 1621),
    _bridge_llama3("25.09", "LLAMA3.1_405B", "llama3-405b", 1024, 512, 8, 8, 2, 8, 302),
    _bridge_llama3("25.11", "LLAMA3.1_405B", "llama3-405b", 1024, 512, 8, 8, 2, 8, 292),
    _bridge_llama3("26.02", "LLAMA3.1_405B", "llama3-405b", 1024, 1536, 8, 8, 2, 8, 311),
    #                   release  model        workload    GPUs GBS  precision as the page names it  tokens/s per GPU
    _bridge_llama3_fsdp("25.09", "LLAMA3_8B", "llama3-8b", 8, 128, "FP8 (the section's format)", 14079),
    _bridge_llama3_fsdp("25.11", "LLAMA3_8B", "llama3-8b", 8, 128, "FP8-CS", 14451),
    #             GPUs   c   sequence TFLOP/s MFU %
    _llama3_paper(8192, 1, 8192, 430, 43),
    _llama3_paper(16384, 1, 8192, 400, 41),
    _llama3_paper(16384, 16, 131072, 380, 38),
    #              K     GPUs  t  d  c  TFLOP/s per GPU, GBS
    nemo_long_case(128, 128, 4, 8, 4, 555, 32),
    nemo_long_case(256, 256, 4, 8, 8, 549, 16),
    nemo_long_case(512, 512, 8, 4, 16, 549, 8),
    nemo_long_case(1024, 1024, 8, 4, 32, 536, 4),
    *DGXC_LLAMA31_CASES,
)


# --- the same run on two chips: published throughput ratios ---------------------------------------------------
@dataclass(frozen=True)
class ChipRatioCase:
    """One model and plan that one training stack ran on an A100 and an H100 system; ``published`` is each chip's
    tokens/s per GPU. The ratio between the chips is what a search that ranks chips must get right.

    ``recompute``: ``"full"`` where the run checkpointed activations; otherwise ``"selective"``, because the runs use
    FlashAttention, which keeps no s×s scores and recomputes them in its backward pass (the stack's fused attention
    kernel, :mod:`phaze_env.attention`)."""

    name: str
    d_model: int
    n_layers: int
    seq_len: int
    n_devices: int
    microbatch: int
    global_batch: int
    recompute: Recompute
    published: dict[str, float]  # accelerator preset -> tokens/s per GPU
    source: str
    stack: str = "llm-foundry"  # the training software (a profile name in phaze_env.stacks), the same on both chips

    @property
    def workload(self) -> Workload:
        """MPT as a GPT-2-architecture stand-in of the same shape: d_model, layers, 4·d_model MLP, vocabulary 50,368
        and learned positions (the published parameter counts grow by seq_len × d_model with the sequence length),
        128-wide heads. MPT has no biases (GPT-2 adds 13·d per layer: < 0.03 % of the parameters)."""
        return custom_workload(f"mpt-d{self.d_model}-l{self.n_layers}-s{self.seq_len}", "GPT2Config", "GPT2LMHeadModel",
                               self.seq_len, n_embd=self.d_model, n_layer=self.n_layers, n_head=self.d_model // 128,
                               n_inner=4 * self.d_model, vocab_size=MPT_VOCAB, n_positions=self.seq_len)

    @property
    def published_ratio(self) -> float:
        return self.published["h100"] / self.published["a100"]


MPT_VOCAB = 50368
# The same performance summary on Blackwell: NVIDIA's own Megatron-Bridge recipes and releases as the H100 rows above, on
# DGX B200 (8 GPUs a node on NVLink 5) and GB200 NVL72 (72-GPU NVLink racks of 18 trays × 4 GPUs), FP8 with per-tensor
# (current) scaling: the rows the page marks FP8 or FP8-CS; the MXFP8 figures (in parentheses, or rows of their own:
# 32 × 32 block scaling) are another recipe and left out, as are the rows sharded with Megatron-FSDP (no plan of the
# Megatron-Core profile) and the Llama 3 70B rows at 4,096 tokens of the 26.06 release (not pre-training). These cases
# are predicted only through the system table's path (experiments.rival_runs.FLAGSHIP_RUNS), where the flagships run
# at the fit carried from H100 (phaze_env.stacks.CARRIED_FITS): the validation's stack profiles have no fit on them,
# so they are not in all_cases(). The recipes are the H100 rows' (sequence parallelism with TP, the distributed
# optimizer, Transformer Engine's fused attention, no activation recompute; the 405B recipe's embedding and loss split).
BRIDGE_BLACKWELL = ("NVIDIA-NeMo/Megatron-Bridge docs/performance-summary{page}.md (commit {commit}), '{release} NeMo "
                    "Container', Pre-Training, {system}, {model}: {gpus} GPUs, FP8 ({scaling}), GBS {batch}, MBS {mb}, "
                    "sequence length 8192, TP {t}, PP {p}, CP {c}, VP {v}: {tokens:g} tokens/s per GPU")
BRIDGE_SUMMARY = ("", "0a25f911b2ed6c6905a539504fdb8e5b40e3438b")
"""The page of the 26.02.01 release at the archive's commit (:data:`BRIDGE_ARCHIVE` holds 25.09 – 26.02)."""
BLACKWELL_PRECISION_LABELS = {
    "25.09": "the figure outside the parentheses; those in parentheses use 32×32 block scaling, the page's note",
    "25.11": "'FP8-CS', current scaling"}
"""How each release's page labels the FP8 figure a case takes (the others: 'FP8')."""
BLACKWELL_SYSTEMS = {"DGX-B200": ("b200", "dgx-b200"), "DGX-GB200": ("gb200", "gb200-nvl72")}
"""The performance summary's system names → the rival chip (``hardware.system.FLAGSHIP_TOPOLOGIES``) and its system
family (the cases' ``cluster``: a family of ``hardware.system.SYSTEM_FAMILIES``, not a cluster preset)."""


def _bridge_blackwell(release: str, system: str, model: str, workload: str, gpus: int, batch: int, microbatch: int,
                      tensor: int, pipeline: int, context: int, interleave: int, tokens_s: float,
                      page: tuple[str, str] = BRIDGE_ARCHIVE) -> ValidationCase:
    chip, family = BLACKWELL_SYSTEMS[system]
    scaling = BLACKWELL_PRECISION_LABELS.get(release, "'FP8'")
    return ValidationCase(
        name=f"bridge{release.replace('.', '')}-{chip}-{workload}-fp8-{gpus}", workload=workload, seq_len=8192,
        accelerator=chip, cluster=family, n_devices=gpus, global_batch=batch, tensor=tensor, pipeline=pipeline,
        data=gpus // (tensor * pipeline * context), microbatch=microbatch, interleave=interleave,
        sequence_parallel=tensor > 1, recompute="selective", metric="tokens_s_per_device", published=tokens_s,
        number_format="fp8", zero=1, context=context,
        rules=(("embedding_loss_in_split", True),) if workload == "llama3-405b" else (), stack="megatron-core",
        source=BRIDGE_BLACKWELL.format(page=page[0], commit=page[1], release=release, system=system, model=model,
                                       gpus=gpus, scaling=scaling, batch=batch, mb=microbatch, t=tensor, p=pipeline,
                                       c=context, v=interleave if interleave > 1 else "n/a", tokens=tokens_s))


FLAGSHIP_CASES: tuple[ValidationCase, ...] = (
    #                 release  system       model            workload      GPUs  GBS mbs t  p  c  v  tokens/s per GPU
    _bridge_blackwell("25.09", "DGX-B200", "LLAMA3_8B", "llama3-8b", 8, 128, 2, 1, 1, 1, 1, 29994),
    _bridge_blackwell("25.11", "DGX-B200", "LLAMA3_8B", "llama3-8b", 8, 128, 2, 1, 1, 1, 1, 30624),
    _bridge_blackwell("25.09", "DGX-B200", "LLAMA3.1_405B", "llama3-405b", 128, 64, 1, 4, 8, 2, 8, 664),
    _bridge_blackwell("25.11", "DGX-B200", "LLAMA3.1_405B", "llama3-405b", 128, 64, 1, 4, 8, 2, 8, 661),
    _bridge_blackwell("25.09", "DGX-GB200", "LLAMA3_8B", "llama3-8b", 8, 128, 2, 1, 1, 1, 1, 31357),
    _bridge_blackwell("25.11", "DGX-GB200", "LLAMA3_8B", "llama3-8b", 8, 128, 2, 1, 1, 1, 1, 31508),
    _bridge_blackwell("25.11", "DGX-GB200", "LLAMA3.1_405B", "llama3-405b", 256, 1536, 1, 4, 16, 1, 4, 813),
    _bridge_blackwell("26.02", "DGX-GB200", "LLAMA3.1_405B", "llama3-405b", 256, 1536, 1, 4, 16, 1, 4, 793),
    _bridge_blackwell("26.02.01", "DGX-GB200", "LLAMA3.1_405B", "llama3-405b", 256, 1536, 1, 4, 16, 1, 4, 818,
                      page=BRIDGE_SUMMARY),
)
"""NVIDIA's published Megatron-Bridge runs on the Blackwell flagships (:data:`BRIDGE_BLACKWELL`)."""


LLM_FOUNDRY = ("mosaicml/llm-foundry scripts/train/benchmarking/README.md (commit 061f2c7ce64e655100286584a7629e2a09f827ba), "
               "tables \"H100 80GB BF16\" and \"A100 80GB with 1600 Gbps node-node interconnect (RoCE)\": MPT-{size}, "
               "SeqLen {seq}, 8 GPUs, MicroBatchSize {mbs}, GlobalBatchSize {batch}, amp_bf16, FULL_SHARD, activation "
               "checkpointing {ckpt}: {h100:g} (H100) and {a100:g} (A100) tokens/s per GPU")


def _llm_foundry(size: str, d_model: int, n_layers: int, seq: int, mbs: int, batch: int, checkpointing: bool,
                 a100: float, h100: float) -> ChipRatioCase:
    return ChipRatioCase(
        name=f"llm-foundry-mpt-{size}-s{seq}", d_model=d_model, n_layers=n_layers, seq_len=seq, n_devices=8,
        microbatch=mbs, global_batch=batch, recompute="full" if checkpointing else "selective",
        published={"a100": a100, "h100": h100},
        source=LLM_FOUNDRY.format(size=size, seq=seq, mbs=mbs, batch=batch, ckpt=checkpointing, a100=a100, h100=h100))


RATIO_CASES: tuple[ChipRatioCase, ...] = (
    #             size    d     L   seq   mbs  batch ckpt   A100   H100 tokens/s per GPU
    _llm_foundry("1b", 2048, 24, 1024, 18, 576, False, 22112, 48910),
    _llm_foundry("1b", 2048, 24, 4096, 7, 224, False, 17807, 38535),
    _llm_foundry("3b", 2560, 32, 4096, 5, 240, False, 9457, 20964),
    _llm_foundry("7b", 4096, 32, 1024, 64, 1024, True, 4357, 10203),
    _llm_foundry("7b", 4096, 32, 4096, 16, 256, True, 3684, 8611),
    _llm_foundry("7b", 4096, 32, 8192, 8, 128, True, 3206, 6935),
    _llm_foundry("13b", 5120, 40, 4096, 10, 240, True, 2060, 4717),
)


COMPILE_BLOG = ("PyTorch blog 'Maximizing Training Throughput Using PyTorch FSDP and Torch.compile' (Team PyTorch at "
                "IBM and at Meta, 2024; pytorch/pytorch.github.io _posts), Table 1 (128 A100 80GB, 400 Gbps) and Table 2 "
                "(464 H100 80GB, 3.2 Tbps): 'Percentage gain' of MFU compile over MFU no-compile, batch size 2")
COMPILE_GAINS = {  # case (the eager run of that model and chip) → published MFU gain of compile over no-compile
    "fms-fsdp-mar24-llama2-7b": 0.20,  # MFU 0.57 → 0.68
    "fms-fsdp-mar24-llama2-34b": 0.15,  # 0.47 → 0.54
    "fms-fsdp-mar24-llama2-70b": 0.10,  # 0.50 → 0.55
    "fms-fsdp-mar24-llama2-7b-h100": 0.21,  # 0.37 → 0.45
    "fms-fsdp-mar24-llama2-34b-h100": 0.19,  # 0.32 → 0.38
    "fms-fsdp-mar24-llama2-70b-h100": 0.19,  # 0.32 → 0.38
}
"""Published gains (:data:`COMPILE_BLOG`); the 13B rows (0.17 on A100, 0.23 on H100) have no predictable plan."""
