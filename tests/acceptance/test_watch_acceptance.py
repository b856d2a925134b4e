"""A condition watch against real `engine serve` processes (each start's clock placed
with ENGINE_NOW, on a SQLite file and on a PostgreSQL database): the probe is
tests/data/watch/probe.py, a real subprocess printing a file the test edits; the
answers come from the HTTP API."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ServeClock

DATA = Path(__file__).resolve().parents[1] / "data" / "watch"
TOKEN = "tok"  # ServeClock's operator alice:tok
DOC = {"status": "queued", "runs": [{"conclusion": None}], "note": "started 3 minutes ago"}

pytestmark = pytest.mark.slow


def watch_tree(root: Path) -> Path:
    """tests/data/watch with its rules written for `root` (where the state files are)."""
    shutil.copytree(DATA / "registry", root / "registry")
    shutil.copy(DATA / "probe.py", root / "probe.py")
    (root / "loops").mkdir()
    rules = (DATA / "loops" / "watch.rules.in").read_text().replace("@DIR@", str(root))
    (root / "loops" / "watch.rules").write_text(rules)
    for name, doc in (("ci", DOC), ("slow", {"status": "fine"})):
        (root / f"{name}.json").write_text(json.dumps({"doc": doc}))
    return root


@pytest.fixture
def clock(tmp_path: Path, database: str) -> Iterator[tuple[ServeClock, Path]]:
    tree = watch_tree(tmp_path / "tree")
    (tmp_path / "config").mkdir()
    with ServeClock(tmp_path, tree, db=database) as found:
        yield found, tree


def observation(serve: Any, within: float, ready: Any) -> dict[str, Any]:
    answer = serve.wait_for(
        "/schedules/ci-watch", lambda a: ready(a["schedule"]["observation"]), TOKEN, within
    )
    found: dict[str, Any] = answer["schedule"]["observation"]
    return found


def changes(serve: Any) -> list[str]:
    status, answer = serve.request("GET", "/events?type=test.changed&limit=100", token=TOKEN)
    assert status == 200
    return [e["eventId"] for e in answer["events"]]


def test_a_change_fires_once_across_serve_restarts(
    clock: tuple[ServeClock, Path], tmp_path: Path
) -> None:
    """The first serve takes the baseline; the probe changes while serve is down; the
    next serve fires the change once (one event, one proposal) and a third serve, its
    clock later, polls the same state without firing again."""
    serves, tree = clock
    config = tmp_path / "config"
    first = serves.start("2026-11-30T10:00:00Z", config=config)
    observation(first, 20, lambda o: o["polls"] >= 1 and o["status"] == "ok")
    assert changes(first) == []
    first.stop(signal.SIGTERM)
    (tree / "ci.json").write_text(json.dumps({"doc": {**DOC, "status": "completed"}}))
    second = serves.start("2026-11-30T10:05:00Z", config=config)
    seen = observation(second, 20, lambda o: o["changes"] == 1)
    fired = changes(second)
    assert fired == [f"watch:ci-watch:1-{seen['fingerprint'][:16]}"]
    second.stop(signal.SIGTERM)
    third = serves.start("2026-11-30T10:10:00Z", config=config)
    observation(third, 20, lambda o: o["polls"] > seen["polls"])
    assert changes(third) == fired
    status, answer = third.request("GET", "/proposals?limit=100", token=TOKEN)
    assert status == 200
    assert [p["eventId"] for p in answer["proposals"] if p["loop"] == "ci-watch"] == fired


def test_a_slow_probe_does_not_delay_planning(
    clock: tuple[ServeClock, Path], tmp_path: Path
) -> None:
    """While serve's watch probe hangs (it answers only once the test lets it) in the
    pool's one thread (`--probe-threads 1`), an injected event is admitted and planned,
    and its poll is still unrecorded: the runtime loop did not wait on the probe. Let
    go, the probe's poll is recorded, and the other watch's probe runs after it."""
    serves, tree = clock
    release, pidfile = tmp_path / "release", tmp_path / "probe.pid"
    state = {"until": str(release), "pidfile": str(pidfile), "doc": DOC}
    (tree / "ci.json").write_text(json.dumps(state))
    serve = serves.start("2026-11-30T10:00:00Z", "--probe-threads", "1", config=tmp_path / "config")
    assert eventually(lambda: pidfile.exists() and pidfile.read_text().isdigit())
    probe = int(pidfile.read_text())
    event = {
        "eventId": "meanwhile",
        "type": "test.changed",
        "source": "test",
        "occurredAt": "2026-11-30T10:00:00Z",
        "payload": {
            "loop": "elsewhere",
            "window": "w",
            "fingerprint": "0" * 64,
            "previousFingerprint": "0" * 64,
            "observedAt": "2026-11-30T10:00:00Z",
        },
    }
    assert serve.request("POST", "/inject", event)[0] == 202
    shown = serve.wait_for("/events/meanwhile", lambda a: a["decision"] is not None, TOKEN, 30)
    assert shown["decision"]["kind"] == "propose"
    assert alive(probe), "the runtime loop waited for the probe"
    _, answer = serve.request("GET", "/schedules/ci-watch", token=TOKEN)
    assert answer["schedule"]["observation"]["polls"] == 0
    release.touch()
    observation(serve, 30, lambda o: o["polls"] == 1 and o["status"] == "ok")
    serve.wait_for(
        "/schedules/slow-watch", lambda a: a["schedule"]["observation"]["polls"] == 1, TOKEN, 30
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def eventually(check: Callable[[], bool], seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()
