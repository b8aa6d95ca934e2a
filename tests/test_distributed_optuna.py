"""Two worker processes share one Optuna study on a real PostgreSQL server started here on loopback.

Checks that every trial is recorded exactly once (unique, contiguous numbers; the workers' own counts add
up to the stored trials; all complete) and that the best value equals a single-worker run on the same
budget — well defined because BruteForceSampler covers the 16-combination space whatever the interleaving.
Skips only when no PostgreSQL server binaries exist (``scripts/setup_postgres.sh`` provides them).
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from phaze_env.design import KNOBS

REPO = Path(__file__).resolve().parents[1]


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


@pytest.fixture(scope="module")
def postgres_url():
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found; run scripts/setup_postgres.sh")
    pytest.importorskip("psycopg2")
    import psycopg2

    runner: list[str] = []
    root = tempfile.mkdtemp(prefix="phaze-pg-")
    if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres system user
        user = next((u for u in ("postgres", "nobody") if _has_user(u)), None)
        assert user, "running as root without a 'postgres' or 'nobody' user: run scripts/setup_postgres.sh"
        os.chmod(root, 0o755)
        shutil.chown(root, user)
        runner = ["runuser", "-u", user, "--"]
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
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/optuna"
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


def test_two_workers_share_one_study_on_postgresql(postgres_url):
    import optuna

    from experiments.optuna_distributed import SPACES, build_parser

    started = time.perf_counter()
    # the single-worker reference first: it also fills the evaluation cache the workers then read
    single = build_parser().parse_args(["--storage", "unused", "--study-name", "single", *ARGS])
    single_best = _single_worker_best(single)
    done = subprocess.run([sys.executable, "-m", "experiments.optuna_distributed", "--storage", postgres_url,
                           "--study-name", "two-workers", "--workers", "2", *ARGS], cwd=REPO, capture_output=True,
                          text=True, timeout=240, env=os.environ | {"PYTHONPATH": str(REPO)})
    assert done.returncode == 0, "\n".join(l for l in done.stderr.splitlines() if "Warning" not in l and "finite &" not in l)[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])

    study = optuna.load_study(study_name="two-workers", storage=postgres_url)
    trials = study.trials
    numbers = sorted(t.number for t in trials)
    assert numbers == list(range(len(trials)))  # each trial recorded once, none lost
    ran = [n for worker in report["workers"] for n in worker["trials"]]
    assert len(report["workers"]) == 2 and all(w["trials"] for w in report["workers"])  # both did work
    assert sorted(ran) == numbers
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    space = SPACES["tiny"]()
    seen = {tuple(t.params[k] for k in KNOBS) for t in trials}
    assert len(seen) == len(space)  # brute force covered the whole space

    assert study.best_value == pytest.approx(single_best, rel=1e-12) and single_best > 0
    assert report["best_value"] == pytest.approx(study.best_value, rel=1e-12)
    assert time.perf_counter() - started < 240


def _single_worker_best(args) -> float:
    """The same study with one worker, in memory."""
    import optuna

    from experiments.optuna_distributed import run_worker

    storage = optuna.storages.InMemoryStorage()
    args.storage = storage
    run_worker(args)
    return optuna.load_study(study_name=args.study_name, storage=storage).best_value
