"""The decision of an admitted event, pure (docs/architecture.md, "Decide purely,
apply once"): `decide(event, rules, facts, machines, at) -> Plan`. `facts` is one
frozen snapshot of what the decision reads, read by `engine.service.facts` in the
planning transaction; the plan is a tuple of typed effects (`engine.core.effects`) that
`engine.service.apply` writes. No I/O, no clock: the same event, rules and facts always
give the same plan, which is what lets a decision be re-made and compared.

It absorbs the planner (`engine.core.planner.plan`: route, loop, approval), the
occurrence identity and its folds (duplicate window, active limit, coalesce), quiet
backoff, triage, the gate before dispatch (stop conditions, budgets), and what an
occurrence that ends at once leads to (`conclusion`: counters, notifications, the
circuit breaker, the loops `after` it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Protocol

from engine.core.decisions import (
    Actor,
    Decision,
    DecisionKind,
    Entity,
    JournalAction,
    NoopReason,
)
from engine.core.effects import (
    Admit,
    Counters,
    Decide,
    DecideProposal,
    Effect,
    Journal,
    MarkPlanned,
    MoveBinding,
    Notify,
    OpenOccurrence,
    Outbox,
    PauseLoop,
    Plan,
    Propose,
    QueueRun,
    RecordFinding,
    Signal,
    Transition,
    WorkCommand,
)
from engine.core.envelope import Envelope, iso, parse_iso
from engine.core.existing import KeyFacts, explicit_retry, key_of, with_existing
from engine.core.existing import journal as existing_journal
from engine.core.ids import stable_id
from engine.core.occurrence import (
    ACTIVE,
    DAY,
    NOTIFIED_ENDS,
    PAUSING,
    QUIET_AFTER,
    TERMINAL,
    Gate,
    Identity,
    budget_view,
    gate,
    identity,
    minimal_snapshot,
    needs_history,
    reservation,
)
from engine.core.planner import Snapshot, loop_of, plan
from engine.core.policy import FAILURES, FailureClass, backoff_delay
from engine.core.records import (
    DecisionRecord,
    EventRecord,
    FindingRecord,
    LoopState,
    NotificationRecord,
    OccurrenceRecord,
    ProposalRecord,
    RunRecord,
)
from engine.core.ruleset import (
    Approval,
    CatchUp,
    DefinitionRef,
    Loop,
    OnActive,
    RuleSet,
    WorkBound,
    max_active,
)
from engine.core.states import (
    FindingStatus,
    OccurrenceState,
    OccurrenceTrigger,
    ProposalState,
    ProposalTrigger,
    RunState,
)
from engine.core.ticks import idempotency_key, manual_tick
from engine.core.triage import (
    Triage,
    TriageDecision,
    TriageSnapshot,
    broken,
    default_decision,
    triage,
    where,
)
from engine.core.triggers import Conclusion, after_tick, dependents, event_tick, fired_by
from engine.core.work import (
    COMMAND_TYPES,
    BindingState,
    WorkBinding,
    WorkGate,
    WorkItem,
    reservation_live,
)
from engine.core.work import gate as work_gate


class Machines(Protocol):
    """The lifecycle tables of the rule set (engine.core.machines.Lifecycle); a guarded
    move reads the fact given by keyword (whether a run is in flight, the actor)."""

    def occurrence(
        self,
        loop: str | None,
        event_type: str,
        state: str,
        trigger: str,
        *,
        in_flight: bool | None = None,
    ) -> str: ...

    def proposed(
        self, human_only: bool, state: str, trigger: str, *, actor: str | None = None
    ) -> str: ...

    def proposal(
        self, human_only: bool, state: str, trigger: str, *, actor: str | None = None
    ) -> str: ...


# ---- facts ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class History:
    """What triage and the stop conditions read beyond the cheap facts (only for a loop
    that `needs_history`)."""

    last_outcome: str | None
    findings: int  # the loop's candidate findings
    usage: dict[str, int]  # budget used in the last day, for the event's repo
    previous: OccurrenceRecord | None  # the loop's previous concluded occurrence
    counted: int  # the loop's occurrences since it was enabled (for occurrence_count)


@dataclass(frozen=True, slots=True)
class Superseded:
    """An open proposal of the loop that a newer one would supersede, with its
    occurrence and the correlation of its event."""

    proposal: ProposalRecord
    occurrence: OccurrenceRecord | None
    correlation: str


@dataclass(frozen=True, slots=True)
class Facts:
    """Everything the decision of one event reads, as it was when it was read."""

    decided: bool = False  # another process decided the event already
    existing: OccurrenceRecord | None = None  # the occurrence that holds the event's window
    state: LoopState | None = None  # the loop's durable state
    in_flight: bool = False  # a run of the loop is queued, claimed or running
    active: tuple[OccurrenceRecord, ...] = ()  # the loop's active occurrences for the repo
    history: History | None = None
    open_proposals: tuple[Superseded, ...] = ()  # the loop's open proposals
    last_notified: str | None = None  # the state last notified for the loop and repo
    # A work-bound instance's work item and binding, as the deciding transaction read
    # them (docs/work.md#work-bound-loops); None for any other loop.
    work: WorkItem | None = None
    binding: WorkBinding | None = None
    keyed: KeyFacts | None = None  # what is there for the occurrence's key (a loop with one)


def counts_active(loop: Loop) -> bool:
    """Whether the loop's active occurrences are a fact of its decisions: it has an
    active limit, or its triage may read the number."""
    return max_active(loop) is not None or needs_history(loop)


def may_supersede(rules: RuleSet, loop: Loop, event: EventRecord) -> bool:
    """Whether the decision may propose and so supersede the loop's older proposals
    (`_supersede_older`): a watched (or human-only) loop under catch-up none or last."""
    if loop.catch_up is CatchUp.ALL:
        return False
    return loop.approval is Approval.WATCHED or rules.is_human_only(event.type)


_KEEPS_FACTS = (Journal, MarkPlanned, Decide)


def carried(
    rules: RuleSet, loop: Loop, event: EventRecord, facts: Facts, plan: Plan
) -> Facts | None:
    """The loop's facts after `plan` (the decision of `event`), for the loop's next event
    of the same batch and repo, without reading them again: the same facts, with an
    occurrence the plan opened in an active state counted among the active ones when
    they count. None when the plan changed something only a fresh read shows (counters,
    a pause, a run queued, a proposal that a newer one would supersede, a fold into an
    occurrence, a finding, the history triage reads): the batch then reads the next
    event's facts afresh. The event-level facts (`decided`, `existing`) are the
    caller's to fill: those returned are the event's own. A loop with a key reads what
    is there for its key afresh for each event (the plan may have opened work on it)."""
    if facts.decided or facts.history is not None or loop.key is not None:
        return None
    active = facts.active
    for effect in plan:
        if isinstance(effect, _KEEPS_FACTS):
            continue
        if isinstance(effect, OpenOccurrence):
            if effect.record.state in ACTIVE and counts_active(loop):
                active = (*active, effect.record)
            continue
        if isinstance(effect, Propose) and not may_supersede(rules, loop, event):
            continue
        return None
    return facts if active is facts.active else replace(facts, active=active)


# ---- the decision of one event ------------------------------------------------------------


def decide(event: EventRecord, rules: RuleSet, facts: Facts, machines: Machines, at: str) -> Plan:
    """The plan for one admitted event: its decision, its occurrence and what follows,
    before anything runs."""
    out: list[Effect] = []
    if not event.planned:
        out.append(MarkPlanned(event.event_id))
        if facts.decided:
            return tuple(out)  # another process planned it first
    out.extend(_fired(rules, event))
    if event.type in COMMAND_TYPES:
        out.append(WorkCommand(event.event_id, event.type, event.payload, event.admitted_by))
    loop = loop_of(event, event.admitted_by, rules)
    ident = identity(event, loop)
    key, key_problem = key_of(loop, event)
    existing = facts.existing
    if existing is not None and existing.event_id != event.event_id:
        note = f"the window already has occurrence {existing.event_id}"
        out.extend(_fold(rules, event, loop, existing, NoopReason.DUPLICATE_OCCURRENCE, note, at))
        return tuple(out)
    state = facts.state
    paused = state is not None and state.paused
    active: tuple[OccurrenceRecord, ...] = ()
    if loop is not None and loop.enabled and not paused:
        limit = max_active(loop)
        active = facts.active if limit is not None and len(facts.active) >= limit else ()
        if active and loop.on_active is OnActive.COALESCE:
            into = active[0]
            note = f"coalesced into active occurrence {into.event_id} ({into.signals + 1} pending)"
            out.append(Signal(into.event_id))
            out.extend(_fold(rules, event, loop, into, NoopReason.COALESCED, note, at))
            return tuple(out)
    if loop is not None and loop.work is not None and loop.enabled and not paused:
        held = _work_gate(loop, loop.work, facts, at)
        if held is not None:
            out.extend(_work_held(rules, machines, event, loop, ident, held, facts, at))
            return tuple(out)
    decision = plan(event, event.admitted_by, rules, Snapshot(facts.in_flight, loop_paused=paused))
    if loop is not None and decision.kind is not DecisionKind.NOOP:
        if active:
            skip = loop.on_active is OnActive.SKIP
            reason = NoopReason.SKIPPED_ACTIVE if skip else NoopReason.OCCURRENCE_ACTIVE
            verb = "skipped" if skip else "returned to the active"
            note = (
                f"loop '{loop.name}' is at its active limit: {verb} occurrence {active[0].event_id}"
            )
            out.extend(_fold(rules, event, loop, active[0], reason, note, at))
            return tuple(out)
        if state is not None and state.quiet_until and at < state.quiet_until:
            decision = _noop(
                decision,
                NoopReason.QUIET_BACKOFF,
                f"{state.nothing_streak} nothing_to_do in a row: quiet until {state.quiet_until}",
            )
    opened = OccurrenceRecord(
        event_id=event.event_id,
        loop=loop.name if loop is not None else event.loop,
        state=OccurrenceState.CREATED,
        updated_at=at,
        occurrence_key=ident.key,
        repo=ident.repo,
        window=ident.window,
        created_at=at,
        semantic_key=key,
    )
    if decision.kind is DecisionKind.NOOP:
        out.append(_record(rules, event, decision, at))
        out.extend(_occurrence(machines, event, opened, decision, at, OccurrenceTrigger.NOOP))
        return tuple(out)
    definition = rules.definitions[ref_of(decision.definition)]
    if loop is not None:
        active_now = len(facts.active)
        snap = snapshot_of(rules, loop, event, ident, state, facts.in_flight, active_now, at)
        snap = with_history(snap, loop, facts.history)
        snap = with_existing(snap, loop, key, facts.keyed, at)
        result = triage(loop, definition.mutating, snap)
        if key_problem is not None and loop.key is not None:
            result = broken(
                snap, f"the key at {where(loop.key.origin)}", loop.key.origin, key_problem
            )
    else:
        snap = minimal_snapshot(rules, event, ident, at)
        result = Triage(default_decision(definition.mutating), "", None, evidence={})
    gated = gate(rules, loop, definition, result, snap, explicit=explicit_retry(event))
    if gated is not None:
        decision = _noop(decision, gated.reason, gated.note)
        out.extend(_gated(rules, machines, event, opened, loop, decision, result, gated, facts, at))
        return tuple(out)
    out.append(_record(rules, event, decision, at))
    trigger = _TRIGGER[decision.kind]
    if decision.kind is DecisionKind.SHADOW:
        steps = _occurrence(
            machines,
            event,
            opened,
            decision,
            at,
            trigger,
            result,
            would_dispatch=decision.definition,
        )
        out.extend(steps)
        shadowed = _opened_state(steps)
        if loop is not None:
            done = replace(opened, state=shadowed, finished_at=at)
            out.extend(_after(rules, done, event.correlation_id or event.event_id, None, at))
        return tuple(out)
    reserved = reservation(loop, definition) if loop is not None else None
    out.extend(
        _occurrence(
            machines,
            event,
            opened,
            decision,
            at,
            trigger,
            result,
            reserved,
            in_flight=facts.in_flight,
        )
    )
    if decision.kind is DecisionKind.PROPOSE:
        out.extend(_propose(rules, machines, event, decision, facts, at))
    elif decision.kind is DecisionKind.RUN:
        out.extend(_auto_run(machines, event, decision, at))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class _Held:
    """Why a work-bound firing does nothing, and what it does to its instance."""

    reason: NoopReason
    note: str
    move: str | None = None  # the binding's new state, if it moves


def _work_gate(loop: Loop, bound: WorkBound, facts: Facts, at: str) -> _Held | None:
    """The gate of a work-bound firing over the work item and binding the deciding
    transaction read (engine.core.work.gate), before anything is launched or any page
    opened: None when it may go on to triage."""
    now = parse_iso(at)
    verdict = work_gate(facts.work, now)
    item = facts.work
    if verdict is WorkGate.MISSING or item is None:
        why = f"work '{bound.work_id}' is gone: instance {loop.name} pauses"
        return _Held(NoopReason.WORK_MISSING, why, BindingState.PAUSED)
    if verdict is WorkGate.DONE:
        why = f"work '{bound.work_id}' is {item.state}: instance {loop.name} is disabled"
        return _Held(NoopReason.NOTHING_TO_DO, why, BindingState.DISABLED)
    if verdict is WorkGate.CONTROLLER_ACTIVE:
        why = (
            f"work '{bound.work_id}' is held by {item.lease_owner} until "
            f"{item.lease_expires_at}: no competing controller"
        )
        return _Held(NoopReason.CONTROLLER_ACTIVE, why)
    if reservation_live(item, now):
        why = (
            f"a wake of work '{bound.work_id}' ({item.reserved_by}) may still be claimed "
            f"until {item.reserved_until}"
        )
        return _Held(NoopReason.CONTROLLER_ACTIVE, why)
    last = facts.binding.last_wake_at if facts.binding is not None else None
    if last is not None and now < parse_iso(last) + timedelta(seconds=bound.cooldown_seconds):
        until = iso(parse_iso(last) + timedelta(seconds=bound.cooldown_seconds))
        return _Held(
            NoopReason.COOLDOWN, f"instance {loop.name} woke at {last}: cooldown until {until}"
        )
    return None


def _work_held(
    rules: RuleSet,
    machines: Machines,
    event: EventRecord,
    loop: Loop,
    ident: Identity,
    held: _Held,
    facts: Facts,
    at: str,
) -> list[Effect]:
    """A work-bound firing the gate held: a no-op whose occurrence concludes at once
    (`nothing_to_do`), the instance disabled (its work ended) or paused (its work is
    gone) in the same commit; nothing launched, no page opened."""
    decision = Decision(
        DecisionKind.NOOP,
        held.reason,
        None,
        loop.name,
        None,
        False,
        False,
        loop.origin,
        held.note,
    )
    opened = OccurrenceRecord(
        event_id=event.event_id,
        loop=loop.name,
        state=OccurrenceState.CREATED,
        updated_at=at,
        occurrence_key=ident.key,
        repo=ident.repo,
        window=ident.window,
        created_at=at,
    )
    out: list[Effect] = [_record(rules, event, decision, at)]
    out.extend(_occurrence(machines, event, opened, decision, at, OccurrenceTrigger.NOOP))
    bound = loop.work
    if held.move is not None and bound is not None and facts.binding is not None:
        out.append(
            MoveBinding(
                bound.binding_id, bound.work_id, facts.binding.version, held.move, held.note
            )
        )
    if held.move == BindingState.PAUSED:
        occ = replace(opened, state=OccurrenceState.NOTHING_TO_DO, finished_at=at)
        out.append(pause(loop, held.note, "paused:work_missing", occ, at))
    return out


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


def ref_of(text: str | None) -> DefinitionRef:
    assert text is not None
    ident, _, version = text.partition("@")
    return DefinitionRef(ident, int(version or 0))


def _noop(decision: Decision, reason: NoopReason, note: str) -> Decision:
    return replace(decision, kind=DecisionKind.NOOP, reason=reason, approved_by=None, note=note)


def _record(rules: RuleSet, event: EventRecord, decision: Decision, at: str) -> Decide:
    return Decide(
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
            rules_digest=rules.digest,
            decided_at=at,
        )
    )


def _fired(rules: RuleSet, event: EventRecord) -> list[Effect]:
    """The `on_event` loops the event fires (engine.core.triggers): one tick each, or
    why a loop could not be told (journaled on the event)."""
    out: list[Effect] = []
    if event.loop is not None:  # a loop's own tick fires no loop (fired_by)
        return []
    envelope = envelope_of(event)
    for firing in fired_by(rules, envelope, is_tick=False):
        if firing.error is not None or firing.window is None:
            out.append(
                Journal(
                    Entity.EVENT,
                    event.event_id,
                    JournalAction.TRIGGER_FAILED,
                    Actor.SCHEDULE,
                    note=f"loop '{firing.loop.name}' not fired: {firing.error}",
                )
            )
            continue
        tick = event_tick(firing.loop, envelope, firing.window)
        out.append(Admit(tick, Actor.SCHEDULE, ("event", event.event_id)))
    return out


_FOLDED = {
    NoopReason.DUPLICATE_OCCURRENCE: JournalAction.DUPLICATE_OCCURRENCE,
    NoopReason.COALESCED: JournalAction.COALESCED,
    NoopReason.SKIPPED_ACTIVE: JournalAction.SKIPPED_ACTIVE,
}


def _fold(
    rules: RuleSet,
    event: EventRecord,
    loop: Loop | None,
    into: OccurrenceRecord,
    reason: NoopReason,
    note: str,
    at: str,
) -> list[Effect]:
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
    action = _FOLDED.get(reason, JournalAction.RETURNED_ACTIVE)
    if reason is NoopReason.SKIPPED_ACTIVE:
        journal = Journal(
            Entity.EVENT,
            event.event_id,
            action,
            Actor.SYSTEM,
            note=note,
            data={"active": into.event_id},
        )
    else:
        journal = Journal(
            Entity.OCCURRENCE,
            into.event_id,
            action,
            Actor.SYSTEM,
            note=note,
            data={"event": event.event_id},
        )
    return [_record(rules, event, decision, at), journal]


_FAILED = (OccurrenceState.FAILED, OccurrenceState.TIMED_OUT)
_TRIGGER = {
    DecisionKind.NOOP: OccurrenceTrigger.NOOP,
    DecisionKind.PROPOSE: OccurrenceTrigger.PROPOSE,
    DecisionKind.RUN: OccurrenceTrigger.DISPATCH,
    DecisionKind.SHADOW: OccurrenceTrigger.RECORD_SHADOW,
}
_DECIDED = {
    DecisionKind.NOOP: JournalAction.DECIDED_NOOP,
    DecisionKind.PROPOSE: JournalAction.DECIDED_PROPOSE,
    DecisionKind.RUN: JournalAction.DECIDED_RUN,
    DecisionKind.SHADOW: JournalAction.DECIDED_SHADOW,
}


def _occurrence(
    machines: Machines,
    event: EventRecord,
    opened: OccurrenceRecord,
    decision: Decision,
    at: str,
    trigger: str,
    result: Triage | None = None,
    reserved: dict[str, int] | None = None,
    *,
    would_dispatch: str | None = None,
    in_flight: bool | None = None,
) -> list[Effect]:
    """The new occurrence, moved from `created` through triage by `trigger` and opened
    in the state that leaves it, with the triage decision and its evidence; journaled
    `decided:<kind>`. A singleton loop's decision to run reads `in_flight`."""
    state = machines.occurrence(
        event.loop, event.type, OccurrenceState.CREATED, OccurrenceTrigger.TRIAGE
    )
    state = machines.occurrence(event.loop, event.type, state, trigger, in_flight=in_flight)
    evidence = dict(result.evidence) if result is not None else {}
    if would_dispatch is not None:
        evidence["would_dispatch"] = would_dispatch
    record = replace(
        opened,
        state=state,
        decision=result.decision.value if result is not None else None,
        evidence=evidence or None,
        reserved=reserved,
        finished_at=at if state in TERMINAL else None,
    )
    journal = Journal(
        Entity.OCCURRENCE,
        event.event_id,
        _DECIDED[decision.kind],
        Actor.SYSTEM,
        from_state=OccurrenceState.CREATED,
        to_state=state,
        note=decision.note,
        data={
            "reason": decision.reason.value if decision.reason else None,
            "definition": decision.definition,
            "loop": decision.loop,
            "rule": str(decision.rule) if decision.rule else None,
            "triage": result.decision.value if result is not None else None,
            "triageRule": result.evidence.get("rule") if result is not None else None,
        },
    )
    rule = str(decision.rule) if decision.rule else None
    return [OpenOccurrence(record, rule), journal]


