"""The worker's authority check: may this run execute under these rules?

Authority is checked when a run is created (planning, approval) and again by the worker
just before it executes, against the rules the worker runs under and the durable record
of who approved the run: the `approved` entries of its proposal in the journal, never
the run's own `approved_by` column, which anyone who can write the database could set.
A run written straight into the database, human-only work approved by a rule, mutating
work of a loop that is now in shadow, work whose definition left the rules or is no
longer routed: each is refused before anything runs (docs/runtime.md#runs, "The
authority check"). Pure: facts in, a verdict out."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from engine.core.decisions import Actor, is_human
from engine.core.records import EventRecord, ProposalRecord, RunRecord
from engine.core.registry import Definition
from engine.core.ruleset import Approval, DefinitionRef, RuleSet


class Refusal(StrEnum):
    """Why a worker refused a run (persisted in the journal's `refused` entry)."""

    NO_EVENT = "no_event"  # the event the run claims to handle is not stored
    UNKNOWN_DEFINITION = "unknown_definition"  # the definition or version left the rules
    NOT_ROUTED = "not_routed"  # no route sends the event's type to this definition
    SHADOW = "shadow"  # mutating work of a loop in shadow mode
    NO_APPROVAL = "no_approval"  # no approval of the run's proposal in the journal
    HUMAN_ONLY = "human_only"  # human-only work without a named human's approval
    APPROVAL_NOT_EARNED = "approval_not_earned"  # a rule's approval these rules do not give


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What the check reads, in the transaction that starts the run."""

    run: RunRecord
    event: EventRecord | None
    proposal: ProposalRecord | None  # the proposal the run names, if it exists
    approvers: tuple[str, ...]  # actors of the `approved` journal entries of that proposal


@dataclass(frozen=True, slots=True)
class Verdict:
    refusal: Refusal | None = None
    note: str = ""

    @property
    def allowed(self) -> bool:
        return self.refusal is None


ALLOWED = Verdict()


def parse_ref(text: str) -> DefinitionRef | None:
    """`id@version` as a reference; None when it is not one."""
    ident, at, version = text.partition("@")
    if not ident or not at or not version.isdigit():
        return None
    return DefinitionRef(ident, int(version))


def definition_of(rules: RuleSet, text: str) -> Definition | None:
    """The definition `id@version` names in `rules`; None when it names none."""
    ref = parse_ref(text)
    return None if ref is None else rules.definitions.get(ref)


def check(facts: RunFacts, rules: RuleSet) -> Verdict:
    """The first reason the run may not execute under `rules`, or ALLOWED."""
    run, event = facts.run, facts.event
    if event is None:
        return Verdict(Refusal.NO_EVENT, f"its event '{run.event_id}' is not stored")
    ref = parse_ref(run.definition)
    definition = rules.definitions.get(ref) if ref is not None else None
    if ref is None or definition is None:
        return Verdict(Refusal.UNKNOWN_DEFINITION, f"'{run.definition}' is not in the rules")
    route = rules.route_of(event.type, event.loop)
    if route is None or route.definition != ref:
        routed = f"to {route.definition}" if route is not None else "nowhere"
        return Verdict(Refusal.NOT_ROUTED, f"the rules route '{event.type}' {routed}, not to {ref}")
    loop = rules.loops.get(run.loop) if run.loop is not None else None
    if definition.mutating and loop is not None and loop.policy.shadow:
        return Verdict(Refusal.SHADOW, f"loop '{loop.name}' is in shadow mode: mutating work")
    return _approval(facts, rules, ref, event)


def _approval(facts: RunFacts, rules: RuleSet, ref: DefinitionRef, event: EventRecord) -> Verdict:
    proposal = facts.proposal
    if (
        proposal is None
        or proposal.event_id != event.event_id
        or proposal.definition != str(ref)
        or not facts.approvers
    ):
        named = f"proposal '{facts.run.proposal_id}'" if facts.run.proposal_id else "no proposal"
        return Verdict(Refusal.NO_APPROVAL, f"the journal holds no approval of it ({named})")
    human_only = (
        proposal.human_only
        or rules.is_human_only(event.type)
        or ref in rules.human_only_definitions
    )
    humans = [a for a in facts.approvers if is_human(a)]
    if human_only and not humans:
        who = ", ".join(facts.approvers)
        return Verdict(Refusal.HUMAN_ONLY, f"human-approval-only work approved by {who}")
    if humans or any(earned(a, facts.run, event, rules) for a in facts.approvers):
        return ALLOWED
    who = ", ".join(facts.approvers)
    return Verdict(
        Refusal.APPROVAL_NOT_EARNED, f"approved by {who}, which these rules do not let approve it"
    )


def earned(actor: str, run: RunRecord, event: EventRecord, rules: RuleSet) -> bool:
    """Whether the rules give `actor` (a rule's approval) the right to approve this run:
    `schedule` for a tick of an `approval auto` loop, `system` for an event whose route
    says `approval auto`."""
    if actor == Actor.SCHEDULE:
        loop = rules.loops.get(run.loop) if run.loop is not None else None
        return (
            loop is not None
            and loop.approval is Approval.AUTO
            and event.loop == loop.name
            and loop.event_type == event.type
        )
    if actor == Actor.SYSTEM:
        route = rules.routes.get(event.type)
        return route is not None and route.approval is Approval.AUTO
    return False
