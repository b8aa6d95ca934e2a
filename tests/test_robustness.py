"""Files survive failures: atomic writes leave the old file or the new one, unreadable checkpoints and unwritable
report paths are one line on stderr and a non-zero exit."""

from __future__ import annotations

import json
import zipfile

import pytest

from phaze_env.files import atomic_path, writable_directory, write_text_atomic

TRAIN = ["--workload", "tiny-gpt2", "--devices", "16", "--batch", "64", "--space", "reduced", "--steps", "2",
         "--checkpoint-every", "2", "--no-progress", "--no-tensorboard"]


def test_atomic_write_replaces_the_file_in_one_step(tmp_path):
    path = tmp_path / "report.md"
    path.write_text("old")
    write_text_atomic(path, "new ±")
    assert path.read_text(encoding="utf-8") == "new ±"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_partial_one(tmp_path):
    path = tmp_path / "last.zip"
    path.write_bytes(b"the previous checkpoint")
    with pytest.raises(RuntimeError, match="disk full"):
        with atomic_path(path) as temporary:
            assert temporary.parent == tmp_path and temporary.suffix == ".zip"  # writers that go by the suffix
            temporary.write_bytes(b"half of the")
            raise RuntimeError("disk full")
    assert path.read_bytes() == b"the previous checkpoint"
    assert [p.name for p in tmp_path.iterdir()] == ["last.zip"]


def test_unwritable_directory_is_one_line_value_error(tmp_path):
    (tmp_path / "file").write_text("")
    for path in (tmp_path / "file" / "out", "/proc/phaze-out"):
        with pytest.raises(ValueError, match="is not writable") as exc:
            writable_directory(path)
        assert "\n" not in str(exc.value)
    assert writable_directory(tmp_path / "new" / "dir").is_dir()


def _truncate(path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])


def _resume_fails_on(algo: str, bad, tmp_path, capsys) -> None:
    from baselines.train import main

    with pytest.raises(SystemExit) as exc:
        main([algo, *TRAIN, "--logdir", str(tmp_path), "--resume"])
    assert exc.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert str(bad) in err[0] and "cannot load" in err[0] and "run without --resume" in err[0]


def test_resume_from_a_truncated_torch_checkpoint(tmp_path, capsys):
    import torch

    (tmp_path / "checkpoints").mkdir()
    last = tmp_path / "checkpoints" / "last.pt"
    torch.save({"agent": {"weights": torch.zeros(256)}, "step": 2}, last)
    _truncate(last)
    _resume_fails_on("confuciux", last, tmp_path, capsys)


def test_resume_from_a_truncated_sb3_checkpoint(tmp_path, capsys):
    (tmp_path / "checkpoints").mkdir()
    last = tmp_path / "checkpoints" / "last.zip"
    with zipfile.ZipFile(last, "w") as archive:
        archive.writestr("data", json.dumps({"policy_class": "x" * 1000}))
    _truncate(last)
    _resume_fails_on("ppo", last, tmp_path, capsys)


def test_resume_with_a_truncated_best_json(tmp_path, capsys):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.pt").write_bytes(b"never read: best.json comes first")
    best = tmp_path / "checkpoints" / "best.json"
    best.write_text('{"design": {"num_tc": 8, "tc_wid')
    _resume_fails_on("confuciux", best, tmp_path, capsys)


def test_a_fresh_run_ignores_and_replaces_an_old_best_json(tmp_path, capsys):
    """Without --resume the best design is this run's, not one left in --logdir by an earlier run."""
    from baselines.train import main

    (tmp_path / "checkpoints").mkdir()
    best = tmp_path / "checkpoints" / "best.json"
    best.write_text("not json at all")
    assert main(["confuciux", *TRAIN, "--logdir", str(tmp_path)]) == 0
    assert json.loads(best.read_text())["throughput_samples_s"] >= 0
    assert sorted(p.name for p in best.parent.iterdir()) == ["best.json", "last.pt"]  # no temporary files left


@pytest.mark.parametrize("out", ["/proc/phaze-validation/validation.md", "{tmp}/file/validation.md", "{tmp}"])
def test_validate_into_an_unwritable_path_is_one_line(out, tmp_path, capsys):
    from experiments.validate import main

    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit) as exc:
        main(["--out", out.format(tmp=tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr()
    assert not err.out  # nothing predicted: the path is checked first
    assert len(err.err.strip().splitlines()) == 1 and ("not writable" in err.err or "is a directory" in err.err)
