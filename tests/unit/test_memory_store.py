"""The in-memory store's own transactions (what the contract suite cannot ask of a
database): versions that a later write never changes, indexes kept with their tables
through savepoints and rollbacks, a bounded writer lock, and the refusals of misuse
that SQL raises too."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.records import (
    EventRecord,
    JournalEntry,
    OccurrenceRecord,
    ProposalRecord,
    RunRecord,
    SkipRecord,
)
from engine.errors import Busy
from engine.store.limits import Limits
from engine.store.memory import MemoryDatabase, MemoryStore, MemoryStoreError, MemoryTx
from engine.store.ports import Store
from engine.store.sqlite import SqliteStore
from engine.store.sqltx import budget_total

AT = "2026-11-30T10:00:00.000000Z"
LATER = "2026-11-30T10:09:00.000000Z"


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


def test_a_read_keeps_what_its_indexes_answered_while_a_writer_moves_rows() -> None:
    """A read opened before a commit still finds the retry due, the open proposal and
    the run in flight that the commit moved on; a read after it finds none of them."""
    store = MemoryStore()
    with store.write() as tx:
        tx.insert_event(event("e-1"))
        tx.open_occurrence(OccurrenceRecord("e-1", "a", "waiting_for_resource", AT, retry_at=AT))
        tx.insert_proposal(ProposalRecord("p-1", "e-1", "a", "d@1", "open", True, False, AT))
        tx.insert_run(
            RunRecord("r-1", "k-1", "e-1", None, "a", "d@1", "x", "op", 0, None, None, AT)
        )
    with store.read() as before:
        with store.write() as tx:
            tx.update_occurrence("e-1", None, AT, state="completed")
            tx.decide_proposal("p-1", "open", "approved", AT, "op", "")
            tx.cancel_run("r-1", "queued", AT, "stop")
        assert [o.event_id for o in before.due_retries(LATER, 10)] == ["e-1"]
        assert [p.proposal_id for p in before.open_proposals_of(["a"])] == ["p-1"]
        assert before.loops_in_flight(["a"]) == {"a"}
    with store.read() as after:
        assert after.due_retries(LATER, 10) == [] and after.open_proposals_of(["a"]) == []
        assert after.loops_in_flight(["a"]) == set()


def test_rows_with_equal_sort_keys_come_in_the_order_sqlite_gives() -> None:
    """Expired leases of the same expiry and skips of the same first slot list in the
    order SQLite lists them (its index order, kept by its sort), not in the order they
    were written."""
    late = "2026-11-30T10:01:00.000000Z"

    def fill(store: Store) -> tuple[list[str], list[str]]:
        with store.write() as tx:
            tx.insert_event(event("e-1"))
            tx.insert_run(
                RunRecord("r-0", "k-0", "e-1", None, "a", "d", "x", "o", 0, None, None, late)
            )
            tx.claim_next_run("w", AT)
            tx.insert_run(
                RunRecord("r-1", "k-1", "e-1", None, "a", "d", "x", "o", 0, None, None, AT)
            )
            tx.claim_next_run("w", AT)
            tx.set_loop_enabled("a", True, AT, AT)
            tx.insert_skip(SkipRecord("a", AT, late, 2, "late", AT))
            tx.insert_skip(SkipRecord("a", AT, AT, 1, "asleep", AT))
        with store.read() as tx:
            leases = [r.run_id for r in tx.expired_leases(LATER, 10)]
            return leases, [s.reason for s in tx.list_skips("a", AT)]

    lite = SqliteStore(":memory:")
    try:
        assert fill(MemoryStore()) == fill(lite)
    finally:
        lite.close()


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


# ---- the indexes: kept with their tables through savepoints, rollbacks and snapshots ----
LOOPS = ("a", "b", None)
OCCURRENCE_STATES = ("triaging", "waiting_for_resource", "work_dispatched", "completed")
RUN_STATES = ("queued", "claimed", "running", "succeeded")
IDS = ("0", "1", "2", "3")


def at(n: int) -> str:
    """A time of the generated programs: hours apart, a few minutes past the hour."""
    return f"2026-11-30T1{n}:0{n % 3}:00.000000Z"


UNTIL = at(5)


def indexed(tx: MemoryTx) -> dict[str, Any]:
    """The reads the store answers from its indexes."""
    loops = {"a", "b"}
    return {
        "unplanned": tx.unplanned_events(100),
        "of loops": tx.occurrences_of_loops(loops, ("triaging", "completed")),
        "active": [tx.active_occurrences(lo, r, ("triaging",)) for lo in loops for r in "rs"],
        "retries": tx.due_retries(UNTIL, 100),
        "by state": [tx.list_occurrences(100, state=s) for s in OCCURRENCE_STATES],
        "by loop": [tx.list_occurrences(100, loop=lo) for lo in loops],
        "open": tx.open_proposals_of(loops),
        "open by loop": tx.open_proposals_by_loop(),
        "stale": sorted(p.proposal_id for p in tx.stale_proposals(UNTIL, 100)),
        "proposals": [tx.list_proposals(100, state=s) for s in ("open", "approved")],
        "in flight": tx.loops_in_flight(loops),
        "leases": sorted(r.run_id for r in tx.expired_leases(UNTIL, 100)),
        "runs": [tx.list_runs(100, state=s) for s in RUN_STATES],
        "last": [(tx.last_loop_run(lo), tx.last_loop_event(lo)) for lo in loops],
        "newest": [
            tx.list_occurrences(2, loop=lo, state=s) for lo in loops for s in (None, "completed")
        ],
        "since": [tx.occurrences_of_loop(lo, at(3), 100) for lo in loops],
        "budget": [tx.budget_usage(lo, r, at(3)) for lo in loops for r in "rs"],
    }


def scanned(tx: MemoryTx) -> dict[str, Any]:
    """The same reads worked out from every row, each read by its key."""
    events = [e for e in map(tx.get_event, (f"e-{i}" for i in IDS)) if e is not None]
    occs = [o for o in map(tx.get_occurrence, (f"e-{i}" for i in IDS)) if o is not None]
    props = [p for p in map(tx.get_proposal, (f"p-{i}" for i in IDS)) if p is not None]
    runs = [r for r in map(tx.get_run, (f"r-{i}" for i in IDS)) if r is not None]
    loops = {"a", "b"}

    def first(rows: list[Any], key: Any) -> list[Any]:
        return sorted(rows, key=key)

    made = lambda o: (o.created_at or o.updated_at, o.event_id)  # noqa: E731
    newest = lambda rows, key: max(rows, key=key, default=None)  # noqa: E731
    opened = [p for p in props if p.state == "open"]

    def since(loop: str) -> list[OccurrenceRecord]:
        return [o for o in occs if o.loop == loop and o.created_at and o.created_at >= at(3)]

    return {
        "unplanned": first(
            [e for e in events if not e.planned], lambda e: (e.admitted_at, e.event_id)
        ),
        "of loops": first(
            [o for o in occs if o.loop in loops and o.state in ("triaging", "completed")], made
        ),
        "active": [
            first([o for o in occs if o.loop == lo and o.repo == r and o.state == "triaging"], made)
            for lo in loops
            for r in "rs"
        ],
        "retries": first(
            [
                o
                for o in occs
                if o.state == "waiting_for_resource" and o.retry_at and o.retry_at <= UNTIL
            ],
            lambda o: (o.retry_at, o.event_id),
        ),
        "by state": [
            first([o for o in occs if o.state == s], lambda o: (o.updated_at, o.event_id))[::-1]
            for s in OCCURRENCE_STATES
        ],
        "by loop": [
            first([o for o in occs if o.loop == lo], lambda o: (o.updated_at, o.event_id))[::-1]
            for lo in loops
        ],
        "open": first(
            [p for p in opened if p.loop in loops], lambda p: (p.created_at, p.proposal_id)
        ),
        "open by loop": {lo: n for lo in loops if (n := sum(1 for p in opened if p.loop == lo))},
        "stale": sorted(p.proposal_id for p in opened if p.created_at < UNTIL),
        "proposals": [
            first([p for p in props if p.state == s], lambda p: (p.created_at, p.proposal_id))[::-1]
            for s in ("open", "approved")
        ],
        "in flight": {r.loop for r in runs if r.loop in loops and r.state in RUN_STATES[:3]},
        "leases": sorted(
            r.run_id
            for r in runs
            if r.state in ("claimed", "running")
            and r.lease_expires_at
            and r.lease_expires_at < UNTIL
        ),
        "runs": [
            first([r for r in runs if r.state == s], lambda r: (r.created_at, r.run_id))[::-1]
            for s in RUN_STATES
        ],
        "last": [
            (
                newest([r for r in runs if r.loop == lo], lambda r: (r.created_at, r.run_id)),
                newest([e for e in events if e.loop == lo], lambda e: (e.admitted_at, e.event_id)),
            )
            for lo in loops
        ],
        "newest": [
            first(
                [o for o in occs if o.loop == lo and s in (None, o.state)],
                lambda o: (o.updated_at, o.event_id),
            )[::-1][:2]
            for lo in loops
            for s in (None, "completed")
        ],
        "since": [first(since(lo), lambda o: (o.created_at, o.event_id)) for lo in loops],
        "budget": [
            budget_total(
                (o.used, o.reserved, o.finished_at is not None) for o in since(lo) if o.repo == r
            )
            for lo in loops
            for r in "rs"
        ],
    }


ids = st.sampled_from(IDS)
minutes = st.integers(0, 8)
Op = Callable[[MemoryTx], object]
ops: st.SearchStrategy[Op] = st.one_of(
    st.builds(
        lambda i, lo, m: (
            lambda tx: tx.insert_event(
                EventRecord(f"e-{i}", "t", "inject", "s", at(m), f"e-{i}", {}, lo, at(m), "inject")
            )
        ),
        ids,
        st.sampled_from(LOOPS),
        minutes,
    ),
    ids.map(lambda i: lambda tx: tx.mark_planned(f"e-{i}")),
    st.builds(
        lambda i, lo, s, r, m: (
            lambda tx: tx.open_occurrence(
                OccurrenceRecord(
                    f"e-{i}",
                    lo,
                    s,
                    at(m),
                    repo=r,
                    retry_at=at(m),
                    reserved={"runs": 1},
                    created_at=at(m),
                )
            )
        ),
        ids,
        st.sampled_from(LOOPS),
        st.sampled_from(OCCURRENCE_STATES),
        st.sampled_from("rs"),
        minutes,
    ),
    st.builds(
        lambda i, s, m: lambda tx: tx.update_occurrence(f"e-{i}", None, at(m), state=s),
        ids,
        st.sampled_from(OCCURRENCE_STATES),
        minutes,
    ),
    st.builds(
        lambda i, s, m: lambda tx: tx.set_occurrence(f"e-{i}", "a", s, at(m)),
        ids,
        st.sampled_from(OCCURRENCE_STATES),
        minutes,
    ),
    st.builds(
        lambda i, e, lo, m: (
            lambda tx: tx.insert_proposal(
                ProposalRecord(f"p-{i}", f"e-{e}", lo, "d@1", "open", True, False, at(m))
            )
        ),
        ids,
        ids,
        st.sampled_from(LOOPS),
        minutes,
    ),
    st.builds(
        lambda i, m: lambda tx: tx.decide_proposal(f"p-{i}", "open", "approved", at(m), "op", ""),
        ids,
        minutes,
    ),
    st.builds(
        lambda i, e, lo, m: (
            lambda tx: tx.insert_run(
                RunRecord(
                    f"r-{i}", f"k-{i}", f"e-{e}", None, lo, "d@1", "x", "op", 0, None, None, at(m)
                )
            )
        ),
        ids,
        ids,
        st.sampled_from(LOOPS),
        minutes,
    ),
    st.builds(lambda m: lambda tx: tx.claim_next_run("w", at(m)), minutes),
    st.builds(lambda i, m: lambda tx: tx.start_run(f"r-{i}", "w", at(m)), ids, minutes),
    st.builds(
        lambda i, m: (
            lambda tx: tx.finish_run(f"r-{i}", "w", "succeeded", at(m), "OK", {}, None, None)
        ),
        ids,
        minutes,
    ),
    st.builds(
        lambda i, m: lambda tx: tx.cancel_run(f"r-{i}", "queued", at(m), "stop"), ids, minutes
    ),
)
# A transaction: steps, each in a savepoint that fails after it or not; raised or not.
programs = st.lists(
    st.tuples(st.lists(st.tuples(ops, st.booleans()), max_size=8), st.booleans()), max_size=6
)


class Abort(Exception):
    """Rolls a savepoint or a transaction back."""


@settings(max_examples=200, deadline=None)
@given(program=programs)
def test_the_indexes_answer_as_the_rows_do_through_rollbacks(program: list[Any]) -> None:
    """Every read answered from an index answers what the rows themselves say, inside a
    transaction after a failed savepoint and after a raised transaction; it answers as
    a store that only ever made the writes that were kept; and a read opened before a
    commit keeps its answers."""
    store, kept = MemoryStore(), list[Op]()
    for steps, raises in program:
        with store.read() as before:
            seen = indexed(before)
            made = list[Op]()
            with contextlib.suppress(Abort), store.write() as tx:
                for op, fails in steps:
                    with contextlib.suppress(Abort, MemoryStoreError), tx.savepoint():
                        op(tx)
                        if fails:
                            raise Abort
                        made.append(op)
                    assert indexed(tx) == scanned(tx)
                if raises:
                    raise Abort
                kept.extend(made)
            assert indexed(before) == seen
        fresh = MemoryStore()
        with fresh.write() as tx:
            for op in kept:
                op(tx)
        with store.read() as after, fresh.read() as replayed:
            assert indexed(after) == scanned(after) == indexed(replayed)
