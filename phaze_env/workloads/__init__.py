"""Workloads: the model registry, tracing with ``torch.export`` and per-layer operator graphs."""

from phaze_env.workloads.build import TENSOR_WIDTHS, get_trace, model_graph, model_summary, prepare_graphs
from phaze_env.workloads.graph import Gemm, Layer, ModelGraph, Op, OpGraph
from phaze_env.workloads.registry import BUILTIN, Workload, custom_workload, get_workload, workload_names
from phaze_env.workloads.trace import TraceError

__all__ = [
    "BUILTIN", "Gemm", "Layer", "ModelGraph", "Op", "OpGraph", "TENSOR_WIDTHS", "TraceError", "Workload",
    "custom_workload", "get_trace", "get_workload", "model_graph", "model_summary", "prepare_graphs", "workload_names",
]
