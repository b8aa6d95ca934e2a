"""Fused causal attention: the attention core as a flash-attention kernel, a property of the training stack.

The traced graph runs attention as PyTorch's eager code does: QKᵀ writes the ``s × s`` scores to HBM, softmax
reads and writes them, ·V reads the probabilities, and every score is computed, the masked half included. A stack
that runs FlashAttention (Dao et al. 2022, arXiv:2205.14135; FlashAttention-2, Dao 2023, arXiv:2307.08691) or
Transformer Engine's fused attention (the cuDNN / flash backends Megatron-Core and NeMo use) does neither:

* **On chip.** The scores and probabilities of a ``B × B`` block stay in shared memory; HBM sees only the
  kernel's operands and results — Q, K, V in and O out forward; Q, K, V, O, dO in and dQ, dK, dV out backward —
  which are the attention-core operators' traced operands *other than* the ``s × s`` tensors
  (:func:`fused_traffic_bytes`).
* **Causal blocks.** With a causal mask the kernel skips every key block wholly above the diagonal: of the
  ``n_b × n_b`` blocks (``n_b = ⌈s / B⌉``) it computes the ``n_b (n_b + 1) / 2`` on or below it, so each GEMM of
  QKᵀ and ·V (and of their gradients) does that fraction of the full work (:func:`causal_gemms`: exact integer
  GEMM shapes, block-granular), and softmax runs on the kept blocks' elements.
* **Recompute.** The backward kernel recomputes the probabilities from Q, K and the saved row statistics (the
  QKᵀ GEMM and the softmax, :func:`recomputed_by_backward`), not the output, in every recompute mode: the evaluator
  adds that forward part to each layer's backward time, and selective recompute adds nothing more. The ``s × s``
  tensors are never stashed, which is what selective recompute drops from the stash: a stack with a fused kernel
  runs its plans as ``rc=selective`` (or ``rc=full`` with activation checkpointing, which also reruns the forward
  kernel).

The fused operators are priced as one kernel (:func:`phaze_env.pricing.price_ops`): their kept GEMM FLOPs at the
kernel's published fraction of the tensor cores' bf16 peak, its softmax included (no separate vector-core time), and
HBM traffic only for the operands above. ``Stack.attention_efficiency`` > 0 switches it on, with that fraction (a
stack's kernel on a chip, :class:`phaze_env.stacks.ChipFit`); PHAZE's search and every preset keep the traced eager
attention (0).

:data:`FLASH_BLOCK` is an assumption (see there). With context parallelism ``c`` (:mod:`phaze_env.context_parallel`) a
rank's attention core is ``c`` blocks of ``(s/c)²`` scores, its two load-balanced query chunks against each key/value
chunk of the ring (Transformer Engine's ``AttnFuncWithCPAndKVP2P`` under Megatron-Core); each block is cut causally on
its own block grid, so the rank does ``1/c`` of the unsplit causal work up to the diagonal blocks' granularity
(``kept_fraction(s/c) / kept_fraction(s)``: 0.8 % more at s/c = 8,192), and each ring hop overlaps one block's kernel
(the evaluator's ``ring_exposed_s``). Dropout on the attention probabilities (the traced graphs have none: they are
traced in eval mode) costs a fused kernel nothing more (it draws the mask on chip); an unfused stack that runs it as
a kernel of its own (``Stack.attention_dropout_kernel``) pays :func:`attention_dropout_bytes` per layer whenever the
workload trains with it (:func:`attention_dropout_probability`).
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Sequence

from phaze_env.cluster import Cluster
from phaze_env.workloads.graph import Gemm, ModelGraph, Op, is_attention_core
from phaze_env.workloads.registry import Workload

FLASH_BLOCK = 128
"""Query and key block of the fused kernel (rows × columns of one on-chip score tile). Assumption: FlashAttention-2
tiles head dimension 128 in blocks of 128 query rows (``kBlockM = 128`` in its forward kernels' traits for
``d = 128``) and 64–128 key columns depending on the GPU and direction; one square block of 128 is taken for
both, so the diagonal blocks kept are those of a 128-block grid (at s = 4096 that keeps 51.6 % of the scores,
against 50.8 % with 64-wide key blocks)."""


def blocks(seq_len: int, block: int = FLASH_BLOCK) -> int:
    """Blocks along one side of the ``seq_len × seq_len`` score matrix (a partial last block counts whole)."""
    return -(-seq_len // block)


def kept_fraction(seq_len: int, block: int = FLASH_BLOCK) -> float:
    """Fraction of the score blocks a causal kernel computes: ``(n_b + 1) / (2 n_b)``."""
    n = blocks(seq_len, block)
    return (n + 1) / (2 * n)


def _square_dims(gemm: Gemm) -> tuple[str, str] | None:
    """The two of ``m, k, n`` that span the ``s × s`` scores (equal and larger than the third), or ``None``."""
    dims = {"m": gemm.m, "k": gemm.k, "n": gemm.n}
    for a, b in (("m", "n"), ("m", "k"), ("k", "n")):
        third = ({"m", "k", "n"} - {a, b}).pop()
        if dims[a] == dims[b] and dims[a] > dims[third]:
            return a, b
    return None


def causal_gemms(gemm: Gemm, block: int = FLASH_BLOCK) -> tuple[Gemm, ...]:
    """The kept work of one attention-core GEMM under a causal mask, as whole GEMMs of exactly its MACs.

    The ``s × s`` side is cut into ``n_b`` blocks; query block ``i`` meets key blocks ``0 … i``. Pairing query block
    ``i`` with ``n_b − 1 − i`` gives ``n_b + 1`` key blocks per pair (the load-balancing pairing of causal ring
    attention), so the kept work is ``⌊n_b/2⌋`` pairs of ``B × (n_b + 1)·B`` plus, for odd ``n_b``, the middle query
    block against ``(n_b + 1)/2`` key blocks. A GEMM without an ``s × s`` side is returned unchanged."""
    square = _square_dims(gemm)
    if square is None:
        return (gemm,)
    n_b = blocks(getattr(gemm, square[0]), block)
    if n_b == 1:
        return (gemm,)
    query, key = square
    pairs = replace(gemm, batch=gemm.batch * (n_b // 2), **{query: block, key: (n_b + 1) * block})
    if n_b % 2 == 0:
        return (pairs,)
    return (pairs, replace(gemm, **{query: block, key: (n_b + 1) // 2 * block}))


def _square_elements(shape: Sequence[int]) -> bool:
    return len(shape) >= 2 and shape[-1] == shape[-2] and shape[-1] > 1


def fused_traffic_bytes(op: Op, bytes_per_element: int) -> int:
    """HBM bytes of ``op`` inside the fused kernel: the operands and result of each of its GEMMs that are not the
    ``s × s`` scores or probabilities (those stay on chip) — Q and K of QKᵀ, V and O of ·V, and in the backward
    pass Q, K, V, dO and dQ, dK, dV. A softmax has none. (The backward kernel's row sums of dO ∘ O, one pass
    over O and dO, are left out.)"""
    total = 0
    for gemm in op.gemms:
        square = set(_square_dims(gemm) or ())
        for rows, cols in (("m", "k"), ("k", "n"), ("m", "n")):  # A, B, C
            if {rows, cols} != square:
                total += gemm.batch * getattr(gemm, rows) * getattr(gemm, cols)
    return total * bytes_per_element


BIDIRECTIONAL_HEADS = ("ForMaskedLM", "ForPreTraining", "ForNextSentencePrediction", "ForSequenceClassification",
                       "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice")
"""Hugging Face model-class suffixes of encoder models, whose self-attention sees every token (BERT's masked-LM and
pre-training heads, Devlin et al. 2019): no causal mask, so a fused kernel computes every score block."""


def causal_attention(workload: Workload) -> bool:
    """Whether ``workload``'s self-attention is causal: every decoder language model here (``…ForCausalLM``,
    ``…LMHeadModel``), not an encoder (:data:`BIDIRECTIONAL_HEADS`: BERT). A fused kernel skips the masked blocks of a
    causal model only."""
    return not workload.model_class.endswith(BIDIRECTIONAL_HEADS)


def fused_op(op: Op, seq_len: int, bytes_per_element: int, block: int = FLASH_BLOCK, causal: bool = True) -> Op:
    """``op`` (an attention-core operator) inside a fused kernel: with a causal mask (``causal``) the kept GEMMs and
    softmax on the kept scores, else every score; HBM traffic without the ``s × s`` tensors (carried as
    ``bytes_read``; ``bytes_written`` 0)."""
    fraction = kept_fraction(seq_len, block) if causal else 1.0
    gemms = tuple(kept for gemm in op.gemms for kept in causal_gemms(gemm, block)) if causal else op.gemms
    parts = tuple((kind, round(elements * fraction)) for kind, elements in op.vector_parts)
    vector_elements = sum(n for _, n in parts) if parts else round(op.vector_elements * fraction)
    flops = sum(g.flops for g in gemms) + round((op.flops - op.gemm_flops) * fraction)
    return replace(op, gemms=gemms, vector_parts=parts, vector_elements=vector_elements, flops=flops,
                   bytes_read=fused_traffic_bytes(op, bytes_per_element), bytes_written=0)


def fused_attention_ops(ops: Sequence[Op], bytes_per_element: int, block: int = FLASH_BLOCK,
                        causal: bool = True) -> tuple[list[Op], list[int]]:
    """``ops`` with every attention-core operator replaced by its fused form (causal, or every score block without
    ``causal``: :func:`causal_attention`), and the indices replaced. The sequence length is read off the attention
    GEMMs (their ``s × s`` side; a softmax has no GEMM)."""
    fused, indices = list(ops), []
    square_sides = [getattr(g, _square_dims(g)[0]) for op in ops if is_attention_core(op) for g in op.gemms
                    if _square_dims(g)]
    for i, op in enumerate(ops):
        if not is_attention_core(op):
            continue
        if not square_sides:
            raise ValueError(f"attention-core operator {op.name!r}: no attention GEMM with an s × s side to fuse")
        fused[i] = fused_op(op, max(square_sides), bytes_per_element, block, causal)
        indices.append(i)
    return fused, indices


def recomputed_by_backward(op: Op) -> bool:
    """Whether a fused kernel's backward pass recomputes forward operator ``op``: the scores and probabilities (QKᵀ
    and the softmax: operators that produce an ``s × s`` tensor), not the output ·V."""
    return is_attention_core(op) and _square_elements(op.out_shape)


__all__ = ["BIDIRECTIONAL_HEADS", "FLASH_BLOCK", "attention_dropout_bytes", "attention_dropout_probability", "attention_dropout_s", "blocks",
           "causal_attention", "causal_gemms", "fused_attention_ops", "fused_op", "fused_traffic_bytes", "kept_fraction",
           "recomputed_by_backward"]


ATTENTION_DROPOUT_KEYS = ("attn_pdrop", "attention_dropout", "attention_probs_dropout_prob")
"""The HF config fields that hold the dropout probability on the attention probabilities (GPT-2's ``attn_pdrop``,
the Llama/OPT/MoE families' ``attention_dropout``, BERT's ``attention_probs_dropout_prob``)."""
DROPOUT_MASK_BYTES_PER_ELEMENT = 1
"""Bytes per element of a dropout mask: PyTorch's ``native_dropout`` keeps a ``torch.bool`` mask, the ``a·s²·b``
bytes Korthikanti et al. 2022 (arXiv:2205.05198) §4.1 count for the attention dropout's mask."""


