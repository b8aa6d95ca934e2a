"""The result of a placement search: a frozen, JSON-friendly :class:`Plan`."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class Plan:
    """A training placement and its performance breakdown (seconds, bytes, per device).

    ``notation`` is the plan in the one notation of :mod:`phaze_env.plan_spec` (``t8p8d1m1v3+sp+rc=selective``).
    ``time_per_batch_s = (m_r + (p − 1)/v) · max(stage_times_s) + allreduce_s + optimizer step``, and
    ``time_breakdown_s`` splits it into parts that add up to it: ``compute`` (m_r × the slowest stage's
    forward + backward without its tensor-parallel collectives, exposed context-parallel ring exchange and
    expert-parallel all-to-alls), ``recompute``, ``tp_comm``, ``cp_comm`` (m_r × the ring exchange not hidden
    under attention), ``ep_comm`` (m_r × its expert-parallel dispatch and combine all-to-alls), ``p2p``
    (m_r × its sends), ``zero_comm`` (m_r × its ZeRO-2/3 reduce-scatters and all-gathers that its compute
    does not hide), ``bubble`` ((p − 1)/v × its time per microbatch), ``dp_allreduce`` (the data-parallel
    collective after the flush: the gradient all-reduce, ZeRO-2's weight all-gather, none for ZeRO-3; dense
    bytes over the ``d·c`` data-parallel ranks, expert bytes over the ``d·c/e`` expert-data-parallel ranks) and
    ``optimizer`` (both for the stage whose once-per-batch sync is largest). ``zero`` is the ZeRO stage (0 when
    ``d·c = 1``).
    ``stage_times_s`` are per microbatch (forward + backward + recompute + p2p sends); ``recompute_modes``
    the mode of each stage (``recompute``: whether it recomputes anything); ``memory_bytes`` is the
    breakdown of the stage with the largest footprint (the worst device: weights, gradients, optimizer,
    ``zero_buffers`` — ZeRO-2/3's unsharded layer gradients and gathered weights — activations, total;
    ``stage_memory`` the same breakdown for every stage, first to last; under DualPipe a device holds a stage and its
    mirror, and ``memory_bytes`` is the fullest device's, the two stages' sum);
    ``p2p_s`` and ``allreduce_s``
    repeat the breakdown's ``p2p`` and ``dp_allreduce``. ``mfu``: model FLOPs over the peak of the devices
    used (``Settings.peak_flops``; the evaluator's is each design's own peak in its number format,
    ``Accelerator.format_peak_flops``: an FP8 design's FP8 peak, so no MFU exceeds 1).
    For a DAG, ``stage_layers`` is authoritative and ``stage_bounds`` holds each stage's (min, max) layer.
    An infeasible plan has ``feasible=False``, a ``reason`` and zero throughput.
    """

    feasible: bool
    reason: str = ""
    notation: str = ""
    throughput_samples_s: float = 0.0
    time_per_batch_s: float = math.inf
    tokens_s: float | None = None
    mfu: float | None = None
    tensor_width: int = 0
    context_parallel: int = 1
    data_parallel: int = 0
    expert_parallel: int = 1
    pipeline_stages: int = 0
    microbatch: int = 0
    microbatches_per_replica: int = 0
    interleave: int = 1
    sequence_parallel: bool = False
    zero: int = 0
    devices_used: int = 0
    hbm_bytes: float = 0.0
    stage_bounds: tuple[tuple[int, int], ...] = ()
    stage_layers: tuple[tuple[int, ...], ...] = ()
    recompute: tuple[bool, ...] = ()
    recompute_modes: tuple[str, ...] = ()
    stage_times_s: tuple[float, ...] = ()
    stage_p2p_s: tuple[float, ...] = ()
    stage_allreduce_s: tuple[float, ...] = ()
    stage_memory_bytes: tuple[float, ...] = ()
    stage_memory: tuple[dict[str, float], ...] = ()  # every stage's breakdown (the keys of memory_bytes)
    bubble_fraction: float = 0.0
    memory_bytes: dict[str, float] = field(default_factory=dict)
    time_breakdown_s: dict[str, float] = field(default_factory=dict)
    allreduce_s: float = 0.0
    p2p_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (tuples become lists)."""
        return json_ready(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        """Inverse of :meth:`to_dict` (lists become tuples again, values kept as they are, so
        ``Plan.from_dict(plan.to_dict()).to_dict() == plan.to_dict()``, and its JSON the same bytes): how search
        records (``results.json``, ``results.db``) read their plans back. A key that is no field raises a
        ``ValueError`` naming it; a field a record lacks keeps its default."""
        names = {f.name for f in dataclasses.fields(cls)}
        if unknown := sorted(set(data) - names):
            raise ValueError(f"not a plan record: unknown key(s) {', '.join(map(repr, unknown))} "
                             f"(a Plan has {', '.join(sorted(names))})")
        if "feasible" not in data:
            raise ValueError("not a plan record: no 'feasible' key")
        return cls(**{key: _tuples(value) for key, value in data.items()})


def json_ready(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(item) for item in value]
    return value


def plan_or_none(data: Mapping[str, Any]) -> Plan | None:
    """A recorded plan (``Evaluation.plan_dict()``: a search record's, a design's in ``results.json``) as its
    :class:`Plan`; ``{}`` (no plan: infeasible) as ``None``."""
    return Plan.from_dict(data) if data else None


def _tuples(value: Any) -> Any:
    """:func:`json_ready` undone: every list (at any depth, also inside dicts) a tuple again."""
    if isinstance(value, dict):
        return {key: _tuples(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return tuple(_tuples(item) for item in value)
    return value


def infeasible(reason: str, **fields: Any) -> Plan:
    """A plan that does not exist, with the reason."""
    return Plan(feasible=False, reason=reason, **fields)
