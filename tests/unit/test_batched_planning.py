"""The batched writer (engine/service/batch.py) decides and writes exactly what planning
one event at a time does: on generated streams of ticks over the loops of
tests/data/occurrence_engine (budgets, retries, coalescing, triage, findings, stop
conditions, shadow mode), `plan_all` leaves the same decisions, occurrences,
proposals, runs, findings, notifications, loop state and journal as `plan_safely` per
event; and the facts it carries from one event of a loop to the next are the facts a
fresh read would give."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.decide import carried, decide
from engine.core.envelope import iso
from engine.core.records import EventRecord, ProposalRecord
from engine.core.ticks import tick
from engine.core.validation import Validators
from engine.loading import Paths, load_rules
from engine.service.admission import admit_record
from engine.service.apply import apply
from engine.service.batch import Batch, plan_all
from engine.service.context import Runtime
from engine.service.facts import read_facts, read_facts_many
from engine.service.planning import plan_safely
from engine.store.memory import MemoryStore
from engine.store.memory_tx import MemoryTx
from engine.store.ports import Store, Tx
from engine.store.sqlite import SqliteStore

TREE = Path(__file__).resolve().parents[1] / "data" / "occurrence_engine"
T0 = datetime(2026, 12, 1, 10, tzinfo=UTC)
AT = iso(T0 + timedelta(hours=30))
RULES = load_rules(Paths(TREE / "loops", TREE / "registry", TREE / "config"))
LOOPS = sorted(name for name, loop in RULES.loops.items() if loop.enabled)

# A stream: (loop, hour) ticks in order; the same loop recurs, so facts carry or not.
streams = st.lists(st.tuples(st.sampled_from(LOOPS), st.integers(0, 5)), min_size=1, max_size=14)


def runtime(store: Store) -> Runtime:
    return Runtime(store, RULES, Validators.build(RULES), lambda: T0 + timedelta(hours=30))


def admitted(rt: Runtime, stream: list[tuple[str, int]]) -> list[EventRecord]:
    """The stream's ticks admitted unplanned (a repeated slot is admitted once)."""
    rows = []
    with rt.store.write() as tx:
        for name, hour in stream:
            envelope = tick(RULES.loops[name], T0 + timedelta(hours=hour), 0)
            row = admit_record(rt, tx, envelope, "schedule", AT)
            if row is not None:
                rows.append(row)
    return rows


def durable(tx: Tx, events: list[EventRecord]) -> dict[str, Any]:
    """Every record planning writes. The journal is compared entity by entity, in
    order: one batch orders different loops' entries by round, not by arrival."""
    journal = [replace(e, seq=0) for e in tx.list_journal(100_000)]
    by_entity: dict[tuple[str, str], list[Any]] = {}
    for entry in journal:
        by_entity.setdefault((entry.entity, entry.entity_id), []).append(entry)
    return {
        "decisions": [tx.get_decision(e.event_id) for e in events],
        "occurrences": sorted(tx.list_occurrences(10_000), key=lambda o: o.event_id),
        "proposals": sorted(tx.list_proposals(10_000), key=lambda p: p.proposal_id),
        "runs": sorted(tx.list_runs(10_000), key=lambda r: r.run_id),
        "findings": sorted(tx.list_findings(10_000), key=lambda f: f.finding_id),
        "notifications": sorted(
            (replace(n, seq=0) for n in tx.list_notifications(10_000)), key=repr
        ),
        "loops": tx.list_loop_states(),
        "journal": by_entity,
        "unplanned": tx.unplanned_events(10),
    }


