"""The unit of work the search sends to an executor: evaluate one architecture on one workload."""

from __future__ import annotations

from typing import Any

from phaze_env.evaluate import Cluster, evaluate, throughput_upper_bound
from phaze_env.hardware import Accelerator
from phaze_env.plan_spec import PlanSpec


def evaluate_design(task: dict[str, Any]) -> dict[str, Any]:
    """``task``: workload, accelerator (dict), cluster (dict), knob lists, solver settings and an optional
    ``prune_below``: when the ILP-free placement bound cannot beat it, the design is pruned unevaluated; that
    bound is taken over ``bound_knobs`` (tensor widths and microbatch sizes) when given: the variants whose
    first bound exceeds ``prune_below``, the others cannot beat it (their best first bound,
    ``other_variants_bound``, keeps the recorded bound one on the whole design). ``plan`` (a :class:`PlanSpec` as
    a dict, or None for PHAZE's plan space) is what every evaluation searches. The result counts the placement DP
    runs this call made: ``dp_calls`` on scheduled layer latencies, ``bound_dp_calls`` on lower bounds (a pruned
    design made only the latter; a cached bound or evaluation none)."""
    accelerator = Accelerator.from_dict(task["accelerator"])
    cluster = Cluster.from_dict(task["cluster"])
    knobs = dict(microbatch=task["microbatch"], recompute=task["recompute"], hbm_gb=task["hbm_gb"],
                 tensor_widths=task["tensor_widths"], seq_len=task["seq_len"],
                 plan=None if task.get("plan") is None else PlanSpec(**task["plan"]))
    prune_below = task.get("prune_below")
    calls = {"dp_calls": 0, "bound_dp_calls": 0}  # the placement DP runs made here (none for a cached answer)
    if prune_below is not None:
        bound = max(throughput_upper_bound(task["workload"], accelerator, cluster, calls=calls,
                                           **{**knobs, **task.get("bound_knobs", {})}),
                    task.get("other_variants_bound", 0.0))  # still a bound on the whole design
        if bound <= prune_below:
            return {"status": "pruned", "bound": bound, "evaluation": None, **calls}
    evaluation = evaluate(task["workload"], accelerator, cluster, solver=task["solver"],
                          time_limit_s=task["time_limit_s"], **knobs)
    if not evaluation.from_cache:
        calls["dp_calls"] += evaluation.dp_calls
        calls["bound_dp_calls"] += evaluation.bound_dp_calls
    return {"status": "evaluated", "bound": None, "evaluation": evaluation.to_dict(), **calls}
