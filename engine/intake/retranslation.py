"""A recorded GitHub delivery translated again under other rules, for `engine replay`
(docs/replay.md). Pure: the delivery kept beside its event (its kind, GUID, body and
the instant it was received) goes through `translate` under the new rules, and the
answer says whether that is still the recorded event; when it is not, what the new
`webhook github` table makes of it instead (ignored, rejected, or another event,
recorded as admission would have recorded it)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from dsl.diagnostics import Span
from engine.core.envelope import Envelope, parse_iso
from engine.core.planner import admitted_record
from engine.core.records import DeliveryRecord, EventRecord
from engine.core.replay import EMITS, IGNORED, REJECTED, Retranslation
from engine.core.ruleset import RuleSet
from engine.core.validation import Validators
from engine.intake.github import Ignored, Rejected, translate


@dataclass(frozen=True, slots=True)
class Retranslated:
    """What the new table makes of a delivery whose event it no longer is; `event`:
    the other event it emits now (None when it is ignored or rejected)."""

    what: Retranslation
    event: EventRecord | None = None


def retranslated(
    rules: RuleSet, validators: Validators, delivery: DeliveryRecord, recorded: EventRecord
) -> Retranslated | None:
    """None when the new rules translate the delivery into the recorded event (the same
    id, type, subject and payload); otherwise what they do instead. Another event is
    refused, as admission refuses it, when its type is not registered or its payload
    does not fit the type's schema."""
    received, body = parse_iso(delivery.received_at), json.loads(delivery.body)
    outcome = translate(rules, delivery.kind, delivery.delivery_id, body, received)
    if isinstance(outcome, Ignored | Rejected):
        kind = IGNORED if isinstance(outcome, Ignored) else REJECTED
        return Retranslated(_what(delivery, kind, outcome.reason, outcome.rule))
    envelope = outcome.envelope.with_defaults()
    differs = _differs(envelope, recorded)
    if not differs:
        return None
    if problem := _refused(validators, rules, envelope):
        return Retranslated(_what(delivery, REJECTED, problem, outcome.rule))
    what = _what(delivery, EMITS, None, outcome.rule, envelope, differs)
    return Retranslated(what, _record(rules, envelope, recorded))


def _what(
    delivery: DeliveryRecord,
    outcome: str,
    reason: str | None,
    rule: Span | None,
    envelope: Envelope | None = None,
    differs: tuple[str, ...] = (),
) -> Retranslation:
    return Retranslation(
        delivery.delivery_id,
        delivery.kind,
        delivery.rule,
        outcome,
        reason,
        str(rule) if rule is not None else None,
        envelope.eventId if envelope is not None else None,
        envelope.type if envelope is not None else None,
        differs,
    )


def _differs(envelope: Envelope, recorded: EventRecord) -> tuple[str, ...]:
    """The parts of the new event that are not the recorded one's, in a fixed order."""
    parts = (
        ("eventId", envelope.eventId, recorded.event_id),
        ("type", envelope.type, recorded.type),
        ("subject", envelope.subject, recorded.subject),
        ("payload", _as_stored(envelope.payload), recorded.payload),
    )
    return tuple(name for name, new, old in parts if new != old)


def _as_stored(value: Any) -> Any:
    """A payload as it reads back from the store (JSON: tuples become lists)."""
    return json.loads(json.dumps(value))


def _refused(validators: Validators, rules: RuleSet, envelope: Envelope) -> str | None:
    """The reason admission would refuse the event with (422), or None."""
    if envelope.type not in rules.event_types:
        return "unregistered_type"
    if validators.payload_errors(envelope.type, envelope.payload):
        return "invalid_payload"
    return None


def _record(rules: RuleSet, envelope: Envelope, recorded: EventRecord) -> EventRecord:
    """The other event as admission would have recorded it, when and by whom the
    recorded one was."""
    admitted = admitted_record(
        rules, envelope, recorded.admitted_by, recorded.admitted_at, planned=True
    )
    return replace(admitted, payload=_as_stored(envelope.payload))
