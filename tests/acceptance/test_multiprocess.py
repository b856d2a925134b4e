"""Several processes on one database, killed at random and restarted (issue 7): real
`engine serve` and `engine worker` processes over tests/data/multiprocess, whose one
loop (`wave`, every minute, catch-up all cap 1000, auto-approved) is put to sleep for
1,000 minutes so that every serve wakes up to a wave of 1,000 due slots at once.

While the wave is admitted, planned and worked off, processes are SIGKILLed at random
moments (seeded) and started again. Then, with every process back up and the queue
drained, the database must show: every slot admitted exactly once with no gap, one
decision and one run per slot, every run finished exactly once in a terminal state, no
run ever held by two workers at once (the journal's claims and recoveries alternate),
and every execution accounted for (the command leaves a file per execution; a run
executed more than once was recovered from a dead worker in between).

PostgreSQL runs three serve processes and two workers; SQLite two and two."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from databases import rows

ROOT = Path(__file__).resolve().parent.parent.parent
TREE = ROOT / "tests" / "data" / "multiprocess"
T0 = datetime(2026, 11, 30, 0, 0, tzinfo=UTC)  # the loop is first seen (enabled) here
WAVE = 1000  # minutes asleep: slots due at once on waking
WAKE = T0 + timedelta(minutes=WAVE)
LEASE_SECONDS = 2
CHAOS_SECONDS = 15
TERMINAL = {"succeeded", "failed", "timed_out", "cancelled"}

pytestmark = pytest.mark.slow


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Fleet:
    """The processes of one database. Every process reads the same virtual time (WAKE
    plus the real time since the wave began), so a restarted one agrees with the
    others on leases and slots."""

    db: str
    workdir: Path
    began: float = field(default_factory=time.monotonic)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    starts: Counter[str] = field(default_factory=Counter)
    kills: list[str] = field(default_factory=list)

    def now(self) -> datetime:
        return WAKE + timedelta(seconds=time.monotonic() - self.began)

    def env(self, now: datetime) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
        (self.workdir / "marks").mkdir(exist_ok=True)
        return {
            **base,
            "ENGINE_NOW": stamp(now),
            "ENGINE_OPERATOR_TOKEN": "alice:tok",
            "MARK_SCRIPTS": str(TREE / "scripts"),
            "MARK_DIR": str(self.workdir / "marks"),
        }

    def start(self, name: str, now: datetime | None = None) -> None:
        """(Re)start process `name` ("serve…" or "worker…"), its log appended."""
        tree = ["--db", self.db, "--rules", str(TREE / "loops")]
        tree += ["--registry", str(TREE / "registry"), "--config", str(TREE / "config")]
        if name.startswith("serve"):
            argv = ["serve", "--no-worker", "--port", str(free_port()), *tree]
        else:
            argv = ["worker", "--lease", str(LEASE_SECONDS), "--poll", "0.05", *tree]
        self.starts[name] += 1
        log = (self.workdir / f"{name}.log").open("ab")
        with log:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "engine", *argv],
                cwd=self.workdir,
                env=self.env(now or self.now()),
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def kill(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait(10)
        self.kills.append(name)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.workdir.glob("*.log"))
        )


def wait_until(ready: Any, what: str, fleet: Fleet, within: float) -> None:
    deadline = time.monotonic() + within
    while not settled(ready):
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}\n{fleet.logs()}")
        time.sleep(0.25)


def settled(ready: Any) -> bool:
    """`ready()`, False while the database is not there yet (no schema, no file)."""
    try:
        return bool(ready())
    except (sqlite3.Error, psycopg.Error):
        return False


def progress(db: str) -> dict[str, int]:
    ((events, unplanned),) = rows(
        db, "SELECT COUNT(*), COALESCE(SUM(1 - planned), 0) FROM events WHERE loop = 'wave'"
    )
    ((runs, open_runs),) = rows(
        db,
        "SELECT COUNT(*), COALESCE(SUM(CASE WHEN state IN ('queued', 'claimed', 'running') "
        "THEN 1 ELSE 0 END), 0) FROM runs WHERE loop = 'wave'",
    )
    return {
        "events": int(events),
        "unplanned": int(unplanned),
        "runs": int(runs),
        "open": int(open_runs),
    }


def first_tick(fleet: Fleet) -> None:
    """A serve at T0 sees the loop enabled and fires the T0 slot; then it stops, and the
    loop sleeps through WAVE minutes."""
    fleet.start("serve0", now=T0)
    wait_until(lambda: progress(fleet.db)["events"] >= 1, "the first tick", fleet, 60)
    fleet.procs["serve0"].send_signal(signal.SIGTERM)
    assert fleet.procs["serve0"].wait(20) == 0


def chaos(fleet: Fleet, names: list[str], seed: int) -> None:
    """Kill a random process at random moments and start it again, for CHAOS_SECONDS;
    the first kills fall while the wave is being admitted and planned."""
    rng = random.Random(seed)
    until = time.monotonic() + CHAOS_SECONDS
    time.sleep(rng.uniform(0.3, 1.0))
    while time.monotonic() < until:
        victim = rng.choice(names)
        fleet.kill(victim)
        time.sleep(rng.uniform(0.0, 0.5))
        fleet.start(victim)
        time.sleep(rng.uniform(0.2, 1.5))


def check_history(db: str, fleet: Fleet) -> None:
    """The database's account of the wave, checked against the invariants."""
    events = rows(db, "SELECT event_id, payload FROM events WHERE loop = 'wave'")
    slots = sorted(json.loads(payload)["slot"] for _, payload in events)
    assert len(slots) == len(set(slots)) >= WAVE + 1
    first = datetime.fromisoformat(slots[0].replace("Z", "+00:00"))
    expected = [first + timedelta(minutes=i) for i in range(len(slots))]
    assert slots == [m.strftime("%Y-%m-%dT%H:%M:%SZ") for m in expected], "a gap in the slots"
    assert first == T0

    event_ids = {e for e, _ in events}
    admitted = Counter(
        e for (e,) in rows(db, "SELECT entity_id FROM journal WHERE action = 'admitted'")
    )
    assert {e: n for e, n in admitted.items() if e in event_ids} == dict.fromkeys(event_ids, 1)
    decisions = Counter(e for (e,) in rows(db, "SELECT event_id FROM decisions"))
    assert set(decisions) == event_ids and set(decisions.values()) == {1}

    runs = {r: (e, s) for r, e, s in rows(db, "SELECT run_id, event_id, state FROM runs")}
    assert sorted(e for e, _ in runs.values()) == sorted(event_ids), "not one run per slot"

    history: dict[str, list[tuple[str, str, Any]]] = defaultdict(list)
    for run_id, action, actor, data in rows(
        db, "SELECT entity_id, action, actor, data FROM journal WHERE entity = 'run' ORDER BY seq"
    ):
        history[run_id].append((action, actor, json.loads(data) if data else None))

    marks = Counter(p.name.split(".")[0] for p in (fleet.workdir / "marks").iterdir())
    for run_id, (_, state) in runs.items():
        steps = history[run_id]
        holder: str | None = None
        finished = expired = 0
        for action, actor, data in steps:
            if action == "claimed":
                assert holder is None, f"{run_id} claimed by {actor} while {holder} held it"
                holder = actor
            elif action == "started":
                assert actor == holder, f"{run_id} started by {actor}, not {holder}"
            elif action == "lease_expired":
                assert holder == f"worker:{data['worker']}", (run_id, steps)
                holder, expired = None, expired + 1
            elif action == "finished":
                assert actor == holder, f"{run_id} finished by {actor}, not {holder}"
                holder, finished = None, finished + 1
        assert state in TERMINAL and holder is None, (run_id, state, steps)
        if state == "succeeded":
            assert finished == 1, (run_id, steps)
            assert 1 <= marks[run_id] <= 1 + expired, (run_id, marks[run_id], steps)
        else:  # the lease policy: a read-only run is retried at most three times
            assert (state, expired, finished) == ("failed", 3, 0), (run_id, steps)
    assert set(marks) <= set(runs)


