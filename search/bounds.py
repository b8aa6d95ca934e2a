"""Vectorised throughput upper bounds for every architecture of a space at once (no ILP, no DP).

For one (tensor width ``t``, microbatch ``m``) and every architecture ``a``:

* each layer's forward/backward makespan is at least ``max(critical path with every op at its
  shortest mode, Σ core-time per core type / cores of that type)`` — the schedule ILP's own bounds;
* for any placement with ``p`` stages and ``d`` replicas (``d·p·t ≤ N``), ``m_r = ⌈B/(d·m)⌉`` and the
  1F1B rule give ``time ≥ (m_r + p − 1)·max(T_a / p, ℓ_a) + allreduce(P / p, d)`` where ``T_a`` is the
  summed layer time, ``ℓ_a`` the slowest single layer and ``P`` the gradient bytes (some stage holds at
  least ``T_a/p`` of the time and ``P/p`` of the parameters; memory, recompute and p2p only add).

So ``B / min_{p,d} time`` bounds the throughput the placement DP can reach, for every ``t`` and ``m``;
the maximum over them bounds the architecture. Among ``d`` with the same ``m_r`` the smallest is enough
(the all-reduce grows with ``d``).
"""

from __future__ import annotations

import numpy as np

from phaze_env.comm import allreduce_s
from phaze_env.evaluate import Cluster, valid_tensor_widths
from phaze_env.hardware import ArchSpace, latency_table
from phaze_env.placement.inputs import GRADIENT_FACTOR
from phaze_env.workloads import OpGraph, Workload, model_graph

CORE_UNITS = {"tc": ("tc", "tc+vc"), "vc": ("vc", "tc+vc")}


def dag_lower_bounds_s(dag: OpGraph, one_s: np.ndarray, all_s: np.ndarray, n_tc: np.ndarray,
                       n_vc: np.ndarray) -> np.ndarray:
    """Makespan lower bound of one DAG for every architecture (``one_s``/``all_s``: ops × archs)."""
    if not dag.ops:
        return np.zeros(one_s.shape[1])
    shortest = np.minimum(one_s, all_s)
    preds: list[list[int]] = [[] for _ in dag.ops]
    for a, b in dag.edges:
        preds[b].append(a)
    finish = np.zeros_like(shortest)
    for i in _topological(len(dag.ops), dag.edges):
        start = finish[preds[i]].max(axis=0) if preds[i] else 0.0
        finish[i] = start + shortest[i]
    bound = finish.max(axis=0)
    for core, cores in (("tc", n_tc), ("vc", n_vc)):
        rows = [i for i, op in enumerate(dag.ops) if op.unit in CORE_UNITS[core]]
        if rows:
            work = np.minimum(one_s[rows], cores * all_s[rows]).sum(axis=0) / cores
            bound = np.maximum(bound, work)
    return bound


def _topological(n: int, edges) -> list[int]:
    indegree = [0] * n
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        succ[a].append(b)
        indegree[b] += 1
    order, ready = [], [i for i in range(n) if indegree[i] == 0]
    while ready:
        v = ready.pop()
        order.append(v)
        for w in succ[v]:
            indegree[w] -= 1
            if indegree[w] == 0:
                ready.append(w)
    return order


def layer_time_bounds_s(graph, space: ArchSpace, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
    """(Σ over the chain of fwd+bwd lower bounds, slowest single layer) per architecture."""
    arrays = space.arrays
    tc_rows, tc_index = space.tc_configs()
    vc_rows, vc_index = space.vc_configs()
    total = np.zeros(len(space))
    slowest = np.zeros(len(space))
    for layer in graph.layers:
        layer_s = np.zeros(len(space))
        for dag in (layer.fwd, layer.bwd):
            if not dag.ops:
                continue
            table = latency_table(dag.ops, tc_rows, vc_rows, hbm_bandwidth_Bps=space.base.hbm_bandwidth_Bps,
                                  clock_hz=space.base.clock_hz, bytes_per_element=space.base.bytes_per_element,
                                  link_bandwidth_Bps=cluster.link_bandwidth_Bps, link_latency_s=cluster.link_latency_s)
            one, all_cores = table.latencies_s(tc_index.ravel(), vc_index.ravel())
            layer_s += dag_lower_bounds_s(dag, one, all_cores, arrays["num_tc"], arrays["num_vc"])
        total += layer.repeat * layer_s
        slowest = np.maximum(slowest, layer_s)
    return total, slowest


def placement_time_bound_s(total_s: np.ndarray, slowest_s: np.ndarray, n_layers: int, gradient_bytes: float,
                           tensor_width: int, microbatch: int, cluster: Cluster) -> np.ndarray:
    """Lower bound on the time per batch over every (p, d) placement, per architecture."""
    n, batch = cluster.n_devices, cluster.global_batch
    best = np.full(total_s.shape, np.inf)
    for p in range(1, min(n_layers, n // tensor_width) + 1):
        max_d = n // (tensor_width * p)
        d = np.arange(1, max_d + 1)
        m_r = -(-batch // (d * microbatch))
        first = np.r_[True, m_r[1:] != m_r[:-1]]  # smallest d for each m_r
        d, m_r = d[first], m_r[first]
        allreduce = np.array([allreduce_s(gradient_bytes / p, int(k), cluster.link_bandwidth_Bps,
                                          cluster.link_latency_s) for k in d])
        stage_s = np.maximum(total_s / p, slowest_s)
        times = (m_r + p - 1)[:, None] * stage_s[None, :] + allreduce[:, None]
        best = np.minimum(best, times.min(axis=0))
    return best


def throughput_bounds(workload: Workload, space: ArchSpace, cluster: Cluster, *, microbatches, tensor_widths,
                      seq_len: int | None = None) -> np.ndarray:
    """Upper bound on ``evaluate(...).throughput_samples_s`` for every architecture of ``space``."""
    bound = np.zeros(len(space))
    for t in valid_tensor_widths(workload, tensor_widths, cluster.n_devices):
        for m in microbatches:
            graph = model_graph(workload, seq_len=seq_len, microbatch=m, tensor_width=t)
            total_s, slowest_s = layer_time_bounds_s(graph, space, cluster)
            n_layers = sum(layer.repeat for layer in graph.layers)
            gradient_bytes = GRADIENT_FACTOR * sum(layer.param_bytes * layer.repeat for layer in graph.layers)
            time_s = placement_time_bound_s(total_s, slowest_s, n_layers, gradient_bytes, t, m, cluster)
            bound = np.maximum(bound, cluster.global_batch / time_s)
    return bound * (1 + 1e-9)  # round-off must never prune an exact tie
