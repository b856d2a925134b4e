"""Request bodies, pure: every HTTP body parser (JSON, envelopes, the operator bodies,
GitHub's translation) fuzzed with hypothesis answers a value or a typed 4xx error,
never anything else; nesting is measured without recursion; an envelope's instant and
payload are bounded."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from engine.api import bodies
from engine.api.bodies import envelopes, model_body, parse_json
from engine.api.routes import github as github_route
from engine.api.routes.operate import ApproveBody, CancelBody, DecideFindingBody, RejectBody
from engine.api.routes.schedules import PauseBody, ResumeBody
from engine.core.envelope import Envelope, iso, parse_iso
from engine.core.nesting import (
    MAX_BODY_DEPTH,
    MAX_PAYLOAD_DEPTH,
    PRUNED,
    depth,
    nests_deeper,
    prune,
    text_depth,
)
from engine.core.ruleset import Repo
from engine.errors import EngineError
from engine.loading import Paths, load_rules

ROOT = Path(__file__).resolve().parents[2]
MODELS = (ApproveBody, RejectBody, CancelBody, DecideFindingBody, PauseBody, ResumeBody)
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=30,
)


def nested(levels: int, leaf: str = "1") -> bytes:
    return (b'{"a":[' * levels) + leaf.encode() + (b"]}" * levels)


odd_bodies = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v).encode()),
    json_values.map(lambda v: json.dumps(v, ensure_ascii=False).encode()),
    st.integers(min_value=0, max_value=3000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(min_value=0, max_value=200).map(nested),
    st.integers(min_value=1, max_value=6000).map(lambda n: b"9" * n),
    st.sampled_from(
        [
            b"1e400",
            b"-1e999",
            b'"\\ud800"',
            b'{"\\udc00":1}',
            b'"\\u0000"',
            b"NaN",
            b"\xef\xbb\xbf{}",
        ]
    ),
    st.text().map(lambda t: t.encode("utf-8", "surrogatepass")),
)


def typed_4xx(call: Any, *args: Any) -> Any:
    """The call's value, or None when it raised an EngineError of a 4xx status."""
    try:
        return call(*args)
    except EngineError as err:
        assert 400 <= err.status < 500, err
        assert err.as_dict()["error"] and err.message
        return None


@settings(max_examples=400, deadline=None)
@given(odd_bodies)
def test_any_body_parses_or_is_a_typed_4xx(body: bytes) -> None:
    """parse_json answers a JSON value or a 400/422; what it answers serialises again."""
    data = typed_4xx(parse_json, body)
    if data is not None:
        json.dumps(data, allow_nan=False, ensure_ascii=False).encode()


def outcome(body: bytes) -> tuple[object, ...]:
    """What parse_json answers: the value (by repr, so 1 and 1.0 or -0.0 and 0.0
    differ), or the error's status, code and message."""
    try:
        return ("value", repr(parse_json(body)))
    except EngineError as err:
        return ("error", err.status, err.code, err.message)


def _refuse(body: bytes) -> object:
    raise msgspec.DecodeError("refused, so that the standard library decides")


@settings(max_examples=400, deadline=None)
@given(odd_bodies)
def test_the_fast_decoder_reads_every_body_as_the_standard_library_does(body: bytes) -> None:
    """parse_json's fast path (msgspec) answers every body, valid or not, exactly as
    the standard library's json alone would: the same value or the same refusal."""
    fast = outcome(body)
    with mock.patch.object(bodies, "_FAST", SimpleNamespace(decode=_refuse)):
        assert outcome(body) == fast


@settings(max_examples=300, deadline=None)
@given(odd_bodies)
def test_any_envelope_body_is_admissible_or_a_422(body: bytes) -> None:
    """The POST /events and /inject parsers (JSON, then envelopes) answer envelopes or a
    typed 4xx."""
    data = typed_4xx(parse_json, body)
    if data is not None:
        typed_4xx(envelopes, data)


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "eventId": st.text(max_size=20) | st.integers() | st.none(),
            "type": st.sampled_from(["a.b", "", "x" * 300]),
            "source": st.sampled_from(["manual", "Bad", ""]),
            "occurredAt": st.text(max_size=40)
            | st.integers(min_value=-(10**40), max_value=10**40)
            | st.floats()
            | st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()),
            "payload": json_values,
        }
    )
)
def test_any_envelope_object_is_valid_or_a_422(doc: dict[str, Any]) -> None:
    """An envelope with odd ids, types, instants and payloads is admitted or refused
    as a 422 `invalid_envelope`, never an unexpected exception."""
    typed_4xx(envelopes, doc)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(MODELS), odd_bodies)
def test_any_operator_body_is_valid_or_a_400(model: Any, body: bytes) -> None:
    """approve, reject, cancel, findings promote/dismiss, pause and resume bodies are
    valid or a typed 4xx."""
    data = typed_4xx(parse_json, body)
    if data is not None:
        typed_4xx(model_body, model, data)


