"""Existing work first (docs/rules.md#existing-work-first), decided purely: what an
occurrence of a loop with a semantic key sees of what is there for its key (`existing`
in its triage snapshot), and the default when a check found something and no triage
line about it decided: a no-op `existing_work`, linked to the item, never a duplicate.
The facts are plain data (engine.core.existing.KeyFacts) given to `decide`; the tree
is tests/data/existing. How the store reads them is tests/integration/test_existing_work.py."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from engine.core.codec import decode_facts, encode_facts
from engine.core.decide import Facts, carried, decide, queue
from engine.core.effects import (
    Admit,
    Decide,
    Journal,
    OpenOccurrence,
    Plan,
    Propose,
    QueueRun,
    RecordFinding,
    Transition,
)
from engine.core.envelope import Envelope, iso
from engine.core.existing import KeyFacts, deferred, view
from engine.core.ids import stable_id
from engine.core.records import EventRecord, FindingRecord, OccurrenceRecord, RunRecord
from engine.core.resume import ResumeFacts, resume
from engine.core.ticks import manual_tick, tick
from engine.core.triage import TriageDecision
from engine.core.validation import Validators
from engine.core.work import WorkBinding, WorkItem
from engine.loading import Paths, load_rules
from engine.service.admission import admit_record
from engine.service.context import Runtime
from engine.service.facts import read_facts
from engine.store.memory import MemoryStore

TREE = Path(__file__).resolve().parents[1] / "data" / "existing"
SLOT = datetime(2026, 12, 1, 10, tzinfo=UTC)
AT = iso(SLOT)
EARLIER = "2026-12-01T09:00:00.000000Z"


def runtime() -> Runtime:
    rules = load_rules(Paths(TREE / "loops", TREE / "registry", TREE / "config"))
    return Runtime(MemoryStore(), rules, Validators.build(rules), lambda: SLOT)


def admitted(rt: Runtime, envelope: Envelope, actor: str = "schedule") -> EventRecord:
    with rt.store.write() as tx:
        row = admit_record(rt, tx, envelope, actor, AT)
    assert row is not None
    return row


def decided(rt: Runtime, event: EventRecord, keyed: KeyFacts | None = None) -> Plan:
    """The plan for `event` over the facts the store holds, with `keyed` (when given) as
    what is there for its key; the same facts always give the same plan."""
    with rt.store.read() as tx:
        facts = read_facts(tx, rt.rules, event, AT)
    if keyed is not None:
        facts = dataclasses.replace(facts, keyed=keyed)
    plan = decide(event, rt.rules, facts, rt.lifecycle, AT)
    assert decide(event, rt.rules, facts, rt.lifecycle, AT) == plan
    return plan


def one(plan: Plan, kind: type[Any]) -> Any:
    (found,) = [e for e in plan if isinstance(e, kind)]
    return found


def kinds(plan: Plan) -> list[str]:
    return [type(e).__name__ for e in plan]


def work(state: str = "active", **fields: Any) -> WorkItem:
    return WorkItem(
        work_id="work-0000000000000001",
        semantic_key="repair:r1",
        title="Repair r1",
        state=state,
        repo="r1",
        context={"summary": "", "links": []},
        created_by="operator:alice",
        created_at=EARLIER,
        updated_at=EARLIER,
        **fields,
    )


def occurrence(
    event_id: str, state: str, loop: str = "repair-r1", **fields: Any
) -> OccurrenceRecord:
    return OccurrenceRecord(
        event_id=event_id,
        loop=loop,
        state=state,
        updated_at=EARLIER,
        occurrence_key=f"{loop}|r1|{event_id}",
        repo="r1",
        created_at=EARLIER,
        semantic_key="repair:r1",
        **fields,
    )


def finding(status: str, decided_at: str | None, last_seen: str = EARLIER) -> FindingRecord:
    return FindingRecord(
        finding_id="find-1",
        semantic_key="repair:r1",
        loop="repair-r1",
        repo="r1",
        category="flaky",
        evidence=None,
        confidence=None,
        recommended_action=None,
        status=status,
        occurrence_count=2,
        first_seen_at=EARLIER,
        last_seen_at=last_seen,
        last_occurrence=None,
        decided_by="operator:alice" if decided_at else None,
        decided_at=decided_at,
    )


def repair_tick(rt: Runtime) -> EventRecord:
    return admitted(rt, tick(rt.rules.loops["repair-r1"], SLOT, 0))


def existing_of(plan: Plan) -> dict[str, Any]:
    opened = one(plan, OpenOccurrence).record
    assert opened.evidence is not None
    found: dict[str, Any] = opened.evidence["snapshot"]["existing"]
    return found


# ---- nothing there: the occurrence works on its key ---------------------------------------


def test_with_nothing_for_its_key_the_occurrence_runs_and_keeps_its_key() -> None:
    """The loop's tick reads its key's facts, runs as it would, and its occurrence keeps
    the key it works on; the evidence shows what the checks found: nothing."""
    rt = runtime()
    event = repair_tick(rt)
    with rt.store.read() as tx:
        facts = read_facts(tx, rt.rules, event, AT)
    assert facts.keyed == KeyFacts("repair:r1")
    plan = decided(rt, event)
    assert "QueueRun" in kinds(plan)
    opened = one(plan, OpenOccurrence).record
    assert (opened.state, opened.semantic_key) == ("work_dispatched", "repair:r1")
    assert existing_of(plan) == {
        "key": "repair:r1",
        "work": None,
        "job": None,
        "failed_attempt": None,
        "resolved_finding": None,
        "other_loop": None,
    }


def test_a_loop_without_a_key_reads_nothing_for_one() -> None:
    rt = runtime()
    assert rt.rules.loops["repair-r1"].key is not None
    with rt.store.read() as tx:
        event = EventRecord(
            "e-1", "ex.scan", "inject", "s", AT, "e-1", {"repo": "r1"}, None, AT, "inject"
        )
        assert read_facts(tx, rt.rules, event, AT).keyed is None


# ---- the default: a no-op existing_work, linked to what was found ---------------------------


def assert_deferred(plan: Plan, entity: str, entity_id: str, note: str) -> None:
    """Decided noop `existing_work` with `note`, its occurrence ended `nothing_to_do`,
    `existing_work` journaled on the item, and nothing created."""
    record = one(plan, Decide).record
    assert (record.kind, record.reason) == ("noop", "existing_work")
    assert record.note == note
    opened = one(plan, OpenOccurrence).record
    assert (opened.state, opened.semantic_key) == ("nothing_to_do", "repair:r1")
    (linked,) = [e for e in plan if isinstance(e, Journal) and e.action == "existing_work"]
    assert (linked.entity, linked.entity_id, linked.note) == (entity, entity_id, note)
    assert linked.data == {
        "occurrence": opened.event_id,
        "key": "repair:r1",
        "check": linked.data["check"],
    }
    assert not [e for e in plan if isinstance(e, Propose | QueueRun | RecordFinding)]


def test_a_live_work_item_on_the_key_is_continued_not_duplicated() -> None:
    rt = runtime()
    held = work(lease_owner="controller:agent", lease_expires_at="2026-12-01T11:00:00.000000Z")
    plan = decided(rt, repair_tick(rt), KeyFacts("repair:r1", work=held))
    assert_deferred(
        plan,
        "work",
        held.work_id,
        f"existing work: work item {held.work_id} (active, held by controller:agent) for key"
        " 'repair:r1'",
    )
    assert existing_of(plan)["work"] == {
        "id": held.work_id,
        "state": "active",
        "title": "Repair r1",
        "repo": "r1",
        "lease_owner": "controller:agent",
        "lease_live": True,
        "lease_expires_at": "2026-12-01T11:00:00.000000Z",
    }


@pytest.mark.parametrize(
    ("state", "run_state", "status"),
    [
        ("awaiting_approval", None, "under_review"),
        ("waiting_for_resource", None, "blocked"),
        ("work_dispatched", "queued", "queued"),
        ("work_dispatched", "claimed", "claimed"),
        ("work_dispatched", "running", "running"),
        ("triaging", None, "triaging"),
    ],
)
def test_a_job_on_the_key_still_going_is_the_existing_work(
    state: str, run_state: str | None, status: str
) -> None:
    rt = runtime()
    job = occurrence("clock:repair-r1:2026-12-01T09:00:00Z", state, retry_at=None)
    run = None
    if run_state is not None:
        run = RunRecord(
            "run-1", "k", job.event_id, None, "repair-r1", "look@1", run_state, "schedule", 0,
            None, None, EARLIER,
        )  # fmt: skip
    plan = decided(rt, repair_tick(rt), KeyFacts("repair:r1", job=job, run=run))
    assert_deferred(
        plan,
        "occurrence",
        job.event_id,
        f"existing work: occurrence {job.event_id} of loop 'repair-r1' is {status} for key"
        " 'repair:r1'",
    )
    seen = existing_of(plan)["job"]
    assert (seen["status"], seen["run"]) == (status, "run-1" if run_state else None)
    review = stable_id("prop", job.event_id) if state == "awaiting_approval" else None
    assert seen["proposal"] == review  # the proposal a reviewer has open


@pytest.mark.parametrize(
    ("state", "failure_class", "waits"),
    [
        ("failed", "implementation_failure", True),
        ("human_attention_required", "infrastructure_failure", True),  # a lease expired
        ("human_attention_required", None, True),  # a run the worker refused
        ("budget_exhausted", "infrastructure_failure", True),  # its retries used up
        ("external_blocker", "external_blocker", False),
        ("timed_out", "conflict", False),
        ("completed", "success", False),
        ("cancelled", None, False),
    ],
)
def test_an_attempt_that_waits_for_an_explicit_retry_is_not_repeated(
    state: str, failure_class: str | None, waits: bool
) -> None:
    rt = runtime()
    last = occurrence(
        "clock:repair-r1:2026-12-01T08:00:00Z",
        state,
        failure_class=failure_class,
        finished_at=EARLIER,
        used={"runs": 1},
    )
    plan = decided(rt, repair_tick(rt), KeyFacts("repair:r1", attempt=last))
    if not waits:
        assert "QueueRun" in kinds(plan) and existing_of(plan)["failed_attempt"] is None
        return
    assert_deferred(
        plan,
        "occurrence",
        last.event_id,
        f"existing work: the last attempt for key 'repair:r1', occurrence {last.event_id},"
        f" ended {state} ({failure_class or 'no class'}): it waits for an explicit retry"
        " (engine schedule trigger)",
    )


def test_an_operators_run_now_is_the_explicit_retry() -> None:
    """A run-now goes ahead of a failed attempt (it is the retry the attempt waits for),
    and still sees it; a coalesced follow-up (admitted by the schedule) does not."""
    rt = runtime()
    last = occurrence(
        "clock:repair-r1:2026-12-01T08:00:00Z",
        "failed",
        failure_class="implementation_failure",
        finished_at=EARLIER,
        used={"runs": 1},
    )
    loop = rt.rules.loops["repair-r1"]
    retry = admitted(rt, manual_tick(loop, SLOT, "t1"), "operator:alice")
    plan = decided(rt, retry, KeyFacts("repair:r1", attempt=last))
    assert "QueueRun" in kinds(plan)
    assert existing_of(plan)["failed_attempt"]["occurrence"] == last.event_id
    follow_up = admitted(rt, manual_tick(loop, SLOT, "coalesced-f1"), "schedule")
    plan = decided(rt, follow_up, KeyFacts("repair:r1", attempt=last))
    assert one(plan, Decide).record.reason == "existing_work"
    # a run-now does not go ahead of a job still going
    job = occurrence("clock:repair-r1:2026-12-01T09:00:00Z", "awaiting_approval")
    again = admitted(rt, manual_tick(loop, SLOT, "t2"), "operator:alice")
    assert one(decided(rt, again, KeyFacts("repair:r1", job=job)), Decide).record.reason == (
        "existing_work"
    )


@pytest.mark.parametrize(
    ("status", "decided_at", "last_seen", "resolved"),
    [
        ("dismissed", AT, EARLIER, True),
        ("promoted", AT, EARLIER, True),
        ("dismissed", EARLIER, AT, False),  # seen again after it was resolved
        ("candidate", None, EARLIER, False),  # still open: recording it again counts it
    ],
)
def test_a_finding_resolved_and_not_seen_since_is_the_existing_work(
    status: str, decided_at: str | None, last_seen: str, resolved: bool
) -> None:
    rt = runtime()
    found = finding(status, decided_at, last_seen)
    plan = decided(rt, repair_tick(rt), KeyFacts("repair:r1", finding=found))
    if not resolved:
        assert "QueueRun" in kinds(plan) and existing_of(plan)["resolved_finding"] is None
        return
    assert_deferred(
        plan,
        "finding",
        "find-1",
        f"existing work: finding find-1 for key 'repair:r1' was {status} by operator:alice",
    )


def test_another_loop_or_an_instance_responsible_for_the_key_is_seen() -> None:
    """A job of another loop on the key (say a loop since renamed) names that loop; a
    live instance bound to the key's work item names the instance. Either way the work
    or the job is what the occurrence defers to first."""
    rt = runtime()
    job = occurrence("clock:old-repair:2026-12-01T09:00:00Z", "work_dispatched", "old-repair")
    plan = decided(rt, repair_tick(rt), KeyFacts("repair:r1", job=job))
    assert existing_of(plan)["other_loop"] == {
        "name": "old-repair",
        "kind": "loop",
        "state": None,
        "work": None,
    }
    assert one(plan, Decide).record.note.startswith(f"existing work: occurrence {job.event_id}")
    held = work("open")
    bound = WorkBinding(
        "bind-1", held.work_id, "nudge-repair", "req-1", "shadow", "operator:alice", EARLIER,
        EARLIER,
    )  # fmt: skip
    rt = runtime()
    plan = decided(rt, repair_tick(rt), KeyFacts("repair:r1", work=held, instance=bound))
    assert existing_of(plan)["other_loop"] == {
        "name": f"nudge-repair@{held.work_id}",
        "kind": "instance",
        "state": "shadow",
        "work": held.work_id,
    }
    (linked,) = [e for e in plan if isinstance(e, Journal) and e.action == "existing_work"]
    assert linked.entity == "work"  # the work item is deferred to first


def test_the_default_reads_the_checks_in_order() -> None:
    existing = view(
        "repair-r1",
        "repair:r1",
        KeyFacts(
            "repair:r1",
            work=work(),
            job=occurrence("e-1", "awaiting_approval"),
            finding=finding("dismissed", AT),
        ),
        AT,
    )
    found = deferred(TriageDecision.RUN_REPAIR_TASK, False, existing)
    assert found is not None and (found.check, found.entity) == ("work", "work")
    without_work = {**existing, "work": None}
    found = deferred(TriageDecision.RUN_REPAIR_TASK, False, without_work)
    assert found is not None and found.check == "job"
    for decision in (TriageDecision.NOTHING_TO_DO, TriageDecision.HUMAN_ATTENTION_REQUIRED):
        assert deferred(decision, False, existing) is None  # creates nothing anyway
    assert deferred(TriageDecision.RUN_REPAIR_TASK, True, existing) is None  # a rule about it
    assert deferred(TriageDecision.RUN_REPAIR_TASK, False, None) is None  # no key


# ---- a triage rule about existing work decides -----------------------------------------------


def scan_tick(rt: Runtime) -> EventRecord:
    return admitted(rt, tick(rt.rules.loops["scan"], SLOT, 0))


def test_a_triage_line_about_existing_work_overrides_the_default() -> None:
    """`run_readonly_check if existing.failed_attempt`: the author retries what failed."""
    rt = runtime()
    last = occurrence(
        "clock:scan:2026-12-01T08:00:00Z",
        "failed",
        "scan",
        failure_class="implementation_failure",
        finished_at=EARLIER,
        used={"runs": 1},
    )
    plan = decided(rt, scan_tick(rt), KeyFacts("scan:r1", attempt=last))
    assert "QueueRun" in kinds(plan)
    opened = one(plan, OpenOccurrence).record
    assert opened.decision == "run_readonly_check" and opened.evidence is not None
    assert opened.evidence["rule"] == "loops/existing.rules:23"


def test_a_triage_line_about_existing_work_may_end_it_its_own_way() -> None:
    rt = runtime()
    blocked = dataclasses.replace(work("blocked"), semantic_key="scan:r1")
    plan = decided(rt, scan_tick(rt), KeyFacts("scan:r1", work=blocked))
    record = one(plan, Decide).record
    assert (record.reason, record.note) == ("nothing_to_do", "blocked")
    assert not [e for e in plan if isinstance(e, Journal) and e.action == "existing_work"]


def test_a_triage_line_not_about_existing_work_gives_way_to_it() -> None:
    """A line that does not read `existing` decides as it always did, but what it would
    create (here the default decision, a read-only check) gives way to the work there."""
    rt = runtime()
    active = dataclasses.replace(work("active"), semantic_key="scan:r1")
    plan = decided(rt, scan_tick(rt), KeyFacts("scan:r1", work=active))
    assert one(plan, Decide).record.reason == "existing_work"


# ---- a key filled from the tick's payload ------------------------------------------------------


def review_tick(rt: Runtime, payload: dict[str, Any]) -> EventRecord:
    request = Envelope(
        eventId="pr-7",
        type="ex.merge.requested",
        source="github",
        occurredAt=SLOT,
        payload=payload,
    ).with_defaults()
    fired = one(decided(rt, admitted(rt, request, "github")), Admit)
    return admitted(rt, fired.envelope)


def test_a_key_is_filled_from_the_tick_payload() -> None:
    rt = runtime()
    event = review_tick(rt, {"repo": "r1", "pr": 7})
    with rt.store.read() as tx:
        facts = read_facts(tx, rt.rules, event, AT)
    assert facts.keyed is not None and facts.keyed.key == "pr:r1#7"
    plan = decided(rt, event)
    assert one(plan, OpenOccurrence).record.semantic_key == "pr:r1#7"


def test_a_key_the_payload_cannot_fill_waits_for_a_person() -> None:
    """A broken key never dispatches: the occurrence is decided
    human_attention_required, naming the key's line, and keeps no key."""
    rt = runtime()
    event = review_tick(rt, {"repo": "r1", "pr": ""})
    with rt.store.read() as tx:
        assert read_facts(tx, rt.rules, event, AT).keyed is None
    plan = decided(rt, event)
    record = one(plan, Decide).record
    assert (record.kind, record.reason) == ("noop", "human_attention_required")
    assert record.note == (
        "the key at loops/existing.rules:30 failed: 'payload.trigger.payload.pr' is empty:"
        " a key's placeholder needs text"
    )
    opened = one(plan, OpenOccurrence).record
    assert (opened.state, opened.semantic_key) == ("human_attention_required", None)