@functools.lru_cache(maxsize=None)
def attention_dropout_probability(workload: Workload) -> float:
    """The dropout probability on ``workload``'s attention probabilities in training: its HF config's
    (:data:`ATTENTION_DROPOUT_KEYS`; the config class's default where the workload does not set it, e.g. GPT-2's
    0.1, Llama's 0.0). The traced graphs have no dropout (they are traced in eval mode: ``trace.py`` bridges it)."""
    import transformers

    config = getattr(transformers, workload.config_class)(**workload.config_dict)
    return float(next((getattr(config, key) for key in ATTENTION_DROPOUT_KEYS if getattr(config, key, None)
                       is not None), 0.0))


def attention_dropout_bytes(score_elements: float, bytes_per_element: int) -> tuple[float, float]:
    """(forward, backward) HBM bytes of the dropout on ``score_elements`` attention probabilities run as a kernel of
    its own (unfused attention: Megatron-LM 2021–22's ``CoreAttention``, ``attention_dropout`` between the fused
    scale-mask-softmax and the ·V batched matmul): the forward reads the probabilities and writes the dropped ones
    and the mask; the backward reads the incoming gradient and the mask and writes the gradient. A fused flash kernel
    draws the mask on chip and pays none of it."""
    activations = 2 * bytes_per_element * score_elements
    mask = DROPOUT_MASK_BYTES_PER_ELEMENT * score_elements
    return activations + mask, activations + mask


def attention_dropout_s(workload: Workload, cluster: Cluster, graph: ModelGraph, seq_len: int,
                        streaming_Bps: float) -> tuple[float, float]:
    """(forward, backward) time one attention layer of ``graph`` (one rank's: ``graph.seq_len`` queries of the
    ``seq_len`` keys, ``1/t`` of the heads) adds for its attention dropout, when ``cluster``'s stack runs it as a
    kernel of its own (unfused attention: a fused kernel drops on chip) and ``workload`` trains with it (else 0): its
    bytes (:func:`attention_dropout_bytes`) on the ``b·(a/t)·(s/c)·s`` scores at ``streaming_Bps``."""
    stack = cluster.stack
    if not stack.attention_dropout_kernel or stack.attention_efficiency or not attention_dropout_probability(workload):
        return 0.0, 0.0
    scores = graph.microbatch * max(1, workload.num_heads // graph.tensor_width) * graph.seq_len * seq_len
    fwd_bytes, bwd_bytes = attention_dropout_bytes(scores, graph.bytes_per_element)
    return fwd_bytes / streaming_Bps, bwd_bytes / streaming_Bps
