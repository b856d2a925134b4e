"""The pages of the storage contract, held by every store (a SQLite file, a database of
a real PostgreSQL server, the in-memory store): runs and journal entries filtered by
loop, state, entity, actor and time, newest first, read page by page from a cursor; a
journal entry's loop from the row it names; a loop's rows counted per state. Each
expectation is worked out in the test from the rows it wrote."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import replace
from itertools import product
from typing import Any

import databases
import psycopg
import pytest
from databases import Factory, real_databases

from engine.core.paging import EventQuery, JournalQuery, ProposalQuery, RunQuery
from engine.core.records import (
    EventRecord,
    FindingRecord,
    JournalEntry,
    OccurrenceRecord,
    ProposalRecord,
    RunRecord,
)
from engine.store.ports import Store, Tx
from engine.store.queries import migrations, queries
from engine.store.sqltx import EVENT_FILTERS, JOURNAL_FILTERS, PROPOSAL_FILTERS, RUN_FILTERS

LOOPS = ("nightly", "repair", None)
ACTORS = ("auto", "operator:alice", "operator:bob")
STATES = ("queued", "succeeded", "failed")


def at(minute: int) -> str:
    return f"2026-11-30T10:{minute:02d}:00.000000Z"


def event(event_id: str, loop: str | None) -> EventRecord:
    return EventRecord(event_id, "t", "s", "bj29", at(0), event_id, {}, loop, at(0), "inject")


def run(n: int) -> RunRecord:
    """Run n: of a loop, in a state and approved by an actor that cycle at different
    rates; created in minutes that several runs share (ties on created_at)."""
    return RunRecord(
        run_id=f"run-{n:02d}",
        idempotency_key=f"key-{n}",
        event_id=f"e-{n:02d}",
        proposal_id=None,
        loop=LOOPS[n % 3],
        definition="dispatch@1",
        state="queued",
        approved_by=ACTORS[n % 2 + (n % 5 == 0)],
        attempts=0,
        lease_owner=None,
        lease_expires_at=None,
        created_at=at(n // 3),
    )


RUNS = [run(n) for n in range(20)]


def _with_runs(store: Store) -> None:
    with store.write() as tx:
        for r in RUNS:
            tx.insert_event(event(r.event_id, r.loop))
            tx.insert_run(r)


def _runs_expected(q: RunQuery) -> list[str]:
    found = [
        r
        for r in RUNS
        if (q.loop is None or r.loop == q.loop)
        and (q.actor is None or r.approved_by == q.actor)
        and (q.since is None or r.created_at >= q.since)
        and (q.until is None or r.created_at < q.until)
        and (q.before is None or (r.created_at, r.run_id) < q.before)
    ]
    return [r.run_id for r in sorted(found, key=lambda r: (r.created_at, r.run_id), reverse=True)]


def _walk(read: Callable[[Any, int], list[Any]], query: Any, size: int, key: str) -> list[Any]:
    """Every row of a listing, read `size` at a time, each page from the last row of
    the one before (its cursor)."""
    rows: list[Any] = []
    while True:
        page = read(query, size)
        assert len(page) <= size
        rows.extend(page)
        if len(page) < size:
            return rows
        last = page[-1]
        cursor = (last.created_at, last.run_id) if key == "run" else last.seq
        query = replace(query, before=cursor)


RUN_QUERIES = [
    RunQuery(),
    RunQuery(loop="nightly"),
    RunQuery(loop="repair", actor="auto"),
    RunQuery(actor="operator:bob"),
    RunQuery(since=at(2)),
    RunQuery(until=at(4)),
    RunQuery(since=at(1), until=at(5), loop="nightly"),
    RunQuery(loop="nightly", actor="operator:alice", since=at(0), until=at(6)),
    RunQuery(before=(at(3), "run-10")),
    RunQuery(loop="repair", before=(at(4), "run-00")),
    RunQuery(loop="nowhere"),
    RunQuery(since=at(9)),
    RunQuery(since=at(3), until=at(3)),
]


@pytest.mark.parametrize("query", RUN_QUERIES, ids=repr)
def test_runs_page_holds_every_filter_newest_first(open_store: Factory, query: RunQuery) -> None:
    """A page of runs holds exactly the runs that pass every filter given, newest first
    by (created_at, run_id), ties on created_at broken by the run id; none is empty."""
    store = open_store()
    _with_runs(store)
    with store.read() as tx:
        assert [r.run_id for r in tx.page_runs(query, 100)] == _runs_expected(query)


def test_runs_page_filters_by_state(open_store: Factory) -> None:
    """The state filter keeps the runs in that state only, with the other filters."""
    store = open_store()
    _with_runs(store)
    moved = {r.run_id for r in RUNS[::4]}
    with store.write() as tx:
        for run_id in sorted(moved):
            assert tx.cancel_run(run_id, "queued", at(30), "stop")
    with store.read() as tx:
        cancelled = [r.run_id for r in tx.page_runs(RunQuery(state="cancelled"), 100)]
        queued = tx.page_runs(RunQuery(state="queued", loop="nightly"), 100)
        assert tx.page_runs(RunQuery(state="running"), 100) == []
    assert cancelled == [r for r in _runs_expected(RunQuery()) if r in moved]
    nightly = _runs_expected(RunQuery(loop="nightly"))
    assert [r.run_id for r in queued] == [r for r in nightly if r not in moved]
    assert all(r.state == "queued" for r in queued)


@pytest.mark.parametrize("size", [1, 2, 3, 7, 20, 21])
def test_paging_through_runs_gives_each_once_in_order(open_store: Factory, size: int) -> None:
    """Reading pages one after the other, each from the last run of the page before,
    gives every run that passes the filters exactly once, in order, whatever the page
    size and however many runs share a created_at."""
    store = open_store()
    _with_runs(store)
    with store.read() as tx:
        for query in (RunQuery(), RunQuery(loop="nightly"), RunQuery(actor="auto", since=at(1))):
            walked = _walk(tx.page_runs, query, size, "run")
            assert [r.run_id for r in walked] == _runs_expected(query)


# ---- the journal ---------------------------------------------------------------------


def _with_history(tx: Tx) -> list[tuple[JournalEntry, str | None]]:
    """Rows of each kind for two loops and none, each journaled after it is written;
    the entries appended with the loop each is about."""
    written: list[tuple[JournalEntry, str | None]] = []

    def note(entity: str, entity_id: str, loop: str | None, minute: int, actor: str) -> None:
        entry = JournalEntry(at(minute), entity, entity_id, "did", actor)
        tx.append_journal(entry)
        written.append((entry, loop))

    for n, loop in enumerate(("nightly", "repair", None, "nightly")):
        eid = f"e-{n}"
        tx.insert_event(event(eid, loop))
        note("event", eid, loop, n, "inject")
        tx.open_occurrence(OccurrenceRecord(eid, loop, "created", at(n), created_at=at(n)))
        note("occurrence", eid, loop, n, "system")
        tx.insert_proposal(ProposalRecord(f"p-{n}", eid, loop, "d@1", "open", False, False, at(n)))
        note("proposal", f"p-{n}", loop, n, "system")
        tx.insert_run(replace(run(n), run_id=f"r-{n}", event_id=eid, loop=loop))
        note("run", f"r-{n}", loop, n + 1, ACTORS[n % 3])
        finding = FindingRecord(
            f"f-{n}",
            f"k-{n}",
            loop,
            None,
            "flaky",
            None,
            None,
            None,
            "candidate",
            1,
            at(n),
            at(n),
            None,
        )
        tx.upsert_finding(finding)
        note("finding", f"f-{n}", loop, n + 1, "operator:alice")
    tx.insert_event(event("e-bare", None))  # an occurrence without a loop: its event's
    tx.open_occurrence(OccurrenceRecord("e-bare", None, "created", at(5), created_at=at(5)))
    tx.insert_event(event("e-ticked", "repair"))
    tx.open_occurrence(OccurrenceRecord("e-ticked", None, "created", at(5), created_at=at(5)))
    note("occurrence", "e-ticked", "repair", 5, "system")
    note("occurrence", "e-bare", None, 5, "system")
    note("loop", "nightly", "nightly", 6, "operator:bob")
    note("loop", "repair", "repair", 6, "operator:alice")
    note("run", "r-unknown", None, 7, "auto")  # names no row: about no loop
    return written


def _journal_expected(written: list[tuple[JournalEntry, str | None]], q: JournalQuery) -> list[int]:
    seqs = [
        seq
        for seq, (e, loop) in enumerate(written, start=1)
        if (q.loop is None or loop == q.loop)
        and (q.entity is None or e.entity == q.entity)
        and (q.actor is None or e.actor == q.actor)
        and (q.since is None or e.at >= q.since)
        and (q.until is None or e.at < q.until)
        and (q.before is None or seq < q.before)
    ]
    return seqs[::-1]


JOURNAL_QUERIES = [
    JournalQuery(),
    JournalQuery(loop="nightly"),
    JournalQuery(loop="repair"),
    JournalQuery(entity="occurrence"),
    JournalQuery(entity="loop"),
    JournalQuery(actor="operator:alice"),
    JournalQuery(since=at(3)),
    JournalQuery(until=at(2)),
    JournalQuery(before=12),
    JournalQuery(loop="nightly", entity="run"),
    JournalQuery(loop="repair", actor="operator:alice", since=at(1), until=at(7)),
    JournalQuery(loop="nightly", entity="proposal", actor="system", before=18),
    JournalQuery(loop="nowhere"),
    JournalQuery(entity="finding", since=at(9)),
    JournalQuery(before=1),
]


@pytest.mark.parametrize("query", JOURNAL_QUERIES, ids=repr)
def test_journal_page_holds_every_filter_newest_first(
    open_store: Factory, query: JournalQuery
) -> None:
    """A page of the journal holds exactly the entries that pass every filter given,
    by seq newest first; an entry is about a loop when it names the loop, or an event,
    occurrence (or, lacking a loop, its event), proposal, run or finding of it."""
    store = open_store()
    with store.write() as tx:
        written = _with_history(tx)
    with store.read() as tx:
        found = tx.page_journal(query, 100)
    assert [e.seq for e in found] == _journal_expected(written, query)
    by_seq = {seq: entry for seq, (entry, _) in enumerate(written, start=1)}
    assert found == [replace(by_seq[e.seq or 0], seq=e.seq) for e in found]


@pytest.mark.parametrize("size", [1, 4, 29, 30])
def test_paging_through_the_journal_gives_each_once_in_order(
    open_store: Factory, size: int
) -> None:
    """Pages read one after the other from the last seq of the page before give every
    entry that passes the filters exactly once, newest first."""
    store = open_store()
    with store.write() as tx:
        written = _with_history(tx)
    with store.read() as tx:
        for query in (JournalQuery(), JournalQuery(loop="repair"), JournalQuery(actor="system")):
            walked = _walk(tx.page_journal, query, size, "journal")
            assert [e.seq for e in walked] == _journal_expected(written, query)


def test_a_journal_entry_keeps_the_loop_it_was_written_about(open_store: Factory) -> None:
    """An entry is about the loop its row had when the entry was appended: an entry
    written before its row is about no loop, and later rows change nothing."""
    store = open_store()
    with store.write() as tx:
        tx.append_journal(JournalEntry(at(0), "event", "e-late", "did", "inject"))
        tx.insert_event(event("e-late", "nightly"))
        tx.append_journal(JournalEntry(at(1), "event", "e-late", "did", "inject"))
    with store.read() as tx:
        assert [e.seq for e in tx.page_journal(JournalQuery(loop="nightly"), 10)] == [2]
        assert [e.seq for e in tx.page_journal(JournalQuery(), 10)] == [2, 1]


# ---- a loop's counts per state -------------------------------------------------------


def test_loop_state_counts_are_the_loops_rows_by_state(open_store: Factory) -> None:
    """A loop's occurrences, proposals and runs are counted by state, theirs only; a
    state without any (and a loop without rows) has no count."""
    store = open_store()
    with store.write() as tx:
        _with_history(tx)
        assert tx.decide_proposal("p-0", "open", "approved", at(9), "operator:alice", "")
        assert tx.update_occurrence("e-3", "created", at(9), state="completed")
        assert tx.cancel_run("r-3", "queued", at(9), "stop")
    with store.read() as tx:
        nightly = tx.loop_state_counts("nightly")
        repair = tx.loop_state_counts("repair")
        nowhere = tx.loop_state_counts("nowhere")
    assert nightly == {
        "occurrence": {"created": 1, "completed": 1},
        "proposal": {"approved": 1, "open": 1},
        "run": {"queued": 1, "cancelled": 1},
    }
    assert repair == {
        "occurrence": {"created": 1},
        "proposal": {"open": 1},
        "run": {"queued": 1},
    }
    assert nowhere == {"occurrence": {}, "proposal": {}, "run": {}}


# ---- the schema: migration 9 and the indexes the pages read --------------------------


def _create_at(database: str, version: int, statements: list[str]) -> None:
    """A database as schema `version` left it, with `statements` committed in it."""
    postgres = database.startswith("postgresql://")
    old = [
        (v, sql) for v, sql in migrations("postgresql" if postgres else "sqlite") if v <= version
    ]
    ddl = "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
    if postgres:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(ddl)
            for v, sql in old:
                conn.execute(sql.encode())
                conn.execute("INSERT INTO schema_migrations VALUES (%s, 'then')", (v,))
            for statement in statements:
                conn.execute(statement.encode())
        return
    lite = sqlite3.connect(database)
    try:
        lite.execute(ddl)
        for v, sql in old:
            lite.executescript(sql)
            lite.execute("INSERT INTO schema_migrations VALUES (?, 'then')", (v,))
        for statement in statements:
            lite.execute(statement)
        lite.commit()
    finally:
        lite.close()


@real_databases  # migrations are SQL run on a database (the memory store has no schema)
def test_migration_9_finds_the_loop_of_entries_written_before_it(
    open_store: Factory, store_database: str
) -> None:
    """A journal written at schema version 8 reads by loop once migrated: each entry
    about the loop its row has, the journal still append-only."""
    t = at(0)
    rows = [
        f"INSERT INTO events VALUES ('e-1', 't', 's', 'x', '{t}', 'e-1', '{{}}', 'nightly', "
        f"'{t}', 'inject', 0)",
        f"INSERT INTO events VALUES ('e-2', 't', 's', 'x', '{t}', 'e-2', '{{}}', NULL, "
        f"'{t}', 'inject', 0)",
        "INSERT INTO runs (run_id, idempotency_key, event_id, loop, definition, state, "
        f"approved_by, created_at) VALUES ('r-1', 'k', 'e-1', 'nightly', 'd', 'queued', "
        f"'auto', '{t}')",
        *(
            "INSERT INTO journal (at, entity, entity_id, action, actor) "
            f"VALUES ('{t}', '{entity}', '{ident}', 'did', 'system')"
            for entity, ident in [
                ("event", "e-1"),
                ("event", "e-2"),
                ("run", "r-1"),
                ("loop", "nightly"),
                ("loop", "repair"),
                ("proposal", "p-none"),
            ]
        ),
    ]
    _create_at(store_database, 8, rows)
    store = open_store()
    with store.read() as tx:
        assert [e.seq for e in tx.page_journal(JournalQuery(loop="nightly"), 10)] == [4, 3, 1]
        assert [e.seq for e in tx.page_journal(JournalQuery(loop="repair"), 10)] == [5]
        assert len(tx.page_journal(JournalQuery(), 10)) == 6
    refused = (sqlite3.DatabaseError, psycopg.Error)
    with pytest.raises(refused, match="append-only"):
        databases.execute(store_database, "UPDATE journal SET note = 'x'")


def _conditions(filters: dict[str, str]) -> Iterator[tuple[str, ...]]:
    """Each filter alone, and each pair of them."""
    names = list(filters)
    yield ()
    yield from ((n,) for n in names)
    yield from ((a, b) for a, b in product(names, names) if a < b)


@pytest.mark.parametrize("store_database", ["sqlite"], indirect=True)
def test_sqlite_reads_each_page_in_index_order(open_store: Factory, store_database: str) -> None:
    """Every page of runs or of the journal, with any filter or two, is read from an
    index in the page's order (no sort of the rows it passes over); every filter but the
    journal's times narrows that index to its own rows."""
    open_store()
    conn = sqlite3.connect(store_database)
    params = dict.fromkeys(["loop", "state", "actor", "since", "until", "entity"], "x")
    params.update(before_at="x", before_id="x", before=1, limit=5)
    try:
        for name, filters in (("page_runs", RUN_FILTERS), ("page_journal", JOURNAL_FILTERS)):
            for used in _conditions(filters):
                where = "".join(f" AND {filters[f]}" for f in used)
                sql = queries("sqlite")[name].format(where=where)
                plan = " / ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
                assert "TEMP B-TREE" not in plan, (name, used, plan)
                if {"since", "until"} >= set(used) and name == "page_journal":
                    continue  # the journal's time is not indexed: seq order, filtered
                if used:
                    assert plan.startswith("SEARCH"), (name, used, plan)
    finally:
        conn.close()


