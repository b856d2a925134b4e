"""The storage contract, written once and held by every store: each test runs on a
SQLite file, on a database of a real PostgreSQL server and on the in-memory store
(conftest's `store_database`); the few that send the database SQL of their own run on
the two databases only (`real_databases`)."""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
from collections.abc import Callable
from typing import TypeVar

import databases
import psycopg
import pytest
from databases import Factory, real_databases

from engine.core.records import (
    DecisionRecord,
    DeliveryRecord,
    EventRecord,
    JournalEntry,
    ObservationRecord,
    ProposalRecord,
    RunRecord,
    SkipRecord,
)
from engine.store.memory import MemoryStoreError
from engine.store.ports import Store

R = TypeVar("R")

# What each store raises when the database refuses a statement.
DB_ERRORS = (sqlite3.DatabaseError, psycopg.Error, MemoryStoreError)
# How long a step that must not wait may take before the test calls it stuck.
PROMPT_S = 5.0


@pytest.fixture
def database(store_database: str) -> str:
    """The database under test: the one `open_store` opens."""
    return store_database


def at(minute: int, second: int = 0) -> str:
    """An instant on the tests' day, as the store keeps times."""
    return f"2026-11-30T10:{minute:02d}:{second:02d}.000000Z"


def event(
    event_id: str = "e-1",
    loop: str | None = None,
    *,
    type: str = "factory.work.requested",
    admitted: str = "2026-11-30T10:00:00.000000Z",
    occurred: str | None = None,
    planned: bool = False,
) -> EventRecord:
    return EventRecord(
        event_id=event_id,
        type=type,
        source="inject",
        subject="bj29",
        occurred_at=occurred or admitted,
        correlation_id=event_id,
        payload={"repo": "bj29"},
        loop=loop,
        admitted_at=admitted,
        admitted_by="inject",
        planned=planned,
    )


def run(
    key: str = "event:e-1",
    run_id: str = "run-1",
    loop: str | None = None,
    *,
    event_id: str = "e-1",
    created: str = "2026-11-30T10:00:01.000000Z",
) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        idempotency_key=key,
        event_id=event_id,
        proposal_id=None,
        loop=loop,
        definition="dispatch@1",
        state="queued",
        approved_by="operator:alice",
        attempts=0,
        lease_owner=None,
        lease_expires_at=None,
        created_at=created,
    )


def proposal(
    proposal_id: str = "p-1",
    event_id: str = "e-1",
    loop: str | None = None,
    *,
    created: str = "2026-11-30T10:00:01.000000Z",
    state: str = "open",
) -> ProposalRecord:
    return ProposalRecord(proposal_id, event_id, loop, "dispatch@1", state, True, False, created)


def decision(event_id: str = "e-1") -> DecisionRecord:
    return DecisionRecord(
        event_id=event_id,
        kind="propose",
        reason=None,
        definition="dispatch@1",
        loop="nightly",
        approved_by=None,
        human_only=True,
        mutating=False,
        rule="rules/dispatch",
        note="needs a human",
        rules_digest="sha256:abc",
        decided_at="2026-11-30T10:00:01.000000Z",
    )


def on_postgres(database: str) -> bool:
    return database.startswith("postgresql://")


def test_admission_is_idempotent_by_event_id(open_store: Factory) -> None:
    """A second insert of one event id writes nothing and says so."""
    store = open_store()
    with store.write() as tx:
        assert tx.insert_event(event()) is True
        assert tx.insert_event(event()) is False
    with store.read() as tx:
        assert [e.event_id for e in tx.list_events(10)] == ["e-1"]
        assert tx.unplanned_events(10)[0].payload == {"repo": "bj29"}


def test_events_admitted_in_bulk_answer_the_new_ids(open_store: Factory) -> None:
    """`insert_events` writes each id once, whether stored before or repeated in the
    batch (the first of equal ids wins), and answers the ids it wrote."""
    store = open_store()
    with store.write() as tx:
        assert tx.insert_event(event("e-0")) is True
        assert tx.insert_events([]) == set()
    first, second = event("e-2", admitted=at(2)), event("e-2", "nightly", admitted=at(3))
    batch = [event("e-1", admitted=at(1)), event("e-0", "nightly"), first, second]
    with store.write() as tx:
        assert tx.insert_events(batch) == {"e-1", "e-2"}
        assert tx.insert_events([event("e-1"), event("e-3", admitted=at(4))]) == {"e-3"}
    with store.read() as tx:
        assert [e.event_id for e in tx.unplanned_events(10)] == ["e-0", "e-1", "e-2", "e-3"]
        assert tx.get_event("e-2") == first
        assert tx.get_event("e-0") == event("e-0")


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


@real_databases  # the database itself refuses an UPDATE sent to it (the memory store has no SQL)
def test_journal_is_append_only(open_store: Factory, database: str) -> None:
    """Journal records can be appended and read in order, never changed: the database
    itself refuses an UPDATE or a DELETE of the journal, whoever sends it."""
    store = open_store()
    with store.write() as tx:
        for n in range(3):
            tx.append_journal(JournalEntry("t", "run", "run-1", f"a{n}", "system"))
    with store.read() as tx:
        entries = tx.list_journal(10)
        assert [e.action for e in entries] == ["a0", "a1", "a2"]
        assert [e.action for e in tx.list_journal(10, after=entries[0].seq or 0)] == ["a1", "a2"]
    with pytest.raises(DB_ERRORS, match="append-only"):
        databases.rows(database, "UPDATE journal SET actor = 'operator:mallory'")
    with pytest.raises(DB_ERRORS, match="append-only"):
        databases.rows(database, "DELETE FROM journal")
    with store.read() as tx:
        assert [(e.action, e.actor) for e in tx.list_journal(10)] == [
            ("a0", "system"),
            ("a1", "system"),
            ("a2", "system"),
        ]


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


# ---- events ----------------------------------------------------------------------------


def test_events_read_back_newest_first_and_by_type(open_store: Factory) -> None:
    """An admitted event reads back whole; listings are newest first, filter by type and
    stop at the limit."""
    store = open_store()
    with store.write() as tx:
        tx.insert_event(event("e-2", type="factory.work.requested", admitted=at(2)))
        tx.insert_event(event("e-1", type="factory.work.requested", admitted=at(1)))
        tx.insert_event(event("e-3", type="factory.tick", admitted=at(3)))
    with store.read() as tx:
        assert tx.get_event("e-1") == event("e-1", admitted=at(1))
        assert tx.get_event("nope") is None
        assert [e.event_id for e in tx.list_events(10)] == ["e-3", "e-2", "e-1"]
        assert [e.event_id for e in tx.list_events(2)] == ["e-3", "e-2"]
        listed = tx.list_events(10, type="factory.work.requested")
        assert [e.event_id for e in listed] == ["e-2", "e-1"]
        assert tx.list_events(10, type="factory.other") == []


def test_unplanned_events_follow_admission_order_until_planned(open_store: Factory) -> None:
    """Planning sees admitted events oldest first, and an event marked planned never
    again (whatever order they were inserted in)."""
    store = open_store()
    with store.write() as tx:
        for n in (3, 1, 2):
            tx.insert_event(event(f"e-{n}", admitted=at(n)))
        tx.insert_event(event("e-0", admitted=at(0), planned=True))
    with store.write() as tx:
        assert [e.event_id for e in tx.unplanned_events(10)] == ["e-1", "e-2", "e-3"]
        assert [e.event_id for e in tx.unplanned_events(2)] == ["e-1", "e-2"]
        tx.mark_planned("e-1")
        tx.mark_planned("missing")  # nothing to mark: no error
    with store.read() as tx:
        assert [e.event_id for e in tx.unplanned_events(10)] == ["e-2", "e-3"]
        planned = tx.get_event("e-1")
        assert planned is not None and planned.planned is True
        unplanned = tx.get_event("e-2")
        assert unplanned is not None and unplanned.planned is False


def test_loop_events_since_oldest_first_and_the_last_tick(open_store: Factory) -> None:
    """A loop's ticks that occurred at or after `since` come oldest first (by occurrence)
    up to the limit; the last tick is the last one admitted."""
    store = open_store()
    with store.write() as tx:
        # Admitted in another order than they occurred (a late tick admitted last).
        tx.insert_event(event("t-2", "nightly", occurred=at(2), admitted=at(5)))
        tx.insert_event(event("t-3", "nightly", occurred=at(3), admitted=at(6)))
        tx.insert_event(event("t-1", "nightly", occurred=at(1), admitted=at(7)))
        tx.insert_event(event("o-1", "hourly", occurred=at(4), admitted=at(8)))
        tx.insert_event(event("e-1", occurred=at(4), admitted=at(9)))
    with store.read() as tx:
        assert [e.event_id for e in tx.loop_events("nightly", at(0), 10)] == ["t-1", "t-2", "t-3"]
        assert [e.event_id for e in tx.loop_events("nightly", at(2), 10)] == ["t-2", "t-3"]
        assert [e.event_id for e in tx.loop_events("nightly", at(0), 2)] == ["t-1", "t-2"]
        assert tx.loop_events("nightly", at(4), 10) == []
        assert tx.loop_events("weekly", at(0), 10) == []
        last = tx.last_loop_event("nightly")
        assert last is not None and last.event_id == "t-1"
        assert tx.last_loop_event("weekly") is None


# ---- decisions and occurrences -------------------------------------------------------


def test_one_decision_per_event_read_back_whole(open_store: Factory) -> None:
    """An event is decided once; the decision reads back with its flags as bools."""
    store = open_store()
    with store.write() as tx:
        tx.insert_event(event())
        assert tx.insert_decision(decision()) is True
        later = dataclasses.replace(decision(), kind="run", human_only=False)
        assert tx.insert_decision(later) is False
    with store.read() as tx:
        found = tx.get_decision("e-1")
        assert found == decision()
        assert found is not None and found.human_only is True and found.mutating is False
        assert tx.get_decision("e-2") is None


def test_occurrence_state_is_the_latest_set(open_store: Factory) -> None:
    """Setting an occurrence's state again replaces it; an unknown one has none."""
    store = open_store()
    with store.write() as tx:
        tx.insert_event(event("t-1", "nightly"))
        assert tx.get_occurrence_state("t-1") is None
        tx.set_occurrence("t-1", "nightly", "admitted", at(1))
        assert tx.get_occurrence_state("t-1") == "admitted"
        tx.set_occurrence("t-1", "nightly", "fired", at(2))
    with store.read() as tx:
        assert tx.get_occurrence_state("t-1") == "fired"
        assert tx.get_occurrence_state("t-2") is None


def test_a_loop_is_in_flight_while_a_run_is_queued_claimed_or_running(
    open_store: Factory,
) -> None:
    """A loop's run counts as in flight from queued until it finishes; another loop's runs
    never do. The loop's last run is its newest."""
    store = open_store()
    with store.write() as tx:
        tx.insert_event(event())
        assert tx.loop_in_flight("nightly") is False
        assert tx.last_loop_run("nightly") is None
        tx.insert_run(run("k-old", "run-0", "nightly", created=at(0)))
        tx.claim_next_run("w1", at(30))
        tx.finish_run("run-0", "w1", "succeeded", at(1), "OK", None, None, None)
        assert tx.loop_in_flight("nightly") is False
        tx.insert_run(run("k-1", "run-1", "nightly", created=at(2)))
        tx.insert_run(run("k-2", "run-2", "hourly", created=at(3)))
        assert tx.loop_in_flight("nightly") is True  # queued
        claimed = tx.claim_next_run("w1", at(30))
        assert claimed is not None and claimed.run_id == "run-1"
        assert tx.loop_in_flight("nightly") is True  # claimed
        assert tx.start_run("run-1", "w1", at(4))
        assert tx.loop_in_flight("nightly") is True  # running
        last = tx.last_loop_run("nightly")
        assert last is not None and last.run_id == "run-1"
        assert tx.finish_run("run-1", "w1", "failed", at(5), None, None, "boom", None)
        assert tx.loop_in_flight("nightly") is False
        assert tx.loop_in_flight("hourly") is True
        assert tx.loop_in_flight("weekly") is False


# ---- proposals -------------------------------------------------------------------------


