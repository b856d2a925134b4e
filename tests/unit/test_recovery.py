"""Every syntax error of a rule file in one run (dsl/recovery.py,
docs/rules.md#e0001-syntax-error): each mistake reported once, at its line, with the
labelled message of a common mistake, and no cascade from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl import expr as ex
from dsl import spelling
from dsl.diagnostics import Diagnostic, RulesError, Sources
from dsl.parser import parse
from dsl.recovery import MAX_ERRORS, MISTAKES, Mistake, _logical_line_end, diagnose
from tests.unit.test_loader_fuzz import LINES
from tests.unit.test_parser import grammar_ish

ROOT = Path(__file__).resolve().parents[2]


def diagnostics(text: str) -> list[Diagnostic]:
    with pytest.raises(RulesError) as caught:
        parse(text, "t.rules")
    return list(caught.value.diagnostics)


def found(text: str) -> list[tuple[str, int, int]]:
    return [(d.code, d.span.line, d.span.column) for d in diagnostics(text)]


EXAMPLES = [(mistake, text, line) for mistake in MISTAKES for text, line in mistake.examples]


@pytest.mark.parametrize(
    ("mistake", "text", "line"),
    EXAMPLES,
    ids=[f"{m.name}-{i}" for i, (m, _, _) in enumerate(EXAMPLES)],
)
def test_each_labelled_example_yields_its_label_once(
    mistake: Mistake, text: str, line: int
) -> None:
    """Each example of a common mistake is one E0001 on its line, with the mistake's own
    message and hint (a grammar change that loses a label fails here)."""
    (d,) = diagnostics(text)
    assert (d.code, d.span.line) == ("E0001", line)
    prefix = mistake.message.split("{", 1)[0]
    assert d.message.startswith(prefix) and d.message != ""
    assert d.hint is not None and d.hint.startswith(mistake.hint.split("{", 1)[0])


def test_every_syntax_error_of_a_file_is_reported_in_file_order() -> None:
    """One run reports each syntax error of the file, in order, each once."""
    text = (
        "every 1h\n"  # 1: a setting outside a loop
        "route a.b c@1\n"  # 2: no `to`
        "loop x\n"
        "  emit\n"  # 4: emit without a type
        "  every 1h\n"
        "  emit a.b if\n"  # 6: a guard without a condition
        "  emit a.b { x: 1\n"  # 7: `{` not closed
        "  every 2h\n"
        "webhook github push\n"
        '  ignore x unless action = "opened"\n'  # 10: `=` for `==`
        "  emit a.b\n"
    )
    assert found(text) == [
        ("E0001", 1, 1),
        ("E0001", 2, 11),
        ("E0001", 4, 7),
        ("E0001", 6, 14),
        ("E0001", 7, 12),
        ("E0001", 10, 26),
    ]


def test_an_unclosed_brace_is_reported_where_it_opens_and_the_next_line_parses() -> None:
    """A `{` never closed is reported at the `{`; the lines after it are read as rules
    again (a mistake in them is reported too), not swallowed up to the end of the file."""
    text = 'loop x\n  manual\n  emit a.b { repo: "x",\n\nroute a.b c@1\n'
    diags = diagnostics(text)
    assert [(d.span.line, d.span.column) for d in diags] == [(3, 12), (5, 11)]
    assert diags[0].message == "'{' is not closed"


def test_a_block_under_a_bad_header_is_not_reported_again() -> None:
    """A header that fails takes its indented block with it: one diagnostic."""
    assert found("on dispatch@1 outcom X\n  stop\n  emit a.b\nroute a.b to c@1\n") == [
        ("E0001", 1, 15)
    ]


def test_a_block_left_empty_by_a_bad_line_is_one_error() -> None:
    """A loop whose only line is wrong is that line's error, not also an empty block."""
    assert found("loop x\n  emit\nroute a.b to c@1\n") == [("E0001", 2, 7)]


