"""A resumed retry is decided like any dispatch (docs/occurrences.md, "Infrastructure
failures: retries with backoff"): through the real runtime on both backends, a watched
loop's retry that comes due while an operator's approved run of the loop is in flight
starts no second run. The tree is tests/data/occurrence_engine's registry and script
with a loop of its own; the clock is the test's."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.bootstrap import open_service
from engine.core.records import OccurrenceRecord
from engine.loading import Paths
from engine.service import Service
from engine.worker import adapters_for, work_once

TREE = Path(__file__).resolve().parent.parent / "data" / "occurrence_engine"
START = datetime(2026, 12, 1, 9, 59, 59, tzinfo=UTC)
RULES = """\
# A watched loop that keeps every slot's proposal open and retries a crash.
loop wretry
  every 1h
  emit occ.wretry { repo: "r1" }
  catch_up all
  backoff base 1m max 3m
  budget retries_per_occurrence 2
  enabled true

route occ.wretry to look@1
"""


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Paths:
    """The occurrence-engine registry with the loop's event type, and loop `wretry`."""
    shutil.copytree(TREE / "registry", tmp_path / "registry")
    shutil.copytree(TREE / "config", tmp_path / "config")
    types = tmp_path / "registry" / "event-types.yaml"
    types.write_text(types.read_text() + "  occ.wretry:\n    description: Tick of loop wretry.\n")
    (tmp_path / "loops").mkdir()
    (tmp_path / "loops" / "wretry.rules").write_text(RULES)
    (tmp_path / "control").mkdir()
    monkeypatch.setenv("OCC_SCRIPTS", str(TREE / "scripts"))
    monkeypatch.setenv("OCC_CONTROL", str(tmp_path / "control"))
    return Paths(tmp_path / "loops", tmp_path / "registry", tmp_path / "config")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def service(database: str, tree: Paths, clock: Clock) -> Iterator[Service]:
    service = open_service(database, tree, clock=clock)
    yield service
    service.rt.store.close()


def at(service: Service, clock: Clock, moment: datetime) -> None:
    clock.now = moment
    service.pump()


def occurrence(service: Service, event_id: str) -> OccurrenceRecord:
    with service.rt.store.read() as tx:
        found = tx.get_occurrence(event_id)
    assert found is not None
    return found


def work_one(service: Service, database: str, tree: Paths) -> None:
    done = asyncio.run(work_once(service, "w1", 60.0, adapters_for(database, tree)))
    assert done is not None


def test_a_retry_due_while_an_operators_run_is_in_flight_starts_no_second_run(
    service: Service, database: str, tree: Paths, clock: Clock, tmp_path: Path
) -> None:
    """The 10:00 slot's approved run crashes and waits for its retry; meanwhile an
    operator approves the 11:00 slot's proposal. When the retry comes due, that run is
    still queued: the retry ends `nothing_to_do` (`previous_run_in_flight`) and queues
    nothing, so only one run of the loop is ever in flight."""
    at(service, clock, START + timedelta(seconds=1, milliseconds=500))  # the 10:00 slot
    at(service, clock, START + timedelta(hours=1, seconds=2))  # the 11:00 slot
    first, second = sorted(service.proposals(state="open"), key=lambda p: p.event_id)
    (tmp_path / "control" / "wretry").write_text("CRASH")
    service.approve(first.proposal_id, "operator:alice")
    work_one(service, database, tree)
    waiting = occurrence(service, first.event_id)
    assert waiting.state == "waiting_for_resource"
    _, operators = service.approve(second.proposal_id, "operator:alice")
    assert waiting.retry_at is not None
    retry_at = datetime.fromisoformat(waiting.retry_at.replace("Z", "+00:00"))
    at(service, clock, retry_at + timedelta(seconds=1))
    ended = occurrence(service, first.event_id)
    assert (ended.state, ended.retry_at) == ("nothing_to_do", None)
    runs = {r.event_id: (r.run_id, r.state) for r in service.runs(100)}
    assert len(service.runs(100)) == 2
    assert runs[second.event_id] == (operators.run_id, "queued")
    assert runs[first.event_id][1] == "failed"
    (concluded,) = [
        e
        for e in service.journal(entity="occurrence", entity_id=first.event_id)
        if e.action == "concluded"
    ]
    assert concluded.data == {"reason": "previous_run_in_flight"}
    assert concluded.note == "a run of loop 'wretry' is still in flight"
