"""The occurrence engine (seed 2; docs/occurrences.md): one occurrence per schedule,
repository and window; triage before anything runs; budgets reserved before dispatch
and settled from use; failures classified into retries with backoff, waits, stops and
the circuit breaker; candidate findings; quiet notifications. Every function here runs
inside the caller's write transaction, so a decision, its evidence and what follows
from it commit together."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from engine.core.decisions import Decision, DecisionKind, NoopReason
from engine.core.envelope import iso, parse_iso
from engine.core.policy import FAILURES, FailureClass, backoff_delay, classify, stop_condition
from engine.core.records import (
    EventRecord,
    FindingRecord,
    LoopState,
    OccurrenceRecord,
    RunRecord,
)
from engine.core.registry import Definition
from engine.core.ruleset import Loop, OnActive, max_active
from engine.core.ticks import SLOT_SOURCES, WATCH_SOURCE, manual_tick
from engine.core.triage import Triage, TriageDecision, TriageSnapshot, triage, unlimited_budget
from engine.machines.specs import OCCURRENCE_TERMINAL
from engine.service.context import Runtime, stable_id
from engine.service.notifications import last_state, notify
from engine.store.ports import Tx

ACTIVE = ("triaging", "waiting_for_resource", "work_dispatched", "verifying")
TERMINAL = frozenset(str(s) for s in OCCURRENCE_TERMINAL)
# Repeated nothing_to_do: after this many in a row the loop backs off quietly.
QUIET_AFTER = 3
# A conflict waits at most this many times before the occurrence times out.
MAX_CONFLICT_WAITS = 20
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
    """`<loop>|<repo>|<window>`: the slot for a clock or host-timer tick, the change
    (`watch:<n>-<fp16>`) for a watch's tick, `manual:<id>` for a run-now, else
    `event:<event id>`."""
    repo = repo_of(event.payload)
    slot = event.payload.get("slot")
    change = event.payload.get("window")
    if loop is not None and event.source in SLOT_SOURCES and isinstance(slot, str):
        window = slot
    elif loop is not None and event.source == WATCH_SOURCE and isinstance(change, str):
        window = change
    elif loop is not None and event.source == "manual":
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


def snapshot(
    rt: Runtime,
    tx: Tx,
    loop: Loop,
    event: EventRecord,
    ident: Identity,
    state: LoopState | None,
    in_flight: bool,
    active: int,
    at: str,
) -> TriageSnapshot:
    """The bounded facts of seed 2 §7, read in the planning transaction."""
    repo = rt.rules.repos.get(ident.repo) if ident.repo else None
    frozen = bool(repo is not None and repo.frozen)
    base = TriageSnapshot(
        payload=event.payload,
        loop=loop.name,
        repo=repo.as_snapshot() if repo is not None else None,
        in_flight=int(in_flight),
        active=active,
        failures=state.consecutive_failures if state else 0,
        nothing_streak=state.nothing_streak if state else 0,
        paused=bool(state and state.paused),
        freeze=frozen or rt.rules.release_freeze,
        now=at,
    )
    if not needs_history(loop):
        return base
    last_run = tx.last_loop_run(loop.name)
    since = iso(parse_iso(at) - DAY)
    usage = tx.budget_usage(loop.name, ident.repo, since)
    resumed = last_resumed(tx, loop.name)
    previous = next(
        (
            o
            for o in tx.list_occurrences(50, loop=loop.name)
            if o.event_id != event.event_id
            and o.state in TERMINAL
            and o.decision is not None
            and o.state != "cancelled"  # a stop or an operator's cancel concludes nothing
            and (resumed is None or o.updated_at > resumed)  # a resume starts afresh
        ),
        None,
    )
    counted = 0
    if loop.policy.max_occurrences is not None:  # before this one (already opened)
        start = state.enabled_since if state and state.enabled_since else ""
        cap = loop.policy.max_occurrences + 2
        found = tx.occurrences_of_loop(loop.name, start, cap)
        counted = sum(1 for o in found if o.event_id != event.event_id)
    return replace(
        base,
        last_outcome=last_run.outcome if last_run else None,
        findings=len(tx.list_findings(1000, status="candidate", loop=loop.name)),
        budget=budget_view(loop, usage),
        last_state=previous.state if previous else None,
        last_decision=previous.decision if previous else None,
        occurrences=counted,
    )


def last_resumed(tx: Tx, loop: str) -> str | None:
    """When an operator last resumed the loop (its journal), if ever."""
    entries = tx.list_journal(1000, 0, "loop", loop)
    return next((e.at for e in reversed(entries) if e.action == "resumed"), None)


# Ends of an occurrence a person is told about (once per change of state; a success
# after one of them is announced as `recovered`).
NOTIFIED_ENDS = frozenset(
    {"failed", "timed_out", "budget_exhausted", "external_blocker", "human_attention_required"}
)

# Stop conditions that wait for a person: the loop is paused until an operator resumes
# it (seed 2 §14: a stop condition may pause the schedule).
PAUSING = frozenset({"human_review_required", "external_blocker", "release_ready"})


def pause_for(
    rt: Runtime, tx: Tx, loop: Loop, condition: str, occ: OccurrenceRecord, at: str
) -> None:
    """Pause the loop on a stop condition that only a person can clear."""
    why = f"stop condition {condition}: resume the loop once it is handled"
    pause_loop(rt, tx, loop, why, f"stopped:{condition}", occ, at, condition=condition)


def pause_loop(
    rt: Runtime,
    tx: Tx,
    loop: Loop,
    why: str,
    state: str,
    occ: OccurrenceRecord,
    at: str,
    **data: Any,
) -> None:
    """The schedule pauses its own loop (the breaker, a stop that waits for a person):
    journaled with actor `schedule` and the reason, and notified."""
    if not tx.set_paused(loop.name, True, why, "schedule", at):
        return
    rt.journal(
        tx,
        "loop",
        loop.name,
        "paused",
        "schedule",
        note=why,
        at=at,
        data={**data, "occurrence": occ.event_id},
    )
    notify(  # the whole loop pauses: one notification state per loop, whatever the repo
        rt,
        tx,
        "loop",
        state,
        why,
        loop=loop.name,
        links={"loop": loop.name, "occurrence": occ.event_id},
        at=at,
    )


def minimal_snapshot(rt: Runtime, event: EventRecord, ident: Identity, at: str) -> TriageSnapshot:
    """What an event that is no loop's tick is judged by (freeze and repo state)."""
    repo = rt.rules.repos.get(ident.repo) if ident.repo else None
    return TriageSnapshot(
        payload=event.payload,
        loop="-",
        repo=repo.as_snapshot() if repo is not None else None,
        budget=unlimited_budget(),
        freeze=bool(repo is not None and repo.frozen) or rt.rules.release_freeze,
        now=at,
    )


