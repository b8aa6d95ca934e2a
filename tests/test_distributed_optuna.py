"""Two worker processes share one Optuna study on a real PostgreSQL server started here on loopback.

Checks that every trial is recorded exactly once (unique, contiguous numbers; the workers' own counts add
up to the stored trials; all complete) and that the best value equals a single-worker run on the same
budget — well defined because BruteForceSampler covers the 16-combination space whatever the interleaving.
How the two concurrent workers split the trials is up to the scheduler (one may run them all before the
other has started), so that a joining worker continues the study is checked on a hand-off in sequence.
The study is addressed by a plain ``postgresql://`` URL, as the README documents it.

Skips, saying why, where no PostgreSQL server can run (no ``initdb``/``pg_ctl``, or root without an
unprivileged user to run it as); with ``PHAZE_REQUIRE_POSTGRES=1`` (CI) that is a failure instead.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from phaze_env.design import KNOBS
from phaze_env.objective import storage_url

REPO = Path(__file__).resolve().parents[1]


def _unavailable(reason: str):
    """Skip (a machine without PostgreSQL), or fail where the test is required to run (CI)."""
    if os.environ.get("PHAZE_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"PHAZE_REQUIRE_POSTGRES=1 but {reason}")
    pytest.skip(reason)


def _pg_bin() -> Path | None:
    initdb = shutil.which("initdb") or next(iter(sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))[-1:]), None)
    if initdb is None:
        return None
    directory = Path(initdb).resolve().parent
    return directory if (directory / "pg_ctl").exists() else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_as() -> str | None:
    """The unprivileged user to run the server as when we are root (initdb refuses root), else None."""
    if os.geteuid() != 0:
        return None
    return next((u for u in ("postgres", "nobody") if _has_user(u)), None)


def _why_no_server() -> str | None:
    """Why no PostgreSQL server can be started here, or None when one can."""
    if _pg_bin() is None:
        return ("PostgreSQL server binaries (initdb, pg_ctl) not found: install PostgreSQL "
                "(e.g. apt-get install postgresql) to run this test")
    if importlib.util.find_spec("psycopg2") is None:
        return "psycopg2 is not installed: pip install -e \".[dist]\""
    if os.geteuid() == 0 and (_run_as() is None or shutil.which("runuser") is None):
        return "running as root without runuser and a 'postgres' or 'nobody' user to run PostgreSQL as"
    return None


@pytest.fixture(scope="module")
def postgres_url():
    reason = _why_no_server()
    if reason:
        _unavailable(reason)
    import psycopg2

    bindir, user, runner = _pg_bin(), _run_as(), []
    root = tempfile.mkdtemp(prefix="phaze-pg-")
    if user is not None:
        os.chmod(root, 0o755)
        shutil.chown(root, user)
        runner = [shutil.which("runuser"), "-u", user, "--"]
    data, port = os.path.join(root, "data"), _free_port()
    subprocess.run(runner + [str(bindir / "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
                             "--no-sync"], check=True, capture_output=True)
    options = f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={root} -c fsync=off"
    subprocess.run(runner + [str(bindir / "pg_ctl"), "-D", data, "-l", os.path.join(root, "log"), "-o", options,
                             "-w", "-t", "60", "start"], check=True, capture_output=True)
    try:
        connection = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres")
        connection.autocommit = True
        connection.cursor().execute("CREATE DATABASE optuna")
        connection.close()
        yield f"postgresql://postgres@127.0.0.1:{port}/optuna"  # plain: the driver is chosen by storage_url
    finally:
        subprocess.run(runner + [str(bindir / "pg_ctl"), "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


ARGS = ["--workload", "tiny-gpt2", "--devices", "16", "--batch", "64", "--space", "tiny", "--sampler", "bruteforce",
        "--trials", "32"]


@pytest.mark.slow
def test_two_workers_share_one_study_on_postgresql(postgres_url):
    import optuna

    from experiments.optuna_distributed import SPACES, build_parser

    # the single-worker reference first: it also fills the evaluation cache the workers then read
    single = build_parser().parse_args(["--storage", "unused", "--study-name", "single", *ARGS])
    single_best = _single_worker_best(single)
    done = subprocess.run([sys.executable, "-m", "experiments.optuna_distributed", "--storage", postgres_url,
                           "--study-name", "two-workers", "--workers", "2", *ARGS], cwd=REPO, capture_output=True,
                          text=True, timeout=240, env=os.environ | {"PYTHONPATH": str(REPO)})  # guards a hang
    assert done.returncode == 0, "\n".join(l for l in done.stderr.splitlines() if "Warning" not in l and "finite &" not in l)[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])

    study = optuna.load_study(study_name="two-workers", storage=storage_url(postgres_url))
    trials = study.trials
    numbers = sorted(t.number for t in trials)
    assert numbers == list(range(len(trials)))  # each trial recorded once, none lost
    ran = [n for worker in report["workers"] for n in worker["trials"]]
    assert len({w["pid"] for w in report["workers"]}) == 2  # two processes reported
    assert sorted(ran) == numbers
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    space = SPACES["tiny"]()
    seen = {tuple(t.params[k] for k in KNOBS) for t in trials}
    assert len(seen) == space.combinations  # brute force covered every knob combination

    assert study.best_value == pytest.approx(single_best, rel=1e-12) and single_best > 0
    assert report["best_value"] == pytest.approx(study.best_value, rel=1e-12)


@pytest.mark.slow
def test_a_worker_joining_a_study_continues_it(postgres_url):
    """Worker one runs 6 trials; worker two, joining the same study, runs the 10 combinations left, numbered 6–15."""
    import optuna

    from experiments.optuna_distributed import SPACES, build_parser, run_worker

    def worker(trials: int) -> list[int]:
        args = build_parser().parse_args(["--storage", storage_url(postgres_url), "--study-name", "hand-off", *ARGS,
                                          "--trials", str(trials)])
        return run_worker(args)

    first, second = worker(6), worker(32)
    assert first == list(range(6)) and second == list(range(6, 16))
    trials = optuna.load_study(study_name="hand-off", storage=storage_url(postgres_url)).trials
    assert len({tuple(t.params[k] for k in KNOBS) for t in trials}) == len(trials) == SPACES["tiny"]().combinations


def _single_worker_best(args) -> float:
    """The same study with one worker, in memory."""
    import optuna

    from experiments.optuna_distributed import run_worker

    storage = optuna.storages.InMemoryStorage()
    args.storage = storage
    run_worker(args)
    return optuna.load_study(study_name=args.study_name, storage=storage).best_value


def test_plain_postgresql_url_names_the_installed_driver(monkeypatch):
    import importlib.util

    installed = {"psycopg2"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name in installed else None)
    assert storage_url("postgresql://u@h:5432/db") == "postgresql+psycopg2://u@h:5432/db"
    installed = {"psycopg"}
    assert storage_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert storage_url("postgresql+psycopg2://u@h/db") == "postgresql+psycopg2://u@h/db"  # explicit: kept
    installed = set()
    with pytest.raises(ValueError, match="needs a PostgreSQL driver"):
        storage_url("postgresql://u@h/db")


def test_sqlite_url_gets_its_directory(tmp_path):
    url = f"sqlite:///{tmp_path}/a/b/optuna.db"
    assert storage_url(url) == url and (tmp_path / "a" / "b").is_dir()


def test_without_server_binaries_the_test_skips_saying_why(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(glob, "glob", lambda pattern: [])
    assert "initdb" in _why_no_server() and "install PostgreSQL" in _why_no_server()
    monkeypatch.delenv("PHAZE_REQUIRE_POSTGRES", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not found"):
        _unavailable(_why_no_server())
    monkeypatch.setenv("PHAZE_REQUIRE_POSTGRES", "1")  # CI: a missing server is a failure
    with pytest.raises(pytest.fail.Exception, match="PHAZE_REQUIRE_POSTGRES=1 but PostgreSQL server binaries"):
        _unavailable(_why_no_server())
