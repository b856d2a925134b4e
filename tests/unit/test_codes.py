"""The diagnostic code catalogue (dsl/codes.py) against the source that raises codes,
the golden invalid cases that trigger them, and docs/rules.md that explains them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsl.codes import CODES

ROOT = Path(__file__).resolve().parents[2]
CODE = re.compile(r"\bE[0-9]{4}\b")
SOURCES = sorted([*(ROOT / "dsl").rglob("*.py"), *(ROOT / "engine").rglob("*.py")])
INVALID = ROOT / "tests" / "data" / "rules" / "invalid"


def codes_in(paths: list[Path]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in paths:
        for code in CODE.findall(path.read_text(encoding="utf-8")):
            found.setdefault(code, []).append(str(path.relative_to(ROOT)))
    return found


def test_catalogue_is_well_formed() -> None:
    """Every catalogued code is E followed by four digits and has a one-line title."""
    for code, title in CODES.items():
        assert re.fullmatch(r"E[0-9]{4}", code)
        assert title and "\n" not in title


def test_every_code_in_the_source_is_catalogued() -> None:
    """No code appears in dsl/ or engine/ source that dsl/codes.py does not list."""
    used = codes_in([p for p in SOURCES if p.name != "codes.py"])
    assert {code: where for code, where in used.items() if code not in CODES} == {}


def test_every_catalogued_code_is_raised_somewhere() -> None:
    """Every code in the catalogue is used by some source file, so none is dead."""
    used = codes_in([p for p in SOURCES if p.name != "codes.py"])
    assert sorted(set(CODES) - set(used)) == []


def test_every_code_has_a_golden_invalid_case() -> None:
    """Each catalogued code is expected by at least one case under tests/data/rules/invalid/."""
    expected = codes_in(sorted(INVALID.glob("*/expected.txt")))
    assert sorted(set(CODES) - set(expected)) == []


def test_every_code_is_documented() -> None:
    """docs/rules.md mentions every catalogued code."""
    doc = ROOT / "docs" / "rules.md"
    if not doc.is_file():
        pytest.fail("docs/rules.md does not exist yet; it must explain every diagnostic code")
    text = doc.read_text(encoding="utf-8")
    assert [code for code in CODES if code not in text] == []
