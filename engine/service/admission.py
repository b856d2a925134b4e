"""Admission: validate an envelope against the registry and admit it exactly once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from engine.core.decisions import Actor, Entity, JournalAction
from engine.core.envelope import Envelope
from engine.core.planner import admitted_record, loop_of
from engine.core.records import DeliveryRecord, EventRecord, JournalEntry
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
    return admitted_record(rt.rules, envelope, actor, at, planned)


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
    tx.append_journal(admitted_entry(rt, row))
    return row


def admitted_entry(rt: Runtime, row: EventRecord) -> JournalEntry:
    """The journal entry of an admission: `event <id> admitted` by its actor."""
    return rt.entry(
        Entity.EVENT,
        row.event_id,
        JournalAction.ADMITTED,
        row.admitted_by,
        to_state="admitted",
        data={"type": row.type, "source": row.source, "loop": row.loop},
        at=row.admitted_at,
    )


@dataclass(frozen=True)
class Delivery:
    """The GitHub delivery a request's envelope was translated from: its GUID, its
    X-GitHub-Event kind, its JSON body as the text GitHub sent, and the `emit` line
    (file:line:col)."""

    delivery_id: str
    kind: str
    body: str
    rule: str


@dataclass(frozen=True)
class Request:
    """The checked envelopes of one request and who sent them: admitted together, in
    one transaction, answered together. `delivery`: the GitHub delivery they were
    translated from, kept beside each one admitted (docs/replay.md)."""

    envelopes: tuple[Envelope, ...]
    actor: str
    delivery: Delivery | None = None


def admit_batch(rt: Runtime, requests: Sequence[Request]) -> list[list[Admission]]:
    """Admit the checked envelopes of several requests in one transaction, each row kind
    written with one statement (docs/architecture.md#intake-group-commit): per request,
    its admissions in order. Of equal event ids the first (in request order)
    is admitted and every other answers duplicate, as if each had come alone."""
    rows = [record(rt, e, r.actor, rt.now()) for r in requests for e in r.envelopes]
    senders = [r for r in requests for _ in r.envelopes]
    with rt.store.write() as tx:
        written = firsts(rows, tx.insert_events(rows))
        tx.append_journals([admitted_entry(rt, rows[n]) for n in sorted(written)])
        tx.insert_deliveries(kept_deliveries(rows, senders, written))
    answers = iter(
        Admission(n in written, n not in written, r.event_id) for n, r in enumerate(rows)
    )
    return [[next(answers) for _ in r.envelopes] for r in requests]


def kept_deliveries(
    rows: Sequence[EventRecord], senders: Sequence[Request], written: set[int]
) -> list[DeliveryRecord]:
    """The deliveries of the rows written (in their order), each beside its event and
    received when its envelope was translated (the event's occurredAt)."""
    out = []
    for n in sorted(written):
        if (d := senders[n].delivery) is not None:
            row = rows[n]
            out.append(
                DeliveryRecord(row.event_id, d.delivery_id, d.kind, d.body, d.rule, row.occurred_at)
            )
    return out


def firsts(rows: Sequence[EventRecord], new: set[str]) -> set[int]:
    """The positions of the rows written: the first of each id in `new`."""
    seen: dict[str, int] = {}
    for n, row in enumerate(rows):
        if row.event_id in new:
            seen.setdefault(row.event_id, n)
    return set(seen.values())


def admit(rt: Runtime, envelope: Envelope, actor: str) -> Admission:
    """Admit one event: `{admitted, duplicate, eventId}`; a duplicate writes nothing."""
    return admit_many(rt, [envelope], actor)[0]


def admit_many(rt: Runtime, envelopes: Sequence[Envelope], actor: str) -> list[Admission]:
    """Admit a list in one transaction (one request's, or a command's)."""
    return admit_batch(rt, [checked(rt, envelopes, actor)])[0]


def checked(
    rt: Runtime, envelopes: Sequence[Envelope], actor: str, delivery: Delivery | None = None
) -> Request:
    """The envelopes of one request checked (`check`, `check_tick`), for admit_batch;
    `delivery`: the GitHub delivery they were translated from."""
    return Request(tuple(check_tick(rt, check(rt, e), actor) for e in envelopes), actor, delivery)
