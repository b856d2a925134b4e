"""Waking a work item's controller (docs/work.md#waking-the-controller), end to end on
a real SQLite file and a real PostgreSQL database: a live instance of a continuation
shape fires on its clock, re-reads its work in the decision, takes the launch
reservation when its run starts and launches the controller (a real subprocess, the
fake controller of tests/controllers/) with the work's context on stdin and its token
only in its environment. The controller claims the work itself; the engine never
does. A controller that never claims is stopped and journaled
`controller_did_not_claim`; one that fails fails its run; terminal work disables the
instance before anything is launched; a live lease makes a firing `controller_active`."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from loopback import served
from test_work_http import ALICE, Api

from engine.api.app import make_app
from engine.api.settings import Settings, parse_tokens
from engine.bootstrap import open_service
from engine.loading import Paths
from engine.worker import adapters_for

SHAPES = Path(__file__).resolve().parents[1] / "data" / "shapes"
FAKE = Path(__file__).resolve().parents[1] / "controllers" / "fake_controller.py"
SECRET = "wake-token-7f3a9c1e5b"  # the controller's token: it must never leave its env
RULES = """loop nudge
  work continuation controller fake
  every 1h
  emit work.nudged
  approval auto
  shadow false
  cooldown 30m
  backoff base 5m max 2h
  budget daily_runs 12

