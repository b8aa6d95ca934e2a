"""The one door: ``evaluate(workload, accelerator, cluster, ...) -> Evaluation``.

Pipeline (docs/design.md): per tensor-parallel width ``t``, microbatch size ``m`` and context-parallel degree
``c`` the workload is traced into per-layer fused DAGs (cached; at ``c > 1`` traced at ``s/c`` tokens with the
attention core over all ``s`` keys and the ring exchange priced, :mod:`phaze_env.context_parallel`); every
operator's one-core and all-cores latency is estimated on the accelerator; each layer's forward and backward
DAGs are scheduled by the ILP (cached); the placement DP then finds the best data × pipeline × context ×
tensor plan over ``t``, ``m``, ``c``, recompute and HBM capacity. A ``(t, m, c)`` variant is scheduled only when
the DP on its layers' cheap lower bounds could beat the best plan found so far (the answer is the one
scheduling every variant would give; far fewer ILPs).
Whole evaluations are cached on disk, keyed by everything they depend on (including
:func:`phaze_env.cache.code_version` of this module, the hash of the evaluator's code and constants), so
re-evaluating a design is a lookup and a changed model is never served stale. :meth:`Evaluation.explain`
splits one layer's time by unit (:mod:`phaze_env.explain`).

:func:`throughput_upper_bound` runs the same pipeline with each layer's *lower-bound* makespan instead
of its ILP schedule. The placement DP's time per batch never decreases when a layer gets slower, so this
is a valid upper bound on the throughput ``evaluate`` returns — the exact search prunes with it.
"""

from __future__ import annotations

import math
import time
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Callable, Iterable


from phaze_env.attention import attention_dropout_s, causal_attention, recomputed_by_backward
from phaze_env.cache import DiskCache, code_key
from phaze_env.cluster import MOE_ONLY_KNOBS, OPTIMIZERS, Cluster
from phaze_env.context_parallel import (CONTEXT_PARALLELS, context_parallel_error, is_attention_core, rank_share,
                                        ring_exposed_s, valid_context_parallels)
from phaze_env.hardware import Accelerator, op_energy_j
from phaze_env.hardware.accelerator import GB_BYTES
from phaze_env.hardware.number_format import (fp8_narrowed_share, fp8_stash_saving_bytes, fp8_weight_copy_factor,
                                              mfu_basis, mfu_text)
from phaze_env.hardware.space import MICROBATCH_VALUES as DEFAULT_MICROBATCHES
from phaze_env.host import forward_syncs, host_bound_s, kernels_issued
from phaze_env.moe_dispatch import dispatch_s, expert_kernel_bytes, exposed_alltoall_s
from phaze_env.placement import LayerCost, Plan, Settings, best_plan_multi
from phaze_env.placement.inputs import uneven_batch_note
from phaze_env.placement.plan import plan_or_none
from phaze_env.placement.rules import expert_plan_error, searched_degrees, tensor_width_error, valid_tensor_widths
from phaze_env.pricing import price_ops
from phaze_env.plan_spec import PlanRules, PlanSpec, expert_degree_error, phaze_plan
from phaze_env.schedule import DEFAULT_TIME_LIMIT_S, makespan_lower_bound, schedule_graph
from phaze_env.workloads import TENSOR_WIDTHS, Layer, Workload, get_workload, model_graph

_EVALUATIONS = DiskCache("evaluations")
_BOUNDS = DiskCache("bounds")
_BOUND_TIMINGS = DiskCache("bound-timings")
"""A variant's layer timings on their cheap lower bounds (``_variant(bound_only=True)``), keyed by what they are made
of: the workload, sequence length and variant, the accelerator, the stack and, where a layer communicates or the ring
passes keys and values (``c > 1``), the network. The system space's rows share accelerators (OLMoE-1B-7B at 1 MW: 2,654
rows visited, 535 accelerators), so a row's ILP-free bound finds its layers priced by an earlier row's."""
PLAN_SEARCH_PROGRESS: ContextVar[Callable[[int, int], None] | None] = ContextVar("plan_search_progress", default=None)
"""Set by a CLI to hear ``(variants searched, variants)`` as an evaluation's plan search moves from one (HBM
capacity, t, m, c, e) variant to the next (seconds each on a large cluster); a context variable, so the evaluation
and its cache key take no callback."""


@dataclass(frozen=True)
class LayerTiming:
    """One layer's schedule on one accelerator at one (tensor width, microbatch)."""

    fwd_s: float
    bwd_s: float
    fwd_lower_bound_s: float
    bwd_lower_bound_s: float
    fwd_method: str
    bwd_method: str
    fwd_optimal: bool
    bwd_optimal: bool
    attention_fwd_s: float = 0.0  # forward time of the attention core (QKᵀ, softmax, ·V): selective recompute
    tp_comm_s: float = 0.0  # tensor-parallel collectives of forward + backward, on the cluster's links
    cp_comm_s: float = 0.0  # context parallelism's exposed ring exchange, inside fwd_s + bwd_s (and the bounds)

    def unproven(self) -> list[tuple[str, str, float]]:
        """``(direction, method, gap)`` of each schedule not proven optimal (gap: 1 − bound / makespan)."""
        out = []
        for direction in ("fwd", "bwd"):
            if not getattr(self, f"{direction}_optimal"):
                time_s, bound_s = getattr(self, f"{direction}_s"), getattr(self, f"{direction}_lower_bound_s")
                out.append((direction, getattr(self, f"{direction}_method"), 1 - bound_s / time_s if time_s > 0 else 0.0))
        return out


