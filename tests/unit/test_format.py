"""`engine fmt`'s formatter (dsl/format.py, docs/rules.md#formatting): the canonical
layout, comments kept, each old spelling rewritten, files that do not lex refused; and
as properties over generated rule files, idempotence and the round trip (the formatted
text parses to what the original parses to, apart from positions)."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl.diagnostics import RulesError, Span
from dsl.format import format_text
from dsl.parser import parse


def fmt(text: str, rewrite: bool = True) -> str:
    return format_text(text, "t.rules", rewrite).text


def refused(text: str) -> tuple[str, int, int, str]:
    with pytest.raises(RulesError) as caught:
        format_text(text, "t.rules")
    (d,) = caught.value.diagnostics
    return d.code, d.span.line, d.span.column, d.message


def plain(value: Any) -> Any:
    """A parsed or compiled value with every position left out (spans, digests), and
    the old-spelling warnings a rewrite is meant to remove, and where each setting was
    written (`places`, engine check --explain)."""
    if isinstance(value, Span):
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (
            type(value).__name__,
            tuple(
                (f.name, plain(getattr(value, f.name)))
                for f in dataclasses.fields(value)
                if f.name not in ("digest", "warnings", "places", "span", "line_span", "type_span")
            ),
        )
    if isinstance(value, Mapping):
        return tuple(sorted((repr(plain(k)), plain(v)) for k, v in value.items()))
    if isinstance(value, frozenset | set):
        return tuple(sorted(repr(plain(v)) for v in value))
    if isinstance(value, tuple | list):
        return tuple(plain(v) for v in value)
    if isinstance(value, enum.Enum):
        return value.value
    return value


def same_meaning(before: str, after: str) -> None:
    assert plain(parse(after, "t.rules")) == plain(parse(before, "t.rules"))


# ---- layout ----------------------------------------------------------------------------


def test_blocks_are_indented_two_spaces_a_level_with_one_space_between_words() -> None:
    text = (
        "loop   a\n\tevery    1h\n\temit  x\nfor r in repos\n   loop b-{r.name}\n      every 1h\n"
    )
    assert fmt(text, rewrite=False) == (
        "loop a\n  every 1h\n  emit x\n\nfor r in repos\n  loop b-{r.name}\n    every 1h\n"
    )


def test_blank_lines_one_between_blocks_at_most_one_inside_and_none_at_the_ends() -> None:
    text = "\n\nloop a\n  every 1h\n\n\n\n  emit x\nloop b\n  every 1h\n\n\n"
    assert fmt(text) == "loop a\n  every 1h\n\n  emit x\n\nloop b\n  every 1h\n"


def test_one_line_declarations_stay_together_and_a_block_after_them_is_set_apart() -> None:
    text = "route a to b@1\nroute c to d@1\nloop x\n  every 1h\n"
    assert fmt(text) == "route a to b@1\nroute c to d@1\n\nloop x\n  every 1h\n"


def test_a_one_line_payload_is_spaced_and_loses_its_trailing_comma() -> None:
    text = 'loop a\n  emit x {a:1,b : [1,2,],c:"s" ,}\n'
    assert fmt(text) == 'loop a\n  emit x { a: 1, b: [1, 2], c: "s" }\n'


def test_a_multi_line_payload_has_one_pair_a_line_with_trailing_commas() -> None:
    text = "on d@1 outcome A\n  emit x {a: 1,\n     b: 2}\n"
    assert fmt(text) == "on d@1 outcome A\n  emit x {\n    a: 1,\n    b: 2,\n  }\n"


def test_a_one_line_payload_wider_than_100_columns_is_broken() -> None:
    pairs = ", ".join(f"key{i}: event.payload.value{i}" for i in range(5))
    out = fmt(f"on d@1 outcome A\n  emit x {{ {pairs} }}\n")
    assert out.splitlines()[1] == "  emit x {"
    assert out.splitlines()[2] == "    key0: event.payload.value0,"
    assert out.splitlines()[-1] == "  }"
    assert max(len(line) for line in out.splitlines()) <= 100


def test_continuations_are_joined_when_the_line_fits() -> None:
    assert fmt('loop a\n  description \\\n     "x"\n  every 1h\n') == (
        'loop a\n  description "x"\n  every 1h\n'
    )


def test_a_continuation_that_would_not_fit_stays_with_its_break() -> None:
    long = "x" * 95
    out = fmt(f'loop a\n  description \\\n "{long}"\n')
    assert out == f'loop a\n  description \\\n      "{long}"\n'


def test_expressions_are_spaced_canonically() -> None:
    text = "webhook github push\n  let p=a.b\n  ignore x unless count( p )==0 and p.c[0]!=1\n"
    assert fmt(text) == (
        "webhook github push\n  let p = a.b\n  ignore x unless count(p) == 0 and p.c[0] != 1\n"
    )
    text = "loop a\n  every 1h\n  stop_when end_date = 2026-12-31\n"
    assert fmt(text) == "loop a\n  every 1h\n  stop_when end_date=2026-12-31\n"


def test_line_endings_and_the_final_newline() -> None:
    assert fmt("loop a\r\n  every 1h   \r\n  emit x") == "loop a\n  every 1h\n  emit x\n"
    assert fmt("") == ""


# ---- comments ----------------------------------------------------------------------------


def test_comments_are_kept_trailing_after_two_spaces_own_line_at_the_next_line() -> None:
    text = (
        "# header\n"
        "loop a   # the loop\n"
        "      # why hourly\n"
        "  every 1h # hourly\n"
        "# the emit\n"
        "  emit x\n"
    )
    assert fmt(text) == (
        "# header\n"
        "loop a  # the loop\n"
        "  # why hourly\n"
        "  every 1h  # hourly\n"
        "  # the emit\n"
        "  emit x\n"
    )


def test_comments_inside_a_payload_are_kept_in_place() -> None:
    text = (
        "on d@1 outcome A\n"
        "  emit x {  # the payload\n"
        "    # the repository\n"
        "    repo: event.payload.repo,  # always set\n"
        "    n: count(\n"
        "      # inside a call\n"
        "      event.payload.list),\n"
        "  }\n"
    )
    assert fmt(text) == (
        "on d@1 outcome A\n"
        "  emit x {  # the payload\n"
        "    # the repository\n"
        "    repo: event.payload.repo,  # always set\n"
        "    # inside a call\n"
        "    n: count(event.payload.list),\n"
        "  }\n"
    )


def test_a_hash_inside_a_string_is_not_a_comment() -> None:
    text = 'loop a\n  description   "issue #18"\n'
    assert fmt(text) == 'loop a\n  description "issue #18"\n'


# ---- rewrites ----------------------------------------------------------------------------

OLD_LOOP = """\
loop a
  every 1h
  emit x
  catch-up all cap 3
  max-lateness 5m
  stop-when release_freeze
  circuit-breaker 3
  budget daily-runs 4 wall-clock 30m retries-per-occurrence 2
  enabled
  shadow on
