"""Shared command-line pieces: a parser whose errors are one line (exit 2), positive-number types, the
cluster-size options every CLI spells the same (``--devices``, ``--batch``), hidden old spellings, and a
console that does not cut piped output at 80 columns."""

from __future__ import annotations

import argparse
import math
import sys


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments give one clear line on stderr and exit status 2, not the whole usage block."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


class HiddenAlias(argparse.Action):
    """An old spelling of an option, left out of ``--help``: stores into the new option's destination (so
    old commands still work) and says once on stderr which spelling to use."""

    def __init__(self, option_strings, dest, new: str, **kwargs):
        self.new = new
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog}: note: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_cluster_size_options(parser: argparse.ArgumentParser, devices: int, batch: int) -> None:
    """``--devices N`` and ``--batch N`` (the one spelling in every CLI), with ``--n-devices`` and
    ``--global-batch`` accepted as hidden old spellings."""
    parser.add_argument("--devices", type=positive_int, default=devices, metavar="N",
                        help=f"accelerators in the cluster (default {devices})")
    parser.add_argument("--batch", type=positive_int, default=batch, metavar="N",
                        help=f"global batch in samples (sequences) per training step (default {batch})")
    parser.add_argument("--n-devices", type=positive_int, dest="devices", action=HiddenAlias, new="--devices")
    parser.add_argument("--global-batch", type=positive_int, dest="batch", action=HiddenAlias, new="--batch")


def add_system_budget_options(parser: argparse.ArgumentParser) -> None:
    """``--budget-mw MW`` / ``--budget-usd USD``: the system space's cluster budget, ``--nre-chips N`` its custom chips'
    NRE amortisation, and ``--stack NAME`` its training stack (for :func:`phaze_env.design.named_space`), in every CLI that takes ``--space``."""
    parser.add_argument("--budget-mw", type=positive_float, default=None, dest="budget_mw", metavar="MW",
                        help="system space: cluster power budget at the wall in MW, which sets each design's chip "
                             "count (default the space's own)")
    parser.add_argument("--budget-usd", type=positive_float, default=None, dest="budget_usd", metavar="USD",
                        help="system space: cluster capital budget in USD instead of power (default none: the "
                             "power budget applies)")
    parser.add_argument("--nre-chips", type=positive_int, default=None, dest="nre_chips", metavar="N",
                        help="system space: charge every design (a custom chip) its node's design and mask-set cost "
                             "amortised over N chips built (phaze_env.hardware.cost.DESIGN_NRE_USD; default off: "
                             "silicon at its manufacturing cost, as the references)")
    parser.add_argument("--stack", default=None, metavar="NAME",
                        help="system space: the training stack every design and reference runs — its plan freedom, "
                             "kernels and efficiency fitted per chip (default: phaze_env.stacks.DEFAULT_SYSTEM_STACK, "
                             "Megatron-Core with interleaving, SP, ZeRO-1 and fused attention); phaze: PHAZE's plan "
                             "space and eager attention, as before issue 29")


PIPED_CONSOLE_WIDTH = 200
"""Columns a console gets when it writes to a file or pipe: rich would assume 80 and wrap or crop tables."""


def console(**kwargs):
    """A rich ``Console``: the terminal's width on a terminal; piped or redirected, wide and without soft
    wrapping so every line reaches the file whole."""
    from rich.console import Console

    probe = Console(**kwargs)
    if probe.is_terminal:
        return probe
    return Console(width=PIPED_CONSOLE_WIDTH, soft_wrap=True, **kwargs)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def int_list(text: str) -> tuple[int, ...]:
    """Comma-separated positive integers: ``1,2,4``."""
    return tuple(positive_int(part) for part in text.split(","))


def float_list(text: str) -> tuple[float, ...]:
    """Comma-separated positive numbers: ``32,64,80``."""
    return tuple(positive_float(part) for part in text.split(","))


def print_output(text: str) -> None:
    """Print to stdout; a reader that closes the pipe early (``| head``) ends the program quietly."""
    import os

    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at interpreter exit
        sys.exit(0)


def progress_display(console):
    """The one live progress display of every CLI (rich, on ``console``: stderr where stdout carries JSON): spinner,
    a bar, elapsed time, :func:`eta_column`'s time left and what is being done. ``Progress.add_task`` with
    ``at_most=True`` marks a task whose total is an upper limit (its time left then reads ``≤``)."""
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    # the text last: a long status never pushes the time left off the line
    return Progress(SpinnerColumn(finished_text="✓"), BarColumn(bar_width=24), TimeElapsedColumn(), eta_column(),
                    TextColumn("{task.description}"), console=console)


def eta_column():
    """A rich column: the task's time left at its rate so far (``ETA 0:01:23``; ``≤`` when its total is an upper
    limit, field ``at_most``; ``ETA …`` until a rate is known; nothing once finished)."""
    from datetime import timedelta

    from rich.progress import ProgressColumn
    from rich.text import Text

    class EtaColumn(ProgressColumn):
        def render(self, task) -> Text:
            if task.finished or task.total is None:
                return Text("")
            remaining = task.time_remaining
            if remaining is None:
                return Text("ETA …", style="progress.remaining")
            at_most = "≤ " if task.fields.get("at_most") else ""
            return Text(f"ETA {at_most}{timedelta(seconds=round(remaining))}", style="progress.remaining")

    return EtaColumn()
