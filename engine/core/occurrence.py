"""The pure half of the occurrence engine (docs/occurrences.md): an occurrence's
identity, the budget view triage reads, the gate before dispatch (triage decision, stop
conditions, budget) and what a dispatch reserves. Data in, data out: the service reads
the facts and writes what follows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from engine.core.decisions import NoopReason
from engine.core.existing import Found, deferred
from engine.core.machines import OCCURRENCE_TERMINAL
from engine.core.policy import stop_condition
from engine.core.records import EventRecord
from engine.core.registry import Definition
from engine.core.ruleset import Loop, RuleSet
from engine.core.states import EventSource
from engine.core.states import OccurrenceState as St
from engine.core.states import OccurrenceTrigger as Tr
from engine.core.ticks import SLOT_SOURCES
from engine.core.triage import Triage, TriageDecision, TriageSnapshot, unlimited_budget
from engine.core.triggers import WAITING_SOURCES

ACTIVE = (St.TRIAGING, St.WAITING_FOR_RESOURCE, St.WORK_DISPATCHED, St.VERIFYING)
TERMINAL = frozenset(str(s) for s in OCCURRENCE_TERMINAL)
# Repeated nothing_to_do: after this many in a row the loop backs off quietly.
QUIET_AFTER = 3
DAY = timedelta(days=1)
ESCALATING = frozenset(
    {TriageDecision.HUMAN_ATTENTION_REQUIRED, TriageDecision.PROMOTE_EXISTING_FINDING}
)


# ---- identity ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Identity:
    key: str
    repo: str | None
    window: str


def repo_of(payload: Any) -> str | None:
    repo = payload.get("repo") if isinstance(payload, dict) else None
    return repo if isinstance(repo, str) else None


def identity(event: EventRecord, loop: Loop | None) -> Identity:
    """`<loop>|<repo>|<window>`: the slot for a clock or host-timer tick, `manual:<id>`
    for a run-now, the window the runtime computed for a tick of a trigger that waits
    (`on_event`, `after`), else `event:<event id>`."""
    repo = repo_of(event.payload)
    slot = event.payload.get("slot")
    window_of = event.payload.get("window")
    if loop is not None and event.source in SLOT_SOURCES and isinstance(slot, str):
        window = slot
    elif loop is not None and event.source in WAITING_SOURCES and isinstance(window_of, str):
        window = window_of
    elif loop is not None and event.source == EventSource.MANUAL:
        window = f"manual:{event.event_id.rsplit(':', 1)[-1]}"
    else:
        window = f"event:{event.event_id}"
    return Identity(f"{loop.name if loop else '-'}|{repo or '-'}|{window}", repo, window)


# ---- the snapshot triage reads ------------------------------------------------------------


def needs_history(loop: Loop) -> bool:
    """Whether triage or the stop conditions read more than the cheap facts."""
    budget = loop.policy.budget
    return bool(
        loop.triage
        or loop.policy.stop_when
        or budget.daily_runs is not None
        or budget.daily_wall_clock_seconds is not None
    )


def budget_view(loop: Loop, usage: dict[str, int]) -> dict[str, int | None]:
    budget = loop.policy.budget
    runs, wall = usage.get("runs", 0), usage.get("wall_clock_seconds", 0)
    return {
        "daily_runs_used": runs,
        "daily_runs_left": None if budget.daily_runs is None else max(0, budget.daily_runs - runs),
        "daily_wall_clock_used": wall,
        "daily_wall_clock_left": (
            None
            if budget.daily_wall_clock_seconds is None
            else max(0, budget.daily_wall_clock_seconds - wall)
        ),
    }


def minimal_snapshot(
    rules: RuleSet, event: EventRecord, ident: Identity, at: str
) -> TriageSnapshot:
    """What an event that is no loop's tick is judged by (freeze and repo state)."""
    repo = rules.repos.get(ident.repo) if ident.repo else None
    return TriageSnapshot(
        payload=event.payload,
        loop="-",
        repo=repo.as_snapshot() if repo is not None else None,
        budget=unlimited_budget(),
        freeze=bool(repo is not None and repo.frozen) or rules.release_freeze,
        now=at,
    )


