"""The paths of the pure decision of one event (engine/core/decide.py) on plain data:
records built here, the rules of tests/data/decide (one loop per path), the compiled
lifecycle machines; no store. Each test names what a user relies on: what a trigger
folds into, when quiet backoff ends, what shadow mode records, what triage and the
stop conditions end before dispatch, and which facts a batch may carry on."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.core.decide import Facts, History, Superseded, carried, counts_active, decide
from engine.core.effects import (
    Admit,
    Counters,
    Decide,
    DecideProposal,
    Effect,
    Journal,
    Notify,
    OpenOccurrence,
    PauseLoop,
    Plan,
    Propose,
    QueueRun,
    RecordFinding,
    Signal,
    Transition,
)
from engine.core.envelope import iso
from engine.core.machines import Lifecycle
from engine.core.records import EventRecord, LoopState, OccurrenceRecord, ProposalRecord
from engine.core.ticks import tick
from engine.loading import Paths, load_rules

TREE = Path(__file__).resolve().parents[1] / "data" / "decide"
RULES = load_rules(Paths(TREE / "loops", TREE / "registry", TREE / "config"))
MACHINES = Lifecycle(RULES)
SLOT = datetime(2026, 12, 1, 10, tzinfo=UTC)
AT = iso(SLOT + timedelta(seconds=5))


def event(loop: str, hour: int = 0, **fields: Any) -> EventRecord:
    """The loop's clock tick of the slot `hour` hours after SLOT, admitted and planned."""
    envelope = tick(RULES.loops[loop], SLOT + timedelta(hours=hour), 0)
    known: dict[str, Any] = {
        "event_id": envelope.eventId,
        "type": envelope.type,
        "source": envelope.source,
        "subject": envelope.subject,
        "occurred_at": iso(envelope.occurredAt),
        "correlation_id": envelope.correlationId,
        "payload": envelope.payload,
        "loop": loop,
        "admitted_at": iso(SLOT),
        "admitted_by": "schedule",
        "planned": True,
    }
    return EventRecord(**{**known, **fields})


def loop_state(loop: str, **fields: Any) -> LoopState:
    fresh = LoopState(loop, True, iso(SLOT), None, None, False, "", None, iso(SLOT))
    return replace(fresh, **fields)


def occurrence(ev: EventRecord, state: str = "work_dispatched", **fields: Any) -> OccurrenceRecord:
    """The occurrence `ev` opened, now in `state`."""
    known: dict[str, Any] = {
        "event_id": ev.event_id,
        "loop": ev.loop,
        "state": state,
        "updated_at": iso(SLOT),
        "occurrence_key": f"{ev.loop}|r1|{ev.payload['slot']}",
        "repo": "r1",
        "window": ev.payload["slot"],
        "created_at": iso(SLOT),
    }
    return OccurrenceRecord(**{**known, **fields})


def planned(ev: EventRecord, **facts: Any) -> Plan:
    """The plan of `ev` on its loop's fresh state and `facts`."""
    known: dict[str, Any] = {}
    if ev.loop is not None and ev.loop in RULES.loops:
        known["state"] = loop_state(ev.loop)
    return decide(ev, RULES, Facts(**{**known, **facts}), MACHINES, AT)


def of(plan: Plan, kind: type[Effect]) -> list[Any]:
    return [e for e in plan if isinstance(e, kind)]


def decided(plan: Plan) -> Any:
    (found,) = of(plan, Decide)
    return found.record


def opened(plan: Plan) -> OccurrenceRecord:
    (found,) = [e.record for e in plan if isinstance(e, OpenOccurrence)]
    return found


def seen(plan: Plan) -> dict[str, Any]:
    """The snapshot triage saw, kept as the opened occurrence's evidence."""
    evidence = opened(plan).evidence
    assert evidence is not None
    snapshot: dict[str, Any] = evidence["snapshot"]
    return snapshot


def origin(loop: str) -> str:
    return str(RULES.loops[loop].origin)


# ---- a trigger while the loop is at its active limit --------------------------------------


