"""The lifecycles as data: pure tables of states and transitions, shaped by a profile.

A `Profile` is what the rules decide for one loop or event type (approval, singleton,
human-only, shadow). `occurrence_spec(profile)` turns it into a `MachineSpec`: the
rules add or remove edges (a watched profile has no `dispatch` edge, so trying it is
illegal) and put guard conditions on others (`no_run_in_flight`, `actor_is_human`).
This module imports no state-machine library, does no I/O and reads no clock;
`engine.machines.compiled` compiles these specs into `transitions` machines.

Design notes the runtime relies on:

- Every non-terminal occurrence state can end in any failure terminal (seed 2 §5 lists
  five sources; `awaiting_approval` is the sixth).
- The singleton guard sits on the decision edges (`propose`, `dispatch`): a loop with a
  run in flight takes `noop` (reason `previous_run_in_flight`). An open proposal is not
  a run: a newer slot's proposal supersedes it, so an unapproved proposal never
  silences a loop.
- A deferred occurrence re-plans (`resume` back to `triaging`) rather than keeping a
  stale decision.
- A run whose lease expires goes back to `queued` while attempts remain, else to
  `failed` (two ordered branches of `expire_lease`)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from engine.core.ruleset import Approval
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

St = OccurrenceState
Tr = OccurrenceTrigger


@dataclass(frozen=True, slots=True)
class TransitionSpec:
    """One edge: `trigger` moves any of `sources` to `dest` when every condition holds
    and no `unless` condition does. Edges of one trigger are tried in order."""

    trigger: str
    sources: tuple[str, ...]
    dest: str
    conditions: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MachineSpec:
    """A whole lifecycle: its states in display order, where it starts and ends."""

    name: str
    kind: MachineKind
    states: tuple[str, ...]
    initial: str
    terminal: tuple[str, ...]
    transitions: tuple[TransitionSpec, ...]


@dataclass(frozen=True, slots=True)
class Profile:
    """What the rules decide for one loop or event type; it shapes the machines."""

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
    def proposes(self) -> bool:
        """A decision waits for an operator: watched, or human-only whatever it says."""
        return not self.shadow and (self.approval is Approval.WATCHED or self.human_only)

    @property
    def dispatches(self) -> bool:
        """A decision runs at once: auto approval earned, and never for human-only."""
        return not self.shadow and self.approval is Approval.AUTO and not self.human_only


DEFAULT_PROFILE = Profile()  # a loop's defaults: watched, singleton

ALL_PROFILES: tuple[Profile, ...] = tuple(
    Profile(approval, singleton, human_only, shadow)
    for approval, singleton, human_only, shadow in itertools.product(
        Approval, (False, True), (False, True), (False, True)
    )
)


# ---- occurrence ------------------------------------------------------------------------

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

FAILURES = (
    (Tr.FAIL, St.FAILED),
    (Tr.TIME_OUT, St.TIMED_OUT),
    (Tr.EXHAUST_BUDGET, St.BUDGET_EXHAUSTED),
    (Tr.ESCALATE, St.HUMAN_ATTENTION_REQUIRED),
    (Tr.BLOCK, St.EXTERNAL_BLOCKER),
    (Tr.CANCEL, St.CANCELLED),
)


def _names(values: Iterable[str]) -> tuple[str, ...]:
    """Plain strings: `transitions` would treat enum members as Enum states."""
    return tuple(str(v) for v in values)


def _edge(
    trigger: str,
    sources: str | tuple[str, ...],
    dest: str,
    conditions: tuple[str, ...] = (),
    unless: tuple[str, ...] = (),
) -> TransitionSpec:
    return TransitionSpec(
        str(trigger),
        _names((sources,) if isinstance(sources, str) else sources),
        str(dest),
        _names(conditions),
        _names(unless),
    )


def _spec(
    name: str,
    kind: MachineKind,
    states: Iterable[str],
    terminal: Iterable[str],
    edges: Iterable[TransitionSpec],
) -> MachineSpec:
    """The first state is the initial one."""
    names = _names(states)
    return MachineSpec(name, kind, names, names[0], _names(terminal), tuple(edges))


def _singleton_guard(profile: Profile) -> tuple[str, ...]:
    return (Condition.NO_RUN_IN_FLIGHT,) if profile.singleton else ()


def _human_guard(profile: Profile) -> tuple[str, ...]:
    return (Condition.ACTOR_IS_HUMAN,) if profile.human_only else ()


def _decision_edges(profile: Profile) -> list[TransitionSpec]:
    """What triage may decide: the profile decides which edges exist at all."""
    edges = [
        _edge(Tr.TRIAGE, St.CREATED, St.TRIAGING),
        _edge(Tr.NOOP, St.TRIAGING, St.NOTHING_TO_DO),
        _edge(Tr.RECORD_CANDIDATE, St.TRIAGING, St.CANDIDATE_RECORDED),
        _edge(Tr.DEFER, St.TRIAGING, St.WAITING_FOR_RESOURCE),
        _edge(Tr.RESUME, St.WAITING_FOR_RESOURCE, St.TRIAGING),
    ]
    if profile.shadow:
        edges.append(_edge(Tr.RECORD_SHADOW, St.TRIAGING, St.SHADOW_RECORDED))
    if profile.proposes:
        edges.append(
            _edge(Tr.PROPOSE, St.TRIAGING, St.AWAITING_APPROVAL, _singleton_guard(profile))
        )
    if profile.dispatches:
        edges.append(_edge(Tr.DISPATCH, St.TRIAGING, St.WORK_DISPATCHED, _singleton_guard(profile)))
    return edges


def _approval_edges(profile: Profile) -> list[TransitionSpec]:
    """How an open proposal resolves; only profiles that propose have them."""
    if not profile.proposes:
        return []
    return [
        _edge(Tr.APPROVE, St.AWAITING_APPROVAL, St.WORK_DISPATCHED, _human_guard(profile)),
        _edge(Tr.REJECT, St.AWAITING_APPROVAL, St.CANCELLED),
        _edge(Tr.EXPIRE, St.AWAITING_APPROVAL, St.TIMED_OUT),
        _edge(Tr.SUPERSEDE, St.AWAITING_APPROVAL, St.CANCELLED),
    ]


def _work_edges(profile: Profile) -> list[TransitionSpec]:
    if not (profile.proposes or profile.dispatches):
        return []
    return [
        _edge(Tr.VERIFY, St.WORK_DISPATCHED, St.VERIFYING),
        _edge(Tr.COMPLETE, St.VERIFYING, St.COMPLETED),
        _edge(Tr.RETRY, St.VERIFYING, St.WAITING_FOR_RESOURCE),
    ]


def _failure_edges() -> list[TransitionSpec]:
    return [_edge(trigger, OCCURRENCE_ACTIVE, dest) for trigger, dest in FAILURES]


@functools.cache
def occurrence_spec(profile: Profile) -> MachineSpec:
    """The occurrence lifecycle of one profile (cached: a profile always gives one spec)."""
    edges = (
        _decision_edges(profile)
        + _approval_edges(profile)
        + _work_edges(profile)
        + _failure_edges()
    )
    return _spec(
        f"occurrence[{profile.name}]", MachineKind.OCCURRENCE, St, OCCURRENCE_TERMINAL, edges
    )


# ---- proposal --------------------------------------------------------------------------


@functools.cache
def proposal_spec(human_only: bool) -> MachineSpec:
    """open -> approved | rejected | expired | superseded; human-only approval is guarded."""
    P, PT = ProposalState, ProposalTrigger
    guard = (Condition.ACTOR_IS_HUMAN,) if human_only else ()
    return _spec(
        "proposal[human-only]" if human_only else "proposal",
        MachineKind.PROPOSAL,
        P,
        (P.APPROVED, P.REJECTED, P.EXPIRED, P.SUPERSEDED),
        (
            _edge(PT.APPROVE, P.OPEN, P.APPROVED, guard),
            _edge(PT.REJECT, P.OPEN, P.REJECTED),
            _edge(PT.EXPIRE, P.OPEN, P.EXPIRED),
            _edge(PT.SUPERSEDE, P.OPEN, P.SUPERSEDED),
        ),
    )


# ---- run -------------------------------------------------------------------------------


@functools.cache
def run_spec() -> MachineSpec:
    """queued -> claimed -> running -> succeeded | failed | timed_out, or cancelled.
    A lost lease requeues while attempts remain, else fails."""
    R, RT = RunState, RunTrigger
    leased = (R.CLAIMED, R.RUNNING)
    attempts = (Condition.ATTEMPTS_REMAIN,)
    return _spec(
        "run",
        MachineKind.RUN,
        R,
        (R.SUCCEEDED, R.FAILED, R.TIMED_OUT, R.CANCELLED),
        (
            _edge(RT.CLAIM, R.QUEUED, R.CLAIMED),
            _edge(RT.START, R.CLAIMED, R.RUNNING),
            _edge(RT.SUCCEED, R.RUNNING, R.SUCCEEDED),
            _edge(RT.FAIL, leased, R.FAILED),
            _edge(RT.TIME_OUT, R.RUNNING, R.TIMED_OUT),
            _edge(RT.EXPIRE_LEASE, leased, R.QUEUED, conditions=attempts),
            _edge(RT.EXPIRE_LEASE, leased, R.FAILED, unless=attempts),
            _edge(RT.CANCEL, (R.QUEUED, *leased), R.CANCELLED),
        ),
    )
