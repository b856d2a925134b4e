"""Every link to a section of the project's documents lands on a heading: the links
between docs pages, README's links into docs/, and the `docs/PAGE.md#anchor` citations
in code, help texts, error hints, rule-file comments and tests. An anchor is the
heading's slug as GitHub renders it (lower case, punctuation dropped, spaces to
hyphens, `-1`, `-2` for repeated headings). A renamed heading fails here until every
citation of it follows."""

from __future__ import annotations

import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEADING = re.compile(r"^(#{1,6}) +(.+?) *#*$")
FENCE = re.compile(r"^\s*(```|~~~)")
# A markdown link's target, `[text](PAGE.md#anchor)` or `[text](#anchor)`.
MD_LINK = re.compile(r"\]\(([^()\s]*?)#([^()\s]+)\)")
# A citation outside markdown links: `docs/PAGE.md#anchor` (or `PAGE.md#anchor` in docs/).
CITATION = re.compile(r"(?<![\w/.-])((?:docs/)?[\w-]+(?:/[\w-]+)*\.md)#([\w-]+)")
SOURCES = ("engine", "dsl", "tests", "bench", "loops", "docs/examples", ".ci")
SUFFIXES = {".py", ".rules", ".sh", ".yaml", ".yml", ".md", ""}


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    """The anchors of a markdown page's headings (outside code fences)."""
    seen: Counter[str] = Counter()
    found: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = HEADING.match(line)
        if fenced or m is None:
            continue
        base = slug(m.group(2))
        found.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
        seen[base] += 1
    return frozenset(found)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def cited_files() -> list[Path]:
    files: list[Path] = []
    for part in SOURCES:
        for path in sorted((ROOT / part).rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES and ".venv" not in path.parts:
                files.append(path)
    return [p for p in files if p.suffix != ".md"]


def target(source: Path, page: str) -> Path:
    """The page a link names, read from where the link is written."""
    if page.startswith("docs/"):
        return ROOT / page
    if source.is_relative_to(ROOT / "docs") and source.suffix == ".md":
        return (source.parent / page).resolve()
    return ROOT / "docs" / page


def broken(source: Path, text: str, links: list[tuple[str, str]]) -> list[str]:
    out = []
    for page, anchor in links:
        where = source if page == "" else target(source, page)
        if not where.is_file():
            continue  # another file's link (an absent page is not this test's concern)
        if where.suffix == ".md" and anchor not in anchors(where):
            line = text.count("\n", 0, text.find(f"#{anchor}")) + 1
            out.append(f"{source.relative_to(ROOT)}:{line}: {page or '(this page)'}#{anchor}")
    return out


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_of_a_page_lands_on_a_heading(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    links = MD_LINK.findall(text)
    links += [(p, a) for p, a in CITATION.findall(text) if p.startswith("docs/")]
    assert broken(page, text, links) == []


def test_every_citation_in_code_and_rule_files_lands_on_a_heading() -> None:
    problems = []
    for path in cited_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        problems += broken(path, text, CITATION.findall(text))
    assert problems == []


def test_the_slug_is_githubs() -> None:
    """The cases the project's headings use: code spans, colons, slashes, underscores."""
    assert slug("Triggers that wait: `on_event` and `after`") == (
        "triggers-that-wait-on_event-and-after"
    )
    assert slug("`engine schedule enable` / `disable`") == "engine-schedule-enable--disable"
    assert slug("2. The host clock bridge") == "2-the-host-clock-bridge"
    assert slug("E0102 old and new spelling of one setting") == (
        "e0102-old-and-new-spelling-of-one-setting"
    )
