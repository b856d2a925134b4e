"""Several processes on one database, killed at random and restarted (issues 7 and
12): real `engine serve` and `engine worker` processes over tests/data/multiprocess,
whose two loops (`wave`, read-only, every minute; `act`, mutating, every ten minutes;
catch-up all, auto-approved) are put to sleep for 150 minutes so that every serve
wakes up to a wave of 167 due slots at once (more than the chaos's 10 seconds, which
begin once the serves listen, work off on two cores, so the blows fall while it is
admitted, planned and worked, and little is left to drain after them).

While the wave is admitted, planned and worked off, processes are SIGKILLed at random
moments (seeded) and started again (once, a worker in the middle of mutating work), or,
a serve, frozen (SIGSTOP) for a moment and let go; on PostgreSQL the database server
itself is restarted under the load. Then, with every
process back up and the queue drained, the database must show: every slot admitted
exactly once with no gap, one decision and one run per slot, every run finished
exactly once in a terminal state, no run ever held by two workers at once (the
journal's claims and recoveries alternate), and every execution accounted for (the
command leaves a file per execution): read-only work ran at least once, mutating work
at most once, and no side effect of mutating work outlived a run that was not recorded
as run (its command's second, later change comes from a child process), unless the
journal records that its execution ended after the lease was lost. The counts of lost,
duplicated and stuck work are printed and must be 0.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import databases
import psycopg
import pytest
from databases import rows

ROOT = Path(__file__).resolve().parent.parent.parent
TREE = ROOT / "tests" / "data" / "multiprocess"
T0 = datetime(2026, 11, 30, 0, 0, tzinfo=UTC)  # the loop is first seen (enabled) here
WAVE = 150  # minutes asleep: slots due at once on waking
CADENCE = {"wave": 1, "act": 10}  # minutes
MUTATING = frozenset({"act"})
WAKE = T0 + timedelta(minutes=WAVE)
LEASE_SECONDS = 2
CHAOS_SECONDS = 10
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
    ports: dict[str, int] = field(default_factory=dict)  # of the serves
    starts: Counter[str] = field(default_factory=Counter)
    kills: list[str] = field(default_factory=list)
    freezes: list[str] = field(default_factory=list)
    database_restarts: int = 0
    mid_mutation: int = 0  # workers killed while they ran mutating work

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
            self.ports[name] = free_port()
            argv = ["serve", "--no-worker", "--port", str(self.ports[name]), *tree]
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

    def listening(self) -> bool:
        """Whether the running serves (one at least) all accept connections: each has
        opened the database, and its scheduler is about to wake up to the wave."""
        import socket

        running = [p for n, p in self.ports.items() if self.procs[n].poll() is None]
        for port in running:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) != 0:
                    return False
        return bool(running)

    def kill(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait(10)
        self.kills.append(name)

    def freeze(self, name: str, seconds: float) -> None:
        """SIGSTOP `name` (maybe mid-transaction, holding a lock), then SIGCONT it."""
        proc = self.procs[name]
        if proc.poll() is not None:
            return
        proc.send_signal(signal.SIGSTOP)
        time.sleep(seconds)
        proc.send_signal(signal.SIGCONT)
        self.freezes.append(name)

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


def expected_slots(loop: str) -> int:
    """Slots of `loop` due from T0 to WAKE, both included."""
    return WAVE // CADENCE[loop] + 1


def progress(db: str) -> dict[str, int]:
    ((events, unplanned),) = rows(
        db,
        "SELECT COUNT(*), COALESCE(SUM(1 - planned), 0) FROM events WHERE loop IN ('wave', 'act')",
    )
    ((runs, open_runs),) = rows(
        db,
        "SELECT COUNT(*), COALESCE(SUM(CASE WHEN state IN ('queued', 'claimed', 'running') "
        "THEN 1 ELSE 0 END), 0) FROM runs WHERE loop IN ('wave', 'act')",
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


def chaos(
    fleet: Fleet, names: list[str], seed: int, restart_database: Callable[[], None] | None
) -> None:
    """For CHAOS_SECONDS, at random moments: kill a random process and start it again,
    or freeze one (SIGSTOP) for up to a second and let it go; and, given
    `restart_database`, restart the database server twice under the load. The first
    blows fall while the wave is being admitted and planned."""
    rng = random.Random(seed)
    until = time.monotonic() + CHAOS_SECONDS
    restarts = sorted(rng.uniform(1.0, CHAOS_SECONDS - 2.0) for _ in range(2))
    began = time.monotonic()
    time.sleep(rng.uniform(0.3, 1.0))
    kill_mid_mutation(fleet, until)
    while time.monotonic() < until:
        if restart_database is not None and restarts and time.monotonic() - began > restarts[0]:
            restarts.pop(0)
            restart_database()
            fleet.database_restarts += 1
        victim = rng.choice(names)
        if victim.startswith("serve") and rng.random() < 0.4:  # a serve holding the lock
            fleet.freeze(victim, rng.uniform(0.1, 1.0))
        else:
            fleet.kill(victim)
            time.sleep(rng.uniform(0.0, 0.5))
            fleet.start(victim)
        time.sleep(rng.uniform(0.2, 1.5))


def kill_mid_mutation(fleet: Fleet, until: float) -> None:
    """SIGKILL the worker that is running mutating work, once, and start it again: the
    run must not be executed twice, and its command's late change must die with it.
    The kill falls while the command runs: its first change is made and its late one
    (0.3 s later) is not. A run the database still calls `running` may already have
    ended its command, its worker not yet having recorded it; a kill then comes after
    the change, which no death can take back."""
    marks = fleet.workdir / "marks"
    while time.monotonic() < until:
        owners = [
            o for (run_id, o) in _rows(fleet.db, "SELECT run_id, lease_owner FROM runs "
                                                 "WHERE loop = 'act' AND state = 'running'")
            if o and _mid_command(marks, run_id)
        ]  # fmt: skip
        by_pid = {str(proc.pid): name for name, proc in fleet.procs.items()}
        names = [by_pid[o.rsplit("-", 1)[1]] for o in owners if o.rsplit("-", 1)[1] in by_pid]
        if names:
            fleet.kill(names[0])
            fleet.mid_mutation += 1
            fleet.start(names[0])
            return
        time.sleep(0.05)


def _mid_command(marks: Path, run_id: str) -> bool:
    """Whether run `run_id`'s command made its first change and not yet its late one."""
    made = [p.name for p in marks.glob(f"{run_id}.*")]
    return bool(made) and not any(name.endswith(".late") for name in made)


