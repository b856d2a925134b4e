"""`engine explain ID` and `GET /explain/{id}` (docs/explain.md): the causal chain of
one event, both ways, from the durable records alone. Upstream: what made the event (a
slot, a GitHub delivery, an event that fired an `on_event` loop, an occurrence an
`after` loop waited for, a run's outcome through a chain rule), followed to its root.
The event itself: its admission, its decision with the rule (file:line) and the rules
digest it ran under, its occurrence's steps, its proposals (who decided, when, with what
note) and runs (attempts, outcome, artifact). Downstream: the events its runs chained,
each explained the same way. Read only, in one snapshot."""

from __future__ import annotations

from typing import Any

from engine.core.decisions import Actor, Entity, JournalAction
from engine.core.envelope import parse_iso
from engine.core.ids import stable_id
from engine.core.records import EventRecord, document
from engine.core.settle import run_key
from engine.core.states import EventSource
from engine.core.ticks import bridge_tick_id, tick_id
from engine.errors import NotFound
from engine.service.context import Runtime
from engine.store.ports import TxView

# How far a chain is followed each way: a rule file can chain without end, a reader can't.
MAX_DEPTH = 8
MAX_ENTRIES = 1000
MAX_RUNS = 100


def explain(rt: Runtime, ident: str) -> dict[str, Any]:
    """The explanation of the event `ident` names: an event id (a delivery's GUID is
    its event's id), a slot as `LOOP@TIME`, a proposal, a run or an occurrence id."""
    with rt.store.read() as tx:
        event = resolve(tx, ident)
        doc = _story(tx, event, MAX_DEPTH)
        doc["cause"] = _cause(tx, event, MAX_DEPTH)
        return doc


def resolve(tx: TxView, ident: str) -> EventRecord:
    found = tx.get_event(ident)
    if found is not None:
        return found
    delivered = tx.delivered_as(ident)  # a GitHub delivery's GUID, its event another id
    found = tx.get_event(delivered) if delivered is not None else None
    if found is not None:
        return found
    loop, at, slot = ident.partition("@")
    if at and loop:
        try:
            when = parse_iso(slot)
        except ValueError:
            when = None
        if when is not None:
            for event_id in (tick_id(loop, when), bridge_tick_id(loop, when)):
                found = tx.get_event(event_id)
                if found is not None:
                    return found
    proposal = tx.get_proposal(ident)
    run = tx.get_run(ident)
    owner = proposal.event_id if proposal is not None else run.event_id if run else None
    found = tx.get_event(owner) if owner is not None else None
    if found is None:
        raise NotFound(
            f"nothing is known as '{ident}': give an event id (a delivery's GUID), a slot "
            "as LOOP@TIME, a proposal, a run or an occurrence id"
        )
    return found


def _story(tx: TxView, event: EventRecord, depth: int) -> dict[str, Any]:
    """The event, its decision, occurrence, proposals and runs, and what they chained."""
    decision = tx.get_decision(event.event_id)
    occurrence = tx.get_occurrence(event.event_id)
    proposal = tx.get_proposal(stable_id("prop", event.event_id))  # one per event
    proposals = [proposal] if proposal is not None else []
    runs = []
    for number in range(MAX_RUNS):  # the first run's key, then `key#N` for each retry
        run = tx.get_run_by_key(run_key(event, number))
        if run is None:
            break
        if run.event_id == event.event_id:
            runs.append(run)
    return {
        "event": document(event),
        "decision": document(decision),
        "occurrence": {
            "state": occurrence.state if occurrence is not None else None,
            "steps": _steps(tx, Entity.OCCURRENCE, event.event_id),
        },
        "proposals": [
            {**(document(p) or {}), "steps": _steps(tx, Entity.PROPOSAL, p.proposal_id)}
            for p in proposals
        ],
        "runs": [{**(document(r) or {}), "chained": _chained(tx, r.run_id, depth)} for r in runs],
    }


def _steps(tx: TxView, entity: Entity, entity_id: str) -> list[dict[str, Any]]:
    return [
        {
            "at": e.at,
            "action": e.action,
            "actor": e.actor,
            "from": e.from_state,
            "to": e.to_state,
            "note": e.note,
        }
        for e in tx.list_journal(MAX_ENTRIES, 0, entity, entity_id)
    ]


def _chained(tx: TxView, run_id: str, depth: int) -> list[dict[str, Any]]:
    """The events a run's outcome chained (its `chained` journal entries), explained."""
    if depth <= 0:
        return []
    found = []
    for entry in tx.list_journal(MAX_ENTRIES, 0, Entity.RUN, run_id):
        if entry.action != JournalAction.CHAINED or not isinstance(entry.data, dict):
            continue
        event = tx.get_event(str(entry.data.get("eventId")))
        if event is not None:
            found.append({**_story(tx, event, depth - 1), "rule": entry.data.get("rule")})
    return found


def _cause(tx: TxView, event: EventRecord, depth: int) -> dict[str, Any]:
    """What made the event, followed upstream to its root."""
    payload = event.payload
    cause: dict[str, Any]
    upstream: EventRecord | None = None
    if event.source in (EventSource.SCHEDULE, EventSource.BRIDGE) and "slot" in payload:
        cause = {"kind": "slot", "loop": event.loop, "slot": payload["slot"]}
        cause["source"] = event.source
    elif event.admitted_by == Actor.GITHUB:
        cause = {"kind": "delivery", "delivery": event.correlation_id}
    elif event.source == EventSource.ON_EVENT and isinstance(payload.get("trigger"), dict):
        fired_by = str(payload["trigger"].get("eventId"))
        cause = {"kind": "on_event", "loop": event.loop, "event": fired_by}
        upstream = tx.get_event(fired_by)
    elif event.source == EventSource.AFTER and isinstance(payload.get("upstream"), dict):
        occurrence = str(payload["upstream"].get("occurrence"))
        cause = {"kind": "after", "loop": event.loop, "occurrence": occurrence}
        upstream = tx.get_event(occurrence)
    elif (run_id := tx.chained_by(event.event_id)) is not None:
        run = tx.get_run(run_id)
        rule = next(
            (
                e.data.get("rule")
                for e in tx.list_journal(MAX_ENTRIES, 0, Entity.RUN, run_id)
                if e.action == JournalAction.CHAINED
                and isinstance(e.data, dict)
                and e.data.get("eventId") == event.event_id
            ),
            None,
        )
        cause = {
            "kind": "chain",
            "run": run_id,
            "outcome": run.outcome if run is not None else None,
            "rule": rule,
        }
        upstream = tx.get_event(run.event_id) if run is not None else None
    else:
        cause = {"kind": "admitted", "actor": event.admitted_by, "source": event.source}
    if upstream is not None and depth > 0:
        cause["from"] = {
            "event": document(upstream),
            "cause": _cause(tx, upstream, depth - 1),
        }
    return cause
