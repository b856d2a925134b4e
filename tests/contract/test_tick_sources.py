"""One spelling of an `on_event` loop's tick source (docs/runtime.md#who-may-tick-a-loop),
held by every store: a tick the runtime made and an older engine stored as `on-event`
reads as `on_event`, whatever an event from outside claimed is kept as it claimed it,
and migration 011 rewrites the stored ticks of a database an older engine left."""

from __future__ import annotations

import json

import databases
from databases import Factory, real_databases

from engine.core.records import EventRecord
from engine.core.states import EventSource

T = "2026-11-30T10:00:00.000000Z"


def event(event_id: str, source: str, admitted_by: str, loop: str | None) -> EventRecord:
    return EventRecord(
        event_id=event_id,
        type="wait.review",
        source=source,
        subject="review",
        occurred_at=T,
        correlation_id=event_id,
        payload={"loop": "review", "trigger": {"eventId": "ask-1"}},
        loop=loop,
        admitted_at=T,
        admitted_by=admitted_by,
    )


def test_the_one_spelling_is_on_event() -> None:
    """The runtime writes an `on_event` loop's ticks with source `on_event`, the
    trigger's own name."""
    assert EventSource.ON_EVENT == "on_event"


def test_a_tick_stored_with_the_old_spelling_reads_in_the_one_spelling(
    open_store: Factory,
) -> None:
    """A tick the runtime admitted (`schedule`) under the old source `on-event` reads
    back as `on_event` by id, in lists and by loop; the same words claimed by an
    envelope from outside (the bridge) are kept as claimed."""
    store = open_store()
    with store.write() as tx:
        tx.insert_event(event("on:review:ask-1", "on-event", "schedule", "review"))
        tx.insert_event(event("forged-1", "on-event", "bridge", None))
    with store.read() as tx:
        tick, forged = tx.get_event("on:review:ask-1"), tx.get_event("forged-1")
        listed = {e.event_id: e.source for e in tx.list_events(10)}
        by_loop = [e.source for e in tx.loop_events("review", T, 10)]
    assert tick is not None and tick.source == "on_event"
    assert forged is not None and forged.source == "on-event"
    assert listed == {"on:review:ask-1": "on_event", "forged-1": "on-event"}
    assert by_loop == ["on_event"]


@real_databases  # migrations are SQL run on a database (the memory store has no schema)
def test_migration_11_rewrites_the_old_tick_sources(
    open_store: Factory, store_database: str
) -> None:
    """A database at schema version 10 holding an `on-event` tick of the runtime, an
    `on-event` claimed from outside and a slot is brought to version 11: the tick's
    stored source is `on_event`, the claim and the slot are untouched, and the journal
    (append-only) keeps what it recorded."""
    journal = json.dumps({"type": "wait.review", "source": "on-event", "loop": "review"})
    rows = [
        f"INSERT INTO events VALUES ('{e}', 'wait.review', '{source}', 'review', '{T}', "
        f"'{e}', '{{}}', {loop}, '{T}', '{actor}', 1)"
        for e, source, actor, loop in [
            ("on:review:ask-1", "on-event", "schedule", "'review'"),
            ("forged-1", "on-event", "bridge", "NULL"),
            ("clock:nightly:x", "schedule", "schedule", "'nightly'"),
        ]
    ]
    rows.append(
        "INSERT INTO journal (at, entity, entity_id, action, actor, data) VALUES "
        f"('{T}', 'event', 'on:review:ask-1', 'admitted', 'schedule', '{journal}')"
    )
    databases.create_at(store_database, 10, rows)
    assert (11,) not in databases.rows(store_database, "SELECT version FROM schema_migrations")
    store = open_store()
    assert (11,) in databases.rows(store_database, "SELECT version FROM schema_migrations")
    stored = databases.rows(store_database, "SELECT event_id, source FROM events ORDER BY 1")
    assert stored == [
        ("clock:nightly:x", "schedule"),
        ("forged-1", "on-event"),
        ("on:review:ask-1", "on_event"),
    ]
    assert databases.rows(store_database, "SELECT data FROM journal") == [(journal,)]
    with store.read() as tx:
        tick = tx.get_event("on:review:ask-1")
    assert tick is not None and tick.source == "on_event"
