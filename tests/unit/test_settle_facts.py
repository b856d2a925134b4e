"""What settling and resuming read (engine/service/facts.py), on the in-memory store:
read before deciding, they are what the decision used to read after its own first
writes. The tree is tests/data/settle."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from engine.core.envelope import iso
from engine.core.records import EventRecord, OccurrenceRecord
from engine.core.ticks import idempotency_key, tick
from engine.core.validation import Validators
from engine.service.admission import admit_record
from engine.service.context import Runtime
from engine.service.facts import resume_facts, settle_facts
from engine.store.memory import MemoryStore
from tests.unit.test_settle import RULES, SLOT, run_of


def runtime() -> Runtime:
    """A runtime on an empty in-memory store whose loops are enabled."""
    rt = Runtime(MemoryStore(), RULES, Validators.build(RULES), lambda: SLOT)
    with rt.store.write() as tx:
        for name in RULES.loops:
            tx.set_loop_enabled(name, True, iso(SLOT), iso(SLOT))
    return rt


def opened(rt: Runtime, loop: str, hour: int, state: str, **fields: object) -> EventRecord:
    """An admitted tick of `loop` at SLOT + `hour` hours with its occurrence in `state`."""
    slot = SLOT + timedelta(hours=hour)
    with rt.store.write() as tx:
        event = admit_record(rt, tx, tick(RULES.loops[loop], slot, 0), "schedule", iso(slot))
        assert event is not None
        tx.open_occurrence(
            OccurrenceRecord(
                event_id=event.event_id,
                loop=loop,
                state=state,
                updated_at=iso(slot),
                occurrence_key=f"{loop}|r1|{iso(slot)}",
                repo="r1",
                window=iso(slot),
                created_at=iso(slot),
                **fields,  # type: ignore[arg-type]
            )
        )
    return event


def test_a_resumed_retry_reads_the_history_it_will_have_in_triage() -> None:
    """The previous occurrence triage reads is found among the loop's latest 50 with
    the resumed one among them (it moves to triage first), so an older waiting
    occurrence takes a place from the 50th: here the only concluded one."""
    rt = runtime()
    waiting = opened(
        rt, "budgeted", 0, "waiting_for_resource", decision="run_readonly_check", attempt=1
    )
    opened(rt, "budgeted", 1, "failed", decision="run_readonly_check")
    for hour in range(2, 51):
        opened(rt, "budgeted", hour, "cancelled", decision="run_readonly_check")
    with rt.store.write() as tx:
        tx.insert_run(run_of(waiting))
    with rt.store.read() as tx:
        occ = tx.get_occurrence(waiting.event_id)
        assert occ is not None
        facts = resume_facts(tx, RULES, occ, iso(SLOT + timedelta(hours=60)))
    assert facts.history is not None and facts.history.previous is None
    assert facts.active == 0  # the waiting one does not count itself


def test_settling_reads_the_run_that_settles_for_the_loops_after() -> None:
    """For a loop another one runs `after`, settling the occurrence's second run reads
    that run (`key#1`), as it was written, for the `after` filter."""
    rt = runtime()
    event = opened(rt, "nightly", 0, "work_dispatched", used={"runs": 1}, attempt=1)
    first = run_of(event)
    second = replace(
        first,
        run_id="run-nightly-1",
        idempotency_key=idempotency_key(event) + "#1",
        state="succeeded",
        outcome="OK",
    )
    with rt.store.write() as tx:
        tx.insert_run(first)
        tx.insert_run(second)
    with rt.store.read() as tx:
        facts = settle_facts(tx, RULES, second)
    assert facts.occurrence is not None and facts.occurrence.state == "work_dispatched"
    assert facts.ending.run is not None
    assert facts.ending.run.run_id == "run-nightly-1"
    assert facts.ending.correlation == event.event_id
