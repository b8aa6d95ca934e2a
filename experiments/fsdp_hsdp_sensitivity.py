"""Sensitivity of the pytorch-fsdp fit to HSDP's overlap: ``python -m experiments.fsdp_hsdp_sensitivity``.

The profile prices HSDP's cross-node all-reduce of each layer's gradient shard inside that layer's backward pass
(FSDP's ``HYBRID_SHARD`` issues it from the post-backward hook, overlapped with the next layer's compute). This
re-fits the A100 efficiency to the same calibration row with that all-reduce priced after the backward pass instead
(``Cluster.hybrid_allreduce_overlapped = False``, the other extreme: none of it hidden) and prints every A100 row's
error both ways. A sensitivity, not a fit of the overlap: the profile keeps the overlapped structure its sources
describe.
"""

from __future__ import annotations

from dataclasses import replace

from experiments.validate import fit_efficiency, predict
from experiments.validation_cases import FSDP_CASES, get_case
from phaze_env import stacks
from phaze_env.cli import OneLineParser


def errors(overlapped: bool) -> tuple[float, dict[str, float]]:
    """(fitted A100 efficiency, case -> error) with the HSDP all-reduce overlapped or after the backward pass."""
    profile = stacks.STACKS["pytorch-fsdp"]
    try:
        stacks.STACKS["pytorch-fsdp"] = replace(profile, hybrid_allreduce_overlapped=overlapped)
        efficiency = fit_efficiency(get_case(profile.calibration))
        fits = (replace(profile.fits[0], framework_efficiency=efficiency), *profile.fits[1:])
        stacks.STACKS["pytorch-fsdp"] = replace(profile, hybrid_allreduce_overlapped=overlapped, fits=fits)
        return efficiency, {case.name: predict(case, cache=False).error for case in FSDP_CASES}
    finally:
        stacks.STACKS["pytorch-fsdp"] = profile


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.fsdp_hsdp_sensitivity", description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    for overlapped in (True, False):
        efficiency, by_case = errors(overlapped)
        label = "in the backward (the profile)" if overlapped else "after the backward"
        print(f"HSDP all-reduce {label}: efficiency {efficiency:.3f}; "
              + ", ".join(f"{name.removeprefix('fms-fsdp-')} {error:+.1%}" for name, error in by_case.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
