"""A waiting retry taken up again, pure (docs/architecture.md, "Decide purely, apply
once"): `resume(occ, rules, facts, machines, at) -> Plan`, in the shape of
`engine.core.decide.decide`. `facts` is read by `engine.service.facts.resume_facts`
before anything is decided; `engine.service.apply` writes the plan.

An occurrence whose retry (or conflict wait) is due goes back to triage: the loop is
planned again like any tick (a paused or disabled loop cancels it; a run of a loop that
runs one at a time in flight ends it a no-op `previous_run_in_flight`), triaged from a
fresh snapshot
and gated by the stop conditions and the budget; what passes is dispatched again as
the occurrence's next run (`key#N`), under the first run's proposal and approver."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from engine.core.decide import (
    History,
    envelope_of,
    finding_of,
    queue,
    ref_of,
    snapshot_of,
    with_history,
)
from engine.core.decisions import Actor, DecisionKind, NoopReason
from engine.core.effects import Effect, Journal, Plan, Transition
from engine.core.existing import KeyFacts, explicit_retry, key_of, with_existing
from engine.core.existing import journal as existing_journal
from engine.core.occurrence import Identity, gate, reservation
from engine.core.planner import Snapshot, loop_of, plan
from engine.core.records import EventRecord, LoopState, OccurrenceRecord, RunRecord
from engine.core.ruleset import RuleSet
from engine.core.settle import Ending, Machines, conclude, runs_of
from engine.core.states import OccurrenceTrigger
from engine.core.triage import Triage, broken, triage, where


@dataclass(frozen=True, slots=True)
class ResumeFacts:
    """Everything resuming one waiting occurrence reads, as it was when it was read."""

    event: EventRecord | None = None  # the occurrence's event
    first: RunRecord | None = None  # its first run: the retry keeps its proposal, approver
    definition: str | None = None  # what the event's decision routed: the run's definition
    state: LoopState | None = None  # the loop's durable state
    in_flight: bool = False  # a run of the loop is queued, claimed or running
    active: int = 0  # the loop's other active occurrences for the repo, where they count
    history: History | None = None
    ending: Ending = field(default_factory=Ending)  # for an occurrence that ends here
    keyed: KeyFacts | None = None  # what else is there for its key (a loop with one)


def resume(
    occ: OccurrenceRecord, rules: RuleSet, facts: ResumeFacts, machines: Machines, at: str
) -> Plan:
    """The plan for a waiting occurrence whose retry time has come: back to triage,
    then ended (nothing to retry, the loop no longer dispatches it, triage or a gate
    stops it) or dispatched again."""
    event, first = facts.event, facts.first
    if event is None or first is None:
        note = "nothing to retry: the event or its run is gone"
        return tuple(conclude(rules, machines, occ, OccurrenceTrigger.FAIL, at, note, facts.ending))
    triaging = machines.dispatched(occ.state, OccurrenceTrigger.RESUME)
    out: list[Effect] = [
        Transition(occ.event_id, occ.state, {"state": triaging, "retry_at": None}),
        Journal(
            "occurrence",
            occ.event_id,
            "resumed",
            Actor.SYSTEM,
            from_state=occ.state,
            to_state=triaging,
            data={"attempt": occ.attempt},
        ),
    ]
    moved = replace(occ, state=triaging, retry_at=None, updated_at=at)
    out.extend(_triaged(occ, moved, event, first, rules, facts, machines, at))
    return tuple(out)


def _skipped(
    moved: OccurrenceRecord,
    rules: RuleSet,
    note: str,
    facts: ResumeFacts,
    machines: Machines,
    at: str,
) -> list[Effect]:
    """A run of the loop is in flight (an operator's run-now, another window's): the
    retry is decided as a tick would be, a no-op `previous_run_in_flight`, and the
    occurrence ends `nothing_to_do`, counted neither as a failure nor as a quiet no-op."""
    data = {"reason": NoopReason.PREVIOUS_RUN_IN_FLIGHT.value}
    noop = OccurrenceTrigger.NOOP
    return conclude(rules, machines, moved, noop, at, note, facts.ending, data=data, counts=False)


def _triaged(
    occ: OccurrenceRecord,
    moved: OccurrenceRecord,
    event: EventRecord,
    first: RunRecord,
    rules: RuleSet,
    facts: ResumeFacts,
    machines: Machines,
    at: str,
) -> list[Effect]:
    """Planned and triaged again from `moved` (triaging): ended, or dispatched."""
    envelope = envelope_of(event)
    loop = loop_of(envelope, event.admitted_by, rules)
    paused = facts.state is not None and facts.state.paused
    snapshot = Snapshot(loop_in_flight=facts.in_flight, loop_paused=paused)
    decision = plan(envelope, event.admitted_by, rules, snapshot)
    if decision.reason is NoopReason.PREVIOUS_RUN_IN_FLIGHT:
        return _skipped(moved, rules, decision.note or "", facts, machines, at)
    if decision.kind is DecisionKind.NOOP or decision.definition is None:
        note = decision.note or "the loop no longer dispatches it"
        return conclude(rules, machines, moved, OccurrenceTrigger.CANCEL, at, note, facts.ending)
    definition = rules.definitions[ref_of(decision.definition)]
    result: Triage | None = None
    if loop is not None:
        ident = Identity(occ.occurrence_key or "", occ.repo, occ.window or "")
        state, in_flight, active = facts.state, facts.in_flight, facts.active
        snap = snapshot_of(rules, loop, event, ident, state, in_flight, active, at)
        snap = with_history(snap, loop, facts.history)
        key, problem = key_of(loop, event)
        snap = with_existing(snap, loop, key, facts.keyed, at)
        result = triage(loop, definition.mutating, snap)
        if problem is not None and loop.key is not None:
            result = broken(snap, f"the key at {where(loop.key.origin)}", loop.key.origin, problem)
        gated = gate(rules, loop, definition, result, snap, explicit=explicit_retry(event))
        if gated is not None:
            out: list[Effect] = []
            if gated.reason is NoopReason.CANDIDATE_RECORDED:
                out.append(finding_of(moved, result, at))
            if gated.existing is not None:
                out.append(existing_journal(gated.existing, occ.event_id, key))
            trigger = OccurrenceTrigger(gated.trigger)
            out.extend(conclude(rules, machines, moved, trigger, at, gated.note, facts.ending))
            return out
    dispatched = machines.dispatched(moved.state, OccurrenceTrigger.DISPATCH)
    changes = {
        "state": dispatched,
        "reserved": reservation(loop, definition) if loop is not None else None,
        "decision": result.decision.value if result is not None else moved.decision,
    }
    rule = str(decision.rule) if decision.rule else None
    proposal, actor = first.proposal_id, first.approved_by
    run = queue(event, facts.definition, proposal, actor, at, runs_of(occ), rule)
    journal = Journal(
        "occurrence",
        occ.event_id,
        "redispatched",
        Actor.SYSTEM,
        from_state=moved.state,
        to_state=dispatched,
        data={"run": run.record.run_id, "attempt": occ.attempt},
    )
    return [Transition(occ.event_id, moved.state, changes), run, journal]
