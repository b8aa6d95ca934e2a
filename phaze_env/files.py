"""Writing files safely: replaced in one step (a reader or a crash sees the old file or the new one, never half
of one), into output directories checked before a long run rather than after it."""

from __future__ import annotations

import os
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def atomic_path(path: str | os.PathLike, *, durable: bool = True) -> Iterator[Path]:
    """A temporary path next to ``path`` for any writer (``torch.save``, ``model.save``, ``savefig``) to write;
    it replaces ``path`` when the block ends, and is removed when the block raises.

    The temporary name keeps ``path``'s suffix (writers that choose the format by it, or append a missing
    one, see the real one) and starts with a dot. The writer creates it, so it gets the usual permissions.
    ``durable=False`` skips the fsync: for files a reader checks and rebuilds anyway (the cache's checksummed
    entries), where a sync per entry would cost more than losing one to a power cut."""
    path = Path(path)
    temporary = path.with_name(f".{path.stem}.{secrets.token_hex(4)}.tmp{path.suffix}")
    try:
        yield temporary
        if durable:
            with open(temporary, "rb+") as handle:  # on disk before the rename: a power cut leaves a whole file
                os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


def writable_directory(path: str | os.PathLike) -> Path:
    """``path``, created if missing; ``ValueError`` (one line) when it cannot be created or written to."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test-{secrets.token_hex(4)}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise ValueError(f"output directory {path} is not writable: {exc.strerror or exc}") from None
    return path