def _opened_state(steps: Sequence[Effect]) -> str:
    return next(e.record.state for e in steps if isinstance(e, OpenOccurrence))


def _gated(
    rules: RuleSet,
    machines: Machines,
    event: EventRecord,
    opened: OccurrenceRecord,
    loop: Loop | None,
    decision: Decision,
    result: Triage,
    gated: Gate,
    facts: Facts,
    at: str,
) -> list[Effect]:
    """Triage, a stop condition or the budget ended the occurrence before dispatch:
    the no-op, what triage found (a finding, release readiness), the end counted, and
    the loop paused on a stop that waits for a person."""
    out: list[Effect] = [_record(rules, event, decision, at)]
    steps = _occurrence(machines, event, opened, decision, at, gated.trigger, result)
    out.extend(steps)
    occ = replace(opened, state=_opened_state(steps), finished_at=at)
    if gated.existing is not None:
        out.append(existing_journal(gated.existing, occ.event_id, occ.semantic_key))
    if gated.reason is NoopReason.CANDIDATE_RECORDED:
        out.append(finding_of(occ, result, at))
    if result.decision is TriageDecision.RELEASE_READY:
        out.append(
            notice(
                Entity.OCCURRENCE,
                NoopReason.RELEASE_READY,
                result.note,
                at,
                loop=occ.loop,
                repo=occ.repo,
                links={"occurrence": occ.event_id},
            )
        )
    correlation = event.correlation_id or event.event_id
    if loop is not None and facts.state is not None:
        out.extend(
            conclusion(
                rules,
                loop,
                occ,
                None,
                at,
                gated.note,
                facts.state,
                facts.last_notified,
                correlation,
                None,
            )
        )
    if loop is not None and gated.condition in PAUSING:
        why = f"stop condition {gated.condition}: resume the loop once it is handled"
        out.append(
            pause(loop, why, f"stopped:{gated.condition}", occ, at, condition=gated.condition)
        )
    return out


