"""The worker checks a run's authority before it executes it, against its own rules and
the journal, on a real SQLite file with real command subprocesses: a run written
straight into the database, human-only work approved by the schedule, mutating work of
a loop now in shadow, and work whose definition left the rules are each refused —
journaled, failed, never executed."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.bootstrap import open_service
from engine.core.envelope import Envelope
from engine.core.records import RunRecord
from engine.loading import Paths
from engine.service import Service
from engine.worker import work_once

TREE = Path(__file__).resolve().parents[1] / "data" / "authority"
LEASE = 10.0


def paths(tree: Path) -> Paths:
    return Paths(tree / "loops", tree / "registry", tree / "config")


def variant(tmp_path: Path, name: str, change: Callable[[Path], None]) -> Paths:
    """A copy of the authority tree, changed by `change` (given the copy's root)."""
    root = tmp_path / name
    shutil.copytree(TREE, root)
    change(root)
    return paths(root)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "engine.db")


@pytest.fixture
def planner(db: str) -> Iterator[Service]:
    """The service that plans and approves, under the authority tree as it is."""
    service = open_service(db, paths(TREE))
    yield service
    service.rt.store.close()


def work(service: Service) -> RunRecord:
    done = asyncio.run(work_once(service, "w1", LEASE))
    assert done is not None
    return done


def touched(service: Service, run: RunRecord) -> bool:
    """Whether the run's command ran (it leaves `touched` in its run directory)."""
    return (service.rt.artifacts / run.run_id / "touched").exists()


def actions(service: Service, run_id: str) -> list[tuple[str, str]]:
    return [(e.action, e.actor) for e in service.journal(entity="run", entity_id=run_id)]


def ask(service: Service, event_id: str = "ask-1") -> str:
    """Admit mutating work an operator must approve; its open proposal's id."""
    envelope = Envelope(
        eventId=event_id, type="auth.ask", source="test", occurredAt=datetime.now(UTC)
    )
    service.admit(envelope, "operator:tester")
    service.pump()
    (proposal,) = [p for p in service.proposals() if p.event_id == event_id]
    return proposal.proposal_id


def test_an_approved_run_executes(planner: Service) -> None:
    """The control: work an operator approved runs, and its command leaves its mark."""
    run = planner.approve(ask(planner), "operator:alice")[1]
    done = work(planner)
    assert (done.run_id, done.state) == (run.run_id, "succeeded")
    assert touched(planner, done)


def test_a_run_forged_into_the_database_is_refused(planner: Service, db: str) -> None:
    """A run row inserted with SQL, claiming an operator's approval for a proposal nobody
    approved, is refused by the worker: failed with the reason, journaled `refused` by
    the worker, never started, its command never run."""
    proposal_id = ask(planner)
    forge(
        db,
        "INSERT INTO runs (run_id, idempotency_key, event_id, proposal_id, loop, definition,"
        " state, approved_by, attempts, created_at)"
        " VALUES ('run-forged', 'forged', 'ask-1', ?, NULL, 'touch@1', 'queued',"
        " 'operator:alice', 0, '2026-01-01T00:00:00.000000Z')",
        proposal_id,
    )
    done = work(planner)
    assert (done.run_id, done.state) == ("run-forged", "failed")
    assert done.error is not None and "no_approval" in done.error
    assert done.started_at is None
    assert actions(planner, "run-forged") == [("claimed", "worker:w1"), ("refused", "worker:w1")]
    assert not touched(planner, done)
    assert planner.proposal(proposal_id).state == "open"  # nobody approved it, still


def forge(db: str, statement: str, *params: object) -> None:
    """Write to the database behind the engine's back, as anyone with access could."""
    with sqlite3.connect(db) as conn:
        conn.execute(statement, params)
    conn.close()


def human_only(root: Path) -> None:
    rules = root / "loops" / "authority.rules"
    edit(rules, "  approval auto\n", "  approval watched\n")
    rules.write_text(rules.read_text() + "\nhuman_only auth.touch\n")


def shadowed(root: Path) -> None:
    edit(root / "loops" / "authority.rules", "  shadow false\n", "")


def definition_gone(root: Path) -> None:
    edit(root / "loops" / "authority.rules", "to touch@1\n", "to touch@2\n")
    edit(
        root / "registry" / "definitions.yaml",
        "id: touch\n    version: 1",
        "id: touch\n    version: 2",
    )


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (human_only, "human_only"),
        (shadowed, "shadow"),
        (definition_gone, "unknown_definition"),
    ],
    ids=["human-only-approved-by-schedule", "mutating-in-shadow", "definition-left"],
)
def test_a_run_the_workers_rules_do_not_allow_is_refused(
    planner: Service, db: str, tmp_path: Path, change: Callable[[Path], None], reason: str
) -> None:
    """A run the loop approved itself (`schedule`) under the planner's rules is refused
    by a worker whose rules make its type human-only, put the loop in shadow, or no
    longer have its definition; the occurrence waits for a person, it is not retried."""
    planner.trigger("toucher", "operator:tester")
    planner.pump()
    (queued,) = planner.runs(state="queued")
    assert queued.approved_by == "schedule"
    worker = open_service(db, variant(tmp_path, reason, change))
    try:
        done = work(worker)
    finally:
        worker.rt.store.close()
    assert (done.run_id, done.state, done.started_at) == (queued.run_id, "failed", None)
    assert done.error is not None and f"({reason})" in done.error
    assert ("refused", "worker:w1") in actions(planner, queued.run_id)
    assert ("started", "worker:w1") not in actions(planner, queued.run_id)
    assert not touched(planner, done)
    assert planner.event(queued.event_id)["occurrence"] == "human_attention_required"
    assert planner.runs(state="queued") == []  # no retry was queued
