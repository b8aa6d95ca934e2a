"""Process hygiene: a killed or interrupted search leaves no worker, solver or resource tracker behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone
        return None
    return int(stat[stat.rindex(")") + 2:].split()[1])  # the command name in (…) may itself hold spaces


def _children(pid: int) -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and _parent_of(int(entry.name)) == pid]


def _descendants(pid: int) -> list[int]:
    found = []
    for child in _children(pid):
        found += [child, *_descendants(child)]
    return found


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; only its (re-)parent's wait is missing


def _wait_for(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := condition():
            return found
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")


def _kill_leftovers(helpers: dict[int, str]) -> None:
    for pid, line in helpers.items():
        if _alive(pid) and _command_line(pid) == line:  # never a reused pid
            os.kill(pid, signal.SIGKILL)


def test_a_killed_pool_owner_takes_its_workers_solvers_and_tracker_along():
    """The local process pool of :func:`search.executors.make_executor`: when its owner is killed, each worker
    ends itself and whatever it started (a solver; ``sleep`` here), and then the resource tracker ends."""
    owner_code = ("import subprocess\n"
                  "from search.executors import make_executor\n"
                  "with make_executor(2) as pool:\n"
                  "    running = [pool.submit(subprocess.call, ['sleep', '300']) for _ in range(2)]\n"
                  "    running[0].result()\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    owner = subprocess.Popen([sys.executable, "-c", owner_code], env=env)
    helpers: dict[int, str] = {}
    try:
        def two_sleeping_workers():
            descendants = {pid: _command_line(pid) for pid in _descendants(owner.pid)}
            return descendants if sum(line.startswith("sleep 300") for line in descendants.values()) == 2 else None

        helpers = _wait_for(two_sleeping_workers, 120, "two workers running sleep")
        owner.kill()
        owner.wait()
        _wait_for(lambda: not any(_alive(pid) for pid in helpers), 10, f"the end of {helpers}")
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        _kill_leftovers(helpers)


@pytest.mark.slow
def test_workers_and_resource_tracker_die_with_a_killed_search(tmp_path):
    """``kill -9`` of ``python -m search.phaze --workers 2``: its worker processes (and their solvers) and the
    multiprocessing resource tracker exit too, instead of living on re-parented to init."""
    env = {**os.environ, "PHAZE_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(Path(__file__).parents[1])}
    command = [sys.executable, "-m", "search.phaze", "--workload", "bert-large", "--space", "reduced", "--devices", "16",
               "--batch", "64", "--microbatch", "1", "--hbm-gb", "32", "--tensor-widths", "1", "--workers", "2",
               "--quiet", "--out", str(tmp_path / "out")]
    search = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    helpers: dict[int, str] = {}  # pid → command line
    try:
        def workers_and_tracker():
            if search.poll() is not None:
                pytest.fail(f"the search ended (status {search.returncode}) before it had 2 workers")
            children = {pid: _command_line(pid) for pid in _children(search.pid)}
            started = {pid: line for pid, line in children.items() if "from multiprocessing." in line}
            workers = sum("multiprocessing.spawn" in line for line in started.values())
            return started if workers == 2 and len(started) == 3 else None  # + the resource tracker

        started = _wait_for(workers_and_tracker, 300, "2 workers")  # tracing and bounding come first (cold cache)
        time.sleep(1)  # the workers start evaluating (and their solvers run)
        helpers = {**started, **{pid: _command_line(pid) for worker in started for pid in _descendants(worker)}}
        search.kill()
        search.wait()
        _wait_for(lambda: not any(_alive(pid) for pid in helpers), 30, f"the end of {helpers}")
    finally:
        if search.poll() is None:
            search.kill()
            search.wait()
        _kill_leftovers(helpers)


def test_an_interrupted_pool_stops_its_workers_solvers():
    """Ctrl-C (or any error) inside :func:`search.executors.make_executor`: the running tasks' solvers
    (``sleep`` here) stop with their workers instead of running on to their time limit."""
    from search.executors import make_executor

    sleepers: dict[int, str] = {}
    try:
        with pytest.raises(KeyboardInterrupt), make_executor(2) as pool:
            for _ in range(2):
                pool.submit(subprocess.call, ["sleep", "300"])

            def two_sleeps():
                found = {pid: _command_line(pid) for pid in _descendants(os.getpid())}
                found = {pid: line for pid, line in found.items() if line.startswith("sleep 300")}
                return found if len(found) == 2 else None

            sleepers = _wait_for(two_sleeps, 120, "two workers running sleep")
            raise KeyboardInterrupt
        _wait_for(lambda: not any(_alive(pid) for pid in sleepers), 10, f"the end of {sleepers}")
    finally:
        _kill_leftovers(sleepers)
