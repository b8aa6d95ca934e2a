"""Terms of the cost model no other test pins: the expert all-to-all's rank spacing with context parallelism, the
energy per sample of a context-parallel group, and the smaller-area tie-break of the best-design search."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import collective_oracle as oracle
import numpy as np
import pytest
from tiny import TINY

from phaze_env.cluster import Cluster
from phaze_env.context_parallel import rank_graph
from phaze_env.evaluate import Evaluation, LayerTiming, _energy_per_sample_j, _layer_chain, _model_flops_per_sample
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
    assert entry.ep_comm_s == pytest.approx(4 * between_nodes)  # dispatch + combine, forward and backward
    assert entry.fwd_s == pytest.approx(1.0 + 2 * between_nodes)


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


def _made_up(throughput_samples_s: float) -> Evaluation:
    """A made-up feasible evaluation: only its throughput matters to the search loop."""
    return Evaluation(workload="w", accelerator={}, cluster={}, feasible=True, reason="",
                      throughput_samples_s=throughput_samples_s, tokens_s=0.0, mfu=0.0, area_mm2=0.0, peak_flops=0.0,
                      energy_per_sample_j=0.0, plan=None, memory_bytes={}, layer_timings={}, timings_s={}, ilp_solves=0,
                      schedules=0)


def test_equal_values_go_to_the_smaller_area():
    """Two designs of the same throughput: the one with the larger area has the higher bound, so it is evaluated
    first; the smaller one, visited next, must take its place (search.exact: "Ties keep the smaller-area design")."""
    areas = np.array([200.0, 100.0])
    config = SimpleNamespace(arch=SimpleNamespace(arrays={"area_mm2": areas}), second_bound=False)
    search = ExactSearch(config, executor=None)
    for index in range(2):
        search.records[("w", index)] = DesignRecord.evaluated(_made_up(5.0), float(areas[index]))
    best, value, visited = search.maximise(["w"], np.array([10.0, 8.0]), lambda evs: evs["w"].throughput_samples_s,
                                           "tie", window=1)
    assert (best, value, visited) == (1, 5.0, 2)


def _tie_search(areas: np.ndarray, values: list[float], second_bound: bool = False):
    """An ExactSearch over made-up designs whose evaluations are futures the test completes in its own order."""
    from concurrent.futures import Future

    config = SimpleNamespace(arch=SimpleNamespace(arrays={"area_mm2": areas}), second_bound=second_bound,
                             task=lambda workload, index, prune_below: {"index": index, "prune_below": prune_below})
    submitted: list[tuple[Future, dict]] = []

    class Executor:
        def submit(self, fn, task):
            future = Future()
            submitted.append((future, task))
            return future

    def result(index: int) -> dict:
        return {"status": "evaluated", "bound": None, "dp_calls": 0, "bound_dp_calls": 0,
                "evaluation": _made_up(values[index]).to_dict()}  # a worker's answer is plain data

    return ExactSearch(config, executor=Executor()), submitted, result


def test_a_design_that_can_tie_with_a_smaller_area_is_evaluated_not_pruned():
    """The first design evaluated reaches 8; the next one's bound is exactly 8 and its area is smaller: it can tie
    and win the tie, so it must be evaluated (a ``bound ≤ best`` test pruned it and returned the larger design);
    the third, equal in bound and area but later in the tie order, cannot win and is pruned."""
    import search.exact as exact

    areas = np.array([100.0, 50.0, 50.0])
    search, submitted, result = _tie_search(areas, [8.0, 8.0, 8.0])

    def wait(futures, return_when=None):
        for future, task in submitted:
            if future in futures and not future.done():
                future.set_result(result(task["index"]))
                return {future}, set()
        raise AssertionError("nothing to complete")

    original, exact.wait = exact.wait, wait
    try:
        best, value, visited = search.maximise(["w"], np.array([10.0, 8.0, 8.0]),
                                               lambda evs: evs["w"].throughput_samples_s, "tie", window=1)
    finally:
        exact.wait = original
    assert (best, value, visited) == (1, 8.0, 2)


@pytest.mark.parametrize("arrival", list(itertools.permutations(range(4))))
def test_exact_ties_give_the_same_answer_whatever_order_results_arrive_in(arrival):
    """Equal values on equal areas (e.g. two die windows building the same chip): the answer is the first in the
    tie order (smaller area, then smaller index) for every order in which the evaluations finish."""
    import search.exact as exact

    areas = np.array([100.0, 50.0, 50.0, 50.0])
    search, submitted, result = _tie_search(areas, [5.0, 8.0, 8.0, 8.0])

    def wait(futures, return_when=None):
        for index in arrival:
            for future, task in submitted:
                if task["index"] == index and future in futures and not future.done():
                    future.set_result(result(index))
                    return {future}, set()
        raise AssertionError("nothing to complete")

    original, exact.wait = exact.wait, wait
    try:
        best, value, _ = search.maximise(["w"], np.array([10.0, 9.0, 9.0, 9.0]),
                                         lambda evs: evs["w"].throughput_samples_s, "tie", window=4)
    finally:
        exact.wait = original
    assert (best, value) == (1, 8.0)
