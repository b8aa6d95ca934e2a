"""Candidate pipeline stages as matrices over pairs of downsets (ideals) of the layer graph.

A pipeline of ``p`` stages is a chain of downsets ``∅ = I_0 ⊂ I_1 ⊂ … ⊂ I_p = all layers``; stage
``k`` runs the layers ``I_{k+1} \\ I_k``. Every per-stage quantity is therefore a ``K × K`` matrix
indexed by ``(a, b)`` = (downset before the stage, downset after it). For a chain of ``L`` layers the
downsets are the ``L + 1`` prefixes, and the pair ``(a, b)`` with ``a < b`` is the stage of layers
``a … b-1``. For a general DAG the downsets are enumerated (as PHAZE does), up to a size limit.

Point-to-point traffic of a stage (per microbatch): it sends its boundary activations forward and
the gradients of its inputs backward; it receives the others' sends (counted in their stage time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from phaze_env.placement.inputs import LayerArrays


class TooManyDownsetsError(ValueError):
    """The layer DAG has more downsets than the DP is allowed to enumerate."""


@dataclass(frozen=True)
class StageTable:
    """Per-stage quantities for every pair ``(a, b)`` of downsets; ``inf``/``False`` where ``a ⊄ b``."""

    valid: np.ndarray  # a ⊊ b
    fwd_s: np.ndarray  # sum of the stage's forward latencies
    bwd_s: np.ndarray  # sum of the stage's backward latencies
    attention_fwd_s: np.ndarray  # forward time of its attention cores (what selective recompute repeats)
    recompute_fwd_s: np.ndarray  # forward time full recompute repeats (its transformer layers')
    tp_comm_s: np.ndarray  # tensor-parallel collectives inside fwd_s + bwd_s
    cp_comm_s: np.ndarray  # exposed context-parallel ring exchange inside fwd_s + bwd_s
    ep_comm_s: np.ndarray  # expert-parallel all-to-alls inside fwd_s + bwd_s
    send_forward_bytes: np.ndarray  # its outputs sent to later stages, per microbatch
    send_backward_bytes: np.ndarray  # the gradients of its inputs sent back, per microbatch
    param_bytes: np.ndarray
    expert_param_bytes: np.ndarray  # the part of param_bytes that is routed experts
    stash_bytes: np.ndarray  # activations kept for backward, one microbatch, no recompute
    attention_stash_bytes: np.ndarray  # the part of stash_bytes selective recompute drops
    replicated_stash_bytes: np.ndarray  # the part of stash_bytes sequence parallelism splits t ways
    input_bytes: np.ndarray  # the inputs of its layers: what full recompute keeps per microbatch instead
    layer_count: np.ndarray  # its transformer layers (LayerArrays.transformer_layers), as integers; 0 where no stage
    member: np.ndarray  # [downset, layer]: the layer belongs to the downset
    empty: int  # index of the empty downset
    full: int  # index of the downset of all layers
    chain: bool = False  # downsets are the prefixes of a chain (stage (a, b) = layers a..b-1)

    @property
    def size(self) -> int:
        return len(self.member)

    def layers_of(self, a: int, b: int) -> tuple[int, ...]:
        """The layers of the stage between downsets ``a`` and ``b``."""
        return tuple(np.flatnonzero(self.member[b] & ~self.member[a]).tolist())

    def layer_max(self, values: np.ndarray) -> np.ndarray:
        """The largest per-layer value among each stage's layers (0 where no stage)."""
        if self.chain:  # row a: values[a], values[a+1], … accumulated (column b = after layer b-1)
            shifted = np.where(self.valid, np.concatenate(([0.0], values))[None, :], 0.0)
            return np.where(self.valid, np.maximum.accumulate(shifted, axis=1), 0.0)
        result = np.zeros(self.valid.shape)
        for layer, value in enumerate(values):
            inside = self.member[None, :, layer] & ~self.member[:, None, layer]
            np.maximum(result, np.where(inside, value, 0.0), out=result)
        return np.where(self.valid, result, 0.0)

    def layer_sum(self, values: np.ndarray) -> np.ndarray:
        """Every stage's sum of a per-layer value (0 where no stage)."""
        inside = self.member.astype(float) @ values
        return np.where(self.valid, inside[None, :] - inside[:, None], 0.0)

    def p2p_s(self, send_s: Callable[[float], float]) -> np.ndarray:
        """Per-microbatch send time of every stage, ``send_s(payload)`` per message (0 for no message)."""
        return np.where(self.valid, _elementwise(self.send_forward_bytes, send_s)
                        + _elementwise(self.send_backward_bytes, send_s), 0.0)


