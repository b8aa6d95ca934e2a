"""The network prices the placement DP pays: a pipeline send across a level of the cluster, and a data-parallel or
expert-data-parallel collective as ``fixed + per_byte · S`` over every group size (one table per cluster, shared by
every search on it). The DP (:mod:`phaze_env.placement.search`) and the search's bounds of it
(:mod:`phaze_env.placement.bounds`) both price through these, so a bound cannot use another network model."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable

import numpy as np

from phaze_env import comm
from phaze_env.cluster import Cluster, Level


def pipeline_send_s(cluster: Cluster, level, payload_bytes: float, tensor_width: int) -> float:
    """One pipeline message of ``payload_bytes`` across ``level`` (a :class:`~phaze_env.cluster.Level` of ``cluster``);
    on a cluster of several levels, Megatron's scatter/gather (Narayanan et al. 2021 §4.1) sends ``1/t`` per tensor
    rank and all-gathers it inside the group (when the cluster's stack does it: ``Stack.pipeline_scatter_gather``;
    else every rank sends it whole)."""
    if len(cluster.network.levels) == 1:  # one level: nothing faster to gather over
        return comm.p2p_s(payload_bytes, level.p2p_bandwidth_Bps, level.latency_s)
    return level_send_bound_s(cluster, level, payload_bytes, tensor_width)


def p2p_bound_s(cluster: Cluster, payload_bytes: float, tensor_width: int) -> float:
    """A pipeline message is never faster than the DP's own send (:func:`pipeline_send_s`, Megatron's scatter/gather
    included) across the cheapest of the cluster's levels: whatever level a pipeline crosses, it is one of them."""
    return min(pipeline_send_s(cluster, level, payload_bytes, tensor_width) for level in cluster.network.levels)


def far_send_bounds(cluster: Cluster, payload_bytes: float, tensor_width: int) -> list[tuple[int, float]]:
    """``(span, send_s)`` per level ``k ≥ 1`` of the cluster: a pipeline whose sends ``i·stride → (i+1)·stride``
    (``i < hops``) reach ``hops·stride ≥ span``, the devices of the levels inside ``k``, sends every message at least
    ``send_s``, the cheapest send (:func:`pipeline_send_s`) across level ``k`` or one outside it. The DP prices a
    pipeline's sends at the outermost level its span crosses (:meth:`~phaze_env.cluster.Network.p2p_level`): device
    ``x``'s coordinates at the levels from ``k`` on are the mixed-radix digits of ``⌊x / span⌋``, which for
    ``x = hops·stride`` (``≥ span``, below the cluster's devices) is at least 1, so some level from ``k`` on is
    crossed. Nondecreasing in the span, as the bounds that take it at the smallest ``d`` of a group need."""
    levels = cluster.network.levels
    bounds, span = [], 1
    for k in range(1, len(levels)):
        span *= levels[k - 1].size
        bounds.append((span, min(pipeline_send_s(cluster, level, payload_bytes, tensor_width) for level in levels[k:])))
    return bounds


def level_send_bound_s(bounding: Cluster, level: Level, payload_bytes: float, tensor_width: int) -> float:
    """The message across ``level`` (``1/t`` of it under Megatron's scatter/gather) plus, under it, the all-gather
    inside the tensor group priced on ``bounding``: :func:`pipeline_send_s` itself on a cluster of several levels, and
    at most it on every cluster of several levels that ``bounding`` bounds (:func:`search.bounds.bounding_cluster`: its
    collectives are no slower) and that runs ``bounding``'s stack."""
    t = tensor_width
    if t == 1 or not bounding.stack.pipeline_scatter_gather:
        return comm.p2p_s(payload_bytes, level.p2p_bandwidth_Bps, level.latency_s)
    return (comm.p2p_s(payload_bytes / t, level.p2p_bandwidth_Bps, level.latency_s)
            + bounding.network.collective_s("allgather", payload_bytes, t))


