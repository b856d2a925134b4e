"""`engine replay` as a subprocess over a database recorded by the real service
(docs/examples/replay/record.py: slots fired, a sleep under `catch-up none`, a proposal
approved and one rejected, a run with an outcome): what a rules change would decide
otherwise, and never a write to the recorded file."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "replay"
sys.path.insert(0, str(EXAMPLE))

from record import record  # noqa: E402


def engine(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "engine", *map(str, args)]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("recorded") / "recorded.db"
    record(db)
    return db


def rules_with(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the example's rules with `old` replaced by `new` once."""
    copy = tmp_path / "loops"
    shutil.copytree(EXAMPLE / "loops", copy)
    text = (copy / "loops.rules").read_text()
    assert old in text
    (copy / "loops.rules").write_text(text.replace(old, new, 1))
    return copy


def replay(db: Path, rules: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    done = engine("replay", "--db", db, "--rules", rules, "--registry", EXAMPLE / "registry",
                  "--json", *extra)  # fmt: skip
    assert done.stderr == "", done.stderr
    return done.returncode, json.loads(done.stdout)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_unchanged_rules_differ_nowhere(recorded: Path) -> None:
    """Under the rules it was recorded with, nothing differs: exit 0 with --fail-on-diff."""
    code, report = replay(recorded, EXAMPLE / "loops", "--fail-on-diff")
    assert code == 0
    assert report["replayed"] == 4 and report["notReplayable"] == []
    assert report["changes"] == [] and report["slots"] == []


def test_approval_auto_changes_exactly_that_loops_proposals(recorded: Path, tmp_path: Path) -> None:
    """`approval auto` on one loop: exactly that loop's proposals become auto runs."""
    rules = rules_with(
        tmp_path, "catch-up none\n  approval watched", "catch-up none\n  approval auto"
    )
    before = digest(recorded)
    code, report = replay(recorded, rules, "--fail-on-diff")
    assert code == 1
    changed = {(c["eventId"], c["old"]["kind"], c["new"]["kind"]) for c in report["changes"]}
    assert changed == {
        ("clock:hourly:2026-12-01T10:00:00Z", "propose", "run"),
        ("clock:hourly:2026-12-01T14:00:00Z", "propose", "run"),
    }
    assert report["slots"] == []
    assert digest(recorded) == before


def test_catch_up_all_fires_exactly_the_skipped_slots(recorded: Path, tmp_path: Path) -> None:
    """`catch-up all` on one loop: exactly the slots it skipped during the sleep would
    fire, each decided with the facts recorded in that pass; rules that only moved
    (lines inserted above them) are no difference."""
    rules = rules_with(tmp_path, "catch-up none", "catch-up all")
    text = (rules / "loops.rules").read_text()
    (rules / "loops.rules").write_text("# moved\n# down\n" + text)
    code, report = replay(recorded, rules)
    assert code == 0  # differences without --fail-on-diff
    assert report["changes"] == []
    slots = [(s["loop"], s["first"], s["old"], s["new"]) for s in report["slots"]]
    assert slots == [
        ("hourly", f"2026-12-01T{h}:00:00Z", "skipped catchup_none", "fired") for h in (11, 12, 13)
    ]
    assert all(s["decision"]["kind"] == "propose" for s in report["slots"])


def test_the_how_to_fixture_replays_cleanly_under_the_committed_rules() -> None:
    """The committed recorded database replays without a difference under the committed
    rules, with the command the how-to runs in CI."""
    fixture = EXAMPLE / "recorded.db"
    before = digest(fixture)
    done = engine(
        "replay", "--db", "docs/examples/replay/recorded.db",
        "--rules", "docs/examples/replay/loops", "--registry", "docs/examples/replay/registry",
        "--fail-on-diff",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 differ" in done.stdout
    assert digest(fixture) == before


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--db", "nowhere.db"], 2, "no database file at nowhere.db"),
        (
            ["--since", "2026-12-02T00:00:00Z", "--until", "2026-12-01T00:00:00Z"],
            2,
            "is not before",
        ),
        (["--since", "yesterday"], 2, "is not an ISO-8601 time"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    recorded: Path, args: list[str], code: int, says: str
) -> None:
    """A missing database or a bad window is one line on stderr and exit 2."""
    base = ["--db", recorded, "--rules", EXAMPLE / "loops", "--registry", EXAMPLE / "registry"]
    done = engine("replay", *base, *args)
    assert done.returncode == code
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_invalid_rules_exit_1_as_engine_check(recorded: Path, tmp_path: Path) -> None:
    """Invalid new rules are reported as `engine check` reports them (exit 1), never a
    traceback."""
    rules = rules_with(tmp_path, "every 60m", "every sixty")
    done = engine("replay", "--db", recorded, "--rules", rules, "--registry", EXAMPLE / "registry")
    assert done.returncode == 1
    assert "error[" in done.stderr and "Traceback" not in done.stderr
