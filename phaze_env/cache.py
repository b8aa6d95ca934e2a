"""Persistent, content-addressed on-disk cache.

Every expensive result (traced graphs, ILP schedules, placements, evaluations) is stored under a key
that is a hash of everything it depends on, so a second run is a lookup and a crash loses nothing.
Entries are written atomically (temp file + rename) and carry a SHA-256 of their payload: a corrupted
or truncated entry is detected on read, deleted, and reported as a miss so the caller rebuilds it.

The cache root is ``$PHAZE_CACHE_DIR`` or ``~/.cache/phaze-gym``; ``PHAZE_CACHE=0`` disables it.

:func:`model_version` hashes every constant of the performance, area and energy model; each cache whose
values come out of that model (evaluations, bounds, placements, ZigZag GEMMs) puts it in its key, so a
changed constant is a cache miss, never a stale hit. Schedules are keyed by their latency inputs, which
already carry the model's verdict.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import tempfile
import warnings
from pathlib import Path
from typing import Any

_MAGIC = b"PHZC1"
_CACHE_FORMAT_VERSION = 1
MODEL_REVISION = 2
"""Bump when a model *formula* changes (constants are hashed by :func:`model_version` automatically).
2: vector sublanes, on-chip reuse of vector operands, pipelined epilogues, calibrated efficiencies."""
MODEL_MODULES = ("phaze_env.hardware.accelerator", "phaze_env.hardware.area", "phaze_env.hardware.estimator",
                 "phaze_env.hardware.energy", "phaze_env.comm", "phaze_env.placement.inputs")
"""Modules whose upper-case module-level constants (numbers, strings, tables, presets) decide results."""


def cache_root() -> Path:
    return Path(os.environ.get("PHAZE_CACHE_DIR") or Path.home() / ".cache" / "phaze-gym")


def cache_enabled() -> bool:
    return os.environ.get("PHAZE_CACHE", "1") not in ("0", "false", "no", "off")


def _canonical(obj: Any) -> Any:
    """A JSON-able canonical form of ``obj`` (dataclasses, tuples, floats written exactly)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"__dc__": type(obj).__name__, **{f.name: _canonical(getattr(obj, f.name)) for f in dataclasses.fields(obj)}}
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, float):
        return obj.hex()
    if hasattr(obj, "tolist"):  # numpy arrays and scalars
        return _canonical(obj.tolist())
    return obj


def content_key(*parts: Any) -> str:
    """SHA-256 hex digest of a canonical serialisation of ``parts``."""
    payload = json.dumps([_CACHE_FORMAT_VERSION, *map(_canonical, parts)], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def model_constants() -> dict[str, Any]:
    """``"module.NAME" → value`` for every upper-case constant of :data:`MODEL_MODULES` (the hashed inputs)."""
    import importlib

    constants: dict[str, Any] = {}
    for name in MODEL_MODULES:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if attr.isupper() and not callable(value) and not isinstance(value, type(importlib)):
                constants[f"{name}.{attr}"] = value
    return constants


def model_version() -> str:
    """A short hash of :data:`MODEL_REVISION` and :func:`model_constants`: part of every model-dependent cache key."""
    return content_key("model", MODEL_REVISION, model_constants())[:16]


class DiskCache:
    """A namespace of the persistent cache: ``get(key)`` / ``put(key, value)`` with pickled values."""

    def __init__(self, namespace: str, root: Path | str | None = None):
        self.namespace = namespace
        self._root = Path(root) if root is not None else None
        self._memory: dict[str, Any] = {}

    @property
    def directory(self) -> Path:
        return (self._root or cache_root()) / self.namespace

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.pkl"

    def get(self, key: str) -> Any | None:
        if key in self._memory:
            return self._memory[key]
        if not cache_enabled():
            return None
        path = self._path(key)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError:
            return None
        value = self._decode(blob)
        if value is None:
            warnings.warn(f"phaze-gym cache: corrupted entry {path} discarded; it will be rebuilt", stacklevel=2)
            try:
                path.unlink()
            except OSError:
                pass
            return None
        self._memory[key] = value
        return value

    def put(self, key: str, value: Any) -> None:
        self._memory[key] = value
        if not cache_enabled():
            return
        payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        blob = _MAGIC + hashlib.sha256(payload).digest() + payload
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(blob)
            os.replace(tmp, path)
        except OSError as exc:  # a read-only or full disk must not lose the in-memory result
            warnings.warn(f"phaze-gym cache: could not write {path}: {exc}", stacklevel=2)

    def clear_memory(self) -> None:
        self._memory.clear()

    @staticmethod
    def _decode(blob: bytes) -> Any | None:
        header = len(_MAGIC) + 32
        if len(blob) < header or not blob.startswith(_MAGIC):
            return None
        digest, payload = blob[len(_MAGIC):header], blob[header:]
        if hashlib.sha256(payload).digest() != digest:
            return None
        try:
            return pickle.loads(payload)
        except Exception:  # noqa: BLE001 - any unpickling failure is a corrupted entry
            return None
