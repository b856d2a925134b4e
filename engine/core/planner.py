"""The planner: (event, compiled rules, snapshot of what is in flight) -> Decision.
Pure; the service persists the decision before anything runs."""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.decisions import Actor, Decision, DecisionKind, NoopReason
from engine.core.envelope import Envelope
from engine.core.ruleset import Approval, Loop, RuleSet, TriggerKind

# Sources whose events can be a loop's tick (payload.loop names the loop).
LOOP_SOURCES = frozenset({"schedule", "bridge", "manual"})


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the planner may know about the world, read in the planning transaction."""

    loop_in_flight: bool = False  # a run of the event's loop is queued, claimed or running
    loop_paused: bool = False


def loop_of(event: Envelope, rules: RuleSet) -> Loop | None:
    """The loop this event is a tick of, if any: a host timer (`bridge`) ticks only
    host-clock loops, the scheduler only the others, a run-now (`manual`) any."""
    name = event.payload.get("loop")
    if event.source not in LOOP_SOURCES or not isinstance(name, str):
        return None
    loop = rules.loops.get(name)
    if loop is None or loop.event_type != event.type:
        return None
    host = loop.trigger.kind is TriggerKind.HOST
    if (event.source == "bridge" and not host) or (event.source == "schedule" and host):
        return None
    return loop


def plan(event: Envelope, rules: RuleSet, snapshot: Snapshot) -> Decision:
    """Decide what an admitted event leads to. Human-only types always propose."""
    route = rules.routes.get(event.type)
    loop = loop_of(event, rules)
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
