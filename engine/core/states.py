"""The vocabulary of the three lifecycles: states, triggers and guard conditions.

Every value is a stable string: it is persisted in the database and the journal, and
shown in diagrams, so a member's value never changes once released. Pure data; the
tables that connect these names live in `engine.core.machines`."""

from __future__ import annotations

from enum import StrEnum


class MachineKind(StrEnum):
    """The three lifecycles; also the generic `engine diagram` targets."""

    OCCURRENCE = "occurrence"  # one admitted trigger (a tick, a webhook, a chained event)
    PROPOSAL = "proposal"  # a watched decision waiting for an operator
    RUN = "run"  # approved work, claimed and executed by a worker


class OccurrenceState(StrEnum):
    """The lifecycle of docs/occurrences.md#the-lifecycle, plus `awaiting_approval` and
    `shadow_recorded`."""

    CREATED = "created"
    TRIAGING = "triaging"
    NOTHING_TO_DO = "nothing_to_do"
    CANDIDATE_RECORDED = "candidate_recorded"
    AWAITING_APPROVAL = "awaiting_approval"  # a watched proposal is open
    WAITING_FOR_RESOURCE = "waiting_for_resource"
    WORK_DISPATCHED = "work_dispatched"
    VERIFYING = "verifying"
    COMPLETED = "completed"
    SHADOW_RECORDED = "shadow_recorded"  # shadow mode recorded what it would dispatch
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    BUDGET_EXHAUSTED = "budget_exhausted"
    HUMAN_ATTENTION_REQUIRED = "human_attention_required"
    EXTERNAL_BLOCKER = "external_blocker"
    CANCELLED = "cancelled"


class OccurrenceTrigger(StrEnum):
    TRIAGE = "triage"  # created -> triaging: planning starts
    NOOP = "noop"  # triaging -> nothing_to_do: a NOOP decision (any reason)
    RECORD_CANDIDATE = "record_candidate"  # triaging -> candidate_recorded
    RECORD_SHADOW = "record_shadow"  # triaging -> shadow_recorded (shadow profiles only)
    PROPOSE = "propose"  # triaging -> awaiting_approval (watched or human-only)
    DISPATCH = "dispatch"  # triaging -> work_dispatched (auto, not human-only)
    DEFER = "defer"  # triaging -> waiting_for_resource (budget, lock, capacity)
    RESUME = "resume"  # waiting_for_resource -> triaging: re-plan from a fresh snapshot
    APPROVE = "approve"  # awaiting_approval -> work_dispatched
    REJECT = "reject"  # awaiting_approval -> cancelled
    EXPIRE = "expire"  # awaiting_approval -> timed_out
    SUPERSEDE = "supersede"  # awaiting_approval -> cancelled: a newer slot's proposal
    VERIFY = "verify"  # work_dispatched -> verifying: the run finished
    COMPLETE = "complete"  # verifying -> completed: the result met its contract
    RETRY = "retry"  # verifying -> waiting_for_resource: a retry or a conflict wait
    FAIL = "fail"
    TIME_OUT = "time_out"
    EXHAUST_BUDGET = "exhaust_budget"
    ESCALATE = "escalate"  # -> human_attention_required
    BLOCK = "block"  # -> external_blocker
    CANCEL = "cancel"


class ProposalState(StrEnum):
    OPEN = "open"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"


class ProposalTrigger(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"
    EXPIRE = "expire"
    SUPERSEDE = "supersede"


class RunState(StrEnum):
    QUEUED = "queued"
    CLAIMED = "claimed"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


class RunTrigger(StrEnum):
    CLAIM = "claim"  # queued -> claimed: a worker took the lease
    START = "start"  # claimed -> running: the adapter started
    SUCCEED = "succeed"  # running -> succeeded: an outcome was recorded
    FAIL = "fail"  # claimed/running -> failed
    TIME_OUT = "time_out"  # running -> timed_out: the definition's timeout passed
    EXPIRE_LEASE = "expire_lease"  # claimed/running -> queued while attempts remain, else failed
    CANCEL = "cancel"  # queued/claimed/running -> cancelled


class Condition(StrEnum):
    """Guard names. The caller of `fire` passes a context mapping each name to a bool."""

    NO_RUN_IN_FLIGHT = "no_run_in_flight"  # singleton: no run of the loop is in flight
    ACTOR_IS_HUMAN = "actor_is_human"  # human-only: the approving actor is `operator:<name>`
    ATTEMPTS_REMAIN = "attempts_remain"  # run: another attempt is allowed after a lost lease


class EventSource(StrEnum):
    """The sources of the events the engine makes itself (persisted in `events.source`;
    an envelope a client posts may name a source of its own)."""

    SCHEDULE = "schedule"  # the scheduler's slot, or an operator's backfill of one
    BRIDGE = "bridge"  # a host timer's slot of a host-clock loop (`engine emit`)
    MANUAL = "manual"  # a run-now, or a coalesced follow-up
    ON_EVENT = "on_event"  # an `on_event` loop fired by an admitted event (once `on-event`)
    AFTER = "after"  # an `after` loop fired by a concluded occurrence
    WATCH = "watch"  # a condition watch's change
    CHAIN = "chain"  # an outcome's chained event


class FindingStatus(StrEnum):
    """A finding's status (persisted in `findings.status`)."""

    CANDIDATE = "candidate"  # recorded by triage, waiting for a person
    PROMOTED = "promoted"
    DISMISSED = "dismissed"


TRIGGERS: dict[MachineKind, tuple[str, ...]] = {
    MachineKind.OCCURRENCE: tuple(OccurrenceTrigger),
    MachineKind.PROPOSAL: tuple(ProposalTrigger),
    MachineKind.RUN: tuple(RunTrigger),
}
