"""Device placement by dynamic programming: tensor × pipeline × data parallelism under 1F1B memory.

Entry points: :func:`best_plan` (a chain of layers), :func:`best_plan_dag` (a branching layer graph),
:func:`best_plan_multi` (best over tensor widths, microbatch sizes, recompute and HBM sizes). All return
a frozen :class:`Plan`. The model and the exactness argument are documented in
:mod:`phaze_env.placement.search`.
"""

from phaze_env.placement.api import best_plan, best_plan_dag, best_plan_multi
from phaze_env.placement.inputs import OPTIMIZER_STATE_FACTORS, microbatches_per_replica
from phaze_env.placement.plan import Plan
from phaze_env.placement.stages import TooManyDownsetsError

__all__ = [
    "OPTIMIZER_STATE_FACTORS",
    "Plan",
    "TooManyDownsetsError",
    "best_plan",
    "best_plan_dag",
    "best_plan_multi",
    "microbatches_per_replica",
]
