"""A loop's ticks (engine/core/ticks.py): the envelope a slot gives, the ids that make a
slot admissible once, and the checks on a tick the scheduler did not make."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from engine.core.ruleset import Loop, Trigger, TriggerKind
from engine.core.ticks import (
    BRIDGE_SKEW,
    manual_tick,
    slot_problem,
    slot_tick_id,
    tick,
    tick_problem,
)

SLOT = datetime(2026, 12, 1, 9, tzinfo=UTC)
NIGHTLY = Loop(
    name="nightly",
    trigger=Trigger(TriggerKind.INTERVAL, every_seconds=3600),
    event_type="clock.tick.reaper",
    payload={"repo": "web"},
)
HOST = replace(NIGHTLY, name="timer", trigger=Trigger(TriggerKind.HOST, every_seconds=300))


def test_a_slots_tick_is_one_envelope_whoever_makes_it() -> None:
    """The tick of a slot is `clock:<loop>:<slot>` from the scheduler, of the loop's type,
    its payload the loop's static payload with the tick's fields over it."""
    envelope = tick(replace(NIGHTLY, payload={"repo": "web", "skippedSlots": 99}), SLOT, 2)
    assert envelope.model_dump() == {
        "schemaVersion": "factory.event/v1",
        "eventId": "clock:nightly:2026-12-01T09:00:00Z",
        "type": "clock.tick.reaper",
        "source": "schedule",
        "subject": "nightly",
        "occurredAt": SLOT,
        "correlationId": "clock:nightly:2026-12-01T09:00:00Z",
        "payload": {
            "repo": "web",
            "loop": "nightly",
            "slot": "2026-12-01T09:00:00Z",
            "cadenceSeconds": 3600,
            "skippedSlots": 2,
        },
    }
    assert tick(NIGHTLY, SLOT, 2) == tick(NIGHTLY, SLOT, 2)


def test_a_run_now_is_its_own_event_never_a_slot() -> None:
    """A run-now is `manual:<loop>:<token>` from source `manual`, at the moment it was
    asked for, with no skipped slots."""
    now = SLOT + timedelta(minutes=7, seconds=5)
    envelope = manual_tick(NIGHTLY, now, "abc")
    assert (envelope.eventId, envelope.source, envelope.occurredAt) == (
        "manual:nightly:abc",
        "manual",
        now,
    )
    assert envelope.correlationId == "manual:nightly:abc"
    assert envelope.payload == {
        "repo": "web",
        "loop": "nightly",
        "slot": "2026-12-01T09:07:05Z",
        "cadenceSeconds": 3600,
        "skippedSlots": 0,
    }


def test_a_slot_has_one_id_per_kind_of_clock() -> None:
    """A host timer's tick of a slot is `bridge:...`, the scheduler's (and a backfill's)
    `clock:...`: a host timer can never take a native slot's id."""
    assert slot_tick_id("bridge", "timer", SLOT) == "bridge:timer:2026-12-01T09:00:00Z"
    assert slot_tick_id("schedule", "nightly", SLOT) == "clock:nightly:2026-12-01T09:00:00Z"


@pytest.mark.parametrize(
    ("event_id", "source", "loop", "problem"),
    [
        ("bridge:timer:2026-12-01T09:00:00Z", "bridge", HOST, None),
        ("clock:timer:2026-12-01T09:00:00Z", "bridge", HOST, "has the id 'bridge:timer:"),
        ("clock:nightly:2026-12-01T09:00:00Z", "schedule", NIGHTLY, None),
        ("bridge:nightly:2026-12-01T09:00:00Z", "schedule", NIGHTLY, "has the id 'clock:"),
        ("my-own-id", "schedule", NIGHTLY, "has the id 'clock:nightly:2026-12-01T09:00:00Z'"),
    ],
)
def test_a_posted_tick_carries_its_slots_own_id(
    event_id: str, source: str, loop: Loop, problem: str | None
) -> None:
    """A tick the scheduler did not make (a host timer's post, an operator's backfill)
    must have its slot's id, so a second tick of that slot is a duplicate."""
    payload = {"slot": "2026-12-01T09:00:00Z"}
    found = tick_problem(event_id, source, loop, payload, SLOT, BRIDGE_SKEW)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_a_posted_tick_of_a_slot_that_has_not_come_is_refused_for_that() -> None:
    """The slot is checked before the id: a future slot is refused as not come yet, even
    under the id it would have."""
    payload = {"slot": "2026-12-01T11:00:00Z"}
    found = tick_problem(
        "clock:nightly:2026-12-01T11:00:00Z", "schedule", NIGHTLY, payload, SLOT, BRIDGE_SKEW
    )
    assert found is not None and "has not come yet" in found


def test_a_slot_has_come_at_its_own_instant() -> None:
    """A slot posted at exactly the runtime's clock (no skew) has come."""
    assert slot_problem(NIGHTLY, {"slot": "2026-12-01T09:00:00Z"}, SLOT) is None
    later = slot_problem(NIGHTLY, {"slot": "2026-12-01T10:00:00Z"}, SLOT)
    assert later is not None and "has not come yet" in later


def test_a_long_bad_slot_is_quoted_cut_at_40_characters() -> None:
    """A payload.slot that is not an instant is quoted in the refusal, at most its first
    40 characters, so a huge value never floods the answer or the journal."""
    found = slot_problem(NIGHTLY, {"slot": "y" * 10_000}, SLOT)
    assert found == f"payload.slot '{'y' * 40}' is not a slot (ISO-8601 UTC, whole seconds, Z)"