# ---- proposals and events --------------------------------------------------------------

TYPES = ("ci.failed", "clock.tick", "github.push")
PROPOSAL_STATES = ("open", "approved", "rejected", "expired")


def proposal(n: int) -> ProposalRecord:
    """Proposal n: of a loop and in a state that cycle at different rates, created in
    minutes that several proposals share."""
    loop, state = LOOPS[n % 3], PROPOSAL_STATES[n % 4]
    return ProposalRecord(f"p-{n:02d}", f"e-{n:02d}", loop, "d@1", state, False, False, at(n // 3))


def admitted(n: int) -> EventRecord:
    """Event n: of a loop and a type that cycle, admitted in minutes several share."""
    found = event(f"e-{n:02d}", LOOPS[n % 3])
    return replace(found, type=TYPES[n % 2 + (n % 7 == 0)], admitted_at=at(n // 4))


PROPOSALS = [proposal(n) for n in range(20)]
EVENTS = [admitted(n) for n in range(20)]


def _with_proposals_and_events(store: Store) -> None:
    with store.write() as tx:
        for e in EVENTS:
            tx.insert_event(e)
        for p in PROPOSALS:
            tx.insert_proposal(p)


def _proposals_expected(q: ProposalQuery) -> list[str]:
    found = [
        (p.created_at, p.proposal_id)
        for p in PROPOSALS
        if (q.loop is None or p.loop == q.loop)
        and (q.state is None or p.state == q.state)
        and (q.before is None or (p.created_at, p.proposal_id) < q.before)
    ]
    return [ident for _, ident in sorted(found, reverse=True)]


def _events_expected(q: EventQuery) -> list[str]:
    found = [
        (e.admitted_at, e.event_id)
        for e in EVENTS
        if (q.loop is None or e.loop == q.loop)
        and (q.type is None or e.type == q.type)
        and (q.before is None or (e.admitted_at, e.event_id) < q.before)
    ]
    return [ident for _, ident in sorted(found, reverse=True)]


PROPOSAL_QUERIES = [
    ProposalQuery(),
    ProposalQuery(loop="nightly"),
    ProposalQuery(state="open"),
    ProposalQuery(loop="repair", state="approved"),
    ProposalQuery(before=(at(3), "p-10")),
    ProposalQuery(loop="nightly", state="rejected", before=(at(6), "p-00")),
    ProposalQuery(loop="nowhere"),
]
EVENT_QUERIES = [
    EventQuery(),
    EventQuery(loop="repair"),
    EventQuery(type="clock.tick"),
    EventQuery(loop="nightly", type="ci.failed"),
    EventQuery(before=(at(2), "e-09")),
    EventQuery(loop="repair", type="github.push", before=(at(5), "e-00")),
    EventQuery(type="nothing"),
]


@pytest.mark.parametrize("query", PROPOSAL_QUERIES, ids=repr)
def test_proposals_page_holds_every_filter_newest_first(
    open_store: Factory, query: ProposalQuery
) -> None:
    """A page of proposals holds exactly those that pass every filter given, newest
    first by (created_at, proposal_id)."""
    store = open_store()
    _with_proposals_and_events(store)
    with store.read() as tx:
        found = tx.page_proposals(query, 100)
    assert [p.proposal_id for p in found] == _proposals_expected(query)
    by_id = {p.proposal_id: p for p in PROPOSALS}
    assert found == [by_id[p.proposal_id] for p in found]  # each as it was written


@pytest.mark.parametrize("query", EVENT_QUERIES, ids=repr)
def test_events_page_holds_every_filter_newest_first(
    open_store: Factory, query: EventQuery
) -> None:
    """A page of events holds exactly those that pass every filter given, newest first
    by (admitted_at, event_id)."""
    store = open_store()
    _with_proposals_and_events(store)
    with store.read() as tx:
        found = tx.page_events(query, 100)
    assert [e.event_id for e in found] == _events_expected(query)


def _walk_keyed(read: Callable[[Any, int], list[Any]], query: Any, size: int) -> list[Any]:
    """Every row of a proposals or events listing, `size` at a time, each page from the
    last row of the page before."""
    rows: list[Any] = []
    while True:
        page = read(query, size)
        assert len(page) <= size
        rows.extend(page)
        if len(page) < size:
            return rows
        last = page[-1]
        if isinstance(last, ProposalRecord):
            query = replace(query, before=(last.created_at, last.proposal_id))
        else:
            query = replace(query, before=(last.admitted_at, last.event_id))


@pytest.mark.parametrize("size", [1, 3, 20, 21])
def test_paging_through_proposals_and_events_gives_each_once_in_order(
    open_store: Factory, size: int
) -> None:
    """Pages of proposals or of events read one after the other, each from the last row
    of the page before, give every row that passes the filters once, in order, whatever
    the page size and however many share a time."""
    store = open_store()
    _with_proposals_and_events(store)
    with store.read() as tx:
        for pq in (ProposalQuery(), ProposalQuery(loop="repair"), ProposalQuery(state="open")):
            walked = _walk_keyed(tx.page_proposals, pq, size)
            assert [p.proposal_id for p in walked] == _proposals_expected(pq)
        for eq in (EventQuery(), EventQuery(loop="nightly"), EventQuery(type="clock.tick")):
            walked = _walk_keyed(tx.page_events, eq, size)
            assert [e.event_id for e in walked] == _events_expected(eq)


@pytest.mark.parametrize("store_database", ["sqlite"], indirect=True)
def test_sqlite_reads_proposals_and_events_pages_in_index_order(
    open_store: Factory, store_database: str
) -> None:
    """Every page of proposals or of events, with any filter or two, is read from an
    index in the page's order, narrowed by each filter given."""
    open_store()
    conn = sqlite3.connect(store_database)
    params = dict.fromkeys(["loop", "state", "type"], "x")
    params.update(before_at="x", before_id="x", limit=5)
    try:
        for name, filters in (("page_proposals", PROPOSAL_FILTERS), ("page_events", EVENT_FILTERS)):
            for used in _conditions(filters):
                where = "".join(f" AND {filters[f]}" for f in used)
                sql = queries("sqlite")[name].format(where=where)
                plan = " / ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
                assert "TEMP B-TREE" not in plan, (name, used, plan)
                if used:
                    assert plan.startswith("SEARCH"), (name, used, plan)
    finally:
        conn.close()