# ---- a batch reads a keyed loop's facts again ------------------------------------------------


def test_the_facts_of_a_keyed_loop_are_never_carried_to_its_next_event() -> None:
    """Whatever a keyed loop's plan opened may be work on its key: the batch reads the
    next event's facts afresh."""
    rt = runtime()
    event = repair_tick(rt)
    with rt.store.read() as tx:
        facts = read_facts(tx, rt.rules, event, AT)
    plan = decide(event, rt.rules, facts, rt.lifecycle, AT)
    assert carried(rt.rules, rt.rules.loops["repair-r1"], event, facts, plan) is None


# ---- a waiting retry taken up again -------------------------------------------------------------


def resumed(rt: Runtime, keyed: KeyFacts | None) -> Plan:
    """The plan for repair-r1's 10:00 occurrence, waiting for its retry, taken up again
    with `keyed` as what else is there for its key."""
    event = repair_tick(rt)
    first = queue(event, "look@1", stable_id("prop", event.event_id), "schedule", EARLIER)
    waiting = occurrence(
        event.event_id,
        "waiting_for_resource",
        attempt=1,
        retry_at=AT,
        used={"runs": 1},
        failure_class="infrastructure_failure",
    )
    with rt.store.read() as tx:
        state = tx.get_loop_state("repair-r1")
    facts = ResumeFacts(event, first.record, "look@1", state, keyed=keyed)
    return resume(waiting, rt.rules, facts, rt.lifecycle, AT)


