"""The worker and the adapters against real subprocesses and a real SQLite file: closed
argv templates, the environment allowlist, timeouts, captured output, the fake and agent
adapters, and recovery of a worker killed mid-run through `engine reap`."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import databases
import pytest

from engine.bootstrap import open_service
from engine.cli.main import main
from engine.core.envelope import Envelope
from engine.core.records import RunRecord
from engine.errors import Conflict
from engine.loading import Paths
from engine.service import Execution, Service, executions
from engine.worker import adapters_for, run_worker, work_once

LEASE = 5.0
# Process checks read /proc, and a command dies with its worker on Linux only.
linux_only = pytest.mark.skipif(sys.platform != "linux", reason="needs /proc and PDEATHSIG")


# ---- helpers ------------------------------------------------------------------------


def submit(service: Service, event_type: str, payload: dict[str, Any], event_id: str) -> str:
    """Admit and plan one event; approve its proposal when it waits for an operator.
    The id of the queued run."""
    envelope = Envelope(
        eventId=event_id,
        type=event_type,
        source="test",
        occurredAt=datetime.now(UTC),
        payload=payload,
    )
    service.admit(envelope, "operator:tester")
    service.pump()
    for proposal in service.proposals(state="open"):
        if proposal.event_id == event_id:
            return service.approve(proposal.proposal_id, "operator:tester")[1].run_id
    (run,) = [r for r in service.runs() if r.event_id == event_id]
    return run.run_id


def run_once(service: Service) -> RunRecord:
    done = asyncio.run(work_once(service, "w1", LEASE))
    assert done is not None
    return done


def echo(service: Service, event_id: str, **payload: Any) -> RunRecord:
    run_id = submit(
        service, "test.echo.requested", {"title": "t", "name": "n", **payload}, event_id
    )
    done = run_once(service)
    assert done.run_id == run_id
    return done


def run_dir(service: Service, run: RunRecord | str) -> Path:
    return service.rt.artifacts / (run if isinstance(run, str) else run.run_id)


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def eventually(check: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def cli_args(paths: Paths, db: Path, *args: str) -> list[str]:
    return [*args, "--db", str(db), "--rules", str(paths.rules), "--registry", str(paths.registry)]


def engine_cli(paths: Paths, db: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "engine", *cli_args(paths, db, *args)]


def last_json_line(text: str) -> dict[str, Any]:
    value = json.loads(text.strip().splitlines()[-1])
    assert isinstance(value, dict)
    return value


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """The SQLite file `runtime_service` opened."""
    return tmp_path / "e.db"


@pytest.fixture
def workers() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Worker subprocesses a test starts; any still running at the end are killed."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---- the command adapter --------------------------------------------------------------


INJECTIONS = [
    "two words",
    "x --flag --output=/etc/passwd",
    "a; rm -rf ~",
    "$(touch {marker})",
    "`touch {marker}`",
    "line one\nline two\n--another",
    "{run_id} | cat /etc/passwd > {marker}",
]


@pytest.mark.parametrize("title", INJECTIONS)
def test_payload_values_stay_one_literal_argument(
    runtime_service: Service, tmp_path: Path, title: str
) -> None:
    """A payload value embedded in an argv element reaches the command as that one
    literal element, never split, expanded or run by a shell."""
    marker = tmp_path / "pwned"
    value = title.replace("{marker}", str(marker))
    done = echo(runtime_service, "echo-inject", title=value, name="plain-name")
    assert done.state == "succeeded", done.error
    assert done.result is not None
    assert done.result["details"]["argv"] == [f"--title={value}", "plain-name", done.run_id]
    assert not marker.exists()


@pytest.mark.parametrize(
    "payload",
    [
        {"name": "--output=/tmp/x"},
        {"name": "-rf"},
        {"name": "two words"},
        {"title": "-starts-with-a-dash"},
        {"name": ["a", "list"]},
        {"name": None},
    ],
)
def test_a_value_that_fails_its_type_refuses_the_run(
    runtime_service: Service, payload: dict[str, Any]
) -> None:
    """A payload value that does not fit its param type (e.g. a whole-element value
    starting with '-') fails the run without executing anything."""
    done = echo(runtime_service, "echo-refused", **payload)
    assert done.state == "failed"
    assert done.error is not None and "refused, nothing was run" in done.error
    assert list(run_dir(runtime_service, done).iterdir()) == []


def test_the_environment_is_an_allowlist(
    runtime_service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command sees PATH-like basics, its declared names and the run ids, never
    another variable of the engine's environment."""
    monkeypatch.setenv("ENGINE_SECRET_TOKEN", "s3cret")
    monkeypatch.setenv("RUNTIME_DECLARED", "visible")
    done = echo(runtime_service, "echo-env")
    assert done.result is not None
    env = done.result["details"]["env"]
    assert "ENGINE_SECRET_TOKEN" not in env
    assert "s3cret" not in json.dumps(env)
    assert env["RUNTIME_DECLARED"] == "visible"
    assert env["ENGINE_RUN_ID"] == done.run_id
    assert env["ENGINE_EVENT_ID"] == "echo-env"
    allowed = {"PATH", "LANG", "LC_ALL", "TZ", "HOME", "RUNTIME_SCRIPTS", "RUNTIME_DECLARED"}
    allowed |= {"ENGINE_RUN_ID", "ENGINE_EVENT_ID", "LC_CTYPE"}  # Python may coerce LC_CTYPE
    assert set(env) <= allowed


