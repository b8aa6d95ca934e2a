"""A design point: the architecture knobs plus the non-architecture knobs searched with them.

Every search face (exact search, Gymnasium envs, Optuna objective, baselines) speaks the same two
values: a :class:`Design` (what to build and how to train on it) and a :class:`DesignSpace` (the
ordered knob value lists, with index ↔ design encoding for ``MultiDiscrete`` actions and the area
window). :func:`evaluate_design` is :func:`phaze_env.evaluate.evaluate` restricted to the design's own
microbatch size, recompute setting and HBM capacity — so the best design of a space has exactly the
throughput ``search.phaze`` reports for that space.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Iterator, Sequence

import numpy as np

from phaze_env.evaluate import Cluster, Evaluation, evaluate
from phaze_env.hardware import TPUV4, Accelerator, ArchSpace
from phaze_env.hardware.area import arch_area_mm2
from phaze_env.hardware.space import (AREA_WINDOW_LOWER, BUFFER_MB_VALUES, NUM_TC_VALUES, NUM_VC_VALUES,
                                      TC_DIM_VALUES, area_budget_mm2)
from phaze_env.workloads import Workload


@dataclass(frozen=True)
class Design:
    """Tensor cores (count × width × depth), vector cores (count; width = tensor-core width), on-chip
    buffer (MB), HBM capacity (GB), microbatch size and whether activation recompute is allowed."""

    num_tc: int
    tc_width: int
    tc_depth: int
    num_vc: int
    buffer_mb: int
    hbm_gb: float
    microbatch: int
    recompute: bool

    def accelerator(self, base: Accelerator = TPUV4) -> Accelerator:
        return base.replace(num_tc=self.num_tc, tc_width=self.tc_width, tc_depth=self.tc_depth, num_vc=self.num_vc,
                            vc_width=self.tc_width, buffer_mb=self.buffer_mb, hbm_gb=float(self.hbm_gb))

    @property
    def area_mm2(self) -> float:
        return float(arch_area_mm2(self.num_tc, self.tc_width, self.tc_depth, self.num_vc, self.tc_width, self.buffer_mb))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Design:
        names = {f.name for f in fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown design fields {sorted(unknown)}; expected {sorted(names)}")
        return cls(**{k: data[k] for k in names})


KNOBS = ("num_tc", "tc_width", "tc_depth", "num_vc", "buffer_mb", "hbm_gb", "microbatch", "recompute")


@dataclass(frozen=True)
class DesignSpace:
    """Ordered value lists per knob (PHAZE's space by default) and the area window."""

    num_tc: tuple[int, ...] = NUM_TC_VALUES
    tc_width: tuple[int, ...] = TC_DIM_VALUES
    tc_depth: tuple[int, ...] = TC_DIM_VALUES
    num_vc: tuple[int, ...] = NUM_VC_VALUES
    buffer_mb: tuple[int, ...] = BUFFER_MB_VALUES
    hbm_gb: tuple[float, ...] = (32.0, 64.0, 80.0)
    microbatch: tuple[int, ...] = (1, 2, 4, 8)
    recompute: tuple[bool, ...] = (False, True)
    budget_mm2: float = field(default_factory=area_budget_mm2)
    area_window_lower: float = AREA_WINDOW_LOWER

    def __post_init__(self) -> None:
        for name in KNOBS:
            values = tuple(getattr(self, name))
            if not values:
                raise ValueError(f"DesignSpace.{name} must list at least one value")
            object.__setattr__(self, name, values)

    @property
    def nvec(self) -> list[int]:
        """Number of choices per knob (a ``gymnasium.spaces.MultiDiscrete`` shape)."""
        return [len(getattr(self, name)) for name in KNOBS]

    def values(self, knob: str) -> tuple:
        return getattr(self, knob)

    def decode(self, indices: Sequence[int]) -> Design:
        if len(indices) != len(KNOBS):
            raise ValueError(f"expected {len(KNOBS)} knob indices ({', '.join(KNOBS)}), got {len(indices)}")
        kwargs = {}
        for name, index in zip(KNOBS, indices):
            options = getattr(self, name)
            if not 0 <= int(index) < len(options):
                raise ValueError(f"index {index} out of range for knob {name} ({len(options)} values)")
            kwargs[name] = options[int(index)]
        return Design(**kwargs)

    def encode(self, design: Design) -> list[int]:
        try:
            return [getattr(self, name).index(getattr(design, name)) for name in KNOBS]
        except ValueError:
            raise ValueError(f"{design} is not in this design space") from None

    def area_ok(self, design: Design) -> bool:
        """Inside PHAZE's area window (lower bound waived with one tensor core or one vector core)."""
        area = design.area_mm2
        if area > self.budget_mm2:
            return False
        return area >= self.area_window_lower * self.budget_mm2 or design.num_tc == 1 or design.num_vc == 1

    def overshoot(self, design: Design) -> float:
        """Relative area violation (0 inside the window)."""
        area = design.area_mm2
        if area > self.budget_mm2:
            return area / self.budget_mm2 - 1.0
        if not self.area_ok(design):
            return 1.0 - area / (self.area_window_lower * self.budget_mm2)
        return 0.0

    def __len__(self) -> int:
        return int(np.prod(self.nvec))

    def __iter__(self) -> Iterator[Design]:
        """Every design inside the area window."""
        for combo in itertools.product(*(getattr(self, name) for name in KNOBS)):
            design = Design(*combo)
            if self.area_ok(design):
                yield design

    def sample(self, rng: np.random.Generator, *, feasible_area: bool = True, max_tries: int = 10_000) -> Design:
        for _ in range(max_tries):
            design = self.decode([int(rng.integers(n)) for n in self.nvec])
            if not feasible_area or self.area_ok(design):
                return design
        raise RuntimeError("could not sample a design inside the area window")

    def arch_space(self) -> ArchSpace:
        """The matching architecture space for ``search.phaze`` (same lists, same window)."""
        from phaze_env.hardware import KnobSpace

        return ArchSpace(num_tc=self.num_tc, num_vc=self.num_vc, tc_width=self.tc_width, tc_depth=self.tc_depth,
                         buffer_mb=self.buffer_mb, knobs=KnobSpace(self.microbatch, self.recompute, self.hbm_gb),
                         budget_mm2=self.budget_mm2, area_window_lower=self.area_window_lower)

    @classmethod
    def reduced(cls, **overrides: Any) -> DesignSpace:
        """A small space (a few hundred designs) for tests, smoke runs and brute-force checks."""
        values = dict(num_tc=(1, 4, 16), tc_width=(32, 128), tc_depth=(32, 128), num_vc=(1, 4, 16), buffer_mb=(8, 64),
                      hbm_gb=(32.0, 80.0), microbatch=(1, 4), recompute=(False, True))
        values.update(overrides)
        return cls(**values)


def evaluate_design(design: Design, workload: str | Workload, cluster: Cluster | None = None, *,
                    base: Accelerator = TPUV4, **kwargs: Any) -> Evaluation:
    """:func:`evaluate` of one design point (its own microbatch size, recompute setting and HBM capacity)."""
    return evaluate(workload, design.accelerator(base), cluster, microbatch_sizes=(design.microbatch,),
                    recompute=(design.recompute,), hbm_gb=(design.hbm_gb,), **kwargs)