def _elementwise(payload_bytes: np.ndarray, send_s: Callable[[float], float]) -> np.ndarray:
    """``send_s`` applied elementwise (evaluated once per distinct payload; an empty message is free)."""
    distinct, inverse = np.unique(payload_bytes, return_inverse=True)
    times = np.array([send_s(float(size)) if size > 0 else 0.0 for size in distinct])
    return times[inverse].reshape(payload_bytes.shape)


def _pair_difference(prefix: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """``prefix[b] - prefix[a]`` for valid pairs, ``0`` elsewhere (sums over the stage's layers)."""
    return np.where(valid, prefix[None, :] - prefix[:, None], 0.0)


def chain_stages(layers: LayerArrays) -> StageTable:
    """Stages of a chain: every contiguous range of layers (downsets are the prefixes)."""
    count = len(layers)
    index = np.arange(count + 1)
    valid = index[:, None] < index[None, :]

    def sums(values: np.ndarray) -> np.ndarray:
        return _pair_difference(np.concatenate(([0.0], np.cumsum(values))), valid)

    # Stage (a, b) = layers a..b-1: it sends layer b-1's output forward unless it is the last stage,
    # and the gradient of layer a's input backward unless it is the first.
    forward_send = np.concatenate(([0.0], layers.output_bytes[:-1], [0.0]))  # indexed by b
    backward_send = np.concatenate(([0.0], layers.input_bytes[1:], [0.0]))  # indexed by a
    return StageTable(
        valid=valid,
        fwd_s=sums(layers.fwd_s),
        bwd_s=sums(layers.bwd_s),
        attention_fwd_s=sums(layers.attention_fwd_s),
        recompute_fwd_s=sums(layers.recompute_fwd_s),
        tp_comm_s=sums(layers.tp_comm_s),
        cp_comm_s=sums(layers.cp_comm_s),
        ep_comm_s=sums(layers.ep_comm_s),
        send_forward_bytes=np.where(valid, forward_send[None, :], 0.0),
        send_backward_bytes=np.where(valid, backward_send[:, None], 0.0),
        param_bytes=sums(layers.param_bytes),
        expert_param_bytes=sums(layers.expert_param_bytes),
        stash_bytes=sums(layers.stash_bytes),
        attention_stash_bytes=sums(layers.attention_stash_bytes),
        replicated_stash_bytes=sums(layers.replicated_stash_bytes),
        input_bytes=sums(layers.input_bytes),
        layer_count=np.rint(sums(layers.transformer_layers)).astype(np.int64),
        member=index[:, None] > np.arange(count)[None, :],
        empty=0,
        full=count,
        chain=True,
    )


def _successor_matrix(count: int, edges: Iterable[tuple[int, int]]) -> np.ndarray:
    successors = np.zeros((count, count), dtype=bool)
    for edge in edges:
        if len(edge) != 2:
            raise ValueError(f"an edge must be a pair (u, v), got {edge!r}")
        u, v = (int(x) for x in edge)
        if not (0 <= u < count and 0 <= v < count) or u == v:
            raise ValueError(f"edge {edge!r} must join two different layers among 0..{count - 1}")
        successors[u, v] = True
    return successors


def enumerate_downsets(successors: np.ndarray, max_downsets: int) -> list[int]:
    """All downsets of the DAG as bitmasks, smallest first; ``TooManyDownsetsError`` beyond the limit."""
    count = len(successors)
    predecessor_masks = [sum(1 << u for u in np.flatnonzero(successors[:, v])) for v in range(count)]
    seen = {0}
    frontier = [0]
    while frontier:
        grown = []
        for ideal in frontier:
            for v in range(count):
                if not ideal >> v & 1 and predecessor_masks[v] & ~ideal == 0 and (ideal | 1 << v) not in seen:
                    seen.add(ideal | 1 << v)
                    grown.append(ideal | 1 << v)
            if len(seen) > max_downsets:
                raise TooManyDownsetsError(
                    f"the layer graph has more than {max_downsets} downsets; the DP over downsets would be too slow "
                    "(raise max_downsets, or merge branches into coarser layers)"
                )
        frontier = grown
    full = (1 << count) - 1
    if full not in seen:
        raise ValueError("the layer graph has a cycle")
    return sorted(seen, key=lambda ideal: (bin(ideal).count("1"), ideal))


def dag_stages(layers: LayerArrays, edges: Iterable[tuple[int, int]], max_downsets: int) -> StageTable:
    """Stages of a DAG: differences of nested downsets.

    A stage sends forward the outputs of its layers that feed a later stage, and backward the gradients
    of the outputs it received from earlier stages. A layer's input is what its predecessors output
    (``input_bytes`` for graph sources); a fully recomputing stage keeps its layers' inputs.
    """
    count = len(layers)
    successors = _successor_matrix(count, edges)
    ideals = enumerate_downsets(successors, max_downsets)
    member = np.array([[ideal >> v & 1 for v in range(count)] for ideal in ideals], dtype=bool)
    inside = member.astype(float)
    valid = (inside @ (~member).T.astype(float) == 0) & ~np.eye(len(ideals), dtype=bool)

    def sums(values: np.ndarray) -> np.ndarray:
        return _pair_difference(inside @ values, valid)

    successors_inside = member.astype(float) @ successors.T.astype(float)  # [ideal, u] = successors of u in it
    out_degree = successors.sum(axis=1)
    feeds_later = member & (successors_inside < out_degree[None, :])  # in the ideal, with a successor outside
    forward_out = feeds_later * layers.output_bytes[None, :]
    forward_send = forward_out.sum(axis=1)[None, :] - inside @ forward_out.T
    received = np.zeros((len(ideals), len(ideals)))
    for a in range(len(ideals)):
        feeds_stage = member[a][None, :] & (successors_inside > successors_inside[a][None, :])
        received[a] = feeds_stage.astype(float) @ layers.output_bytes
    sources = ~successors.any(axis=0)
    layer_input = np.where(sources, layers.input_bytes, successors.T.astype(float) @ layers.output_bytes)
    return StageTable(
        valid=valid,
        fwd_s=sums(layers.fwd_s),
        bwd_s=sums(layers.bwd_s),
        attention_fwd_s=sums(layers.attention_fwd_s),
        recompute_fwd_s=sums(layers.recompute_fwd_s),
        tp_comm_s=sums(layers.tp_comm_s),
        cp_comm_s=sums(layers.cp_comm_s),
        ep_comm_s=sums(layers.ep_comm_s),
        send_forward_bytes=np.where(valid, forward_send, 0.0),
        send_backward_bytes=np.where(valid, received, 0.0),
        param_bytes=sums(layers.param_bytes),
        expert_param_bytes=sums(layers.expert_param_bytes),
        stash_bytes=sums(layers.stash_bytes),
        attention_stash_bytes=sums(layers.attention_stash_bytes),
        replicated_stash_bytes=sums(layers.replicated_stash_bytes),
        input_bytes=sums(layer_input),
        layer_count=np.rint(sums(layers.transformer_layers)).astype(np.int64),
        member=member,
        empty=0,
        full=len(ideals) - 1,
    )
