"""The lifecycle guards read facts their callers cannot make up, so they refuse: the
occurrence of a human-only proposal moves on an operator's approval only, whoever
calls. On the in-memory store over tests/data/trust (its `trust.ship.requested` is
human-only)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.core.decisions import Actor
from engine.core.envelope import Envelope, iso
from engine.core.table import ConditionFailed
from engine.core.validation import Validators
from engine.loading import Paths, load_rules
from engine.service.admission import admit_record
from engine.service.context import Runtime
from engine.service.planning import plan_one
from engine.service.proposals import advance_proposed
from engine.store.memory import MemoryStore

TREE = Path(__file__).resolve().parents[1] / "data" / "trust"
NOW = datetime(2026, 12, 1, 9, tzinfo=UTC)
AT = iso(NOW)


def proposed_ship() -> tuple[Runtime, str]:
    """A runtime whose human-only ship request is planned: proposed, awaiting approval."""
    rules = load_rules(Paths(TREE / "loops", TREE / "registry", TREE / "config"))
    rt = Runtime(MemoryStore(), rules, Validators.build(rules), lambda: NOW)
    envelope = Envelope(
        eventId="ship-1", type="trust.ship.requested", source="manual", occurredAt=NOW
    ).with_defaults()
    with rt.store.write() as tx:
        event = admit_record(rt, tx, envelope, Actor.BRIDGE, AT)
        assert event is not None
        plan_one(rt, tx, event, AT)
    with rt.store.read() as tx:
        assert tx.get_occurrence_state("ship-1") == "awaiting_approval"
    return rt, "ship-1"


@pytest.mark.parametrize("actor", [Actor.SCHEDULE, Actor.SYSTEM, Actor.BRIDGE, "worker:w1"])
def test_a_human_only_occurrence_is_not_approved_by_anyone_but_an_operator(actor: str) -> None:
    """Approving the occurrence of a human-only proposal as the schedule, the engine, a
    bridge or a worker is refused with a Conflict naming the guard, and it stays
    awaiting approval."""
    rt, event_id = proposed_ship()
    with pytest.raises(ConditionFailed, match="actor_is_human"), rt.store.write() as tx:
        advance_proposed(rt, tx, event_id, True, "approve", AT, actor)
    with rt.store.read() as tx:
        assert tx.get_occurrence_state(event_id) == "awaiting_approval"


def test_an_operator_approves_a_human_only_occurrence() -> None:
    """The same step as a named operator moves the occurrence to work_dispatched."""
    rt, event_id = proposed_ship()
    with rt.store.write() as tx:
        advance_proposed(rt, tx, event_id, True, "approve", AT, "operator:alice")
    with rt.store.read() as tx:
        assert tx.get_occurrence_state(event_id) == "work_dispatched"
