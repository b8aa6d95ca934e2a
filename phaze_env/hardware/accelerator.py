"""The ``Accelerator`` value (PHAZE's architecture noun) and named presets.

An accelerator has ``num_tc`` systolic tensor cores of ``tc_depth`` rows × ``tc_width`` columns, ``num_vc``
vector cores of ``vc_width`` lanes × ``vc_sublanes`` sublanes (elements per cycle per core =
``vc_width · vc_sublanes``, as a TPU VPU: 128 lanes × 8 sublanes), one on-chip buffer shared by all cores,
and off-chip HBM. Counts, array dimensions, sublanes and the buffer size must be powers of two (as in
PHAZE's search space); every numeric field must be positive.

Two calibrated efficiencies scale the ideal model (both in ``(0, 1]``):

* ``gemm_efficiency`` — the fraction of the tensor cores' nominal rate a long-running GEMM sustains on
  top of the systolic model's own fill/drain and tile-quantisation losses (clock throttling under the
  power limit, instruction issue, wave quantisation across SMs).
* ``hbm_efficiency`` — the fraction of the nominal HBM bandwidth a streaming kernel achieves (refresh,
  bank conflicts, read/write turnaround).

``number_format`` (``"bf16"`` or ``"fp8"``, :mod:`phaze_env.hardware.number_format`) is the tensor cores' format:
with ``"fp8"`` the blocks' weight GEMMs run at :data:`~phaze_env.hardware.number_format.FP8_MAC_RATE` MACs per
MAC slot per cycle on FP8 operands (the Transformer-Engine recipe), and each MAC costs more area
(:data:`~phaze_env.hardware.area.FP8_MAC_AREA_FACTOR`).

Every preset's figures cite their source in ``PRESETS``; the GPU presets are approximations mapped onto
this template with the clock chosen so the power-of-two array count reproduces the datasheet peak.
"""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass, fields
from typing import Any

from phaze_env.hardware import area
from phaze_env.hardware.area import TPU_VPU_SUBLANES
from phaze_env.hardware.number_format import check_number_format, format_peak_flops

DEFAULT_CLOCK_HZ = 1.05e9
MB_BYTES = 2**20
GB_BYTES = 2**30
TPU_GEMM_EFFICIENCY = 1.0
"""No public measured GEMM microbenchmark exists for TPUv4. The MXU is statically scheduled by XLA (no
caches, no warp scheduler, fixed 1.05 GHz clock), so only the structural losses the systolic model computes
(fill/drain, tile quantisation) are charged. Override per design when a measurement is available."""
HBM2_EFFICIENCY = 0.88
"""Measured achievable HBM bandwidth: 1.80 TB/s of the 2.04 TB/s nominal on an A100 80 GB SXM (HBM2e),
i.e. 88 %, confirmed by Nsight Compute ("Trouble to reach peak bandwidth of A100", NVIDIA developer forum,
2024; the thread cites a GTC 2024 talk where no kernel exceeded ≈ 90 %). TPUv4's HBM2 uses the same
generation of DRAM and controllers; we apply the same fraction."""
A100_GEMM_EFFICIENCY = 0.859
"""Measured maximum achievable bf16 matmul throughput on an A100 SXM: 267.9 of 312 TFLOP/s = 85.9 %
(S. Bekman, *Machine Learning Engineering*, "Maximum Achievable Matmul FLOPS comparison table",
mamf-finder.py, CUDA 12.1)."""
A100_SMS = 108
"""Streaming multiprocessors of the A100 product (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020: 108 of the
GA100 die's 128 SMs enabled): the SMs a GEMM's thread blocks are scheduled over in waves
(:func:`phaze_env.hardware.estimator.wave_quantisation`, ``Stack.gemm_wave_sms``)."""
H100_GEMM_EFFICIENCY = 0.801
"""Measured maximum achievable bf16 matmul throughput on an H100 SXM: 792.1 of 989 TFLOP/s = 80.1 %
(same MAMF table, CUDA 12.1)."""
HBM3_EFFICIENCY = 0.90
"""Measured achievable HBM3 bandwidth on an H100 SXM (3.35 TB/s nominal): coalesced streaming reaches
2.8–3.1 TB/s (84–93 %) — 2.8 TB/s for coalesced matrix loads under Nsight Compute (mikamirai.com, "GPU
memory bandwidth: what your profiler isn't telling you", 2026), 3.12 TB/s for a CUDA-event-timed
device-to-device copy in published H100 80GB HBM3 probe data; we take 0.90, inside that range and next to
the 0.88 measured on A100."""

