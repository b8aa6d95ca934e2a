"""Megatron-Core's microbatch groups (``PlanRules.microbatch_groups``): the interleaved schedule at any ``m_r ≥ p``.

The schedule is replayed here from NVIDIA/Megatron-LM ``megatron/core/pipeline_parallel/schedules.py`` (from MR !2117,
commit 4295be1a6c, Megatron-Core v0.10): ``get_schedule_table`` (microbatches in groups of ``N`` per virtual stage),
each rank's ``(p − rank − 1)·2 + (v − 1)·N`` warm-up forwards, then one forward and one backward per step, then the
cool-down backwards, every pass waiting for the pass it depends on. The replay is written from the source, not from
the model's formulas, and checks the two things the model takes from it: the bubble stays ``(p − 1)/v`` microbatch
times at any valid group, and the chunks in flight are ``2(s − 1) + (v − 1)N + 1``.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from phaze_env import placement
from phaze_env.placement.inputs import LayerCost, in_flight_units, microbatch_group_size, pipeline_slots
from phaze_env.plan_spec import PlanRules, PlanSpec
from phaze_env.stacks import MEGATRON_CORE_RULES, MEGATRON_LM_RULES, SYSTEM_STACKS
from tests.test_placement import _check_against, _settings, best_plan, brute_force_chain


def _schedule_table(microbatches: int, chunks: int, group: int) -> list[tuple[int, int]]:
    """Megatron-Core's ``get_schedule_table``: (microbatch, chunk) in forward order."""
    table = []
    for low in range(0, microbatches, group):
        high = microbatches if low + group >= microbatches else low + group
        table += [(j, c) for c in range(chunks) for j in range(low, high)]
    return table


def _replay(stages: int, chunks: int, microbatches: int, group: int, fwd_s: float = 1.0, bwd_s: float = 2.0):
    """Makespan and each rank's peak chunks in flight of the interleaved schedule (module docstring)."""
    table = _schedule_table(microbatches, chunks, group)
    total = chunks * microbatches
    orders = []
    for rank in range(stages):
        warmup = min((stages - rank - 1) * 2 + (chunks - 1) * group, total)
        ops = [("F", *table[k]) for k in range(warmup)]
        for i in range(total - warmup):
            ops += [("F", *table[warmup + i]), ("B", table[i][0], chunks - 1 - table[i][1])]
        ops += [("B", table[k][0], chunks - 1 - table[k][1]) for k in range(total - warmup, total)]
        orders.append(ops)
    done, free, position, live, peak = {}, [0.0] * stages, [0] * stages, [0] * stages, [0] * stages
    moved = True
    while moved:
        moved = False
        for rank in range(stages):
            while position[rank] < len(orders[rank]):
                kind, j, c = orders[rank][position[rank]]
                if kind == "F":  # the previous rank's pass of this chunk, or the last rank's of the chunk before
                    needs = ("F", rank - 1, j, c) if rank else (("F", stages - 1, j, c - 1) if c else None)
                else:  # the next rank's backward, or the first rank's of the chunk after, or its own forward
                    needs = (("B", rank + 1, j, c) if rank < stages - 1 else
                             ("B", 0, j, c + 1) if c < chunks - 1 else ("F", rank, j, c))
                if needs is not None and needs not in done:
                    break
                start = max(free[rank], done[needs] if needs else 0.0)
                free[rank] = start + (fwd_s if kind == "F" else bwd_s)
                done[(kind, rank, j, c)] = free[rank]
                live[rank] += 1 if kind == "F" else -1
                peak[rank] = max(peak[rank], live[rank])
                position[rank] += 1
                moved = True
    assert position == [len(ops) for ops in orders], "the replayed schedule deadlocked"
    return max(free), peak


@pytest.mark.parametrize("stages, chunks, microbatches", [(6, 4, 8), (6, 2, 8), (4, 2, 10), (4, 4, 6), (8, 2, 9),
                                                         (2, 3, 7), (3, 2, 5), (6, 4, 12), (4, 2, 8)])
def test_a_group_keeps_the_bubble_and_puts_its_chunks_in_flight(stages, chunks, microbatches):
    """At the model's group (:func:`microbatch_group_size`) the replayed schedule lasts ``m_r + (p − 1)/v`` microbatch
    times (:func:`pipeline_slots`) and each rank's peak is :func:`in_flight_units` — also where ``p ∤ m_r``, which the
    rule before Megatron-Core v0.10 refused."""
    group = microbatch_group_size(stages, microbatches)
    makespan, peak = _replay(stages, chunks, microbatches, group)
    # a stage's microbatch is v chunks of f + b = 3
    assert makespan == pytest.approx(pipeline_slots(microbatches, stages, chunks) * chunks * 3.0)
    assert peak == [in_flight_units(stages - rank, stages, microbatches, chunks) for rank in range(stages)]


