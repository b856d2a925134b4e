"""Output shared by the runtime commands: readable tables (rich) by default, the HTTP
API's JSON documents with `--json`, and one way to report a refusal: its message on
stderr and its exit code, never a traceback."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from dsl.diagnostics import RulesError
from engine.cli import exits
from engine.cli.common import print_json
from engine.core import timefmt
from engine.errors import EngineError

Column = tuple[str, str]  # (header, camelCase key of the wire record)
Handler = Callable[[Any], int]

# Columns holding an identity a reader copies into the next command: printed whole on
# one line at any width; the other columns wrap, and those that do not fit are left out.
WHOLE = frozenset({"runId", "eventId", "proposalId", "findingId", "entityId", "seq", "name"})
GAP = 3  # between two columns of a SIMPLE_HEAD table without edges
NARROWEST = 6  # a wrapping column is shown only when this many characters fit


def console() -> Console:
    """Plain text when piped (no colour, no markup, wide enough not to wrap)."""
    wide = None if sys.stdout.isatty() else 200
    return Console(width=wide, markup=False, highlight=False, emoji=False, soft_wrap=False)


def cell(value: Any, now: datetime | None = None) -> str:
    """A value as table text; with `now`, instants read relative to it (`12m ago`)."""
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):  # payloads, results: shown as compact JSON
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    text = str(value)
    if now is not None:
        return timefmt.relative_text(text, now) or "-"
    if len(text) == 27 and text.endswith("Z") and text[10] == "T":  # stored instants
        return text[:19] + "Z"
    return text


def fit(columns: Sequence[Column], cells: Sequence[Sequence[str]], width: int) -> list[int]:
    """The indexes of the columns shown in `width` characters: every id column, and the
    others from the left while each still gets NARROWEST characters (or its own width)."""
    natural = [max(len(h), *(len(row[i]) for row in cells)) for i, (h, _) in enumerate(columns)]
    shown = [i for i, (_, key) in enumerate(columns) if key in WHOLE]
    used = sum(natural[i] for i in shown) + GAP * (len(shown) - 1)
    for i, (_, key) in enumerate(columns):
        if key not in WHOLE and used + GAP + min(natural[i], NARROWEST) <= width:
            shown.append(i)
            used += GAP + min(natural[i], NARROWEST)
    return sorted(shown)


def grid(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[Column], width: int, now: datetime | None
) -> Table:
    """The table of `rows` for a console `width` wide; ids never wrap (docs/cli.md#output)."""
    cells = [[cell(row.get(key), now) for _, key in columns] for row in rows]
    shown = fit(columns, cells, width)
    drawn = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for i in shown:
        header, key = columns[i]
        if key in WHOLE:
            longest = max(len(header), *(len(row[i]) for row in cells))
            drawn.add_column(header, no_wrap=True, min_width=longest)
        else:
            drawn.add_column(header, overflow="fold")
    for row in cells:
        drawn.add_row(*(row[i] for i in shown))
    return drawn


def table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[Column],
    empty: str,
    now: datetime | None = None,
) -> None:
    """Print `rows`, or `empty` when there are none; with `now`, times are relative."""
    if not rows:
        print(empty)
        return
    out = console()
    out.print(grid(rows, columns, out.width, now))


def fields(record: Mapping[str, Any] | None, title: str, now: datetime | None = None) -> None:
    """One record as `key: value` lines; nested documents stay JSON-ish. With `now`, an
    instant is shown whole and relative: `2026-11-30T09:00:00Z (12m ago)`."""
    if record is None:
        return
    print(title)
    width = max(len(k) for k in record)
    for key, value in record.items():
        print(f"  {key:<{width}}  {_field(value, now)}")


def _field(value: Any, now: datetime | None) -> str:
    text = cell(value)
    moment = timefmt.instant(value) if now is not None and isinstance(value, str) else None
    return text if moment is None or now is None else f"{text} ({timefmt.relative(moment, now)})"


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
