"""What a placement search looks at: the degrees of its candidate plans (:class:`Shape`: data-parallel degree ``d``,
pipeline stages ``p``, microbatches per replica ``m_r``, interleave ``v`` and ZeRO stage ``z``), enumerated by
:func:`candidate_degrees` from the cluster's devices, the pinned plan and the stack's plan rules
(:class:`~phaze_env.placement.rules.RunnableShapes`). Which of them are solved, in which order, is the search's
(:mod:`phaze_env.placement.search`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phaze_env.placement.inputs import (Settings, in_flight_units, microbatches_per_replica, pipeline_bubble_slots,
                                        pipeline_slots)
from phaze_env.placement.rules import RunnableShapes


@dataclass(frozen=True)
class Shape:
    """Degrees of one candidate plan."""

    data_parallel: int
    stages: int
    microbatches: int  # per replica
    interleave: int = 1
    zero: int = 0  # ZeRO stage (0 whenever d = 1: there is nothing to shard over)
    schedule: str = "1f1b"  # the search's pipeline schedule (Stack.pipeline_schedule)

    @property
    def slots(self) -> float:
        """Steady-state microbatches plus the bubble, in stage times (:func:`pipeline_slots`: ``m_r + (p − 1)/v``
        under 1F1B)."""
        return pipeline_slots(self.microbatches, self.stages, self.interleave, self.schedule)

    @property
    def bubble_slots(self) -> float:
        """The bubble alone, in stage times (:func:`pipeline_bubble_slots`)."""
        return pipeline_bubble_slots(self.stages, self.interleave, self.schedule)

    def units(self, s: int) -> int:
        """Activation units in flight on the stage ``s``-th from the end (:func:`in_flight_units`)."""
        return in_flight_units(s, self.stages, self.microbatches, self.interleave)


def candidate_degrees(settings: Settings, rules: RunnableShapes, deepest: int
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(d, p, m_r, v, z)``, elementwise: every shape the search may solve, at most ``deepest`` stages.

    The data-parallel degrees that the devices allow, the plan pins, ``e`` divides (expert-parallel groups are
    carved from the replicas), the stack's whole microbatches split and a hybrid shard group tiles; every ZeRO stage
    the plan allows (ZeRO-0's memory does not depend on ``d``: the smallest ``d`` of each ``m_r`` is enough, module
    docstring of :mod:`phaze_env.placement.search`; one weight replica shards nothing: ZeRO-0 there, once); every
    ``p`` up to ``deepest`` that fits the devices (or the pinned one); every interleave the stack runs on it.
    """
    s, plan = settings, settings.plan
    replicas = np.arange(1, s.n_devices // s.replica_devices + 1)
    if plan.d is not None:
        replicas = replicas[replicas == plan.d]
    replicas = replicas[s.expert_fits(replicas)]  # expert-parallel groups are carved from the replicas (or t·c·d)
    if rules.plan_rules.whole_microbatches:  # the stack runs whole microbatches only: d·m divides the batch
        replicas = replicas[s.global_batch % (replicas * s.microbatch) == 0]
    if plan.shard_group is not None:  # hybrid shard groups tile the weight replicas
        replicas = replicas[s.weight_replicas(replicas) % plan.shard_group == 0]
    microbatches = microbatches_per_replica(s.global_batch, replicas, s.microbatch)
    shapes = []
    for zero in s.zero_stages:
        # ZeRO-0's memory does not depend on d: the smallest d of each m_r is enough
        first = np.unique(microbatches, return_index=True)[1] if zero == 0 and plan.d is None else slice(None)
        d_z, m_z = replicas[first], microbatches[first]
        sharded = s.weight_replicas(d_z) > 1
        z = np.where(sharded, zero, 0)  # one weight replica shards nothing: every stage is ZeRO-0 there
        if zero > min(s.zero_stages):
            d_z, m_z, z = d_z[sharded], m_z[sharded], z[sharded]  # d·c = 1 comes once, from the first stage
        shapes.append((d_z, m_z, z))
    replicas, microbatches, zeros = (np.concatenate(parts) for parts in zip(*shapes))
    most_stages = np.minimum(deepest, s.n_devices // (replicas * s.replica_devices))
    d = np.repeat(replicas, most_stages)
    m_r = np.repeat(microbatches, most_stages)
    z = np.repeat(zeros, most_stages)
    p = np.arange(1, len(d) + 1) - np.repeat(np.cumsum(most_stages) - most_stages, most_stages)
    if plan.p is not None:
        keep = p == plan.p
        d, m_r, p, z = d[keep], m_r[keep], p[keep], z[keep]
    shapes = []
    for v in rules.interleaves():
        allowed = rules.runnable(p, m_r, v)
        shapes.append((d[allowed], p[allowed], m_r[allowed], np.full(int(allowed.sum()), v), z[allowed]))
    return tuple(np.concatenate(parts) for parts in zip(*shapes))
