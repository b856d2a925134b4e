"""The work item machine (engine.core.work, docs/work.md): the transitions table,
terminal states that never move, existing work first by semantic key, the bounded
context and the controller lease."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core import work
from engine.core.work import (
    MAX_CONTEXT_BYTES,
    TERMINAL,
    TRANSITIONS,
    WorkGate,
    WorkItem,
    WorkRequest,
    WorkState,
    WorkTrigger,
    claim,
    context_document,
    gate,
    move,
    open_work,
)
from engine.errors import Conflict, PayloadTooLarge, Unprocessable

NOW = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
AT = "2026-12-07T08:00:00.000000Z"


def opened(key: str = "repair-42") -> WorkItem:
    item, created = open_work(None, WorkRequest(key, "Repair 42"), "w1", "operator:ann", AT)
    assert created
    return item


def test_open_starts_open_without_a_lease() -> None:
    """A new item is open, version 1, with its context document and no lease."""
    item = opened()
    assert (item.state, item.version, item.lease_owner) == ("open", 1, None)
    assert item.context == {"summary": "", "links": []}


def test_terminal_states_have_no_moves() -> None:
    """The table holds no move out of completed or cancelled."""
    assert not [k for k in TRANSITIONS if k[0] in TERMINAL]


@given(st.lists(st.sampled_from(list(WorkTrigger)), max_size=12))
def test_no_sequence_leaves_a_terminal_state(triggers: list[WorkTrigger]) -> None:
    """Whatever triggers come, once an item is terminal every further one is refused
    and changes nothing; each allowed move bumps the version by one."""
    item = opened()
    for trigger in triggers:
        before = item
        try:
            item = move(item, trigger, AT)
        except Conflict:
            assert (before.state, trigger) not in TRANSITIONS
            continue
        assert before.state not in TERMINAL
        assert item.version == before.version + 1
        if item.state in TERMINAL:
            assert item.lease_owner is None


@given(st.sampled_from(list(WorkState)), st.text(min_size=1, max_size=20))
def test_same_key_twice_returns_the_live_item(state: WorkState, key: str) -> None:
    """Opening a key a non-terminal item holds answers that item; a terminal one's key
    opens a new item."""
    if not key.strip():
        return
    existing = WorkItem("w0", key, "t", state, None, {}, "auto", AT, AT)
    item, created = open_work(existing, WorkRequest(key, "again"), "w1", "auto", AT)
    if state in TERMINAL:
        assert created and item.work_id == "w1" and item.state == "open"
    else:
        assert not created and item is existing


def test_context_is_bounded() -> None:
    """A context beyond 64 KB is a 413 whose reason is context_too_large."""
    assert context_document("x" * 1000, ("https://a.example/1",))["summary"] == "x" * 1000
    with pytest.raises(PayloadTooLarge) as err:
        context_document("x" * MAX_CONTEXT_BYTES, ())
    assert err.value.details["reason"] == "context_too_large"


def test_bad_requests_are_refused() -> None:
    """An empty key or title is a 422 (bad_work)."""
    with pytest.raises(Unprocessable):
        open_work(None, WorkRequest(" ", "t"), "w1", "auto", AT)
    with pytest.raises(Unprocessable):
        open_work(None, WorkRequest("k", ""), "w1", "auto", AT)


def test_claim_takes_the_lease_and_refuses_another_owner() -> None:
    """continue makes the item active with the caller's lease; another owner is refused
    while it is live and may take it once it expired; the holder renews."""
    item = claim(opened(), "operator:bot", "s1", NOW, timedelta(minutes=5))
    assert (item.state, item.lease_owner, item.lease_session) == ("active", "operator:bot", "s1")
    assert item.lease_expires_at == "2026-12-07T08:05:00.000000Z"
    with pytest.raises(Conflict) as err:
        claim(item, "operator:other", "s2", NOW + timedelta(minutes=1))
    assert err.value.details["reason"] == "lease_held"
    renewed = claim(item, "operator:bot", "s1", NOW + timedelta(minutes=4))
    assert renewed.lease_expires_at == "2026-12-07T08:19:00.000000Z"
    taken = claim(item, "operator:other", "s2", NOW + timedelta(minutes=6))
    assert taken.lease_owner == "operator:other"


def test_terminal_work_cannot_be_claimed() -> None:
    """A completed item refuses continue, and completing drops the lease."""
    done = move(claim(opened(), "operator:bot", "s1", NOW), WorkTrigger.COMPLETE, AT)
    assert (done.state, done.lease_owner) == ("completed", None)
    with pytest.raises(Conflict):
        claim(done, "operator:bot", "s1", NOW)


def test_the_gate_reads_the_item_before_anything_is_launched() -> None:
    """Missing work pauses, terminal work is done, a live lease makes the firing a
    no-op, an expired lease or none proceeds."""
    now = datetime(2026, 12, 7, 9, tzinfo=UTC)
    item = opened()
    assert gate(None, now) is WorkGate.MISSING
    assert gate(item, now) is WorkGate.PROCEED
    for trigger in (WorkTrigger.COMPLETE, WorkTrigger.CANCEL):
        assert gate(move(item, trigger, "t"), now) is WorkGate.DONE
    held = claim(item, "controller:agent", "s", now, timedelta(minutes=10))
    assert gate(held, now + timedelta(minutes=9)) is WorkGate.CONTROLLER_ACTIVE
    assert gate(held, now + timedelta(minutes=10)) is WorkGate.PROCEED
    blocked = move(item, WorkTrigger.BLOCK, "t")
    assert gate(blocked, now) is WorkGate.PROCEED


def test_an_instance_name_holds_its_shape_and_work_and_no_declared_name() -> None:
    """`shape@work-id` names an instance; a declared loop's name (no `@`) is none."""
    name = work.instance_name("nudge-repair", "work-c35ae169644de8d6")
    assert name == "nudge-repair@work-c35ae169644de8d6"
    assert work.parse_instance(name) == ("nudge-repair", "work-c35ae169644de8d6")
    assert work.parse_instance("nudge-repair") is None
    assert work.parse_instance("nudge@r1") is None