def test_stdout_is_captured_to_the_artifact_file(runtime_service: Service) -> None:
    """stdout goes to the definition's capture file in the run directory (the command's
    working directory), stderr beside it, and the run records the file."""
    done = echo(runtime_service, "echo-capture")
    folder = run_dir(runtime_service, done)
    assert done.artifact == str(folder / "echo.log")
    lines = (folder / "echo.log").read_text().splitlines()
    assert lines[0] == "echo: starting"
    assert json.loads(lines[-1]) == done.result
    assert (folder / "stderr.log").exists()
    assert done.result is not None and done.result["details"]["cwd"] == str(folder)
    assert json.loads((folder / "command.json").read_text())["argv"][-1] == done.run_id


@linux_only
def test_timeout_kills_the_whole_process_group(runtime_service: Service) -> None:
    """A command past its timeout is killed with every process it started, and the run
    ends timed_out."""
    submit(runtime_service, "test.probe.requested", {"mode": "forever"}, "probe-forever")
    done = run_once(runtime_service)
    assert done.state == "timed_out"
    assert done.error is not None and "timed out after 1s" in done.error
    pids = json.loads((run_dir(runtime_service, done) / "pids.json").read_text())
    assert eventually(lambda: not alive(pids["probe"]) and not alive(pids["child"]))


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("garbage", "exited with code 0 but printed no JSON object"),
        ("crash", "exited with code 3; stderr tail: boom: the probe crashed on purpose"),
        ("contract", "does not fit factory.command-result/v1"),
    ],
)
def test_a_command_without_a_good_result_fails_the_run(
    runtime_service: Service, mode: str, expected: str
) -> None:
    """No JSON result, a non-zero exit (even after a result line) or a result outside
    the output contract fails the run with an error saying why."""
    submit(runtime_service, "test.probe.requested", {"mode": mode}, f"probe-{mode}")
    done = run_once(runtime_service)
    assert done.state == "failed"
    assert done.error is not None and expected in done.error
    assert done.outcome == "FAILED"


# ---- the fake and agent adapters --------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "outcome", "result"),
    [
        ({}, "OK", {"outcome": "OK", "summary": "scripted"}),
        (
            {"fake": {"outcome": "BLOCKED", "result": {"summary": "told to"}}},
            "BLOCKED",
            {"outcome": "BLOCKED", "summary": "told to"},
        ),
    ],
)
def test_fake_adapter_answers_its_script_or_the_payload(
    runtime_service: Service, payload: dict[str, Any], outcome: str, result: dict[str, Any]
) -> None:
    """The fake adapter answers the definition's script, or the payload's `fake`
    override, and notes its answer in the run directory."""
    submit(runtime_service, "test.fake.requested", payload, "fake-1")
    done = run_once(runtime_service)
    assert (done.state, done.outcome, done.result) == ("succeeded", outcome, result)
    note = json.loads((run_dir(runtime_service, done) / "fake.json").read_text())
    assert note["answered"] == result


