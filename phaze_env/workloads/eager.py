"""What eager PyTorch moves through HBM outside the matmuls: the elementwise traffic of one training step, counted
at PyTorch's dispatcher.

The traced graph (:mod:`phaze_env.workloads.trace`) is exported on the meta device in the default dtype and prices
every tensor at the run's element size; its fusion (:func:`phaze_env.workloads.model.fuse`) merges each elementwise
operator into the matmul before it or into one chain, as a compiler does. A stack that runs the model eagerly
(``Stack.unfused_elementwise``: PyTorch without ``torch.compile``) launches each of them as a kernel of its own, in
the dtype the model's code asks for (Hugging Face's ``LlamaRMSNorm`` upcasts to fp32 and back, the softmax-free parts of
rotary embeddings copy and concatenate halves), and autograd launches one or more kernels per operator in the backward
pass. Neither is in the trace's count (``Op.eager_bytes``: each member's own operands at the run's element size, the
backward as ``2r + w``).

:func:`eager_traffic` counts it instead: the workload's Hugging Face model (one and two repeated layers, meta device,
bf16 parameters, the same builder as the trace) runs one forward and backward pass under a
:class:`~torch.utils._python_dispatch.TorchDispatchMode` that adds up the bytes of every tensor each dispatched
operator reads and writes — every operator except views, matrix multiplications (priced by the tensor-core model)
and the attention core (run through one ``scaled_dot_product_attention`` call whose forward and backward are left
out: a fused kernel, :mod:`phaze_env.attention`, or the traced eager attention, prices it). Two layers less one
layer is one repeated layer; one layer less that is the pre- and post-layers (embedding, final norm, head, loss).
:func:`phaze_env.workloads.build.model_graph` scales each layer's ``Op.eager_bytes`` so their sums are these counts.

What this does not see: kernels the CUDA build chooses differently from the meta build (a fused RMSNorm, cuDNN's
layouts), and the optimizer (priced by the placement). The HF implementation stands for the stack's model code
(assumption: fms-fsdp runs IBM's ``fms`` Llama, whose RMSNorm also upcasts to fp32 and whose rotary embedding runs in
fp32 as well).
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass

EAGER_PROBE_SEQ = 256
"""Sequence length of the probe run. Every counted operator's traffic is linear in the tokens (the attention core,
the only part that grows with ``s²``, is left out), so the counts are per token; 256 keeps the probe under a second."""
GEMM_OPS = frozenset({"mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "_scaled_mm", "addbmm"})
"""Dispatcher operators priced by the tensor-core model, not as elementwise traffic (``addmm``'s bias add is in its
epilogue in eager PyTorch too: cuBLAS's beta)."""
FREE_OPS = frozenset({"detach", "alias", "lift_fresh", "empty", "zeros", "ones", "scalar_tensor", "new_empty",
                      "new_zeros", "empty_like", "zeros_like", "ones_like", "full", "full_like", "arange", "_unsafe_view"})
"""Operators that allocate or alias without moving data worth pricing (``ones_like`` seeds the backward pass;
``_unsafe_view`` is a view the dispatcher does not flag as one)."""


@dataclass(frozen=True)
class EagerTraffic:
    """Bytes per token eager PyTorch's elementwise kernels move, forward and backward, for one repeated layer and for
    the pre- and post-layers together (bf16 parameters)."""

    block_fwd: float
    block_bwd: float
    outer_fwd: float
    outer_bwd: float


class _Counter:
    def __init__(self) -> None:
        self.paused = 0
        self.phase = "fwd"
        self.bytes = {"fwd": 0, "bwd": 0}


def _counting_mode(counter: _Counter):
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = func.overloadpacket.__name__
            if counter.paused or func.is_view or name in GEMM_OPS or name in FREE_OPS:
                return out
            tensors = [t for t in tree_leaves((args, kwargs, out)) if isinstance(t, torch.Tensor)]
            counter.bytes[counter.phase] += sum(t.numel() * t.element_size() for t in tensors)
            return out

    return Count()


@contextlib.contextmanager
def _uncounted_attention(counter: _Counter):
    """Route Hugging Face's SDPA attention through one autograd function whose forward and backward are not counted."""
    import torch
    from transformers.integrations import sdpa_attention

    original = torch.nn.functional.scaled_dot_product_attention

    class Core(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, kwargs):
            counter.paused += 1
            try:
                with torch.no_grad():
                    out = original(q, k, v, **kwargs)
            finally:
                counter.paused -= 1
            ctx.save_for_backward(q, k, v)
            ctx.kwargs = kwargs
            return out

        @staticmethod
        def backward(ctx, grad):
            q, k, v = ctx.saved_tensors
            counter.paused += 1
            try:
                with torch.enable_grad():
                    leaves = [x.detach().requires_grad_(True) for x in (q, k, v)]
                    out = original(*leaves, **ctx.kwargs)
                    grads = torch.autograd.grad(out, leaves, grad)
            finally:
                counter.paused -= 1
            return (*grads, None)

    def core(q, k, v, **kwargs):
        return Core.apply(q, k, v, kwargs)

    from transformers import masking_utils

    packed = masking_utils.find_packed_sequence_indices  # reads values (.item), which meta tensors have none of
    sdpa_attention.torch.nn.functional.scaled_dot_product_attention = core
    masking_utils.find_packed_sequence_indices = lambda position_ids: None
    try:
        yield
    finally:
        sdpa_attention.torch.nn.functional.scaled_dot_product_attention = original
        masking_utils.find_packed_sequence_indices = packed


def _step_bytes(workload, layers: int, seq_len: int) -> dict[str, int]:
    import torch

    from phaze_env.workloads.deepseek import real_valued_rotary
    from phaze_env.workloads.trace import build_meta_model

    model = build_meta_model(workload, num_layers=layers)
    model.config._attn_implementation = "sdpa"
    for module in model.modules():  # the layers read the implementation off their own config object
        config = getattr(module, "config", None)
        if config is not None and hasattr(config, "_attn_implementation"):
            config._attn_implementation = "sdpa"
    model.to(torch.bfloat16)
    ids = torch.zeros(1, seq_len, dtype=torch.long, device="meta")
    counter = _Counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with real_valued_rotary(model), _uncounted_attention(counter), _counting_mode(counter):
            loss = model(input_ids=ids, labels=ids).loss
            counter.phase = "bwd"
            loss.backward()
    return counter.bytes


def eager_traffic(workload, seq_len: int = EAGER_PROBE_SEQ) -> EagerTraffic:
    """Per-token eager elementwise bytes of ``workload`` (a :class:`~phaze_env.workloads.registry.Workload`): one
    repeated layer (two-layer count less one-layer count) and the pre- and post-layers (one-layer count less a
    layer), forward and backward, from one probe step at ``seq_len`` tokens."""
    one, two = _step_bytes(workload, 1, seq_len), _step_bytes(workload, 2, seq_len)
    block = {phase: (two[phase] - one[phase]) / seq_len for phase in ("fwd", "bwd")}
    outer = {phase: one[phase] / seq_len - block[phase] for phase in ("fwd", "bwd")}
    return EagerTraffic(block["fwd"], block["bwd"], outer["fwd"], outer["bwd"])


__all__ = ["EAGER_PROBE_SEQ", "EagerTraffic", "eager_traffic"]
