"""Resuming occurrences that wait (an infrastructure failure's backoff, a conflict's
wait) and recovering the occurrence index after a restart (seed 2 §13, §21). Both work
only from durable boundaries: the occurrence rows, their runs and the journal."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from engine.core import occurrence as occ_core
from engine.core.decide import envelope_of, ref_of
from engine.core.decisions import DecisionKind
from engine.core.planner import Snapshot, loop_of, plan
from engine.core.records import OccurrenceRecord
from engine.core.ticks import idempotency_key
from engine.core.triage import TriageDecision, triage
from engine.service import occurrences
from engine.service.context import Runtime
from engine.service.facts import counted_active
from engine.service.planning import queue_run
from engine.store.ports import Tx

log = logging.getLogger("engine.occurrences")

BATCH = 100
RUN_TERMINAL = frozenset({"succeeded", "failed", "timed_out", "cancelled"})


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
    event = tx.get_event(occ.event_id)
    first = tx.get_run_by_key(idempotency_key(event)) if event is not None else None
    if event is None or first is None:
        _end(rt, tx, occ, "fail", at, "nothing to retry: the event or its run is gone")
        return
    envelope = envelope_of(event)
    loop = loop_of(envelope, event.admitted_by, rt.rules)
    triaging = rt.lifecycle.dispatched(occ.state, "resume")
    tx.update_occurrence(occ.event_id, occ.state, at, state=triaging, retry_at=None)
    rt.journal(
        tx,
        "occurrence",
        occ.event_id,
        "resumed",
        "system",
        from_state=occ.state,
        to_state=triaging,
        at=at,
        data={"attempt": occ.attempt},
    )
    loop_state = tx.get_loop_state(loop.name) if loop is not None else None
    in_flight = loop is not None and tx.loop_in_flight(loop.name)
    paused = loop_state is not None and loop_state.paused
    decision = plan(
        envelope, event.admitted_by, rt.rules, Snapshot(loop_in_flight=False, loop_paused=paused)
    )
    moved = tx.get_occurrence(occ.event_id)
    assert moved is not None
    if decision.kind is DecisionKind.NOOP or decision.definition is None:
        _end(rt, tx, moved, "cancel", at, decision.note or "the loop no longer dispatches it")
        return
    definition = rt.rules.definitions[ref_of(decision.definition)]
    ident = occ_core.Identity(occ.occurrence_key or "", occ.repo, occ.window or "")
    snap = (
        occurrences.snapshot(
            rt,
            tx,
            loop,
            event,
            ident,
            loop_state,
            in_flight,
            max(0, len(counted_active(tx, loop, ident.repo)) - 1),  # not itself
            at,
        )
        if loop is not None
        else occ_core.minimal_snapshot(rt.rules, event, ident, at)
    )
    result = triage(loop, definition.mutating, snap) if loop is not None else None
    if result is not None:
        gate = occ_core.gate(rt.rules, loop, definition, result, snap)
        if gate is not None:
            if result.decision is TriageDecision.CREATE_CANDIDATE_FINDING:
                occurrences.record_finding(rt, tx, moved, result, at)
            _end(rt, tx, moved, gate.trigger, at, gate.note)
            return
    dispatched = rt.lifecycle.dispatched(triaging, "dispatch")
    reserved = occ_core.reservation(loop, definition) if loop is not None else None
    tx.update_occurrence(
        occ.event_id,
        triaging,
        at,
        state=dispatched,
        reserved=reserved,
        decision=result.decision.value if result is not None else moved.decision,
    )
    run = queue_run(rt, tx, event, first.proposal_id, first.approved_by, at, attempt=runs_of(occ))
    rt.journal(
        tx,
        "occurrence",
        occ.event_id,
        "redispatched",
        "system",
        from_state=triaging,
        to_state=dispatched,
        at=at,
        data={"run": run.run_id, "attempt": occ.attempt},
    )


def runs_of(occ: OccurrenceRecord) -> int:
    """How many of the occurrence's runs have settled: the next run's number (its
    idempotency key is the first run's, `#N` from the second on)."""
    return int((occ.used or {}).get("runs", 0))


def _end(rt: Runtime, tx: Tx, occ: OccurrenceRecord, trigger: str, at: str, note: str) -> None:
    occurrences.conclude(rt, tx, occ, trigger, at, note)


# ---- recovery after a restart ----------------------------------------------------------------


@dataclass
class Recovery:
    active: int = 0
    settled: list[str] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)


def recover(rt: Runtime, limit: int = 10_000) -> Recovery:
    """Seed 2 §21 at startup: rebuild the active occurrence index from the table;
    settle a dispatched occurrence whose run already ended (its settlement was lost
    with the process that finished it); end as failed an occurrence left `created` or
    `triaging` with no decision. Completed decisions and outcomes are never touched;
    waiting occurrences resume from their persisted retry time."""
    found = Recovery()
    with rt.store.write() as tx:
        at = rt.now()
        for state in (*occ_core.ACTIVE, "created"):
            for occ in tx.list_occurrences(limit, state=state):
                found.active += 1
                if state == "work_dispatched":
                    _settle_lost(rt, tx, occ, at, found)
                elif state in ("created", "triaging") and tx.get_decision(occ.event_id) is None:
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
    n = runs_of(occ)
    key = idempotency_key(event) + (f"#{n}" if n else "")
    run = tx.get_run_by_key(key)
    if run is None or run.state not in RUN_TERMINAL:
        return
    adapter_failed = run.state != "succeeded" and run.outcome is None
    cancelled = run.state == "cancelled"
    occurrences.settle(
        rt,
        tx,
        run,
        run.state,
        run.outcome,
        adapter_failed,
        at,
        cancelled_by="recovery" if cancelled else None,
    )
    rt.journal(
        tx,
        "occurrence",
        occ.event_id,
        "recovered",
        "system",
        at=at,
        note=f"settled from run {run.run_id} ({run.state}) after a restart",
    )
    found.settled.append(occ.event_id)


def _orphan(rt: Runtime, tx: Tx, occ: OccurrenceRecord, at: str, found: Recovery) -> None:
    state = rt.lifecycle.dispatched(occ.state, "fail")
    tx.update_occurrence(occ.event_id, occ.state, at, state=state, finished_at=at)
    rt.journal(
        tx,
        "occurrence",
        occ.event_id,
        "recovered",
        "system",
        from_state=occ.state,
        to_state=state,
        at=at,
        note="orphaned: no decision was persisted",
    )
    found.orphaned.append(occ.event_id)