def expert_group(tensor_width: int, context_parallel: int, expert_parallel: int, data_parallel: int,
                 folded: bool = False) -> dict:
    """The ranks holding one expert shard, as :meth:`Network.collective_s` arguments (rank order tp-cp-ep-dp-pp):
    the ``c`` context-parallel ranks ``t`` apart of each of the ``d/e`` data-parallel positions ``t·c·e`` apart; in a
    folded expert grid (``folded``: its order tp-ep-dp-pp at expert tensor parallelism 1) the ``t·c·d/e`` ranks ``e``
    apart."""
    t, c, e = tensor_width, context_parallel, expert_parallel
    if folded:
        return {"group": max(1, t * c * data_parallel // e), "stride": e}  # (a d that e does not fit: never taken)
    return {"group": c, "stride": t, "outer": (data_parallel // e, t * c * e)}


class AffineTable:
    """A collective over the groups ``index = 0 … size−1`` (``group_of(index)``: :meth:`Network.collective_s` arguments)
    as ``fixed[index] + per_byte[index] · S`` (exact for ``S > 0``: every ring term is affine in the bytes). An entry is
    computed the first time it is taken: a search with ZeRO-0 asks only for the smallest ``d`` of each microbatch
    count, and on the system space every design brings its own cluster, so a table is rarely needed whole."""

    def __init__(self, cluster: Cluster, kind: str, size: int, group_of: Callable[[int], dict]):
        self._cluster, self._kind, self._group_of = cluster, kind, group_of
        self._fixed, self._per_byte = np.full(size, np.nan), np.full(size, np.nan)

    def take(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(fixed[index], per_byte[index])``."""
        flat = np.asarray(index).ravel()
        missing = np.unique(flat[np.isnan(self._fixed[flat])])
        for i in missing.tolist():
            one, two = (self._cluster.network.collective_s(self._kind, size, **self._group_of(i)) for size in (1.0, 2.0))
            self._fixed[i], self._per_byte[i] = one - (two - one), two - one
        return self._fixed[index], self._per_byte[index]


@lru_cache(maxsize=64)
def expert_collective_affine(cluster: Cluster, kind: str, tensor_width: int, context_parallel: int,
                              expert_parallel: int, folded: bool = False) -> AffineTable:
    """A collective over the expert replicas (:func:`expert_group`) for ``d = e, 2e, … ≤ N/(t·c)`` (index ``d/e − 1``),
    shared by every search on one cluster: one table instead of a cached pair per ``d``, which a search at ``e = 2``
    over 1,024 devices (512 such ``d`` per collective) would evict from any small cache on every call. In a folded
    expert grid (``folded``) for ``d = 1 … N/(t·c)`` (index ``d − 1``; only the ``d`` with ``e | t·c·d`` are taken)."""
    t, c, e = tensor_width, context_parallel, expert_parallel
    if folded:
        return AffineTable(cluster, kind, max(1, cluster.n_devices // (t * c)),
                           lambda i: expert_group(t, c, e, i + 1, folded=True))
    return AffineTable(cluster, kind, max(1, cluster.n_devices // (t * c * e)),
                        lambda i: expert_group(t, c, e, (i + 1) * e))


@lru_cache(maxsize=64)
def collective_affine(cluster: Cluster, kind: str, stride: int) -> AffineTable:
    """A data-parallel collective over ``d = 1 … N/stride`` replicas ``stride`` apart (index ``d − 1``), shared by every
    search on one cluster."""
    size = max(1, cluster.n_devices // stride)
    return AffineTable(cluster, kind, size, lambda i: {"group": i + 1, "stride": stride})


def hybrid_collective_s(cluster: Cluster, kind: str, tensor_width: int, param_bytes: np.ndarray,
                        group: int | np.ndarray, spacing: int, per_param: float) -> np.ndarray:
    """A ``kind`` collective of every layer's ``param_bytes · per_param`` over ``group`` weight replicas ``spacing``
    replicas apart (``t·spacing`` devices apart), 0 for a layer without weights (``group`` an array of shape
    ``(rows, 1)``: one row per group size): a hybrid-sharded (``PlanSpec.shard_group``) ZeRO-3 stage's collectives."""
    table = collective_affine(cluster, kind, tensor_width * spacing)
    fixed, per_byte = table.take(np.asarray(group) - 1)
    return np.where(param_bytes > 0, fixed + per_byte * param_bytes * per_param, 0.0)


@dataclass(frozen=True)
class DataParallelPrices:
    """Data-parallel collectives at given data-parallel degrees ``d``, each kind as ``(fixed_s, per_byte_s)`` arrays
    (one entry per ``d``, the collective costing ``fixed + per_byte · S``): ``dense`` over the ``d`` replicas ``t``
    apart (:func:`collective_affine`), ``expert`` over the ``d/e`` expert replicas ``t·e`` apart
    (:func:`expert_collective_affine`; empty at ``e = 1``)."""

    dense: dict[str, tuple[np.ndarray, np.ndarray]]
    expert: dict[str, tuple[np.ndarray, np.ndarray]]


def data_parallel_prices(cluster: Cluster, kinds: Iterable[str], tensor_width: int, expert_parallel: int,
                         data_parallel: np.ndarray) -> DataParallelPrices:
    """The ``kinds`` of collective at each data-parallel degree of ``data_parallel`` (each one the expert grid fits:
    a multiple of ``expert_parallel``, or, in a folded grid, one with ``e | t·d``), from the DP's own affine tables:
    what the search's bound of the DP (:func:`~phaze_env.placement.bounds.placement_time_bound_s`) prices, taken in
    one call."""
    e, folded = expert_parallel, cluster.stack.folded_experts
    dense = {kind: collective_affine(cluster, kind, tensor_width).take(data_parallel - 1) for kind in kinds}
    index = data_parallel - 1 if folded else data_parallel // e - 1
    expert = ({kind: expert_collective_affine(cluster, kind, tensor_width, 1, e, folded).take(index)
               for kind in kinds} if e > 1 else {})
    return DataParallelPrices(dense, expert)


__all__ = ["AffineTable", "DataParallelPrices", "collective_affine", "data_parallel_prices", "expert_collective_affine",
           "expert_group", "far_send_bounds", "hybrid_collective_s", "level_send_bound_s",
           "p2p_bound_s",
           "pipeline_send_s"]
