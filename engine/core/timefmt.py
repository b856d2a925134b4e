"""Instants as a person reads them in a listing: `in 4m`, `12m ago`, `3h ago`, `2d ago`
(docs/cli.md#output). Pure: `now` is an argument; the `--json` documents keep the
absolute ISO-8601 instants."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from engine.core.envelope import parse_iso
from engine.errors import BadRequest

UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
JUST_NOW_SECONDS = 5  # closer than this either way reads `just now`
INSTANT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z")
# The instants a person may give (ENGINE_NOW, --since, --from, --to, ?since=): from the
# unix epoch (a signed timestamp is unix seconds) to well before datetime's end, so
# that a day before, a window after and a clock that runs on stay representable.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)


def relative(moment: datetime, now: datetime) -> str:
    """How far `moment` is from `now` in its largest whole unit, rounded toward zero:
    `in 4m` ahead, `12m ago` behind, `just now` within five seconds."""
    seconds = (moment - now).total_seconds()
    span = abs(seconds)
    if span < JUST_NOW_SECONDS:
        return "just now"
    unit, size = next((u, s) for u, s in UNITS if span >= s)
    amount = f"{int(span // size)}{unit}"
    return f"in {amount}" if seconds > 0 else f"{amount} ago"


def instant(text: str) -> datetime | None:
    """The instant of a wire or slot time (`2026-11-30T09:00:00.000000Z`,
    `2026-11-30T09:00:00Z`), else None."""
    return parse_iso(text) if INSTANT.fullmatch(text) else None


def relative_text(text: str | None, now: datetime) -> str | None:
    """`relative` of a wire instant; any other text as it is."""
    moment = instant(text) if text else None
    return text if moment is None else relative(moment, now)


def given_instant(text: str, name: str = "") -> datetime | None:
    """The instant a person wrote, ISO-8601 with an offset, in UTC; None when it is not
    one; BadRequest (`bad_time`, naming `name` and the text) when it lies outside 1970
    up to 9000, which the engine does not take."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    if not EARLIEST <= moment < LATEST:
        shown = f"{name} '{text[:60]}'".strip()
        raise BadRequest(f"{shown} is not between 1970 and 9000", reason="bad_time")
    return moment.astimezone(UTC)
