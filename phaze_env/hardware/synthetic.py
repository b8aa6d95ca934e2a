"""A synthetic GPT-like transformer layer (forward + backward operators) for benchmarks and tests.

A stand-in with the tracer's op vocabulary (:mod:`phaze_env.workloads.graph`), so the estimator can be
exercised without tracing a real model. Shapes follow a pre-LN GPT block at one tensor-parallel width.
"""

from __future__ import annotations

from phaze_env.workloads.graph import Gemm, Op


def _gemm_op(name: str, batch: int, m: int, k: int, n: int, e: int, *, kind: str = "matmul", epilogue: str = "") -> Op:
    gemm = Gemm(batch, m, k, n)
    unit = "tc+vc" if epilogue else "tc"
    return Op(
        name=name, kind=kind, unit=unit, gemms=(gemm,), vector_elements=batch * m * n if epilogue else 0,
        vector_kind=epilogue, flops=gemm.flops, bytes_read=e * batch * (m * k + k * n), bytes_written=e * batch * m * n,
    )


def _vector_op(name: str, kind: str, vector_kind: str, elements: int, e: int, *, reads: int = 1) -> Op:
    return Op(name=name, kind=kind, unit="vc", vector_elements=elements, vector_kind=vector_kind,
              bytes_read=e * elements * reads, bytes_written=e * elements)


def _backward_gemm_op(fwd: Op, e: int) -> Op:
    """dX = dY · Wᵀ and dW = Xᵀ · dY for one forward GEMM (with the epilogue's gradient, if any)."""
    (g,) = fwd.gemms
    d_input = Gemm(g.batch, g.m, g.n, g.k)
    d_weight = Gemm(g.batch, g.k, g.m, g.n)
    gemms = (d_input, d_weight)
    return Op(
        name=f"{fwd.name}.bwd", kind=fwd.kind, unit=fwd.unit, gemms=gemms, vector_elements=fwd.vector_elements,
        vector_kind=fwd.vector_kind, flops=sum(x.flops for x in gemms),
        bytes_read=e * g.batch * (2 * g.m * g.n + g.m * g.k + g.k * g.n), bytes_written=e * g.batch * (g.m * g.k + g.k * g.n),
    )


def gpt_layer_ops(*, hidden: int = 1600, heads: int = 25, ffn: int = 6400, seq: int = 1024, microbatch: int = 1,
                  tensor_width: int = 1, bytes_per_element: int = 2) -> tuple[list[Op], list[Op]]:
    """``(forward_ops, backward_ops)`` of one GPT block (defaults: GPT-2 XL); ~20 ops each direction."""
    e, tokens = bytes_per_element, seq * microbatch
    h_tp, heads_tp, ffn_tp = hidden // tensor_width, max(1, heads // tensor_width), ffn // tensor_width
    head_dim = hidden // heads
    act, attn = tokens * hidden, microbatch * heads_tp * seq * seq
    fwd = [
        _vector_op("ln1", "norm", "norm", act, e),
        _gemm_op("qkv", 1, tokens, hidden, 3 * h_tp, e, epilogue="add"),
        _vector_op("split_heads", "data", "copy", 3 * tokens * h_tp, e),
        _vector_op("rope_or_scale", "elementwise", "mul", tokens * h_tp, e),
        _gemm_op("scores", microbatch * heads_tp, seq, head_dim, seq, e, kind="bmm"),
        _vector_op("mask", "elementwise", "add", attn, e),
        _vector_op("softmax", "softmax", "softmax", attn, e),
        _vector_op("attn_dropout", "elementwise", "mul", attn, e),
        _gemm_op("context", microbatch * heads_tp, seq, seq, head_dim, e, kind="bmm"),
        _vector_op("merge_heads", "data", "copy", tokens * h_tp, e),
        _gemm_op("proj", 1, tokens, h_tp, hidden, e, epilogue="add"),
        Op(name="proj_allreduce", kind="comm", unit="comm", comm_kind="allreduce", comm_bytes=e * act, comm_group=tensor_width),
        _vector_op("dropout1", "elementwise", "mul", act, e),
        _vector_op("residual1", "elementwise", "add", act, e, reads=2),
        _vector_op("ln2", "norm", "norm", act, e),
        _gemm_op("fc1", 1, tokens, hidden, ffn_tp, e, epilogue="gelu"),
        _gemm_op("fc2", 1, tokens, ffn_tp, hidden, e, epilogue="add"),
        Op(name="fc2_allreduce", kind="comm", unit="comm", comm_kind="allreduce", comm_bytes=e * act, comm_group=tensor_width),
        _vector_op("dropout2", "elementwise", "mul", act, e),
        _vector_op("residual2", "elementwise", "add", act, e, reads=2),
    ]
    bwd = [_backward_gemm_op(op, e) if op.gemms else _vector_backward(op, e) for op in fwd]
    return fwd, bwd


def _vector_backward(op: Op, e: int) -> Op:
    if op.unit == "comm":
        return Op(name=f"{op.name}.bwd", kind="comm", unit="comm", comm_kind=op.comm_kind, comm_bytes=op.comm_bytes, comm_group=op.comm_group)
    return Op(name=f"{op.name}.bwd", kind=op.kind, unit=op.unit, vector_elements=op.vector_elements, vector_kind=op.vector_kind,
              bytes_read=2 * op.bytes_read, bytes_written=op.bytes_written)
