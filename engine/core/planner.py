"""The planner: (event, compiled rules, snapshot of what is in flight) -> Decision.
Pure; the service persists the decision before anything runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from engine.core.decisions import Actor, Decision, DecisionKind, NoopReason, is_human
from engine.core.envelope import Envelope, iso
from engine.core.records import EventRecord
from engine.core.ruleset import Approval, Loop, RuleSet, TriggerKind
from engine.core.states import EventSource
from engine.core.triggers import AFTER_SOURCE, EVENT_SOURCE, WATCH_SOURCE

# The triggers whose ticks only the runtime makes, by the source of those ticks.
_WAITING: dict[str, TriggerKind] = {
    EVENT_SOURCE: TriggerKind.EVENT,
    AFTER_SOURCE: TriggerKind.AFTER,
    WATCH_SOURCE: TriggerKind.WATCH,
}


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the planner may know about the world, read in the planning transaction."""

    loop_in_flight: bool = False  # a run of the event's loop is queued, claimed or running
    loop_paused: bool = False


class Tick(Protocol):
    """What `loop_of` reads of an event: an envelope, or an admitted event's record."""

    @property
    def type(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def payload(self) -> dict[str, Any]: ...


def loop_of(event: Tick, admitted_by: str, rules: RuleSet) -> Loop | None:
    """The loop this event is a tick of, if any (payload.loop names it, and the type
    must be the loop's). Only the runtime makes ticks, and `admitted_by` — the actor
    decided from how the event was authenticated, never from its body — says which
    part of it did (docs/runtime.md, "Who may tick a loop"):

    - the scheduler (`schedule`) fires a scheduled loop's slot (source `schedule`;
      never a host-clock loop's), and a coalesced follow-up (source `manual`);
    - a host timer (`bridge`: a signed envelope, `engine emit`) fires a host-clock
      loop's slot (source `bridge`), and nothing else;
    - an operator (`operator:<name>`) backfills a scheduled loop's past slot (source
      `schedule`) and runs any loop now (source `manual`);
    - the scheduler (`schedule`) alone fires a watch loop's change (source `watch`);
    - the runtime (`schedule`) fires an `on_event` loop for an admitted event (source
      `on_event`) and an `after` loop for a concluded occurrence (source `after`).

    Admission checks that a slot posted by a host timer or an operator is one of the
    loop's slots and has come (`engine.core.ticks.slot_problem`).

    Anything else is no loop's tick, whatever its `source` says: it follows its route,
    and can never claim a slot nor a loop's approval policy."""
    name = event.payload.get("loop")
    if not isinstance(name, str):
        return None
    loop = rules.loops.get(name)
    if loop is None or loop.event_type != event.type:
        return None
    host = loop.trigger.kind is TriggerKind.HOST
    if event.source == EventSource.SCHEDULE:
        allowed = (admitted_by == Actor.SCHEDULE or is_human(admitted_by)) and not host
    elif event.source == EventSource.BRIDGE:
        allowed = admitted_by == Actor.BRIDGE and host
    elif event.source == EventSource.MANUAL:
        allowed = admitted_by == Actor.SCHEDULE or is_human(admitted_by)
    elif event.source in _WAITING:
        allowed = admitted_by == Actor.SCHEDULE and loop.trigger.kind is _WAITING[event.source]
    else:
        allowed = False
    return loop if allowed else None


def admitted_record(
    rules: RuleSet, envelope: Envelope, actor: str, at: str, planned: bool = False
) -> EventRecord:
    """The record admission keeps of `envelope`, admitted by `actor` at `at`, with the
    loop it is a tick of (`loop_of`)."""
    loop = loop_of(envelope, actor, rules)
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


def plan(event: Tick, admitted_by: str, rules: RuleSet, snapshot: Snapshot) -> Decision:
    """Decide what an event admitted by `admitted_by` leads to. Human-only types always
    propose."""
    loop = loop_of(event, admitted_by, rules)
    # A work-bound instance routes to its controller's wake, not by its event type.
    route = rules.route_of(event.type, loop.name if loop is not None else None)
    loop_name = loop.name if loop else None
    if route is None:
        return Decision(
            DecisionKind.NOOP,
            NoopReason.NO_ROUTE,
            None,
            loop_name,
            None,
            False,
            False,
            None,
            f"no route handles '{event.type}'",
        )
    definition = rules.definitions[route.definition]
    human_only = rules.is_human_only(event.type)
    rule = loop.origin if loop is not None else route.origin

    def decide(
        kind: DecisionKind,
        note: str,
        reason: NoopReason | None = None,
        approved_by: str | None = None,
    ) -> Decision:
        return Decision(
            kind,
            reason,
            str(route.definition),
            loop_name,
            approved_by,
            human_only,
            definition.mutating,
            rule,
            note,
        )

    if loop is not None:
        if not loop.enabled:  # off means off: no slot, bridge post or run-now plans work
            return decide(DecisionKind.NOOP, f"loop '{loop.name}' is disabled", NoopReason.DISABLED)
        if snapshot.loop_paused:
            return decide(DecisionKind.NOOP, f"loop '{loop.name}' is paused", NoopReason.PAUSED)
        if loop.singleton and snapshot.loop_in_flight:
            return decide(
                DecisionKind.NOOP,
                f"a run of loop '{loop.name}' is still in flight",
                NoopReason.PREVIOUS_RUN_IN_FLIGHT,
            )
        if loop.policy.shadow:
            return decide(DecisionKind.SHADOW, "shadow mode: recorded what would run")
    approval = loop.approval if loop is not None else route.approval
    if human_only or approval is Approval.WATCHED:
        note = "human-approval-only" if human_only else "watched: waiting for an operator"
        return decide(DecisionKind.PROPOSE, note)
    actor = Actor.SCHEDULE if loop is not None else Actor.SYSTEM
    return decide(DecisionKind.RUN, f"approval auto by {rule}", approved_by=actor.value)