loop b
  host-clock 1h
  emit y
  disabled
  shadow off
  on-event pr.opened
"""


def test_renamed_keys_budget_keys_and_booleans() -> None:
    assert fmt(OLD_LOOP) == (
        "loop a\n"
        "  every 1h\n"
        "  emit x\n"
        "  catch_up all cap 3\n"
        "  max_lateness 5m\n"
        "  stop_when release_freeze\n"
        "  circuit_breaker 3\n"
        "  budget daily_runs 4 wall_clock 30m retries_per_occurrence 2\n"
        "  enabled true\n"
        "  shadow true\n"
        "\n"
        "loop b\n"
        "  host_clock 1h\n"
        "  emit y\n"
        "  enabled false\n"
        "  shadow false\n"
        "  on_event pr.opened\n"
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("  singleton\n", "  overlap skip\n"),
        ("  overlapping\n", "  overlap allow\n"),
        ("  on-active coalesce\n", "  overlap buffer_one\n"),
        ("  singleton\n  on-active coalesce\n", "  overlap buffer_one\n"),
        ("  overlapping\n  budget active-occurrences 3\n", "  overlap allow max 3\n"),
        (
            "  budget daily-runs 2 active-occurrences 1\n  singleton  # one\n",
            "  overlap skip  # one\n  budget daily_runs 2\n",
        ),
    ],
)
def test_the_old_overlap_settings_become_one_overlap_line(old: str, new: str) -> None:
    out = format_text(f"loop a\n  every 1h\n{old}  emit x\n", "t.rules")
    assert out.text == f"loop a\n  every 1h\n{new}  emit x\n"
    assert not any(n.blocking for n in out.notes)


def test_on_active_skip_is_rewritten_with_a_note() -> None:
    out = format_text("loop a\n  every 1h\n  on-active skip\n", "t.rules")
    assert out.text == "loop a\n  every 1h\n  overlap skip\n"
    (note,) = out.notes
    assert not note.blocking
    assert note.render("t.rules").startswith("t.rules:3: note: on-active skip is now")
    assert "occurrence_active" in note.message


def test_a_combination_no_overlap_value_means_is_left_with_a_note() -> None:
    text = "loop a\n  every 1h\n  overlapping\n  on-active coalesce\n"
    out = format_text(text, "t.rules")
    assert out.text == text
    (note,) = out.notes
    assert note.blocking
    assert note.render("t.rules") == (
        "t.rules:3: cannot rewrite: no single overlap value means overlapping + on-active coalesce"
    )


def test_old_overlap_beside_a_new_one_is_left_with_a_note() -> None:
    text = "loop a\n  every 1h\n  overlap skip\n  singleton\n"
    out = format_text(text, "t.rules")
    assert out.text == text
    assert [n.blocking for n in out.notes] == [True]


def test_human_only_has_one_form() -> None:
    text = "human-only definition ship-apply@1\nhuman-only factory.ship.apply.requested\n"
    assert fmt(text) == "human_only ship-apply@1\nhuman_only factory.ship.apply.requested\n"


def test_an_emits_guard_moves_before_its_payload() -> None:
    text = 'on d@1 outcome A\n  emit x id "k" {\n    a: 1,\n  } if "k" in result  # why\n'
    assert fmt(text) == (
        'on d@1 outcome A\n  emit x id "k" if "k" in result {\n    a: 1,\n  }  # why\n'
    )
    text = "webhook github push\n  emit x subject {a: 1} unless b\n"
    assert fmt(text) == "webhook github push\n  emit x subject { a: 1 } unless b\n"


def test_rewrites_leave_strings_comments_names_and_other_places_alone() -> None:
    text = (
        "# singleton, disabled, catch-up: words in a comment\n"
        "loop catch-up\n"
        '  description "singleton disabled shadow on"\n'
        "  every 1h\n"
        "  emit x { disabled: true }\n"
        "  triage\n"
        "    disabled if event.singleton\n"
        "route disabled to catch-up@1\n"
    )
    assert fmt(text) == text.replace("route", "\nroute")


# ---- refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("loop a\n  emit x { a: 1\n", ("E0001", 2, 10, "'{' is never closed")),
        ("loop a\n  emit x { a: [1 }\n", ("E0001", 2, 18, "unbalanced '}'")),
        ("loop a\n  emit x ]\n", ("E0001", 2, 10, "unbalanced ']'")),
        ('loop a\n  description "open\n', ("E0001", 2, 15, "unterminated string")),
        ("loop a\n  every 1h; emit x\n", ("E0001", 2, 11, "unexpected character ';'")),
        ("loop a\n    every 1h\n  emit x\n", ("E0002", 3, 1, "inconsistent indentation")),
    ],
)
def test_a_file_that_does_not_lex_is_refused_at_its_place(
    text: str, where: tuple[str, int, int, str]
) -> None:
    code, line, column, message = refused(text)
    assert (code, line, column) == where[:3]
    assert message.startswith(where[3])


# ---- properties over generated rule files ---------------------------------------------------

NAMES = st.sampled_from(["a", "work-x", "merge-1", "r.b"])
TYPES = st.sampled_from(["factory.work.requested", "clock.tick.reaper", "x.y"])
DEFS = st.sampled_from(["dispatch@1", "merge-scan@1", "reaper@2"])
LEAF = st.one_of(
    st.sampled_from(['"s"', '"a #b"', "1", "-2.5", "true", "null", "event.payload.repo"]),
    st.sampled_from(["result.prNumber", "repo.name", "count(event.payload.list)"]),
)
VALUE = st.recursive(
    LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.lists(
            st.tuples(st.sampled_from(["k", "repo", "n"]), inner),
            max_size=3,
            unique_by=lambda p: p[0],
        ).map(lambda ps: "{" + ", ".join(f"{k}: {v}" for k, v in ps) + "}"),
    ),
    max_leaves=6,
)
GUARD = st.sampled_from(
    [
        "if event.payload.repo",
        'unless result.x == "y"',
        "if not (a.b or c) and d in [1, 2]",
        "if count(x) > 0",
    ]
)
SETTINGS = st.sampled_from(
    [
        "every 1h",
        'cron "0 9 * * 1-5"',
        "approval watched",
        'description "the # loop"',
        "catch-up all cap 3",
        "singleton",
        "overlapping",
        "enabled",
        "disabled",
        "shadow off",
        "on-active coalesce",
        "budget daily-runs 4 wall-clock 30m",
        "stop-when end_date=2026-12-31",
        'key "repair:{repo.name}#{payload.pr}"',
    ]
)


@st.composite
def payload(draw: st.DrawFn) -> list[str]:
    """A payload object as physical lines: on one line, or one pair a line."""
    pairs = draw(
        st.lists(
            st.tuples(st.sampled_from(["repo", "n", '"k"']), VALUE),
            min_size=1,
            max_size=3,
            unique_by=lambda p: p[0],
        )
    )
    if draw(st.booleans()):
        comma = draw(st.sampled_from(["", ","]))
        return [
            "{"
            + ", ".join(f"{k}:{' ' * draw(st.integers(0, 2))}{v}" for k, v in pairs)
            + comma
            + "}"
        ]
    lines = ["{" + draw(st.sampled_from(["", "  # open"]))]
    for key, value in pairs:
        comment = draw(st.sampled_from(["", "  # c", "   #x"]))
        lines.append(f"{key}: {value},{comment}")
    return [*lines, "}"]


@st.composite
def emit(draw: st.DrawFn, guarded: bool) -> list[str]:
    head = f"emit {draw(TYPES)}"
    if draw(st.booleans()):
        head += ' id "k:{event.payload.repo}"'
    body = draw(st.one_of(st.none(), payload()))
    guard = draw(GUARD) if guarded and draw(st.booleans()) else ""
    if body is None:
        return [f"{head} {guard}".rstrip()]
    return (
        [f"{head} {body[0]}", *body[1:-1], f"{body[-1]} {guard}".rstrip()]
        if len(body) > 1
        else [f"{head} {body[0]} {guard}".rstrip()]
    )


@st.composite
def rule_file(draw: st.DrawFn) -> str:
    """A rule file in the forms the parser reads, with a random layout."""
    width = draw(st.sampled_from([2, 3, 4, 8]))
    out: list[str] = []

    def put(level: int, parts: list[str]) -> None:
        for _ in range(draw(st.integers(0, 2))):
            out.append(draw(st.sampled_from(["", " ", "# note", "   # indented note"])))
        first, *rest = parts
        words = first.split(" ")
        if (
            len(words) > 2 and not set('"#') & set(first) and draw(st.booleans())
        ):  # a `\` continuation
            cut = draw(st.integers(1, len(words) - 1))
            first = (
                " ".join(words[:cut])
                + " \\\n"
                + " " * draw(st.integers(0, 6))
                + " ".join(words[cut:])
            )
        gap = " " * draw(st.integers(1, 3))
        first = first.replace(" ", gap, 1) if draw(st.booleans()) else first
        trailing = draw(st.sampled_from(["", "  # why", " # x"])) if not rest else ""
        out.append(" " * (width * level) + first + trailing)
        out.extend(" " * (width * (level + 1)) + line for line in rest)

    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["loop", "route", "chain", "webhook", "for", "human"]))
        if kind == "route":
            put(0, [f"route {draw(TYPES)} to {draw(DEFS)}"])
        elif kind == "human":
            put(0, [draw(st.sampled_from(["human-only x.y", "human-only definition a@1"]))])
        elif kind in ("loop", "for"):
            level = 0
            if kind == "for":
                put(0, ["for repo in repos where not repo.report_only"])
                level = 1
            put(level, [f"loop {draw(NAMES)}"])
            for setting in draw(st.lists(SETTINGS, min_size=1, max_size=4)):
                put(level + 1, [setting])
            put(level + 1, draw(emit(False)))
            if draw(st.booleans()):
                put(level + 1, ["triage"])
                put(level + 2, [f"nothing_to_do {draw(GUARD)}"])
        elif kind == "chain":
            put(0, [f"on {draw(DEFS)} outcome PR_OPEN, FAILED"])
            for _ in range(draw(st.integers(1, 2))):
                put(1, draw(emit(True)))
        else:
            put(0, ["webhook github pull_request"])
            put(1, [f"ignore x {draw(GUARD)}"])
            put(1, ["let pr = workflow_run.pull_requests[0]"])
            put(1, draw(emit(True)))
    return "\n".join(out) + draw(st.sampled_from(["", "\n", "\n\n"]))


PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(text=rule_file())
def test_formatting_is_idempotent(text: str) -> None:
    for rewrite in (False, True):
        once = fmt(text, rewrite)
        assert fmt(once, rewrite) == once


@PROPERTY
@given(text=rule_file())
def test_the_formatted_text_parses_to_what_the_original_parses_to(text: str) -> None:
    """The layout alone (old spellings kept: the parser on this branch reads those)."""
    same_meaning(text, fmt(text, rewrite=False))


@PROPERTY
@given(text=rule_file())
def test_the_layout_keeps_every_comment(text: str) -> None:
    def comments(source: str) -> list[str]:
        found = []
        for line in source.splitlines():
            at = line.find("#", line.rfind('"') + 1 if line.count('"') % 2 == 0 else 0)
            if at >= 0:
                found.append(line[at:].rstrip())
        return sorted(found)

    assert comments(fmt(text)) == comments(text)


@PROPERTY
@given(text=rule_file())
def test_the_rewritten_text_parses(text: str) -> None:
    """Every rewrite is in a form the parser reads (what it means is checked on the
    shipped and test trees, compiled: tests/unit/test_format_files.py)."""
    parse(fmt(text), "t.rules")


@PROPERTY
@given(text=rule_file())
def test_a_file_without_old_spellings_is_only_laid_out(text: str) -> None:
    """Rewriting changes nothing in a file already in the new forms."""
    new = fmt(text)
    assert fmt(new, rewrite=False) == new
