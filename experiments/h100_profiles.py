"""One modern stack on H100? Every H100 run on its profile, on Megatron-Core's and on Megatron-LM's:
``python -m experiments.h100_profiles``.

Issue 28 item 6 asks for *one* modern stack profile on H100, fitted to one published run and held out on the others.
The validation runs every H100 run of Megatron-Core's model — DGX Cloud's GPT-3 175B in bf16 and FP8 (NeMo 24.05),
NeMo 24.07's Llama 2 FP8 rows, NeMo 24.03's long-sequence rows, Megatron-Core's Mixtral runs and the 2025–26
Megatron-Bridge runs — on ``megatron-core`` (its overlaps, sequence parallelism's per-token kernels, the fused attention
and the host, efficiency fitted to ``bridge2509-llama3-70b-fp8-64``), and the MLPerf GPT-3 submissions (NeMo's own
GPT model of 2023) on ``megatron-lm``, whose H100 efficiency (:data:`~phaze_env.stacks.MEGATRON_H100_EFFICIENCY`,
fitted to ``mlperf31-gpt3-175b-fp8-768``) stands for the compute net of the communication the stack hides, with
eager attention (``experiments.validation_cases.MEGATRON_CORE_MODEL_RUNS``: the rule, from the runs' configs).

This predicts every H100 dense case with its published plan on its own profile, on ``megatron-core`` and on
``megatron-lm`` (each at its own fitted efficiency) and the FP8-over-bf16 speed-up of the GPT-3 pairs on both, then, for
the GPT-3 FP8 rows on ``megatron-core``, what each of the profile's structures moves when switched off alone (the
candidates for its FP8 speed-up). A diagnostic: no profile and no case is changed (``tests/test_h100_profiles.py``;
what it found: docs/fidelity.md, 'One H100 profile').
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from experiments import scale_loss
from experiments.gap_figures import MLPERF_PAIR
from experiments.validation_cases import H100_CASES, ValidationCase, get_case
from experiments.validation_fit import (error_with, evaluation_with, fit_efficiency, metric_with, predict,
                                        published_time_s)
from experiments.validation_stats import TOLERANCE
from phaze_env.cli import OneLineParser
from phaze_env.stacks import (MEGATRON_CORE_HOST_OP_S, MEGATRON_CORE_MAIN_GRAD_BYTES, STACKS,
                              TE_FUSED_ATTENTION_H100_EFFICIENCY)

MODERN = "megatron-core"
"""The profile issue 28 item 6 asks every modern H100 run to share."""
LEGACY = "megatron-lm"
"""Megatron-LM 2021-22's structure with an H100 efficiency of its own (the MLPerf rows' profile)."""

STRUCTURES: tuple[tuple[str, dict], ...] = (
    ("TP comm exposed", {"tp_comm_overlap": False}),
    ("DP comm exposed", {"dp_comm_overlap": False}),
    ("SP kernels on all tokens", {"sequence_parallel_kernels": False}),
    ("no host cost", {"host_op_s": 0.0}),
    ("no weight-gradient accumulation", {"main_grad_accumulation_bytes": 0.0}),
)
"""``megatron-core``'s structures that ``megatron-lm`` lacks, each switched off alone (a cluster field and its value):
the first four hide or remove a cost, the last adds one (the weight gradients' accumulation per microbatch)."""

DP_EXPOSED = {"dp_comm_overlap": False}
"""``megatron-core`` with its data-parallel reduce-scatter and all-gather priced after the flush, as ``megatron-lm``
prices its all-reduce: where the runs' published scale behaviour sits (docs/fidelity.md, 'One H100 profile?')."""

LADDER: tuple[tuple[str, dict], ...] = (
    (LEGACY, {}),
    ("+ fused attention", {"attention_efficiency": TE_FUSED_ATTENTION_H100_EFFICIENCY}),
    ("+ SP kernels on s/t tokens", {"sequence_parallel_kernels": True}),
    ("+ megatron-core's plan rules", {"plan_rules": STACKS[MODERN].plan_rules}),
    ("+ TP comm overlap", {"tp_comm_overlap": True}),
    ("+ DP comm overlap", {"dp_comm_overlap": True}),
    ("+ host cost", {"host_op_s": MEGATRON_CORE_HOST_OP_S}),
    ("+ weight-gradient accumulation", {"main_grad_accumulation_bytes": MEGATRON_CORE_MAIN_GRAD_BYTES}),
)
"""From ``megatron-lm`` to ``megatron-core``'s structure one field at a time, cumulatively, at ``megatron-lm``'s
fitted efficiency (the last step then differs from ``megatron-core`` by the efficiency alone); the cases are moved onto
``megatron-lm`` first (:func:`ladder`)."""



@dataclass(frozen=True)
class Row:
    case: ValidationCase
    own_error: float | None  # on the case's validation profile
    modern_error: float | None  # on megatron-core, at its fitted H100 efficiency
    legacy_error: float | None = None  # on megatron-lm, at its fitted H100 efficiency
    exposed_error: float | None = None  # on megatron-core with its data-parallel collectives exposed (DP_EXPOSED)


def on_profile(case: ValidationCase, stack: str) -> ValidationCase:
    """``case`` on training stack ``stack`` (sequence parallelism kept as published: every TP > 1 case runs it)."""
    return replace(case, stack=stack)


def rows(cases: tuple[ValidationCase, ...] = H100_CASES) -> list[Row]:
    """Each predictable case's error on its own profile and on :data:`MODERN`."""
    out = []
    for case in cases:
        if case.requires:
            continue
        own = predict(case).error
        modern = own if case.stack == MODERN else predict(on_profile(case, MODERN)).error
        legacy = own if case.stack == LEGACY else predict(on_profile(case, LEGACY)).error
        exposed = error_with(on_profile(case, MODERN), **DP_EXPOSED)
        out.append(Row(case, own, modern, legacy, exposed))
    return out


def _speedup(published: float, fp8_error: float | None, bf16_error: float | None) -> float | None:
    """The FP8-over-bf16 speed-up two predictions give, from the published one and their errors (None if either
    is missing)."""
    return None if fp8_error is None or bf16_error is None else published * (1 + fp8_error) / (1 + bf16_error)


def fp8_speedups(found: list[Row]) -> list[tuple[str, float, float | None, float | None]]:
    """Each GPT-3 FP8 row with its bf16 twin (same GPUs): the published FP8-over-bf16 speed-up and the one predicted
    on ``megatron-lm`` and on ``megatron-core`` (the published metric is sequences/s: the ratio of the two predictions'
    rates)."""
    by_name = {row.case.name: row for row in found}
    pairs = []
    for row in found:
        twin = by_name.get(row.case.name.replace("-fp8-", "-bf16-"))
        if row.case.number_format != "fp8" or not row.case.name.startswith("dgxc-") or twin is None:
            continue
        published = row.case.published / twin.case.published
        pairs.append((row.case.name, published, _speedup(published, row.legacy_error, twin.legacy_error),
                      _speedup(published, row.modern_error, twin.modern_error)))
    return pairs


def structure_errors(case: ValidationCase) -> dict[str, float]:
    """``case`` on :data:`MODERN` with each of :data:`STRUCTURES` switched off alone (the efficiency kept)."""
    moved = on_profile(case, MODERN)
    return {label: error_with(moved, **fields) for label, fields in STRUCTURES}


def ladder(bf16: ValidationCase, fp8: ValidationCase) -> list[tuple[str, float, float, float]]:
    """The bf16/FP8 pair moved onto ``megatron-lm`` with :data:`LADDER`'s structures added one by one: each step's
    label, the two errors and the predicted FP8-over-bf16 speed-up."""
    bf16, fp8 = on_profile(bf16, LEGACY), on_profile(fp8, LEGACY)
    fields: dict = {}
    steps = []
    for label, more in LADDER:
        fields.update(more)
        bf16_rate, fp8_rate = metric_with(bf16, **fields), metric_with(fp8, **fields)
        steps.append((label, bf16_rate / bf16.published - 1, fp8_rate / fp8.published - 1, fp8_rate / bf16_rate))
    return steps


def calibrated_on(calibration: ValidationCase, cases: tuple[ValidationCase, ...] = H100_CASES
                  ) -> tuple[float, dict[str, float | None]]:
    """:data:`MODERN`'s H100 efficiency fitted to ``calibration`` (moved onto it) instead of its own calibration run,
    and every predictable case's error on :data:`MODERN` at that efficiency (``None``: not predictable there). The
    same one-run fit as the profile's (:func:`~experiments.validation_fit.fit_efficiency`), another run: which run a
    single profile could be fitted to, and what it then leaves."""
    efficiency = fit_efficiency(on_profile(calibration, MODERN))
    errors: dict[str, float | None] = {}
    for case in cases:
        if case.requires:
            continue
        try:
            errors[case.name] = error_with(on_profile(case, MODERN), framework_efficiency=efficiency)
        except ValueError:  # infeasible on the modern profile's structure
            errors[case.name] = None
    return efficiency, errors


def part_per_step(names: tuple[str, str] = MLPERF_PAIR) -> dict[str, float]:
    """The part of the step that does not shrink with the microbatches (:func:`scale_loss.split_by_microbatches`) of
    two runs of one plan at two microbatch counts: published, and on :data:`MODERN` with its data-parallel collectives
    hidden as it prices them and exposed (:data:`DP_EXPOSED`), in seconds; ``share``: where the published one lies
    between the two (0: as hidden, 1: as exposed), linearly."""
    cases = [on_profile(get_case(name), MODERN) for name in names]

    def fixed_s(times) -> float:
        return scale_loss.split_cases(cases, tuple(times))[0]

    published = fixed_s(published_time_s(c) for c in cases)
    hidden = fixed_s(evaluation_with(c).plan.time_per_batch_s for c in cases)
    exposed = fixed_s(evaluation_with(c, **DP_EXPOSED).plan.time_per_batch_s for c in cases)
    return {"published": published, "hidden": hidden, "exposed": exposed,
            "share": (published - hidden) / (exposed - hidden)}


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1%}"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.h100_profiles", description=__doc__.split("\n\n")[0])
    parser.add_argument("--structures", default="dgxc-gpt3-175b-fp8-512,dgxc-gpt3-175b-bf16-512", metavar="A,B",
                        help="cases whose megatron-core structures are switched off one at a time (default the GPT-3 "
                             "pair at 512 GPUs)")
    parser.add_argument("--calibrate", metavar="CASE",
                        help=f"also fit {MODERN}'s H100 efficiency to CASE and predict every H100 run at it")
    args = parser.parse_args(argv)
    try:
        structure_cases = [get_case(name) for name in args.structures.split(",") if name]
        calibration = get_case(args.calibrate) if args.calibrate else None
    except ValueError as exc:
        parser.error(str(exc).split(";")[0] + " (the cases: experiments/validation_cases.py)")
    found = rows()
    print(f"| case | format | own profile | error | on {MODERN} | on {MODERN}, DP exposed | on {LEGACY} |\n"
          "|---|---|---|---|---|---|---|")
    for row in found:
        print(f"| {row.case.name} | {row.case.number_format} | {row.case.stack} | {_pct(row.own_error)} | "
              f"{_pct(row.modern_error)} | {_pct(row.exposed_error)} | {_pct(row.legacy_error)} |")
    for label, pick in (("own profiles", lambda r: r.own_error), (MODERN, lambda r: r.modern_error),
                        (f"{MODERN}, DP exposed", lambda r: r.exposed_error), (LEGACY, lambda r: r.legacy_error)):
        errors = [pick(r) for r in found if pick(r) is not None]
        within = sum(abs(e) <= TOLERANCE for e in errors)
        print(f"\n{label}: mean absolute error {statistics.fmean(abs(e) for e in errors):.1%} over {len(errors)} "
              f"cases, {within} within ±{TOLERANCE:.0%} (calibration rows included)")
    print(f"\n| FP8 case | published FP8/bf16 | on {LEGACY} | on {MODERN} |\n|---|---|---|---|")
    for name, published, own, modern in fp8_speedups(found):
        print(f"| {name} | {published:.3f}× | {own:.3f}× | {modern:.3f}× |")
    pair = {case.number_format: case for case in structure_cases}
    if set(pair) == {"bf16", "fp8"}:
        published = pair["fp8"].published / pair["bf16"].published
        print(f"\n{pair['fp8'].name} over {pair['bf16'].name}, from megatron-lm to megatron-core's structure "
              f"(published speed-up {published:.3f}×):\n\n| step | bf16 | FP8 | FP8/bf16 |\n|---|---|---|---|")
        for label, bf16_error, fp8_error, speedup in ladder(pair["bf16"], pair["fp8"]):
            print(f"| {label} | {_pct(bf16_error)} | {_pct(fp8_error)} | {speedup:.3f}× |")
    split = part_per_step()
    print(f"\n{' and '.join(MLPERF_PAIR)}, the part per step on {MODERN}: {split['hidden']:.3f} s with the data-parallel "
          f"collectives hidden, {split['exposed']:.3f} s exposed, published {split['published']:.3f} s: "
          f"{split['share']:.0%} of the way to exposed")
    modern = {row.case.name: row.modern_error for row in found}
    for case in structure_cases:
        error = modern[case.name] if case.name in modern else predict(on_profile(case, MODERN)).error
        print(f"\n{case.name} on {MODERN}: {_pct(error)}; with one structure off: "
              + "; ".join(f"{label} {_pct(error)}" for label, error in structure_errors(case).items()))
    if calibration is not None:
        efficiency, errors = calibrated_on(calibration)
        print(f"\n{MODERN} with its H100 efficiency fitted to {calibration.name} ({efficiency:.4f}):\n\n"
              f"| case | format | error |\n|---|---|---|")
        for case in H100_CASES:
            if case.name in errors:
                print(f"| {case.name} | {case.number_format} | {_pct(errors[case.name])} |")
        held = [abs(e) for name, e in errors.items() if e is not None and name != calibration.name]
        print(f"\nheld out: mean absolute error {statistics.fmean(held):.1%} over {len(held)} cases, "
              f"{sum(e <= TOLERANCE for e in held)} within ±{TOLERANCE:.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