@dataclass(frozen=True)
class Evaluation:
    """Everything known about one design on one workload (seconds, bytes, joules, mm²).

    ``mfu`` is model FLOPs per second over ``peak_flops`` × devices used, where ``peak_flops`` is *this
    design's own* tensor-core peak in the format its GEMMs run in (``Accelerator.format_peak_flops``: the FP8
    peak for an FP8 design, so no MFU exceeds 1; :attr:`mfu_basis` names it next to the figure). Two designs'
    MFUs are not comparable throughput figures; the model FLOPs are the whole model's (per-device FLOPs ×
    tensor width). ``time_breakdown_s`` splits the
    time per batch (see :class:`~phaze_env.placement.Plan`); ``plan`` is the placement DP's chosen
    :class:`~phaze_env.placement.Plan` (``None`` when infeasible), ``plan.notation`` the plan in the one notation
    (``t8p8d1m1+sp+rc=selective``); :meth:`to_dict` holds it as :meth:`Plan.to_dict` plain data.

    ``proven`` is True when every layer schedule behind the answer (every tensor width and microbatch
    scheduled; the others are excluded by their lower bounds) is proven optimal, so ``throughput_samples_s`` is this design's exact optimum. Otherwise an
    ILP stopped early (time limit, stall or solver failure): ``throughput_samples_s`` is still achieved by a
    real schedule (a lower bound on the optimum), ``throughput_bound_samples_s`` is a proven upper bound (the
    same placement DP on the schedules' proven lower bounds), ``worst_gap`` the largest schedule gap and
    ``unproven`` names each such schedule. Unproven evaluations are never stored in the cache.
    """

    workload: str
    accelerator: dict[str, Any]
    cluster: dict[str, Any]
    feasible: bool
    reason: str
    throughput_samples_s: float
    tokens_s: float
    mfu: float
    area_mm2: float
    peak_flops: float
    energy_per_sample_j: float
    plan: Plan | None
    memory_bytes: dict[str, float]
    layer_timings: dict[str, dict[str, dict[str, Any]]]  # "t{t}_m{m}[_c{c}][_e{e}]" → layer name → LayerTiming fields (scheduled variants)
    timings_s: dict[str, float]
    ilp_solves: int
    schedules: int
    dp_calls: int = 0  # placement DP runs on the scheduled layer latencies: at most one per tensor width × microbatch
    # × HBM capacity × context- and expert-parallel degree (the variant-level branch and bound skips those whose
    # lower-bound DP cannot beat the incumbent)
    bound_dp_calls: int = 0  # placement DP runs on lower-bound layer latencies (that branch and bound's, an
    # unproven evaluation's proven bound, or all of an ILP-free bound's)
    knobs: dict[str, Any] = field(default_factory=dict)
    from_cache: bool = False
    time_breakdown_s: dict[str, float] = field(default_factory=dict)
    proven: bool = True
    worst_gap: float = 0.0
    unproven: tuple[str, ...] = ()
    throughput_bound_samples_s: float = 0.0

    @property
    def number_format(self) -> str:
        return Accelerator.from_dict(self.accelerator).number_format

    @property
    def mfu_basis(self) -> str:
        """What ``mfu`` counts against, for the text next to it: ``"of the FP8 peak"`` / ``"of the bf16 peak"``."""
        return mfu_basis(self.number_format)

    @property
    def hbm_gb(self) -> float:
        """HBM capacity of the chosen plan in GiB (2**30 bytes, as ``Accelerator.hbm_gb``)."""
        return (float(self.plan.hbm_bytes) if self.plan is not None else 0.0) / GB_BYTES

    def to_dict(self) -> dict[str, Any]:
        """A deep copy as plain data: the plan as :meth:`plan_dict`, every other field copied as it is (faster than
        ``dataclasses.asdict``: they hold only plain dicts, lists, tuples and scalars, so no dataclass checks are
        needed)."""
        return {f.name: self.plan_dict() if f.name == "plan" else _plain_copy(getattr(self, f.name))
                for f in fields(self)}

    def plan_dict(self) -> dict[str, Any]:
        """The plan as JSON-ready plain data (:meth:`Plan.to_dict <phaze_env.placement.Plan.to_dict>`; ``{}``
        when there is none): what results, records and caches of evaluations hold."""
        return self.plan.to_dict() if self.plan is not None else {}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Evaluation:
        """Inverse of :meth:`to_dict`, also through JSON (the plan a :class:`Plan` again, ``unproven`` a tuple, every
        other value kept as it is, so a record read back writes the same JSON): how a search reads its ``results.db``
        rows and its workers' answers."""
        return cls(**data | {"plan": plan_or_none(data["plan"]), "unproven": tuple(data["unproven"])})

    def explain(self, layer: str = "block", workload: Workload | None = None):
        """Time split of ``layer`` by unit at this evaluation's plan (:func:`phaze_env.explain.explain_layer`);
        pass ``workload`` for a custom (non built-in) workload."""
        from phaze_env.explain import explain_layer

        if not self.feasible:
            raise ValueError(f"no plan to explain: {self.reason}")
        return explain_layer(workload or self.workload, Accelerator.from_dict(self.accelerator),
                             Cluster.from_dict(self.cluster), layer=layer, tensor_width=self.plan.tensor_width,
                             microbatch=self.plan.microbatch)

    def summary(self) -> str:
        if not self.feasible:
            return f"{self.workload}: infeasible ({self.reason})"
        return (f"{self.workload}: {self.throughput_samples_s:,.1f} samples/s ({self.tokens_s:,.0f} tokens/s, "
                f"MFU {mfu_text(self.mfu, self.number_format)}), plan {self.plan.notation}, area {self.area_mm2:.1f} mm²")


def _plain_copy(value: Any) -> Any:
    """A deep copy of nested dicts, lists and tuples of immutable scalars."""
    if isinstance(value, dict):
        return {key: _plain_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain_copy(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_plain_copy(item) for item in value)
    return value


@dataclass(frozen=True)
class EvaluationOptions:
    """What one evaluation searches and how: every option of :func:`evaluate` and :func:`throughput_upper_bound`
    besides the workload, the accelerator and the cluster, validated here once (what the workload, the accelerator
    and the cluster add is checked when a request is made of them).

    ``plan`` (a :class:`~phaze_env.plan_spec.PlanSpec`) pins what it sets, and a pinned ``t``, ``microbatch`` or
    ``c`` replaces its list (:meth:`~phaze_env.plan_spec.PlanSpec.narrow`); ``None`` is PHAZE's search
    (:func:`~phaze_env.plan_spec.phaze_plan`), with per-stage full recompute if ``recompute`` allows it. ``hbm_gb``
    (GiB, 2**30 bytes) lists HBM capacities to try, ``None`` the accelerator's own. ``solver`` and ``time_limit_s``
    are the layer schedules' ILP's (a bound schedules nothing: they do not apply to it); ``cache`` reads and writes
    the on-disk caches. Iterables are kept as tuples (the options are hashable); the properties give what is
    searched: sorted, without repeats, narrowed by the plan."""

    plan: PlanSpec | None = None
    microbatch: Iterable[int] = DEFAULT_MICROBATCHES
    recompute: Iterable[bool] = (False, True)
    hbm_gb: float | Iterable[float] | None = None
    tensor_widths: Iterable[int] = TENSOR_WIDTHS
    seq_len: int | None = None
    solver: str = "cbc"
    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    context_parallels: Iterable[int] = CONTEXT_PARALLELS
    cache: bool = True

    def __post_init__(self) -> None:
        for name in ("microbatch", "recompute", "hbm_gb", "tensor_widths", "context_parallels"):
            value = getattr(self, name)
            if isinstance(value, Iterable) and not isinstance(value, (str, bytes, tuple)):
                object.__setattr__(self, name, tuple(value))
        if self.plan is not None and not isinstance(self.plan, PlanSpec):
            raise TypeError(f"plan must be a PlanSpec (e.g. PlanSpec.parse('t8p8d1m1')), got {type(self.plan).__name__}")
        if not self.microbatches or min(self.microbatches) <= 0:
            raise ValueError(f"microbatch sizes must be positive integers, got {self.microbatch!r}")
        if self.capacities_gb is not None and (not self.capacities_gb or min(self.capacities_gb) <= 0):
            raise ValueError(f"HBM capacities must be positive, got {self.hbm_gb!r}")
        if not self.widths or min(self.widths) <= 0:
            raise ValueError(f"tensor widths must be positive integers, got {self.tensor_widths!r}")
        if not self.degrees or min(self.degrees) <= 0:
            raise ValueError(f"context-parallel degrees must be positive integers, got {self.context_parallels!r}")

    @property
    def search_plan(self) -> PlanSpec:
        """The plan searched: ``plan``, or PHAZE's with full recompute if ``recompute`` allows it."""
        if self.plan is not None:
            return self.plan
        allowed = sorted({bool(r) for r in self.recompute})
        if not allowed:
            raise ValueError("recompute must list at least one of False, True")
        return phaze_plan(recompute=True in allowed)

    @property
    def widths(self) -> tuple[int, ...]:
        """The tensor widths searched (the plan's ``t`` if it pins one)."""
        return tuple(sorted({int(t) for t in self.search_plan.narrow(self.tensor_widths, ())[0]}))

    @property
    def microbatches(self) -> tuple[int, ...]:
        """The microbatch sizes searched (the plan's if it pins one)."""
        return tuple(sorted({int(m) for m in self.search_plan.narrow((), self.microbatch)[1]}))

    @property
    def capacities_gb(self) -> tuple[float, ...] | None:
        """The HBM capacities searched in GiB; ``None``: the accelerator's own."""
        return None if self.hbm_gb is None else tuple(sorted({float(h) for h in _as_tuple(self.hbm_gb)}))

    @property
    def degrees(self) -> tuple[int, ...]:
        """The context-parallel degrees searched (the plan's ``c`` if it pins one)."""
        plan = self.search_plan
        return tuple(sorted({int(c) for c in self.context_parallels})) if plan.c is None else (plan.c,)


def _options(options: EvaluationOptions | None, keywords: dict[str, Any]) -> EvaluationOptions:
    """``options`` with ``keywords`` (:class:`EvaluationOptions` fields, as :func:`evaluate` takes them) replacing
    its fields; no ``options``: the defaults with ``keywords``."""
    if options is not None and not isinstance(options, EvaluationOptions):
        raise TypeError(f"options must be EvaluationOptions, got {type(options).__name__}")
    known = [f.name for f in fields(EvaluationOptions)]
    unknown = [name for name in keywords if name not in known]
    if unknown:
        raise TypeError(f"unknown evaluation option {unknown[0]!r}; known: {', '.join(known)}")
    if options is None:
        return EvaluationOptions(**keywords)
    return replace(options, **keywords) if keywords else options


@dataclass(frozen=True)
class _Request:
    """The validated arguments of one evaluation (what its cache key and its run depend on)."""

    workload: Workload
    cluster: Cluster
    microbatches: tuple[int, ...]
    capacities_gb: tuple[float, ...]
    widths: tuple[int, ...]
    plan: PlanSpec
    seq_len: int | None
    context_parallels: tuple[int, ...]

    def key_parts(self) -> tuple:
        return (self.workload.to_dict(), self.cluster.to_dict(), self.microbatches, self.capacities_gb, self.widths,
                self.plan.to_dict(), self.seq_len, self.context_parallels)


def _request(workload, accelerator, cluster, options: EvaluationOptions) -> _Request:
    """Check what ``options`` asks of this workload, accelerator and cluster (the options checked themselves)."""
    workload = get_workload(workload)
    if not isinstance(accelerator, Accelerator):
        raise TypeError(f"accelerator must be an Accelerator, got {type(accelerator).__name__}")
    cluster = cluster if cluster is not None else Cluster()
    if not isinstance(cluster, Cluster):
        raise TypeError(f"cluster must be a Cluster, got {type(cluster).__name__}")
    plan = options.search_plan
    capacities = (accelerator.hbm_gb,) if options.capacities_gb is None else options.capacities_gb
    if plan.devices is not None and plan.devices != cluster.n_devices:
        raise ValueError(f"plan {plan} uses t·c·p·d = {plan.devices} devices but the cluster has {cluster.n_devices}")
    tokens = workload.seq_len if options.seq_len is None else options.seq_len
    if plan.c is not None and context_parallel_error(tokens, plan.c):
        raise ValueError(f"plan {plan}: {context_parallel_error(tokens, plan.c)}")
    if cluster.stack.moe_node_limit and not workload.num_experts:
        raise ValueError(f"cluster moe_node_limit={cluster.stack.moe_node_limit} (node-limited routing) needs a "
                         f"mixture-of-experts model; {workload.name} is dense")
    if cluster.stack.moe_alltoall_overlap and not workload.num_experts:
        raise ValueError(f"cluster moe_alltoall_overlap (the expert all-to-all hidden under compute) needs a "
                         f"mixture-of-experts model; {workload.name} is dense")
    if plan.e is not None and plan.d is not None and not cluster.stack.folded_experts and plan.d % plan.e:
        raise ValueError(expert_degree_error(plan.e, plan.d))
    for knob, what in MOE_ONLY_KNOBS.items():
        if getattr(cluster.stack, knob) and not workload.num_experts:
            raise ValueError(f"cluster {knob} ({what}) needs a mixture-of-experts model; {workload.name} is dense")
    if error := expert_plan_error(plan, workload):
        raise ValueError(error)
    if plan.t is not None and (error := tensor_width_error(workload, plan.t, cluster.n_devices)):
        raise ValueError(error)
    return _Request(workload, cluster, options.microbatches, capacities, options.widths, plan, options.seq_len,
                    options.degrees)


def _as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, Iterable) and not isinstance(value, (str, bytes)) else (value,)


