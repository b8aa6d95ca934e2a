"""Exact search of the accelerator architecture (and its placement) with the highest training throughput.

``python -m search.phaze [--workload NAME ...] [--out DIR] ...`` searches a design space (PHAZE's by
default, ``docs/design.md``): architecture × microbatch size × recompute × HBM capacity, and returns the
**provably best** design (:mod:`search.exact` for the algorithm). Multi-workload mode optimises the mean
(or geometric mean) throughput of one design across workloads and reports each workload's own best too;
Pareto mode (``--objectives A,B[,C]``, e.g. ``throughput,carbon_per_token,area``) returns the exact front.

The package, by job: :mod:`search.config` (what is asked), :mod:`search.bounds` (upper bounds),
:mod:`search.exact` (the algorithm), :mod:`search.run` (orchestration), :mod:`search.result` (the one
result type), :mod:`search.outputs` (JSON, CSV, plot), :mod:`search.progress` (phases),
:mod:`search.store` (resumable SQLite record), :mod:`search.executors` (processes, Dask) and
:mod:`search.cli` (this command line). This module is the public entry point.
"""

import sys

from search.cli import main
from search.config import SearchConfig, aggregate
from search.result import DesignResult, SearchResult, SharedDesign
from search.run import run_search

__all__ = ["DesignResult", "SearchConfig", "SearchResult", "SharedDesign", "aggregate", "main", "run_search"]

if __name__ == "__main__":
    sys.exit(main())
