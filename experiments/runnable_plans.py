"""The free plan search stays inside what the stack runs: ``python -m experiments.runnable_plans``.

GPT-3 175B on 4,096 A100 (``dgx-a100``, the ``megatron-lm`` stack fitted on A100), global batch 1,536 sequences of
2,048 tokens (Narayanan et al. 2021's GPT-3 batch), Adam, every plan knob left to the DP: t, p, d, microbatch, the
interleaving ``v``, sequence parallelism, the ZeRO stage and per-stage recompute. It prints the free optimum, checks
that its plan is runnable under the stack's :class:`~phaze_env.plan_spec.PlanRules` (each stage ``L/p`` layers, ``v``
dividing them, ``p ≥ 3`` when interleaved, a ZeRO stage the stack has), then pins each ``v`` and each ZeRO stage in
turn: none may beat the free search (it searches all of them), and the ones the stack cannot run come back
infeasible with the reason.
"""

from __future__ import annotations

import time

from phaze_env.cli import OneLineParser
from phaze_env.cluster import get_cluster
from phaze_env.evaluate import Evaluation, evaluate
from phaze_env.hardware.accelerator import get_preset
from phaze_env.plan_spec import PlanSpec
from phaze_env.stacks import get_stack
from phaze_env.workloads.registry import get_workload

WORKLOAD = "gpt3-175b"
DEVICES = 4096
GLOBAL_BATCH = 1536
FREE = PlanSpec(interleave=None, recompute="auto", sequence_parallel=None, zero=None, e=1)
PINNED_INTERLEAVES = (1, 2, 3, 4, 6, 8)


def instance():
    """(accelerator, cluster) of the instance."""
    cluster = get_cluster("dgx-a100", DEVICES, global_batch=GLOBAL_BATCH, optimizer="adam")
    return get_preset("a100"), get_stack("megatron-lm").apply(cluster, "a100")


def run(plan: PlanSpec) -> Evaluation:
    accelerator, cluster = instance()
    return evaluate(WORKLOAD, accelerator, cluster, plan=plan, microbatch=(1, 2, 4), tensor_widths=(1, 2, 4, 8))


def runnable_reason(evaluation: Evaluation) -> str:
    """Why the evaluation's plan breaks the stack's rules ("" when it does not)."""
    plan, rules = evaluation.plan, instance()[1].stack.plan_rules
    blocks = get_workload(WORKLOAD).num_layers  # the chain: pre (0), the transformer layers, post
    layers = [sum(1 for layer in stage if 0 < layer <= blocks) for stage in plan.stage_layers]
    v, p = plan.interleave, plan.pipeline_stages
    if rules.uniform_stages and len(set(layers)) > 1:
        return f"stages hold {layers} layers, not L/p each"
    if any(count % v for count in layers):
        return f"stages of {layers} layers do not split into v = {v} chunks"
    if v > 1 and p < rules.interleave_min_stages:
        return f"v = {v} with p = {p} < {rules.interleave_min_stages}"
    if plan.zero not in rules.zero_stages:
        return f"ZeRO-{plan.zero} is not one of the stack's {rules.zero_stages}"
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.runnable_plans", description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    started = time.perf_counter()
    free = run(FREE)
    batch_s = GLOBAL_BATCH / free.throughput_samples_s
    reason = runnable_reason(free)
    print(f"{WORKLOAD} on {DEVICES} A100 (megatron-lm), batch {GLOBAL_BATCH}: free optimum {free.plan.notation} "
          f"{batch_s:.3f} s per batch ({'runnable' if not reason else 'NOT RUNNABLE: ' + reason}; "
          f"exact: {'proven' if free.proven else 'NOT proven'}; {time.perf_counter() - started:.0f} s)")
    worst = 0
    pins = [("v", v, PlanSpec(**{**FREE.to_dict(), "interleave": v})) for v in PINNED_INTERLEAVES]
    pins += [("zero", z, PlanSpec(**{**FREE.to_dict(), "zero": z})) for z in (0, 1, 2)]
    for knob, value, plan in pins:
        try:
            pinned = run(plan)
        except ValueError as exc:  # a knob the stack cannot run at all
            print(f"  {knob} = {value} pinned: refused ({exc})")
            continue
        if not pinned.feasible:
            print(f"  {knob} = {value} pinned: infeasible ({pinned.reason})")
            continue
        pinned_s = GLOBAL_BATCH / pinned.throughput_samples_s
        beats = pinned_s < batch_s * (1 - 1e-9)
        worst = max(worst, int(beats))
        print(f"  {knob} = {value} pinned: {pinned.plan.notation} {pinned_s:.3f} s per batch "
              f"({pinned_s / batch_s - 1:+.2%} vs free){'  <-- BEATS THE FREE SEARCH' if beats else ''}")
    return 1 if reason or worst else 0


if __name__ == "__main__":
    raise SystemExit(main())
