"""The host as a stage of the pipeline: a layer pass cannot run faster than its kernels are issued.

An eager training stack (PyTorch without CUDA graphs) issues every kernel from one CPU thread, each after that
kernel's Python, dispatcher and driver work; the device runs them asynchronously from a queue. While the host stays
ahead the queue hides it; a pass whose kernels are issued more slowly than the device runs them leaves the device
idle between kernels — the "gaps between GPU kernels where CPU cannot launch kernels fast enough" that the
Megatron-Core MoE README (NVIDIA/Megatron-LM ``megatron/core/transformer/moe/README.md``, "CPU Overhead Bottleneck")
names, with CUDA graphs of the layers as its remedy. A device-to-host synchronisation drains the queue: the host
waits for everything issued before it, then the device waits for the host's next kernel, so the host's lead from
before the sync cannot hide what follows it.

The structure, per transformer layer and direction (:func:`host_bound_s`)::

    time = max(device_s, kernels × host_op_s) + syncs × (host_op_s + SYNC_ROUND_TRIP_S)

— the host and the device as a two-stage pipeline over identical layers (a pass of ``L`` identical layers with no
sync in it takes ``max(L·d, L·h) = L·max(d, h)``), plus per sync the device's wait for the round trip and the next
kernel's issue. ``kernels`` is counted from the traced operator graph (:func:`kernels_issued`); ``syncs`` from the
stack's expert dispatch (:func:`forward_syncs`). ``host_op_s`` is the stack's (``Stack.host_op_s``; 0: the host
never limits, e.g. a stack whose layers run as CUDA graphs).

Why this is a lower bound where the device time is one: ``max(d, h) + stall ≥ d`` for every layer, and it is monotone
in ``d``, so a chain built from the layers' lower-bound device times (``evaluate``'s ``lower_bound_chain``) stays
below the chain built from their schedules.
"""

from __future__ import annotations

import math

SYNC_ROUND_TRIP_S = 10e-6
"""Seconds the device idles per device-to-host synchronisation beyond the next kernel's issue: the copy of a few
bytes of token counts to pinned host memory and the host's wake-up from the stream or event wait. *Assumption*:
10 µs, range 5–30 µs (one small ``cudaMemcpyAsync`` and one ``cudaEventSynchronize``; Megatron-Core copies the counts
on a side stream, ``_maybe_dtoh_and_synchronize`` in ``megatron/core/transformer/moe/token_dispatcher.py``). At two
syncs per MoE layer it is below 0.5 % of the Qwen3-30B-A3B rows' per-layer time, so its range moves no figure."""

FORWARD_SYNCS = {"alltoall": 1, "hierarchical": 2}
"""Device-to-host synchronisations per MoE layer's forward pass, by ``Stack.moe_dispatch``, as Megatron-Core's
dispatchers issue them (NVIDIA/Megatron-LM at d98e8a6, ``megatron/core/transformer/moe/``):

* ``"alltoall"`` (``MoEAlltoAllTokenDispatcher``): the split sizes and tokens per expert are copied to the host at
  ``cuda_dtoh_point`` and waited for once at ``cuda_sync_point`` (``_maybe_dtoh_and_synchronize``), so the grouped
  GEMM's ``m_splits`` are already host values: one sync;
* ``"hierarchical"`` (``MoEFlexTokenDispatcher``, DeepEP or HybridEP backend): the fused dispatch sizes its receive
  buffer on the host ("HybridEP sizes buffers dynamically (CPU sync in dispatch)", ``_HybridEPManager``; DeepEP's
  ``tokens_per_expert.sum().item()``, ``_DeepepManager``), and ``TEGroupedMLP`` turns the device's tokens per expert
  into the grouped GEMM's host-side split list (``tokens_per_expert.tolist()``, ``experts.py``): two syncs.

The backward pass reuses the forward's handles and split lists: no sync. A dense layer has none."""


def kernels_issued(layer) -> tuple[int, int]:
    """Kernels the host issues for one pass of ``layer`` (forward, backward), counted from its traced operator graph:
    forward, one per traced operator (each member of a fused op, ``Op.fused``, is one eager operator; a collective is
    one kernel); backward, the same operators' gradients plus the second GEMM of each forward GEMM (the input and the
    weight gradient, or both operands' gradients of an activation product: the backward graph's GEMMs beyond the
    forward's). One kernel per grouped GEMM (``--moe-grouped-gemm``: "Batches multiple expert GEMM operations into a
    single kernel call", the Megatron-Core MoE README), as the trace has one op per expert projection at the per-rank
    shape."""
    forward = sum(len(op.fused) or 1 for op in layer.fwd.ops)
    backward = sum(len(op.fused) or 1 for op in layer.bwd.ops)
    extra_gemms = sum(len(op.gemms) for op in layer.bwd.ops) - sum(len(op.gemms) for op in layer.fwd.ops)
    return forward, backward + max(0, extra_gemms)


def forward_syncs(layer, moe_dispatch: str) -> int:
    """Device-to-host synchronisations in one forward pass of ``layer`` (:data:`FORWARD_SYNCS`; 0 for a dense layer)."""
    return FORWARD_SYNCS[moe_dispatch] if layer.routed_experts else 0


def host_bound_s(device_s: float, kernels: int, syncs: int, host_op_s: float) -> float:
    """One pass's time with the host as a stage: ``max(device_s, kernels · host_op_s)`` plus, per sync, the device's
    wait for the round trip and the next kernel's issue. ``host_op_s`` 0 (CUDA graphs, or a stack whose host is not
    modelled) returns ``device_s`` unchanged."""
    if not host_op_s:
        return device_s
    return max(device_s, kernels * host_op_s) + syncs * (host_op_s + SYNC_ROUND_TRIP_S)


def check_host_op_s(value) -> None:
    """A one-line error unless ``value`` is a host issue time per operator a CPU can have: a finite number in
    ``[0, 1 ms]`` (0: the host never limits)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= 1e-3:
        raise ValueError(f"cluster host_op_s (host seconds per issued operator; 0: CUDA graphs, the host never limits) "
                         f"must be a number in [0, 0.001], got {value!r}")


__all__ = ["FORWARD_SYNCS", "SYNC_ROUND_TRIP_S", "check_host_op_s", "forward_syncs", "host_bound_s", "kernels_issued"]
