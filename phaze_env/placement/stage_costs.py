"""The stage costs of one variant of a placement search: per recompute mode, every candidate stage's memory
(:class:`StageMemory`: fixed bytes, bytes per activation unit, how many units fit) and its time per microbatch for
each number of units in flight (:class:`StageCosts`), the matrices the DP (:mod:`phaze_env.placement.suffix_dp`)
compares and the plan record (:mod:`phaze_env.placement.record`) reports. The model they price is stated in
:mod:`phaze_env.placement.search`'s docstring."""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from functools import cached_property

import numpy as np

from phaze_env.placement.inputs import RERUN_COVER, LayerArrays, Settings
from phaze_env.placement.stages import StageTable


class Layout:
    """The stages a search's DP looks at, stored compactly: those that fit with one unit in flight under the loosest
    memory rule, row by row (row ``a``: the stages ``(a, b)`` by increasing ``b``, ``next_index`` their ``b``), one
    flat array for all rows; a per-stage quantity in this layout is a vector of the listed entries (for a chain, a
    band of stage lengths without padding)."""

    def __init__(self, listed: np.ndarray):
        self.size = len(listed)
        counts = listed.sum(axis=1)
        self.row_start = np.concatenate(([0], np.cumsum(counts)))  # row a: entries row_start[a] … row_start[a+1]−1
        rows, self.next_index = np.nonzero(listed)  # row-major: by row, then by b
        self._flat = rows * self.size + self.next_index  # into a raveled K × K
        self._nonempty = np.flatnonzero(counts)
        self._nonempty_below: dict[int, tuple[np.ndarray, int]] = {}  # rows -> (nonempty_rows, their entries' end)
        self._compacted: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id -> (matrix, compacted): compact_once

    def compact(self, matrix: np.ndarray) -> np.ndarray:
        """``matrix`` (K × K) at the listed stages."""
        return matrix.take(self._flat)

    def compact_once(self, matrix: np.ndarray) -> np.ndarray:
        """:meth:`compact` of a matrix that does not change, computed once per array (kept with it, so its id is
        never reused)."""
        found = self._compacted.get(id(matrix))
        if found is None:
            found = self._compacted[id(matrix)] = matrix, self.compact(matrix)
        return found[1]

    @property
    def entries(self) -> int:
        """How many stages are listed."""
        return len(self._flat)

    def dense(self, values: np.ndarray, fill) -> np.ndarray:
        """The K × K matrix of compact ``values`` at the listed stages, ``fill`` elsewhere (:meth:`compact`'s inverse)."""
        matrix = np.full(self.size * self.size, fill, dtype=np.asarray(values).dtype)
        matrix[self._flat] = values
        return matrix.reshape(self.size, self.size)

    def row(self, a: int) -> slice:
        """Row ``a``'s entries."""
        return slice(int(self.row_start[a]), int(self.row_start[a + 1]))

    def nonempty_rows(self, rows: int) -> tuple[np.ndarray, int]:
        """The rows among the first ``rows`` that list a stage, and where their entries end (once per ``rows``)."""
        found = self._nonempty_below.get(rows)
        if found is None:
            found = self._nonempty_below[rows] = (self._nonempty[:int(np.searchsorted(self._nonempty, rows))],
                                                  int(self.row_start[rows]))
        return found