# ---- outcomes of planning -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Gate:
    """What stands before dispatch: None when work may be dispatched."""

    reason: NoopReason
    trigger: str  # the occurrence trigger that ends it
    note: str
    condition: str | None = None  # the stop condition, for a stop


def gate(
    rt: Runtime,
    loop: Loop | None,
    definition: Definition,
    result: Triage,
    snap: TriageSnapshot,
) -> Gate | None:
    """The triage decision, the stop conditions (§14, §16: mutation only) and the
    budget (§11), in that order."""
    decision = result.decision
    if decision is TriageDecision.NOTHING_TO_DO:
        return Gate(NoopReason.NOTHING_TO_DO, "noop", result.note)
    if decision is TriageDecision.RELEASE_READY:
        return Gate(NoopReason.RELEASE_READY, "noop", result.note)
    if decision is TriageDecision.CREATE_CANDIDATE_FINDING:
        return Gate(NoopReason.CANDIDATE_RECORDED, "record_candidate", result.note)
    if decision is TriageDecision.EXTERNAL_BLOCKER:
        return Gate(NoopReason.EXTERNAL_BLOCKER, "block", result.note)
    if decision in ESCALATING:
        return Gate(NoopReason.HUMAN_ATTENTION_REQUIRED, "escalate", result.note)
    if definition.mutating:
        stopped = stopped_by(rt, loop, snap)
        if stopped is not None:
            return Gate(
                NoopReason.STOPPED,
                "cancel",
                f"stop condition {stopped}: mutation work is not dispatched",
                stopped,
            )
    if loop is not None and not loop.policy.shadow:
        left = snap.budget.get("daily_runs_left")
        wall_left = snap.budget.get("daily_wall_clock_left")
        need = reservation(loop, definition)["wall_clock_seconds"]
        if left is not None and left < 1:
            return Gate(NoopReason.BUDGET_EXHAUSTED, "exhaust_budget", "daily-runs budget used up")
        if wall_left is not None and wall_left < need:
            return Gate(
                NoopReason.BUDGET_EXHAUSTED,
                "exhaust_budget",
                f"daily-wall-clock budget: {wall_left}s left, a run may take {need}s",
            )
    return None


def stopped_by(rt: Runtime, loop: Loop | None, snap: TriageSnapshot) -> str | None:
    """The stop condition that keeps mutation work from being dispatched, if any. An
    event that is no loop's tick still honours a release freeze and a disabled repo."""
    if loop is not None:
        found = stop_condition(loop, snap, rt.rules.release_freeze)
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