def layer_stash_bytes(layer: Layer, cluster: Cluster | None, number_format: str = "bf16",
                      bytes_per_element: int = 2) -> tuple[float, float, float]:
    """(stash, its attention part, its replicated part) of one microbatch of ``layer`` as ``cluster``'s stack keeps it:
    what eager autograd saves (the traced stash) less, unless the stack runs every elementwise operator unfused
    (``Stack.unfused_elementwise``), what its fused kernels rebuild in their backward pass instead
    (``Layer.stash_kernel_*``, :func:`phaze_env.workloads.model.kernel_recomputed`), and, in ``number_format`` FP8,
    what its FP8 Linears keep narrower than ``bytes_per_element`` (:func:`fp8_stash_saving_bytes`), and, when the stack
    reruns RMSNorm and the MLA up-projections in the backward pass (``Stack.recompute_norms_up_projections``), their
    outputs as that stash would have kept them (``Layer.stash_norm_up_*``)."""
    fp8_saving, fp8_replicated_saving = fp8_stash_saving_bytes(layer, number_format, bytes_per_element)
    kept = (float(layer.activation_stash_bytes) - fp8_saving, float(layer.stash_attention_bytes),
            float(layer.stash_replicated_bytes) - fp8_replicated_saving)
    # the parts a rerun drops (Layer.stash_<part>_*), each less what FP8 already narrowed of its GEMM inputs
    rerun_parts = () if cluster is None else tuple(
        part for part, on in (("norm_up", cluster.stack.recompute_norms_up_projections),
                              ("moe", cluster.stack.recompute_moe)) if on)
    narrowed = fp8_narrowed_share(layer, number_format, bytes_per_element) if rerun_parts else 0.0
    for part in rerun_parts:
        dropped = getattr(layer, f"stash_{part}_bytes") - narrowed * getattr(layer, f"stash_{part}_gemm_input_bytes")
        dropped_replicated = (getattr(layer, f"stash_{part}_replicated_bytes")
                              - narrowed * getattr(layer, f"stash_{part}_gemm_input_replicated_bytes"))
        kept = (kept[0] - dropped, kept[1], kept[2] - dropped_replicated)
    if cluster is not None and (cluster.stack.recompute_moe or cluster.stack.moe_probs_in_activation):
        # the experts' outputs the combine kept for the probabilities' gradient (no weight GEMM's input: FP8 keeps
        # them as traced)
        kept = (kept[0] - layer.stash_probs_bytes, kept[1], kept[2] - layer.stash_probs_replicated_bytes)
    if cluster is not None and cluster.stack.unfused_elementwise:
        return kept
    rebuilt = (layer.stash_kernel_bytes, layer.stash_kernel_attention_bytes, layer.stash_kernel_replicated_bytes)
    return tuple(total - part for total, part in zip(kept, rebuilt))


