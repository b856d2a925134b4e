"""`engine schedule graduate` (docs/cli.md#engine-schedule-graduate,
docs/work.md#graduating-an-instance) as an operator runs it: real subprocesses on a real
SQLite file. An instance of a shape whose rule file writes `shadow false` goes live at
once, or is recorded for the next serve start and shown as pending by `engine schedule`
and `engine work show`; every refusal is one line, exit 1, and changes nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.bootstrap import open_service
from engine.core.work import WorkRequest
from engine.loading import Paths

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


@pytest.fixture
def tree(tmp_path: Path) -> Paths:
    """The graduation rules (tests/data/graduate) over the shapes' registry."""
    shutil.copytree(DATA / "shapes" / "registry", tmp_path / "registry")
    (tmp_path / "loops").mkdir()
    shutil.copy(DATA / "graduate" / "work.rules", tmp_path / "loops")
    (tmp_path / "config").mkdir()
    return Paths(tmp_path / "loops", tmp_path / "registry", tmp_path / "config")


def argv(db: Path, *args: str) -> list[str]:
    where = ["--rules", "loops", "--registry", "registry", "--config", "config", "--db", str(db)]
    return [sys.executable, "-m", "engine", *args, *where]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def engine(tree: Paths, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv(db, *args),
        cwd=tree.rules.parent,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def journal(tree: Paths, db: Path) -> list[dict[str, Any]]:
    done = engine(tree, db, "journal", "--entity", "work", "--limit", "1000", "--json")
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout)["entries"])


def test_graduate_now_or_at_the_next_restart(tree: Paths, tmp_path: Path) -> None:
    db = tmp_path / "engine.db"
    service = open_service(str(db), tree)
    try:
        first = service.add_work(WorkRequest("repair-1", "Repair one"), "operator:ann")[0]
        second = service.add_work(WorkRequest("repair-2", "Repair two"), "operator:ann")[0]
        for work_id in (first.work_id, second.work_id):
            service.bind_work(work_id, "nudge", "operator:ann", f"r-{work_id}")
        service.bind_work(first.work_id, "watch", "operator:ann", "r-watch")
    finally:
        service.rt.store.close()
    now, later = f"nudge@{first.work_id}", f"nudge@{second.work_id}"

    done = engine(tree, db, "schedule", "graduate", now, "--note", "reviewed", "--as", "alice")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"graduated '{now}' out of shadow as operator:alice: it is live\n"
    done = engine(
        tree, db, "schedule", "graduate", later, "--at-restart", "--note", "after the freeze",
        "--as", "bob", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    binding = json.loads(done.stdout)["binding"]
    assert (binding["loop"], binding["state"]) == (later, "shadow")
    pending = binding["pendingGraduation"]
    assert (pending["requestedBy"], pending["note"]) == ("operator:bob", "after the freeze")

    listed = engine(tree, db, "schedule").stdout.splitlines()
    assert listed[-1] == (
        f"pending at next restart: graduate {later} (operator:bob, "
        f"{pending['requestedAt'][:19]}Z): after the freeze"
    )
    assert not any(line.startswith("pending") for line in listed[:-1])
    shown = engine(tree, db, "work", "show", second.work_id).stdout
    assert f"  {later} shadow (" in shown and "graduates at the next restart (operator:bob" in shown
    shown = engine(tree, db, "work", "show", first.work_id).stdout
    assert f"  {now} live (" in shown and f"  watch@{first.work_id} shadow (" in shown
    doc = json.loads(engine(tree, db, "schedule", "--json").stdout)
    assert [(p["loop"], p["requestedBy"]) for p in doc["pendingGraduations"]] == [
        (later, "operator:bob")
    ]
    assert [(e["action"], e["actor"], e["entityId"]) for e in journal(tree, db)][-2:] == [
        ("graduated", "operator:alice", first.work_id),
        ("graduation_deferred", "operator:bob", second.work_id),
    ]
    assert journal(tree, db)[-1]["data"]["loop"] == later

    # Each refusal: exit 1, one line on stderr saying why, nothing written.
    before = journal(tree, db)
    refusals = {
        "plain": "'plain' is a declared loop: its shadow mode follows its rule file "
        "(loops/work.rules:21)",
        f"watch@{first.work_id}": "a reviewed `shadow false` in loops/work.rules:13 allows it",
        "nudge@work-0000000000000000": "no work item 'work-0000000000000000'",
        f"watch@{second.work_id}": f"'watch' is not bound to {second.work_id}",
        "nudge": "'nudge' is a work-bound loop shape",
        now: f"'{now}' is live, not in shadow",
    }
    started = {
        name: subprocess.Popen(
            argv(db, "schedule", "graduate", name, *extra, "--as", "carol"),
            cwd=tree.rules.parent,
            env=environment(),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name, extra in [*((n, ()) for n in refusals), (later, ("--at-restart",))]
    }
    refusals[later] = f"'{later}' already graduates at the next restart (asked by operator:bob"
    for name, process in started.items():
        out, err = process.communicate(timeout=60)
        assert (process.returncode, out) == (1, ""), (name, err)
        assert len(err.splitlines()) == 1 and refusals[name] in err, (name, err)
    assert journal(tree, db) == before
