"""Analytic per-operator latency estimator (seconds) for PHAZE accelerators.

Tensor-core GEMMs — a systolic-array model with tiling:

* **Compute.** An array has ``R = tc_depth`` rows and ``C = tc_width`` columns. For a GEMM
  ``M×K @ K×N`` each dataflow maps two dimensions onto the array (``Sr`` onto rows, ``Sc`` onto
  columns) and streams the third (``T``), exactly as SCALE-Sim v1's analytical model (Samajdar et al.,
  2018): output-stationary ``(Sr, Sc, T) = (M, N, K)``, weight-stationary ``(K, N, M)``,
  input-stationary ``(K, M, N)``. One core takes ``⌈Sr/R⌉·⌈Sc/C⌉`` folds of ``2R + C + T − 2`` cycles
  (fill, stream, drain), times ``batch``. On ``n`` cores the folds that do not share a reduction
  (everything but the ``K`` folds) are dealt out to cores; weight- and input-stationary may also cut
  the streamed dimension (an output dimension there) into ``n_t`` chunks, each core then streaming
  ``⌈T/n_t⌉``. Splitting ``K`` across cores (which would need a cross-core reduction) is not modelled.
  The best dataflow and split are chosen per GEMM (ties: OS, WS, IS order) — deterministic.
* **Memory.** HBM traffic of a blocked GEMM depends on the on-chip buffer (shared by all cores): half of
  it holds a resident block, the other half double-buffers the streamed tiles. Three schedules, the
  cheapest feasible wins: a resident panel of A (``Tm`` rows × K; B is re-fetched ``⌈M/Tm⌉`` times), a
  resident panel of B (A re-fetched ``⌈N/Tn⌉`` times), or a resident fp32 output block ``Tm×Tn`` with
  both operands streamed (each re-fetched per block row/column). Traffic never drops below the
  compulsory ``e·(MK + KN + MN)`` nor below the operator's traced ``bytes_read + bytes_written``.
* **Latency** ``= max(compute, memory) + exposed``, where ``exposed`` is the first tile's load and the
  last tile's store, which double-buffering cannot hide. Compute runs at ``gemm_efficiency`` of the
  arrays' nominal rate and HBM at ``hbm_efficiency`` of its nominal bandwidth (calibrated
  :class:`~phaze_env.hardware.accelerator.Accelerator` parameters).

FP8 (``Accelerator.number_format == "fp8"``; which operators, and why, is
:mod:`phaze_env.hardware.number_format`, the one definition): an FP8 GEMM streams
``FP8_MAC_RATE`` times as many MACs per cycle, reads its operands in 1 byte (its output stays bf16), and is
preceded by the cast of its activation operand to FP8 — an HBM-bound kernel (``cast_s``, added in series: it
runs before the GEMM, not under it). Pricing FP8 needs each operator's layer (``layer=``), since the same
operator kinds stay in bf16 in the embedding and LM head.

Vector-core operators: ``⌈elements / (lanes · sublanes · cores)⌉ · cycles_per_element(kind)`` cycles,
bounded below by the HBM time of what does not fit on chip. The buffer is shared fairly among the cores
that may run at once: each of the ``num_tc + num_vc`` cores owns ``buffer / (num_tc + num_vc)``, so an op
on ``c`` vector cores keeps up to ``c`` shares of its operands (inputs read + output written) on chip
and only the excess spills to HBM.

Fused ``tc+vc`` operators (a GEMM with its elementwise epilogue): the epilogue consumes the GEMM's output
tile by tile while the next tile is computed, a two-stage pipeline over the GEMM's ``n`` output tiles of
``tc_depth × tc_width``, so the op takes ``max(T_gemm, T_epilogue) + min(T_gemm, T_epilogue)/n``
— the slower stage plus one tile of the faster one. The epilogue's operands are those tiles and stay on
chip. Communication operators: ring collectives of :mod:`phaze_env.comm` on the cluster's links.

Two latencies per operator, as PHAZE's ILP needs: on one core of its type (``parallel=False``) and split
over all cores of its type (``parallel=True``). :func:`latency_table` computes both for every operator
and every unique tensor-core ``(num_tc, tc_width, tc_depth, buffer_mb)`` and vector-core
``(num_vc, vc_width, vc_sublanes, buffer_mb, num_tc)`` configuration at once with numpy broadcasting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from phaze_env import comm
from phaze_env.hardware.accelerator import DEFAULT_CLOCK_HZ, MB_BYTES, TPUV4, Accelerator
from phaze_env.hardware.number_format import (FP8_BYTES, FP8_MAC_RATE, fp8_cast_bytes,
                                              fp8_flags)
from phaze_env.workloads.graph import Op, OpGraph

DATAFLOWS = ("os", "ws", "is")
ACCUMULATOR_BYTES = 4  # fp32 partial sums of an output block held on chip
RESIDENT_BUFFER_FRACTION = 0.5  # the rest double-buffers streamed tiles

# Cycles per element per vector lane, for each vector cost class the tracer emits (graph.VECTOR_KINDS; a
# test holds the two key sets equal). Basic arithmetic is one lane-cycle; the others count the passes and
# transcendental evaluations a straightforward implementation needs (softmax = max pass + subtract/exp +
# sum pass + scale; norm = mean + variance passes + normalise; GELU's tanh form ≈ 6 multiply-adds + tanh;
# exp/rsqrt ≈ 3 on a transcendental unit; loss = log-softmax + gather).
VECTOR_CYCLES_PER_ELEMENT: dict[str, float] = {
    "add": 1.0, "mul": 1.0, "relu": 1.0, "copy": 1.0, "gather": 1.0, "reduce": 1.0, "exp": 3.0,
    "silu": 4.0, "tanh": 4.0, "gelu": 8.0, "softmax": 5.0, "norm": 5.0, "loss": 6.0,
}
# An op without a vector kind is costed by its op kind.
_KIND_FALLBACK = {"elementwise": "add", "softmax": "softmax", "norm": "norm", "reduction": "reduce", "data": "copy"}


def _ceil_div(a, b):
    return -(-np.asarray(a) // np.asarray(b))


# --- tensor cores: compute -------------------------------------------------------------------------
def dataflow_dims(dataflow: str, m, k, n) -> tuple:
    """``(Sr, Sc, T)``: the dimensions a dataflow maps onto the array's rows and columns and the one it
    streams (SCALE-Sim v1): OS ``(M, N, K)``, WS ``(K, N, M)``, IS ``(K, M, N)``."""
    if dataflow == "os":
        return m, n, k
    if dataflow == "ws":
        return k, n, m
    if dataflow == "is":
        return k, m, n
    raise ValueError(f"unknown dataflow {dataflow!r}; expected one of {DATAFLOWS}")


def systolic_cycles(batch, m, k, n, rows, cols, cores, dataflow: str) -> np.ndarray:
    """Compute cycles of ``batch`` GEMMs ``m×k @ k×n`` on ``cores`` arrays of ``rows × cols`` (broadcasts)."""
    batch, m, k, n, rows, cols, cores = (np.asarray(x, dtype=np.int64) for x in (batch, m, k, n, rows, cols, cores))
    spatial_rows, spatial_cols, streamed = dataflow_dims(dataflow, m, k, n)
    row_folds, col_folds = _ceil_div(spatial_rows, rows), _ceil_div(spatial_cols, cols)
    if dataflow == "os":  # every fold is an independent output tile
        independent, serial, splits_stream = batch * row_folds * col_folds, 1, False
    else:  # K sits on the rows: its folds accumulate into the same outputs, one after another
        independent, serial, splits_stream = batch * col_folds, row_folds, True
    fill_drain = 2 * rows + cols - 2
    best = _ceil_div(independent, cores) * serial * (fill_drain + streamed)
    if splits_stream:
        chunks, most_cores = 2, int(np.max(cores))
        while chunks <= most_cores:
            groups = cores // chunks
            candidate = _ceil_div(independent, np.maximum(groups, 1)) * serial * (fill_drain + _ceil_div(streamed, chunks))
            best = np.where(groups >= 1, np.minimum(best, candidate), best)
            chunks *= 2
    return best


def best_systolic_cycles(batch, m, k, n, rows, cols, cores) -> tuple[np.ndarray, np.ndarray]:
    """Fewest compute cycles over the dataflows, and the index into ``DATAFLOWS`` that achieves it."""
    per_dataflow = np.stack(np.broadcast_arrays(*(systolic_cycles(batch, m, k, n, rows, cols, cores, d) for d in DATAFLOWS)))
    choice = np.argmin(per_dataflow, axis=0)
    return np.take_along_axis(per_dataflow, choice[None], axis=0)[0], choice


# --- tensor cores: memory --------------------------------------------------------------------------
def gemm_traffic_bytes(batch: int, m: int, k: int, n: int, buffer_bytes, bytes_per_element: int) -> np.ndarray:
    """HBM bytes moved by ``batch`` blocked GEMMs for each buffer capacity in ``buffer_bytes``."""
    e = float(bytes_per_element)
    resident = np.asarray(buffer_bytes, dtype=np.float64) * RESIDENT_BUFFER_FRACTION
    mk, kn, mn = float(m) * k, float(k) * n, float(m) * n
    inf = np.full(resident.shape, np.inf)

    panel_rows = np.minimum(m, np.floor(resident / (e * k)))
    a_resident = np.where(panel_rows >= 1, e * (mk + kn * np.ceil(m / np.maximum(panel_rows, 1)) + mn), inf)
    panel_cols = np.minimum(n, np.floor(resident / (e * k)))
    b_resident = np.where(panel_cols >= 1, e * (kn + mk * np.ceil(n / np.maximum(panel_cols, 1)) + mn), inf)

    best = np.minimum(a_resident, b_resident)
    for block_rows in _block_sizes(m):
        block_cols = np.minimum(n, np.floor(resident / (ACCUMULATOR_BYTES * block_rows)))
        streamed = e * (mk * np.ceil(n / np.maximum(block_cols, 1)) + kn * np.ceil(m / block_rows) + mn)
        best = np.minimum(best, np.where(block_cols >= 1, streamed, inf))
    return batch * best


def operand_bytes(bytes_per_element: int, fp8: bool) -> int:
    """Bytes per GEMM input element: FP8 operands are 1 byte, otherwise the accelerator's element size."""
    return FP8_BYTES if fp8 else bytes_per_element