def finding_of(occ: OccurrenceRecord, result: Triage, at: str) -> RecordFinding:
    """One candidate per semantic key, counted each time it is seen."""
    assert result.finding_key is not None
    return RecordFinding(
        FindingRecord(
            finding_id=stable_id("find", result.finding_key),
            semantic_key=result.finding_key,
            loop=occ.loop,
            repo=occ.repo,
            category=result.finding_category or "general",
            evidence=dict(result.evidence),
            confidence=None,
            recommended_action=result.note,
            status=FindingStatus.CANDIDATE,
            occurrence_count=1,
            first_seen_at=at,
            last_seen_at=at,
            last_occurrence=occ.event_id,
        ),
        result.note,
        occ.event_id,
        str(result.rule) if result.rule else None,
    )


def _proposal(event: EventRecord, decision: Decision, at: str) -> ProposalRecord:
    assert decision.definition is not None
    return ProposalRecord(
        proposal_id=stable_id("prop", event.event_id),
        event_id=event.event_id,
        loop=event.loop,
        definition=decision.definition,
        state=ProposalState.OPEN,
        human_only=decision.human_only,
        mutating=decision.mutating,
        created_at=at,
    )


def _propose(
    rules: RuleSet,
    machines: Machines,
    event: EventRecord,
    decision: Decision,
    facts: Facts,
    at: str,
) -> list[Effect]:
    proposal = _proposal(event, decision, at)
    out: list[Effect] = []
    if event.loop is not None:
        out.extend(_supersede_older(rules, machines, event, proposal.proposal_id, facts, at))
    opened = Journal(
        Entity.PROPOSAL,
        proposal.proposal_id,
        JournalAction.OPENED,
        Actor.SYSTEM,
        to_state=ProposalState.OPEN,
        note=decision.note,
        data={"event": event.event_id, "definition": decision.definition},
    )
    rule = str(decision.rule) if decision.rule else None
    out.append(Propose(proposal, decision.note, rule, then=(opened,)))
    return out