def test_a_header_cut_from_its_block_by_a_bad_line_is_not_blamed_too() -> None:
    """A bad line at column 1 between a header and its block is the one diagnostic; a
    header without a block whose next line parses is reported."""
    text = "for r in repos\n  loop a\nevery 1h\n    every 1h\n    emit a.b\n"
    assert found(text) == [("E0001", 3, 1)]
    assert found("for r in repos\n  loop a\nroute a.b to c@1\n") == [("E0001", 2, 9)]


def test_inconsistent_indentation_does_not_hide_other_syntax_errors() -> None:
    """E0002 is reported beside the file's other syntax errors, once for the block."""
    text = "loop x\n    manual\n  emit a.b\n  every 1h\nroute a.b c@1\n"
    assert found(text) == [("E0002", 3, 1), ("E0001", 5, 11)]


def test_builder_errors_and_syntax_errors_are_reported_together() -> None:
    """A bad template, an unknown function and a duplicate key (found while building) do
    not hide syntax errors after them, nor they the builder's."""
    text = (
        "loop x\n"
        "  manual\n"
        '  emit a.b { s: "ab{c" }\n'  # E0602
        "route a.b c@1\n"  # E0001
        "webhook github push\n"
        "  emit a.b { s: upper(x) }\n"  # E0603
        "  emit a.b { s: 1, s: 2 }\n"  # E0604
        "  let y =\n"  # E0001
    )
    assert [code for code, _, _ in found(text)] == ["E0602", "E0001", "E0603", "E0604", "E0001"]


def test_a_too_deep_expression_is_reported_beside_a_syntax_error() -> None:
    """E0608 and a syntax error elsewhere in the file are both reported."""
    deep = "not " * (ex.MAX_DEPTH + 1) + "a"
    text = f"webhook github t\n  let v = {deep}\nroute a.b c@1\n"
    assert found(text) == [("E0608", 2, 11), ("E0001", 3, 11)]


def test_the_errors_of_a_file_are_bounded() -> None:
    """Past MAX_ERRORS syntax errors one more line says the rest were cut."""
    diags = diagnostics("route a.b c@1\n" * (MAX_ERRORS + 20))
    assert len(diags) == MAX_ERRORS + 1
    assert [d.span.line for d in diags[:MAX_ERRORS]] == list(range(1, MAX_ERRORS + 1))
    assert diags[-1].message.startswith(f"more than {MAX_ERRORS} syntax errors")


# ---- one bad line in a valid file is one diagnostic on that line ------------------------

VALID = sorted(
    [
        *(ROOT / "loops").glob("*.rules"),
        *(ROOT / "tests" / "data" / "rules" / "valid").rglob("*.rules"),
    ]
)
# A bad line of each kind the table labels, and where it goes: "top" at column 1, "next"
# indented as the line it is put before (so it belongs to that line's block).
BAD_LINES = [
    ("every 1h", "top"),
    ("route a.b c@1", "top"),
    ('emit { repo: "x" }', "next"),
    ("emit a.b if", "next"),
    ('emit a.b if event.payload.repo = "x"', "next"),
    ("emit a.b { repo: 1", "next"),
    ('description "nightly', "next"),
]
# The label each bad line gets wherever it goes (a `"next"` line may land in a block that
# does not take it, such as an emit in a triage table, so only the "top" ones are fixed).
LABEL_AT_TOP = {
    "every 1h": "setting outside a loop",
    "route a.b c@1": "route without to",
}


def boundaries(text: str) -> list[int]:
    """The starts of the file's logical lines (where a line can go in)."""
    starts, pos = [0], 0
    while pos < len(text):
        pos = _logical_line_end(text, pos, 0, -1) + 1
        if text[pos - 2 : pos] == "\r\n" or (pos <= len(text) and text[pos - 1 : pos] == "\r"):
            pos += 1
        starts.append(min(pos, len(text)))
    return sorted(set(starts))


def indentation_at(text: str, pos: int) -> str:
    """The indentation of the first line at or after `pos` that holds a rule."""
    for raw in text[pos:].splitlines():
        stripped = raw.lstrip(" \t")
        if stripped and not stripped.startswith("#"):
            return raw[: len(raw) - len(stripped)]
    return ""


