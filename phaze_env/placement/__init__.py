"""Device placement by dynamic programming: tensor × context × pipeline × data parallelism under 1F1B memory.

Entry points: :func:`best_plan` (a chain of :class:`LayerCost` records), :func:`best_plan_dag` (a branching layer graph),
:func:`best_plan_multi` (best over tensor widths, microbatch sizes, context-parallel degrees and HBM sizes). Each
takes the layers and a :class:`Settings` (cluster, tensor width, context-parallel degree, microbatch, HBM, pinned
:class:`~phaze_env.plan_spec.PlanSpec`)
and returns a frozen :class:`Plan`. The model and the exactness argument are documented in
:mod:`phaze_env.placement.search`.
"""

from phaze_env.placement.api import best_plan, best_plan_dag, best_plan_multi, better
from phaze_env.placement.inputs import (OPTIMIZER_STATE_FACTORS, OPTIMIZERS, LayerCost, Settings,
                                       microbatches_per_replica)
from phaze_env.placement.plan import Plan
from phaze_env.placement.stages import TooManyDownsetsError

__all__ = [
    "OPTIMIZERS",
    "OPTIMIZER_STATE_FACTORS",
    "LayerCost",
    "Plan",
    "Settings",
    "TooManyDownsetsError",
    "best_plan",
    "best_plan_dag",
    "best_plan_multi",
    "better",
    "microbatches_per_replica",
]