route work.nudged to nudge@1
"""


def controllers(mode: str, record: Path, reservation: str = "30s") -> str:
    argv = [sys.executable, str(FAKE), mode, str(record), "{work_id}"]
    return (
        "controllers:\n"
        "  - id: fake\n"
        f"    argv: {json.dumps(argv)}\n"
        "    timeout: 1m\n"
        f"    launch_reservation: {reservation}\n"
        "    context: stdin\n"
        "    token_env: ENGINE_WORK_TOKEN\n"
        "    report: http\n"
    )


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 7, 9, 59, 50, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@dataclasses.dataclass
class World:
    api: Api
    clock: Clock
    record: Path

    def journal(self, work_id: str) -> list[tuple[str, str]]:
        return self.api.journal(work_id)

    def wait(self, what: str, done: Callable[[], Any], seconds: float = 30) -> Any:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = done()
            if found:
                return found
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")

    def bound_live(self) -> str:
        """A work item with a live instance of `nudge`, graduated by the operator."""
        status, answer = self.api.call(
            "POST", "/work", {"semanticKey": "repair-42", "title": "Repair it", "summary": "s"}
        )
        assert status == 201, answer
        work_id = str(answer["work"]["workId"])
        status, made = self.api.call(
            "POST", f"/work/{work_id}/bind", {"loop": "nudge", "requestId": "r1"}
        )
        assert status == 201, made
        status, graduated = self.api.call(
            "POST", f"/work/{work_id}/bindings/nudge/graduate", {"atRestart": False}
        )
        assert status == 200, graduated
        name = f"nudge@{work_id}"
        self.wait("the instance to be scheduled", lambda: self.schedule(name))
        return work_id

    def schedule(self, loop: str) -> dict[str, Any] | None:
        status, answer = self.api.call("GET", f"/schedules/{loop}")
        return answer if status == 200 else None

    def fire(self, at: str) -> None:
        self.clock.now = datetime.fromisoformat(at)

    def decisions(self, loop: str) -> list[dict[str, Any]]:
        _, page = self.api.call("GET", "/events?limit=100")
        return [e for e in page["events"] if e.get("loop") == loop]

    def runs(self) -> list[dict[str, Any]]:
        _, page = self.api.call("GET", "/runs?limit=100")
        return list(page["runs"])


@pytest.fixture
def world(
    request: pytest.FixtureRequest, database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    mode, reservation = getattr(request, "param", ("claim", "30s"))
    record = tmp_path / "controller.json"
    shutil.copytree(SHAPES / "registry", tmp_path / "registry")
    (tmp_path / "registry" / "controllers.yaml").write_text(controllers(mode, record, reservation))
    (tmp_path / "loops").mkdir()
    (tmp_path / "loops" / "t.rules").write_text(RULES)
    (tmp_path / "config").mkdir()
    paths = Paths(tmp_path / "loops", tmp_path / "registry", tmp_path / "config")
    monkeypatch.setenv("ENGINE_CONTROLLER_TOKEN", f"fake:{SECRET}")
    clock = Clock()
    service = open_service(database, paths, clock=clock)
    adapters = adapters_for(database, paths)
    settings = Settings(
        pump_seconds=0.05,
        poll_seconds=0.05,
        operators=parse_tokens(f"alice:{ALICE}", "t"),
        controllers=parse_tokens(f"fake:{SECRET}", "t"),
        adapters=adapters,
    )
    service.rt.artifacts = tmp_path / "artifacts"
    try:
        with served(make_app(service, settings)) as url:
            wake = adapters.get("controller")
            wake.url = url  # type: ignore[union-attr]
            yield World(Api(service, url), clock, record)
    finally:
        service.rt.store.close()


def test_a_wake_launches_the_controller_which_claims_and_completes_the_work(
    world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The firing runs the wake; the controller gets the context on stdin, claims the
    lease as `controller:fake` (the engine never claims it) and completes the work; the
    next firing finds the work done: the instance is disabled, nothing is launched."""
    work_id = world.bound_live()
    world.fire("2026-12-07T10:00:01+00:00")
    done = world.wait(
        "the run to succeed",
        lambda: [r for r in world.runs() if r["state"] == "succeeded"],
    )
    assert done[0]["definition"] == "controller-fake@1" and done[0]["outcome"] == "WOKEN"
    figures = world.api.service.stats()
    assert (figures["wakes"], figures["unclaimedReservations"]) == (1, 0)
    actions = world.journal(work_id)
    names = [a for a, _ in actions]
    assert names.index("wake_reserved") < names.index("continued") < names.index("completed")
    assert ("continued", "controller:fake") in actions
    assert ("completed", "controller:fake") in actions
    seen = json.loads(world.record.read_text())
    assert seen["hasToken"] is True
    assert seen["context"]["workId"] == work_id and seen["context"]["title"] == "Repair it"
    # the token is in the child's environment only
    run_dir = tmp_path / "artifacts" / done[0]["runId"]
    command = (run_dir / "command.json").read_text()
    assert "ENGINE_WORK_TOKEN" in command
    for where in (
        json.dumps(seen["argv"]),
        seen["cmdline"],
        seen["parentCmdline"],
        command,
        caplog.text,
        json.dumps(world.api.call("GET", "/journal?limit=1000")[1]),
        *(p.read_text(errors="replace") for p in run_dir.iterdir()),
    ):
        assert SECRET not in where
    # the next slot: the work is completed, the instance is disabled, nothing launched
    world.fire("2026-12-07T11:00:01+00:00")
    world.wait(
        "the instance to be disabled",
        lambda: "instance_disabled" in [a for a, _ in world.journal(work_id)],
    )
    assert len(world.runs()) == 1
    loop = f"nudge@{work_id}"
    ticks = world.decisions(loop)
    assert [t["eventId"] for t in ticks if t["eventId"].endswith("11:00:00Z")]
    _, explained = world.api.call("GET", f"/explain/clock:{loop}:2026-12-07T11:00:00Z")
    assert explained["decision"]["reason"] == "nothing_to_do", explained