def _layer_chain(graph, timings: dict[str, LayerTiming], cluster: Cluster | None = None,
                 expert_parallel: int = 1, context_parallel: int = 1,
                 streaming_Bps: float = math.inf, number_format: str = "bf16",
                 dropout_s: tuple[float, float] = (0.0, 0.0)) -> list[LayerCost]:
    """The DP's layers. At expert-parallel degree ``e > 1`` a device holds ``1/e`` of each MoE layer's experts and
    runs the same routed-token slots through them (``graph`` is one rank's: its experts at the per-rank shape,
    :func:`~phaze_env.workloads.model.at_expert_rank`; at ``c > 1`` its ``s/c`` tokens); each layer adds its dispatch
    and combine, forward and backward, over the ``e`` ranks ``t·c`` apart (Megatron-Core's tp-cp-ep-dp-pp rank order;
    consecutive ranks, each sending its ``1/t`` of the tokens, in a folded expert grid: ``Stack.folded_experts``),
    as the stack sends them (:func:`phaze_env.moe_dispatch.dispatch_s`), half of what is exposed in each direction
    (all of it, unless the stack overlaps them: :func:`phaze_env.moe_dispatch.exposed_alltoall_s`). An MoE layer's
    memory-bound expert kernels the traced graph does not have (:func:`phaze_env.moe_dispatch.expert_kernel_bytes`)
    add their bytes at ``streaming_Bps`` (the chip's achieved HBM bandwidth times the stack's framework efficiency,
    as every operator is slowed) to each direction. Each layer with an attention core adds ``dropout_s`` (forward,
    backward: :func:`~phaze_env.attention.attention_dropout_s`), its forward part inside the attention core selective
    recompute repeats. Full recompute reruns the transformer layers' forward only (``recompute_fwd_s``): Megatron-LM's
    checkpointing wraps ``ParallelTransformer``'s layers (Megatron-Core's ``TransformerBlock``'s), not the embedding or
    the LM head and loss."""
    chain = []
    e = expert_parallel
    # the layers a pipeline split counts (the stack's rule; no cluster: the default rules)
    split_rules = cluster.stack.plan_rules if cluster is not None else PlanRules()
    # the expert-parallel group's ranks: t·c apart, or consecutive in a folded expert grid (its rank order tp-ep-dp-pp)
    stride = 1 if cluster is not None and cluster.stack.folded_experts else graph.tensor_width * context_parallel
    # the traced stash's bytes per element: what an FP8 layer narrows (bf16 keeps the stash as traced)
    stash_element_bytes = graph.bytes_per_element if number_format != "bf16" else 2
    for layer in graph.layers:
        timing = timings[layer.name]
        stash = layer_stash_bytes(layer, cluster, number_format, stash_element_bytes)
        alltoall_s = dispatch_s(cluster, layer.routed_token_bytes, e, stride, experts=layer.routed_experts,
                                top_k=layer.experts_per_token) if e > 1 else 0.0
        kernel_fwd_s, kernel_bwd_s = (part / streaming_Bps for part in expert_kernel_bytes(
            layer.routed_token_bytes, layer.routed_activation_bytes, layer.routed_experts, e))
        attends = any(dropout_s) and any(map(is_attention_core, layer.fwd.ops))
        dropout_fwd_s, dropout_bwd_s = dropout_s if attends else (0.0, 0.0)
        fwd_s = timing.fwd_s + kernel_fwd_s + dropout_fwd_s
        bwd_s = timing.bwd_s + kernel_bwd_s + dropout_bwd_s + main_grad_accumulation_s(layer, e, cluster, streaming_Bps)
        if alltoall_s and cluster.stack.moe_alltoall_overlap:  # the layer computes on what the communication leaves it
            fwd_s, bwd_s = (part / (1.0 - cluster.stack.moe_comm_sm_share) for part in (fwd_s, bwd_s))
        exposed_s = exposed_alltoall_s(alltoall_s, fwd_s + bwd_s, cluster.stack.moe_alltoall_overlap) if e > 1 else 0.0
        # a rerun MoE block dispatches and combines again before its backward pass: six exchanges, the two more there
        rerun_s = (exposed_alltoall_s(1.5 * alltoall_s, fwd_s + bwd_s, cluster.stack.moe_alltoall_overlap) - exposed_s
                   if e > 1 and cluster.stack.recompute_moe and layer.routed_experts else 0.0)
        if cluster is not None and cluster.stack.host_op_s and layer.is_transformer_layer:  # the host as a stage
            fwd_s, bwd_s = _host_bound(layer, fwd_s + exposed_s / 2, bwd_s + exposed_s / 2, cluster.stack)
            fwd_s, bwd_s = fwd_s - exposed_s / 2, bwd_s - exposed_s / 2
        expert_bytes = layer.expert_param_bytes / e
        entry = LayerCost(fwd_s=fwd_s + exposed_s / 2, bwd_s=bwd_s + exposed_s / 2 + rerun_s,
                          param_bytes=float(layer.param_bytes - layer.expert_param_bytes) + expert_bytes,
                          expert_param_bytes=expert_bytes,
                          stash_bytes=stash[0], output_bytes=float(layer.output_bytes),
                          input_bytes=float(layer.input_bytes), attention_stash_bytes=stash[1],
                          replicated_stash_bytes=stash[2],
                          attention_fwd_s=min(timing.attention_fwd_s, timing.fwd_s) + dropout_fwd_s,
                          recompute_fwd_s=fwd_s + exposed_s / 2 if layer.is_transformer_layer else 0.0,
                          tp_comm_s=min(timing.tp_comm_s, timing.fwd_s + timing.bwd_s - timing.cp_comm_s),
                          cp_comm_s=timing.cp_comm_s, ep_comm_s=exposed_s + rerun_s,
                          transformer_layers=float(split_rules.split_layers(layer)))
        chain.extend([entry] * layer.repeat)
    return chain


def main_grad_accumulation_s(layer: Layer, expert_parallel: int, cluster: Cluster | None, streaming_Bps: float) -> float:
    """What one microbatch's backward pass of ``layer`` spends accumulating its weight gradients into the main-gradient
    buffer (``Stack.main_grad_accumulation_bytes`` per weight the device holds: the layer's dense weights and ``1/e``
    of its routed experts'), at ``streaming_Bps`` (the chip's achieved HBM bandwidth times the framework efficiency,
    as every memory-bound kernel here). 0 for a stack that does not price it or a layer without weights."""
    per_weight = cluster.stack.main_grad_accumulation_bytes if cluster is not None else 0.0
    if not per_weight or not layer.param_bytes:
        return 0.0
    held = layer.param_bytes - layer.expert_param_bytes + layer.expert_param_bytes / expert_parallel
    return per_weight * layer.params * held / layer.param_bytes / streaming_Bps


def _host_bound(layer: Layer, fwd_s: float, bwd_s: float, stack) -> tuple[float, float]:
    """A transformer layer's forward and backward time (exposed all-to-all included) with the host as a stage of the
    pipeline (:func:`phaze_env.host.host_bound_s`): its traced operators' issue time at ``stack.host_op_s`` each, and
    the forward pass's device-to-host syncs of its expert dispatch (:func:`phaze_env.host.forward_syncs`)."""
    forward, backward = kernels_issued(layer)
    return (host_bound_s(fwd_s, forward, forward_syncs(layer, stack.moe_dispatch), stack.host_op_s),
            host_bound_s(bwd_s, backward, 0, stack.host_op_s))


@dataclass(frozen=True)
class _Timing:
    """What every layer of one evaluation is priced and scheduled with: the accelerator, the cluster, the ILP's solver
    and time limit, whether the caches are read, and the counters the evaluation reports (the same for every
    variant; ``bound_only`` differs per call: a variant is bounded before it is scheduled)."""

    accelerator: Accelerator
    cluster: Cluster
    solver: str
    time_limit_s: float
    cache: bool
    counters: dict[str, float]
    causal: bool = True  # the workload's attention is causal (a fused kernel skips its masked blocks)

    @classmethod
    def fresh(cls, accelerator: Accelerator, cluster: Cluster, *, solver: str, time_limit_s: float,
              cache: bool, causal: bool = True) -> _Timing:
        """The options with every counter at zero (one evaluation's)."""
        counters = {"trace": 0.0, "estimate": 0.0, "schedule": 0.0, "ilp_solves": 0, "schedules": 0}
        return cls(accelerator, cluster, solver, time_limit_s, cache, counters, causal)