class StageMemory:
    """The memory side of :class:`StageCosts` (it does not depend on the network): per recompute mode each
    stage's fixed bytes and bytes per activation unit, which stages fit with one unit, and how many
    units each stage holds per mode (``limits``)."""

    def __init__(self, table: StageTable, settings: Settings, state_factor: float, interleave: int,
                 transient_bytes: np.ndarray, buffer_bytes: np.ndarray, looser: StageMemory | None = None,
                 expert_extra: float = 0.0):
        self.settings = settings
        self.interleave = interleave
        self.modes = settings.plan.recompute_modes
        self._table, self._state_factor, self._transient_full = table, state_factor, transient_bytes
        self.buffer_bytes = buffer_bytes  # ZeRO-2/3's unsharded gradients and gathered weights, in every mode
        self._expert_extra = expert_extra  # an expert byte's state factor minus a dense one's (ZeRO over d·c/e)
        if looser is None:
            fits_once = np.zeros_like(table.valid)
            for mode in self.modes:
                fits_once |= self.full_fixed[mode] + self.full_per_unit[mode] <= settings.hbm_bytes
            self.layout = Layout(fits_once & table.valid)
            self.param_bytes = self.compact(table.param_bytes)
            self.expert_param_bytes = self.compact(table.expert_param_bytes)
            # What does not depend on the state factor, compacted once per layout (same interleave).
            self._transient = self.compact(transient_bytes)
            self._per_unit = np.stack([self.compact(self.full_per_unit[mode]) for mode in self.modes])
            self._buffers: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id -> (buffer bytes, compacted)
            self._groups: dict[int | None, tuple] = {}  # id(buffer bytes) -> (buffer bytes, _inputs')
            self._ungrouped: dict[int | None, int] = {}  # id(buffer bytes) -> memories priced without grouping
        else:  # a looser memory's layout lists a superset of the stages (those that do not fit get limit -1)
            self.layout, self.param_bytes = looser.layout, looser.param_bytes
            self.expert_param_bytes = looser.expert_param_bytes
            self._transient, self._per_unit, self._buffers = looser._transient, looser._per_unit, looser._buffers
            self._groups, self._ungrouped = looser._groups, looser._ungrouped
        self.next_index = self.layout.next_index
        buffers = self._compact_buffer(buffer_bytes) if buffer_bytes.any() else None
        # every entry's memory inputs, or one entry per distinct combination of them (each limit below is an
        # elementwise function of those inputs, so an entry's limit is its group's, bit for bit)
        params, experts, transient, per_unit, buffers, inverse = self._inputs(buffer_bytes, buffers)
        # compact(P·f + X) = compact(P)·f + compact(X), entry by entry
        state = params * state_factor
        if expert_extra:
            state = state + experts * expert_extra
        if buffers is not None:
            state = state + buffers
        fixed = {"none": state, "selective": state, "full": state + transient}
        # every mode in one elementwise call (``limits[i]``: mode ``modes[i]``)
        limits = _most_in_flight(np.stack([fixed[mode] for mode in self.modes]), per_unit, settings.hbm_bytes)
        # ``c_n`` changes with ``n`` only where ``n`` passes some ``limit + 1``: between two such
        # breakpoints it is the same matrix, so it is computed (and keyed) once per interval.
        self.breakpoints = _breakpoints(limits)  # the n > 1 at which some entry of c_n changes
        if inverse is not None:
            limits = limits.take(inverse, axis=1)
        self.limits = list(limits)
        # Two memories with one layout and equal limits give identical stage costs c_n for every n.
        self.signature = (id(self.layout), limits.tobytes())

    def _inputs(self, buffer_bytes: np.ndarray, buffers: np.ndarray | None) -> tuple:
        """``(params, experts, transient, per_unit, buffers, inverse)``: the compact memory inputs, or — when the
        stages repeat few distinct combinations of them (a chain of identical blocks has few distinct stage sizes) —
        one entry per distinct combination (equal bit patterns) and ``inverse``, each listed stage's combination
        (``None`` without grouping). Once per layout and buffer array, after a few memories priced without it."""
        key = None if buffers is None else id(buffer_bytes)  # the array is kept with its groups: its id is never reused
        found = self._groups.get(key)
        if found is None and self._ungrouped.get(key, 0) < _GROUP_AFTER:  # grouping pays off for many memories only
            self._ungrouped[key] = self._ungrouped.get(key, 0) + 1
            return self.param_bytes, self.expert_param_bytes, self._transient, self._per_unit, buffers, None
        if found is None:
            columns = [self.param_bytes, self.expert_param_bytes, self._transient, *self._per_unit]
            if buffers is not None:
                columns.append(buffers)
            bits = np.stack(columns).view(np.int64)
            code = bits[0].copy()  # a hash of each entry's bit patterns (wrapping), checked against them below
            for column in bits[1:]:
                code *= _HASH_MULTIPLIER
                code ^= column
            _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
            inverse = inverse.ravel()
            inputs = (self.param_bytes, self.expert_param_bytes, self._transient, self._per_unit, buffers, None)
            if 2 * len(first) <= bits.shape[1] and np.array_equal(bits[:, first].take(inverse, axis=1), bits):
                inputs = tuple(None if part is None else part[..., first] for part in inputs[:-1]) + (inverse,)
            found = self._groups[key] = buffer_bytes, inputs
        return found[1]

    def _compact_buffer(self, buffer_bytes: np.ndarray) -> np.ndarray:
        """``buffer_bytes`` (K × K) compacted once per array (the caller keeps one per ZeRO stage)."""
        key = id(buffer_bytes)
        if key not in self._buffers:  # the array is kept with its entries, so its id is never reused
            self._buffers[key] = buffer_bytes, self.compact(buffer_bytes)
        return self._buffers[key][1]

    @cached_property
    def full_fixed(self) -> dict[str, np.ndarray]:
        """Every stage's fixed bytes per recompute mode: weights, gradients, optimizer state, ZeRO buffers (+ the
        rebuilt layer's stash for full recompute)."""
        return self._fixed_at(_whole)

    @cached_property
    def state_bytes(self) -> np.ndarray:
        """Every stage's weights + gradients + optimizer state (dense bytes sharded over ``d·c``, experts over
        ``d·c/e``)."""
        return self._state_at(_whole)

    @cached_property
    def full_per_unit(self) -> dict[str, np.ndarray]:
        """Every stage's bytes per activation unit (``1/v`` of a microbatch) per recompute mode."""
        return self._per_unit_at(_whole)

    def _state_at(self, pick) -> np.ndarray:
        """:attr:`state_bytes` at the stages ``pick`` (a K × K matrix -> its entries wanted) selects."""
        return pick(self._table.param_bytes) * self._state_factor + pick(self._table.expert_param_bytes) * self._expert_extra

    def _fixed_at(self, pick) -> dict[str, np.ndarray]:
        """:attr:`full_fixed` at the stages ``pick`` selects (elementwise, so entry by entry the same numbers)."""
        state = self._state_at(pick) + pick(self.buffer_bytes)
        return {"none": state, "selective": state, "full": state + pick(self._transient_full)}

    def _per_unit_at(self, pick) -> dict[str, np.ndarray]:
        """:attr:`full_per_unit` at the stages ``pick`` selects."""
        table, settings, v = self._table, self.settings, self.interleave
        t = settings.tensor_width
        split = (1.0 - 1.0 / t) if settings.sequence_parallel else 0.0
        stash = pick(table.stash_bytes) - pick(table.replicated_stash_bytes) * split
        layer_inputs = pick(table.input_bytes) / t if settings.sequence_parallel else pick(table.input_bytes)
        return {"none": stash / v, "selective": (stash - pick(table.attention_stash_bytes)) / v, "full": layer_inputs / v}

    def stage_modes(self, pairs: list[tuple[int, int]], units: list[int]) -> list[str | None]:
        """The recompute mode of each stage ``pairs[k]`` with ``units[k]`` in flight (the fastest that fits: the same
        comparison as the DP, on the same numbers), ``None`` where none fits."""
        first, after = np.array(pairs).T
        pick = lambda matrix: matrix[first, after]  # noqa: E731
        fixed, per_unit, in_flight = self._fixed_at(pick), self._per_unit_at(pick), np.array(units)
        fits = [(fixed[mode] + in_flight * per_unit[mode] <= self.settings.hbm_bytes).tolist() for mode in self.modes]
        return [next((mode for mode, fit in zip(self.modes, column) if fit), None) for column in zip(*fits)]

    def compact(self, matrix: np.ndarray) -> np.ndarray:
        """``matrix`` (K × K) in the compact layout: its entries at the listed stages (:class:`Layout`)."""
        return self.layout.compact(matrix)


