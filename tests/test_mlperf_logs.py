"""MLPerf Training v3.1 GPT-3 logs: the parser behind the MLPerf validation cases, and the cases against the figures
they quote (experiments.mlperf_logs, experiments.validation_cases.MLPERF_GPT3)."""

from __future__ import annotations

import json
import re
import statistics

import pytest

from experiments.mlperf_logs import main, parse_mllog, read_gpt3_logs, summarise
from experiments.validation_cases import all_cases


def _line(key, value, **metadata):
    return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": key,
                                     "value": value, "metadata": metadata})


def _log(steps, batch=2560, accumulation=8):
    lines = [_line("cache_clear", True), "some other line", _line("global_batch_size", batch),
             _line("gradient_accumulation_steps", accumulation)]
    lines += [_line("tracked_stats", {"train_step_timing": s}, step=i) for i, s in enumerate(steps)]
    lines.append(_line("tracked_stats", {"validation_step_timing": 0.6}))  # not a training step
    return "\n".join(lines)


def test_the_parser_reads_the_step_times_batch_and_accumulation():
    log = parse_mllog(_log([1.5, 0.93, 0.92]))
    assert log.step_s == (1.5, 0.93, 0.92)
    assert (log.global_batch, log.accumulation) == (2560, 8)


def test_runs_are_pooled_and_the_median_taken():
    summary = summarise("NVIDIA/eos-dfw_n1280_ngc23.09_nemo", [parse_mllog(_log([1.0, 0.9])), parse_mllog(_log([0.95]))])
    assert summary.gpus == 10240 and summary.steps == 3
    assert summary.median_s == statistics.median([1.0, 0.9, 0.95])
    assert summary.tokens_s_per_gpu == pytest.approx(2560 * 2048 / 0.95 / 10240)


def test_runs_that_disagree_on_the_batch_are_refused():
    with pytest.raises(ValueError, match="different or no global batches"):
        summarise("NVIDIA/eos_n64_x", [parse_mllog(_log([1.0], batch=2048)), parse_mllog(_log([1.0], batch=3072))])


def test_a_broken_record_names_its_line():
    with pytest.raises(ValueError, match="line 2"):
        parse_mllog(_line("cache_clear", True) + "\n:::MLLOG {not json")


def test_the_cli_reads_every_submitter_skips_runs_without_steps_and_fails_clearly_without_logs(tmp_path, capsys):
    for submitter, directory, steps in (("NVIDIA", "eos-dfw_n1344_ngc23.09_nemo", [0.93, 0.9296, 0.92]),
                                        ("Azure+NVIDIA", "ND_H100_v5_n1344_pytorch", [0.95, 0.9473]),
                                        ("Google", "cloud-tpu-v5e-4096-PAX", [])):
        run = tmp_path / submitter / "results" / directory / "gpt3"
        run.mkdir(parents=True)
        (run / "result_0.txt").write_text(_log(steps, batch=2688))
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "10752" in out and "not summarised" in out and "Google/cloud-tpu-v5e-4096-PAX" in out
    summaries, skipped = read_gpt3_logs(tmp_path)
    assert [(s.directory, s.median_s) for s in summaries] == [("Azure+NVIDIA/ND_H100_v5_n1344_pytorch", 0.94865),
                                                             ("NVIDIA/eos-dfw_n1344_ngc23.09_nemo", 0.9296)]
    assert skipped == ["Google/cloud-tpu-v5e-4096-PAX"]
    assert main([str(tmp_path / "nothing")]) == 2
    assert "no */results/*/gpt3/result_*.txt" in capsys.readouterr().err


def test_each_mlperf_case_is_the_figure_and_plan_its_source_quotes():
    cases = [case for case in all_cases() if case.campaign.startswith("mlperf-")]
    assert len(cases) == 12 and sum(case.n_devices >= 8000 for case in cases) == 4
    for case in cases:
        batch, microbatches, step = re.search(r"GBS (\d+) \(logged\), (\d+) microbatches per replica.*?"
                                              r"train_step_timing ([\d.]+) s", case.source).groups()
        assert case.global_batch == int(batch)
        assert case.published == pytest.approx(int(batch) / float(step))
        assert case.data * case.tensor * case.pipeline == case.n_devices
        assert case.global_batch // (case.data * case.microbatch) == int(microbatches)
        assert (case.tensor, case.pipeline, case.interleave, case.number_format) == (4, 8, 12, "fp8")