@pytest.mark.parametrize("stages", range(2, 9))
def test_the_group_is_the_least_megatron_core_accepts(stages):
    """``N`` in ``[p, m_r]`` with ``m_r mod N`` 0 or at least ``p`` (schedules.py's checks), the least such; ``p``
    wherever ``p | m_r``."""
    for microbatches in range(stages, 40):
        group = microbatch_group_size(stages, microbatches)
        valid = [n for n in range(stages, microbatches + 1) if microbatches % n == 0 or microbatches % n >= stages]
        assert group == valid[0]
        assert microbatches % stages or group == stages


def _layers(count: int) -> list[LayerCost]:
    block = {"fwd_s": 1.0, "bwd_s": 2.0, "param_bytes": 1.0, "stash_bytes": 1.0, "output_bytes": 1.0}
    return [LayerCost.from_dict(block) for _ in range(count)]


def _pinned(rules: PlanRules, microbatches: int, interleave: int | None):
    settings = _settings(n_devices=2, global_batch=microbatches, tensor_width=1, microbatch=1, hbm_bytes=1e9,
                         link_bandwidth_Bps=math.inf, rules=rules)
    plan = PlanSpec(p=2, d=1, interleave=interleave, recompute="none", zero=0)
    return placement.best_plan(_layers(4), dataclasses.replace(settings, plan=plan))


def test_megatron_core_interleaves_where_p_does_not_divide_the_microbatches():
    """2 stages, 3 microbatches: Megatron-Core (groups) runs v = 2 and gains its bubble, (3 + 1/2) stage times against
    1F1B's 3 + 1; Megatron-LM refuses v = 2 (3 is no multiple of 2), saying why."""
    core, legacy = dataclasses.replace(MEGATRON_CORE_RULES, whole_microbatches=False), \
        dataclasses.replace(MEGATRON_LM_RULES, whole_microbatches=False)
    assert core.microbatch_groups and not legacy.microbatch_groups
    free = _pinned(core, 3, None)
    assert free.feasible and free.interleave == 2
    assert free.time_per_batch_s == pytest.approx((3 + 1 / 2) * 6.0)  # a stage: 2 layers × (1 + 2) s
    refused = _pinned(legacy, 3, 2)
    assert not refused.feasible and "multiple of p = 2" in refused.reason
    assert _pinned(legacy, 3, None).interleave == 1
    assert "at least p = 2" in _pinned(core, 1, 2).reason  # fewer microbatches than stages: no group runs


def test_the_system_stack_runs_megatron_cores_groups():
    """The system table's stack is Megatron-Core of 2024-25: its rules have the groups."""
    assert SYSTEM_STACKS["megatron-core"].structure.plan_rules.microbatch_groups


def test_the_rules_dict_says_the_groups_only_when_on():
    """Rules without groups keep the dict (and so the cache keys) they had before the field."""
    assert "microbatch_groups" not in PlanRules().to_dict()
    assert PlanRules.from_dict(MEGATRON_CORE_RULES.to_dict()) == MEGATRON_CORE_RULES



def test_the_grouped_rule_matches_brute_force_where_memory_binds():
    """Under microbatch groups the DP's optimum is the brute force's (``tests/test_placement.py``'s oracle, which takes
    Megatron-Core's checks and the group's chunks in flight as written there) on 2 and 3 devices whose HBM holds the
    model only split (so the pipeline is needed), at odd batches (``p ∤ m_r``) and HBM from too little to plenty: the
    group's extra chunks in flight decide where ``v > 1`` fits. Some of these plans interleave where Megatron-LM
    could not."""
    block = {"fwd_s": 1.0, "bwd_s": 2.0, "param_bytes": 10.0, "stash_bytes": 4.0, "output_bytes": 1.0}
    grouped = 0
    for devices, layers_count in ((2, 4), (3, 6)):
        for batch in (3, 5, 7, 8):
            for hbm in range(40, 400, 8):
                options = dict(n_devices=devices, tensor_width=1, global_batch=batch, microbatch=1,
                               hbm_bytes=float(hbm), link_bandwidth_Bps=math.inf, recompute="none", zero=0,
                               interleave=None, rules=PlanRules(microbatch_groups=True))
                layers = [block] * layers_count
                plan = best_plan(layers, **options)
                _check_against(brute_force_chain(layers, **options), plan)
                microbatches = -(-batch // (plan.data_parallel * plan.microbatch)) if plan.feasible else 0
                grouped += plan.feasible and plan.interleave > 1 and microbatches % plan.pipeline_stages != 0
    assert grouped
