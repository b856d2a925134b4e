"""Rendering a diagnostic whatever the file holds: a name or a line with a line break,
a control character or a terminal escape in it still makes one header line a
problem, and the line quoted under it is the line its number names."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dsl.diagnostics import YAML_LINE_BREAK, Collector, Diagnostic, Span


@given(message=st.text(), hint=st.text(), source=st.text())
def test_a_rendered_diagnostic_has_one_header_line_and_its_shape(
    message: str, hint: str, source: str
) -> None:
    """Any message, hint and source line render as a header line, the three lines of
    the quote, and a help line: none of them broken, and no character that is not
    printable (ESC, NUL, NEL, LS...) passed to the terminal."""
    rendered = Diagnostic("E0902", message, Span("f.yaml", 3, 2), source, hint or None).render()
    lines = rendered.split("\n")
    assert lines[0].startswith("f.yaml:3:2: error[E0902]: ")
    assert len(lines) == 1 + (3 if source else 0) + (1 if hint else 0)
    assert all(line.isprintable() for line in lines)


def test_the_caret_stays_under_its_character_past_escaped_ones() -> None:
    """A control character before the column is shown escaped, and the caret moves
    with it to stay under the character the column names."""
    rendered = Diagnostic("E0902", "m", Span("f", 1, 6), "a\x1b[0mXb").render()
    quoted, caret = rendered.split("\n")[2:4]
    assert quoted == "1 | a\\x1b[0mXb" and quoted[caret.index("^")] == "X"


def test_quoted_lines_follow_the_parsers_line_numbers() -> None:
    """A form feed or NEL inside a line does not end it for the quote (no parser here
    counts them), so the line quoted is the one the diagnostic's number names; YAML's
    lone carriage return does end one, as the YAML reader counts."""
    collector = Collector()
    collector.sources.add("a.rules", "loop x # \x0c \x85 \u2028\n  every 1h\n  emit nope\n")
    collector.sources.add("b.yaml", "a: 1\rb: 2\r\nc: x\x85y\n", YAML_LINE_BREAK)
    assert collector.sources.line("a.rules", 3) == "  emit nope"
    assert [collector.sources.line("b.yaml", n) for n in (2, 3)] == ["b: 2", "c: x\x85y"]
