"""Validated input of one scheduling problem: a layer's operator DAG on one accelerator.

Turns the plain-data input (op dicts, edge pairs, core counts) into a :class:`Problem` with the
derived facts every other part needs: topological order, reachability bitsets, each op's durations,
core demands and admissible modes, and the head/tail path lengths used for bounds and big-Ms.
Everything that is wrong with an input is reported here, once, as a ``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real

from phaze_env.workloads.graph import UNITS

CORE_UNITS = ("tc", "vc", "tc+vc")  # units that hold cores; "comm" and "none" are pure delays
CORE_TYPES = ("tc", "vc")


def unit_uses(unit: str, core_type: str) -> bool:
    """Whether an op on ``unit`` holds cores of ``core_type`` ("tc+vc" holds both; "comm" and "none" neither)."""
    return core_type in unit.split("+")


@dataclass(frozen=True)
class Problem:
    """One layer DAG (forward or backward) on ``n_tc`` tensor and ``n_vc`` vector cores."""

    units: tuple[str, ...]
    latency_s: tuple[float, ...]  # on one core
    latency_parallel_s: tuple[float, ...]  # on all cores of its type (= latency_s for comm/none)
    edges: tuple[tuple[int, int], ...]  # sorted, unique
    n_tc: int
    n_vc: int
    topo_order: tuple[int, ...]
    descendants: tuple[int, ...]  # bitset per op: bit j set when j is reachable from op i

    def __len__(self) -> int:
        return len(self.units)

    def cores(self, core_type: str) -> int:
        return self.n_tc if core_type == "tc" else self.n_vc

    def uses(self, i: int, core_type: str) -> bool:
        """Whether op ``i`` holds cores of ``core_type`` (:func:`unit_uses`)."""
        return unit_uses(self.units[i], core_type)

    def duration_s(self, i: int, parallel: bool) -> float:
        return self.latency_parallel_s[i] if parallel else self.latency_s[i]

    def demand(self, i: int, parallel: bool) -> tuple[int, int]:
        """Cores of each type (tc, vc) op ``i`` holds while it runs in the given mode."""
        return tuple(
            (self.cores(t) if parallel else 1) if self.uses(i, t) else 0 for t in CORE_TYPES
        )

    def modes(self, i: int) -> tuple[bool, ...]:
        """The modes (``parallel`` flags) worth considering for op ``i``.

        A parallel mode that is not faster is dominated (more cores for no less time); when every
        core type the op uses has one core, both modes hold the same cores and the faster one wins.
        """
        if self.units[i] not in CORE_UNITS or self.latency_parallel_s[i] >= self.latency_s[i]:
            return (False,)
        if all(self.cores(t) == 1 for t in CORE_TYPES if self.uses(i, t)):
            return (True,)
        return (False, True)

    def min_duration_s(self, i: int) -> float:
        return min(self.duration_s(i, mode) for mode in self.modes(i))

    def comparable(self, i: int, j: int) -> bool:
        """Whether one of ``i``, ``j`` must finish before the other starts (a path joins them)."""
        return bool((self.descendants[i] >> j) & 1 or (self.descendants[j] >> i) & 1)

    def predecessors(self) -> list[list[int]]:
        preds: list[list[int]] = [[] for _ in self.units]
        for i, j in self.edges:
            preds[j].append(i)
        return preds

    def heads_s(self) -> list[float]:
        """Earliest start of each op with every op at its shortest duration and unlimited cores."""
        preds = self.predecessors()
        head = [0.0] * len(self)
        for j in self.topo_order:
            head[j] = max((head[i] + self.min_duration_s(i) for i in preds[j]), default=0.0)
        return head

    def tails_s(self) -> list[float]:
        """Longest path after each op ends (shortest durations), to the end of the layer."""
        succs: list[list[int]] = [[] for _ in self.units]
        for i, j in self.edges:
            succs[i].append(j)
        tail = [0.0] * len(self)
        for i in reversed(self.topo_order):
            tail[i] = max((self.min_duration_s(j) + tail[j] for j in succs[i]), default=0.0)
        return tail


def build_problem(ops: Sequence[Mapping], edges: Sequence, n_tc: int, n_vc: int) -> Problem:
    """Validate plain-data input and derive a :class:`Problem`; raise ``ValueError`` on bad input."""
    _check_core_count("n_tc", n_tc)
    _check_core_count("n_vc", n_vc)
    units, latency_s, latency_parallel_s = [], [], []
    for index, op in enumerate(ops):
        unit, single_s, parallel_s = _parse_op(index, op)
        units.append(unit)
        latency_s.append(single_s)
        latency_parallel_s.append(parallel_s)
    edge_set = tuple(sorted({_parse_edge(edge, len(units)) for edge in edges}))
    topo_order = _topological_order(len(units), edge_set)
    return Problem(
        units=tuple(units),
        latency_s=tuple(latency_s),
        latency_parallel_s=tuple(latency_parallel_s),
        edges=edge_set,
        n_tc=int(n_tc),
        n_vc=int(n_vc),
        topo_order=topo_order,
        descendants=_descendant_bitsets(len(units), edge_set, topo_order),
    )


def _check_core_count(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _parse_latency(index: int, key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"op {index}: {key} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"op {index}: {key} must be finite and >= 0, got {value!r}")
    return value


def _parse_op(index: int, op: Mapping) -> tuple[str, float, float]:
    if not isinstance(op, Mapping):
        raise ValueError(f"op {index}: expected a dict with unit/latency_s/latency_parallel_s, got {op!r}")
    unit = op.get("unit")
    if unit not in UNITS:
        raise ValueError(f"op {index}: unit must be one of {UNITS}, got {unit!r}")
    if "latency_s" not in op:
        raise ValueError(f"op {index}: missing latency_s")
    single_s = _parse_latency(index, "latency_s", op["latency_s"])
    if unit not in CORE_UNITS:  # a pure delay: its parallel duration is its duration
        if "latency_parallel_s" in op:
            _parse_latency(index, "latency_parallel_s", op["latency_parallel_s"])
        return unit, single_s, single_s
    if "latency_parallel_s" not in op:
        raise ValueError(f"op {index}: unit {unit!r} needs latency_parallel_s")
    return unit, single_s, _parse_latency(index, "latency_parallel_s", op["latency_parallel_s"])


def _parse_edge(edge, n_ops: int) -> tuple[int, int]:
    try:
        i, j = edge
    except (TypeError, ValueError):
        raise ValueError(f"edge {edge!r} is not an (i, j) pair") from None
    for end in (i, j):
        if isinstance(end, bool) or not isinstance(end, Integral) or not 0 <= end < n_ops:
            raise ValueError(f"edge {edge!r}: op index {end!r} out of range 0..{n_ops - 1}")
    if i == j:
        raise ValueError(f"edge {edge!r} is a self-loop (a cycle)")
    return int(i), int(j)


def _topological_order(n_ops: int, edges: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """Kahn's algorithm (smallest ready index first); ``ValueError`` naming the ops on a cycle."""
    indegree = [0] * n_ops
    succs: list[list[int]] = [[] for _ in range(n_ops)]
    for i, j in edges:
        succs[i].append(j)
        indegree[j] += 1
    ready = sorted(i for i in range(n_ops) if indegree[i] == 0)
    order: list[int] = []
    while ready:
        i = ready.pop(0)
        order.append(i)
        for j in succs[i]:
            indegree[j] -= 1
            if indegree[j] == 0:
                ready.append(j)
        ready.sort()
    if len(order) < n_ops:
        on_cycle = sorted(i for i in range(n_ops) if indegree[i] > 0)
        raise ValueError(f"the graph has a cycle through ops {on_cycle}")
    return tuple(order)


def _descendant_bitsets(n_ops: int, edges, topo_order) -> tuple[int, ...]:
    """Transitive closure once, as one Python-int bitset per op (reverse topological sweep)."""
    succs: list[list[int]] = [[] for _ in range(n_ops)]
    for i, j in edges:
        succs[i].append(j)
    reach = [0] * n_ops
    for i in reversed(topo_order):
        for j in succs[i]:
            reach[i] |= (1 << j) | reach[j]
    return tuple(reach)