_POWER_OF_TWO_FIELDS = ("num_tc", "tc_width", "tc_depth", "num_vc", "vc_width", "vc_sublanes", "buffer_mb")
_FRACTION_FIELDS = ("gemm_efficiency", "hbm_efficiency")


def is_power_of_two(value: int) -> bool:
    return isinstance(value, int) and value > 0 and value & (value - 1) == 0


@dataclass(frozen=True)
class Accelerator:
    """One accelerator design; frozen, hashable and JSON round-trippable (``to_dict``/``from_dict``)."""

    num_tc: int = 8
    tc_width: int = 128  # columns of each systolic array (also the output width)
    tc_depth: int = 128  # rows of each systolic array
    num_vc: int = 2
    vc_width: int = 128  # lanes of each vector core
    buffer_mb: int = 128  # on-chip buffer shared by all cores
    hbm_gb: float = 32.0
    hbm_bandwidth_Bps: float = 1.2e12
    clock_hz: float = DEFAULT_CLOCK_HZ
    bytes_per_element: int = 2
    vc_sublanes: int = TPU_VPU_SUBLANES  # elements per lane per cycle
    gemm_efficiency: float = TPU_GEMM_EFFICIENCY  # sustained fraction of the tensor cores' nominal rate
    hbm_efficiency: float = HBM2_EFFICIENCY  # achievable fraction of the nominal HBM bandwidth
    number_format: str = "bf16"  # tensor-core format: "bf16", or "fp8" (Transformer-Engine recipe)

    def __post_init__(self) -> None:
        for name in _POWER_OF_TWO_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"Accelerator.{name} must be an integer, got {value!r}")
            if value <= 0:
                raise ValueError(f"Accelerator.{name} must be positive, got {value}")
            if not is_power_of_two(value):
                raise ValueError(f"Accelerator.{name} must be a power of two, got {value}")
        for name in ("hbm_gb", "hbm_bandwidth_Bps", "clock_hz"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"Accelerator.{name} must be a positive number, got {value!r}")
        for name in _FRACTION_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise ValueError(f"Accelerator.{name} must be in (0, 1], got {value!r}")
        if isinstance(self.bytes_per_element, bool) or not isinstance(self.bytes_per_element, int) or self.bytes_per_element <= 0:
            raise ValueError(f"Accelerator.bytes_per_element must be a positive integer, got {self.bytes_per_element!r}")
        try:
            check_number_format(self.number_format)
        except ValueError as exc:
            raise ValueError(f"Accelerator.{exc}") from None

    # --- derived figures -------------------------------------------------------------------------
    @property
    def macs_per_cycle(self) -> int:
        return self.num_tc * self.tc_width * self.tc_depth

    @property
    def peak_flops(self) -> float:
        """Peak tensor-core FLOP/s: ``2 · num_tc · width · depth · clock``."""
        return 2.0 * self.macs_per_cycle * self.clock_hz

    @property
    def fp8_peak_flops(self) -> float:
        """Peak tensor-core FLOP/s on FP8 operands (``FP8_MAC_RATE · peak_flops``); 0 for bf16-only tensor cores."""
        return self.format_peak_flops if self.number_format == "fp8" else 0.0

    @property
    def format_peak_flops(self) -> float:
        """Peak tensor-core FLOP/s in the format this design's GEMMs run in (its FP8 peak for an FP8 design,
        :func:`~phaze_env.hardware.number_format.format_peak_flops`): the basis of its MFU."""
        return format_peak_flops(self.peak_flops, self.number_format)

    @property
    def vector_elements_per_cycle(self) -> int:
        """Elements all vector cores process per cycle on a one-cycle op: ``num_vc · vc_width · vc_sublanes``."""
        return self.num_vc * self.vc_width * self.vc_sublanes

    @property
    def peak_vector_elements_per_s(self) -> float:
        """Vector-core throughput for a one-cycle elementwise op (elements/s)."""
        return float(self.vector_elements_per_cycle) * self.clock_hz

    @property
    def effective_hbm_bandwidth_Bps(self) -> float:
        """What streaming kernels achieve: ``hbm_bandwidth_Bps · hbm_efficiency``."""
        return self.hbm_bandwidth_Bps * self.hbm_efficiency

    @property
    def buffer_bytes(self) -> int:
        return self.buffer_mb * MB_BYTES

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_gb * GB_BYTES

    @property
    def area_mm2(self) -> float:
        """Architecture area (cores + buffer), the quantity PHAZE's area window constrains."""
        return float(area.arch_area_mm2(self.num_tc, self.tc_width, self.tc_depth, self.num_vc, self.vc_width, self.buffer_mb,
                                        self.vc_sublanes, self.number_format))

    @property
    def tc_config(self) -> tuple[int, int, int, int]:
        """The key of the tensor-core latency table: ``(num_tc, tc_width, tc_depth, buffer_mb)``."""
        return (self.num_tc, self.tc_width, self.tc_depth, self.buffer_mb)

    @property
    def vc_config(self) -> tuple[int, int, int, int, int]:
        """The key of the vector-core latency table: ``(num_vc, vc_width, vc_sublanes, buffer_mb, num_tc)``
        (the buffer and the tensor-core count fix the vector cores' fair share of the buffer)."""
        return (self.num_vc, self.vc_width, self.vc_sublanes, self.buffer_mb, self.num_tc)

    # --- notation --------------------------------------------------------------------------------
    def notation_parts(self) -> dict[str, str]:
        """The searched fields, each as :meth:`notation` writes it (for printers that show one per row)."""
        tensor_cores = f"{self.num_tc}×({self.tc_width}×{self.tc_depth})"
        return {"tensor cores": tensor_cores + (" fp8" if self.number_format == "fp8" else ""),
                "vector cores": f"{self.num_vc}×{self.vc_width}",
                "buffer": f"{self.buffer_mb} MiB", "HBM": f"{self.hbm_gb:g} GiB"}

    def notation(self) -> str:
        """The one way every printer (search, envs, Optuna, studies) names a design, e.g.
        ``8×(128×128) tc · 2×128 vc · 128 MiB buffer · 32 GiB HBM`` (see :data:`NOTATION_LEGEND`); FP8 tensor
        cores read ``8×(128×128) fp8 tc · …`` (bf16 is the default and is not written)."""
        parts = self.notation_parts()
        return (f"{parts['tensor cores']} tc · {parts['vector cores']} vc · {parts['buffer']} buffer · "
                f"{parts['HBM']} HBM")

    # --- serialisation ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Accelerator":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown Accelerator field(s): {', '.join(unknown)}")
        return cls(**data)

    def replace(self, **changes: Any) -> "Accelerator":
        return type(self).from_dict({**self.to_dict(), **changes})


