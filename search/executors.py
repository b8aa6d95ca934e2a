"""Executors for the search: inline (tests, one worker), a local process pool, or a Dask cluster.

All are ``concurrent.futures``-style (``submit`` → future), so the search has one code path.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Iterator


class InlineExecutor(Executor):
    """Runs each task at submission, in this process (deterministic; no pickling)."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - delivered through the future like a pool would
            future.set_exception(exc)  # (KeyboardInterrupt is not: Ctrl-C stops the search at once)
        return future


def _leave_terminal_group() -> None:
    """Worker initializer: Ctrl-C reaches only the main process (one message), not every worker and solver."""
    if hasattr(os, "setpgrp"):
        os.setpgrp()


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
                                   initializer=_leave_terminal_group)
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
        process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)