def _supersede_older(
    rules: RuleSet,
    machines: Machines,
    event: EventRecord,
    newer: str,
    facts: Facts,
    at: str,
) -> list[Effect]:
    """An unapproved proposal must not silence a loop: under catch-up none or last, a
    newer slot's proposal supersedes the loop's older open ones (a stale tick is not
    worth approving). Under `all` every slot counts, so they stay open; the doctor
    reports a pile-up."""
    assert event.loop is not None
    loop = rules.loops.get(event.loop)
    if loop is None or loop.catch_up is CatchUp.ALL:
        return []
    out: list[Effect] = []
    for old in facts.open_proposals:
        proposal = old.proposal
        state = machines.proposal(proposal.human_only, proposal.state, ProposalTrigger.SUPERSEDE)
        then: list[Effect] = [
            Journal(
                Entity.PROPOSAL,
                proposal.proposal_id,
                JournalAction.SUPERSEDED,
                Actor.SYSTEM,
                from_state=ProposalState.OPEN,
                to_state=state,
                note=f"a newer slot of loop '{event.loop}' proposed {newer}",
            )
        ]
        occ = old.occurrence
        if occ is not None and occ.state == OccurrenceState.AWAITING_APPROVAL:
            trigger = OccurrenceTrigger.SUPERSEDE
            then.extend(
                advanced(rules, machines, occ, proposal.human_only, trigger, facts, at, old)
            )
        out.append(
            DecideProposal(
                proposal.proposal_id,
                ProposalState.OPEN,
                state,
                Actor.SYSTEM,
                f"superseded by {newer}",
                tuple(then),
            )
        )
    return out


