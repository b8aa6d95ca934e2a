"""Activation stash per layer against Korthikanti et al. 2022 (eq. 1 and 2) for GPT-3 175B.

The differences are the deliberate ones documented next to ``SAVED_FOR_BACKWARD`` in
:mod:`phaze_env.workloads.trace` (eager HF GPT-2: unfused tanh-GELU, scores kept by the scale division, no
dropout); the test holds the byte counts documented there.
"""

import pytest

from phaze_env.workloads import model_graph

S, B, H, A = 2048, 1, 12288, 96  # GPT-3 175B: sequence, microbatch, hidden, heads
SBH = S * B * H


def korthikanti_bytes(t: int) -> float:
    if t == 1:
        return SBH * (34 + 5 * A * S / H)  # eq. 1
    return SBH * (10 + 24 / t + 5 * A * S / (H * t))  # eq. 2


def block_stash_bytes(t: int) -> int:
    graph = model_graph("gpt3-175b", microbatch=B, tensor_width=t)
    return next(layer for layer in graph.layers if layer.repeat > 1).activation_stash_bytes


def test_stash_at_t1_is_eq1_plus_the_documented_eager_differences():
    gelu_intermediates = (56 - 16) * SBH  # +1,006.6 MB
    attention = -A * S * S * B  # −402.7 MB: scores kept instead of dropout mask + output
    dropout_masks = -2 * SBH  # −50.3 MB
    assert block_stash_bytes(1) == pytest.approx(korthikanti_bytes(1) + gelu_intermediates + attention + dropout_masks)
    assert block_stash_bytes(1) / korthikanti_bytes(1) == pytest.approx(1.193, abs=0.001)


def test_stash_at_t8_is_within_5_percent_of_eq2():
    assert block_stash_bytes(8) == pytest.approx(korthikanti_bytes(8), rel=0.05)