def _time_layer(layer: Layer, timing: _Timing, *, bound_only: bool, context_parallel: int = 1, tensor_width: int = 1,
                kv_hop_bytes: float = 0.0, prices: dict | None = None) -> LayerTiming:
    """The layer's forward and backward schedules; at ``context_parallel > 1`` plus the ring exchange each
    direction leaves exposed (``kv_hop_bytes`` per forward hop; backward passes keys, values and their gradients).
    ``prices``: this variant's operator latencies by (layer, direction), filled on first use (a variant is
    timed on its lower bounds first and scheduled later only if it can win). A stack that reruns RMSNorm and the MLA
    up-projections (``Stack.recompute_norms_up_projections``) adds their fused forward operators' latencies
    (``Layer.norm_up_rerun``, summed as selective recompute's attention core is) to the backward pass."""
    acc, cluster, counters = timing.accelerator, timing.cluster, timing.counters
    prices = {} if prices is None else prices
    results = {}
    attention_s = {}  # what selective recompute repeats, per direction (eager: the attention core)
    core_s = {}  # the attention core's own time per direction (eager or fused): what each ring hop overlaps
    tp_comm_s = 0.0
    # what selective recompute repeats: the attention core; with a fused kernel, the scores its backward recomputes
    attention_part = recomputed_by_backward if cluster.stack.attention_efficiency else is_attention_core
    for direction in ("fwd", "bwd"):
        dag = getattr(layer, direction)
        started = time.perf_counter()
        if (layer.name, direction) not in prices:
            table = price_ops(dag.ops, acc, cluster, layer=layer.name, edges=dag.edges, causal=timing.causal).table
            one_s, all_s = table.device_latencies_s(0, 0)
            links_s = table.exposed_comm_s(all_s)  # in full, or what a TP overlap leaves exposed
            prices[layer.name, direction] = (one_s + links_s, all_s + links_s, float(links_s.sum()))
        one, all_cores, comm_s = prices[layer.name, direction]
        tp_comm_s += comm_s
        attention_s[direction] = float(sum(min(a, b) for op, a, b in zip(dag.ops, one, all_cores)
                                           if attention_part(op)))
        core_s[direction] = float(sum(min(a, b) for op, a, b in zip(dag.ops, one, all_cores) if is_attention_core(op)))
        counters["estimate"] += time.perf_counter() - started
        started = time.perf_counter()
        if bound_only:
            ops = [{"unit": op.unit, "latency_s": float(a), "latency_parallel_s": float(b)}
                   for op, a, b in zip(dag.ops, one, all_cores)]
            bound = makespan_lower_bound(ops, dag.edges, acc.num_tc, acc.num_vc) if ops else 0.0
            results[direction] = (bound, bound, "bound", False)
        elif dag.ops:
            schedule = schedule_graph(dag, one, all_cores, acc.num_tc, acc.num_vc, solver=timing.solver,
                                      time_limit_s=timing.time_limit_s, cache=timing.cache)
            counters["ilp_solves"] += schedule.solver_calls if not schedule.from_cache else 0
            counters["schedules"] += 1
            results[direction] = (schedule.makespan_s, schedule.lower_bound_s, schedule.method, schedule.optimal)
        else:
            results[direction] = (0.0, 0.0, "empty", True)
        counters["schedule"] += time.perf_counter() - started
    (f, flb, fm, fo), (b, blb, bm, bo) = results["fwd"], results["bwd"]
    rerun = (set(layer.norm_up_rerun if cluster.stack.recompute_norms_up_projections else ())
             | set(layer.moe_rerun if cluster.stack.recompute_moe else ()))
    if rerun:  # their fused forward operators rerun before the backward pass (each once)
        one, all_cores, _ = prices[layer.name, "fwd"]
        rerun_s = float(sum(min(a, c) for op, a, c in zip(layer.fwd.ops, one, all_cores) if op.name in rerun))
        b, blb = b + rerun_s, blb + rerun_s
    if cluster.stack.attention_efficiency:
        # A fused kernel's backward recomputes its scores itself (phaze_env.attention), whatever the recompute mode:
        # that time belongs to the backward pass, and selective recompute (what the stash drops) adds nothing more.
        # With context parallelism each ring hop overlaps one chunk's fused kernel (Transformer Engine's
        # AttnFuncWithCPAndKVP2P), the backward's with its recomputed scores.
        recompute_s = attention_s["fwd"]
        ring_fwd_s = ring_exposed_s(core_s["fwd"], kv_hop_bytes, cluster, tensor_width, context_parallel)
        ring_bwd_s = ring_exposed_s(core_s["bwd"] + recompute_s, 2 * kv_hop_bytes, cluster, tensor_width,
                                    context_parallel)
        backward_s = recompute_s + ring_bwd_s
        return LayerTiming(f + ring_fwd_s, b + backward_s, flb + ring_fwd_s, blb + backward_s, fm, bm, fo, bo, 0.0,
                           tp_comm_s, ring_fwd_s + ring_bwd_s)
    ring_fwd_s = ring_exposed_s(core_s["fwd"], kv_hop_bytes, cluster, tensor_width, context_parallel)
    ring_bwd_s = ring_exposed_s(core_s["bwd"], 2 * kv_hop_bytes, cluster, tensor_width, context_parallel)
    return LayerTiming(f + ring_fwd_s, b + ring_bwd_s, flb + ring_fwd_s, blb + ring_bwd_s, fm, bm, fo, bo,
                       attention_s["fwd"] + ring_fwd_s, tp_comm_s, ring_fwd_s + ring_bwd_s)


def _energy_per_sample_j(graph, acc: Accelerator, tensor_width: int, context_parallel: int = 1) -> float:
    per_microbatch = sum(layer.repeat * sum(op_energy_j(op, acc, layer=layer.name) for op in layer.fwd.ops + layer.bwd.ops)
                         for layer in graph.layers)
    return per_microbatch * tensor_width * context_parallel / graph.microbatch


def _model_flops_per_sample(graph, context_parallel: int = 1) -> float:
    """Model FLOPs (forward + backward, no recompute) of one sample: per-device FLOPs × the tensor width × the
    context-parallel degree (the whole group's work, including Megatron's vocabulary padding)."""
    per_device = sum((layer.flops_fwd + layer.flops_bwd) * layer.repeat for layer in graph.layers)
    return per_device * graph.tensor_width * context_parallel / graph.microbatch


@dataclass
class _Variant:
    """One (tensor width, microbatch, context parallel, expert parallel) of an evaluation: its graph (one rank's:
    its ``s/c`` tokens, its ``E/e`` experts on their routed tokens), layer timings and the DP's layer chain."""

    graph: Any
    timings: dict[str, LayerTiming]
    cluster: Cluster
    context_parallel: int = 1
    expert_parallel: int = 1
    streaming_Bps: float = math.inf  # what the MoE layers' memory-bound expert kernels stream at (_layer_chain)
    number_format: str = "bf16"  # the accelerator's: an FP8 layer keeps its Linears' inputs in FP8 (_layer_chain)
    dropout_s: tuple[float, float] = (0.0, 0.0)  # an attention layer's dropout kernel, fwd and bwd (_layer_chain)
    _chain: list[LayerCost] | None = None

    def chain(self) -> list[LayerCost]:
        if self._chain is None:
            self._chain = _layer_chain(self.graph, self.timings, self.cluster, self.expert_parallel,
                                       self.context_parallel, self.streaming_Bps, self.number_format,
                                       self.dropout_s)
        return self._chain

    def lower_bound_chain(self) -> list[LayerCost]:
        """The chain with every layer at its schedules' proven lower bounds (a chain no slower than any real one)."""
        bounds = {name: replace(timing, fwd_s=timing.fwd_lower_bound_s, bwd_s=timing.bwd_lower_bound_s)
                  for name, timing in self.timings.items()}
        return _layer_chain(self.graph, bounds, self.cluster, self.expert_parallel, self.context_parallel,
                            self.streaming_Bps, self.number_format, self.dropout_s)

    def plan_fields(self) -> dict[str, Any]:
        """What the plan search reads of this variant besides its layers (:class:`~phaze_env.placement.Settings`
        fields): the whole sequence, the model FLOPs per sample (for the MFU) and the FP8 weight copies."""
        c = self.context_parallel
        return {"seq_len": self.graph.seq_len * c, "model_flops_per_sample": _model_flops_per_sample(self.graph, c),
                "weight_copy_factor": fp8_weight_copy_factor(self.graph, self.number_format)}


