"""Query-string parameters, checked: a bad value is a 400 that names it."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from engine.errors import BadRequest

MAX_LIMIT = 1000


def integer(query: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    text = query.get(name)
    if text is None or text == "":
        return default
    if not text.isascii() or not text.isdigit() or not low <= int(text) <= high:
        raise BadRequest(
            f"'{name}' must be a whole number from {low} to {high}, not '{text[:40]}'",
            reason="bad_query",
        )
    return int(text)


def limit(query: Mapping[str, str], default: int = 50) -> int:
    return integer(query, "limit", default, 1, MAX_LIMIT)


def choice(
    query: Mapping[str, str], name: str, choices: Collection[str], default: str | None
) -> str | None:
    text = query.get(name) or default
    if text is not None and text not in choices:
        raise BadRequest(
            f"'{name}' must be one of {', '.join(sorted(choices))}, not '{text[:40]}'",
            reason="bad_query",
        )
    return text


def text(query: Mapping[str, str], name: str, max_length: int = 256) -> str | None:
    value = query.get(name) or None
    if value is not None and len(value) > max_length:
        raise BadRequest(f"'{name}' is longer than {max_length} characters", reason="bad_query")
    return value
