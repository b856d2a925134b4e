"""Durations as operators write them: `90s`, `60m`, `4h`, `7d`, `2w`, or a sum such as
`1h30m`. Pure functions; the value is whole seconds.

A duration is at most 100 years (`36500d`): every place one is added to or taken from
an instant (slots, max-lateness, backoff, budgets, leases, `engine reap`) stays inside
the years a datetime can hold, and nothing a loop means needs longer."""

from __future__ import annotations

import re
from functools import lru_cache

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_PART = re.compile(r"([0-9]+)([smhdw])")
_WHOLE = re.compile(r"(?:[0-9]+[smhdw])+\Z")


MAX_SECONDS = 36500 * 86400  # 100 years of 365 days
MAX_TEXT = "36500d (100 years)"


class DurationError(ValueError):
    """The text is not a duration such as `60m`."""


@lru_cache(maxsize=1024)
def parse_duration(text: str) -> int:
    """Seconds in `text`; raises DurationError unless it is one or more `<n><unit>`
    parts with units s, m, h, d, w and a total from 1 second to MAX_SECONDS."""
    if not _WHOLE.match(text):
        raise DurationError(
            f"'{text}' is not a duration; write a number and a unit (s, m, h, d, w), e.g. 60m"
        )
    seconds = sum(int(n) * _UNITS[unit] for n, unit in _PART.findall(text))
    if seconds <= 0:
        raise DurationError(f"'{text}' is zero; a duration must be positive")
    if seconds > MAX_SECONDS:
        raise DurationError(f"'{text}' is too long; a duration is at most {MAX_TEXT}")
    return seconds


def format_duration(seconds: int) -> str:
    """The shortest canonical spelling: 3600 -> `1h`, 5400 -> `1h30m`."""
    if seconds <= 0:
        return "0s"
    out = []
    for unit in ("w", "d", "h", "m", "s"):
        size = _UNITS[unit]
        if seconds >= size:
            count, seconds = divmod(seconds, size)
            out.append(f"{count}{unit}")
    return "".join(out)