def record_finding(
    rt: Runtime, tx: Tx, occ: OccurrenceRecord, result: Triage, at: str
) -> FindingRecord:
    """Seed 2 §9: one candidate per semantic key, counted each time it is seen."""
    assert result.finding_key is not None
    finding, created = tx.upsert_finding(
        FindingRecord(
            finding_id=stable_id("find", result.finding_key),
            semantic_key=result.finding_key,
            loop=occ.loop,
            repo=occ.repo,
            category=result.finding_category or "general",
            evidence=dict(result.evidence),
            confidence=None,
            recommended_action=result.note,
            status="candidate",
            occurrence_count=1,
            first_seen_at=at,
            last_seen_at=at,
            last_occurrence=occ.event_id,
        )
    )
    rt.journal(
        tx,
        "finding",
        finding.finding_id,
        "recorded" if created else "seen_again",
        "system",
        at=at,
        note=result.note,
        data={
            "key": finding.semantic_key,
            "occurrence": occ.event_id,
            "count": finding.occurrence_count,
        },
    )
    return finding


# ---- settling a finished run -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Settled:
    """How a finished run left its occurrence: `concluded` False while a retry waits."""

    state: str | None
    concluded: bool
    failure_class: FailureClass | None


def _used(occ: OccurrenceRecord, run: RunRecord, at: str) -> dict[str, int]:
    """The occurrence's use so far plus this run's: a run that never started (cancelled
    in the queue) used nothing, but still takes its number (its key is spent). Time is
    counted exactly, in milliseconds (`wall_clock_ms`), so short runs add up;
    `wall_clock_seconds` is the same total in whole seconds (what older rows hold)."""
    before = occ.used or {}
    ms = 0
    if run.started_at is not None:
        elapsed = parse_iso(at) - parse_iso(run.started_at)
        ms = max(0, round(elapsed.total_seconds() * 1000))
    total = _ms_of(before) + ms
    return {
        "runs": int(before.get("runs", 0)) + 1,
        "wall_clock_seconds": total // 1000,
        "wall_clock_ms": total,
    }


def _ms_of(used: dict[str, Any]) -> int:
    """Milliseconds of wall clock in a `used` record: `wall_clock_ms`, or the whole
    seconds of a record written before it was kept."""
    ms = used.get("wall_clock_ms")
    if isinstance(ms, int) and not isinstance(ms, bool):
        return ms
    return int(used.get("wall_clock_seconds", 0)) * 1000


def settle(
    rt: Runtime,
    tx: Tx,
    run: RunRecord,
    run_state: str,
    outcome: str | None,
    adapter_failed: bool,
    at: str,
    *,
    cancelled_by: str | None = None,
    refused: bool = False,
    error: str | None = None,
    unauthorized: str | None = None,
) -> Settled:
    """Settle the budget from actual use and move the run's occurrence by the failure
    class of what happened (seed 2 §11, §13). A run the worker's authority check
    refused (`unauthorized`, the reason) waits for a person, like a refused workspace."""
    occ = tx.get_occurrence(run.event_id)
    if occ is None or occ.state != "work_dispatched":
        return Settled(occ.state if occ else None, True, None)
    definition = _definition(rt, run.definition)
    loop = rt.rules.loops.get(run.loop) if run.loop else None
    used = _used(occ, run, at)
    if cancelled_by is not None:
        return _conclude(rt, tx, occ, "cancel", used, None, at, f"cancelled by {cancelled_by}")
    if refused:  # the dirty-workspace guard: a person decides, nothing is retried
        note = f"workspace refused: {error or run.error or 'see the run'}"
        return _conclude(rt, tx, occ, "escalate", used, None, at, note)
    if unauthorized is not None:  # the authority check: a person looks, nothing is retried
        return _conclude(rt, tx, occ, "escalate", used, None, at, unauthorized)
    mutating = definition is None or definition.mutating
    if definition is None:
        cls = FailureClass.INFRASTRUCTURE_FAILURE
    else:
        cls = classify(definition, outcome, adapter_failed)
    if (
        cls is FailureClass.INFRASTRUCTURE_FAILURE
        and mutating
        and run.error
        and ("lease expired" in run.error)
    ):
        # a mutating run lost mid-way may have changed things: a person looks first
        return _conclude(
            rt,
            tx,
            occ,
            "escalate",
            used,
            cls,
            at,
            "a mutating run's lease expired: it may have half-run; look before retrying",
        )
    verifying = rt.lifecycle.dispatched(occ.state, "verify")
    if cls in (FailureClass.SUCCESS, FailureClass.NOTHING_TO_DO):
        return _conclude(rt, tx, occ, "complete", used, cls, at, "", via=verifying)
    if cls is FailureClass.INFRASTRUCTURE_FAILURE and loop is not None:
        retries = loop.policy.budget.retries_per_occurrence
        if occ.attempt < retries:
            delay = backoff_delay(loop.policy.backoff, occ.attempt)
            note = f"infrastructure failure: retry {occ.attempt + 1} of {retries} in {delay}s"
            return _wait(
                rt, tx, occ, used, cls, at, delay, occ.attempt + 1, "retry_scheduled", note
            )
        return _conclude(
            rt,
            tx,
            occ,
            "exhaust_budget",
            used,
            cls,
            at,
            f"infrastructure failure after {retries} retries: the retry budget is used up",
        )
    if cls is FailureClass.CONFLICT and loop is not None:
        waits = int((occ.evidence or {}).get("conflict_waits", 0))
        if waits < MAX_CONFLICT_WAITS:
            delay = loop.policy.backoff.base_seconds
            return _wait(
                rt,
                tx,
                occ,
                used,
                cls,
                at,
                delay,
                occ.attempt,
                "conflict_wait",
                f"scope or resource conflict: waiting {delay}s (no retry used)",
                conflict_waits=waits + 1,
            )
        return _conclude(rt, tx, occ, "time_out", used, cls, at, "still in conflict after waiting")
    if cls is FailureClass.EXTERNAL_BLOCKER:
        return _conclude(rt, tx, occ, "block", used, cls, at, f"external blocker ({outcome})")
    return _conclude(rt, tx, occ, "fail", used, cls, at, f"{cls.value} ({outcome or run_state})")


