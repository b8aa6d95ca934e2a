"""Exact search of the best (data, pipeline) degrees and stage partition for one tensor width.

Model (1F1B / PipeDream-Flush, ``p`` stages, ``d`` replicas, ``m_r = ceil(B / (d·m))`` microbatches
per replica):

* stage time per microbatch ``c = Σfwd + Σbwd (+ Σfwd if it recomputes) + p2p sends``;
* the stage at index ``k`` holds ``n = min(p - k, m_r)`` microbatches in flight; its memory is
  ``weights + gradients + optimizer + activations`` with activations ``n·Σstash`` (stash) or
  ``n·input + Σstash`` (recompute: inputs per microbatch, one full stash transiently);
* ``T = (m_r + p - 1) · max_k c_k + max_k allreduce(gradient bytes of stage k, d)``.

Exactness. A stage recomputes only when stashing does not fit (recompute never shortens a stage and
never changes its gradient bytes), so each (stage, n) has one cost. Counting stages from the end
(``s = p - k``) makes ``n = min(s, m_r)`` independent of ``p``: one suffix DP
``f_s(a) = min_b max(c_{min(s, m_r)}(a, b), f_{s-1}(b))`` gives the min-max stage time for every ``p``.
For fixed ``(d, p)`` the objective ``M·C + A(P)`` (``C`` max stage time, ``P`` max stage parameter
bytes, ``A`` the increasing all-reduce time) is minimised exactly by an ε-constraint walk down the
(C, P) trade-off: the fastest partition, then the fastest one with a strictly smaller ``P``, and so on,
stopping when ``M·C`` plus the smallest possible all-reduce cannot beat the incumbent.
Among data-parallel degrees with the same ``m_r`` the smallest one dominates (same stages, fewer
replicas in the all-reduce, more devices left for stages), and ``(m_r, p)`` pairs are visited in order
of a lower bound on ``T`` so most are never solved.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from phaze_env.comm import allreduce_s
from phaze_env.placement.inputs import GRADIENT_FACTOR, LayerArrays, Settings
from phaze_env.placement.plan import Plan, infeasible
from phaze_env.placement.stages import StageTable

_LOWER_BOUND_SLACK = 1.0 - 1e-12  # keeps rounding in prefix sums from pruning an exact tie


class StageCosts:
    """Stage time matrices ``c_n`` per number ``n`` of microbatches in flight (``inf`` = does not fit).

    Stored compactly: row ``a`` lists only the stages ``(a, b)`` that fit with one microbatch in flight
    (the loosest rule: recompute cannot help at ``n = 1``), as ``next_index[a, w] = b`` padded with the
    sentinel ``K`` whose suffix value is always ``inf``. For a chain that is a band of stage lengths.
    """

    def __init__(self, table: StageTable, settings: Settings):
        self.settings = settings
        state_bytes = table.param_bytes * settings.state_factor
        fits_once = table.valid & (state_bytes + table.stash_bytes <= settings.hbm_bytes)
        width = max(1, int(fits_once.sum(axis=1).max()))
        order = np.argsort(~fits_once, axis=1, kind="stable")[:, :width]
        listed = np.take_along_axis(fits_once, order, axis=1)
        self.next_index = np.where(listed, order, table.size)

        def compact(matrix: np.ndarray) -> np.ndarray:
            return np.where(listed, np.take_along_axis(matrix, order, axis=1), np.inf)

        self.param_bytes = compact(table.param_bytes)
        self.plain_s = compact(table.fwd_s + table.bwd_s + table.p2p_s)
        self.recompute_s = self.plain_s + compact(table.fwd_s)
        state, stash = compact(state_bytes), compact(table.stash_bytes)
        self.stash_limit = _most_in_flight(state, stash, settings.hbm_bytes)
        self.recompute_limit = (_most_in_flight(state + stash, compact(table.input_bytes), settings.hbm_bytes)
                                if settings.allow_recompute else np.zeros_like(self.stash_limit))
        # ``c_n`` changes with ``n`` only where ``n`` passes some ``limit + 1``: between two such
        # breakpoints it is the same matrix, so it is computed (and keyed) once per interval.
        limits = np.concatenate((self.stash_limit.ravel(), self.recompute_limit.ravel()))
        limits = limits[np.isfinite(limits) & (limits >= 1)]
        self._breakpoints = np.unique(limits + 1).tolist()  # the n > 1 at which some entry of c_n changes
        self._cache: dict[int, np.ndarray] = {}

    def canonical(self, n: int) -> int:
        """The smallest ``n' ≤ n`` with ``c_{n'} = c_n`` (exactly, entry by entry)."""
        interval = bisect.bisect_right(self._breakpoints, n)
        return int(self._breakpoints[interval - 1]) if interval else 1

    def time(self, n: int) -> np.ndarray:
        n = self.canonical(n)
        if n not in self._cache:
            recomputed = np.where(n <= self.recompute_limit, self.recompute_s, np.inf)
            self._cache[n] = np.where(n <= self.stash_limit, self.plain_s, recomputed)
        return self._cache[n]


def _most_in_flight(fixed_bytes: np.ndarray, per_microbatch_bytes: np.ndarray, hbm_bytes: float) -> np.ndarray:
    """Largest ``n`` with ``fixed + n·per_microbatch ≤ hbm`` (``inf`` if unbounded, ``-1`` if none).

    The division is only a guess; it is corrected with the same comparison the plan report uses, so the
    DP and the report never disagree on a boundary case.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        guess = np.floor((hbm_bytes - fixed_bytes) / per_microbatch_bytes)
    guess = np.where(per_microbatch_bytes > 0, guess, np.where(fixed_bytes <= hbm_bytes, np.inf, -1.0))
    guess = np.where(np.isfinite(guess), np.maximum(guess, -1.0), guess)
    finite = np.isfinite(guess) & (guess >= 0)
    with np.errstate(invalid="ignore"):  # inf·0 where unbounded: masked out by ``finite``
        for _ in range(2):
            too_many = finite & (fixed_bytes + guess * per_microbatch_bytes > hbm_bytes)
            guess = np.where(too_many, guess - 1, guess)
            one_more = finite & (fixed_bytes + (guess + 1) * per_microbatch_bytes <= hbm_bytes)
            guess = np.where(one_more, guess + 1, guess)
    return np.where(np.isnan(guess), -1.0, guess)