def advanced(
    rules: RuleSet,
    machines: Machines,
    occ: OccurrenceRecord,
    human_only: bool,
    trigger: str,
    facts: Facts,
    at: str,
    old: Superseded,
) -> list[Effect]:
    """Move a proposed occurrence (supersede): one that ends here releases its budget
    reservation and concludes, never as a failure of the loop."""
    state = machines.proposed(human_only, occ.state, trigger, actor=Actor.SYSTEM)
    if state not in TERMINAL:
        return [Transition(occ.event_id, occ.state, {"state": state})]
    out: list[Effect] = [
        Transition(occ.event_id, occ.state, {"state": state, "reserved": None, "finished_at": at})
    ]
    loop = rules.loops.get(occ.loop) if occ.loop else None
    if loop is not None and facts.state is not None:
        done = replace(occ, state=state)
        out.extend(
            conclusion(
                rules,
                loop,
                done,
                None,
                at,
                f"proposal {trigger}",
                facts.state,
                facts.last_notified,
                old.correlation,
                None,
                counts=False,
            )
        )
    return out


def _auto_run(machines: Machines, event: EventRecord, decision: Decision, at: str) -> list[Effect]:
    """An earned auto-approval: the proposal record says who approved it (the loop's
    `schedule`, or `system` for a route rule), never an operator."""
    assert decision.approved_by is not None
    actor = decision.approved_by
    proposal = _proposal(event, decision, at)
    opened = ProposalState.OPEN
    approved = machines.proposal(decision.human_only, opened, ProposalTrigger.APPROVE, actor=actor)
    journal = Journal(
        Entity.PROPOSAL,
        proposal.proposal_id,
        JournalAction.APPROVED,
        actor,
        from_state=opened,
        to_state=approved,
        note=decision.note,
    )
    approve = DecideProposal(proposal.proposal_id, opened, approved, actor, decision.note)
    rule = str(decision.rule) if decision.rule else None
    return [
        Propose(proposal, decision.note, rule, then=(approve, journal)),
        queue(event, decision.definition, proposal.proposal_id, actor, at, rule=rule),
    ]


