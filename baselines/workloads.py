"""The workloads the strategy studies and trainers accept: every built-in one, plus ``tiny-gpt2``.

``tiny-gpt2`` is a 4-layer GPT-2 (hidden 128, 4 heads, sequence 64) that traces and schedules in well
under a second: the quick mode of ``experiments.compare_strategies``, smoke runs of ``baselines.train``
and the tests use it.
"""

from __future__ import annotations

from phaze_env.workloads import Workload, custom_workload, get_workload

TINY_WORKLOAD = "tiny-gpt2"


def tiny_workload() -> Workload:
    return custom_workload(TINY_WORKLOAD, "GPT2Config", "GPT2LMHeadModel", 64, n_embd=128, n_layer=4, n_head=4,
                           n_inner=512, vocab_size=1000, n_positions=64)


def resolve_workload(name: str) -> Workload:
    """A built-in workload by name, or ``tiny-gpt2``; unknown names raise ``ValueError``."""
    return tiny_workload() if name == TINY_WORKLOAD else get_workload(name)
