"""The three lifecycles as data, in one file: the occurrence, proposal and run tables as
literal `{(state, trigger): next_state}` dicts, the guards the rules put on some moves,
and beside them the rule for which table a step uses (docs/architecture.md,
"engine.machines"). Firing a trigger is one dict lookup, plus the guard when the move
has one (`engine.core.table`); an unknown move raises IllegalTransition (a Conflict)
and changes nothing.

A guard reads a fact its caller cannot make up (`StepFacts`: the actor of the step, as
authenticated; whether the loop has a run in flight, as read from the store; how many
attempts a run has left), so it can refuse. Pure data and pure functions: no I/O, no
clock, no state-machine library. `engine.machines` builds `transitions` machines from
these tables for `engine diagram`, and a test holds that both answer the same."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from engine.core.ruleset import Approval, Loop, RuleSet
from engine.core.states import (
    Condition,
    MachineKind,
    OccurrenceState,
    OccurrenceTrigger,
    ProposalState,
    ProposalTrigger,
    RunState,
    RunTrigger,
)
from engine.core.table import Guard, Guards, Machine, Moves, StepFacts

St, Tr = OccurrenceState, OccurrenceTrigger
P, PT = ProposalState, ProposalTrigger
R, RT = RunState, RunTrigger


# ---- the occurrence ------------------------------------------------------------------------

OCCURRENCE_TERMINAL = (
    St.NOTHING_TO_DO,
    St.CANDIDATE_RECORDED,
    St.COMPLETED,
    St.SHADOW_RECORDED,
    St.FAILED,
    St.TIMED_OUT,
    St.BUDGET_EXHAUSTED,
    St.HUMAN_ATTENTION_REQUIRED,
    St.EXTERNAL_BLOCKER,
    St.CANCELLED,
)
OCCURRENCE_ACTIVE = tuple(s for s in St if s not in OCCURRENCE_TERMINAL)

# Every active occurrence can end in any failure terminal (docs/occurrences.md).
FAILURE_ENDS: Mapping[str, str] = {
    Tr.FAIL: St.FAILED,
    Tr.TIME_OUT: St.TIMED_OUT,
    Tr.EXHAUST_BUDGET: St.BUDGET_EXHAUSTED,
    Tr.ESCALATE: St.HUMAN_ATTENTION_REQUIRED,
    Tr.BLOCK: St.EXTERNAL_BLOCKER,
    Tr.CANCEL: St.CANCELLED,
}

# What every profile decides: triage, a no-op or a candidate, a deferral that re-plans.
TRIAGE: Moves = {
    (St.CREATED, Tr.TRIAGE): St.TRIAGING,
    (St.TRIAGING, Tr.NOOP): St.NOTHING_TO_DO,
    (St.TRIAGING, Tr.RECORD_CANDIDATE): St.CANDIDATE_RECORDED,
    (St.TRIAGING, Tr.DEFER): St.WAITING_FOR_RESOURCE,
    (St.WAITING_FOR_RESOURCE, Tr.RESUME): St.TRIAGING,
}
# An open proposal resolves.
APPROVAL: Moves = {
    (St.AWAITING_APPROVAL, Tr.APPROVE): St.WORK_DISPATCHED,
    (St.AWAITING_APPROVAL, Tr.REJECT): St.CANCELLED,
    (St.AWAITING_APPROVAL, Tr.EXPIRE): St.TIMED_OUT,
    (St.AWAITING_APPROVAL, Tr.SUPERSEDE): St.CANCELLED,
}
# Dispatched work finished: verified, then completed or sent back to wait for a retry.
WORK: Moves = {
    (St.WORK_DISPATCHED, Tr.VERIFY): St.VERIFYING,
    (St.VERIFYING, Tr.COMPLETE): St.COMPLETED,
    (St.VERIFYING, Tr.RETRY): St.WAITING_FOR_RESOURCE,
}
FAILURES: Moves = {
    (state, trigger): end for state in OCCURRENCE_ACTIVE for trigger, end in FAILURE_ENDS.items()
}


class Decides(StrEnum):
    """What a decision of a profile leads to: the key of the occurrence tables."""

    SHADOW = "shadow"  # records what it would dispatch, never proposes or dispatches
    PROPOSE = "propose"  # waits for an operator (watched, or human-only whatever it says)
    DISPATCH = "dispatch"  # runs at once (approval auto earned, never human-only)


OCCURRENCE: Mapping[Decides, Moves] = {
    Decides.SHADOW: {
        **TRIAGE,
        (St.TRIAGING, Tr.RECORD_SHADOW): St.SHADOW_RECORDED,
        **FAILURES,
    },
    Decides.PROPOSE: {
        **TRIAGE,
        (St.TRIAGING, Tr.PROPOSE): St.AWAITING_APPROVAL,
        **APPROVAL,
        **WORK,
        **FAILURES,
    },
    Decides.DISPATCH: {
        **TRIAGE,
        (St.TRIAGING, Tr.DISPATCH): St.WORK_DISPATCHED,
        **WORK,
        **FAILURES,
    },
}

# A singleton loop decides nothing while a run of it is in flight (the planner answers
# `noop` with reason previous_run_in_flight; the guard holds the machine to it). An open
# proposal is not a run: a newer slot's proposal supersedes it.
SINGLETON_GUARDS: Guards = {
    (St.TRIAGING, Tr.PROPOSE): Guard(Condition.NO_RUN_IN_FLIGHT),
    (St.TRIAGING, Tr.DISPATCH): Guard(Condition.NO_RUN_IN_FLIGHT),
}
HUMAN_ONLY_GUARDS: Guards = {
    (St.AWAITING_APPROVAL, Tr.APPROVE): Guard(Condition.ACTOR_IS_HUMAN),
}


# ---- the proposal and the run ----------------------------------------------------------------

PROPOSAL_TERMINAL = (P.APPROVED, P.REJECTED, P.EXPIRED, P.SUPERSEDED)
PROPOSAL: Moves = {
    (P.OPEN, PT.APPROVE): P.APPROVED,
    (P.OPEN, PT.REJECT): P.REJECTED,
    (P.OPEN, PT.EXPIRE): P.EXPIRED,
    (P.OPEN, PT.SUPERSEDE): P.SUPERSEDED,
}
PROPOSAL_HUMAN_ONLY_GUARDS: Guards = {(P.OPEN, PT.APPROVE): Guard(Condition.ACTOR_IS_HUMAN)}

RUN_TERMINAL = (R.SUCCEEDED, R.FAILED, R.TIMED_OUT, R.CANCELLED)
RUN: Moves = {
    (R.QUEUED, RT.CLAIM): R.CLAIMED,
    (R.CLAIMED, RT.START): R.RUNNING,
    (R.RUNNING, RT.SUCCEED): R.SUCCEEDED,
    (R.CLAIMED, RT.FAIL): R.FAILED,
    (R.RUNNING, RT.FAIL): R.FAILED,
    (R.RUNNING, RT.TIME_OUT): R.TIMED_OUT,
    (R.CLAIMED, RT.EXPIRE_LEASE): R.QUEUED,
    (R.RUNNING, RT.EXPIRE_LEASE): R.QUEUED,
    (R.QUEUED, RT.CANCEL): R.CANCELLED,
    (R.CLAIMED, RT.CANCEL): R.CANCELLED,
    (R.RUNNING, RT.CANCEL): R.CANCELLED,
}
# A lost lease requeues while attempts remain, else the run fails.
RUN_GUARDS: Guards = {
    (R.CLAIMED, RT.EXPIRE_LEASE): Guard(Condition.ATTEMPTS_REMAIN, otherwise=R.FAILED),
    (R.RUNNING, RT.EXPIRE_LEASE): Guard(Condition.ATTEMPTS_REMAIN, otherwise=R.FAILED),
}


# ---- which machine a step uses ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Profile:
    """The facts of the rules that shape the machines of one loop or event type."""

    approval: Approval = Approval.WATCHED
    singleton: bool = True
    human_only: bool = False
    shadow: bool = False

    @property
    def name(self) -> str:
        """A stable label, e.g. `watched+singleton+human-only`."""
        flags = (
            ("singleton", self.singleton),
            ("human-only", self.human_only),
            ("shadow", self.shadow),
        )
        return "+".join([str(self.approval), *(label for label, on in flags if on)])

    @property
    def decides(self) -> Decides:
        """Which occurrence table the profile uses: shadow records; human-only or watched
        proposes; auto dispatches."""
        if self.shadow:
            return Decides.SHADOW
        if self.approval is Approval.WATCHED or self.human_only:
            return Decides.PROPOSE
        return Decides.DISPATCH


DEFAULT_PROFILE = Profile()  # a loop's defaults: watched, singleton
ALL_PROFILES: tuple[Profile, ...] = tuple(
    Profile(approval, singleton, human_only, shadow)
    for approval, singleton, human_only, shadow in itertools.product(
        Approval, (False, True), (False, True), (False, True)
    )
)
# The steps after a decision follow the path the occurrence took, whatever the rules say
# now: an occurrence that was proposed resolves on the proposing table (guarded when its
# proposal is human-only), one whose work was dispatched on the dispatching table.
PROPOSED = {flag: Profile(Approval.WATCHED, False, flag) for flag in (False, True)}
DISPATCHED = Profile(Approval.AUTO, False, False)


@functools.cache
def occurrence_machine(profile: Profile) -> Machine:
    """The occurrence table of `profile`, with the guards its facts put on it."""
    moves = OCCURRENCE[profile.decides]
    guards = {
        **(SINGLETON_GUARDS if profile.singleton else {}),
        **(HUMAN_ONLY_GUARDS if profile.human_only else {}),
    }
    return Machine(
        f"occurrence[{profile.name}]",
        MachineKind.OCCURRENCE,
        tuple(St),
        frozenset(OCCURRENCE_TERMINAL),
        moves,
        {key: guard for key, guard in guards.items() if key in moves},
    )


@functools.cache
def proposal_machine(human_only: bool) -> Machine:
    """The proposal table; a human-only proposal is approved by a human only."""
    return Machine(
        "proposal[human-only]" if human_only else "proposal",
        MachineKind.PROPOSAL,
        tuple(P),
        frozenset(PROPOSAL_TERMINAL),
        PROPOSAL,
        PROPOSAL_HUMAN_ONLY_GUARDS if human_only else {},
    )


RUN_MACHINE = Machine("run", MachineKind.RUN, tuple(R), frozenset(RUN_TERMINAL), RUN, RUN_GUARDS)


def loop_profile(rules: RuleSet, loop: Loop) -> Profile:
    """A loop's ticks: its own approval and singleton flag, and its compiled shadow (on
    for a loop of mutating work that does not say `shadow false`, docs/rules.md)."""
    return Profile(
        loop.approval, loop.singleton, rules.is_human_only(loop.event_type), loop.policy.shadow
    )


def event_type_profile(rules: RuleSet, event_type: str) -> Profile:
    """Events no loop emitted (webhooks, chains, injections): the route's approval,
    watched when unrouted; never singleton, never shadow."""
    route = rules.routes.get(event_type)
    approval = route.approval if route is not None else Approval.WATCHED
    return Profile(approval, False, rules.is_human_only(event_type), False)


def planning_profile(rules: RuleSet, loop: str | None, event_type: str) -> Profile:
    """Which profile plans an event: a loop's tick its loop's, any other event its type's."""
    found = rules.loops.get(loop) if loop is not None else None
    return (
        loop_profile(rules, found) if found is not None else event_type_profile(rules, event_type)
    )