def run_wave(db: str, workdir: Path, serves: int, workers: int, seed: int) -> Fleet:
    fleet = Fleet(db, workdir)
    try:
        first_tick(fleet)
        fleet.began = time.monotonic()
        names = [f"serve{i + 1}" for i in range(serves)] + [
            f"worker{i + 1}" for i in range(workers)
        ]
        for name in names:
            fleet.start(name)
        chaos(fleet, names, seed)
        for name in names:  # every process back up, to drain what is left
            if fleet.procs[name].poll() is not None:
                fleet.start(name)

        def drained() -> bool:
            now = progress(db)
            return (
                now["events"] >= WAVE + 1
                and now["unplanned"] == 0
                and now["runs"] == now["events"]
                and now["open"] == 0
            )

        wait_until(drained, "the wave worked off", fleet, 180)
    finally:
        fleet.stop_all()
    assert fleet.kills, "the chaos killed nothing"
    check_history(db, fleet)
    return fleet


def test_three_serves_and_two_workers_on_postgresql_survive_sigkill(
    postgresql_database: str, tmp_path: Path
) -> None:
    """PostgreSQL: three serves and two workers, each killed and restarted at random."""
    fleet = run_wave(postgresql_database, tmp_path, 3, 2, seed=7)
    assert {n for n in fleet.kills if n.startswith("serve")}, "no serve was killed"


def test_two_serves_and_two_workers_on_sqlite_survive_sigkill(tmp_path: Path) -> None:
    """SQLite: two serves and two workers on one file, each killed and restarted."""
    fleet = run_wave(str(tmp_path / "engine.db"), tmp_path, 2, 2, seed=11)
    assert {n for n in fleet.kills if n.startswith("serve")}, "no serve was killed"
