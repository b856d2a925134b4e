"""Existing work first, through the real runtime on both backends
(docs/rules.md#existing-work-first): a loop with a semantic key reads, in the planning
transaction, what is there for its key, one test per check (a live work item, a job
still going, a failed attempt, a resolved finding, another loop or instance), and with
no triage line about it creates no duplicate: a no-op `existing_work`, journaled on the
item. The tree is tests/data/existing; runs are executed by the real worker."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.bootstrap import open_service
from engine.core.envelope import Envelope, iso
from engine.core.ids import stable_id
from engine.core.records import EventRecord, FindingRecord, JournalEntry, OccurrenceRecord
from engine.core.work import WorkBinding, WorkRequest
from engine.loading import Paths
from engine.service.facts import read_facts
from engine.worker import adapters_for, work_once

ROOT = Path(__file__).resolve().parent.parent.parent
TREE = ROOT / "tests" / "data" / "existing"
SCRIPTS = ROOT / "tests" / "data" / "occurrence_engine" / "scripts"
START = datetime(2026, 12, 1, 9, 59, 59, tzinfo=UTC)
TEN = datetime(2026, 12, 1, 10, 0, 0, 500000, tzinfo=UTC)
ELEVEN = TEN + timedelta(hours=1)


class World:
    """A service on one database over tests/data/existing, with a clock the test moves."""

    def __init__(self, db: str, tmp: Path) -> None:
        self.db = db
        self.control = tmp / "control"
        self.control.mkdir(exist_ok=True)
        self.paths = Paths(TREE / "loops", TREE / "registry", TREE / "config")
        self.now = START
        self.service = open_service(self.db, self.paths, clock=lambda: self.now)
        self.service.pump()  # record enablement

    def at(self, moment: datetime) -> int:
        self.now = moment
        return self.service.pump()

    def answer(self, loop: str, outcome: str) -> None:
        (self.control / loop).write_text(outcome)

    def work(self) -> int:
        adapters = adapters_for(self.db, self.paths)
        done = 0
        while asyncio.run(work_once(self.service, "w1", 60.0, adapters)) is not None:
            done += 1
        self.service.pump()
        return done

    def occurrences(self, loop: str) -> list[OccurrenceRecord]:
        with self.service.rt.store.read() as tx:
            return sorted(
                tx.list_occurrences(1000, loop=loop), key=lambda o: (o.created_at or "", o.event_id)
            )

    def decision(self, event_id: str) -> tuple[str, str | None, str]:
        with self.service.rt.store.read() as tx:
            found = tx.get_decision(event_id)
        assert found is not None
        return found.kind, found.reason, found.note

    def journal(self, entity: str, entity_id: str, action: str) -> list[JournalEntry]:
        with self.service.rt.store.read() as tx:
            entries = tx.list_journal(100, 0, entity, entity_id)
        return [e for e in entries if e.action == action]

    def close(self) -> None:
        self.service.rt.store.close()


@pytest.fixture
def world(database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setenv("OCC_SCRIPTS", str(SCRIPTS))
    monkeypatch.setenv("OCC_CONTROL", str(tmp_path / "control"))
    made = World(database, tmp_path)
    yield made
    made.close()


def existing(occ: OccurrenceRecord) -> dict[str, Any]:
    assert occ.evidence is not None
    found: dict[str, Any] = occ.evidence["snapshot"]["existing"]
    return found


def deferred(world: World, occ: OccurrenceRecord, entity: str, entity_id: str) -> str:
    """The occurrence is a no-op `existing_work` that created nothing, journaled on the
    item it deferred to; its note."""
    kind, reason, note = world.decision(occ.event_id)
    assert (kind, reason, occ.state, occ.semantic_key) == (
        "noop",
        "existing_work",
        "nothing_to_do",
        occ.semantic_key,
    )
    (linked,) = world.journal(entity, entity_id, "existing_work")
    assert linked.note == note and linked.actor == "system"
    assert linked.data == {
        "occurrence": occ.event_id,
        "key": occ.semantic_key,
        "check": linked.data["check"],
    }
    with world.service.rt.store.read() as tx:
        assert tx.get_proposal(stable_id("prop", occ.event_id)) is None  # nothing created
    return note


# ---- the five checks ---------------------------------------------------------------------


def test_a_live_work_item_on_the_key_is_not_duplicated(world: World) -> None:
    item, _ = world.service.add_work(
        WorkRequest("repair:r1", "Repair r1", repo="r1"), "operator:alice"
    )
    world.at(TEN)
    (r1,) = world.occurrences("repair-r1")
    (r2,) = world.occurrences("repair-r2")
    assert r1.semantic_key == "repair:r1" and r2.semantic_key == "repair:r2"
    note = deferred(world, r1, "work", item.work_id)
    assert note == f"existing work: work item {item.work_id} (open) for key 'repair:r1'"
    assert existing(r1)["work"]["id"] == item.work_id
    assert existing(r1)["work"]["lease_live"] is False
    assert r2.state == "work_dispatched"  # another key: its own work


def test_a_job_still_going_on_the_key_is_not_duplicated(world: World) -> None:
    """The 10:00 occurrence's run is queued (not worked yet): the 11:00 tick defers to it."""
    world.at(TEN)
    world.at(ELEVEN)
    first, second = world.occurrences("repair-r1")
    assert first.state == "work_dispatched"
    note = deferred(world, second, "occurrence", first.event_id)
    assert note == (
        f"existing work: occurrence {first.event_id} of loop 'repair-r1' is queued for key"
        " 'repair:r1'"
    )
    with world.service.rt.store.read() as tx:
        (run,) = [r for r in tx.list_runs(10) if r.event_id == first.event_id]
    job = existing(second)["job"]
    assert (job["status"], job["run"], job["proposal"]) == ("queued", run.run_id, None)