TPUV4 = Accelerator()

NOTATION_LEGEND = ("tensor cores count×(width×depth), vector cores count×lanes; MiB = 2**20 bytes, "
                   "GiB = 2**30 bytes")
"""How to read :meth:`Accelerator.notation` (printed under tables that use it)."""

A100_CLOCK_HZ = 312e12 / (2 * 128 * 32 * 32)
"""1.19 GHz: the clock at which 128 arrays of 32×32 MACs reach the A100's datasheet 312 TFLOP/s dense bf16
(NVIDIA A100 Tensor Core GPU datasheet; the real part has 108 SMs × 4 Tensor Cores × 256 FMA/clk at
1.41 GHz). The 128 vector cores × 32 lanes × 2 sublanes at this clock give 9.75e12 elements/s, the A100's
6,912 FP32 lanes × 1.41 GHz (19.5 TFLOP/s FP32 FMA)."""
H100_CLOCK_HZ = 989.4e12 / (2 * 256 * 32 * 32)
"""1.887 GHz: the clock at which 256 arrays of 32×32 MACs reach the H100 SXM's datasheet 989.4 TFLOP/s dense
bf16 (NVIDIA H100 Tensor Core GPU datasheet / Hopper whitepaper: 132 SMs × 4 Tensor Cores × 512 FMA/clk at
1.83 GHz). The 256 vector cores × 32 lanes × 2 sublanes give 30.9e12 elements/s, 7.6 % below the H100's
16,896 FP32 lanes × 1.98 GHz (66.9 TFLOP/s FP32 FMA) — the nearest power-of-two fit."""