def queue(
    event: EventRecord,
    definition: str | None,
    proposal_id: str | None,
    actor: str,
    at: str,
    attempt: int = 0,
    rule: str | None = None,
) -> QueueRun:
    """The run of an approved event, once per idempotency key; a retry of the
    occurrence's job (`attempt` > 0) is a run of its own: `key#N`."""
    assert definition is not None
    key = idempotency_key(event) + (f"#{attempt}" if attempt else "")
    return QueueRun(
        RunRecord(
            run_id=stable_id("run", key),
            idempotency_key=key,
            event_id=event.event_id,
            proposal_id=proposal_id,
            loop=event.loop,
            definition=definition,
            state=RunState.QUEUED,
            approved_by=actor,
            attempts=0,
            lease_owner=None,
            lease_expires_at=None,
            created_at=at,
        ),
        rule,
    )


# ---- the snapshot triage reads ------------------------------------------------------------


def snapshot_of(
    rules: RuleSet,
    loop: Loop,
    event: EventRecord,
    ident: Identity,
    state: LoopState | None,
    in_flight: bool,
    active: int,
    at: str,
) -> TriageSnapshot:
    """The cheap facts of a loop's triage snapshot (docs/occurrences.md)."""
    repo = rules.repos.get(ident.repo) if ident.repo else None
    frozen = bool(repo is not None and repo.frozen)
    return TriageSnapshot(
        payload=event.payload,
        loop=loop.name,
        repo=repo.as_snapshot() if repo is not None else None,
        in_flight=int(in_flight),
        active=active,
        failures=state.consecutive_failures if state else 0,
        nothing_streak=state.nothing_streak if state else 0,
        paused=bool(state and state.paused),
        freeze=frozen or rules.release_freeze,
        now=at,
    )