def test_a_trigger_coalesced_into_the_active_occurrence_counts_what_is_pending() -> None:
    """Under `overlap buffer_one` a trigger while one occurrence is active is decided
    `coalesced`, signalled to that occurrence and journaled on it with how many
    triggers now wait for its follow-up; the decision names the loop and its rule."""
    active = occurrence(event("coalescer"), signals=2)
    plan = planned(event("coalescer", 1), active=(active,))
    assert of(plan, Signal) == [Signal(active.event_id)]
    record = decided(plan)
    assert (record.kind, record.reason, record.loop, record.rule) == (
        "noop",
        "coalesced",
        "coalescer",
        origin("coalescer"),
    )
    assert (record.human_only, record.mutating, record.approved_by) == (False, False, None)
    (journal,) = of(plan, Journal)
    assert (journal.entity, journal.entity_id, journal.action) == (
        "occurrence",
        active.event_id,
        "coalesced",
    )
    assert journal.note == f"coalesced into active occurrence {active.event_id} (3 pending)"
    assert not of(plan, OpenOccurrence)


def test_a_trigger_at_the_limit_returns_to_or_skips_the_active_occurrence() -> None:
    """Under `overlap skip` a trigger meanwhile is linked to the active occurrence
    (`occurrence_active`, journaled on it); under the old `on-active skip` it is
    `skipped_active`, journaled on the event alone. Each note says which."""
    active = occurrence(event("single"))
    plan = planned(event("single", 1), active=(active,))
    assert decided(plan).reason == "occurrence_active"
    (journal,) = of(plan, Journal)
    assert (journal.entity, journal.entity_id) == ("occurrence", active.event_id)
    assert journal.note == (
        f"loop 'single' is at its active limit: returned to the active occurrence {active.event_id}"
    )
    busy = occurrence(event("skipper"))
    later = event("skipper", 1)
    plan = planned(later, active=(busy,))
    assert decided(plan).reason == "skipped_active"
    (journal,) = of(plan, Journal)
    assert (journal.entity, journal.entity_id, journal.data) == (
        "event",
        later.event_id,
        {"active": busy.event_id},
    )
    assert journal.note == (
        f"loop 'skipper' is at its active limit: skipped occurrence {busy.event_id}"
    )


def test_a_singleton_with_a_run_in_flight_says_so_rather_than_folding() -> None:
    """A tick of a singleton loop while its run is in flight is the no-op
    `previous_run_in_flight`, an occurrence of its own that ends at once, even when the
    running occurrence is also at the active limit: no fold into it."""
    active = occurrence(event("single"))
    plan = planned(event("single", 1), active=(active,), in_flight=True)
    assert decided(plan).reason == "previous_run_in_flight"
    assert opened(plan).state == "nothing_to_do"
    assert not of(plan, Signal)


def test_below_the_limit_a_trigger_opens_its_own_occurrence() -> None:
    """`overlap allow max 2` with one active occurrence still opens another."""
    active = occurrence(event("pair"))
    plan = planned(event("pair", 1), active=(active,))
    assert decided(plan).kind == "run"
    assert opened(plan).state == "work_dispatched"


# ---- quiet backoff ------------------------------------------------------------------------


def test_quiet_backoff_holds_until_its_instant_and_not_at_it() -> None:
    """Before `quiet_until` a tick is the no-op `quiet_backoff`, its note saying how many
    nothing_to_do in a row and until when; from that instant on the loop decides again."""
    before = loop_state("single", nothing_streak=4, quiet_until=iso(SLOT + timedelta(hours=1)))
    plan = planned(event("single"), state=before)
    record = decided(plan)
    assert (record.kind, record.reason) == ("noop", "quiet_backoff")
    assert record.note == f"4 nothing_to_do in a row: quiet until {before.quiet_until}"
    over = loop_state("single", nothing_streak=4, quiet_until=AT)  # quiet until now
    assert decided(planned(event("single"), state=over)).kind == "run"


# ---- what an opened occurrence records ----------------------------------------------------


def test_a_dispatched_occurrence_keeps_its_evidence_and_stays_open() -> None:
    """The opened occurrence keeps what triage saw (the snapshot) and is not finished;
    its journal names the rule; the queued run has made no attempt yet and names the
    loop's rule, as does the auto-approved proposal."""
    plan = planned(event("single"))
    record = opened(plan)
    assert record.finished_at is None
    assert seen(plan)["loop"] == "single"
    assert record.evidence is not None and "would_dispatch" not in record.evidence
    (journal,) = of(plan, Journal)
    assert journal.data is not None and journal.data["rule"] == origin("single")
    (queued,) = of(plan, QueueRun)
    assert (queued.record.attempts, queued.rule) == (0, origin("single"))


def test_a_loop_with_no_state_yet_triages_on_zero_counts() -> None:
    """A loop with no durable state yet is triaged on no failures and no streak."""
    plan = planned(event("single"), state=None)
    assert (seen(plan)["failures"], seen(plan)["nothing_streak"]) == (0, 0)


# ---- shadow mode --------------------------------------------------------------------------


