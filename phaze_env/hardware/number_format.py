"""Number format of the tensor cores: which operators run in FP8, and what FP8 costs and saves.

The one definition of the Transformer-Engine recipe (NVIDIA Transformer Engine user guide, "Using FP8 with
Transformer Engine": ``te.Linear``-class layers run their three GEMMs — forward, dgrad and wgrad — in FP8 with
delayed scaling; everything else stays in higher precision). The estimator, the energy model, the evaluator's
memory, the system design space's ``number_format`` knob and the H100 FP8 validation cases all call
:func:`fp8_flags` and the constants below; none of them restates the rule.

* **What runs in FP8**: the weight GEMMs (``kind == "matmul"``) of the repeated transformer blocks
  (:data:`FP8_LAYERS`), forward and backward. Attention's batched GEMMs (``kind == "bmm"``: QKᵀ and
  probabilities × V), softmax, norms, the embedding (``pre`` layer) and the LM head and loss (``post`` layer)
  stay in bf16, as in TE and in Megatron-Core, whose output layer is a plain ``ColumnParallelLinear``.
* **Rate**: an FP8 tensor core does :data:`FP8_MAC_RATE` MACs per bf16 MAC slot per cycle.
* **Casts**: before each FP8 GEMM the activation operand of its first GEMM — the Linear input ``X`` in the
  forward pass, the output gradient ``dY`` in the backward pass — is cast to FP8 with TE's fused
  cast-transpose kernel, which also takes the tensor's amax for delayed scaling (``cast_transpose`` in TE's
  ``transformer_engine/common/transpose``): it reads bf16 and writes the FP8 tensor and its FP8 transpose,
  :data:`FP8_CAST_HBM_BYTES_PER_ELEMENT` bytes per element, once per module input (q, k and v share one; gate and up
  share one), and under sequence parallelism on the rank's tokens before an FP8 all-gather, the gathered tensor then
  transposed (:func:`fp8_cast_bytes`). Weights are cast once per optimizer step
  (Megatron-Core passes ``is_first_microbatch`` to TE, which caches the FP8 weights across microbatches), so
  their cast is not charged per microbatch. The amax-history / scale update is a few scalars per tensor.
* **Memory**: the FP8 weight and its FP8 transpose (Hopper's FP8 GEMMs take only the TN layout) are kept next to
  the bf16 weights and the fp32 master weights: :data:`FP8_WEIGHT_COPY_BYTES_PER_PARAM` per FP8 weight. TE keeps
  a Linear's input for its weight gradient in FP8, the column-wise (transposed) copy only
  (:func:`fp8_stash_saving_bytes`). Not modelled, on the side of too much memory: Megatron's
  ``--fp8-param-gather`` / NeMo's ``fp8_params`` keep FP8 primary weights without the bf16 copy.
"""

from __future__ import annotations

from collections.abc import Sequence

from phaze_env.workloads.graph import Layer, ModelGraph, Op

NUMBER_FORMATS: tuple[str, ...] = ("bf16", "fp8")
FP8_LAYERS: tuple[str, ...] = ("block", "dense")
"""Layers whose weight GEMMs run in FP8: the transformer blocks (``phaze_env.workloads.build`` names them
``block``, and DeepSeek's leading dense blocks ``dense``); ``pre`` (embedding) and ``post`` (final norm, LM head,
loss) stay in bf16."""
FP8_GEMM_KINDS: tuple[str, ...] = ("matmul",)
"""Operator kinds that run in FP8 inside those layers: the weight (Linear) GEMMs; ``bmm`` (attention) does not."""
FP8_MAC_RATE = 2.0
"""FP8 MACs per bf16 MAC slot per cycle: H100 SXM 1,979 TFLOP/s dense FP8 vs 989.4 TFLOP/s dense bf16 (NVIDIA
H100 Tensor Core GPU datasheet; Hopper architecture whitepaper: "2x the MMA rates ... using FP8")."""
FP8_BYTES = 1
"""Bytes per FP8 element (E4M3 forward, E5M2 gradients: 8 bits each)."""
FP8_CAST_HBM_BYTES_PER_ELEMENT = 4
"""TE's fused cast-transpose reads a bf16 element (2 B) and writes it twice in FP8 (row-major and transposed)."""
FP8_GATHER_CAST_HBM_BYTES_PER_ELEMENT = 3
"""A cast before an FP8 all-gather reads a bf16 element (2 B) and writes it once in FP8, row-major only (the transposed
copy cannot be gathered: :func:`fp8_cast_bytes`)."""
FP8_TRANSPOSE_HBM_BYTES_PER_ELEMENT = 2
"""TE's FP8 transpose of a gathered tensor reads an FP8 element (1 B) and writes it transposed (1 B)."""
FP8_WEIGHT_COPY_BYTES_PER_PARAM = 2
"""The cached FP8 weight and its FP8 transpose: 2 × 1 byte per parameter of an FP8 Linear layer."""


