"""The system: how many accelerators, how they are wired, the training job they run and the software that runs it.

A :class:`Cluster` is three separately typed and validated parts: its :class:`Network` (the accelerators and their
interconnect), its :class:`Setup` (global batch, optimizer) and its :class:`Stack` (the training software's
efficiency, kernels, schedule, overlaps and runnable plans). Each reader takes the part it needs
(``cluster.network.levels``, ``cluster.setup.global_batch``, ``cluster.stack.plan_rules``), and a system built from
another network keeps the whole setup and stack (:func:`point_cluster`).

A :class:`Network` is a hierarchy of *levels* (innermost first). Devices are numbered so that level 0
varies fastest: on a DGX cluster level 0 is the 8 GPUs of a node (NVLink/NVSwitch) and level 1 the nodes
(InfiniBand); on a TPUv4 pod the levels are the three dimensions of the 3D torus (ICI). PHAZE's flat
ring is one level holding every device.

Ranks follow Megatron-LM's order (Narayanan et al. 2021, §3.3: tensor-parallel ranks innermost, then
data parallel, then pipeline): a tensor-parallel group is ``t`` consecutive devices, a data-parallel
group ``d`` devices ``t`` apart, and pipeline neighbours are ``t·d`` apart. So a tensor group of ``t ≤ 8``
stays inside a DGX node, and traffic is priced on the levels a group actually spans.

Collectives (:meth:`Network.collective_s`) are hierarchical: a group spanning extents ``k_0, k_1, …`` of the
levels reduce-scatters inside level 0, then level 1 on the ``1/k_0`` shard, …, and all-gathers back
(the 2D/hierarchical ring of Jia et al. 2018, "Highly scalable deep learning training system with
mixed-precision", and NCCL's tree/ring split). Each level is a ring (Thakur et al. 2005)::

    all-reduce    Σ_i 2(k_i−1)/k_i · S_i / B_i + 2(k_i−1)·α_i,   S_i = S / Π_{j<i} k_j
    all-gather / reduce-scatter: half the bandwidth and latency terms

which for one level is the flat ring ``2(g−1)/g · S/B`` of :mod:`phaze_env.comm`. An all-to-all (expert
parallelism's dispatch and combine, ``S`` bytes per rank) is hierarchical too, one phase per level spanned,
each exchanging the whole buffer among that level's ``k_i`` positions (DeepSpeed-MoE's hierarchical
all-to-all, Rajbhandari et al. 2022 §5; Tutel's 2D hierarchical all-to-all, Hwang et al. 2023)::

    all-to-all    Σ_i (k_i−1)/k_i · S / B_i + (k_i−1)·α_i     (a torus dimension: its ring's bisection bound)
 ``B_i`` is the *achieved*
per-device bandwidth: nominal × the level's efficiency. A point-to-point send crosses the outermost level
on which the two devices differ, at that level's point-to-point bandwidth.

Several TPU slices (``slices`` > 1, Cloud TPU Multislice) add one outermost level: the slices, joined by the
data-centre network (DCN) through their hosts, ``dcn_bandwidth_Bps`` per chip. Devices are numbered slice by
slice, so a group ``n/slices`` or more apart crosses the DCN and anything closer stays on the slice's ICI.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import asdict, dataclass, replace
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from phaze_env import comm
from phaze_env.hardware.accelerator import A100_SMS
from phaze_env.host import check_host_op_s
from phaze_env.moe_dispatch import MOE_DISPATCHES
from phaze_env.plan_spec import PlanRules
from phaze_env.hardware.cost import (A100_NVLINKS, H100_NVLINKS, NVLINK_LINK_BPS, TPUV4_ICI_LINK_BPS,
                                     links_per_direction_Bps)
from phaze_env.hardware.system import (SCALE_UP_DOMAIN, TOPOLOGIES, TORUS_CUBE_SIDE, TORUS_NEIGHBOURS, TORUS_POD_CHIPS,
                                       SystemPoint, torus_pods)

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall")

# --- published constants (each cites its source) -----------------------------------------------------
NVLINK3_BPS = A100_NVLINKS * NVLINK_LINK_BPS
"""A100 NVLink 3: 12 links × 25 GB/s per direction = 300 GB/s per GPU per direction ("600 GB/s"
bidirectional; NVIDIA A100 Tensor Core GPU datasheet / Architecture whitepaper, 2020). From the a100 chip's
link constants (:mod:`phaze_env.hardware.cost`), so the chip and its cluster preset cannot disagree."""
NVLINK4_BPS = H100_NVLINKS * NVLINK_LINK_BPS
"""H100 SXM NVLink 4: 18 links × 25 GB/s = 450 GB/s per GPU per direction ("900 GB/s" bidirectional;
NVIDIA H100 datasheet, 2022). From the h100 chip's link constants, as :data:`NVLINK3_BPS`."""
HDR_IB_PER_GPU_BPS = 200e9 / 8
"""DGX A100: 8 ConnectX-6 HDR InfiniBand adapters of 200 Gb/s for compute, one per GPU = 25 GB/s per GPU
(NVIDIA DGX A100 datasheet / user guide)."""
H800_NVLINK_BPS = 400e9 / 2
"""H800 SXM5 NVLink: 400 GB/s bidirectional, 200 GB/s per GPU per direction (NVIDIA H800 Tensor Core GPU datasheet:
"NVLink 400GB/s", against the H100 SXM's 900 GB/s; the China-export part: the same GH100 die, SMs, clocks and 80 GB
HBM3 as the H100 SXM5, NVLink cut to 8 links). DeepSeek-V3 (arXiv:2412.19437 §3.2.2) measures 160 GB/s of it; the
preset's NCCL efficiency (0.8 of 200) is the same as the other DGX presets'."""
NDR_IB_PER_GPU_BPS = 400e9 / 8
"""DGX H100: 8 ConnectX-7 NDR InfiniBand ports of 400 Gb/s, one per GPU = 50 GB/s per GPU (NVIDIA DGX
H100 datasheet)."""
OMNIPATH_PER_GPU_BPS = 4 * 100e9 / 8 / 8
"""Jean Zay's A100 nodes (where BLOOM was trained): "8 GPUs per node Using NVLink 4 inter-gpu connects, 4
OmniPath links" of 100 Gb/s (bigscience-workshop/bigscience train/tr11-176B-ml/README.md, Hardware; Le Scao et
al. 2022, BLOOM, §3.4.1) = 50 GB/s per node = 6.25 GB/s per GPU."""
FMS_FSDP_CLUSTERS = ("foundation-model-stack/fms-fsdp README.md at commit 5e522b4 (2024-03-13), 'Training throughput "
                     "benchmarks': 'A100 80G 128 GPUs with 400Gbps' and 'H100 96 GPUs with 800 Gbps'; pytorch/pytorch.github.io "
                     "_posts/2024-03-13-maximizing-training.md: '128 A100 GPUs with 400Gbps network connectivity and GPU "
                     "direct RDMA', 'an A100 cluster with 128 GPUs and 400Gbps inter-node interconnect, and an H100 cluster "
                     "with 96 GPUs and 800Gbps inter-node interconnect'; 8 GPUs per node: fms-fsdp scripts/train.sh "
                     "(--nproc_per_node=8) and docs/configurations.md ('HSDP will shard your model across 8 gpus in each node')")
