"""A time a person gives (ENGINE_NOW, `--since`, `--from`, `--to`, `?since=`) is taken
from 1970 up to 9000 (docs/cli.md#environment): outside that, at datetime's ends, it
is a bad time (400 `bad_time`, exit 2) naming the text, never an OverflowError when
it is moved to UTC, a day is taken from it or a clock runs on from it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from engine.core.timefmt import given_instant
from engine.errors import BadRequest
from engine.service.schedules import parse_when
from engine.service.simulate import parse_time

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
OUTSIDE = [
    "0001-01-01T00:00:00+14:00",  # before year 1 in UTC: moving it there overflowed
    "0001-01-01T00:00:00Z",
    "1969-12-31T23:59:59Z",
    "9000-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59-14:00",  # after year 9999 in UTC
]
PARSERS: dict[str, Callable[[str], datetime | None]] = {
    "given_instant": given_instant,
    "parse_when": lambda text: parse_when(text, NOW),
    "simulate --from": lambda text: parse_time(text, "--from"),
}


@pytest.mark.parametrize("parser", PARSERS.values(), ids=PARSERS.keys())
@pytest.mark.parametrize("text", OUTSIDE)
def test_a_time_outside_1970_to_9000_is_a_bad_time(
    parser: Callable[[str], datetime | None], text: str
) -> None:
    """Each parser of a person's time refuses it as `bad_time`, naming the text."""
    with pytest.raises(BadRequest, match="not between 1970 and 9000") as refused:
        parser(text)
    assert refused.value.details["reason"] == "bad_time"
    assert text in refused.value.message


@pytest.mark.parametrize(
    ("text", "moment"),
    [
        ("1970-01-01T00:00:00Z", datetime(1970, 1, 1, tzinfo=UTC)),
        ("1970-01-01T09:00:00+09:00", datetime(1970, 1, 1, tzinfo=UTC)),
        ("8999-12-31T23:59:59Z", datetime(8999, 12, 31, 23, 59, 59, tzinfo=UTC)),
    ],
)
def test_the_ends_of_the_range_are_taken_in_utc(text: str, moment: datetime) -> None:
    """The first instant of 1970 (in UTC, whatever the offset) and the last before 9000."""
    assert given_instant(text) == moment
    assert parse_when(text, NOW) == moment


@pytest.mark.parametrize("text", ["2026-12-01T12:00:00", "tomorrow", "", "24h"])
def test_what_is_not_an_instant_with_an_offset_is_none(text: str) -> None:
    """Text without an offset or not ISO-8601 is no instant (each caller says what it takes)."""
    assert given_instant(text) is None