def merge_request(event_id: str) -> Envelope:
    return Envelope(
        eventId=event_id,
        type="ex.merge.requested",
        source="github",
        subject="r1",
        occurredAt=TEN,
        payload={"repo": "r1", "pr": 7},
    )


def test_a_proposal_under_review_on_the_key_is_not_duplicated(world: World) -> None:
    """Two merge requests of one pull request: each is an occurrence of its own (their
    own windows), but the second finds the first's proposal under review."""
    world.now = TEN
    world.service.admit(merge_request("pr-1"), "github")
    world.service.pump()
    world.service.admit(merge_request("pr-2"), "github")
    world.service.pump()
    first, second = world.occurrences("review")
    assert first.state == "awaiting_approval" and first.semantic_key == "pr:r1#7"
    deferred(world, second, "occurrence", first.event_id)
    assert existing(second)["job"]["proposal"] == stable_id("prop", first.event_id)
    assert existing(second)["job"]["status"] == "under_review"


def test_a_failed_attempt_waits_for_an_explicit_retry(world: World) -> None:
    """A run that failed (implementation_failure) is not tried again by the next slot;
    an operator's run-now is the explicit retry, and runs."""
    world.answer("repair-r1", "FAILED")
    world.at(TEN)
    assert world.work() == 3  # repair-r1, repair-r2 and scan
    world.at(ELEVEN)
    failed, second = world.occurrences("repair-r1")
    assert (failed.state, failed.failure_class) == ("failed", "implementation_failure")
    note = deferred(world, second, "occurrence", failed.event_id)
    assert "it waits for an explicit retry" in note
    assert existing(second)["failed_attempt"]["failure_class"] == "implementation_failure"
    world.answer("repair-r1", "OK")
    admission = world.service.trigger("repair-r1", "operator:alice")
    world.service.pump()
    retried = [o for o in world.occurrences("repair-r1") if o.event_id == admission.eventId]
    assert retried[0].state == "work_dispatched"
    world.work()
    world.at(ELEVEN + timedelta(hours=1))  # the retry succeeded: the next slot runs
    assert world.occurrences("repair-r1")[-1].state == "work_dispatched"


def test_a_finding_resolved_since_it_was_last_seen_is_the_existing_work(world: World) -> None:
    with world.service.rt.store.write() as tx:
        tx.upsert_finding(
            FindingRecord(
                finding_id="find-1",
                semantic_key="repair:r1",
                loop="repair-r1",
                repo="r1",
                category="flaky",
                evidence=None,
                confidence=None,
                recommended_action=None,
                status="candidate",
                occurrence_count=1,
                first_seen_at=iso(START - timedelta(days=1)),
                last_seen_at=iso(START - timedelta(days=1)),
                last_occurrence=None,
            )
        )
    world.service.dismiss("find-1", "operator:alice", "not flaky: the test was wrong")
    world.at(TEN)
    (r1,) = world.occurrences("repair-r1")
    note = deferred(world, r1, "finding", "find-1")
    assert (
        note == "existing work: finding find-1 for key 'repair:r1' was dismissed by operator:alice"
    )


def test_another_loop_or_an_instance_on_the_key_is_read(world: World) -> None:
    """What the store holds for the key, as the planning transaction reads it: the live
    work item and a live instance bound to it, a job of another loop (a loop since
    renamed), read for the event being decided and never its own occurrence."""
    world.now = TEN
    item, _ = world.service.add_work(WorkRequest("repair:r1", "Repair r1"), "operator:alice")
    at = iso(START)
    with world.service.rt.store.write() as tx:
        tx.insert_binding(
            WorkBinding(
                "bind-1", item.work_id, "nudge", "req-1", "shadow", "operator:alice", at, at
            )
        )
        tx.insert_binding(
            WorkBinding(
                "bind-2", item.work_id, "gone", "req-2", "disabled", "operator:alice", at, at
            )
        )
        old = EventRecord(
            "clock:old-repair:x", "ex.repair", "schedule", "old-repair", at, "clock:old-repair:x",
            {"repo": "r1"}, "old-repair", at, "schedule", True,
        )  # fmt: skip
        tx.insert_event(old)
        tx.open_occurrence(
            OccurrenceRecord(
                old.event_id,
                "old-repair",
                "awaiting_approval",
                at,
                "old-repair|r1|x",
                "r1",
                created_at=at,
                semantic_key="repair:r1",
            )
        )
    tick = EventRecord(
        "clock:repair-r1:2026-12-01T10:00:00Z", "ex.repair", "schedule", "repair-r1", at,
        "clock:repair-r1:2026-12-01T10:00:00Z", {"repo": "r1", "loop": "repair-r1"},
        "repair-r1", at, "schedule",
    )  # fmt: skip
    with world.service.rt.store.write() as tx:  # the tick's own occurrence, older still
        tx.insert_event(tick)
        before = iso(START - timedelta(minutes=5))
        tx.open_occurrence(
            OccurrenceRecord(
                tick.event_id,
                "repair-r1",
                "triaging",
                before,
                "repair-r1|r1|t",
                "r1",
                created_at=before,
                semantic_key="repair:r1",
            )
        )
    with world.service.rt.store.read() as tx:
        keyed = read_facts(tx, world.service.rt.rules, tick, iso(TEN)).keyed
    assert keyed is not None and keyed.key == "repair:r1"
    assert keyed.work is not None and keyed.work.work_id == item.work_id
    assert keyed.instance is not None and keyed.instance.binding_id == "bind-1"
    assert keyed.job is not None and keyed.job.loop == "old-repair"  # never its own
    assert (keyed.attempt, keyed.finding) == (None, None)
