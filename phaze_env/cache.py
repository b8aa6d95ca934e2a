"""Persistent, content-addressed on-disk cache.

Every expensive result (traced graphs, ILP schedules, placements, evaluations) is stored under a key
that is a hash of everything it depends on, so a second run is a lookup and a crash loses nothing.
Entries are written atomically (temp file + rename) and carry a SHA-256 of their payload: a corrupted
or truncated entry is detected on read, deleted, and reported as a miss so the caller rebuilds it.

The cache root is ``$PHAZE_CACHE_DIR`` or ``~/.cache/phaze-gym``. ``PHAZE_CACHE=0`` disables every layer:
nothing is read or written, in memory or on disk.

In front of each namespace's directory sits one bounded in-memory LRU, shared by every :class:`DiskCache`
handle of that directory (so ``DiskCache("x")`` made twice is one memory, and a module may make its handle
wherever it likes). It keeps the ``$PHAZE_CACHE_MEMORY_ENTRIES`` (default
:data:`DEFAULT_MEMORY_ENTRIES`; 0 turns the memory off) most recently used entries; an evicted entry is
read back from disk. The bound is by entry count, so a long run's memory stays flat however many distinct
designs it visits. This is the only memo of cached results: callers do not keep their own.

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
import threading
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any

from phaze_env.files import atomic_path

_MAGIC = b"PHZC1"
_CACHE_FORMAT_VERSION = 1
MODEL_REVISION = 2
"""Bump when a model *formula* changes (constants are hashed by :func:`model_version` automatically).
2: vector sublanes, on-chip reuse of vector operands, pipelined epilogues, calibrated efficiencies."""
MODEL_MODULES = ("phaze_env.hardware.accelerator", "phaze_env.hardware.area", "phaze_env.hardware.estimator",
                 "phaze_env.hardware.energy", "phaze_env.hardware.number_format", "phaze_env.comm",
                 "phaze_env.context_parallel", "phaze_env.placement.inputs", "phaze_env.attention")
"""Modules whose upper-case module-level constants (numbers, strings, tables, presets) decide results."""
SYSTEM_MODEL_MODULES = ("phaze_env.hardware.cost", "phaze_env.hardware.system")
"""The system space's power, cost and carbon model: its constants decide each design's chip count and the reference
systems' (hashed by :func:`system_model_version` into a system-space search's signature; an evaluation's own key holds
its accelerator and cluster, chip count included, so these need not be in :func:`model_version`)."""
DEFAULT_MEMORY_ENTRIES = 1024
"""Entries each namespace keeps in memory unless ``$PHAZE_CACHE_MEMORY_ENTRIES`` (or ``memory_entries=``) says
otherwise. Pickled, an evaluation is ≈ 4 kB, a layer schedule under 1 kB, a traced graph ≈ 10 kB (bert-large,
gpt2-xl, llama2-7b), so this is at most some tens of MB per namespace."""
MEMORY_ENTRIES_ENV = "PHAZE_CACHE_MEMORY_ENTRIES"


def cache_root() -> Path:
    return Path(os.environ.get("PHAZE_CACHE_DIR") or Path.home() / ".cache" / "phaze-gym")


def cache_enabled() -> bool:
    return os.environ.get("PHAZE_CACHE", "1") not in ("0", "false", "no", "off")


def memory_entries_limit() -> int:
    """The in-memory bound per namespace: ``$PHAZE_CACHE_MEMORY_ENTRIES`` or :data:`DEFAULT_MEMORY_ENTRIES`."""
    raw = os.environ.get(MEMORY_ENTRIES_ENV, "").strip()
    if not raw:
        return DEFAULT_MEMORY_ENTRIES
    if not raw.isdigit():
        raise ValueError(f"{MEMORY_ENTRIES_ENV} must be a non-negative integer (entries kept in memory per cache "
                         f"namespace), got {raw!r}")
    return int(raw)


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


def model_constants(modules: tuple[str, ...] = MODEL_MODULES) -> dict[str, Any]:
    """``"module.NAME" → value`` for every upper-case constant of ``modules`` (default :data:`MODEL_MODULES`: the
    hashed inputs of :func:`model_version`)."""
    import importlib

    constants: dict[str, Any] = {}
    for name in modules:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if attr.isupper() and not callable(value) and not isinstance(value, type(importlib)):
                constants[f"{name}.{attr}"] = value
    return constants


_VERSIONS: dict[tuple, str] = {}


def model_version() -> str:
    """A short hash of :data:`MODEL_REVISION` and :func:`model_constants`: part of every model-dependent cache key.

    Hashing every constant takes about a millisecond, more than a cached evaluation itself, so the hash is
    remembered per *identity* of the constants: rebinding any of them (a new value, as a patch or an edit
    does) is a new identity and is hashed afresh. Constants are values: mutating one in place is not seen.
    """
    constants = model_constants()
    identity = (MODEL_REVISION, *((name, id(value)) for name, value in constants.items()))
    if identity not in _VERSIONS:
        if len(_VERSIONS) > 64:  # patched variants in a test session; never more than a few in a run
            _VERSIONS.clear()
        _VERSIONS[identity] = content_key("model", MODEL_REVISION, constants)[:16]
    return _VERSIONS[identity]


def system_model_version() -> str:
    """A short hash of the constants of :data:`SYSTEM_MODEL_MODULES` (hashed afresh on every call: a search's
    signature takes it once)."""
    return content_key("system-model", model_constants(SYSTEM_MODEL_MODULES))[:16]


class _Memory:
    """A least-recently-used map of cache entries (thread-safe: executors may share a process)."""

    def __init__(self) -> None:
        self._entries: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Any | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: str, value: Any, limit: int) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > limit:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


_MEMORIES: dict[Path, _Memory] = {}  # one per cache directory: every handle of a namespace shares it
_MEMORIES_LOCK = threading.Lock()


def memory_entry_counts() -> dict[str, int]:
    """Entries held in memory per cache directory (each at most its handles' bound)."""
    with _MEMORIES_LOCK:
        return {str(directory): len(memory) for directory, memory in _MEMORIES.items()}


class DiskCache:
    """A namespace of the persistent cache: ``get(key)`` / ``put(key, value)`` with pickled values.

    A handle is cheap and holds no entries: the in-memory LRU belongs to the directory (``root`` or
    :func:`cache_root`, then ``namespace``) and is shared by every handle of it (module docstring).
    ``memory_entries`` bounds that memory when this handle stores (default :func:`memory_entries_limit`).
    """

    def __init__(self, namespace: str, root: Path | str | None = None, *, memory_entries: int | None = None):
        if memory_entries is not None and (isinstance(memory_entries, bool) or not isinstance(memory_entries, int)
                                           or memory_entries < 0):
            raise ValueError(f"memory_entries must be a non-negative integer, got {memory_entries!r}")
        self.namespace = namespace
        self._root = Path(root) if root is not None else None
        self._memory_entries = memory_entries

    @property
    def directory(self) -> Path:
        return (self._root or cache_root()) / self.namespace

    @property
    def memory_entries(self) -> int:
        """How many entries this handle lets the shared memory keep."""
        return memory_entries_limit() if self._memory_entries is None else self._memory_entries

    @property
    def memory(self) -> _Memory:
        """The in-memory LRU of this namespace's directory (shared; ``len()`` is its entry count)."""
        directory = self.directory
        memory = _MEMORIES.get(directory)
        if memory is None:
            with _MEMORIES_LOCK:
                memory = _MEMORIES.setdefault(directory, _Memory())
        return memory

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.pkl"

    def get(self, key: str) -> Any | None:
        if not cache_enabled():
            return None
        memory = self.memory
        if (value := memory.get(key)) is not None:
            return value
        path = self._path(key)
        try:
            blob = path.read_bytes()
        except OSError:  # missing or unreadable: a miss
            return None
        value = self._decode(blob)
        if value is None:
            warnings.warn(f"phaze-gym cache: corrupted entry {path} discarded; it will be rebuilt", stacklevel=2)
            try:
                path.unlink()
            except OSError:
                pass
            return None
        self._remember(memory, key, value)
        return value

    def put(self, key: str, value: Any) -> None:
        if not cache_enabled():
            return
        self._remember(self.memory, key, value)
        payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        blob = _MAGIC + hashlib.sha256(payload).digest() + payload
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(path, durable=False) as temporary:  # entries are checksummed: no fsync needed
                temporary.write_bytes(blob)
        except OSError as exc:  # a read-only or full disk must not lose the in-memory result
            warnings.warn(f"phaze-gym cache: could not write {path}: {exc}", stacklevel=2)

    def _remember(self, memory: _Memory, key: str, value: Any) -> None:
        limit = self.memory_entries
        if limit:
            memory.put(key, value, limit)

    def clear_memory(self) -> None:
        """Forget the in-memory entries of this namespace (the disk keeps them)."""
        self.memory.clear()

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
