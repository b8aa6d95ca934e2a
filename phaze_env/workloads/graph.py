"""Operator graphs: the plain values the tracer produces and the estimator / ILP / DP consume.

An :class:`Op` is one schedulable unit on one accelerator. Tensor-core work is described by GEMMs
(``C[b, m, n] = A[b, m, k] @ B[b, k, n]``); vector-core work by a number of elements and a kind that
fixes its per-element cycle cost; communication by a collective kind, its payload and group size.
A fused operator (a matmul with its elementwise epilogue) carries both GEMMs and vector elements and
runs on ``unit="tc+vc"``.

Forward and backward graphs are separate DAGs over their own op lists (``OpGraph``): the backward graph
holds the gradient of every forward op that has backward work (plus the conjugate collectives of
tensor parallelism), with the forward edges reversed.
All sizes are bytes, all work FLOPs; names carry their unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Which resources it occupies on one accelerator.
UNITS = ("tc", "vc", "tc+vc", "comm", "none")
# Cost classes of vector work (the estimator gives each a cycles-per-element figure).
VECTOR_KINDS = ("add", "mul", "relu", "gelu", "silu", "tanh", "exp", "softmax", "norm", "reduce", "copy", "gather", "loss")


@dataclass(frozen=True)
class Gemm:
    """``C[batch, m, n] = A[batch, m, k] @ B[batch, k, n]``."""

    batch: int
    m: int
    k: int
    n: int

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.k * self.n

    def as_tuple(self) -> tuple[int, int, int, int]:
        return (self.batch, self.m, self.k, self.n)


ATTENTION_CORE_KINDS = ("bmm", "softmax")  # QKᵀ, softmax, attention over V (and their gradients)


def is_attention_core(op: "Op") -> bool:
    """Whether ``op`` is part of the attention core (what context parallelism rings and a fused kernel replaces)."""
    return op.kind in ATTENTION_CORE_KINDS


@dataclass(frozen=True)
class Op:
    """One operator of a layer graph (forward or backward)."""

    name: str
    kind: str  # what computation it is, for reporting: matmul, bmm, elementwise, softmax, norm, reduction, data, comm
    unit: str  # one of UNITS
    gemms: tuple[Gemm, ...] = ()
    vector_elements: int = 0  # elements processed on the vector cores
    vector_kind: str = ""  # cost class on the vector cores (see VECTOR_KINDS); "mixed" when fused from several
    vector_parts: tuple[tuple[str, int], ...] = ()  # (vector kind, elements) of each fused part; sums to vector_elements
    comm_kind: str = ""  # "allreduce" | "allgather" | "p2p" for communication operators
    comm_bytes: int = 0  # payload per participant
    comm_group: int = 1  # number of participants
    flops: int = 0  # arithmetic work of this op (this direction)
    bytes_read: int = 0
    bytes_written: int = 0
    param_bytes: int = 0  # parameters owned by this op (forward op only)
    stash_bytes: int = 0  # activations this op keeps for the backward pass (forward op only)
    in_shapes: tuple[tuple[int, ...], ...] = ()
    out_shape: tuple[int, ...] = ()
    fused: tuple[str, ...] = ()  # names of the traced ops merged into this one
    eager_bytes: int = 0
    """HBM bytes of the elementwise operators merged into this op (the op itself, unless it is a matmul) when each
    runs as a kernel of its own, as eager PyTorch runs them (``Stack.unfused_elementwise``): each member's own
    ``bytes_read + bytes_written`` (backward: its gradient kernel's, read ``r + w`` and written ``r``, as
    :func:`~phaze_env.workloads.model.backward_op` prices the fused op), scaled per layer to the dispatcher's count
    (:mod:`phaze_env.workloads.eager`). 0: none (a plain matmul, a collective)."""
    sequence_shards: int = 1
    """Tensor-parallel ranks that split this vector operator's tokens under sequence parallelism: the width ``t`` for an
    operator outside the tensor-parallel region whose every member is replicated over the ``t`` ranks (the norms and
    residual adds of a transformer block), 1 otherwise. Sequence parallelism runs it on ``s/t`` tokens per rank
    (Korthikanti et al. 2022, arXiv:2205.05198, §4.2.2); priced so where the stack runs it
    (``Stack.sequence_parallel_kernels``, :func:`phaze_env.pricing.price_ops`)."""
    cast_shards: int = 1
    """The same split for the FP8 cast of this weight GEMM's activation operand (its first GEMM's ``A``): ``t`` when
    that operand is replicated over the tensor group — a column-parallel GEMM's input forward, a row-parallel GEMM's
    output gradient backward — which Transformer Engine casts on the rank's ``s/t`` tokens before the all-gather and
    transposes once gathered (:func:`~phaze_env.hardware.number_format.fp8_cast_bytes`); 1 otherwise."""
    cast_shared: bool = False
    """Whether this weight GEMM reads an activation another FP8 GEMM of the same pass already cast (q, k and v of one
    input; a gated MLP's gate and up): Transformer Engine casts a module's input once (one QKV GEMM, one fc1 GEMM), so
    its cast is counted once, on the first (:func:`~phaze_env.hardware.number_format.cast_elements`)."""

    @property
    def gemm_flops(self) -> int:
        return sum(g.flops for g in self.gemms)


@dataclass(frozen=True)
class OpGraph:
    """A DAG of operators; ``edges`` are ``(i, j)`` index pairs meaning op i finishes before op j starts."""

    ops: tuple[Op, ...]
    edges: tuple[tuple[int, int], ...]

    def __len__(self) -> int:
        return len(self.ops)

    @property
    def flops(self) -> int:
        return sum(op.flops for op in self.ops)


@dataclass(frozen=True)
class Layer:
    """A layer of the model: pre-layers (embeddings), a repeated transformer block, post-layers (head, loss)."""

    name: str  # "pre", "dense" (leading dense layers before the MoE ones: DeepSeek), "block", "post"
    repeat: int
    fwd: OpGraph
    bwd: OpGraph
    params: int  # parameter count (elements) on one device at this tensor width
    param_bytes: int
    flops_fwd: int
    flops_bwd: int
    activation_stash_bytes: int  # kept from forward to backward (one microbatch)
    input_bytes: int  # what enters the layer (stashed when the layer's stage recomputes)
    output_bytes: int  # what leaves the layer (crosses a pipeline boundary)
    stash_attention_bytes: int = 0  # part of the stash that is attention scores/probabilities (…, s, s)
    stash_replicated_bytes: int = 0  # part of the stash not split by tensor parallelism
    # the parts of the stash (all, attention, replicated) that a fused kernel rebuilds in its backward pass instead of
    # keeping (workloads.model.kernel_recomputed): stashed by an eager stack only (Stack.unfused_elementwise)
    stash_kernel_bytes: int = 0
    stash_kernel_attention_bytes: int = 0
    stash_kernel_replicated_bytes: int = 0
    # the part of the stash (and of its replicated part) kept only as weight GEMMs' activation inputs (Linear inputs,
    # for their weight gradients), none of it rebuilt by a fused kernel: what an FP8 recipe keeps in FP8
    # (phaze_env.hardware.number_format.fp8_stash_saving_bytes)
    stash_gemm_input_bytes: int = 0
    stash_gemm_input_replicated_bytes: int = 0
    # the part of the stash a stack that reruns RMSNorm and the MLA up-projections in the backward pass does not keep
    # (Stack.recompute_norms_up_projections; workloads.model.norm_up_projection_recompute), with its replicated part and
    # the parts of both kept only as weight GEMMs' inputs (what FP8 had narrowed), and the fused forward operators rerun
    stash_norm_up_bytes: int = 0
    stash_norm_up_replicated_bytes: int = 0
    stash_norm_up_gemm_input_bytes: int = 0
    stash_norm_up_gemm_input_replicated_bytes: int = 0
    norm_up_rerun: tuple[str, ...] = ()
    # the part of the stash a stack that reruns the whole MoE block in the backward pass does not keep (Stack.recompute_moe;
    # workloads.model.moe_block_recompute): every tensor the block's operators produce, its input kept; with its
    # replicated part and the parts of both kept only as weight GEMMs' inputs, and the block's fused forward operators
    stash_moe_bytes: int = 0
    stash_moe_replicated_bytes: int = 0
    stash_moe_gemm_input_bytes: int = 0
    stash_moe_gemm_input_replicated_bytes: int = 0
    moe_rerun: tuple[str, ...] = ()
    # the part of the stash (and of its replicated part) that a stack applying the routing weights inside the experts'
    # activation does not keep (Stack.moe_probs_in_activation; workloads.model.combine_weighting_saved): the experts'
    # down-projection output, which the traced combine keeps to weight it; counted apart from stash_moe_* (a rerun
    # block drops both)
    stash_probs_bytes: int = 0
    stash_probs_replicated_bytes: int = 0
    expert_param_bytes: int = 0  # part of param_bytes that is routed experts (what expert parallelism shards)
    routed_token_bytes: int = 0  # tokens the routed experts take per microbatch (experts × capacity × hidden):
    # one dispatch or combine all-to-all's buffer per rank, of which (e − 1)/e leaves it
    routed_experts: int = 0  # routed experts of an MoE layer (0: dense), and how many each token picks (top-k):
    experts_per_token: int = 0  # what a node-deduplicated dispatch sends depends on them (phaze_env.moe_dispatch)
    routed_activation_bytes: int = 0  # the routed experts' first GEMM output per microbatch (experts × capacity × 2·ffn,
    # SwiGLU's gate and up halves): what their activation kernel reads (phaze_env.moe_dispatch.expert_kernel_bytes)

    @property
    def num_ops(self) -> int:
        return len(self.fwd.ops)

    @property
    def is_transformer_layer(self) -> bool:
        """A transformer layer (block, or a leading dense one) as a pipeline split counts it: the embedding (``pre``)
        and the head and loss (``post``) ride with the first and last stage (Megatron-LM's ``num_layers``)."""
        return self.name not in ("pre", "post")


@dataclass(frozen=True)
class ModelGraph:
    """A whole model at one (sequence length, microbatch, tensor width): pre, block × L, post."""

    workload: str
    seq_len: int
    microbatch: int
    tensor_width: int
    bytes_per_element: int
    layers: tuple[Layer, ...] = field(default_factory=tuple)
    eager_error: str = ""  # why the eager-traffic probe failed ("" = counted; Op.eager_bytes scaled to its count)

    @property
    def num_layers(self) -> int:
        return sum(layer.repeat for layer in self.layers)

    @property
    def params_total(self) -> int:
        return sum(layer.params * layer.repeat for layer in self.layers)
