"""The one plan notation: :class:`PlanSpec` and its string form ``t8p8d1m1v3+sp+zero1+rc=selective``.

A plan is tensor × context × pipeline × data parallel degrees (``t``, ``c``, ``p``, ``d``; ``c`` splits each
sequence across ``c`` ranks, ring attention as in Megatron-Core's context parallelism), the expert-parallel
degree ``e`` (the routed experts sharded over groups of ``e`` of the ``d`` data-parallel ranks, as Megatron-Core
and DeepSpeed-MoE carve them: ``e`` divides ``d``; each expert shard is data-parallel over ``d·c/e`` ranks; a stack
that folds its expert grid, ``Stack.folded_experts``, carves them from all ``t·c·d`` ranks: ``e`` divides ``t·c·d``,
which is all the notation checks when ``t`` and ``d`` are pinned; with ``t`` free it asks ``e | d``), the
microbatch size ``m``
(samples), the interleaved-1F1B virtual stages per device ``v``, and the memory features: sequence
parallelism (``sp``), the ZeRO stage over the data-parallel group (``zero1``: optimizer state sharded,
``zero2``: and gradients, ``zero3``: and parameters, i.e. FSDP; Rajbhandari et al. 2020) and the
activation recompute mode (``rc``: ``none``, ``selective`` — Korthikanti et al. 2022, ``full`` — every
stage keeps only its inputs; or several joined by ``|`` — per stage, the fastest of them that fits —
with ``auto`` = ``none|selective|full``; PHAZE's own space is ``none|full``).

A field left ``None`` is chosen by the placement DP; a set field is pinned. String grammar::

    [t<int>][c<int>][p<int>][d<int>][e<int>][m<int>][v<int>] ( "+sp" | "+zero1" | "+zero2" | "+zero3" | "+shard<int>" | "+rc=<mode>" | "+<flag>=auto" )*

Degrees that are absent are free, except ``c``, ``e`` and ``v`` (absent = 1); an absent flag is off (``rc``
absent = ``none``, no ``+zero<k>`` = stage 0), so the string of a fully chosen plan parses back to the same
spec. ``+sp=auto``, ``+zero=auto`` (also read as ``+zero1=auto``), ``+c=auto``, ``+e=auto``, ``+v=auto`` and
``+rc=auto`` leave that choice to the DP. (``PlanSpec()`` leaves ``e`` free, ``None``, as every other degree
but ``c``.)

Hybrid sharding (``+shard<h>``, field ``shard_group``; only with ``+zero3``): ZeRO-3 shards over groups of ``h``
consecutive weight replicas (in a DGX cluster with ``t = 1`` and ``h = 8``: the GPUs of one node) and replicates
the shards across the ``d·c/h`` groups, whose gradient shards are all-reduced — PyTorch FSDP's ``HYBRID_SHARD``
("HSDP": "sharding within a node and DP across nodes", foundation-model-stack/fms-fsdp docs/configurations.md).
Absent, ZeRO shards over the whole data-parallel group. It is never chosen by the DP: a plan pins it or leaves it
out, and the DP then searches only the ``d`` with ``h | d·c``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Sequence

def expert_degree_error(e: int, d: int, ranks: int | None = None) -> str:
    """The one message for an expert-parallel degree the data-parallel degree cannot hold (``ranks``: the ``t·c·d``
    ranks of a stage, when known, which a folded expert grid could use and cannot either)."""
    folded = ("from all t·c·d ranks of a stage only in a stack that folds its expert grid, Stack.folded_experts"
              if ranks is None else f"nor does it divide the t·c·d = {ranks} ranks a folded expert grid would use")
    return (f"plan expert-parallel degree e={e} must divide the data-parallel degree d={d} (the expert-parallel groups "
            f"are carved from the data-parallel ranks; {folded})")


RECOMPUTE_MODES = ("none", "selective", "full")  # by increasing time and decreasing activation memory
RECOMPUTE_CHOICES = (*RECOMPUTE_MODES, "auto")
ZERO_STAGES = (0, 1, 2, 3)  # what the data-parallel group shards: nothing / + optimizer state / + gradients / + weights
_DEGREES = ("t", "c", "p", "d", "e", "m", "v")
_ZERO_FLAGS = {f"zero{stage}": stage for stage in ZERO_STAGES if stage}
_PATTERN = re.compile(r"^(?:t(\d+))?(?:c(\d+))?(?:p(\d+))?(?:d(\d+))?(?:e(\d+))?(?:m(\d+))?(?:v(\d+))?((?:\+[a-z0-9]+(?:=[a-z0-9|]+)?)*)$")


class PlanSyntaxError(ValueError):
    """A plan string that does not follow the notation."""


@dataclass(frozen=True)
class PlanSpec:
    """A (possibly partial) training plan; ``None`` = let the DP choose. See the module docstring."""

    t: int | None = None
    p: int | None = None
    d: int | None = None
    microbatch: int | None = None
    interleave: int | None = 1
    recompute: str = "auto"
    sequence_parallel: bool | None = None
    zero: int | None = None
    c: int | None = 1
    e: int | None = None
    shard_group: int | None = None  # ZeRO-3 shards over groups of this many weight replicas (None: all of them)

    def __post_init__(self) -> None:
        for name in ("t", "c", "p", "d", "e", "microbatch", "interleave"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"plan {name} must be a positive integer (or None = chosen), got {value!r}")
        if not isinstance(self.recompute, str) or not _valid_recompute(self.recompute):
            raise ValueError(f"plan recompute must be one of {', '.join(RECOMPUTE_CHOICES)} or modes joined by '|' "
                             f"(e.g. 'none|full': each stage picks the faster that fits), got {self.recompute!r}")
        if self.sequence_parallel not in (None, True, False):
            raise ValueError(f"plan sequence_parallel must be True, False or None (chosen), got {self.sequence_parallel!r}")
        if self.zero is not None and (isinstance(self.zero, bool) or self.zero not in ZERO_STAGES):
            raise ValueError(f"plan zero must be a ZeRO stage 0, 1, 2 or 3 (or None = chosen), got {self.zero!r}")
        if self.shard_group is not None:
            if isinstance(self.shard_group, bool) or not isinstance(self.shard_group, int) or self.shard_group < 2:
                raise ValueError(f"plan shard_group must be an integer ≥ 2 (or None = the whole data-parallel group), "
                                 f"got {self.shard_group!r}")
            if self.zero != 3:
                raise ValueError(f"plan shard_group {self.shard_group} (hybrid sharding) needs ZeRO stage 3 pinned "
                                 f"(+zero3), got zero={self.zero!r}")
            if self.d is not None and self.c is not None and (self.d * self.c) % self.shard_group:
                raise ValueError(f"plan shard group {self.shard_group} must divide the weight replicas d·c = "
                                 f"{self.d * self.c}")
        folded_ranks = None if self.t is None or self.d is None else self.t * (self.c or 1) * self.d
        if self.e is not None and self.d is not None and self.d % self.e and (folded_ranks is None
                                                                              or folded_ranks % self.e):
            raise ValueError(expert_degree_error(self.e, self.d, folded_ranks))

    @property
    def devices(self) -> int | None:
        """``t·c·p·d`` when all four are pinned."""
        return None if None in (self.t, self.c, self.p, self.d) else self.t * self.c * self.p * self.d

    def narrow(self, tensor_widths: Sequence[int],
               microbatches: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The tensor widths and microbatch sizes searched under this plan: a pinned ``t`` or ``m`` replaces its list
        (the one rule :func:`phaze_env.evaluate.evaluate`, its bounds and the exact search all narrow by)."""
        return (tuple(tensor_widths) if self.t is None else (self.t,),
                tuple(microbatches) if self.microbatch is None else (self.microbatch,))

    @property
    def recompute_modes(self) -> tuple[str, ...]:
        """The recompute modes a stage may use."""
        if self.recompute == "auto":
            return RECOMPUTE_MODES
        chosen = set(self.recompute.split("|"))
        return tuple(mode for mode in RECOMPUTE_MODES if mode in chosen)

    def __str__(self) -> str:
        values = dict(t=self.t, c=self.c if self.c != 1 else None, p=self.p, d=self.d, e=self.e if self.e != 1 else None,
                      m=self.microbatch)
        text = "".join(f"{key}{value}" for key, value in values.items() if value is not None)
        if self.interleave is not None and self.interleave > 1:
            text += f"v{self.interleave}"
        flags = []
        if self.c is None:
            flags.append("c=auto")
        if self.e is None:
            flags.append("e=auto")
        if self.interleave is None:
            flags.append("v=auto")
        if self.sequence_parallel is None:
            flags.append("sp=auto")
        elif self.sequence_parallel:
            flags.append("sp")
        if self.zero is None:
            flags.append("zero=auto")
        elif self.zero:
            flags.append(f"zero{self.zero}")
        if self.shard_group is not None:
            flags.append(f"shard{self.shard_group}")
        if self.recompute != "none":
            flags.append(f"rc={self.recompute}")
        return text + "".join(f"+{flag}" for flag in flags)

    @classmethod
    def parse(cls, text: str) -> PlanSpec:
        """``PlanSpec.parse("t8p8d1m1v3+sp+rc=selective")``; bad syntax raises :class:`PlanSyntaxError`."""
        match = _PATTERN.match(str(text).strip().lower())
        if not match:
            raise PlanSyntaxError(f"cannot read plan {text!r}; expected e.g. 't8p8d1m1', 't8c2p8d1m1v3+sp+zero1+rc=selective', 't2p4d8e8m1'")
        t, c, p, d, e, m, v = (None if group is None else int(group) for group in match.groups()[:7])
        fields: dict[str, Any] = dict(t=t, c=1 if c is None else c, p=p, d=d, e=1 if e is None else e, microbatch=m,
                                      interleave=1 if v is None else v, recompute="none", sequence_parallel=False, zero=0)
        for flag in filter(None, match.group(8).split("+")):
            key, _, value = flag.partition("=")
            if key == "rc" and _valid_recompute(value):
                fields["recompute"] = value
            elif key == "sp" and value in ("", "auto"):
                fields["sequence_parallel"] = True if value == "" else None
            elif key in _ZERO_FLAGS and value == "":
                fields["zero"] = _ZERO_FLAGS[key]
            elif key in ("zero", "zero1") and value == "auto":  # "+zero1=auto": the notation before ZeRO-2/3
                fields["zero"] = None
            elif key.startswith("shard") and key[5:].isdigit() and value == "":
                fields["shard_group"] = int(key[5:])
            elif key == "v" and value == "auto" and v is None:
                fields["interleave"] = None
            elif key == "c" and value == "auto" and c is None:
                fields["c"] = None
            elif key == "e" and value == "auto" and e is None:
                fields["e"] = None
            else:
                raise PlanSyntaxError(f"unknown plan flag {'+' + flag!r} in {text!r}; known: +sp, +zero1, +zero2, +zero3, +shard<h>, "
                                      f"+rc=<{'|'.join(RECOMPUTE_CHOICES)}>, +sp=auto, +zero=auto, +c=auto, +e=auto, "
                                      "+v=auto")
        if 0 in (t, c, p, d, e, m, v):
            raise PlanSyntaxError(f"plan degrees must be positive in {text!r}")
        return cls(**fields)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def phaze_plan(recompute: bool = True) -> PlanSpec:
    """PHAZE's own plan space, the one an evaluation or a search given no plan searches: each stage stashes its
    activations or, when ``recompute``, recomputes them fully (whichever is faster and fits); no sequence parallelism,
    ZeRO, interleaving (``v = 1``) or expert parallelism (``e = 1``); ``t``, ``p``, ``d`` and ``m`` free. The one
    definition :func:`phaze_env.evaluate.evaluate` and the search's bounds (:mod:`search.bounds`) both take."""
    return PlanSpec(recompute="none|full" if recompute else "none", sequence_parallel=False, zero=0, interleave=1, e=1)


