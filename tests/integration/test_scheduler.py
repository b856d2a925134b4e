"""The scheduler through the service on a real SQLite file, with an injected clock:
restarts, two processes, catch-up, enablement and the open-proposal policy."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.bootstrap import open_service
from engine.loading import Paths
from engine.service import Service

TREE = Path(__file__).resolve().parents[1] / "data" / "scheduler"
PATHS = Paths(TREE / "loops", TREE / "registry", TREE / "config")


class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def at(self, text: str) -> None:
        self.now = datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def clock() -> Clock:
    return Clock(datetime(2026, 11, 30, 9, 59, 59, tzinfo=UTC))


@pytest.fixture
def open_engine(tmp_path: Path, clock: Clock) -> Iterator[Callable[[], Service]]:
    """Opens a Service on one database file; each call is a fresh process's service."""
    opened: list[Service] = []

    def factory() -> Service:
        service = open_service(str(tmp_path / "e.db"), PATHS, clock=clock)
        opened.append(service)
        return service

    yield factory
    for service in opened:
        service.rt.store.close()


def ticks(db: Path, loop: str) -> list[tuple[str, int]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT json_extract(payload, '$.slot'), json_extract(payload, '$.skippedSlots') "
            "FROM events WHERE loop = ? ORDER BY occurred_at",
            (loop,),
        ).fetchall()
    return [(str(slot), int(skipped)) for slot, skipped in rows]


def test_restarts_within_an_interval_admit_one_tick(
    open_engine: Callable[[], Service], clock: Clock, tmp_path: Path
) -> None:
    """Three restarts inside one hour fire the 10:00 slot once."""
    open_engine().pump()  # 09:59:59: enabled now, nothing due yet
    for moment in ("2026-11-30T10:00:01", "2026-11-30T10:20:00", "2026-11-30T10:40:00"):
        clock.at(moment)
        open_engine().pump()  # a fresh service: a restarted serve
    assert ticks(tmp_path / "e.db", "hourly") == [("2026-11-30T10:00:00Z", 0)]


def test_two_processes_converge_on_one_run_per_slot(
    open_engine: Callable[[], Service], clock: Clock, tmp_path: Path
) -> None:
    """Two services on one file firing the same slot admit it once and queue one run."""
    first, second = open_engine(), open_engine()
    first.pump()
    second.pump()
    clock.at("2026-11-30T10:00:02")
    first.pump()
    second.pump()
    assert ticks(tmp_path / "e.db", "hourly-auto") == [("2026-11-30T10:00:00Z", 0)]
    runs = first.runs(state=None)
    assert [r.loop for r in runs] == ["hourly-auto"]
    assert runs[0].approved_by == "schedule"


def test_six_missed_slots_fire_once_with_five_skipped(
    open_engine: Callable[[], Service], clock: Clock, tmp_path: Path
) -> None:
    """After a night asleep, `none` fires the newest slot carrying the five it skipped."""
    open_engine().pump()
    clock.at("2026-11-30T10:00:01")
    open_engine().pump()
    clock.at("2026-11-30T16:00:05")  # slots 11..16 are due: six
    service = open_engine()
    service.pump()
    assert ticks(tmp_path / "e.db", "hourly")[-1] == ("2026-11-30T16:00:00Z", 5)
    with service.rt.store.read() as tx:
        skips = tx.list_skips("hourly", "2026-11-30T00:00:00Z")
    assert [(s.first_slot, s.last_slot, s.count, s.reason) for s in skips] == [
        ("2026-11-30T11:00:00Z", "2026-11-30T15:00:00Z", 5, "catchup_none")
    ]


