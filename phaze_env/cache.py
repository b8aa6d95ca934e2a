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

Keys are content-addressed, code included: :func:`code_key` hashes the entry's inputs together with
:func:`code_version` of the module that produces it — a hash of the source text of that module and of every
project module it imports, transitively (:func:`code_closure`). So any edit of the code or of a constant written in
it (an estimator formula, a placement rule, a hardware table) is a new key and the entry is recomputed; there is no
version number to bump. The fingerprint is taken once per process, at first use: a module patched in memory
(``monkeypatch.setattr`` in a test, an edit in a notebook) is not seen, so such code runs with ``cache=False``,
``PHAZE_CACHE=0`` or its own ``PHAZE_CACHE_DIR``. Libraries outside the project (torch, transformers, the
solvers) are not hashed; a key that depends on one names its version itself (the ZigZag GEMMs).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import json
import os
import pickle
import re
import sys
import threading
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterator

from phaze_env.files import atomic_path

_MAGIC = b"PHZC1"
"""The on-disk encoding of an entry (this header, the SHA-256 of the payload, the pickled value): the only format
marker, checked on read. Keys need none: this module is in every :func:`code_closure`, so a change of the encoding
is a change of every key."""
PROJECT_PACKAGES = ("phaze_env", "search", "baselines", "experiments")
"""The project's top-level packages: an import of one of their modules is followed into :func:`code_closure`."""
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