def test_proposals_read_back_and_list_newest_first_by_state(open_store: Factory) -> None:
    """A proposal reads back whole (flags as bools); listings are newest first, filter by
    state and stop at the limit; a decision records who, when and why."""
    store = open_store()
    with store.write() as tx:
        for n in (1, 2, 3):
            tx.insert_event(event(f"e-{n}"))
            tx.insert_proposal(proposal(f"p-{n}", f"e-{n}", created=at(n)))
        assert tx.decide_proposal("p-2", "open", "rejected", at(9), "operator:bob", "no")
        assert tx.decide_proposal("p-9", "open", "approved", at(9), "operator:bob", "") is False
    with store.read() as tx:
        assert tx.get_proposal("p-1") == proposal("p-1", "e-1", created=at(1))
        found = tx.get_proposal("p-1")
        assert found is not None and found.human_only is True and found.mutating is False
        assert tx.get_proposal("p-9") is None
        decided = tx.get_proposal("p-2")
        assert decided is not None
        assert (decided.state, decided.decided_at, decided.decided_by, decided.note) == (
            "rejected",
            at(9),
            "operator:bob",
            "no",
        )
        assert [p.proposal_id for p in tx.list_proposals(10)] == ["p-3", "p-2", "p-1"]
        assert [p.proposal_id for p in tx.list_proposals(1)] == ["p-3"]
        assert [p.proposal_id for p in tx.list_proposals(10, "open")] == ["p-3", "p-1"]
        assert [p.proposal_id for p in tx.list_proposals(10, "rejected")] == ["p-2"]
        assert tx.list_proposals(10, "approved") == []


def test_stale_and_open_proposals_by_loop(open_store: Factory) -> None:
    """Stale proposals are the open ones created before `before`, oldest first; a loop's
    open proposals come oldest first and are counted per loop (loopless ones aside)."""
    store = open_store()
    with store.write() as tx:
        specs = [
            ("p-1", "nightly", at(3)),
            ("p-2", "nightly", at(1)),
            ("p-3", "hourly", at(2)),
            ("p-4", None, at(0)),
            ("p-5", "nightly", at(4)),
            ("p-6", "nightly", at(0, 30)),  # decided below: neither stale nor open
        ]
        for pid, loop, created in specs:
            tx.insert_event(event(f"e-{pid}"))
            tx.insert_proposal(proposal(pid, f"e-{pid}", loop, created=created))
        tx.decide_proposal("p-6", "open", "approved", at(5), "operator:alice", "")
    with store.read() as tx:
        stale = tx.stale_proposals(at(4), 10)  # created exactly at `before` is not stale
        assert [p.proposal_id for p in stale] == ["p-4", "p-2", "p-3", "p-1"]
        assert [p.proposal_id for p in tx.stale_proposals(at(4), 2)] == ["p-4", "p-2"]
        assert tx.stale_proposals(at(0), 10) == []
        assert [p.proposal_id for p in tx.open_loop_proposals("nightly")] == ["p-2", "p-1", "p-5"]
        assert tx.open_loop_proposals("weekly") == []
        assert tx.open_proposals_by_loop() == {"nightly": 3, "hourly": 1}


def test_counts_are_runs_and_proposals_by_state(open_store: Factory) -> None:
    """counts() tallies runs and proposals by their current state."""
    store = open_store()
    with store.read() as tx:
        assert tx.counts() == {"runs": {}, "proposals": {}}
    with store.write() as tx:
        for n in range(3):
            tx.insert_event(event(f"e-{n}"))
            tx.insert_proposal(proposal(f"p-{n}", f"e-{n}"))
            tx.insert_run(run(f"k-{n}", f"run-{n}", event_id=f"e-{n}", created=at(n)))
        tx.decide_proposal("p-0", "open", "approved", at(5), "operator:alice", "")
        tx.claim_next_run("w1", at(30))
        tx.finish_run("run-0", "w1", "succeeded", at(6), "OK", None, None, None)
        tx.claim_next_run("w1", at(30))
    with store.read() as tx:
        assert tx.counts() == {
            "runs": {"succeeded": 1, "claimed": 1, "queued": 1},
            "proposals": {"approved": 1, "open": 2},
        }


# ---- runs ------------------------------------------------------------------------------


def test_runs_read_back_by_id_key_and_state(open_store: Factory) -> None:
    """A run is found by id or idempotency key and starts queued with no lease; listings
    are newest first, filter by state and stop at the limit."""
    store = open_store()
    with store.write() as tx:
        tx.insert_event(event())
        for n in (1, 2, 3):
            tx.insert_run(run(f"k-{n}", f"run-{n}", "nightly", created=at(n)))
        tx.claim_next_run("w1", at(30))
    with store.read() as tx:
        assert tx.get_run("run-2") == run("k-2", "run-2", "nightly", created=at(2))
        assert tx.get_run_by_key("k-3") == run("k-3", "run-3", "nightly", created=at(3))
        assert tx.get_run("run-9") is None
        assert tx.get_run_by_key("k-9") is None
        assert [r.run_id for r in tx.list_runs(10)] == ["run-3", "run-2", "run-1"]
        assert [r.run_id for r in tx.list_runs(2)] == ["run-3", "run-2"]
        assert [r.run_id for r in tx.list_runs(10, "queued")] == ["run-3", "run-2"]
        assert [r.run_id for r in tx.list_runs(10, "claimed")] == ["run-1"]
        assert tx.list_runs(10, "running") == []


def test_claims_take_the_oldest_queued_run(open_store: Factory) -> None:
    """A claim takes the oldest queued run, leases it to the claimer and counts the
    attempt; an empty queue answers None."""
    store = open_store()
    with store.write() as tx:
        tx.insert_event(event())
        tx.insert_run(run("k-2", "run-2", created=at(2)))
        tx.insert_run(run("k-1", "run-1", created=at(1)))
        first = tx.claim_next_run("w1", at(30))
        second = tx.claim_next_run("w2", at(31))
        assert tx.claim_next_run("w3", at(32)) is None
    assert first is not None and second is not None
    assert (first.run_id, first.state, first.lease_owner, first.lease_expires_at) == (
        "run-1",
        "claimed",
        "w1",
        at(30),
    )
    assert (second.run_id, second.lease_owner, second.attempts) == ("run-2", "w2", 1)


def test_claims_pass_over_the_runs_of_a_paused_loop(open_store: Factory) -> None:
    """A paused loop's queued runs are not claimed (older or not) and stay queued; runs
    of other loops, and of no loop, are; once resumed, the held run is claimed."""
    store = open_store()
    with store.write() as tx:
        tx.insert_event(event())
        tx.set_loop_enabled("nightly", True, at(0), at(0))
        tx.set_paused("nightly", True, "breaker", "schedule", at(0))
        tx.insert_run(run("k-1", "run-held", "nightly", created=at(1)))
        tx.insert_run(run("k-2", "run-other", "hourly", created=at(2)))
        tx.insert_run(run("k-3", "run-free", created=at(3)))
        claimed = [tx.claim_next_run("w1", at(30)) for _ in range(3)]
        assert [c.run_id if c else None for c in claimed] == ["run-other", "run-free", None]
        held = tx.get_run("run-held")
        assert held is not None and held.state == "queued"
        tx.set_paused("nightly", False, "", None, at(4))
        resumed = tx.claim_next_run("w1", at(30))
    assert resumed is not None and resumed.run_id == "run-held"


def test_lease_steps_belong_to_the_holder(open_store: Factory) -> None:
    """Only the lease holder heartbeats (while claimed or running), starts (from claimed)
    and finishes a run; the result comes back as it was recorded."""
    store = open_store()
    result = {"outcome": "OK", "items": [1, 2.5, None, True], "nested": {"é": "ü"}}
    with store.write() as tx:
        tx.insert_event(event())
        tx.insert_run(run())
        assert tx.heartbeat("run-1", "w1", at(30)) is False  # queued: no lease to extend
        assert tx.start_run("run-1", "w1", at(1)) is False  # not claimed yet
        tx.claim_next_run("w1", at(10))
        assert tx.heartbeat("run-1", "w2", at(40)) is False
        assert tx.heartbeat("run-1", "w1", at(20)) is True
        assert tx.start_run("run-1", "w2", at(2)) is False
        assert tx.start_run("run-1", "w1", at(2)) is True
        assert tx.start_run("run-1", "w1", at(3)) is False  # already running
        assert tx.heartbeat("run-1", "w1", at(25)) is True
        running = tx.get_run("run-1")
        assert running is not None
        assert (running.state, running.started_at, running.lease_expires_at) == (
            "running",
            at(2),
            at(25),
        )
        assert tx.finish_run("run-1", "w1", "succeeded", at(4), "OK", result, None, "a.tgz")
        assert tx.finish_run("run-1", "w1", "failed", at(5), None, None, "late", None) is False
        assert tx.heartbeat("run-1", "w1", at(30)) is False  # finished: no lease
    with store.read() as tx:
        done = tx.get_run("run-1")
    assert done is not None
    assert (done.state, done.finished_at, done.outcome, done.error, done.artifact) == (
        "succeeded",
        at(4),
        "OK",
        None,
        "a.tgz",
    )
    assert done.result == result
    assert (done.lease_owner, done.lease_expires_at, done.attempts) == (None, None, 1)


def test_expired_leases_are_leased_runs_past_their_lease(open_store: Factory) -> None:
    """Only claimed or running runs whose lease ended before `now` have expired, soonest
    expired first, up to the limit."""
    store = open_store()
    with store.write() as tx:
        tx.insert_event(event())
        for n in range(5):
            tx.insert_run(run(f"k-{n}", f"run-{n}", created=at(n)))
        tx.claim_next_run("w0", at(30))  # run-0: finished below
        tx.claim_next_run("w1", at(12))  # run-1: claimed, expires second
        tx.claim_next_run("w2", at(11))  # run-2: running, expires first
        tx.claim_next_run("w3", at(20))  # run-3: lease ends exactly at `now`
        tx.start_run("run-2", "w2", at(5))
        tx.finish_run("run-0", "w0", "succeeded", at(6), "OK", None, None, None)
        # run-4 stays queued
        expired = tx.expired_leases(at(20), 10)
        assert [r.run_id for r in expired] == ["run-2", "run-1"]
        assert [(r.lease_owner, r.lease_expires_at) for r in expired] == [
            ("w2", at(11)),
            ("w1", at(12)),
        ]
        assert [r.run_id for r in tx.expired_leases(at(20), 1)] == ["run-2"]
        assert tx.expired_leases(at(11), 10) == []


def test_recovery_requeues_or_fails_a_run_whose_lease_it_saw(open_store: Factory) -> None:
    """A recovered run goes back to the queue (claimable again, the attempt counted) or
    fails for good; a holder that heartbeated since the reaper looked keeps its run."""
    store = open_store()
    with store.write() as tx:
        tx.insert_event(event())
        tx.insert_run(run("k-1", "run-1", created=at(1)))
        tx.insert_run(run("k-2", "run-2", created=at(2)))
        tx.insert_run(run("k-3", "run-3", created=at(3)))
        tx.claim_next_run("w1", at(10))
        tx.claim_next_run("w2", at(10))
        tx.claim_next_run("w3", at(10))
        tx.start_run("run-2", "w2", at(4))
        seen = {r.run_id: r for r in tx.expired_leases(at(11), 10)}
        assert sorted(seen) == ["run-1", "run-2", "run-3"]
        assert tx.heartbeat("run-3", "w3", at(40))  # w3 is alive after all
        assert tx.recover_run(seen["run-3"], "queued", at(11), "lease expired") is False
        assert tx.recover_run(seen["run-1"], "queued", at(11), "lease expired") is True
        assert tx.recover_run(seen["run-2"], "failed", at(11), "lease expired") is True
        requeued, failed, kept = (tx.get_run(f"run-{n}") for n in (1, 2, 3))
        assert requeued is not None and failed is not None and kept is not None
        assert (requeued.state, requeued.lease_owner, requeued.lease_expires_at) == (
            "queued",
            None,
            None,
        )
        assert (requeued.finished_at, requeued.error) == (None, "lease expired")
        assert (failed.state, failed.finished_at, failed.error) == (
            "failed",
            at(11),
            "lease expired",
        )
        assert (failed.lease_owner, failed.lease_expires_at) == (None, None)
        assert (kept.state, kept.lease_owner, kept.lease_expires_at) == ("claimed", "w3", at(40))
        again = tx.claim_next_run("w4", at(50))
        assert again is not None and (again.run_id, again.attempts) == ("run-1", 2)
        assert tx.claim_next_run("w5", at(50)) is None  # the failed run stays failed