def _run(request: _Request, timing: _Timing, *, bound_only: bool) -> Evaluation:
    """One evaluation (or, ``bound_only``, its ILP-free bound) of what ``request`` asks, every layer timed with
    ``timing`` (whose ``cache`` reaches the graphs and schedules; the placement DP runs uncached here: the whole
    evaluation is what ``evaluate`` caches)."""
    workload, cluster, acc, counters = request.workload, request.cluster, timing.accelerator, timing.counters
    started = time.perf_counter()
    variants: dict[tuple[int, int, int, int], _Variant] = {}  # scheduled (with bound_only: bounded) variants
    bounded: dict[tuple[int, int, int, int], _Variant] = {}  # every layer at its cheap lower bound, no ILP
    prices: dict[tuple[int, int, int, int], dict] = {}  # operator latencies per variant, shared by both
    capacities = [capacity * GB_BYTES for capacity in request.capacities_gb]

    def kept(store: dict, t: int, m: int, c: int, e: int, bound: bool) -> _Variant:
        """The variant at ``(t, m, c, e)`` in ``store``, made on first use (``bound``: its layers at their bounds)."""
        if (t, m, c, e) not in store:
            store[(t, m, c, e)] = _variant(request, timing, t, m, c, e, bound_only=bound, prices=prices)
        return store[(t, m, c, e)]

    def variant(t: int, m: int, c: int, e: int) -> _Variant:
        return kept(variants, t, m, c, e, bound_only)

    def bound_variant(t: int, m: int, c: int, e: int) -> _Variant:
        return variant(t, m, c, e) if bound_only else kept(bounded, t, m, c, e, True)

    def lower_bound_chain(t: int, m: int, c: int, e: int) -> list[LayerCost]:
        """The best proven lower bounds known: the schedules' where scheduled, else the cheap ones."""
        if (t, m, c, e) in variants:
            return variants[(t, m, c, e)].lower_bound_chain()
        return bound_variant(t, m, c, e).chain()

    calls = {"dp_calls": 0, "bound_dp_calls": 0}  # the placement DP runs made (best_plan_multi counts them)
    seq_len = workload.seq_len if request.seq_len is None else request.seq_len
    # what the request searches, beside the plan loop that takes it
    degrees = [c for c in valid_context_parallels(seq_len, request.context_parallels) if c <= cluster.n_devices]
    usable, experts = searched_degrees(workload, request.widths, cluster.n_devices, request.plan.e)
    if usable and degrees:
        # The one plan loop (placement.best_plan_multi): capacities smallest first, then t, then m, then c, then e,
        # branch and bound across them; ties keep the first (the smaller HBM).
        template = Settings(cluster, usable[0], request.microbatches[0], capacities[0], request.plan,
                            peak_flops=acc.format_peak_flops, hbm_bandwidth_Bps=acc.hbm_bandwidth_Bps,
                            context_parallel=degrees[0], expert_parallel=experts[0])

        variants_total = len(capacities) * len(usable) * len(request.microbatches) * len(degrees) * len(experts)
        searched = [0]  # the variants the plan loop has reached (it asks each one's fields first)
        report = PLAN_SEARCH_PROGRESS.get()

        def settings_of(t: int, m: int, c: int, e: int) -> dict[str, Any]:
            if report is not None:  # a second pass (the proven lower bounds) stays at the total
                searched[0] = min(searched[0] + 1, variants_total)
                report(searched[0], variants_total)
            return bound_variant(t, m, c, e).plan_fields()

        def search(chain_of, lower_bound_of=None, calls=None, *, bound: bool = False) -> Any:
            # ``bound``: chain_of gives lower-bound layers; under the data-parallel overlap the exposure is then
            # priced at its floor (Settings.unbounded_overlap_cover), so the DP on them stays a lower bound
            settings = replace(template, unbounded_overlap_cover=True) if bound and cluster.stack.dp_comm_overlap \
                else template
            return best_plan_multi(chain_of, settings, tensor_widths=usable, microbatches=request.microbatches, calls=calls,
                                   hbm_bytes=capacities, variant_fields=settings_of, context_parallels=degrees,
                                   expert_parallels=experts, lower_bound_layers=lower_bound_of)

        # A variant's layers are scheduled only when the DP on their cheap lower bounds could beat the best
        # plan so far (layer-level branch and bound): the answer is the one scheduling every variant gives. Under
        # data-parallel overlap a slower layer can hide more of its stage's collectives, so the DP on lower-bound
        # layer times prices the exposure at its floor (best_plan_multi; tests/test_bound_property.py).
        prune = not bound_only
        best = search(lambda t, m, c, e: variant(t, m, c, e).chain(),
                      (lambda t, m, c, e: bound_variant(t, m, c, e).chain()) if prune else None, calls,
                      bound=bound_only)
        reason = best.reason
    elif not usable:
        best, reason = None, f"no tensor width in {list(request.widths)} divides {workload.name}'s attention heads"
    else:
        best, reason = None, (f"no context-parallel degree in {list(request.context_parallels)} splits {seq_len}-token "
                              f"sequences into 2c equal chunks on {cluster.n_devices} devices")
    layer_timings = {_variant_label(*key): {name: asdict(timing) for name, timing in v.timings.items()}
                     for key, v in variants.items()}
    unproven = [] if bound_only else [
        (f"{_variant_label(*key)} {name} {direction}", method, gap) for key, v in variants.items()
        for name, timing in v.timings.items() for direction, method, gap in timing.unproven()]
    bound = None
    if unproven and best is not None and best.feasible:  # the same DP on the proven lower bounds (the overlap's
        # exposure at its floor): no real schedule can do better
        lower = {"dp_calls": 0, "bound_dp_calls": 0}
        bound = max(best.throughput_samples_s, search(lower_bound_chain, calls=lower, bound=True).throughput_samples_s)
        calls["bound_dp_calls"] += lower["dp_calls"] + lower["bound_dp_calls"]
    if bound_only:  # every layer latency was a lower bound
        calls = {"dp_calls": 0, "bound_dp_calls": calls["dp_calls"] + calls["bound_dp_calls"]}
    total_s = time.perf_counter() - started
    timings_s = {k: counters[k] for k in ("trace", "estimate", "schedule")}
    timings_s["placement"] = max(total_s - sum(timings_s.values()), 0.0)
    common = dict(workload=workload.name, cluster=cluster.to_dict(), area_mm2=acc.area_mm2, peak_flops=acc.format_peak_flops,
                  layer_timings=layer_timings, timings_s=timings_s, ilp_solves=int(counters["ilp_solves"]),
                  schedules=int(counters["schedules"]),
                  dp_calls=calls["dp_calls"], bound_dp_calls=calls["bound_dp_calls"],
                  knobs={"microbatch": list(request.microbatches), "plan": str(request.plan),
                         "hbm_gb": list(request.capacities_gb), "tensor_widths": list(request.widths),
                         "context_parallels": list(request.context_parallels)},
                  proven=not unproven, worst_gap=max((gap for _, _, gap in unproven), default=0.0),
                  unproven=tuple(f"{where} ({method}, gap {gap:.3%})" for where, method, gap in unproven))
    if best is None or not best.feasible:
        return Evaluation(accelerator=acc.to_dict(), feasible=False, reason=reason or "no feasible plan",
                          throughput_samples_s=0.0, tokens_s=0.0, mfu=0.0, energy_per_sample_j=0.0, plan=None,
                          memory_bytes={}, **common)
    bound = best.throughput_samples_s if bound is None else bound
    chosen = acc.replace(hbm_gb=best.hbm_bytes / GB_BYTES)
    energy = 0.0 if bound_only else _energy_per_sample_j(
        variants[(best.tensor_width, best.microbatch, best.context_parallel, best.expert_parallel)].graph, acc,
        best.tensor_width,
        best.context_parallel)
    return Evaluation(accelerator=chosen.to_dict(), feasible=True, reason="",
                      throughput_samples_s=best.throughput_samples_s, tokens_s=best.tokens_s or 0.0,
                      mfu=best.mfu or 0.0, energy_per_sample_j=energy, plan=best,
                      memory_bytes=dict(best.memory_bytes), time_breakdown_s=dict(best.time_breakdown_s),
                      throughput_bound_samples_s=bound, **common)


def _variant_label(t: int, m: int, c: int, e: int = 1) -> str:
    return f"t{t}_m{m}" + (f"_c{c}" if c > 1 else "") + (f"_e{e}" if e > 1 else "")


def _variant(request: _Request, timing: _Timing, t: int, m: int, c: int, e: int, *, bound_only: bool,
             prices: dict) -> _Variant:
    """One rank's graph at ``(t, m, c, e)`` (traced at ``s/c`` tokens, its experts at the per-rank shape of ``e``),
    each layer's schedules and the DP's layer chain."""
    started = time.perf_counter()
    seq_len = request.workload.seq_len if request.seq_len is None else request.seq_len
    traced = model_graph(request.workload, seq_len=seq_len // c, microbatch=m, tensor_width=t, cache=timing.cache,
                         expert_parallel=e, folded_experts=request.cluster.stack.folded_experts)
    timing.counters["trace"] += time.perf_counter() - started
    if request.cluster.stack.unfused_elementwise and traced.eager_error:
        raise ValueError(f"the cluster runs elementwise operators unfused (eager), but {traced.eager_error}; "
                         "price it fused (unfused_elementwise=False) instead")
    streaming_Bps = timing.accelerator.effective_hbm_bandwidth_Bps * request.cluster.stack.framework_efficiency
    # an attention layer's dropout kernel: the rank's s/c queries against all s keys (the share keeps these shapes)
    dropout_s = attention_dropout_s(request.workload, request.cluster, traced, seq_len, streaming_Bps)
    share = rank_share(traced, request.workload, c)  # layers without attention pass nothing round the ring
    key = timings = None
    if bound_only and timing.cache:  # uncached evaluations (a patched model) neither read nor fill it
        talks = c > 1 or any(op.unit == "comm" for part in share.graph.layers for op in (*part.fwd.ops, *part.bwd.ops))
        key = code_key(__name__, "bound-timings", request.workload.to_dict(), seq_len, t, m, c, e,
                       timing.accelerator.to_dict(), request.cluster.stack.to_dict(),
                       request.cluster.network.to_dict() if talks else None)
        timings = _BOUND_TIMINGS.get(key)
    if timings is None:
        timings = {layer.name: _time_layer(layer, timing, bound_only=bound_only, context_parallel=c, tensor_width=t,
                                           kv_hop_bytes=share.kv_hop_bytes if any(map(is_attention_core, layer.fwd.ops))
                                           else 0.0, prices=prices.setdefault((t, m, c, e), {}))
                   for layer in share.graph.layers}
        if key is not None:
            _BOUND_TIMINGS.put(key, timings)
    return _Variant(share.graph, timings, request.cluster, c, e, streaming_Bps, timing.accelerator.number_format,
                    dropout_s)


