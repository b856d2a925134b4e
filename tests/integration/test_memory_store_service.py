"""The in-memory store under the real service: the same events admitted, planned,
approved, rejected and worked off give the same journal, runs, proposals and
occurrences as on a SQLite file, so a unit test of deciding and applying may run on it
instead of a database."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.core.envelope import Envelope
from engine.core.validation import Validators
from engine.loading import Paths, load_rules
from engine.service import Service
from engine.service.context import Runtime
from engine.store.memory import MemoryStore
from engine.store.ports import Store
from engine.store.sqlite import SqliteStore
from engine.worker import work_once

RUNTIME_TREE = Path(__file__).resolve().parent.parent / "data" / "runtime"
START = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


class Ticking:
    """A clock that moves one millisecond each time it is read: the same instants, in
    the same order, on every run of the scenario."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


def scenario(store: Store, paths: Paths, artifacts: Path) -> dict[str, list[Any]]:
    """Admit work of each approval kind, plan it, decide the proposals, work off the
    queue; what the store then holds (ids, states, actors; no times)."""
    rules = load_rules(paths)
    service = Service(Runtime(store, rules, Validators.build(rules), Ticking(), artifacts))
    payloads: dict[str, dict[str, Any]] = {
        "fake": {},
        "echo": {"title": "t", "name": "n"},
        "slow-mutating": {"seconds": 0},  # waits for an operator; chains on OK
    }
    kinds = ["fake", "echo", "slow-mutating", "slow-mutating", "fake"]
    for n, kind in enumerate(kinds):
        payload = payloads[kind]
        envelope = Envelope(
            eventId=f"{kind}-{n}",
            type=f"test.{kind}.requested",
            source="test",
            occurredAt=START,
            payload=payload,
        )
        service.admit(envelope, "operator:tester")
    service.pump()
    first, second = sorted(service.proposals(state="open"), key=lambda p: p.event_id)
    service.approve(first.proposal_id, "operator:alice")
    service.reject(second.proposal_id, "operator:bob", "not today")
    while asyncio.run(work_once(service, "w1", 5.0)) is not None:
        service.pump()
    with store.read() as tx:
        return {
            "journal": [
                (e.seq, e.entity, e.entity_id, e.action, e.from_state, e.to_state, e.actor)
                for e in tx.list_journal(1000)
            ],
            "runs": [(r.run_id, r.state, r.outcome, r.attempts) for r in tx.list_runs(100)],
            "proposals": [(p.proposal_id, p.state, p.decided_by) for p in tx.list_proposals(100)],
            "occurrences": [(o.event_id, o.state) for o in tx.list_occurrences(100)],
            "events": [(e.event_id, e.planned) for e in tx.list_events(100)],
        }


def test_the_memory_store_gives_the_service_what_sqlite_gives(
    runtime_paths: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One scenario through the service on a SQLite file and on the memory store
    leaves the same journal (in the same order), runs, proposals, occurrences and
    events."""
    monkeypatch.setenv("RUNTIME_SCRIPTS", str(RUNTIME_TREE / "scripts"))
    lite = SqliteStore(tmp_path / "engine.db")
    try:
        on_sqlite = scenario(lite, runtime_paths, tmp_path / "lite")
    finally:
        lite.close()
    on_memory = scenario(MemoryStore(), runtime_paths, tmp_path / "memory")
    assert on_memory == on_sqlite
    # four runs and the one chained from the approved mutating run, all worked off
    assert [state for _, state, _, _ in on_sqlite["runs"]] == ["succeeded"] * 5