@pytest.fixture(scope="module")
def engine_stub() -> Any:
    """Just what the GitHub route's translation reads: the shipped rules and a clock."""
    rules = load_rules(Paths(ROOT / "loops", ROOT / "registry", ROOT / "tests" / "no-config"))
    repos = {"hello-world": Repo("hello-world", "Codertocat/Hello-World", "master", False)}
    rt = SimpleNamespace(rules=replace(rules, repos=repos), clock=lambda: NOW)
    return SimpleNamespace(rt=rt)


github_payloads = st.fixed_dictionaries(
    {},
    optional={
        "action": st.sampled_from(["opened", "completed", "synchronize"]) | json_values,
        "repository": st.fixed_dictionaries({"full_name": st.just("Codertocat/Hello-World")})
        | json_values,
        "pull_request": st.fixed_dictionaries(
            {"base": st.fixed_dictionaries({"ref": st.just("master")}) | json_values}
        )
        | json_values,
        "workflow_run": json_values,
    },
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.sampled_from(["pull_request", "workflow_run", "ping", ""]),
    st.text(max_size=70),
    github_payloads.map(lambda p: json.dumps(p).encode()) | odd_bodies,
)
def test_any_github_delivery_translates_or_is_a_typed_422(
    engine_stub: Any, kind: str, delivery: str, body: bytes
) -> None:
    """POST /github's parsing and translation answer a translation or a 4xx."""
    typed_4xx(github_route._translate, engine_stub, kind, delivery, body)


# ---- nesting --------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_text_depth_is_the_depth_of_the_parsed_value(value: Any) -> None:
    """Measured on the text, nesting is what the parsed value has, strings aside."""
    assert text_depth(json.dumps(value).encode(), 64) == depth(value, 64)


@settings(max_examples=300, deadline=None)
@given(json_values, st.integers(min_value=0, max_value=5))
def test_text_depth_is_exact_up_to_any_limit(value: Any, limit: int) -> None:
    """At any limit, the depth measured on the text is the parsed value's, counted up to
    limit + 1: a value exactly at the limit passes, one level more is too deep."""
    assert text_depth(json.dumps(value).encode(), limit) == depth(value, limit)


# Values whose strings hold no brackets, so a cut anywhere leaves brackets of structure only.
plain_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text("ab c", max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("xy", max_size=2), inner),
    max_leaves=20,
)


def levels(text: bytes) -> tuple[int, int]:
    """(the levels still open at the end of `text`, the deepest level it reached)."""
    level = deepest = 0
    for char in text.translate(None, b'"abcxy ,:0123456789-eflnrstu'):
        level += 1 if char in b"[{" else -1
        deepest = max(deepest, level)
    return level, deepest


@settings(max_examples=300, deadline=None)
@given(plain_values, st.integers(min_value=0, max_value=5), st.data())
def test_a_body_cut_off_counts_the_levels_it_leaves_open(
    value: Any, limit: int, data: st.DataObject
) -> None:
    """A body cut off anywhere (not JSON) is measured too: at least the levels it leaves
    open, at most the deepest it reached, counted up to limit + 1."""
    text = json.dumps(value).encode()
    cut = text[: data.draw(st.integers(min_value=0, max_value=len(text)))]
    still_open, deepest = levels(cut)
    assert min(still_open, limit + 1) <= text_depth(cut, limit) <= min(deepest, limit + 1)


def test_a_truncated_body_nested_past_the_limit_is_too_deep() -> None:
    """A body that opens 70 levels and never closes them is too deep before it is
    parsed, siblings between the levels or a close that matches nothing before them
    notwithstanding; so is one cut off after going 65 levels deep in a row."""
    cut_off = b"[[]," * 70
    assert text_depth(cut_off, MAX_BODY_DEPTH) == MAX_BODY_DEPTH + 1
    assert text_depth(b"[" * 70, MAX_BODY_DEPTH) == MAX_BODY_DEPTH + 1
    assert text_depth(b"[" * 7, MAX_BODY_DEPTH) == 7
    went_deep = b"[" * (MAX_BODY_DEPTH + 1) + b"]" * 5  # 65 levels, the innermost closed
    for body in (cut_off, b"]" + cut_off, b'{"a": ' + cut_off, went_deep):
        with pytest.raises(EngineError) as refused:
            parse_json(body)
        assert (refused.value.status, refused.value.details["reason"]) == (422, "too_deep")


def test_depths_stop_counting_past_the_limit_without_recursing() -> None:
    """A 200,000-deep text or value is measured (as limit + 1) without a RecursionError."""
    assert text_depth(b"[" * 200_000, MAX_BODY_DEPTH) == MAX_BODY_DEPTH + 1
    assert text_depth(nested(100_000), MAX_BODY_DEPTH) == MAX_BODY_DEPTH + 1
    assert text_depth(b'["[[[[[[[[", "]]]"]', 3) == 1
    deep: list[Any] = []
    for _ in range(200_000):
        deep = [deep]
    assert depth(deep, MAX_PAYLOAD_DEPTH) == MAX_PAYLOAD_DEPTH + 1