def test_agent_work_fails_visibly_without_a_runner(runtime_service: Service) -> None:
    """Agent work fails with a clear error: the engine has no agent runner."""
    submit(runtime_service, "test.agent.requested", {}, "agent-1")
    done = run_once(runtime_service)
    assert done.state == "failed"
    assert done.error == "no agent runner is configured for adapter 'agent'"


# ---- the worker loop ------------------------------------------------------------------


def test_run_worker_drains_the_queue_and_stops(runtime_service: Service) -> None:
    """run_worker executes every queued run, then returns once `stop` is set."""
    ids = [submit(runtime_service, "test.fake.requested", {}, f"fake-{n}") for n in range(3)]

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(
            run_worker(runtime_service, "w1", stop, poll_seconds=0.05, lease_seconds=LEASE)
        )
        while any(runtime_service.run(i).state != "succeeded" for i in ids):
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.wait_for(task, 2)

    asyncio.run(scenario())
    assert work_once_is_idle(runtime_service)


def work_once_is_idle(service: Service) -> bool:
    return asyncio.run(work_once(service, "w2", LEASE)) is None


@linux_only
def test_a_worker_that_loses_its_lease_stops_its_command(
    runtime_service: Service, db: Path, runtime_paths: Paths
) -> None:
    """When the reaper takes a run from a worker (its lease seen expired), the worker's
    next heartbeat stops the command: the run never runs twice at once."""
    run_id = submit(runtime_service, "test.slow.requested", {"seconds": 30}, "slow-lost")
    later = datetime.now(UTC) + timedelta(hours=1)
    reaper = open_service(str(db), runtime_paths, clock=lambda: later)

    async def scenario() -> RunRecord | None:
        task = asyncio.create_task(work_once(runtime_service, "w1", 0.6))
        folder = run_dir(runtime_service, run_id)
        while not list(folder.glob("started-*")):
            await asyncio.sleep(0.05)
        await asyncio.to_thread(reaper.reap, True, timedelta(hours=24))
        return await asyncio.wait_for(task, 5)

    done = asyncio.run(scenario())
    reaper.rt.store.close()
    assert done is not None and done.state == "queued"
    (marker,) = run_dir(runtime_service, run_id).glob("started-*")
    assert eventually(lambda: not alive(int(marker.read_text())))


def test_sigterm_lets_the_running_command_finish_then_exits_cleanly(
    runtime_service: Service, runtime_paths: Paths, db: Path, workers: list[Any]
) -> None:
    """SIGTERM stops `engine worker` from claiming; the run in hand finishes and is
    recorded, and the worker exits 0."""
    first = submit(runtime_service, "test.slow.requested", {"seconds": 1}, "slow-term")
    second = submit(runtime_service, "test.fake.requested", {}, "fake-after-term")
    proc, log = start_worker(runtime_paths, db, workers, "--id", "polite")
    started_command(runtime_service, first, log)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0, log.read_text()
    assert runtime_service.run(first).state == "succeeded"
    assert runtime_service.run(second).state == "queued"


def test_finishing_a_run_the_reaper_took_is_a_conflict(
    runtime_service: Service, db: Path, runtime_paths: Paths
) -> None:
    """A worker that finishes after the reaper requeued its run gets a Conflict, and the
    requeued run is left as it is."""
    run_id = submit(runtime_service, "test.fake.requested", {}, "fake-late")
    claimed = runtime_service.claim("late", LEASE)
    assert claimed is not None and runtime_service.start(claimed, "late") == "started"
    later = datetime.now(UTC) + timedelta(hours=1)
    reaper = open_service(str(db), runtime_paths, clock=lambda: later)
    reaper.reap(True, timedelta(hours=24))
    reaper.rt.store.close()
    requeued = runtime_service.run(run_id)
    with pytest.raises(Conflict):
        runtime_service.finish(claimed, "late", Execution(result={"outcome": "OK"}))
    assert runtime_service.run(run_id) == requeued
    assert requeued.state == "queued"