def planned_both_ways(
    one: Runtime, batched: Runtime, stream: list[tuple[str, int]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    singles, many = admitted(one, stream), admitted(batched, stream)
    with one.store.write() as tx:
        for event in singles:
            plan_safely(one, tx, event, AT)
    with batched.store.write() as tx:
        plan_all(batched, Batch(batched, tx, AT), many)
    with one.store.read() as a, batched.store.read() as b:
        return durable(a, singles), durable(b, many)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams)
def test_a_batch_writes_what_one_event_at_a_time_writes(stream: list[tuple[str, int]]) -> None:
    """Planning a stream in one batch leaves the same records as planning its events
    one by one: what an operator reads after a wave does not depend on the writer."""
    alone, batched = planned_both_ways(runtime(MemoryStore()), runtime(MemoryStore()), stream)
    assert batched == alone


def test_the_same_on_a_sqlite_file(tmp_path: Path) -> None:
    """The batched rows go through the SQL of the batch (executemany, JSON-array
    reads) on a real SQLite file and read back as the one-row path writes them."""
    stream = [(name, hour) for hour in range(3) for name in LOOPS]
    stores = SqliteStore(tmp_path / "one.db"), SqliteStore(tmp_path / "batched.db")
    try:
        alone, batched = planned_both_ways(runtime(stores[0]), runtime(stores[1]), stream)
    finally:
        for store in stores:
            store.close()
    assert batched == alone
    assert any(d is not None and d.kind == "propose" for d in batched["decisions"]) or any(
        batched["runs"]
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams)
def test_carried_facts_are_what_a_fresh_read_gives(stream: list[tuple[str, int]]) -> None:
    """Whenever `carried` answers facts for a loop's next event, they equal the facts
    read from the store once the plan is written: a batch never decides on facts a
    read would contradict."""
    rt = runtime(MemoryStore())
    events = admitted(rt, stream)
    for event, nxt in itertools.pairwise(events):
        with rt.store.write() as tx:
            facts = read_facts(tx, RULES, event, AT)
            plan = decide(event, RULES, facts, rt.lifecycle, AT)
            apply(rt, tx, plan, AT)
            loop = RULES.loops[event.loop] if event.loop else None
            after = carried(RULES, loop, event, facts, plan) if loop else None
            if after is None or nxt.loop != event.loop:
                continue
            fresh = read_facts(tx, RULES, nxt, AT)
            assert replace(after, existing=fresh.existing, decided=fresh.decided) == fresh


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams)
def test_facts_read_together_are_facts_read_alone(stream: list[tuple[str, int]]) -> None:
    """One read per kind of fact for a round's events (one per loop) gives each event
    the facts `read_facts` gives it alone."""
    rt = runtime(MemoryStore())
    events = admitted(rt, stream)
    heads = list({e.loop: e for e in reversed(events)}.values())
    with rt.store.read() as tx:
        assert read_facts_many(tx, RULES, heads, AT) == [
            read_facts(tx, RULES, e, AT) for e in heads
        ]


def test_a_round_whose_write_fails_is_written_plan_by_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the batched write of a round fails (here the many-row insert of
    proposals), the round is rolled back and written one plan at a time: a plan whose
    own write fails is decided `planning_error` and the others are planned as if
    alone, exactly as planning one event at a time leaves them."""
    stream = [(name, hour) for hour in range(2) for name in LOOPS]
    poison = admitted(runtime(MemoryStore()), stream)[3].event_id
    real_insert = MemoryTx.insert_proposal

    def insert_proposal(self: MemoryTx, proposal: ProposalRecord) -> bool:
        if proposal.event_id == poison:
            raise RuntimeError("boom")
        return real_insert(self, proposal)

    def insert_proposals(self: MemoryTx, proposals: Sequence[ProposalRecord]) -> None:
        if proposals:
            raise RuntimeError("the batch's statement failed")

    monkeypatch.setattr(MemoryTx, "insert_proposal", insert_proposal)
    monkeypatch.setattr(MemoryTx, "insert_proposals", insert_proposals)
    alone, batched = planned_both_ways(runtime(MemoryStore()), runtime(MemoryStore()), stream)
    assert batched == alone
    failed = [d for d in batched["decisions"] if d is not None and d.reason == "planning_error"]
    assert [d.event_id for d in failed] == [poison]
