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

from engine.core.decide import conclusion, finding_of, snapshot_of, with_history
from engine.core.decisions import Decision, DecisionKind
from engine.core.envelope import iso, parse_iso
from engine.core.occurrence import (
    ACTIVE,
    Gate,
    Identity,
    gate,
    identity,
    needs_history,
)
from engine.core.policy import FailureClass, backoff_delay, classify
from engine.core.records import (
    EventRecord,
    LoopState,
    OccurrenceRecord,
    RunRecord,
)
from engine.core.registry import Definition
from engine.core.ruleset import Loop
from engine.core.ticks import idempotency_key
from engine.core.triage import Triage, TriageSnapshot, triage
from engine.service.apply import apply
from engine.service.context import Runtime
from engine.service.facts import history
from engine.service.notifications import last_state
from engine.store.ports import Tx

# A conflict waits at most this many times before the occurrence times out.
MAX_CONFLICT_WAITS = 20

# ---- the snapshot triage reads ------------------------------------------------------------


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
    """The bounded facts of a loop's triage (docs/occurrences.md), read now: the cheap
    ones, and the history when the loop's triage or stop conditions read it."""
    snap = snapshot_of(rt.rules, loop, event, ident, state, in_flight, active, at)
    if not needs_history(loop):
        return snap
    return with_history(snap, loop, history(tx, loop, event, ident.repo, state, at))


def record_finding(rt: Runtime, tx: Tx, occ: OccurrenceRecord, result: Triage, at: str) -> None:
    """One candidate per semantic key, counted each time it is seen."""
    apply(rt, tx, (finding_of(occ, result, at),), at)


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
    """After an occurrence reached a terminal state: read what its conclusion reads and
    apply `engine.core.decide.conclusion` (counters, notifications, the circuit breaker,
    a coalesced follow-up, the loops `after` it)."""
    loop = rt.rules.loops.get(occ.loop) if occ.loop else None
    if loop is None:
        return
    state = tx.get_loop_state(loop.name)
    if state is None:
        return
    fresh = tx.get_occurrence(occ.event_id) or occ
    event = tx.get_event(occ.event_id)
    run = None
    waited_for = any(other.trigger.upstream == occ.loop for other in rt.rules.loops.values())
    if event is not None and waited_for:  # its run's outcome is what `after` filters on
        settled = int((fresh.used or {}).get("runs", 0))
        key = idempotency_key(event) + (f"#{settled - 1}" if settled > 1 else "")
        run = tx.get_run_by_key(key)
    last = last_state(tx, "occurrence", loop.name, occ.repo) if occ.state == "completed" else None
    correlation = (event.correlation_id or event.event_id) if event else occ.event_id
    plan = conclusion(
        rt.rules,
        loop,
        occ,
        cls,
        at,
        note,
        state,
        last,
        correlation,
        run,
        counts=counts,
        signals=fresh.signals,
    )
    apply(rt, tx, plan, at)


__all__ = [
    "ACTIVE",
    "Decision",
    "DecisionKind",
    "Gate",
    "Identity",
    "Settled",
    "concluded",
    "gate",
    "identity",
    "record_finding",
    "settle",
    "snapshot",
    "triage",
]
