"""Query-string parameters, declared once per route and checked: each JSON route says
which parameters it takes (name, type, bounds, description) with `accepts`, and that
one declaration both reads the request and describes the route in the OpenAPI
document (engine/api/openapi.py). A parameter the route does not take, one given
twice, or a bad value is a 400 whose reason is `bad_query` and whose message names it
(docs/api.md#query-parameters)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import web
from multidict import MultiMapping

from engine.core.paging import MAX_CURSOR, run_cursor
from engine.errors import BadRequest

MAX_LIMIT = 1000
DEFAULT_LIMIT = 50

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Param(Protocol):
    """One query parameter: how it reads and how the OpenAPI document shows it."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    def read(self, query: Mapping[str, str]) -> int | str | None:
        """The value in `query` (its default when absent); BadRequest when bad."""

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of the value."""


def _bad(message: str, name: str, **details: Any) -> BadRequest:
    return BadRequest(message, reason="bad_query", parameter=name, **details)


@dataclass(frozen=True, slots=True)
class Integer:
    """A whole number from `low` to `high`; `default` when absent or empty."""

    name: str
    description: str
    default: int
    low: int
    high: int

    def read(self, query: Mapping[str, str]) -> int:
        return integer(query, self.name, self.default, self.low, self.high)

    def schema(self) -> dict[str, Any]:
        return {
            "type": "integer",
            "minimum": self.low,
            "maximum": self.high,
            "default": self.default,
        }


@dataclass(frozen=True, slots=True)
class Choice:
    """One of `choices`; `default` when absent or empty."""

    name: str
    description: str
    choices: frozenset[str]
    default: str | None = None

    def read(self, query: Mapping[str, str]) -> str | None:
        return choice(query, self.name, self.choices, self.default)

    def schema(self) -> dict[str, Any]:
        found: dict[str, Any] = {"type": "string", "enum": sorted(self.choices)}
        if self.default is not None:
            found["default"] = self.default
        return found


@dataclass(frozen=True, slots=True)
class Text:
    """Any text up to `max_length` characters; None when absent or empty."""

    name: str
    description: str
    max_length: int = 256

    def read(self, query: Mapping[str, str]) -> str | None:
        return text(query, self.name, self.max_length)

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "maxLength": self.max_length}


def limit_param(default: int = DEFAULT_LIMIT) -> Integer:
    return Integer("limit", "the most items in the answer", default, 1, MAX_LIMIT)


def cursor_param() -> Text:
    """`before`: the `next` of the page before, as it was (engine.core.paging)."""
    return Text(
        "before",
        "the `next` of the previous page, passed back as it was: the page after it "
        "(older items); a cursor this listing did not give is a 400 `bad_cursor`",
        MAX_CURSOR,
    )


@dataclass(frozen=True, slots=True)
class Args:
    """The values of a request's declared parameters, read."""

    values: Mapping[str, int | str | None] = field(default_factory=dict)

    def number(self, name: str) -> int:
        value = self.values[name]
        assert isinstance(value, int), name  # a declared Integer always reads an int
        return value

    def text(self, name: str) -> str | None:
        value = self.values[name]
        assert value is None or isinstance(value, str), name
        return value


@dataclass(frozen=True, slots=True)
class Params:
    """The parameters one route takes."""

    params: tuple[Param, ...] = ()

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.params]

    def read(self, query: MultiMapping[str]) -> Args:
        """Every declared parameter's value; BadRequest (`bad_query`) for a parameter
        the route does not take or one given more than once, naming it and listing
        those it takes."""
        accepted = self.names
        for name in query:
            if name not in accepted:
                takes = ", ".join(accepted) if accepted else "no query parameters"
                raise _bad(
                    f"unknown query parameter '{name[:40]}'; this route takes {takes}",
                    name[:40],
                    accepted=accepted,
                )
            if len(query.getall(name)) > 1:
                raise _bad(f"query parameter '{name}' is given more than once", name)
        return Args({p.name: p.read(query) for p in self.params})


ArgsHandler = Callable[[web.Request, Args], Awaitable[web.StreamResponse]]

# The parameters each decorated handler declared, read by engine.api.openapi.
DECLARED: dict[Handler, Params] = {}


def accepts(*params: Param) -> Callable[[ArgsHandler], Handler]:
    """Declare a route's query parameters: the handler is called with their values
    read, after a request with any other parameter is refused (400 `bad_query`)."""
    declared = Params(params)

    def decorate(handler: ArgsHandler) -> Handler:
        @functools.wraps(handler)
        async def checked(request: web.Request) -> web.StreamResponse:
            return await handler(request, declared.read(request.query))

        DECLARED[checked] = declared
        return checked

    return decorate


def before(args: Args) -> tuple[str, str] | None:
    """The `before` cursor of a page of runs, proposals or events, read (400
    `bad_cursor` for a text no page gave)."""
    text = args.text("before")
    return None if text is None else run_cursor(text)


def integer(query: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    text = query.get(name)
    if text is None or text == "":
        return default
    if not text.isascii() or not text.isdigit() or not low <= int(text) <= high:
        raise _bad(f"'{name}' must be a whole number from {low} to {high}, not '{text[:40]}'", name)
    return int(text)


def limit(query: Mapping[str, str], default: int = DEFAULT_LIMIT) -> int:
    return integer(query, "limit", default, 1, MAX_LIMIT)


def choice(
    query: Mapping[str, str], name: str, choices: Collection[str], default: str | None
) -> str | None:
    text = query.get(name) or default
    if text is not None and text not in choices:
        raise _bad(f"'{name}' must be one of {', '.join(sorted(choices))}, not '{text[:40]}'", name)
    return text


def text(query: Mapping[str, str], name: str, max_length: int = 256) -> str | None:
    value = query.get(name) or None
    if value is not None and len(value) > max_length:
        raise _bad(f"'{name}' is longer than {max_length} characters", name)
    return value
