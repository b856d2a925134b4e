"""Condition watches decided purely (engine.core.probes): a probe's JSON reduced to its
projection and fingerprinted, and a poll turned into the loop's next observation."""

from __future__ import annotations

import hashlib
import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.probes import (
    DIAGNOSTIC_MAX,
    STDOUT_MAX,
    Outcome,
    ProbeFailure,
    ProbeRun,
    Reading,
    fingerprint,
    next_observation,
    observe,
    parse_output,
    project,
    term_steps,
)
from engine.core.records import ObservationRecord
from engine.core.registry import Probe
from engine.core.ruleset import Backoff, Loop, Policy, Trigger, TriggerKind

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
IGNORE = [r"\[t=\d+\]"]
WORDS = st.text(alphabet="abcdefgh xyz0123456789", max_size=12)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | WORDS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(WORDS, inner, max_size=4),
    max_leaves=20,
)


def reorder(value: Any, rng: random.Random) -> Any:
    """The same document with every object's keys in another order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: reorder(v, rng) for k, v in items}
    if isinstance(value, list):
        return [reorder(v, rng) for v in value]
    return value


def sprinkle(value: Any, rng: random.Random) -> Any:
    """The same document with ignored text (`[t=N]`) put into its strings."""
    if isinstance(value, str):
        at = rng.randint(0, len(value))
        return value[:at] + f"[t={rng.randint(0, 10**6)}]" + value[at:]
    if isinstance(value, dict):
        return {k: sprinkle(v, rng) for k, v in value.items()}
    if isinstance(value, list):
        return [sprinkle(v, rng) for v in value]
    return value


def fp(document: Any, include: tuple[str, ...] = (), ignore: list[str] = IGNORE) -> str:
    return fingerprint(project(document, include, ignore))


@given(json_values, st.integers(0, 2**32))
def test_key_order_never_changes_a_fingerprint(document: Any, seed: int) -> None:
    """Two documents that differ only in the order of their keys fingerprint the same."""
    assert fp(reorder(document, random.Random(seed))) == fp(document)


@given(json_values, st.integers(0, 2**32))
def test_ignored_text_never_changes_a_fingerprint(document: Any, seed: int) -> None:
    """Volatile text matched by an `ignore` pattern, anywhere in any string, leaves the
    fingerprint as it was."""
    assert fp(sprinkle(document, random.Random(seed))) == fp(document)


@settings(max_examples=200)
@given(
    st.lists(st.dictionaries(WORDS, json_values, max_size=3), min_size=1, max_size=4),
    st.data(),
)
def test_a_change_inside_an_included_term_always_changes_it(
    runs: list[dict[str, Any]], data: st.DataObject
) -> None:
    """A different value at an included path (`runs[].conclusion`) is a different
    fingerprint, whatever else the document holds."""
    index = data.draw(st.integers(0, len(runs) - 1))
    old = data.draw(json_values)
    new = data.draw(json_values.filter(lambda v: v != old and json.dumps(v) != json.dumps(old)))
    before = [dict(r) for r in runs]
    after = [dict(r) for r in runs]
    before[index]["conclusion"], after[index]["conclusion"] = old, new
    include = ("runs[].conclusion",)
    assert fp({"runs": before}, include) != fp({"runs": after}, include)


def test_only_the_included_terms_count() -> None:
    """Outside the include terms nothing counts: another id or timestamp is the same
    observation, another status is not; a missing key counts as null."""
    doc = {"id": 1, "status": "queued", "runs": [{"conclusion": None, "url": "a"}]}
    include = ("status", "runs[].conclusion")
    moved = {"id": 2, "status": "queued", "runs": [{"conclusion": None, "url": "b"}]}
    assert fp(moved, include) == fp(doc, include)
    assert fp({**doc, "status": "done"}, include) != fp(doc, include)
    assert project({"runs": [{}]}, include, []) == {"status": None, "runs[].conclusion": [None]}


def test_the_whole_document_counts_without_include() -> None:
    """A probe without include terms fingerprints everything it printed (minus ignored
    text), in canonical form: SHA-256 of sorted keys without whitespace."""
    assert project({"b": "x 3 minutes ago", "a": 1}, (), [r" \d+ minutes ago"]) == {
        "a": 1,
        "b": "x",
    }
    canonical = '{"a":1,"b":"x","c":["é",null]}'.encode()
    assert (
        fingerprint({"c": ["é", None], "b": "x", "a": 1}) == hashlib.sha256(canonical).hexdigest()
    )


def test_include_terms_are_steps() -> None:
    """`a.b`, `[]` and `key[]` read as the steps a selection takes."""
    assert term_steps("[].status") == ["[]", "status"]
    assert term_steps("jobs[].steps[].name") == ["jobs", "[]", "steps", "[]", "name"]
    assert term_steps("a.b") == ["a", "b"]


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"not json", "not JSON"),
        (b'{"a": NaN}', "not JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[" * 100_000, "not JSON"),
        (b" " * (STDOUT_MAX + 1), "more than"),
    ],
)
def test_output_that_is_not_json_is_a_probe_failure(raw: bytes, why: str) -> None:
    """Stdout that is not one JSON document (or too large) is a ProbeFailure with a short
    diagnostic, never an exception of the parser."""
    with pytest.raises(ProbeFailure) as caught:
        parse_output(raw)
    assert why in str(caught.value) and len(str(caught.value)) < 200


def probe(**fields: Any) -> Probe:
    return Probe.model_validate({"id": "ci-status", "argv": ["true"], **fields})


def test_a_reading_is_a_fingerprint_or_a_bounded_diagnostic() -> None:
    """A probe run that exited 0 with JSON is a fingerprint of its projection; a failed
    one, or one that printed no JSON, a diagnostic of at most 500 characters."""
    ok = observe(probe(include=["status"]), ProbeRun(stdout=b'{"status": "x", "id": 7}'))
    assert ok == Reading(fingerprint=fingerprint({"status": "x"}))
    failed = observe(probe(), ProbeRun(failure="exited with code 1; " + "e" * 2000))
    assert failed.fingerprint is None and failed.diagnostic is not None
    assert len(failed.diagnostic) == DIAGNOSTIC_MAX
    bad = observe(probe(), ProbeRun(stdout=b"hello"))
    assert bad.fingerprint is None and "not JSON" in (bad.diagnostic or "")


# ---- the next observation ---------------------------------------------------------------

LOOP = Loop(
    name="ci-watch",
    trigger=Trigger(TriggerKind.WATCH, every_seconds=300, probe="ci-status"),
    event_type="test.changed",
    payload={},
    policy=Policy(backoff=Backoff(base_seconds=60, max_seconds=3600)),
)


def test_the_first_fingerprint_is_a_silent_baseline() -> None:
    """The first good poll stores the fingerprint without a change; the next poll is
    one cadence later."""
    step = next_observation(LOOP, None, Reading(fingerprint="a" * 64), NOW)
    assert step.outcome is Outcome.BASELINE
    assert (step.record.fingerprint, step.record.changes, step.record.polls) == ("a" * 64, 0, 1)
    assert step.record.next_poll_at == "2026-11-30T10:05:00.000000Z"


def test_an_unchanged_poll_is_counted_and_a_changed_one_fires() -> None:
    """Polls with the same fingerprint only count; a new fingerprint is change n+1,
    remembering the one it replaced."""
    base = next_observation(LOOP, None, Reading(fingerprint="a" * 64), NOW).record
    same = next_observation(LOOP, base, Reading(fingerprint="a" * 64), NOW + timedelta(minutes=5))
    assert (same.outcome, same.record.polls, same.record.changes) == (Outcome.UNCHANGED, 2, 0)
    later = NOW + timedelta(minutes=10)
    changed = next_observation(LOOP, same.record, Reading(fingerprint="b" * 64), later)
    assert changed.outcome is Outcome.CHANGED and changed.previous == "a" * 64
    assert (changed.record.changes, changed.record.changed_at) == (1, "2026-11-30T10:10:00.000000Z")


def test_a_failure_keeps_the_fingerprint_and_backs_off() -> None:
    """A failed poll keeps the last good fingerprint, counts the failures in a row, and
    waits the larger of the cadence and the loop's backoff (doubling from its base);
    the next good poll compares with the fingerprint from before the failures."""
    row = next_observation(LOOP, None, Reading(fingerprint="a" * 64), NOW).record
    waits = []
    for _ in range(4):
        step = next_observation(LOOP, row, Reading(diagnostic="boom"), NOW)
        row = step.record
        waits.append(row.next_poll_at)
        assert step.outcome is Outcome.FAILED and row.fingerprint == "a" * 64
    assert row.consecutive_failures == 4 and row.status == "failed" and row.diagnostic == "boom"
    # 60s, 120s, 240s are shorter than the 5m cadence; 480s is not.
    assert waits == ["2026-11-30T10:05:00.000000Z"] * 3 + ["2026-11-30T10:08:00.000000Z"]
    back = next_observation(LOOP, row, Reading(fingerprint="a" * 64), NOW)
    assert back.outcome is Outcome.UNCHANGED
    assert (back.record.consecutive_failures, back.record.diagnostic) == (0, "")


def test_failures_before_any_baseline_leave_none() -> None:
    """A probe that failed from its first poll has no fingerprint; its first good poll is
    the baseline, not a change."""
    failed = next_observation(LOOP, None, Reading(diagnostic="boom"), NOW).record
    assert failed.fingerprint is None and failed == ObservationRecord(
        loop="ci-watch",
        observed_at="2026-11-30T10:00:00.000000Z",
        status="failed",
        diagnostic="boom",
        consecutive_failures=1,
        polls=1,
        next_poll_at="2026-11-30T10:05:00.000000Z",
    )
    assert next_observation(LOOP, failed, Reading(fingerprint="a" * 64), NOW).outcome is (
        Outcome.BASELINE
    )
