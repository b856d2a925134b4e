"""The storage contract, written once and held by every backend (SQLite now;
PostgreSQL joins the `backend` parameter when it lands)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine.core.records import EventRecord, JournalEntry, ProposalRecord, RunRecord
from engine.store.ports import Store
from engine.store.sqlite import SqliteStore

Factory = Callable[[], Store]


@pytest.fixture(params=["sqlite"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    """Opens stores on one database; each call is another connection, as another process."""
    opened: list[Store] = []

    def factory() -> Store:
        store = SqliteStore(tmp_path / "contract.db")
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


def event(event_id: str = "e-1", loop: str | None = None) -> EventRecord:
    return EventRecord(
        event_id=event_id,
        type="factory.work.requested",
        source="inject",
        subject="bj29",
        occurred_at="2026-11-30T10:00:00.000000Z",
        correlation_id=event_id,
        payload={"repo": "bj29"},
        loop=loop,
        admitted_at="2026-11-30T10:00:00.000000Z",
        admitted_by="inject",
    )


def run(key: str = "event:e-1", run_id: str = "run-1", loop: str | None = None) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        idempotency_key=key,
        event_id="e-1",
        proposal_id=None,
        loop=loop,
        definition="dispatch@1",
        state="queued",
        approved_by="operator:alice",
        attempts=0,
        lease_owner=None,
        lease_expires_at=None,
        created_at="2026-11-30T10:00:01.000000Z",
    )


def test_admission_is_idempotent_by_event_id(open_store: Factory) -> None:
    """A second insert of one event id writes nothing and says so."""
    store = open_store()
    with store.write() as tx:
        assert tx.insert_event(event()) is True
        assert tx.insert_event(event()) is False
    with store.read() as tx:
        assert [e.event_id for e in tx.list_events(10)] == ["e-1"]
        assert tx.unplanned_events(10)[0].payload == {"repo": "bj29"}


def test_one_run_per_idempotency_key(open_store: Factory) -> None:
    """Two runs with one idempotency key converge on the first."""
    store = open_store()
    with store.write() as tx:
        tx.insert_event(event())
        assert tx.insert_run(run()) is True
        assert tx.insert_run(run(run_id="run-2")) is False
        found = tx.get_run_by_key("event:e-1")
    assert found is not None and found.run_id == "run-1"


def test_two_claimers_never_get_the_same_run(open_store: Factory) -> None:
    """Workers on separate connections claiming concurrently each get distinct runs."""
    setup = open_store()
    with setup.write() as tx:
        tx.insert_event(event())
        for n in range(20):
            tx.insert_run(run(key=f"k{n}", run_id=f"run-{n:02d}"))
    claimed: list[str] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        store = open_store()
        while True:
            with store.write() as tx:
                got = tx.claim_next_run(name, "2026-11-30T11:00:00.000000Z")
            if got is None:
                return
            with lock:
                claimed.append(got.run_id)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claimed) == [f"run-{n:02d}" for n in range(20)]


def test_only_the_lease_holder_finishes_a_run(open_store: Factory) -> None:
    """A worker that lost its lease cannot record a result."""
    store = open_store()
    with store.write() as tx:
        tx.insert_event(event())
        tx.insert_run(run())
        claimed = tx.claim_next_run("w1", "2026-11-30T10:05:00.000000Z")
        assert claimed is not None and claimed.attempts == 1
        assert tx.start_run("run-1", "w2", "2026-11-30T10:00:02.000000Z") is False
        assert tx.finish_run("run-1", "w2", "succeeded", "t", "OK", {}, None, None) is False
        assert tx.finish_run("run-1", "w1", "succeeded", "t", "OK", {"outcome": "OK"}, None, None)
        done = tx.get_run("run-1")
    assert done is not None and done.state == "succeeded" and done.result == {"outcome": "OK"}
    assert done.lease_owner is None


def test_expired_lease_recovery_is_compare_and_set(open_store: Factory) -> None:
    """A recovered run cannot be recovered twice, nor finished by its old holder."""
    store = open_store()
    with store.write() as tx:
        tx.insert_event(event())
        tx.insert_run(run())
        tx.claim_next_run("w1", "2026-11-30T10:00:05.000000Z")
        expired = tx.expired_leases("2026-11-30T10:00:06.000000Z", 10)
        assert [r.run_id for r in expired] == ["run-1"]
        assert tx.recover_run(expired[0], "queued", "t", "lease expired") is True
        assert tx.recover_run(expired[0], "queued", "t", "lease expired") is False
        assert tx.finish_run("run-1", "w1", "succeeded", "t", "OK", {}, None, None) is False
        again = tx.get_run("run-1")
    assert again is not None and again.state == "queued"


def test_proposal_decisions_are_compare_and_set(open_store: Factory) -> None:
    """A proposal moves only from the state the caller saw: approving twice fails."""
    store = open_store()
    proposal = ProposalRecord("p-1", "e-1", None, "dispatch@1", "open", False, True, "t")
    with store.write() as tx:
        tx.insert_event(event())
        assert tx.insert_proposal(proposal) is True
        assert tx.insert_proposal(proposal) is False
        assert tx.decide_proposal("p-1", "open", "approved", "t", "operator:alice", "")
        assert not tx.decide_proposal("p-1", "open", "rejected", "t", "operator:bob", "")
        final = tx.get_proposal("p-1")
    assert final is not None and (final.state, final.decided_by) == ("approved", "operator:alice")


def test_journal_is_append_only(open_store: Factory) -> None:
    """Journal records can be appended and read in order, never changed."""
    store = open_store()
    with store.write() as tx:
        for n in range(3):
            tx.append_journal(JournalEntry("t", "run", "run-1", f"a{n}", "system"))
    with store.read() as tx:
        entries = tx.list_journal(10)
        assert [e.action for e in entries] == ["a0", "a1", "a2"]
        assert [e.action for e in tx.list_journal(10, after=entries[0].seq or 0)] == ["a1", "a2"]
    if isinstance(store, SqliteStore):
        raw = sqlite3.connect(store.path)
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            raw.execute("UPDATE journal SET actor = 'operator:mallory'")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            raw.execute("DELETE FROM journal")
        raw.close()


def test_outbox_items_publish_once(open_store: Factory) -> None:
    """An outbox item is pending until marked published, and is marked only once."""
    store = open_store()
    with store.write() as tx:
        tx.enqueue_outbox({"eventId": "x"}, "run-1", "chain", "t")
        (item,) = tx.pending_outbox(10)
        assert item.event == {"eventId": "x"}
        assert tx.mark_published(item.seq, "t2") is True
        assert tx.mark_published(item.seq, "t3") is False
        assert tx.pending_outbox(10) == []


def test_a_failed_transaction_writes_nothing(open_store: Factory) -> None:
    """An exception inside a write transaction rolls every write of it back."""
    store = open_store()
    with pytest.raises(RuntimeError), store.write() as tx:
        tx.insert_event(event())
        raise RuntimeError("boom")
    with store.read() as tx:
        assert tx.list_events(10) == []


def test_migrations_apply_once(open_store: Factory) -> None:
    """Opening a store again on a migrated database changes nothing."""
    first = open_store()
    with first.write() as tx:
        tx.insert_event(event())
    second = open_store()
    with second.read() as tx:
        assert len(tx.list_events(10)) == 1
