"""The one pricing path: what every operator of a layer costs on an accelerator inside a cluster.

:func:`price_ops` is the only place where the estimator's per-core terms (:mod:`phaze_env.hardware.estimator`)
meet the system: the tensor-parallel collectives are priced on the cluster's levels
(:meth:`~phaze_env.cluster.Cluster.collective_s`; a tensor group is ``t`` consecutive devices, so on a DGX it
stays on NVLink) and every device-time term is divided by the cluster's ``framework_efficiency`` (the
fraction of the kernel model's speed the software stack reaches; collectives are not slowed). The
evaluator (:func:`phaze_env.evaluate.evaluate` and its ILP-free bound), the time split of
:mod:`phaze_env.explain` and the exact search's vectorised bounds (:mod:`search.bounds`) all call it, so the
three can never disagree on what an operator costs.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Sequence

import numpy as np

from phaze_env.cluster import Cluster
from phaze_env.hardware.accelerator import Accelerator
from phaze_env.hardware.number_format import fp8_flags
from phaze_env.hardware.estimator import LatencyTable, TensorTerms, VectorTerms, latency_terms, shared_parameters
from phaze_env.workloads.graph import Op


@dataclass(frozen=True)
class PricedOps:
    """Operators priced on every configuration asked for: the latency table the schedules use and the
    terms it is made of (seconds already divided by the framework efficiency, as the table's)."""

    table: LatencyTable
    tensor: TensorTerms
    vector: VectorTerms

    def latencies_s(self, tc_index=0, vc_index=0) -> tuple[np.ndarray, np.ndarray]:
        """``(one_core, all_cores)`` latencies per op (:meth:`LatencyTable.latencies_s`)."""
        return self.table.latencies_s(tc_index, vc_index)


def collectives_s(ops: Sequence[Op], cluster: Cluster) -> np.ndarray:
    """Seconds of each communication op on the cluster's levels (0 for every other op)."""
    return np.array([cluster.collective_s(op.comm_kind, op.comm_bytes, op.comm_group) if op.unit == "comm" else 0.0
                     for op in ops], dtype=float)


def _slowed(terms, slowdown: float):
    """``terms`` with every time field (``*_s``) multiplied by ``slowdown`` (byte and tile counts unchanged)."""
    if slowdown == 1.0:
        return terms
    return replace(terms, **{f.name: getattr(terms, f.name) * slowdown for f in fields(terms) if f.name.endswith("_s")})


def price_ops(ops: Sequence[Op], accelerator: Accelerator, cluster: Cluster, *, tc_configs=None,
              vc_configs=None, layer: str | None = None) -> PricedOps:
    """Price ``ops`` on ``accelerator`` in ``cluster`` — or, with ``tc_configs``/``vc_configs`` (rows as in
    :func:`~phaze_env.hardware.estimator.latency_terms`), on every core configuration of a space that shares
    ``accelerator``'s clock, HBM, efficiencies and element size (its ``shared_parameters``). ``layer`` is the ops'
    layer name, required on an FP8 accelerator (:func:`~phaze_env.hardware.number_format.fp8_flags`).

    Every latency is homogeneous of degree one in the device-time terms (max, sums and the epilogue
    pipeline :func:`~phaze_env.hardware.estimator.pipelined_s`), so dividing the terms by the framework
    efficiency divides each operator's device latency by it exactly.
    """
    tc = [accelerator.tc_config] if tc_configs is None else tc_configs
    vc = [accelerator.vc_config] if vc_configs is None else vc_configs
    tc, vc, tensor, vector = latency_terms(ops, tc, vc, **shared_parameters(accelerator),
                                           fp8=fp8_flags(ops, layer, accelerator.number_format))
    slowdown = 1.0 / cluster.framework_efficiency
    tensor, vector = _slowed(tensor, slowdown), _slowed(vector, slowdown)
    return PricedOps(LatencyTable.from_terms(tc, vc, tensor, vector, collectives_s(ops, cluster)), tensor, vector)


__all__ = ["PricedOps", "collectives_s", "price_ops"]