FORMAT_NAMES = {"bf16": "bf16", "fp8": "FP8"}
"""How each number format is named next to a figure ("of the FP8 peak")."""


def format_peak_flops(bf16_peak_flops: float, number_format: str) -> float:
    """The peak of the format a design's GEMMs run in, per device: the bf16 tensor-core peak, or for an FP8 design
    :data:`FP8_MAC_RATE` × it (its FP8 peak). The one basis of MFU (``Evaluation.mfu``, ``Plan.mfu``), so no
    design's MFU exceeds 1: FP8 designs run their weight GEMMs at that rate and everything else slower."""
    return bf16_peak_flops * (FP8_MAC_RATE if check_number_format(number_format) == "fp8" else 1.0)


def mfu_basis(number_format: str) -> str:
    """The basis named next to an MFU figure: ``"of the FP8 peak"`` / ``"of the bf16 peak"``."""
    return f"of the {FORMAT_NAMES[check_number_format(number_format)]} peak"


def mfu_text(mfu: float, number_format: str) -> str:
    """An MFU figure with its basis, as every report shows it: ``"57.5% of the FP8 peak"``."""
    return f"{mfu:.1%} {mfu_basis(number_format)}"


def check_number_format(number_format: str) -> str:
    """``number_format`` if it is one of :data:`NUMBER_FORMATS`, else a ``ValueError`` naming them."""
    if number_format not in NUMBER_FORMATS:
        raise ValueError(f"number_format must be one of {', '.join(NUMBER_FORMATS)}, got {number_format!r}")
    return number_format


def runs_in_fp8(op: Op, layer: str) -> bool:
    """Whether ``op`` of layer ``layer`` runs its GEMMs in FP8 on an FP8 accelerator (the TE recipe)."""
    return layer in FP8_LAYERS and op.kind in FP8_GEMM_KINDS and op.unit in ("tc", "tc+vc") and bool(op.gemms)


def fp8_flags(ops: Sequence[Op], layer: str | None, number_format: str) -> tuple[bool, ...]:
    """Per op of ``ops`` (one layer's forward or backward graph): runs in FP8. All ``False`` for bf16; for FP8 the
    layer's name is required, because the same operator kinds stay in bf16 in the embedding and LM head."""
    if check_number_format(number_format) == "bf16":
        return (False,) * len(ops)
    if layer is None:
        raise ValueError("pricing operators on an FP8 accelerator needs the name of their layer (FP8 applies to "
                         f"the weight GEMMs of {', '.join(FP8_LAYERS)} layers only)")
    return tuple(runs_in_fp8(op, layer) for op in ops)


def cast_elements(op: Op) -> int:
    """Elements cast to FP8 before ``op``'s GEMMs: the activation operand ``A`` (``batch × m × k``) of its first
    GEMM — ``X`` of the forward GEMM, ``dY`` of the backward op's dgrad GEMM (the tracer lists dgrad first). 0 when
    another GEMM of the pass already cast the same tensor (``Op.cast_shared``: TE's ``LayerNormLinear`` runs q, k and
    v as one GEMM on one FP8 input, Megatron-Core's ``linear_fc1`` the gate and up projections)."""
    if op.cast_shared:
        return 0
    first = op.gemms[0]
    return first.batch * first.m * first.k


