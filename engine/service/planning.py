"""Planning: each admitted event gets exactly one persisted Decision, and with it a
proposal or a run, before anything runs. Safe to run in several processes at once:
a decision is unique per event and a run unique per idempotency key."""

from __future__ import annotations

import logging

from engine.core.decisions import Decision, DecisionKind, NoopReason
from engine.core.envelope import Envelope, parse_iso
from engine.core.planner import Snapshot, plan
from engine.core.records import (
    DecisionRecord,
    EventRecord,
    ProposalRecord,
    RunRecord,
)
from engine.core.ruleset import CatchUp
from engine.core.states import ProposalState
from engine.service.context import Runtime, stable_id
from engine.store.ports import Tx

log = logging.getLogger("engine.planning")

BATCH = 500
# Sources whose loop events are a slot's firing; a manual run-now is its own event.
SLOT_SOURCES = frozenset({"schedule", "bridge"})


def envelope_of(event: EventRecord) -> Envelope:
    """The envelope of a stored event (validated when it was admitted)."""
    return Envelope.model_construct(
        eventId=event.event_id,
        type=event.type,
        source=event.source,
        subject=event.subject,
        occurredAt=parse_iso(event.occurred_at),
        correlationId=event.correlation_id,
        payload=event.payload,
    )


def idempotency_key(event: EventRecord) -> str:
    """Loop plus slot for a tick, so an approved tick and a replayed one converge;
    otherwise the event's own id (already scoped, e.g. merge-pr:<repo>:<pr>:<sha>)."""
    slot = event.payload.get("slot")
    if event.loop is not None and event.source in SLOT_SOURCES and isinstance(slot, str):
        return f"loop:{event.loop}:{slot}"
    return f"event:{event.event_id}"


def plan_pending(rt: Runtime, limit: int = BATCH) -> int:
    """Plan up to `limit` unplanned events in one transaction; the number planned."""
    with rt.store.write() as tx:
        events = tx.unplanned_events(limit)
        at = rt.now()  # one instant for the batch: it commits at once
        for event in events:
            plan_safely(rt, tx, event, at)
    return len(events)


def plan_safely(rt: Runtime, tx: Tx, event: EventRecord, at: str, **known: bool) -> None:
    """`plan_one` in a savepoint: an event whose planning fails is decided NOOP
    `planning_error` (visible, journaled, nothing runs) instead of rolling back, and
    blocking, every other event of the batch."""
    try:
        with tx.savepoint():
            plan_one(rt, tx, event, at, **known)
    except Exception as err:
        log.exception("planning event %s failed; recorded as planning_error", event.event_id)
        _planning_failed(rt, tx, event, at, err)


def _planning_failed(rt: Runtime, tx: Tx, event: EventRecord, at: str, err: Exception) -> None:
    if not event.planned:
        tx.mark_planned(event.event_id)
    note = f"planning failed: {err}"
    tx.insert_decision(
        DecisionRecord(
            event.event_id,
            DecisionKind.NOOP.value,
            NoopReason.PLANNING_ERROR.value,
            None,
            event.loop,
            None,
            False,
            False,
            None,
            note,
            rt.rules.digest,
            at,
        )
    )
    tx.set_occurrence(event.event_id, event.loop, "failed", at)
    rt.journal(
        tx,
        "occurrence",
        event.event_id,
        "decided:noop",
        "system",
        from_state="created",
        to_state="failed",
        note=note,
        at=at,
        data={"reason": NoopReason.PLANNING_ERROR.value},
    )


def plan_one(
    rt: Runtime, tx: Tx, event: EventRecord, at: str, *, paused: bool | None = None
) -> Decision | None:
    """Decide one event and persist the decision with its proposal or run. An event
    stored as planned (the scheduler admits and plans a tick in one commit) is fresh:
    nobody else can have decided it. `paused`, when the caller knows it, saves a read."""
    if not event.planned:
        tx.mark_planned(event.event_id)
        if tx.get_decision(event.event_id) is not None:
            return None  # another process planned it first
    envelope = envelope_of(event)
    if paused is None:
        state = tx.get_loop_state(event.loop) if event.loop is not None else None
        paused = state is not None and state.paused
    snapshot = Snapshot(
        loop_in_flight=event.loop is not None and tx.loop_in_flight(event.loop),
        loop_paused=paused,
    )
    decision = plan(envelope, rt.rules, snapshot)
    tx.insert_decision(
        DecisionRecord(
            event_id=event.event_id,
            kind=decision.kind.value,
            reason=decision.reason.value if decision.reason else None,
            definition=decision.definition,
            loop=decision.loop,
            approved_by=decision.approved_by,
            human_only=decision.human_only,
            mutating=decision.mutating,
            rule=str(decision.rule) if decision.rule else None,
            note=decision.note,
            rules_digest=rt.rules.digest,
            decided_at=at,
        )
    )
    _occurrence(rt, tx, event, decision, at)
    if decision.kind is DecisionKind.PROPOSE:
        _propose(rt, tx, event, decision, at)
    elif decision.kind is DecisionKind.RUN:
        _auto_run(rt, tx, event, decision, at)
    return decision


_TRIGGER = {
    DecisionKind.NOOP: "noop",
    DecisionKind.PROPOSE: "propose",
    DecisionKind.RUN: "dispatch",
    DecisionKind.SHADOW: "record_shadow",
}


