"""An event whose planning fails is recorded as such and never blocks the others."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from engine.bootstrap import open_service
from engine.core import decide as deciding
from engine.core.envelope import Envelope
from engine.loading import Paths

TREE = Path(__file__).resolve().parents[1] / "data" / "scheduler"


def envelope(event_id: str) -> Envelope:
    return Envelope(
        eventId=event_id,
        type="test.tick",
        source="inject",
        occurredAt=datetime(2026, 11, 30, 10, tzinfo=UTC),
        payload={},
    )


def test_a_poison_event_is_recorded_and_the_batch_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning that raises for one event decides it NOOP planning_error (journaled,
    nothing runs) while the events around it are planned normally."""
    service = open_service(
        str(tmp_path / "e.db"),
        Paths(TREE / "loops", TREE / "registry", TREE / "config"),
        clock=lambda: datetime(2026, 11, 30, 9, 30, tzinfo=UTC),
    )
    real_plan = deciding.plan  # the planner, as the pure decision calls it

    def flaky(event: Any, *args: Any) -> Any:  # the admitted event's record
        if event.event_id == "poison":
            raise RuntimeError("boom")
        return real_plan(event, *args)

    monkeypatch.setattr(deciding, "plan", flaky)
    service.admit_many([envelope("before"), envelope("poison"), envelope("after")], "inject")
    service.pump()
    kinds = {e: service.event(e)["decision"] for e in ("before", "poison", "after")}
    assert kinds["before"].kind == "propose" and kinds["after"].kind == "propose"
    assert (kinds["poison"].kind, kinds["poison"].reason) == ("noop", "planning_error")
    assert "boom" in kinds["poison"].note
    assert service.event("poison")["occurrence"] == "failed"
    assert [p.event_id for p in service.proposals()] == ["after", "before"]
    service.rt.store.close()
