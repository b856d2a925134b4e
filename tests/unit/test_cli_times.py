"""Human output of the listings: instants relative to now from one pure function, and
id columns printed whole on one line in an 80-column terminal (docs/cli.md#output)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from engine.cli.inspect import EVENT_COLUMNS, JOURNAL_COLUMNS, RUN_COLUMNS
from engine.cli.operate import COLUMNS as PROPOSAL_COLUMNS
from engine.cli.render import Column, cell, fit, grid
from engine.core.envelope import iso
from engine.core.timefmt import relative, relative_text

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def signed_seconds(text: str) -> int:
    """`in 4m` -> 240, `12m ago` -> -720, `just now` -> 0: what `relative` says."""
    if text == "just now":
        return 0
    word = text.removeprefix("in ").removesuffix(" ago")
    amount = int(word[:-1]) * SECONDS[word[-1]]
    return amount if text.startswith("in ") else -amount


def test_relative_names_the_largest_whole_unit() -> None:
    """Minutes, hours and days, ahead or behind; within five seconds `just now`."""
    assert relative(NOW + timedelta(minutes=4, seconds=59), NOW) == "in 4m"
    assert relative(NOW - timedelta(minutes=12), NOW) == "12m ago"
    assert relative(NOW - timedelta(hours=3, minutes=59), NOW) == "3h ago"
    assert relative(NOW - timedelta(days=2, hours=23), NOW) == "2d ago"
    assert relative(NOW - timedelta(seconds=42), NOW) == "42s ago"
    assert relative(NOW + timedelta(seconds=4), NOW) == "just now"


@given(st.integers(-(10**8), 10**8), st.integers(-(10**8), 10**8))
def test_relative_is_monotone_with_the_right_sign(a: int, b: int) -> None:
    """A later instant never reads earlier; ahead is `in`, behind is `ago`, and what it
    says is within one unit of the truth."""
    early, late = sorted((a, b))
    said_early = signed_seconds(relative(NOW + timedelta(seconds=early), NOW))
    said_late = signed_seconds(relative(NOW + timedelta(seconds=late), NOW))
    assert said_early <= said_late
    text = relative(NOW + timedelta(seconds=a), NOW)
    assert text == "just now" or text.startswith("in ") == (a > 0)
    assert abs(signed_seconds(text)) <= abs(a)


def test_only_instants_become_relative() -> None:
    """Wire instants and slot times read relative; ids and other text stay as they are."""
    assert relative_text(iso(NOW - timedelta(hours=3)), NOW) == "3h ago"
    assert relative_text("2026-12-01T12:04:00Z", NOW) == "in 4m"
    assert relative_text("run-cb9364adabe7dcae", NOW) == "run-cb9364adabe7dcae"
    assert cell(None, NOW) == "-"
    assert cell(iso(NOW), None) == "2026-12-01T12:00:00Z"


def printed(rows: list[dict[str, object]], columns: list[Column], width: int = 80) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, markup=False, highlight=False, emoji=False)
    console.print(grid(rows, columns, width, NOW))
    return out.getvalue()


LONG = "a-rather-long-value-that-would-need-wrapping-" * 2


def test_ids_print_whole_at_80_columns() -> None:
    """Every id of every listing is on one line of an 80-column table, however long the
    other cells; no line is wider than 80."""
    created = iso(NOW - timedelta(minutes=12))
    cases: list[tuple[list[Column], dict[str, object]]] = [
        (RUN_COLUMNS, {"runId": "run-cb9364adabe7dcae", "definition": LONG, "createdAt": created}),
        (
            PROPOSAL_COLUMNS,
            {
                "proposalId": "prop-6b01c344dbe5827b",
                "eventId": "gh-72d3162e-cc78-11e3-81ab-4c9367dc0958",
                "definition": LONG,
                "loop": LONG,
                "decidedBy": "operator:alice",
                "createdAt": created,
            },
        ),
        (EVENT_COLUMNS, {"eventId": "manual:reaper:" + "f" * 32, "type": LONG}),
        (JOURNAL_COLUMNS, {"seq": 123456, "entityId": "occ-1178ca38f53176e3", "note": LONG}),
    ]
    for columns, row in cases:
        text = printed([row, row], columns)
        lines = text.splitlines()
        assert all(len(line) <= 80 for line in lines)
        for _, key in columns:
            if key in ("runId", "proposalId", "eventId", "entityId"):
                value = str(row[key])
                assert sum(value in line for line in lines) == 2, (value, text)


def test_a_table_that_fits_shows_every_column_and_relative_times() -> None:
    """Wide enough, nothing is left out; the CREATED cell reads `12m ago`."""
    row = {"runId": "run-1", "state": "queued", "createdAt": iso(NOW - timedelta(minutes=12))}
    text = printed([row], RUN_COLUMNS, width=200)
    assert all(header in text for header, _ in RUN_COLUMNS)
    assert "12m ago" in text and "2026" not in text


def test_narrow_tables_leave_out_the_columns_that_do_not_fit() -> None:
    """The ids stay, and each other column that still fits, in their order."""
    columns: list[Column] = [("A", "a"), ("RUN", "runId"), ("B", "b"), ("C", "c")]
    cells = [["x" * 10, "r" * 20, "y" * 30, "z"]]
    assert fit(columns, cells, 200) == [0, 1, 2, 3]
    assert fit(columns, cells, 20 + 3 + 6 + 3 + 6) == [0, 1, 2]
    assert fit(columns, cells, 25) == [1, 3]  # C is one character wide
    assert fit(columns, cells, 22) == [1]