"""Where the IBM clusters of the fms-fsdp (PyTorch FSDP) runs are described."""
IBM_A100_NODE_BPS = 400e9 / 8
"""Inter-node bandwidth of a node of the IBM A100 cluster the fms-fsdp runs used: 400 Gb/s = 50 GB/s per direction
(:data:`FMS_FSDP_CLUSTERS`; the sources say "400Gbps inter-node interconnect" without saying per node or per GPU:
read here as per node, a fourth of a DGX A100's 8×200 Gb/s — an assumption of this preset)."""
IBM_H100_NODE_BPS = 800e9 / 8
"""Inter-node bandwidth of a node of the IBM H100 cluster of the same benchmarks: 800 Gb/s = 100 GB/s per direction,
per node (:data:`FMS_FSDP_CLUSTERS`; read as per node, as :data:`IBM_A100_NODE_BPS`)."""
NCCL_EFFICIENCY = 0.8
"""Achieved fraction of the line rate for NCCL ring collectives: the NCCL maintainer puts the protocol
overhead at ≈ 20 % ("450 GB/s is the line rate. With the protocol overhead (~20%) NCCL can get an
effective NVLink bandwidth of 370 GB/s", NVIDIA/nccl-tests issue #212, 2024); 370/450 = 0.82. The same
factor is used for InfiniBand (assumption: no public per-level figure is cited for it here)."""
NVSWITCH_LATENCY_S = 2e-6
"""Per-step latency of an intra-node NCCL ring step, order of magnitude of small-message NCCL latencies
over NVLink (a few µs; nccl-tests small-size all_reduce_perf rows)."""
IB_LATENCY_S = 5e-6
"""Per-step latency across InfiniBand (≈ 1–2 µs wire + NCCL proxy overhead; nccl-tests multi-node
small-message latencies are a few µs to ~10 µs)."""

ICI_LATENCY_S = 1e-6
"""Per-hop ICI latency, order of a microsecond (Jouppi et al. 2023 describe µs-scale link latency)."""
MEGATRON_A100_EFFICIENCY = 0.878
"""Achieved fraction of the a100 preset's per-operator speed in Megatron-LM training on DGX A100 (the 2022 release of
Korthikanti et al.), *fitted to one published measurement*: Korthikanti et al. 2022 (arXiv:2205.05198) Table 5, GPT
175B with full recompute on 64 A100s, 18.13 s per batch of 64 (the exact fit is 0.8783,
``experiments.validation_fit.fit_efficiency``; ``experiments/validate.py`` marks that case as the calibration and
leaves it out of the mean error), with each GEMM's wave quantisation over the A100's 108 SMs priced
(``Stack.gemm_wave_sms``, :func:`phaze_env.hardware.estimator.wave_quantisation`), the stack's attention dropout priced
as the memory-bound kernel it is in that code (``Stack.attention_dropout_kernel``,
:func:`phaze_env.attention.attention_dropout_bytes`) and full recompute rerunning the transformer layers only, not
the LM head (``recompute_fwd_s``, :func:`phaze_env.evaluate._layer_chain`). The a100 preset reproduces isolated
kernels at their best shapes (an 8192³ GEMM at Bekman's measured 85.9 % of peak, MAMF); what this factor absorbs is
what an end-to-end step adds to them and the kernel model does not price: launches and synchronisation between the
≈ 30 kernels of a layer, NCCL kernels sharing the SMs. History: 0.807 without the wave quantisation (the factor then
absorbed the 175B shapes' waves, 0.916 of full, and charged them to every model: 530B and 1T, whose shapes fill
0.97 of their waves, came out 5–13 % slow, ``experiments.table5_scaling``); 0.7919 with neither the dropout nor the
LM head's non-recompute; 0.7866 with the recompute rule alone. Only measured for A100 + Megatron-LM (2022); the 2021
release's runs have their own fit (``phaze_env.stacks.MEGATRON_LM_2021_A100_EFFICIENCY``)."""
TPUV4_DCN_PER_CHIP_BPS = 81e12 / 8 / 6144
"""Achieved data-centre-network bandwidth per TPU v4 chip, 1.65 GB/s: PaLM's cross-pod gradient exchange "amounts
to an aggregate burst of 81 Tbps across all hosts" of its 6144 chips (Chowdhery et al. 2022, arXiv:2204.02311, §4,
Pathways on two TPU v4 pods; 1,536 hosts of 4 chips, ≈ 53 Gb/s per host). A measured burst rate, not a NIC's line
rate: it is used as the achieved per-chip bandwidth of the DCN level (efficiency 1)."""
DCN_LATENCY_S = 10e-6
"""Per-step latency of a collective across the data-centre network: an *assumption* (order of a host-to-host
round trip through the data-centre fabric, tens of µs at most); no TPU-specific figure is published. At the
DCN all-reduces of the MaxText cases (hundreds of MB per chip) it is under 0.01 % of the transfer."""
PHAZE_LINK_BPS = 4e9
"""PHAZE's system default: one flat interconnect at 4 GB/s per device (PHAZE, ICML 2024, public code)."""


@dataclass(frozen=True)
class Optimizer:
    """Per-parameter bytes of one optimizer, as multiples of the bf16 weight bytes (2 bytes/param).

    ``state_factor``: optimizer state kept per device (gradients are counted separately);
    ``step_factor``: bytes read + written by the update step (HBM-bound elementwise kernel);
    ``gradient_factor``: the gradient buffer the optimizer accumulates into, 1x the weights (bf16, ZeRO's accounting,
    ``phaze_env.placement.inputs.GRADIENT_FACTOR``) unless it keeps them wider. The data-parallel collectives carry
    bf16 gradients either way (``GRADIENT_FACTOR``).
    """

    state_factor: float
    step_factor: float
    gradient_factor: float = 1.0


OPTIMIZERS = {
    # PHAZE's default: SGD with one bf16 momentum buffer. Step: read weight, gradient, momentum and
    # write weight, momentum = 5 bf16 tensors.
    "sgd": Optimizer(state_factor=1.0, step_factor=5.0),
    # Mixed-precision Adam (Micikevicius et al. 2018; ZeRO, Rajbhandari et al. 2020 §3.1: "2Ψ + 2Ψ + 12Ψ"
    # = 16 bytes/param): fp32 master weights + two fp32 moments = 12 bytes/param = 6x the bf16 weights.
    # Step: read fp32 master, m, v (12 B) and the bf16 gradient (2 B), write master, m, v (12 B) and the
    # bf16 weights (2 B) = 28 bytes/param = 14x the bf16 weight bytes.
    "adam": Optimizer(state_factor=6.0, step_factor=14.0),
    # DeepSeek-V3's AdamW (arXiv:2412.19437 §3.3.3, "Low-Precision Optimizer States": "We adopt the BF16 data format
    # instead of FP32 to track the first and second moments in the AdamW optimizer ... However, the master weights
    # (stored by the optimizer) and gradients (used for batch size accumulation) are still retained in FP32"): fp32
    # master weights (4 B) + two bf16 moments (4 B) = 8 bytes/param = 4x the bf16 weights; fp32 gradients = 2x.
    # Step: read master, m, v (8 B) and the fp32 gradient (4 B), write master, m, v (8 B) and the bf16 weights (2 B) =
    # 22 bytes/param = 11x.
    "adamw-bf16-moments": Optimizer(state_factor=4.0, step_factor=11.0, gradient_factor=2.0),
}


@dataclass(frozen=True)
class Level:
    """One level of the hierarchy: ``size`` units of the level below, and its per-device links."""

    size: int
    bandwidth_Bps: float  # achieved per-device bandwidth of a ring collective on this level
    latency_s: float
    p2p_bandwidth_Bps: float  # achieved bandwidth of one point-to-point send across this level