class ReapedMidRun:
    """An adapter whose run is taken by the reaper while it executes (its worker looks
    dead: frozen, or cut off from the database), then ends OK."""

    def __init__(self, db: Path, paths: Paths) -> None:
        self.db, self.paths = db, paths

    async def execute(self, job: Any) -> Execution:
        later = datetime.now(UTC) + timedelta(hours=1)
        reaper = open_service(str(self.db), self.paths, clock=lambda: later)
        reaper.reap(True, timedelta(hours=24))
        reaper.rt.store.close()
        return Execution(result={"outcome": "OK", "summary": "done after all"})


def test_a_result_the_lease_outlived_is_journaled_late(
    runtime_service: Service, db: Path, runtime_paths: Paths
) -> None:
    """When the reaper took a run whose worker was alive, the worker cannot record its
    result, but the journal says what the execution came to (`late_result`, outcome OK,
    actor the worker), so a person looking at the run knows the work was done."""
    run_id = submit(runtime_service, "test.fake.requested", {}, "fake-reaped")
    adapters = adapters_for(str(db), runtime_paths, {"fake": ReapedMidRun(db, runtime_paths)})
    done = asyncio.run(work_once(runtime_service, "slow", LEASE, adapters))
    assert done is not None and done.state == "queued"  # read-only: requeued by the policy
    late = [e for e in runtime_service.journal(1000, 0, "run", run_id) if e.action == "late_result"]
    assert [(e.actor, e.data["outcome"]) for e in late] == [("worker:slow", "OK")]
    assert "after the lease was lost; the run stays queued" in late[0].note
    assert not executions.path(run_dir(runtime_service, run_id)).exists()


# ---- a worker killed mid-run -------------------------------------------------------------


