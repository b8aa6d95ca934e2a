"""The record of a placement search: the plan it found, with every number recomputed from the costs the search
compared (:func:`plan_record`), and the reasons it found none, before any DP (:func:`obviously_infeasible`) or after
(:func:`no_fit_reason`, with the memory a pinned plan would need: :func:`least_memory`)."""

from __future__ import annotations

import numpy as np

from phaze_env.placement.candidate_costs import CandidateCosts
from phaze_env.placement.candidates import Shape
from phaze_env.placement.inputs import (LayerArrays, Settings, dualpipe_mirror, microbatches_per_replica,
                                        parameter_copies)
from phaze_env.placement.pair_dp import PairDP
from phaze_env.placement.plan import Plan, infeasible
from phaze_env.placement.rules import RunnableShapes
from phaze_env.placement.stage_costs import layer_stash_bytes
from phaze_env.placement.suffix_dp import finish
from phaze_env.plan_spec import PlanSpec


def infeasible_plan(settings: Settings, reason: str) -> Plan:
    """An infeasible plan of this search's tensor width, microbatch and HBM, saying why."""
    s = settings
    return infeasible(reason, tensor_width=s.tensor_width, microbatch=s.microbatch, hbm_bytes=s.hbm_bytes)


def obviously_infeasible(settings: Settings, layers: LayerArrays, max_stages: int, loosest_state: float) -> str:
    """Why no plan can exist, seen before any DP (the devices, the pinned plan, a layer alone too large for the HBM
    at the loosest state ``loosest_state``); ``""`` when none of these holds."""
    s = settings
    plan = s.plan
    if s.replica_devices > s.n_devices:
        return (f"tensor width {s.tensor_width} × context parallel {s.context_parallel} exceeds the "
                f"{s.n_devices} devices")
    if plan.devices is not None and plan.devices != s.n_devices:
        return f"plan {plan} uses t·c·p·d = {plan.devices} devices, the cluster has {s.n_devices}"
    used = s.replica_devices * (plan.p or 1) * (plan.d or 1)
    if used > s.n_devices:
        return f"plan {plan} needs at least {used} devices, the cluster has {s.n_devices}"
    if plan.p is not None and plan.p > max_stages:
        return f"plan {plan} has {plan.p} pipeline stages but the model has only {max_stages} layers"
    e = s.expert_parallel
    if plan.d is not None and not s.expert_fits(plan.d):
        if s.folded_experts:
            return (f"plan {plan}: expert-parallel degree e={e} does not divide the t·c·d = "
                    f"{s.expert_ranks(plan.d)} ranks of a stage the folded expert grid is carved from")
        return f"plan {plan}: expert-parallel degree e={e} does not divide the data-parallel degree d={plan.d}"
    ranks = s.n_devices // (s.replica_devices * (plan.p or 1)) * (s.replica_devices if s.folded_experts else 1)
    if e > ranks:
        kind = "ranks of a stage" if s.folded_experts else "data-parallel ranks"
        return (f"expert-parallel degree e={e} exceeds the {ranks} {kind} of {s.n_devices} devices at "
                f"tensor width {s.tensor_width}" + (f", context parallel {s.context_parallel}" if s.context_parallel > 1
                                                    else "") + (f" and {plan.p} pipeline stages" if plan.p else ""))
    # Each layer's smallest footprint: the loosest state and one unit of its lightest mode.
    state = layers.param_bytes * loosest_state
    lightest = np.min([layer_stash_bytes(s, layers, mode) for mode in s.plan.recompute_modes], axis=0) + state
    worst = int(np.argmax(lightest - s.hbm_bytes))
    if lightest[worst] > s.hbm_bytes:
        return (f"layer {worst} alone needs {lightest[worst] / 2**30:.3g} GiB (weights, gradients, "
                f"{s.cluster.setup.optimizer} state and one microbatch of activations) > {s.hbm_bytes / 2**30:.3g} GiB "
                f"of HBM at tensor width {s.tensor_width}")
    return ""


