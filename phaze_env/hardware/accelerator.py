"""The ``Accelerator`` value (PHAZE's architecture noun) and named presets.

An accelerator has ``num_tc`` systolic tensor cores of ``tc_depth`` rows × ``tc_width`` columns, ``num_vc``
vector cores of ``vc_width`` lanes, one on-chip buffer shared by all cores, and off-chip HBM. Counts,
array dimensions and the buffer size must be powers of two (as in PHAZE's search space); every numeric
field must be positive. Presets other than ``tpuv4`` are approximations mapped onto this template
(documented per preset in ``PRESETS``).
"""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass, fields
from typing import Any

from phaze_env.hardware import area

DEFAULT_CLOCK_HZ = 1.05e9
MB_BYTES = 2**20
GB_BYTES = 2**30

_POWER_OF_TWO_FIELDS = ("num_tc", "tc_width", "tc_depth", "num_vc", "vc_width", "buffer_mb")


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
        if isinstance(self.bytes_per_element, bool) or not isinstance(self.bytes_per_element, int) or self.bytes_per_element <= 0:
            raise ValueError(f"Accelerator.bytes_per_element must be a positive integer, got {self.bytes_per_element!r}")

    # --- derived figures -------------------------------------------------------------------------
    @property
    def macs_per_cycle(self) -> int:
        return self.num_tc * self.tc_width * self.tc_depth

    @property
    def peak_flops(self) -> float:
        """Peak tensor-core FLOP/s: ``2 · num_tc · width · depth · clock``."""
        return 2.0 * self.macs_per_cycle * self.clock_hz

    @property
    def peak_vector_elements_per_s(self) -> float:
        """Vector-core throughput for a one-cycle elementwise op (elements/s)."""
        return float(self.num_vc * self.vc_width) * self.clock_hz

    @property
    def buffer_bytes(self) -> int:
        return self.buffer_mb * MB_BYTES

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_gb * GB_BYTES

    @property
    def area_mm2(self) -> float:
        """Architecture area (cores + buffer), the quantity PHAZE's area window constrains."""
        return float(area.arch_area_mm2(self.num_tc, self.tc_width, self.tc_depth, self.num_vc, self.vc_width, self.buffer_mb))

    @property
    def die_area_mm2(self) -> float:
        """Whole-die estimate: ``area_mm2`` plus the fixed uncore (HBM PHYs, IO, control)."""
        return self.area_mm2 + area.UNCORE_AREA_MM2

    @property
    def tc_config(self) -> tuple[int, int, int, int]:
        """The key of the tensor-core latency table: ``(num_tc, tc_width, tc_depth, buffer_mb)``."""
        return (self.num_tc, self.tc_width, self.tc_depth, self.buffer_mb)

    @property
    def vc_config(self) -> tuple[int, int]:
        """The key of the vector-core latency table: ``(num_vc, vc_width)``."""
        return (self.num_vc, self.vc_width)

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

PRESETS: dict[str, tuple[Accelerator, str]] = {
    "tpuv4": (
        TPUV4,
        "TPUv4-like (PHAZE's reference): 2 TensorCores × 4 MXUs = 8 tensor cores of 128×128, 2 vector "
        "cores of 128 lanes, 128 MiB CMEM, 32 GiB HBM2 at 1.2 TB/s, 1.05 GHz (≈ 275 TFLOP/s bf16).",
    ),
    "tpuv4i": (
        Accelerator(num_tc=4, num_vc=1, hbm_gb=8.0, hbm_bandwidth_Bps=614e9),
        "TPUv4i-like (inference chip, Jouppi et al. ISCA 2021): 1 TensorCore with 4 MXUs of 128×128, one "
        "128-lane vector core, 128 MiB CMEM, 8 GiB HBM2 at 614 GB/s, 1.05 GHz (≈ 138 TFLOP/s bf16).",
    ),
    "a100": (
        Accelerator(num_tc=128, tc_width=32, tc_depth=32, num_vc=128, vc_width=32, buffer_mb=64,
                    hbm_gb=80.0, hbm_bandwidth_Bps=2.039e12, clock_hz=1.19e9),
        "A100-like approximation (SXM 80 GB): 108 SMs' dense bf16 tensor cores approximated by 128 arrays "
        "of 32×32 at 1.19 GHz so the peak matches the published 312 TFLOP/s; 128 vector cores of 32 lanes "
        "for the CUDA cores; 40 MB L2 + 20 MB shared memory rounded to a 64 MB buffer; 80 GB at 2.04 TB/s.",
    ),
    "h100": (
        Accelerator(num_tc=256, tc_width=32, tc_depth=32, num_vc=256, vc_width=32, buffer_mb=64,
                    hbm_gb=80.0, hbm_bandwidth_Bps=3.35e12, clock_hz=1.83e9),
        "H100-like approximation (SXM): 132 SMs' dense bf16 tensor cores approximated by 256 arrays of "
        "32×32 at 1.83 GHz (≈ 960 TFLOP/s vs the published 989); 50 MB L2 + 30 MB shared memory rounded to "
        "a 64 MB buffer; 80 GB HBM3 at 3.35 TB/s.",
    ),
    "phaze-small": (
        Accelerator(num_tc=1, tc_width=64, tc_depth=64, num_vc=1, vc_width=64, buffer_mb=8),
        "A small point of PHAZE's space (1 tensor core of 64×64, 1 vector core, 8 MB): an edge-class baseline.",
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
