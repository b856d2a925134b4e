"""`engine check` and `engine digest` as an operator runs them.

Every case under tests/data/rules/invalid/ is a small, complete tree whose expected.txt
lists the diagnostics it must produce (`file:line:col: CODE`, paths relative to the case).
The whole golden set runs through the CLI's entry point in-process (one subprocess per
case would cost about a second each); a representative subset, the human output, the
shipped tree and the digest run the real `python -m engine` as a subprocess."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from engine.cli.main import main
from engine.loading import Paths, digest, load_rules

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "rules"
INVALID = sorted(p for p in (DATA / "invalid").iterdir() if p.is_dir())
WARN = sorted(p for p in (DATA / "warn").iterdir() if p.is_dir())
TREE_OPTIONS = ("--rules", "loops", "--registry", "registry", "--config", "config")


def tree_options(case: Path) -> tuple[str, ...]:
    """TREE_OPTIONS for a case; without --config when the case has no config directory
    (a --config that is given must exist)."""
    return TREE_OPTIONS if (case / "config").is_dir() else TREE_OPTIONS[:4]


Found = set[tuple[str, int, int, str]]


def expected(case: Path) -> Found:
    """The diagnostics a case's expected.txt lists."""
    found: Found = set()
    for raw in (case / "expected.txt").read_text().splitlines():
        if raw.strip() and not raw.startswith("#"):
            where, code = raw.rsplit(": ", 1)
            file, line, column = where.rsplit(":", 2)
            found.add((file, int(line), int(column), code.strip()))
    return found


def reported(report: dict[str, Any], kind: str = "errors") -> Found:
    return {(e["file"], e["line"], e["column"], e["code"]) for e in report[kind]}


def exit_code_for(case: Path) -> int:
    """2 (usage) when a directory is missing, a file cannot be read or its YAML aliases
    expand too far (refused unread), otherwise 1."""
    return 2 if any(code in ("E0900", "E0905", "E0909") for *_, code in expected(case)) else 1


def check_in_process(
    case: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *flags: str
) -> tuple[int, str, str]:
    monkeypatch.chdir(case)
    code = main(["check", *flags, *tree_options(case)])
    out = capsys.readouterr()
    return code, out.out, out.err


# ---- the golden invalid cases -------------------------------------------------------------


