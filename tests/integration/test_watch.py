"""Condition watches through the real runtime on both backends: the service's pump polls
a probe that is a real subprocess (tests/data/watch/probe.py, printing the document of
a file the test edits), with an injected clock."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.bootstrap import open_service
from engine.core.envelope import Envelope
from engine.core.records import ObservationRecord
from engine.loading import Paths
from engine.service import Service

DATA = Path(__file__).resolve().parents[1] / "data" / "watch"
DOC = {"status": "queued", "runs": [{"conclusion": None}], "note": "started 3 minutes ago"}


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += timedelta(minutes=minutes)


class Watch:
    """The watch tree in a directory of its own, its state files, and services opened on
    one database (each a fresh process's, as after a restart)."""

    def __init__(self, root: Path, database: str) -> None:
        self.root, self.database, self.clock = root, database, Clock()
        shutil.copytree(DATA / "registry", root / "registry")
        shutil.copy(DATA / "probe.py", root / "probe.py")
        (root / "loops").mkdir()
        (root / "config").mkdir()
        rules = (DATA / "loops" / "watch.rules.in").read_text().replace("@DIR@", str(root))
        (root / "loops" / "watch.rules").write_text(rules)
        self.paths = Paths(root / "loops", root / "registry", root / "config")
        self.services: list[Service] = []
        self.state("ci", doc=DOC)
        self.state("slow", doc={"status": "fine"})

    def state(self, name: str, **state: Any) -> None:
        (self.root / f"{name}.json").write_text(json.dumps(state))

    def service(self) -> Service:
        service = open_service(self.database, self.paths, clock=self.clock)
        self.services.append(service)
        return service

    def observation(self, loop: str = "ci-watch") -> ObservationRecord:
        found = self.observation_or_none(loop)
        assert found is not None
        return found

    def observation_or_none(self, loop: str = "ci-watch") -> ObservationRecord | None:
        with self.services[-1].rt.store.read() as tx:
            return tx.get_observation(loop)

    def events(self, loop: str = "ci-watch") -> list[str]:
        with self.services[-1].rt.store.read() as tx:
            return [e.event_id for e in tx.loop_events(loop, "", 100)]

    def occurrences(self, loop: str = "ci-watch") -> list[tuple[str | None, str]]:
        with self.services[-1].rt.store.read() as tx:
            return [(o.window, o.state) for o in tx.list_occurrences(100, loop=loop)]

    def proposals(self, loop: str = "ci-watch") -> list[str]:
        with self.services[-1].rt.store.read() as tx:
            return [p.event_id for p in tx.open_loop_proposals(loop)]


@pytest.fixture
def watch(tmp_path: Path, database: str) -> Iterator[Watch]:
    found = Watch(tmp_path / "tree", database)
    yield found
    for service in found.services:
        service.rt.store.close()


def test_a_change_fires_once_after_a_silent_baseline(watch: Watch) -> None:
    """The first poll is a baseline and fires nothing; unchanged polls are only counted;
    a change admits one tick, opens one occurrence whose window is the change, and the
    watched loop proposes it; a restarted runtime polling the same state fires nothing
    more."""
    service = watch.service()
    service.pump()
    first = watch.observation()
    assert (first.status, first.polls, first.changes, watch.events()) == ("ok", 1, 0, [])
    for _ in range(3):
        watch.clock.advance(5)
        service.pump()
    assert (watch.observation().polls, watch.events()) == (4, [])
    watch.state("ci", doc={**DOC, "status": "completed"})
    watch.clock.advance(5)
    service.pump()
    changed = watch.observation()
    assert changed.changes == 1 and changed.fingerprint != first.fingerprint
    fp16 = (changed.fingerprint or "")[:16]
    assert watch.events() == [f"watch:ci-watch:1-{fp16}"]
    assert watch.occurrences() == [(f"watch:1-{fp16}", "awaiting_approval")]
    assert watch.proposals() == [f"watch:ci-watch:1-{fp16}"]
    restarted = watch.service()
    for _ in range(2):
        watch.clock.advance(5)
        restarted.pump()
    assert watch.events() == [f"watch:ci-watch:1-{fp16}"]
    assert watch.observation().polls == 7 and watch.observation().changes == 1


def test_a_restart_between_polls_keeps_the_cadence(watch: Watch) -> None:
    """A runtime started again before the next poll is due does not poll early: the next
    poll is the recorded one, and one after downtime is just the next poll."""
    watch.service().pump()
    watch.clock.advance(2)
    watch.service().pump()
    assert watch.observation().polls == 1
    watch.clock.advance(60)  # down for an hour: one poll, no catch-up
    watch.service().pump()
    assert watch.observation().polls == 2


def test_a_watch_switched_on_again_starts_from_a_fresh_baseline(watch: Watch) -> None:
    """A change made while the loop was disabled does not fire when it is enabled again
    (the first poll after enablement is a baseline, as catch-up never reaches before
    enablement); the next change fires with the next change number."""
    service = watch.service()
    service.pump()
    watch.state("ci", doc={**DOC, "status": "failed"})
    watch.clock.advance(5)
    service.pump()
    assert watch.observation().changes == 1
    overlay = watch.root / "config" / "schedule.yaml"
    overlay.write_text("schedules:\n  ci-watch: {enabled: false}\n")
    watch.clock.advance(5)
    watch.service().pump()  # a serve with the loop disabled: not polled
    assert watch.observation().polls == 2
    watch.state("ci", doc={**DOC, "status": "completed"})
    overlay.unlink()
    watch.clock.advance(60)
    again = watch.service()
    again.pump()
    assert watch.observation().polls == 3 and len(watch.events()) == 1
    watch.state("ci", doc={**DOC, "status": "queued again"})
    watch.clock.advance(5)
    again.pump()
    assert watch.observation().changes == 2 and len(watch.events()) == 2
    assert watch.events()[-1].startswith("watch:ci-watch:2-")


def test_volatile_text_that_is_ignored_never_fires(watch: Watch) -> None:
    """A relative time matched by the probe's `ignore` pattern, and a key outside its
    include terms, change nothing; a change of the included status does."""
    service = watch.service()
    service.pump()
    watch.state("ci", doc={**DOC, "note": "started 17 minutes ago", "id": 42})
    watch.clock.advance(5)
    service.pump()
    assert (watch.observation().changes, watch.events()) == (0, [])
    watch.state("ci", doc={**DOC, "note": "started 4 hours ago", "runs": [{"conclusion": "ok"}]})
    watch.clock.advance(5)
    service.pump()
    assert watch.observation().changes == 1 and len(watch.events()) == 1


def test_two_runtimes_on_one_database_fire_a_change_once(watch: Watch) -> None:
    """Two services polling the same changed probe admit its tick once."""
    one, two = watch.service(), watch.service()
    one.pump()
    two.pump()
    watch.state("ci", doc={**DOC, "status": "failed"})
    watch.clock.advance(5)
    one.pump()
    two.pump()
    assert len(watch.events()) == 1 and watch.observation().changes == 1


def test_a_failing_probe_backs_off_and_becomes_a_doctor_anomaly(
    watch: Watch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probe that exits non-zero records a failed poll with a bounded diagnostic that
    never shows the value of its environment, polls again after the loop's backoff
    (`base 10m`, doubling), fires nothing, and after three failures in a row is a
    `failing_probe` anomaly; its recovery compares with the fingerprint from before."""
    monkeypatch.setenv("WATCH_SECRET", "hunter2-§-secret")
    service = watch.service()
    service.pump()
    baseline = watch.observation().fingerprint
    watch.state("ci", exit=3, stderr="token $WATCH_SECRET refused " + "x" * 1000)
    waits = []
    for _ in range(3):
        watch.clock.advance(watch_wait(watch))
        service.pump()
        obs = watch.observation()
        waits.append(watch_wait(watch))
        assert obs.status == "failed" and "exited with code 3" in obs.diagnostic
        assert "hunter2" not in obs.diagnostic and "token *** refused" in obs.diagnostic
        assert len(obs.diagnostic) <= 500
    assert waits == [10, 20, 40]  # minutes: the backoff, longer than the 5m cadence
    assert watch.observation().consecutive_failures == 3 and watch.events() == []
    report = service.doctor()
    assert [(a["kind"], a["loop"]) for a in report["anomalies"]] == [("failing_probe", "ci-watch")]
    assert "exited with code 3" in report["failingProbes"][0]["diagnostic"]
    watch.state("ci", doc=DOC)
    watch.clock.advance(40)
    service.pump()
    assert watch.observation().fingerprint == baseline and watch.events() == []
    assert service.doctor()["anomalies"] == []


def watch_wait(watch: Watch) -> float:
    """Minutes from the clock to the loop's next poll."""
    nxt = datetime.fromisoformat(str(watch.observation().next_poll_at).replace("Z", "+00:00"))
    return (nxt - watch.clock.now).total_seconds() / 60


def test_output_that_is_not_json_is_a_failed_poll(
    watch: Watch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probe that prints something other than JSON fails the poll (no baseline); its
    diagnostic quotes the output with the values of the probe's environment hidden."""
    monkeypatch.setenv("WATCH_SECRET", "hunter2-§-secret")
    watch.state("ci", raw="Error: token $WATCH_SECRET is not logged in")
    watch.service().pump()
    obs = watch.observation()
    assert (obs.status, obs.fingerprint) == ("failed", None)
    assert "not JSON" in obs.diagnostic and "token *** is not" in obs.diagnostic
    assert "hunter2" not in obs.diagnostic


def test_a_rotated_secret_in_the_output_is_no_change(
    watch: Watch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret the probe prints counts as `***`: a rotated token changes nothing."""
    monkeypatch.setenv("WATCH_SECRET", "first-token")
    watch.state("ci", doc={**DOC, "status": "queued by $WATCH_SECRET"})
    service = watch.service()
    service.pump()
    monkeypatch.setenv("WATCH_SECRET", "second-token")
    watch.clock.advance(5)
    service.pump()
    assert (watch.observation().polls, watch.observation().changes) == (2, 0)


def test_a_probe_that_outlives_its_timeout_is_killed(watch: Watch) -> None:
    """A probe still running at its timeout (2s) has its process group killed and the
    poll recorded as failed."""
    pidfile = watch.root / "slow.pid"
    watch.state("slow", sleep=60, pidfile=str(pidfile), doc={})
    started = time.monotonic()
    watch.service().pump()
    assert time.monotonic() - started < 30
    obs = watch.observation("slow-watch")
    assert obs.status == "failed" and "timed out after 2s" in obs.diagnostic
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_paused_watch_is_not_polled(watch: Watch) -> None:
    """A paused watch loop is not polled until resumed."""
    service = watch.service()
    service.pump()
    service.pause("ci-watch", "operator:alice", "probe maintenance")
    watch.clock.advance(5)
    service.pump()
    assert watch.observation().polls == 1
    service.resume("ci-watch", "operator:alice", "")
    watch.clock.advance(5)
    service.pump()
    assert watch.observation().polls == 2


def test_a_watch_nobody_polls_is_a_stopped_schedule(watch: Watch) -> None:
    """A watch loop whose next poll is overdue by more than its cadence (serve is down)
    is a `stopped_schedule` anomaly; polled again, it is not."""
    service = watch.service()
    service.pump()
    watch.clock.advance(10)
    assert service.doctor()["anomalies"] == []
    watch.clock.advance(1.5)  # 11.5 minutes: due at 10:05, one cadence and the grace later
    stopped = [(a["kind"], a["loop"]) for a in service.doctor()["anomalies"]]
    assert stopped == [("stopped_schedule", "ci-watch"), ("stopped_schedule", "slow-watch")]
    message = service.doctor()["anomalies"][0]["message"]
    assert "has not polled its probe since 2026-11-30T10:00:00" in message
    service.pump()
    assert service.doctor()["anomalies"] == []


def test_the_schedule_view_shows_the_last_observation(watch: Watch) -> None:
    """`engine schedule` / GET /schedules show a watch loop's trigger, its last
    observation and its next poll."""
    service = watch.service()
    before = service.schedule("ci-watch")
    assert before["observation"]["polls"] == 0 and before["nextDue"] == "2026-11-30T10:00:00Z"
    service.pump()
    entry = service.schedule("ci-watch")
    assert entry["trigger"] == {"kind": "watch", "describe": "watch status every 5m"}
    assert entry["nextDue"] == "2026-11-30T10:05:00Z"
    observation = entry["observation"]
    assert {k: observation[k] for k in ("probe", "status", "polls", "changes", "diagnostic")} == {
        "probe": "status",
        "status": "ok",
        "polls": 1,
        "changes": 0,
        "diagnostic": None,
    }
    assert observation["observedAt"] == "2026-11-30T10:00:00.000000Z"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_slow_probe_holds_up_no_pass_of_the_runtime_loop(watch: Watch) -> None:
    """A pass that does not wait for probes (serve's runtime loop) hands a due probe to
    the pool and goes on: an event admitted while the probe is still running is
    planned, and the poll is recorded by the first pass after the probe answered."""
    release, pidfile = watch.root / "release", watch.root / "ci.pid"
    watch.state("ci", until=str(release), pidfile=str(pidfile), doc=DOC)
    service = watch.service()
    service.pump(wait_for_probes=False)
    assert eventually(lambda: pidfile.exists() and pidfile.read_text().isdigit())
    probe = int(pidfile.read_text())
    service.admit(changed_event("meanwhile"), "inject")
    service.pump(wait_for_probes=False)
    decision = service.event("meanwhile")["decision"]
    assert decision is not None and decision.kind == "propose"
    assert alive(probe), "the pass waited for the probe"
    assert watch.observation_or_none() is None
    release.touch()
    assert eventually(lambda: service.pump(wait_for_probes=False) >= 0 and polled(watch))
    assert watch.observation().status == "ok"
    assert watch.observation().polls == 1


def polled(watch: Watch) -> bool:
    found = watch.observation_or_none()
    return found is not None and found.polls >= 1


def changed_event(event_id: str) -> Envelope:
    """A `test.changed` event from outside (no loop's tick): planned by its route."""
    fingerprint = "0" * 64
    payload = {
        "loop": "elsewhere",
        "window": "w",
        "fingerprint": fingerprint,
        "previousFingerprint": fingerprint,
        "observedAt": "2026-11-30T10:00:00Z",
    }
    return Envelope(
        eventId=event_id,
        type="test.changed",
        source="test",
        occurredAt=datetime(2026, 11, 30, 10, tzinfo=UTC),
        payload=payload,
    )


def eventually(check: Callable[[], bool], seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()
