"""One frozen process never stalls the others (issue 12): a real process holds the
database's writer lock and is stopped with SIGSTOP, as a serve frozen mid-write would
be, while a healthy `engine serve` on the same database goes on answering.

On both backends the healthy serve's `GET /status` answers at once, its admissions are
refused with 503 `database_busy` once its lock timeout passes (never a hang, never a
500), and it admits again once the lock is free: on SQLite when the frozen holder is
gone, on PostgreSQL as soon as the server ends the holder's session for sitting idle in
its transaction, while the holder is still stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from conftest import API_TREE, EVENT_SECRET, OPERATOR_TOKENS, Serve, launch_serve

LOCK_S = 3.0  # the healthy serve's ENGINE_DB_LOCK_TIMEOUT
IDLE_S = 12.0  # PostgreSQL: the holder's ENGINE_DB_IDLE_TIMEOUT, well past the steps below
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))

# A process that opens the store the way serve does, takes the writer lock, says so and
# then sits in its transaction until it is stopped or killed.
HOLDER = """
import sys, time
from engine.bootstrap import open_store
store = open_store(sys.argv[1])
with store.write() as tx:
    print("held", flush=True)
    time.sleep(600)
"""


def call(serve: Serve, method: str, path: str, body: Any, timeout: float) -> tuple[int, Any]:
    """(status, JSON answer) of one request that must be answered within `timeout`."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        serve.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with _NO_PROXY.open(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        with err:
            return err.code, json.loads(err.read())


def envelope(n: int) -> dict[str, Any]:
    return {
        "eventId": f"frozen-{time.time_ns()}-{n}",
        "type": "api.work.requested",
        "source": "manual",
        "occurredAt": "2026-11-30T09:00:00Z",
        "payload": {"repo": "alpha"},
    }


def start_holder(database: str) -> subprocess.Popen[str]:
    env = {**os.environ, "ENGINE_DB_IDLE_TIMEOUT": str(IDLE_S)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, database], stdout=subprocess.PIPE, text=True, env=env
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def start_commands(serve: Serve, database: str, *argvs: list[str]) -> list[subprocess.Popen[str]]:
    """Start `engine` commands on the serve's database and rules (at once, as real
    subprocesses) with the serve's lock timeout."""
    env = {**serve.env, "ENGINE_DB_LOCK_TIMEOUT": str(LOCK_S)}
    return [
        subprocess.Popen(
            [sys.executable, "-m", "engine", *argv, *serve.argv(), "--db", database],
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for argv in argvs
    ]


def results(started: list[subprocess.Popen[str]]) -> list[subprocess.CompletedProcess[str]]:
    """What the commands of `start_commands` answered, once they end."""
    done = []
    for process in started:
        out, err = process.communicate(timeout=LOCK_S * 10)
        done.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return done


def admit_until_accepted(serve: Serve, within: float) -> int:
    """Admit fresh envelopes until one is accepted (202); the number of tries."""
    deadline = time.monotonic() + within
    for tries in range(1, 1000):
        status, answer = call(serve, "POST", "/inject", envelope(tries), LOCK_S * 4)
        if status == 202:
            return tries
        assert (status, answer["details"]["reason"]) == (503, "database_busy"), answer
        assert time.monotonic() < deadline, "the healthy serve never admitted again"
    raise AssertionError("unreachable")


def test_a_stopped_writer_never_stalls_a_healthy_serve(database: str, tmp_path: Path) -> None:
    """While a SIGSTOPped process holds the writer lock, a healthy serve's /status
    answers at once and says the store cannot write (`database_busy`), its admissions
    are 503 `database_busy` within its lock timeout, `engine runs` answers and `engine
    reap --apply` is one `error:` line (exit 1), and it admits again once the lock
    is free (SQLite: the holder is gone; PostgreSQL: the server ended the holder's idle
    session, the holder still stopped); its log has no traceback."""
    secrets = {
        "ENGINE_EVENT_SECRET": EVENT_SECRET,
        "ENGINE_OPERATOR_TOKEN": ",".join(f"{k}:{v}" for k, v in OPERATOR_TOKENS.items()),
        "ENGINE_DB_LOCK_TIMEOUT": str(LOCK_S),
    }
    (workdir := tmp_path / "healthy").mkdir()
    serve = launch_serve(workdir, API_TREE, secrets, "--db", database, "--no-worker")
    holder = start_holder(database)
    try:
        holder.send_signal(signal.SIGSTOP)
        answers: list[tuple[int, Any]] = []
        waiting = [  # more admissions than the serve has threads for writes
            threading.Thread(
                target=lambda n=n: answers.append(
                    call(serve, "POST", "/inject", envelope(n), LOCK_S * 4)
                )
            )
            for n in range(12)
        ]
        for thread in waiting:
            thread.start()
        time.sleep(0.3)  # the admissions now wait for the lock in the serve
        status, found = call(serve, "GET", "/status", None, LOCK_S / 2)
        assert status == 200 and all(t.is_alive() for t in waiting), "/status waited"
        # while the admissions wait: a read and a write from the command line
        started = start_commands(serve, database, ["runs"], ["reap", "--apply"])
        for thread in waiting:
            thread.join(LOCK_S * 8)
        assert len(answers) == 12 and len({a[0] for a in answers}) == 1, answers
        status, refused = answers[0]
        assert (status, refused["error"], refused["details"]["reason"]) == (
            503,
            "unavailable",
            "database_busy",
        )
        status, found = call(serve, "GET", "/status", None, LOCK_S / 2)
        assert (status, found["ok"], found["store"]["reason"]) == (200, False, "database_busy")
        listing, writing = results(started)
        assert listing.returncode == 0, listing.stderr
        errors = [line for line in writing.stderr.splitlines() if line.startswith("error:")]
        assert writing.returncode == 1 and len(errors) == 1 and "busy" in errors[0]
        assert "Traceback" not in writing.stderr
        if database.startswith("postgresql://"):
            admit_until_accepted(serve, IDLE_S * 3)
            assert holder.poll() is None, "the holder was not stopped any more"
        else:
            holder.kill()
            holder.wait(10)
            assert admit_until_accepted(serve, LOCK_S * 3) == 1
        status, found = call(serve, "GET", "/status", None, LOCK_S)
        assert (status, found["ok"], found["store"]["writable"]) == (200, True, True)
    finally:
        holder.kill()
        holder.wait(10)
        assert holder.stdout is not None
        holder.stdout.close()
        serve.stop()
    log = serve.log.read_text()
    assert "Traceback" not in log, log
