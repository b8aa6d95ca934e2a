"""Executors for the search: inline (tests, one worker), a local process pool, or a Dask cluster.

All are ``concurrent.futures``-style (``submit`` → future), so the search has one code path.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Iterator

from phaze_env.cache import MOVED_ASSUMPTIONS_ENV


class InlineExecutor(Executor):
    """Runs each task at submission, in this process (deterministic; no pickling)."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - delivered through the future like a pool would
            future.set_exception(exc)  # (KeyboardInterrupt is not: Ctrl-C stops the search at once)
        return future


def _init_worker() -> None:
    """Worker initializer: leave the terminal's process group, die with the parent, and run the model under the
    parent's moved assumptions if any (:func:`phaze_env.assumptions.apply_environment`)."""
    if os.environ.get(MOVED_ASSUMPTIONS_ENV):  # only then: a worker of a nominal run imports nothing more
        from phaze_env.assumptions import apply_environment

        apply_environment()
    _leave_terminal_group()
    threading.Thread(target=_exit_when_parent_dies, name="parent-death-guard", daemon=True).start()


def _leave_terminal_group() -> None:
    """Ctrl-C reaches only the main process (one message), not every worker and solver."""
    if hasattr(os, "setpgrp"):
        os.setpgrp()


def _exit_when_parent_dies() -> None:
    """Wait for the parent process to end (``kill -9`` included), then end this worker and its solvers.

    Orphaned workers would otherwise run on under init, holding the resource tracker's pipe open so that it
    never exits either. The wait is on the parent's multiprocessing sentinel, a pipe that closes when the
    parent *process* does: ``prctl(PR_SET_PDEATHSIG)`` would instead fire when the *thread* that spawned the
    worker ends, and ``ProcessPoolExecutor`` spawns workers from whichever thread calls ``submit``.
    """
    multiprocessing.parent_process().join()
    if hasattr(os, "getpgrp") and os.getpgrp() == os.getpid():  # this worker leads its group: it and its solvers
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os._exit(1)


@contextmanager
def make_executor(workers: int, scheduler: str | None = None) -> Iterator[Executor]:
    """``scheduler``: a Dask scheduler address (``tcp://host:8786``); else ``workers`` local processes."""
    if scheduler:
        try:
            from distributed import Client
        except ImportError as exc:  # pragma: no cover - the dist extra is missing
            raise ValueError("--scheduler needs dask.distributed: pip install 'phaze-gym[dist]'") from exc
        try:
            client = Client(scheduler, timeout="10s")
        except OSError as exc:
            raise ValueError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from exc
        try:
            yield client.get_executor()
        finally:
            client.close()
    elif workers <= 1:
        yield InlineExecutor()
    else:
        # spawn: workers start clean (no inherited torch/OpenMP state) and read graphs from the disk cache
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_init_worker)
        try:
            yield pool
        except BaseException:
            _stop_now(pool)  # interrupted or failed: running evaluations are abandoned, not waited for
            raise
        pool.shutdown(wait=True)


def _stop_now(pool: ProcessPoolExecutor) -> None:
    terminate = getattr(pool, "terminate_workers", None)  # Python ≥ 3.14
    if terminate is not None:
        terminate()
        return
    for process in list((pool._processes or {}).values()):  # ≤ 3.13 has no public way to stop running tasks
        try:
            os.killpg(process.pid, signal.SIGTERM)  # the group the worker leads: it and the solver it runs
        except (AttributeError, ProcessLookupError, PermissionError):  # no process groups, or not led yet
            process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)
