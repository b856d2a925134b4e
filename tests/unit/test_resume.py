"""A waiting retry taken up again, decided purely (engine/core/resume.py) on plain data:
records built here, the rules of tests/data/settle, the compiled lifecycle machines; no
store. Each test names what a user relies on."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from engine.core.decide import History
from engine.core.effects import Counters, Journal, QueueRun, RecordFinding, Transition
from engine.core.envelope import iso
from engine.core.records import OccurrenceRecord
from engine.core.resume import ResumeFacts, resume
from engine.core.settle import Ending
from tests.unit.test_settle import MACHINES, RULES, SLOT, event, loop_state, of, run_of

AT = iso(SLOT + timedelta(minutes=1))


def waiting(loop: str, **fields: Any) -> OccurrenceRecord:
    ev = event(loop)
    return OccurrenceRecord(
        event_id=ev.event_id,
        loop=loop,
        state="waiting_for_resource",
        updated_at=iso(SLOT),
        occurrence_key=f"{loop}|r1|{ev.payload['slot']}",
        repo="r1",
        window=ev.payload["slot"],
        decision="run_readonly_check",
        attempt=1,
        retry_at=AT,
        used={"runs": 1, "wall_clock_seconds": 2, "wall_clock_ms": 2250},
        created_at=iso(SLOT),
        failure_class="infrastructure_failure",
        **fields,
    )


def facts(loop: str, **fields: Any) -> ResumeFacts:
    ev = event(loop)
    state = fields.pop("state", loop_state(loop))
    known = {"definition": "look@1", "state": state, "ending": Ending(state, correlation="c")}
    return ResumeFacts(ev, run_of(ev), **{**known, **fields})


def test_a_due_retry_is_dispatched_again_as_the_next_run() -> None:
    """A waiting occurrence goes back to triage (journaled `resumed`) and, triage and
    the budget allowing, is dispatched again with a new reservation: its next run is
    `key#1` under the first run's proposal and approver, journaled `redispatched`."""
    occ = waiting("nightly")
    plan = resume(occ, RULES, facts("nightly"), MACHINES, AT)
    assert [type(e) for e in plan] == [Transition, Journal, Transition, QueueRun, Journal]
    back, resumed, forward, queued, redispatched = plan
    assert back == Transition(
        occ.event_id, "waiting_for_resource", {"state": "triaging", "retry_at": None}
    )
    assert (resumed.action, resumed.actor, resumed.data) == ("resumed", "system", {"attempt": 1})
    assert forward == Transition(
        occ.event_id,
        "triaging",
        {
            "state": "work_dispatched",
            "reserved": {"runs": 1, "wall_clock_seconds": 30},
            "decision": "run_readonly_check",
        },
    )
    run = queued.record
    first = run_of(event("nightly"))
    assert run.idempotency_key == first.idempotency_key + "#1"
    assert (run.proposal_id, run.approved_by, run.definition) == (
        first.proposal_id,
        "schedule",
        "look@1",
    )
    assert queued.rule == str(RULES.loops["nightly"].origin)
    assert redispatched.data == {"run": run.run_id, "attempt": 1}
    assert (redispatched.from_state, redispatched.to_state) == ("triaging", "work_dispatched")


def test_a_redispatch_records_what_triage_decided_now() -> None:
    """The decision a resumed occurrence records is the triage made on taking it up
    again, not the one it was dispatched with first: the facts may have changed while it
    waited."""
    occ = replace(waiting("nightly"), decision="retry_infrastructure_failure")
    forward = resume(occ, RULES, facts("nightly"), MACHINES, AT)[2]
    assert isinstance(forward, Transition)
    assert forward.changes["decision"] == "run_readonly_check"