def _content_key(*parts: Any) -> str:
    """SHA-256 hex digest of a canonical serialisation of ``parts``."""
    payload = json.dumps(list(map(_canonical, parts)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


MOVED_ASSUMPTIONS_ENV = "PHAZE_MOVED_ASSUMPTIONS"
"""Set by :func:`phaze_env.assumptions.moved` while model constants are moved in memory: ``[[module, name, value],
…]``, the moved constants and the modules that define them (inherited by the search's worker processes)."""


def code_key(module: str, *parts: Any) -> str:
    """The cache key of an entry that ``module``'s code computes from ``parts``: :func:`_content_key` of ``parts``
    and :func:`code_version` of ``module`` (pass ``__name__``), so an edit of that code is a new key. A module run as
    a program (``python -m phaze_env.evaluate``: ``__name__`` is ``"__main__"``) is keyed by its real name, so the
    command line and the API share entries. A constant moved in memory by :func:`phaze_env.assumptions.moved` is an
    edit the fingerprint cannot see: each one defined in the module's closure (:func:`moved_constants`) joins the key,
    so a moved result and a nominal one never share an entry; with nothing moved the key is as before."""
    name = _real_name(module)
    return _content_key(code_version(name), *moved_constants(name), *parts)


def moved_constants(module: str) -> tuple:
    """``(("moved", [[module, name, value], …]),)`` for the constants moved now (:data:`MOVED_ASSUMPTIONS_ENV`) that
    are defined in :func:`code_closure` of ``module``; ``()`` when none is."""
    raw = os.environ.get(MOVED_ASSUMPTIONS_ENV)
    if not raw:
        return ()
    closure = code_closure(module)
    inside = [entry for entry in _parse_moved(raw) if entry[0] in closure]
    return (("moved", inside),) if inside else ()


@functools.lru_cache(maxsize=8)
def _parse_moved(raw: str) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(entry) for entry in json.loads(raw))


def _real_name(module: str) -> str:
    """``module``, or for ``"__main__"`` the name it was run under (``python -m NAME``: its ``__spec__``)."""
    if module == "__main__":
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if spec is not None and spec.name:
            return spec.name
    return module


@functools.cache
def code_version(*modules: str) -> str:
    """A short hash of the source text of :func:`code_closure` of ``modules`` (their names and bytes; not their
    paths, so a copy of the project elsewhere has the same fingerprint). Computed once per process."""
    digest = hashlib.sha256()
    for name in code_closure(*modules):
        digest.update(f"{name}\0{hashlib.sha256(_source(name)).hexdigest()}\0".encode())
    return digest.hexdigest()[:16]


@functools.cache
def code_closure(*modules: str) -> tuple[str, ...]:
    """``modules`` and every project module (:data:`PROJECT_PACKAGES`) they import, transitively, sorted.

    Imports are read from the source text — at module level and inside functions, lazy ones included — without
    importing anything, as ``tests/test_layering.py`` reads them (``from a import b`` counts ``a.b`` when it is a
    module, else ``a``). A package's ``__init__`` counts when it is imported by name, not as the parent of an
    imported submodule: what a result runs is reached through the imports. Raises ``ValueError`` for a name that is
    not a project module."""
    unknown = [name for name in modules if _module_path(name) is None]
    if unknown:
        raise ValueError(f"not modules of the project ({', '.join(PROJECT_PACKAGES)}): {', '.join(unknown)}")
    seen: set[str] = set()
    pending = list(modules)
    while pending:
        name = pending.pop()
        if name not in seen:
            seen.add(name)
            pending.extend(_imports(name))
    return tuple(sorted(seen))


_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(?P<base>\.*[\w.]*)[ \t]+import[ \t]+(?P<names>\([^)]*\)|(?:[^\n;#\\]|\\\n)*)"
                     r"|import[ \t]+(?P<modules>(?:[^\n;#\\]|\\\n)*))", re.MULTILINE)
"""An import statement at the start of a line (parenthesised and backslash-continued name lists included). A line
of a docstring that reads like one only adds modules to hash, never loses one."""


@functools.cache
def _imports(name: str) -> frozenset[str]:
    """The project modules that module ``name``'s source imports (the most specific module each name resolves to)."""
    is_package = os.path.basename(_module_path(name)) == "__init__.py"
    found: set[str] = set()
    for match in _import_statements(_source(name).decode("utf-8", errors="replace")):
        if match["modules"] is not None:
            targets = _names(match["modules"])
        else:
            base = _absolute(match["base"], name, is_package)
            targets = [f"{base}.{alias}" for alias in _names(match["names"])]
        found.update(filter(None, map(_resolve, targets)))
    found.discard(name)
    return frozenset(found)


def _import_statements(text: str) -> Iterator[re.Match]:
    """Every :data:`_IMPORT` statement of ``text``: each holds the word ``import`` on its first line, so only the
    lines where ``str.find`` sees it are matched (a tenth of the time of scanning every line)."""
    position = text.find("import")
    while position != -1:
        match = _IMPORT.match(text, text.rfind("\n", 0, position) + 1)
        if match is not None:
            yield match
        position = text.find("import", max(position + len("import"), match.end() if match else 0))


def _names(text: str) -> list[str]:
    """The imported names of an import list (``a.b as c, d`` → ``a.b``, ``d``)."""
    text = re.sub(r"#[^\n]*|\\\n", " ", text).strip().strip("()")
    return [alias.split()[0] for alias in text.split(",") if alias.strip() and alias.split()[0] != "*"]


def _absolute(base: str, importer: str, is_package: bool) -> str:
    """A ``from`` import's module as an absolute name (``..x`` inside ``a.b.c`` is ``a.x``)."""
    level = len(base) - len(base.lstrip("."))
    if not level:
        return base
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    return ".".join(package[:len(package) - level + 1] + ([base[level:]] if base[level:] else []))


def _resolve(dotted: str) -> str | None:
    """The most specific project module ``dotted`` names (``a.b.NAME`` → ``a.b``), or ``None``."""
    parts = dotted.split(".")
    if parts[0] not in PROJECT_PACKAGES:
        return None
    return next((".".join(parts[:i]) for i in range(len(parts), 0, -1) if _module_path(".".join(parts[:i]))), None)


def _module_path(name: str) -> str | None:
    """The source file of project module ``name``, or ``None``."""
    return _project_modules().get(name)


@functools.cache
def _project_modules() -> dict[str, str]:
    """Dotted name → source file of every module of :data:`PROJECT_PACKAGES`, each package where Python would
    import it from (found without importing it)."""
    modules: dict[str, str] = {}
    for top in PROJECT_PACKAGES:
        spec = importlib.util.find_spec(top)
        if spec is None or not spec.submodule_search_locations:
            continue
        root = next(iter(spec.submodule_search_locations))
        for directory, subdirectories, files in os.walk(root):
            subdirectories[:] = [d for d in subdirectories if d.isidentifier() and d != "__pycache__"]  # packages only
            package = [top, *os.path.relpath(directory, root).split(os.sep)] if directory != root else [top]
            for file in files:
                if file.endswith(".py"):
                    parts = package if file == "__init__.py" else [*package, file[:-3]]
                    modules[".".join(parts)] = os.path.join(directory, file)
    return modules


@functools.cache
def _source(name: str) -> bytes:
    """Project module ``name``'s source as it is on disk when first asked for (once per process)."""
    with open(_module_path(name), "rb") as file:
        return file.read()


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
