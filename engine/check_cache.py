"""The check cache: what `engine check` worked out from a file's bytes, kept under the
instance's `var/cache/check/` so that the next check of the same bytes skips the work
(docs/cli.md#the-check-cache). Three kinds of entry: a parsed rule file (its model, or
the syntax diagnostics it raised), a JSON Schema's check against its metaschema, and
the validated entries of registry/definitions.yaml and config/repos.yaml (only when
they raised no diagnostic).

Content-addressed: an entry's name is the sha256 of its kind, the input's name (spans
carry it) and bytes, and a fingerprint of everything that could change the answer (the
engine's version, Python's, the versions of the libraries that read the files, the
grammar text and the source of the modules that build the values). Nothing is ever trusted
across any of these; a changed input simply has another name.

Serialization is pickle (protocol 5) of the frozen dataclasses the parser builds, each
written as a call of its class with its field values (`_Pickler`): read back with the
cycle collector paused (engine.loading) that is about ten times as fast as parsing,
where rebuilding them from marshal'd plain data would cost a Python call per value
anyway (and a second description of the model to keep in step). pickle runs
code named by the file it reads, so only files this engine wrote are read: the
directory is the instance's own (mode 0700, owned by this user; any other directory
is not used); and each entry carries the sha256 of its body, so a torn or damaged
entry (a full disk, a crash, a stray edit) is ignored and rewritten, never unpickled.
Every failure to read, write or prune is silent: the cache can only make a check
faster, never different, and never fail it. Writes go to a temporary file renamed
into place, so two checks at once see either a whole entry or none. The directory is
bounded: past MAX_ENTRIES entries or MAX_BYTES, the least recently used go."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import os
import pickle
import stat
import sys
import tempfile
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from engine import clock
from engine.home import named_home, var_dir

ENV = "ENGINE_CHECK_CACHE"  # "0" turns the cache off (as `engine check --no-cache`)
SUBDIR = ("cache", "check")
MAGIC = b"engine-check-cache 2\n"
MAX_ENTRIES = 2000
MAX_BYTES = 64 * 1024 * 1024
STALE_TEMP_SECONDS = 3600  # a temporary file this old was left by a check that died
_DIGEST = hashlib.sha256().digest_size

# The modules whose code decides a cached value: the parser and the model it builds,
# the loader (schemas, registry and configuration YAML) and the models it validates
# into, and this file (the entry format).
_SOURCES = (
    ("dsl", ("rules.lark", "parser.py", "model.py", "expr.py", "diagnostics.py", "spelling.py")),
    ("engine", ("loading.py", "check_cache.py", "files.py", "places.py", "home.py")),
    ("engine/core", ("registry.py", "config.py", "inputs.py")),
)
_LIBRARIES = ("engine", "lark", "jsonschema", "pydantic", "pydantic_core", "ruamel.yaml")


def enabled(no_cache_option: bool = False, environ: Any = os.environ) -> bool:
    """Whether to use the cache: not with `--no-cache`, nor with ENGINE_CHECK_CACHE=0."""
    return not no_cache_option and environ.get(ENV, "").strip() != "0"


def default_directory() -> Path:
    """`<home>/var/cache/check`, or `./var/cache/check` without an instance directory
    (the var/ of the default database, docs/deploy.md#the-instance-directory)."""
    return var_dir(named_home()).joinpath(*SUBDIR)


@cache
def fingerprint() -> bytes:
    """The versions and code an entry depends on, hashed; computed once a process."""
    versions = {}
    for name in _LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:  # pragma: no cover - a bare checkout
            versions[name] = "unknown"
    return fingerprint_of(Path(__file__).resolve().parent.parent, versions)


def fingerprint_of(root: Path, versions: dict[str, str]) -> bytes:
    """sha256 over Python's version, the library `versions` and the source files
    (`_SOURCES`) under `root`, the directory holding the dsl and engine packages."""
    h = hashlib.sha256()
    h.update(sys.version.encode() + b"\0" + sys.implementation.cache_tag.encode() + b"\0")
    for name, found in sorted(versions.items()):
        h.update(f"{name}={found}\0".encode())
    for package, names in _SOURCES:
        for name in names:
            try:
                h.update(name.encode() + b"\0" + (root / package / name).read_bytes() + b"\0")
            except OSError:  # pragma: no cover - an installation without its sources
                h.update(name.encode() + b"\0?\0")
    return h.digest()


def key(kind: str, name: str, data: bytes) -> str:
    """The entry name for `kind` of the input called `name` holding `data`."""
    h = hashlib.sha256(fingerprint())
    h.update(kind.encode() + b"\0" + name.encode() + b"\0" + data)
    return h.hexdigest()


class CheckCache:
    """One check's view of the cache directory (never raises)."""

    def __init__(
        self, directory: Path, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES
    ) -> None:
        self.directory = directory
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self.usable: bool | None = None  # decided on first use
        self.hits = 0
        self.misses = 0
        self.written = 0

    def _ready(self, create: bool) -> bool:
        """Whether the directory exists, is ours and private (made so when `create`)."""
        if self.usable:
            return True
        try:
            if create:
                os.makedirs(self.directory, mode=0o700, exist_ok=True)
            info = os.lstat(self.directory)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
                self.usable = False
                return False
            if stat.S_IMODE(info.st_mode) & 0o077:
                os.chmod(self.directory, 0o700)
        except OSError:
            return False
        self.usable = True
        return True

    def get(self, entry: str) -> Any | None:
        """The value stored under `entry`; None when absent or not whole."""
        if self.usable is False or not self._ready(create=False):
            self.misses += 1
            return None
        path = self.directory / entry
        try:
            data = path.read_bytes()
        except OSError:
            self.misses += 1
            return None
        body = data[len(MAGIC) + _DIGEST :]
        head = data[: len(MAGIC) + _DIGEST]
        if head != MAGIC + hashlib.sha256(body).digest():
            self.misses += 1
            return None
        try:
            value = pickle.loads(body)
        except Exception:  # a body we wrote that no longer loads: recompute
            self.misses += 1
            return None
        self.hits += 1
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: pruned last
        return value

    def put(self, entry: str, value: Any) -> None:
        """Store `value` under `entry` (atomically; silently not, where we cannot)."""
        if self.usable is False or not self._ready(create=True):
            return
        try:
            body = dumps(value)
        except Exception:  # pragma: no cover - every cached value pickles
            return
        try:
            fd, temp = tempfile.mkstemp(prefix=".tmp-", dir=self.directory)
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(MAGIC + hashlib.sha256(body).digest() + body)
            os.replace(temp, self.directory / entry)
            self.written += 1
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temp)

    def prune(self) -> None:
        """Keep the directory bounded: when a check wrote entries and there are more than
        `max_entries` or `max_bytes`, remove the least recently used down to three quarters
        of each bound; remove temporary files a dead check left."""
        if not self.written:
            return
        try:
            with os.scandir(self.directory) as found:
                entries = [(e.stat().st_mtime, e.stat().st_size, e.path, e.name) for e in found]
        except OSError:
            return
        now = clock.host_seconds()  # file modification times are the host's
        kept = []
        for mtime, size, path, name in entries:
            if name.startswith(".tmp-"):
                if now - mtime > STALE_TEMP_SECONDS:
                    _remove(path)
            else:
                kept.append((mtime, size, path))
        total = sum(size for _, size, _ in kept)
        if len(kept) <= self.max_entries and total <= self.max_bytes:
            return
        kept.sort()
        count = len(kept)
        for _, size, path in kept:
            if count <= self.max_entries * 3 // 4 and total <= self.max_bytes * 3 // 4:
                break
            _remove(path)
            count -= 1
            total -= size


def dumps(value: Any) -> bytes:
    out = io.BytesIO()
    _Pickler(out, protocol=5).dump(value)
    return out.getvalue()


class _Pickler(pickle.Pickler):
    """Writes a dataclass whose fields all go to `__init__` (and that has no
    `__post_init__`) as `cls(*values)`: pickle's default for a frozen dataclass with
    slots calls `dataclasses.fields()` for every value it reads back, twice as slow."""

    def reducer_override(self, obj: Any) -> Any:
        names = _init_fields(type(obj))
        if names is None:
            return NotImplemented
        return type(obj), tuple([getattr(obj, name) for name in names])


_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _init_fields(cls: type) -> tuple[str, ...] | None:
    """The field names of a dataclass that `cls(*values)` rebuilds; None otherwise."""
    try:
        return _FIELDS[cls]
    except KeyError:
        pass
    found: tuple[str, ...] | None = None
    if dataclasses.is_dataclass(cls) and not hasattr(cls, "__post_init__"):
        fields = dataclasses.fields(cls)
        if all(f.init and not f.kw_only for f in fields):
            found = tuple(f.name for f in fields)
    _FIELDS[cls] = found
    return found


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
