"""MoE at the per-rank shape (issue 28 item 3): the routed experts' GEMMs as one expert-parallel rank runs them (``E/e``
experts on ``e·C`` tokens each, their weights read once), and the node-deduplicated (hierarchical) dispatch with
node-limited routing — each checked against an oracle written from the published description, not from the code."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

import collective_oracle as oracle
from phaze_env.cluster import Cluster, get_cluster
from phaze_env.evaluate import LayerTiming, _layer_chain
from phaze_env.moe_dispatch import dispatch_s, expected_nodes_hit
from phaze_env.stacks import STACKS, StackProfile
from phaze_env.workloads import get_workload, model_graph
from test_workloads_moe import SMALL, TOKENS, small


# ---------------------------------------------------------------- the experts at the per-rank shape
def _expert_ops(graph_direction):
    """The routed experts' GEMM operators: :class:`~phaze_env.workloads.moe.StaticExperts` runs them as ``torch.bmm``."""
    return [op for op in graph_direction.ops if op.gemms and any(name.startswith("bmm") for name in op.fused)]


@pytest.mark.parametrize("e", [2, 4, 8])
def test_expert_gemms_are_the_local_experts_on_their_routed_tokens(e):
    """Small Mixtral (8 experts, top-2, hidden 64, FFN 96, 32 tokens: C = 32·2/8 = 8 tokens per expert): at degree
    ``e`` a rank's gate/up GEMM is ``(8/e experts, 8·e tokens, 64, 2·96)`` and its down GEMM ``(8/e, 8·e, 96, 64)``,
    written from the config; the FLOPs are the traced ones, the weights read are ``1/e`` of them, and every other
    operator is untouched."""
    config = SMALL["mixtral"][2]
    experts, hidden, ffn = config["num_local_experts"], config["hidden_size"], config["intermediate_size"]
    capacity = TOKENS * config["num_experts_per_tok"] // experts
    whole = model_graph(small("mixtral"), microbatch=1, tensor_width=1)
    rank = model_graph(small("mixtral"), microbatch=1, tensor_width=1, expert_parallel=e)
    block, block_e = whole.layers[1], rank.layers[1]
    shapes = [g.as_tuple() for op in _expert_ops(block_e.fwd) for g in op.gemms]
    assert shapes == [(experts // e, capacity * e, hidden, 2 * ffn), (experts // e, capacity * e, ffn, hidden)]
    assert block_e.flops_fwd == block.flops_fwd and block_e.flops_bwd == block.flops_bwd
    weights = 2 * experts * 3 * hidden * ffn  # bf16 gate, up and down of every expert
    read = sum(op.bytes_read for op in _expert_ops(block.fwd)) - sum(op.bytes_read for op in _expert_ops(block_e.fwd))
    assert read == weights - weights // e
    others = [op for op in block.fwd.ops if op not in _expert_ops(block.fwd)]
    assert others == [op for op in block_e.fwd.ops if op not in _expert_ops(block_e.fwd)]
    # the layer's parameter figures stay the whole model's (the placement shards them by e)
    assert (block_e.param_bytes, block_e.expert_param_bytes) == (block.param_bytes, block.expert_param_bytes)
    assert block_e.routed_token_bytes == block.routed_token_bytes


def test_backward_expert_gemms_are_at_the_per_rank_shape():
    """The backward of ``Y = X·W`` per local expert: ``dX = dY·Wᵀ`` on the ``e·C`` tokens and ``dW = Xᵀ·dY`` reducing
    over them (``(E/e, k, e·C, n)``)."""
    e, experts, capacity, hidden, ffn = 4, 8, 8, 64, 96
    rank = model_graph(small("mixtral"), microbatch=1, tensor_width=1, expert_parallel=e)
    shapes = [g.as_tuple() for op in _expert_ops(rank.layers[1].bwd) for g in op.gemms]
    local, rows = experts // e, capacity * e
    assert sorted(shapes) == sorted([(local, rows, 2 * ffn, hidden), (local, hidden, rows, 2 * ffn),
                                     (local, rows, hidden, ffn), (local, ffn, rows, hidden)])


def test_a_degree_that_does_not_divide_the_experts_is_refused():
    with pytest.raises(ValueError, match="does not divide"):
        model_graph(small("mixtral"), microbatch=1, tensor_width=1, expert_parallel=3)
    with pytest.raises(ValueError, match="dense"):
        model_graph("gpt2-xl", microbatch=1, tensor_width=1, expert_parallel=2)


# ---------------------------------------------------------------- node-limited routing, by brute force
@settings(max_examples=40, deadline=None)
@given(st.sampled_from([(4, 2), (8, 2), (8, 4), (12, 3), (16, 4), (16, 2)]), st.integers(1, 6), st.integers(0, 4))
def test_expected_nodes_hit_is_the_enumerated_mean(experts_nodes, top_k, node_limit):
    experts, nodes = experts_nodes
    eligible = nodes if node_limit == 0 else min(node_limit, nodes)
    if top_k > eligible * experts // nodes:
        with pytest.raises(ValueError, match="fewer than|top-k must be"):
            expected_nodes_hit(experts, top_k, nodes, node_limit)
        return
    remote = oracle.remote_nodes_per_token(experts, top_k, nodes, 0, node_limit)
    # by symmetry a node is as likely to be hit as any other: the remote ones are (N − 1)/N of the expected hits
    assert expected_nodes_hit(experts, top_k, nodes, node_limit) * (nodes - 1) / nodes == pytest.approx(remote)


# ---------------------------------------------------------------- the dispatch against the oracle
def _cluster(dispatch: str, node_limit: int = 0, **fields) -> Cluster:
    base = dict(n_devices=32, global_batch=4, devices_per_node=4, node_bandwidth_Bps=400.0, link_bandwidth_Bps=10.0,
                node_latency_s=0.01, link_latency_s=0.1)
    return Cluster(**(base | fields), moe_dispatch=dispatch, moe_node_limit=node_limit)


@pytest.mark.parametrize("group, stride, ranks_per_node, nodes", [(4, 1, 4, 1), (8, 1, 4, 2), (16, 1, 4, 4),
                                                                  (8, 2, 2, 4), (4, 4, 1, 4)])
@pytest.mark.parametrize("node_limit", [0, 1, 2])
def test_hierarchical_dispatch_is_the_oracles(group, stride, ranks_per_node, nodes, node_limit):
    experts, top_k, copies = 16, 4, 4096.0
    if node_limit and (nodes == 1 or node_limit * experts // nodes < top_k):
        return
    cluster = _cluster("hierarchical", node_limit)
    expected = oracle.node_deduplicated_dispatch_s(copies, top_k, experts, ranks_per_node, nodes, (400.0, 0.01),
                                                   (10.0, 0.1), node_limit)
    assert dispatch_s(cluster, copies, group, stride, experts=experts, top_k=top_k) == pytest.approx(expected)


def test_flat_dispatch_is_the_pairwise_alltoall_on_every_level():
    cluster = _cluster("alltoall")
    expected = oracle.alltoall_s(4096.0, 4, 400.0, 0.01) + oracle.alltoall_s(4096.0, 2, 10.0, 0.1)
    assert dispatch_s(cluster, 4096.0, 8, 1, experts=16, top_k=4) == pytest.approx(expected)


def test_node_deduplication_sends_a_top8_token_over_two_nodes_once():
    """Qwen3-30B-A3B's routing (128 experts, top-8) over two nodes: a token hits the other node with probability
    ``1 − Π_{i<8} (64 − i)/(128 − i)`` ≈ 0.9969 (all eight picks among the own node's 64), so the fabric carries ≈ 1
    token, not the flat dispatch's ``8/2`` copies."""
    miss = 1.0
    for i in range(8):
        miss *= (64 - i) / (128 - i)
    assert expected_nodes_hit(128, 8, 2) == pytest.approx(2 * (1 - miss), rel=1e-12)


def _stub_layer(**fields) -> SimpleNamespace:
    """A one-block MoE layer as the DP's chain reads it: 16 routed experts, 4 per token, no stash (kernel stash none)."""
    return SimpleNamespace(**{"name": "block", "is_transformer_layer": True, "repeat": 1, "routed_experts": 16,
                              "experts_per_token": 4, "activation_stash_bytes": 0, "output_bytes": 1, "input_bytes": 1,
                              "stash_attention_bytes": 0, "stash_replicated_bytes": 0, "stash_kernel_bytes": 0,
                              "stash_kernel_attention_bytes": 0, "stash_kernel_replicated_bytes": 0,
                              "routed_activation_bytes": 0, **fields})


def test_layer_chain_prices_the_stacks_dispatch():
    layer = _stub_layer(param_bytes=1000, expert_param_bytes=800, routed_token_bytes=4096.0)
    graph = SimpleNamespace(layers=(layer,), tensor_width=1)
    timing = {"block": LayerTiming(1.0, 2.0, 1.0, 2.0, "ilp", "ilp", True, True)}
    flat, = _layer_chain(graph, timing, _cluster("alltoall"), 16)
    deduplicated, = _layer_chain(graph, timing, _cluster("hierarchical"), 16)
    limited, = _layer_chain(graph, timing, _cluster("hierarchical", 2), 16)
    one = oracle.node_deduplicated_dispatch_s(4096.0, 4, 16, 4, 4, (400.0, 0.01), (10.0, 0.1), 2)
    assert limited.ep_comm_s == pytest.approx(4 * one) and limited.fwd_s == pytest.approx(1.0 + 2 * one)
    assert limited.ep_comm_s < deduplicated.ep_comm_s < flat.ep_comm_s


# ---------------------------------------------------------------- the expert kernels the traced graph lacks
@pytest.mark.parametrize("e, sorts", [(1, 0), (4, 1), (16, 0)])
def test_layer_chain_adds_the_expert_kernels_traffic(e, sorts):
    """16 routed experts, routed tokens R = 4096 B, fc1 output A = 3072 B, streaming at 1000 B/s: the local sort and
    unsort each read and write R in each direction when a rank holds several experts (e = 4: 4 local; none at e = 1,
    no all-to-all, nor at e = 16, one local expert), and the activation kernel moves 1.5·A forward (read A, write A/2)
    and 2.5·A backward (read A/2 and A, write A) — written out by hand, not from the function."""
    layer = _stub_layer(param_bytes=1000, expert_param_bytes=800, routed_token_bytes=4096.0,
                        routed_activation_bytes=3072.0)
    graph = SimpleNamespace(layers=(layer,), tensor_width=1)
    timing = {"block": LayerTiming(1.0, 2.0, 1.0, 2.0, "ilp", "ilp", True, True)}
    free, = _layer_chain(graph, timing, _cluster("alltoall"), e)  # streaming_Bps defaults to infinite: no kernel time
    priced, = _layer_chain(graph, timing, _cluster("alltoall"), e, streaming_Bps=1000.0)
    sort_bytes = sorts * 2 * (4096 + 4096)
    assert priced.fwd_s - free.fwd_s == pytest.approx((sort_bytes + 3072 + 1536) / 1000)
    assert priced.bwd_s - free.bwd_s == pytest.approx((sort_bytes + 1536 + 3072 + 3072) / 1000)
    assert priced.ep_comm_s == pytest.approx(free.ep_comm_s)


def test_a_dense_layer_has_no_expert_kernels():
    dense = _stub_layer(param_bytes=1000, expert_param_bytes=0, routed_token_bytes=0, routed_experts=0,
                        experts_per_token=0)
    timing = {"block": LayerTiming(1.0, 2.0, 1.0, 2.0, "ilp", "ilp", True, True)}
    entry, = _layer_chain(SimpleNamespace(layers=(dense,), tensor_width=1), timing, _cluster("alltoall"), 1,
                          streaming_Bps=1.0)
    assert (entry.fwd_s, entry.bwd_s) == (1.0, 2.0)


def test_the_graph_carries_the_routed_activation_bytes():
    """Small Mixtral (8 experts top-2, FFN 96, 32 tokens: C = 8): the gate/up output is 8·8·(2·96) elements, 2 B each,
    at every expert-parallel degree; a dense layer has none."""
    for e in (1, 4):
        block = next(layer for layer in model_graph(small("mixtral"), microbatch=1, tensor_width=1, expert_parallel=e).layers
                     if layer.routed_experts)
        assert block.routed_activation_bytes == 8 * 8 * 2 * 96 * 2
    assert all(layer.routed_activation_bytes == 0 for layer in model_graph("gpt2-xl").layers)


# ---------------------------------------------------------------- bad input: one clear line
def test_node_limit_needs_a_hierarchical_dispatch():
    with pytest.raises(ValueError, match="moe_node_limit=4 .*hierarchical"):
        Cluster(moe_node_limit=4)
    with pytest.raises(ValueError, match="stack 'x': moe_node_limit=4"):
        dataclasses.replace(STACKS["megatron-lm"], name="x", moe_node_limit=4)
    with pytest.raises(ValueError, match="moe_dispatch must be one of"):
        Cluster(moe_dispatch="ring")


def test_hierarchical_dispatch_needs_nodes():
    cluster = Cluster(n_devices=8, global_batch=4, moe_dispatch="hierarchical")
    with pytest.raises(ValueError, match="needs nodes"):
        dispatch_s(cluster, 100.0, 4, 1, experts=8, top_k=2)


def test_node_limited_routing_on_a_dense_model_is_refused(monkeypatch, capsys):
    from phaze_env import stacks
    from phaze_env.evaluate import evaluate, main
    from phaze_env.hardware import get_preset

    cluster = get_cluster("dgx-h100", 16).replace(moe_dispatch="hierarchical", moe_node_limit=2)
    with pytest.raises(ValueError, match="moe_node_limit=2 .*gpt2-xl is dense"):
        evaluate("gpt2-xl", get_preset("h100"), cluster)
    limited = dataclasses.replace(STACKS["megatron-core-deepep"], name="limited", moe_node_limit=2)
    monkeypatch.setitem(stacks.STACKS, "limited", limited)
    with pytest.raises(SystemExit) as exit_:
        main(["--workload", "gpt2-xl", "--preset", "h100", "--cluster", "dgx-h100", "--devices", "16", "--stack",
              "limited"])
    error = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and len(error) == 1
    assert "stack 'limited': moe_node_limit=2 (node-limited routing)" in error[0] and "dense" in error[0]


def test_profiles_keep_their_dicts_unless_they_dispatch_otherwise():
    """A cluster with the flat dispatch and no limit serialises as before (its cache keys unchanged)."""
    plain = get_cluster("dgx-h100", 16)
    assert "moe_dispatch" not in plain.to_dict() and "moe_node_limit" not in plain.to_dict()
    deepep = STACKS["megatron-core-deepep"].structure(plain)
    assert deepep.to_dict()["moe_dispatch"] == "hierarchical" and Cluster.from_dict(deepep.to_dict()) == deepep
    assert isinstance(STACKS["megatron-core-deepep"], StackProfile)


def test_the_deepep_profiles_are_megatron_core_but_for_their_dispatch():
    parent = STACKS["megatron-core"]
    for name, overlap in (("megatron-core-deepep", False), ("megatron-core-deepep-a2a-overlap", True)):
        variant = STACKS[name]
        assert variant.variant_of == "megatron-core" and variant.fits == parent.fits
        assert dataclasses.replace(variant, name=parent.name, sources=parent.sources, variant_of="",
                                   moe_dispatch="alltoall", moe_alltoall_overlap=False, moe_comm_sm_share=0.0) == parent
        assert variant.moe_alltoall_overlap is overlap
        # overlapped, DeepEP's kernels hold Megatron-Core's moe_deepep_num_sms = 20 of the 132 SMs
        assert variant.moe_comm_sm_share == (20 / 132 if overlap else 0.0)


# ---------------------------------------------------------------- the all-to-all overlapped with compute
@settings(max_examples=60, deadline=None)
@given(st.floats(0.0, 10.0), st.floats(0.0, 10.0), st.floats(0.0, 10.0), st.booleans())
def test_overlapped_alltoall_is_what_the_partner_compute_cannot_hide(fwd_s, bwd_s, alltoall_s, overlapped):
    """The two streams written out: the paired microbatch's forward + backward compute runs from 0 on the compute
    stream; this layer's four exchanges run back to back from 0 on the communication stream; the step waits for the
    later of the two, so the exchanges add what outlasts the compute. Without overlap they run after it."""
    cluster = _cluster("alltoall", moe_alltoall_overlap=overlapped, node_latency_s=0.0, link_latency_s=0.0)
    layer = _stub_layer(param_bytes=10, expert_param_bytes=8, routed_token_bytes=1.0)
    one = cluster.network.collective_s("alltoall", 1.0, 8)
    layer.routed_token_bytes = alltoall_s / one  # so that one exchange takes alltoall_s
    timing = {"block": LayerTiming(fwd_s, bwd_s, fwd_s, bwd_s, "ilp", "ilp", True, True)}
    entry, = _layer_chain(SimpleNamespace(layers=(layer,), tensor_width=1), timing, cluster, 8)
    compute_end, comm_end = fwd_s + bwd_s, 4 * alltoall_s
    waited = max(compute_end, comm_end) if overlapped else compute_end + comm_end
    assert entry.fwd_s + entry.bwd_s == pytest.approx(waited, abs=1e-9)
    assert entry.ep_comm_s == pytest.approx(waited - compute_end, abs=1e-9)
    assert entry.fwd_s - fwd_s == pytest.approx(entry.bwd_s - bwd_s, abs=1e-9)


def test_overlap_on_a_dense_model_is_refused():
    from phaze_env.evaluate import evaluate
    from phaze_env.hardware import get_preset

    overlapped = dataclasses.replace(STACKS["megatron-lm"], name="o", moe_alltoall_overlap=True)
    assert "stack 'o': moe_alltoall_overlap" in overlapped.workload_error(get_workload("gpt2-xl"))
    with pytest.raises(ValueError, match="moe_alltoall_overlap .*gpt2-xl is dense"):
        evaluate("gpt2-xl", get_preset("h100"), get_cluster("dgx-h100", 16).replace(moe_alltoall_overlap=True))


def test_communication_sms_slow_the_overlapped_layer():
    """With ``s`` of the compute units on the exchanges the layer computes on ``1 − s`` of them: its time ``/(1 − s)``,
    and the exchanges hide under that longer compute."""
    cluster = _cluster("alltoall", moe_alltoall_overlap=True, moe_comm_sm_share=0.25, node_latency_s=0.0,
                       link_latency_s=0.0)
    layer = _stub_layer(param_bytes=10, expert_param_bytes=8, routed_token_bytes=1.0)
    layer.routed_token_bytes = 1.0 / cluster.network.collective_s("alltoall", 1.0, 8)  # one exchange: 1 s
    timing = {"block": LayerTiming(1.5, 1.5, 1.5, 1.5, "ilp", "ilp", True, True)}
    entry, = _layer_chain(SimpleNamespace(layers=(layer,), tensor_width=1), timing, cluster, 8)
    assert entry.fwd_s + entry.bwd_s == pytest.approx(max(3.0 / 0.75, 4.0)) and entry.ep_comm_s == 0.0
    dense, = _layer_chain(SimpleNamespace(layers=(layer,), tensor_width=1), timing, cluster, 1)
    assert dense.fwd_s == 1.5  # no exchange at e = 1: nothing held


def test_sm_share_needs_the_overlap_and_the_deepseek_profile_has_them_all():
    with pytest.raises(ValueError, match="moe_comm_sm_share=0.1 .*needs moe_alltoall_overlap"):
        Cluster(moe_comm_sm_share=0.1)
    deepseek = STACKS["deepseek-hai-llm"]
    assert (deepseek.moe_dispatch, deepseek.moe_node_limit, deepseek.moe_alltoall_overlap) == ("hierarchical", 4, True)
    assert deepseek.moe_comm_sm_share == pytest.approx(20 / 132) and not deepseek.plan_rules.uniform_stages
    h800 = get_cluster("dgx-h800", 16)
    assert h800.network.node_bandwidth_Bps == 200e9
    assert h800.network.link_bandwidth_Bps == get_cluster("dgx-h100", 16).network.link_bandwidth_Bps


# ---------------------------------------------------------------- the search's bounds at the per-rank shape
@pytest.mark.parametrize("e", [1, 2, 8])
def test_layer_bounds_at_e_bound_the_evaluated_layers_at_e(e):
    """The search bounds each ``e`` on that degree's own graph (``search.bounds``): every layer's bound is at most the
    fwd + bwd the evaluation schedules for it at ``e`` (the experts at the per-rank shape), on sampled designs."""
    from phaze_env.evaluate import evaluate
    from phaze_env.plan_spec import PlanSpec
    from phaze_env.pricing import layer_time_bounds_s
    from test_moe_search import ARCH, CLUSTER, TINY_MOE

    graph = model_graph(TINY_MOE, microbatch=1, tensor_width=1, expert_parallel=e)
    bounds = layer_time_bounds_s(graph, ARCH, CLUSTER)
    plan = PlanSpec.parse(f"t1p1d{CLUSTER.n_devices}e{e}m1") if e > 1 else PlanSpec.parse(f"t1p1d{CLUSTER.n_devices}m1")
    for index in range(0, len(ARCH), 9):
        evaluation = evaluate(TINY_MOE, ARCH[index], CLUSTER, plan=plan, hbm_gb=1024.0)
        timings = evaluation.layer_timings[f"t1_m1{f'_e{e}' if e > 1 else ''}"]
        for row, layer in enumerate(graph.layers):
            scheduled = timings[layer.name]
            assert bounds[row, index] <= (scheduled["fwd_s"] + scheduled["bwd_s"]) * (1 + 1e-9)


def test_the_cluster_line_says_how_expert_tokens_travel():
    line = STACKS["deepseek-hai-llm"].apply(get_cluster("dgx-h800", 16), "h100").describe()
    assert "expert tokens sent once per node (hierarchical dispatch), to at most 4 nodes" in line
    assert "expert all-to-all overlapped with compute (15% of the SMs on it)" in line
    assert "expert" not in get_cluster("dgx-h100", 16).describe()
