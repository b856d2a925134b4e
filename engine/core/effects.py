"""What a decision does, as data (docs/architecture.md, "Decide purely, apply once"): a
`Plan` is a tuple of typed effects, each naming the rule (`file:line:col`) that caused
it when one did. `engine.core.decide` makes plans from facts and never writes;
`engine.service.apply` is the one interpreter that writes them, in order, in the
caller's transaction. An effect says what must become true, not how: an insert is
idempotent on its key, a state change is a compare-and-set on the state the facts
showed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from engine.core.envelope import Envelope
from engine.core.records import (
    DecisionRecord,
    FindingRecord,
    NotificationRecord,
    OccurrenceRecord,
    ProposalRecord,
    RunRecord,
)


@dataclass(frozen=True, slots=True)
class Journal:
    """Append one lifecycle record (stamped with the rules digest when applied)."""

    entity: str
    entity_id: str
    action: str
    actor: str
    from_state: str | None = None
    to_state: str | None = None
    note: str = ""
    data: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class MarkPlanned:
    """The event is taken for planning (admitted unplanned, decided now)."""

    event_id: str


@dataclass(frozen=True, slots=True)
class Decide:
    """Persist the event's one decision."""

    record: DecisionRecord


@dataclass(frozen=True, slots=True)
class OpenOccurrence:
    """Open the event's occurrence, in the state its decision leaves it in."""

    record: OccurrenceRecord
    rule: str | None = None


@dataclass(frozen=True, slots=True)
class Transition:
    """Move an occurrence from `expect` (None: whatever it is) and set `changes`."""

    event_id: str
    expect: str | None
    changes: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Signal:
    """One more trigger coalesced into an active occurrence."""

    event_id: str


@dataclass(frozen=True, slots=True)
class Propose:
    """Open a proposal; `then` (its journal, an auto-approval) applies only if it is new."""

    record: ProposalRecord
    note: str
    rule: str | None = None
    then: tuple[Effect, ...] = ()


@dataclass(frozen=True, slots=True)
class DecideProposal:
    """Move an open proposal (approve, supersede); `then` applies only if it moved."""

    proposal_id: str
    expect: str
    to_state: str
    actor: str
    note: str
    then: tuple[Effect, ...] = ()


@dataclass(frozen=True, slots=True)
class QueueRun:
    """Queue the run of an approved event once per idempotency key: journaled `queued`,
    or `converged` on the run that holds the key already."""

    record: RunRecord
    rule: str | None = None


@dataclass(frozen=True, slots=True)
class RecordFinding:
    """Count a candidate finding under its semantic key (journaled recorded or seen)."""

    record: FindingRecord
    note: str
    occurrence: str
    rule: str | None = None


@dataclass(frozen=True, slots=True)
class Notify:
    """A quiet notification: written only when its subject's state changed."""

    record: NotificationRecord


@dataclass(frozen=True, slots=True)
class Counters:
    """The loop's failure and nothing-to-do streaks and its quiet period."""

    loop: str
    failures: int
    streak: int
    quiet_until: str | None


@dataclass(frozen=True, slots=True)
class PauseLoop:
    """The schedule pauses its own loop; `then` (journal, notification) only if it was
    not paused already."""

    loop: str
    why: str
    then: tuple[Effect, ...] = ()
    rule: str | None = None


@dataclass(frozen=True, slots=True)
class Admit:
    """Admit an event the runtime makes (a trigger's tick) as `actor`, unplanned: the
    planning batch decides it next. `cause` is the (entity, id) journaled `fired` (or
    `trigger_refused` when the tick does not fit its type's schema)."""

    envelope: Envelope
    actor: str
    cause: tuple[str, str]


@dataclass(frozen=True, slots=True)
class Outbox:
    """An event to admit through the outbox (a coalesced follow-up)."""

    event: dict[str, Any]
    origin_run: str | None
    actor: str


@dataclass(frozen=True, slots=True)
class WorkCommand:
    """An admitted `work.open`, `work.complete` or `work.cancel` event's command on a
    work item (docs/work.md#work-from-events), as the event's admitting actor; applied
    with the work machine on the item the transaction reads, journaled on the item, or
    `work_refused` on the event when the machine refuses it."""

    event_id: str
    command: str  # the event type
    payload: dict[str, Any]
    actor: str


@dataclass(frozen=True, slots=True)
class MoveBinding:
    """A work-bound instance's binding moves (its work ended: `disabled`; its work is
    gone: `paused`), a compare-and-set on the version the decision read; journaled on
    the work item."""

    binding_id: str
    work_id: str
    expect_version: int
    to_state: str
    note: str


Effect: TypeAlias = (
    Journal
    | MarkPlanned
    | Decide
    | OpenOccurrence
    | Transition
    | Signal
    | Propose
    | DecideProposal
    | QueueRun
    | RecordFinding
    | Notify
    | Counters
    | PauseLoop
    | Admit
    | Outbox
    | WorkCommand
    | MoveBinding
)
Plan: TypeAlias = tuple[Effect, ...]
