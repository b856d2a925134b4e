"""What the store keeps: plain frozen records with stable string states (the
lifecycle vocabulary of engine.core.states)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.core.states import RunState

IN_FLIGHT = (RunState.QUEUED, RunState.CLAIMED, RunState.RUNNING)
LEASED = (RunState.CLAIMED, RunState.RUNNING)


@dataclass(frozen=True, slots=True)
class EventRecord:
    event_id: str
    type: str
    source: str
    subject: str
    occurred_at: str
    correlation_id: str
    payload: dict[str, Any]
    loop: str | None
    admitted_at: str
    admitted_by: str
    planned: bool = False


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    event_id: str
    kind: str
    reason: str | None
    definition: str | None
    loop: str | None
    approved_by: str | None
    human_only: bool
    mutating: bool
    rule: str | None
    note: str
    rules_digest: str
    decided_at: str


@dataclass(frozen=True, slots=True)
class ProposalRecord:
    proposal_id: str
    event_id: str
    loop: str | None
    definition: str
    state: str
    human_only: bool
    mutating: bool
    created_at: str
    decided_at: str | None = None
    decided_by: str | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class RunRecord:
    run_id: str
    idempotency_key: str
    event_id: str
    proposal_id: str | None
    loop: str | None
    definition: str
    state: str
    approved_by: str
    attempts: int
    lease_owner: str | None
    lease_expires_at: str | None
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    outcome: str | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    artifact: str | None = None


@dataclass(frozen=True, slots=True)
class JournalEntry:
    at: str
    entity: str  # "event" | "occurrence" | "proposal" | "run" | "loop"
    entity_id: str
    action: str
    actor: str
    from_state: str | None = None
    to_state: str | None = None
    rules_digest: str | None = None
    note: str = ""
    data: dict[str, Any] | None = None
    seq: int | None = None


@dataclass(frozen=True, slots=True)
class OutboxItem:
    seq: int
    event: dict[str, Any]
    origin_run: str | None
    actor: str
    created_at: str


@dataclass(frozen=True, slots=True)
class LoopState:
    """The scheduler's durable state of one loop."""

    loop: str
    enabled: bool
    enabled_since: str | None
    cursor: str | None  # the newest slot accounted for (fired or skipped)
    last_slot: str | None  # the newest slot fired
    paused: bool
    pause_note: str
    paused_by: str | None
    updated_at: str


@dataclass(frozen=True, slots=True)
class SkipRecord:
    """Due slots that did not fire, as a range, and why."""

    loop: str
    first_slot: str
    last_slot: str
    count: int
    reason: str
    recorded_at: str