# ---- journal and outbox ----------------------------------------------------------------


def test_journal_appended_in_bulk_reads_back_in_order(open_store: Factory) -> None:
    """`append_journals` appends whole entries in their order, after what was there,
    and a rolled-back transaction appends none of them."""
    store = open_store()
    entries = [
        JournalEntry(at(1), "event", f"e-{n}", "admitted", "github", None, "admitted", "h", "",
                     {"n": n, "loop": None})
        for n in range(3)
    ]  # fmt: skip
    with store.write() as tx:
        tx.append_journal(JournalEntry(at(0), "run", "run-1", "x", "system"))
        tx.append_journals([])
        tx.append_journals(entries)
    with pytest.raises(RuntimeError), store.write() as tx:
        tx.append_journals(entries)
        raise RuntimeError("boom")
    with store.read() as tx:
        found = tx.list_journal(10)
    assert [dataclasses.replace(e, seq=None) for e in found[1:]] == entries
    assert [e.seq for e in found] == sorted({e.seq for e in found})


def test_journal_reads_back_by_entity_and_position(open_store: Factory) -> None:
    """Each append answers a larger seq; entries read back whole (data as JSON values),
    filtered by entity, entity id and position, in append order, up to the limit."""
    store = open_store()
    full = JournalEntry(
        at=at(1),
        entity="run",
        entity_id="run-1",
        action="finish",
        actor="worker:w1",
        from_state="running",
        to_state="succeeded",
        rules_digest="sha256:abc",
        note="done",
        data={"result": {"n": [1, 2]}, "ok": True, "ü": None},
    )
    specs = [("run", "run-1"), ("proposal", "p-1"), ("run", "run-2"), ("run", "run-1")]
    with store.write() as tx:
        seqs = [tx.append_journal(full)]
        for entity, entity_id in specs:
            seqs.append(tx.append_journal(JournalEntry(at(2), entity, entity_id, "x", "system")))
    assert seqs == sorted(set(seqs))
    with store.read() as tx:
        first = tx.list_journal(1)
        assert first == [dataclasses.replace(full, seq=seqs[0])]
        assert [e.seq for e in tx.list_journal(10)] == seqs
        assert [e.seq for e in tx.list_journal(10, entity="run")] == [
            seqs[0],
            seqs[1],
            seqs[3],
            seqs[4],
        ]
        assert [e.seq for e in tx.list_journal(10, entity="run", entity_id="run-1")] == [
            seqs[0],
            seqs[1],
            seqs[4],
        ]
        assert [e.seq for e in tx.list_journal(10, entity_id="p-1")] == [seqs[2]]
        assert [e.seq for e in tx.list_journal(10, after=seqs[1], entity="run")] == [
            seqs[3],
            seqs[4],
        ]
        assert [e.seq for e in tx.list_journal(2, after=seqs[0])] == seqs[1:3]
        assert tx.list_journal(10, after=seqs[-1]) == []
        assert tx.list_journal(10, entity="loop") == []
        assert tx.list_journal(10, entity="run")[1].data is None


def test_outbox_is_pending_in_enqueue_order(open_store: Factory) -> None:
    """Pending outbox items come in the order they were enqueued, whole, up to the limit;
    a published one is no longer pending."""
    store = open_store()
    with store.write() as tx:
        for n in range(3):
            tx.enqueue_outbox({"eventId": f"x-{n}", "n": n}, f"run-{n}", "chain", at(n))
        tx.enqueue_outbox({"eventId": "x-3"}, None, "operator:alice", at(3))
        pending = tx.pending_outbox(10)
        assert [item.event["eventId"] for item in pending] == ["x-0", "x-1", "x-2", "x-3"]
        assert [item.seq for item in pending] == sorted({item.seq for item in pending})
        first = pending[0]
        assert (first.event, first.origin_run, first.actor, first.created_at) == (
            {"eventId": "x-0", "n": 0},
            "run-0",
            "chain",
            at(0),
        )
        assert pending[3].origin_run is None
        assert [item.seq for item in tx.pending_outbox(2)] == [pending[0].seq, pending[1].seq]
        assert tx.mark_published(pending[1].seq, at(5)) is True
        assert tx.mark_published(10_000, at(5)) is False
    with store.read() as tx:
        left = [item.event["eventId"] for item in tx.pending_outbox(10)]
    assert left == ["x-0", "x-2", "x-3"]


# ---- the scheduler -----------------------------------------------------------------------


def test_enabled_since_is_kept_while_a_loop_stays_on(open_store: Factory) -> None:
    """`enabled_since` is when the loop last turned on: kept while it stays on, set anew
    only when it turns on again after being off. Loop states list by loop name."""
    store = open_store()
    with store.write() as tx:
        assert tx.get_loop_state("nightly") is None
        tx.set_loop_enabled("nightly", True, at(1), at(1))
        state = tx.get_loop_state("nightly")
        assert state is not None
        assert (state.enabled, state.enabled_since, state.cursor, state.last_slot) == (
            True,
            at(1),
            None,
            None,
        )
        assert (state.paused, state.pause_note, state.paused_by) == (False, "", None)
        tx.set_loop_enabled("nightly", True, at(2), at(2))  # still on: since kept
        state = tx.get_loop_state("nightly")
        assert state is not None and (state.enabled_since, state.updated_at) == (at(1), at(2))
        tx.set_loop_enabled("nightly", False, at(3), at(3))  # off
        state = tx.get_loop_state("nightly")
        assert state is not None and state.enabled is False
        tx.set_loop_enabled("nightly", True, at(4), at(4))  # on again: since reset
        state = tx.get_loop_state("nightly")
        assert state is not None and (state.enabled, state.enabled_since) == (True, at(4))
        tx.set_loop_enabled("hourly", True, at(5), at(5))
        tx.set_loop_enabled("a-loop", False, at(5), at(5))
    with store.read() as tx:
        assert [s.loop for s in tx.list_loop_states()] == ["a-loop", "hourly", "nightly"]
        assert [s.enabled for s in tx.list_loop_states()] == [False, True, True]


def test_the_cursor_never_moves_backward(open_store: Factory) -> None:
    """The cursor and the last fired slot only move forward, whichever writer comes last;
    no last slot leaves it as it was; an unknown loop is left alone."""
    store = open_store()
    with store.write() as tx:
        tx.set_loop_enabled("nightly", True, at(0), at(0))
        tx.advance_cursor("nightly", at(10), at(10), at(20))
        tx.advance_cursor("nightly", at(5), at(5), at(21))  # a slower writer: ignored
        state = tx.get_loop_state("nightly")
        assert state is not None
        assert (state.cursor, state.last_slot, state.updated_at) == (at(10), at(10), at(21))
        tx.advance_cursor("nightly", at(15), None, at(22))  # skipped up to 15: no fire
        state = tx.get_loop_state("nightly")
        assert state is not None and (state.cursor, state.last_slot) == (at(15), at(10))
        tx.advance_cursor("nightly", at(12), at(12), at(23))  # cursor stays, slot moves on
        state = tx.get_loop_state("nightly")
        assert state is not None and (state.cursor, state.last_slot) == (at(15), at(12))
        tx.advance_cursor("ghost", at(10), at(10), at(20))
        assert tx.get_loop_state("ghost") is None


def test_pauses_and_skipped_ranges(open_store: Factory) -> None:
    """A pause records its note and who paused (only for a known loop); a skipped range
    is recorded once per loop, first slot and reason, and listed by first slot once its
    last slot is at or after `since`."""
    store = open_store()
    with store.write() as tx:
        assert tx.set_paused("nightly", True, "maintenance", "operator:alice", at(1)) is False
        tx.set_loop_enabled("nightly", True, at(0), at(0))
        assert tx.set_paused("nightly", True, "maintenance", "operator:alice", at(1)) is True
        state = tx.get_loop_state("nightly")
        assert state is not None
        assert (state.paused, state.pause_note, state.paused_by, state.updated_at) == (
            True,
            "maintenance",
            "operator:alice",
            at(1),
        )
        assert tx.set_paused("nightly", False, "", None, at(2)) is True
        state = tx.get_loop_state("nightly")
        assert state is not None and (state.paused, state.pause_note, state.paused_by) == (
            False,
            "",
            None,
        )
        late = SkipRecord("nightly", at(20), at(29), 10, "paused", at(30))
        early = SkipRecord("nightly", at(10), at(14), 5, "paused", at(15))
        assert tx.insert_skip(late) is True
        assert tx.insert_skip(early) is True
        assert tx.insert_skip(SkipRecord("nightly", at(10), at(19), 10, "paused", at(31))) is False
        overlap = SkipRecord("nightly", at(10), at(11), 2, "in_flight", at(31))
        assert tx.insert_skip(overlap) is True  # another reason is another range
        assert tx.insert_skip(SkipRecord("hourly", at(10), at(14), 5, "paused", at(15)))
    with store.read() as tx:
        listed = tx.list_skips("nightly", at(0))
        assert [s.first_slot for s in listed] == [at(10), at(10), at(20)]
        assert set(listed) == {early, overlap, late}
        assert tx.list_skips("nightly", at(14)) == [early, late]
        assert tx.list_skips("nightly", at(15)) == [late]
        assert tx.list_skips("nightly", at(30)) == []
        assert tx.list_skips("weekly", at(0)) == []


# ---- transactions ------------------------------------------------------------------------


def test_a_failed_savepoint_rolls_back_alone(open_store: Factory) -> None:
    """Writes inside a savepoint that raises (an error of ours or one the database
    raises) roll back alone; the transaction goes on and commits the rest."""
    store = open_store()
    with store.write() as tx:
        tx.insert_event(event("e-1"))
        with pytest.raises(RuntimeError), tx.savepoint():
            tx.insert_event(event("e-2"))
            tx.append_journal(JournalEntry(at(1), "event", "e-2", "admit", "system"))
            raise RuntimeError("boom")
        with pytest.raises(DB_ERRORS), tx.savepoint():
            tx.insert_event(event("e-3"))
            tx.insert_run(run(event_id="no-such-event"))  # refused: no such event
        with tx.savepoint():
            tx.insert_event(event("e-4"))
            with pytest.raises(RuntimeError), tx.savepoint():
                tx.insert_event(event("e-5"))
                raise RuntimeError("inner")
        tx.append_journal(JournalEntry(at(2), "event", "e-1", "admit", "system"))
    with store.read() as tx:
        assert sorted(e.event_id for e in tx.list_events(10)) == ["e-1", "e-4"]
        assert [e.entity_id for e in tx.list_journal(10)] == ["e-1"]
        assert tx.list_runs(10) == []


def test_a_read_is_one_snapshot(open_store: Factory) -> None:
    """What a read sees does not change under it while another connection commits; the
    next read sees the commit."""
    reader, writer = open_store(), open_store()
    with writer.write() as tx:
        tx.insert_event(event("e-1"))
    with reader.read() as tx:
        assert [e.event_id for e in tx.list_events(10)] == ["e-1"]
        with writer.write() as wtx:
            wtx.insert_event(event("e-2", admitted=at(1)))
        assert [e.event_id for e in tx.list_events(10)] == ["e-1"]
        assert tx.get_event("e-2") is None
    with reader.read() as tx:
        assert [e.event_id for e in tx.list_events(10)] == ["e-2", "e-1"]


def test_a_read_writes_nothing(open_store: Factory) -> None:
    """A read is read-only: a write attempted inside it is refused and nothing of it is
    kept, even when the caller goes on."""
    store = open_store()
    with pytest.raises(DB_ERRORS), store.read() as tx:
        tx.insert_event(event())
    with store.read() as tx:
        assert tx.list_events(10) == []


def promptly(step: Callable[[], R]) -> R:
    """Run `step` in a thread and answer its result; fail when it has not finished
    within PROMPT_S (it was waiting for a lock it should not wait for)."""
    results: list[R] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            results.append(step())
        except BaseException as err:  # re-raised by the test
            errors.append(err)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(PROMPT_S)
    assert not thread.is_alive(), f"the step did not finish within {PROMPT_S}s: it waited"
    if errors:
        raise errors[0]
    return results[0]