def no_fit_reason(costing: CandidateCosts, rules: RunnableShapes, max_stages: int) -> str:
    """Why a search found no plan that fits (every shape solved or bounded out): a pinned plan's broken rule or the
    memory its best partition needs, else the devices and the HBM that no pipeline of ``max_stages`` fits."""
    s, plan = costing.settings, costing.settings.plan
    if plan.p is not None and plan.d is not None:
        m_r = microbatches_per_replica(s.global_batch, plan.d, s.microbatch)
        v = plan.interleave or 1
        broken = rules.broken_rule(plan.p, m_r, v, plan.d)
        if broken:
            return f"plan {plan}: {broken}"
        zeros = [zero if s.weight_replicas(plan.d) > 1 else 0 for zero in s.zero_stages]
        need = min(least_memory(costing, rules, Shape(plan.d, plan.p, m_r, v, zero, s.cluster.stack.pipeline_schedule))
                   for zero in zeros)
        return (f"plan {plan} does not fit: its best partition needs {need / 2**30:.3g} GiB on the fullest device "
                f"> {s.hbm_bytes / 2**30:.3g} GiB of HBM (recompute {'/'.join(s.plan.recompute_modes)}, "
                f"sequence parallel {'on' if s.sequence_parallel else 'off'}, "
                f"ZeRO stage {'/'.join(map(str, sorted(set(zeros))))})")
    return (f"no pipeline of at most {max_stages} stages fits {s.hbm_bytes / 2**30:.3g} GiB of HBM per device "
            f"with {s.n_devices} devices at tensor width {s.tensor_width}, context parallel {s.context_parallel}, "
            f"expert parallel {s.expert_parallel} "
            f"(plan {plan})")


def least_memory(costing: CandidateCosts, rules: RunnableShapes, shape: Shape) -> float:
    """The smallest worst-device memory of any partition of ``shape`` (its lightest mode per stage; under DualPipe a
    device's two stages: :meth:`~phaze_env.placement.pair_dp.PairDP.least_memory`)."""
    memory_ = costing.memory_for(shape)
    rule = rules.stage_mask(shape.interleave, shape.stages)
    valid = costing.table.valid if rule is None else rule
    paired = costing.paired(shape)
    if paired is not None:
        return paired.least_memory(valid)
    value = {}

    def memory(s: int) -> np.ndarray:
        units = shape.units(s)
        if units not in value:
            value[units] = np.where(valid, np.min([memory_.full_fixed[m] + units * memory_.full_per_unit[m]
                                                   for m in memory_.modes], axis=0), np.inf)
        return value[units]

    best = finish(costing.table)[:-1]
    for s in range(1, shape.stages + 1):
        best = np.min(np.maximum(memory(s), best[None, :]), axis=1)
    return float(best[costing.table.empty])


