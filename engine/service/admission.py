"""Admission: validate an envelope against the registry and admit it exactly once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from engine.core.decisions import Actor, Entity, JournalAction
from engine.core.envelope import Envelope, iso
from engine.core.planner import loop_of
from engine.core.records import EventRecord
from engine.core.ticks import BRIDGE_SKEW, SLOT_SOURCES, tick_problem
from engine.errors import Unprocessable
from engine.service.context import Runtime
from engine.store.ports import Tx


@dataclass(frozen=True)
class Admission:
    admitted: bool
    duplicate: bool
    eventId: str

    def as_dict(self) -> dict[str, object]:
        return {"admitted": self.admitted, "duplicate": self.duplicate, "eventId": self.eventId}


def check(rt: Runtime, envelope: Envelope) -> Envelope:
    """Refuse (422, nothing written) an unregistered type or a payload that does not fit
    its input schema; fill the correlation id."""
    if envelope.type not in rt.rules.event_types:
        raise Unprocessable(
            f"event type '{envelope.type}' is not registered",
            [f"type: '{envelope.type}' is not registered"],
            reason="unregistered_type",
        )
    errors = rt.validators.payload_errors(envelope.type, envelope.payload)
    if errors:
        raise Unprocessable(
            f"payload does not fit '{envelope.type}'",
            [f"payload/{e}" if not e.startswith("payload") else e for e in errors],
            reason="invalid_payload",
        )
    return envelope.with_defaults()


def check_tick(rt: Runtime, envelope: Envelope, actor: str) -> Envelope:
    """Refuse (422 `bad_slot`) a tick the scheduler did not make — a host timer's post,
    an operator's backfill — whose slot is not one of its loop's slots, has not come,
    or whose event id is not the slot's own: nobody but the scheduler takes a slot
    before its time, and no slot is admitted twice under two ids."""
    loop = loop_of(envelope, actor, rt.rules)
    if loop is None or envelope.source not in SLOT_SOURCES or actor == Actor.SCHEDULE:
        return envelope
    skew = BRIDGE_SKEW if actor == Actor.BRIDGE else timedelta(0)
    problem = tick_problem(
        envelope.eventId, envelope.source, loop, envelope.payload, rt.clock(), skew
    )
    if problem is not None:
        raise Unprocessable(problem, [f"payload.slot: {problem}"], reason="bad_slot")
    return envelope


def record(
    rt: Runtime, envelope: Envelope, actor: str, at: str, planned: bool = False
) -> EventRecord:
    loop = loop_of(envelope, actor, rt.rules)
    return EventRecord(
        event_id=envelope.eventId,
        type=envelope.type,
        source=envelope.source,
        subject=envelope.subject,
        occurred_at=iso(envelope.occurredAt),
        correlation_id=envelope.correlationId,
        payload=envelope.payload,
        loop=loop.name if loop else None,
        admitted_at=at,
        admitted_by=actor,
        planned=planned,
    )


def admit_in(rt: Runtime, tx: Tx, envelope: Envelope, actor: str, at: str) -> Admission:
    """Admit inside an open transaction (the caller has checked the envelope)."""
    row = admit_record(rt, tx, envelope, actor, at)
    return Admission(row is not None, row is None, envelope.eventId)


def admit_record(
    rt: Runtime, tx: Tx, envelope: Envelope, actor: str, at: str, planned: bool = False
) -> EventRecord | None:
    """Admit inside an open transaction; the stored record, or None for a duplicate.
    `planned`: the caller decides it in this same transaction (see planning.plan_one)."""
    row = record(rt, envelope, actor, at, planned)
    if not tx.insert_event(row):
        return None
    rt.journal(
        tx,
        Entity.EVENT,
        row.event_id,
        JournalAction.ADMITTED,
        actor,
        to_state="admitted",
        at=at,
        data={"type": row.type, "source": row.source, "loop": row.loop},
    )
    return row


def admit(rt: Runtime, envelope: Envelope, actor: str) -> Admission:
    """Admit one event: `{admitted, duplicate, eventId}`; a duplicate writes nothing."""
    checked = check_tick(rt, check(rt, envelope), actor)
    with rt.store.write() as tx:
        return admit_in(rt, tx, checked, actor, rt.now())


def admit_many(rt: Runtime, envelopes: Sequence[Envelope], actor: str) -> list[Admission]:
    """Admit a batch in one transaction (the scheduler's wave)."""
    checked = [check_tick(rt, check(rt, e), actor) for e in envelopes]
    at = rt.now()
    with rt.store.write() as tx:
        return [admit_in(rt, tx, e, actor, at) for e in checked]
