"""`engine fmt`: rule files in their canonical layout, old spellings rewritten
(docs/cli.md#engine-fmt, docs/rules.md#formatting).

Import-light: it runs in CI over many files, so it reads files itself and imports the
rules loader (for the default rules directory) only when no file is named."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsl.diagnostics import RulesError
from dsl.format import Note, format_text
from engine.cli import exits


def register(sub: Any) -> None:
    p = sub.add_parser(
        "fmt",
        help="lay rule files out canonically and rewrite old spellings",
        description="Format rule files: the canonical layout (docs/rules.md#formatting), "
        "comments kept, every old spelling rewritten to its new form. With one file, "
        "print its formatted text; with several, a unified diff of each one that would "
        "change. --check lists the files that would change (exit 1 if any); --write "
        "rewrites them in place. Exit 0 done, 1 a file would change (--check), cannot be "
        "rewritten or does not lex, 2 usage.",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--check", action="store_true", help="list the files that would change; exit 1 if any"
    )
    mode.add_argument("--write", action="store_true", help="rewrite changed files in place")
    p.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="rule files, or directories (every *.rules below them); default: the rules "
        "directory (--rules, ENGINE_RULES, the instance directory's loops/)",
    )
    p.add_argument("--home", type=Path, default=None, metavar="DIR", help="the instance directory")
    p.add_argument(
        "--rules", type=Path, default=None, metavar="DIR", help="the rules directory (loops/)"
    )
    p.set_defaults(handler=run_fmt)


class _Usage(Exception):
    pass


def _default_rules(args: argparse.Namespace) -> Path:
    if args.rules is not None:
        return Path(args.rules)
    if args.home is not None:
        os.environ["ENGINE_HOME"] = str(Path(args.home).absolute())
    from engine.home import instance_home  # only here: a named file needs neither
    from engine.loading import default_paths

    instance_home()
    return default_paths().rules


def _files(args: argparse.Namespace) -> list[Path]:
    given = [Path(p) for p in args.paths] or [_default_rules(args)]
    found: list[Path] = []
    for path in given:
        if path.is_dir():
            found += sorted(p for p in path.rglob("*.rules") if p.is_file())
        elif path.is_file():
            found.append(path)
        else:
            what = "does not exist" if not path.exists() else "is not a file or directory"
            raise _Usage(f"error: {path} {what}")
    return list(dict.fromkeys(found))


def _name(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


@dataclass
class _Result:
    name: str
    path: Path
    before: str
    after: str | None  # None: refused (it does not lex)
    notes: tuple[Note, ...] = ()

    @property
    def changed(self) -> bool:
        return self.after is not None and self.after != self.before

    @property
    def blocked(self) -> bool:
        return self.after is None or any(n.blocking for n in self.notes)


def _format(path: Path) -> _Result:
    name = _name(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise _Usage(f"error: cannot read {name}: {err.strerror or err}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        print(f"{name}:{line}: error: not UTF-8 text; save the file as UTF-8", file=sys.stderr)
        return _Result(name, path, "", None)
    try:
        formatted = format_text(text, name)
    except RulesError as err:
        print(err.render(), file=sys.stderr)
        return _Result(name, path, text, None)
    return _Result(name, path, text, formatted.text, formatted.notes)


def _labels(name: str) -> tuple[str, str]:
    """A diff's file labels, git's `a/` and `b/` before a relative name."""
    return (name, name) if Path(name).is_absolute() else (f"a/{name}", f"b/{name}")


def _write(path: Path, text: str) -> None:
    """Replace the file at once: a temporary file beside it, renamed over it."""
    mode = path.stat().st_mode & 0o7777
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def run_fmt(args: argparse.Namespace) -> int:
    try:
        paths = _files(args)
        results = [_format(path) for path in paths]
    except _Usage as err:
        print(err, file=sys.stderr)
        return exits.USAGE
    for result in results:
        for note in result.notes:
            print(note.render(result.name), file=sys.stderr)
    failed = any(r.blocked for r in results)
    if args.check:
        changed = [r for r in results if r.changed]
        for result in changed:
            print(f"would reformat {result.name}")
        return exits.INVALID if changed or failed else exits.OK
    if args.write:
        for result in results:
            if result.changed and result.after is not None:
                try:
                    _write(result.path, result.after)
                except OSError as err:
                    print(f"error: cannot write {result.name}: {err.strerror}", file=sys.stderr)
                    return exits.USAGE
                print(f"formatted {result.name}")
        return exits.INVALID if failed else exits.OK
    if len(results) == 1 and len(args.paths) == 1 and args.paths[0].is_file():
        if results[0].after is not None:
            sys.stdout.write(results[0].after)
    else:
        for result in results:
            if result.changed and result.after is not None:
                sys.stdout.writelines(
                    difflib.unified_diff(
                        result.before.splitlines(keepends=True),
                        result.after.splitlines(keepends=True),
                        *_labels(result.name),
                    )
                )
    return exits.INVALID if failed else exits.OK
