"""`engine explain ID` finds any event id the store has, whatever its shape
(docs/explain.md): the exact id is looked up before the id is read as anything else,
so an id a webhook table templated from a GUID (`gh-<GUID>`), one that looks like a
slot (`LOOP@TIME`) or like another event's delivery GUID names its own event. Property
tests over the ids an envelope may carry, on the in-memory store."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from engine.core.envelope import EVENT_ID_PATTERN, parse_iso
from engine.core.records import DeliveryRecord, EventRecord
from engine.core.ticks import tick_id
from engine.service.explain import resolve
from engine.store.memory import MemoryStore

T = "2026-11-30T10:00:00.000000Z"
SLOT = "2026-11-30T02:00:00Z"

guids = st.uuids().map(str)
any_ids = st.from_regex(EVENT_ID_PATTERN.replace("^", r"\A").replace("$", r"\Z"))
shaped = st.one_of(
    guids,  # a delivery's own GUID, as the default event id
    guids.map(lambda g: f"gh-{g}"),  # a table's `id "gh-{delivery.id}"`
    guids.map(lambda g: f"{g}@{SLOT}"),  # a GUID before an `@` and a time
    st.just(f"nightly@{SLOT}"),  # the very shape of a slot
    st.just("prop-19f1064b619d49d3"),
    st.just("run-ff49db6b8203ba87"),
)


def event(event_id: str) -> EventRecord:
    return EventRecord(
        event_id=event_id,
        type="factory.merge.requested",
        source="github",
        subject="x",
        occurred_at=T,
        correlation_id=event_id,
        payload={},
        loop=None,
        admitted_at=T,
        admitted_by="github",
    )


def store_with(event_id: str, decoy: str) -> MemoryStore:
    """`event_id`'s event, and a decoy that `event_id` would name were it read as a
    GUID (a delivery kept beside the decoy) or as a slot (the decoy is that tick)."""
    store = MemoryStore()
    with store.write() as tx:
        tx.insert_event(event(event_id))
        tx.insert_event(event(decoy))
        tx.insert_deliveries([DeliveryRecord(decoy, event_id, "issues", "{}", "loops/x:1:1", T)])
    return store


@given(st.one_of(shaped, any_ids))
def test_an_id_the_store_has_names_its_own_event(event_id: str) -> None:
    """Whatever the id's shape, explain resolves it to the event of exactly that id,
    though a delivery with that GUID became another event."""
    decoy = f"other-{uuid.uuid5(uuid.NAMESPACE_URL, event_id)}"
    with store_with(event_id, decoy).read() as tx:
        assert resolve(tx, event_id).event_id == event_id


@given(guids)
def test_an_id_shaped_like_a_slot_names_its_own_event_not_the_slot(guid: str) -> None:
    """`nightly@TIME` as an event's own id is that event, though the slot's tick of
    `nightly` at TIME is stored too; a GUID templated into the id changes nothing."""
    event_id = f"nightly@{SLOT}"
    tick = tick_id("nightly", parse_iso(SLOT))
    with store_with(event_id, tick).read() as tx:
        assert resolve(tx, event_id).event_id == event_id
        assert resolve(tx, tick).event_id == tick
    with store_with(f"gh-{guid}", tick).read() as tx:
        assert resolve(tx, f"gh-{guid}").event_id == f"gh-{guid}"
        assert resolve(tx, f"nightly@{SLOT}").event_id == tick
