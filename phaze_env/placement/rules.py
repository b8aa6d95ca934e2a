"""Which shapes and stages a training stack can run: :func:`searched_degrees` (the tensor widths and expert-parallel
degrees a search tries), :func:`pipeline_split`, :func:`interleave_degrees` and :func:`runnable_shapes`
(the rules the evaluation, the placement DP and any bound of them share), and :class:`RunnableShapes`, those rules
applied to one placement search.

The stack states its rules (:class:`~phaze_env.plan_spec.PlanRules`); the search (:mod:`phaze_env.placement.search`)
asks here which interleavings to try, which ``(p, m_r, v)`` it may solve (vectorised), why a pinned one breaks a rule
(the same rules one by one), and which stages of the ``K × K`` stage matrices a shape may use (a rule is a mask on
the stage matrices, so the DP over the allowed stages is the same DP and every bound computed without the mask stays
a bound). Whatever the stack, an interleaved stage splits into ``v`` equal chunks: its transformer layers are a
multiple of ``v``.
"""

from __future__ import annotations

import functools
from typing import Iterable

import numpy as np

from phaze_env.cluster import Cluster
from phaze_env.placement.inputs import Settings
from phaze_env.placement.stages import StageTable
from phaze_env.plan_spec import PlanRules, PlanSpec
from phaze_env.workloads import Workload


def valid_tensor_widths(workload: Workload, widths: Iterable[int], n_devices: int) -> list[int]:
    """Widths at which the workload can be split (heads and hidden sizes divide) and that fit the cluster."""
    heads = workload.num_heads or 1
    return [t for t in widths if t <= n_devices and t & (t - 1) == 0 and heads % t == 0]


def expert_parallel_degrees(workload: Workload, most: int) -> list[int]:
    """Expert-parallel degrees ``e ≤ most`` that divide the workload's experts (``[1]`` for a dense model:
    :meth:`~phaze_env.workloads.Workload.expert_parallel_error`)."""
    return [e for e in range(1, most + 1) if not workload.expert_parallel_error(e)]


def expert_plan_error(plan: PlanSpec, workload: Workload, explicit_auto: bool = False) -> str:
    """Why ``plan``'s expert-parallel degree cannot apply to ``workload`` ("" when it can): a pinned ``e`` must divide
    its experts (a dense model has none: only e = 1), and a plan that says ``+e=auto`` (``explicit_auto``: parsed
    text, where ``e`` is None only then) asks for expert parallelism a dense model does not have — refused alike,
    rather than silently searched as e = 1."""
    if plan.e is None:
        if explicit_auto and not workload.num_experts:
            return (f"{workload.name} is dense (no experts): +e=auto searches expert parallelism, which it does not "
                    "have; leave +e=auto out (e = 1)")
        return ""
    return workload.expert_parallel_error(plan.e)


def tensor_width_error(workload: Workload, tensor_width: int, n_devices: int) -> str:
    """Why a pinned ``tensor_width`` cannot split ``workload`` on ``n_devices`` devices ("" when it can:
    :func:`valid_tensor_widths`)."""
    if valid_tensor_widths(workload, (tensor_width,), n_devices):
        return ""
    return (f"tensor width {tensor_width} does not divide {workload.name}'s {workload.num_heads} attention heads "
            f"(or is not a power of two ≤ {n_devices})")


def searched_degrees(workload: Workload, tensor_widths: Iterable[int], n_devices: int,
                     pinned_expert_parallel: int | None) -> tuple[list[int], list[int]]:
    """The tensor widths and expert-parallel degrees a search tries for ``workload`` on ``n_devices`` devices: of
    ``tensor_widths`` (in their order; already narrowed to a plan's pinned ``t``,
    :meth:`~phaze_env.plan_spec.PlanSpec.narrow`) those that split the workload and fit (:func:`valid_tensor_widths`),
    and the pinned ``e`` or else every degree dividing its experts up to ``n_devices``
    (:func:`expert_parallel_degrees`). The one rule the evaluation searches by (:func:`phaze_env.evaluate.evaluate`)
    and the search's bounds try (:mod:`search.bounds`), as :func:`interleave_degrees` is for ``v``."""
    experts = expert_parallel_degrees(workload, n_devices) if pinned_expert_parallel is None else [pinned_expert_parallel]
    return valid_tensor_widths(workload, tensor_widths, n_devices), experts


def interleave_degrees(total_layers: int, pinned: int | None, interleaved: bool) -> list[int]:
    """The ``v`` a search tries: the pinned one; 1 on a stack without the interleaved schedule; else 1 and every ``v``
    that divides the model's ``total_layers`` transformer layers (each stage's layers must split into ``v`` equal
    chunks, so the layers of all stages, a sum of multiples of ``v``, are one too)."""
    if pinned is not None:
        return [pinned]
    if not interleaved:
        return [1]
    return [1] + [v for v in range(2, total_layers + 1) if total_layers % v == 0]


