"""Collective times written from the published alpha-beta formulas, independently of ``phaze_env/comm.py``: the
oracle the placement brute forces price their collectives with (a mistake in the code under test cannot hide in
its own oracle).

``S`` bytes, ``g`` ranks on a ring of links of ``B`` bytes/s each, ``α`` seconds per message (Hockney's model,
Hockney 1994, "The communication challenge for MPP: Intel Paragon and Meiko CS-2", Parallel Computing 20(3)):

* point-to-point: ``α + S/B`` (Hockney 1994);
* ring all-gather of ``S`` bytes in total (each rank contributes ``S/g``), and its mirror the ring reduce-scatter:
  ``g − 1`` steps, each sending one ``S/g`` block: ``(g−1)·α + (g−1)/g · S/B`` (Thakur, Rabenseifner & Gropp 2005,
  "Optimization of Collective Communication Operations in MPICH", IJHPCA 19(1): the ring algorithm);
* ring all-reduce: a reduce-scatter then an all-gather, ``2(g−1)`` steps of ``S/g``:
  ``2(g−1)·α + 2(g−1)/g · S/B``, bandwidth-optimal (Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce
  algorithms for clusters of workstations", JPDC 69(2));
* pairwise-exchange all-to-all of ``S`` bytes per rank (``S/g`` to each peer): ``(g−1)·α + (g−1)/g · S/B``
  (Thakur et al. 2005).

An empty payload or a group of one sends nothing (0 s). ``B = inf``: free transfer (latency only).
"""

from __future__ import annotations

import itertools


def p2p_s(size_bytes: float, bandwidth_Bps: float, latency_s: float = 0.0) -> float:
    """Hockney: ``α + S/B``; nothing is sent for ``S = 0``."""
    return 0.0 if size_bytes == 0 else latency_s + size_bytes / bandwidth_Bps


def _ring_s(steps: int, block_bytes: float, bandwidth_Bps: float, latency_s: float) -> float:
    """``steps`` ring steps, each moving one block over every link."""
    return steps * latency_s + steps * block_bytes / bandwidth_Bps


def allgather_s(size_bytes: float, ranks: int, bandwidth_Bps: float, latency_s: float = 0.0) -> float:
    """Ring all-gather (or reduce-scatter) of ``S`` bytes in total: ``g − 1`` steps of ``S/g``."""
    if ranks == 1 or size_bytes == 0:
        return 0.0
    return _ring_s(ranks - 1, size_bytes / ranks, bandwidth_Bps, latency_s)


def allreduce_s(size_bytes: float, ranks: int, bandwidth_Bps: float, latency_s: float = 0.0) -> float:
    """Ring all-reduce (Patarasuk & Yuan 2009): reduce-scatter + all-gather, ``2(g − 1)`` steps of ``S/g``."""
    if ranks == 1 or size_bytes == 0:
        return 0.0
    return _ring_s(2 * (ranks - 1), size_bytes / ranks, bandwidth_Bps, latency_s)


def alltoall_s(size_bytes: float, ranks: int, bandwidth_Bps: float, latency_s: float = 0.0) -> float:
    """Pairwise-exchange all-to-all of ``S`` bytes per rank: ``g − 1`` exchanges of ``S/g``."""
    if ranks == 1 or size_bytes == 0:
        return 0.0
    return _ring_s(ranks - 1, size_bytes / ranks, bandwidth_Bps, latency_s)


RINGS = {"allreduce": allreduce_s, "allgather": allgather_s, "reducescatter": allgather_s}


def hierarchical_s(levels, kind: str, size_bytes: float, positions: list[int]) -> float:
    """A hierarchical ring collective over the devices at ``positions`` on ``levels`` (inner first; each with
    ``size``, ``bandwidth_Bps``, ``latency_s``): one ring per level spanned, over the distinct positions the group
    takes on it, the payload shrinking by that extent before the next level (a reduce-scatter's shard goes up)."""
    if size_bytes == 0 or len(positions) <= 1:
        return 0.0
    total, shard, unit = 0.0, size_bytes, 1
    for level in levels:
        extent = len({position // unit % level.size for position in positions})
        unit *= level.size
        if extent > 1:
            total += RINGS[kind](shard, extent, level.bandwidth_Bps, level.latency_s)
            shard /= extent
    return total


def routings(experts: int, top_k: int, nodes: int, node_limit: int = 0):
    """Every routing a token can take, equally likely, with experts ``0 … E−1`` laid out node by node (``E/N`` each):
    the ``k``-subsets of all experts, or — node-limited to ``M`` nodes (DeepSeek-V3, arXiv:2412.19437 §2.1.2) — an
    ``M``-subset of the nodes, then a ``k``-subset of those nodes' experts. Listed by brute force (small ``E`` only)."""
    per_node = experts // nodes
    if node_limit <= 0 or node_limit >= nodes:
        return list(itertools.combinations(range(experts), top_k))
    chosen = []
    for node_set in itertools.combinations(range(nodes), node_limit):
        pool = [x for node in node_set for x in range(node * per_node, (node + 1) * per_node)]
        chosen.extend(itertools.combinations(pool, top_k))
    return chosen


def remote_nodes_per_token(experts: int, top_k: int, nodes: int, own_node: int, node_limit: int = 0) -> float:
    """Mean number of nodes other than ``own_node`` holding at least one of a token's experts, over
    :func:`routings`."""
    per_node = experts // nodes
    hit = [len({x // per_node for x in routing} - {own_node}) for routing in routings(experts, top_k, nodes, node_limit)]
    return sum(hit) / len(hit)


def node_deduplicated_dispatch_s(copies_bytes: float, top_k: int, experts: int, ranks_per_node: int, nodes: int,
                                 node_level: tuple[float, float], fabric: tuple[float, float],
                                 node_limit: int = 0) -> float:
    """One rank's node-deduplicated dispatch (DeepEP-style), summed phase by phase: over the fabric it sends each of
    its tokens (``copies_bytes / k`` in all) once to every other node holding one of the token's experts — one
    message per other node, ``α`` each, the mean volume of :func:`remote_nodes_per_token` — then, inside the node,
    the ``k`` copies go out pairwise to the node's other ranks (``ranks − 1`` messages of ``copies/ranks``).
    ``node_level`` and ``fabric`` are ``(bandwidth_Bps, latency_s)``."""
    total = 0.0
    if nodes > 1:
        tokens_bytes = copies_bytes / top_k
        bandwidth, latency = fabric
        volume = tokens_bytes * remote_nodes_per_token(experts, top_k, nodes, 0, node_limit)
        total += (nodes - 1) * latency + volume / bandwidth
    if ranks_per_node > 1:
        bandwidth, latency = node_level
        total += (ranks_per_node - 1) * (latency + copies_bytes / ranks_per_node / bandwidth)
    return total