def unbuilt_evaluation(workload: str | Workload, accelerator: Accelerator, topology: str, reason: str) -> Evaluation:
    """The infeasible evaluation of a design no cluster can be built for (a system whose budget buys no whole
    ``topology`` unit): nothing is evaluated, ``cluster`` holds only ``n_devices`` 0 and the topology's name, and
    ``reason`` says why, so every face (search, env, Optuna objective, baselines) scores it as infeasible."""
    return Evaluation(workload=get_workload(workload).name, accelerator=accelerator.to_dict(),
                      cluster={"n_devices": 0, "name": topology}, feasible=False, reason=reason,
                      throughput_samples_s=0.0, tokens_s=0.0, mfu=0.0, area_mm2=accelerator.area_mm2,
                      peak_flops=accelerator.format_peak_flops, energy_per_sample_j=0.0, plan=None, memory_bytes={},
                      layer_timings={}, timings_s={}, ilp_solves=0, schedules=0)


def evaluate(workload: str | Workload, accelerator: Accelerator, cluster: Cluster | None = None, *,
             options: EvaluationOptions | None = None, **keywords: Any) -> Evaluation:
    """Best training throughput of ``workload`` on ``cluster`` accelerators of this architecture.

    What is searched is ``options`` (:class:`EvaluationOptions`; default: its defaults), its fields also taken as
    keywords (``evaluate(w, acc, cluster, plan=..., hbm_gb=80)``), which replace those of ``options`` when both
    are given.

    ``plan`` (a :class:`~phaze_env.plan_spec.PlanSpec`) pins what it sets (its context-parallel degree ``c``
    is 1 unless set; ``c=None`` searches ``context_parallels``, those that split the sequence into ``2c``
    equal chunks) — ``PlanSpec.parse("t8p8d1m1+sp+rc=selective")``
    evaluates exactly that plan (stage boundaries chosen by the DP); fields left ``None`` are searched.
    Without a plan the search is PHAZE's (:func:`~phaze_env.plan_spec.phaze_plan`): every tensor width in
    ``tensor_widths``, microbatch size in ``microbatch``, pipeline/data degrees and per-stage full recompute if
    ``recompute`` allows it; no sequence parallelism, ZeRO-1, interleaving or expert parallelism (``PlanSpec()`` searches the expert-parallel
    degree ``e`` of a mixture-of-experts model over the divisors of its expert count). ``hbm_gb`` (GiB, 2**30 bytes, as ``Accelerator.hbm_gb``)
    lists HBM capacities to try; ``None`` = the accelerator's own. Infeasible designs come back with
    ``feasible=False`` and the reason (for a pinned plan, the memory it would need); invalid arguments
    raise ``ValueError``/``TypeError``.
    """
    options = _options(options, keywords)
    request = _request(workload, accelerator, cluster, options)
    key = code_key(__name__, "evaluation", accelerator.to_dict(), *request.key_parts(), options.solver,
                   options.time_limit_s)
    if options.cache and (hit := _EVALUATIONS.get(key)) is not None:
        return hit if hit.from_cache else replace(hit, from_cache=True)
    timing = _Timing.fresh(accelerator, request.cluster, solver=options.solver, time_limit_s=options.time_limit_s,
                           cache=options.cache, causal=causal_attention(request.workload))
    result = _run(request, timing, bound_only=False)
    if options.cache and result.proven:  # an unproven answer is provisional: the next call solves again
        _EVALUATIONS.put(key, result)
    return result


def throughput_upper_bound(workload: str | Workload, accelerator: Accelerator, cluster: Cluster | None = None, *,
                           options: EvaluationOptions | None = None, calls: dict[str, int] | None = None,
                           **keywords: Any) -> float:
    """An upper bound on ``evaluate(...).throughput_samples_s`` without any ILP (0 when surely infeasible), for the
    same ``options`` and ``keywords`` as :func:`evaluate` (whose ``solver`` and ``time_limit_s`` it does not use).
    ``calls``: when given, ``calls["bound_dp_calls"]`` grows by the placement DP runs made (none for a cached
    bound)."""
    options = _options(options, keywords)
    request = _request(workload, accelerator, cluster, options)
    key = code_key(__name__, "bound", accelerator.to_dict(), *request.key_parts())
    if options.cache and (hit := _BOUNDS.get(key)) is not None:
        return hit
    timing = _Timing.fresh(accelerator, request.cluster, solver="cbc", time_limit_s=DEFAULT_TIME_LIMIT_S,
                           cache=options.cache, causal=causal_attention(request.workload))
    result = _run(request, timing, bound_only=True)
    if calls is not None:
        calls["bound_dp_calls"] = calls.get("bound_dp_calls", 0) + result.bound_dp_calls
    bound = result.throughput_samples_s * (1 + 1e-9) if result.feasible else 0.0
    if options.cache:
        _BOUNDS.put(key, bound)
    return bound


BREAKDOWN_LABELS = {"compute": "compute", "recompute": "recompute", "tp_comm": "TP comm", "cp_comm": "CP ring comm",
                    "ep_comm": "EP all-to-all", "p2p": "pipeline p2p", "zero_comm": "ZeRO comm",
                    "bubble": "pipeline bubble", "dp_allreduce": "DP sync", "optimizer": "optimizer step"}


def report(evaluation: Evaluation, preset: str) -> dict[str, Any]:
    """The CLI's summary of one evaluation as plain data (what ``--json`` prints)."""
    plan = evaluation.plan
    result = {"workload": evaluation.workload, "accelerator": preset, "cluster": evaluation.cluster,
              "feasible": evaluation.feasible, "reason": evaluation.reason, "proven": evaluation.proven,
              "worst_gap": evaluation.worst_gap, "unproven": list(evaluation.unproven),
              "throughput_bound_samples_s": evaluation.throughput_bound_samples_s}
    if evaluation.feasible:
        result.update(plan=plan.notation, stage_layers=[len(group) for group in plan.stage_layers],
                      throughput_samples_s=evaluation.throughput_samples_s, tokens_s=evaluation.tokens_s,
                      mfu=evaluation.mfu, mfu_basis=evaluation.mfu_basis, mfu_peak_flops_per_device=evaluation.peak_flops,
                      devices_used=plan.devices_used, time_per_batch_s=plan.time_per_batch_s,
                      time_breakdown_s=evaluation.time_breakdown_s, memory_bytes=evaluation.memory_bytes,
                      hbm_bytes=plan.hbm_bytes,
                      batch_split=uneven_batch_note(evaluation.cluster["global_batch"], plan.data_parallel,
                                                    plan.microbatch))
    return result


def _text(info: dict[str, Any], cluster: Cluster) -> str:
    if not info["feasible"]:
        return f"{info['workload']} on {cluster.n_devices} × {info['accelerator']} ({cluster.name}): infeasible — {info['reason']}"
    total = info["time_per_batch_s"]
    memory = info["memory_bytes"]
    lines = [
        f"{info['workload']} on {info['devices_used']} of {cluster.n_devices} × {info['accelerator']}, {cluster.describe()}",
        f"plan            {info['plan']}   (layers per stage: {', '.join(map(str, info['stage_layers']))})",
        f"throughput      {info['throughput_samples_s']:,.3f} samples/s · {info['tokens_s']:,.0f} tokens/s",
        f"MFU             {info['mfu']:.1%} {info['mfu_basis']}, {info['mfu_peak_flops_per_device'] / 1e12:,.1f} TFLOP/s "
        f"per {info['accelerator']} device (model FLOPs: the whole model's, no recompute)",
        f"time per batch  {total:.4g} s",
    ]
    if info["batch_split"]:
        lines.insert(2, f"batch split     {info['batch_split']}")
    for key, seconds in info["time_breakdown_s"].items():
        if key == "cp_comm" and PlanSpec.parse(info["plan"]).c == 1:  # no context parallelism, no ring
            continue
        if key == "ep_comm" and PlanSpec.parse(info["plan"]).e == 1:  # a dense model or e = 1: no all-to-all
            continue
        lines.append(f"  {BREAKDOWN_LABELS[key]:<15} {seconds:10.4g} s  {seconds / total:6.1%}")
    parts = ", ".join(f"{key.replace('_', ' ')} {memory[key] / GB_BYTES:.2f}"
                      for key in ("weights", "gradients", "optimizer", "zero_buffers", "activations"))
    lines.append(f"memory/device   {memory['total'] / GB_BYTES:.2f} GiB of {info['hbm_bytes'] / GB_BYTES:g} GiB ({parts} GiB)")
    if not info["proven"]:
        lines.append(f"NOT PROVEN      {len(info['unproven'])} layer schedule(s) stopped before their ILP proved them "
                     f"optimal (worst gap {info['worst_gap']:.2%}): the throughput is achieved, at most "
                     f"{info['throughput_bound_samples_s']:,.3f} samples/s is possible; rerun on an idle machine")
    return "\n".join(lines)


