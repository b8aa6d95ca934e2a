"""Collective-communication time models (seconds) on a ring of identical links.

Published formulas: a ring all-reduce of ``S`` bytes over ``g`` participants moves
``2 (g-1)/g · S`` bytes through each link in ``2 (g-1)`` steps; a ring all-gather (or reduce-scatter)
moves ``(g-1)/g · S`` in ``g-1`` steps (Thakur et al., 2005; Megatron-LM). A point-to-point transfer
moves ``S`` in one step. An all-to-all of a buffer of ``S`` bytes per rank (``S/g`` to each peer; the
dispatch and combine of expert parallelism) sends ``(g-1)/g · S`` per rank in ``g-1`` messages: NCCL runs it
as ``g-1`` concurrent point-to-point sends over a switch (the standard alpha-beta cost
``(g-1)·α + (g-1)/g · S/B`` of the pairwise-exchange algorithm, Thakur, Rabenseifner & Gropp 2005); on a ring of links it is
bounded by the ring's bisection instead (see :func:`alltoall_s`). ``bandwidth_Bps=inf`` means free communication.
"""

from __future__ import annotations

import math


def _check(payload_bytes: float, group: int, bandwidth_Bps: float, latency_s: float) -> None:
    if payload_bytes < 0:
        raise ValueError(f"payload must be non-negative, got {payload_bytes} bytes")
    if group < 1:
        raise ValueError(f"group size must be at least 1, got {group}")
    if not bandwidth_Bps > 0:
        raise ValueError(f"link bandwidth must be positive, got {bandwidth_Bps} B/s")
    if latency_s < 0:
        raise ValueError(f"link latency must be non-negative, got {latency_s} s")


def allreduce_s(payload_bytes: float, group: int, bandwidth_Bps: float, latency_s: float = 0.0) -> float:
    """Ring all-reduce: ``2(g-1)/g · S / B + 2(g-1) · α``; zero for a group of one."""
    _check(payload_bytes, group, bandwidth_Bps, latency_s)
    if group == 1 or payload_bytes == 0:
        return 0.0
    steps = 2 * (group - 1)
    transfer = 0.0 if math.isinf(bandwidth_Bps) else steps / group * payload_bytes / bandwidth_Bps
    return transfer + steps * latency_s


def allgather_s(payload_bytes: float, group: int, bandwidth_Bps: float, latency_s: float = 0.0) -> float:
    """Ring all-gather (also reduce-scatter) of a total of ``S`` bytes: ``(g-1)/g · S / B + (g-1) · α``."""
    _check(payload_bytes, group, bandwidth_Bps, latency_s)
    if group == 1 or payload_bytes == 0:
        return 0.0
    steps = group - 1
    transfer = 0.0 if math.isinf(bandwidth_Bps) else steps / group * payload_bytes / bandwidth_Bps
    return transfer + steps * latency_s


def alltoall_s(payload_bytes: float, group: int, bandwidth_Bps: float, latency_s: float = 0.0, *,
               ring: bool = False) -> float:
    """All-to-all of ``S`` bytes per rank: ``(g-1)/g · S / B + (g-1) · α``; zero for a group of one.

    ``ring=True``: the ranks sit on a bidirectional ring (a torus dimension; ``B`` = both directions' per-device
    bandwidth). Half the ranks send ``g/2 · S/g`` each across the two cut links, so the bisection allows no
    less than ``g/4 · S / B``; the larger of the two bandwidth terms applies.
    """
    _check(payload_bytes, group, bandwidth_Bps, latency_s)
    if group == 1 or payload_bytes == 0:
        return 0.0
    steps = group - 1
    share = max(steps / group, group / 4) if ring else steps / group
    transfer = 0.0 if math.isinf(bandwidth_Bps) else share * payload_bytes / bandwidth_Bps
    return transfer + steps * latency_s


def p2p_s(payload_bytes: float, bandwidth_Bps: float, latency_s: float = 0.0) -> float:
    """Point-to-point send of ``S`` bytes: ``S / B + α``; zero for an empty payload."""
    _check(payload_bytes, 2, bandwidth_Bps, latency_s)
    if payload_bytes == 0:
        return 0.0
    return (0.0 if math.isinf(bandwidth_Bps) else payload_bytes / bandwidth_Bps) + latency_s


def collective_s(kind: str, payload_bytes: float, group: int, bandwidth_Bps: float, latency_s: float = 0.0) -> float:
    """Time of a collective named by ``kind`` ("allreduce", "allgather", "reducescatter", "alltoall", "p2p")."""
    if kind == "allreduce":
        return allreduce_s(payload_bytes, group, bandwidth_Bps, latency_s)
    if kind in ("allgather", "reducescatter"):
        return allgather_s(payload_bytes, group, bandwidth_Bps, latency_s)
    if kind == "alltoall":
        return alltoall_s(payload_bytes, group, bandwidth_Bps, latency_s)
    if kind == "p2p":
        return p2p_s(payload_bytes, bandwidth_Bps, latency_s)
    raise ValueError(f"unknown collective {kind!r}; expected allreduce, allgather, reducescatter, alltoall or p2p")