def test_a_retry_with_nothing_to_run_fails() -> None:
    """When the event or its first run is gone, the occurrence fails from where it
    waits, concluded and counted as a failure of its loop."""
    occ = waiting("nightly")
    plan = resume(occ, RULES, replace(facts("nightly"), first=None), MACHINES, AT)
    transition = plan[0]
    assert isinstance(transition, Transition)
    assert (transition.expect, transition.changes["state"]) == ("waiting_for_resource", "failed")
    journal = plan[1]
    assert isinstance(journal, Journal) and journal.action == "concluded"
    assert journal.note == "nothing to retry: the event or its run is gone"
    assert of(plan, Counters) == [Counters("nightly", 1, 0, None)]


def test_a_paused_loop_cancels_its_waiting_retry() -> None:
    """A retry of a loop paused meanwhile is cancelled from triage, with the
    planner's reason, and never counted as a failure."""
    occ = waiting("nightly")
    state = loop_state("nightly", paused=True, pause_note="hold")
    plan = resume(occ, RULES, facts("nightly", state=state), MACHINES, AT)
    ended = of(plan, Transition)[-1]
    assert (ended.expect, ended.changes["state"]) == ("triaging", "cancelled")
    assert "paused" in of(plan, Journal)[-1].note
    assert of(plan, QueueRun) == []
    assert of(plan, Counters) == [Counters("nightly", 0, 0, None)]


def test_a_retry_waits_for_no_run_in_flight_of_its_loop() -> None:
    """A retry that comes due while a run of its one-at-a-time loop is in flight (an
    operator approved another slot's proposal) is decided like a tick then: a no-op
    `previous_run_in_flight`, the occurrence ended `nothing_to_do`, no second run, and
    counted neither as a failure nor as a quiet no-op."""
    occ = waiting("nightly")
    plan = resume(occ, RULES, facts("nightly", in_flight=True), MACHINES, AT)
    assert of(plan, QueueRun) == []
    ended = of(plan, Transition)[-1]
    assert (ended.expect, ended.changes["state"]) == ("triaging", "nothing_to_do")
    concluded = of(plan, Journal)[-1]
    assert concluded.action == "concluded"
    assert concluded.data == {"reason": "previous_run_in_flight"}
    assert concluded.note == "a run of loop 'nightly' is still in flight"
    assert of(plan, Counters) == [Counters("nightly", 0, 0, None)]


def test_a_retry_of_a_loop_that_allows_overlap_runs_beside_another() -> None:
    """A loop with `overlap allow` runs its retry whatever else of it is in flight."""
    occ = waiting("budgeted")
    history = History(None, 0, {}, None, 0)
    plan = resume(occ, RULES, facts("budgeted", in_flight=True, history=history), MACHINES, AT)
    assert len(of(plan, QueueRun)) == 1


def test_a_used_up_daily_budget_stops_the_retry() -> None:
    """Triage reads the day's use afresh: a retry after the loop's one daily run was
    used ends `budget_exhausted` and queues nothing."""
    occ = waiting("budgeted")
    used = History(None, 0, {"runs": 1, "wall_clock_seconds": 2}, None, 0)
    plan = resume(occ, RULES, facts("budgeted", history=used), MACHINES, AT)
    assert of(plan, Transition)[-1].changes["state"] == "budget_exhausted"
    assert of(plan, QueueRun) == []


def test_a_finding_triage_records_its_candidate_instead() -> None:
    """A loop whose triage records a candidate finding does so on resuming too, and the
    occurrence ends `candidate_recorded`."""
    occ = waiting("finder")
    history = History(None, 0, {}, None, 0)
    plan = resume(occ, RULES, facts("finder", history=history), MACHINES, AT)
    (finding,) = of(plan, RecordFinding)
    assert (finding.record.semantic_key, finding.occurrence) == ("lint:r1", occ.event_id)
    assert of(plan, Transition)[-1].changes["state"] == "candidate_recorded"


def test_the_same_facts_give_the_same_plan() -> None:
    """Resuming is pure: the same occurrence and facts give the same plan."""
    occ = waiting("nightly")
    known = facts("nightly")
    assert resume(occ, RULES, known, MACHINES, AT) == resume(occ, RULES, known, MACHINES, AT)
