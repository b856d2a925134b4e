"""The rules parser: declarations as written, with spans; syntax errors as located
diagnostics; and nothing but RulesError, whatever the text."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl import expr as ex
from dsl import model as m
from dsl.codes import CODES
from dsl.diagnostics import RulesError, Span
from dsl.parser import parse


def one(text: str) -> m.Decl:
    (decl,) = parse(text, "t.rules").decls
    return decl


def error(text: str) -> tuple[str, int, int, str, str | None]:
    with pytest.raises(RulesError) as caught:
        parse(text, "t.rules")
    (d,) = caught.value.diagnostics
    return d.code, d.span.line, d.span.column, d.message, d.hint


# ---- declarations ----------------------------------------------------------------------


def test_loop_keeps_settings_emit_and_spans() -> None:
    """A loop yields its name, settings with typed arguments and its emit, each with a span."""
    decl = one('loop reaper\n  every 60m\n  description "a b"\n  emit clock.tick.reaper { a: 1 }\n')
    assert isinstance(decl, m.LoopDecl)
    assert decl.name == "reaper"
    assert decl.name_span == Span("t.rules", 1, 6)
    every, description = decl.settings
    assert (every.key, every.args[0].kind, every.args[0].value) == ("every", "word", "60m")
    assert every.args[0].span == Span("t.rules", 2, 9)
    assert (description.args[0].kind, description.args[0].value) == ("string", "a b")
    (emit,) = decl.emits
    assert emit.event_type == "clock.tick.reaper"
    assert emit.type_span == Span("t.rules", 4, 8)
    assert emit.payload is not None
    assert [k for k, _ in emit.payload.pairs] == ["a"]


def test_for_block_holds_variable_collection_filter_and_template_loops() -> None:
    """`for repo in repos where ...` keeps the variable, collection, filter and loop templates."""
    decl = one(
        "for repo in repos where not repo.report_only\n"
        "  loop work-{repo.name}\n"
        "    every 30m\n"
        "    emit factory.work.requested { repo: repo.name }\n"
    )
    assert isinstance(decl, m.ForEach)
    assert (decl.var, decl.collection) == ("repo", "repos")
    assert decl.collection_span == Span("t.rules", 1, 13)
    assert isinstance(decl.where, ex.Not)
    assert [loop.name for loop in decl.loops] == ["work-{repo.name}"]


def test_route_with_and_without_approval() -> None:
    """A route names an event type and a definition; its approval word is optional."""
    plain, auto = parse("route a.b to x@1\nroute c.d to y@2 approval auto\n", "t.rules").decls
    assert isinstance(plain, m.RouteDecl) and isinstance(auto, m.RouteDecl)
    assert (plain.event_type, plain.definition, plain.approval) == ("a.b", "x@1", None)
    assert auto.approval is not None
    assert (auto.approval.value, auto.approval.span) == ("auto", Span("t.rules", 2, 27))


def test_human_only_distinguishes_event_types_and_definitions() -> None:
    """`human_only TYPE` targets an event type; `human_only DEF@V` a definition."""
    event, definition = parse(
        "human_only factory.ship.apply.requested\nhuman_only ship-apply@1\n", "t.rules"
    ).decls
    assert isinstance(event, m.HumanOnlyDecl) and isinstance(definition, m.HumanOnlyDecl)
    assert (event.target_kind, event.target) == ("event", "factory.ship.apply.requested")
    assert (definition.target_kind, definition.target) == ("definition", "ship-apply@1")


def test_chain_lists_outcomes_emits_and_stop() -> None:
    """A chain edge keeps every outcome it names, its emits, or its stop."""
    emits, stops = parse(
        "on dispatch@1 outcome PR_OPEN\n"
        "  emit a.b { repo: event.payload.repo }\n"
        '  emit c.d id "x:{result.n}"\n'
        "on dispatch@1 outcome FAILED, BLOCKED\n"
        "  stop\n",
        "t.rules",
    ).decls
    assert isinstance(emits, m.ChainDecl) and isinstance(stops, m.ChainDecl)
    assert [o.name for o in emits.outcomes] == ["PR_OPEN"]
    assert [e.event_type for e in emits.emits] == ["a.b", "c.d"]
    assert isinstance(emits.emits[1].event_id, ex.Template)
    assert emits.stop is None
    assert [o.name for o in stops.outcomes] == ["FAILED", "BLOCKED"]
    assert stops.outcomes[1].span == Span("t.rules", 4, 31)
    assert stops.stop is not None and stops.emits == ()


def test_webhook_lines_keep_order_and_guards() -> None:
    """Webhook lines stay in order; `unless` negates a guard and `if` does not."""
    decl = one(
        "webhook github pull_request\n"
        '  ignore unhandled_action unless action in ["opened"]\n'
        "  let pr = pull_request\n"
        "  reject draft if pr.draft\n"
        "  emit a.b subject repo.name if pr.number > 0 { repo: repo.name }\n"
    )
    assert isinstance(decl, m.WebhookDecl)
    assert (decl.source, decl.kind) == ("github", "pull_request")
    ignore, let, reject, emit = decl.lines
    assert isinstance(ignore, m.Refusal) and ignore.kind == "ignore"
    assert ignore.guard is not None and ignore.guard.negate
    assert isinstance(let, m.Let) and let.name == "pr"
    assert isinstance(reject, m.Refusal) and reject.kind == "reject"
    assert reject.guard is not None and not reject.guard.negate
    assert isinstance(emit, m.Emit)
    assert isinstance(emit.subject, ex.Path) and emit.guard is not None


def test_comments_blank_lines_crlf_continuations_and_no_final_newline() -> None:
    """Comments, blank lines, CRLF, backslash continuations and no final newline all parse."""
    text = (
        "# a comment\r\n\r\nloop reaper  # trailing\r\n  every \\\r\n    60m\r\n"
        "  emit a.b {\r\n    x: 1,\r\n  }"
    )
    decl = one(text)
    assert isinstance(decl, m.LoopDecl)
    assert decl.settings[0].args[0].value == "60m"
    assert decl.emits[0].payload is not None


def test_string_escapes_and_brace_escapes() -> None:
    """Backslash escapes unquote, and `{{`/`}}` in a string are literal braces."""
    decl = one('loop x\n  manual\n  emit a.b { s: "q\\"t\\n{{lit}}" }\n')
    assert isinstance(decl, m.LoopDecl) and decl.emits[0].payload is not None
    (_, value), *_ = decl.emits[0].payload.pairs
    assert value == ex.Literal('q"t\n{lit}', Span("t.rules", 3, 17))


# ---- syntax errors ----------------------------------------------------------------------


def test_unexpected_token_names_what_was_expected() -> None:
    """A wrong word is E0001 at its column with a hint naming what would fit."""
    code, line, col, message, hint = error("on a@1 outcome X Y\n  stop\n")
    assert (code, line, col) == ("E0001", 1, 18)
    assert message == "unexpected 'Y'"
    assert hint == "expected ',', end of line"


def test_unexpected_character_is_located() -> None:
    """A character no token allows is E0001 at that character."""
    code, line, col, message, _ = error("loop x\n  manual\n  emit a.b $\n")
    assert (code, line, col, message) == ("E0001", 3, 12, "unexpected character '$'")


def test_unclosed_object_is_reported_where_it_opens() -> None:
    """An object left open at the end of a file is reported at its `{`, not at the end."""
    code, line, col, message, hint = error("loop x\n  manual\n  emit a.b {\n")
    assert (code, line, col, message) == ("E0001", 3, 12, "'{' is not closed")
    assert hint is not None and "'}'" in hint


def test_stray_indentation_is_a_syntax_error_on_its_line() -> None:
    """An indented line where no block opens is E0001 on that line."""
    code, line, col, message, _ = error("loop x\n  manual\n    emit a.b\n")
    assert (code, line, col, message) == ("E0001", 3, 1, "unexpected indentation")


def test_dedent_to_an_unknown_level_is_e0002() -> None:
    """A line dedented to no enclosing level is E0002 on that line."""
    code, line, col, _, hint = error("loop x\n    manual\n  emit a.b\n")
    assert (code, line, col) == ("E0002", 3, 1)
    assert hint == "indent every line of a block by the same amount"


def test_bad_string_template_points_into_the_string() -> None:
    """An unclosed `{` in a string is E0602 at the brace itself."""
    code, line, col, _, _ = error('loop x\n  manual\n  emit a.b { s: "ab{c" }\n')
    assert (code, line, col) == ("E0602", 3, 20)


def test_unknown_function_lists_the_known_ones() -> None:
    """A call to an unknown function is E0603 with the catalogue as a hint."""
    code, _, col, message, hint = error("loop x\n  manual\n  emit a.b { s: upper(x) }\n")
    assert (code, col, message) == ("E0603", 17, "unknown function 'upper'")
    assert hint == "functions: count, is_sha, lower"


def test_duplicate_object_key_points_at_the_second() -> None:
    """A key written twice in one object is E0604 at the second one."""
    code, line, col, _, _ = error("loop x\n  manual\n  emit a.b { s: 1, s: 2 }\n")
    assert (code, line, col) == ("E0604", 3, 20)


def test_syntax_diagnostic_renders_line_caret_and_hint() -> None:
    """A syntax error renders as file:line:col: error[CODE], the source line, a caret and help."""
    with pytest.raises(RulesError) as caught:
        parse("route a.b x@1\n", "loops/r.rules")
    rendered = caught.value.render()
    assert rendered.splitlines() == [
        "loops/r.rules:1:11: error[E0001]: a route without 'to'",
        "  |",
        "1 | route a.b x@1",
        "  |           ^",
        "  help: write: route EVENT_TYPE to DEFINITION@VERSION",
    ]


# ---- nothing but RulesError --------------------------------------------------------------

FRAGMENTS = [
    "loop", "for", "in", "where", "route", "to", "approval", "auto", "human-only",
    "definition", "on", "outcome", "stop", "webhook", "github", "let", "ignore", "reject",
    "emit", "subject", "id", "if", "unless", "not", "and", "or", "true", "false", "null",
    "every", "60m", "manual", "{", "}", "[", "]", "(", ")", ",", ":", ".", "=", "==", "<",
    '"a{b.c}"', '"{{x}}"', '"{"', '"}"', '"x', "x", "a.b", "a[0]", "count(", "lower",
    "upper(", "r@1", "work-{repo.name}", "{repo.name}", "1", "-1", "1.5", "#c", "\\", "@",
    "\t", "é", "\x00", "human_only", "on-event", "on_event", "overlap", "buffer_one",
    "catch_up", "enabled",
]  # fmt: skip
INDENTS = ["", "", "  ", "    ", " ", "\t", "  \t"]

line_text = st.builds(
    lambda indent, words: indent + " ".join(words),
    st.sampled_from(INDENTS),
    st.lists(st.sampled_from(FRAGMENTS), max_size=8),
)
HEADS = ["", "loop a\n", "webhook github x\n", "on a@1 outcome X\n", "for r in repos\n  loop b\n"]
grammar_ish = st.builds(
    lambda head, lines, end: head + end.join(lines),
    st.sampled_from(HEADS),
    st.lists(line_text, max_size=12),
    st.sampled_from(["\n", "\r\n"]),
)


def _parse_or_rules_error(text: str) -> None:
    try:
        parse(text, "x.rules")
    except RulesError as err:
        assert err.diagnostics
        lines = max(len(text.splitlines()), 1)
        for d in err.diagnostics:
            assert d.code in CODES
            assert d.span.file == "x.rules"
            assert 1 <= d.span.line <= lines
            assert d.span.column >= 1


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_raises_only_rules_error(text: str) -> None:
    """Any text either parses or raises RulesError with catalogued, in-file locations."""
    _parse_or_rules_error(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grammar_ish)
def test_grammar_like_text_raises_only_rules_error(text: str) -> None:
    """Text built from keywords, operators and indentation raises nothing but RulesError."""
    _parse_or_rules_error(text)


# ---- expression depth ------------------------------------------------------------------

NESTINGS = {
    "not": lambda n: "not " * n + "a",
    "list": lambda n: "[" * n + "]" * n,
    "object": lambda n: "{ k: " * n + "1" + " }" * n,
    "call": lambda n: "count(" * n + "a" + ")" * n,
    "compare": lambda n: "(" * n + "a" + " == a)" * n,
}


@pytest.mark.parametrize("kind", sorted(NESTINGS))
def test_an_expression_at_the_depth_limit_parses_and_evaluates(kind: str) -> None:
    """An expression nested exactly MAX_DEPTH levels deep loads, and evaluating it never
    recurses out (the limit is well within what evaluation takes)."""
    text = NESTINGS[kind](ex.MAX_DEPTH - (kind != "list"))
    (decl,) = parse(f"webhook github t\n  let v = {text}\n", "t.rules").decls
    assert isinstance(decl, m.WebhookDecl) and isinstance(decl.lines[0], m.Let)
    with contextlib.suppress(ex.EvalError):  # a type mismatch is fine; a RecursionError is not
        ex.evaluate(decl.lines[0].expr, {"a": "x"})


@pytest.mark.parametrize("kind", sorted(NESTINGS))
@pytest.mark.parametrize("depth", [ex.MAX_DEPTH + 1, 3000])
def test_a_deeper_expression_is_a_located_e0608(kind: str, depth: int) -> None:
    """An expression deeper than MAX_DEPTH is refused at load with E0608 where its
    outermost too-deep level starts, so a rule that would fail at every delivery never
    loads."""
    text = NESTINGS[kind](depth)
    code, line, column, message, hint = error(f"webhook github t\n  let v = {text}\n")
    parens = len(text) - len(text.lstrip("("))  # not a level: the expression starts after
    assert (code, line, column) == ("E0608", 2, 11 + parens)
    assert str(ex.MAX_DEPTH) in message and hint


def test_every_too_deep_expression_of_a_file_is_reported() -> None:
    """Two deep expressions in one file are two diagnostics, each at its own line."""
    deep = "not " * (ex.MAX_DEPTH + 1) + "a"
    with pytest.raises(RulesError) as caught:
        parse(f"webhook github t\n  let v = {deep}\n  let w = [{deep}]\n", "t.rules")
    found = [(d.code, d.span.line, d.span.column) for d in caught.value.diagnostics]
    assert found == [("E0608", 2, 11), ("E0608", 3, 11)]