def _add_stage(value: np.ndarray, next_index: np.ndarray, after: np.ndarray, rows: int) -> np.ndarray:
    """One DP step: best min-max over a stage ``(a, b)`` followed by the suffix from ``b`` (+ sentinel).

    Only the first ``rows`` downsets can still be split into the stages left (see ``SuffixDP.rows``);
    the others are ``inf`` without looking.
    """
    best = np.full(len(after), np.inf)
    np.minimum.reduce(np.maximum(value[:rows], after[next_index[:rows]]), axis=1, out=best[:rows])
    return best


def _finish(table: StageTable) -> np.ndarray:
    """``f_0`` (with the sentinel): zero stages cover only what is already complete."""
    done = np.full(table.size + 1, np.inf)
    done[table.full] = 0.0
    return done


def _trace(start: int, stages: int, next_index: np.ndarray, value_at, suffix) -> list[tuple[int, int]]:
    """Recover the stage pairs of a DP optimum (``value_at(s)``: matrix of the stage ``s`` from the end)."""
    pairs, a = [], start
    for s in range(stages, 0, -1):
        w = int(np.argmin(np.maximum(value_at(s)[a], suffix(s - 1)[next_index[a]])))
        pairs.append((a, int(next_index[a, w])))
        a = pairs[-1][1]
    return pairs