def test_a_waiting_retry_gives_way_to_work_that_took_its_key_meanwhile() -> None:
    """A retry is new work too: a work item opened on the key while it waited ends it
    `nothing_to_do`, journaled `existing_work` on the item; with nothing there it is
    dispatched again."""
    held = work("open")
    plan = resumed(runtime(), KeyFacts("repair:r1", work=held))
    assert not [e for e in plan if isinstance(e, QueueRun)]
    (linked,) = [e for e in plan if isinstance(e, Journal) and e.action == "existing_work"]
    assert (linked.entity, linked.entity_id) == ("work", held.work_id)
    ended = [e for e in plan if isinstance(e, Transition)][-1]
    assert ended.changes["state"] == "nothing_to_do"
    assert [e for e in resumed(runtime(), KeyFacts("repair:r1")) if isinstance(e, QueueRun)]


def test_the_facts_of_a_key_are_recorded_with_the_decision_for_replay() -> None:
    """`engine replay` decides again from the facts a decision recorded: what was there
    for the key reads back as it was read; a loop without a key records nothing more."""
    keyed = KeyFacts(
        "repair:r1",
        work=work(lease_owner="controller:agent"),
        instance=WorkBinding("b-1", "work-1", "nudge", "r-1", "shadow", "op", EARLIER, EARLIER),
        job=occurrence("e-1", "awaiting_approval"),
        attempt=occurrence(
            "e-0", "failed", failure_class="implementation_failure", used={"runs": 1}
        ),
        finding=finding("dismissed", AT),
    )
    facts = Facts(keyed=keyed)
    assert decode_facts(encode_facts(facts)) == facts
    assert encode_facts(Facts()) == "{}"
