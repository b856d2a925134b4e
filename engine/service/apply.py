"""The one writer of plans (docs/architecture.md, "Decide purely, apply once"): each
effect of an `engine.core.effects.Plan`, in order, in the caller's transaction. Nothing
here decides; an effect whose write depends on what is stored (an idempotent insert, a
compare-and-set) applies its follow-ups (`then`) only when the write took."""

from __future__ import annotations

from collections.abc import Iterable

from engine.core.decisions import Actor, Entity, JournalAction
from engine.core.effects import (
    Admit,
    Counters,
    Decide,
    DecideProposal,
    Effect,
    Journal,
    MarkPlanned,
    MoveBinding,
    Notify,
    OpenOccurrence,
    Outbox,
    PauseLoop,
    Propose,
    QueueRun,
    RecordFinding,
    Signal,
    Transition,
    WorkCommand,
)
from engine.core.records import JournalEntry, RunRecord
from engine.core.states import RunState
from engine.errors import Unprocessable
from engine.service import work
from engine.service.admission import admit_record, check
from engine.service.context import Runtime
from engine.store.ports import Tx


def apply(rt: Runtime, tx: Tx, plan: Iterable[Effect], at: str) -> None:
    """Write every effect of `plan` at instant `at`."""
    for effect in plan:
        _apply(rt, tx, effect, at)


def entry_of(rt: Runtime, j: Journal, at: str) -> JournalEntry:
    """The journal record a `Journal` effect appends at instant `at`."""
    return rt.entry(
        j.entity,
        j.entity_id,
        j.action,
        j.actor,
        from_state=j.from_state,
        to_state=j.to_state,
        note=j.note,
        data=j.data,
        at=at,
    )


def _apply(rt: Runtime, tx: Tx, effect: Effect, at: str) -> None:
    match effect:
        case Journal():
            tx.append_journal(entry_of(rt, effect, at))
        case MarkPlanned(event_id):
            tx.mark_planned(event_id)
        case Decide(record):
            tx.insert_decision(record)
        case OpenOccurrence(record):
            tx.open_occurrence(record)
        case Transition(event_id, expect, changes):
            tx.update_occurrence(event_id, expect, at, **changes)
        case Signal(event_id):
            tx.add_signal(event_id)
        case Propose(record, _, _, then):
            if tx.insert_proposal(record):
                apply(rt, tx, then, at)
        case DecideProposal(proposal_id, expect, to_state, actor, note, then):
            if tx.decide_proposal(proposal_id, expect, to_state, at, actor, note):
                apply(rt, tx, then, at)
        case QueueRun():
            queued(rt, tx, effect, at)
        case RecordFinding():
            _finding(rt, tx, effect, at)
        case Notify(record):
            tx.enqueue_notification(record)
        case Counters(loop, failures, streak, quiet):
            tx.set_loop_counters(loop, failures, streak, quiet, at)
        case PauseLoop(loop, why, then):
            if tx.set_paused(loop, True, why, Actor.SCHEDULE, at):
                apply(rt, tx, then, at)
        case Admit():
            _admit(rt, tx, effect, at)
        case Outbox(event, origin_run, actor):
            tx.enqueue_outbox(event, origin_run, actor, at)
        case WorkCommand():
            work.apply_command(rt, tx, effect, at)
        case MoveBinding():
            work.move_binding(rt, tx, effect, at)


def queued(rt: Runtime, tx: Tx, effect: QueueRun, at: str) -> RunRecord:
    """Queued once per idempotency key: journaled `queued`, or `converged` on the run
    that holds the key already; the run that holds it."""
    run = effect.record
    if tx.insert_run(run):
        rt.journal(
            tx,
            Entity.RUN,
            run.run_id,
            JournalAction.QUEUED,
            run.approved_by or Actor.SYSTEM,
            to_state=RunState.QUEUED,
            at=at,
            data={"event": run.event_id, "definition": run.definition, "key": run.idempotency_key},
        )
        return run
    existing = tx.get_run_by_key(run.idempotency_key)
    assert existing is not None
    rt.journal(
        tx,
        Entity.RUN,
        existing.run_id,
        JournalAction.CONVERGED,
        run.approved_by or Actor.SYSTEM,
        at=at,
        note=f"event {run.event_id} converged on the existing run for {run.idempotency_key}",
    )
    return existing


def _finding(rt: Runtime, tx: Tx, effect: RecordFinding, at: str) -> None:
    """One candidate per semantic key, counted each time it is seen."""
    finding, created = tx.upsert_finding(effect.record)
    rt.journal(
        tx,
        Entity.FINDING,
        finding.finding_id,
        JournalAction.RECORDED if created else JournalAction.SEEN_AGAIN,
        Actor.SYSTEM,
        at=at,
        note=effect.note,
        data={
            "key": finding.semantic_key,
            "occurrence": effect.occurrence,
            "count": finding.occurrence_count,
        },
    )


def _admit(rt: Runtime, tx: Tx, effect: Admit, at: str) -> None:
    """A trigger's tick, admitted unplanned and journaled `fired` on its cause; one that
    does not fit its type's input schema is journaled `trigger_refused` instead."""
    tick, (kind, cause) = effect.envelope, effect.cause
    loop = tick.payload.get("loop")
    try:
        checked = check(rt, tick)
    except Unprocessable as err:
        rt.journal(
            tx,
            kind,
            cause,
            JournalAction.TRIGGER_REFUSED,
            effect.actor,
            at=at,
            note=f"loop '{loop}': {'; '.join(err.errors)}",
            data={"eventId": tick.eventId},
        )
        return
    if admit_record(rt, tx, checked, effect.actor, at) is not None:
        rt.journal(
            tx,
            kind,
            cause,
            JournalAction.FIRED,
            effect.actor,
            at=at,
            note=f"fired loop '{loop}' ({tick.source})",
            data={"eventId": tick.eventId, "window": tick.payload.get("window")},
        )
