"""Resuming occurrences that wait (an infrastructure failure's backoff, a conflict's
wait; docs/occurrences.md#failures-backoff-and-the-circuit-breaker) and recovering the occurrence
index after a restart (docs/occurrences.md#recovery-after-a-restart). Both work only from durable
boundaries: the occurrence rows, their runs and the journal."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from engine.core import occurrence as occ_core
from engine.core.decisions import Actor, Entity, JournalAction
from engine.core.records import OccurrenceRecord
from engine.core.resume import resume
from engine.core.settle import Finished, run_key, runs_of
from engine.core.states import OccurrenceState, OccurrenceTrigger, RunState
from engine.service import occurrences
from engine.service.apply import apply
from engine.service.context import Runtime
from engine.service.facts import resume_facts
from engine.store.ports import Tx

log = logging.getLogger("engine.occurrences")

BATCH = 100
RUN_TERMINAL = frozenset(
    {RunState.SUCCEEDED, RunState.FAILED, RunState.TIMED_OUT, RunState.CANCELLED}
)

# Occurrences that are nothing without their decision: orphaned when none was persisted.
_UNDECIDED = (OccurrenceState.CREATED, OccurrenceState.TRIAGING)


def resume_due(rt: Runtime, limit: int = BATCH) -> int:
    """Re-triage every waiting occurrence whose retry time has come, from a fresh
    snapshot, and dispatch its job again when triage, the stop conditions and the
    budget still allow it. The number resumed."""
    with rt.store.write() as tx:
        due = tx.due_retries(rt.now(), limit)
        for occ in due:
            _resume(rt, tx, occ, rt.now())
        return len(due)


def _resume(rt: Runtime, tx: Tx, occ: OccurrenceRecord, at: str) -> None:
    """Read facts, decide (engine.core.resume), apply."""
    facts = resume_facts(tx, rt.rules, occ, at)
    apply(rt, tx, resume(occ, rt.rules, facts, rt.lifecycle, at), at)


# ---- recovery after a restart ----------------------------------------------------------------


@dataclass
class Recovery:
    active: int = 0
    settled: list[str] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)


def recover(rt: Runtime, limit: int = 10_000) -> Recovery:
    """At startup (docs/occurrences.md#recovery-after-a-restart): rebuild the active occurrence
    index from the table; settle a dispatched occurrence whose run already ended (its settlement was
    lost with the process that finished it); end as failed an occurrence left `created` or
    `triaging` with no decision. Completed decisions and outcomes are never touched; waiting
    occurrences resume from their persisted retry time."""
    found = Recovery()
    with rt.store.write() as tx:
        at = rt.now()
        for state in (*occ_core.ACTIVE, OccurrenceState.CREATED):
            for occ in tx.list_occurrences(limit, state=state):
                found.active += 1
                if state == OccurrenceState.WORK_DISPATCHED:
                    _settle_lost(rt, tx, occ, at, found)
                elif state in _UNDECIDED and tx.get_decision(occ.event_id) is None:
                    _orphan(rt, tx, occ, at, found)
    if found.settled or found.orphaned:
        log.info(
            "recovered occurrences: %s settled, %s orphaned",
            len(found.settled),
            len(found.orphaned),
        )
    return found


def _settle_lost(rt: Runtime, tx: Tx, occ: OccurrenceRecord, at: str, found: Recovery) -> None:
    event = tx.get_event(occ.event_id)
    if event is None:
        return
    run = tx.get_run_by_key(run_key(event, runs_of(occ)))
    if run is None or run.state not in RUN_TERMINAL:
        return
    adapter_failed = run.state != RunState.SUCCEEDED and run.outcome is None
    cancelled = run.state == RunState.CANCELLED
    finished = Finished(
        run,
        run.state,
        run.outcome,
        adapter_failed,
        cancelled_by="recovery" if cancelled else None,
    )
    occurrences.settle(rt, tx, finished, at)
    rt.journal(
        tx,
        Entity.OCCURRENCE,
        occ.event_id,
        JournalAction.RECOVERED,
        Actor.SYSTEM,
        at=at,
        note=f"settled from run {run.run_id} ({run.state}) after a restart",
    )
    found.settled.append(occ.event_id)


def _orphan(rt: Runtime, tx: Tx, occ: OccurrenceRecord, at: str, found: Recovery) -> None:
    state = rt.lifecycle.dispatched(occ.state, OccurrenceTrigger.FAIL)
    tx.update_occurrence(occ.event_id, occ.state, at, state=state, finished_at=at)
    rt.journal(
        tx,
        Entity.OCCURRENCE,
        occ.event_id,
        JournalAction.RECOVERED,
        Actor.SYSTEM,
        from_state=occ.state,
        to_state=state,
        at=at,
        note="orphaned: no decision was persisted",
    )
    found.orphaned.append(occ.event_id)