def pipeline_split(graph, cluster: Cluster, plan: PlanSpec) -> tuple[int, tuple[int, ...]]:
    """The layers a pipeline split of ``graph`` counts and the interleavings ``v`` the placement DP tries under
    ``plan`` on ``cluster``'s stack — by the placement's own rules (:meth:`~phaze_env.plan_spec.PlanRules.split_layers`,
    which the evaluator's layer chain counts with, :attr:`~phaze_env.cluster.Stack.searches_interleave` and
    :func:`interleave_degrees`), so a bound of the DP (:mod:`search.bounds`) tries every ``v`` the DP may run."""
    total_layers = sum(layer.repeat * cluster.stack.plan_rules.split_layers(layer) for layer in graph.layers)
    return total_layers, tuple(interleave_degrees(total_layers, plan.interleave, cluster.stack.searches_interleave))


def runnable_shapes(stages, microbatches, v: int, total_layers: int, rules: PlanRules,
                    schedule: str = "1f1b") -> np.ndarray:
    """Which ``(p, m_r)`` (arrays, or scalars broadcast) a stack with ``rules`` can run at ``v``: interleaving needs
    ``p ≥ interleave_min_stages``, ``m_r`` a multiple of ``p`` (Megatron-LM; ``m_r ≥ p`` where the stack runs
    microbatch groups, ``PlanRules.microbatch_groups``: Megatron-Core from v0.10) and ``v`` layers or more per stage;
    uniform stages need ``p`` to divide the layers into stages whose count ``v`` divides; the ``"dualpipe"``
    ``schedule`` (``Stack.pipeline_schedule``) needs, once it pipelines (``p > 1``), ``p`` even and ``m_r`` even and
    at least ``2p`` (:data:`DUALPIPE_RULE`), and runs no interleaving."""
    stages, microbatches = np.broadcast_arrays(np.asarray(stages), np.asarray(microbatches))
    allowed = np.ones(stages.shape, dtype=bool)
    if v > 1:
        grouped = microbatches >= stages if rules.microbatch_groups else microbatches % np.maximum(stages, 1) == 0
        allowed = ((stages >= rules.interleave_min_stages) & grouped
                   & (stages * v <= total_layers) & (total_layers % v == 0))
    if rules.uniform_stages:
        allowed &= (total_layers % stages == 0) & ((total_layers // stages) % v == 0)
    if schedule == "dualpipe":
        allowed &= (v == 1) & ((stages == 1) | ((stages % 2 == 0) & (microbatches % 2 == 0)
                                                 & (microbatches >= 2 * stages)))
    return allowed


@functools.lru_cache(maxsize=65536)
def _runnable_interleaves(p: int, interleaves: tuple[int, ...], total_layers: int, rules: PlanRules,
                          schedule: str = "1f1b") -> tuple[int, ...]:
    """The ``v > 1`` of ``interleaves`` the stack runs at ``p`` stages for some ``m_r`` (its layer-count rules; none
    under DualPipe)."""
    return tuple(v for v in interleaves if v > 1 and runnable_shapes(p, p, v, total_layers, rules, schedule))


def runnable_interleavings(stages: int, microbatches: np.ndarray, interleaves: tuple[int, ...], total_layers: int,
                           rules: PlanRules, schedule: str = "1f1b") -> list[tuple[int, np.ndarray]]:
    """The interleavings of ``interleaves`` a stack runs at ``stages`` stages, as ``(v, runnable)``, ``runnable`` the
    mask over ``microbatches`` (``m_r``): ``v = 1`` where it is searched, and every ``v > 1`` it runs at some ``m_r``
    (none under DualPipe) — whether a ``v > 1`` runs at ``(p, m_r)`` depends on ``v`` only through the layer counts
    (:func:`runnable_shapes` at ``m_r = p``), so the shapes one runnable ``v`` allows every runnable ``v`` allows (they
    are left out where no ``m_r`` runs)."""
    found = []
    if 1 in interleaves:
        found.append((1, runnable_shapes(stages, microbatches, 1, total_layers, rules, schedule)))
    runnable = _runnable_interleaves(stages, interleaves, total_layers, rules, schedule)
    if runnable:
        allowed = runnable_shapes(stages, microbatches, runnable[0], total_layers, rules, schedule)
        if allowed.any():
            found.extend((v, allowed) for v in runnable)
    return found


DUALPIPE_RULE = ("DualPipe runs an even number of pipeline stages and an even number of microbatches per replica, "
                 "at least twice the stages (deepseek-ai/DualPipe dualpipe.py, DualPipe.step: assert num_ranks % 2 == 0; "
                 "assert num_chunks % 2 == 0 and num_chunks >= num_ranks * 2 — each direction's half of the "
                 "microbatches fills its own pipeline; arXiv:2412.19437 §3.2.1: \"pipeline stages and micro-batches "
                 "be divisible by 2\")")
"""Why a DualPipe shape is refused (:func:`runnable_shapes`, :meth:`RunnableShapes.broken_rule`)."""


class RunnableShapes:
    """The stack's plan rules (``settings.cluster.stack.plan_rules``) applied to one search's layers (``table``)."""

    def __init__(self, settings: Settings, table: StageTable):
        self.settings = settings
        self.table = table
        self.plan_rules = settings.cluster.stack.plan_rules
        self.schedule = settings.cluster.stack.pipeline_schedule
        self.total_layers = int(table.layer_count[table.empty, table.full])  # transformer layers a split counts
        self._masks: dict[tuple[int, int], np.ndarray] = {}  # (v, layers per stage) -> K × K runnable stages
        self._compact_masks: dict[tuple[int, int, int], np.ndarray] = {}  # (layout, v, layers per stage) -> compact

    def interleaves(self) -> list[int]:
        """The ``v`` to search (:func:`interleave_degrees`)."""
        return interleave_degrees(self.total_layers, self.settings.plan.interleave, self.settings.interleaved)

    def runnable(self, stages: np.ndarray, microbatches: np.ndarray, v: int) -> np.ndarray:
        """Which ``(p, m_r)`` the stack can run at ``v`` (:func:`runnable_shapes`)."""
        return runnable_shapes(stages, microbatches, v, self.total_layers, self.plan_rules, self.schedule)

    def broken_rule(self, stages: int, microbatches: int, v: int, data_parallel: int | None = None) -> str:
        """Why the stack cannot run ``(p, m_r, v)`` at ``d`` replicas ("" when it can): :func:`runnable_shapes`'s rules
        one by one, and the whole-microbatch rule the search applies to ``d``."""
        total, rules, s = self.total_layers, self.plan_rules, self.settings
        if rules.whole_microbatches and data_parallel is not None and s.global_batch % (data_parallel * s.microbatch):
            return (f"{rules.owner(s.cluster.name)} runs whole microbatches only, and d·m = "
                    f"{data_parallel * s.microbatch} does not divide the global batch of {s.global_batch}")
        if self.schedule == "dualpipe" and v > 1:
            return f"the DualPipe schedule runs no interleaving (v = {v}): {DUALPIPE_RULE}"
        if self.schedule == "dualpipe" and stages > 1 and (stages % 2 or microbatches % 2 or microbatches < 2 * stages):
            return f"p = {stages} with {microbatches} microbatches per replica: {DUALPIPE_RULE}"
        if v > 1 and stages < rules.interleave_min_stages:
            return (f"the interleaved schedule needs p ≥ {rules.interleave_min_stages} pipeline stages "
                    "(the stack's rule)")
        if v > 1 and rules.microbatch_groups and microbatches < stages:
            return (f"the interleaved schedule needs at least p = {stages} microbatches per replica, got {microbatches} "
                    "(Megatron-Core: the microbatch group per virtual stage lies in [p, m_r])")
        if v > 1 and not rules.microbatch_groups and microbatches % stages:
            return (f"the interleaved schedule needs the {microbatches} microbatches per replica to be a multiple of "
                    f"p = {stages} (Megatron-LM; Megatron-Core's microbatch groups, from v0.10, lift it)")
        layers = ("layers (the embedding and the loss counting one each)" if rules.embedding_loss_in_split
                  else "transformer layers")
        if rules.uniform_stages and total % stages:
            return (f"the stack runs uniform stages (L/p layers each) and p = {stages} does not divide the "
                    f"{total} {layers}")
        if v > 1 and (total % v or stages * v > total or (rules.uniform_stages and (total // stages) % v)):
            return (f"the {total} {layers} cannot give each of the {stages} stages a multiple of v = {v} "
                    "layers (each stage splits into v equal chunks)")
        return ""

    def stage_mask(self, interleave: int, stages: int) -> np.ndarray | None:
        """The stages (K × K) the stack can run in a shape of ``stages`` stages at ``interleave`` (``None``: every
        stage): with uniform stages those of ``L/p`` transformer layers, with ``v > 1`` those whose layers split into
        ``v`` equal chunks."""
        key = self._key(interleave, stages)
        if key is None:
            return None
        v, per_stage = key
        if key not in self._masks:
            counts = self.table.layer_count
            rule = counts == per_stage if self.plan_rules.uniform_stages else (counts % v == 0) & (counts > 0)
            self._masks[key] = rule & self.table.valid
        return self._masks[key]

    def compact_mask(self, interleave: int, stages: int, memory) -> np.ndarray | None:
        """:meth:`stage_mask` in the compact layout of ``memory``
        (a :class:`~phaze_env.placement.stage_costs.StageMemory`)."""
        rule = self.stage_mask(interleave, stages)
        if rule is None:
            return None
        key = (id(memory.next_index), *self._key(interleave, stages))
        if key not in self._compact_masks:
            self._compact_masks[key] = memory.compact(rule)
        return self._compact_masks[key]

    def _key(self, interleave: int, stages: int) -> tuple[int, int] | None:
        """What a shape's stage rule depends on: ``(v, L/p under uniform stages else 0)``; ``None``: no rule."""
        if interleave == 1 and not self.plan_rules.uniform_stages:
            return None
        return interleave, self.total_layers // stages if self.plan_rules.uniform_stages else 0


__all__ = ["DUALPIPE_RULE", "RunnableShapes", "expert_parallel_degrees", "expert_plan_error", "interleave_degrees",
           "pipeline_split", "runnable_interleavings", "runnable_shapes", "searched_degrees",
           "tensor_width_error", "valid_tensor_widths"]