def test_slots_too_late_to_fire_are_counted_as_skipped(
    open_engine: Callable[[], Service],
    clock: Clock,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Slots later than max-lateness did not fire before the tick that fires: its
    skippedSlots and serve's log line count them with the catch-up skips."""
    open_engine().pump()
    clock.at("2026-11-30T10:00:01")
    open_engine().pump()
    clock.at("2026-11-30T16:00:05")  # slots 11..16 are due; 11..14 are over 2 h late
    with caplog.at_level(logging.INFO, logger="engine.scheduler"):
        open_engine().pump()
    assert ticks(tmp_path / "e.db", "late")[-1] == ("2026-11-30T16:00:00Z", 5)
    assert (
        "loop late: fired 2026-11-30T16:00:00Z, skipped 5 older slot(s) "
        "(4 too_late, 1 catchup_none)" in caplog.messages
    )


def test_a_newer_slot_supersedes_the_older_open_proposal(
    open_engine: Callable[[], Service], clock: Clock
) -> None:
    """An unapproved proposal does not silence a watched loop: the next slot's proposal
    supersedes it, recorded with actor system."""
    service = open_engine()
    service.pump()
    for hour in (10, 11):
        clock.at(f"2026-11-30T{hour}:00:01")
        service.pump()
    hourly = [p for p in service.proposals(state=None) if p.loop == "hourly"]
    states = {p.event_id.split("T")[1][:2]: (p.state, p.decided_by) for p in hourly}
    assert states == {"10": ("superseded", "system"), "11": ("open", None)}


def test_a_disabled_loop_never_ticks(
    open_engine: Callable[[], Service], clock: Clock, tmp_path: Path
) -> None:
    """A loop the rules disable admits nothing, however long the clock runs."""
    service = open_engine()
    service.pump()
    clock.now += timedelta(hours=5)
    service.pump()
    assert ticks(tmp_path / "e.db", "off") == []


def test_cron_loop_fires_at_its_local_time(
    open_engine: Callable[[], Service], clock: Clock, tmp_path: Path
) -> None:
    """A cron loop in Europe/Budapest fires 02:30 local as 01:30 UTC in winter."""
    service = open_engine()
    service.pump()
    clock.at("2026-12-01T01:30:02")
    service.pump()
    assert ticks(tmp_path / "e.db", "nightly") == [("2026-12-01T01:30:00Z", 0)]


def test_pause_records_skips_and_resume_does_not_replay(
    open_engine: Callable[[], Service], clock: Clock, tmp_path: Path
) -> None:
    """Slots due while paused are recorded as skipped (reason paused) and never replayed."""
    service = open_engine()
    service.pump()
    with service.rt.store.write() as tx:
        tx.set_paused("hourly", True, "maintenance", "operator:alice", service.rt.now())
    clock.at("2026-11-30T12:00:01")
    service.pump()
    with service.rt.store.write() as tx:
        tx.set_paused("hourly", False, "", "operator:alice", service.rt.now())
    clock.at("2026-11-30T13:00:01")
    service.pump()
    assert ticks(tmp_path / "e.db", "hourly") == [("2026-11-30T13:00:00Z", 0)]
    with service.rt.store.read() as tx:
        reasons = {s.reason for s in tx.list_skips("hourly", "2026-11-30T00:00:00Z")}
    assert reasons == {"paused"}


def test_a_proposal_stays_approvable_after_its_loop_earns_auto(
    tmp_path: Path, clock: Clock
) -> None:
    """A proposal opened under watched rules can still be approved after a reviewed
    change makes the loop `approval auto` and the runtime restarts."""
    import shutil

    tree = tmp_path / "tree"
    shutil.copytree(TREE, tree)
    paths = Paths(tree / "loops", tree / "registry", tree / "config")
    db = str(tmp_path / "e.db")
    before = open_service(db, paths, clock=clock)
    before.pump()
    clock.at("2026-11-30T10:00:01")
    before.pump()
    (proposal,) = [p for p in before.proposals() if p.loop == "hourly"]
    before.rt.store.close()
    rules = tree / "loops" / "loops.rules"
    rules.write_text(
        rules.read_text().replace(
            "emit test.tick\n  approval watched", "emit test.tick\n  approval auto", 1
        )
    )
    after = open_service(db, paths, clock=clock)
    approved, run = after.approve(proposal.proposal_id, "operator:alice")
    assert (approved.state, run.approved_by) == ("approved", "operator:alice")
    after.rt.store.close()


def test_serve_recovers_an_expired_lease_without_the_reaper(
    open_engine: Callable[[], Service], clock: Clock
) -> None:
    """The runtime loop itself requeues a read-only run whose worker vanished."""
    service = open_engine()
    service.pump()
    clock.at("2026-11-30T10:00:01")
    service.pump()
    claimed = service.claim("gone-worker", lease_seconds=5)
    assert claimed is not None and claimed.loop == "hourly-auto"
    clock.at("2026-11-30T10:01:00")
    service.pump()
    assert service.run(claimed.run_id).state == "queued"
