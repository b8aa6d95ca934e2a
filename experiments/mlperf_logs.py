"""The per-step training time of NVIDIA's MLPerf Training v3.1 GPT-3 175B submissions, read from their own logs
(``python -m experiments.mlperf_logs /path/to/training_results_v3.1``).

MLPerf's logs are lines ``:::MLLOG {json}``; NVIDIA's NeMo submission logs one ``tracked_stats`` entry per training
step whose value holds ``train_step_timing`` (seconds), and once the ``global_batch_size`` and the
``gradient_accumulation_steps`` (microbatches per data-parallel replica) it ran with. The validation cases
(:data:`experiments.validation_cases.MLPERF31_GPT3`) quote, per scale, the median of every logged step of the three
runs (``result_0..2.txt``). This module recomputes those medians from a local clone of
``mlcommons/training_results_v3.1`` (a working tree, or a bare repository with ``--rev``), so a reader can check the
figures the cases carry; nothing at run time reads the logs (no network, no clone needed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

MLLOG_PREFIX = ":::MLLOG "
RESULTS_DIR = "NVIDIA/results"


@dataclass(frozen=True)
class StepLog:
    """One run's logged steps: the step times (s), the global batch and the microbatches per replica."""

    step_s: tuple[float, ...]
    global_batch: int | None
    accumulation: int | None


def parse_mllog(text: str) -> StepLog:
    """The ``train_step_timing`` entries, ``global_batch_size`` and ``gradient_accumulation_steps`` of one log."""
    steps: list[float] = []
    batch = accumulation = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith(MLLOG_PREFIX):
            continue
        try:
            record = json.loads(line[len(MLLOG_PREFIX):])
        except json.JSONDecodeError as error:
            raise ValueError(f"line {number}: not an MLLOG record ({error})") from None
        key, value = record.get("key"), record.get("value")
        if key == "tracked_stats" and isinstance(value, dict) and "train_step_timing" in value:
            steps.append(float(value["train_step_timing"]))
        elif key == "global_batch_size":
            batch = int(value)
        elif key == "gradient_accumulation_steps":
            accumulation = int(value)
    return StepLog(tuple(steps), batch, accumulation)


@dataclass(frozen=True)
class ScaleSummary:
    """Every run of one submission directory pooled: GPUs, batch, microbatches per replica, steps and their median."""

    directory: str
    gpus: int
    global_batch: int
    accumulation: int
    steps: int
    median_s: float

    @property
    def tokens_s_per_gpu(self) -> float:
        return self.global_batch * 2048 / self.median_s / self.gpus


def summarise(directory: str, logs: list[StepLog]) -> ScaleSummary:
    """Pool the runs of one directory (``{system}_n{nodes}_...``): one batch and accumulation, or a clear error."""
    batches = {log.global_batch for log in logs}
    accumulations = {log.accumulation for log in logs}
    if len(batches) != 1 or None in batches or len(accumulations) != 1 or None in accumulations:
        raise ValueError(f"{directory}: the runs log different or no global batches / accumulations: "
                         f"{sorted(map(str, batches))}, {sorted(map(str, accumulations))}")
    steps = [s for log in logs for s in log.step_s]
    if not steps:
        raise ValueError(f"{directory}: no train_step_timing entry in its logs")
    nodes = int(directory.split("_n", 1)[1].split("_", 1)[0])
    return ScaleSummary(directory, 8 * nodes, batches.pop(), accumulations.pop(), len(steps), statistics.median(steps))


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def read_gpt3_logs(repo: Path, rev: str | None = None) -> list[ScaleSummary]:
    """Every ``gpt3/result_*.txt`` under ``NVIDIA/results`` of ``repo`` (a working tree, or with ``rev`` any git
    repository), pooled per submission directory."""
    by_directory: dict[str, list[StepLog]] = {}
    if rev is None:
        paths = sorted((repo / RESULTS_DIR).glob("*/gpt3/result_*.txt"))
        for path in paths:
            by_directory.setdefault(path.parent.parent.name, []).append(parse_mllog(path.read_text()))
    else:
        names = _git(repo, "ls-tree", "-r", "--name-only", rev, RESULTS_DIR).split()
        for name in sorted(n for n in names if "/gpt3/result_" in n):
            by_directory.setdefault(name.split("/")[2], []).append(parse_mllog(_git(repo, "show", f"{rev}:{name}")))
    if not by_directory:
        raise ValueError(f"no {RESULTS_DIR}/*/gpt3/result_*.txt in {repo}" + (f" at {rev}" if rev else ""))
    return sorted((summarise(d, logs) for d, logs in by_directory.items()), key=lambda s: s.gpus)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path, help="a clone of mlcommons/training_results_v3.1")
    parser.add_argument("--rev", help="read this revision with git (a bare mirror); default: the working tree")
    args = parser.parse_args(argv)
    try:
        summaries = read_gpt3_logs(args.repo, args.rev)
    except (ValueError, OSError, subprocess.CalledProcessError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{'submission':32} {'GPUs':>6} {'GBS':>5} {'m/replica':>9} {'steps':>6} {'median s':>9} {'tok/s/GPU':>9}")
    for s in summaries:
        print(f"{s.directory:32} {s.gpus:>6} {s.global_batch:>5} {s.accumulation:>9} {s.steps:>6} {s.median_s:>9.4f} "
              f"{s.tokens_s_per_gpu:>9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