def test_shadow_mode_records_what_would_run_and_concludes_at_once() -> None:
    """A shadowed tick opens its occurrence finished in `shadow_recorded`, its evidence
    naming the definition it would dispatch; nothing is queued, and the loops `after`
    it are fired by that conclusion, with the tick's correlation."""
    ev = event("shadowed", correlation_id="corr-7")
    plan = planned(ev)
    record = opened(plan)
    assert (record.state, record.finished_at) == ("shadow_recorded", AT)
    assert record.evidence is not None and record.evidence["would_dispatch"] == "act@1"
    assert not of(plan, QueueRun)
    (fired,) = of(plan, Admit)
    assert fired.envelope.type == "dec.after-shadowed"
    assert fired.envelope.correlationId == "corr-7"
    assert fired.envelope.payload["upstream"]["state"] == "shadow_recorded"
    assert fired.cause == ("occurrence", ev.event_id)


# ---- ended before dispatch ----------------------------------------------------------------


def test_a_candidate_finding_is_recorded_once_seen_with_its_category_and_rule() -> None:
    """Triage `create_candidate_finding` ends the occurrence and records the candidate:
    its category as the line says, seen once so far, from that triage line."""
    plan = planned(event("finder"), history=History(None, 0, {}, None, 0))
    (found,) = of(plan, RecordFinding)
    rule = RULES.loops["finder"].triage[0].origin
    assert (found.record.semantic_key, found.record.category) == ("lint:r1", "lint")
    assert (found.record.occurrence_count, found.rule) == (1, str(rule))
    assert found.occurrence == opened(plan).event_id


def test_release_ready_is_announced_and_counted_as_the_loops_end() -> None:
    """Triage `release_ready` ends the occurrence, notifies a person with the line's
    note, and the end is counted on the loop (its counters are written)."""
    ev = event("releaser")
    plan = planned(ev, history=History(None, 0, {}, None, 0))
    (notified,) = of(plan, Notify)
    record = notified.record
    assert (record.kind, record.state, record.message) == (
        "occurrence",
        "release_ready",
        "ready to ship",
    )
    assert record.links == {"occurrence": ev.event_id}
    assert [c.loop for c in of(plan, Counters)] == ["releaser"]


def test_an_end_before_dispatch_is_counted_only_for_a_loop_with_state() -> None:
    """A nothing_to_do at triage counts toward the loop's quiet streak and fires the
    loops `after` it, with the tick's correlation; a loop with no durable state yet has
    nothing to count on, and the occurrence still ends."""
    ev = event("idle", correlation_id="corr-9")
    counted = planned(ev, history=History(None, 0, {}, None, 0))
    assert [(c.loop, c.streak) for c in of(counted, Counters)] == [("idle", 1)]
    (fired,) = of(counted, Admit)
    assert (fired.envelope.type, fired.envelope.correlationId) == ("dec.after-idle", "corr-9")
    assert fired.envelope.payload["upstream"]["state"] == "nothing_to_do"
    bare = planned(event("idle"), state=None, history=History(None, 0, {}, None, 0))
    assert opened(bare).state == "nothing_to_do"
    assert of(bare, Counters) == []


def previously(state: str, decision: str) -> History:
    """The history of a loop whose previous triaged occurrence ended in `state`."""
    before = occurrence(event("guarded", -1), state, decision=decision)
    return History(None, 0, {}, before, 1)


def test_a_stop_that_waits_for_a_person_pauses_the_loop() -> None:
    """Mutation work stopped by `human_review_required` (the previous occurrence wanted
    a person) is the no-op `stopped` and pauses the loop, journaled and notified as
    `stopped:<condition>`, until an operator resumes it."""
    history = previously("human_attention_required", "human_attention_required")
    plan = planned(event("guarded"), history=history)
    assert (decided(plan).reason, opened(plan).state) == ("stopped", "cancelled")
    (paused,) = of(plan, PauseLoop)
    why = "stop condition human_review_required: resume the loop once it is handled"
    assert (paused.loop, paused.why) == ("guarded", why)
    journal, notice = paused.then
    assert isinstance(journal, Journal) and journal.data == {
        "condition": "human_review_required",
        "occurrence": opened(plan).event_id,
    }
    assert isinstance(notice, Notify) and notice.record.state == "stopped:human_review_required"


