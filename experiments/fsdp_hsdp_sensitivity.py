"""Sensitivity of the pytorch-fsdp profile to HSDP's overlap: ``python -m experiments.fsdp_hsdp_sensitivity``.

The profile prices HSDP's cross-node all-reduce of each layer's gradient shard inside that layer's backward pass
(FSDP's ``HYBRID_SHARD`` issues it from the post-backward hook, overlapped with the next layer's compute), with a fitted
share of it left exposed (``PYTORCH_FSDP_HSDP_EXPOSURE``). This prints every A100 row's error with the profile as it
is and with that all-reduce priced after the backward pass instead (``Stack.hybrid_allreduce_overlapped = False``,
the other extreme: none of it hidden), the efficiency re-fitted to the profile's calibration row each time (a
FULL_SHARD row, so the same). A sensitivity: the profile itself is not changed.
"""

from __future__ import annotations

from experiments.validation_fit import error_with, fit_efficiency
from experiments.validation_cases import FSDP_CASES, get_case
from phaze_env.cli import OneLineParser
from phaze_env.stacks import get_stack


def errors(overlapped: bool) -> tuple[float, dict[str, float]]:
    """(fitted A100 efficiency, case -> error) with the HSDP all-reduce overlapped or after the backward pass: the
    profile's own clusters with that structure and the efficiency re-fitted to its calibration row (the profile itself
    is not changed)."""
    structure = {"hybrid_allreduce_overlapped": overlapped}
    efficiency = fit_efficiency(get_case(get_stack("pytorch-fsdp").calibration), **structure)
    return efficiency, {case.name: error_with(case, framework_efficiency=efficiency, **structure) for case in FSDP_CASES}


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.fsdp_hsdp_sensitivity", description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    for overlapped in (True, False):
        try:
            efficiency, by_case = errors(overlapped)
        except ValueError as exc:  # e.g. the calibration row out of reach even at efficiency 1
            print(f"HSDP all-reduce {'in the backward' if overlapped else 'after the backward'}: no fit: {exc}")
            continue
        label = "in the backward (the profile)" if overlapped else "after the backward"
        print(f"HSDP all-reduce {label}: efficiency {efficiency:.3f}; "
              + ", ".join(f"{name.removeprefix('fms-fsdp-')} {error:+.1%}" for name, error in by_case.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
