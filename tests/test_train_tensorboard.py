"""``python -m baselines.train`` on an install without TensorBoard: trains without it, or says what to install."""

import sys

import pytest

from baselines.train import main, resolve_tensorboard, tensorboard_installed

COMMON = ["--workload", "tiny-gpt2", "--devices", "16", "--batch", "64", "--space", "reduced", "--steps", "4",
          "--checkpoint-every", "2", "--no-progress"]


@pytest.fixture
def no_tensorboard(monkeypatch):
    """The process behaves as if the tensorboard package were not installed."""
    # SB3 decides once, at import, whether TensorBoard exists: import it first so that hiding the
    # package here does not leak into later tests of this process.
    import stable_baselines3.common.logger  # noqa: F401
    import stable_baselines3.common.utils  # noqa: F401

    monkeypatch.setitem(sys.modules, "tensorboard", None)
    assert not tensorboard_installed()


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["confuciux", "ppo"])
def test_default_install_trains_without_tensorboard(algo, no_tensorboard, tmp_path, capsys):
    assert main([algo, *COMMON, "--logdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "best design: " in out and " tc · " in out and "no TensorBoard logs" in out
    assert (tmp_path / "checkpoints" / "best.json").exists()
    assert not any(p.name.startswith("events.out.tfevents") for p in tmp_path.rglob("*"))


def test_asking_for_tensorboard_without_it_is_one_line_exit_2(no_tensorboard, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["ppo", *COMMON, "--logdir", str(tmp_path), "--tensorboard"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tensorboard needs the tensorboard package" in err[0]


def test_no_tensorboard_flag_turns_logging_off(tmp_path, capsys):
    assert main(["confuciux", *COMMON, "--logdir", str(tmp_path), "--no-tensorboard"]) == 0
    assert not any(p.name.startswith("events.out.tfevents") for p in tmp_path.rglob("*"))


def test_default_follows_what_is_installed(no_tensorboard):
    assert resolve_tensorboard(None) is False and resolve_tensorboard(False) is False
    with pytest.raises(ValueError, match=r"pip install -e \"\.\[rl\]\""):
        resolve_tensorboard(True)