def _definition(rt: Runtime, ref: str) -> Definition | None:
    from engine.service.runs import definition_of

    return definition_of(rt, ref)


def _wait(
    rt: Runtime,
    tx: Tx,
    occ: OccurrenceRecord,
    used: dict[str, int],
    cls: FailureClass,
    at: str,
    delay: int,
    attempt: int,
    action: str,
    note: str,
    **evidence: Any,
) -> Settled:
    verifying = rt.lifecycle.dispatched(occ.state, "verify")
    state = rt.lifecycle.dispatched(verifying, "retry")
    retry_at = iso(parse_iso(at) + timedelta(seconds=delay))
    tx.update_occurrence(
        occ.event_id,
        occ.state,
        at,
        state=state,
        used=used,
        reserved=None,
        attempt=attempt,
        retry_at=retry_at,
        failure_class=cls.value,
        evidence={**(occ.evidence or {}), **evidence},
    )
    rt.journal(
        tx,
        "occurrence",
        occ.event_id,
        action,
        "system",
        from_state=occ.state,
        to_state=state,
        note=note,
        at=at,
        data={"retryAt": retry_at, "attempt": attempt, "class": cls.value},
    )
    return Settled(state, False, cls)


def _conclude(
    rt: Runtime,
    tx: Tx,
    occ: OccurrenceRecord,
    trigger: str,
    used: dict[str, int],
    cls: FailureClass | None,
    at: str,
    note: str,
    *,
    via: str | None = None,
) -> Settled:
    failure = cls.value if cls else None
    state = conclude(
        rt,
        tx,
        occ,
        trigger,
        at,
        note,
        cls=cls,
        via=via,
        data={"class": failure},
        used=used,
        failure_class=failure,
    )
    return Settled(state, True, cls)


def conclude(
    rt: Runtime,
    tx: Tx,
    occ: OccurrenceRecord,
    trigger: str,
    at: str,
    note: str,
    *,
    cls: FailureClass | None = None,
    via: str | None = None,
    data: dict[str, Any] | None = None,
    **changes: Any,
) -> str:
    """End an occurrence by `trigger` (from `via`, when it passed through a state on
    the way): its reservation released, journaled `concluded`, counted by the loop
    (see `concluded`). `changes` are further columns to set. The state it ended in."""
    state = rt.lifecycle.dispatched(via or occ.state, trigger)
    tx.update_occurrence(
        occ.event_id, occ.state, at, state=state, reserved=None, finished_at=at, **changes
    )
    rt.journal(
        tx,
        "occurrence",
        occ.event_id,
        "concluded",
        "system",
        from_state=occ.state,
        to_state=state,
        note=note,
        at=at,
        data=data,
    )
    concluded(rt, tx, replace(occ, state=state), cls, at, note)
    return state