@pytest.mark.parametrize("case", INVALID, ids=[p.name for p in INVALID])
def test_invalid_tree_reports_exactly_its_expected_diagnostics(
    case: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each invalid golden tree fails closed with exactly the diagnostics in expected.txt."""
    code, out, _ = check_in_process(case, monkeypatch, capsys, "--json")
    report = json.loads(out)
    assert report["valid"] is False
    assert reported(report) == expected(case)
    assert all(e["message"] and e["severity"] == "error" for e in report["errors"])
    assert code == exit_code_for(case)


# ---- the golden warning cases: the rules load, and say what to rewrite ------------------------


@pytest.mark.parametrize("case", WARN, ids=[p.name for p in WARN])
def test_warning_tree_loads_with_exactly_its_expected_warnings(
    case: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each warning golden tree is valid (exit 0) and warns exactly as expected.txt lists,
    each warning with a fix-it hint."""
    code, out, _ = check_in_process(case, monkeypatch, capsys, "--json")
    report = json.loads(out)
    assert (code, report["valid"]) == (0, True)
    assert reported(report, "warnings") == expected(case)
    assert all(w["severity"] == "warning" and w["hint"] for w in report["warnings"])


def test_warnings_render_like_errors_then_the_ok_summary(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --json each warning shows `warning[W0901]`, its line, a caret and the fix-it
    on stderr; stdout still has the ok summary and the digest; exit 0."""
    case = DATA / "warn" / "w0901_old_spelling"
    code, out, err = check_in_process(case, monkeypatch, capsys)
    assert code == 0
    assert out.startswith("ok: ") and "\ndigest: sha256:" in out
    for file, line, column, found in sorted(expected(case)):
        block = rendered_block(err, f"{file}:{line}:{column}: warning[{found}]: ")
        source = (case / file).read_text().splitlines()[line - 1]
        assert block[2] == f"{line} | {source}"
        assert block[3] == f"{' ' * len(str(line))} | {' ' * (column - 1)}^"
        assert block[-1].startswith("  help: ")
    assert "help: write: catch_up all cap 5 (engine fmt --write rewrites it)" in err
    assert "help: write: overlap buffer_one (engine fmt --write rewrites it)" in err
    count = len(expected(case))
    assert err.rstrip().endswith(f"warning: {count} warnings; the rules loaded")


def test_on_failure_the_errors_come_first_then_the_warnings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tree that fails and also has an old spelling renders every error, then the
    warnings, then the error summary; --json lists them apart."""
    case = DATA / "invalid" / "e0102_old_and_new_spelling"
    code, out, err = check_in_process(case, monkeypatch, capsys)
    assert (code, out) == (1, "")
    heads = [line for line in err.splitlines() if line.startswith("loops/")]
    kinds = [": warning[" in head for head in heads]
    assert kinds == sorted(kinds) and kinds[0] is False and kinds[-1] is True
    code, out, _ = check_in_process(case, monkeypatch, capsys, "--json")
    report = json.loads(out)
    assert reported(report) == expected(case)
    old = {
        ("loops/bad.rules", line, column, "W0901") for line, column in ((8, 3), (15, 3), (17, 23))
    }
    assert reported(report, "warnings") == old


SUBPROCESS_CASES = ["multiple_errors", "e0900_missing_directory", "e0901_invalid_yaml"]


@pytest.mark.parametrize("name", SUBPROCESS_CASES)
def test_real_cli_fails_closed_with_exit_code_and_json(name: str, run_engine: Any) -> None:
    """`python -m engine check --json` exits 1 (2: missing directory) listing every diagnostic."""
    case = DATA / "invalid" / name
    result = run_engine("check", "--json", *tree_options(case), cwd=case)
    assert result.returncode == exit_code_for(case), result.stderr
    assert reported(json.loads(result.stdout)) == expected(case)
    assert "Traceback" not in result.stderr


def test_real_cli_warns_and_exits_zero(run_engine: Any) -> None:
    """`python -m engine check` on a tree of old spellings exits 0: the warnings on stderr,
    the summary on stdout."""
    case = DATA / "warn" / "w0901_old_spelling"
    result = run_engine("check", *tree_options(case), cwd=case)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok: ")
    assert "loops/loops.rules:6:3: warning[W0901]: old spelling 'catch-up'" in result.stderr
    assert "Traceback" not in result.stderr


def test_one_run_reports_every_error_across_files() -> None:
    """The multi-error case expects many codes in rules and overlay files, all from a single run."""
    found = expected(DATA / "invalid" / "multiple_errors")
    assert len({file for file, *_ in found}) >= 4
    assert len({code for *_, code in found}) >= 8


# ---- human output -----------------------------------------------------------------------------

DID_YOU_MEAN = {
    "e0101_unknown_setting": "did you mean 'catch_up'?",
    "e0203_unknown_event_type": "did you mean 'clock.tick.reaper'?",
    "e0204_unknown_zone": "did you mean 'Europe/Budapest'?",
    "e0501_unknown_definition": "did you mean 'dispatch'?",
    "e0503_undeclared_outcome": "did you mean 'PR_OPEN'?",
    "e0601_unknown_name": "did you mean 'event'?",
}


def rendered_block(stderr: str, head: str) -> list[str]:
    """The lines of the one diagnostic whose first line starts with `head`."""
    lines = stderr.splitlines()
    (start,) = [i for i, line in enumerate(lines) if line.startswith(head)]
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        block.append(line)
    return block


def assert_human_output(case: Path, stderr: str) -> list[list[str]]:
    """Each diagnostic shows file:line:col: error[CODE], its source line and a caret."""
    blocks = []
    for file, line, column, code in sorted(expected(case)):
        block = rendered_block(stderr, f"{file}:{line}:{column}: error[{code}]: ")
        source = (case / file).read_text().splitlines()[line - 1]
        gutter = str(line)
        assert block[2] == f"{gutter} | {source}"
        assert block[3] == f"{' ' * len(gutter)} | {' ' * (column - 1)}^"
        blocks.append(block)
    count = len(expected(case))
    assert stderr.rstrip().endswith(
        f"error: {count} problem{'s' if count > 1 else ''} found; nothing was loaded"
    )
    return blocks


@pytest.mark.parametrize("name", sorted(DID_YOU_MEAN))
def test_human_output_quotes_the_line_with_a_caret_and_a_hint(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --json a diagnostic shows its line, a caret and a `help: did you mean` hint."""
    case = DATA / "invalid" / name
    code, out, err = check_in_process(case, monkeypatch, capsys)
    assert (code, out) == (1, "")
    blocks = assert_human_output(case, err)
    assert any(f"  help: {DID_YOU_MEAN[name]}" in block for block in blocks)


def test_real_cli_human_output_goes_to_stderr(run_engine: Any) -> None:
    """The real command renders diagnostics and hints on stderr, nothing on stdout; exit 1."""
    case = DATA / "invalid" / "e0203_unknown_event_type"
    result = run_engine("check", *tree_options(case), cwd=case)
    assert (result.returncode, result.stdout) == (1, "")
    blocks = assert_human_output(case, result.stderr)
    hints = [line for block in blocks for line in block if line.startswith("  help: ")]
    assert "  help: did you mean 'factory.ship.apply.requested'?" in hints
    assert "  help: register it in registry/event-types.yaml" in hints


# ---- the shipped tree ---------------------------------------------------------------------------


def shipped_options(config: Path) -> list[str]:
    return [
        "--rules",
        str(ROOT / "loops"),
        "--registry",
        str(ROOT / "registry"),
        "--config",
        str(config),
    ]


def example_config(into: Path) -> Path:
    """config/*.example.yaml copied as an instance's repos.yaml and schedule.yaml."""
    into.mkdir()
    for stem in ("repos", "schedule"):
        shutil.copy(ROOT / "config" / f"{stem}.example.yaml", into / f"{stem}.yaml")
    return into


def test_shipped_tree_checks_clean_without_config(run_engine: Any, tmp_path: Path) -> None:
    """The shipped loops/ and registry/ check clean with an empty instance config."""
    (tmp_path / "none").mkdir()
    result = run_engine("check", "--json", *shipped_options(tmp_path / "none"))
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout)
    assert summary["valid"] is True
    assert summary["repos"] == 0 and summary["enabledLoops"] <= summary["loops"]
    assert summary["loops"] >= 1 and summary["routes"] >= 1 and summary["chains"] >= 1
    assert summary["webhookKinds"] >= 1 and summary["eventTypes"] >= summary["routes"]
    assert summary["digest"] == digest(Paths(ROOT / "loops", ROOT / "registry", tmp_path))


def test_shipped_tree_checks_clean_with_example_config(run_engine: Any, tmp_path: Path) -> None:
    """With the example config the shipped tree checks clean: 3 loops per active repo, and more."""
    config = example_config(tmp_path / "config")
    result = run_engine("check", "--json", *shipped_options(config))
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout)
    repos = YAML(typ="safe").load((config / "repos.yaml").read_text())["repos"]
    schedules = YAML(typ="safe").load((config / "schedule.yaml").read_text())["schedules"]
    active = [name for name, repo in repos.items() if not repo.get("report_only")]
    kernel = load_rules(Paths(ROOT / "loops", ROOT / "registry", tmp_path / "none")).loops
    (tmp_path / "repos-only").mkdir()
    shutil.copy(config / "repos.yaml", tmp_path / "repos-only")
    expanded = load_rules(Paths(ROOT / "loops", ROOT / "registry", tmp_path / "repos-only")).loops
    assert len(expanded) == len(kernel) + 3 * len(active)
    new = [name for name in schedules if name not in expanded]
    assert summary["repos"] == len(repos)
    assert summary["loops"] == len(expanded) + len(new)
    effective = load_rules(Paths(ROOT / "loops", ROOT / "registry", config)).loops
    assert summary["enabledLoops"] == sum(1 for loop in effective.values() if loop.enabled)
    for name, entry in schedules.items():
        assert effective[name].enabled == entry.get("enabled", effective[name].enabled)


def test_example_config_expands_work_merge_ship_per_active_repo(tmp_path: Path) -> None:
    """Each repo not report-only gets work, merge and ship loops; overlay loops keep a source."""
    config = example_config(tmp_path / "config")
    rules = load_rules(Paths(ROOT / "loops", ROOT / "registry", config))
    repos = YAML(typ="safe").load((config / "repos.yaml").read_text())["repos"]
    schedules = YAML(typ="safe").load((config / "schedule.yaml").read_text())["schedules"]
    for name, repo in repos.items():
        made = {f"{kind}-{name}" for kind in ("work", "merge", "ship")} & set(rules.loops)
        assert made == (
            set() if repo.get("report_only") else {f"{k}-{name}" for k in ("work", "merge", "ship")}
        )
    for name, entry in schedules.items():
        loop = rules.loops[name]
        if loop.source.value == "kernel":
            assert set(loop.overridden) == set(entry)
            assert loop.overlay_origin is not None
        else:
            assert loop.origin == loop.overlay_origin


# ---- the digest ---------------------------------------------------------------------------------


def kernel_copy(tmp_path: Path) -> Paths:
    shutil.copytree(ROOT / "loops", tmp_path / "loops")
    shutil.copytree(ROOT / "registry", tmp_path / "registry")
    (tmp_path / "config").mkdir()
    return Paths(tmp_path / "loops", tmp_path / "registry", tmp_path / "config")


def test_digest_is_stable_across_runs(
    run_engine: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`engine digest` prints the same sha256 on every run, the one `engine check` reports."""
    paths = kernel_copy(tmp_path)
    result = run_engine("digest", *TREE_OPTIONS, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    monkeypatch.chdir(tmp_path)
    assert main(["digest", "--json", *TREE_OPTIONS]) == 0
    value = json.loads(capsys.readouterr().out)["digest"]
    assert value.startswith("sha256:") and result.stdout.strip() == value
    assert value == digest(paths) == load_rules(paths).digest


def test_digest_changes_when_any_kernel_file_changes(tmp_path: Path) -> None:
    """Editing a rule, registry or schema file changes the digest; restoring it restores it."""
    paths = kernel_copy(tmp_path)
    before = digest(paths)
    for file in (
        paths.rules / "reaper.rules",
        paths.registry / "definitions.yaml",
        next((paths.registry / "schemas").glob("*.json")),
    ):
        original = file.read_bytes()
        file.write_bytes(original + b"\n")
        assert digest(paths) != before, file
        file.write_bytes(original)
        assert digest(paths) == before
    (paths.rules / "extra.rules").write_text("# a new kernel file\n")
    assert digest(paths) != before


def test_digest_ignores_config_and_untracked_hidden_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Changing config/schedule.yaml changes loops but not the digest; nor do hidden files."""
    paths = kernel_copy(tmp_path)
    before = digest(paths)
    schedule = paths.config / "schedule.yaml"
    summaries = []
    for text in (
        "schedules:\n  reaper:\n    enabled: true\n",
        "schedules:\n  reaper:\n    every: 5m\n",
    ):
        schedule.write_text(text)
        assert digest(paths) == before
        monkeypatch.chdir(tmp_path)
        assert main(["check", "--json", *TREE_OPTIONS]) == 0
        summaries.append(json.loads(capsys.readouterr().out))
    assert summaries[0]["enabledLoops"] != summaries[1]["enabledLoops"]
    assert summaries[0]["digest"] == summaries[1]["digest"] == before
    (paths.registry / ".definitions.yaml.swp").write_text("scratch")
    (paths.rules / ".#reaper.rules").write_text("scratch")
    assert digest(paths) == before


def test_worker_logs_one_line_per_warning_at_start(run_engine: Any, tmp_path: Path) -> None:
    """`engine worker` on rules with old spellings starts, logging each warning once (level
    warning) with its place and its fix-it; the rules' warnings never stop it."""
    case = DATA / "warn" / "w0901_old_spelling"
    db = str(tmp_path / "engine.db")
    result = run_engine("worker", "--once", "--db", db, *tree_options(case), cwd=case)
    assert (result.returncode, result.stdout) == (0, "no queued run\n"), result.stderr
    logged = [line for line in result.stderr.splitlines() if "warning[W0901]" in line]
    assert len(logged) == len(expected(case))
    assert any(
        "loops/loops.rules:6:3: warning[W0901]: old spelling 'catch-up';"
        " help: write: catch_up all cap 5 (engine fmt --write rewrites it)" in line
        for line in logged
    )
    assert all("WARNING" in line or '"warning"' in line for line in logged)
