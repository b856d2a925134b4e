"""Chain resolution: a finished run's outcome, through the chain rules, into the
envelopes of new events. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dsl import expr as ex
from engine.core.envelope import Envelope
from engine.core.ruleset import DefinitionRef, EmitRule, RuleSet
from engine.core.states import EventSource


@dataclass(frozen=True)
class ChainResult:
    matched: bool  # a chain rule exists for this outcome
    stop: bool
    envelopes: list[Envelope] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    rule: str | None = None  # file:line of the chain rule


def resolve(
    rules: RuleSet,
    definition: DefinitionRef,
    outcome: str,
    event: Envelope,
    result: dict[str, Any],
    run_id: str,
    now: datetime,
) -> ChainResult:
    """The events an outcome chains to. Event ids default to `chain:<run>:<n>` so a
    retried resolution converges; expression failures are reported, not raised."""
    chain = rules.chains.get((definition, outcome))
    if chain is None:
        return ChainResult(matched=False, stop=False)
    if chain.stop:
        return ChainResult(matched=True, stop=True, rule=str(chain.origin))
    scope = {
        "event": event.model_dump(mode="json"),
        "result": result,
        "run": {"id": run_id, "outcome": outcome, "definition": str(definition)},
    }
    envelopes: list[Envelope] = []
    errors: list[str] = []
    for index, emit in enumerate(chain.emits):
        try:
            built = _build(emit, scope, event, f"chain:{run_id}:{index}", now)
        except ex.EvalError as err:
            errors.append(f"{err.span}: {err.message}")
            continue
        except ValueError as err:
            errors.append(f"{emit.origin}: {err}")
            continue
        if built is not None:
            envelopes.append(built)
    return ChainResult(True, False, envelopes, errors, str(chain.origin))


def _build(
    emit: EmitRule, scope: dict[str, Any], parent: Envelope, default_id: str, now: datetime
) -> Envelope | None:
    if emit.guard is not None:
        holds = ex.truthy(ex.evaluate(emit.guard.expr, scope))
        if holds == emit.guard.negate:
            return None
    payload = ex.evaluate(emit.payload, scope) if emit.payload is not None else {}
    event_id = str(ex.evaluate(emit.event_id, scope)) if emit.event_id is not None else default_id
    subject = str(ex.evaluate(emit.subject, scope)) if emit.subject is not None else parent.subject
    return Envelope(
        eventId=event_id,
        type=emit.event_type,
        source=EventSource.CHAIN,
        subject=subject,
        occurredAt=now,
        correlationId=parent.correlationId or parent.eventId,
        payload=payload,
    )