class SuffixDP:
    """The min-max stage-time DP, shared between all ``p`` and, for ``s ≤ m_r``, between all ``m_r``.

    For ``s > m_r`` the DP uses ``c_{m_r}`` at every remaining step. If ``m' = costs.canonical(m_r)``,
    then ``c_{min(k, m_r)} = c_{min(k, m')}`` for every ``k`` (both are ``c_k`` up to ``m'`` and the one
    matrix of the interval ``[m', m_r]`` after), so ``f^{m_r}_s = f^{m'}_s``: one capped DP per interval
    of constant ``c_n``, not one per distinct ``m_r`` (most ``m_r`` exceed every memory limit).
    """

    def __init__(self, table: StageTable, costs: StageCosts):
        self.table = table
        self.costs = costs
        self._shared = [_finish(table)]  # f_s with n = s
        self._capped: dict[int, list[np.ndarray]] = {}  # m_r -> f_s for s > m_r (n = m_r)
        # Downsets are sorted by size, so those with at least ``s`` layers left (the only ones that
        # ``s`` non-empty stages can start from) are a prefix; its length for each ``s``.
        left = len(table.member[0]) - table.member.sum(axis=1)
        self._rows = np.searchsorted(-left, -np.arange(len(left) + 1), side="right").tolist()

    def rows(self, s: int) -> int:
        """How many downsets (a prefix) have at least ``s`` layers outside them."""
        return self._rows[min(s, len(self._rows) - 1)]

    def suffix(self, m_r: int, s: int) -> np.ndarray:
        step = self.costs.next_index
        if s <= m_r:
            while len(self._shared) <= s:
                s_new = len(self._shared)
                self._shared.append(_add_stage(self.costs.time(s_new), step, self._shared[-1], self.rows(s_new)))
            return self._shared[s]
        m_r = self.costs.canonical(m_r)
        capped = self._capped.setdefault(m_r, [])
        while len(capped) < s - m_r:
            previous = capped[-1] if capped else self.suffix(m_r, m_r)
            capped.append(_add_stage(self.costs.time(m_r), step, previous, self.rows(m_r + len(capped) + 1)))
        return capped[s - m_r - 1]

    def min_stage_time(self, m_r: int, p: int) -> float:
        return float(self.suffix(m_r, p)[self.table.empty])

    def partition(self, m_r: int, p: int) -> list[tuple[int, int]]:
        return _trace(self.table.empty, p, self.costs.next_index, lambda s: self.costs.time(min(s, m_r)),
                      lambda s: self.suffix(m_r, s))

    def param_floor(self, deepest: int) -> np.ndarray:
        """Smallest possible largest-stage parameter bytes for ``p = 1 … deepest`` (stages that fit at ``n = 1``)."""
        value = np.where(np.isfinite(self.costs.time(1)), self.costs.param_bytes, np.inf)
        suffixes, optima = _finish(self.table), []
        for s in range(1, deepest + 1):
            suffixes = _add_stage(value, self.costs.next_index, suffixes, self.rows(s))
            optima.append(suffixes[self.table.empty])
        return np.array(optima)

    def constrained(self, m_r: int, p: int, value_for_n: Callable[[int], np.ndarray]):
        """A one-off suffix DP with other value matrices (one per ``n``); returns (optimum, pairs)."""
        values: dict[int, np.ndarray] = {}

        def value_at(s: int) -> np.ndarray:
            n = self.costs.canonical(min(s, m_r))
            if n not in values:
                values[n] = value_for_n(n)
            return values[n]

        suffixes = [_finish(self.table)]
        for s in range(1, p + 1):
            suffixes.append(_add_stage(value_at(s), self.costs.next_index, suffixes[-1], self.rows(s)))
        optimum = float(suffixes[p][self.table.empty])
        if math.isinf(optimum):
            return optimum, []
        return optimum, _trace(self.table.empty, p, self.costs.next_index, value_at, lambda s: suffixes[s])


