"""`engine fmt` on the command line (docs/cli.md#engine-fmt): what each mode prints, what
it writes and its exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.cli.exits import INVALID, OK, USAGE
from engine.cli.main import main

OLD = "loop a\n  every   1h\n  emit x\n  disabled\n"
NEW = "loop a\n  every 1h\n  emit x\n  enabled false\n"


def tree(tmp_path: Path, **files: str) -> Path:
    for name, text in files.items():
        path = tmp_path / "loops" / f"{name}.rules"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path / "loops"


def test_one_file_prints_its_formatted_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loops = tree(tmp_path, a=OLD)
    assert main(["fmt", str(loops / "a.rules")]) == OK
    assert capsys.readouterr().out == NEW
    assert (loops / "a.rules").read_text() == OLD  # nothing written


def test_a_directory_prints_a_diff_of_each_file_that_would_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    tree(tmp_path, a=OLD, b=NEW)
    assert main(["fmt", "loops"]) == OK
    out = capsys.readouterr().out
    assert out.startswith("--- a/loops/a.rules\n+++ b/loops/a.rules\n")
    assert "-  disabled\n+  enabled false\n" in out
    assert "b.rules" not in out


def test_check_lists_the_files_that_would_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    tree(tmp_path, a=OLD, b=NEW)
    assert main(["fmt", "--check", "loops"]) == INVALID
    assert capsys.readouterr().out == "would reformat loops/a.rules\n"
    assert main(["fmt", "--check", "loops/b.rules"]) == OK
    assert capsys.readouterr().out == ""


def test_write_rewrites_changed_files_in_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    loops = tree(tmp_path, a=OLD, b=NEW)
    before = (loops / "b.rules").stat().st_mtime_ns
    assert main(["fmt", "--write", "--rules", "loops"]) == OK
    assert capsys.readouterr().out == "formatted loops/a.rules\n"
    assert (loops / "a.rules").read_text() == NEW
    assert (loops / "b.rules").stat().st_mtime_ns == before  # unchanged, untouched
    assert sorted(p.name for p in loops.iterdir()) == ["a.rules", "b.rules"]  # no temp left
    assert main(["fmt", "--check", "loops"]) == OK


def test_a_file_that_does_not_lex_is_refused_and_never_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    loops = tree(tmp_path, a=OLD, bad="loop b\n  emit x { a: 1\n")
    assert main(["fmt", "--write", "loops"]) == INVALID
    captured = capsys.readouterr()
    assert captured.out == "formatted loops/a.rules\n"  # the other files are still done
    assert "loops/bad.rules:2:10: error[E0001]: '{' is never closed" in captured.err
    assert (loops / "bad.rules").read_text() == "loop b\n  emit x { a: 1\n"


def test_an_old_spelling_that_cannot_be_rewritten_fails_check_and_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    text = "loop a\n  every 1h\n  emit x\n  overlapping\n  on-active coalesce\n"
    tree(tmp_path, a=text)
    for mode in ("--check", "--write"):
        assert main(["fmt", mode, "loops"]) == INVALID
        err = capsys.readouterr().err
        assert "loops/a.rules:4: cannot rewrite: no single overlap value means" in err


@pytest.mark.parametrize(
    "argv",
    [["fmt", "--check", "--write", "x.rules"], ["fmt", "missing.rules"], ["fmt", "--bogus"]],
)
def test_usage_errors_exit_2(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as raised:
        raise SystemExit(main(argv))
    assert raised.value.code == USAGE
