"""Decisions, actors and the stable strings persisted for them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from dsl.diagnostics import Span


class DecisionKind(StrEnum):
    NOOP = "noop"
    PROPOSE = "propose"
    RUN = "run"
    SHADOW = "shadow"


class NoopReason(StrEnum):
    PREVIOUS_RUN_IN_FLIGHT = "previous_run_in_flight"
    NOTHING_TO_DO = "nothing_to_do"
    BUDGET_EXHAUSTED = "budget_exhausted"
    PAUSED = "paused"
    DISABLED = "disabled"
    SHADOW = "shadow"
    NO_ROUTE = "no_route"
    PLANNING_ERROR = "planning_error"  # planning this event failed; nothing runs
    # The occurrence engine (docs/occurrences.md):
    DUPLICATE_OCCURRENCE = "duplicate_occurrence"  # the window already has an occurrence
    OCCURRENCE_ACTIVE = "occurrence_active"  # on-active return: folded into the active one
    SKIPPED_ACTIVE = "skipped_active"  # on-active skip: dropped while one is active
    COALESCED = "coalesced"  # on-active coalesce: folded into the active occurrence
    QUIET_BACKOFF = "quiet_backoff"  # repeated nothing_to_do: the loop backs off quietly
    STOPPED = "stopped"  # a stop condition (freeze, disabled repo, ...) holds: no mutation
    CANDIDATE_RECORDED = "candidate_recorded"  # triage recorded a candidate finding
    RELEASE_READY = "release_ready"
    EXTERNAL_BLOCKER = "external_blocker"
    HUMAN_ATTENTION_REQUIRED = "human_attention_required"
    # A work-bound instance's gate (docs/work.md#work-bound-loops), read before anything
    # is launched: its work is gone (the loop pauses), a controller holds the work or a
    # wake is pending, the instance woke its controller less than its cooldown ago.
    WORK_MISSING = "work_missing"
    CONTROLLER_ACTIVE = "controller_active"
    COOLDOWN = "cooldown"
    # the occurrence's key has existing work: it creates none (docs/rules.md#existing-work-first)
    EXISTING_WORK = "existing_work"


# "Duplicates suppressed", the one meaning `engine stats`, /metrics and the shadow
# report share: triggers that opened no occurrence of their own because their window
# already had one, or their loop had an active one (docs/occurrences.md).
DUPLICATE_REASONS = frozenset(
    {
        NoopReason.DUPLICATE_OCCURRENCE,
        NoopReason.OCCURRENCE_ACTIVE,
        NoopReason.COALESCED,
        NoopReason.SKIPPED_ACTIVE,
    }
)


class Actor(StrEnum):
    """Fixed actors, decided by the runtime from how a request was authenticated, never
    taken from a request body. A human is `operator:<name>` (see `operator_actor`)."""

    SCHEDULE = "schedule"  # a loop's earned auto-approval, or the clock admitting a tick
    CHAIN = "chain"  # an outcome's chain rule
    GITHUB = "github"  # a verified webhook delivery
    SYSTEM = "system"  # the engine itself: planning, leases, route auto-approval
    WORKER = "worker"  # a worker executing a run (journaled `worker:<id>`)
    INJECT = "inject"  # an unsigned envelope from this host (POST /inject, no token)
    BRIDGE = "bridge"  # a signed envelope from another system (POST /events, engine emit)


class Entity(StrEnum):
    """What a journal entry is about (persisted in the journal's `entity`)."""

    EVENT = "event"
    OCCURRENCE = "occurrence"
    PROPOSAL = "proposal"
    RUN = "run"
    LOOP = "loop"
    FINDING = "finding"
    WORK = "work"


class JournalAction(StrEnum):
    """What a journal entry says happened (persisted in the journal's `action`; a
    member's value never changes once released)."""

    ADMITTED = "admitted"  # event: durably admitted
    DECIDED_NOOP = "decided:noop"  # occurrence: planned, by decision kind
    DECIDED_PROPOSE = "decided:propose"
    DECIDED_RUN = "decided:run"
    DECIDED_SHADOW = "decided:shadow"
    DUPLICATE_OCCURRENCE = "duplicate_occurrence"  # event/occurrence: folded
    COALESCED = "coalesced"
    SKIPPED_ACTIVE = "skipped_active"
    RETURNED_ACTIVE = "returned_active"
    FIRED = "fired"  # event: a trigger that waits fired its loop
    TRIGGER_FAILED = "trigger_failed"
    TRIGGER_REFUSED = "trigger_refused"
    FOLLOW_UP = "follow_up"  # occurrence: one tick for the coalesced triggers
    CONCLUDED = "concluded"
    RETRY_SCHEDULED = "retry_scheduled"  # occurrence: waits for its retry
    CONFLICT_WAIT = "conflict_wait"  # occurrence: waits out a conflict
    RECOVERED = "recovered"
    REDISPATCHED = "redispatched"
    OPENED = "opened"  # proposal
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"
    QUEUED = "queued"  # run
    CLAIMED = "claimed"
    STARTED = "started"
    FINISHED = "finished"
    REFUSED = "refused"
    CANCELLED = "cancelled"
    LATE_RESULT = "late_result"
    LEASE_EXPIRED = "lease_expired"
    CHAINED = "chained"
    CHAIN_ERROR = "chain_error"
    CHAIN_REFUSED = "chain_refused"
    CHAIN_STOPPED = "chain_stopped"
    PAUSED = "paused"  # loop
    RESUMED = "resumed"
    ENABLED = "enabled"
    DISABLED = "disabled"
    CONVERGED = "converged"
    PROBE_FAILING = "probe_failing"
    RECORDED = "recorded"  # finding
    SEEN_AGAIN = "seen_again"
    PROMOTED = "promoted"
    DISMISSED = "dismissed"
    EXISTING_WORK = "existing_work"  # work: opening a key a live item holds answers it
    CONTINUED = "continued"  # work: a controller claimed (or renewed) the lease
    BLOCKED = "blocked"
    REOPENED = "reopened"
    COMPLETED = "completed"
    BOUND = "bound"  # work: a work-bound loop instance was made for it
    GRADUATED = "graduated"  # work: an instance of it left shadow mode (now live)
    GRADUATION_DEFERRED = "graduation_deferred"  # work: ... at the next serve start
    GRADUATION_DROPPED = "graduation_dropped"  # work: a serve start dropped a deferred one
    WORK_REFUSED = "work_refused"  # event: its command on work was refused
    # work: a wake (docs/work.md#waking-the-controller)
    WAKE_RESERVED = "wake_reserved"  # a wake took the launch reservation and launched
    CONTROLLER_DID_NOT_CLAIM = "controller_did_not_claim"  # the reservation ended unclaimed
    INSTANCE_DISABLED = "instance_disabled"  # its work ended: the instance fires no more
    INSTANCE_PAUSED = "instance_paused"  # its work is gone: the instance is paused


# The fixed actors' names: never an operator's name, so `operator:schedule` cannot be
# journaled as if a human called `schedule` had approved something.
RESERVED_NAMES = frozenset(a.value for a in Actor)
OPERATOR_NAME = re.compile(r"^[a-z][a-z0-9._-]{0,63}$")


def operator_name_problem(name: str) -> str | None:
    """Why `name` cannot be an operator's name (None when it can): it must match
    OPERATOR_NAME and must not be a reserved actor's name."""
    if not OPERATOR_NAME.match(name):
        return f"operator name '{name[:80]}' must match {OPERATOR_NAME.pattern}"
    if name in RESERVED_NAMES:
        reserved = ", ".join(sorted(RESERVED_NAMES))
        return f"'{name}' is a reserved actor name and cannot be an operator's ({reserved})"
    return None


def operator_actor(name: str) -> str:
    return f"operator:{name}"


def controller_actor(name: str) -> str:
    """A controller that proved itself with its own token (docs/work.md)."""
    return f"controller:{name}"


def is_human(actor: str) -> bool:
    """`operator:<name>` with a name an operator may have (never a reserved one)."""
    name = actor.removeprefix("operator:")
    return actor.startswith("operator:") and operator_name_problem(name) is None


@dataclass(frozen=True, slots=True)
class Decision:
    """The planner's output for one event, persisted before anything runs."""

    kind: DecisionKind
    reason: NoopReason | None
    definition: str | None  # "id@version" of the routed definition
    loop: str | None
    approved_by: str | None  # the actor of an auto-approval (RUN only)
    human_only: bool
    mutating: bool
    rule: Span | None  # the rule that decided: the loop, or the route
    note: str = ""
