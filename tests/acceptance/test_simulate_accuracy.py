"""`engine simulate` predicts what real `engine serve` processes decide (docs/simulate.md,
"How accurate it is"): two serve processes run one after the other on one SQLite file
over a window of the clock placed by ENGINE_NOW, the first one suspended (SIGSTOP, as a
sleeping laptop) for a while and then restarted; `engine simulate` is given the same
window, the same sleep and the same restart, and the two agree slot by slot: which
slots fired (with how many older ones they carried as skipped), which were skipped and
why, and each fired slot's decision.

The tree is tests/data/simulate: loops every 4, 6 and 10 seconds, one per catch-up
policy. Their slots fall on multiples of those seconds; the test's sleeps and restarts
fall at least two seconds after a slot, since a serve passes once a second, and the
comparison ends a few seconds before the last serve stops."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, ServeClock
from databases import rows

from engine.core.envelope import iso, parse_iso

TREE = ROOT / "tests" / "data" / "simulate"
NO_CONFIG = ROOT / "tests" / "data" / "no_config"
CADENCE = {"quick": 4, "gather": 6, "newest": 10}
BASE = parse_iso("2026-11-30T10:00:00Z")  # a whole minute: every loop has a slot here
TOKEN = "tok"

pytestmark = pytest.mark.slow


def at(seconds: float) -> datetime:
    return BASE + timedelta(seconds=seconds)


class Timeline:
    """The virtual time of the serve in front, from its own clock (GET /status's
    `checkedAt`) and the time elapsed since it answered."""

    def __init__(self) -> None:
        self.virtual = BASE
        self.mono = time.monotonic()

    def sync(self, serve: Any) -> None:
        before = time.monotonic()
        status, doc = serve.request("GET", "/status", token=TOKEN)
        assert status == 200, doc
        after = time.monotonic()
        self.virtual, self.mono = parse_iso(doc["doctor"]["checkedAt"]), (before + after) / 2

    def now(self) -> datetime:
        return self.virtual + timedelta(seconds=time.monotonic() - self.mono)

    def wait_until(self, moment: datetime) -> datetime:
        """Sleep until the virtual clock reads `moment` (it must not have passed)."""
        left = (moment - self.now()).total_seconds()
        assert left > -0.2, f"the test fell behind its timeline by {-left:.2f}s"
        time.sleep(max(0.0, left))
        return self.now()


def served(db: str, last: datetime) -> dict[tuple[str, str], tuple[Any, ...]]:
    """What the serves did with each slot up to `last`, from their database."""
    found: dict[tuple[str, str], tuple[Any, ...]] = {}
    ticks = rows(
        db,
        "SELECT e.loop, e.payload, d.kind, d.reason FROM events e"
        " JOIN decisions d ON d.event_id = e.event_id WHERE e.source = 'schedule'",
    )
    for loop, payload, kind, reason in ticks:
        body = json.loads(payload)
        if parse_iso(body["slot"]) <= last:
            found[(loop, iso(parse_iso(body["slot"])))] = (
                "fired",
                body.get("skippedSlots", 0),
                kind,
                reason,
            )
    for loop, first, final, reason in rows(
        db, "SELECT loop, first_slot, last_slot, reason FROM slot_skips"
    ):
        for slot in slots_between(loop, parse_iso(first), parse_iso(final)):
            if slot <= last:
                found[(loop, iso(slot))] = ("skipped", reason)
    return found


def predicted(doc: dict[str, Any], last: datetime) -> dict[tuple[str, str], tuple[Any, ...]]:
    """The same, from `engine simulate --json`."""
    found: dict[tuple[str, str], tuple[Any, ...]] = {}
    for row in doc["rows"]:
        if row["outcome"] == "fired" and parse_iso(row["slot"]) <= last:
            decision = row["decision"]
            found[(row["loop"], iso(parse_iso(row["slot"])))] = (
                "fired",
                row["skippedSlots"],
                decision["kind"],
                decision["reason"],
            )
        elif row["outcome"] == "skipped":
            first, final = parse_iso(row["slot"]), parse_iso(row["lastSlot"])
            for slot in slots_between(row["loop"], first, final):
                if slot <= last:
                    found[(row["loop"], iso(slot))] = ("skipped", row["reason"])
    return found


def slots_between(loop: str, first: datetime, last: datetime) -> list[datetime]:
    step = timedelta(seconds=CADENCE[loop])
    out = []
    while first <= last:
        out.append(first)
        first += step
    return out


def simulate(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "engine", "simulate", "--json", *tree_args(), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def tree_args() -> list[str]:
    return [
        "--rules",
        str(TREE / "loops"),
        "--registry",
        str(TREE / "registry"),
        "--config",
        str(NO_CONFIG),
    ]


def test_simulate_agrees_with_serve_slot_by_slot_across_a_sleep_and_a_restart(
    tmp_path: Path,
) -> None:
    """The decisions an operator is shown before enabling rules are the ones the
    engine then makes: every slot's fate, skip reasons and decisions included, after
    the machine slept through slots and after a restart."""
    timeline = Timeline()
    with ServeClock(tmp_path, tree=TREE) as clock:
        first = clock.start(iso(at(1)), config=NO_CONFIG)
        timeline.sync(first)
        asleep_from = timeline.wait_until(at(14.5))
        first.process.send_signal(signal.SIGSTOP)
        asleep_to = timeline.wait_until(at(26.5))
        first.process.send_signal(signal.SIGCONT)
        down_from = timeline.wait_until(at(34.5))
        assert first.stop() == 0
        second = clock.start(iso(timeline.now()), config=NO_CONFIG)
        timeline.sync(second)
        down_to = timeline.virtual
        assert down_to < at(38), "the restart took too long for the comparison to hold"
        timeline.wait_until(at(46.5))
        assert second.stop() == 0
        db = clock.db

    last = at(44)
    doc = simulate(
        "--from",
        iso(at(1)),
        "--to",
        iso(at(45)),
        "--asleep",
        f"{iso(asleep_from)}..{iso(asleep_to)}",
        "--asleep",
        f"{iso(down_from)}..{iso(down_to)}",
        "--restart",
        iso(down_to),
    )
    expected = served(db, last)
    got = predicted(doc, last)
    assert got == expected
    # the window exercised what it is for: slots slept through under each policy
    assert expected[("quick", iso(at(24)))] == ("fired", 2, "run", None)
    assert expected[("quick", iso(at(16)))] == ("skipped", "catchup_none")
    assert expected[("gather", iso(at(18)))][0] == "fired"  # catch-up all replays it
    assert expected[("newest", iso(at(20)))][0] == "fired"  # catch-up last: the newest
    assert len(expected) == 11 + 7 + 4