def gemm_hbm_bytes(batch: int, m: int, k: int, n: int, buffer_bytes, bytes_per_element: int, fp8: bool = False) -> np.ndarray:
    """HBM bytes of ``batch`` blocked GEMMs (:func:`gemm_traffic_bytes`) in bf16 or with FP8 operands, whose output
    is still written at ``bytes_per_element`` (TE's FP8 GEMMs output bf16)."""
    e_in = operand_bytes(bytes_per_element, fp8)
    return gemm_traffic_bytes(batch, m, k, n, buffer_bytes, e_in) + float(batch) * m * n * (bytes_per_element - e_in)


def gemm_op_traffic_floor_bytes(op: Op, bytes_per_element: int, fp8: bool = False) -> float:
    """The traced traffic of a tensor-core ``op``; with FP8 operands its reads shrink to 1 byte per element."""
    if not fp8:
        return op_traffic_floor_bytes(op, bytes_per_element)
    return op.bytes_read * FP8_BYTES / bytes_per_element + op.bytes_written


def fp8_cast_s(op: Op, hbm_Bps: float, sequence_parallel: bool = False) -> float:
    """Seconds of the HBM-bound cast (with amax) of ``op``'s activation operand to FP8 before its GEMMs
    (:func:`~phaze_env.hardware.number_format.fp8_cast_bytes`)."""
    return fp8_cast_bytes(op, sequence_parallel) / hbm_Bps


