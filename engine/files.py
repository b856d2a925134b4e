"""Reading the files of a rule tree without ever raising: a file that cannot be read
(permission, a directory where a file belongs, a symbolic link loop), bytes that are
not UTF-8, and YAML or JSON nested deeper than the engine reads each become one
located Diagnostic (docs/rules.md#error-catalogue: E0905, E0907, E0908).

The nesting bound is checked before a parser builds anything: the libyaml loader
recurses in C (a file nested 100,000 deep crashes the process) and the Python ones
recurse until RecursionError, so the depth is measured without recursion: for JSON
from its brackets here, for YAML from the parser's event stream, with its aliases
(engine.yaml_reader)."""

from __future__ import annotations

import errno
import fnmatch
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from dsl.diagnostics import LINE_BREAK, Collector, Span
from engine.places import Root

# How deeply a YAML or JSON file may nest mappings and lists (E0908): far beyond any
# registry or configuration, and well within what reading it, validating it and
# checking a payload against a schema from it can recurse.
MAX_NESTING = 64

_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


@dataclass(frozen=True)
class Refusal:
    """Why a file's text is refused before a parser builds anything from it, and where:
    a diagnostic waiting for its file's name."""

    code: str
    message: str
    line: int
    column: int
    hint: str


def why_unreadable(err: OSError, path: Path) -> str:
    """What is wrong with a path that could not be read, in a few words."""
    if err.errno in (errno.EACCES, errno.EPERM):
        return "permission denied: this user cannot read it"
    if err.errno == errno.EISDIR:
        return "it is a directory, not a file"
    if err.errno == errno.ELOOP:
        return "it is a symbolic link loop"
    if err.errno == errno.ENOENT and path.is_symlink():
        return "it is a broken symbolic link"
    return err.strerror or type(err).__name__


def not_a_file(path: Path) -> str | None:
    """Why an existing path cannot be read as a file (None: it is one, or absent)."""
    if not os.path.lexists(path) or path.is_file():
        return None
    if path.is_dir():
        return "it is a directory, not a file"
    try:
        path.stat()
    except OSError as err:
        return why_unreadable(err, path)
    return "it is not a regular file"


def unreadable(collector: Collector, name: str, reason: str) -> None:
    """E0905 at the file or directory `name` (its place) that cannot be read."""
    what = PurePosixPath(name).name or name
    collector.error("E0905", f"cannot read {what}: {reason}", Span(name, 1, 1))


def read_text(
    path: Path, name: str, collector: Collector, breaks: re.Pattern[str] = LINE_BREAK
) -> str | None:
    """The text of the file `path`, registered under its place `name` for quoting in
    diagnostics (its lines split at `breaks`, as its parser counts them); None (with
    E0905 or E0907, at the first byte that is not UTF-8) when it cannot be read as text."""
    try:
        data = path.read_bytes()
    except OSError as err:
        unreadable(collector, name, why_unreadable(err, path))
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        collector.sources.add(name, data.decode("utf-8", "replace"), breaks)
        start = data.rfind(b"\n", 0, err.start) + 1
        line = data.count(b"\n", 0, err.start) + 1
        column = len(data[start : err.start].decode("utf-8", "replace")) + 1
        collector.error(
            "E0907",
            f"not UTF-8 text: byte 0x{data[err.start]:02x} cannot be decoded",
            Span(name, line, column),
            "save the file as UTF-8",
        )
        return None
    collector.sources.add(name, text, breaks)
    return text


def walk(root: Root, pattern: str, collector: Collector) -> list[Path]:
    """Every entry under `root` (subdirectories too, symbolic links to directories not
    followed) whose name matches `pattern`, sorted; a directory that cannot be listed
    is E0905 (at its place) instead of being skipped in silence."""
    found: list[Path] = []

    def refused(err: OSError) -> None:
        where = Path(err.filename) if err.filename else root.path
        unreadable(collector, root.name(where), why_unreadable(err, where))

    for folder, dirs, files in os.walk(root.path, onerror=refused):
        dirs.sort()
        found += [Path(folder) / n for n in (*dirs, *files) if fnmatch.fnmatchcase(n, pattern)]
    return sorted(found)


def listing(root: Root, folder: Path, pattern: str, collector: Collector) -> list[Path]:
    """The entries of `folder` (under `root`) itself whose name matches `pattern`,
    sorted; none when it does not exist, E0905 when it cannot be listed."""
    try:
        with os.scandir(folder) as entries:
            names = [entry.name for entry in entries]
    except FileNotFoundError:
        return []
    except OSError as err:
        unreadable(collector, root.name(folder), why_unreadable(err, folder))
        return []
    return sorted(folder / name for name in names if fnmatch.fnmatchcase(name, pattern))


def json_too_deep(text: str) -> tuple[int, int] | None:
    """Where JSON text first nests deeper than MAX_NESTING (line, column), or None."""
    depth = 0
    for token in _JSON_TOKEN.finditer(text):
        mark = token.group()
        if mark in "[{":
            depth += 1
            if depth > MAX_NESTING:
                at = token.start()
                return text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
        elif mark in "]}":
            depth -= 1
    return None


def json_refusal(text: str) -> Refusal | None:
    """E0908 where JSON text first nests deeper than MAX_NESTING, or None."""
    deep = json_too_deep(text)
    return None if deep is None else too_deep(deep)


def read_nested(
    path: Path, name: str, collector: Collector, measure: Callable[[str], Refusal | None]
) -> str | None:
    """`read_text`, then refused (None, with the refusal's diagnostic) when `measure`
    (json_refusal) refuses the text."""
    text = read_text(path, name, collector)
    if text is None:
        return None
    found = measure(text)
    if found is not None:
        at = Span(name, found.line, found.column)
        collector.error(found.code, found.message, at, found.hint)
        return None
    return text


def too_deep(where: tuple[int, int], depth: int = MAX_NESTING) -> Refusal:
    """E0908 at `where`, the place the level past `depth` opens."""
    hint = "the engine reads mappings and lists nested at most this deep"
    return Refusal("E0908", f"nested more than {depth} levels deep", *where, hint)