B200_CLOCK_HZ = 2.25e15 / (2 * 512 * 32 * 32)
"""2.146 GHz: the clock at which 512 arrays of 32×32 MACs reach the B200's datasheet 2.25 PFLOP/s dense bf16 (NVIDIA
HGX B200 datasheet, 2024: 36 PFLOP/s FP16/BF16 with sparsity for 8 GPUs = 4.5 per GPU, half of it dense; 4.5 PFLOP/s
dense FP8). Twice the h100 preset's arrays at 1.14× its clock; the real part has 148 SMs enabled over two dies."""
GB200_CLOCK_HZ = 2.5e15 / (2 * 512 * 32 * 32)
"""2.384 GHz: the b200 preset's arrays at the GB200 NVL72's 2.5 PFLOP/s dense bf16 per GPU (NVIDIA GB200 NVL72
datasheet, 2024: 180 PFLOP/s FP16/BF16 with sparsity over 72 GPUs = 5 per GPU, half of it dense) — the same
Blackwell silicon at a 1,200 W limit instead of 1,000 W."""
TPUV5P_CLOCK_HZ = 459e12 / (2 * 8 * 128 * 128)
"""1.751 GHz: the clock at which 8 MXUs of 128×128 (2 TensorCores × 4 MXUs, Cloud TPU v5p documentation: "each
TensorCore has 4 MXUs, a vector unit and a scalar unit") reach the published 459 TFLOP/s bf16."""
MI300X_CLOCK_HZ = 1307.4e12 / (2 * 512 * 32 * 32)
"""1.247 GHz: the clock at which 512 arrays of 32×32 MACs reach the MI300X's published 1,307.4 TFLOP/s dense bf16
(AMD Instinct MI300X data sheet, 2023: 304 CUs at 2.1 GHz peak; 2,614.9 TFLOP/s dense FP8). The 512 vector cores ×
32 lanes × 4 sublanes at this clock give 81.7e12 elements/s, the data sheet's 163.4 TFLOP/s FP32 vector (FMA)."""
FLAGSHIP_GEMM_EFFICIENCY = H100_GEMM_EFFICIENCY
"""GEMM efficiency of the 2024 flagships (b200, mi300x): the H100's measured 80.1 % (MAMF). Assumption — no
measurement of them in the same table was used here; range 0.6–0.85 (the system space's references take
``system.SYSTEM_GEMM_EFFICIENCY`` anyway)."""