def _positive_ints(owner: object, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(owner, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"cluster {name} must be a positive integer, got {value!r}")


def _bools(owner: object, names: tuple[str, ...]) -> None:
    for name in names:
        if not isinstance(getattr(owner, name), bool):
            raise ValueError(f"cluster {name} must be True or False, got {getattr(owner, name)!r}")


def _fractions(owner: object, names: tuple[str, ...]) -> None:
    """Each of ``names`` an achieved fraction in (0, 1]."""
    for name in names:
        if not 0 < getattr(owner, name) <= 1:
            raise ValueError(f"cluster {name} must be in (0, 1], got {getattr(owner, name)!r}")


@dataclass(frozen=True)
class Network:
    """The accelerators and their interconnect (defaults: PHAZE's flat 4 GB/s ring).

    ``link_bandwidth_Bps`` / ``link_latency_s`` are the per-device *inter-node* (outermost) links;
    ``devices_per_node`` > 1 adds an intra-node level with ``node_bandwidth_Bps`` / ``node_latency_s``.
    ``torus_dims`` (e.g. ``(16, 16, 16)``) instead makes every level a torus dimension whose rings run in
    both directions over ``link_bandwidth_Bps`` links (2 links per device per dimension; a point-to-point
    send uses one). ``*_efficiency`` is the achieved fraction of the nominal bandwidth. ``slices`` > 1 adds the
    data-centre network between slices (module docstring). ``name``: the preset it was built as.
    """

    n_devices: int = 1024
    link_bandwidth_Bps: float = PHAZE_LINK_BPS
    link_latency_s: float = 0.0
    devices_per_node: int = 1
    node_bandwidth_Bps: float = math.inf
    node_latency_s: float = 0.0
    link_efficiency: float = 1.0
    node_efficiency: float = 1.0
    torus_dims: tuple[int, ...] = ()
    name: str = "custom"
    slices: int = 1
    dcn_bandwidth_Bps: float = math.inf
    dcn_latency_s: float = 0.0

    def __post_init__(self) -> None:
        _positive_ints(self, ("n_devices", "devices_per_node", "slices"))
        for name in ("link_bandwidth_Bps", "node_bandwidth_Bps", "dcn_bandwidth_Bps"):
            if not getattr(self, name) > 0:
                raise ValueError(f"cluster {name} must be positive, got {getattr(self, name)!r}")
        for name in ("link_latency_s", "node_latency_s", "dcn_latency_s"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"cluster {name} must be finite and non-negative, got {value!r}")
        _fractions(self, ("link_efficiency", "node_efficiency"))
        if self.n_devices % self.slices:
            raise ValueError(f"cluster of {self.n_devices} devices cannot be split into {self.slices} equal slices")
        if self.slices > 1 and not math.isfinite(self.dcn_bandwidth_Bps):
            raise ValueError(f"a cluster of {self.slices} slices needs the network between them (a finite dcn_bandwidth_Bps); "
                             "of the presets only tpuv4-pod has one")
        object.__setattr__(self, "torus_dims", tuple(int(k) for k in self.torus_dims))
        if self.torus_dims and (self.devices_per_node != 1 or any(k < 1 for k in self.torus_dims)
                                or math.prod(self.torus_dims) < self.slice_devices):
            raise ValueError(f"torus_dims {self.torus_dims} must be positive, hold all {self.slice_devices} devices of a "
                             "slice, and not be combined with devices_per_node")
        if self.slices > 1 and math.prod(level.size for level in self.levels[:-1]) != self.slice_devices:
            raise ValueError(f"each of the {self.slices} slices must fill its levels exactly: "
                             f"{' × '.join(str(level.size) for level in self.levels[:-1])} ≠ {self.slice_devices} devices")

    @property
    def slice_devices(self) -> int:
        """Devices of one slice (all of them when ``slices`` is 1)."""
        return self.n_devices // self.slices

    @cached_property
    def levels(self) -> tuple[Level, ...]:
        dcn = (Level(self.slices, self.dcn_bandwidth_Bps, self.dcn_latency_s, self.dcn_bandwidth_Bps),) if self.slices > 1 else ()
        inter_Bps = self.link_bandwidth_Bps * self.link_efficiency
        if self.torus_dims:
            return tuple(Level(k, 2 * inter_Bps, self.link_latency_s, inter_Bps) for k in self.torus_dims) + dcn
        outer = Level(-(-self.slice_devices // self.devices_per_node), inter_Bps, self.link_latency_s, inter_Bps)
        if self.devices_per_node == 1:
            return (outer,) + dcn
        intra_Bps = self.node_bandwidth_Bps * self.node_efficiency
        return (Level(self.devices_per_node, intra_Bps, self.node_latency_s, intra_Bps), outer) + dcn

    def extents(self, group: int, stride: int, outer: tuple[int, int] = (1, 0)) -> tuple[int, ...]:
        """How many distinct positions of each level the devices ``i·stride + j·outer_stride`` span
        (``i < group``, ``j < outer_count``, ``outer = (outer_count, outer_stride)``)."""
        return _extents(self.level_sizes, group, stride, outer)

    @cached_property
    def level_sizes(self) -> tuple[int, ...]:
        """Each level's size, innermost first (what :meth:`extents` counts positions over)."""
        return tuple(level.size for level in self.levels)

    def collective_s(self, kind: str, payload_bytes: float, group: int, stride: int = 1,
                     outer: tuple[int, int] = (1, 0)) -> float:
        """Time of a hierarchical collective over ``group`` devices ``stride`` apart (module docstring); with
        ``outer = (k, s)`` over ``k`` such blocks ``s`` apart (``group·k`` devices: a group of two rank-order
        dimensions with another between them, e.g. Megatron-Core's expert-data-parallel ranks, the context-parallel
        ranks times the data-parallel ranks ``t·c·e`` apart)."""
        if kind not in COLLECTIVES:
            raise ValueError(f"unknown collective {kind!r}; expected one of {', '.join(COLLECTIVES)}")
        if group * outer[0] <= 1 or payload_bytes == 0:
            return 0.0
        extents = self.extents(group, stride, outer)
        if kind == "alltoall":  # every phase exchanges the whole buffer; nothing shrinks between levels
            return sum(comm.alltoall_s(payload_bytes, extent, level.bandwidth_Bps, level.latency_s, ring=bool(self.torus_dims))
                       for level, extent in zip(self.levels, extents) if extent > 1)
        ring = comm.allreduce_s if kind == "allreduce" else comm.allgather_s
        total, shard = 0.0, float(payload_bytes)
        for level, extent in zip(self.levels, extents):
            if extent > 1:
                total += ring(shard, extent, level.bandwidth_Bps, level.latency_s)
                shard /= extent
        return total

    def p2p_level(self, stride: int, hops: int) -> Level | None:
        """The outermost level crossed by the sends ``i·stride → (i+1)·stride`` for ``i < hops`` (None: no send)."""
        if hops < 1:
            return None
        return self.levels[_p2p_level_index(self.level_sizes, stride, hops)]

    def p2p_s(self, payload_bytes: float, stride: int, hops: int = 1) -> float:
        """Slowest point-to-point send between devices ``stride`` apart (pipeline neighbours)."""
        level = self.p2p_level(stride, hops)
        return 0.0 if level is None else comm.p2p_s(payload_bytes, level.p2p_bandwidth_Bps, level.latency_s)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["torus_dims"] = list(self.torus_dims)
        if self.slices == 1:  # the DCN fields only when there are slices: a one-slice cluster's dict (and cache key) is unchanged
            for name in ("slices", "dcn_bandwidth_Bps", "dcn_latency_s"):
                data.pop(name)
        return data

    def describe(self) -> str:
        """The levels and their achieved bandwidths."""
        parts = [f"{level.size}× @ {level.bandwidth_Bps / 1e9:g} GB/s" for level in self.levels]
        if self.slices > 1:
            parts[-1] += " (slices, DCN)"
        return f"{self.name}: {self.n_devices} devices, " + " / ".join(parts) + " (achieved, per device)"


@dataclass(frozen=True)
class Setup:
    """The training job run on the network: the global batch (samples per step) and the optimizer (``"sgd"``:
    PHAZE's, ``"adam"``: mixed-precision Adam, :data:`OPTIMIZERS`)."""

    global_batch: int = 4096
    optimizer: str = "sgd"

    def __post_init__(self) -> None:
        _positive_ints(self, ("global_batch",))
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"cluster optimizer must be one of {sorted(OPTIMIZERS)}, got {self.optimizer!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


DP_OVERLAP_LACKING = {
    "megatron-lm": "Megatron-LM of 2021-22 all-reduces the gradients after the pipeline flush (--overlap-grad-reduce "
                   "and --overlap-param-gather came with Megatron-Core, 2023); use the megatron-core stack",
    "megatron-deepspeed": "DeepSpeed's PipelineEngine reduces the gradients in its ReduceGrads step after the last "
                          "backward pass (deepspeed/runtime/pipe/engine.py)",
}
"""The training stacks (``PlanRules.stack``) that cannot run ``Stack.dp_comm_overlap``, each with why (a stack whose
overlap is only unpublished is not here: its profile leaves the knob off, :mod:`phaze_env.stacks`)."""


MOE_ONLY_KNOBS = {"folded_experts": "the expert grid folded over the t·c·d ranks",
                  "recompute_moe": "the MoE blocks rerun in the backward pass"}
"""Structural :class:`Stack` fields that act on a mixture-of-experts model's blocks only (a dense model is refused with
them on, naming the knob), each with what it does. ``Stack.moe_probs_in_activation`` is not one: it says how the
stack's MoE code applies the router's weights (on in the ``megatron-core`` profiles, whose dense runs it leaves as
they are), not a choice a plan makes."""


PIPELINE_SCHEDULES = ("1f1b", "dualpipe")
"""The pipeline schedules a :class:`Stack` may run (``Stack.pipeline_schedule``; priced by
:class:`phaze_env.placement.inputs.PipelineSchedule`)."""


@dataclass(frozen=True)
class Stack:
    """The training software: what it runs and how fast (defaults: PHAZE's setting, the model as it is).

    ``framework_efficiency`` is the fraction of the accelerator model's per-operator speed that the training
    software achieves end to end (every operator's device time is divided by it; collectives are not):
    1 reproduces the model (PHAZE's setting), the ``dgx-a100`` preset carries :data:`MEGATRON_A100_EFFICIENCY` (and
    the attention dropout kernel it was fitted with, ``attention_dropout_kernel``).
    ``interleaved_schedule`` (the stack offers Megatron-LM's interleaved 1F1B, ``v > 1``) and
    ``pipeline_scatter_gather`` (a pipeline send across a slower level than the tensor group's goes ``1/t``
    per tensor rank and is all-gathered inside it, Narayanan et al. 2021 §4.1) are the training stack's
    structure, which the placement DP honours; so is ``attention_efficiency``: above 0 the stack runs the attention
    core as a fused causal flash kernel that sustains that fraction of the tensor cores' bf16 peak on the FLOPs it
    keeps (:mod:`phaze_env.attention`); 0 (the default) keeps the traced eager attention; and so is
    ``hybrid_allreduce_overlapped``: under hybrid sharding (``PlanSpec.shard_group``) whether each layer's gradient
    shard is all-reduced across the shard groups inside the backward pass, overlapped with it (PyTorch FSDP's
    ``HYBRID_SHARD``), or once after the backward pass, not overlapped (``False``: the jax-xla profile), and, when it
    is overlapped, ``hybrid_allreduce_exposure``: the fraction of that all-reduce's time each layer still adds on top
    of what its backward pass hides (0: all hidden; a stack's fitted figure, :mod:`phaze_env.stacks`); and so is
    ``plan_rules`` (:class:`~phaze_env.plan_spec.PlanRules`: which pipeline splits, interleavings and ZeRO stages the
    stack can run; the DP searches only those); and so is ``unfused_elementwise``: the stack runs every traced
    elementwise operator as a kernel of its own that reads its operands from HBM and writes its result back (eager
    PyTorch without ``torch.compile``), instead of fused into the matmul before it or into one chain (the traced
    graph's :func:`~phaze_env.workloads.model.fuse`, as a compiler does; ``Op.eager_bytes``, priced in
    :func:`phaze_env.pricing.price_ops`); and so is ``tp_comm_overlap``: each tensor-parallel collective fed by GEMMs
    is split with them into the ring's ``t`` chunks and pipelined (Transformer Engine's userbuffers, Megatron-Core's
    ``--tp-comm-overlap``), leaving exposed only what :func:`~phaze_env.hardware.estimator.chunked_exposed_s` gives;
    and so is ``dp_comm_overlap``: the data-parallel collectives of ZeRO-0/1 run bucket by bucket under the last
    backward pass (gradients) and the next step's first forward pass (the distributed optimizer's weights),
    Megatron-Core's ``--overlap-grad-reduce`` / ``--overlap-param-gather``, leaving exposed only what
    :mod:`phaze_env.placement.dp_overlap` gives (a stack known to run them after the backward pass refuses it:
    :data:`DP_OVERLAP_LACKING`); and so are ``moe_dispatch`` and ``moe_node_limit``: how expert parallelism's tokens travel, a flat all-to-all of
    every (token, expert) copy or a node-deduplicated hierarchical one, and node-limited routing
    (:mod:`phaze_env.moe_dispatch`); and so is ``moe_alltoall_overlap``: the dispatch and combine of one microbatch
    run under another microbatch's compute (:func:`phaze_env.moe_dispatch.exposed_alltoall_s`), with
    ``moe_comm_sm_share`` of the chip's compute units held by the communication kernels meanwhile; and so is
    ``attention_dropout_kernel``: where it runs the attention unfused (``attention_efficiency`` 0), the stack runs the
    dropout on the attention probabilities as a memory-bound kernel of its own over the ``s × s`` scores (Megatron-LM
    2021–22), paid per attention layer when the workload trains with attention dropout
    (:func:`phaze_env.attention.attention_dropout_bytes`); a fused attention kernel applies dropout on chip and pays
    none of it, whatever this field says; and so is ``sequence_parallel_kernels``: at tensor width ``t > 1`` the
    stack runs the operators outside the tensor-parallel region (norms, residual adds) on its ``s/t`` tokens and casts
    the replicated FP8 GEMM operands before the all-gather (Megatron-Core with Transformer Engine, where TP
    communication overlap requires sequence parallelism; :func:`phaze_env.pricing.sequence_split`); off, they are
    priced on all ``s`` tokens on every rank (sequence parallelism then saves memory only); and so is ``host_op_s``:
    above 0 the stack issues its kernels eagerly from the host at that many seconds per traced operator, so a
    transformer layer's pass takes at least its kernels' issue time and each device-to-host sync of its expert dispatch
    stalls the device (:mod:`phaze_env.host`); 0 (the default): the host never limits (CUDA graphs, or not modelled).
    And so is ``pipeline_schedule``: ``"1f1b"`` (PipeDream-Flush and, with ``interleaved_schedule``, its interleaved
    variant) or ``"dualpipe"`` (DeepSeek-V3's bidirectional schedule, arXiv:2412.19437 §3.2.1: a shorter bubble, two
    copies of the weights and ``p + 1`` microbatches in flight per device, ``p`` even, ``m_r ≥ 2p`` and even, no
    interleaving; :class:`~phaze_env.placement.inputs.PipelineSchedule`). And so is
    ``recompute_norms_up_projections``: the stack reruns every RMSNorm and the MLA up-projections in the backward pass
    instead of keeping their outputs (DeepSeek-V3's HAI-LLM, arXiv:2412.19437 §3.2.3: "We recompute all RMSNorm
    operations and MLA up-projections during back-propagation, thereby eliminating the need to persistently store their
    output activations"): the stash loses those outputs and what the attention's q and k are built from them, and the
    backward pass pays their fused operators' forward time (:mod:`phaze_env.workloads.model`,
    ``norm_up_projection_recompute``). A model without RMSNorm or MLA keeps its stash. And so is ``gemm_wave_sms``:
    above 0, the GEMM library runs each GEMM as one thread block per :data:`~phaze_env.hardware.estimator.CUBLAS_TILE`
    output tile in waves over that many SMs, and each tensor-core operator's compute is divided by its GEMMs' wave
    quantisation (:func:`~phaze_env.hardware.estimator.wave_quantisation`; the chip's measured GEMM rate is the best
    shapes', MAMF, whose waves are nearly full); 0 (the default): not priced, the framework efficiency absorbs it.
    Set per chip with the efficiency it was fitted with (``ChipFit.gemm_wave_sms``). And so is ``folded_experts``:
    the stack folds its expert grid over the tensor-, context- and data-parallel ranks of a stage with expert tensor
    parallelism 1 (Megatron-Core's MoE parallel folding, ``--expert-tensor-parallel-size 1``: Liu et al. 2025, "MoE
    Parallel Folding", arXiv:2504.14960; ``megatron/core/parallel_state.py``, the expert ``RankGenerator`` of order
    ``tp-ep-dp-pp``): each rank holds ``E/e`` whole experts, ``e`` dividing ``t·c·d``; the ``e`` ranks of an
    expert-parallel group are consecutive; each rank routes its own ``s/(t·c)`` tokens (Megatron-Core asserts sequence
    parallelism with MoE at ``t > 1``), so the MoE block has no tensor-parallel collective; an expert shard is
    replicated on ``t·c·d/e`` ranks ``e`` apart. Off (the default), experts are split by ``t`` as the dense MLP is and
    ``e`` divides ``d`` (:mod:`phaze_env.workloads.model`, :func:`~phaze_env.workloads.model.at_expert_rank`). And so
    is ``recompute_moe``: the stack reruns every MoE block in the backward pass (Megatron-Core's ``--recompute-modules
    moe``, a checkpoint around the MoE layer), keeping only its input: the stash loses every tensor the block produces
    (:func:`~phaze_env.workloads.model.moe_block_recompute`), and the backward pass pays the block's fused forward
    operators and its forward dispatch and combine again. A dense model has no MoE block to rerun. And so is
    ``moe_probs_in_activation``: the stack multiplies the router's probabilities into the experts' activation
    (Megatron-Core since 2025: ``activation_func_with_probs`` in ``megatron/core/transformer/moe/experts.py``), so the
    combine keeps no expert output for their gradient: the stash loses the experts' down-projection outputs the traced
    combine keeps (:func:`~phaze_env.workloads.model.combine_weighting_saved`; the multiply's own time, on the
    activation instead of the output, is not re-priced). A dense model has no router: the field leaves it as it is.
    And so is ``main_grad_accumulation_bytes``: the HBM bytes per weight that each microbatch's backward pass spends
    accumulating the weight gradients into the main-gradient buffer the optimizer reads (Megatron-Core's
    ``gradient_accumulation_fusion``: Transformer Engine's weight-gradient GEMM reads and writes the ``main_grad``
    buffer, ``fuse_wgrad_accumulation``), priced in series with the layer's backward pass at the chip's achieved HBM
    bandwidth (:func:`phaze_env.evaluate.main_grad_accumulation_s`); 0 (the default): not priced.
    :mod:`phaze_env.stacks` sets them per named stack and chip.
    """

    framework_efficiency: float = 1.0
    interleaved_schedule: bool = True
    pipeline_scatter_gather: bool = True
    attention_efficiency: float = 0.0
    hybrid_allreduce_overlapped: bool = True
    hybrid_allreduce_exposure: float = 0.0
    unfused_elementwise: bool = False
    plan_rules: PlanRules = PlanRules()
    tp_comm_overlap: bool = False
    dp_comm_overlap: bool = False
    moe_dispatch: str = "alltoall"
    moe_node_limit: int = 0
    moe_alltoall_overlap: bool = False
    moe_comm_sm_share: float = 0.0
    attention_dropout_kernel: bool = False
    sequence_parallel_kernels: bool = False
    host_op_s: float = 0.0
    pipeline_schedule: str = "1f1b"
    recompute_norms_up_projections: bool = False
    gemm_wave_sms: int = 0
    folded_experts: bool = False
    recompute_moe: bool = False
    moe_probs_in_activation: bool = False
    main_grad_accumulation_bytes: float = 0.0

    def __post_init__(self) -> None:
        check_host_op_s(self.host_op_s)
        if (isinstance(self.main_grad_accumulation_bytes, bool) or not isinstance(self.main_grad_accumulation_bytes,
                                                                                    (int, float))
                or not 0 <= self.main_grad_accumulation_bytes < math.inf):
            raise ValueError("cluster main_grad_accumulation_bytes must be a finite number of bytes per weight >= 0 "
                             f"(0: not priced), got {self.main_grad_accumulation_bytes!r}")
        if not isinstance(self.gemm_wave_sms, int) or isinstance(self.gemm_wave_sms, bool) or self.gemm_wave_sms < 0:
            raise ValueError(f"cluster gemm_wave_sms must be a non-negative integer (0: wave quantisation not priced), "
                             f"got {self.gemm_wave_sms!r}")
        if isinstance(self.plan_rules, dict):
            object.__setattr__(self, "plan_rules", PlanRules.from_dict(self.plan_rules))
        if not isinstance(self.plan_rules, PlanRules):
            raise ValueError(f"cluster plan_rules must be a PlanRules, got {type(self.plan_rules).__name__}")
        if self.pipeline_schedule not in PIPELINE_SCHEDULES:
            raise ValueError(f"cluster pipeline_schedule must be one of {', '.join(PIPELINE_SCHEDULES)}, got "
                             f"{self.pipeline_schedule!r}")
        if self.pipeline_schedule == "dualpipe" and self.interleaved_schedule:
            raise ValueError("cluster pipeline_schedule='dualpipe' runs no interleaved stages (each device holds its "
                             "stage and the mirror one, arXiv:2412.19437 §3.2.1): set interleaved_schedule=False")
        if self.pipeline_schedule == "dualpipe" and self.dp_comm_overlap:
            raise ValueError("cluster dp_comm_overlap is modelled on 1F1B's drain (Megatron-Core's last backward "
                             "microbatch, phaze_env.placement.dp_overlap), not with pipeline_schedule='dualpipe'")
        if self.pipeline_schedule == "dualpipe" and not self.plan_rules.pipeline:
            raise ValueError(f"cluster pipeline_schedule='dualpipe' needs a stack that pipelines; "
                             f"{self.plan_rules.stack or 'this stack'} runs p = 1 only (plan_rules.pipeline)")
        _fractions(self, ("framework_efficiency",))
        if not 0 <= self.attention_efficiency <= 1:
            raise ValueError(f"cluster attention_efficiency must be in [0, 1], got {self.attention_efficiency!r}")
        if not 0 <= self.hybrid_allreduce_exposure <= 1:
            raise ValueError(f"cluster hybrid_allreduce_exposure must be in [0, 1], got {self.hybrid_allreduce_exposure!r}")
        _bools(self, ("interleaved_schedule", "pipeline_scatter_gather", "hybrid_allreduce_overlapped",
                      "unfused_elementwise", "tp_comm_overlap", "dp_comm_overlap", "moe_alltoall_overlap",
                      "attention_dropout_kernel", "sequence_parallel_kernels", "folded_experts", "recompute_moe",
                      "moe_probs_in_activation"))
        if self.dp_comm_overlap and self.plan_rules.stack in DP_OVERLAP_LACKING:
            raise ValueError(f"stack {self.plan_rules.stack!r} cannot run dp_comm_overlap: "
                             f"{DP_OVERLAP_LACKING[self.plan_rules.stack]}")
        if self.moe_dispatch not in MOE_DISPATCHES:
            raise ValueError(f"cluster moe_dispatch must be one of {', '.join(MOE_DISPATCHES)}, got {self.moe_dispatch!r}")
        if not isinstance(self.moe_node_limit, int) or isinstance(self.moe_node_limit, bool) or self.moe_node_limit < 0:
            raise ValueError(f"cluster moe_node_limit must be a non-negative integer (0: no limit), got "
                             f"{self.moe_node_limit!r}")
        if not 0 <= self.moe_comm_sm_share < 1:
            raise ValueError(f"cluster moe_comm_sm_share must be in [0, 1), got {self.moe_comm_sm_share!r}")
        if self.moe_comm_sm_share and not self.moe_alltoall_overlap:
            raise ValueError(f"cluster moe_comm_sm_share={self.moe_comm_sm_share:g} (compute units held by the overlapped "
                             "expert all-to-all) needs moe_alltoall_overlap")
        if self.moe_node_limit and self.moe_dispatch != "hierarchical":
            raise ValueError(f"cluster moe_node_limit={self.moe_node_limit} (node-limited routing) changes only a "
                             "hierarchical dispatch's traffic; set moe_dispatch='hierarchical' with it")

    @property
    def searches_interleave(self) -> bool:
        """Whether a plan that leaves ``v`` free is searched over ``v > 1`` too: the stack has the interleaved schedule
        and pipelines at all. The one rule the placement DP (:attr:`~phaze_env.placement.inputs.Settings.interleaved`)
        and the search's bounds (:mod:`search.bounds`) both apply."""
        return self.interleaved_schedule and self.plan_rules.pipeline

    def to_dict(self) -> dict[str, Any]:
        """The fields that differ from the default stack's, but ``framework_efficiency`` and ``attention_efficiency``
        always (so the dict, and every cache key built from it, is the one the flat cluster of before had)."""
        data = asdict(self)
        default = Stack()
        for name in list(data):
            if name not in _ALWAYS_SAID and getattr(self, name) == getattr(default, name):
                data.pop(name)
        if "plan_rules" in data:
            data["plan_rules"] = self.plan_rules.to_dict()
        return data

    def describe(self) -> str:
        """What the stack changes from the model as it is, one ``; ``-led clause each ("" for the default)."""
        software = "" if self.framework_efficiency == 1 else f"; framework efficiency {self.framework_efficiency:g}"
        software += "" if self.interleaved_schedule else "; no interleaved schedule"
        software += "" if self.pipeline_scatter_gather else "; pipeline sends not scattered"
        software += "" if self.hybrid_allreduce_overlapped else "; hybrid-shard all-reduce after the backward pass"
        software += (f"; {self.hybrid_allreduce_exposure:.0%} of the overlapped hybrid-shard all-reduce exposed"
                     if self.hybrid_allreduce_overlapped and self.hybrid_allreduce_exposure else "")
        software += "; elementwise operators unfused (eager)" if self.unfused_elementwise else ""
        software += "; tensor-parallel collectives overlapped with their GEMMs" if self.tp_comm_overlap else ""
        software += "; data-parallel collectives overlapped with the passes (per bucket)" if self.dp_comm_overlap else ""
        software += "; norms, residual adds and FP8 casts on s/t tokens (sequence parallelism)" if self.sequence_parallel_kernels else ""
        software += "; DualPipe bidirectional pipeline schedule" if self.pipeline_schedule == "dualpipe" else ""
        software += ("; RMSNorm and MLA up-projections recomputed in the backward pass"
                     if self.recompute_norms_up_projections else "")
        software += f"; host-bound layers ({self.host_op_s * 1e6:g} µs per issued operator)" if self.host_op_s else ""
        software += "; experts folded over the t·c·d ranks (expert tensor parallelism 1)" if self.folded_experts else ""
        software += "; MoE blocks recomputed in the backward pass" if self.recompute_moe else ""
        software += "; routing weights applied in the experts' activation" if self.moe_probs_in_activation else ""
        software += (f"; weight gradients accumulated per microbatch ({self.main_grad_accumulation_bytes:g} B per weight)"
                     if self.main_grad_accumulation_bytes else "")
        software += "; expert tokens sent once per node (hierarchical dispatch)" if self.moe_dispatch == "hierarchical" else ""
        software += f", to at most {self.moe_node_limit} nodes" if self.moe_node_limit else ""
        software += ("; expert all-to-all overlapped with compute" + (f" ({self.moe_comm_sm_share:.0%} of the SMs on it)"
                                                                      if self.moe_comm_sm_share else "")
                     if self.moe_alltoall_overlap else "")
        software += (f"; fused causal attention at {self.attention_efficiency:g} of peak" if self.attention_efficiency
                     else "")
        return software


_ALWAYS_SAID = ("framework_efficiency", "interleaved_schedule", "pipeline_scatter_gather", "attention_efficiency")
"""The :class:`Stack` fields a cluster's dict always holds, whatever their value: the ones the flat cluster had before
the other knobs were added (each added knob is said only when it differs from its default, so an older cache key and
``results.json`` stay what they were)."""

_PARTS = {"network": Network, "setup": Setup, "stack": Stack}
_PART_OF = {name: part for part, cls in _PARTS.items() for name in cls.__dataclass_fields__}
"""Which part of a :class:`Cluster` each flat field name belongs to."""


@dataclass(frozen=True, init=False)
class Cluster:
    """A training system: the :class:`Network` (accelerators and interconnect), the :class:`Setup` (global batch,
    optimizer) and the :class:`Stack` (the training software), each validated on its own.

    Built from the parts (``Cluster(network=..., setup=..., stack=...)``) or from flat fields, each routed to its part
    (``Cluster(n_devices=64, global_batch=512, framework_efficiency=0.8)``: the presets' and the command line's form);
    flat fields given with a part override that part's (so ``dataclasses.replace(cluster, global_batch=8)`` and
    :meth:`replace` change one field of one part). Defaults: PHAZE's flat 4 GB/s ring, batch 4096, SGD, the model as it
    is.
    """

    network: Network
    setup: Setup
    stack: Stack

    def __init__(self, network: Network | None = None, setup: Setup | None = None, stack: Stack | None = None,
                 **fields: Any) -> None:
        unknown = sorted(set(fields) - set(_PART_OF))
        if unknown:
            raise TypeError(f"Cluster got unexpected keyword argument(s) {', '.join(map(repr, unknown))}")
        given = {"network": network, "setup": setup, "stack": stack}
        for part, cls in _PARTS.items():
            value = given[part] if given[part] is not None else cls()
            if not isinstance(value, cls):
                raise ValueError(f"cluster {part} must be a {cls.__name__}, got {type(value).__name__}")
            changes = {name: v for name, v in fields.items() if _PART_OF[name] == part}
            object.__setattr__(self, part, replace(value, **changes) if changes else value)

    def replace(self, **fields: Any) -> Cluster:
        """This cluster with the given flat fields (or parts) changed."""
        return Cluster(**({"network": self.network, "setup": self.setup, "stack": self.stack} | fields))

    # --- what every reader of a cluster names it by ------------------------------------------------------
    @property
    def n_devices(self) -> int:
        """The network's device count."""
        return self.network.n_devices

    @property
    def name(self) -> str:
        """The network's preset name."""
        return self.network.name

    # --- serialisation ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The flat fields (the form :meth:`from_dict` and the flat constructor take; cache keys and ``results.json``
        hold it)."""
        return self.network.to_dict() | self.setup.to_dict() | self.stack.to_dict()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Cluster:
        return cls(**data)

    def describe(self) -> str:
        """One line: the levels and their achieved bandwidths, then what the stack changes."""
        return self.network.describe() + self.stack.describe()


@lru_cache(maxsize=4096)
def _extents(sizes: tuple[int, ...], group: int, stride: int, outer: tuple[int, int] = (1, 0)) -> tuple[int, ...]:
    if outer[0] == 1 and group >= 1:  # one arithmetic progression: counted in closed form where one is known
        extents, unit = [], 1
        for size in sizes:
            count = _progression_extent(group, stride, unit, size)
            if count is None:
                return _counted_extents(sizes, group, stride, outer)
            extents.append(count)
            unit *= size
        return tuple(extents)
    return _counted_extents(sizes, group, stride, outer)


@lru_cache(maxsize=4096)
def _p2p_level_index(sizes: tuple[int, ...], stride: int, hops: int) -> int:
    """Index of the outermost level of ``sizes`` (innermost first) crossed by the sends ``i·stride → (i+1)·stride``,
    ``i < hops ≥ 1`` (0 when none is: every level of size 1).

    Closed form while the last device ``x = hops·stride`` is inside the levels (``x < Π sizes``): a device's position
    at level ``k`` is the digit ``⌊x / u_k⌋ mod s_k`` (``u_k = Π_{j<k} s_j``). The positions run from 0 to ``x``; let
    ``K`` be the outermost level of size > 1 with ``u_K ≤ x``. Every level above ``K`` of size > 1 has ``u > x``, so
    ``x < u_{K+1}`` and all positions have digit 0 there; and ``1 ≤ ⌊x / u_K⌋ < s_K``, so device ``x``'s digit at
    ``K`` is not device 0's: ``K`` is crossed and is the outermost crossed. Past the levels (the progression wraps)
    the positions are counted (:func:`_counted_extents`, the definition; the closed form is tested against it)."""
    last = hops * stride
    if last < math.prod(sizes):
        index, unit = 0, 1
        for k, size in enumerate(sizes):
            if unit > last:
                break
            if size > 1:
                index = k
            unit *= size
        return index
    crossed = [k for k, extent in enumerate(_counted_extents(sizes, hops + 1, stride, (1, 0))) if extent > 1]
    return crossed[-1] if crossed else 0


def _progression_extent(group: int, stride: int, unit: int, size: int) -> int | None:
    """Distinct ``⌊i·stride / unit⌋ mod size`` over ``i < group`` (None: no closed form used here).

    * ``stride < unit``: consecutive quotients differ by 0 or 1, so they are every integer ``0 … Q`` with
      ``Q = ⌊(group−1)·stride / unit⌋``: ``min(Q + 1, size)`` residues;
    * ``stride = a·unit``: the quotients are ``i·a``, whose residues repeat with period ``size / gcd(a, size)``
      and are distinct within one period: ``min(group, size / gcd(a, size))``.
    """
    if size <= 1:
        return 1
    if stride < unit:
        return min((group - 1) * stride // unit + 1, size)
    if stride % unit == 0:
        return min(group, size // math.gcd(stride // unit, size))
    return None


def _counted_extents(sizes: tuple[int, ...], group: int, stride: int, outer: tuple[int, int]) -> tuple[int, ...]:
    """:func:`_extents` by listing the positions (the definition; ``_progression_extent`` is checked against it)."""
    positions = (np.arange(group, dtype=np.int64)[None, :] * stride
                 + np.arange(outer[0], dtype=np.int64)[:, None] * outer[1]).ravel()
    extents, unit = [], 1
    for size in sizes:
        # distinct values in [0, size): counted by bincount, several times faster than np.unique on 1,024 positions
        extents.append(int(np.count_nonzero(np.bincount(positions // unit % size, minlength=size))) if size > 1 else 1)
        unit *= size
    return tuple(extents)


# --- presets -----------------------------------------------------------------------------------------
def _dgx(n_devices: int, node_Bps: float, link_Bps: float, name: str, **kw: Any) -> Cluster:
    return Cluster(n_devices=n_devices, devices_per_node=kw.pop("devices_per_node", 8), node_bandwidth_Bps=node_Bps, node_latency_s=NVSWITCH_LATENCY_S,
                   node_efficiency=NCCL_EFFICIENCY, link_bandwidth_Bps=link_Bps, link_latency_s=IB_LATENCY_S,
                   link_efficiency=NCCL_EFFICIENCY, name=name, **kw)


def _tpuv4_pod(n_devices: int, slices: int = 1, **kw: Any) -> Cluster:
    """``n_devices`` TPU v4 chips in ``slices`` equal slices (Cloud TPU Multislice: ICI inside a slice, the DCN between
    slices). A slice of a multiple of 64 chips is a torus of whole 4×4×4 cubes (:func:`torus_dims`: v4-128 = 4×4×4,
    v4-384 = 4×4×12, the Cloud TPU v4 documentation's slice topologies); a smaller one the smallest sub-torus of the
    pod that holds it."""
    if not isinstance(slices, int) or isinstance(slices, bool) or slices < 1 or n_devices % slices:
        raise ValueError(f"{n_devices} TPU v4 chips cannot be split into {slices!r} equal slices")
    per_slice = n_devices // slices
    if per_slice > math.prod(TPUV4_POD_DIMS):
        raise ValueError(f"a TPUv4 pod has {math.prod(TPUV4_POD_DIMS)} chips; {per_slice} per slice do not fit one: split "
                         "them into slices joined by the data-centre network (--slices S on the command line, slices=S in the API)")
    if slices > 1 and per_slice % TORUS_CUBE_SIDE ** 3:
        raise ValueError(f"a multislice TPU v4 job runs whole slices of 4×4×4 cubes; {per_slice} chips per slice is not one")
    if per_slice % TORUS_CUBE_SIDE ** 3 == 0:
        dims = torus_dims(per_slice)
    else:
        dims = list(TPUV4_POD_DIMS)
        while math.prod(dims) // 2 >= per_slice:  # the smallest slice of the pod that holds them
            dims[dims.index(max(dims))] //= 2
    dcn = dict(slices=slices, dcn_bandwidth_Bps=TPUV4_DCN_PER_CHIP_BPS, dcn_latency_s=DCN_LATENCY_S) if slices > 1 else {}
    return Cluster(n_devices=n_devices, torus_dims=tuple(sorted(dims)), link_bandwidth_Bps=TPUV4_ICI_LINK_BPS,
                   link_latency_s=ICI_LATENCY_S, name="tpuv4-pod", **(dcn | kw))


CLUSTER_PRESETS: dict[str, tuple[Any, str]] = {
    "phaze": (lambda n, **kw: Cluster(n_devices=n, name="phaze", **kw),
              "PHAZE's paper setting: one flat ring at 4 GB/s per device, no latency (reproduces the paper)."),
    "dgx-a100": (lambda n, **kw: _dgx(n, NVLINK3_BPS, HDR_IB_PER_GPU_BPS, "dgx-a100",
                                      **({"framework_efficiency": MEGATRON_A100_EFFICIENCY,
                                          "attention_dropout_kernel": True, "gemm_wave_sms": A100_SMS} | kw)),
                 "DGX A100 nodes: 8 GPUs on NVLink 3 (300 GB/s per GPU), 8×200 Gb/s HDR InfiniBand between nodes; "
                 "NCCL efficiency 0.8; Megatron-LM's A100 efficiency, fitted with its GEMMs' wave quantisation on 108 "
                 "SMs, and its unfused attention dropout."),
    "dgx-h100": (lambda n, **kw: _dgx(n, NVLINK4_BPS, NDR_IB_PER_GPU_BPS, "dgx-h100", **kw),
                 "DGX H100 nodes: 8 GPUs on NVLink 4 (450 GB/s per GPU), 8×400 Gb/s NDR InfiniBand between nodes; "
                 "NCCL efficiency 0.8."),
    "dgx-h800": (lambda n, **kw: _dgx(n, H800_NVLINK_BPS, NDR_IB_PER_GPU_BPS, "dgx-h800", **kw),
                 "H800 nodes (DeepSeek-V3's cluster, arXiv:2412.19437 §3.1: 8 GPUs on NVLink and NVSwitch, InfiniBand "
                 "between nodes): NVLink of the H800 (200 GB/s per GPU), 8×400 Gb/s NDR InfiniBand; NCCL efficiency 0.8."),
    "jean-zay-a100": (lambda n, **kw: _dgx(n, NVLINK3_BPS, OMNIPATH_PER_GPU_BPS, "jean-zay-a100", **kw),
                      "Jean Zay A100 80 GB nodes (BLOOM's cluster): 8 GPUs on NVLink 3 (300 GB/s per GPU, as an HGX "
                      "A100 board), 4×100 Gb/s Omni-Path per node between nodes; NCCL efficiency 0.8."),
    "ibm-a100": (lambda n, **kw: _dgx(n, NVLINK3_BPS, IBM_A100_NODE_BPS / 8, "ibm-a100", **kw),
                 "IBM's A100 80 GB cluster of the fms-fsdp (PyTorch FSDP) benchmarks: 8 GPUs per node on NVLink 3 "
                 "(300 GB/s per GPU; the HGX A100 board, assumed: the sources name only the GPU), 400 Gb/s per node "
                 "between nodes with GPU-direct RDMA; NCCL efficiency 0.8."),
    "ibm-h100": (lambda n, **kw: _dgx(n, NVLINK4_BPS, IBM_H100_NODE_BPS / 8, "ibm-h100", **kw),
                 "IBM's H100 80 GB cluster of the fms-fsdp benchmarks: 8 GPUs per node on NVLink 4 (450 GB/s per GPU, "
                 "assumed as for ibm-a100), 800 Gb/s per node between nodes; NCCL efficiency 0.8."),
    "tpuv4-pod": (_tpuv4_pod, "TPUv4 pod slice: 3D torus of ICI links (50 GB/s each per direction, 6 per chip); slices=S splits the "
                              "chips into S slices joined by the data-centre network (1.65 GB/s per chip, PaLM's burst)."),
}


# --- topology families of the system space (built from a chip's links; the presets above are unchanged) ---
SCALE_OUT_NIC_BPS = NDR_IB_PER_GPU_BPS
"""Scale-out bandwidth per chip of the switched family: one 400 Gb/s NDR InfiniBand NIC per chip, as DGX H100."""


def torus_dims(n_devices: int) -> tuple[int, int, int]:
    """The most cube-like 3-D torus of whole 4×4×4 cubes holding exactly ``n_devices`` (sides ascending)."""
    cubes, rem = divmod(n_devices, TORUS_CUBE_SIDE ** 3)
    if rem or cubes < 1:
        raise ValueError(f"a torus of 4×4×4 cubes holds a multiple of 64 chips, not {n_devices}")
    best = (1, 1, cubes)
    for a in range(1, round(cubes ** (1 / 3)) + 2):
        if cubes % a:
            continue
        rest = cubes // a
        for b in range(a, math.isqrt(rest) + 1):
            if rest % b == 0 and max(a, b, rest // b) < max(best):
                best = (a, b, rest // b)
    return tuple(sorted(side * TORUS_CUBE_SIDE for side in best))


TPUV4_POD_DIMS = torus_dims(TORUS_POD_CHIPS)
"""A full TPUv4 pod: :data:`~phaze_env.hardware.system.TORUS_POD_CHIPS` (4096) chips as 64 cubes of 4×4×4 joined by
optical circuit switches into a 16×16×16 3D torus (Jouppi et al. 2023)."""


def point_cluster(point: SystemPoint, base: Cluster | None = None) -> Cluster:
    """The cluster of a system point (its topology, the chips its budget buys, its chip's links); ``base``
    supplies the training setup and the whole training stack (its :class:`Setup` and :class:`Stack`; default
    :class:`Cluster`'s)."""
    if point.unbuildable_reason:
        raise ValueError(point.unbuildable_reason)
    base = base or Cluster()
    network = system_cluster(point.topology, point.n_devices, point.chip_system.links,
                             point.chip_system.link_bandwidth_Bps, domain_chips=point.family.domain_chips).network
    return Cluster(network=network, setup=base.setup, stack=base.stack)


def system_cluster(topology: str, n_devices: int, links: int, link_bandwidth_Bps: float,
                   domain_chips: int | None = None, **fields: Any) -> Cluster:
    """A cluster of the ``topology`` family built from each chip's ``links`` of ``link_bandwidth_Bps`` (both
    directions together, :class:`phaze_env.hardware.cost.ChipSystem`'s convention). ``domain_chips``: the system
    family's scale-up domain (:attr:`~phaze_env.hardware.system.SystemFamily.domain_chips`; ``None``: the default
    below) — a torus's pod, a switched cluster's node.

    * ``"torus"``: :func:`~phaze_env.hardware.system.torus_pods` equal pods (one up to
      :data:`~phaze_env.hardware.system.TORUS_POD_CHIPS` chips), each the most cube-like 3-D torus
      (:func:`torus_dims`); each of the six neighbours gets ``links / 6`` links, i.e. ``links/6 · bandwidth/2`` per
      direction; latency :data:`ICI_LATENCY_S`. Several pods are slices joined by the data-centre network at TPU
      v4's :data:`TPUV4_DCN_PER_CHIP_BPS` per chip (PaLM's measured burst, achieved: no efficiency applies) and
      :data:`DCN_LATENCY_S`, as the ``tpuv4-pod`` preset's ``slices``: an *assumption* for a torus design of
      another chip, whose pods are taken to be deployed with TPU v4's hosts and data-centre network.
    * ``"switched"``: nodes of :data:`SCALE_UP_DOMAIN` chips on a switch with every link
      (``links · bandwidth/2`` per chip per direction, as NVLink), one :data:`SCALE_OUT_NIC_BPS` NIC per chip
      between nodes; the DGX presets' latencies.

    Both achieve :data:`NCCL_EFFICIENCY` of the line rate (measured for NCCL on NVLink; assumed for a torus,
    so neither family wins by an efficiency the other is not given). ``fields``: other :class:`Cluster`
    fields (flat, or its ``setup`` and ``stack``).
    """
    per_direction_Bps = links_per_direction_Bps(links, link_bandwidth_Bps)
    if topology == "torus":
        if links < TORUS_NEIGHBOURS or links % TORUS_NEIGHBOURS:
            raise ValueError(f"a 3-D torus needs links in multiples of {TORUS_NEIGHBOURS} per chip, got {links}")
        pods = torus_pods(n_devices, domain_chips)
        dcn = dict(slices=pods, dcn_bandwidth_Bps=TPUV4_DCN_PER_CHIP_BPS, dcn_latency_s=DCN_LATENCY_S) if pods > 1 else {}
        return Cluster(n_devices=n_devices, torus_dims=torus_dims(n_devices // pods),
                       link_bandwidth_Bps=per_direction_Bps / TORUS_NEIGHBOURS, link_latency_s=ICI_LATENCY_S,
                       link_efficiency=NCCL_EFFICIENCY, name="torus", **(dcn | fields))
    if topology == "switched":
        node = domain_chips or SCALE_UP_DOMAIN
        if n_devices % node:
            raise ValueError(f"a switched cluster holds whole nodes of {node} chips, not {n_devices}")
        return _dgx(n_devices, per_direction_Bps, SCALE_OUT_NIC_BPS, "switched",
                    **({"devices_per_node": node} | fields))
    raise ValueError(f"unknown topology {topology!r}; choose from {', '.join(TOPOLOGIES)}")


REFERENCE_CLUSTER_PRESETS = {"a100": "dgx-a100", "h100": "dgx-h100"}
"""The cluster presets the GPU reference systems (:data:`phaze_env.hardware.system.REFERENCE_TOPOLOGIES`) are
built as; TPUv4 is built like a system-space torus (:func:`point_cluster`), as ``search.phaze``'s baseline."""


def reference_cluster(name: str, point: SystemPoint, base: Cluster | None = None) -> Cluster:
    """The cluster of reference system ``name`` at ``point`` (:func:`~phaze_env.hardware.system.reference_point`):
    ``dgx-a100`` / ``dgx-h100`` with the point's chip count, TPUv4 as :func:`point_cluster`. ``base`` supplies the
    training setup *and the whole training stack* (its :class:`Setup` and :class:`Stack`), its framework
    efficiency included — the caller resolves the stack's efficiency on the reference chip,
    :meth:`phaze_env.stacks.SystemStack.training`), so the dgx-a100 preset's own Megatron-LM efficiency is replaced by
    ``base``'s."""
    base = base or Cluster()
    if name not in REFERENCE_CLUSTER_PRESETS:
        return point_cluster(point, base)
    if point.unbuildable_reason:
        raise ValueError(f"{name}: {point.unbuildable_reason}")
    return Cluster(network=get_cluster(REFERENCE_CLUSTER_PRESETS[name], point.n_devices).network, setup=base.setup,
                   stack=base.stack)


class UnknownClusterError(ValueError):
    """A cluster preset name that does not exist."""


def cluster_names() -> list[str]:
    return list(CLUSTER_PRESETS)


def get_cluster(name: str, n_devices: int = 1024, **fields: Any) -> Cluster:
    """The preset ``name`` with ``n_devices`` devices (other :class:`Cluster` fields as keywords)."""
    key = str(name).strip().lower()
    if key not in CLUSTER_PRESETS:
        close = difflib.get_close_matches(key, CLUSTER_PRESETS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise UnknownClusterError(f"unknown cluster {name!r}.{hint} Known clusters: {', '.join(CLUSTER_PRESETS)}")
    return CLUSTER_PRESETS[key][0](n_devices, **fields)


__all__ = ["CLUSTER_PRESETS", "Cluster", "DP_OVERLAP_LACKING", "Level", "Network", "Setup", "Stack", "UnknownClusterError", "cluster_names",
           "get_cluster", "point_cluster", "REFERENCE_CLUSTER_PRESETS", "reference_cluster", "system_cluster", "torus_dims"]