def _block_sizes(extent: int) -> list[int]:
    sizes, size = [], 1
    while size < extent:
        sizes.append(size)
        size *= 2
    return sizes + [extent]


def exposed_bytes(m, k, n, rows, cols, bytes_per_element: int) -> np.ndarray:
    """Bytes of the first tiles loaded and the last output tile stored: not hidden by double-buffering."""
    first_in = np.minimum(m, cols) * np.minimum(k, rows) + np.minimum(k, rows) * np.minimum(n, cols)
    last_out = np.minimum(m, rows) * np.minimum(n, cols)
    return bytes_per_element * (first_in + last_out).astype(np.float64)


# --- vector cores ----------------------------------------------------------------------------------
def vector_cycles_per_element(op: Op) -> float:
    """Lane-cycles per element for ``op``'s vector work (by ``vector_kind``, else by op ``kind``)."""
    if op.vector_parts and op.vector_elements:  # fused vector work: the element-weighted mean cost
        return sum(n * _kind_cycles(kind, op.kind) for kind, n in op.vector_parts) / op.vector_elements
    return _kind_cycles(op.vector_kind, op.kind)


def _kind_cycles(vector_kind: str, op_kind: str) -> float:
    kind = vector_kind.lower()
    if kind in VECTOR_CYCLES_PER_ELEMENT:
        return VECTOR_CYCLES_PER_ELEMENT[kind]
    if not kind and op_kind in _KIND_FALLBACK:
        return VECTOR_CYCLES_PER_ELEMENT[_KIND_FALLBACK[op_kind]]
    raise ValueError(f"no vector cost for kind {vector_kind!r} (op kind {op_kind!r}); known: {', '.join(VECTOR_CYCLES_PER_ELEMENT)}")


def vector_cycles(elements: int, cycles_per_element: float, elements_per_cycle, cores) -> np.ndarray:
    """Cycles to process ``elements`` on ``cores`` vector cores of ``elements_per_cycle`` (lanes × sublanes)."""
    steps = _ceil_div(int(elements), np.asarray(elements_per_cycle, dtype=np.int64) * np.asarray(cores, dtype=np.int64))
    return steps * cycles_per_element


def buffer_share_bytes(buffer_mb, num_tc, num_vc, cores) -> np.ndarray:
    """Buffer bytes an op on ``cores`` vector cores may keep: ``cores`` fair shares of ``num_tc + num_vc``."""
    return np.asarray(buffer_mb, dtype=np.float64) * MB_BYTES * np.asarray(cores) / (np.asarray(num_tc) + np.asarray(num_vc))


def spilled_bytes(footprint_bytes: float, share_bytes) -> np.ndarray:
    """Bytes of an op's operands that do not fit in its buffer share and go to HBM."""
    return np.maximum(float(footprint_bytes) - np.asarray(share_bytes, dtype=np.float64), 0.0)


def output_tiles(batch, m, n, rows, cols) -> np.ndarray:
    """Output tiles of ``rows × cols`` a GEMM produces: the steps of its epilogue pipeline."""
    return np.asarray(batch) * _ceil_div(m, rows) * _ceil_div(n, cols)


def pipelined_s(gemm_s, epilogue_s, tiles):
    """Two-stage pipeline over ``tiles`` tiles: the slower stage plus one tile of the faster one.

    With only one stage (the other 0) this is that stage's time, so it also combines unfused ops.
    """
    gemm_s, epilogue_s = np.asarray(gemm_s), np.asarray(epilogue_s)
    return np.maximum(gemm_s, epilogue_s) + np.minimum(gemm_s, epilogue_s) / np.maximum(tiles, 1)


def op_traffic_floor_bytes(op: Op, bytes_per_element: int) -> float:
    """The traced traffic of ``op``; for a vector op without byte counts, read + write of its elements."""
    traced = float(op.bytes_read + op.bytes_written)
    if traced == 0 and op.unit == "vc":
        return 2.0 * bytes_per_element * op.vector_elements
    return traced


# --- communication ---------------------------------------------------------------------------------
def comm_latency_s(op: Op, link_bandwidth_Bps: float | None, link_latency_s: float = 0.0) -> float:
    if op.comm_bytes == 0 or op.comm_group <= 1:
        return 0.0
    if link_bandwidth_Bps is None:
        raise ValueError(f"communication op {op.name!r} needs link_bandwidth_Bps (the cluster's interconnect)")
    return comm.collective_s(op.comm_kind, op.comm_bytes, op.comm_group, link_bandwidth_Bps, link_latency_s)


