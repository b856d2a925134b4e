"""A dependency checkpoint as an operator runs it, on both backends: `engine serve
--no-worker` fires a loop's slot and stops; `engine worker --once`, alone, runs it and
its conclusion admits the ticks of the loops `after` it; a serve started later plans
each of them once, and another start plans nothing again. The tree is
tests/data/waiting (docs/scheduling.md, "Triggers that wait")."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ServeClock, open_database, tree_args

ROOT = Path(__file__).resolve().parent.parent.parent
TREE = ROOT / "tests" / "data" / "waiting"
SCRIPTS = ROOT / "tests" / "data" / "occurrence_engine" / "scripts"


@pytest.fixture(params=["sqlite", "postgresql"])
def clock(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServeClock]:
    db = open_database(request, request.param, tmp_path)
    with ServeClock(tmp_path, TREE, db=db) as started:
        yield started


def get(serve: Any, path: str) -> Any:
    status, answer = serve.request("GET", path, token=serve.token("alice"))
    assert status == 200, answer
    return answer


def waiting_events(serve: Any) -> list[dict[str, Any]]:
    events = get(serve, "/events?limit=1000")["events"]
    return sorted((e for e in events if e["source"] == "after"), key=lambda e: e["loop"])


def test_an_upstream_that_concludes_while_serve_is_down_fires_once(
    clock: ServeClock, tmp_path: Path
) -> None:
    """The nightly slot is queued by a serve without a worker; with serve stopped, a
    worker alone runs it; the next serve plans `after-ok` (auto: a queued run) and
    `after-any` (watched: a proposal), each once; a third start adds nothing."""
    config = tmp_path / "config"
    config.mkdir()
    shutil.copy(TREE / "config" / "repos.yaml", config / "repos.yaml")
    control = tmp_path / "control"
    control.mkdir()
    env = {"OCC_SCRIPTS": str(SCRIPTS), "OCC_CONTROL": str(control)}
    first = clock.start("2026-12-01T09:59:58Z", "--no-worker", config=config, env=env)
    first.wait_for(
        "/runs?limit=100",
        lambda a: [r["loop"] for r in a["runs"]] == ["nightly"],
        first.token("alice"),
    )
    assert first.stop() == 0

    base = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    argv = ["worker", "--once", *tree_args(clock.db, TREE), "--config", str(config)]
    worker = subprocess.run(
        [sys.executable, "-m", "engine", *argv],
        cwd=tmp_path,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert worker.returncode == 0, worker.stderr

    second = clock.start("2026-12-01T10:01:00Z", "--no-worker", config=config, env=env)
    token = second.token("alice")
    second.wait_for(
        "/proposals?state=open&limit=100",
        lambda a: [p["loop"] for p in a["proposals"]] == ["after-any"],
        token,
    )
    second.wait_for(
        "/runs?state=queued&limit=100",
        lambda a: [r["loop"] for r in a["runs"]] == ["after-ok"],
        token,
    )
    (any_, ok) = waiting_events(second)
    assert (any_["loop"], ok["loop"]) == ("after-any", "after-ok")
    nightly = get(second, "/runs?limit=100")["runs"]
    upstream = next(r for r in nightly if r["loop"] == "nightly")
    assert (upstream["state"], upstream["outcome"]) == ("succeeded", "OK")
    detail = get(second, f"/events/{ok['eventId']}")
    assert detail["event"]["payload"]["upstream"]["outcome"] == "OK"
    assert detail["occurrence"] == "work_dispatched"
    assert second.stop() == 0

    third = clock.start("2026-12-01T10:02:00Z", "--no-worker", config=config, env=env)
    assert len(waiting_events(third)) == 2
    assert get(third, "/schedules/after-any")["schedule"]["openProposals"] == 1
