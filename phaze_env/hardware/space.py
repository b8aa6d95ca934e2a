"""PHAZE's design space: the one definition of every knob's values and of the area window.

Rules (``docs/design.md``, from PHAZE's public code): tensor-core count and vector-core count 1…4096,
tensor-core width and depth 2…256, on-chip buffer 2…128 MB — all powers of two; the vector-core width
equals the tensor-core width. The non-architecture knobs searched with them: HBM capacity
{32, 64, 80} GiB, microbatch size {1, 2, 4, 8} and whether activation recompute is allowed.

A configuration is in the space when ``lower·budget ≤ area ≤ budget`` (:func:`in_area_window`) with
``lower = 0.3`` and ``budget`` the TPUv4-like configuration's architecture area
(:func:`phaze_env.hardware.area.arch_area_mm2`); the lower bound is waived for designs with a single
tensor core or a single vector core. Every face (exact search, envs, Optuna objective, baselines) applies
the window through :func:`in_area_window` / :func:`area_overshoot`; nothing else restates it.

Sublanes. PHAZE's rule "vector width = tensor width, depth 1" describes a vector core as one row of
``width`` lanes. A TPU vector unit is 8 sublanes deep (128 lanes × 8 sublanes per cycle); counting one
element per lane per cycle undercounts TPUv4's vector throughput 8×. We keep PHAZE's rule for the lane
count and give every vector core of the space the base accelerator's sublane depth (``base.vc_sublanes``,
8 for the TPUv4-like base): depth is not searched, so the space (and its size) is PHAZE's, and area and
speed both scale with ``width · sublanes``. The budget is the TPUv4-like configuration's area with its
8 sublanes (unchanged from the per-lane area used before: one lane of 8 sublanes costs the same).

:data:`KNOBS` is the one knob order: the five area knobs :data:`ARCH_KNOBS` first (so a knob-per-step agent
knows whether the window holds after the fifth choice), then :data:`OTHER_KNOBS`. :class:`ArchSpace`
enumerates the in-window architectures once, with numpy, in lexicographic order of :data:`ARCH_KNOBS`;
``space[i]`` and ``space.index(acc)`` convert between index and :class:`Accelerator`. The full design space
(architecture × the other knobs, same order) is :class:`phaze_env.design.DesignSpace`, built from the value
lists here.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from phaze_env.hardware import area
from phaze_env.hardware.accelerator import TPUV4, Accelerator


def powers_of_two(low: int, high: int) -> tuple[int, ...]:
    """``(low, 2·low, …, high)`` for powers of two ``low ≤ high``."""
    values, value = [], low
    while value <= high:
        values.append(value)
        value *= 2
    return tuple(values)


NUM_TC_VALUES = powers_of_two(1, 4096)
NUM_VC_VALUES = powers_of_two(1, 4096)
TC_DIM_VALUES = powers_of_two(2, 256)
BUFFER_MB_VALUES = powers_of_two(2, 128)
HBM_GB_VALUES = (32.0, 64.0, 80.0)
MICROBATCH_VALUES = (1, 2, 4, 8)
RECOMPUTE_VALUES = (False, True)
AREA_WINDOW_LOWER = 0.3
# Window comparisons tolerate rounding so the TPUv4 configuration itself (area == budget) is inside.
_AREA_RTOL = 1e-9

# The knobs that set the area, then the ones that never do (named, not sliced from KNOBS).
ARCH_KNOBS = ("num_tc", "tc_width", "tc_depth", "num_vc", "buffer_mb")
OTHER_KNOBS = ("hbm_gb", "microbatch", "recompute")
KNOBS = ARCH_KNOBS + OTHER_KNOBS
SYSTEM_AREA_KNOBS = ("die_area_mm2", "hbm_stacks", "links", "link_GBps", "number_format")
"""The system space's knobs that set the compute-area budget (die − HBM PHYs − SerDes − IO) or the compute's
area (the tensor cores' number format: an FP8-capable MAC is larger): before :data:`ARCH_KNOBS` in its knob
order, so a knob-per-step agent knows the window after the last area knob."""
SYSTEM_OTHER_KNOBS = ("hbm_generation", "topology", "microbatch", "recompute")
SYSTEM_KNOBS = SYSTEM_AREA_KNOBS + ARCH_KNOBS + SYSTEM_OTHER_KNOBS
"""The system space's knob order (:mod:`phaze_env.hardware.system`, ``DesignSpace.named("system")``). The HBM
capacity is no knob there: stacks × the generation's capacity per stack."""
SYSTEM_DEFAULT_VALUES = {
    "die_area_mm2": (400.0, 600.0, 800.0), "hbm_stacks": (4, 6), "links": (6, 12), "link_GBps": (50.0, 100.0),
    "number_format": ("bf16", "fp8"),
    "num_tc": (4, 8, 16, 32), "tc_width": (128, 256), "tc_depth": (128, 256), "num_vc": (2, 4, 8),
    "buffer_mb": (32, 64, 128, 256), "hbm_generation": ("hbm2e", "hbm3", "hbm3e"), "topology": ("torus", "switched"),
    "microbatch": MICROBATCH_VALUES, "recompute": RECOMPUTE_VALUES}
"""The system space's value list of every knob, in :data:`SYSTEM_KNOBS` order: 2–4 values per system knob (dies
from TPUv4's ≈ 400 mm² class to near the 858 mm² reticle limit; HBM stacks of TPUv4 (4) and of A100/H100
dies (6); 6 or 12 links of 50 GB/s (an NVLink 3/4 link) or 100 GB/s (a TPU v4 ICI link), both directions
together) and the architecture values around the TPUv4-like configuration that fill such dies, so the exact
search over all of it finishes in minutes."""
DEFAULT_VALUES = {"num_tc": NUM_TC_VALUES, "tc_width": TC_DIM_VALUES, "tc_depth": TC_DIM_VALUES, "num_vc": NUM_VC_VALUES,
                  "buffer_mb": BUFFER_MB_VALUES, "hbm_gb": HBM_GB_VALUES, "microbatch": MICROBATCH_VALUES,
                  "recompute": RECOMPUTE_VALUES}
"""PHAZE's value list of every knob, in :data:`KNOBS` order."""


def knob_settings(values: Mapping[str, Sequence] = DEFAULT_VALUES) -> int:
    """Combinations of the knobs that never set the area (:data:`OTHER_KNOBS`), given each knob's value list."""
    return math.prod(len(values[name]) for name in OTHER_KNOBS)


def area_budget_mm2(reference: Accelerator = TPUV4) -> float:
    """The area budget: the architecture area of the reference (TPUv4-like) configuration."""
    return reference.area_mm2


def in_area_window(num_tc, num_vc, area_mm2, budget_mm2: float, lower: float = AREA_WINDOW_LOWER):
    """PHAZE's window rule (numpy-vectorised): ``lower·budget ≤ area ≤ budget``, lower bound waived for 1 TC
    or 1 VC. Returns a bool (array)."""
    area_mm2 = np.asarray(area_mm2)
    upper_ok = area_mm2 <= budget_mm2 * (1 + _AREA_RTOL)
    lower_ok = area_mm2 >= lower * budget_mm2 * (1 - _AREA_RTOL)
    waived = (np.asarray(num_tc) == 1) | (np.asarray(num_vc) == 1)
    return upper_ok & (lower_ok | waived)


def area_overshoot(num_tc, num_vc, area_mm2, budget_mm2: float, lower: float = AREA_WINDOW_LOWER):
    """Relative violation of the window (0 inside): ``area/budget − 1`` above it, ``1 − area/(lower·budget)``
    below it (vectorised)."""
    area_mm2 = np.asarray(area_mm2, dtype=np.float64)
    inside = in_area_window(num_tc, num_vc, area_mm2, budget_mm2, lower)
    above = area_mm2 / budget_mm2 - 1.0
    below = 1.0 - area_mm2 / (lower * budget_mm2)
    return np.where(inside, 0.0, np.where(area_mm2 > budget_mm2, above, below))


def area_slack(num_tc, num_vc, area_mm2, budget_mm2: float, lower: float = AREA_WINDOW_LOWER):
    """Relative distance to the nearest active window edge (≥ 0 inside, vectorised): ``1 − area/budget``, or
    ``area/(lower·budget) − 1`` when that is smaller and the lower bound applies."""
    area_mm2 = np.asarray(area_mm2, dtype=np.float64)
    waived = (np.asarray(num_tc) == 1) | (np.asarray(num_vc) == 1)
    to_upper = 1.0 - area_mm2 / budget_mm2
    to_lower = area_mm2 / (lower * budget_mm2) - 1.0
    return np.where(waived, to_upper, np.minimum(to_upper, to_lower))


@dataclass(frozen=True)
class ArchSpace:
    """The in-window architectures of a design space (PHAZE's by default).

    ``len(space)``, iteration, ``space[i]`` and ``space.index(acc)`` work on architectures. ``base``
    supplies the fields the space does not vary (HBM capacity and bandwidth, clock, element size). Build
    it from a :class:`phaze_env.design.DesignSpace` (``design_space.arch_space()``) to search a space.
    """

    num_tc: Sequence[int] = NUM_TC_VALUES
    tc_width: Sequence[int] = TC_DIM_VALUES
    tc_depth: Sequence[int] = TC_DIM_VALUES
    num_vc: Sequence[int] = NUM_VC_VALUES
    buffer_mb: Sequence[int] = BUFFER_MB_VALUES
    budget_mm2: float | None = None  # None: the TPUv4-like configuration's area
    area_window_lower: float = AREA_WINDOW_LOWER
    base: Accelerator = TPUV4
    _arrays: dict = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ARCH_KNOBS:
            values = tuple(sorted(set(getattr(self, name))))
            if not values:
                raise ValueError(f"ArchSpace.{name} must not be empty")
            object.__setattr__(self, name, values)
        if self.budget_mm2 is None:
            object.__setattr__(self, "budget_mm2", area_budget_mm2())
        if not self.budget_mm2 > 0:
            raise ValueError(f"area budget must be positive, got {self.budget_mm2!r} mm²")
        object.__setattr__(self, "_arrays", self._enumerate())

    # --- enumeration -------------------------------------------------------------------------------
    def _enumerate(self) -> dict[str, np.ndarray]:
        grids = np.meshgrid(*(np.asarray(getattr(self, c), dtype=np.int64) for c in ARCH_KNOBS), indexing="ij")
        cols = {c: g.ravel() for c, g in zip(ARCH_KNOBS, grids)}
        areas = area.arch_area_mm2(cols["num_tc"], cols["tc_width"], cols["tc_depth"], cols["num_vc"], cols["tc_width"],
                                   cols["buffer_mb"], self.base.vc_sublanes)
        keep = in_area_window(cols["num_tc"], cols["num_vc"], areas, self.budget_mm2, self.area_window_lower)
        arrays = {c: v[keep] for c, v in cols.items()}
        arrays["vc_width"] = arrays["tc_width"]
        arrays["area_mm2"] = areas[keep]
        for name in ("num_tc", "tc_width", "tc_depth", "buffer_mb", "num_vc", "vc_width"):
            arrays[name].setflags(write=False)
        arrays["area_mm2"].setflags(write=False)
        return arrays

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """Column arrays of every in-window configuration: the :data:`ARCH_KNOBS` (num_tc, tc_width, tc_depth,
        num_vc, buffer_mb), vc_width and area_mm2 (read-only)."""
        return self._arrays

    def __len__(self) -> int:
        return int(self._arrays["num_tc"].size)

    def __getitem__(self, i: int) -> Accelerator:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"architecture index {i} out of range for a space of {n}")
        i %= n
        a = self._arrays
        return self.base.replace(
            num_tc=int(a["num_tc"][i]), num_vc=int(a["num_vc"][i]), tc_width=int(a["tc_width"][i]),
            tc_depth=int(a["tc_depth"][i]), vc_width=int(a["vc_width"][i]), buffer_mb=int(a["buffer_mb"][i]),
        )

    def __iter__(self) -> Iterator[Accelerator]:
        return (self[i] for i in range(len(self)))

    def _keys(self) -> np.ndarray:
        """One sortable integer key per configuration (lexicographic order = enumeration order)."""
        key = np.zeros(len(self), dtype=np.int64)
        for c in ARCH_KNOBS:
            key = key * 8192 + self._arrays[c]
        return key

    def index(self, acc: Accelerator) -> int:
        """Position of ``acc``'s architecture in the space; ``ValueError`` if it is not in it."""
        if acc.vc_width != acc.tc_width:
            raise ValueError(f"vector-core width {acc.vc_width} differs from tensor-core width {acc.tc_width}: not in the space")
        key = 0
        for c in ARCH_KNOBS:
            key = key * 8192 + getattr(acc, c)
        keys = self._keys()
        i = int(np.searchsorted(keys, key))
        if i == len(keys) or keys[i] != key:
            raise ValueError(f"{acc} is not in this space (outside the value lists or the area window)")
        return i

    def __contains__(self, acc: object) -> bool:
        if not isinstance(acc, Accelerator):
            return False
        try:
            self.index(acc)
        except ValueError:
            return False
        return True

    # --- unique core configurations (latency-table axes), found once per space -------------------------
    @functools.cached_property
    def tc_configs(self) -> tuple[np.ndarray, np.ndarray]:
        """Unique ``(num_tc, tc_width, tc_depth, buffer_mb)`` rows (``(T, 4)`` int array) and, per
        architecture, the row it uses."""
        a = self._arrays
        rows = np.stack([a["num_tc"], a["tc_width"], a["tc_depth"], a["buffer_mb"]], axis=1)
        return np.unique(rows, axis=0, return_inverse=True)

    @functools.cached_property
    def vc_configs(self) -> tuple[np.ndarray, np.ndarray]:
        """Unique ``(num_vc, vc_width, vc_sublanes, buffer_mb, num_tc)`` rows (``(V, 5)`` int array) and, per
        architecture, the row it uses (the buffer and tensor-core count set the vector cores' buffer share)."""
        a = self._arrays
        sublanes = np.full_like(a["num_vc"], self.base.vc_sublanes)
        rows = np.stack([a["num_vc"], a["vc_width"], sublanes, a["buffer_mb"], a["num_tc"]], axis=1)
        return np.unique(rows, axis=0, return_inverse=True)
