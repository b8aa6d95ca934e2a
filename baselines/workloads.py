"""The workloads the strategy studies and trainers accept: every built-in one, plus the benchmark tasks' small
models (:func:`phaze_env.tasks.tiny_workloads`: ``tiny-gpt2``, ``tiny-llama``, ``tiny-mixtral``, ``tiny-mixtral-e4``).

``tiny-gpt2`` is a 4-layer GPT-2 (hidden 128, 4 heads, sequence 64) that traces and schedules in well
under a second: the quick mode of ``experiments.compare_strategies``, smoke runs of ``baselines.train``
and the tests use it.
"""

from __future__ import annotations

from phaze_env.tasks import tiny_workloads
from phaze_env.workloads import Workload, get_workload

TINY_WORKLOAD = "tiny-gpt2"


def tiny_workload() -> Workload:
    return tiny_workloads()[TINY_WORKLOAD]


def resolve_workload(name: str) -> Workload:
    """A built-in workload by name, or one of the tasks' small models; unknown names raise ``ValueError``."""
    return tiny_workloads().get(name) or get_workload(name)
