"""What the store keeps: plain frozen records with stable string states (the
lifecycle vocabulary of engine.core.states)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Final

from engine.core.decisions import Actor
from engine.core.states import EventSource, RunState

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


# The sources an older engine wrote for the ticks it made, by the one spelling now
# (docs/runtime.md#who-may-tick-a-loop). Migration 011 rewrites the stored ones; a row
# an older node writes beside this one after it (one PostgreSQL, several nodes) reads
# the same.
OLD_TICK_SOURCES: Final = {"on-event": EventSource.ON_EVENT}


def current_source(source: str, admitted_by: str) -> str:
    """The source of a stored event in the one spelling: a tick the runtime made
    (admitted by `schedule`) under an old spelling reads as the new one; whatever an
    event from outside claimed is kept as it claimed it."""
    return OLD_TICK_SOURCES.get(source, source) if admitted_by == Actor.SCHEDULE else source


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
    # The facts the decision read (engine.core.codec.encode_facts), for `engine replay`;
    # None for a decision made before they were recorded.
    facts: str | None = None


@dataclass(frozen=True, slots=True)
class DeliveryRecord:
    """A GitHub delivery as it was admitted, beside the event it became (`event_id`):
    its X-GitHub-Delivery GUID, its X-GitHub-Event kind, its JSON body as the text
    GitHub sent (a JSON object), the `emit` line that admitted it (file:line:col) and
    the instant it was translated at. Kept so `engine replay` can translate it again
    (docs/replay.md)."""

    event_id: str
    delivery_id: str
    kind: str
    body: str
    rule: str
    received_at: str


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
    consecutive_failures: int = 0  # terminal failures in a row (the circuit breaker)
    nothing_streak: int = 0  # `nothing_to_do` occurrences in a row
    quiet_until: str | None = None


@dataclass(frozen=True, slots=True)
class ObservationRecord:
    """A watch loop's last observation of its probe: metadata only, never the probe's
    output (docs/scheduling.md, "Condition watches")."""

    loop: str
    fingerprint: str | None = None  # the last good one; None before the baseline
    changes: int = 0  # changes seen since the baseline (each fired the loop once)
    observed_at: str | None = None  # the last poll
    status: str = "ok"  # of the last poll: ok | failed
    diagnostic: str = ""  # why the last poll failed (at most 500 characters)
    consecutive_failures: int = 0
    polls: int = 0  # every poll, unchanged ones included
    next_poll_at: str | None = None  # the last poll plus the cadence, or the backoff
    changed_at: str | None = None  # the last change


@dataclass(frozen=True, slots=True)
class SkipRecord:
    """Due slots that did not fire, as a range, and why."""

    loop: str
    first_slot: str
    last_slot: str
    count: int
    reason: str
    recorded_at: str


@dataclass(frozen=True, slots=True)
class OccurrenceRecord:
    """One bounded window of one loop for one repository, keyed by the event that opened
    it (`event_id`) and by `occurrence_key` ("<loop>|<repo or ->|<window>"). JSON
    columns (`evidence`, `reserved`, `used`) read back as dicts."""

    event_id: str
    loop: str | None
    state: str
    updated_at: str
    occurrence_key: str | None = None
    repo: str | None = None
    window: str | None = None
    decision: str | None = None  # the triage decision
    evidence: dict[str, Any] | None = None  # what triage saw, the line that matched
    attempt: int = 0
    retry_at: str | None = None
    signals: int = 0  # triggers coalesced into it while it was active
    reserved: dict[str, Any] | None = None  # budget reserved before dispatch
    used: dict[str, Any] | None = None  # budget settled when it finished
    created_at: str | None = None
    finished_at: str | None = None
    failure_class: str | None = None
    # what it works on, for a loop with a key (docs/rules.md#semantic-keys-key); set when
    # it is opened, never changed
    semantic_key: str | None = None


@dataclass(frozen=True, slots=True)
class FindingRecord:
    """A deduplicated observation (one per `semantic_key`), seen `occurrence_count`
    times; a human promotes or dismisses a candidate."""

    finding_id: str
    semantic_key: str
    loop: str | None
    repo: str | None
    category: str
    evidence: dict[str, Any] | None
    confidence: float | None
    recommended_action: str | None
    status: str  # "candidate" | "promoted" | "dismissed"
    occurrence_count: int
    first_seen_at: str
    last_seen_at: str
    last_occurrence: str | None  # the event id of the occurrence that saw it last
    decided_by: str | None = None
    decided_at: str | None = None
    promoted_event: str | None = None


@dataclass(frozen=True, slots=True)
class NotificationRecord:
    """An announcement waiting for (or past) delivery to the configured sinks
    (docs/notifications.md). `seq` is the store's (ignored when enqueuing); `delivery`
    is its state across the sinks (engine.core.delivery: pending, delivered, failed),
    `attempts` the most any sink made, `next_attempt_at` when one is due again."""

    seq: int
    at: str
    kind: str
    loop: str | None
    repo: str | None
    state: str
    links: dict[str, Any]
    message: str
    dedup_key: str
    delivered_at: str | None = None
    attempts: int = 0
    last_error: str | None = None
    next_attempt_at: str | None = None
    delivery: str = "pending"


@dataclass(frozen=True, slots=True)
class SinkDelivery:
    """One notification at one sink (by the sink's name): pending (not taken yet, or
    failed and due again at `next_attempt_at`), delivered, or failed (given up)."""

    seq: int
    sink: str
    state: str = "pending"
    attempts: int = 0
    last_error: str | None = None
    last_attempt_at: str | None = None
    next_attempt_at: str | None = None
    delivered_at: str | None = None


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def document(value: Any) -> dict[str, Any] | None:
    """A frozen record dataclass as the camelCase dict the API shows (None stays None)."""
    if value is None:
        return None
    return {camel(f.name): getattr(value, f.name) for f in dataclasses.fields(value)}
