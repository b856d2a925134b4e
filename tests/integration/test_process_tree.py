"""A run's processes end with the run, also those that left its process group
(docs/runtime.md, "The adapters"): a real `engine worker` runs a command whose
descendant calls setsid, or is a double-forked daemon, and after an operator's cancel,
the worker's SIGKILL, or the command's own exit, no process of the run is left; nor of
a watch's probe, which runs under the same supervisor."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.adapters.probe import ProbeRunner
from engine.bootstrap import open_service
from engine.core.envelope import Envelope
from engine.core.registry import Probe
from engine.loading import Paths
from engine.service import Service

TREE = Path(__file__).resolve().parent.parent / "data" / "proctree"
PROC = Path("/proc")
# Generous: the tree ends within a second or two; this only bounds a broken engine.
DEADLINE = 30.0

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="needs /proc and prctl")


@pytest.fixture
def paths() -> Paths:
    return Paths(TREE / "loops", TREE / "registry", TREE / "config")


@pytest.fixture
def service(tmp_path: Path, paths: Paths, monkeypatch: pytest.MonkeyPatch) -> Iterator[Service]:
    """A Service on a fresh SQLite file over tests/data/proctree."""
    monkeypatch.setenv("PROCTREE_SCRIPTS", str(TREE / "scripts"))
    service = open_service(str(tmp_path / "e.db"), paths)
    yield service
    service.rt.store.close()


@pytest.fixture
def worker(tmp_path: Path, paths: Paths, service: Service) -> Iterator[subprocess.Popen[bytes]]:
    """`engine worker` on the service's database, killed at the end if still running,
    and whatever a failed test left of its runs with it."""
    db = tmp_path / "e.db"
    cmd = [sys.executable, "-m", "engine", "worker", "--poll", "0.1", "--id", "w"]
    cmd += ["--db", str(db), "--rules", str(paths.rules), "--registry", str(paths.registry)]
    with (tmp_path / "worker.log").open("wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for run in service.runs():
        for pid in of_the_run(run.run_id):
            with suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def approved_run(service: Service, how: str, linger: int) -> str:
    """Admit an `escape` request, plan it and approve its proposal: the queued run."""
    envelope = Envelope(
        eventId=f"escape-{how}-{uuid.uuid4().hex}",  # a run id no other test's has
        type="test.escape.requested",
        source="test",
        occurredAt=datetime.now(UTC),
        payload={"how": how, "linger": linger},
    )
    service.admit(envelope, "operator:tester")
    service.pump()
    (proposal,) = service.proposals(state="open")
    return service.approve(proposal.proposal_id, "operator:tester")[1].run_id


def eventually(check: Callable[[], bool], seconds: float = DEADLINE) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def escapee(service: Service, run_id: str, log: Path) -> int:
    """Wait until the command runs and its descendant has left the group; its pid."""
    folder = service.rt.artifacts / run_id
    assert eventually(lambda: any(folder.glob("started-*"))), log.read_text()
    (marker,) = folder.glob("started-*")
    pid = int((folder / "escapee.pid").read_text())
    command = session_of(int(marker.read_text()))
    assert session_of(pid) not in (None, command), "the descendant did not leave the session"
    return pid


def session_of(pid: int) -> int | None:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[3])


def of_the_run(run_id: str) -> list[int]:
    """Every live (not zombie) process whose environment carries the run's id: the
    supervisor, the command and everything they started."""
    marker = f"ENGINE_RUN_ID={run_id}".encode()
    found = []
    for entry in PROC.iterdir():
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):  # not a process, or gone meanwhile
            continue
        if marker in environ.split(b"\0") and state != "Z":
            found.append(int(entry.name))
    return found


def nothing_left(run_id: str, pid: int) -> None:
    """No process of the run survives, the escaped descendant included."""
    assert eventually(lambda: not of_the_run(run_id) and session_of(pid) is None), (
        f"still running: {of_the_run(run_id)}"
    )


@pytest.mark.parametrize("how", ["setsid", "daemon"])
def test_a_cancel_ends_what_left_the_group(
    service: Service, worker: subprocess.Popen[bytes], tmp_path: Path, paths: Paths, how: str
) -> None:
    """An operator's cancel of a running command ends its descendant that left the
    process group (setsid, or a double-forked daemon) with the rest of the run."""
    run_id = approved_run(service, how, 300)
    pid = escapee(service, run_id, tmp_path / "worker.log")
    operator = open_service(str(tmp_path / "e.db"), paths)
    try:
        operator.cancel(run_id, "operator:alice", "not now")
    finally:
        operator.rt.store.close()
    nothing_left(run_id, pid)
    assert service.run(run_id).state == "cancelled"


@pytest.mark.parametrize("how", ["setsid", "daemon"])
def test_a_killed_worker_leaves_nothing_of_its_run(
    service: Service, worker: subprocess.Popen[bytes], tmp_path: Path, how: str
) -> None:
    """SIGKILL to the worker ends every process of the run it was executing, also the
    descendant that left the process group: nothing is left to act beside a retry."""
    run_id = approved_run(service, how, 300)
    pid = escapee(service, run_id, tmp_path / "worker.log")
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    nothing_left(run_id, pid)


@pytest.mark.parametrize("how", ["setsid", "daemon"])
def test_what_left_the_group_ends_when_the_command_exits(
    service: Service, worker: subprocess.Popen[bytes], tmp_path: Path, how: str
) -> None:
    """A command that exits while its descendant outside the group still runs is
    recorded, and the descendant ends with it."""
    run_id = approved_run(service, how, 0)
    assert eventually(lambda: service.run(run_id).state == "succeeded")
    pid = int((service.rt.artifacts / run_id / "escapee.pid").read_text())
    nothing_left(run_id, pid)


ESCAPING_PROBE = (
    "import subprocess, sys, time; "
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], "
    "start_new_session=True); "
    "open(sys.argv[1], 'w').write(str(p.pid)); print('[]'); sys.stdout.flush(); "
    "time.sleep(float(sys.argv[2]))"
)


@pytest.mark.parametrize(("linger", "failure"), [(0, None), (300, "timed out after 1s")])
def test_a_probe_leaves_nothing_behind(tmp_path: Path, linger: int, failure: str | None) -> None:
    """A watch's probe whose child calls setsid has that child ended with it, when the
    probe exits and when it times out."""
    pidfile = tmp_path / "escapee.pid"
    argv = ("{python}", "-c", ESCAPING_PROBE, str(pidfile), str(linger))
    run = ProbeRunner()(Probe(id="escaping", argv=argv, timeout="1s"), {})
    assert (run.failure or "").split(";")[0] == (failure or "")
    pid = int(pidfile.read_text())
    assert eventually(lambda: session_of(pid) is None), f"the probe's child {pid} still runs"
