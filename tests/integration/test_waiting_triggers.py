"""The triggers that wait for something, through the real runtime on both backends
(docs/scheduling.md, "Triggers that wait"): `after LOOP` fires once per concluded
upstream occurrence, also when the upstream concluded while serve was down; `on_event
TYPE` folds the events of one fact into one occurrence. The tree is tests/data/waiting;
runs are executed by the real worker through the command adapter."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.bootstrap import open_service
from engine.core.envelope import Envelope
from engine.core.records import OccurrenceRecord
from engine.loading import Paths
from engine.service import Service
from engine.worker import adapters_for, work_once

ROOT = Path(__file__).resolve().parent.parent.parent
TREE = ROOT / "tests" / "data" / "waiting"
SCRIPTS = ROOT / "tests" / "data" / "occurrence_engine" / "scripts"
START = datetime(2026, 12, 1, 9, 59, 59, tzinfo=UTC)
TEN = datetime(2026, 12, 1, 10, 0, 0, 500000, tzinfo=UTC)


class World:
    """Services on one database over tests/data/waiting, with a clock the test moves."""

    def __init__(self, db: str, tmp: Path) -> None:
        self.db = db
        self.control = tmp / "control"
        self.control.mkdir(exist_ok=True)
        self.paths = Paths(TREE / "loops", TREE / "registry", TREE / "config")
        self.now = START
        self.opened: list[Service] = []
        self.service = self.open()
        self.service.pump()  # record enablement

    def open(self) -> Service:
        service = open_service(self.db, self.paths, clock=lambda: self.now)
        self.opened.append(service)
        return service

    def at(self, moment: datetime) -> int:
        self.now = moment
        return self.service.pump()

    def answer(self, loop: str, outcome: str) -> None:
        (self.control / loop).write_text(outcome)

    def work(self, service: Service | None = None, pump: bool = True) -> int:
        """Run every queued run with the real worker (pumping between, unless told not
        to: a worker alone, with no serve); how many ran."""
        service = service or self.service
        adapters = adapters_for(self.db, self.paths)
        done = 0
        while True:
            ran = 0
            while asyncio.run(work_once(service, "w1", 60.0, adapters)) is not None:
                ran += 1
            if pump:
                service.pump()
            done += ran
            if not ran or not pump:
                return done

    def occurrences(self, loop: str) -> list[OccurrenceRecord]:
        with self.service.rt.store.read() as tx:
            return sorted(tx.list_occurrences(1000, loop=loop), key=lambda o: o.created_at or "")

    def payload(self, event_id: str) -> dict[str, Any]:
        with self.service.rt.store.read() as tx:
            event = tx.get_event(event_id)
        assert event is not None
        return event.payload

    def decision(self, event_id: str) -> tuple[str, str | None]:
        with self.service.rt.store.read() as tx:
            found = tx.get_decision(event_id)
        assert found is not None
        return found.kind, found.reason

    def close(self) -> None:
        for service in self.opened:
            service.rt.store.close()


@pytest.fixture
def world(database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setenv("OCC_SCRIPTS", str(SCRIPTS))
    monkeypatch.setenv("OCC_CONTROL", str(tmp_path / "control"))
    made = World(database, tmp_path)
    yield made
    made.close()


def merge_request(event_id: str, repo: str, prs: list[int]) -> Envelope:
    return Envelope(
        eventId=event_id,
        type="wait.merge.requested",
        source="github",
        subject=repo,
        occurredAt=TEN,
        payload={"repo": repo, "prNumbers": prs},
    )


# ---- after ------------------------------------------------------------------------------


def test_an_upstream_conclusion_fires_each_dependent_once(world: World) -> None:
    """A nightly run that answers OK concludes its occurrence: `after nightly outcome
    OK` and `after nightly` each get exactly one occurrence, whose window is the
    upstream's identity and whose payload carries the upstream's state, outcome and
    ids; working and pumping again fires nothing more."""
    world.at(TEN)
    world.work()
    (upstream,) = world.occurrences("nightly")
    assert upstream.state == "completed"
    (ok,) = world.occurrences("after-ok")
    (any_,) = world.occurrences("after-any")
    for occ in (ok, any_):
        assert occ.window == f"after:{upstream.event_id}"
        carried = world.payload(occ.event_id)["upstream"]
        assert carried["occurrence"] == upstream.event_id
        assert (carried["loop"], carried["state"], carried["outcome"]) == (
            "nightly",
            "completed",
            "OK",
        )
        assert carried["run"] and carried["run"].startswith("run-")
    assert ok.state == "completed"  # approval auto: it ran
    assert any_.state == "awaiting_approval"  # watched: a proposal
    assert world.service.schedule("after-ok")["lastCause"] == {
        "kind": "upstream",
        "loop": "nightly",
        "occurrence": upstream.event_id,
        "state": "completed",
        "outcome": "OK",
        "window": f"after:{upstream.event_id}",
    }
    world.work()
    world.at(TEN + timedelta(minutes=5))
    assert len(world.occurrences("after-ok")) == len(world.occurrences("after-any")) == 1


def test_a_filter_on_the_outcome_holds(world: World) -> None:
    """An upstream that fails fires `after nightly` (no filter), carrying state failed
    and outcome FAILED, and never `after nightly outcome OK`."""
    world.answer("nightly", "FAILED")
    world.at(TEN)
    world.work()
    (upstream,) = world.occurrences("nightly")
    assert upstream.state == "failed"
    assert world.occurrences("after-ok") == []
    (any_,) = world.occurrences("after-any")
    carried = world.payload(any_.event_id)["upstream"]
    assert (carried["state"], carried["outcome"]) == ("failed", "FAILED")


def test_an_upstream_that_concludes_while_serve_is_down_fires_once(world: World) -> None:
    """Serve plans the nightly run and stops; a worker alone (no serve) runs it, and the
    conclusion admits the downstream ticks in its own commit; a serve started later
    plans each of them once, and a second start plans nothing new."""
    world.at(TEN)
    world.service.rt.store.close()
    world.opened.remove(world.service)
    worker = world.open()
    assert world.work(worker, pump=False) == 1
    with worker.rt.store.read() as tx:
        waiting = [e for e in tx.list_events(100) if e.source == "after"]
    assert sorted(e.loop or "" for e in waiting) == ["after-any", "after-ok"]
    worker.rt.store.close()
    world.opened.remove(worker)
    world.service = world.open()  # serve comes back
    world.at(TEN + timedelta(minutes=1))
    assert [o.state for o in world.occurrences("after-ok")] == ["work_dispatched"]
    assert [o.state for o in world.occurrences("after-any")] == ["awaiting_approval"]
    world.service.rt.store.close()
    world.opened.remove(world.service)
    world.service = world.open()
    world.at(TEN + timedelta(minutes=2))
    assert len(world.occurrences("after-ok")) == len(world.occurrences("after-any")) == 1


# ---- on_event ---------------------------------------------------------------------------


def test_two_events_of_one_fact_make_one_occurrence(world: World) -> None:
    """Two different events asking to merge PR 7 of r1 open one `review` occurrence
    (the second is decided duplicate_occurrence on it); PR 8 opens its own; an event
    for another repository fails the guard and a redelivery is a duplicate admission:
    neither fires anything."""
    for event_id, repo, prs in (
        ("pr-7-opened", "r1", [7]),
        ("pr-7-synchronized", "r1", [7]),
        ("pr-8-opened", "r1", [8]),
        ("other-repo", "r2", [7]),
    ):
        world.service.admit(merge_request(event_id, repo, prs), "github")
    assert world.service.admit(merge_request("pr-7-opened", "r1", [7]), "github").duplicate
    world.at(TEN)
    reviews = world.occurrences("review")
    assert sorted(o.window or "" for o in reviews) == ['["r1",[7]]', '["r1",[8]]']
    assert world.decision("on:review:pr-7-synchronized") == ("noop", "duplicate_occurrence")
    first = world.payload("on:review:pr-7-opened")
    assert first["repo"] == "r1"
    assert first["trigger"]["eventId"] == "pr-7-opened"
    assert first["trigger"]["payload"] == {"repo": "r1", "prNumbers": [7]}
    shown = world.service.schedule("review")
    assert shown["trigger"] == {
        "kind": "event",
        "describe": "on_event wait.merge.requested (guarded)",
    }
    assert shown["lastCause"] is not None and shown["lastCause"]["type"] == "wait.merge.requested"
    world.work()
    assert [o.state for o in world.occurrences("review")] == ["completed", "completed"]
    assert len(world.occurrences("review")) == 2


def test_a_tick_from_outside_claiming_a_waiting_source_follows_its_route(world: World) -> None:
    """An envelope posted as `source: on_event` naming loop `review` is no tick of it:
    admitted by the bridge, it has no loop, and its route (watched) proposes instead of
    the loop's approval auto running it."""
    forged = Envelope(
        eventId="on:review:forged",
        type="wait.review",
        source="on_event",
        subject="review",
        occurredAt=TEN,
        payload={"loop": "review", "window": "forged", "trigger": {}},
    )
    world.service.admit(forged, "bridge")
    world.at(TEN)
    with world.service.rt.store.read() as tx:
        event = tx.get_event("on:review:forged")
    assert event is not None and event.loop is None
    assert world.decision("on:review:forged") == ("propose", None)
