"""The diagnostic code catalogue (dsl/codes.py) against the source that raises codes,
the golden cases that trigger them (invalid/ for errors, warn/ for warnings), and
docs/rules.md that explains them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsl.codes import CODES

ROOT = Path(__file__).resolve().parents[2]
CODE = re.compile(r"\b[EW][0-9]{4}\b")
SOURCES = sorted([*(ROOT / "dsl").rglob("*.py"), *(ROOT / "engine").rglob("*.py")])
INVALID = ROOT / "tests" / "data" / "rules" / "invalid"
WARN = ROOT / "tests" / "data" / "rules" / "warn"


def codes_in(paths: list[Path]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in paths:
        for code in CODE.findall(path.read_text(encoding="utf-8")):
            found.setdefault(code, []).append(str(path.relative_to(ROOT)))
    return found


def test_catalogue_is_well_formed() -> None:
    """Every catalogued code is E (error) or W (warning) and four digits, with a one-line
    title."""
    for code, title in CODES.items():
        assert re.fullmatch(r"[EW][0-9]{4}", code)
        assert title and "\n" not in title


def test_every_code_in_the_source_is_catalogued() -> None:
    """No code appears in dsl/ or engine/ source that dsl/codes.py does not list."""
    used = codes_in([p for p in SOURCES if p.name != "codes.py"])
    assert {code: where for code, where in used.items() if code not in CODES} == {}


def test_every_catalogued_code_is_raised_somewhere() -> None:
    """Every code in the catalogue is used by some source file, so none is dead."""
    used = codes_in([p for p in SOURCES if p.name != "codes.py"])
    assert sorted(set(CODES) - set(used)) == []


def test_every_code_has_a_golden_case() -> None:
    """Each catalogued error is expected by at least one case under tests/data/rules/invalid/,
    each warning by one under tests/data/rules/warn/."""
    errors = codes_in(sorted(INVALID.glob("*/expected.txt")))
    warnings = codes_in(sorted(WARN.glob("*/expected.txt")))
    assert sorted(c for c in CODES if c.startswith("E") and c not in errors) == []
    assert sorted(c for c in CODES if c.startswith("W") and c not in warnings) == []
    assert [c for c in errors if c.startswith("W")] == []  # invalid/ lists errors only


def test_every_code_is_documented() -> None:
    """docs/rules.md mentions every catalogued code."""
    doc = ROOT / "docs" / "rules.md"
    if not doc.is_file():
        pytest.fail("docs/rules.md does not exist yet; it must explain every diagnostic code")
    text = doc.read_text(encoding="utf-8")
    assert [code for code in CODES if code not in text] == []
