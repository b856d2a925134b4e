"""Planning: each admitted event gets exactly one persisted Decision, and with it a
proposal or a run, before anything runs. Safe to run in several processes at once:
a decision is unique per event and a run unique per idempotency key."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from engine.core.decisions import Decision, DecisionKind, NoopReason
from engine.core.envelope import Envelope, parse_iso
from engine.core.planner import Snapshot, loop_of, plan
from engine.core.records import (
    DecisionRecord,
    EventRecord,
    LoopState,
    OccurrenceRecord,
    ProposalRecord,
    RunRecord,
)
from engine.core.ruleset import CatchUp, DefinitionRef, Loop, OnActive
from engine.core.states import ProposalState
from engine.core.ticks import SLOT_SOURCES, WATCH_SOURCE
from engine.core.triage import Triage, TriageDecision, default_decision, triage
from engine.errors import Unavailable
from engine.service import occurrences
from engine.service.context import Runtime, stable_id
from engine.service.notifications import notify
from engine.store.ports import Tx

log = logging.getLogger("engine.planning")

BATCH = 500


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
    change = event.payload.get("window")
    if event.loop is not None and event.source == WATCH_SOURCE and isinstance(change, str):
        return f"loop:{event.loop}:{change}"
    return f"event:{event.event_id}"


def plan_pending(rt: Runtime, limit: int = BATCH) -> int:
    """Plan up to `limit` unplanned events in one transaction; the number planned."""
    with rt.store.write() as tx:
        events = tx.unplanned_events(limit)
        at = rt.now()  # one instant for the batch: it commits at once
        for event in events:
            plan_safely(rt, tx, event, at)
    return len(events)


def plan_safely(rt: Runtime, tx: Tx, event: EventRecord, at: str, **known: Any) -> None:
    """`plan_one` in a savepoint: an event whose planning fails is decided NOOP
    `planning_error` (visible, journaled, nothing runs) instead of rolling back, and
    blocking, every other event of the batch."""
    try:
        with tx.savepoint():
            plan_one(rt, tx, event, at, **known)
    except Unavailable:  # the store's fault, not the event's: the batch is tried again
        raise
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
    rt: Runtime,
    tx: Tx,
    event: EventRecord,
    at: str,
    *,
    paused: bool | None = None,
    state: LoopState | None = None,
) -> Decision | None:
    """Decide one event and persist the decision, its occurrence (with the triage
    decision and evidence) and its proposal or run, before anything runs. An event
    stored as planned (the scheduler admits and plans a tick in one commit) is fresh:
    nobody else can have decided it. `paused` and the loop's `state`, when the caller
    (the scheduler) has just read them, save reads."""
    if not event.planned:
        tx.mark_planned(event.event_id)
        if tx.get_decision(event.event_id) is not None:
            return None  # another process planned it first
    envelope = envelope_of(event)
    loop = loop_of(envelope, event.admitted_by, rt.rules)
    ident = occurrences.identity(event, loop)
    existing = tx.get_occurrence_by_key(ident.key)
    if existing is not None and existing.event_id != event.event_id:
        note = f"the window already has occurrence {existing.event_id}"
        return _fold(rt, tx, event, loop, existing, NoopReason.DUPLICATE_OCCURRENCE, note, at)
    if state is None and loop is not None:
        state = tx.get_loop_state(loop.name)
    if paused is None:
        paused = state is not None and state.paused
    in_flight = loop is not None and tx.loop_in_flight(loop.name)
    active = None
    active_now = 0
    if loop is not None and loop.enabled and not paused:
        active, active_now = occurrences.active_limit_reached(tx, loop, ident)
        if active and loop.on_active is OnActive.COALESCE:
            count = tx.add_signal(active[0].event_id)
            note = f"coalesced into active occurrence {active[0].event_id} ({count} pending)"
            return _fold(rt, tx, event, loop, active[0], NoopReason.COALESCED, note, at)
    decision = plan(
        envelope,
        event.admitted_by,
        rt.rules,
        Snapshot(loop_in_flight=in_flight, loop_paused=paused),
    )
    if loop is not None and decision.kind is not DecisionKind.NOOP:
        if active:
            skip = loop.on_active is OnActive.SKIP
            reason = NoopReason.SKIPPED_ACTIVE if skip else NoopReason.OCCURRENCE_ACTIVE
            verb = "skipped" if skip else "returned to the active"
            note = (
                f"loop '{loop.name}' is at its active limit: {verb} occurrence {active[0].event_id}"
            )
            return _fold(rt, tx, event, loop, active[0], reason, note, at)
        if state is not None and state.quiet_until and at < state.quiet_until:
            decision = _noop(
                decision,
                NoopReason.QUIET_BACKOFF,
                f"{state.nothing_streak} nothing_to_do in a row: quiet until {state.quiet_until}",
            )
    tx.open_occurrence(
        OccurrenceRecord(
            event_id=event.event_id,
            loop=loop.name if loop is not None else event.loop,
            state="created",
            updated_at=at,
            occurrence_key=ident.key,
            repo=ident.repo,
            window=ident.window,
            created_at=at,
        )
    )
    if decision.kind is DecisionKind.NOOP:
        _persist(rt, tx, event, decision, at)
        _occurrence(rt, tx, event, decision, at, "noop")
        return decision
    definition = rt.rules.definitions[ref_of(decision.definition)]
    snap = (
        occurrences.snapshot(rt, tx, loop, event, ident, state, in_flight, active_now, at)
        if loop is not None
        else occurrences.minimal_snapshot(rt, event, ident, at)
    )
    result = (
        triage(loop, definition.mutating, snap)
        if loop is not None
        else Triage(default_decision(definition.mutating), "", None, evidence={})
    )
    gate = occurrences.gate(rt, loop, definition, result, snap)
    if gate is not None:
        return _gated(
            rt, tx, event, loop, _noop(decision, gate.reason, gate.note), result, gate, at
        )
    _persist(rt, tx, event, decision, at)
    if decision.kind is DecisionKind.SHADOW:
        _occurrence(
            rt,
            tx,
            event,
            decision,
            at,
            _TRIGGER[decision.kind],
            result,
            would_dispatch=decision.definition,
        )
        return decision
    reserved = occurrences.reservation(loop, definition) if loop is not None else None
    _occurrence(rt, tx, event, decision, at, _TRIGGER[decision.kind], result, reserved=reserved)
    if decision.kind is DecisionKind.PROPOSE:
        _propose(rt, tx, event, decision, at)
    elif decision.kind is DecisionKind.RUN:
        _auto_run(rt, tx, event, decision, at)
    return decision


def _gated(
    rt: Runtime,
    tx: Tx,
    event: EventRecord,
    loop: Loop | None,
    decision: Decision,
    result: Triage,
    gate: occurrences.Gate,
    at: str,
) -> Decision:
    """Triage, a stop condition or the budget ended the occurrence before dispatch:
    persist the no-op, record what triage found (a finding, release readiness), count
    the end, and pause the loop on a stop that waits for a person."""
    _persist(rt, tx, event, decision, at)
    _occurrence(rt, tx, event, decision, at, gate.trigger, result)
    occ = tx.get_occurrence(event.event_id)
    assert occ is not None
    if result.decision is TriageDecision.CREATE_CANDIDATE_FINDING:
        occurrences.record_finding(rt, tx, occ, result, at)
    if result.decision is TriageDecision.RELEASE_READY:
        notify(
            rt,
            tx,
            "occurrence",
            "release_ready",
            result.note,
            loop=occ.loop,
            repo=occ.repo,
            links={"occurrence": occ.event_id},
            at=at,
        )
    occurrences.concluded(rt, tx, occ, None, at, gate.note)
    if loop is not None and gate.condition in occurrences.PAUSING:
        occurrences.pause_for(rt, tx, loop, gate.condition, occ, at)
    return decision


def ref_of(text: str | None) -> DefinitionRef:
    assert text is not None
    ident, _, version = text.partition("@")
    return DefinitionRef(ident, int(version or 0))


def _noop(decision: Decision, reason: NoopReason, note: str) -> Decision:
    return replace(decision, kind=DecisionKind.NOOP, reason=reason, approved_by=None, note=note)


def _persist(rt: Runtime, tx: Tx, event: EventRecord, decision: Decision, at: str) -> None:
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


def _fold(
    rt: Runtime,
    tx: Tx,
    event: EventRecord,
    loop: Loop | None,
    into: OccurrenceRecord,
    reason: NoopReason,
    note: str,
    at: str,
) -> Decision:
    """A trigger that opens no occurrence of its own: decided NOOP and journaled on the
    occurrence it folded into (duplicate, returned to the active one, coalesced), or,
    skipped, on the event alone: the active occurrence does not hear of it."""
    decision = Decision(
        DecisionKind.NOOP,
        reason,
        None,
        loop.name if loop else None,
        None,
        False,
        False,
        loop.origin if loop else None,
        note,
    )
    _persist(rt, tx, event, decision, at)
    action = {
        NoopReason.DUPLICATE_OCCURRENCE: "duplicate_occurrence",
        NoopReason.COALESCED: "coalesced",
        NoopReason.SKIPPED_ACTIVE: "skipped_active",
    }.get(reason, "returned_active")
    if reason is NoopReason.SKIPPED_ACTIVE:
        rt.journal(
            tx,
            "event",
            event.event_id,
            action,
            "system",
            at=at,
            note=note,
            data={"active": into.event_id},
        )
    else:
        rt.journal(
            tx,
            "occurrence",
            into.event_id,
            action,
            "system",
            at=at,
            note=note,
            data={"event": event.event_id},
        )
    return decision


_TRIGGER = {
    DecisionKind.NOOP: "noop",
    DecisionKind.PROPOSE: "propose",
    DecisionKind.RUN: "dispatch",
    DecisionKind.SHADOW: "record_shadow",
}


def _occurrence(
    rt: Runtime,
    tx: Tx,
    event: EventRecord,
    decision: Decision,
    at: str,
    trigger: str,
    result: Triage | None = None,
    *,
    reserved: dict[str, int] | None = None,
    would_dispatch: str | None = None,
) -> str:
    """Move the new occurrence from `created` through triage by `trigger`, recording the
    triage decision and its evidence; journaled as `decided:<kind>`."""
    lc = rt.lifecycle
    state = lc.occurrence(event.loop, event.type, "created", "triage")
    state = lc.occurrence(event.loop, event.type, state, trigger, no_run_in_flight=True)
    evidence = dict(result.evidence) if result is not None else {}
    if would_dispatch is not None:
        evidence["would_dispatch"] = would_dispatch
    tx.update_occurrence(
        event.event_id,
        None,
        at,
        state=state,
        decision=result.decision.value if result is not None else None,
        evidence=evidence or None,
        reserved=reserved,
        finished_at=at if state in occurrences.TERMINAL else None,
    )
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
            "triage": result.decision.value if result is not None else None,
            "triageRule": result.evidence.get("rule") if result is not None else None,
        },
    )
    return state


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
        if tx.get_occurrence_state(old.event_id) == "awaiting_approval":
            from engine.service.proposals import advance_proposed

            advance_proposed(rt, tx, old.event_id, old.human_only, "supersede", at)


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
    rt: Runtime,
    tx: Tx,
    event: EventRecord,
    proposal_id: str | None,
    actor: str,
    at: str,
    attempt: int = 0,
) -> RunRecord:
    """Create the run for an approved event (once per idempotency key) and journal it.
    A retry of the occurrence's job (`attempt` > 0) is a run of its own: `key#N`."""
    decision = tx.get_decision(event.event_id)
    assert decision is not None and decision.definition is not None
    key = idempotency_key(event) + (f"#{attempt}" if attempt else "")
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
