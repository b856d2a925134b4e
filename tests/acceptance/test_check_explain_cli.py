"""`engine check --explain NAME [--json]` as an operator runs it on the shipped tree with
the example configuration (docs/cli.md#engine-check): the exit codes, the aligned
columns, the JSON rows, did-you-mean for an unknown loop, a plain `engine check` that
does not import the explanation, and a work-bound loop shape explained like a loop
(in a child process, as an operator runs it)."""

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


# ---- work-bound loop shapes ------------------------------------------------------------

SHAPES = """\
loop nudge-repair
  description "wake the work's coding agent until the work is done"
  work continuation controller coder
  every 1h
  emit factory.triage.requested { repo: "bj29" }
  cooldown 30m
  backoff base 5m max 2h
  budget daily_runs 12

loop vendor-incidents
  work browser_watch probe vendor-status controller coder
  cron "*/15 8-18 * * 1-5" in Europe/Budapest
  emit factory.triage.requested { repo: "bj29" }
  cooldown 1h
  backoff base 5m max 1h
  budget daily_runs 48
  shadow false
"""
CONTROLLERS = """\
controllers:
  - id: coder
    argv: ["agent", "exec", "--work={work_id}"]
    env: [AGENT_API_KEY]
    timeout: 2h
    token_env: ENGINE_WORK_TOKEN
    report: http
"""
PROBES = """\
probes:
  - id: vendor-status
    kind: browser
    browser:
      allow: [https://status.example.com/incidents]
      url: https://status.example.com/incidents
      selector: main .incidents
      login:
        texts: ["Your session has expired"]
"""


def engine(instance: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`engine ARGV` in a child process in the instance, as an operator runs it; the
    controller's token variable is set, so a row that showed its value would show."""
    return subprocess.run(
        [sys.executable, "-m", "engine", *argv],
        cwd=instance,
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PYTHONPATH": str(ROOT),
            "PATH": "/usr/bin:/bin",
            "ENGINE_WORK_TOKEN": "tok-never-shown",
        },
        check=False,
    )


@pytest.fixture
def shapes(instance: Path) -> Path:
    """The instance with two shapes, the controller and the browser probe they name."""
    (instance / "loops" / "shapes.rules").write_text(SHAPES)
    (instance / "registry" / "controllers.yaml").write_text(CONTROLLERS)
    (instance / "registry" / "probes.yaml").write_text(PROBES)
    return instance


def columns(stdout: str) -> dict[str, tuple[str, str]]:
    """Each row of the table as (value, from) by its setting: the columns are apart by
    two spaces or more (a value wider than its column pushes its FROM right)."""
    lines = stdout.splitlines()
    assert re.match(r"^SETTING +VALUE +FROM$", lines[0])
    rows = {}
    for line in lines[1:]:
        setting, value, source = re.split(r"  +", line, maxsplit=2)
        rows[setting] = (value, source)
    return rows


def test_explain_a_shape_prints_its_rows_with_their_lines(shapes: Path) -> None:
    """`engine check --explain SHAPE` exits 0 with the shape's settings, each from its
    rule line, the controller's registry line or `default`; the token by its name."""
    done = engine(shapes, "check", "--explain", "nudge-repair")
    assert (done.returncode, done.stderr) == (0, "")
    assert "tok-never-shown" not in done.stdout
    rows = columns(done.stdout)
    rules = shapes / "loops" / "shapes.rules"
    controllers = shapes / "registry" / "controllers.yaml"
    at = f"loops/shapes.rules:{line_of(rules, 'work continuation')}"
    assert rows["shape"][0] == "nudge-repair"
    assert rows["mode"] == ("continuation", f"{at}: each firing wakes the controller coder")
    assert rows["controller"][1].startswith(f"{at}: the entry at registry/controllers.yaml:2")
    assert rows["controller argv"][1].startswith(
        f"registry/controllers.yaml:{line_of(controllers, 'argv:')}"
    )
    assert rows["controller token_env"][0] == "ENGINE_WORK_TOKEN"
    assert rows["controller env"][0] == '["AGENT_API_KEY"]'
    assert rows["controller timeout"][0] == "2h"
    assert rows["controller context"][:1] == ("stdin",)
    assert rows["controller context"][1].startswith("default")
    assert rows["cooldown"][0] == "30m"
    assert rows["cooldown"][1].startswith(f"loops/shapes.rules:{line_of(rules, 'cooldown 30m')}")
    assert rows["budget daily_runs"] == (
        "12",
        f"loops/shapes.rules:{line_of(rules, 'daily_runs 12')}",
    )
    assert rows["shadow"][0] == "true"
    assert "every instance starts in shadow, with one active occurrence" in rows["shadow"][1]
    assert rows["graduates"][:1] == ("false",)
    assert "probe" not in rows


def test_explain_a_browser_shape_as_json(shapes: Path) -> None:
    """--json: the same rows as {setting, value, source, note}; the probe's settings
    from registry/probes.yaml, its login markers counted; `shadow false` lets the
    instances graduate."""
    done = engine(shapes, "check", "--explain", "vendor-incidents", "--json")
    assert (done.returncode, done.stderr) == (0, "")
    rows = json.loads(done.stdout)
    assert all(set(row) == {"setting", "value", "source", "note"} for row in rows)
    by = {row["setting"]: row for row in rows}
    probes = shapes / "registry" / "probes.yaml"
    rules = shapes / "loops" / "shapes.rules"
    assert by["mode"]["value"] == "browser_watch"
    assert (by["probe"]["value"], by["probe"]["note"]) == (
        "vendor-status",
        "the entry at registry/probes.yaml:2",
    )
    assert by["probe allow"] == {
        "setting": "probe allow",
        "value": '["https://status.example.com/incidents"]',
        "source": f"registry/probes.yaml:{line_of(probes, 'allow:')}",
        "note": "every request of the page passes it first",
    }
    assert by["probe selector"]["value"] == "main .incidents"
    assert (by["probe timeout"]["value"], by["probe timeout"]["source"]) == ("30s", "default")
    assert by["probe login markers"]["value"] == "1 (0 url patterns, 1 text)"
    assert "Your session" not in done.stdout
    assert by["trigger"]["value"] == 'cron "*/15 8-18 * * 1-5" in Europe/Budapest'
    assert (by["graduates"]["value"], by["graduates"]["source"]) == (
        "true",
        f"loops/shapes.rules:{line_of(rules, 'shadow false')}",
    )
    assert by["tick fields"]["value"] == "{loop, slot, cadenceSeconds, skippedSlots}"


def test_an_unknown_name_suggests_a_shape_and_the_summary_counts_them(shapes: Path) -> None:
    """A misspelt shape is exit 2 with a did-you-mean among the shapes too; a plain
    check counts the shapes on its summary line."""
    done = engine(shapes, "check", "--explain", "nudge-repiar")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "error: no loop 'nudge-repiar'; did you mean 'nudge-repair'?\n"
    listed = engine(shapes, "check", "--explain", "zzz").stderr
    assert listed.startswith("error: no loop 'zzz'; loops: ")
    assert listed.endswith("; work shapes: nudge-repair, vendor-incidents\n")
    summary = engine(shapes, "check", "--no-cache")
    assert summary.returncode == 0
    assert summary.stdout.splitlines()[0].endswith(", 4 repos, 2 work shapes")
