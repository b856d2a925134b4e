"""`engine simulate` (docs/simulate.md) on small rule trees: each slot's predicted fate,
decision and rule, the scenario's sleeps, restarts, approvals and run results, and the
summary per loop; bad arguments are one line and exit 2. Accuracy against real serve
processes is tests/acceptance/test_simulate_accuracy.py."""

from __future__ import annotations

import hashlib
import json
import shlex
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.bootstrap import open_service
from engine.cli.main import main
from engine.core.envelope import iso, parse_iso
from engine.errors import NotFound
from engine.loading import Paths, load_rules
from engine.places import locate
from engine.service.simulate import Scenario, simulate

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = ROOT / "tests" / "data" / "simulate" / "registry"
NO_CONFIG = ROOT / "tests" / "data" / "no_config"
T0 = parse_iso("2026-12-01T00:00:00Z")
DAY2 = "2026-12-02T00:00:00Z"

ROUTES = """
route clock.tick.quick   to look@1
route clock.tick.gather  to look@1
route clock.tick.newest  to look@1
"""


def tree(tmp_path: Path, rules: str) -> Paths:
    loops = tmp_path / "loops"
    loops.mkdir(exist_ok=True)
    (loops / "sim.rules").write_text(rules + ROUTES)
    return Paths(loops, REGISTRY, NO_CONFIG)


def loop(name: str, *lines: str) -> str:
    return "\n".join(
        [f"loop {name}", *(f"  {line}" for line in lines), f"  emit clock.tick.{name}"]
    )


def run(paths: Paths, tmp_path: Path, **given: Any) -> dict[str, Any]:
    scenario = Scenario(**{"start": T0, "end": T0 + timedelta(hours=6), **given})
    doc: dict[str, Any] = simulate(load_rules(paths), scenario, tmp_path / "artifacts").prediction()
    return doc


