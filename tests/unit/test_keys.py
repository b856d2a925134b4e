"""Semantic key templates (engine/core/keys.py): whether two loops' key patterns can claim
one key, and filling a key from a tick's payload."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl import expr as ex
from dsl.diagnostics import Span
from engine.core.keys import KeyPattern, KeyProblem, KeyTemplate, fill, witness

AT = Span("loops/k.rules", 3, 9)


def pattern(text: str) -> KeyPattern:
    """`*` for a placeholder: "repair:*" is `repair:{payload.repo}`."""
    return KeyPattern.of(tuple(None if c == "*" else c for c in text))


@pytest.mark.parametrize(
    ("a", "b", "meets"),
    [
        ("repair:r1", "repair:r1", "repair:r1"),
        ("repair:r1", "repair:r2", None),
        ("repair:*", "repair:r1", "repair:r1"),
        ("repair:*", "repair:", None),  # a placeholder is never empty
        ("repair:*", "review:*", None),
        ("*:r1", "repair:*", "repair:r1"),
        ("a*", "*b", "ab"),
        ("a*b", "a*c", None),
        ("*", "*", "x"),
        ("pr:*#*", "pr:bj29#*", "pr:bj29#x"),
        ("**", "a", None),  # two placeholders need two characters
    ],
)
def test_two_patterns_meet_in_a_shortest_key_or_not_at_all(
    a: str, b: str, meets: str | None
) -> None:
    assert witness(pattern(a), pattern(b)) == meets
    assert witness(pattern(b), pattern(a)) == meets


def test_a_pattern_shows_its_placeholders() -> None:
    assert str(pattern("pr:*#*")) == "pr:{…}#{…}"
    assert pattern("repair:r1").concrete == "repair:r1"
    assert pattern("repair:*").concrete is None


# ---- properties ----------------------------------------------------------------------------

ALPHABET = "ab:"
PATTERNS = st.text(alphabet=ALPHABET + "*", max_size=6).map(pattern)
TEXTS = st.text(alphabet=ALPHABET + "x", max_size=8)
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(a=PATTERNS, b=PATTERNS)
def test_a_witness_is_a_key_both_patterns_claim(a: KeyPattern, b: KeyPattern) -> None:
    found = witness(a, b)
    if found is not None:
        assert a.matches(found) and b.matches(found)


@PROPERTY
@given(a=PATTERNS, b=PATTERNS, text=TEXTS)
def test_no_key_matches_two_disjoint_patterns(a: KeyPattern, b: KeyPattern, text: str) -> None:
    if witness(a, b) is None:
        assert not (a.matches(text) and b.matches(text))


def _all_texts(longest: int) -> list[str]:
    return [
        "".join(chars)
        for n in range(longest + 1)
        for chars in itertools.product(ALPHABET + "x", repeat=n)
    ]


SHORT_TEXTS = _all_texts(6)


@PROPERTY
@given(
    a=st.text(alphabet="ab*", max_size=3).map(pattern),
    b=st.text(alphabet="ab*", max_size=3).map(pattern),
)
def test_disjoint_means_no_key_at_all_when_every_short_key_is_tried(
    a: KeyPattern, b: KeyPattern
) -> None:
    """Patterns of at most three steps meet, if at all, in a key of at most six
    characters: trying every one of them is an exact oracle."""
    common = [t for t in SHORT_TEXTS if a.matches(t) and b.matches(t)]
    found = witness(a, b)
    assert (found is None) == (not common)
    if found is not None:
        assert len(found) == min(len(t) for t in common)  # a shortest one


@PROPERTY
@given(key=st.text(min_size=1, max_size=12))
def test_equal_concrete_keys_always_collide(key: str) -> None:
    same = KeyPattern.of((key,))
    assert witness(same, same) == key
    assert witness(same, KeyPattern.of((key[:-1], key[-1]))) == key


# ---- filling a key -------------------------------------------------------------------------


def template(*parts: str) -> KeyTemplate:
    """Text, and `payload.…` paths for placeholders."""
    return KeyTemplate(
        tuple(ex.parse_path(p, AT) if p.startswith("payload") else p for p in parts), AT
    )


def test_a_key_is_filled_from_the_payload() -> None:
    key = template("pr:", "payload.repo", "#", "payload.trigger.number")
    assert fill(key, {"repo": "bj29", "trigger": {"number": 42}}) == "pr:bj29#42"
    assert str(key) == "pr:{payload.repo}#{payload.trigger.number}"
    assert str(key.pattern) == "pr:{…}#{…}"


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({}, "'payload' has no field 'repo'"),
        ({"repo": ""}, "'payload.repo' is empty: a key's placeholder needs text"),
        ({"repo": {"a": 1}}, "'payload.repo' is not text or a number and cannot go into a string"),
        ({"repo": "r" * 300}, "the key is 303 characters; at most 200"),
    ],
)
def test_a_key_that_cannot_be_filled_says_why(payload: dict[str, object], message: str) -> None:
    with pytest.raises(KeyProblem) as caught:
        fill(template("pr:", "payload.repo"), payload)
    assert caught.value.message == message