def _evaluate_with_progress(workload: str, accelerator: Accelerator, cluster: Cluster, plan: PlanSpec,
                            **options: Any) -> Evaluation:
    """:func:`evaluate` for the CLI, with progress on stderr when it is a terminal (stdout stays the report or the
    JSON): first tracing the model's (tensor width, microbatch) graphs the plan allows — the slow part of a cold
    run — then scheduling the layers and searching the plans variant by variant (:data:`PLAN_SEARCH_PROGRESS`;
    15 s for GPT-3 175B on 4,096 A100), each with a total and a time left."""
    from phaze_env.cli import console, progress_display
    from phaze_env.workloads import prepare_graphs

    err = console(stderr=True)
    if not err.is_terminal:
        return evaluate(workload, accelerator, cluster, plan=plan, **options)
    widths, microbatches = plan.narrow(TENSOR_WIDTHS, DEFAULT_MICROBATCHES)
    widths, _ = searched_degrees(get_workload(workload), widths, cluster.n_devices, plan.e)
    with progress_display(err) as bar:
        tracing = bar.add_task(f"{workload}: tracing the model", total=len(widths) * len(microbatches))
        prepare_graphs(workload, widths, microbatches, seq_len=options.get("seq_len"),
                       done=lambda done, total: bar.update(tracing, completed=done, description=(
                           f"{workload}: tracing the model · {done} of {total} (tensor width, microbatch) graphs")))
        searching = bar.add_task(f"{workload}: scheduling the layers and searching the plans", total=None)

        def reached(variant: int, variants: int) -> None:
            bar.update(searching, completed=variant - 1, total=variants, description=(
                f"{workload}: scheduling the layers and searching the plans · variant {variant} of {variants}"))

        token = PLAN_SEARCH_PROGRESS.set(reached)
        try:
            evaluation = evaluate(workload, accelerator, cluster, plan=plan, **options)
        finally:
            PLAN_SEARCH_PROGRESS.reset(token)
        variants = bar.tasks[searching].total or 1  # a variant with t·c above the devices is skipped, never reached
        bar.update(searching, completed=variants, total=variants)
        return evaluation


def main(argv: list[str] | None = None) -> int:
    """``python -m phaze_env.evaluate``: throughput, MFU, time breakdown and memory of one plan (or the best)."""
    import argparse
    import json

    from phaze_env.cli import OneLineParser, float_list, positive_int, print_output
    from phaze_env.cluster import cluster_names, get_cluster
    from phaze_env.hardware import get_preset, preset_names
    from phaze_env.plan_spec import RECOMPUTE_CHOICES
    from phaze_env.stacks import get_stack, stack_names

    parser = OneLineParser(prog="python -m phaze_env.evaluate",
                           description="Evaluate a training plan (or find the best one) for a workload on a cluster.")
    parser.add_argument("--workload", default="gpt3-175b", help="model name (default gpt3-175b)")
    parser.add_argument("--preset", default="a100", help=f"accelerator: {', '.join(preset_names())} (default a100)")
    parser.add_argument("--cluster", default="dgx-a100", help=f"system: {', '.join(cluster_names())} (default dgx-a100)")
    parser.add_argument("--devices", type=positive_int, default=64, help="number of accelerators (default 64)")
    parser.add_argument("--batch", type=positive_int, default=64, help="global batch in sequences (default 64)")
    parser.add_argument("--slices", type=positive_int, default=1, help="TPU slices joined by the data-centre network "
                        "(tpuv4-pod: Cloud TPU Multislice; default 1)")
    parser.add_argument("--seq", type=positive_int, default=None, help="sequence length (default: the workload's)")
    parser.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default="adam", help="default adam (mixed precision)")
    parser.add_argument("--plan", default="", help="pinned plan, e.g. t8p8d1m1, t8p8d1m1v3+sp+rc=selective or, for a "
                        "mixture of experts, t2p4d8e8m1 (e: expert parallel; absent = 1), or t1p1d128m2+zero3+shard8 (hybrid sharding, "
                        "FSDP's HSDP: ZeRO-3 within groups of 8 replicas) (absent degrees are searched; "
                        "default: none pinned, the DP chooses every knob)")
    parser.add_argument("--recompute", choices=RECOMPUTE_CHOICES, default=None, help="recompute mode (default auto)")
    parser.add_argument("--sp", action=argparse.BooleanOptionalAction, default=None,
                        help="sequence parallelism (default: the DP chooses; off if --plan is given without +sp)")
    parser.add_argument("--zero", choices=("0", "1", "2", "3", "auto"), default=None,
                        help="ZeRO stage over the data-parallel group: 1 optimizer state, 2 + gradients, 3 + weights "
                             "(FSDP) (default: the DP chooses; 0 if --plan is given without +zero1/2/3)")
    parser.add_argument("--interleave", type=positive_int, default=None, help="virtual stages per device (default 1)")
    parser.add_argument("--hbm-gb", type=float_list, default=None, help="HBM capacity in GiB (default: the preset's)")
    parser.add_argument("--framework-efficiency", type=float, default=None, metavar="F",
                        help="fraction of the accelerator model's speed the software reaches, in (0, 1] "
                             "(default: the cluster preset's; dgx-a100 0.878, fitted to Megatron-LM, others 1)")
    parser.add_argument("--stack", default=None, help=f"training-stack profile: {', '.join(stack_names())} (its fitted "
                        "efficiency on the --preset chip and its pipeline structure; default: the cluster preset's own settings)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (default: a text report)")
    args = parser.parse_args(argv)
    try:
        accelerator = get_preset(args.preset)
        software = {} if args.framework_efficiency is None else {"framework_efficiency": args.framework_efficiency}
        slices = {"slices": args.slices} if args.slices > 1 else {}
        cluster = get_cluster(args.cluster, args.devices, global_batch=args.batch, optimizer=args.optimizer, **slices)
        if args.stack is not None:  # its efficiency fitted on this chip, unless --framework-efficiency says otherwise
            stack = get_stack(args.stack)
            if error := stack.workload_error(get_workload(args.workload)):
                raise ValueError(error)
            cluster = stack.structure(cluster) if software else stack.apply(cluster, args.preset)
        cluster = cluster.replace(**software)
        # With --plan, what its string leaves out is off (the notation's rule); without, the DP chooses.
        spec = PlanSpec.parse(args.plan) if args.plan else PlanSpec()
        if args.plan and (error := expert_plan_error(spec, get_workload(args.workload), explicit_auto=True)):
            raise ValueError(f"plan {args.plan}: {error}")
        overrides = {"recompute": args.recompute, "sequence_parallel": args.sp, "interleave": args.interleave}
        spec = replace(spec, **{key: value for key, value in overrides.items() if value is not None})
        if args.zero is not None:
            spec = replace(spec, zero=None if args.zero == "auto" else int(args.zero))
        evaluation = _evaluate_with_progress(args.workload, accelerator, cluster, spec, hbm_gb=args.hbm_gb,
                                             seq_len=args.seq)
    except (KeyError, ValueError, TypeError) as exc:
        parser.error(exc.args[0] if exc.args else str(exc))
    info = report(evaluation, args.preset)
    print_output(json.dumps(info, indent=2) if args.json else _text(info, cluster))
    return 0 if evaluation.feasible else 1


__all__ = ["Cluster", "Evaluation", "EvaluationOptions", "LayerTiming", "PlanSpec", "evaluate", "expert_plan_error",
           "throughput_upper_bound", "unbuilt_evaluation", "valid_tensor_widths"]


if __name__ == "__main__":
    raise SystemExit(main())