PRESETS: dict[str, tuple[Accelerator, str]] = {
    "tpuv4": (
        TPUV4,
        "TPUv4-like (PHAZE's reference; Jouppi et al. ISCA 2023, Google Cloud TPU v4 documentation): "
        "2 TensorCores × 4 MXUs = 8 tensor cores of 128×128 at 1.05 GHz (275 TFLOP/s bf16), 2 vector "
        "cores of 128 lanes × 8 sublanes (2048 elements/cycle), 128 MiB CMEM, 32 GiB HBM2 at 1.2 TB/s "
        "(88 % achievable), GEMM efficiency 1.0 (no public TPUv4 GEMM microbenchmark; see TPU_GEMM_EFFICIENCY).",
    ),
    "tpuv4i": (
        Accelerator(num_tc=4, num_vc=1, hbm_gb=8.0, hbm_bandwidth_Bps=614e9),
        "TPUv4i-like (inference chip, Jouppi et al. ISCA 2021, Table 1): 1 TensorCore with 4 MXUs of "
        "128×128 at 1.05 GHz (138 TFLOP/s bf16), one vector core of 128 lanes × 8 sublanes, 128 MiB CMEM, "
        "8 GiB HBM2 at 614 GB/s.",
    ),
    "a100": (
        Accelerator(num_tc=128, tc_width=32, tc_depth=32, num_vc=128, vc_width=32, vc_sublanes=2, buffer_mb=64,
                    hbm_gb=80.0, hbm_bandwidth_Bps=2.039e12, clock_hz=A100_CLOCK_HZ,
                    gemm_efficiency=A100_GEMM_EFFICIENCY, hbm_efficiency=HBM2_EFFICIENCY),
        "A100-like approximation (SXM 80 GB; NVIDIA A100 datasheet): dense bf16 tensor cores as 128 arrays "
        "of 32×32 at 1.19 GHz = the published 312 TFLOP/s; 128 vector cores × 32 lanes × 2 sublanes = the "
        "6,912 FP32 lanes' rate; 40 MB L2 + 108 × 192 KB shared memory/L1 rounded down to a 64 MB buffer; "
        "80 GB HBM2e at 2.039 TB/s (88 % achievable); GEMM efficiency 85.9 % (measured MAMF).",
    ),
    "h100": (
        Accelerator(num_tc=256, tc_width=32, tc_depth=32, num_vc=256, vc_width=32, vc_sublanes=2, buffer_mb=64,
                    hbm_gb=80.0, hbm_bandwidth_Bps=3.35e12, clock_hz=H100_CLOCK_HZ,
                    gemm_efficiency=H100_GEMM_EFFICIENCY, hbm_efficiency=HBM3_EFFICIENCY),
        "H100-like approximation (SXM; NVIDIA H100 datasheet): dense bf16 tensor cores as 256 arrays of "
        "32×32 at 1.887 GHz = the published 989.4 TFLOP/s; 256 vector cores × 32 lanes × 2 sublanes "
        "(≈ the 16,896 FP32 lanes' rate, −7.6 %); 50 MB L2 + 132 × 228 KB shared memory rounded down to a "
        "64 MB buffer; 80 GB HBM3 at 3.35 TB/s (90 % achievable); GEMM efficiency 80.1 % (measured MAMF).",
    ),
    "h100-fp8": (
        Accelerator(num_tc=256, tc_width=32, tc_depth=32, num_vc=256, vc_width=32, vc_sublanes=2, buffer_mb=64,
                    hbm_gb=80.0, hbm_bandwidth_Bps=3.35e12, clock_hz=H100_CLOCK_HZ,
                    gemm_efficiency=H100_GEMM_EFFICIENCY, hbm_efficiency=HBM3_EFFICIENCY, number_format="fp8"),
        "The h100 preset training in FP8 (Transformer-Engine recipe, phaze_env.hardware.number_format): the blocks' "
        "weight GEMMs at the datasheet's 1,979 TFLOP/s dense FP8, everything else in bf16 at 989.4 TFLOP/s.",
    ),
    "b200": (
        Accelerator(num_tc=512, tc_width=32, tc_depth=32, num_vc=256, vc_width=32, vc_sublanes=2, buffer_mb=128,
                    hbm_gb=180.0, hbm_bandwidth_Bps=8e12, clock_hz=B200_CLOCK_HZ,
                    gemm_efficiency=FLAGSHIP_GEMM_EFFICIENCY, hbm_efficiency=HBM3_EFFICIENCY),
        "B200-like approximation (HGX B200, 1,000 W; NVIDIA HGX B200 and DGX B200 datasheets, Blackwell technical "
        "brief 2024): dense bf16 tensor cores as 512 arrays of 32×32 at 2.146 GHz = the published 2.25 PFLOP/s "
        "(4.5 dense FP8: the b200-fp8 preset); 256 vector cores × 32 lanes × 2 sublanes = 35.2e12 elements/s, 6 % "
        "under the datasheet's 75 TFLOP/s FP32 (600 per 8 GPUs); 126 MB L2 + 148 × (228 KB shared memory + 256 KB "
        "tensor memory) rounded down to a 128 MB buffer, like the h100 preset's; 180 GB HBM3e at 8 TB/s (DGX B200: "
        "1,440 GB and 64 TB/s over 8 GPUs; 8 stacks of 24 GB, 180 GB exposed), HBM3's 90 % achievable "
        "(assumption); GEMM efficiency: H100's measured 80.1 % (assumption, FLAGSHIP_GEMM_EFFICIENCY).",
    ),
    "b200-fp8": (
        Accelerator(num_tc=512, tc_width=32, tc_depth=32, num_vc=256, vc_width=32, vc_sublanes=2, buffer_mb=128,
                    hbm_gb=180.0, hbm_bandwidth_Bps=8e12, clock_hz=B200_CLOCK_HZ,
                    gemm_efficiency=FLAGSHIP_GEMM_EFFICIENCY, hbm_efficiency=HBM3_EFFICIENCY, number_format="fp8"),
        "The b200 preset training in FP8 (Transformer-Engine recipe): the blocks' weight GEMMs at the datasheet's "
        "4.5 PFLOP/s dense FP8, everything else in bf16 at 2.25 PFLOP/s.",
    ),
    "gb200": (
        Accelerator(num_tc=512, tc_width=32, tc_depth=32, num_vc=256, vc_width=32, vc_sublanes=2, buffer_mb=128,
                    hbm_gb=186.0, hbm_bandwidth_Bps=8e12, clock_hz=GB200_CLOCK_HZ,
                    gemm_efficiency=FLAGSHIP_GEMM_EFFICIENCY, hbm_efficiency=HBM3_EFFICIENCY),
        "One Blackwell GPU of a GB200 NVL72 (NVIDIA GB200 NVL72 datasheet, 2024; 1,200 W per GPU): the b200 preset "
        "at 2.384 GHz = the published 2.5 PFLOP/s dense bf16 (5 dense FP8); 256 vector cores × 32 lanes × 2 "
        "sublanes = 39.1e12 elements/s, 6 % under the datasheet's 6 PFLOP/s FP32 over 72 GPUs; 186 GB HBM3e at "
        "8 TB/s (13.4 TB and 576 TB/s over 72 GPUs).",
    ),
    "tpuv5p": (
        Accelerator(num_tc=8, tc_width=128, tc_depth=128, num_vc=2, vc_width=128, buffer_mb=128, hbm_gb=95.0,
                    hbm_bandwidth_Bps=2.765e12, clock_hz=TPUV5P_CLOCK_HZ),
        "TPU v5p-like (Cloud TPU v5p documentation, 2023–24): 2 TensorCores × 4 MXUs = 8 tensor cores of 128×128 "
        "at 1.751 GHz = the published 459 TFLOP/s bf16; 2 vector cores of 128 lanes × 8 sublanes (TPU v4's vector "
        "unit, assumption); a 128 MiB buffer (TPU v4's CMEM size, assumption: Google publishes no v5p on-chip "
        "memory size); 95 GB HBM2e at 2,765 GB/s (HBM2's 88 % achievable); GEMM efficiency 1.0 as the tpuv4 preset "
        "(TPU_GEMM_EFFICIENCY).",
    ),
    "mi300x": (
        Accelerator(num_tc=512, tc_width=32, tc_depth=32, num_vc=512, vc_width=32, vc_sublanes=4, buffer_mb=256,
                    hbm_gb=192.0, hbm_bandwidth_Bps=5.3e12, clock_hz=MI300X_CLOCK_HZ,
                    gemm_efficiency=FLAGSHIP_GEMM_EFFICIENCY, hbm_efficiency=HBM3_EFFICIENCY),
        "MI300X-like approximation (AMD Instinct MI300X data sheet, 2023; 750 W): dense bf16 matrix cores as 512 "
        "arrays of 32×32 at 1.247 GHz = the published 1,307.4 TFLOP/s (2,614.9 dense FP8); 512 vector cores × 32 "
        "lanes × 4 sublanes = the 163.4 TFLOP/s FP32 vector rate; 256 MB Infinity Cache (+ 32 MB L2, 304 × 64 KB "
        "LDS) rounded down to a 256 MB buffer; 192 GB HBM3 (8 stacks of 24 GB) at 5.3 TB/s, HBM3's 90 % "
        "achievable (assumption); GEMM efficiency: H100's measured 80.1 % (assumption, FLAGSHIP_GEMM_EFFICIENCY).",
    ),
    "phaze-small": (
        Accelerator(num_tc=1, tc_width=64, tc_depth=64, num_vc=1, vc_width=64, buffer_mb=8),
        "A small point of PHAZE's space (1 tensor core of 64×64, 1 vector core of 64 lanes × 8 sublanes, "
        "8 MB): an edge-class baseline.",
    ),
}


class UnknownPresetError(KeyError):
    """An unknown preset name; ``str()`` is the plain message (not ``KeyError``'s quoted repr)."""

    def __str__(self) -> str:
        return str(self.args[0])


def preset_names() -> list[str]:
    return list(PRESETS)


def get_preset(name: str) -> Accelerator:
    """The preset called ``name`` (case-insensitive); unknown names raise ``UnknownPresetError`` (a
    ``KeyError``) naming the closest match and the known presets."""
    key = name.strip().lower()
    if key in PRESETS:
        return PRESETS[key][0]
    close = difflib.get_close_matches(key, PRESETS, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UnknownPresetError(f"unknown accelerator preset {name!r}.{hint} Known presets: {', '.join(PRESETS)}")


def preset_description(name: str) -> str:
    get_preset(name)
    return PRESETS[name.strip().lower()][1]