def _rows(db: str, query: str) -> list[tuple[Any, ...]]:
    """`rows`, or none while the database is restarting or locked."""
    try:
        return rows(db, query)
    except (sqlite3.Error, psycopg.Error):
        return []


@dataclass
class Counts:
    """What the history says went wrong (each must be 0) or merely happened."""

    lost: int = 0  # a due slot never admitted, a mutating run's change nobody is told of
    duplicated: int = 0  # a slot admitted twice, mutating work executed twice
    stuck: int = 0  # work not in a terminal state once the fleet drained
    re_executed: int = 0  # read-only runs run again after their worker died (allowed)
    escalated: int = 0  # mutating runs whose worker died mid-run: a person looks


def check_history(db: str, fleet: Fleet) -> Counts:
    """The database's account of the wave, checked against the invariants."""
    counts = Counts()
    events = rows(db, "SELECT event_id, loop, payload FROM events WHERE loop IN ('wave', 'act')")
    for loop, minutes in CADENCE.items():
        slots = sorted(json.loads(p)["slot"] for _, lp, p in events if lp == loop)
        counts.duplicated += len(slots) - len(set(slots))
        counts.lost += max(0, expected_slots(loop) - len(set(slots)))
        first = datetime.fromisoformat(slots[0].replace("Z", "+00:00"))
        expected = [first + timedelta(minutes=minutes * i) for i in range(len(slots))]
        assert first == T0, (loop, slots[0])
        assert slots == [m.strftime("%Y-%m-%dT%H:%M:%SZ") for m in expected], f"a gap: {loop}"

    event_ids = {e for e, _, _ in events}
    admitted = Counter(
        e for (e,) in rows(db, "SELECT entity_id FROM journal WHERE action = 'admitted'")
    )
    assert {e: n for e, n in admitted.items() if e in event_ids} == dict.fromkeys(event_ids, 1)
    decisions = Counter(e for (e,) in rows(db, "SELECT event_id FROM decisions"))
    assert set(decisions) == event_ids and set(decisions.values()) == {1}

    runs = {
        r: (e, loop, s)
        for r, e, loop, s in rows(db, "SELECT run_id, event_id, loop, state FROM runs")
    }
    assert sorted(e for e, _, _ in runs.values()) == sorted(event_ids), "not one run per slot"
    occurrences = dict(rows(db, "SELECT event_id, state FROM occurrences"))

    history: dict[str, list[tuple[str, str, Any]]] = defaultdict(list)
    for run_id, action, actor, data in rows(
        db, "SELECT entity_id, action, actor, data FROM journal WHERE entity = 'run' ORDER BY seq"
    ):
        history[run_id].append((action, actor, json.loads(data) if data else None))

    files = [p.name for p in (fleet.workdir / "marks").iterdir()]
    marks = Counter(f.split(".")[0] for f in files if not f.endswith(".late"))
    late = Counter(f.split(".")[0] for f in files if f.endswith(".late"))
    for run_id, (event_id, loop, state) in runs.items():
        steps = history[run_id]
        finished, expired = _walk_leases(run_id, steps)
        if state not in TERMINAL or occurrences.get(event_id) in ACTIVE:
            counts.stuck += 1
            continue
        if loop in MUTATING:
            _check_mutating(run_id, state, marks[run_id], late[run_id], steps, counts)
            if state != "succeeded":
                assert occurrences.get(event_id) == "human_attention_required", (run_id, steps)
        elif state == "succeeded":
            assert finished == 1, (run_id, steps)
            assert 1 <= marks[run_id] <= 1 + expired, (run_id, marks[run_id], steps)
            counts.re_executed += marks[run_id] > 1
        else:  # the lease policy: a read-only run is retried at most three times
            assert (state, expired, finished) == ("failed", 3, 0), (run_id, steps)
    assert set(marks) <= set(runs)
    ((unplanned, unpublished),) = rows(
        db,
        "SELECT (SELECT COUNT(*) FROM events WHERE planned = 0), "
        "(SELECT COUNT(*) FROM outbox WHERE published_at IS NULL)",
    )
    counts.stuck += int(unplanned) + int(unpublished)
    return counts