@dataclass(frozen=True)
class _Shape:
    """Degrees of one candidate plan."""

    data_parallel: int
    stages: int
    microbatches: int  # per replica


class _Best:
    """The incumbent: smallest time per batch seen, with its shape and partition."""

    def __init__(self):
        self.time_s = math.inf
        self.shape: _Shape | None = None
        self.pairs: list[tuple[int, int]] = []

    def offer(self, time_s: float, shape: _Shape, pairs: list[tuple[int, int]]) -> None:
        if time_s < self.time_s:
            self.time_s, self.shape, self.pairs = time_s, shape, pairs


class PlacementSearch:
    """Best plan for one tensor width, microbatch size and HBM capacity (see module docstring)."""

    def __init__(self, layers: LayerArrays, table: StageTable, settings: Settings, max_stages: int):
        self.layers = layers
        self.table = table
        self.settings = settings
        self.max_stages = max_stages
        self.costs = StageCosts(table, settings)
        self.dp = SuffixDP(table, self.costs)

    def allreduce_s(self, param_bytes: float, data_parallel: int) -> float:
        s = self.settings
        return allreduce_s(param_bytes * GRADIENT_FACTOR, data_parallel, s.link_bandwidth_Bps, s.link_latency_s)

    def run(self) -> Plan:
        reason = self._obviously_infeasible()
        if reason:
            return infeasible(reason, tensor_width=self.settings.tensor_width, microbatch=self.settings.microbatch,
                              hbm_bytes=self.settings.hbm_bytes)
        best = _Best()
        for shape, bound_s in self._candidates():
            if bound_s >= best.time_s:
                break
            self._solve_shape(shape, best)
        if best.shape is None:
            return infeasible(
                f"no pipeline of at most {self.max_stages} stages fits {self.settings.hbm_bytes:.4g} B of HBM per device "
                f"with {self.settings.n_devices} devices at tensor width {self.settings.tensor_width}",
                tensor_width=self.settings.tensor_width, microbatch=self.settings.microbatch,
                hbm_bytes=self.settings.hbm_bytes,
            )
        return self._plan(best.shape, best.pairs)

    def _obviously_infeasible(self) -> str:
        s = self.settings
        if s.tensor_width > s.n_devices:
            return f"tensor width {s.tensor_width} exceeds the {s.n_devices} devices"
        # Recompute never helps a stage holding one microbatch, so this is each layer's smallest footprint.
        footprint = self.layers.param_bytes * s.state_factor + self.layers.stash_bytes
        worst = int(np.argmax(footprint - s.hbm_bytes))
        if footprint[worst] > s.hbm_bytes:
            return (f"layer {worst} alone needs {footprint[worst]:.4g} B (weights, gradients, {s.optimizer} state and "
                    f"one microbatch of activations) > {s.hbm_bytes:.4g} B of HBM at tensor width {s.tensor_width}")
        return ""

    def _candidates(self):
        """``(shape, lower bound on T)`` for every ``(m_r, p)``, smallest ``d`` per ``m_r``, by increasing bound.

        Stage-time bound: the DP with one microbatch in flight everywhere (the loosest memory rule, so
        ``f^{m_r}_p ≥ f^1_p``). All-reduce bound: the smallest
        largest-stage parameter bytes of any ``p``-stage partition (``self.param_floor``).
        """
        s = self.settings
        replicas = np.arange(1, s.n_devices // s.tensor_width + 1)
        microbatches = -(-s.global_batch // (replicas * s.microbatch))
        distinct, first = np.unique(microbatches, return_index=True)
        replicas = replicas[first]
        most_stages = np.minimum(self.max_stages, s.n_devices // (replicas * s.tensor_width))
        d = np.repeat(replicas, most_stages)
        m_r = np.repeat(distinct, most_stages)
        p = np.arange(1, len(d) + 1) - np.repeat(np.cumsum(most_stages) - most_stages, most_stages)
        deepest = int(p.max())
        loosest_s = np.array([self.dp.min_stage_time(1, stages) for stages in range(1, deepest + 1)])
        self.param_floor = self.dp.param_floor(deepest)
        bound_s = (m_r + p - 1) * loosest_s[p - 1] + self._allreduce_floor_s(d, self.param_floor[p - 1])
        keep = np.flatnonzero(np.isfinite(bound_s))
        d, p, m_r, bound_s = d[keep], p[keep], m_r[keep], bound_s[keep] * _LOWER_BOUND_SLACK
        order = np.lexsort((p, d, bound_s))
        for d_i, p_i, m_i, bound_i in zip(*(x[order].tolist() for x in (d, p, m_r, bound_s))):
            yield _Shape(d_i, p_i, m_i), bound_i

    def _allreduce_floor_s(self, data_parallel: np.ndarray, param_bytes: np.ndarray) -> np.ndarray:
        """``comm.allreduce_s`` elementwise (it is affine in the bytes for a fixed group)."""
        groups, inverse = np.unique(data_parallel, return_inverse=True)
        fixed = np.array([self.allreduce_s(1.0, g) for g in groups.tolist()])
        per_byte = np.array([self.allreduce_s(2.0, g) for g in groups.tolist()]) - fixed
        times = per_byte[inverse] * np.where(np.isfinite(param_bytes), param_bytes - 1.0, 0.0) + fixed[inverse]
        return np.where(param_bytes > 0, times, 0.0)

    def _solve_shape(self, shape: _Shape, best: "_Best") -> None:
        """Offer ``best`` the optimal partition of one shape, if it can beat it."""
        stage_time_s = self.dp.min_stage_time(shape.microbatches, shape.stages)
        if math.isinf(stage_time_s) or self._bound_s(shape, stage_time_s) >= best.time_s:
            return
        pairs = self.dp.partition(shape.microbatches, shape.stages)
        best.offer(self._time_per_batch_s(shape, pairs), shape, pairs)
        if self.allreduce_s(1.0, shape.data_parallel) > 0.0:
            self._pareto_walk(shape, pairs, best)

    def _bound_s(self, shape: _Shape, stage_time_s: float) -> float:
        """Lower bound on ``T`` of any partition of ``shape`` whose slowest stage takes ``stage_time_s`` or more."""
        floor_s = self.allreduce_s(self.param_floor[shape.stages - 1], shape.data_parallel)
        return ((shape.microbatches + shape.stages - 1) * stage_time_s + floor_s) * _LOWER_BOUND_SLACK

    def _pareto_walk(self, shape: _Shape, pairs: list[tuple[int, int]], best: "_Best") -> None:
        """Exact ``min M·C + A(P)``: repeatedly the fastest partition with a strictly smaller largest stage.

        The parameter bytes ``P_i`` of the partitions found strictly decrease and their stage times
        ``C_i`` do not; while ``P_i`` exceeds the optimum's ``P*``, ``C_{i+1} ≤ C*``, so some partition
        with ``C ≤ C*`` and ``P ≤ P*`` is reached. Stop when ``M·C_i`` + the smallest possible
        all-reduce cannot beat the incumbent, or when ``P_i`` is the smallest possible.
        """
        floor_bytes = self.param_floor[shape.stages - 1]
        params = self._max_params(pairs)
        while params > floor_bytes:
            smaller = self.costs.param_bytes < params
            stage_time_s, pairs = self.dp.constrained(
                shape.microbatches, shape.stages, lambda n: np.where(smaller, self.costs.time(n), np.inf)
            )
            if self._bound_s(shape, stage_time_s) >= best.time_s:
                return
            best.offer(self._time_per_batch_s(shape, pairs), shape, pairs)
            params = self._max_params(pairs)

    def _max_params(self, pairs: list[tuple[int, int]]) -> float:
        first, after = np.array(pairs).T
        return float(self.table.param_bytes[first, after].max())

    def _time_per_batch_s(self, shape: _Shape, pairs: list[tuple[int, int]]) -> float:
        """``(m_r + p - 1) · max stage time + all-reduce of the largest stage`` of a partition."""
        t, s = self.table, self.settings
        first, after = np.array(pairs).T
        in_flight = np.minimum(shape.stages - np.arange(shape.stages), shape.microbatches)
        params = t.param_bytes[first, after]
        plain = params * s.state_factor + in_flight * t.stash_bytes[first, after] <= s.hbm_bytes
        forward = t.fwd_s[first, after]
        times = forward + t.bwd_s[first, after] + t.p2p_s[first, after] + np.where(plain, 0.0, forward)
        slots = shape.microbatches + shape.stages - 1
        return slots * float(times.max()) + self.allreduce_s(float(params.max()), shape.data_parallel)

    def _plan(self, shape: _Shape, pairs: list[tuple[int, int]]) -> Plan:
        """Evaluate a partition into a full :class:`Plan` (the reported numbers are recomputed here)."""
        s, t = self.settings, self.table
        recompute, times, p2p, allreduce, memory = [], [], [], [], []
        for k, (a, b) in enumerate(pairs):
            n = min(shape.stages - k, shape.microbatches)
            params = float(t.param_bytes[a, b])
            plain = params * s.state_factor + n * t.stash_bytes[a, b] <= s.hbm_bytes
            recompute.append(not plain)
            times.append(float(t.fwd_s[a, b] + t.bwd_s[a, b] + t.p2p_s[a, b] + (0.0 if plain else t.fwd_s[a, b])))
            p2p.append(float(t.p2p_s[a, b]))
            allreduce.append(self.allreduce_s(params, shape.data_parallel))
            activations = n * t.stash_bytes[a, b] if plain else n * t.input_bytes[a, b] + t.stash_bytes[a, b]
            memory.append({
                "weights": params,
                "gradients": params * GRADIENT_FACTOR,
                "optimizer": params * s.optimizer_factor,
                "activations": float(activations),
            })
        for item in memory:
            item["total"] = item["weights"] + item["gradients"] + item["optimizer"] + item["activations"]
        slots = shape.microbatches + shape.stages - 1
        slowest = int(np.argmax(times))
        time_per_batch_s = slots * times[slowest] + max(allreduce)
        throughput = s.global_batch / time_per_batch_s
        devices = shape.data_parallel * shape.stages * s.tensor_width
        layers = tuple(t.layers_of(a, b) for a, b in pairs)
        return Plan(
            feasible=True,
            throughput_samples_s=throughput,
            time_per_batch_s=time_per_batch_s,
            tokens_s=None if s.seq_len is None else throughput * s.seq_len,
            mfu=_mfu(s, throughput, devices),
            tensor_width=s.tensor_width,
            data_parallel=shape.data_parallel,
            pipeline_stages=shape.stages,
            microbatch=s.microbatch,
            microbatches_per_replica=shape.microbatches,
            devices_used=devices,
            hbm_bytes=s.hbm_bytes,
            stage_bounds=tuple((min(group), max(group)) for group in layers),
            stage_layers=layers,
            recompute=tuple(recompute),
            stage_times_s=tuple(times),
            stage_p2p_s=tuple(p2p),
            stage_allreduce_s=tuple(allreduce),
            stage_memory_bytes=tuple(item["total"] for item in memory),
            bubble_fraction=(shape.stages - 1) / slots,
            memory_bytes=max(memory, key=lambda item: item["total"]),
            allreduce_s=max(allreduce),
            p2p_s=slots * p2p[slowest],
        )


def _mfu(settings: Settings, throughput_samples_s: float, devices: int) -> float | None:
    """Model FLOPs per second over the peak of the devices the plan uses."""
    if settings.model_flops_per_sample is None or settings.peak_flops is None:
        return None
    return settings.model_flops_per_sample * throughput_samples_s / (settings.peak_flops * devices)
