"""Durations as operators write them (`90s`, `60m`, `1h30m`): parse, format, round trip."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core.durations import DurationError, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("60m", 3600),
        ("4h", 14400),
        ("7d", 604800),
        ("2w", 1209600),
        ("1h30m", 5400),
        ("30m1h", 5400),
        ("0h5m", 300),
    ],
)
def test_parse_examples(text: str, seconds: int) -> None:
    """Each unit and each sum of parts parses to whole seconds."""
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(90, "1m30s"), (3600, "1h"), (5400, "1h30m"), (604800, "1w"), (694861, "1w1d1h1m1s")],
)
def test_format_is_the_shortest_canonical_spelling(seconds: int, text: str) -> None:
    """Formatting uses the largest units first and omits zero parts."""
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    "text", ["", "60", "m", "60x", "1.5h", "-5m", "0m", "0s0m", " 5m", "5 m", "5M"]
)
def test_malformed_or_zero_durations_are_refused(text: str) -> None:
    """Anything but one or more `<n><unit>` parts with a positive total raises DurationError."""
    with pytest.raises(DurationError):
        parse_duration(text)


@given(st.integers(min_value=1, max_value=10**9))
def test_format_then_parse_round_trips(seconds: int) -> None:
    """Parsing a formatted duration gives back the same number of seconds."""
    assert parse_duration(format_duration(seconds)) == seconds


parts = st.lists(
    st.tuples(st.integers(min_value=0, max_value=999), st.sampled_from("smhdw")),
    min_size=1,
    max_size=5,
)


@given(parts)
def test_any_written_duration_formats_canonically(written: list[tuple[int, str]]) -> None:
    """A duration written any valid way formats canonically and parses back to its value."""
    text = "".join(f"{n}{unit}" for n, unit in written)
    try:
        seconds = parse_duration(text)
    except DurationError:
        assert all(n == 0 for n, _ in written)
        return
    canonical = format_duration(seconds)
    assert parse_duration(canonical) == seconds
    assert format_duration(parse_duration(canonical)) == canonical


@given(st.text())
def test_parse_raises_only_duration_error(text: str) -> None:
    """Any text parses to a positive number of seconds or raises DurationError."""
    with contextlib.suppress(DurationError):
        assert parse_duration(text) > 0
