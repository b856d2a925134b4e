"""The in-memory store's own transactions (what the contract suite cannot ask of a
database): copy-on-write versions, a bounded writer lock, and the refusals of misuse
that SQL raises too."""

from __future__ import annotations

import threading

import pytest

from engine.core.records import EventRecord, JournalEntry
from engine.errors import Busy
from engine.store.limits import Limits
from engine.store.memory import MemoryDatabase, MemoryStore, MemoryStoreError

AT = "2026-11-30T10:00:00.000000Z"


def event(event_id: str) -> EventRecord:
    return EventRecord(event_id, "t", "inject", "s", AT, event_id, {}, None, AT, "inject")


def test_a_read_keeps_its_version_while_a_row_it_saw_changes() -> None:
    """A read that saw a row keeps seeing it as it was while a writer changes it and
    commits: a committed version is never changed in place."""
    store = MemoryStore()
    with store.write() as tx:
        tx.insert_event(event("e-1"))
    with store.read() as before:
        with store.write() as tx:
            tx.mark_planned("e-1")
            tx.append_journal(JournalEntry(AT, "event", "e-1", "planned", "system"))
        seen = before.get_event("e-1")
        assert seen is not None and seen.planned is False
        assert before.list_journal(10) == []
    with store.read() as after:
        now = after.get_event("e-1")
        assert now is not None and now.planned is True


def test_a_savepoint_inside_a_failed_savepoint_is_undone_with_it() -> None:
    """Writes of a nested step that succeeded are undone when the step around it
    fails; the seq of what was undone is handed out again, as SQLite does."""
    store = MemoryStore()
    with store.write() as tx:
        tx.insert_event(event("e-1"))
        with pytest.raises(RuntimeError), tx.savepoint():
            with tx.savepoint():
                tx.insert_event(event("e-2"))
                tx.append_journal(JournalEntry(AT, "event", "e-2", "admitted", "system"))
            raise RuntimeError("outer")
        seq = tx.append_journal(JournalEntry(AT, "event", "e-1", "admitted", "system"))
    with store.read() as tx:
        assert [e.event_id for e in tx.list_events(10)] == ["e-1"]
        assert seq == 1 and [e.entity_id for e in tx.list_journal(10)] == ["e-1"]


def test_a_write_waits_for_the_writer_only_as_long_as_the_lock_timeout() -> None:
    """A second writer of the same data is answered Busy once the lock timeout passes,
    and writes nothing."""
    database = MemoryDatabase()
    holder, waiter = MemoryStore(database), MemoryStore(database, Limits(lock_timeout=0.05))
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with holder.write() as tx:
            tx.insert_event(event("held"))
            held.set()
            release.wait(5)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(5)
        with pytest.raises(Busy), waiter.write() as tx:
            tx.insert_event(event("late"))
    finally:
        release.set()
        thread.join(5)
    with waiter.read() as tx:
        assert [e.event_id for e in tx.list_events(10)] == ["held"]


def test_misuse_is_refused_as_sql_refuses_it() -> None:
    """A write opened inside a write of the same thread, a transaction used after its
    block, and a closed store are refused (never a deadlock or a silent write); the
    data stays for the other stores on the database."""
    store = MemoryStore()
    with store.write() as tx:
        tx.insert_event(event("e-1"))
        with pytest.raises(MemoryStoreError, match="within a transaction"), store.write():
            pass
    with pytest.raises(MemoryStoreError, match="over"):
        tx.insert_event(event("e-2"))
    with pytest.raises(MemoryStoreError, match="over"):
        tx.get_event("e-1")
    other = MemoryStore(store.database)
    store.close()
    with pytest.raises(MemoryStoreError, match="closed"), store.read():
        pass
    with other.read() as tx:
        assert [e.event_id for e in tx.list_events(10)] == ["e-1"]
        with pytest.raises(MemoryStoreError, match="LIMIT"):
            tx.list_events(-1)
    assert (store.dialect, store.health.as_dict()["writable"]) == ("memory", True)