@dataclass(frozen=True)
class PlanRules:
    """Which plans a training stack can run: the placement DP searches these and only these.

    * ``pipeline``: the stack pipelines at all (PyTorch FSDP, MaxText and llm-foundry do not: ``p = 1``);
    * ``uniform_stages``: every pipeline stage holds the same number of transformer layers, ``L/p`` (the embedding
      with the first, the head and loss with the last). Megatron-LM of 2021-22 requires it: ``ParallelTransformer``
      asserts "num_layers must be divisible by pipeline_model_parallel_size" and gives each stage
      ``num_layers // pipeline_model_parallel_size``. Off, any contiguous split is runnable (PHAZE's DP; Megatron-Core's
      ``pipeline_model_parallel_layout`` and DeepSpeed's ``PipelineModule`` partitions place layers freely);
    * ``interleave_min_stages``: the interleaved schedule (``v > 1``) needs at least this many stages. Megatron-LM's
      ``arguments.py``: "pipeline-model-parallel size should be greater than 2 with interleaved schedule" (3);
    * ``whole_microbatches``: every data-parallel replica runs whole microbatches, ``d·m`` dividing the global batch
      (Megatron-LM's microbatch calculator asserts "global batch size ... is not divisible by micro batch size ...
      times data parallel size"; DeepSpeed asserts ``train_batch_size = micro_batch × accumulation × d``; FSDP and
      MaxText set a per-device batch). Off (PHAZE's model), a replica's last microbatch may be padded (idle slots);
    * ``zero_stages``: the ZeRO stages it implements (Megatron-LM: 0, and 1 as its distributed optimizer; DeepSpeed's
      ``PipelineEngine``: 0 and 1 — ZeRO-2/3 are refused with pipeline parallelism; PyTorch FSDP: ``NO_SHARD``,
      ``SHARD_GRAD_OP``, ``FULL_SHARD`` = 0, 2, 3).

    * ``microbatch_groups``: the interleaved schedule runs any ``m_r ≥ p`` microbatches per replica, in groups of
      ``N`` per virtual stage (:func:`~phaze_env.placement.inputs.microbatch_group_size`). Megatron-Core from v0.10
      (NVIDIA/Megatron-LM MR !2117, commit 4295be1a6c, 2024-11-01; in ``core_r0.10.0``):
      ``--microbatch-group-size-per-virtual-pipeline-stage`` ``N`` (default ``p``) must lie in ``[p, m_r]`` and leave
      ``m_r mod N`` 0 or at least ``p`` (``schedules.py``, ``forward_backward_pipelining_with_interleaving``), so
      ``N = m_r`` runs any ``m_r ≥ p``. Off (Megatron-LM of 2021-22 and the rule before v0.10), ``m_r`` must be a
      multiple of ``p``: "number of microbatches ... is not divisible by pipeline-model-parallel-size ... when using
      interleaved schedule";
    * ``embedding_loss_in_split``: the embedding and the loss (the head) each count as one layer when the layers are
      split into stages and chunks: Megatron-Core's ``--account-for-embedding-in-pipeline-split`` and
      ``--account-for-loss-in-pipeline-split`` (``megatron/core/transformer/transformer_block.py``,
      ``get_num_layers_to_build``), which NeMo's Llama 3.1 405B recipes set so that 126 layers + 2 split over 8 or 16
      stages (the Llama 3 paper, Dubey et al. 2024 §3.3.2, likewise gives the first and last stage one layer fewer).
      Off (Megatron-LM's default), only transformer layers count.

    Whatever the stack, an interleaved stage must split into ``v`` equal chunks: every stage's transformer layers are
    a multiple of ``v`` (Megatron-LM: ``num_layers_per_virtual_pipeline_stage`` divides each stage's layers). The
    placement model prices the ``v`` chunks of a stage as carrying the same load, which holds only then, so that
    rule is not a field: it always applies. ``stack`` names whose rules they are (for messages; "" = the cluster's).
    """

    pipeline: bool = True
    uniform_stages: bool = False
    interleave_min_stages: int = 2
    zero_stages: tuple[int, ...] = ZERO_STAGES
    whole_microbatches: bool = False
    embedding_loss_in_split: bool = False
    stack: str = ""
    microbatch_groups: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.stack, str):
            raise ValueError(f"plan rules stack must be a name, got {self.stack!r}")
        for name in ("pipeline", "uniform_stages", "whole_microbatches", "embedding_loss_in_split", "microbatch_groups"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"plan rules {name} must be True or False, got {getattr(self, name)!r}")
        stages = self.interleave_min_stages
        if isinstance(stages, bool) or not isinstance(stages, int) or stages < 2:
            raise ValueError(f"plan rules interleave_min_stages must be an integer ≥ 2, got {stages!r}")
        zero = tuple(self.zero_stages)
        if not zero or any(isinstance(z, bool) or z not in ZERO_STAGES for z in zero) or len(set(zero)) != len(zero):
            raise ValueError(f"plan rules zero_stages must be distinct ZeRO stages among {ZERO_STAGES}, got {zero!r}")
        object.__setattr__(self, "zero_stages", tuple(sorted(zero)))

    def to_dict(self) -> dict[str, Any]:
        """The fields; ``microbatch_groups`` only when on (so the rules of before it, and every cache key built from
        them, keep their dict)."""
        data = asdict(self)
        data["zero_stages"] = list(self.zero_stages)
        if not self.microbatch_groups:
            data.pop("microbatch_groups")
        return data

    def split_layers(self, layer) -> int:
        """How many layers one occurrence of ``layer`` (a :class:`~phaze_env.workloads.graph.Layer`) counts for when the
        model's layers are split into pipeline stages and interleaved chunks: 1 for a transformer layer, 1 for the
        embedding and for the loss under ``embedding_loss_in_split``, else 0. The one rule the evaluator's layer chain
        (its ``transformer_layers``, which the placement DP's stage rules count) and the search's bounds (the ``v``
        they try) both apply."""
        return 1 if layer.is_transformer_layer or self.embedding_loss_in_split else 0

    def owner(self, cluster_name: str) -> str:
        """Who sets these rules, for a message: the stack's name, or the cluster's."""
        return f"the training stack {self.stack!r}" if self.stack else f"the training stack of cluster {cluster_name!r}"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlanRules:
        return cls(**{**data, "zero_stages": tuple(data.get("zero_stages", ZERO_STAGES))})


def _valid_recompute(text: str) -> bool:
    return text == "auto" or (bool(text) and all(mode in RECOMPUTE_MODES for mode in text.split("|")))


__all__ = ["RECOMPUTE_CHOICES", "RECOMPUTE_MODES", "ZERO_STAGES", "PlanRules", "PlanSpec", "PlanSyntaxError",
           "phaze_plan"]
