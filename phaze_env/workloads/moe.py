"""Static-shape stand-ins for Hugging Face sparse mixture-of-experts blocks, so that MoE models trace on meta.

A Hugging Face MoE block routes each token to its top-k experts and loops over the experts that were hit,
gathering a data-dependent number of tokens for each: its graph depends on the routing, and on the meta
device there is no routing to follow. For the trace, :func:`replace_sparse_moe_blocks` swaps each known
block for :class:`StaticSparseMoe`, which holds the *same* parameter objects under the same names (so the
parameter count and names are the HF model's) and does the same work under a known load:

* the router: a linear to the expert logits, softmax, top-k (renormalised when the family does, scaled by
  DeepSeek's ``routed_scaling_factor`` when it is not 1) — DeepSeek-V3's sigmoid, group-limited router instead
  (:class:`GroupLimitedSigmoidRouter`);
* the routed experts as one batched matmul over the experts (batch dimension = experts): every expert
  gathers ``C = expert_capacity(tokens, top_k, experts, factor)`` tokens with a static index, runs its
  gated MLP, scales by the routing weights and scatter-adds back (``index_add``);
* the family's shared experts unchanged.

The router's (and Qwen2-MoE's shared-expert gate's) and the routed experts' operators are tagged (``moe_role``
of ``"router"`` / ``"expert"`` in the trace) so that expert parallelism can later shard the expert work; the
graph size does not grow with the number of experts. At tensor width t > 1 the routers stay replicated and
each expert's FFN is split Megatron-style (see ``docs/moe.md``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def expert_capacity(tokens: int, top_k: int, experts: int, factor: float) -> int:
    """Tokens each expert processes: ``ceil(factor · tokens · top_k / experts)`` (uniform load at factor 1)."""
    return max(1, math.ceil(factor * tokens * top_k / experts))


class ExpertRouter(nn.Module):
    """Router linear, softmax over the experts and top-k: the routing weights of each token's k experts."""

    moe_role = "router"

    def __init__(self, weight: nn.Parameter, top_k: int, normalise: bool, scale: float = 1.0):
        super().__init__()
        self.weight = weight
        self.top_k, self.normalise, self.scale = top_k, normalise, scale

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = F.linear(hidden.to(self.weight.dtype), self.weight)
        weights, _ = torch.topk(torch.softmax(logits.float(), dim=-1), self.top_k, dim=-1)
        if self.normalise:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        if self.scale != 1:
            weights = weights * self.scale
        return weights.to(hidden.dtype)