# --- the table -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LatencyTable:
    """One-core and all-cores latencies of ``ops`` for every tensor-core and vector-core configuration.

    ``tc_*_s[i, t]`` is op ``i``'s tensor-core part (GEMMs with their memory time) on configuration
    ``tc_configs[t] = (num_tc, tc_width, tc_depth, buffer_mb)`` and ``tc_tiles[i, t]`` the output tiles its
    epilogue pipelines over; ``vc_*_s[i, v]`` its vector-core part on
    ``vc_configs[v] = (num_vc, vc_width, vc_sublanes, buffer_mb, num_tc)``; ``comm_s[i]`` its
    communication time. An operator's latency on an architecture combines the parts
    (:meth:`latencies_s`): the tensor and vector parts overlap tile by tile (:func:`pipelined_s`), the
    communication part adds; parts that do not apply to an operator's unit are zero.
    """

    tc_configs: np.ndarray
    vc_configs: np.ndarray
    tc_one_s: np.ndarray
    tc_all_s: np.ndarray
    tc_tiles: np.ndarray
    vc_one_s: np.ndarray
    vc_all_s: np.ndarray
    comm_s: np.ndarray
    comm_overlap: tuple[tuple[int, tuple[int, ...], int], ...] = ()
    """Collectives hidden behind GEMMs by chunking (:func:`chunked_exposed_s`): ``(comm op, the GEMM ops whose output
    it reduces, the ring's steps)``; their latency is the exposed part only. Empty: every collective adds in full."""

    @classmethod
    def from_terms(cls, tc_configs, vc_configs, tensor: TensorTerms, vector: VectorTerms, comm_s,
                   comm_overlap=()) -> LatencyTable:
        """The table of :func:`tensor_terms` / :func:`vector_terms` and per-op communication seconds."""
        return cls(tc_configs, vc_configs, tensor.one_s, tensor.all_s, tensor.tiles, vector.one_s, vector.all_s,
                   np.asarray(comm_s, dtype=float), tuple(comm_overlap))

    def latencies_s(self, tc_index, vc_index) -> tuple[np.ndarray, np.ndarray]:
        """``(one_core, all_cores)`` latencies per op for configuration indices (ints or index arrays)."""
        one, all_cores = self.device_latencies_s(tc_index, vc_index)
        comm_s = self.exposed_comm_s(all_cores)
        return one + comm_s, all_cores + comm_s

    def device_latencies_s(self, tc_index, vc_index) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`latencies_s` without the communication part."""
        one = pipelined_s(self.tc_one_s[:, tc_index], self.vc_one_s[:, vc_index], self.tc_tiles[:, tc_index])
        all_cores = pipelined_s(self.tc_all_s[:, tc_index], self.vc_all_s[:, vc_index], self.tc_tiles[:, tc_index])
        return one, all_cores

    def exposed_comm_s(self, all_cores: np.ndarray) -> np.ndarray:
        """Per op (rows as ``all_cores``, the ops' device latencies without communication), its communication time
        as it adds to the op's latency: in full, or for an overlapped collective (``comm_overlap``) the part its
        GEMMs' chunks (at their all-cores latency) do not hide."""
        comm_s = np.broadcast_to(self.comm_s if all_cores.ndim == 1 else self.comm_s[:, None], all_cores.shape).copy()
        for op, gemms, steps in self.comm_overlap:
            comm_s[op] = chunked_exposed_s(self.comm_s[op], all_cores[list(gemms)].sum(axis=0), steps)
        return comm_s


def chunked_exposed_s(comm_s, gemm_s, steps: int):
    """Exposed seconds of a collective of ``comm_s`` overlapped with the GEMM of ``gemm_s`` that produces (or consumes)
    it, both split into ``steps`` chunks and pipelined: chunk ``k``'s transfer runs while chunk ``k+1`` is computed.
    Transformer Engine's userbuffers overlap (Megatron-Core ``--tp-comm-overlap``; Wang et al. 2022, "Overlap
    Communication with Dependent Computation via Decomposition in Large Deep Learning Models", ASPLOS '23, §3) splits
    a tensor-parallel all-gather or reduce-scatter into the ring's ``t`` steps. The pipeline ends one transfer chunk
    after the last GEMM chunk when transfers are the shorter stage, or one GEMM chunk after the transfers start when
    they are the longer: ``exposed = c/t + (t−1)/t · max(0, c − g)`` (``c`` when ``t = 1``, nothing to pipeline)."""
    comm_s, gemm_s = np.asarray(comm_s, dtype=float), np.asarray(gemm_s, dtype=float)
    if steps < 1:
        raise ValueError(f"a chunked overlap needs at least one step, got {steps}")
    return comm_s / steps + (steps - 1) / steps * np.maximum(0.0, comm_s - gemm_s)


@dataclass(frozen=True)
class TensorTerms:
    """Tensor-core terms ``(ops, T)`` of :func:`tensor_terms` (seconds, bytes, tiles)."""

    compute_one_s: np.ndarray
    compute_all_s: np.ndarray
    memory_s: np.ndarray
    exposed_s: np.ndarray
    traffic_bytes: np.ndarray
    tiles: np.ndarray
    cast_s: np.ndarray  # FP8 casts of the activation operand before the GEMMs (0 for bf16 ops)
    eager_s: np.ndarray | float = 0.0  # unfused elementwise kernels run in series (phaze_env.pricing; 0: fused)

    @property
    def one_s(self) -> np.ndarray:
        return np.maximum(self.compute_one_s, self.memory_s) + self.exposed_s + self.cast_s + self.eager_s

    @property
    def all_s(self) -> np.ndarray:
        return np.maximum(self.compute_all_s, self.memory_s) + self.exposed_s + self.cast_s + self.eager_s


@dataclass(frozen=True)
class VectorTerms:
    """Vector-core terms ``(ops, V)`` of :func:`vector_terms` (seconds, bytes)."""

    compute_one_s: np.ndarray
    compute_all_s: np.ndarray
    hbm_one_s: np.ndarray
    hbm_all_s: np.ndarray
    spill_one_bytes: np.ndarray
    spill_all_bytes: np.ndarray

    @property
    def one_s(self) -> np.ndarray:
        return np.maximum(self.compute_one_s, self.hbm_one_s)

    @property
    def all_s(self) -> np.ndarray:
        return np.maximum(self.compute_all_s, self.hbm_all_s)


def tensor_terms(ops, tc_configs, hbm_Bps: float, clock_hz: float, gemm_efficiency: float, e: int,
                 fp8: Sequence[bool] | None = None, sequence_parallel: bool = False) -> TensorTerms:
    """Tensor-core terms ``(ops, T)``: compute on unique (cores, width, depth), memory on unique buffers.

    ``hbm_Bps`` is the achievable (efficiency-scaled) bandwidth; ``fp8[i]``: op ``i`` runs in FP8;
    ``sequence_parallel``: replicated FP8 cast operands are cast on ``1/t`` of the tokens and gathered (:func:`fp8_cast_s`).
    """
    fp8 = (False,) * len(ops) if fp8 is None else tuple(fp8)
    cores_dims, dims_index = np.unique(tc_configs[:, :3], axis=0, return_inverse=True)
    buffers_mb, buffer_index = np.unique(tc_configs[:, 3], return_inverse=True)
    dims_index, buffer_index = dims_index.ravel(), buffer_index.ravel()
    num_tc, cols, rows = cores_dims[:, 0], cores_dims[:, 1], cores_dims[:, 2]
    buffer_bytes = buffers_mb * MB_BYTES
    shape = (len(ops), len(tc_configs))
    terms = {name: np.zeros(shape) for name in TensorTerms.__dataclass_fields__}
    cache: dict = {}
    for i, op in enumerate(ops):
        if op.unit not in ("tc", "tc+vc") or not op.gemms:
            continue
        in_fp8 = fp8[i]
        rate = FP8_MAC_RATE if in_fp8 else 1.0
        cycles_one = np.zeros(len(cores_dims))
        cycles_all = np.zeros(len(cores_dims))
        traffic = np.zeros(len(buffers_mb))
        exposed = np.zeros(len(cores_dims))
        tiles = np.zeros(len(cores_dims))
        for g in op.gemms:
            key = (g.as_tuple(), in_fp8)
            if key not in cache:
                b, m, k, n = g.as_tuple()
                cache[key] = (
                    best_systolic_cycles(b, m, k, n, rows, cols, 1)[0] / rate,
                    best_systolic_cycles(b, m, k, n, rows, cols, num_tc)[0] / rate,
                    gemm_hbm_bytes(b, m, k, n, buffer_bytes, e, in_fp8),
                    exposed_bytes(m, k, n, rows, cols, operand_bytes(e, in_fp8)),
                    output_tiles(b, m, n, rows, cols),
                )
            c1, ca, tr, ex, tl = cache[key]
            cycles_one += c1
            cycles_all += ca
            traffic += tr
            exposed += ex
            tiles += tl
        traffic = np.maximum(traffic, gemm_op_traffic_floor_bytes(op, e, in_fp8))
        terms["compute_one_s"][i] = cycles_one[dims_index] / (clock_hz * gemm_efficiency)
        terms["compute_all_s"][i] = cycles_all[dims_index] / (clock_hz * gemm_efficiency)
        terms["traffic_bytes"][i] = traffic[buffer_index]
        terms["memory_s"][i] = terms["traffic_bytes"][i] / hbm_Bps
        terms["exposed_s"][i] = (exposed / hbm_Bps)[dims_index]
        terms["tiles"][i] = tiles[dims_index]
        terms["cast_s"][i] = fp8_cast_s(op, hbm_Bps, sequence_parallel) if in_fp8 else 0.0
    return TensorTerms(**terms)


def vector_terms(ops, vc_configs, hbm_Bps: float, clock_hz: float, e: int) -> VectorTerms:
    """Vector-core terms ``(ops, V)``: vector ops bounded by what spills to HBM; fused epilogues compute only."""
    num_vc, lanes, sublanes, buffer_mb, num_tc = (vc_configs[:, j] for j in range(5))
    per_cycle = lanes * sublanes
    share_one = buffer_share_bytes(buffer_mb, num_tc, num_vc, 1)
    share_all = buffer_share_bytes(buffer_mb, num_tc, num_vc, num_vc)
    shape = (len(ops), len(vc_configs))
    terms = {name: np.zeros(shape) for name in VectorTerms.__dataclass_fields__}
    for i, op in enumerate(ops):
        if op.unit not in ("vc", "tc+vc"):
            continue
        cost = vector_cycles_per_element(op)
        terms["compute_one_s"][i] = vector_cycles(op.vector_elements, cost, per_cycle, 1) / clock_hz
        terms["compute_all_s"][i] = vector_cycles(op.vector_elements, cost, per_cycle, num_vc) / clock_hz
        if op.unit == "vc":  # an epilogue's operands are its GEMM's output tiles, on chip
            footprint = op_traffic_floor_bytes(op, e)
            terms["spill_one_bytes"][i] = spilled_bytes(footprint, share_one)
            terms["spill_all_bytes"][i] = spilled_bytes(footprint, share_all)
            terms["hbm_one_s"][i] = terms["spill_one_bytes"][i] / hbm_Bps
            terms["hbm_all_s"][i] = terms["spill_all_bytes"][i] / hbm_Bps
    return VectorTerms(**terms)


def _as_config_array(configs, width: int, name: str) -> np.ndarray:
    array = np.asarray(configs, dtype=np.int64)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape[1] != width:
        raise ValueError(f"{name} must have {width} columns, got shape {np.shape(configs)}")
    if (array <= 0).any():
        raise ValueError(f"{name} entries must be positive")
    return array


def latency_terms(
    ops: Sequence[Op],
    tc_configs,
    vc_configs,
    *,
    hbm_bandwidth_Bps: float = TPUV4.hbm_bandwidth_Bps,
    clock_hz: float = DEFAULT_CLOCK_HZ,
    bytes_per_element: int = TPUV4.bytes_per_element,
    gemm_efficiency: float = TPUV4.gemm_efficiency,
    hbm_efficiency: float = TPUV4.hbm_efficiency,
    fp8: Sequence[bool] | None = None,
    sequence_parallel: bool = False,
) -> tuple[np.ndarray, np.ndarray, TensorTerms, VectorTerms]:
    """The checked configuration arrays and the tensor- and vector-core terms of every op on every configuration.

    ``tc_configs``: ``(T, 4)`` rows ``(num_tc, tc_width, tc_depth, buffer_mb)``; ``vc_configs``: ``(V, 5)``
    rows ``(num_vc, vc_width, vc_sublanes, buffer_mb, num_tc)`` (e.g. from :attr:`ArchSpace.tc_configs` /
    ``vc_configs``). HBM bandwidth and its efficiency, clock, GEMM efficiency and element size are common
    to all configurations (:func:`shared_parameters` of an :class:`Accelerator`); ``fp8`` flags the ops that run
    in FP8 (:func:`~phaze_env.hardware.number_format.fp8_flags`; default none) and ``sequence_parallel`` casts their
    replicated operands on ``1/t`` of the tokens (:func:`tensor_terms`). Compute terms are
    evaluated once per unique ``(num_tc, width, depth)`` and traffic once per unique buffer size, then
    broadcast.
    """
    if not hbm_bandwidth_Bps > 0 or not clock_hz > 0:
        raise ValueError("hbm_bandwidth_Bps and clock_hz must be positive")
    if not 0 < gemm_efficiency <= 1 or not 0 < hbm_efficiency <= 1:
        raise ValueError("gemm_efficiency and hbm_efficiency must be in (0, 1]")
    tc = _as_config_array(tc_configs, 4, "tc_configs")
    vc = _as_config_array(vc_configs, 5, "vc_configs")
    ops = tuple(ops)
    hbm_Bps = hbm_bandwidth_Bps * hbm_efficiency
    if fp8 is not None and len(fp8) != len(ops):
        raise ValueError(f"fp8 has {len(fp8)} flags for {len(ops)} ops")
    tensor = tensor_terms(ops, tc, hbm_Bps, clock_hz, gemm_efficiency, bytes_per_element, fp8, sequence_parallel)
    vector = vector_terms(ops, vc, hbm_Bps, clock_hz, bytes_per_element)
    return tc, vc, tensor, vector


CUBLAS_TILE = (256, 128)
"""Output tile of each thread block of a large bf16 GEMM on A100: the largest tile of cuBLAS's Ampere tensor-core
kernels (named ``ampere_bf16_s16816gemm_bf16_256x128_…``; CUTLASS's default Ampere bf16 tile is 128×256 × 64). An
*assumption* for every GEMM :func:`wave_quantisation` prices, range 128×128 to 256×128: which kernel runs for a shape
is cuBLAS's unpublished heuristic. With 128×128 the GPT 175B/1T quantisation ratio is 1.042 instead of 1.060
(``experiments.table5_scaling``)."""


def wave_quantisation(m: int, n: int, sms: int, tile: tuple[int, int] = CUBLAS_TILE, batch: int = 1) -> float:
    """Fraction of the SM-waves of ``batch`` ``m × n`` GEMM outputs that do work, ``tiles / (sms · ⌈tiles / sms⌉)``:
    a GPU runs a GEMM as one thread block per output tile, ``sms`` blocks at a time, so the last wave leaves
    ``sms·⌈tiles/sms⌉ − tiles`` SMs idle (NVIDIA, "Matrix Multiplication Background User's Guide", Deep Learning
    Performance documentation, §"Wave quantization"). The tile's long side goes along the output's long side."""
    big, small = max(m, n), min(m, n)
    tiles = batch * -(-big // tile[0]) * -(-small // tile[1])
    return tiles / (sms * -(-tiles // sms))


def gemm_wave_factors(ops: Sequence[Op], sms: int) -> np.ndarray:
    """Per op, the FLOP-weighted :func:`wave_quantisation` of its GEMMs on ``sms`` SMs (1 for an op without GEMMs):
    what its tensor-core compute time is divided by on a GPU whose GEMM library tiles outputs in :data:`CUBLAS_TILE`
    blocks (``Stack.gemm_wave_sms``)."""
    factors = np.ones(len(ops))
    for i, op in enumerate(ops):
        if op.gemm_flops:
            factors[i] = sum(g.flops * wave_quantisation(g.m, g.n, sms, batch=g.batch) for g in op.gemms) / op.gemm_flops
    return factors


def _fused_kernel_terms(ops: Sequence[Op], fused: Sequence[int], tc_configs, tensor: TensorTerms,
                        vector: VectorTerms, accelerator: Accelerator, efficiency: float) -> tuple[TensorTerms, VectorTerms]:
    """The terms of a fused attention kernel's operators (:mod:`phaze_env.attention` gives their fused form): their
    kept GEMM FLOPs at ``efficiency`` of each configuration's bf16 peak (the kernel's sustained rate, its softmax
    included: the vector part is 0), on one core and on all; HBM traffic only for what is not an ``s × s`` score (``bytes_read`` of the fused
    op), instead of the blocked-GEMM traffic that would write its score tiles. Every other operator is left as it is."""
    rows = np.asarray(fused)
    tc = np.asarray(tc_configs, dtype=np.float64)
    core_flops_per_s = 2.0 * tc[:, 1] * tc[:, 2] * accelerator.clock_hz * efficiency  # one core, (T,)
    gemm_flops = np.array([float(ops[i].gemm_flops) for i in fused])[:, None]
    traffic = np.array([float(ops[i].bytes_read) for i in fused])[:, None]
    t = {name: np.array(getattr(tensor, name)) for name in ("compute_one_s", "compute_all_s", "traffic_bytes",
                                                              "memory_s", "exposed_s")}
    t["compute_one_s"][rows] = gemm_flops / core_flops_per_s
    t["compute_all_s"][rows] = gemm_flops / (core_flops_per_s * tc[:, 0])
    t["traffic_bytes"][rows] = np.where(gemm_flops > 0, traffic, 0.0)
    t["memory_s"][rows] = t["traffic_bytes"][rows] / accelerator.effective_hbm_bandwidth_Bps
    t["exposed_s"][rows] = 0.0
    v = {name: np.array(getattr(vector, name)) for name in ("compute_one_s", "compute_all_s", "hbm_one_s", "hbm_all_s",
                                                              "spill_one_bytes", "spill_all_bytes")}
    for array in v.values():
        array[rows] = 0.0
    return replace(tensor, **t), replace(vector, **v)


def _slowed(terms, slowdown: float):
    """``terms`` with every time field (``*_s``) multiplied by ``slowdown`` (byte and tile counts unchanged)."""
    if slowdown == 1.0:
        return terms
    return replace(terms, **{f.name: getattr(terms, f.name) * slowdown for f in fields(terms) if f.name.endswith("_s")})


def priced_table(ops: Sequence[Op], accelerator: Accelerator, tc_configs, vc_configs, comm_s, *,
                 fp8: Sequence[bool] | None = None, sequence_parallel: bool = False, comm_overlap=(),
                 fused: Sequence[int] = (), fused_efficiency: float = 0.0, eager_bytes: np.ndarray | None = None,
                 slowdown: float = 1.0, wave_sms: int = 0) -> tuple[LatencyTable, TensorTerms, VectorTerms]:
    """The latency table of ``ops`` on every configuration of ``tc_configs``/``vc_configs`` (rows as in
    :func:`latency_terms`) sharing ``accelerator``'s clock, HBM, efficiencies and element size, and the terms it is made
    of, as a training stack runs them (:func:`phaze_env.pricing.price_ops` says which stack field sets which argument):
    the ops of ``fused`` as one fused attention kernel at ``fused_efficiency`` of the bf16 peak
    (:func:`_fused_kernel_terms`); ``eager_bytes`` (per op, or None) the HBM traffic its unfused elementwise kernels add
    in series, at the achieved HBM bandwidth; ``wave_sms`` above 0: every tensor-core operator's compute divided by its
    GEMMs' wave quantisation on that many SMs (:func:`gemm_wave_factors`; a fused attention kernel's rate is its own);
    every time term (``*_s``) multiplied by ``slowdown`` (the stack's
    ``1 / framework_efficiency``); ``comm_s`` each op's communication seconds and ``comm_overlap`` the collectives
    hidden behind their GEMMs (:class:`LatencyTable`). ``fp8`` and ``sequence_parallel`` as in :func:`latency_terms`."""
    tc, vc, tensor, vector = latency_terms(ops, tc_configs, vc_configs, **shared_parameters(accelerator), fp8=fp8,
                                           sequence_parallel=sequence_parallel)
    if wave_sms:
        factors = gemm_wave_factors(ops, wave_sms)[:, None]
        tensor = replace(tensor, compute_one_s=tensor.compute_one_s / factors,
                         compute_all_s=tensor.compute_all_s / factors)
    if len(fused):
        tensor, vector = _fused_kernel_terms(ops, fused, tc, tensor, vector, accelerator, fused_efficiency)
    if eager_bytes is not None:
        eager_s = eager_bytes / accelerator.effective_hbm_bandwidth_Bps
        tensor = replace(tensor, eager_s=np.repeat(eager_s[:, None], len(tc), axis=1))
    tensor, vector = _slowed(tensor, slowdown), _slowed(vector, slowdown)
    return LatencyTable.from_terms(tc, vc, tensor, vector, comm_s, comm_overlap), tensor, vector


def latency_table(
    ops: Sequence[Op],
    tc_configs,
    vc_configs,
    *,
    link_bandwidth_Bps: float | None = None,
    link_latency_s: float = 0.0,
    **shared,
) -> LatencyTable:
    """Both latencies of every op on every configuration (:func:`latency_terms`; ``shared``: its keywords),
    collectives on one flat ring of ``link_bandwidth_Bps`` links. The evaluator prices operators on a
    :class:`~phaze_env.cluster.Cluster` instead: :func:`phaze_env.pricing.price_ops`."""
    tc, vc, tensor, vector = latency_terms(ops, tc_configs, vc_configs, **shared)
    comm_s = np.array([comm_latency_s(op, link_bandwidth_Bps, link_latency_s) if op.unit == "comm" else 0.0 for op in ops])
    return LatencyTable.from_terms(tc, vc, tensor, vector, comm_s)


def shared_parameters(acc: Accelerator) -> dict[str, float]:
    """The :func:`latency_table` keywords every configuration of a space shares, taken from ``acc``."""
    return dict(hbm_bandwidth_Bps=acc.hbm_bandwidth_Bps, clock_hz=acc.clock_hz, bytes_per_element=acc.bytes_per_element,
                gemm_efficiency=acc.gemm_efficiency, hbm_efficiency=acc.hbm_efficiency)


def accelerator_table(ops: Sequence[Op], acc: Accelerator, *, link_bandwidth_Bps: float | None = None, link_latency_s: float = 0.0,
                      layer: str | None = None) -> LatencyTable:
    """:func:`latency_table` for one accelerator (one tensor-core and one vector-core configuration); ``layer``
    (the ops' layer name) is required on an FP8 accelerator."""
    return latency_table(ops, [acc.tc_config], [acc.vc_config], **shared_parameters(acc),
                         fp8=fp8_flags(ops, layer, acc.number_format),
                         link_bandwidth_Bps=link_bandwidth_Bps, link_latency_s=link_latency_s)


# --- plain entry points ----------------------------------------------------------------------------
@dataclass(frozen=True)
class GemmEstimate:
    """The terms of one GEMM's latency on ``cores`` tensor cores."""

    latency_s: float
    compute_s: float
    memory_s: float
    exposed_s: float
    compute_cycles: int
    traffic_bytes: float
    dataflow: str


def matmul_estimate(acc: Accelerator, M: int, K: int, N: int, *, batch: int = 1, cores: int = 1) -> GemmEstimate:
    """All terms of ``batch`` GEMMs ``M×K @ K×N`` on ``cores`` of ``acc``'s tensor cores — a Linear layer's GEMM:
    in FP8 (operands only, without the cast of ``A``) when ``acc.number_format`` is ``"fp8"``."""
    for name, value in (("M", M), ("K", K), ("N", N), ("batch", batch), ("cores", cores)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if cores > acc.num_tc:
        raise ValueError(f"cores={cores} exceeds the accelerator's {acc.num_tc} tensor cores")
    fp8 = acc.number_format == "fp8"
    cycles, choice = best_systolic_cycles(batch, M, K, N, acc.tc_depth, acc.tc_width, cores)
    traffic = float(gemm_hbm_bytes(batch, M, K, N, np.array([acc.buffer_bytes]), acc.bytes_per_element, fp8)[0])
    compute_s = float(cycles) / (acc.clock_hz * acc.gemm_efficiency * (FP8_MAC_RATE if fp8 else 1.0))
    memory_s = traffic / acc.effective_hbm_bandwidth_Bps
    exposed_s = float(exposed_bytes(M, K, N, acc.tc_depth, acc.tc_width, operand_bytes(acc.bytes_per_element, fp8))
                      ) / acc.effective_hbm_bandwidth_Bps
    return GemmEstimate(max(compute_s, memory_s) + exposed_s, compute_s, memory_s, exposed_s, int(cycles), traffic, DATAFLOWS[int(choice)])


def matmul_latency_s(acc: Accelerator, M: int, K: int, N: int, *, batch: int = 1, cores: int = 1) -> float:
    """Seconds for ``batch`` GEMMs ``(M×K) @ (K×N)`` on ``cores`` tensor cores of ``acc`` (ZigZag's
    estimate of the same: :func:`phaze_env.hardware.zigzag_backend.matmul_latency_s`)."""
    return matmul_estimate(acc, M, K, N, batch=batch, cores=cores).latency_s


def op_latency_s(op: Op, acc: Accelerator, *, parallel: bool = False, link_bandwidth_Bps: float | None = None,
                 link_latency_s: float = 0.0, layer: str | None = None) -> float:
    """Seconds for ``op`` on one core of its type (``parallel=False``) or split over all of them.

    ``link_bandwidth_Bps``/``link_latency_s`` describe the cluster's interconnect; they are required
    only for communication operators. ``layer`` (the op's layer name) is required on an FP8 accelerator.
    """
    table = accelerator_table([op], acc, link_bandwidth_Bps=link_bandwidth_Bps, link_latency_s=link_latency_s, layer=layer)
    one, all_cores = table.latencies_s(0, 0)
    return float(all_cores[0] if parallel else one[0])


def graph_latencies_s(graph: OpGraph, acc: Accelerator, *, link_bandwidth_Bps: float | None, link_latency_s: float = 0.0,
                      layer: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(one_core, all_cores)`` latency arrays (seconds), one entry per op of ``graph`` (of layer ``layer``)."""
    return accelerator_table(graph.ops, acc, link_bandwidth_Bps=link_bandwidth_Bps, link_latency_s=link_latency_s,
                             layer=layer).latencies_s(0, 0)