def fp8_cast_bytes(op: Op, sequence_parallel: bool = False) -> int:
    """HBM bytes of the cast of ``op``'s activation operand to FP8 (:func:`cast_elements`): TE's fused cast-transpose,
    :data:`FP8_CAST_HBM_BYTES_PER_ELEMENT` per element.

    Under sequence parallelism (``sequence_parallel``: the stack runs it, ``Stack.sequence_parallel_kernels``) an
    operand replicated over the ``t`` tensor ranks (``Op.cast_shards`` ``t > 1``) is cast on the rank's ``1/t`` of
    the tokens without its transpose (:data:`FP8_GATHER_CAST_HBM_BYTES_PER_ELEMENT`), all-gathered in FP8, and the
    gathered tensor transposed (:data:`FP8_TRANSPOSE_HBM_BYTES_PER_ELEMENT` on every token): TE's
    ``_all_gather_fp8`` (``transformer_engine/pytorch/distributed.py``, v2.7, fedd9ddc: "We cannot directly
    all-gather the transposed FP8 tensor", then ``out._create_transpose()`` when the GEMM needs the column-wise copy
    and ``is_non_tn_fp8_gemm_supported()`` is false, as on Hopper). Forward that is a column-parallel layer's input
    (the norm's ``s/t`` rows, ``gather_along_first_dim``), backward a row-parallel layer's output gradient (v1.4's
    ``grad_output_preprocess``: "FP8 case with gather: unfused bgrad, cast, transpose for efficient gather")."""
    elements = cast_elements(op)
    if not sequence_parallel or op.cast_shards == 1:
        return elements * FP8_CAST_HBM_BYTES_PER_ELEMENT
    local = -(-elements // op.cast_shards)
    return local * FP8_GATHER_CAST_HBM_BYTES_PER_ELEMENT + elements * FP8_TRANSPOSE_HBM_BYTES_PER_ELEMENT


def fp8_stash_saving_bytes(layer: Layer, number_format: str, bytes_per_element: int) -> tuple[float, float]:
    """(stash bytes, of them replicated bytes) one microbatch of ``layer`` does not keep on an FP8 accelerator: TE's
    FP8 Linear keeps its input for the weight gradient as the FP8 tensor it cast for the forward GEMM, column-wise
    data only, :data:`FP8_BYTES` per element in place of ``bytes_per_element`` (NVIDIA/TransformerEngine
    ``transformer_engine/pytorch/module/linear.py``, ``_Linear.forward``: "Discard row-wise data since it is not
    needed in backward pass", ``inputmat.update_usage(rowwise_usage=False, columnwise_usage=True)``, then
    ``saved_inputmat = inputmat``; ``grouped_linear.py``, the MoE experts' ``GroupedLinear``, the same for each
    expert's input; ``layernorm_linear.py`` keeps ``ln_out`` so too). Only the tensors that the layer keeps as weight
    GEMMs' inputs and nothing else (``Layer.stash_gemm_input_bytes``), and only in the layers whose GEMMs run in FP8
    (:data:`FP8_LAYERS`). (0, 0) for bf16."""
    narrowed = fp8_narrowed_share(layer, number_format, bytes_per_element)
    if not narrowed:
        return 0.0, 0.0
    return layer.stash_gemm_input_bytes * narrowed, layer.stash_gemm_input_replicated_bytes * narrowed


def fp8_narrowed_share(layer: Layer, number_format: str, bytes_per_element: int) -> float:
    """The share of a Linear input's stash bytes ``layer`` does not keep in ``number_format``
    (:func:`fp8_stash_saving_bytes`): ``1 − FP8_BYTES/bytes_per_element`` in an FP8 layer, 0 otherwise."""
    if check_number_format(number_format) == "bf16" or layer.name not in FP8_LAYERS:
        return 0.0
    return 1.0 - FP8_BYTES / bytes_per_element


def fp8_weight_copy_factor(graph: ModelGraph, number_format: str) -> float:
    """The FP8 weight copies per device as a multiple of the weight bytes, for the memory model: the largest share
    over the graph's layers (a block's: nearly all its weights are Linear), so no stage is under-counted; the
    embedding and LM head, which have no copies, are over-counted on the first and last stages. 0 for bf16."""
    if check_number_format(number_format) == "bf16":
        return 0.0
    shares = [sum(op.param_bytes for op in layer.fwd.ops if runs_in_fp8(op, layer.name)) / layer.param_bytes
              for layer in graph.layers if layer.param_bytes > 0]
    return max(shares, default=0.0) * FP8_WEIGHT_COPY_BYTES_PER_PARAM / graph.bytes_per_element