# ---- the loop's counters: the circuit breaker and quiet backoff ----------------------------


def concluded(
    rt: Runtime,
    tx: Tx,
    occ: OccurrenceRecord,
    cls: FailureClass | None,
    at: str,
    note: str = "",
    *,
    counts: bool = True,
) -> None:
    """After an occurrence reached a terminal state: count failures toward the circuit
    breaker (an operator's cancel never counts, nor does a proposal nobody approved:
    `counts=False`), count quiet no-ops, notify a state a person may act on, and admit
    one follow-up tick for coalesced triggers."""
    loop = rt.rules.loops.get(occ.loop) if occ.loop else None
    if loop is None:
        return
    state = tx.get_loop_state(loop.name)
    if state is None:
        return
    failures, streak, quiet = state.consecutive_failures, state.nothing_streak, state.quiet_until
    if occ.state == "cancelled" or not counts:
        pass  # an operator's cancel (or a stop) is neither a failure nor a success
    elif occ.state == "completed":
        failures, streak, quiet = 0, (streak + 1 if cls is FailureClass.NOTHING_TO_DO else 0), None
    elif occ.state == "nothing_to_do":
        streak += 1
        if streak >= QUIET_AFTER:
            delay = backoff_delay(loop.policy.backoff, streak - QUIET_AFTER)
            quiet = iso(parse_iso(at) + timedelta(seconds=delay))
    elif (cls in FAILURES) if cls is not None else occ.state in ("failed", "timed_out"):
        # a run that failed (its retries used up included); a day's budget running out
        # before anything ran is not a failure of the loop
        failures += 1
        streak = 0
    tx.set_loop_counters(loop.name, failures, streak, quiet, at)
    if occ.state in NOTIFIED_ENDS:
        notify(
            rt,
            tx,
            "occurrence",
            occ.state,
            note or f"loop '{loop.name}' {occ.state}",
            loop=loop.name,
            repo=occ.repo,
            links={"occurrence": occ.event_id, "loop": loop.name},
            at=at,
        )
    elif occ.state == "completed" and (
        # what was last announced for this loop and repository was a failure: a success
        # is news (whatever reset the failure count meanwhile, e.g. an operator's resume)
        last_state(tx, "occurrence", loop.name, occ.repo) in NOTIFIED_ENDS
    ):
        notify(
            rt,
            tx,
            "occurrence",
            "recovered",
            f"loop '{loop.name}' succeeded again",
            loop=loop.name,
            repo=occ.repo,
            links={"occurrence": occ.event_id, "loop": loop.name},
            at=at,
        )
    breaker = loop.policy.circuit_breaker
    if breaker is not None and failures >= breaker and not state.paused:
        why = f"circuit breaker: {failures} consecutive failures (limit {breaker})"
        pause_loop(rt, tx, loop, why, "breaker_tripped", occ, at, failures=failures)
    fresh = tx.get_occurrence(occ.event_id)
    if fresh is not None and fresh.signals > 0 and loop.on_active is OnActive.COALESCE:
        _follow_up(rt, tx, loop, fresh, at)


def _follow_up(rt: Runtime, tx: Tx, loop: Loop, occ: OccurrenceRecord, at: str) -> None:
    """Coalesced triggers become one manual-style tick, admitted through the outbox."""
    token = "coalesced-" + stable_id("f", occ.event_id)
    tick = manual_tick(loop, parse_iso(at), token).model_copy(
        update={"correlationId": occ.event_id}
    )
    event_id = tick.eventId
    tx.enqueue_outbox(tick.model_dump(mode="json"), None, "schedule", at)
    rt.journal(
        tx,
        "occurrence",
        occ.event_id,
        "follow_up",
        "schedule",
        at=at,
        note=f"{occ.signals} coalesced triggers: one follow-up tick {event_id}",
    )


def active_limit_reached(
    tx: Tx, loop: Loop, ident: Identity
) -> tuple[list[OccurrenceRecord] | None, int]:
    """(the active occurrences when the loop is at its limit for the repo, else None;
    how many are active). An overlapping loop with no limit is counted only when its
    triage may read the number."""
    limit = max_active(loop)
    if limit is None and not needs_history(loop):
        return None, 0
    active = tx.active_occurrences(loop.name, ident.repo, ACTIVE)
    reached = limit is not None and len(active) >= limit
    return (active if reached else None), len(active)


__all__ = [
    "ACTIVE",
    "Decision",
    "DecisionKind",
    "Gate",
    "Identity",
    "Settled",
    "active_limit_reached",
    "concluded",
    "gate",
    "identity",
    "record_finding",
    "settle",
    "snapshot",
    "triage",
]
