"""Fused causal attention (phaze_env.attention): the kept blocks' GEMMs do exactly the block-granular work, the
s × s scores never reach HBM, the kernel runs at its stated fraction of peak, and a cluster without it (every preset,
PHAZE's search) prices the traced eager attention exactly as before."""

from __future__ import annotations


import numpy as np
import pytest

from phaze_env.attention import (FLASH_BLOCK, blocks, causal_gemms, fused_attention_ops, fused_traffic_bytes,
                                 kept_fraction, recomputed_by_backward)
from phaze_env.cluster import Cluster, get_cluster
from phaze_env.context_parallel import is_attention_core
from phaze_env.evaluate import evaluate
from phaze_env.explain import explain_layer
from phaze_env.hardware import get_preset
from phaze_env.hardware.estimator import latency_terms, shared_parameters
from phaze_env.hardware.number_format import fp8_flags
from phaze_env.plan_spec import PlanSpec
from phaze_env.pricing import price_ops
from phaze_env.context_parallel import rank_graph
from phaze_env.workloads import custom_workload, model_graph
from phaze_env.workloads.graph import Gemm
from tiny import TINY


def kept_blocks_by_hand(seq_len: int, block: int) -> int:
    """Score blocks on or below the diagonal: query block i meets key blocks 0 … i."""
    n = -(-seq_len // block)
    return sum(i + 1 for i in range(n))


@pytest.mark.parametrize("seq_len", [128, 256, 384, 1024, 1152, 4096])
@pytest.mark.parametrize("shape", ["qk", "pv", "dk"])
def test_causal_gemms_do_exactly_the_kept_blocks_work(seq_len, shape):
    d, b = 128, 6
    gemm = {"qk": Gemm(b, seq_len, d, seq_len), "pv": Gemm(b, seq_len, seq_len, d),
            "dk": Gemm(b, d, seq_len, seq_len)}[shape]
    kept = causal_gemms(gemm, FLASH_BLOCK)
    block_macs = b * d * FLASH_BLOCK * FLASH_BLOCK
    assert sum(g.flops for g in kept) == 2 * kept_blocks_by_hand(seq_len, FLASH_BLOCK) * block_macs
    n = blocks(seq_len)
    assert kept_fraction(seq_len) == pytest.approx(kept_blocks_by_hand(seq_len, FLASH_BLOCK) / n**2)
    assert all(min(g.m, g.k, g.n) >= min(d, FLASH_BLOCK) for g in kept)  # whole blocks, no slivers


def test_a_gemm_without_a_square_side_is_not_cut():
    assert causal_gemms(Gemm(1, 4096, 4096, 11008)) == (Gemm(1, 4096, 4096, 11008),)  # m = k < n: not scores
    assert causal_gemms(Gemm(2, 128, 64, 128)) == (Gemm(2, 128, 64, 128),)  # one block: nothing to skip


def test_kept_fraction_tends_to_a_half():
    assert kept_fraction(128) == 1.0 and kept_fraction(4096) == pytest.approx(33 / 64)
    assert 0.5 < kept_fraction(65536) < 0.502


@pytest.fixture(scope="module")
def llama_block():
    graph = model_graph("llama2-7b", seq_len=1024, microbatch=1, tensor_width=1)
    return next(layer for layer in graph.layers if layer.name == "block")


def test_fused_ops_keep_their_operands_and_drop_the_scores(llama_block):
    for dag in (llama_block.fwd, llama_block.bwd):
        fused, indices = fused_attention_ops(dag.ops, 2)
        assert indices == [i for i, op in enumerate(dag.ops) if is_attention_core(op)] and len(indices) == 3
        for i in indices:
            op, new = dag.ops[i], fused[i]
            assert new.bytes_written == 0 and new.bytes_read == fused_traffic_bytes(op, 2) < op.bytes_read + op.bytes_written
            assert new.gemm_flops == pytest.approx(op.gemm_flops * kept_fraction(1024), rel=1e-12)
        for i, (op, new) in enumerate(zip(dag.ops, fused)):
            if i not in indices:
                assert new is op
    q_k = 32 * 1024 * 128 * 2  # QKᵀ reads Q and K (32 heads × 1024 tokens × 128) and writes only on-chip scores
    assert fused_traffic_bytes(llama_block.fwd.ops[[op.name for op in llama_block.fwd.ops].index("matmul")], 2) == 2 * q_k


def test_only_the_scores_are_recomputed_by_the_backward_kernel(llama_block):
    names = [op.name for op in llama_block.fwd.ops if recomputed_by_backward(op)]
    assert names == ["matmul", "softmax"]  # QKᵀ and the softmax, not ·V


def test_fused_kernel_runs_at_its_fraction_of_peak(llama_block):
    h100 = get_preset("h100")
    cluster = get_cluster("dgx-h100", 8).replace(attention_efficiency=0.5)
    ops = llama_block.fwd.ops
    fused, indices = fused_attention_ops(ops, 2)
    priced = price_ops(ops, h100, cluster, layer="block")
    _, all_cores = priced.latencies_s()
    for i in indices:
        compute_s = fused[i].gemm_flops / (0.5 * h100.peak_flops)
        memory_s = fused[i].bytes_read / h100.effective_hbm_bandwidth_Bps if fused[i].gemms else 0.0
        assert all_cores[i] == pytest.approx(max(compute_s, memory_s), rel=1e-9)
    eager = price_ops(ops, h100, get_cluster("dgx-h100", 8), layer="block").latencies_s()[1]
    others = [i for i in range(len(ops)) if i not in indices]
    assert np.array_equal(all_cores[others], eager[others])


def test_without_the_kernel_pricing_is_the_traced_eager_attention(llama_block):
    """attention_efficiency 0 (every preset's default) prices every op with the estimator's own terms, as before."""
    h100 = get_preset("h100")
    cluster = get_cluster("dgx-h100", 8)
    assert cluster.stack.attention_efficiency == 0 and Cluster().stack.attention_efficiency == 0
    ops = llama_block.bwd.ops
    priced = price_ops(ops, h100, cluster, layer="block")
    _, _, tensor, vector = latency_terms(ops, [h100.tc_config], [h100.vc_config], **shared_parameters(h100),
                                         fp8=fp8_flags(ops, "block", h100.number_format))
    assert np.array_equal(priced.tensor.all_s, tensor.all_s) and np.array_equal(priced.vector.all_s, vector.all_s)
    fused = price_ops(ops, h100, cluster.replace(attention_efficiency=1.0), layer="block")
    assert not np.array_equal(fused.tensor.all_s, tensor.all_s)  # the switch does something


@pytest.mark.slow
def test_fused_backward_carries_its_recompute_whatever_the_recompute_mode():
    """With a fused kernel, selective recompute costs nothing more than none (the backward kernel recomputes the
    scores in either case); full recompute reruns the forward."""
    cluster = get_cluster("dgx-h100", 8, global_batch=16, optimizer="adam").replace(attention_efficiency=0.5)
    times = {mode: evaluate(TINY, get_preset("h100"), cluster, plan=PlanSpec(t=1, p=1, d=8, microbatch=2, recompute=mode),
                            cache=False).plan.time_per_batch_s for mode in ("none", "selective", "full")}
    assert times["selective"] == pytest.approx(times["none"], rel=1e-12) and times["full"] > times["none"]


LONG = custom_workload("tiny-gpt2-2k", "GPT2Config", "GPT2LMHeadModel", 2048, n_embd=128, n_layer=2, n_head=4,
                       n_inner=512, vocab_size=1000, n_positions=2048)


def _kept_attention_flops(graph, direction: str) -> int:
    layer = next(layer for layer in graph.layers if layer.name == "block")
    fused, indices = fused_attention_ops(getattr(layer, direction).ops, 2)
    return sum(fused[i].gemm_flops for i in indices)


@pytest.mark.parametrize("c", [2, 4])
def test_a_context_parallel_rank_runs_a_cth_of_the_causal_kernel_work(c):
    """Ring attention over a fused causal kernel (Transformer Engine's CP): a rank's ``c`` blocks of (s/c)² scores,
    each cut causally on its own block grid, are exactly ``1/c`` of the unsplit causal work up to the diagonal blocks'
    granularity: kept(s/c) / kept(s) / c."""
    seq_len = LONG.seq_len
    whole = model_graph(LONG, seq_len=seq_len)
    rank = rank_graph(model_graph(LONG, seq_len=seq_len // c), c)
    for direction in ("fwd", "bwd"):
        ratio = _kept_attention_flops(rank, direction) / _kept_attention_flops(whole, direction)
        assert ratio == pytest.approx(kept_fraction(seq_len // c) / kept_fraction(seq_len) / c, rel=1e-12)


@pytest.mark.slow
def test_context_parallelism_runs_with_a_fused_kernel_and_its_ring_overlaps_the_kernel():
    """c > 1 with a fused kernel is priced (it used to be refused): each of the c − 1 ring hops adds what its send
    exceeds the kernel's block by (cp_comm), so a slower link exposes more of it."""
    plan = PlanSpec(t=1, c=2, p=1, d=4, microbatch=1, recompute="selective")
    fused = get_cluster("dgx-h100", 8, global_batch=16, optimizer="adam").replace(attention_efficiency=0.5)
    fast = evaluate(LONG, get_preset("h100"), fused, plan=plan, cache=False)
    slow = evaluate(LONG, get_preset("h100"), fused.replace(node_bandwidth_Bps=1e6), plan=plan, cache=False)
    assert fast.feasible and slow.feasible and fast.plan.context_parallel == 2
    assert 0.0 <= fast.plan.time_breakdown_s["cp_comm"] < slow.plan.time_breakdown_s["cp_comm"]
    assert slow.throughput_samples_s < fast.throughput_samples_s
    eager = evaluate(LONG, get_preset("h100"), fused.replace(attention_efficiency=0.0), plan=plan, cache=False)
    assert fast.throughput_samples_s > eager.throughput_samples_s  # the kernel skips the masked half and the s × s HBM
    with pytest.raises(ValueError, match="attention_efficiency must be in"):
        Cluster(attention_efficiency=1.5)


@pytest.mark.parametrize("tensor_width", [1, 2])
def test_explain_splits_a_fused_kernel_as_the_evaluation_prices_it(tensor_width):
    """With a fused kernel the explanation's forward and backward are the evaluation's (the backward with the scores
    the kernel reruns, each a row of its own), its kept FLOPs are the causal blocks', not the traced s × s ones, and a
    fused layer is faster than the eager one on the same chip."""
    chip = get_preset("h100")
    fused = get_cluster("dgx-h100", 8, global_batch=16).replace(attention_efficiency=0.5)
    explained = explain_layer(TINY, chip, fused, tensor_width=tensor_width)
    timing = evaluate(TINY, chip, fused, microbatch=(1,), tensor_widths=(tensor_width,),
                      cache=False).layer_timings[f"t{tensor_width}_m1"]["block"]
    assert explained.fwd_s == pytest.approx(timing["fwd_s"]) and explained.bwd_s == pytest.approx(timing["bwd_s"])
    rerun = [op for op in explained.ops if op.name.endswith("(rerun by the fused backward)")]
    assert rerun and all(op.direction == "bwd" and op.vector_cores_s == 0 for op in rerun)
    assert sum(op.latency_s for op in rerun) > 0
    eager = explain_layer(TINY, chip, fused.replace(attention_efficiency=0.0), tensor_width=tensor_width)
    assert explained.time_s < eager.time_s
    assert not any(op.name.endswith("(rerun by the fused backward)") for op in eager.ops)
    assert all(0 <= value <= 1 + 1e-9 for value in explained.utilisation.values())


def test_an_encoders_fused_kernel_computes_every_score_block():
    """BERT's self-attention has no causal mask: its fused kernel keeps every score block (the traced GEMMs' FLOPs), a
    decoder's skips the masked ones; so the same layer costs more as an encoder, and the search's layer bound (priced
    causal for every model) stays below the encoder's evaluated time."""
    from phaze_env.attention import causal_attention
    from phaze_env.workloads import get_workload

    encoder = custom_workload("tiny-bert", "BertConfig", "BertForMaskedLM", 256, hidden_size=128, num_hidden_layers=2,
                              num_attention_heads=4, intermediate_size=512, vocab_size=1000, max_position_embeddings=256)
    assert not causal_attention(encoder) and not causal_attention(get_workload("bert-large"))
    assert causal_attention(TINY) and causal_attention(get_workload("llama2-7b"))
    layer = model_graph(encoder).layers[1]
    cores = [op for op in layer.fwd.ops if is_attention_core(op) and op.gemms]
    bidirectional, _ = fused_attention_ops(layer.fwd.ops, 2, causal=False)
    causal, _ = fused_attention_ops(layer.fwd.ops, 2)
    kept = {op.name: op.gemm_flops for op in bidirectional}
    assert cores and all(kept[op.name] == op.gemm_flops for op in cores)
    assert all(c.gemm_flops < kept[c.name] for c in causal if c.name in {op.name for op in cores})
    chip = get_preset("h100")
    fused = get_cluster("dgx-h100", 8, global_batch=16).replace(attention_efficiency=0.5)
    timing = evaluate(encoder, chip, fused, microbatch=(1,), tensor_widths=(1,), cache=False).layer_timings["t1_m1"]
    explained = explain_layer(encoder, chip, fused)
    assert explained.fwd_s == pytest.approx(timing["block"]["fwd_s"]) and explained.bwd_s == pytest.approx(timing["block"]["bwd_s"])
    as_causal = price_ops(layer.fwd.ops, chip, fused, layer="block", edges=layer.fwd.edges).table.latencies_s(0, 0)[0]
    as_encoder = price_ops(layer.fwd.ops, chip, fused, layer="block", edges=layer.fwd.edges,
                           causal=False).table.latencies_s(0, 0)[0]
    assert as_causal.sum() < as_encoder.sum()
