"""Eager PyTorch's unfused elementwise kernels (``Stack.unfused_elementwise``, ``Op.eager_bytes``,
phaze_env.workloads.eager): counted at the dispatcher, scaled into the graph, priced in series, off by default."""

from __future__ import annotations


import numpy as np
import pytest

from phaze_env.cluster import get_cluster
from phaze_env.context_parallel import is_attention_core
from phaze_env.hardware import get_preset
from phaze_env.pricing import eager_extra_bytes, price_ops
from phaze_env.stacks import get_stack
from phaze_env.workloads import get_workload, model_graph
from phaze_env.workloads.build import _eager_sums, eager_traffic_cached
from phaze_env.workloads.eager import eager_traffic


def _block(workload: str, microbatch: int = 1, seq_len: int = 256, tensor_width: int = 1):
    graph = model_graph(workload, microbatch=microbatch, seq_len=seq_len, tensor_width=tensor_width)
    return graph, next(layer for layer in graph.layers if layer.name == "block")


def test_probe_counts_more_than_the_traced_operators_own_traffic():
    """The dispatcher sees what the bf16-at-every-op trace cannot: RMSNorm's fp32 upcast and autograd's kernels. A
    Llama block's eager traffic per token is several hidden vectors (h = 4096: 8 kB in bf16) and grows with width."""
    small, large = eager_traffic(get_workload("llama2-7b")), eager_traffic(get_workload("llama2-70b"))
    hidden_bf16 = 4096 * 2
    assert 40 * hidden_bf16 < small.block_fwd < 200 * hidden_bf16
    assert small.block_bwd > small.block_fwd  # autograd: one or more kernels per operator, reading more
    assert large.block_fwd > 1.5 * small.block_fwd  # h 8192 against 4096
    assert small.outer_fwd > 0 and small.outer_bwd > 0  # embedding, final norm, the fp32 loss


def test_graph_eager_bytes_sum_to_the_probe_count():
    """Each layer's eager bytes outside the attention core are the dispatcher's count for its tokens (rounding aside);
    the count is linear in tokens, so the same at another microbatch and sequence."""
    workload = get_workload("llama2-7b")
    traffic = eager_traffic_cached(workload)
    for microbatch, seq_len in ((1, 256), (2, 1024)):
        graph, _ = _block("llama2-7b", microbatch, seq_len)
        sums = _eager_sums(graph.layers)
        tokens = microbatch * seq_len
        assert sums["block"][0] == pytest.approx(traffic.block_fwd * tokens, rel=1e-6)
        assert sums["block"][1] == pytest.approx(traffic.block_bwd * tokens, rel=1e-6)
        outer = [sums[name] for name in sums if name != "block"]
        assert sum(s[0] for s in outer) == pytest.approx(traffic.outer_fwd * tokens, rel=1e-6)


def test_tensor_parallel_width_scales_by_the_width_one_ratio():
    """At t = 2 every op's eager bytes carry the t = 1 ratio: the block's sum shrinks with the split, never grows."""
    _, one = _block("llama2-7b")
    _, two = _block("llama2-7b", tensor_width=2)
    fwd_one = sum(op.eager_bytes for op in one.fwd.ops if not is_attention_core(op))
    fwd_two = sum(op.eager_bytes for op in two.fwd.ops if not is_attention_core(op))
    assert 0.4 * fwd_one < fwd_two < fwd_one


def test_pricing_adds_the_extra_traffic_in_series_and_only_when_asked():
    accelerator = get_preset("a100")
    cluster = get_cluster("ibm-a100", n_devices=8, global_batch=8)
    _, block = _block("llama2-7b")
    for dag in (block.fwd, block.bwd):
        fused = price_ops(dag.ops, accelerator, cluster)
        eager = price_ops(dag.ops, accelerator, cluster.replace(unfused_elementwise=True))
        extra_s = eager_extra_bytes(dag.ops) / accelerator.effective_hbm_bandwidth_Bps
        assert extra_s.sum() > 0
        one_fused, all_fused = fused.latencies_s()
        one_eager, all_eager = eager.latencies_s()
        np.testing.assert_allclose(one_eager - one_fused, extra_s, rtol=1e-9, atol=1e-15)
        np.testing.assert_allclose(all_eager - all_fused, extra_s, rtol=1e-9, atol=1e-15)


