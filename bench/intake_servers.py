"""The servers bench/intake.py loads and the processes it starts: the bare aiohttp floor,
the octokit peer and `engine serve`, each a subprocess on a free loopback port in a
session of its own, logged to a file, and stopped by its own process group id (SIGTERM,
then SIGKILL after a grace) however the benchmark ends."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from intake_load import Delivery

from engine.api.settings import GITHUB_SECRET_ENV
from engine.core.decisions import Actor
from engine.loading import project_root

HOST = "127.0.0.1"
PEER = project_root().parent / "shared" / "bench" / "peer_octokit.sh"
BARE = Path(__file__).with_name("intake_bare.py")
REPO_NAME = "bench"
MERGE_REQUESTED = "factory.merge.requested"
GITHUB_ACTOR = str(Actor.GITHUB)  # who admits what POST /github translates


# ---- processes ---------------------------------------------------------------------------


@dataclass
class Children:
    """Every process the benchmark starts. Use as a context manager: leaving it, by a
    return, an error or Ctrl-C, stops whatever is still running."""

    logs: Path
    running: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(
        self, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        log = (self.logs / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        log.close()
        self.running.append(proc)
        return proc

    def run(self, name: str, argv: list[str], timeout: float) -> str:
        """Run a bounded command to its end (killed after `timeout`); its output."""
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.running.append(proc)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop(proc, grace=1.0)
            raise RuntimeError(f"{name} did not finish within {timeout:.0f} s") from None
        finally:
            self.stop(proc)
        return out.decode(errors="replace")

    def stop(self, proc: subprocess.Popen[bytes], grace: float = 15.0) -> int | None:
        """SIGTERM to the child's own process group, SIGKILL after `grace` seconds.
        Only while the child is unreaped, so the group id is still its own."""
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
        if proc in self.running:
            self.running.remove(proc)
        return proc.returncode

    def __enter__(self) -> Children:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        for proc in reversed(list(self.running)):
            self.stop(proc, grace=5.0)


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(proc.pid, sig)  # start_new_session: the child leads its own group


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


# ---- the servers -------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    key: str  # bare | peer | engine
    label: str
    argv: list[str]
    port: int
    env: dict[str, str] | None = None
    ready_s: float = 30.0  # the peer installs its npm packages on first use


def bare_server() -> Server:
    port = free_port()
    argv = [sys.executable, str(BARE), str(port)]
    return Server("bare", "bare aiohttp handler", argv, port)


def peer_server(script: Path, secret: str) -> Server:
    port = free_port()
    argv = ["bash", str(script), str(port), secret]
    return Server("peer", "octokit/webhooks (Node)", argv, port, ready_s=600.0)


def write_config(root: Path, body: bytes) -> Path:
    """A config directory whose one repository is the delivery's, on its base branch."""
    payload = json.loads(body)
    full_name = payload["repository"]["full_name"]
    base = payload["pull_request"]["base"]["ref"]
    config = root / "config"
    config.mkdir()
    (config / "repos.yaml").write_text(
        f"repos:\n  {REPO_NAME}:\n    github: {full_name}\n    base: {base}\n"
    )
    return config


def engine_server(db: Path, config: Path, secret: str) -> Server:
    port = free_port()
    argv = [sys.executable, "-m", "engine", "serve", "--db", str(db)]
    argv += ["--host", HOST, "--port", str(port), "--no-worker", "--config", str(config)]
    env = dict(os.environ, **{GITHUB_SECRET_ENV: secret})
    return Server("engine", "engine POST /github", argv, port, env=env)


def wait_ready(server: Server, proc: subprocess.Popen[bytes], logs: Path) -> float:
    """Seconds until the port accepts a connection; RuntimeError if the child exits or
    the time runs out."""
    start = time.perf_counter()
    while time.perf_counter() - start < server.ready_s:
        if proc.poll() is not None:
            raise RuntimeError(f"{server.label} exited {proc.returncode}:\n{tail(logs, server)}")
        try:
            with socket.create_connection((HOST, server.port), timeout=0.5):
                return time.perf_counter() - start
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{server.label} not listening after {server.ready_s:.0f} s")


def tail(logs: Path, server: Server, lines: int = 15) -> str:
    path = logs / f"{server.key}.log"
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def probe(server: Server, delivery: Delivery, guid: str) -> dict[str, Any]:
    """One delivery by urllib: its status and (up to 300 characters of) its answer."""
    url = f"http://{HOST}:{server.port}/github"
    request = urllib.request.Request(url, delivery.body, delivery.headers(guid), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, text = response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        status, text = err.code, err.read().decode(errors="replace")
    return {"status": status, "answer": text.strip()[:300]}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---- durability --------------------------------------------------------------------------


def count_admitted(db: Path) -> dict[str, Any]:
    """What the SQLite file holds after the engine stopped: the factory.merge.requested
    events GitHub intake admitted, events by type and by the actor that admitted them,
    how many are planned, and the journal's rows."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        merge = conn.execute(
            "SELECT count(*) FROM events WHERE type = ? AND admitted_by = ?",
            (MERGE_REQUESTED, GITHUB_ACTOR),
        ).fetchone()[0]
        by_type = dict(conn.execute("SELECT type, count(*) FROM events GROUP BY type"))
        by_actor = dict(conn.execute("SELECT admitted_by, count(*) FROM events GROUP BY 1"))
        planned = conn.execute("SELECT count(*) FROM events WHERE planned = 1").fetchone()[0]
        journal = conn.execute("SELECT count(*) FROM journal").fetchone()[0]
    conn.close()
    return {
        "merge_requested": merge,
        "events_by_type": by_type,
        "events_by_actor": by_actor,
        "planned": planned,
        "journal_rows": journal,
    }
