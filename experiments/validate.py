"""Predict published training runs and compare: ``python -m experiments.validate``.

For every case of :mod:`experiments.validation_cases` (Narayanan et al. 2021 Table 1, Korthikanti et
al. 2022, Smith et al. 2022, BLOOM, Chowdhery et al. 2022; IBM's PyTorch FSDP runs; NVIDIA's GPT-3 175B H100 runs in
bf16 and FP8) the
case's plan is pinned (``PlanSpec``: t, p, d, microbatch, interleave, recompute, sequence parallelism, the ZeRO
stage as published) on the case's accelerator (in the case's number format) and cluster presets, and ``evaluate`` predicts the time per batch ``T``. The prediction is converted to the
case's metric with the *authors'* formula (the case module's docstring):

* ``tflops_per_device``: ``96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) / (T · N)`` (Narayanan §5.1);
* ``mfu``: ``72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) / (T · N · peak)`` (Korthikanti §6), with the peak the
  authors used (:data:`PUBLISHED_PEAK_FLOPS`);
* ``mfu_6n``: ``6·P·B·s / (T · N · peak)`` with ``P`` the model's parameters (MaxText's ``train.py``);
* ``samples_s``: ``B / T``.

Each case runs its training stack's profile (:mod:`phaze_env.stacks`: structure and one efficiency per chip); each
of a profile's efficiencies is fitted to one case on that chip (its ``calibration``, :func:`fit_efficiency`), and the
errors are reported per profile and chip over its other (held-out) cases, by stack, chip and kind. A series of one run at several data-parallel degrees is
also reported as a per-GPU throughput trend. The MoE cases (``MOE_CASES``) run their published expert-parallel plans
on H100 and are reported in their own section; a case with a ``requires`` note is listed as data, not predicted.
The headline error and the main table are over each profile's home chip (A100; TPU v4 for jax-xla); the H100 cases
(:data:`~experiments.validation_cases.H100_CASES`: Megatron-Core's H100 efficiency is fitted to one of them) and the
MoE cases have sections of their own. A case on a chip its stack was never fitted on runs the profile's structure
with the cluster preset's own efficiency. Writes
``docs/validation.md`` and ``docs/figures/validation.png``; prints the mean absolute error. A full run also
predicts the cross-chip ratio cases (:data:`~experiments.validation_cases.RATIO_CASES`: one stack's run on A100
and on H100) and writes their table as a section of the report. ``--cases a,b`` runs a subset (without the
ratios).

This module is the command; the work is split by concern: predicting a case and fitting an efficiency
(:mod:`experiments.validation_fit`), the statistics over the predictions (:mod:`experiments.validation_stats`) and
the report they are written into (:mod:`experiments.validation_report`).
"""

from __future__ import annotations

import math
import os
import statistics
import sys
from contextlib import contextmanager
from pathlib import Path

from experiments.validation_cases import RATIO_CASES, all_cases, get_case
from experiments.validation_fit import Prediction, predict, predict_ratio
from experiments.validation_report import gap_line, markdown, metric_text, plot
from experiments.validation_stats import (TOLERANCE, held_out_errors, interleave_sensitivity, microbatch_sensitivity,
                                          profiled, scaling_series)
from phaze_env.cli import OneLineParser, progress_display
from phaze_env.cli import console as cli_console
from phaze_env.files import atomic_path, writable_directory, write_text_atomic
from phaze_env.stacks import STACKS

ROOT = Path(__file__).resolve().parents[1]


def _predict_all(cases, ratio_cases, step) -> tuple[list[Prediction], list]:
    """Every case's and chip-ratio case's prediction, each printed as it comes (``step(name)`` after each)."""
    predictions = []
    for case in cases:
        prediction = predict(case)
        predictions.append(prediction)
        error = "—" if prediction.error is None else f"{prediction.error:+.1%}"
        predicted = "—" if prediction.predicted is None else metric_text(case.metric, prediction.predicted)
        print(f"{case.name:36s} {case.stack:18s} {case.accelerator:6s} {prediction.kind:11s} published "
              f"{metric_text(case.metric, case.published):>8s}  predicted {predicted:>8s}  error {error:>7s}  {prediction.plan}  "
              f"{prediction.note[:100]}", flush=True)
        step(case.name)
    ratios = []
    for case in ratio_cases:
        ratio = predict_ratio(case)
        ratios.append(ratio)
        predicted = "—" if ratio.predicted_ratio is None else f"{ratio.predicted_ratio:.3f}"
        error = "—" if ratio.error is None else f"{ratio.error:+.1%}"
        print(f"{ratio.case.name:36s} published H100/A100 {ratio.case.published_ratio:.3f}  predicted {predicted:>6s}  "
              f"error {error:>7s}  {ratio.note}", flush=True)
        step(case.name)
    return predictions, ratios


