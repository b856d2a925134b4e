"""The memory store against SQLite on generated work: random transactions of random
operations (over a few ids, so that keys collide, states race and leases expire; some
steps refused, some savepoints failing, some transactions rolled back) answer the same
on an in-memory SQLite database and on the memory store, step by step, and leave the
same data behind, read through every view."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.delivery import DELIVERY_STATES
from engine.core.paging import NotificationQuery
from engine.core.records import (
    DecisionRecord,
    EventRecord,
    FindingRecord,
    JournalEntry,
    NotificationRecord,
    OccurrenceRecord,
    ProposalRecord,
    RunRecord,
    SinkDelivery,
    SkipRecord,
)
from engine.store.memory import MemoryStore, MemoryStoreError
from engine.store.ports import Store, Tx
from engine.store.sqlite import SqliteStore

Step = Callable[[Tx], Any]
ACTIVE = ("triaging", "completed")
REFUSED = (sqlite3.DatabaseError, MemoryStoreError, ValueError)

events = st.sampled_from(["e-0", "e-1", "e-2", "e-3"])
loops = st.sampled_from(["a", "b", None])
repos = st.sampled_from(["r", None])
times = st.integers(0, 5).map(lambda m: f"2026-11-30T10:0{m}:00.000000Z")
owners = st.sampled_from(["w1", "w2"])
run_states = st.sampled_from(["queued", "claimed", "running", "succeeded", "failed"])
occurrence_states = st.sampled_from(["triaging", "waiting_for_resource", "completed"])
proposal_states = st.sampled_from(["open", "approved", "rejected"])
statuses = st.sampled_from(["candidate", "promoted", "dismissed"])
json_values = st.one_of(
    st.none(), st.dictionaries(st.sampled_from(["runs", "x"]), st.integers(0, 3))
)


def _record(eid: str, loop: str | None, at: str, occurred: str) -> EventRecord:
    return EventRecord(eid, "t", "s", "subj", occurred, eid, {"k": [1]}, loop, at, "inject")


def _event(eid: str, loop: str | None, at: str, occurred: str) -> Step:
    record = _record(eid, loop, at, occurred)
    return lambda tx: tx.insert_event(record)


def _events(specs: list[tuple[str, str | None, str]]) -> Step:
    records = [_record(eid, loop, at, at) for eid, loop, at in specs]
    return lambda tx: tx.insert_events(records)


def _decision(eid: str, kind: str, at: str) -> Step:
    record = DecisionRecord(eid, kind, None, "d@1", "a", None, True, False, None, "", "h", at)
    return lambda tx: tx.insert_decision(record)


def _open(
    eid: str,
    loop: str | None,
    state: str,
    at: str,
    key: str | None,
    repo: str | None,
    reserved: Any,
    retry: str | None,
) -> Step:  # fmt: skip
    record = OccurrenceRecord(
        eid, loop, state, at, occurrence_key=key, repo=repo, reserved=reserved, retry_at=retry
    )
    return lambda tx: tx.open_occurrence(record)


def _run(rid: str, key: str, eid: str, loop: str | None, at: str) -> Step:
    record = RunRecord(rid, key, eid, None, loop, "d@1", "x", "op", 7, "w", "t", at)
    return lambda tx: tx.insert_run(record)


def _recover(rid: str, state: str, at: str) -> Step:
    def step(tx: Tx) -> Any:
        seen = tx.get_run(rid)
        return None if seen is None else tx.recover_run(seen, state, at, "lease expired")

    return step


def _finding(key: str, fid: str, at: str, evidence: Any) -> Step:
    record = FindingRecord(
        fid, key, "a", "r", "c", evidence, 0.5, None, "candidate", 1, at, at, None
    )
    return lambda tx: tx.upsert_finding(record)


def _notify(key: str, state: str, at: str) -> Step:
    record = NotificationRecord(0, at, "k", "a", None, state, {"l": 1}, "m", key)
    return lambda tx: tx.enqueue_notification(record)


def _settle(seq: int, delivery: str, at: str) -> Step:
    done = at if delivery == "delivered" else None
    record = NotificationRecord(0, "", "k", None, None, "", {}, "", "", done, 2, "e", at, delivery)
    return lambda tx: tx.settle_notification(dataclasses.replace(record, seq=seq))


def _sink_row(seq: int, sink: str, at: str) -> Step:
    row = SinkDelivery(seq, sink, "pending", 1, "refused", at, at)
    return lambda tx: tx.record_sink_deliveries([row])


steps: st.SearchStrategy[Step] = st.one_of(
    st.builds(_event, events, loops, times, times),
    st.lists(st.tuples(events, loops, times), max_size=4).map(_events),
    events.map(lambda e: lambda tx: tx.mark_planned(e)),
    st.builds(_decision, events, st.sampled_from(["run", "noop"]), times),
    st.builds(
        lambda e, lo, s, t: lambda tx: tx.set_occurrence(e, lo, s, t),
        events,
        loops,
        occurrence_states,
        times,
    ),
    st.builds(
        _open,
        events,
        loops,
        occurrence_states,
        times,
        st.sampled_from(["k-0", "k-1", None]),
        repos,
        json_values,
        st.one_of(st.none(), times),
    ),
    st.builds(
        lambda e, x, t, s: lambda tx: tx.update_occurrence(e, x, t, state=s),
        events,
        st.one_of(st.none(), occurrence_states),
        times,
        occurrence_states,
    ),
    st.builds(
        lambda e, t, u: lambda tx: tx.update_occurrence(e, None, t, used=u, finished_at=t),
        events,
        times,
        json_values,
    ),
    events.map(lambda e: lambda tx: tx.add_signal(e)),
    st.builds(
        lambda p, e, lo, t: (
            lambda tx: tx.insert_proposal(ProposalRecord(p, e, lo, "d@1", "open", True, False, t))
        ),
        st.sampled_from(["p-0", "p-1"]),
        events,
        loops,
        times,
    ),
    st.builds(
        lambda p, f, to, t: lambda tx: tx.decide_proposal(p, f, to, t, "operator:x", ""),
        st.sampled_from(["p-0", "p-1"]),
        proposal_states,
        proposal_states,
        times,
    ),
    st.builds(
        _run,
        st.sampled_from(["r-0", "r-1", "r-2"]),
        st.sampled_from(["k-0", "k-1"]),
        events,
        loops,
        times,
    ),
    st.builds(lambda o, t: lambda tx: tx.claim_next_run(o, t), owners, times),
    st.builds(
        lambda r, o, t: lambda tx: tx.heartbeat(r, o, t),
        st.sampled_from(["r-0", "r-1"]),
        owners,
        times,
    ),
    st.builds(
        lambda r, o, t: lambda tx: tx.start_run(r, o, t),
        st.sampled_from(["r-0", "r-1"]),
        owners,
        times,
    ),
    st.builds(
        lambda r, o, s, t: lambda tx: tx.finish_run(r, o, s, t, "OK", {"n": 1}, None, None),
        st.sampled_from(["r-0", "r-1"]),
        owners,
        run_states,
        times,
    ),
    st.builds(
        lambda r, s, t: lambda tx: tx.cancel_run(r, s, t, "stop"),
        st.sampled_from(["r-0", "r-1"]),
        run_states,
        times,
    ),
    st.builds(
        _recover, st.sampled_from(["r-0", "r-1"]), st.sampled_from(["queued", "failed"]), times
    ),
    st.builds(
        lambda e, a, t: lambda tx: tx.append_journal(JournalEntry(t, "event", e, a, "system")),
        events,
        st.sampled_from(["x", "y"]),
        times,
    ),
    st.lists(st.tuples(events, st.sampled_from(["x", "y"]), times), max_size=3).map(
        lambda specs: (
            lambda tx: tx.append_journals(
                [JournalEntry(t, "event", e, a, "system") for e, a, t in specs]
            )
        )
    ),
    st.builds(lambda t: lambda tx: tx.enqueue_outbox({"e": 1}, None, "chain", t), times),
    st.builds(lambda s, t: lambda tx: tx.mark_published(s, t), st.integers(1, 3), times),
    st.builds(
        lambda lo, on, t: lambda tx: tx.set_loop_enabled(lo, on, t, t),
        st.sampled_from(["a", "b"]),
        st.booleans(),
        times,
    ),
    st.builds(
        lambda lo, c, s, t: lambda tx: tx.advance_cursor(lo, c, s, t),
        st.sampled_from(["a", "b"]),
        times,
        st.one_of(st.none(), times),
        times,
    ),
    st.builds(
        lambda lo, p, t: lambda tx: tx.set_paused(lo, p, "n", None, t),
        st.sampled_from(["a", "b"]),
        st.booleans(),
        times,
    ),
    st.builds(
        lambda lo, f, t: lambda tx: tx.insert_skip(SkipRecord(lo, f, f, 1, "late", t)),
        st.sampled_from(["a", "b"]),
        times,
        times,
    ),
    st.builds(
        lambda lo, n, t: lambda tx: tx.set_loop_counters(lo, n, n, None, t),
        st.sampled_from(["a", "b"]),
        st.integers(0, 2),
        times,
    ),
    st.builds(
        _finding,
        st.sampled_from(["s-0", "s-1"]),
        st.sampled_from(["f-0", "f-1"]),
        times,
        json_values,
    ),
    st.builds(
        lambda f, a, b, t, e: lambda tx: tx.decide_finding(f, a, b, "operator:x", t, e),
        st.sampled_from(["f-0", "f-1"]),
        statuses,
        statuses,
        times,
        st.one_of(st.none(), events),
    ),
    st.builds(_notify, st.sampled_from(["n-0", "n-1"]), st.sampled_from(["up", "down"]), times),
    st.builds(
        lambda s, seen, t: lambda tx: tx.claim_notification(s, seen, t),
        st.integers(1, 3),
        st.one_of(st.none(), times),
        times,
    ),
    st.builds(_settle, st.integers(1, 3), st.sampled_from(DELIVERY_STATES), times),
    st.builds(_sink_row, st.integers(1, 3), st.sampled_from(["a", "b"]), times),
)

# Seldom true: most savepoints succeed and most transactions commit.
seldom = st.integers(0, 7).map(lambda n: n == 0)
# A transaction: steps, each in a savepoint that may fail after it; committed or not.
transactions = st.lists(
    st.tuples(st.lists(st.tuples(steps, seldom), max_size=12), seldom.map(lambda n: not n)),
    max_size=8,
)
# What every run starts from: the events and the loops the steps refer to.
SETUP: list[Step] = [
    *(
        _event(e, "a", "2026-11-30T10:00:00.000000Z", "2026-11-30T10:00:00.000000Z")
        for e in ("e-0", "e-1", "e-2", "e-3")
    ),
    *(
        lambda tx, lo=lo: tx.set_loop_enabled(
            lo, True, "2026-11-30T10:00:00.000000Z", "2026-11-30T10:00:00.000000Z"
        )
        for lo in ("a", "b")
    ),
]


class Abort(Exception):
    """Raised to roll a savepoint or a transaction back."""


def _apply(store: Store, work: list[tuple[list[tuple[Step, bool]], bool]]) -> list[Any]:
    """Run the transactions; what each step answered (or the kind of refusal)."""
    answers: list[Any] = []
    with store.write() as tx:
        for setup in SETUP:
            setup(tx)
    for tx_steps, commit in work:
        try:
            with store.write() as tx:
                for step, fail in tx_steps:
                    try:
                        with tx.savepoint():
                            answers.append(step(tx))
                            if fail:
                                raise Abort
                    except REFUSED as err:
                        answers.append(("refused", isinstance(err, ValueError)))
                    except Abort:
                        answers.append("rolled back")
                if not commit:
                    raise Abort
        except Abort:
            answers.append("transaction rolled back")
    return answers


def _dump(store: Store) -> dict[str, Any]:
    """Everything the store holds, through every view."""
    at = "2026-11-30T10:03:00.000000Z"
    with store.read() as tx:
        per_loop = {
            loop: (
                tx.loop_events(loop, at, 10),
                tx.last_loop_event(loop),
                tx.last_loop_run(loop),
                tx.loop_in_flight(loop),
                tx.open_loop_proposals(loop),
                tx.occurrences_of_loop(loop, at, 10),
                [tx.budget_usage(loop, repo, at) for repo in ("r", None)],
                [tx.active_occurrences(loop, repo, ACTIVE) for repo in ("r", None)],
                tx.list_skips(loop, at),
                tx.get_loop_state(loop),
            )
            for loop in ("a", "b")
        }
        return {
            "events": (tx.list_events(100), tx.unplanned_events(100)),
            "decisions": [tx.get_decision(e) for e in ("e-0", "e-1", "e-2", "e-3")],
            "occurrences": (tx.list_occurrences(100), tx.due_retries(at, 100)),
            "keys": [tx.get_occurrence_by_key(k) for k in ("k-0", "k-1")],
            "runs": (tx.list_runs(100), tx.expired_leases(at, 100), tx.get_run_by_key("k-0")),
            "proposals": (tx.list_proposals(100), tx.stale_proposals(at, 100)),
            "open": tx.open_proposals_by_loop(),
            "journal": tx.list_journal(100),
            "outbox": tx.pending_outbox(100),
            "loops": (tx.list_loop_states(), per_loop),
            "findings": (tx.list_findings(100), tx.get_finding_by_key("s-0")),
            "notifications": (
                tx.list_notifications(100),
                tx.pending_notifications(at, 100),
                tx.sink_deliveries(range(1, 4)),
                tx.page_notifications(NotificationQuery(delivery="pending", before=3), 100),
            ),
            "reports": (tx.counts(), tx.metrics_snapshot(), tx.run_timings(100)),
        }


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(work=transactions)
def test_the_memory_store_answers_as_sqlite_does(work: list[Any]) -> None:
    """Each step answers the same on both stores (the same value, or refused on both),
    and both hold the same data afterwards."""
    lite = SqliteStore(":memory:")
    memory = MemoryStore()
    try:
        assert _apply(memory, work) == _apply(lite, work)
        assert _dump(memory) == _dump(lite)
    finally:
        lite.close()
