"""Declared query parameters (engine.api.query): one declaration reads a request's query
string and refuses what the route does not take, and describes each parameter."""

from __future__ import annotations

import pytest
from multidict import MultiDict

from engine.api import query
from engine.errors import BadRequest

RUNS = query.Params(
    (
        query.Text("loop", "only this loop's"),
        query.Choice("state", "only in this state", frozenset({"all", "queued"}), "all"),
        query.limit_param(),
        query.cursor_param(),
    )
)


def read(text: str) -> query.Args:
    pairs = [tuple(p.split("=", 1)) if "=" in p else (p, "") for p in text.split("&") if p]
    return RUNS.read(MultiDict(pairs))


def test_absent_parameters_read_as_their_defaults() -> None:
    """A parameter not given reads as its default (None for text)."""
    args = read("")
    assert (args.text("loop"), args.text("state"), args.number("limit")) == (None, "all", 50)
    assert query.before(args) is None


def test_given_parameters_are_read_and_checked() -> None:
    """Values in bounds are read as their type."""
    args = read("loop=nightly&state=queued&limit=1000")
    assert (args.text("loop"), args.text("state"), args.number("limit")) == (
        "nightly",
        "queued",
        1000,
    )


@pytest.mark.parametrize(
    ("text", "parameter"),
    [
        ("loops=nightly", "loops"),
        ("limit=5&x", "x"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=٣", "limit"),
        ("state=running", "state"),
        ("limit=1&limit=2", "limit"),
        ("loop=" + "x" * 257, "loop"),
    ],
)
def test_anything_else_is_a_bad_query_naming_the_parameter(text: str, parameter: str) -> None:
    """An unknown parameter, a repeated one or a bad value is a BadRequest whose reason
    is bad_query and whose details name the parameter; an unknown one lists those taken."""
    with pytest.raises(BadRequest) as caught:
        read(text)
    details = caught.value.details
    assert details["reason"] == "bad_query" and details["parameter"] == parameter
    assert parameter in caught.value.message
    if parameter in {"loops", "x"}:
        assert details["accepted"] == ["loop", "state", "limit", "before"]


def test_a_route_without_parameters_refuses_any() -> None:
    """An empty declaration takes no parameter at all."""
    with pytest.raises(BadRequest, match="takes no query parameters"):
        query.Params().read(MultiDict([("a", "1")]))


def test_a_cursor_no_page_gave_is_a_bad_cursor() -> None:
    """`before` is read back as the key a cursor stands for, or refused."""
    with pytest.raises(BadRequest) as caught:
        query.before(read("before=nope"))
    assert caught.value.details == {"reason": "bad_cursor"}


def test_each_parameter_describes_its_values() -> None:
    """The schema of each declared parameter holds the bounds the reading checks."""
    assert [p.schema() for p in RUNS.params] == [
        {"type": "string", "maxLength": 256},
        {"type": "string", "enum": ["all", "queued"], "default": "all"},
        {"type": "integer", "minimum": 1, "maximum": 1000, "default": 50},
        {"type": "string", "maxLength": 2048},
    ]