def test_fused_attention_ops_carry_no_eager_extra():
    """With the fused kernel the attention core's scaling and softmax stay inside it: no eager kernel for them."""
    accelerator = get_preset("a100")
    stack = get_stack("pytorch-fsdp")
    cluster = stack.apply(get_cluster("ibm-a100", n_devices=8, global_batch=8), "a100")
    assert cluster.stack.unfused_elementwise and cluster.stack.attention_efficiency
    _, block = _block("llama2-7b")
    with_kernel = price_ops(block.fwd.ops, accelerator, cluster)
    without_eager = price_ops(block.fwd.ops, accelerator, cluster.replace(unfused_elementwise=False))
    for i, op in enumerate(block.fwd.ops):
        if is_attention_core(op):
            assert with_kernel.latencies_s()[0][i] == without_eager.latencies_s()[0][i]


def test_flag_is_off_by_default_and_out_of_default_cache_keys():
    cluster = get_cluster("dgx-a100")
    assert cluster.stack.unfused_elementwise is False
    assert "unfused_elementwise" not in cluster.to_dict()
    eager = cluster.replace(unfused_elementwise=True)
    assert eager.to_dict()["unfused_elementwise"] is True and "unfused (eager)" in eager.describe()
    with pytest.raises(ValueError, match="unfused_elementwise"):
        cluster.replace(unfused_elementwise="yes")


def test_only_the_eager_pytorch_stack_runs_unfused():
    assert get_stack("pytorch-fsdp").unfused_elementwise
    for name in ("megatron-lm", "megatron-deepspeed", "jax-xla"):  # fused kernels / XLA fusion
        assert not get_stack(name).unfused_elementwise


def test_a_model_the_probe_cannot_run_still_builds_and_an_eager_stack_refuses_it(monkeypatch):
    """The probe is only read by an eager stack: if it fails the graph still builds (fused pricing is unaffected) and
    says why, and pricing it unfused raises that reason instead of using an uncounted figure."""
    import phaze_env.workloads.build as build
    from phaze_env.evaluate import evaluate
    from phaze_env.plan_spec import PlanSpec

    def broken(workload, seq_len):
        raise RuntimeError("no meta kernel for this model")

    monkeypatch.setattr(build, "eager_traffic", broken)
    graph = model_graph("gpt2-xl", microbatch=1, seq_len=128, cache=False)
    assert "no meta kernel for this model" in graph.eager_error and graph.layers
    cluster = get_cluster("ibm-a100", n_devices=8, global_batch=8, optimizer="adam")
    plan = PlanSpec.parse("t1p1d8m1")
    fused = evaluate("gpt2-xl", get_preset("a100"), cluster, plan=plan, seq_len=128, cache=False)
    assert fused.feasible
    with pytest.raises(ValueError, match="unfused .eager.*no meta kernel"):
        evaluate("gpt2-xl", get_preset("a100"), cluster.replace(unfused_elementwise=True), plan=plan, seq_len=128,
                 cache=False)


def test_the_attention_core_keeps_its_traced_count():
    """The probe leaves the attention core out, so its operators' eager bytes are the trace's own (each member's
    operands), not scaled by the rest of the layer's ratio."""
    graph, block = _block("llama2-7b")
    unscaled = model_graph("llama2-7b", microbatch=1, seq_len=256, cache=False)
    import phaze_env.workloads.build as build

    layers = build._layers(build.get_workload("llama2-7b"), build.get_trace(build.get_workload("llama2-7b"), 1, 256),
                           256, 1, 1, 2)
    raw = next(layer for layer in layers if layer.name == "block")
    for op, raw_op in zip(block.fwd.ops, raw.fwd.ops):
        if is_attention_core(op):
            assert op.eager_bytes == raw_op.eager_bytes
    assert unscaled.eager_error == ""