def test_a_frozen_repository_stops_mutation_without_pausing_the_loop() -> None:
    """A loop's mutation work on a frozen repository is stopped by `release_freeze`
    (the freeze is the repo's, not the instance's), and the loop is not paused: the
    next tick after the thaw runs."""
    plan = planned(event("frozen"))
    record = decided(plan)
    assert (record.reason, record.note) == (
        "stopped",
        "stop condition release_freeze: mutation work is not dispatched",
    )
    assert not of(plan, PauseLoop)
    assert seen(plan)["freeze"] is True


def test_the_loops_triage_decides_and_a_replay_without_history_still_decides() -> None:
    """A loop's own triage decides its occurrence (three failures in a row want a
    person); decided again under rules that added triage, from facts recorded without
    the history it reads (a replay), it triages on the cheap facts alone."""
    tired = loop_state("guarded", consecutive_failures=3)
    plan = planned(event("guarded"), state=tired, history=History(None, 0, {}, None, 0))
    assert (decided(plan).reason, decided(plan).note) == (
        "human_attention_required",
        "three failures in a row",
    )
    plan = planned(event("guarded"), history=None)
    assert (decided(plan).kind, opened(plan).state) == ("run", "work_dispatched")


# ---- events that are no loop's tick -------------------------------------------------------


def outside(event_type: str, payload: dict[str, Any], **fields: Any) -> EventRecord:
    """An event from outside (a webhook delivery), no loop's tick."""
    known: dict[str, Any] = {
        "event_id": "ext-1",
        "type": event_type,
        "source": "github",
        "subject": "pr/1",
        "occurred_at": iso(SLOT),
        "correlation_id": "ext-1",
        "payload": payload,
        "loop": None,
        "admitted_at": iso(SLOT),
        "admitted_by": "github",
        "planned": True,
    }
    return EventRecord(**{**known, **fields})


def test_an_event_fires_its_on_event_loops_even_after_one_could_not_be_told() -> None:
    """A request fires every `on_event` loop of its type; one whose guard fails on it
    (a size that is not a number) is journaled `trigger_failed` on the event, and the
    loops after it are still fired."""
    fine = planned(outside("dec.request", {"repo": "r1", "size": 2}))
    assert [a.envelope.type for a in of(fine, Admit)] == ["dec.on-a", "dec.on-b"]
    plan = planned(outside("dec.request", {"repo": "r1", "size": "big"}))
    assert [a.envelope.type for a in of(plan, Admit)] == ["dec.on-b"]
    failed = [j for j in of(plan, Journal) if j.action == "trigger_failed"]
    assert [(j.entity, j.entity_id) for j in failed] == [("event", "ext-1")]
    assert failed[0].note.startswith("loop 'on-a' not fired: ")


def test_a_route_approved_event_runs_on_its_routes_approval() -> None:
    """An event no loop emitted, routed read-only with `approval auto`, is decided
    `run` by actor `system`; its occurrence reserves no loop budget."""
    plan = planned(outside("dec.request", {"repo": "r1", "size": 0}))
    record = decided(plan)
    assert (record.kind, record.approved_by, record.loop) == ("run", "system", None)
    assert (opened(plan).state, opened(plan).reserved) == ("work_dispatched", None)
    (queued,) = of(plan, QueueRun)
    assert queued.record.approved_by == "system"


def test_a_routed_change_is_proposed_unless_its_repository_is_frozen() -> None:
    """A change request routed to mutating work (route approval watched) is a
    proposal; on a frozen repository it is stopped by `release_freeze` first, though
    no loop lists that condition."""
    plan = planned(outside("dec.change", {"repo": "r1"}))
    assert decided(plan).kind == "propose"
    assert [p.record.event_id for p in of(plan, Propose)] == ["ext-1"]
    frozen = planned(outside("dec.change", {"repo": "cold"}))
    assert (decided(frozen).reason, decided(frozen).note) == (
        "stopped",
        "stop condition release_freeze: mutation work is not dispatched",
    )


def test_a_tick_of_a_loop_no_longer_in_the_rules_follows_its_route() -> None:
    """An event admitted as a tick of a loop the rules no longer have is no loop's
    tick: it follows its route (a proposal) and supersedes nothing."""
    gone = outside("dec.change", {"repo": "r1", "loop": "gone"}, loop="gone")
    plan = planned(gone)
    assert decided(plan).kind == "propose"
    assert [type(e).__name__ for e in plan] == ["Decide", "OpenOccurrence", "Journal", "Propose"]


# ---- proposals ----------------------------------------------------------------------------


