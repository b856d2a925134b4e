"""The schedule service (view, pause/resume, run-now, backfill, slot history, doctor)
on a real SQLite file with an injected clock, over tests/data/scheduling."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.bootstrap import open_service
from engine.core.envelope import Envelope
from engine.core.ruleset import OnActive
from engine.errors import BadRequest, Conflict, NotFound
from engine.loading import Paths
from engine.service import Service
from engine.service.schedules import overlap_view

TREE = Path(__file__).resolve().parents[1] / "data" / "scheduling"
PATHS = Paths(TREE / "loops", TREE / "registry", TREE / "config")
ALICE = "operator:alice"


class Clock:
    def __init__(self) -> None:
        self.now = at("2026-11-30T00:59:59")

    def __call__(self) -> datetime:
        return self.now


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def service(tmp_path: Path, clock: Clock) -> Iterator[Service]:
    """A started runtime (its first pass at 00:59:59 enables every loop)."""
    engine = open_service(str(tmp_path / "e.db"), PATHS, clock=clock)
    engine.pump()
    yield engine
    engine.rt.store.close()


def run_until(service: Service, clock: Clock, *moments: str) -> None:
    """A serve that runs a pass at each moment."""
    for moment in moments:
        clock.now = at(moment)
        service.pump()


def view(service: Service, loop: str) -> dict[str, Any]:
    return next(e for e in service.schedules() if e["name"] == loop)


def covering(rows: list[dict[str, Any]], slot: str) -> dict[str, Any]:
    """The slot-history row that accounts for `slot`."""
    return next(r for r in rows if r["slot"] <= slot <= r["lastSlot"])


def test_view_describes_an_interval_loop(service: Service, clock: Clock) -> None:
    """An enabled interval loop shows its policy, origin, last slot and next five fires."""
    run_until(service, clock, "2026-11-30T01:00:01")
    entry = view(service, "hourly")
    assert (entry["enabled"], entry["paused"], entry["approval"]) == (True, False, "watched")
    assert entry["trigger"] == {"kind": "interval", "describe": "every 1h"}
    assert (entry["cadenceSeconds"], entry["source"], entry["singleton"]) == (3600, "kernel", True)
    assert entry["overlap"] == {"value": "skip", "max": None}
    assert entry["catchUp"] == {"policy": "none", "cap": None, "maxLatenessSeconds": None}
    assert entry["origin"].endswith("loops.rules:3")
    assert entry["lastSlot"] == "2026-11-30T01:00:00Z"
    assert entry["lastEventId"] == "clock:hourly:2026-11-30T01:00:00Z"
    assert (entry["lastDecision"], entry["lastOutcome"], entry["openProposals"]) == (
        "propose",
        None,
        1,
    )
    assert entry["nextDue"] == "2026-11-30T02:00:00Z"
    assert entry["nextFires"] == [f"2026-11-30T{h:02}:00:00Z" for h in range(2, 7)]


def test_view_of_cron_manual_host_and_disabled_loops(service: Service) -> None:
    """Cron shows its slot gap; manual and host-clock loops have no slots; a disabled
    loop has no next slot due; an overlay override is named."""
    nightly = view(service, "nightly")
    assert (nightly["cadenceSeconds"], nightly["nextDue"]) == (86400, "2026-11-30T03:00:00Z")
    assert nightly["nextFires"][:2] == ["2026-11-30T03:00:00Z", "2026-12-01T03:00:00Z"]
    for name, kind in (("on-demand", "manual"), ("host", "host")):
        entry = view(service, name)
        assert (entry["trigger"]["kind"], entry["nextDue"], entry["nextFires"]) == (kind, None, [])
    assert view(service, "host")["cadenceSeconds"] == 3600
    idle = view(service, "idle")
    assert (idle["enabled"], idle["nextDue"], idle["overridden"]) == (False, None, ["enabled"])
    assert idle["overlayOrigin"] is not None and idle["source"] == "kernel"


def test_pause_records_skips_with_reason_paused_and_admits_no_tick(
    service: Service, clock: Clock
) -> None:
    """While paused, every due slot is recorded as skipped (paused) and nothing fires;
    the journal names the operator and the note."""
    entry = service.pause("hourly", ALICE, "database migration")
    assert (entry["paused"], entry["pausedBy"], entry["pauseNote"]) == (
        True,
        ALICE,
        "database migration",
    )
    run_until(service, clock, "2026-11-30T01:00:01", "2026-11-30T02:00:01", "2026-11-30T03:00:01")
    assert [e for e in service.events(type="test.tick") if e.loop == "hourly"] == []
    rows = service.slots("hourly", at("2026-11-30T00:00:00"))
    assert {(r["status"], r["reason"]) for r in rows} == {("skipped", "paused")}
    assert sum(r["count"] for r in rows) == 3
    paused = service.journal(entity="loop", entity_id="hourly")[-1]
    assert (paused.action, paused.actor, paused.note) == ("paused", ALICE, "database migration")


def test_pause_refusals(service: Service) -> None:
    """Pausing an unknown loop is NotFound with a hint; pausing twice and resuming a
    running loop are conflicts; a pause needs a note."""
    with pytest.raises(NotFound, match="did you mean 'hourly'"):
        service.pause("houryl", ALICE, "x")
    with pytest.raises(BadRequest):
        service.pause("hourly", ALICE, "  ")
    service.pause("hourly", ALICE, "first")
    with pytest.raises(Conflict, match="already paused"):
        service.pause("hourly", ALICE, "second")
    with pytest.raises(Conflict, match="not paused"):
        service.resume("nightly", ALICE)


def test_resume_fires_the_next_slot_without_replaying_paused_ones(
    service: Service, clock: Clock
) -> None:
    """After a resume the next slot fires; the slots skipped while paused never do."""
    service.pause("hourly", ALICE, "quiet hours")
    run_until(service, clock, "2026-11-30T01:00:01", "2026-11-30T02:00:01")
    entry = service.resume("hourly", "operator:bob", "done")
    assert (entry["paused"], entry["nextDue"]) == (False, "2026-11-30T03:00:00Z")
    run_until(service, clock, "2026-11-30T03:00:01")
    fired = [r["slot"] for r in service.slots("hourly", at("2026-11-30T00:00:00"))]
    assert fired == ["2026-11-30T01:00:00Z", "2026-11-30T02:00:00Z", "2026-11-30T03:00:00Z"]
    assert view(service, "hourly")["lastSlot"] == "2026-11-30T03:00:00Z"
    resumed = service.journal(entity="loop", entity_id="hourly")[-1]
    assert (resumed.action, resumed.actor, resumed.note) == ("resumed", "operator:bob", "done")


def test_trigger_admits_a_manual_event_that_never_takes_a_slot(
    service: Service, clock: Clock
) -> None:
    """Run-now admits manual:<loop>:<id> as the operator; the scheduled slot still fires."""
    clock.now = at("2026-11-30T00:30:00")
    first = service.trigger("hourly", ALICE)
    second = service.trigger("on-demand", ALICE)
    assert first.admitted and first.eventId.startswith("manual:hourly:")
    assert second.eventId.startswith("manual:on-demand:") and second.eventId != first.eventId
    event = service.event(first.eventId)["event"]
    assert (event.source, event.admitted_by, event.loop) == ("manual", ALICE, "hourly")
    run_until(service, clock, "2026-11-30T01:00:01")
    assert service.event("clock:hourly:2026-11-30T01:00:00Z")["event"].admitted_by == "schedule"
    service.pause("on-demand", ALICE, "hold")
    with pytest.raises(Conflict, match="paused"):
        service.trigger("on-demand", ALICE)


def test_backfill_admits_missing_slots_once(service: Service, clock: Clock) -> None:
    """Backfill admits a range through the same dedup: fired slots stay as they are,
    and a second backfill admits nothing."""
    run_until(service, clock, "2026-11-30T01:00:01", "2026-11-30T02:00:01")
    start, end = at("2026-11-29T22:00:00"), at("2026-11-30T02:00:00")
    done = service.backfill("piled", start, end, ALICE)
    assert (done["slots"], done["admitted"], done["alreadyAdmitted"]) == (5, 3, 2)
    assert (done["first"], done["last"]) == ("2026-11-29T22:00:00Z", "2026-11-30T02:00:00Z")
    event = service.event("clock:piled:2026-11-29T23:00:00Z")["event"]
    assert (event.source, event.admitted_by) == ("schedule", ALICE)
    assert service.event("clock:piled:2026-11-30T01:00:00Z")["event"].admitted_by == "schedule"
    again = service.backfill("piled", start, end, ALICE)
    assert (again["admitted"], again["alreadyAdmitted"]) == (0, 5)


def test_backfill_refusals(service: Service, clock: Clock) -> None:
    """Backfill refuses a range over its limit, a loop without slots, and the future."""
    clock.now = at("2026-12-30T00:00:00")
    with pytest.raises(BadRequest, match="more than 100 slots"):
        service.backfill("hourly", at("2026-11-01T00:00:00"), clock.now, ALICE, limit=100)
    for loop in ("on-demand", "host"):
        with pytest.raises(BadRequest, match="never fires it"):
            service.backfill(loop, at("2026-11-30T00:00:00"), clock.now, ALICE)
    with pytest.raises(BadRequest, match="future"):
        service.backfill("hourly", at("2026-12-29T00:00:00"), at("2027-01-01T00:00:00"), ALICE)
    with pytest.raises(Conflict, match="disabled"):
        service.backfill("idle", at("2026-12-29T00:00:00"), clock.now, ALICE)


def test_slot_history_answers_why_three_oclock_did_not_fire(service: Service, clock: Clock) -> None:
    """A serve down from 01:30 to 05:00 leaves 03:00 in a catchup_none skip range; a
    slot due while serve is down is pending, not yet accounted for."""
    run_until(service, clock, "2026-11-30T01:00:01")
    clock.now = at("2026-11-30T03:30:00")  # serve down: nothing has accounted for 02, 03
    pending = covering(service.slots("hourly", at("2026-11-30T00:00:00")), "2026-11-30T03:00:00Z")
    assert (pending["status"], pending["reason"], pending["count"]) == (
        "pending",
        "not_yet_accounted",
        2,
    )
    run_until(service, clock, "2026-11-30T05:00:01")
    rows = service.slots("hourly", at("2026-11-30T00:00:00"))
    why = covering(rows, "2026-11-30T03:00:00Z")
    assert (why["status"], why["reason"], why["slot"], why["lastSlot"], why["count"]) == (
        "skipped",
        "catchup_none",
        "2026-11-30T02:00:00Z",
        "2026-11-30T04:00:00Z",
        3,
    )
    fired = covering(rows, "2026-11-30T05:00:00Z")
    assert (fired["status"], fired["decision"]) == ("fired", "propose")


def test_doctor_is_ok_while_the_clocks_turn(service: Service, clock: Clock) -> None:
    """Right after a pass, with the host loop recently enabled, there is no anomaly."""
    run_until(service, clock, "2026-11-30T01:00:01")
    report = service.doctor()
    assert (report["ok"], report["anomalies"], report["stoppedSchedules"]) == (True, [], [])


def test_doctor_reports_a_stopped_clock_after_two_missed_slots(
    service: Service, clock: Clock
) -> None:
    """With serve down, an interval loop is stopped once two slots passed without a tick
    (a minute's grace), and a host-clock loop once two intervals passed with no emit."""
    run_until(service, clock, "2026-11-30T01:00:01")
    clock.now = at("2026-11-30T03:00:30")
    assert "hourly" not in {s["loop"] for s in service.doctor()["stoppedSchedules"]}
    clock.now = at("2026-11-30T03:01:01")
    report = service.doctor()
    stopped = {s["loop"]: s for s in report["stoppedSchedules"]}
    assert set(stopped) == {"hourly", "piled", "host"}  # nightly waits for its 2nd slot
    assert (stopped["hourly"]["lastTick"], stopped["hourly"]["missedSlots"]) == (
        "2026-11-30T01:00:00Z",
        2,
    )
    assert not report["ok"] and {a["kind"] for a in report["anomalies"]} == {"stopped_schedule"}


def test_doctor_counts_a_host_clock_emit_as_a_tick(service: Service, clock: Clock) -> None:
    """A host-clock loop's event admitted by its timer (`engine emit`) keeps it running."""
    clock.now = at("2026-11-30T02:30:00")
    payload = {"loop": "host", "slot": "2026-11-30T02:00:00Z", "cadenceSeconds": 3600}
    emitted = Envelope(  # what `engine emit --loop host --every 1h` posts at 02:30
        eventId="bridge:host:2026-11-30T02:00:00Z",
        type="test.tick",
        source="bridge",
        occurredAt=clock.now,
        payload={**payload, "skippedSlots": 0},
    )
    service.admit(emitted, "bridge")
    clock.now = at("2026-11-30T03:30:00")
    assert "host" not in {s["loop"] for s in service.doctor()["stoppedSchedules"]}
    clock.now = at("2026-11-30T05:00:00")
    assert "host" in {s["loop"] for s in service.doctor()["stoppedSchedules"]}


def test_doctor_reports_a_proposal_pileup_and_superseded_counts(
    service: Service, clock: Clock
) -> None:
    """A watched `all` loop with more than N open proposals piles up; under `none` a
    newer slot supersedes the older proposal, reported as information."""
    hours = [f"2026-11-30T{h:02}:00:01" for h in range(1, 5)]
    run_until(service, clock, *hours)
    report = service.doctor()
    assert [(p["loop"], p["open"], p["limit"]) for p in report["proposalPileups"]] == [
        ("piled", 4, 3)
    ]
    assert report["supersededProposals"]["hourly"] == 3
    assert not report["ok"]
    assert service.doctor(pileup=4)["proposalPileups"] == []


def test_doctor_lists_a_paused_loop_instead_of_a_stopped_one(
    service: Service, clock: Clock
) -> None:
    """A paused loop is information, not a stopped clock; after a resume it is counted
    from the last slot the pause skipped."""
    service.pause("hourly", ALICE, "hold")
    run_until(service, clock, *(f"2026-11-30T{h:02}:00:01" for h in range(1, 6)))
    report = service.doctor()
    assert report["pausedSchedules"] == [{"loop": "hourly", "by": ALICE}]
    assert "hourly" not in {s["loop"] for s in report["stoppedSchedules"]}
    service.resume("hourly", ALICE)
    clock.now += timedelta(minutes=30)
    assert "hourly" not in {s["loop"] for s in service.doctor()["stoppedSchedules"]}


@pytest.mark.parametrize(
    ("singleton", "on_active", "active", "shown"),
    [
        (True, OnActive.RETURN, None, {"value": "skip", "max": None}),
        (True, OnActive.COALESCE, None, {"value": "buffer_one", "max": None}),
        (False, OnActive.RETURN, None, {"value": "allow", "max": None}),
        (False, OnActive.RETURN, 2, {"value": "allow", "max": 2}),
        # `overlapping` with `on-active coalesce`: an old combination no value means
        (False, OnActive.COALESCE, 2, {"value": None, "max": None}),
    ],
)
def test_a_schedule_shows_the_loops_one_overlap_setting(
    service: Service, singleton: bool, on_active: OnActive, active: int | None, shown: object
) -> None:
    """The schedule's `overlap` is the loop's setting as a rule line writes it, whichever
    spelling compiled it; `singleton` stays beside it, the run level, for older clients."""
    loop = service.rt.rules.loops["hourly"]
    budget = replace(loop.policy.budget, active_occurrences=active)
    changed = replace(
        loop, singleton=singleton, on_active=on_active, policy=replace(loop.policy, budget=budget)
    )
    assert overlap_view(changed) == shown