class GroupLimitedSigmoidRouter(nn.Module):
    """DeepSeek-V3's router (arXiv:2412.19437 §2.1.2, HF ``DeepseekV3TopkRouter``): sigmoid affinities, the bias-corrected
    scores choose (auxiliary-loss-free balancing), experts grouped ``n_group`` ways with each group scored by its top
    two, the top ``topk_group`` groups kept (node-limited routing when the groups are nodes), top-k over their experts;
    the chosen affinities are normalised and scaled by ``routed_scaling_factor`` (2.5). All of it is (tokens, experts)
    vector work; which experts win does not change the static load the experts are priced at."""

    moe_role = "router"

    def __init__(self, weight: nn.Parameter, bias: torch.Tensor, top_k: int, groups: int, top_groups: int,
                 normalise: bool, scale: float):
        super().__init__()
        self.weight = weight
        self.register_buffer("bias", bias, persistent=False)
        self.top_k, self.groups, self.top_groups, self.normalise, self.scale = top_k, groups, top_groups, normalise, scale

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        scores = torch.sigmoid(F.linear(hidden.float(), self.weight.float()))
        tokens, experts = scores.shape
        choice = (scores + self.bias).view(tokens, self.groups, experts // self.groups)
        group_scores = choice.topk(2, dim=-1)[0].sum(dim=-1)
        kept = torch.topk(group_scores, self.top_groups, dim=-1)[1]
        # torch.zeros, not zeros_like: a buffer derived from no activation is not traced as work
        mask = torch.zeros(tokens, self.groups, dtype=choice.dtype, device=hidden.device).scatter(1, kept, 1.0)
        # the dropped groups' experts pushed out of the top-k (HF fills them with −inf; an offset is the same choice)
        choice = (choice + (mask.unsqueeze(-1) - 1.0) * 1e9).view(tokens, experts)
        weights = scores.gather(1, torch.topk(choice, self.top_k, dim=-1)[1])
        if self.normalise:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return (weights * self.scale).to(hidden.dtype)


class SharedExpertGate(nn.Module):
    """Qwen2-MoE's per-token sigmoid gate on the shared expert: a router-like linear to one output."""

    moe_role = "router"

    def __init__(self, weight: nn.Parameter):
        super().__init__()
        self.weight = weight

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(F.linear(hidden, self.weight))


class StaticExperts(nn.Module):
    """All routed experts as batched matmuls over the expert dimension, each on ``C`` tokens.

    ``gate_up_proj`` is ``(experts, 2·ffn, hidden)`` and ``down_proj`` ``(experts, hidden, ffn)``, the layout of
    the Hugging Face ``*Experts`` modules (transformers 5). Which tokens an expert takes is a fixed index, not
    the router's choice: the work is that of a load where every expert gets ``C`` tokens.
    """

    moe_role = "expert"

    def __init__(self, gate_up_proj: nn.Parameter, down_proj: nn.Parameter, act_fn: nn.Module, load_factor: float):
        super().__init__()
        self.gate_up_proj, self.down_proj, self.act_fn = gate_up_proj, down_proj, act_fn
        self.load_factor = load_factor

    def forward(self, hidden: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        tokens, width = hidden.shape
        experts, top_k = self.gate_up_proj.shape[0], weights.shape[-1]
        capacity = expert_capacity(tokens, top_k, experts, self.load_factor)
        slots = torch.arange(experts * capacity, device=hidden.device)
        token_index = slots % tokens
        dispatched = hidden.index_select(0, token_index).view(experts, capacity, width)
        gate, up = torch.bmm(dispatched, self.gate_up_proj.transpose(1, 2)).chunk(2, dim=-1)
        out = torch.bmm(self.act_fn(gate) * up, self.down_proj.transpose(1, 2))
        routing = weights.reshape(-1).index_select(0, token_index * top_k + slots % top_k)
        out = out * routing.view(experts, capacity, 1)
        # torch.zeros, not zeros_like: a buffer derived from no activation is not traced as work
        combined = torch.zeros(tokens, width, dtype=out.dtype, device=hidden.device)
        return combined.index_add(0, token_index, out.view(experts * capacity, width))


class StaticSparseMoe(nn.Module):
    """A sparse-MoE block with static shapes: router, routed experts, and the family's shared experts."""

    def __init__(self, router: ExpertRouter, experts: StaticExperts, shared: tuple[str, nn.Module] | None = None,
                 shared_gate: SharedExpertGate | None = None):
        super().__init__()
        self.gate, self.experts = router, experts
        self.shared_name = shared[0] if shared else ""
        if shared:  # under the family's name: the same parameter names as HF
            self.add_module(*shared)
        if shared_gate is not None:
            self.shared_expert_gate = shared_gate

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        shape = hidden.shape
        flat = hidden.reshape(-1, shape[-1])
        out = self.experts(flat, self.gate(flat))
        if self.shared_name:
            shared = getattr(self, self.shared_name)(flat)
            if hasattr(self, "shared_expert_gate"):
                shared = self.shared_expert_gate(flat) * shared
            out = out + shared
        return out.view(shape)


def _static(block: nn.Module, config, load_factor: float) -> StaticSparseMoe:
    """The static stand-in of one HF sparse-MoE block (the family is read from the block's class name)."""
    family = type(block).__name__
    gate, experts = block.gate, block.experts
    shared, shared_gate, scale = None, None, 1.0
    if family == "MixtralSparseMoeBlock":
        normalise = True
    elif family in ("Qwen3MoeSparseMoeBlock", "OlmoeSparseMoeBlock"):
        normalise = bool(config.norm_topk_prob)
    elif family == "Qwen2MoeSparseMoeBlock":
        normalise = bool(config.norm_topk_prob)
        shared, shared_gate = ("shared_expert", block.shared_expert), SharedExpertGate(block.shared_expert_gate.weight)
    elif family == "DeepseekV2Moe":
        if gate.topk_method != "greedy":  # group-limited routing adds a per-group top-k not modelled here
            raise ValueError(f"no static stand-in for DeepSeek-V2 routing {gate.topk_method!r} (only 'greedy')")
        normalise, scale = False, float(gate.routed_scaling_factor)  # HF's DeepseekV2TopkRouter never renormalises
        shared = ("shared_experts", block.shared_experts)
    elif family == "DeepseekV3MoE":
        router = GroupLimitedSigmoidRouter(gate.weight, gate.e_score_correction_bias, gate.top_k, gate.num_group,
                                           gate.topk_group, bool(gate.norm_topk_prob), float(gate.routed_scaling_factor))
        static_experts = StaticExperts(experts.gate_up_proj, experts.down_proj, experts.act_fn, load_factor)
        return StaticSparseMoe(router, static_experts, ("shared_experts", block.shared_experts))
    else:
        raise ValueError(f"no static stand-in for the MoE block {family}")
    router = ExpertRouter(gate.weight, gate.top_k, normalise, scale)
    static_experts = StaticExperts(experts.gate_up_proj, experts.down_proj, experts.act_fn, load_factor)
    return StaticSparseMoe(router, static_experts, shared, shared_gate)


SPARSE_MOE_BLOCKS = ("MixtralSparseMoeBlock", "Qwen2MoeSparseMoeBlock", "Qwen3MoeSparseMoeBlock", "OlmoeSparseMoeBlock",
                     "DeepseekV2Moe", "DeepseekV3MoE")


def replace_sparse_moe_blocks(model: nn.Module, load_factor: float) -> None:
    """Swap every known HF sparse-MoE block of ``model`` for its static stand-in."""
    targets = [(name, module) for name, module in model.named_modules() if type(module).__name__ in SPARSE_MOE_BLOCKS]
    for name, module in targets:
        parent_name, _, attribute = name.rpartition(".")
        setattr(model.get_submodule(parent_name), attribute, _static(module, model.config, load_factor))


MOE_ROLES = {f"{cls.__module__}.{cls.__qualname__}": cls.moe_role
             for cls in (ExpertRouter, GroupLimitedSigmoidRouter, SharedExpertGate, StaticExperts)}


def moe_role_of(module_types: list) -> str:
    """``"router"``, ``"expert"`` or ``""``: the MoE part an operator belongs to, from the classes of its module stack
    (``torch.export`` records them as qualified names)."""
    names = (t if isinstance(t, str) else f"{t.__module__}.{t.__qualname__}" for t in module_types)
    return next((MOE_ROLES[n] for n in names if n in MOE_ROLES), "")
