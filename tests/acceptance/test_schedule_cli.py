"""`engine schedule` and `engine doctor` as a user runs them, on a copy of
tests/data/scheduling and a database a runtime has already written (ENGINE_NOW fixes
the clock each command starts from). Every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from engine.bootstrap import open_service
from engine.loading import Paths

ROOT = Path(__file__).resolve().parent.parent.parent
TREE = ROOT / "tests" / "data" / "scheduling"
STARTED = datetime(2026, 11, 30, 0, 59, 59, tzinfo=UTC)
NOW = "2026-11-30T01:00:02Z"  # just after the runtime's 01:00 pass
AUTO_LOOP = """\
  extra:                     # an instance loop that tries to grant itself auto approval
    emit: test.tick
    every: 2h
    approval: auto
    enabled: true
"""


class Tree:
    """A copy of the scheduling tree and its database, and the `engine` command on them."""

    def __init__(self, root: Path, db: str) -> None:
        self.root = root
        self.db = db
        self.overlay = root / "config" / "schedule.yaml"

    def argv(self) -> list[str]:
        return [
            "--db",
            self.db,
            "--rules",
            str(self.root / "loops"),
            "--registry",
            str(self.root / "registry"),
            "--config",
            str(self.root / "config"),
        ]

    def start(self, *args: str, now: str) -> subprocess.Popen[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
        return subprocess.Popen(
            [sys.executable, "-m", "engine", *args, *self.argv()],
            cwd=self.root,
            env={**env, "ENGINE_NOW": now},
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def run(self, *args: str, now: str = NOW) -> subprocess.CompletedProcess[str]:
        return self.runs([list(args)], now)[0]

    def runs(
        self, commands: Sequence[list[str]], now: str = NOW
    ) -> list[subprocess.CompletedProcess[str]]:
        """Run independent commands at once, each as its own process."""
        started = [(argv, self.start(*argv, now=now)) for argv in commands]
        done = []
        for argv, process in started:
            out, err = process.communicate(timeout=60)
            done.append(subprocess.CompletedProcess(argv, process.returncode, out, err))
        return done


@pytest.fixture
def tree(tmp_path: Path, database: str) -> Tree:
    """The copy, with a runtime that started at 00:59:59 and ran its 01:00 pass, on a
    database of each backend in turn."""
    shutil.copytree(TREE, tmp_path / "tree")
    found = Tree(tmp_path / "tree", database)
    clock = [STARTED]
    paths = Paths(found.root / "loops", found.root / "registry", found.root / "config")
    service = open_service(found.db, paths, clock=lambda: clock[0])
    service.pump()
    clock[0] = datetime(2026, 11, 30, 1, 0, 1, tzinfo=UTC)
    service.pump()
    service.rt.store.close()
    return found


def loaded(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_schedule_lists_and_shows_loops(tree: Tree) -> None:
    """`engine schedule` (list by default) and `show LOOP` print tables or JSON."""
    bare, listed, shown, human, nightly = tree.runs(
        [
            ["schedule", "--json"],
            ["schedule", "list", "--json"],
            ["schedule", "show", "hourly"],
            ["schedule"],
            ["schedule", "show", "nightly", "--json"],
        ]
    )
    names = [e["name"] for e in loaded(bare)["schedules"]]
    assert names == ["host", "hourly", "idle", "nightly", "on-demand", "piled"]
    assert loaded(listed) == loaded(bare)
    assert shown.returncode == 0 and "every 1h" in shown.stdout
    assert "2026-11-30T02:00:00Z" in shown.stdout  # next due, and the first next fire
    row = next(line for line in human.stdout.splitlines() if line.startswith("hourly"))
    # the last slot (01:00, ENGINE_NOW) and the next due (02:00), relative to now
    assert re.search(r" just now +propose +in (59m|1h) ", row), row
    one = loaded(nightly)["schedule"]
    assert len(one["nextFires"]) == 5 and one["trigger"]["kind"] == "cron"


def test_unknown_loop_exits_1_with_a_hint(tree: Tree) -> None:
    """An unknown loop is refused with exit 1 and a did-you-mean, the overlay untouched."""
    before = tree.overlay.read_bytes()
    show, enable = tree.runs([["schedule", "show", "hourli"], ["schedule", "enable", "hourli"]])
    for done in (show, enable):
        assert done.returncode == 1
        assert "no loop 'hourli'; did you mean 'hourly'?" in done.stderr
    assert tree.overlay.read_bytes() == before


def test_enable_and_disable_keep_the_overlay_comments(tree: Tree) -> None:
    """enable/disable write `enabled` into schedule.yaml, keep every comment, and say
    that serve applies it on restart."""
    enabled = tree.run("schedule", "enable", "idle")
    assert enabled.returncode == 0 and "restart `engine serve`" in enabled.stdout
    text = tree.overlay.read_text()
    assert "# the idle loop stays off here" in text and "# off on purpose" in text
    assert "enabled: true" in text
    disabled = loaded(tree.run("schedule", "disable", "hourly", "--json"))
    assert (disabled["changed"], disabled["restartRequired"]) == (True, True)
    text = tree.overlay.read_text()
    assert "  hourly:\n    enabled: false\n" in text and "# off on purpose" in text
    again = tree.run("schedule", "disable", "hourly")
    assert again.returncode == 0 and "already disabled" in again.stdout


def test_enable_creates_a_missing_overlay(tree: Tree) -> None:
    """Without config/schedule.yaml, enable creates it with an explanatory header."""
    tree.overlay.unlink()
    assert tree.run("schedule", "enable", "idle").returncode == 0
    text = tree.overlay.read_text()
    assert text.startswith("# The instance schedule overlay")
    assert "  idle:\n    enabled: true" in text


def test_an_overlay_that_does_not_load_is_not_edited(tree: Tree) -> None:
    """An overlay loop that declares `approval: auto` does not load (E0304): `schedule
    disable` exits 1 with the diagnostic and the overlay keeps its original bytes."""
    with tree.overlay.open("a") as out:
        out.write(AUTO_LOOP)
    before = tree.overlay.read_bytes()
    done = tree.run("schedule", "disable", "extra")
    assert done.returncode == 1 and "E0304" in done.stderr
    assert tree.overlay.read_bytes() == before


def test_pause_resume_trigger_and_slots(tree: Tree) -> None:
    """pause (note required), pause twice (exit 1), resume, trigger and the slot history
    from the command line; the journal names the operator."""
    no_note, paused = tree.runs(
        [
            ["schedule", "pause", "hourly"],  # --note is required
            ["schedule", "pause", "hourly", "--note", "migration", "--as", "alice"],
        ]
    )
    assert no_note.returncode == 2 and "--note" in no_note.stderr
    assert paused.returncode == 0 and "operator:alice" in paused.stdout
    twice, shown, slots, triggered = tree.runs(
        [
            ["schedule", "pause", "hourly", "--note", "again", "--as", "alice"],
            ["schedule", "show", "hourly", "--json"],
            ["schedule", "slots", "hourly", "--since", "2026-11-30T00:00:00Z", "--json"],
            ["schedule", "trigger", "on-demand", "--as", "bob", "--json"],
        ]
    )
    assert twice.returncode == 1 and "already paused" in twice.stderr
    assert loaded(shown)["schedule"]["pauseNote"] == "migration"
    assert [(s["slot"], s["status"]) for s in loaded(slots)["slots"]] == [
        ("2026-11-30T01:00:00Z", "fired")
    ]
    assert loaded(triggered)["eventId"].startswith("manual:on-demand:")
    resumed = tree.run("schedule", "resume", "hourly", "--as", "alice", "--json")
    assert loaded(resumed)["schedule"]["paused"] is False
    journal = loaded(tree.run("journal", "--entity", "loop", "--id", "hourly", "--json"))
    actions = [(e["action"], e["actor"]) for e in journal["entries"]]
    assert actions[-2:] == [("paused", "operator:alice"), ("resumed", "operator:alice")]


def test_backfill_admits_a_range_once(tree: Tree) -> None:
    """backfill --from/--to admits the missing slots and leaves admitted ones alone."""
    args = ["schedule", "backfill", "piled", "--from", "2026-11-30T00:00:00Z", "--to", "now"]
    ran, refused = tree.runs(
        [
            [*args, "--as", "alice", "--json"],
            ["schedule", "backfill", "on-demand", "--from", "2h", "--to", "now"],
        ]
    )
    done = loaded(ran)
    assert (done["slots"], done["admitted"], done["alreadyAdmitted"]) == (2, 1, 1)
    assert refused.returncode == 2 and "never fires it" in refused.stderr


def test_doctor_exit_codes(tree: Tree) -> None:
    """doctor prints ok and exits 0 while the clocks turn; once serve has been down for
    two slots it names the stopped loops and exits 1 (JSON alike)."""
    ok, pileup = tree.runs([["doctor"], ["doctor", "--pileup", "0", "--json"]])
    assert (ok.returncode, ok.stdout.splitlines()[0]) == (0, "ok: no anomalies")
    assert pileup.returncode == 1
    assert {p["loop"] for p in json.loads(pileup.stdout)["proposalPileups"]} >= {"hourly"}
    late, late_json = tree.runs([["doctor"], ["doctor", "--json"]], now="2026-11-30T05:00:00Z")
    assert late.returncode == 1 and "stopped_schedule: loop 'hourly'" in late.stdout
    assert late_json.returncode == 1
    report = json.loads(late_json.stdout)
    assert report["ok"] is False
    assert {"hourly", "piled", "host"} <= {s["loop"] for s in report["stoppedSchedules"]}