ACTIVE = {"created", "triaging", "waiting_for_resource", "work_dispatched", "verifying"}


def _walk_leases(run_id: str, steps: list[tuple[str, str, Any]]) -> tuple[int, int]:
    """Check that claims and their ends alternate (no run held by two workers at once);
    (times finished, times its lease expired)."""
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
            from_file = actor == "system" and data and data.get("recordedFrom")
            assert actor == holder or from_file, f"{run_id} finished by {actor}, not {holder}"
            holder, finished = None, finished + 1
    assert holder is None, (run_id, steps)
    return finished, expired


def _check_mutating(
    run_id: str, state: str, marks: int, late: int, steps: list[Any], counts: Counts
) -> None:
    """Mutating work runs at most once; a succeeded run did both of its changes; a run
    that did not succeed (its worker died or looked dead mid-run: failed, not
    re-executed, a person asked) left no change behind after it unless the journal says
    its execution ended after all (`late_result`, from a worker that was only slow):
    a killed worker's death takes the command's children too."""
    counts.duplicated += max(0, marks - 1)
    if state == "succeeded":
        assert (marks, late) == (1, 1), (run_id, marks, late, steps)
        return
    counts.escalated += 1
    actions = [a for a, _, _ in steps]
    told = "late_result" in actions
    assert late == 0 or told, f"{run_id} ({state}) changed something nobody recorded: {steps}"
    if marks and "lease_expired" not in actions:
        counts.lost += 1  # it ran, and nothing says it may have


def run_wave(
    db: str,
    workdir: Path,
    serves: int,
    workers: int,
    seed: int,
    restart_database: Callable[[], None] | None = None,
) -> tuple[Fleet, Counts]:
    fleet = Fleet(db, workdir)
    try:
        first_tick(fleet)
        fleet.began = time.monotonic()
        names = [f"serve{i + 1}" for i in range(serves)] + [
            f"worker{i + 1}" for i in range(workers)
        ]
        for name in names:
            fleet.start(name)
        wait_until(fleet.listening, "the serves listening", fleet, 60)
        chaos(fleet, names, seed, restart_database)
        for name in names:  # every process back up, to drain what is left
            if fleet.procs[name].poll() is not None:
                fleet.start(name)

        def drained() -> bool:
            now = progress(db)
            return (
                now["events"] >= sum(expected_slots(loop) for loop in CADENCE)
                and now["unplanned"] == 0
                and now["runs"] == now["events"]
                and now["open"] == 0
            )

        wait_until(drained, "the wave worked off", fleet, 240)
    finally:
        fleet.stop_all()
    assert fleet.kills, "the chaos killed nothing"
    assert fleet.mid_mutation == 1, "no worker was killed while it ran mutating work"
    counts = check_history(db, fleet)
    print(
        f"chaos: {len(fleet.kills)} kills ({fleet.mid_mutation} mid-mutation), "
        f"{len(fleet.freezes)} freezes, {fleet.database_restarts} database restarts; {counts}"
    )
    assert (counts.lost, counts.duplicated, counts.stuck) == (0, 0, 0), counts
    return fleet, counts


def test_three_serves_and_two_workers_on_postgresql_survive_sigkill(
    own_cluster: databases.Cluster, tmp_path: Path
) -> None:
    """PostgreSQL: three serves and two workers, each killed and restarted or frozen at
    random, and the database server restarted twice under the load."""

    def restart() -> None:
        own_cluster.halt()
        time.sleep(0.2)
        own_cluster.serve()

    fleet, _ = run_wave(own_cluster.url, tmp_path, 3, 2, seed=7, restart_database=restart)
    assert {n for n in fleet.kills if n.startswith("serve")}, "no serve was killed"
    assert fleet.database_restarts == 2


def test_two_serves_and_two_workers_on_sqlite_survive_sigkill(tmp_path: Path) -> None:
    """SQLite: two serves and two workers on one file, each killed and restarted, or
    frozen at random (holding the file's write lock, maybe)."""
    fleet, _ = run_wave(str(tmp_path / "engine.db"), tmp_path, 2, 2, seed=11)
    assert {n for n in fleet.kills if n.startswith("serve")}, "no serve was killed"
