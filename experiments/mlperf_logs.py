"""The per-step training time of the MLPerf Training GPT-3 175B submissions, read from their own logs
(``python -m experiments.mlperf_logs /path/to/training_results_v3.1``; v3.0's alike).

MLPerf's logs are lines ``:::MLLOG {json}``; NVIDIA's NeMo submission logs one ``tracked_stats`` entry per training
step whose value holds ``train_step_timing`` (seconds), and once the ``global_batch_size`` and the
``gradient_accumulation_steps`` (microbatches per data-parallel replica) it ran with. The validation cases
(:data:`experiments.validation_cases.MLPERF_GPT3`) quote, per scale, the median of every logged step of the three
runs (``result_0..2.txt``). This module recomputes those medians, for every submitter, from a local clone of
``mlcommons/training_results_v3.1`` or ``_v3.0`` (a working tree, or a bare repository with ``--rev``), so a reader
can check the figures the cases carry; nothing at run time reads the logs (no network, no clone needed).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

MLLOG_PREFIX = ":::MLLOG "
RESULTS_GLOB = "*/results/*/gpt3/result_*.txt"  # every submitter's GPT-3 logs
NODES = re.compile(r"_n(\d+)_")  # a submission directory names its node count: eos-dfw_n1344_ngc23.09_nemo


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

    directory: str  # submitter/results directory, e.g. NVIDIA/eos-dfw_n1344_ngc23.09_nemo
    gpus: int
    global_batch: int
    accumulation: int
    steps: int
    median_s: float

    @property
    def tokens_s_per_gpu(self) -> float:
        return self.global_batch * 2048 / self.median_s / self.gpus


def summarise(directory: str, logs: list[StepLog]) -> ScaleSummary:
    """Pool the runs of one submission directory (``{submitter}/{system}_n{nodes}_...``, 8 GPUs a node): one batch
    and one accumulation, or a clear error."""
    batches = {log.global_batch for log in logs}
    accumulations = {log.accumulation for log in logs}
    if len(batches) != 1 or None in batches or len(accumulations) != 1 or None in accumulations:
        raise ValueError(f"{directory}: the runs log different or no global batches / accumulations: "
                         f"{sorted(map(str, batches))}, {sorted(map(str, accumulations))}")
    steps = [s for log in logs for s in log.step_s]
    if not steps:
        raise ValueError(f"{directory}: no train_step_timing entry in its logs")
    nodes = NODES.search(directory)
    if nodes is None:
        raise ValueError(f"{directory}: the directory names no node count (_n<nodes>_)")
    return ScaleSummary(directory, 8 * int(nodes.group(1)), batches.pop(), accumulations.pop(), len(steps),
                        statistics.median(steps))


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def read_gpt3_logs(repo: Path, rev: str | None = None) -> tuple[list[ScaleSummary], list[str]]:
    """Every submitter's ``results/*/gpt3/result_*.txt`` in ``repo`` (a working tree, or with ``rev`` any git
    repository), pooled per submission directory: the summaries of those that log their step times (8 GPUs a node:
    DGX and HGX H100 systems), and the directories that do not (another chip's runs, a submission logging no step)."""
    by_directory: dict[str, list[StepLog]] = {}
    if rev is None:
        for path in sorted(repo.glob(RESULTS_GLOB)):
            key = f"{path.parents[3].name}/{path.parents[1].name}"
            by_directory.setdefault(key, []).append(parse_mllog(path.read_text()))
    else:
        names = _git(repo, "ls-tree", "-r", "--name-only", rev).split("\n")
        for name in sorted(n for n in names if fnmatch.fnmatch(n, RESULTS_GLOB)):
            parts = name.split("/")
            by_directory.setdefault(f"{parts[0]}/{parts[2]}", []).append(
                parse_mllog(_git(repo, "show", f"{rev}:{name}")))
    if not by_directory:
        raise ValueError(f"no {RESULTS_GLOB} in {repo}" + (f" at {rev}" if rev else ""))
    summaries, skipped = [], []
    for directory, logs in by_directory.items():
        if not any(log.step_s for log in logs) or NODES.search(directory) is None:
            skipped.append(directory)
        else:
            summaries.append(summarise(directory, logs))
    return sorted(summaries, key=lambda s: (s.gpus, s.directory)), sorted(skipped)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path, help="a clone of mlcommons/training_results_v3.1")
    parser.add_argument("--rev", help="read this revision with git (a bare mirror); default: the working tree")
    args = parser.parse_args(argv)
    try:
        summaries, skipped = read_gpt3_logs(args.repo, args.rev)
    except (ValueError, OSError, subprocess.CalledProcessError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{'submission':46} {'GPUs':>6} {'GBS':>5} {'m/replica':>9} {'steps':>6} {'median s':>9} {'tok/s/GPU':>9}")
    for s in summaries:
        print(f"{s.directory:46} {s.gpus:>6} {s.global_batch:>5} {s.accumulation:>9} {s.steps:>6} {s.median_s:>9.4f} "
              f"{s.tokens_s_per_gpu:>9.1f}")
    if skipped:
        print("not summarised (no step times logged, or no _n<nodes>_ in the name): " + ", ".join(skipped))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
