"""What a run's result does to its occurrence, decided purely (engine/core/settle.py) on
plain data: records built here, the rules of tests/data/settle, the compiled lifecycle
machines; no store. Each test names what a user relies on."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.core.effects import (
    Admit,
    Counters,
    Effect,
    Journal,
    Notify,
    Outbox,
    PauseLoop,
    Plan,
    Transition,
)
from engine.core.envelope import iso
from engine.core.machines import Lifecycle
from engine.core.policy import FailureClass
from engine.core.records import EventRecord, LoopState, OccurrenceRecord, RunRecord
from engine.core.settle import (
    MAX_CONFLICT_WAITS,
    Chain,
    Ending,
    Ends,
    Finished,
    SettleFacts,
    judged,
    run_key,
    runs_of,
    settle,
    used_after,
    waited_for,
)
from engine.core.states import OccurrenceTrigger
from engine.core.ticks import idempotency_key, tick
from engine.loading import Paths, load_rules

TREE = Path(__file__).resolve().parents[1] / "data" / "settle"
RULES = load_rules(Paths(TREE / "loops", TREE / "registry", TREE / "config"))
MACHINES = Lifecycle(RULES)
SLOT = datetime(2026, 12, 1, 10, tzinfo=UTC)
STARTED = iso(SLOT + timedelta(seconds=1))
AT = iso(SLOT + timedelta(seconds=3, milliseconds=250))  # the run took 2.25 s


def event(loop: str) -> EventRecord:
    envelope = tick(RULES.loops[loop], SLOT, 0)
    return EventRecord(
        event_id=envelope.eventId,
        type=envelope.type,
        source=envelope.source,
        subject=envelope.subject,
        occurred_at=iso(envelope.occurredAt),
        correlation_id=envelope.eventId,
        payload=envelope.payload,
        loop=loop,
        admitted_at=iso(SLOT),
        admitted_by="schedule",
        planned=True,
    )


def dispatched(ev: EventRecord, **fields: Any) -> OccurrenceRecord:
    return OccurrenceRecord(
        event_id=ev.event_id,
        loop=ev.loop,
        state="work_dispatched",
        updated_at=iso(SLOT),
        occurrence_key=f"{ev.loop}|r1|{ev.payload['slot']}",
        repo="r1",
        window=ev.payload["slot"],
        decision="run_readonly_check",
        reserved={"runs": 1, "wall_clock_seconds": 30},
        created_at=iso(SLOT),
        **fields,
    )


def run_of(ev: EventRecord, definition: str = "look@1", **fields: Any) -> RunRecord:
    key = idempotency_key(ev)
    return RunRecord(
        run_id=f"run-{ev.loop}",
        idempotency_key=key,
        event_id=ev.event_id,
        proposal_id=f"prop-{ev.loop}",
        loop=ev.loop,
        definition=definition,
        state="running",
        approved_by="schedule",
        attempts=1,
        lease_owner="worker:w1",
        lease_expires_at=AT,
        created_at=iso(SLOT),
        started_at=STARTED,
        **fields,
    )


def loop_state(loop: str, **fields: Any) -> LoopState:
    fresh = LoopState(loop, True, iso(SLOT), None, None, False, "", None, iso(SLOT))
    return replace(fresh, **fields)


def facts(ev: EventRecord, occ: OccurrenceRecord | None, **ending: Any) -> SettleFacts:
    assert ev.loop is not None
    state = ending.pop("state", loop_state(ev.loop))
    return SettleFacts(occ, ev, Ending(state, correlation=ev.event_id, **ending))


def of(plan: Plan, kind: type[Effect]) -> list[Any]:
    return [e for e in plan if isinstance(e, kind)]


def moved(plan: Plan) -> Transition:
    (transition,) = of(plan, Transition)
    return transition


def test_an_infrastructure_failure_waits_for_its_retry_and_chains_nothing() -> None:
    """A run with no outcome of a loop with retries left sends its occurrence through
    verifying back to waiting: the use settled in milliseconds, the reservation
    released, the retry at base backoff, journaled `retry_scheduled` by `system`; its
    loop is not counted and no chain resolves while the occurrence waits."""
    ev = event("nightly")
    finished = Finished(run_of(ev), "failed", None, True, chain=Chain({}, SLOT))
    plan = settle(finished, RULES, facts(ev, dispatched(ev)), MACHINES, AT)
    assert [type(e) for e in plan] == [Transition, Journal]
    transition, journal = plan
    assert transition == Transition(
        ev.event_id,
        "work_dispatched",
        {
            "state": "waiting_for_resource",
            "used": {"runs": 1, "wall_clock_seconds": 2, "wall_clock_ms": 2250},
            "reserved": None,
            "attempt": 1,
            "retry_at": iso(SLOT + timedelta(seconds=63, milliseconds=250)),
            "failure_class": "infrastructure_failure",
            "evidence": {},
        },
    )
    assert (journal.action, journal.actor, journal.to_state) == (
        "retry_scheduled",
        "system",
        "waiting_for_resource",
    )
    assert journal.note == "infrastructure failure: retry 1 of 2 in 60s"


def test_the_backoff_doubles_and_the_used_up_budget_concludes() -> None:
    """The second retry waits twice the base; once both retries are used the
    occurrence ends `budget_exhausted`, counted as a failure and notified."""
    ev = event("nightly")
    second = settle(
        Finished(run_of(ev), "failed", None, True),
        RULES,
        facts(ev, dispatched(ev, attempt=1)),
        MACHINES,
        AT,
    )
    assert moved(second).changes["attempt"] == 2
    assert "retry 2 of 2 in 120s" in of(second, Journal)[0].note
    spent = settle(
        Finished(run_of(ev), "failed", None, True),
        RULES,
        facts(ev, dispatched(ev, attempt=2)),
        MACHINES,
        AT,
    )
    assert moved(spent).changes["state"] == "budget_exhausted"
    assert moved(spent).changes["finished_at"] == AT
    assert of(spent, Counters) == [Counters("nightly", 1, 0, None)]
    (notice,) = of(spent, Notify)
    assert notice.record.state == "budget_exhausted"


def test_a_success_completes_resets_the_loop_fires_after_and_chains() -> None:
    """An OK run completes its occurrence through verifying: the failure count reset,
    a success after a notified failure announced `recovered`, the `after-ok` loop
    fired on the settled run's outcome, and the OK chain's event put in the outbox by
    `chain`, after the occurrence moved."""
    ev = event("nightly")
    run = run_of(ev)
    done = replace(run, state="succeeded", outcome="OK")
    finished = Finished(run, "succeeded", "OK", False, chain=Chain({"summary": "fine"}, SLOT))
    state = loop_state("nightly", consecutive_failures=1)
    known = facts(ev, dispatched(ev), state=state, last_notified="failed", run=done)
    plan = settle(finished, RULES, known, MACHINES, AT)
    assert moved(plan).changes["state"] == "completed"
    (journal, *chained) = of(plan, Journal)
    assert (journal.action, journal.from_state, journal.data) == (
        "concluded",
        "work_dispatched",
        {"class": "success"},
    )
    assert of(plan, Counters) == [Counters("nightly", 0, 0, None)]
    assert [n.record.state for n in of(plan, Notify)] == ["recovered"]
    (fired,) = of(plan, Admit)
    assert fired.envelope.payload["loop"] == "after-ok"
    (outbox,) = of(plan, Outbox)
    assert outbox.event["payload"] == {"run": run.run_id, "summary": "fine"}
    assert (outbox.origin_run, outbox.actor) == (run.run_id, "chain")
    assert [(j.action, j.actor) for j in chained] == [("chained", "chain")]
    assert plan.index(outbox) > plan.index(fired)


def test_a_stop_chain_is_journaled_and_a_blocker_blocks() -> None:
    """A BLOCKED run ends its occurrence `external_blocker` and its `stop` chain is
    journaled `chain_stopped` with the rule; nothing enters the outbox."""
    ev = event("nightly")
    finished = Finished(run_of(ev), "succeeded", "BLOCKED", False, chain=Chain({}, SLOT))
    plan = settle(finished, RULES, facts(ev, dispatched(ev)), MACHINES, AT)
    assert moved(plan).changes["state"] == "external_blocker"
    assert of(plan, Outbox) == []
    stopped = of(plan, Journal)[-1]
    assert (stopped.entity, stopped.action, stopped.actor) == ("run", "chain_stopped", "chain")
    assert "settle.rules" in stopped.note


def test_two_failed_occurrences_trip_the_breaker() -> None:
    """A FAILED run after another failure reaches `circuit-breaker 2`: the loop is
    paused by `schedule`, journaled and notified once."""
    ev = event("nightly")
    state = loop_state("nightly", consecutive_failures=1)
    finished = Finished(run_of(ev), "failed", "FAILED", False)
    plan = settle(finished, RULES, facts(ev, dispatched(ev), state=state), MACHINES, AT)
    assert moved(plan).changes["state"] == "failed"
    assert moved(plan).changes["failure_class"] == "implementation_failure"
    (pause,) = of(plan, PauseLoop)
    assert pause.loop == "nightly" and "2 consecutive failures" in pause.why
    assert [type(e) for e in pause.then] == [Journal, Notify]


def test_a_conflict_waits_without_a_retry_until_it_times_out() -> None:
    """A CONFLICT waits the base backoff without using a retry and counts its waits;
    after MAX_CONFLICT_WAITS the occurrence times out."""
    ev = event("nightly")
    finished = Finished(run_of(ev), "succeeded", "CONFLICT", False)
    waiting = settle(finished, RULES, facts(ev, dispatched(ev)), MACHINES, AT)
    assert moved(waiting).changes["attempt"] == 0
    assert moved(waiting).changes["evidence"] == {"conflict_waits": 1}
    assert of(waiting, Journal)[0].action == "conflict_wait"
    tired = dispatched(ev, evidence={"conflict_waits": MAX_CONFLICT_WAITS})
    ended = settle(finished, RULES, facts(ev, tired), MACHINES, AT)
    assert moved(ended).changes["state"] == "timed_out"


def test_a_mutating_run_that_lost_its_lease_waits_for_a_person() -> None:
    """A mutating run whose lease expired may have half-run: its occurrence waits for a
    person (`human_attention_required`) instead of a retry."""
    ev = event("mutator")
    run = run_of(ev, "act@1", error="lease expired; mutating runs are not re-executed")
    plan = settle(
        Finished(run, "failed", None, True), RULES, facts(ev, dispatched(ev)), MACHINES, AT
    )
    assert moved(plan).changes["state"] == "human_attention_required"
    assert "may have half-run" in of(plan, Journal)[0].note


def test_a_cancel_or_a_refusal_is_no_failure_of_the_loop() -> None:
    """An operator's cancel ends the occurrence `cancelled` without counting it; a run
    the authority check refused waits for a person with the refusal as its note."""
    ev = event("nightly")
    state = loop_state("nightly", consecutive_failures=1)
    known = facts(ev, dispatched(ev), state=state)
    cancel = Finished(run_of(ev), "cancelled", None, False, cancelled_by="operator:alice")
    plan = settle(cancel, RULES, known, MACHINES, AT)
    assert moved(plan).changes["state"] == "cancelled"
    assert of(plan, Journal)[0].note == "cancelled by operator:alice"
    assert of(plan, Counters) == [Counters("nightly", 1, 0, None)]
    refused = Finished(run_of(ev), "failed", None, False, unauthorized="refused: no approval")
    plan = settle(refused, RULES, known, MACHINES, AT)
    assert moved(plan).changes["state"] == "human_attention_required"
    assert of(plan, Journal)[0].note == "refused: no approval"


def test_a_run_whose_occurrence_moved_on_only_chains() -> None:
    """A run whose occurrence is no longer dispatched (or has none) leaves it alone;
    its recorded outcome still chains, and an emit whose expression fails is journaled
    `chain_error`, not raised."""
    ev = event("nightly")
    finished = Finished(run_of(ev), "succeeded", "OK", False, chain=Chain({"summary": "x"}, SLOT))
    gone = settle(finished, RULES, SettleFacts(None, ev), MACHINES, AT)
    assert [type(e) for e in gone] == [Outbox, Journal]
    broken = replace(finished, chain=Chain({}, SLOT))  # `result.summary` is missing
    (error,) = settle(broken, RULES, SettleFacts(None, ev), MACHINES, AT)
    assert isinstance(error, Journal) and (error.action, error.actor) == ("chain_error", "chain")
    late = replace(dispatched(ev), state="cancelled")
    assert settle(finished, RULES, SettleFacts(late, ev), MACHINES, AT) == gone


def test_the_same_result_and_facts_give_the_same_plan() -> None:
    """Settling is pure: the same inputs give the same plan, and nothing is read from
    elsewhere (a run that never started used no time but takes its number)."""
    ev = event("nightly")
    run = replace(run_of(ev), started_at=None)
    finished = Finished(run, "cancelled", None, False, cancelled_by="operator:alice")
    known = facts(ev, dispatched(ev, used={"runs": 1, "wall_clock_seconds": 7}))
    plan = settle(finished, RULES, known, MACHINES, AT)
    assert settle(finished, RULES, known, MACHINES, AT) == plan
    assert moved(plan).changes["used"] == {
        "runs": 2,
        "wall_clock_seconds": 7,
        "wall_clock_ms": 7000,
    }


def test_what_a_run_used_adds_to_what_its_occurrence_used() -> None:
    """A run's wall clock is counted in milliseconds and added to the occurrence's: a
    record from before milliseconds were kept counts its whole seconds; a run that never
    started used no time but takes its number; a clock that stepped back between the
    start and the end counts no time, never less than none."""
    ev = event("nightly")
    run = run_of(ev)  # started at STARTED, ends at AT: 2.25 s
    fresh = dispatched(ev)
    assert used_after(fresh, run, AT) == {
        "runs": 1,
        "wall_clock_seconds": 2,
        "wall_clock_ms": 2250,
    }
    old = dispatched(ev, used={"runs": 2, "wall_clock_seconds": 7})
    assert used_after(old, run, AT) == {
        "runs": 3,
        "wall_clock_seconds": 9,
        "wall_clock_ms": 9250,
    }
    kept = dispatched(ev, used={"runs": 1, "wall_clock_seconds": 1, "wall_clock_ms": 1900})
    assert used_after(kept, run, AT)["wall_clock_ms"] == 4150
    # a JSON `true` is no count of milliseconds: the whole seconds are read instead
    odd = dispatched(ev, used={"runs": 1, "wall_clock_seconds": 3, "wall_clock_ms": True})
    assert used_after(odd, run, AT)["wall_clock_ms"] == 5250
    never = replace(run, started_at=None)
    assert used_after(old, never, AT) == {
        "runs": 3,
        "wall_clock_seconds": 7,
        "wall_clock_ms": 7000,
    }
    stepped_back = iso(SLOT)  # before STARTED
    assert used_after(fresh, run, stepped_back)["wall_clock_ms"] == 0


def test_a_run_number_and_a_loop_that_waits() -> None:
    """An occurrence that has used no run yet numbers its next run 0 (its first key,
    without `#N`); a loop another loop runs `after` is waited for (its conclusion reads
    the run's outcome), a loop nobody follows or no loop is not."""
    ev = event("nightly")
    assert runs_of(dispatched(ev)) == 0
    assert runs_of(dispatched(ev, used={"wall_clock_seconds": 4})) == 0
    assert runs_of(dispatched(ev, used={"runs": 2})) == 2
    assert waited_for(RULES, "nightly") is True  # after-ok runs after nightly
    assert waited_for(RULES, "mutator") is False
    assert waited_for(RULES, None) is False


def test_how_a_run_that_ended_without_a_result_is_judged() -> None:
    """A refused workspace waits for a person, its note the refusal (the guard's error,
    else the run's, else a pointer to the run); a lost lease of a run whose definition
    left the rules is taken as mutating (a person looks before any retry); a failure
    outside any loop fails its occurrence, its note the class and the run's state when no
    outcome was recorded."""
    ev = event("nightly")
    run = run_of(ev)
    guard = Finished(run, "failed", None, False, refused=True, error="dirty: a.txt")
    assert judged(guard, RULES, dispatched(ev)) == Ends(
        OccurrenceTrigger.ESCALATE, None, "workspace refused: dirty: a.txt"
    )
    by_run = Finished(replace(run, error="dirty: b.txt"), "failed", None, False, refused=True)
    assert judged(by_run, RULES, dispatched(ev)).note == "workspace refused: dirty: b.txt"
    bare = Finished(run, "failed", None, False, refused=True)
    assert judged(bare, RULES, dispatched(ev)).note == "workspace refused: see the run"
    gone = replace(run, definition="gone@1", error="lease expired at 10:00")
    lost = judged(Finished(gone, "failed", None, True), RULES, dispatched(ev))
    assert isinstance(lost, Ends)
    assert (lost.trigger, lost.cls) == (
        OccurrenceTrigger.ESCALATE,
        FailureClass.INFRASTRUCTURE_FAILURE,
    )
    outside = Finished(replace(run, loop=None), "failed", None, True)
    assert judged(outside, RULES, dispatched(ev)) == Ends(
        OccurrenceTrigger.FAIL,
        FailureClass.INFRASTRUCTURE_FAILURE,
        "infrastructure_failure (failed)",
    )


def test_a_runs_key_is_its_events_and_its_number() -> None:
    """The first run of an event takes the event's idempotency key; run N takes `#N`
    after it, so a retry never reuses a spent key."""
    ev = event("nightly")
    assert run_key(ev, 0) == idempotency_key(ev)
    assert run_key(ev, 2) == idempotency_key(ev) + "#2"