@pytest.mark.parametrize("world", [("silent", "2s")], indirect=True)
def test_a_controller_that_never_claims_is_stopped_and_journaled(world: World) -> None:
    """The reservation ends without a claim: the controller is stopped, the run ends
    DID_NOT_CLAIM (an infrastructure failure: the occurrence backs off), the work is
    journaled `controller_did_not_claim` and holds no reservation."""
    work_id = world.bound_live()
    world.fire("2026-12-07T10:00:01+00:00")
    world.wait(
        "controller_did_not_claim",
        lambda: "controller_did_not_claim" in [a for a, _ in world.journal(work_id)],
    )
    runs = world.runs()
    assert [r["outcome"] for r in runs] == ["DID_NOT_CLAIM"]
    figures = world.api.service.stats()
    assert (figures["wakes"], figures["unclaimedReservations"]) == (1, 1)
    _, shown = world.api.call("GET", f"/work/{work_id}")
    assert shown["work"]["state"] == "open" and shown["work"]["lease"]["owner"] is None
    assert world.api.service.work_item(work_id).reserved_by is None


@pytest.mark.parametrize("world", [("fail", "30s")], indirect=True)
def test_a_controller_that_fails_fails_its_run(world: World) -> None:
    """A controller that exits 3 without claiming fails the wake's run, with its exit
    in the error; the work is untouched and holds no reservation."""
    work_id = world.bound_live()
    world.fire("2026-12-07T10:00:01+00:00")
    failed = world.wait(
        "the run to fail", lambda: [r for r in world.runs() if r["state"] == "failed"]
    )
    assert "exited with code 3" in (failed[0]["error"] or "")
    assert world.api.service.work_item(work_id).reserved_by is None
    assert world.api.service.work_item(work_id).state == "open"


def test_a_live_lease_makes_the_firing_controller_active(world: World) -> None:
    """While another controller holds the work's lease, a firing is a no-op
    `controller_active`: no run, no reservation."""
    work_id = world.bound_live()
    status, _ = world.api.call(
        "POST", f"/work/{work_id}/continue", {"session": "other", "ttl": 7200}, token=SECRET
    )
    assert status == 200
    world.fire("2026-12-07T10:00:01+00:00")
    loop = f"nudge@{work_id}"
    event = f"clock:{loop}:2026-12-07T10:00:00Z"

    def held() -> Any:
        status, explained = world.api.call("GET", f"/explain/{event}")
        return status == 200 and explained.get("decision") and explained

    explained = world.wait("the firing to be decided", held)
    assert explained["decision"]["reason"] == "controller_active", explained
    assert world.runs() == []


def test_two_serves_racing_one_wake_launch_one_controller(
    world: World, database: str, tmp_path: Path
) -> None:
    """A second serve on the same database and clock fires the same slot: one tick is
    admitted, one run queued, one reservation taken, one controller launched."""
    paths = Paths(tmp_path / "loops", tmp_path / "registry", tmp_path / "config")
    other = open_service(database, paths, clock=world.clock)
    other.rt.artifacts = tmp_path / "artifacts-2"
    adapters = adapters_for(database, paths)
    settings = Settings(
        pump_seconds=0.05,
        poll_seconds=0.05,
        operators=parse_tokens(f"alice:{ALICE}", "t"),
        controllers=parse_tokens(f"fake:{SECRET}", "t"),
        adapters=adapters,
    )
    try:
        with served(make_app(other, settings)) as url:
            wake = adapters.get("controller")
            wake.url = url  # type: ignore[union-attr]
            work_id = world.bound_live()
            second = World(Api(other, url), world.clock, world.record)
            second.wait(
                "the second serve to schedule it", lambda: second.schedule(f"nudge@{work_id}")
            )
            time.sleep(0.3)  # both runtime loops have adopted the instance
            world.fire("2026-12-07T10:00:01+00:00")
            world.wait(
                "the work to be completed",
                lambda: world.api.service.work_item(work_id).state == "completed",
            )
            time.sleep(0.5)  # time for a second launch, were there one
    finally:
        other.rt.store.close()
    launches = Path(f"{world.record}.launches").read_text().split()
    assert len(launches) == 1
    assert len(world.runs()) == 1
    assert [a for a, _ in world.journal(work_id)].count("wake_reserved") == 1
