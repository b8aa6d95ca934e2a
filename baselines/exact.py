"""The reference every strategy is scored against: ``search.phaze``'s exact optimum, cached on disk.

:func:`exact_optimum` runs :func:`search.phaze.run_search` over the architecture space matching a
:class:`DesignSpace` (same knob lists and area window, :meth:`DesignSpace.arch_space`) with the space's
microbatch sizes, recompute settings and HBM capacities — so its throughput is the best any design of
the space can reach through :func:`phaze_env.design.evaluate_design`. The result is cached under a
content key of (workload, cluster, space, and the code that computes it), so a study pays for each exact search once.
"""

from __future__ import annotations

from typing import Any

from phaze_env.cache import DiskCache, code_key
from phaze_env.design import Design, DesignSpace
from phaze_env.evaluate import Cluster
from phaze_env.workloads import Workload, get_workload
from search.result import DesignResult

_EXACT = DiskCache("exact_optimum")


def exact_optimum(workload: str | Workload, cluster: Cluster | None, space: DesignSpace, *, workers: int = 1,
                  cache: bool = True) -> dict[str, Any]:
    """``{"throughput_samples_s", "design" (a Design), "evaluations", "elapsed_s", "exact", "result"}``;
    ``exact`` is False when the search could not prove its answer (:attr:`SearchResult.exact`), and then the
    answer is not cached."""
    from search.phaze import SearchConfig, run_search  # search imports baselines' dependencies, not vice versa

    workload = get_workload(workload)
    cluster = cluster if cluster is not None else Cluster()
    config = SearchConfig(workloads=(workload,), cluster=cluster, space=space)
    # the search's own signature: everything its answer depends on (its arguments and the search's code); this
    # module's code shapes the answer too
    key = code_key(__name__, "exact_optimum", config.signature)
    if cache and (hit := _EXACT.get(key)) is not None:
        return hit
    result = run_search(config, workers=workers)
    best = result.best[workload.name]
    design = design_of(best, space) if best is not None and best.feasible else None
    answer = {"throughput_samples_s": float(best.throughput_samples_s) if design else 0.0, "design": design,
              "evaluations": result.evaluations, "elapsed_s": result.elapsed_s, "exact": result.exact,
              "result": result.to_dict()}
    if cache and result.exact:  # an unproven optimum is not a reference to score strategies against for good
        _EXACT.put(key, answer)
    return answer


def design_of(best: DesignResult, space: DesignSpace) -> Design:
    """The design of ``space`` a search answer is: each knob from the answer's accelerator, its system (system
    space) or its plan (microbatch, recompute); ``ValueError`` if that design is not in the space."""
    plan = best.plan
    found = best.accelerator | (best.system or {}) | {"microbatch": plan.microbatch, "recompute": any(plan.recompute)}
    design = Design(**{name: found[name] for name in space.knobs} | {"hbm_gb": float(best.accelerator["hbm_gb"])})
    space.encode(design)
    return design