def start_worker(
    paths: Paths, db: Path, workers: list[Any], *options: str
) -> tuple[subprocess.Popen[bytes], Path]:
    """`engine worker` as a subprocess; its stderr goes to the returned log file."""
    log = db.parent / "worker.log"
    cmd = engine_cli(paths, db, "worker", "--poll", "0.1", *options)
    with log.open("wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    workers.append(proc)
    return proc, log


def started_command(service: Service, run_id: str, log: Path) -> int:
    """Wait until the run's command runs; its pid."""
    folder = run_dir(service, run_id)

    def written() -> bool:  # the marker exists and holds the pid (not half-written)
        return any(m.read_text().strip().isdigit() for m in folder.glob("started-*"))

    assert eventually(written, 10), log.read_text()
    (marker,) = folder.glob("started-*")
    return int(marker.read_text())


def kill_worker_mid_run(
    service: Service, paths: Paths, db: Path, run_id: str, workers: list[Any]
) -> int:
    """Start `engine worker --lease 1` on the queued run and SIGKILL it once its command
    runs. The pid of that command."""
    proc, log = start_worker(paths, db, workers, "--id", "doomed", "--lease", "1")
    pid = started_command(service, run_id, log)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return pid


def wait_for_lease_expiry(service: Service, run_id: str) -> None:
    assert eventually(lambda: service.rt.clock() > _lease_end(service, run_id), 3)


def _lease_end(service: Service, run_id: str) -> datetime:
    lease = service.run(run_id).lease_expires_at
    assert lease is not None
    return datetime.fromisoformat(lease.replace("Z", "+00:00"))


def reap_apply(paths: Paths, db: Path) -> dict[str, Any]:
    out = subprocess.run(
        engine_cli(paths, db, "reap", "--apply"), capture_output=True, text=True, check=True
    )
    return last_json_line(out.stdout)


@linux_only
def test_killed_worker_read_only_run_is_requeued_and_completed(
    runtime_service: Service, runtime_paths: Paths, db: Path, workers: list[Any]
) -> None:
    """A read-only run whose worker was SIGKILLed is requeued by `engine reap --apply`
    after its lease expired, and a second worker completes it; the first command died
    with its worker."""
    run_id = submit(runtime_service, "test.slow.requested", {"seconds": 30}, "slow-ro")
    first = kill_worker_mid_run(runtime_service, runtime_paths, db, run_id, workers)
    assert eventually(lambda: not alive(first), 0.5)
    wait_for_lease_expiry(runtime_service, run_id)
    doc = reap_apply(runtime_paths, db)
    assert doc["outcome"] == "OK"
    assert doc["details"]["leases"] == [{"runId": run_id, "to": "queued", "worker": "doomed"}]
    assert runtime_service.run(run_id).state == "queued"
    done = run_once(runtime_service)
    assert (done.run_id, done.state, done.outcome, done.attempts) == (run_id, "succeeded", "OK", 2)
    assert len(list(run_dir(runtime_service, run_id).glob("started-*"))) == 2


def test_killed_worker_mutating_run_fails_and_never_runs_twice(
    runtime_service: Service, runtime_paths: Paths, db: Path, workers: list[Any]
) -> None:
    """A mutating run whose worker was SIGKILLed is failed by the reaper with
    lease_expired, and no worker runs it again."""
    run_id = submit(runtime_service, "test.slow-mutating.requested", {"seconds": 30}, "slow-mut")
    kill_worker_mid_run(runtime_service, runtime_paths, db, run_id, workers)
    wait_for_lease_expiry(runtime_service, run_id)
    doc = reap_apply(runtime_paths, db)
    assert doc["details"]["leases"] == [{"runId": run_id, "to": "failed", "worker": "doomed"}]
    failed = runtime_service.run(run_id)
    assert failed.state == "failed"
    assert failed.error is not None and "mutating runs are not re-executed" in failed.error
    actions = [e.action for e in runtime_service.journal(entity="run", entity_id=run_id)]
    assert "lease_expired" in actions
    assert work_once_is_idle(runtime_service)
    assert len(list(run_dir(runtime_service, run_id).glob("started-*"))) == 1


# ---- engine reap ------------------------------------------------------------------------


def test_the_reaper_command_reaches_the_workers_database(
    runtime_service: Service, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`{python} -m engine reap --apply` run as a command finds the worker's database
    through ENGINE_DB and ends with a command-result line the run records."""
    monkeypatch.delenv("ENGINE_DB", raising=False)
    run_id = submit(runtime_service, "test.reap.requested", {}, "reap-1")
    done = asyncio.run(work_once(runtime_service, "w1", LEASE, adapters_for(str(db))))
    assert done is not None and done.run_id == run_id
    assert (done.state, done.outcome) == ("succeeded", "OK"), done.error
    assert done.result is not None and done.result["details"]["applied"] is True
    assert done.artifact == str(run_dir(runtime_service, run_id) / "reaper.log")
    assert not (run_dir(runtime_service, run_id) / "var").exists()


def test_reap_dry_run_changes_nothing(
    runtime_service: Service,
    runtime_paths: Paths,
    db: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`engine reap` without --apply reports the expired lease it would recover, ends
    with a command-result line, and changes nothing."""
    run_id = submit(runtime_service, "test.slow.requested", {"seconds": 1}, "slow-dry")
    claimed = runtime_service.claim("gone", 0.01)
    assert claimed is not None and claimed.run_id == run_id
    time.sleep(0.05)
    journal = runtime_service.journal(limit=1000)
    code = main(cli_args(runtime_paths, db, "reap"))
    out = capsys.readouterr().out
    assert code == 0
    assert "dry run" in out.splitlines()[0]
    doc = last_json_line(out)
    assert doc["outcome"] == "OK" and doc["summary"].startswith("dry run")
    assert doc["details"] == {
        "applied": False,
        "leases": [{"runId": run_id, "to": "queued", "worker": "gone"}],
        "proposals": [],
    }
    assert runtime_service.run(run_id) == claimed
    assert runtime_service.journal(limit=1000) == journal


# ---- a run's processes end with the run -----------------------------------------------


def spawned(service: Service, run_id: str, within: float = 10) -> int:
    """Wait until the run's command has started its grandchild; the grandchild's pid."""
    pid_file = run_dir(service, run_id) / "grandchild.pid"
    assert eventually(lambda: pid_file.exists() and bool(pid_file.read_text()), within)
    return int(pid_file.read_text())


def no_late_effect(service: Service, run_id: str, grandchild: int) -> None:
    """The grandchild is gone, so the change it would have made later never lands."""
    assert eventually(lambda: not alive(grandchild), 5), "the grandchild is still running"
    assert not (run_dir(service, run_id) / "late-effect").exists()


@linux_only
def test_killing_the_worker_kills_everything_its_command_started(
    runtime_service: Service, runtime_paths: Paths, db: Path, workers: list[Any]
) -> None:
    """SIGKILL to `engine worker` kills its command's whole process group: a grandchild
    that would have changed something two seconds later never does (it is gone before
    then, and it is the only process that would)."""
    run_id = submit(runtime_service, "test.spawn.requested", {"delay": 2, "linger": 60}, "sp-kill")
    proc, log = start_worker(runtime_paths, db, workers, "--id", "doomed")
    command = started_command(runtime_service, run_id, log)
    grandchild = spawned(runtime_service, run_id)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    no_late_effect(runtime_service, run_id, grandchild)
    assert eventually(lambda: not alive(command), 1)


@linux_only
def test_a_timeout_kills_everything_its_command_started(runtime_service: Service) -> None:
    """A command past its timeout is killed with its grandchild: the run is timed_out
    and the grandchild's later change never lands."""
    payload = {"delay": 2, "linger": 60}
    run_id = submit(runtime_service, "test.spawn-brief.requested", payload, "sp-timeout")
    done = run_once(runtime_service)
    assert (done.run_id, done.state) == (run_id, "timed_out")
    no_late_effect(runtime_service, run_id, spawned(runtime_service, run_id, 1))


@linux_only
def test_what_a_command_leaves_running_when_it_exits_is_killed(runtime_service: Service) -> None:
    """A command that exits while a process it started still runs has that process
    killed with it: the run is recorded, and nothing of it lands afterwards."""
    run_id = submit(runtime_service, "test.spawn.requested", {"delay": 2, "linger": 0}, "sp-exit")
    done = run_once(runtime_service)
    assert (done.run_id, done.state, done.outcome) == (run_id, "succeeded", "OK")
    no_late_effect(runtime_service, run_id, spawned(runtime_service, run_id, 1))


@linux_only
def test_an_operators_cancel_stops_the_run_within_seconds(
    runtime_service: Service, db: Path, runtime_paths: Paths
) -> None:
    """An operator's cancel (from another process's connection) stops the execution as
    soon as the worker's once-a-second watch sees it, long before the next heartbeat
    of a 60 s lease, and kills the command's whole group."""
    run_id = submit(runtime_service, "test.spawn.requested", {"delay": 3, "linger": 60}, "sp-stop")
    operator = open_service(str(db), runtime_paths)

    async def scenario() -> RunRecord | None:
        task = asyncio.create_task(work_once(runtime_service, "w1", 60.0))
        grandchild = await asyncio.to_thread(spawned, runtime_service, run_id)
        await asyncio.to_thread(operator.cancel, run_id, "operator:alice", "not now")
        done = await asyncio.wait_for(task, 10)  # the next heartbeat would be at 20 s
        await asyncio.to_thread(no_late_effect, runtime_service, run_id, grandchild)
        return done

    try:
        done = asyncio.run(scenario())
    finally:
        operator.rt.store.close()
    assert done is not None and (done.run_id, done.state) == (run_id, "cancelled")


# ---- a result survives the worker and the database ------------------------------------


def hold_write_lock(db: Path) -> sqlite3.Connection:
    """Another process's writer holding the SQLite database (every write waits)."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def kill_before_recording(
    service: Service, paths: Paths, db: Path, workers: list[Any], run_id: str
) -> None:
    """Start `engine worker --id doomed --lease 2` on the queued run, hold the database
    while its command runs so the result cannot be recorded, and SIGKILL the worker once
    the result waits on disk."""
    proc, log = start_worker(paths, db, workers, "--id", "doomed", "--lease", "2")
    started_command(service, run_id, log)
    lock = hold_write_lock(db)
    try:
        pending = executions.path(run_dir(service, run_id))
        assert eventually(pending.exists, 10), log.read_text()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        lock.rollback()
        lock.close()
    assert service.run(run_id).state == "running"


def recorded_from_disk(service: Service, run_id: str) -> None:
    """The run was recorded from the file as its command ended: succeeded with its
    outcome and chain, journaled by `system`, executed once, the file removed."""
    done = service.run(run_id)
    assert (done.state, done.outcome, done.error) == ("succeeded", "OK", None)
    entries = service.journal(entity="run", entity_id=run_id)
    (finished,) = [e for e in entries if e.action == "finished"]
    assert finished.actor == "system" and "result file worker:doomed left" in finished.note
    assert finished.data == {
        "outcome": "OK",
        "recordedFrom": executions.PENDING,
        "worker": "doomed",
    }
    assert [e.action for e in entries].count("chained") == 1
    assert "lease_expired" not in [e.action for e in entries]
    assert len(list(run_dir(service, run_id).glob("started-*"))) == 1
    assert not executions.path(run_dir(service, run_id)).exists()


def test_the_reaper_records_the_result_a_killed_worker_left(
    runtime_service: Service, runtime_paths: Paths, db: Path, workers: list[Any]
) -> None:
    """A mutating run whose command completed but whose worker was SIGKILLed before it
    recorded the result is recorded by the lease-expiry policy from the result file
    (succeeded, chained), not failed as "not re-executed"."""
    payload = {"seconds": 1}
    run_id = submit(runtime_service, "test.slow-mutating.requested", payload, "mut-disk")
    kill_before_recording(runtime_service, runtime_paths, db, workers, run_id)
    wait_for_lease_expiry(runtime_service, run_id)
    doc = reap_apply(runtime_paths, db)
    assert doc["details"]["leases"] == [
        {"runId": run_id, "to": "succeeded", "worker": "doomed", "recordedFrom": "result file"}
    ]
    assert "1 recorded from result files, 0 failed" in doc["summary"]
    recorded_from_disk(runtime_service, run_id)


def test_a_restarted_worker_records_the_result_it_left(
    runtime_service: Service, runtime_paths: Paths, db: Path, workers: list[Any]
) -> None:
    """A worker started again under the same id records the result its killed process
    left on disk, at once (its lease has not expired yet), instead of failing the run."""
    payload = {"seconds": 1}
    run_id = submit(runtime_service, "test.slow-mutating.requested", payload, "mut-again")
    kill_before_recording(runtime_service, runtime_paths, db, workers, run_id)
    proc, log = start_worker(runtime_paths, db, workers, "--id", "doomed")
    assert eventually(lambda: runtime_service.run(run_id).state == "succeeded", 10), log.read_text()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    recorded_from_disk(runtime_service, run_id)
    assert "from its result file" in log.read_text()


def test_a_postgresql_restart_loses_no_finished_run(
    own_cluster: databases.Cluster, runtime_paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three mutating runs execute while the PostgreSQL server goes down and comes back
    (their commands end while it is away): heartbeats and the finish are retried, so
    each run is recorded succeeded with its outcome and chained event, executed once."""
    monkeypatch.setenv("RUNTIME_SCRIPTS", str(RUNTIME_SCRIPTS))
    service = open_service(own_cluster.url, runtime_paths)
    ids = [
        submit(service, "test.slow-mutating.requested", {"seconds": 2}, f"pg-blip-{n}")
        for n in range(3)
    ]

    async def scenario() -> list[RunRecord | None]:
        tasks = [asyncio.create_task(work_once(service, f"w{n}", 3.0)) for n in range(3)]
        folders = [run_dir(service, i) for i in ids]
        while not all(list(f.glob("started-*")) for f in folders):
            await asyncio.sleep(0.05)
        await asyncio.to_thread(own_cluster.halt)
        # the commands end while the database is away: each result waits on disk (or,
        # should the server have taken that long to stop, was recorded before)
        deadline = time.monotonic() + 30
        ended = list(zip(folders, tasks, strict=True))
        while not all(executions.path(f).exists() or t.done() for f, t in ended):
            assert time.monotonic() < deadline, "the commands never ended"
            await asyncio.sleep(0.05)
        await asyncio.to_thread(own_cluster.serve)
        return list(await asyncio.wait_for(asyncio.gather(*tasks), 60))

    try:
        done = asyncio.run(scenario())
        assert sorted((r.run_id, r.state, r.outcome) for r in done if r is not None) == sorted(
            (i, "succeeded", "OK") for i in ids
        )
        for run_id in ids:
            entries = service.journal(entity="run", entity_id=run_id)
            assert [e.action for e in entries].count("chained") == 1
            assert len(list(run_dir(service, run_id).glob("started-*"))) == 1
            assert not executions.path(run_dir(service, run_id)).exists()
    finally:
        service.rt.store.close()


RUNTIME_SCRIPTS = Path(__file__).resolve().parents[1] / "data" / "runtime" / "scripts"