# Ends of an occurrence a person is told about (once per change of state; a success
# after one of them is announced as `recovered`).
NOTIFIED_ENDS = frozenset(
    {St.FAILED, St.TIMED_OUT, St.BUDGET_EXHAUSTED, St.EXTERNAL_BLOCKER, St.HUMAN_ATTENTION_REQUIRED}
)

# Stop conditions that wait for a person: the loop is paused until an operator resumes
# it (docs/occurrences.md: a stop condition may pause the schedule).
PAUSING = frozenset({"human_review_required", "external_blocker", "release_ready"})


# ---- the gate before dispatch ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Gate:
    """What stands before dispatch: None when work may be dispatched."""

    reason: NoopReason
    trigger: str  # the occurrence trigger that ends it
    note: str
    condition: str | None = None  # the stop condition, for a stop
    existing: Found | None = None  # the existing work deferred to, for `existing_work`


def gate(
    rules: RuleSet,
    loop: Loop | None,
    definition: Definition,
    result: Triage,
    snap: TriageSnapshot,
    *,
    explicit: bool = False,
) -> Gate | None:
    """The triage decision, existing work for the occurrence's key
    (docs/rules.md#existing-work-first; `explicit`: the event is an operator's run-now),
    the stop conditions (mutation only;
    docs/occurrences.md#stop-conditions-and-release-freeze) and the budget
    (docs/occurrences.md#budgets), in that order."""
    decision = result.decision
    if decision is TriageDecision.NOTHING_TO_DO:
        return Gate(NoopReason.NOTHING_TO_DO, Tr.NOOP, result.note)
    if decision is TriageDecision.RELEASE_READY:
        return Gate(NoopReason.RELEASE_READY, Tr.NOOP, result.note)
    found = deferred(decision, result.about_existing, snap.existing, explicit=explicit)
    if found is not None:
        return Gate(NoopReason.EXISTING_WORK, Tr.NOOP, found.note, existing=found)
    if decision is TriageDecision.CREATE_CANDIDATE_FINDING:
        return Gate(NoopReason.CANDIDATE_RECORDED, Tr.RECORD_CANDIDATE, result.note)
    if decision is TriageDecision.EXTERNAL_BLOCKER:
        return Gate(NoopReason.EXTERNAL_BLOCKER, Tr.BLOCK, result.note)
    if decision in ESCALATING:
        return Gate(NoopReason.HUMAN_ATTENTION_REQUIRED, Tr.ESCALATE, result.note)
    if definition.mutating:
        stopped = stopped_by(rules, loop, snap)
        if stopped is not None:
            return Gate(
                NoopReason.STOPPED,
                Tr.CANCEL,
                f"stop condition {stopped}: mutation work is not dispatched",
                stopped,
            )
    if loop is not None and not loop.policy.shadow:
        left = snap.budget.get("daily_runs_left")
        wall_left = snap.budget.get("daily_wall_clock_left")
        need = reservation(loop, definition)["wall_clock_seconds"]
        if left is not None and left < 1:
            return Gate(NoopReason.BUDGET_EXHAUSTED, Tr.EXHAUST_BUDGET, "daily_runs budget used up")
        if wall_left is not None and wall_left < need:
            return Gate(
                NoopReason.BUDGET_EXHAUSTED,
                Tr.EXHAUST_BUDGET,
                f"daily_wall_clock budget: {wall_left}s left, a run may take {need}s",
            )
    return None


def stopped_by(rules: RuleSet, loop: Loop | None, snap: TriageSnapshot) -> str | None:
    """The stop condition that keeps mutation work from being dispatched, if any. An
    event that is no loop's tick still honours a release freeze and a disabled repo."""
    if loop is not None:
        found = stop_condition(loop, snap, rules.release_freeze)
        return None if found is None else str(found)
    if snap.freeze:
        return "release_freeze"
    if snap.repo is not None and snap.repo.get("disabled"):
        return "repository_disabled"
    return None


def reservation(loop: Loop, definition: Definition) -> dict[str, int]:
    """What one dispatch reserves: one run and its longest possible wall clock."""
    cap = loop.policy.budget.wall_clock_seconds
    seconds = definition.timeout_seconds if cap is None else min(cap, definition.timeout_seconds)
    return {"runs": 1, "wall_clock_seconds": seconds}
