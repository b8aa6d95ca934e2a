"""The accelerator model: architecture value and presets, PHAZE's search space, area, per-op latency and energy.

``Accelerator`` / ``get_preset`` (:mod:`.accelerator`), ``ArchSpace`` (:mod:`.space`),
area constants (:mod:`.area`), the analytic systolic/vector/communication estimator (:mod:`.estimator`),
energy (:mod:`.energy`) and an optional ZigZag backend (:mod:`.zigzag_backend`, which imports the estimator;
nothing here imports it). ``docs/fidelity.md`` states what the model was checked against.
"""

from phaze_env.hardware.accelerator import PRESETS, TPUV4, Accelerator, UnknownPresetError, get_preset, preset_names
from phaze_env.hardware.energy import op_energy_j
from phaze_env.hardware.estimator import (
    DATAFLOWS,
    GemmEstimate,
    LatencyTable,
    graph_latencies_s,
    latency_table,
    matmul_estimate,
    matmul_latency_s,
    op_latency_s,
)
from phaze_env.hardware.space import ArchSpace, area_budget_mm2

__all__ = [
    "PRESETS", "TPUV4", "Accelerator", "UnknownPresetError", "get_preset", "preset_names",
    "ArchSpace", "area_budget_mm2",
    "DATAFLOWS", "GemmEstimate", "LatencyTable", "graph_latencies_s", "latency_table", "matmul_estimate",
    "matmul_latency_s", "op_latency_s", "op_energy_j",
]