class StageCosts:
    """Stage time matrices ``c_n`` per number ``n`` of activation units in flight (``inf`` = does not fit).

    One instance per variant: the p2p time matrix (the network level the pipeline crosses), the exposed
    ZeRO-2/3 collectives per microbatch (``zero_comm_s``: one matrix, or one per recompute mode as
    :meth:`~phaze_env.placement.zero_traffic.ZeroTraffic.zero_comm_s` gives them, a rerun covering some of them)
    and a :class:`StageMemory` (the state factor —
    weights + gradients + optimizer state, ZeRO shards — and the interleave ``v``: a unit is ``1/v`` of a
    microbatch). ``full_*`` hold every stage's time, fixed and per-unit memory per recompute mode, so the
    plan report uses the very numbers the DP compared.

    Stored compactly (:class:`Layout`): only the stages ``(a, b)`` that fit with one unit in flight (the loosest
    rule), row by row.
    """

    def __init__(self, table: StageTable, p2p_s: np.ndarray, zero_comm_s: np.ndarray | Mapping[str, np.ndarray],
                 memory: StageMemory):
        self.memory = memory
        self.settings = memory.settings
        self.interleave = memory.interleave
        self.modes = memory.modes
        self.layout, self.next_index = memory.layout, memory.next_index
        self.param_bytes = memory.param_bytes
        self._table = table
        self.p2p_s = p2p_s
        self.zero_comm_s = (dict(zero_comm_s) if isinstance(zero_comm_s, Mapping)
                            else dict.fromkeys(RERUN_COVER, zero_comm_s))
        # full_time's entries at the listed stages, from the inputs' compacted once per layout (the same sums, entry
        # by entry, in the same order)
        times = self._times_at(self.layout.compact_once, self.modes)
        self._times = [times[mode] for mode in self.modes]
        self._limits = memory.limits
        self._breakpoints = memory.breakpoints
        self._cache: dict[int, np.ndarray] = {}

    @cached_property
    def full_time(self) -> dict[str, np.ndarray]:
        """Every stage's time per microbatch per recompute mode the plan may run (K × K; what the plan report and the
        pair DP read)."""
        return self._times_at(_whole, self.modes)

    def _times_at(self, pick, modes) -> dict[str, np.ndarray]:
        """:attr:`full_time` of ``modes`` at the stages ``pick`` (a K × K matrix -> its entries wanted) selects (the
        same sums, entry by entry, in the same order)."""
        table = self._table
        work = pick(table.fwd_s) + pick(table.bwd_s) + self.interleave * pick(self.p2p_s)
        plain: dict[int, np.ndarray] = {}  # per traffic matrix (modes whose rerun hides nothing share one)
        extra = {mode: None if field is None else getattr(table, field) for mode, field in RERUN_COVER.items()}
        times = {}
        for mode in modes:
            zero = self.zero_comm_s[mode]
            if id(zero) not in plain:
                plain[id(zero)] = work + pick(zero)
            times[mode] = plain[id(zero)] if extra[mode] is None else plain[id(zero)] + pick(extra[mode])
        return times

    def stage_times(self, pairs: list[tuple[int, int]], modes: list[str | None]) -> list[float]:
        """The time per microbatch of each stage ``pairs[k]`` in recompute mode ``modes[k]`` (``inf`` for ``None``)."""
        first, after = np.array(pairs).T
        times = self._times_at(lambda matrix: matrix[first, after], self.modes)  # noqa: E731
        return [math.inf if mode is None else float(times[mode][k]) for k, mode in enumerate(modes)]

    def canonical(self, n: int) -> int:
        """The smallest ``n' ≤ n`` with ``c_{n'} = c_n`` (exactly, entry by entry)."""
        interval = bisect.bisect_right(self._breakpoints, n)
        return int(self._breakpoints[interval - 1]) if interval else 1

    def time(self, n: int) -> np.ndarray:
        result = self._cache.get(n)
        if result is None:
            canonical = self.canonical(n)
            result = self._cache.get(canonical)
            if result is None:
                # the fastest fitting mode wins: the slowest mode's, overwritten by each faster one where it fits
                result = np.where(canonical <= self._limits[-1], self._times[-1], np.inf)
                for times, limit in zip(self._times[-2::-1], self._limits[-2::-1]):
                    np.copyto(result, times, where=canonical <= limit)
                self._cache[canonical] = result
            self._cache[n] = result
        return result


