"""Shared command-line pieces: a parser whose errors are one line (exit 2) and positive-number types."""

from __future__ import annotations

import argparse
import math


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments give one clear line on stderr and exit status 2, not the whole usage block."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


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
    import sys

    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at interpreter exit
        sys.exit(0)