def older(loop: str, occ_state: str | None = "awaiting_approval") -> Superseded:
    """The loop's open proposal of the slot before, with its occurrence in `occ_state`
    (None: no occurrence)."""
    ev = event(loop, -1)
    proposal = ProposalRecord(
        proposal_id=f"prop-{loop}-old",
        event_id=ev.event_id,
        loop=loop,
        definition="look@1",
        state="open",
        human_only=False,
        mutating=False,
        created_at=iso(SLOT),
    )
    occ = occurrence(ev, occ_state, reserved={"runs": 1}) if occ_state else None
    return Superseded(proposal, occ, ev.event_id)


def test_a_newer_slots_proposal_supersedes_the_older_one_and_ends_its_occurrence() -> None:
    """A watched loop's new proposal supersedes its open older one (journaled with the
    newer proposal's id); the older occurrence, awaiting approval, is cancelled with
    its reservation released and concluded without counting against the loop."""
    old = older("watched")
    assert old.occurrence is not None
    state = loop_state("watched", consecutive_failures=1, nothing_streak=2)
    plan = planned(event("watched"), state=state, open_proposals=(old,))
    (new,) = of(plan, Propose)
    assert new.rule == origin("watched")
    (superseded,) = of(plan, DecideProposal)
    assert (superseded.proposal_id, superseded.expect, superseded.to_state) == (
        old.proposal.proposal_id,
        "open",
        "superseded",
    )
    assert superseded.note == f"superseded by {new.record.proposal_id}"
    journal, moved, counters = superseded.then
    assert isinstance(journal, Journal) and journal.action == "superseded"
    assert journal.note == f"a newer slot of loop 'watched' proposed {new.record.proposal_id}"
    assert moved == Transition(
        old.occurrence.event_id,
        "awaiting_approval",
        {"state": "cancelled", "reserved": None, "finished_at": AT},
    )
    assert counters == Counters("watched", 1, 2, None)
    assert plan.index(superseded) < plan.index(new)


def test_a_superseded_proposal_without_an_awaiting_occurrence_only_ends_itself() -> None:
    """The older proposal is superseded whatever became of its occurrence; only one
    still awaiting approval is moved (none, or one already ended, is left alone); with
    no durable loop state the occurrence is cancelled and nothing is counted."""
    for occ_state in (None, "cancelled"):
        plan = planned(event("watched"), open_proposals=(older("watched", occ_state),))
        (superseded,) = of(plan, DecideProposal)
        assert [type(e) for e in superseded.then] == [Journal]
    plan = planned(event("watched"), state=None, open_proposals=(older("watched"),))
    (superseded,) = of(plan, DecideProposal)
    assert [type(e) for e in superseded.then] == [Journal, Transition]


def test_under_catch_up_all_every_slots_proposal_stays_open() -> None:
    """Under `catch_up all` every slot counts: a new proposal supersedes none, even
    decided again (a replay) from facts recorded under rules that superseded."""
    plan = planned(event("watched-all"), open_proposals=(older("watched-all"),))
    assert of(plan, DecideProposal) == []
    assert len(of(plan, Propose)) == 1


# ---- the facts a batch carries to the loop's next event -------------------------------------


def test_facts_carry_past_a_proposal_that_supersedes_nothing() -> None:
    """A batch decides a loop's next event on the same facts when the plan changed
    nothing they hold: a no-op, or a proposal under `catch_up all` (it supersedes no
    other). A proposal that may supersede older ones, or a run queued, makes the next
    event read its facts afresh."""
    facts = Facts(state=loop_state("watched-all"))
    ev = event("watched-all")
    plan = decide(ev, RULES, facts, MACHINES, AT)
    assert carried(RULES, RULES.loops["watched-all"], ev, facts, plan) == facts
    paused = Facts(state=loop_state("single", paused=True))
    ev = event("single")
    plan = decide(ev, RULES, paused, MACHINES, AT)
    assert decided(plan).reason == "paused"
    assert carried(RULES, RULES.loops["single"], ev, paused, plan) == paused
    for name in ("watched", "asked", "single"):
        facts = Facts(state=loop_state(name))
        ev = event(name)
        plan = decide(ev, RULES, facts, MACHINES, AT)
        assert carried(RULES, RULES.loops[name], ev, facts, plan) is None, name


def test_active_occurrences_are_a_fact_only_of_a_loop_that_reads_them() -> None:
    """A loop's active occurrences are read for its decisions when it has an active
    limit (a singleton, `allow max N`) or triage that may read their number; a loop of
    `overlap allow` without triage never reads them."""
    counted = {name: counts_active(loop) for name, loop in RULES.loops.items()}
    assert counted["single"] and counted["pair"] and counted["finder"]
    assert not counted["free"]