def with_history(snap: TriageSnapshot, loop: Loop, history: History | None) -> TriageSnapshot:
    """The snapshot with what only a loop that `needs_history` reads."""
    if history is None or not needs_history(loop):
        return snap
    previous = history.previous
    return replace(
        snap,
        last_outcome=history.last_outcome,
        findings=history.findings,
        budget=budget_view(loop, history.usage),
        last_state=previous.state if previous else None,
        last_decision=previous.decision if previous else None,
        occurrences=history.counted,
    )


def history_since(at: str) -> str:
    """Where the day of budget use a snapshot counts begins."""
    return iso(parse_iso(at) - DAY)


# ---- an occurrence that ended -------------------------------------------------------------


def notice(
    kind: str,
    state: str,
    message: str,
    at: str,
    *,
    loop: str | None,
    repo: str | None = None,
    links: dict[str, Any] | None = None,
    subject: str | None = None,
) -> Notify:
    """A notification for (kind, loop, repo[, subject]) reaching `state`: written only
    when the last one for the same subject had another state."""
    key = dedup_key(kind, loop, repo, subject)
    return Notify(
        NotificationRecord(
            seq=0,
            at=at,
            kind=kind,
            loop=loop,
            repo=repo,
            state=state,
            links=links or {},
            message=message,
            dedup_key=key,
        )
    )


def dedup_key(kind: str, loop: str | None, repo: str | None, subject: str | None = None) -> str:
    """What "the same thing" means for quiet notifications: one kind of one loop and
    repository (and subject, where a loop has several, such as findings)."""
    return f"{kind}|{loop or '-'}|{repo or '-'}" + (f"|{subject}" if subject else "")


def pause(
    loop: Loop, why: str, state: str, occ: OccurrenceRecord, at: str, **data: Any
) -> PauseLoop:
    """The schedule pauses its own loop (the breaker, a stop that waits for a person):
    journaled with actor `schedule` and the reason, and notified."""
    then = (
        Journal(
            Entity.LOOP,
            loop.name,
            JournalAction.PAUSED,
            Actor.SCHEDULE,
            note=why,
            data={**data, "occurrence": occ.event_id},
        ),
        # the whole loop pauses: one notification state per loop, whatever the repo
        notice(
            "loop",
            state,
            why,
            at,
            loop=loop.name,
            links={"loop": loop.name, "occurrence": occ.event_id},
        ),
    )
    return PauseLoop(loop.name, why, then)