@contextmanager
def _progress(total: int):
    """On a terminal, the CLIs' one progress display on stderr (:func:`phaze_env.cli.progress_display`): the cases with
    their total and a time left, then the sensitivities and the report; yields ``step(name)`` (``None``: the cases are
    done). Off a terminal, ``step`` does nothing and stdout keeps the report lines alone."""
    err = cli_console(stderr=True)
    if not err.is_terminal:
        yield lambda name: None
        return
    with progress_display(err) as bar:
        cases = bar.add_task(f"validating {total} published runs", total=total)

        def step(name: str | None) -> None:
            if name is None:
                bar.update(cases, completed=total)
                bar.add_task("the sensitivities (plans re-evaluated) and the report", total=None)
            else:
                done = int(bar.tasks[cases].completed) + 1
                bar.update(cases, completed=done, description=f"validating · {done} of {total} runs · {name}")
        yield step


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.validate", description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "validation.md"),
                        help="Markdown report path (default docs/validation.md of the repository)")
    parser.add_argument("--list", action="store_true", help="print every case (name, stack, chip × devices) and exit")
    args = parser.parse_args(argv)
    if args.list:
        text = "".join(f"{case.name}\t{case.stack}\t{case.accelerator} × {case.n_devices}\n" for case in all_cases())
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:  # piped into head: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    out = Path(args.out)
    figure = out.parent / "figures" / "validation.png"
    try:
        cases = [get_case(name) for name in args.cases.split(",")] if args.cases else list(all_cases())
        if out.is_dir():
            raise ValueError(f"--out {out} is a directory; give the report's file path (….md)")
        for directory in (out.parent, figure.parent):  # before the predictions, not after them
            writable_directory(directory)
    except ValueError as exc:
        parser.error(str(exc))
    ratio_cases = [] if args.cases else list(RATIO_CASES)  # a --cases run is a subset
    with _progress(len(cases) + len(ratio_cases)) as step:
        predictions, ratios = _predict_all(cases, ratio_cases, step)
        step(None)  # the sensitivities re-evaluate plans: a phase of their own
        try:
            write_text_atomic(out, markdown(predictions, microbatch_sensitivity(predictions), ratios,
                                            interleave_sensitivity(predictions)))
            with atomic_path(figure) as temporary:
                plot(profiled(predictions), temporary)  # the H100 cases: a table of their own
        except OSError as exc:
            parser.exit(1, f"{parser.prog}: error: cannot write the report into {out.parent}: {exc.strerror or exc}\n")
    every, predictions = predictions, profiled(predictions)

    h100 = held_out_errors([p for p in every if p not in predictions])
    if h100:
        print(f"H100 and MoE (held out): mean absolute error {statistics.mean(h100):.1%} over {len(h100)} cases")
    for profile in STACKS.values():
        for fit in profile.fits:  # by stack and chip, as the report's profile table
            held = held_out_errors([p for p in every if p.case.accelerator in fit.chips], profile.name)
            if held:
                print(f"{profile.name} on {'/'.join(fit.chips)}: mean absolute error {statistics.mean(held):.1%} over "
                      f"{len(held)} held-out cases (calibration: {fit.calibration}); "
                      f"{sum(e <= TOLERANCE for e in held)} within ±{TOLERANCE:.0%}")
    for points in scaling_series(every):
        print(f"scaling trend {points[0].case.workload} ({points[0].case.stack}): per-GPU throughput vs the smallest "
              "scale, published / predicted: " + ", ".join(f"{p.case.n_devices} GPUs {p.published:.1%} / {p.predicted:.1%}"
                                                           for p in points))
    errors = held_out_errors(predictions)
    if errors:
        print(f"mean absolute error {statistics.mean(errors):.1%} over {len(errors)} held-out cases; "
              f"{sum(e <= TOLERANCE for e in errors)} within ±{TOLERANCE:.0%}; wrote {out}")
        for line in gap_line(profiled(predictions)):
            print(line)
    return 0 if errors and not any(math.isnan(e) for e in errors) else 1


if __name__ == "__main__":
    raise SystemExit(main())