class Holder:
    """Holds one exclusive write transaction open in a thread until the block ends."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.held, self.release = threading.Event(), threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._hold)

    def _hold(self) -> None:
        try:
            with self.store.write() as tx:
                tx.insert_event(event("held", admitted=at(9)))
                self.held.set()
                self.release.wait(30)
        except BaseException as err:  # reported by the test
            self.errors.append(err)
            self.held.set()

    def __enter__(self) -> Holder:
        self.thread.start()
        assert self.held.wait(PROMPT_S), "the holder never opened its transaction"
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.thread.join(PROMPT_S)
        assert not self.thread.is_alive() and self.errors == []


def test_exclusive_writers_are_serialised(open_store: Factory) -> None:
    """A second exclusive writer waits until the first commits, and then sees what the
    first wrote (so a check it makes stays true until it commits)."""
    first, second = open_store(), open_store()
    seen: list[bool] = []
    entered = threading.Event()

    def write_second() -> None:
        with second.write() as tx:
            entered.set()
            seen.append(tx.get_event("held") is not None)

    with Holder(first) as holder:
        waiter = threading.Thread(target=write_second)
        waiter.start()
        try:
            assert not entered.wait(0.5), "a second exclusive writer did not wait"
        finally:
            holder.release.set()
            waiter.join(PROMPT_S)
    assert not waiter.is_alive() and entered.is_set()
    assert seen == [True]


def test_lease_steps_do_not_wait_for_an_exclusive_writer(open_pg_store: Factory) -> None:
    """PostgreSQL only (SQLite serialises every writer): a worker's claim, start,
    heartbeat and journal append (a non-exclusive write) go through while another
    process holds an exclusive write open."""
    open_store = open_pg_store
    setup, planner, worker = open_store(), open_store(), open_store()
    with setup.write() as tx:
        tx.insert_event(event())
        tx.insert_run(run())

    def lease_steps() -> tuple[bool, bool]:
        with worker.write(exclusive=False) as tx:
            claimed = tx.claim_next_run("w1", at(30))
            assert claimed is not None and claimed.run_id == "run-1"
            started = tx.start_run("run-1", "w1", at(1))
            beat = tx.heartbeat("run-1", "w1", at(40))
            tx.append_journal(JournalEntry(at(1), "run", "run-1", "start", "worker:w1"))
        return started, beat

    with Holder(planner):
        assert promptly(lease_steps) == (True, True)
    with setup.read() as tx:
        started = tx.get_run("run-1")
        assert started is not None
        assert (started.state, started.lease_owner, started.lease_expires_at) == (
            "running",
            "w1",
            at(40),
        )
        assert [e.action for e in tx.list_journal(10)] == ["start"]
        assert tx.get_event("held") is not None


def test_a_heartbeat_beside_the_reaper_keeps_the_run(open_pg_store: Factory) -> None:
    """PostgreSQL only (no heartbeat lands inside SQLite's single writer): a heartbeat
    committed while the reaper (an exclusive writer) holds the lease it saw as expired
    wins: the reaper's recovery finds the lease changed and moves nothing."""
    open_store = open_pg_store
    reaper, worker = open_store(), open_store()
    with reaper.write() as tx:
        tx.insert_event(event())
        tx.insert_run(run())
        tx.claim_next_run("w1", at(10))

    def beat() -> bool:
        with worker.write(exclusive=False) as wtx:
            return wtx.heartbeat("run-1", "w1", at(40))

    with reaper.write() as tx:
        (seen,) = tx.expired_leases(at(11), 10)
        assert promptly(beat) is True
        assert tx.recover_run(seen, "queued", at(11), "lease expired") is False
    with reaper.read() as tx:
        kept = tx.get_run("run-1")
    assert kept is not None
    assert (kept.state, kept.lease_owner, kept.lease_expires_at) == ("claimed", "w1", at(40))


# ---- the occurrence engine (schema version 4) -------------------------------------------
# Appended block with its own imports (E402): several people append to this file.

from typing import Any  # noqa: E402

from engine.core.paging import NotificationQuery  # noqa: E402
from engine.core.records import (  # noqa: E402
    FindingRecord,
    NotificationRecord,
    OccurrenceRecord,
    SinkDelivery,
)
from engine.store.queries import migrations  # noqa: E402


def occurrence(
    event_id: str = "e-1",
    loop: str | None = "repair",
    state: str = "triaging",
    *,
    key: str | None = None,
    repo: str | None = "bj29",
    created: str | None = None,
    **fields: Any,
) -> OccurrenceRecord:
    """An occurrence of `loop` for `repo`, keyed by its window `event:<event_id>` unless
    `key` says otherwise."""
    made = created or at(0)
    return OccurrenceRecord(
        event_id=event_id,
        loop=loop,
        state=state,
        updated_at=made,
        occurrence_key=key or f"{loop or '-'}|{repo or '-'}|event:{event_id}",
        repo=repo,
        window=f"event:{event_id}",
        created_at=made,
        **fields,
    )


def opened(tx: Any, *occs: OccurrenceRecord) -> None:
    """Admit each occurrence's event and open the occurrence."""
    for occ in occs:
        tx.insert_event(event(occ.event_id, occ.loop))
        assert tx.open_occurrence(occ)[1] is True


def finding(
    key: str = "flaky:bj29",
    finding_id: str = "f-1",
    *,
    loop: str | None = "repair",
    seen: str | None = None,
    last_occurrence: str | None = "e-1",
    evidence: dict[str, Any] | None = None,
) -> FindingRecord:
    return FindingRecord(
        finding_id=finding_id,
        semantic_key=key,
        loop=loop,
        repo="bj29",
        category="flaky",
        evidence=evidence if evidence is not None else {"line": 3},
        confidence=0.7,
        recommended_action="rerun the suite",
        status="candidate",
        occurrence_count=1,
        first_seen_at=seen or at(0),
        last_seen_at=seen or at(0),
        last_occurrence=last_occurrence,
    )


def notification(
    state: str = "failed", *, dedup_key: str = "loop_failed|repair|bj29", when: str | None = None
) -> NotificationRecord:
    return NotificationRecord(
        seq=0,
        at=when or at(0),
        kind="loop_failed",
        loop="repair",
        repo="bj29",
        state=state,
        links={"occurrence": "e-1", "runs": ["run-1"]},
        message=f"repair is {state}",
        dedup_key=dedup_key,
    )


def test_an_occurrence_opens_once_per_key(open_store: Factory) -> None:
    """An occurrence reads back whole (JSON columns as dicts); a second event with the
    same key opens nothing and is answered the existing occurrence."""
    store = open_store()
    first = occurrence(
        "e-1",
        key="repair|bj29|2026-11-30T10:00:00Z",
        decision="run_repair_task",
        evidence={"rule": "triage line 3", "snapshot": {"failures": 0, "repo": None}},
        reserved={"runs": 1, "wall_clock_seconds": 1800},
    )
    with store.write() as tx:
        tx.insert_event(event("e-1", "repair"))
        tx.insert_event(event("e-2", "repair"))
        assert tx.open_occurrence(first) == (first, True)
        again = dataclasses.replace(first, event_id="e-2", state="nothing_to_do")
        assert tx.open_occurrence(again) == (first, False)
        assert tx.open_occurrence(first) == (first, False)  # the same event again
        assert tx.get_occurrence("e-2") is None  # nothing written for the duplicate
    with store.read() as tx:
        assert tx.get_occurrence("e-1") == first
        assert tx.get_occurrence_by_key("repair|bj29|2026-11-30T10:00:00Z") == first
        assert tx.get_occurrence_by_key("repair|bj29|other") is None
        assert tx.get_occurrence("e-9") is None
        assert tx.get_occurrence_state("e-1") == "triaging"


def test_occurrences_without_a_key_and_defaults(open_store: Factory) -> None:
    """Occurrences without a key never collide; a missing created_at is the first
    update's instant; counters start at 0."""
    store = open_store()
    bare = OccurrenceRecord("e-1", None, "triaging", at(3))
    with store.write() as tx:
        tx.insert_event(event("e-1"))
        tx.insert_event(event("e-2"))
        stored, created = tx.open_occurrence(bare)
        assert created is True
        assert stored == dataclasses.replace(bare, created_at=at(3))
        assert (stored.attempt, stored.signals, stored.evidence, stored.used) == (0, 0, None, None)
        other, created = tx.open_occurrence(dataclasses.replace(bare, event_id="e-2"))
        assert created is True and other.event_id == "e-2"


def test_opening_fills_an_occurrence_set_before_keys(open_store: Factory) -> None:
    """An event's row written by set_occurrence (before keys) takes the new columns;
    a row that already has a key is left as it is."""
    store = open_store()
    keyed = occurrence("t-1", "nightly", "triaging", created=at(2), reserved={"runs": 1})
    with store.write() as tx:
        tx.insert_event(event("t-1", "nightly"))
        tx.set_occurrence("t-1", "nightly", "admitted", at(1))
        legacy = tx.get_occurrence("t-1")
        assert legacy == OccurrenceRecord("t-1", "nightly", "admitted", at(1))
        assert tx.open_occurrence(keyed) == (keyed, True)
        rekeyed = dataclasses.replace(keyed, occurrence_key="nightly|bj29|other", state="x")
        assert tx.open_occurrence(rekeyed) == (keyed, False)
    with store.read() as tx:
        assert tx.get_occurrence("t-1") == keyed


def test_update_occurrence_is_compare_and_set_over_a_whitelist(open_store: Factory) -> None:
    """An update moves only from the state the caller saw (any state when None), sets
    updated_at, serialises the JSON columns, and refuses any column outside its
    whitelist without writing anything."""
    store = open_store()
    with store.write() as tx:
        opened(tx, occurrence("e-1"))
        assert tx.update_occurrence("e-1", "verifying", at(1), state="completed") is False
        assert tx.update_occurrence(
            "e-1",
            "triaging",
            at(2),
            state="work_dispatched",
            decision="run_repair_task",
            evidence={"rule": "line 4", "values": [1, 2.5, "x", None, True]},
            reserved={"runs": 1, "wall_clock_seconds": 600},
        )
        assert tx.update_occurrence("e-1", "triaging", at(3), state="failed") is False
        for bad in ({"loop": "other"}, {"occurrence_key": "k"}, {"updated_at": at(9)}):
            with pytest.raises(ValueError, match=next(iter(bad))):
                tx.update_occurrence("e-1", None, at(9), state="hacked", **bad)
        assert tx.update_occurrence("e-9", None, at(3), state="failed") is False
    with store.read() as tx:
        found = tx.get_occurrence("e-1")
    assert found is not None
    assert (found.state, found.decision, found.updated_at) == (
        "work_dispatched",
        "run_repair_task",
        at(2),
    )
    assert found.evidence == {"rule": "line 4", "values": [1, 2.5, "x", None, True]}
    assert found.reserved == {"runs": 1, "wall_clock_seconds": 600}
    with store.write() as tx:
        assert tx.update_occurrence(
            "e-1",
            None,
            at(4),
            state="waiting_for_resource",
            attempt=1,
            retry_at=at(10),
            used={"runs": 1, "wall_clock_seconds": 42},
            finished_at=at(4),
            failure_class="infrastructure_failure",
            signals=3,
            evidence=None,
        )
        assert tx.update_occurrence("e-1", None, at(5))  # updated_at alone
        found = tx.get_occurrence("e-1")
    assert found is not None
    assert found == dataclasses.replace(
        occurrence("e-1"),
        state="waiting_for_resource",
        updated_at=at(5),
        decision="run_repair_task",
        evidence=None,
        attempt=1,
        retry_at=at(10),
        signals=3,
        reserved={"runs": 1, "wall_clock_seconds": 600},
        used={"runs": 1, "wall_clock_seconds": 42},
        finished_at=at(4),
        failure_class="infrastructure_failure",
    )


def test_signals_count_up(open_store: Factory) -> None:
    """Each coalesced trigger counts one more signal; an unknown occurrence has none."""
    store = open_store()
    with store.write() as tx:
        opened(tx, occurrence("e-1"))
        assert [tx.add_signal("e-1") for _ in range(3)] == [1, 2, 3]
        assert tx.add_signal("e-9") == 0
    with store.read() as tx:
        found = tx.get_occurrence("e-1")
        assert found is not None and found.signals == 3
        assert tx.get_occurrence("e-9") is None


def test_active_occurrences_by_loop_repo_and_state(open_store: Factory) -> None:
    """A loop's occurrences for one repository (None: those without one) in the given
    states, oldest first (by creation, then event id)."""
    store = open_store()
    with store.write() as tx:
        opened(
            tx,
            occurrence("e-3", created=at(3)),
            occurrence("e-1", state="waiting_for_resource", created=at(1)),
            occurrence("e-2b", state="verifying", created=at(2)),
            occurrence("e-2a", created=at(2)),
            occurrence("e-4", state="completed", created=at(0)),
            occurrence("e-5", repo="other", created=at(0)),
            occurrence("e-6", repo=None, created=at(4)),
            occurrence("e-7", repo=None, state="verifying", created=at(0)),
            occurrence("e-8", loop="nightly", created=at(0)),
        )
    active = ("triaging", "waiting_for_resource", "work_dispatched", "verifying")
    with store.read() as tx:
        found = tx.active_occurrences("repair", "bj29", active)
        assert [o.event_id for o in found] == ["e-1", "e-2a", "e-2b", "e-3"]
        assert [o.event_id for o in tx.active_occurrences("repair", "bj29", ("triaging",))] == [
            "e-2a",
            "e-3",
        ]
        assert [o.event_id for o in tx.active_occurrences("repair", None, active)] == [
            "e-7",
            "e-6",
        ]
        assert [o.event_id for o in tx.active_occurrences("repair", "other", active)] == ["e-5"]
        assert [o.event_id for o in tx.active_occurrences("nightly", "bj29", active)] == ["e-8"]
        assert tx.active_occurrences("repair", "bj29", ("completed",))[0].event_id == "e-4"
        assert tx.active_occurrences("repair", "bj29", ()) == []
        assert tx.active_occurrences("weekly", "bj29", active) == []


def test_due_retries_soonest_first(open_store: Factory) -> None:
    """Only occurrences waiting for a resource whose retry is due (at or before now)
    come back, the soonest retry first, up to the limit."""
    store = open_store()
    waiting = "waiting_for_resource"
    with store.write() as tx:
        opened(
            tx,
            occurrence("e-1", state=waiting, retry_at=at(5)),
            occurrence("e-2", state=waiting, retry_at=at(3)),
            occurrence("e-3", state=waiting, retry_at=at(9)),  # not yet due
            occurrence("e-4", state=waiting, retry_at=None),
            occurrence("e-5", state="failed", retry_at=at(1)),  # no longer waiting
            occurrence("e-6", state=waiting, retry_at=at(3), loop="nightly"),
        )
    with store.read() as tx:
        assert [o.event_id for o in tx.due_retries(at(5), 10)] == ["e-2", "e-6", "e-1"]
        assert [o.event_id for o in tx.due_retries(at(5), 1)] == ["e-2"]
        assert [o.event_id for o in tx.due_retries(at(4), 10)] == ["e-2", "e-6"]
        assert tx.due_retries(at(2), 10) == []
        assert [o.event_id for o in tx.due_retries(at(30), 10)] == ["e-2", "e-6", "e-1", "e-3"]


def test_the_occurrences_of_a_semantic_key(open_store: Factory) -> None:
    """By semantic key (docs/rules.md#semantic-keys-key): those in the given states, oldest
    first, up to the limit; and the latest finished one that settled a run (`used`),
    whatever its loop, never one of another key or one that ran nothing."""
    store = open_store()
    key = "repair:bj29"
    used = {"runs": 1, "wall_clock_seconds": 3}
    with store.write() as tx:
        opened(
            tx,
            occurrence("e-1", state="awaiting_approval", created=at(3), semantic_key=key),
            occurrence("e-2", state="work_dispatched", created=at(1), semantic_key=key),
            occurrence("e-3", state="waiting_for_resource", created=at(2), semantic_key=key),
            occurrence("e-4", state="work_dispatched", created=at(0), semantic_key="other"),
            occurrence("e-5", state="work_dispatched", created=at(0)),  # no key
            occurrence("e-6", state="failed", semantic_key=key, used=used, finished_at=at(10)),
            occurrence(
                "e-7",
                "renamed",
                "completed",
                semantic_key=key,
                used=used,
                finished_at=at(12),
            ),
            occurrence("e-8", state="nothing_to_do", semantic_key=key, finished_at=at(20)),
            occurrence("e-9", state="failed", semantic_key="other", used=used, finished_at=at(30)),
        )
    active = ("triaging", "awaiting_approval", "waiting_for_resource", "work_dispatched")
    with store.read() as tx:
        found = tx.key_occurrences(key, active, 10)
        assert [o.event_id for o in found] == ["e-2", "e-3", "e-1"]
        assert found[0].semantic_key == key
        assert [o.event_id for o in tx.key_occurrences(key, active, 1)] == ["e-2"]
        assert [o.event_id for o in tx.key_occurrences(key, ("failed",), 10)] == ["e-6"]
        assert tx.key_occurrences(key, (), 10) == []
        assert tx.key_occurrences("none", active, 10) == []
        last = tx.last_attempt(key)
        assert last is not None and (last.event_id, last.loop) == ("e-7", "renamed")
        assert tx.last_attempt("none") is None
    with store.write() as tx:  # a newer failed attempt takes its place
        opened(
            tx,
            occurrence("e-10", state="failed", semantic_key=key, used=used, finished_at=at(15)),
        )
        attempt = tx.last_attempt(key)
        assert attempt is not None and attempt.event_id == "e-10"


def test_occurrences_list_newest_first_and_by_loop_since(open_store: Factory) -> None:
    """Listings are newest first (last update, then event id), filter by loop and state
    and stop at the limit; a loop's occurrences created since an instant come oldest
    first."""
    store = open_store()
    with store.write() as tx:
        opened(
            tx,
            occurrence("e-1", created=at(1)),
            occurrence("e-2", created=at(2), state="completed"),
            occurrence("e-3", created=at(3)),
            occurrence("n-1", "nightly", created=at(4)),
        )
        tx.update_occurrence("e-1", None, at(9), state="completed")
    with store.read() as tx:
        assert [o.event_id for o in tx.list_occurrences(10)] == ["e-1", "n-1", "e-3", "e-2"]
        assert [o.event_id for o in tx.list_occurrences(2)] == ["e-1", "n-1"]
        assert [o.event_id for o in tx.list_occurrences(10, loop="repair")] == [
            "e-1",
            "e-3",
            "e-2",
        ]
        assert [o.event_id for o in tx.list_occurrences(10, state="completed")] == ["e-1", "e-2"]
        listed = tx.list_occurrences(10, loop="repair", state="triaging")
        assert [o.event_id for o in listed] == ["e-3"]
        assert tx.list_occurrences(10, loop="weekly") == []
        assert [o.event_id for o in tx.occurrences_of_loop("repair", at(0), 10)] == [
            "e-1",
            "e-2",
            "e-3",
        ]
        assert [o.event_id for o in tx.occurrences_of_loop("repair", at(2), 10)] == ["e-2", "e-3"]
        assert [o.event_id for o in tx.occurrences_of_loop("repair", at(0), 1)] == ["e-1"]
        assert tx.occurrences_of_loop("repair", at(4), 10) == []


def test_budget_usage_sums_used_once_finished_else_reserved(open_store: Factory) -> None:
    """A loop's budget spent since an instant for one repository: what finished
    occurrences used, what unfinished ones reserved; other repos, loops and older
    occurrences do not count."""
    store = open_store()
    with store.write() as tx:
        opened(
            tx,
            occurrence(  # finished: its use counts, not its reservation
                "e-1",
                created=at(1),
                reserved={"runs": 1, "wall_clock_seconds": 1800},
                used={"runs": 1, "wall_clock_seconds": 40},
                finished_at=at(2),
            ),
            occurrence(
                "e-2", created=at(2), reserved={"runs": 1, "wall_clock_seconds": 1800}
            ),  # in flight: its reservation counts
            occurrence("e-3", created=at(3)),  # nothing reserved (decided nothing_to_do)
            occurrence("e-4", created=at(3), finished_at=at(4), reserved={"runs": 1}),
            occurrence("e-5", created=at(0), reserved={"runs": 5}),  # before `since`
            occurrence("e-6", created=at(2), repo="other", reserved={"runs": 7}),
            occurrence("e-7", created=at(2), repo=None, reserved={"runs": 2}),
            occurrence("e-8", "nightly", created=at(2), reserved={"runs": 9}),
        )
    with store.read() as tx:
        assert tx.budget_usage("repair", "bj29", at(1)) == {
            "runs": 2,
            "wall_clock_seconds": 1840,
        }
        assert tx.budget_usage("repair", "bj29", at(0)) == {
            "runs": 7,
            "wall_clock_seconds": 1840,
        }
    with store.write() as tx:
        # e-2's run failed: it waits for a retry, its run used and nothing reserved.
        waiting = {"runs": 1, "wall_clock_seconds": 60}
        tx.update_occurrence("e-2", None, at(6), state="waiting_for_resource", used=waiting)
        tx.update_occurrence("e-2", None, at(6), reserved=None)
        assert tx.budget_usage("repair", "bj29", at(1)) == {"runs": 2, "wall_clock_seconds": 100}
        # Dispatched again: the earlier use and the new reservation both count.
        tx.update_occurrence("e-2", None, at(7), reserved={"runs": 1, "wall_clock_seconds": 900})
        assert tx.budget_usage("repair", "bj29", at(1)) == {"runs": 3, "wall_clock_seconds": 1000}
        # Finished: only what it used counts (a reservation left behind does not).
        tx.update_occurrence("e-2", None, at(8), used={"runs": 2, "wall_clock_seconds": 70})
        tx.update_occurrence("e-2", None, at(8), finished_at=at(8))
        assert tx.budget_usage("repair", "bj29", at(1)) == {"runs": 3, "wall_clock_seconds": 110}
    with store.read() as tx:
        assert tx.budget_usage("repair", "other", at(0)) == {"runs": 7, "wall_clock_seconds": 0}
        assert tx.budget_usage("repair", None, at(0)) == {"runs": 2, "wall_clock_seconds": 0}
        assert tx.budget_usage("weekly", "bj29", at(0)) == {"runs": 0, "wall_clock_seconds": 0}
        assert tx.budget_usage("repair", "bj29", at(5)) == {"runs": 0, "wall_clock_seconds": 0}


def test_budget_usage_adds_up_the_milliseconds_of_short_runs(open_store: Factory) -> None:
    """Wall clock kept to the millisecond (`wall_clock_ms`) is summed exactly, so
    sub-second runs add up to whole seconds; a record with whole seconds only (written
    before milliseconds were kept) counts its seconds."""
    store = open_store()
    with store.write() as tx:
        short = [
            occurrence(
                f"e-{n}",
                created=at(1),
                used={"runs": 1, "wall_clock_seconds": 0, "wall_clock_ms": 400},
                finished_at=at(2),
            )
            for n in range(5)
        ]
        older = occurrence(
            "e-old", created=at(1), used={"runs": 1, "wall_clock_seconds": 3}, finished_at=at(2)
        )
        both = occurrence(
            "e-both",
            created=at(1),
            used={"runs": 2, "wall_clock_seconds": 1, "wall_clock_ms": 1900},
            finished_at=at(2),
        )
        opened(tx, *short, older, both)
    with store.read() as tx:  # 5 x 0.4 s + 3 s + 1.9 s = 6.9 s: 6 whole seconds
        assert tx.budget_usage("repair", "bj29", at(0)) == {"runs": 8, "wall_clock_seconds": 6}


def test_loop_counters_are_kept_on_the_loop_state(open_store: Factory) -> None:
    """A loop state starts with no streaks and no quiet period; set_loop_counters records
    them for a known loop only, and both readers return them."""
    store = open_store()
    with store.write() as tx:
        tx.set_loop_enabled("repair", True, at(0), at(0))
        state = tx.get_loop_state("repair")
        assert state is not None
        assert (state.consecutive_failures, state.nothing_streak, state.quiet_until) == (
            0,
            0,
            None,
        )
        tx.set_loop_counters("repair", 2, 5, at(30), at(1))
        tx.set_loop_counters("ghost", 1, 1, None, at(1))
    with store.read() as tx:
        state = tx.get_loop_state("repair")
        assert state is not None
        assert (
            state.consecutive_failures,
            state.nothing_streak,
            state.quiet_until,
            state.updated_at,
        ) == (2, 5, at(30), at(1))
        assert state.enabled is True and state.paused is False
        assert tx.get_loop_state("ghost") is None
        assert tx.list_loop_states() == [state]
    with store.write() as tx:
        tx.set_loop_counters("repair", 0, 0, None, at(2))
        state = tx.get_loop_state("repair")
        assert state is not None
        assert (state.consecutive_failures, state.nothing_streak, state.quiet_until) == (
            0,
            0,
            None,
        )


def test_a_finding_is_counted_once_per_semantic_key(open_store: Factory) -> None:
    """A new semantic key is stored as given; seeing it again counts it and takes the
    latest sighting and evidence, and keeps its id, status and first sighting."""
    store = open_store()
    first = finding()
    with store.write() as tx:
        assert tx.upsert_finding(first) == (first, True)
        seen = finding(
            finding_id="f-other",
            seen=at(5),
            last_occurrence="e-2",
            evidence={"line": 9, "log": "timeout"},
        )
        stored, created = tx.upsert_finding(dataclasses.replace(seen, status="dismissed"))
        assert created is False
        assert stored == dataclasses.replace(
            first,
            occurrence_count=2,
            last_seen_at=at(5),
            last_occurrence="e-2",
            evidence={"line": 9, "log": "timeout"},
        )
        stored, created = tx.upsert_finding(finding(finding_id="f-x", seen=at(6)))
        assert (created, stored.occurrence_count, stored.finding_id) == (False, 3, "f-1")
        assert tx.get_finding("f-other") is None
    with store.read() as tx:
        found = tx.get_finding("f-1")
        assert found is not None and found.occurrence_count == 3
        assert found.confidence == 0.7 and found.first_seen_at == at(0)
        assert tx.get_finding_by_key("flaky:bj29") == found
        assert tx.get_finding_by_key("flaky:other") is None


def test_findings_list_and_decide(open_store: Factory) -> None:
    """Findings list most recently seen first, by status and loop; a decision is a
    compare-and-set on the status that records who, when and the promoted event."""
    store = open_store()
    with store.write() as tx:
        tx.upsert_finding(finding("k-1", "f-1", seen=at(1)))
        tx.upsert_finding(finding("k-2", "f-2", seen=at(3), loop="nightly"))
        tx.upsert_finding(finding("k-3", "f-3", seen=at(2)))
        blank = dataclasses.replace(
            finding("k-4", "f-4", seen=at(0), loop=None, last_occurrence=None),
            evidence=None,
            confidence=None,
            recommended_action=None,
        )
        assert tx.upsert_finding(blank) == (blank, True)
        assert tx.decide_finding("f-1", "candidate", "promoted", "operator:alice", at(7), "e-p")
        assert not tx.decide_finding("f-1", "candidate", "dismissed", "operator:bob", at(8))
        assert tx.decide_finding("f-3", "candidate", "dismissed", "operator:bob", at(8))
        assert not tx.decide_finding("f-9", "candidate", "dismissed", "operator:bob", at(8))
        # A later decision without an event keeps the promoted one.
        assert tx.decide_finding("f-1", "promoted", "dismissed", "operator:bob", at(9))
    with store.read() as tx:
        assert [f.finding_id for f in tx.list_findings(10)] == ["f-2", "f-3", "f-1", "f-4"]
        assert [f.finding_id for f in tx.list_findings(2)] == ["f-2", "f-3"]
        assert [f.finding_id for f in tx.list_findings(10, status="candidate")] == ["f-2", "f-4"]
        assert [f.finding_id for f in tx.list_findings(10, loop="repair")] == ["f-3", "f-1"]
        listed = tx.list_findings(10, status="dismissed", loop="repair")
        assert [f.finding_id for f in listed] == ["f-3", "f-1"]
        assert tx.list_findings(10, status="promoted") == []
        decided = tx.get_finding("f-1")
        assert decided is not None
        assert (decided.status, decided.decided_by, decided.decided_at) == (
            "dismissed",
            "operator:bob",
            at(9),
        )
        assert decided.promoted_event == "e-p"
        assert tx.get_finding("f-4") == blank


def test_notifications_are_quiet_while_the_state_holds(open_store: Factory) -> None:
    """A notification whose subject's newest one has the same state writes nothing; a
    change of state is a new one, and so is a change back."""
    store = open_store()
    with store.write() as tx:
        first = tx.enqueue_notification(notification("failed"))
        assert first is not None
        assert tx.enqueue_notification(notification("failed", when=at(1))) is None
        recovered = tx.enqueue_notification(notification("recovered", when=at(2)))
        assert recovered is not None and recovered > first
        assert tx.enqueue_notification(notification("recovered", when=at(3))) is None
        again = tx.enqueue_notification(notification("failed", when=at(4)))
        assert again is not None and again > recovered
        other = tx.enqueue_notification(notification("failed", dedup_key="other", when=at(5)))
        assert other is not None and other > again
    with store.read() as tx:
        listed = tx.list_notifications(10)
        assert [(n.seq, n.state) for n in listed] == [
            (other, "failed"),
            (again, "failed"),
            (recovered, "recovered"),
            (first, "failed"),
        ]
        assert listed[-1] == dataclasses.replace(notification("failed"), seq=first)
        assert listed[-1].links == {"occurrence": "e-1", "runs": ["run-1"]}
        assert [n.seq for n in tx.list_notifications(2)] == [other, again]


def test_notification_delivery_and_failure_bookkeeping(open_store: Factory) -> None:
    """Pending notifications are the ones due for an attempt, in enqueue order; a claim
    is a compare-and-set on the next attempt seen (one claimant wins); settling writes
    the state across the sinks once, and only over a pending notification."""
    store = open_store()
    with store.write() as tx:
        seqs = [
            tx.enqueue_notification(notification("failed", dedup_key=f"k-{n}", when=at(n)))
            for n in range(3)
        ]
    a, b, c = (s for s in seqs if s is not None)
    with store.write() as tx:
        assert [n.seq for n in tx.pending_notifications(at(0), 10)] == [a, b, c]
        assert [n.seq for n in tx.pending_notifications(at(0), 2)] == [a, b]
        assert tx.claim_notification(a, None, at(10)) is True
        assert tx.claim_notification(a, None, at(11)) is False  # claimed meanwhile
        assert [n.seq for n in tx.pending_notifications(at(9), 10)] == [b, c]
        assert tx.claim_notification(a, at(10), at(20)) is True
        failing = dataclasses.replace(
            tx.list_notifications(10)[-1], attempts=2, last_error="HTTP 503", next_attempt_at=at(30)
        )
        assert tx.settle_notification(failing) is True
        done = dataclasses.replace(
            notification("failed", dedup_key="k-1", when=at(1)),
            seq=b,
            delivery="delivered",
            delivered_at=at(1),
            attempts=1,
        )
        assert tx.settle_notification(done) is True
        assert tx.settle_notification(dataclasses.replace(done, attempts=5)) is False
        assert tx.claim_notification(b, None, at(40)) is False  # delivered: no claim
        assert tx.settle_notification(dataclasses.replace(done, seq=10_000)) is False
        assert tx.claim_notification(10_000, None, at(1)) is False
        assert [n.seq for n in tx.pending_notifications(at(29), 10)] == [c]
        assert [n.seq for n in tx.pending_notifications(at(30), 10)] == [a, c]
    with store.read() as tx:
        by_seq = {n.seq: n for n in tx.list_notifications(10)}
    assert (by_seq[a].delivery, by_seq[a].attempts, by_seq[a].last_error) == (
        "pending",
        2,
        "HTTP 503",
    )
    assert (by_seq[a].next_attempt_at, by_seq[a].delivered_at) == (at(30), None)
    assert (by_seq[b].delivery, by_seq[b].delivered_at, by_seq[b].attempts) == (
        "delivered",
        at(1),
        1,
    )
    assert (by_seq[c].delivery, by_seq[c].attempts, by_seq[c].next_attempt_at) == (
        "pending",
        0,
        None,
    )


def test_each_sinks_delivery_is_one_row_replaced_in_place(open_store: Factory) -> None:
    """A notification's row per sink reads back by seq and sink name; writing the same
    (seq, sink) again replaces it; a row of no notification is refused."""
    store = open_store()
    with store.write() as tx:
        first = tx.enqueue_notification(notification("failed"))
        second = tx.enqueue_notification(notification("failed", dedup_key="k-2"))
    assert first is not None and second is not None
    failed = SinkDelivery(first, "chat", "pending", 1, "refused", at(1), at(2))
    with store.write() as tx:
        tx.record_sink_deliveries([failed, SinkDelivery(first, "archive", "delivered", 1)])
        tx.record_sink_deliveries([dataclasses.replace(failed, state="failed", attempts=2)])
    with store.read() as tx:
        found = tx.sink_deliveries([first, second, 999])
    assert list(found) == [first]
    assert [(d.sink, d.state, d.attempts, d.last_error) for d in found[first]] == [
        ("archive", "delivered", 1, None),
        ("chat", "failed", 2, "refused"),
    ]
    assert found[first][1].next_attempt_at == at(2)
    with pytest.raises(Exception), store.write() as tx:  # noqa: B017 (each backend's own)
        tx.record_sink_deliveries([SinkDelivery(999, "chat")])


def test_notifications_page_newest_first_by_loop_and_delivery(open_store: Factory) -> None:
    """A page of notifications is newest first, holds only the loop and delivery state
    asked for, and continues strictly below its cursor's seq."""
    store = open_store()
    with store.write() as tx:
        made = [
            tx.enqueue_notification(
                dataclasses.replace(
                    notification("failed", dedup_key=f"k-{n}", when=at(n)),
                    loop="repair" if n % 2 else "reaper",
                )
            )
            for n in range(5)
        ]
        seqs = [s for s in made if s is not None]
        delivered = dataclasses.replace(tx.list_notifications(10)[-2], delivery="delivered")
        assert tx.settle_notification(delivered)
    with store.read() as tx:
        page = tx.page_notifications(NotificationQuery(), 10)
        assert [n.seq for n in page] == seqs[::-1]
        repair = tx.page_notifications(NotificationQuery(loop="repair"), 10)
        assert [n.seq for n in repair] == [seqs[3], seqs[1]]
        assert [
            n.seq for n in tx.page_notifications(NotificationQuery(delivery="delivered"), 10)
        ] == [seqs[1]]
        below = tx.page_notifications(NotificationQuery(before=seqs[3]), 2)
        assert [n.seq for n in below] == [seqs[2], seqs[1]]


def test_metrics_snapshot_counts(open_store: Factory) -> None:
    """The metrics snapshot is grouped counts (plain ints) of occurrences, decisions,
    runs (with their attempts), findings (with their sightings), journal actions,
    proposals (with those an operator decided) and the events that have a run."""
    store = open_store()
    with store.read() as tx:
        assert tx.metrics_snapshot() == {
            "occurrences": [],
            "decisions": [],
            "runs": [],
            "findings": [],
            "journal": [],
            "proposals": [],
            "dispatched": [{"n": 0}],
        }
        assert tx.run_timings(10) == []
    with store.write() as tx:
        opened(
            tx,
            occurrence("e-1", state="completed", decision="run_repair_task"),
            occurrence("e-2", state="completed", decision="run_repair_task"),
            occurrence("e-3", state="nothing_to_do", decision="nothing_to_do"),
            occurrence("e-4", loop=None, state="triaging"),
        )
        tx.insert_decision(decision("e-1"))
        tx.insert_decision(dataclasses.replace(decision("e-2"), kind="noop", reason="dup"))
        tx.insert_decision(dataclasses.replace(decision("e-3"), kind="noop", reason="dup"))
        tx.insert_run(run("k-1", "run-1", "repair", event_id="e-1", created=at(1)))
        tx.insert_run(run("k-2", "run-2", "repair", event_id="e-2", created=at(2)))
        tx.claim_next_run("w1", at(30))
        tx.recover_run(tx.expired_leases(at(31), 1)[0], "queued", at(31), "lease expired")
        tx.claim_next_run("w1", at(40))
        tx.start_run("run-1", "w1", at(32))
        tx.finish_run("run-1", "w1", "succeeded", at(33), "OK", None, None, None)
        tx.claim_next_run("w2", at(50))  # run-2
        tx.upsert_finding(finding("k-1", "f-1"))
        tx.upsert_finding(finding("k-1", "f-1"))
        tx.upsert_finding(finding("k-2", "f-2"))
        tx.decide_finding("f-2", "candidate", "promoted", "operator:alice", at(5))
        for action in ("admit", "admit", "coalesced"):
            tx.append_journal(JournalEntry(at(1), "event", "e-1", action, "system"))
        for n in range(4):
            tx.insert_proposal(proposal(f"p-{n}", f"e-{n + 1}", "repair"))
        tx.decide_proposal("p-0", "open", "approved", at(6), "operator:alice", "")
        tx.decide_proposal("p-1", "open", "approved", at(6), "auto:trusted", "")
        tx.decide_proposal("p-2", "open", "rejected", at(6), "operator:bob", "")
    with store.read() as tx:
        snap = tx.metrics_snapshot()
        timings = tx.run_timings(10)
        assert tx.run_timings(1) == timings[:1]
    assert snap["occurrences"] == [
        {"loop": None, "state": "triaging", "decision": None, "n": 1},
        {"loop": "repair", "state": "completed", "decision": "run_repair_task", "n": 2},
        {"loop": "repair", "state": "nothing_to_do", "decision": "nothing_to_do", "n": 1},
    ]
    assert snap["decisions"] == [
        {"kind": "noop", "reason": "dup", "n": 2},
        {"kind": "propose", "reason": None, "n": 1},
    ]
    assert snap["runs"] == [
        {"loop": "repair", "state": "claimed", "outcome": None, "n": 1, "attempts": 1},
        {"loop": "repair", "state": "succeeded", "outcome": "OK", "n": 1, "attempts": 2},
    ]
    assert snap["findings"] == [
        {"status": "candidate", "n": 1, "occurrences": 2},
        {"status": "promoted", "n": 1, "occurrences": 1},
    ]
    assert snap["journal"] == [{"action": "admit", "n": 2}, {"action": "coalesced", "n": 1}]
    assert snap["dispatched"] == [{"n": 2}]  # events with a run: e-1 and e-2
    assert snap["proposals"] == [
        {"state": "approved", "n": 2, "by_operator": 1},
        {"state": "open", "n": 1, "by_operator": 0},
        {"state": "rejected", "n": 1, "by_operator": 1},
    ]
    for rows in snap.values():
        for row in rows:
            assert all(type(row[k]) is int for k in ("n", "attempts", "occurrences") if k in row)
    assert timings == [(at(2), None, None), (at(1), at(32), at(33))]


def _create_v3(database: str, *writes: tuple[str, tuple[Any, ...]]) -> None:
    """A database as schema version 3 left it (migrations 1 to 3 only), with `writes`
    (statements with `?` parameters) committed in it."""
    _create_at(database, 3, *writes)


def _create_at(database: str, version: int, *writes: tuple[str, tuple[Any, ...]]) -> None:
    """A database as schema `version` left it (migrations 1 to `version` only), with
    `writes` committed in it."""
    backend = "postgresql" if on_postgres(database) else "sqlite"
    old = [(v, sql) for v, sql in migrations(backend) if v <= version]
    ddl = "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
    if on_postgres(database):
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(ddl)
            for version, sql in old:
                conn.execute(sql.encode())
                conn.execute("INSERT INTO schema_migrations VALUES (%s, 'then')", (version,))
            for statement, params in writes:
                conn.execute(statement.replace("?", "%s").encode(), params)
        return
    lite = sqlite3.connect(database)
    try:
        lite.execute(ddl)
        for version, sql in old:
            lite.executescript(sql)
            lite.execute("INSERT INTO schema_migrations VALUES (?, 'then')", (version,))
        for statement, params in writes:
            lite.execute(statement, params)
        lite.commit()
    finally:
        lite.close()


@real_databases  # migrations are SQL run on a database (the memory store has no schema)
def test_migration_4_applies_to_a_version_3_database(open_store: Factory, database: str) -> None:
    """A database created at schema version 3, with data, is brought to version 4 when a
    store opens it: its rows keep their values and take the new columns' defaults, and
    the new tables work."""
    _create_v3(
        database,
        ("INSERT INTO events VALUES ('t-1', 'tick', 'schedule', 's', ?, 't-1', '{}', "
         "'nightly', ?, 'schedule', 1)", (at(1), at(1))),
        ("INSERT INTO occurrences VALUES ('t-1', 'nightly', 'fired', ?)", (at(2),)),
        ("INSERT INTO loop_state (loop, enabled, updated_at) VALUES ('nightly', 1, ?)", (at(0),)),
    )  # fmt: skip
    assert databases.rows(database, "SELECT version FROM schema_migrations ORDER BY 1") == [
        (1,),
        (2,),
        (3,),
    ]
    assert databases.rows(database, "SELECT event_id, state FROM occurrences") == [("t-1", "fired")]
    store = open_store()
    versions = databases.rows(database, "SELECT version FROM schema_migrations ORDER BY 1")
    assert [v for (v,) in versions] == [v for v, _ in migrations("sqlite")]
    assert (4,) in versions
    columns = (
        'occurrence_key, repo, "window", decision, evidence, attempt, retry_at, signals, '
        "reserved, used, created_at, finished_at, failure_class"
    )
    assert databases.rows(database, f"SELECT {columns} FROM occurrences") == [
        (None, None, None, None, None, 0, None, 0, None, None, None, None, None)
    ]
    assert databases.rows(
        database, "SELECT consecutive_failures, nothing_streak, quiet_until FROM loop_state"
    ) == [(0, 0, None)]
    with store.write() as tx:
        assert tx.get_occurrence("t-1") == OccurrenceRecord("t-1", "nightly", "fired", at(2))
        state = tx.get_loop_state("nightly")
        assert state is not None and (state.cursor, state.consecutive_failures) == (None, 0)
        keyed = occurrence("t-1", "nightly", created=at(3))
        assert tx.open_occurrence(keyed) == (keyed, True)
        assert tx.upsert_finding(finding())[1] is True
        assert tx.enqueue_notification(notification()) is not None
    reopened = open_store()  # a second open migrates nothing more
    with reopened.read() as tx:
        assert tx.get_occurrence("t-1") == keyed
        assert len(tx.list_findings(10)) == 1 and len(tx.list_notifications(10)) == 1


# ---- condition watches ------------------------------------------------------------------


def observation(**changes: object) -> ObservationRecord:
    base = ObservationRecord(
        loop="ci-watch",
        fingerprint="a" * 64,
        changes=0,
        observed_at=at(1),
        status="ok",
        diagnostic="",
        consecutive_failures=0,
        polls=1,
        next_poll_at=at(6),
        changed_at=None,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_a_watch_loop_has_one_observation_read_back_whole(open_store: Factory) -> None:
    """A loop's first observation is stored once, read back field for field, and listed
    by loop; a second first observation writes nothing."""
    store = open_store()
    first = observation()
    with store.write() as tx:
        assert tx.get_observation("ci-watch") is None
        assert tx.insert_observation(first) is True
        assert tx.insert_observation(observation(fingerprint="b" * 64)) is False
        assert tx.insert_observation(observation(loop="a-watch", fingerprint=None)) is True
    with store.read() as tx:
        assert tx.get_observation("ci-watch") == first
        assert [o.loop for o in tx.list_observations()] == ["a-watch", "ci-watch"]
        assert tx.get_observation("a-watch") == observation(loop="a-watch", fingerprint=None)


def test_an_observation_changes_by_compare_and_set(open_store: Factory) -> None:
    """Two processes that read the same observation and both saw a change: the first
    update moves the row, the second (on the stale fingerprint and poll count) writes
    nothing, so the change is taken once."""
    one, two = open_store(), open_store()
    seen = observation()
    with one.write() as tx:
        tx.insert_observation(seen)
    changed = observation(fingerprint="b" * 64, changes=1, polls=2, changed_at=at(6))
    with one.write() as tx:
        assert tx.update_observation(changed, seen) is True
    with two.write() as tx:
        assert tx.update_observation(dataclasses.replace(changed, changes=2), seen) is False
        assert tx.get_observation("ci-watch") == changed


def test_an_observation_without_a_baseline_is_updated_from_null(open_store: Factory) -> None:
    """A loop whose polls only failed so far has no fingerprint: its row is updated on
    a compare-and-set against the missing fingerprint, and not on a made-up one."""
    store = open_store()
    failed = observation(fingerprint=None, status="failed", diagnostic="exit 1",
                         consecutive_failures=1)  # fmt: skip
    with store.write() as tx:
        tx.insert_observation(failed)
        baseline = observation(polls=2)
        assert tx.update_observation(baseline, observation(polls=1)) is False
        assert tx.update_observation(baseline, failed) is True
        assert tx.get_observation("ci-watch") == baseline


@real_databases  # migrations are SQL run on a database (the memory store has no schema)
def test_migration_5_applies_to_a_version_4_database(open_store: Factory, database: str) -> None:
    """A database at schema version 4, with a loop's state, is brought to version 5: the
    loop keeps its state and the new observations table works."""
    _create_at(
        database,
        4,
        ("INSERT INTO loop_state (loop, enabled, updated_at) VALUES ('ci-watch', 1, ?)", (at(0),)),
    )
    assert (5,) not in databases.rows(database, "SELECT version FROM schema_migrations")
    store = open_store()
    assert (5,) in databases.rows(database, "SELECT version FROM schema_migrations")
    with store.write() as tx:
        state = tx.get_loop_state("ci-watch")
        assert state is not None and state.enabled
        assert tx.get_observation("ci-watch") is None
        assert tx.insert_observation(observation()) is True
    with store.read() as tx:
        assert tx.list_observations() == [observation()]


# ---- values as the database keeps them; statements it refuses ---------------------------
# Appended block with its own imports (E402): several people append to this file.

from engine.core.decisions import Actor  # noqa: E402
from engine.core.states import RunState  # noqa: E402


def test_values_read_back_as_the_database_keeps_them(open_store: Factory) -> None:
    """What reads back is what the database keeps, not the object written: JSON columns
    as JSON (a tuple comes back a list), string enums as their plain values, a whole
    number of confidence as a float."""
    store = open_store()
    with store.write() as tx:
        tx.insert_event(dataclasses.replace(event(), payload={"b": (1, 2), "a": {"x": None}}))
        tx.insert_run(run())
        claimed = tx.claim_next_run("w1", at(30))
        assert claimed is not None
        tx.finish_run("run-1", "w1", RunState.SUCCEEDED, at(2), "OK", {"n": (3,)}, None, None)
        tx.append_journal(JournalEntry(at(1), "run", "run-1", "finish", Actor.SCHEDULE))
        tx.upsert_finding(dataclasses.replace(finding(), confidence=1))
    with store.read() as tx:
        stored = tx.get_event("e-1")
        done = tx.get_run("run-1")
        (entry,) = tx.list_journal(10)
        found = tx.get_finding("f-1")
    assert stored is not None and stored.payload == {"a": {"x": None}, "b": [1, 2]}
    assert done is not None and done.result == {"n": [3]}
    assert type(done.state) is str and done.state == "succeeded"
    assert type(entry.actor) is str and entry.actor == "schedule"
    assert found is not None and type(found.confidence) is float and found.confidence == 1.0


def test_statements_the_database_refuses_write_nothing(open_store: Factory) -> None:
    """A proposal id taken by another event's proposal, a run of an unknown event, a
    journal entry without an actor and an event without a payload are refused, and
    nothing of them is kept."""
    store = open_store()
    refused = [
        lambda tx: tx.insert_proposal(proposal("p-1", "e-2")),  # p-1 is e-1's
        lambda tx: tx.insert_run(run(event_id="no-such-event")),
        lambda tx: tx.append_journal(JournalEntry(at(1), "run", "run-1", "start", None)),
        lambda tx: tx.insert_event(dataclasses.replace(event("e-3"), payload=None)),
    ]
    with store.write() as tx:
        tx.insert_event(event("e-1"))
        tx.insert_event(event("e-2"))
        tx.insert_proposal(proposal("p-1", "e-1"))
        for statement in refused:
            with pytest.raises(DB_ERRORS), tx.savepoint():
                statement(tx)
    with store.read() as tx:
        assert [p.event_id for p in tx.list_proposals(10)] == ["e-1"]
        assert tx.list_runs(10) == [] and tx.list_journal(10) == []
        assert tx.get_event("e-3") is None


# ---- batches: many rows in one statement ----------------------------------------------


def test_a_batch_writes_each_row_as_its_one_row_operation(open_store: Factory) -> None:
    """The batched writer's many-row writes leave what the one-row operations leave:
    events, decisions, occurrences, proposals, skipped slots, cursors and the journal
    (in order, each entry its own seq), read back through the one-row views."""
    store = open_store()
    events = [event(f"e-{i}", "nightly", planned=True) for i in range(3)]
    occs = [occurrence(f"e-{i}", "nightly", "awaiting_approval") for i in range(3)]
    entries = [
        JournalEntry(at(1), "event", f"e-{i}", "admitted", "schedule", None, "admitted")
        for i in range(3)
    ]
    with store.write() as tx:
        tx.set_loop_enabled("nightly", True, at(0), at(0))
        tx.insert_events(events)
        tx.mark_planned_many(["e-0"])
        tx.insert_decisions([decision(f"e-{i}") for i in range(3)])
        tx.open_occurrences(occs)
        tx.insert_proposals([proposal(f"p-{i}", f"e-{i}", "nightly") for i in range(3)])
        tx.insert_skips([SkipRecord("nightly", at(0), at(1), 2, "too_late", at(2))])
        tx.advance_cursors([("nightly", at(3), at(3))], at(3))
        tx.append_journals(entries)
        tx.insert_events([])  # nothing to write is no statement
    with store.read() as tx:
        assert [tx.get_event(e.event_id) for e in events] == events
        assert [tx.get_decision(f"e-{i}") for i in range(3)] == [
            decision(f"e-{i}") for i in range(3)
        ]
        assert [tx.get_occurrence(o.event_id) for o in occs] == occs
        assert [p.proposal_id for p in tx.open_loop_proposals("nightly")] == ["p-0", "p-1", "p-2"]
        assert [(s.count, s.reason) for s in tx.list_skips("nightly", at(0))] == [(2, "too_late")]
        state = tx.get_loop_state("nightly")
        assert state is not None and (state.cursor, state.last_slot) == (at(3), at(3))
        journal = tx.list_journal(10)
        assert [e.entity_id for e in journal] == ["e-0", "e-1", "e-2"]
        assert [e.seq for e in journal] == sorted({e.seq for e in journal})


def test_batch_reads_answer_what_the_one_row_reads_answer(open_store: Factory) -> None:
    """Each many-key read gives, for every key, what its one-row read gives, and leaves
    out keys with nothing stored: known and decided events, occurrences by key and by
    id, loop states, loops with a run in flight, open proposals, active occurrences."""
    store = open_store()
    with store.write() as tx:
        opened(
            tx,
            occurrence("e-1", "nightly", "triaging"),
            occurrence("e-2", "nightly", "completed"),
            occurrence("e-3", "hourly", "triaging", repo=None),
        )
        tx.insert_decision(decision("e-1"))
        tx.insert_proposal(proposal("p-1", "e-1", "nightly"))
        tx.insert_proposal(proposal("p-2", "e-2", "nightly", state="approved"))
        tx.insert_run(run("event:e-3", "run-3", "hourly", event_id="e-3"))
        tx.set_loop_enabled("nightly", True, at(0), at(0))
    wanted = ["e-1", "e-2", "e-3", "e-9"]
    with store.read() as tx:
        assert tx.known_events(wanted) == {"e-1", "e-2", "e-3"}
        assert tx.decided_events(wanted) == {"e-1"}
        assert tx.events_by_ids(wanted) == {i: tx.get_event(i) for i in wanted[:3]}
        keys = ["nightly|bj29|event:e-1", "hourly|-|event:e-3", "nope"]
        assert tx.occurrences_by_keys(keys) == {k: tx.get_occurrence_by_key(k) for k in keys[:2]}
        assert tx.occurrences_by_ids(wanted) == {i: tx.get_occurrence(i) for i in wanted[:3]}
        assert tx.loop_states_of(["nightly", "hourly"]) == {"nightly": tx.get_loop_state("nightly")}
        assert tx.loops_in_flight(["nightly", "hourly"]) == {"hourly"}
        assert tx.open_proposals_of(["nightly", "hourly"]) == tx.open_loop_proposals("nightly")
        active = tx.occurrences_of_loops(["nightly", "hourly"], ("triaging",))
        assert active == [
            *tx.active_occurrences("nightly", "bj29", ("triaging",)),
            *tx.active_occurrences("hourly", None, ("triaging",)),
        ]
        assert tx.known_events([]) == set() and tx.occurrences_of_loops([], ("triaging",)) == []


def test_the_run_that_chained_an_event_is_found_by_its_journal(open_store: Factory) -> None:
    """`chained_by` names the run whose `chained` journal entry names the event (the
    first, if several did), and nothing for an event no run chained."""
    store = open_store()
    with store.write() as tx:
        for run_id, event_id in (("run-1", "e-2"), ("run-2", "e-3"), ("run-3", "e-2")):
            tx.append_journal(
                JournalEntry(at(1), "run", run_id, "chained", "chain", data={"eventId": event_id})
            )
        tx.append_journal(
            JournalEntry(at(1), "run", "run-4", "queued", "system", data={"eventId": "e-9"})
        )
    with store.read() as tx:
        assert (tx.chained_by("e-2"), tx.chained_by("e-3")) == ("run-1", "run-2")
        assert tx.chained_by("e-9") is None and tx.chained_by("nope") is None


# ---- the facts kept with a decision (engine replay) -------------------------------------


def test_a_decision_keeps_the_facts_it_was_decided_on(open_store: Factory) -> None:
    """The facts text stored with a decision reads back unchanged, singly and batched;
    a decision stored without facts reads back with None."""
    store = open_store()
    facts = '{"state":{"loop":"nightly","enabled":true},"in_flight":true}'
    with store.write() as tx:
        tx.insert_events([event("e-1"), event("e-2"), event("e-3")])
        assert tx.insert_decision(dataclasses.replace(decision("e-1"), facts=facts)) is True
        tx.insert_decisions([dataclasses.replace(decision("e-2"), facts="{}"), decision("e-3")])
    with store.read() as tx:
        assert [tx.get_decision(e) for e in ("e-1", "e-2", "e-3")] == [
            dataclasses.replace(decision("e-1"), facts=facts),
            dataclasses.replace(decision("e-2"), facts="{}"),
            decision("e-3"),
        ]


@real_databases  # migrations are SQL run on a database (the memory store has no schema)
def test_migration_6_leaves_older_decisions_without_facts(
    open_store: Factory, database: str
) -> None:
    """A database at schema version 5 with a decision is brought to version 6: the
    decision keeps its fields and has NULL facts (made before they were recorded), and
    a new decision keeps its facts."""
    _create_at(
        database,
        5,
        ("INSERT INTO events VALUES ('e-1', 'tick', 'schedule', 's', ?, 'e-1', '{}', "
         "'nightly', ?, 'schedule', 1)", (at(1), at(1))),
        ("INSERT INTO decisions VALUES ('e-1', 'propose', NULL, 'dispatch@1', 'nightly', NULL, "
         "1, 0, 'rules/dispatch', 'needs a human', 'sha256:abc', ?)",
         ("2026-11-30T10:00:01.000000Z",)),
    )  # fmt: skip
    store = open_store()
    assert (6,) in databases.rows(database, "SELECT version FROM schema_migrations")
    with store.write() as tx:
        old = tx.get_decision("e-1")
        assert old == decision("e-1") and old.facts is None
        tx.insert_event(event("e-2"))
        tx.insert_decision(dataclasses.replace(decision("e-2"), facts="{}"))
    with store.read() as tx:
        new = tx.get_decision("e-2")
        assert new is not None and new.facts == "{}"


# ---- GitHub deliveries kept beside their events (schema version 7, engine replay) --------


def delivery(
    event_id: str = "e-1", received: str = "2026-11-30T10:00:00.000000Z"
) -> DeliveryRecord:
    # As GitHub sent it: its own spacing and key order, non-ASCII text and escapes.
    body = (
        '{\n  "action": "opened", "number": 7,\n  "pull_request": {"title": "Fix \u00e9t\u00e9 '
        '\U0001f600 \\u00e9", "draft": false, "labels": []},\n  "repository": {"id": '
        '9007199254740993, "full_name": "octo/hello"}, "score": 0.25, "body": null\n}\n'
    )
    return DeliveryRecord(
        event_id, f"guid-{event_id}", "pull_request", body, "loops/github.rules:15:3", received
    )


def test_a_delivery_is_kept_beside_its_event_as_it_was_received(open_store: Factory) -> None:
    """A delivery kept with its event reads back unchanged (its body the very text
    received: spacing, key order, non-ASCII text and escapes), by event id and in the
    list oldest first; one for an event that has one already is not written."""
    store = open_store()
    first, second = delivery("e-2", at(1)), delivery("e-1", at(2))
    with store.write() as tx:
        tx.insert_events([event("e-1"), event("e-2"), event("e-3")])
        tx.insert_deliveries([first, second])
        tx.insert_deliveries([dataclasses.replace(first, kind="push", body="{}")])
        tx.insert_deliveries([])
    with store.read() as tx:
        assert tx.get_delivery("e-2") == first and tx.get_delivery("e-1") == second
        assert tx.get_delivery("e-3") is None and tx.get_delivery("nope") is None
        assert tx.list_deliveries(10) == [first, second]
        assert tx.list_deliveries(1) == [first]


def test_a_delivery_guid_names_the_event_it_became(open_store: Factory) -> None:
    """`delivered_as(GUID)`: the event a kept delivery became (whatever the event's own
    id), the first kept should the GUID come again, and None for a GUID never kept."""
    store = open_store()
    guid = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
    with store.write() as tx:
        tx.insert_events([event("merge-pr:hello:7:abc"), event("e-2")])
        first = dataclasses.replace(delivery("merge-pr:hello:7:abc", at(1)), delivery_id=guid)
        again = dataclasses.replace(delivery("e-2", at(2)), delivery_id=guid)
        tx.insert_deliveries([again, first])
    with store.read() as tx:
        assert tx.delivered_as(guid) == "merge-pr:hello:7:abc"
        assert tx.delivered_as("not-a-guid") is None


def test_a_delivery_needs_its_event(open_store: Factory) -> None:
    """A delivery whose event is not stored is refused, as a foreign key is, and
    nothing of it is kept."""
    store = open_store()
    with store.write() as tx:
        tx.insert_event(event("e-1"))
        with pytest.raises(DB_ERRORS), tx.savepoint():
            tx.insert_deliveries([delivery("e-1"), delivery("no-such-event")])
    with store.read() as tx:
        assert tx.list_deliveries(10) == []


@real_databases  # migrations are SQL run on a database (the memory store has no schema)
def test_migration_7_adds_deliveries_and_leaves_existing_data_alone(
    open_store: Factory, database: str
) -> None:
    """A database at schema version 6 with an event and its decision is brought to
    version 7: both keep every field, the event has no delivery (admitted before they
    were kept), and a new event keeps its delivery."""
    facts = '{"in_flight":true}'
    _create_at(
        database,
        6,
        ("INSERT INTO events VALUES ('e-1', 'factory.work.requested', 'inject', 'bj29', ?, "
         "'e-1', '{\"repo\":\"bj29\"}', NULL, ?, 'inject', 0)",
         ("2026-11-30T10:00:00.000000Z", "2026-11-30T10:00:00.000000Z")),
        ("INSERT INTO decisions VALUES ('e-1', 'propose', NULL, 'dispatch@1', 'nightly', NULL, "
         "1, 0, 'rules/dispatch', 'needs a human', 'sha256:abc', ?, ?)",
         ("2026-11-30T10:00:01.000000Z", facts)),
    )  # fmt: skip
    assert (7,) not in databases.rows(database, "SELECT version FROM schema_migrations")
    store = open_store()
    assert (7,) in databases.rows(database, "SELECT version FROM schema_migrations")
    with store.write() as tx:
        assert tx.get_event("e-1") == event("e-1")
        assert tx.get_decision("e-1") == dataclasses.replace(decision("e-1"), facts=facts)
        assert tx.get_delivery("e-1") is None and tx.list_deliveries(10) == []
        tx.insert_event(event("e-2"))
        tx.insert_deliveries([delivery("e-2")])
    with store.read() as tx:
        assert tx.list_deliveries(10) == [delivery("e-2")]
