"""DeepSeek-V2 multi-head latent attention (MLA) made traceable: a real-valued rotary, for the trace only.

Hugging Face's DeepSeek-V2 rotates the 64 rotary dimensions of the queries and keys as complex numbers
(``torch.polar`` for the frequencies, ``view_as_complex`` and a complex product). ``torch.export`` follows
them on meta, but a complex tensor is not floating-point, so the tracer would drop the rotated halves from
the data path. :func:`real_valued_rotary` swaps, while the model is exported, the rotary embedding for one
that returns the (cos, sin) pairs and the rotation for its real form on interleaved pairs:
``(x0·cos − x1·sin, x0·sin + x1·cos)`` — four multiplies and two adds per pair, the six real FLOPs of a
complex product, on the same shapes. It also assembles the keys with ``torch.cat`` where HF writes both
halves into a ``new_empty`` buffer with ``copy_``: the same copy, as one operator the tracer prices.
Parameters are untouched (the rotary embedding has none).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


class RealRotaryEmbedding(nn.Module):
    """The frequencies of HF's ``DeepseekV2RotaryEmbedding`` as real ``(…, dim/2, 2)`` pairs of (cos, sin)."""

    def __init__(self, inv_freq: torch.Tensor, scaling: float):
        super().__init__()
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.scaling = scaling

    def forward(self, hidden: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        angles = position_ids[..., None].float() * self.inv_freq.to(device=hidden.device, dtype=torch.float)
        return torch.stack((angles.cos(), angles.sin()), dim=-1) * self.scaling


def rotate_pairs(x: torch.Tensor, cos_sin: torch.Tensor) -> torch.Tensor:
    """``x`` (…, heads, seq, dim) rotated pairwise by ``cos_sin`` (batch, seq, dim/2, 2): HF's complex product."""
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    x0, x1 = pairs[..., 0], pairs[..., 1]
    cos, sin = cos_sin[..., 0].unsqueeze(1), cos_sin[..., 1].unsqueeze(1)
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2).type_as(x)


def _apply_rotary(xq: torch.Tensor, xk: torch.Tensor, cos_sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return rotate_pairs(xq, cos_sin), rotate_pairs(xk, cos_sin)


def _expand_kv(self, kv_nope: torch.Tensor, k_rot: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """HF's ``DeepseekV2Attention.expand_kv`` with the key halves joined by ``torch.cat``."""
    batch, _, seq, _ = kv_nope.shape
    kv = self.kv_b_proj(kv_nope).view(batch, seq, -1, self.qk_nope_head_dim + self.v_head_dim).transpose(1, 2)
    k_nope, value = torch.split(kv, [self.qk_nope_head_dim, self.v_head_dim], dim=-1)
    return torch.cat((k_nope, k_rot.expand(-1, k_nope.shape[1], -1, -1)), dim=-1), value


@contextlib.contextmanager
def real_valued_rotary(model: nn.Module) -> Iterator[None]:
    """While active, ``model``'s DeepSeek-V2 attention runs the real-valued rotary (no-op for other models); a
    DeepSeek-V3 attention, whose rotary HF already writes in real arithmetic, only joins its key halves with
    ``torch.cat`` (the same :func:`_expand_kv`)."""
    rotary = getattr(getattr(model, "model", None), "rotary_emb", None)
    if type(rotary).__name__ == "DeepseekV3RotaryEmbedding":
        from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf3

        saved = hf3.DeepseekV3Attention.expand_kv
        hf3.DeepseekV3Attention.expand_kv = _expand_kv
        try:
            yield
        finally:
            hf3.DeepseekV3Attention.expand_kv = saved
        return
    if type(rotary).__name__ != "DeepseekV2RotaryEmbedding":
        yield
        return
    from transformers.models.deepseek_v2 import modeling_deepseek_v2 as hf

    saved = hf.apply_rotary_emb, hf.DeepseekV2Attention.expand_kv
    model.model.rotary_emb = RealRotaryEmbedding(rotary.inv_freq, rotary.attention_scaling)
    hf.apply_rotary_emb, hf.DeepseekV2Attention.expand_kv = _apply_rotary, _expand_kv
    try:
        yield
    finally:
        hf.apply_rotary_emb, hf.DeepseekV2Attention.expand_kv = saved
        model.model.rotary_emb = rotary