def fired(doc: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [r for r in doc["rows"] if r["loop"] == name and r["outcome"] == "fired"]


def skipped(doc: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [r for r in doc["rows"] if r["loop"] == name and r["outcome"] == "skipped"]


def h(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def test_every_slot_of_the_window_fires_once_decided_by_its_loops_line(tmp_path: Path) -> None:
    """An awake engine fires each slot of the window once, on time, and the prediction
    names the rule (file:line:col) that decided it and what the run ended in."""
    paths = tree(tmp_path, loop("quick", "every 1h", "approval auto", "enabled true"))
    doc = run(paths, tmp_path)
    rows = fired(doc, "quick")
    assert [r["slot"] for r in rows] == [iso(h(n)).replace(".000000", "") for n in range(7)]
    for row in rows:
        assert row["admittedAt"].startswith(row["slot"][:19])
        assert row["decision"]["kind"] == "run"
        assert row["decision"]["rule"] == "loops/sim.rules:1:6"
        assert [r["outcome"] for r in row["runs"]] == ["OK"]
    assert doc["loops"]["quick"]["fired"] == 7  # the slot at the start is due
    assert doc["loops"]["quick"]["runsBy"] == {"OK": 7}


def test_a_sleep_is_caught_up_by_each_loops_policy(tmp_path: Path) -> None:
    """Slots slept through are skipped, replayed or fired newest-only as each loop's
    catch-up says, when the engine wakes."""
    rules = "\n\n".join(
        [
            loop("quick", "every 1h", "catch_up none", "approval auto", "enabled true"),
            loop("gather", "every 1h", "catch_up all cap 10", "approval auto", "enabled true"),
            loop("newest", "every 1h", "catch_up last", "approval auto", "enabled true"),
        ]
    )
    doc = run(tree(tmp_path, rules), tmp_path, asleep=((h(1.5), h(4.5)),))
    late = [r for r in fired(doc, "quick") if r["slot"].startswith(iso(h(4))[:19])]
    assert late and late[0]["skippedSlots"] == 2
    assert [(r["count"], r["reason"]) for r in skipped(doc, "quick")] == [(2, "catchup_none")]
    assert len(fired(doc, "gather")) == 7  # every slot, the missed ones at the wake
    assert all(r["admittedAt"] >= iso(h(4.5)) for r in fired(doc, "gather")[2:5])
    assert doc["loops"]["newest"]["skippedBy"] == {
        "catchup_last": 1
    }  # the newest missed one and the current one fire


def test_approve_after_answers_each_proposal_that_long_after_as_an_operator(
    tmp_path: Path,
) -> None:
    """`--approve after=DUR`: each proposal is approved DUR after it was made, by a
    named operator, and its run follows; with none they stay open."""
    paths = tree(tmp_path, loop("gather", "every 1h", "approval watched", "enabled true"))
    doc = run(paths, tmp_path, approve_after=timedelta(minutes=20))
    rows = fired(doc, "gather")
    assert rows and all(r["decision"]["kind"] == "propose" for r in rows)
    for row in rows[:-1]:
        (proposal,) = row["proposals"]
        assert (proposal["state"], proposal["decidedBy"]) == ("approved", "operator:simulate")
        (ran,) = row["runs"]
        made = parse_iso(row["admittedAt"])
        assert parse_iso(ran["createdAt"]) == made + timedelta(minutes=20)
    never = run(paths, tmp_path)
    assert {p["state"] for r in fired(never, "gather") for p in r["proposals"]} <= {
        "open",
        "superseded",
    }
    assert never["loops"]["gather"]["runs"] == 0


def test_failing_runs_trip_the_circuit_breaker_and_later_slots_are_skipped_paused(
    tmp_path: Path,
) -> None:
    """`--runs fail`: failed occurrences count toward the breaker, which pauses the
    loop; the slots after it are skipped as paused, and the summary says who paused it."""
    rules = loop(
        "quick",
        "every 1h",
        "approval auto",
        "budget retries_per_occurrence 0",
        "circuit_breaker 2",
        "enabled true",
    )
    doc = run(tree(tmp_path, rules), tmp_path, runs="fail")
    assert len(fired(doc, "quick")) == 2
    assert doc["loops"]["quick"]["skippedBy"] == {"paused": 5}
    (pause,) = doc["loops"]["quick"]["paused"]
    assert pause["actor"] == "schedule"


def test_a_daily_run_budget_is_used_up_and_later_slots_find_it_exhausted(tmp_path: Path) -> None:
    """The summary's budget use: the busiest day's runs against `daily_runs`, and the
    slots that found the budget exhausted."""
    rules = loop("quick", "every 1h", "approval auto", "budget daily_runs 2", "enabled true")
    doc = run(tree(tmp_path, rules), tmp_path)
    budget = doc["loops"]["quick"]["budget"]
    assert (budget["dailyRuns"], budget["busiestDayRuns"]) == (2, 2)
    assert budget["exhausted"] == 5
    assert doc["loops"]["quick"]["noopBy"] == {"budget_exhausted": 5}


def test_the_busiest_day_is_the_day_with_the_most_runs(tmp_path: Path) -> None:
    """Budget use names the day with the most runs, not the latest one."""
    paths = tree(tmp_path, loop("quick", "every 1h", "approval auto", "enabled true"))
    doc = run(paths, tmp_path, start=h(20), end=h(26))  # 20:00-23:00, then 00:00-02:00
    budget = doc["loops"]["quick"]["budget"]
    assert (budget["busiestDay"], budget["busiestDayRuns"]) == ("2026-12-01", 4)


def test_an_event_a_run_chained_is_a_row_of_its_own_decided_by_its_route(
    tmp_path: Path,
) -> None:
    """What a run's outcome chains is predicted too: an event row (not a slot) with
    its decision and the route that made it."""
    rules = loop("quick", "every 1h", "approval auto", "enabled true")
    rules += "\n\non look@1 outcome OK\n  emit clock.tick.gather { }\n"
    paths = tree(tmp_path, rules)
    doc = run(paths, tmp_path, end=h(1))
    chained = [r for r in doc["rows"] if r["outcome"] == "event"]
    assert len(chained) == 2 and all(r["source"] == "chain" for r in chained)
    for row in chained:
        assert (row["slot"], row["skippedSlots"], row["type"]) == (None, 0, "clock.tick.gather")
        assert row["decision"]["kind"] == "propose"  # its route's default: watched
        file, line, _ = row["decision"]["rule"].rsplit(":", 2)
        assert (
            locate(file, paths.roots())
            .read_text()
            .splitlines()[int(line) - 1]
            .startswith("route clock.tick.gather")
        )


def test_a_restart_rebuilds_the_scheduler_from_the_store_and_changes_no_decision(
    tmp_path: Path,
) -> None:
    """A restart of an awake engine (a new scheduler, the start's recovery) fires and
    decides exactly what one process does."""
    rules = "\n\n".join(
        [
            loop("quick", "every 1h", "approval auto", "enabled true"),
            loop("gather", "every 30m", "approval watched", "enabled true"),
        ]
    )
    paths = tree(tmp_path, rules)
    one = run(paths, tmp_path, approve_after=timedelta(minutes=45))
    two = run(paths, tmp_path, approve_after=timedelta(minutes=45), restarts=(h(2.2), h(3.7)))
    assert two["rows"] == one["rows"]


def test_only_the_named_loops_run(tmp_path: Path) -> None:
    """`--loop NAME`: the other loops are switched off; a name that is no loop is
    refused."""
    rules = "\n\n".join(
        [
            loop("quick", "every 1h", "approval auto", "enabled true"),
            loop("gather", "every 1h", "approval auto", "enabled true"),
        ]
    )
    paths = tree(tmp_path, rules)
    doc = run(paths, tmp_path, loops=frozenset({"gather"}))
    assert {r["loop"] for r in doc["rows"]} == {"gather"}
    assert list(doc["loops"]) == ["gather"]
    with pytest.raises(NotFound):
        run(paths, tmp_path, loops=frozenset({"nope"}))


def test_the_command_prints_a_line_per_slot_and_a_summary_and_json_for_scripts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table for people and `--json` for scripts carry the same prediction."""
    paths = tree(tmp_path, loop("quick", "every 1h", "approval auto", "enabled true"))
    args = [
        "simulate",
        "--rules",
        str(paths.rules),
        "--registry",
        str(REGISTRY),
        "--config",
        str(NO_CONFIG),
        "--from",
        "2026-12-01T00:00:00Z",
        "--to",
        "2026-12-01T03:00:00Z",
    ]
    assert main(args) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith("quick  2026-12-01T00:00:00Z  run look@1  by ")
    assert text[0].endswith("sim.rules:1:6  -> run OK")
    assert "loop quick: 4 fired, 0 skipped" in text
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["loops"]["quick"]["fired"] == 4
    assert doc["window"] == {
        "from": "2026-12-01T00:00:00.000000Z",
        "to": "2026-12-01T03:00:00.000000Z",
    }


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (
            ["--from", "yesterday", "--to", "2026-12-02T00:00:00Z"],
            "--from 'yesterday' is not a time",
        ),
        (["--from", "2026-12-02T00:00:00", "--to", "2026-12-03T00:00:00Z"], "is not a time"),
        (
            ["--from", "2026-12-02T00:00:00Z", "--to", "2026-12-01T00:00:00Z"],
            "--to is before --from",
        ),
        (["--asleep", "2026-12-01T05:00:00Z"], "is not a span"),
        (["--asleep", "2026-12-01T05:00:00Z..2026-12-01T04:00:00Z"], "its end is not after"),
        (["--approve", "sometimes"], "--approve 'sometimes' is not an answer"),
        (["--approve", "after=soon"], "--approve 'after=soon' is not an answer"),
        (["--runs", "outcome="], "--runs 'outcome=' is not an answer"),
        (["--db", "postgresql://u:secret@127.0.0.1/x"], "--db carries a password"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], says: str
) -> None:
    """A bad time, span or answer is named on one line, exit 2, and nothing runs."""
    paths = tree(tmp_path, loop("quick", "every 1h", "approval auto", "enabled true"))
    window = ["--from", "2026-12-01T00:00:00Z", "--to", "2026-12-02T00:00:00Z"]
    args = ["simulate", "--rules", str(paths.rules), "--registry", str(REGISTRY)]
    args += ["--config", str(NO_CONFIG), *window, *extra]
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert says in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_the_worked_example_of_the_docs_prints_what_the_docs_show(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/simulate.md's worked example is this code's output: regenerate the doc
    when it changes."""
    text = (ROOT / "docs" / "simulate.md").read_text()
    block = text.split("## A worked example", 1)[1].split("```\n", 2)[1]
    command, *shown = block.rstrip("\n").split("\n")
    assert command.startswith("$ engine simulate ")
    monkeypatch.chdir(ROOT)  # the doc's paths are relative to the checkout
    assert main(shlex.split(command)[2:]) == 0
    assert capsys.readouterr().out.rstrip("\n").split("\n") == shown


def test_a_seed_database_is_read_never_written_and_its_state_carries_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--db`: the simulation starts from a copy of the records (here a loop an
    operator paused, and its cursor), and the database file is byte-identical after."""
    rules = "\n\n".join(
        [
            loop("quick", "every 1h", "approval auto", "enabled true"),
            loop("gather", "every 1h", "approval auto", "enabled true"),
        ]
    )
    paths = tree(tmp_path, rules)
    db = tmp_path / "engine.db"
    now = [h(-3)]
    service = open_service(str(db), paths, clock=lambda: now[0])
    service.pump()
    service.pause("gather", "operator:alice", "holding it")
    now[0] = h(-0.5)
    service.pump()
    service.rt.store.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    args = ["simulate", "--rules", str(paths.rules), "--registry", str(REGISTRY)]
    args += ["--config", str(NO_CONFIG), "--from", iso(T0), "--to", iso(h(3)), "--json"]
    assert main([*args, "--db", str(db)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert doc["loops"]["gather"]["fired"] == 0
    assert doc["loops"]["gather"]["skippedBy"] == {"paused": 4}
    quick = fired(doc, "quick")
    assert [r["slot"][:13] for r in quick] == [iso(h(n))[:13] for n in range(4)]
    assert all(r["eventId"] != "clock:quick:" + iso(h(-3))[:19] + "Z" for r in quick)
    assert main([*args, "--db", str(tmp_path / "missing.db")]) == 2
    assert "no database file at" in capsys.readouterr().err
