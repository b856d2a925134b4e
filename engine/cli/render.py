"""Output shared by the runtime commands: readable tables (rich) by default, the HTTP
API's JSON documents with `--json`, and one way to report a refusal: its message on
stderr and its exit code, never a traceback."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from dsl.diagnostics import RulesError
from engine.cli import exits
from engine.cli.common import print_json
from engine.errors import EngineError

Column = tuple[str, str]  # (header, camelCase key of the wire record)
Handler = Callable[[Any], int]


def console() -> Console:
    """Plain text when piped (no colour, no markup, wide enough not to wrap)."""
    wide = None if sys.stdout.isatty() else 200
    return Console(width=wide, markup=False, highlight=False, emoji=False, soft_wrap=False)


def cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):  # payloads, results: shown as compact JSON
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    text = str(value)
    if len(text) == 27 and text.endswith("Z") and text[10] == "T":  # stored instants
        return text[:19] + "Z"
    return text


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column], empty: str) -> None:
    if not rows:
        print(empty)
        return
    grid = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for header, _ in columns:
        grid.add_column(header, overflow="fold")
    for row in rows:
        grid.add_row(*(cell(row.get(key)) for _, key in columns))
    console().print(grid)


def fields(record: Mapping[str, Any] | None, title: str) -> None:
    """One record as `key: value` lines; nested documents stay JSON-ish."""
    if record is None:
        return
    print(title)
    width = max(len(k) for k in record)
    for key, value in record.items():
        print(f"  {key:<{width}}  {cell(value)}")


def output(data: Any, as_json: bool, human: Callable[[], None]) -> int:
    if as_json:
        print_json(data)
    else:
        human()
    return exits.OK


def fail(err: EngineError | RulesError) -> int:
    """Report a refusal on stderr; the exit code it carries (rules: 1, or 2 when a
    directory is missing)."""
    if isinstance(err, RulesError):
        print(err.render(), file=sys.stderr)
        return exits.of_rules(err)
    print(f"error: {err.message}", file=sys.stderr)
    for line in getattr(err, "errors", ()):
        if line != err.message:
            print(f"  {line}", file=sys.stderr)
    return err.exit_code


def guarded(handler: Handler) -> Handler:
    """Map EngineError and RulesError from a handler to stderr and an exit code."""

    @functools.wraps(handler)
    def run(args: Any) -> int:
        try:
            return handler(args)
        except (EngineError, RulesError) as err:
            return fail(err)

    return run