def conclusion(
    rules: RuleSet,
    loop: Loop,
    occ: OccurrenceRecord,
    cls: FailureClass | None,
    at: str,
    note: str,
    state: LoopState,
    last_notified: str | None,
    correlation: str,
    run: RunRecord | None,
    *,
    counts: bool = True,
    signals: int = 0,
) -> list[Effect]:
    """After an occurrence reached a terminal state: count failures toward the circuit
    breaker (an operator's cancel never counts, nor does a proposal nobody approved:
    `counts=False`), count quiet no-ops, notify a state a person may act on (and a
    success after a notified failure), pause the loop when the breaker trips, admit one
    follow-up tick for coalesced triggers, and fire the loops `after` this one."""
    failures, streak, quiet = state.consecutive_failures, state.nothing_streak, state.quiet_until
    if occ.state == OccurrenceState.CANCELLED or not counts:
        pass  # an operator's cancel (or a stop) is neither a failure nor a success
    elif occ.state == OccurrenceState.COMPLETED:
        failures, streak, quiet = 0, (streak + 1 if cls is FailureClass.NOTHING_TO_DO else 0), None
    elif occ.state == OccurrenceState.NOTHING_TO_DO:
        streak += 1
        if streak >= QUIET_AFTER:
            delay = backoff_delay(loop.policy.backoff, streak - QUIET_AFTER)
            quiet = iso(parse_iso(at) + timedelta(seconds=delay))
    elif (cls in FAILURES) if cls is not None else occ.state in _FAILED:
        # a run that failed (its retries used up included); a day's budget running out
        # before anything ran is not a failure of the loop
        failures += 1
        streak = 0
    out: list[Effect] = [Counters(loop.name, failures, streak, quiet)]
    links = {"occurrence": occ.event_id, "loop": loop.name}
    if occ.state in NOTIFIED_ENDS:
        message = note or f"loop '{loop.name}' {occ.state}"
        out.append(
            notice("occurrence", occ.state, message, at, loop=loop.name, repo=occ.repo, links=links)
        )
    elif occ.state == OccurrenceState.COMPLETED and last_notified in NOTIFIED_ENDS:
        # what was last announced for this loop and repository was a failure: a success
        # is news (whatever reset the failure count meanwhile, e.g. an operator's resume)
        message = f"loop '{loop.name}' succeeded again"
        out.append(
            notice(
                "occurrence", "recovered", message, at, loop=loop.name, repo=occ.repo, links=links
            )
        )
    breaker = loop.policy.circuit_breaker
    if breaker is not None and failures >= breaker and not state.paused:
        why = f"circuit breaker: {failures} consecutive failures (limit {breaker})"
        out.append(pause(loop, why, "breaker_tripped", occ, at, failures=failures))
    if signals > 0 and loop.on_active is OnActive.COALESCE:
        out.extend(_follow_up(loop, occ, signals, at))
    out.extend(_after(rules, occ, correlation, run, at))
    return out


def _follow_up(loop: Loop, occ: OccurrenceRecord, signals: int, at: str) -> list[Effect]:
    """Coalesced triggers become one manual-style tick, admitted through the outbox."""
    token = "coalesced-" + stable_id("f", occ.event_id)
    tick = manual_tick(loop, parse_iso(at), token).model_copy(
        update={"correlationId": occ.event_id}
    )
    return [
        Outbox(tick.model_dump(mode="json"), None, Actor.SCHEDULE),
        Journal(
            Entity.OCCURRENCE,
            occ.event_id,
            JournalAction.FOLLOW_UP,
            Actor.SCHEDULE,
            note=f"{signals} coalesced triggers: one follow-up tick {tick.eventId}",
        ),
    ]


def _after(
    rules: RuleSet, occ: OccurrenceRecord, correlation: str, run: RunRecord | None, at: str
) -> list[Effect]:
    """The ticks of the loops `after` the occurrence's loop (engine.core.triggers)."""
    if occ.loop is None:
        return []
    done = Conclusion(
        loop=occ.loop,
        occurrence=occ.event_id,
        state=occ.state,
        outcome=run.outcome if run is not None else None,
        run=run.run_id if run is not None else None,
        window=occ.window,
        repo=occ.repo,
        correlation=correlation,
        at=parse_iso(at),
    )
    return [
        Admit(after_tick(loop, done), Actor.SCHEDULE, ("occurrence", occ.event_id))
        for loop in dependents(rules, done)
    ]