def test_the_valid_files_parse() -> None:
    """The files the property below breaks are valid to begin with."""
    assert VALID
    for path in VALID:
        parse(path.read_text(encoding="utf-8"), str(path))


def test_the_recovering_parse_finds_nothing_in_a_valid_file() -> None:
    """The second parse, that recovers, reports nothing the fast parse accepts: a file with
    one mistake is never also blamed for its valid lines."""
    for path in VALID:
        text = path.read_text(encoding="utf-8")
        sources = Sources()
        sources.add(str(path), text)
        assert diagnose(text, str(path), sources) == []


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(LINES, grammar_ish))
def test_the_recovering_parse_fails_exactly_when_the_fast_one_does(text: str) -> None:
    """On rule-like text, the recovering parse reports something exactly when the fast
    parse refuses the file (so its diagnostics are the file's, never an empty list)."""
    try:
        parse(text, "x.rules")
        valid = True
    except RulesError:
        valid = False
    sources = Sources()
    sources.add("x.rules", text)
    assert (diagnose(text, "x.rules", sources) == []) == valid


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), path=st.sampled_from(VALID), bad=st.sampled_from(BAD_LINES))
def test_one_bad_line_in_a_valid_file_is_one_diagnostic_on_that_line(
    data: st.DataObject, path: Path, bad: tuple[str, str]
) -> None:
    """Putting one bad line into a valid file yields exactly one diagnostic, on it."""
    text = path.read_text(encoding="utf-8")
    if not text.endswith("\n"):
        text += "\n"
    at = data.draw(st.sampled_from(boundaries(text)))
    content, where = bad
    indent = "" if where == "top" else indentation_at(text, at)
    broken = text[:at] + indent + content + "\n" + text[at:]
    line = text[:at].count("\n") + 1
    diags = diagnostics(broken)
    assert [d.span.line for d in diags] == [line], [d.render() for d in diags]
    if content in LABEL_AT_TOP:
        assert (diags[0].message, diags[0].hint) == labelled(LABEL_AT_TOP[content], content)


def labelled(name: str, line: str) -> tuple[str, str]:
    """The message and hint of mistake `name` at `line`, whose first word is what it quotes."""
    mistake = next(m for m in MISTAKES if m.name == name)
    return mistake.message.format(found=line.split()[0]), mistake.hint


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    path=st.sampled_from(VALID),
    word=st.sampled_from(sorted(spelling.LOOP_SETTING_WORDS | spelling.BLOCK_LINES)),
)
def test_a_loop_setting_or_block_line_at_the_top_level_is_named_so_anywhere(
    data: st.DataObject, path: Path, word: str
) -> None:
    """A line starting with a loop setting (any spelling) or a block's line, put at the top
    level anywhere in a valid file, is one diagnostic on it with its own label: a
    setting outside a loop, or a line outside its block (never a misspelt keyword's)."""
    text = path.read_text(encoding="utf-8")
    if not text.endswith("\n"):
        text += "\n"
    at = data.draw(st.sampled_from(boundaries(text)))
    bad = f"{word} x"
    line = text[:at].count("\n") + 1
    diags = diagnostics(text[:at] + bad + "\n" + text[at:])
    assert [d.span.line for d in diags] == [line], [d.render() for d in diags]
    name = "block line outside its block" if word in spelling.BLOCK_LINES else None
    assert (diags[0].message, diags[0].hint) == labelled(name or "setting outside a loop", bad)


@pytest.mark.parametrize(
    ("line", "hint"),
    [("lop a", "did you mean 'loop'?"), ("rout a.b to c@1", "did you mean 'route'?")],
)
def test_a_misspelt_declaration_keyword_is_not_called_a_setting(line: str, hint: str) -> None:
    """A top-level word that is no setting (a misspelt `loop`) is an unexpected word with
    the keyword it is closest to, not "a setting outside a loop"."""
    (d,) = diagnostics(f"loop b\n  manual\n  emit a.b\n\n{line}\n")
    assert (d.span.line, d.message, d.hint) == (5, f"unexpected '{line.split()[0]}'", hint)
