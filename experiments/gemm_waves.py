"""What GEMM wave quantisation would do to a stack profile's fit on one chip: ``python -m experiments.gemm_waves
--stack megatron-core --chip h100 --sms 132``.

The megatron-lm profile's A100 fits price each GEMM's wave quantisation (``Stack.gemm_wave_sms``,
:func:`phaze_env.hardware.estimator.wave_quantisation`; docs/table5_scaling.md), every other fit lets its efficiency
absorb it. This what-if prices the waves on another fit: the efficiency refitted on the fit's own calibration run by
the fit's bisection (:func:`experiments.validation_fit._bisect`), then every held-out case of the profile on that chip
evaluated again at its published plan, before and after. Nothing here changes a prediction; a fit adopts the waves only
where they explain its held-out runs (the note of the change says which were tried).
"""

from __future__ import annotations

import dataclasses
import statistics
import sys

from experiments.validation_cases import all_cases, get_case
from experiments.validation_fit import _bisect, metric_with
from phaze_env.cli import OneLineParser, print_output
from phaze_env.stacks import get_stack


@dataclasses.dataclass(frozen=True)
class WavesWhatIf:
    stack: str
    chip: str
    sms: int
    efficiency: float  # the fit's own
    refitted: float  # with the waves priced (1.0: the bisection's ceiling, the waves need more than the model's peak)
    calibration: str
    calibration_error: float  # the calibration run's error at the refitted efficiency (≈ 0 unless at the ceiling)
    errors: dict[str, tuple[float, float]]  # held-out case → (error now, error with the waves)

    def lines(self) -> list[str]:
        out = [f"{self.stack} on {self.chip}, waves over {self.sms} SMs: efficiency {self.efficiency:g} -> "
               f"{self.refitted:.4f}" + (" (the bisection's ceiling: not a fit)" if self.refitted >= 0.9999 else "")
               + f"; calibration {self.calibration} at it {self.calibration_error:+.1%}"]
        out += [f"  {name:45s} {now:+.1%} -> {waved:+.1%}" for name, (now, waved) in self.errors.items()]
        if self.errors:
            out.append(f"  mean absolute error over {len(self.errors)} held-out cases: "
                       f"{statistics.mean(abs(a) for a, _ in self.errors.values()):.1%} -> "
                       f"{statistics.mean(abs(b) for _, b in self.errors.values()):.1%}")
        return out


def waves_what_if(stack: str, chip: str, sms: int, *, names: tuple[str, ...] | None = None,
                  tolerance: float = 1e-4) -> WavesWhatIf:
    """Refit ``stack``'s efficiency on ``chip`` with GEMM waves over ``sms`` SMs and evaluate its held-out cases on that
    chip (``names``: only these) before and after."""
    if sms < 1:
        raise ValueError(f"sms must be a positive number of streaming multiprocessors, got {sms!r}")
    fit = get_stack(stack).fit_on(chip)
    if fit is None:
        raise ValueError(f"stack {stack!r} has no fit on {chip!r}")
    calibration = get_case(fit.calibration)
    refitted = _bisect(lambda e: metric_with(calibration, framework_efficiency=e, gemm_wave_sms=sms), calibration.published,
                       0.05, 1.0, tolerance)
    errors = {}
    for case in all_cases():
        if (case.stack != stack or case.accelerator not in fit.chips or case.requires or case.name == calibration.name
                or (names is not None and case.name not in names)):
            continue
        errors[case.name] = (metric_with(case) / case.published - 1,
                             metric_with(case, framework_efficiency=refitted, gemm_wave_sms=sms) / case.published - 1)
    calibration_error = metric_with(calibration, framework_efficiency=refitted, gemm_wave_sms=sms) / calibration.published - 1
    return WavesWhatIf(stack, chip, sms, fit.framework_efficiency, refitted, calibration.name, calibration_error, errors)


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="python -m experiments.gemm_waves", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", required=True, help="a training-stack profile (phaze_env.stacks)")
    parser.add_argument("--chip", required=True, help="an accelerator preset the profile is fitted on")
    parser.add_argument("--sms", type=int, required=True, help="streaming multiprocessors the GEMMs are waved over")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = waves_what_if(args.stack, args.chip, args.sms)
    except ValueError as error:
        parser.error(str(error))
    print_output("\n".join(result.lines()))  # (| head ends it quietly)
    return 0


if __name__ == "__main__":
    sys.exit(main())