def test_prune_cuts_deep_values_and_non_finite_numbers() -> None:
    """prune keeps keys and order, replaces what is nested past the limit, and makes a
    value that json.dumps cannot write (too deep, infinite) writable."""
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    value = {"z": 1, "a": [float("inf"), {"b": deep}]}
    cut = prune(value, 4)
    assert cut == {"z": 1, "a": [None, {"b": [PRUNED]}]}
    assert list(cut) == ["z", "a"]
    json.dumps(cut, allow_nan=False)


# ---- the envelope's instant and payload -------------------------------------------------


def envelope(**fields: Any) -> Envelope:
    return Envelope(eventId="e-1", type="a.b", source="manual", **fields)


@pytest.mark.parametrize("moment", [1700000000, 1700000000.5, "1700000000", "1.7e9", 0, True])
def test_a_number_is_no_occurred_at(moment: Any) -> None:
    """Unix seconds (or milliseconds: a guess either way) are refused, as a number or
    as its text: `occurredAt` is ISO-8601 with an offset (docs/api.md), a 422 naming it."""
    with pytest.raises(ValidationError, match="occurredAt must be ISO-8601 with an offset"):
        envelope(occurredAt=moment)


@pytest.mark.parametrize(
    "moment",
    [
        "0000-01-01T00:00:00Z",
        "0001-01-01T00:00:00+01:00",
        "0999-06-01T00:00:00Z",
        "1899-12-31T23:59:59Z",
        "9999-12-31T23:59:59-23:59",
        "10000-01-01T00:00:00Z",
        "2026-01-01T00:00:00+99:00",
        10**20,
        -(10**13),
    ],
)
def test_out_of_range_occurred_at_is_a_validation_error(moment: Any) -> None:
    """Year 0, year 10000, instants that leave the range once moved to UTC and huge
    offsets are refused with a reason (a 422), never an OverflowError (a 500)."""
    with pytest.raises(ValidationError):
        envelope(occurredAt=moment)


@given(st.datetimes(timezones=st.just(UTC)), st.integers(min_value=-1439, max_value=1439))
def test_any_occurred_at_is_refused_or_round_trips(moment: datetime, minutes: int) -> None:
    """Any aware instant with any offset is refused, or stored as text that reads back
    as the same instant."""
    local = moment.replace(tzinfo=None).replace(tzinfo=timezone(timedelta(minutes=minutes)))
    try:
        accepted = envelope(occurredAt=local.isoformat()).occurredAt
    except ValidationError:
        return
    assert parse_iso(iso(accepted)) == accepted


def test_payload_depth_is_bounded_at_admission() -> None:
    """A payload nested deeper than MAX_PAYLOAD_DEPTH is refused; one at the limit passes."""

    def payload(levels: int) -> dict[str, Any]:
        value: dict[str, Any] = {}
        for _ in range(levels - 1):
            value = {"a": value}
        return value

    assert depth(envelope(occurredAt=NOW, payload=payload(MAX_PAYLOAD_DEPTH)).payload, 99) == 32
    with pytest.raises(ValidationError, match="deeper than 32"):
        envelope(occurredAt=NOW, payload=payload(MAX_PAYLOAD_DEPTH + 1))


@settings(max_examples=300, deadline=None)
@given(json_values, st.integers(min_value=0, max_value=8))
def test_the_quick_depth_check_agrees_with_the_measure(value: Any, limit: int) -> None:
    """`nests_deeper` (with its shortcut for text with few brackets) answers what
    `text_depth` measures, for any JSON and any limit."""
    body = json.dumps(value).encode()
    assert nests_deeper(body, limit) == (text_depth(body, limit) > limit)


@pytest.mark.parametrize(
    "body",
    [
        b'{\n  "action": "opened",  "title": "\xc3\xa9t\xc3\xa9 \\u00e9"}\n',
        '{"title": "été"}'.encode("utf-16"),  # JSON the standard library reads
        b'\xef\xbb\xbf{"title": "x"}',  # a byte-order mark
    ],
    ids=["utf-8", "utf-16", "bom"],
)
def test_a_kept_body_is_the_text_received_or_the_parsed_value(body: bytes) -> None:
    """A delivery's body is kept as the very text received when it is UTF-8 without a
    byte-order mark; any other JSON body as its parsed value, so it always reads back
    as the JSON that was translated."""
    parsed = parse_json(body)
    text = bodies.json_text(body, parsed)
    assert json.loads(text) == parsed
    assert (text == body.decode("utf-8", "replace")) == (not body.startswith((b"\xef", b"\xff")))