class Lifecycle:
    """Fires the steps of one rule set's lifecycles, each on the machine the rule above
    gives it: planning on the profile the current rules give the loop or event type;
    the steps after the decision on the path the occurrence took (`PROPOSED`,
    `DISPATCHED`), so an occurrence proposed under watched rules is still approvable
    after the loop earns `approval auto`. Each guard reads the fact given by keyword."""

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        self._planning: dict[tuple[str | None, str], Machine] = {}

    def occurrence_machine(self, loop: str | None, event_type: str) -> Machine:
        """The machine that plans an event of `loop` (a tick) or of `event_type`."""
        key = (loop, event_type)
        found = self._planning.get(key)
        if found is None:
            found = occurrence_machine(planning_profile(self.rules, loop, event_type))
            self._planning[key] = found
        return found

    def occurrence(
        self,
        loop: str | None,
        event_type: str,
        state: str,
        trigger: str,
        *,
        in_flight: bool | None = None,
    ) -> str:
        """A planning step; a singleton loop's decision reads whether a run is in flight."""
        facts = StepFacts(in_flight=in_flight)
        return self.occurrence_machine(loop, event_type).fire(state, trigger, facts)

    def proposed(
        self, human_only: bool, state: str, trigger: str, *, actor: str | None = None
    ) -> str:
        """A step of an occurrence that was proposed: approve (by `actor`), reject,
        expire, supersede."""
        machine = occurrence_machine(PROPOSED[human_only])
        return machine.fire(state, trigger, StepFacts(actor=actor))

    def dispatched(self, state: str, trigger: str) -> str:
        """A step of an occurrence whose work was dispatched: verify, complete, retry,
        resume, fail."""
        return occurrence_machine(DISPATCHED).fire(state, trigger)

    def proposal(
        self, human_only: bool, state: str, trigger: str, *, actor: str | None = None
    ) -> str:
        """A step of a proposal; a human-only one is approved only by a human `actor`."""
        return proposal_machine(human_only).fire(state, trigger, StepFacts(actor=actor))

    def run(self, state: str, trigger: str, *, attempts_left: int | None = None) -> str:
        """A step of a run; a lost lease reads how many attempts the run has left."""
        return RUN_MACHINE.fire(state, trigger, StepFacts(attempts_left=attempts_left))