def _occurrence(rt: Runtime, tx: Tx, event: EventRecord, decision: Decision, at: str) -> None:
    lc = rt.lifecycle
    state = lc.occurrence(event.loop, event.type, "created", "triage")
    state = lc.occurrence(
        event.loop, event.type, state, _TRIGGER[decision.kind], no_run_in_flight=True
    )
    tx.set_occurrence(event.event_id, event.loop, state, at)
    rt.journal(
        tx,
        "occurrence",
        event.event_id,
        f"decided:{decision.kind.value}",
        "system",
        from_state="created",
        to_state=state,
        note=decision.note,
        at=at,
        data={
            "reason": decision.reason.value if decision.reason else None,
            "definition": decision.definition,
            "loop": decision.loop,
            "rule": str(decision.rule) if decision.rule else None,
        },
    )


def _proposal_record(event: EventRecord, decision: Decision, state: str, at: str) -> ProposalRecord:
    assert decision.definition is not None
    return ProposalRecord(
        proposal_id=stable_id("prop", event.event_id),
        event_id=event.event_id,
        loop=event.loop,
        definition=decision.definition,
        state=state,
        human_only=decision.human_only,
        mutating=decision.mutating,
        created_at=at,
    )


def _propose(rt: Runtime, tx: Tx, event: EventRecord, decision: Decision, at: str) -> None:
    proposal = _proposal_record(event, decision, ProposalState.OPEN, at)
    if event.loop is not None:
        _supersede_older(rt, tx, event, proposal.proposal_id, at)
    if tx.insert_proposal(proposal):
        rt.journal(
            tx,
            "proposal",
            proposal.proposal_id,
            "opened",
            "system",
            to_state="open",
            at=at,
            note=decision.note,
            data={"event": event.event_id, "definition": decision.definition},
        )


def _supersede_older(rt: Runtime, tx: Tx, event: EventRecord, newer: str, at: str) -> None:
    """An unapproved proposal must not silence a loop: under catch-up none or last, a
    newer slot's proposal supersedes the loop's older open ones (a stale tick is not
    worth approving). Under `all` every slot counts, so they stay open; the doctor
    reports a pile-up."""
    assert event.loop is not None
    loop = rt.rules.loops.get(event.loop)
    if loop is None or loop.catch_up is CatchUp.ALL:
        return
    for old in tx.open_loop_proposals(event.loop):
        state = rt.lifecycle.proposal(old.human_only, old.state, "supersede")
        if not tx.decide_proposal(
            old.proposal_id, "open", state, at, "system", f"superseded by {newer}"
        ):
            continue
        rt.journal(
            tx,
            "proposal",
            old.proposal_id,
            "superseded",
            "system",
            from_state="open",
            to_state=state,
            note=f"a newer slot of loop '{event.loop}' proposed {newer}",
            at=at,
        )
        old_event = tx.get_event(old.event_id)
        current = tx.get_occurrence_state(old.event_id)
        if old_event is not None and current == "awaiting_approval":
            moved = rt.lifecycle.proposed(old.human_only, current, "supersede")
            tx.set_occurrence(old.event_id, old_event.loop, moved, at)


def _auto_run(rt: Runtime, tx: Tx, event: EventRecord, decision: Decision, at: str) -> None:
    """An earned auto-approval: the proposal record says who approved it (the loop's
    `schedule`, or `system` for a route rule), never an operator."""
    assert decision.approved_by is not None
    actor = decision.approved_by
    proposal = _proposal_record(event, decision, ProposalState.OPEN, at)
    if tx.insert_proposal(proposal):
        approved = rt.lifecycle.proposal(
            decision.human_only, "open", "approve", actor_is_human=False
        )
        tx.decide_proposal(proposal.proposal_id, "open", approved, at, actor, decision.note)
        rt.journal(
            tx,
            "proposal",
            proposal.proposal_id,
            "approved",
            actor,
            from_state="open",
            to_state=approved,
            at=at,
            note=decision.note,
        )
    queue_run(rt, tx, event, proposal.proposal_id, actor, at)


def queue_run(
    rt: Runtime, tx: Tx, event: EventRecord, proposal_id: str | None, actor: str, at: str
) -> RunRecord:
    """Create the run for an approved event (once per idempotency key) and journal it."""
    decision = tx.get_decision(event.event_id)
    assert decision is not None and decision.definition is not None
    key = idempotency_key(event)
    run = RunRecord(
        run_id=stable_id("run", key),
        idempotency_key=key,
        event_id=event.event_id,
        proposal_id=proposal_id,
        loop=event.loop,
        definition=decision.definition,
        state="queued",
        approved_by=actor,
        attempts=0,
        lease_owner=None,
        lease_expires_at=None,
        created_at=at,
    )
    if tx.insert_run(run):
        rt.journal(
            tx,
            "run",
            run.run_id,
            "queued",
            actor,
            to_state="queued",
            at=at,
            data={"event": event.event_id, "definition": run.definition, "key": key},
        )
        return run
    existing = tx.get_run_by_key(key)
    assert existing is not None
    rt.journal(
        tx,
        "run",
        existing.run_id,
        "converged",
        actor,
        at=at,
        note=f"event {event.event_id} converged on the existing run for {key}",
    )
    return existing
