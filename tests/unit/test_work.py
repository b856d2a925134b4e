"""The work item machine (engine.core.work, docs/work.md): the transitions table,
terminal states that never move, existing work first by semantic key, the bounded
context, the controller lease, and an instance's graduation out of shadow."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

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


# ---- graduating an instance out of shadow (docs/work.md#graduating-an-instance) ----------

LATER = "2026-12-07T09:00:00.000000Z"
RULE = "loops/work.rules:3"


def instance(state: str = work.BindingState.SHADOW) -> work.WorkBinding:
    made, created = work.bind(opened(), "nudge", "req-1", None, None, "operator:ann", AT)
    assert created and made.state == "shadow"
    return dataclasses.replace(made, state=state)


def refusal(
    b: work.WorkBinding, graduates: bool = True, deferred: bool = False, **kw: Any
) -> tuple[str, str]:
    with pytest.raises(Conflict) as refused:
        work.graduate(b, graduates, deferred, "operator:bob", LATER, allowed_at=RULE, **kw)
    return refused.value.details["reason"], refused.value.message


def test_an_immediate_graduation_makes_the_instance_live() -> None:
    """Shadow to live, one version later, stamped with the time; nothing is pending."""
    b = instance()
    live = work.graduate(b, True, False, "operator:bob", LATER, "reviewed", RULE)
    assert (live.state, live.version, live.updated_at) == ("live", b.version + 1, LATER)
    assert not work.is_pending(live) and work.binding_dict(live)["pendingGraduation"] is None
    assert (live.created_by, live.created_at, live.shape) == (b.created_by, b.created_at, "nudge")


def test_a_deferred_graduation_stays_in_shadow_and_records_the_request() -> None:
    """`--at-restart`: still in shadow, one version later, who asked, when and why;
    the wire form shows it as pending."""
    b = instance()
    deferred = work.graduate(b, True, True, "operator:bob", LATER, "after the freeze", RULE)
    assert (deferred.state, deferred.version) == ("shadow", b.version + 1)
    assert work.binding_dict(deferred)["pendingGraduation"] == {
        "requestedBy": "operator:bob",
        "requestedAt": LATER,
        "note": "after the freeze",
    }
    assert work.binding_dict(deferred)["loop"] == f"nudge@{b.work_id}"


def test_what_does_not_graduate() -> None:
    """A shape whose rule file does not write `shadow false` (the message says where
    it would be written), an instance not in shadow, a second deferral, and an instance
    whose work ended are refused, each with its reason."""
    reason, message = refusal(instance(), graduates=False)
    assert reason == "shadow_only" and f"a reviewed `shadow false` in {RULE} allows it" in message
    assert refusal(instance(), graduates=False, deferred=True)[0] == "shadow_only"
    for state in ("live", "paused", "disabled"):
        assert refusal(instance(state))[0] == "not_shadow", state
        assert refusal(instance(state), deferred=True)[0] == "not_shadow", state
    pending = work.graduate(instance(), True, True, "operator:ann", AT)
    reason, message = refusal(pending, deferred=True)
    assert reason == "graduation_pending" and "operator:ann" in message
    done = move(opened(), WorkTrigger.COMPLETE, LATER)
    assert refusal(instance(), work=done)[0] == "illegal_transition"


def test_an_immediate_graduation_takes_the_place_of_a_deferred_one() -> None:
    """Going live now clears the deferral, so the next serve start has nothing to do."""
    pending = work.graduate(instance(), True, True, "operator:ann", AT)
    live = work.graduate(pending, True, False, "operator:bob", LATER)
    assert live.state == "live" and not work.is_pending(live)
    assert live.version == pending.version + 1


def test_a_serve_start_applies_a_deferral_or_drops_it() -> None:
    """At restart a pending instance still in shadow goes live; one disabled (or paused)
    meanwhile, or whose shape no longer allows it or left the rules, or whose work
    ended, only has its mark cleared, with why. Either way one version later and nothing
    pending; an instance with nothing pending is a caller's bug."""
    pending = work.graduate(instance(), True, True, "operator:ann", AT)
    live, dropped = work.graduate_at_restart(pending, True, LATER)
    assert (live.state, dropped, live.version) == ("live", None, pending.version + 1)
    assert not work.is_pending(live)
    done = move(opened(), WorkTrigger.CANCEL, LATER)
    cases = [
        (dataclasses.replace(pending, state="disabled"), True, None, "not_shadow"),
        (dataclasses.replace(pending, state="paused"), True, None, "not_shadow"),
        (pending, False, None, "shadow_only"),
        (pending, None, None, "no_shape"),
        (pending, True, done, "illegal_transition"),
    ]
    for b, graduates, item, why in cases:
        kept, dropped = work.graduate_at_restart(b, graduates, LATER, item)
        assert (kept.state, dropped) == (b.state, why)
        assert not work.is_pending(kept) and kept.version == b.version + 1
    with pytest.raises(ValueError):
        work.graduate_at_restart(live, True, LATER)


@given(
    st.sampled_from(list(work.BindingState)),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_graduation_only_ever_leaves_shadow_for_live(
    state: work.BindingState, graduates: bool, deferred: bool, pending: bool
) -> None:
    """Whatever the instance and the request, a graduation either is refused with a
    reason or takes a shadow instance of a shape that allows it to live (now) or keeps
    it in shadow with the request recorded (deferred); never any other move."""
    b = instance(state)
    if pending:
        b = dataclasses.replace(
            b, graduation_requested_by="operator:ann", graduation_requested_at=AT
        )
    try:
        after = work.graduate(b, graduates, deferred, "operator:bob", LATER)
    except Conflict as refused:
        assert refused.details["reason"] in {"shadow_only", "not_shadow", "graduation_pending"}
        assert not graduates or state != "shadow" or (deferred and pending)
        return
    assert graduates and state == "shadow" and after.version == b.version + 1
    assert (after.state, work.is_pending(after)) == (
        ("shadow", True) if deferred else ("live", False)
    )
