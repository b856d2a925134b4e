"""Existing work first (docs/rules.md#existing-work-first): before an occurrence of a loop
with a semantic key creates new work (a proposal, a run, a finding), what is already
there for its key, as data, and what the default does about it. Pure: the service reads
the facts (engine.service.facts.key_facts) in the deciding transaction; this module
turns them into what triage reads (`existing` in the snapshot) and into the default:
when a check found something and no triage line about `existing` decided, the
occurrence creates nothing, a no-op `existing_work` linked to what it found.

The five checks, in the order the default reads them:

- `work`: the live work item (docs/work.md) that holds the key;
- `job`: an occurrence working on the key that is still going: triaging, its proposal
  under review, waiting for its retry or a resource (`blocked`), or its run queued,
  claimed or running;
- `failed_attempt`: the key's latest attempt (an occurrence that ran) ended so that
  nothing retries it by itself (engine.core.policy.needs_explicit_retry); an operator's
  run-now is the explicit retry, so the default lets it through;
- `resolved_finding`: the key's finding was resolved by a person (promoted or
  dismissed) and not seen since;
- `other_loop`: another loop, or a work-bound instance, is responsible for the key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from engine.core.decisions import Actor, Entity, JournalAction
from engine.core.effects import Journal
from engine.core.envelope import parse_iso
from engine.core.ids import stable_id
from engine.core.keys import KeyProblem, fill
from engine.core.policy import needs_explicit_retry
from engine.core.records import EventRecord, FindingRecord, OccurrenceRecord, RunRecord
from engine.core.ruleset import Loop
from engine.core.states import EventSource, FindingStatus, OccurrenceState, RunState
from engine.core.triage import EXISTING_FIELDS, TriageDecision, TriageSnapshot
from engine.core.work import WorkBinding, WorkItem, instance_name, lease_live

St = OccurrenceState
# The states of an occurrence that is still going: the key's job.
JOB_STATES = (
    St.CREATED,
    St.TRIAGING,
    St.AWAITING_APPROVAL,
    St.WAITING_FOR_RESOURCE,
    St.WORK_DISPATCHED,
    St.VERIFYING,
)
# What a job is doing, by its state (a dispatched one: its run's state).
_STATUS: dict[str, str] = {
    St.CREATED: "triaging",
    St.TRIAGING: "triaging",
    St.AWAITING_APPROVAL: "under_review",
    St.WAITING_FOR_RESOURCE: "blocked",
    St.WORK_DISPATCHED: "queued",
    St.VERIFYING: "running",
}
_RUN_STATUS: dict[str, str] = {
    RunState.QUEUED: "queued",
    RunState.CLAIMED: "claimed",
    RunState.RUNNING: "running",
}
RESOLVED = (FindingStatus.PROMOTED, FindingStatus.DISMISSED)
# The checks, in the order the default reads them.
CHECKS = ("work", "job", "failed_attempt", "resolved_finding", "other_loop")


@dataclass(frozen=True, slots=True)
class KeyFacts:
    """What the store holds for one key, read before the decision
    (engine.service.facts.key_facts): each None when there is none."""

    key: str
    work: WorkItem | None = None  # the live work item holding the key
    instance: WorkBinding | None = None  # a live instance bound to that item
    job: OccurrenceRecord | None = None  # the oldest occurrence of the key still going
    run: RunRecord | None = None  # the job's run, when it is dispatched
    attempt: OccurrenceRecord | None = None  # the key's latest occurrence that ran
    finding: FindingRecord | None = None  # the key's finding


def key_of(loop: Loop | None, event: EventRecord) -> tuple[str | None, KeyProblem | None]:
    """The semantic key an occurrence of `loop` for `event` works on: (None, None) for a
    loop without one, (None, the problem) when the tick's payload cannot fill it."""
    if loop is None or loop.key is None:
        return None, None
    try:
        return fill(loop.key, event.payload), None
    except KeyProblem as problem:
        return None, problem


def explicit_retry(event: EventRecord) -> bool:
    """An operator's run-now (not a coalesced follow-up, which the schedule admits)."""
    return event.source == EventSource.MANUAL and event.admitted_by != Actor.SCHEDULE


def failed(occ: OccurrenceRecord | None) -> bool:
    """The attempt ended so that only an explicit retry tries it again."""
    return occ is not None and needs_explicit_retry(occ.state, occ.failure_class)


def resolved(finding: FindingRecord | None) -> bool:
    """A person promoted or dismissed the finding, and no occurrence saw it since: a
    finding has no code revision, so "resolved at the current revision" is "resolved,
    and the problem not recorded again after" (a sighting after the decision means the
    revision that came still has it)."""
    return (
        finding is not None
        and finding.status in RESOLVED
        and finding.decided_at is not None
        and finding.decided_at >= finding.last_seen_at
    )


