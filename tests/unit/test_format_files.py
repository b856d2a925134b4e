"""`engine fmt` over the shipped rules and every test tree (docs/rules.md#formatting):
formatting is idempotent on each file, and a formatted tree compiles to the RuleSet the
original compiles to (positions and the digest apart). Where the parser reads the new
forms, the old spellings are rewritten too and the rewritten tree must still mean the
same; until then the layout alone is checked."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from dsl.diagnostics import RulesError
from dsl.format import format_text
from dsl.parser import parse
from engine.loading import Paths, load_rules
from tests.unit.test_format import plain

ROOT = Path(__file__).resolve().parents[2]


def _text(path: Path) -> bool:
    """A readable UTF-8 file (the trees hold a directory named *.rules and a Latin-1
    file, for E0905 and E0907)."""
    try:
        path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return True


FOUND = [*ROOT.glob("loops/**/*.rules"), *ROOT.glob("tests/data/**/*.rules")]
RULE_FILES = sorted(p for p in FOUND if _text(p))
TREES = sorted(
    {ROOT / "loops"}
    | {
        d
        for d in ROOT.glob("tests/data/**/loops")
        if (d.parent / "registry").is_dir() and "invalid" not in d.parts and any(d.rglob("*.rules"))
    }
)


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", RULE_FILES, ids=_id)
def test_formatting_each_shipped_and_test_file_is_idempotent(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for rewrite in (False, True):
        try:
            once = format_text(text, _id(path), rewrite).text
        except RulesError:  # a test file that must not lex (E0001 cases)
            assert "invalid" in path.parts
            return
        assert format_text(once, _id(path), rewrite).text == once


def _copy(loops: Path, into: Path) -> Paths:
    shutil.copytree(loops, into / "loops")
    shutil.copytree(loops.parent / "registry", into / "registry")
    config = loops.parent / "config"
    if config.is_dir():
        shutil.copytree(config, into / "config")
    else:
        (into / "config").mkdir()
    return Paths(into / "loops", into / "registry", into / "config")


@pytest.mark.parametrize("loops", TREES, ids=_id)
def test_a_formatted_tree_compiles_to_the_same_ruleset(loops: Path, tmp_path: Path) -> None:
    before = _copy(loops, tmp_path / "before")
    after = _copy(loops, tmp_path / "after")
    for file in sorted(after.rules.rglob("*.rules")):
        text = file.read_text(encoding="utf-8")
        file.write_text(format_text(text, file.name, rewrite=True).text, encoding="utf-8")
    assert _meaning(plain(load_rules(after))) == _meaning(plain(load_rules(before)))


# What the overlap rewrite changes on purpose (dsl/spelling.py, a note when it does):
# `on-active skip` becomes `overlap skip`, whose no-op is `occurrence_active` (the
# `return` policy); `budget active-occurrences 1` beside `singleton` is the level's
# default, which the compiled loop spells as no limit given.
_INTENDED = {("on_active", "skip"): ("on_active", "return"), ("active_occurrences", 1): None}


def _meaning(value: Any) -> Any:
    if isinstance(value, tuple):
        for old, new in _INTENDED.items():
            if value == old:
                return new or (old[0], None)
        return tuple(_meaning(v) for v in value)
    return value


@pytest.mark.parametrize("path", [p for p in RULE_FILES if "invalid" in p.parts], ids=_id)
def test_an_invalid_test_file_parses_after_formatting_as_before(path: Path) -> None:
    """The layout keeps what the parser makes of a file, errors included (by code)."""
    text = path.read_text(encoding="utf-8")
    try:
        formatted = format_text(text, "t.rules", rewrite=False).text
    except RulesError:
        return  # refused: nothing is written
    try:
        expected = plain(parse(text, "t.rules"))
    except RulesError as err:
        with pytest.raises(RulesError) as caught:
            parse(formatted, "t.rules")
        assert [d.code for d in caught.value.diagnostics] == [d.code for d in err.diagnostics]
        return
    assert plain(parse(formatted, "t.rules")) == expected
