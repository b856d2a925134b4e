"""`engine check --explain LOOP [--json]` as an operator runs it on the shipped tree with
the example configuration (docs/cli.md#engine-check): the exit codes, the aligned
columns, the JSON rows, did-you-mean for an unknown loop, and a plain `engine check`
that does not import the explanation."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shipped loops/ and registry/ with the example config, as the current directory."""
    for part in ("loops", "registry"):
        shutil.copytree(ROOT / part, tmp_path / part)
    (tmp_path / "config").mkdir()
    shutil.copy(ROOT / "config" / "repos.example.yaml", tmp_path / "config" / "repos.yaml")
    shutil.copy(ROOT / "config" / "schedule.example.yaml", tmp_path / "config" / "schedule.yaml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def line_of(path: Path, text: str) -> int:
    """The 1-based line of the first line of `path` that contains `text`."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_explain_prints_aligned_columns_and_exits_0(
    instance: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--explain", "reaper"]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert re.match(r"^SETTING +VALUE +FROM$", lines[0])
    value_at, from_at = lines[0].index("VALUE"), lines[0].index("FROM")
    rows = {line[:value_at].rstrip(): line for line in lines[1:]}
    enabled = rows["enabled"]
    assert enabled[value_at:from_at].strip() == "true"
    overlay_line = line_of(instance / "config" / "schedule.yaml", "reaper:") + 1
    assert enabled[from_at:].startswith(f"config/schedule.yaml:{overlay_line}: the overlay")
    assert (
        rows["trigger"][from_at:]
        == f"loops/reaper.rules:{line_of(instance / 'loops' / 'reaper.rules', 'every 60m')}"
    )
    assert rows["budget retries_per_occurrence"][value_at:].split() == ["2", "default"]
    assert out.err == ""


def test_a_for_block_loop_shows_shadow_from_the_mutating_registry_entry(
    instance: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--explain", "work-bj29", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(set(row) == {"setting", "value", "source", "note"} for row in rows)
    by = {row["setting"]: row for row in rows}
    assert (
        by["loop"]["source"]
        == f"loops/repos.rules:{line_of(instance / 'loops' / 'repos.rules', 'loop work-')}"
    )
    shadow = by["shadow"]
    assert (shadow["value"], shadow["source"]) == ("true", "default")
    assert shadow["note"] == (
        f"route factory.work.requested -> dispatch@1 is mutating "
        f"(registry/definitions.yaml:{_mutating_line_of(instance, 'dispatch')})"
    )


def _mutating_line_of(instance: Path, definition: str) -> int:
    """The `mutating:` line of a definition's entry in registry/definitions.yaml."""
    lines = (instance / "registry" / "definitions.yaml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"- id: {definition}")
    return next(i for i in range(start, len(lines)) if lines[i].strip().startswith("mutating:")) + 1


def test_an_unknown_loop_is_one_line_with_did_you_mean_and_exit_2(
    instance: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--explain", "reapr"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == "error: no loop 'reapr'; did you mean 'reaper'?\n"
    assert main(["check", "--explain", "zzz", "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: no loop 'zzz'; loops: ")


def test_rules_that_do_not_load_report_their_errors_and_exit_1(
    instance: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (instance / "loops" / "bad.rules").write_text("loop bad\n  every 60m\n  emit no.such.type\n")
    assert main(["check", "--explain", "reaper"]) == 1
    out = capsys.readouterr()
    assert out.out == ""
    assert "loops/bad.rules:3:8: error[E0203]: unknown event type 'no.such.type'" in out.err
    assert main(["check", "--explain", "reaper", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False and report["errors"][0]["code"] == "E0203"


def test_an_old_spelling_in_the_loops_lines_is_a_warning_after_the_rows(
    instance: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rows name the setting in the one spelling; the loop's own W0901 warnings follow
    on stderr with their fix-it, not those of other loops; the exit is still 0."""
    (instance / "loops" / "old.rules").write_text(
        "loop old\n  every 60m\n  emit clock.tick.reaper\n  singleton\n  catch-up none\n\n"
        "loop other\n  every 60m\n  emit clock.tick.reaper\n  disabled\n"
    )
    assert main(["check", "--explain", "old"]) == 0
    out = capsys.readouterr()
    rows = {line.split()[0]: line.split() for line in out.out.splitlines()[1:]}
    assert rows["overlap"][1:3] == ["skip", "loops/old.rules:4:"]
    assert rows["catch_up"][1:3] == ["none", "loops/old.rules:5"]
    assert re.findall(r"^(\S+): warning\[W0901\]", out.err, re.M) == [
        "loops/old.rules:4:3",
        "loops/old.rules:5:3",
    ]
    assert "help: write: catch_up none (engine fmt --write rewrites it)" in out.err
    assert out.err.endswith("warning: 2 warnings in this loop's lines\n")
    assert main(["check", "--explain", "old", "--json"]) == 0
    out = capsys.readouterr()
    assert {row["setting"] for row in json.loads(out.out)} >= {"overlap", "catch_up"}
    assert out.err.count("warning[W0901]") == 2


LAZY = """\
import sys
from engine.cli.main import main
code = main(sys.argv[1:])
print("loop_explain" if "engine.core.loop_explain" in sys.modules else "lean", file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.parametrize(
    ("extra", "loaded"), [((), "lean"), (("--explain", "reaper"), "loop_explain")]
)
def test_plain_check_does_not_import_the_explanation(
    instance: Path, extra: tuple[str, ...], loaded: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", LAZY, "check", *extra],
        cwd=instance,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == loaded
