"""Terms of the cost model no other test pins: the expert all-to-all's rank spacing with context parallelism, the
energy per sample of a context-parallel group, and the smaller-area tie-break of the best-design search."""

from __future__ import annotations

from types import SimpleNamespace

import collective_oracle as oracle
import numpy as np
import pytest
from tiny import TINY

from phaze_env.cluster import Cluster
from phaze_env.context_parallel import rank_graph
from phaze_env.evaluate import LayerTiming, _energy_per_sample_j, _layer_chain, _model_flops_per_sample
from phaze_env.hardware import get_preset
from phaze_env.workloads import model_graph
from phaze_env.workloads.graph import Layer, ModelGraph, OpGraph
from search.exact import ExactSearch
from search.store import DesignRecord


def test_expert_alltoall_spans_ranks_t_times_c_apart():
    """Megatron-Core's rank order tp-cp-ep-dp-pp puts the ``e`` expert-parallel partners ``t·c`` apart: at t = 2,
    c = 2, e = 2 on nodes of 4 devices they are ranks 0 and 4, in two nodes, so the dispatch and combine cross
    the slow links (ranks ``t`` apart, 0 and 2, would share a node)."""
    cluster = Cluster(n_devices=16, global_batch=4, devices_per_node=4, node_bandwidth_Bps=1000.0, link_bandwidth_Bps=10.0)
    empty = OpGraph(ops=(), edges=())
    layer = Layer(name="block", repeat=1, fwd=empty, bwd=empty, params=30, param_bytes=60, flops_fwd=0, flops_bwd=0,
                  activation_stash_bytes=0, input_bytes=1, output_bytes=1, expert_param_bytes=40, routed_token_bytes=800)
    graph = ModelGraph(workload="moe", seq_len=8, microbatch=1, tensor_width=2, bytes_per_element=2, layers=(layer,))
    timings = {"block": LayerTiming(1.0, 2.0, 1.0, 2.0, "ilp", "ilp", True, True)}
    (entry,) = _layer_chain(graph, timings, cluster, expert_parallel=2, context_parallel=2)
    between_nodes = oracle.alltoall_s(800.0, 2, 10.0)  # (2−1)/2 · 800 B / 10 B/s = 40 s, on the inter-node links
    assert entry["ep_comm_s"] == pytest.approx(4 * between_nodes)  # dispatch + combine, forward and backward
    assert entry["fwd_s"] == pytest.approx(1.0 + 2 * between_nodes)


def test_a_context_parallel_group_uses_at_least_one_ranks_energy_per_sample():
    """Context parallelism splits a sample's tokens over ``c`` ranks, not its work: the group's energy per sample
    (each rank's ``s/c`` tokens × ``c``) is at least the energy of one rank running the whole sequence (the ring
    exchange and the split attention only add), while the model FLOPs per sample stay the same."""
    acc = get_preset("tpuv4")
    whole = model_graph(TINY, seq_len=64, microbatch=1, tensor_width=1)
    rank = rank_graph(model_graph(TINY, seq_len=32, microbatch=1, tensor_width=1), 2)
    assert _model_flops_per_sample(rank, 2) == pytest.approx(_model_flops_per_sample(whole))
    single_j = _energy_per_sample_j(whole, acc, 1)
    group_j = _energy_per_sample_j(rank, acc, 1, context_parallel=2)
    assert single_j <= group_j < 2 * single_j


def test_equal_values_go_to_the_smaller_area():
    """Two designs of the same throughput: the one with the larger area has the higher bound, so it is evaluated
    first; the smaller one, visited next, must take its place (search.exact: "Ties keep the smaller-area design")."""
    areas = np.array([200.0, 100.0])
    config = SimpleNamespace(arch=SimpleNamespace(arrays={"area_mm2": areas}), second_bound=False)
    search = ExactSearch(config, executor=None)
    for index in range(2):
        search.records[("w", index)] = DesignRecord.evaluated({"throughput_samples_s": 5.0}, float(areas[index]))
    best, value, visited = search.maximise(["w"], np.array([10.0, 8.0]), lambda evs: evs["w"]["throughput_samples_s"],
                                           "tie", window=1)
    assert (best, value, visited) == (1, 5.0, 2)
