"""Measuring how deeply YAML and JSON text nests before any parser builds it (so that a
file nested thousands deep is a located E0908, never a RecursionError or a crash of the
C loader), and the bound on how deeply it may."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.files import MAX_NESTING, json_too_deep
from engine.yaml_reader import refusal

# Strings that look like brackets but are not structure.
TRICKY = st.sampled_from(["", "[", "]", "{", "}", '"', "\\", "[]{}", 'a\\"]b'])


def nested_json(depth: int, noise: list[str]) -> str:
    """A JSON document `depth` levels deep, with bracket-like strings on the way."""
    value: object = "leaf"
    for level in range(depth):
        text = noise[level % len(noise)] if noise else ""
        value = [text, value] if level % 2 else {"k": value, "s": text}
    return json.dumps(value, indent=1 if depth % 3 == 0 else None)  # one line, or many


def opening(text: str, line: int, column: int) -> str:
    return text.splitlines()[line - 1][column - 1]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3 * MAX_NESTING), st.lists(TRICKY, max_size=5))
def test_json_deeper_than_the_bound_is_found_at_its_opening_bracket(
    depth: int, noise: list[str]
) -> None:
    """JSON within the bound passes; deeper, the place reported is a bracket that opens
    the level past the bound, whatever bracket-like text the strings hold."""
    text = nested_json(depth, noise)
    found = json_too_deep(text)
    if depth <= MAX_NESTING:
        assert found is None
    else:
        assert found is not None and opening(text, *found) in "[{"


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 1_000_000 + "]" * 1_000_000 + "\n",
        "a: " + "{a: " * 1_000_000 + "1" + "}" * 1_000_000 + "\n",
        "".join(" " * i + "a:\n" for i in range(3 * MAX_NESTING)),
        "".join("- " * 3 * MAX_NESTING) + "x\n",
    ],
    ids=["flow-lists", "flow-maps", "block-maps", "block-lists"],
)
def test_yaml_nested_far_too_deep_is_found_without_parsing_it_whole(text: str) -> None:
    """Flow or block YAML nested past the bound (a million deep, which the libyaml loader
    would crash on) is reported at the level past the bound."""
    found = refusal(text)
    assert found is not None and found.code == "E0908"
    assert 1 <= found.line <= MAX_NESTING + 2 and found.column >= 1


@pytest.mark.parametrize("depth", [1, MAX_NESTING])
def test_yaml_within_the_bound_passes(depth: int) -> None:
    """YAML nested up to the bound, flow or block, is not reported."""
    assert refusal("a: " + "[" * (depth - 1) + "]" * (depth - 1) + "\n") is None
    block = "".join(" " * i + "k:\n" for i in range(depth - 1)) + " " * (depth - 1) + "k: 1\n"
    assert refusal(block) is None


def test_a_yaml_syntax_error_is_left_to_the_loader() -> None:
    """Text that is not YAML is not a nesting problem: the loader reports it (E0901)."""
    assert refusal("a: [1, 2\nb: }\n") is None