def plan_record(costing: CandidateCosts, shape: Shape, pairs: list[tuple[int, int]]) -> Plan:
    """Evaluate a partition into a full :class:`Plan` (the reported numbers are recomputed here)."""
    s, t = costing.settings, costing.table
    stage_costs, _ = costing.variant(shape)
    memory_side = costing.memory_for(shape)
    stages = costing.stages(shape, pairs)
    modes = tuple(mode for mode, _ in stages)
    times = [time for _, time in stages]
    memory = []
    d, zero, e = shape.data_parallel, shape.zero, s.expert_parallel
    copies = parameter_copies(shape.schedule, shape.stages)  # DualPipe: a device holds two stages
    dense_parts = s.state_parts(s.zero_shards(s.weight_replicas(d)), zero)  # the groups ZeRO shards over
    expert_parts = s.state_parts(s.expert_replicas(d), zero)
    for k, ((a, b), mode) in enumerate(zip(pairs, modes)):
        experts = float(t.expert_param_bytes[a, b])
        dense = float(t.param_bytes[a, b]) - experts
        units = shape.units(shape.stages - k)
        buffers = float(memory_side.buffer_bytes[a, b])
        weights, gradients, optimizer = (dense * x + experts * y for x, y in zip(dense_parts, expert_parts))
        memory.append({
            "weights": weights,
            "gradients": gradients,
            "optimizer": optimizer,
            "zero_buffers": buffers,
            "activations": float(memory_side.full_fixed[mode][a, b] - memory_side.state_bytes[a, b] - buffers
                                 + units * memory_side.full_per_unit[mode][a, b]),
        })
    for item in memory:
        item["total"] = sum(item.values())
    device_memory = memory if copies == 1 else [  # DualPipe: device k holds stage k and its mirror
        {term: value + memory[dualpipe_mirror(k, shape.stages)][term] for term, value in item.items()}
        for k, item in enumerate(memory)]
    # the device whose sync sets the batch's: the stage with the most parameter bytes, or at e > 1 the largest sync;
    # under DualPipe the device pair whose two stages sync longest (PairSync.largest)
    if copies == 1:
        synced = [pairs[int(np.argmax([costing.largest_sync_key(shape, [pair]) for pair in pairs]))]]
    else:
        synced = costing.held(shape, pairs, costing.pair_sync(shape).largest(pairs)[1])
    largest = sum(float(t.param_bytes[pair]) for pair in synced)
    experts = sum(costing.expert_bytes(pair) for pair in synced)
    steady = shape.microbatches

    def stage_terms(k: int) -> dict[str, float]:
        """Stage ``k``'s time per microbatch, term by term (``p2p``: per send)."""
        a, b = pairs[k]
        zero_comm_s = float(stage_costs.zero_comm_s[modes[k]][a, b])  # what the stage's rerun leaves exposed
        return {
            "compute": float(t.fwd_s[a, b] + t.bwd_s[a, b] - t.tp_comm_s[a, b] - t.cp_comm_s[a, b] - t.ep_comm_s[a, b]),
            "recompute": times[k] - float(t.fwd_s[a, b] + t.bwd_s[a, b] + shape.interleave * stage_costs.p2p_s[a, b]
                                          + zero_comm_s),
            "tp_comm": float(t.tp_comm_s[a, b]),
            "cp_comm": float(t.cp_comm_s[a, b]),
            "ep_comm": float(t.ep_comm_s[a, b]),
            "p2p": float(stage_costs.p2p_s[a, b]),  # per send: a stage sends v times per microbatch
            "zero_comm": zero_comm_s,
        }

    slowest = int(np.argmax(times))
    if copies == 1:  # the slowest stage sets the pace
        pace_s, pace = times[slowest], stage_terms(slowest)
    else:  # DualPipe: the slowest device, the mean of a stage and its mirror (PairDP.device_time_s)
        device = int(np.argmax([(time + times[dualpipe_mirror(k, shape.stages)]) / 2 for k, time in enumerate(times)]))
        pace_s = PairDP.device_time_s(times)
        one, other = stage_terms(device), stage_terms(dualpipe_mirror(device, shape.stages))
        pace = {term: (one[term] + other[term]) / 2 for term in one}
    breakdown = {term: steady * shape.interleave * value if term == "p2p" else steady * value
                 for term, value in pace.items()} | {
        "bubble": float(shape.bubble_slots) * pace_s,
        "dp_allreduce": costing.reported_allreduce_s(shape, synced),
        "optimizer": (s.optimizer_step_s(largest - experts, s.zero_shards(s.weight_replicas(d)), zero)
                      + s.optimizer_step_s(experts, s.expert_replicas(d), zero)),
    }
    time_per_batch_s = costing.batch_time_s(shape, pace_s, costing.batch_sync_s(shape, pairs))
    throughput = s.global_batch / time_per_batch_s
    devices = shape.data_parallel * shape.stages * s.replica_devices
    layers = tuple(t.layers_of(a, b) for a, b in pairs)
    used = [mode for mode in ("none", "selective", "full") if mode in modes]
    spec = PlanSpec(t=s.tensor_width, c=s.context_parallel, p=shape.stages, d=shape.data_parallel,
                    microbatch=s.microbatch,
                    interleave=shape.interleave, recompute="|".join(used),
                    sequence_parallel=s.sequence_parallel and s.tensor_width > 1, zero=zero, e=e,
                    shard_group=s.plan.shard_group if zero == 3 else None)
    return Plan(
        feasible=True,
        notation=str(spec),
        throughput_samples_s=throughput,
        time_per_batch_s=time_per_batch_s,
        tokens_s=None if s.seq_len is None else throughput * s.seq_len,
        mfu=_mfu(s, throughput, devices),
        tensor_width=s.tensor_width,
        data_parallel=shape.data_parallel,
        expert_parallel=e,
        pipeline_stages=shape.stages,
        microbatch=s.microbatch,
        microbatches_per_replica=shape.microbatches,
        interleave=shape.interleave,
        sequence_parallel=spec.sequence_parallel,
        zero=zero,
        context_parallel=s.context_parallel,
        devices_used=devices,
        hbm_bytes=s.hbm_bytes,
        stage_bounds=tuple((min(group), max(group)) for group in layers),
        stage_layers=layers,
        recompute=tuple(mode != "none" for mode in modes),
        recompute_modes=modes,
        stage_times_s=tuple(times),
        stage_p2p_s=tuple(shape.interleave * float(stage_costs.p2p_s[a, b]) for a, b in pairs),
        stage_allreduce_s=tuple(costing.reported_allreduce_s(shape, costing.held(shape, pairs, k))
                                for k in range(shape.stages)),
        stage_memory_bytes=tuple(item["total"] for item in memory),
        stage_memory=tuple(memory),
        bubble_fraction=float(shape.bubble_slots / shape.slots),
        memory_bytes=max(device_memory, key=lambda item: item["total"]),
        time_breakdown_s=breakdown,
        allreduce_s=breakdown["dp_allreduce"],
        p2p_s=breakdown["p2p"],
    )


def _mfu(settings: Settings, throughput_samples_s: float, devices: int) -> float | None:
    """Model FLOPs per second over the peak of the devices the plan uses (``Settings.peak_flops``: the evaluator
    passes the peak of the design's number format, ``Accelerator.format_peak_flops``)."""
    if settings.model_flops_per_sample is None or settings.peak_flops is None:
        return None
    return settings.model_flops_per_sample * throughput_samples_s / (settings.peak_flops * devices)