def view(loop: str, key: str | None, facts: KeyFacts | None, now: str) -> dict[str, Any]:
    """`existing` as a triage rule reads it (docs/rules.md#existing-work-first): the key,
    and each check's finding as an object of the fields of EXISTING_FIELDS, or null."""
    out: dict[str, Any] = dict.fromkeys(EXISTING_FIELDS)
    out["key"] = key
    if facts is None:
        return out
    work, job, attempt, finding = facts.work, facts.job, facts.attempt, facts.finding
    if work is not None:
        out["work"] = {
            "id": work.work_id,
            "state": work.state,
            "title": work.title,
            "repo": work.repo,
            "lease_owner": work.lease_owner,
            "lease_live": lease_live(work, parse_iso(now)) if now else False,
            "lease_expires_at": work.lease_expires_at,
        }
    if job is not None:
        out["job"] = _job(job, facts.run)
    if failed(attempt):
        assert attempt is not None
        out["failed_attempt"] = {
            "occurrence": attempt.event_id,
            "loop": attempt.loop,
            "repo": attempt.repo,
            "state": attempt.state,
            "failure_class": attempt.failure_class,
            "finished_at": attempt.finished_at,
        }
    if resolved(finding):
        assert finding is not None
        out["resolved_finding"] = {
            "id": finding.finding_id,
            "status": finding.status,
            "category": finding.category,
            "decided_by": finding.decided_by,
            "decided_at": finding.decided_at,
        }
    if facts.instance is not None:
        bound = facts.instance
        out["other_loop"] = {
            "name": instance_name(bound.shape, bound.work_id),
            "kind": "instance",
            "state": bound.state,
            "work": bound.work_id,
        }
    elif job is not None and job.loop is not None and job.loop != loop:
        out["other_loop"] = {"name": job.loop, "kind": "loop", "state": None, "work": None}
    return out


def _job(job: OccurrenceRecord, run: RunRecord | None) -> dict[str, Any]:
    status = _STATUS.get(job.state, "triaging")
    dispatched = job.state == St.WORK_DISPATCHED and run is not None
    if dispatched and run is not None:
        status = _RUN_STATUS.get(run.state, status)
    review = job.state == St.AWAITING_APPROVAL
    return {
        "occurrence": job.event_id,
        "loop": job.loop,
        "repo": job.repo,
        "state": job.state,
        "status": status,
        "run": run.run_id if dispatched and run is not None else None,
        "proposal": stable_id("prop", job.event_id) if review else None,  # one per event
        "retry_at": job.retry_at,
    }


def with_existing(
    snap: TriageSnapshot, loop: Loop, key: str | None, facts: KeyFacts | None, now: str
) -> TriageSnapshot:
    """The snapshot with `existing`, for a loop with a key."""
    if loop.key is None:
        return snap
    return replace(snap, existing=view(loop.name, key, facts, now))


# ---- the default -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Found:
    """The existing item the default defers to: which check found it, the journal
    entity it is, its id, and what the decision's note says."""

    check: str
    entity: Entity
    entity_id: str
    note: str


# Decisions that create new work: a run (the dispatching ones) or a finding.
CREATES = frozenset(
    {
        TriageDecision.CONTINUE_EXISTING_TASK,
        TriageDecision.RETRY_INFRASTRUCTURE_FAILURE,
        TriageDecision.RUN_READONLY_CHECK,
        TriageDecision.RUN_REPAIR_TASK,
        TriageDecision.CREATE_CANDIDATE_FINDING,
    }
)


def deferred(
    decision: TriageDecision,
    about_existing: bool,
    existing: Mapping[str, Any] | None,
    *,
    explicit: bool = False,
) -> Found | None:
    """What the occurrence defers to instead of creating new work: the first check that
    found something, unless the decision creates nothing, the triage line that decided
    reads `existing` (the author's rule about it), or the loop has no key. `explicit`:
    the event is an operator's run-now, the explicit retry a failed attempt waits for."""
    if existing is None or about_existing or decision not in CREATES:
        return None
    key = existing.get("key")
    for check in CHECKS:
        found = existing.get(check)
        if not isinstance(found, Mapping) or (check == "failed_attempt" and explicit):
            continue
        return _found(check, found, key)
    return None


def _found(check: str, item: Mapping[str, Any], key: Any) -> Found:
    on = f"for key '{key}'"
    match check:
        case "work":
            owner = f", held by {item['lease_owner']}" if item.get("lease_live") else ""
            note = f"existing work: work item {item['id']} ({item['state']}{owner}) {on}"
            return Found(check, Entity.WORK, str(item["id"]), note)
        case "job":
            note = (
                f"existing work: occurrence {item['occurrence']} of loop '{item['loop']}' is"
                f" {item['status']} {on}"
            )
            return Found(check, Entity.OCCURRENCE, str(item["occurrence"]), note)
        case "failed_attempt":
            note = (
                f"existing work: the last attempt {on}, occurrence {item['occurrence']}, ended"
                f" {item['state']} ({item['failure_class'] or 'no class'}): it waits for an"
                " explicit retry (engine schedule trigger)"
            )
            return Found(check, Entity.OCCURRENCE, str(item["occurrence"]), note)
        case "resolved_finding":
            note = (
                f"existing work: finding {item['id']} {on} was {item['status']} by"
                f" {item['decided_by']}"
            )
            return Found(check, Entity.FINDING, str(item["id"]), note)
    note = f"existing work: {item['kind']} '{item['name']}' is responsible {on}"
    return Found(check, Entity.LOOP, str(item["name"]), note)


def journal(found: Found, occurrence: str, key: Any) -> Journal:
    """`existing_work` on the item deferred to, naming the occurrence that deferred."""
    return Journal(
        found.entity,
        found.entity_id,
        JournalAction.EXISTING_WORK,
        Actor.SYSTEM,
        note=found.note,
        data={"occurrence": occurrence, "key": key, "check": found.check},
    )