def _whole(matrix: np.ndarray) -> np.ndarray:
    """Every stage of a K × K matrix (the ``pick`` of :class:`StageMemory`'s full matrices)."""
    return matrix


_GROUP_AFTER = 3  # memories of a layout and buffer array priced entry by entry before their inputs are grouped
_HASH_MULTIPLIER = np.int64(0x100000001B3)  # FNV-1a's 64-bit prime: mixes each column into the entry's hash
_BINCOUNT_MOST = 1 << 16  # breakpoints up to this are counted (one pass), larger ones sorted


def _breakpoints(limits: np.ndarray) -> list[int]:
    """The sorted distinct ``limit + 1`` of the finite limits ≥ 1: the ``n`` at which some stage changes mode or stops
    fitting (limits are whole numbers, so a count of each is a sort when they are small)."""
    finite = limits[np.isfinite(limits) & (limits >= 1)]
    small = finite < _BINCOUNT_MOST
    counted = np.flatnonzero(np.bincount(finite[small].astype(np.int64) + 1)).tolist()
    if small.all():
        return counted
    return counted + [int(n) for n in np.unique(finite[~small] + 1).tolist()]


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
        wrong = finite & ((fixed_bytes + guess * per_microbatch_bytes > hbm_bytes)
                          | (fixed_bytes + (guess + 1) * per_microbatch_bytes <= hbm_bytes))
    index = np.flatnonzero(wrong)  # usually none: fix the few the division got wrong, until none is
    if index.size:
        guess = guess.copy()
        fixed, per = np.broadcast_to(fixed_bytes, guess.shape).ravel()[index], per_microbatch_bytes.ravel()[index]
        flat = guess.reshape(-1)
        while index.size:  # f + n·u is monotone in n (u > 0), so each entry settles after a step or two
            n = flat[index]
            n = np.where(fixed + n * per > hbm_bytes, n - 1, np.where(fixed + (n + 1) * per <= hbm_bytes, n + 1, n))
            flat[index] = n
            still = (fixed + n * per > hbm_bytes) | (fixed + (n + 1) * per <= hbm_bytes)
            index, fixed, per = index[still], fixed[still], per[still]
    return np.where(np.isnan(guess), -1.0, guess)


def layer_stash_bytes(settings: Settings, layers: LayerArrays, mode: str) -> np.ndarray:
    """Each layer's activation bytes per microbatch kept under recompute ``mode`` (sequence parallelism divides the
    part that is not tensor-parallel by ``t``)."""
    s = settings
    split = (1.0 - 1.0 / s.tensor_width) if s.sequence_parallel else 0.0
    stash = layers.stash_bytes - layers.replicated_stash_bytes * split
    if mode == "none":
        return stash
    if mode == "selective":
        return stash - layers.attention_stash_bytes
    # full: the rebuilt layer's stash. Its checkpointed input is left out (the footprint a layer alone needs is then
    # a lower bound): in a DAG only sources checkpoint their own ``input_bytes`` (a non-source's is what its
    # predecessors output)
    return stash

