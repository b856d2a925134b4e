"""The expression language: paths, operators, templates and functions over plain data."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsl import expr as ex
from dsl import model as m
from dsl.diagnostics import Span
from dsl.parser import parse

SPAN = Span("t.rules", 1, 1)


def compile_expr(text: str) -> ex.Expr:
    """The expression `text`, read through the rules grammar as a webhook `let`."""
    (decl,) = parse(f"webhook github t\n  let v = {text}\n", "t.rules").decls
    assert isinstance(decl, m.WebhookDecl) and isinstance(decl.lines[0], m.Let)
    return decl.lines[0].expr


def ev(text: str, **scope: Any) -> Any:
    return ex.evaluate(compile_expr(text), scope)


# ---- paths ------------------------------------------------------------------------------


def test_paths_walk_fields_and_indexes() -> None:
    """A path reads nested fields and list items."""
    scope = {"pr": {"head": {"sha": "abc"}}, "runs": [{"id": 1}, {"id": 2}]}
    assert ev("pr.head.sha", **scope) == "abc"
    assert ev("runs[1].id", **scope) == 2
    assert ev("runs", **scope) == scope["runs"]


@pytest.mark.parametrize(
    ("text", "scope", "message"),
    [
        ("nope", {}, "'nope' is not defined here"),
        ("pr.base", {"pr": {}}, "'pr' has no field 'base'"),
        ("pr.base.ref", {"pr": {"base": "main"}}, "'pr.base' has no field 'ref'"),
        ("runs[2]", {"runs": [1, 2]}, "'runs' has no item [2]"),
        ("runs[0]", {"runs": {"0": 1}}, "'runs' has no item [0]"),
        ("name[0]", {"name": "abc"}, "'name' has no item [0]"),
    ],
)
def test_missing_data_raises_missing_path(text: str, scope: dict[str, Any], message: str) -> None:
    """A path to absent data raises MissingPath naming how far it got."""
    with pytest.raises(ex.MissingPath) as caught:
        ex.evaluate(compile_expr(text), scope)
    assert caught.value.message == message
    assert isinstance(caught.value, ex.EvalError)


# ---- operators ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('a == "x"', True),
        ('a != "x"', False),
        ("n == 1.0", True),
        ("l == [1, 2]", True),
        ('o == {k: "v"}', True),
        ("a == null", False),
        ('a in ["x", "y"]', True),
        ('a not in ["x", "y"]', False),
        ('"b" in "abc"', True),
        ('"k" in o', True),
        ('"v" in o', False),
        ("l in o", False),
        ("n not in [3]", True),
        ("n < 2", True),
        ("n >= 1", True),
        ('a < "y"', True),
        ('a > "y"', False),
        ("n <= 0.5", False),
    ],
)
def test_comparisons(text: str, expected: bool) -> None:
    """Equality, membership and ordering give booleans over JSON-like values."""
    scope = {"a": "x", "n": 1, "l": [1, 2], "o": {"k": "v"}}
    assert ev(text, **scope) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("t and f", False),
        ("t or f", True),
        ("not f", True),
        ("not t", False),
        ("not empty", True),
        ("not zero", True),
        ("nil or t", True),
        ("t and not f and (f or t)", True),
        ("f or f or f", False),
    ],
)
def test_boolean_operators_use_truthiness(text: str, expected: bool) -> None:
    """`and`, `or` and `not` treat null, false, 0, "" and empty collections as false."""
    scope = {"t": True, "f": False, "empty": [], "zero": 0, "nil": None}
    assert ev(text, **scope) is expected


def test_and_short_circuits_before_missing_data() -> None:
    """`and` stops at the first false operand, so a later missing path is never read."""
    assert ev("f and nope.field", f=False) is False
    assert ev("t or nope.field", t=True) is True


@pytest.mark.parametrize(
    ("text", "scope"),
    [
        ('n < "2"', {"n": 1}),
        ("t < 1", {"t": True}),
        ("l > l", {"l": [1]}),
        ("n in n", {"n": 1}),
        ('n in "abc"', {"n": 1}),
        ("n not in nil", {"n": 1, "nil": None}),
    ],
)
def test_type_mismatches_raise_eval_error(text: str, scope: dict[str, Any]) -> None:
    """An ordering between unlike types, or `in` over a non-collection, raises EvalError."""
    with pytest.raises(ex.EvalError) as caught:
        ex.evaluate(compile_expr(text), scope)
    assert not isinstance(caught.value, ex.MissingPath)


# ---- templates ---------------------------------------------------------------------------


def test_template_fills_placeholders_from_paths() -> None:
    """`{path}` placeholders are replaced by their values; booleans and null spell as JSON."""
    scope = {"repo": {"name": "alpha"}, "pr": {"n": 7, "draft": False, "x": None}}
    assert ev('"merge-pr:{repo.name}:{pr.n}"', **scope) == "merge-pr:alpha:7"
    assert ev('"{pr.draft}/{pr.x}"', **scope) == "false/null"


def test_doubled_braces_are_literal() -> None:
    """`{{` and `}}` stand for braces, and a string with no placeholder is a literal."""
    node = compile_expr('"{{not.a.path}}"')
    assert isinstance(node, ex.Literal)
    assert ex.evaluate(node, {}) == "{not.a.path}"
    assert ev('"{{{a}}}"', a="x") == "{x}"


def test_template_of_a_collection_raises_eval_error() -> None:
    """A list or object cannot be put into a string."""
    with pytest.raises(ex.EvalError):
        ev('"x-{l}"', l=[1])


@pytest.mark.parametrize(
    ("text", "offset"),
    [("a}", 1), ("{a", 0), ("x{a b}", 1), ("{}", 0), ("ab{1x}", 2)],
)
def test_bad_templates_raise_template_error_at_the_brace(text: str, offset: int) -> None:
    """Unbalanced braces and placeholders that are not paths raise TemplateError at the brace."""
    with pytest.raises(ex.TemplateError) as caught:
        ex.parse_template(text, SPAN)
    assert caught.value.offset == offset


def test_template_placeholders_point_into_the_string() -> None:
    """Each placeholder's span is its column inside the quoted string."""
    node = ex.parse_template("ab{x.y}", Span("f", 3, 10))
    assert isinstance(node, ex.Template)
    (_, path) = node.parts
    assert isinstance(path, ex.Path) and path.span == Span("f", 3, 13)
    assert str(path) == "x.y"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("{}ab._[]0 x-"))))
def test_template_parser_raises_only_template_error(text: str) -> None:
    """Any string content either parses as a template or raises TemplateError."""
    try:
        ex.parse_template(text, SPAN)
    except ex.TemplateError as err:
        assert 0 <= err.offset < len(text)


# ---- functions ---------------------------------------------------------------------------


def test_count_and_lower() -> None:
    """count() measures lists, objects and strings; lower() lower-cases a string."""
    assert ev("count(l)", l=[1, 2, 3]) == 3
    assert ev("count(o)", o={"a": 1}) == 1
    assert ev('count("abcd")') == 4
    assert ev("count(l) > 1", l=[1, 2]) is True
    assert ev('lower("AbC")') == "abc"


@pytest.mark.parametrize("text", ["count(n)", "lower(n)", "count(l, l)", "count()", "lower(l)"])
def test_function_misuse_raises_eval_error(text: str) -> None:
    """A function given the wrong type or number of arguments raises EvalError."""
    with pytest.raises(ex.EvalError):
        ev(text, n=1, l=[1])


# ---- static analysis and robustness ---------------------------------------------------------


def test_paths_and_static_detection() -> None:
    """`paths` lists every path read, and an expression with none is static."""
    node = compile_expr('{a: x.y, b: [z[0], "{w.v}"], c: count(q)}')
    assert sorted(str(p) for p in ex.paths(node)) == ["q", "w.v", "x.y", "z[0]"]
    assert not ex.is_static(node)
    assert ex.is_static(compile_expr('{a: 1, b: ["x", null]}'))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)
EXPRESSIONS = [
    "x == y", "x != y", "x in y", "x not in y", "x < y", "x >= y", "not x", "x and y",
    "x or y", "count(x)", "lower(x)", '"{x}-{y}"', "x.a", "x[0]", "[x, y]", "{a: x, b: y}",
]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(EXPRESSIONS), json_values, json_values)
def test_evaluation_raises_only_eval_error(text: str, x: Any, y: Any) -> None:
    """Over any JSON data an expression returns a value or raises EvalError, nothing else."""
    with contextlib.suppress(ex.EvalError):
        ex.evaluate(compile_expr(text), {"x": x, "y": y})


def test_booleans_are_not_numbers() -> None:
    """JSON semantics: `true == 1` is false and `1 in [true]` is false."""
    from dsl.expr import same

    assert not same(True, 1)
    assert not same([1], [True])
    assert same({"a": [1, "x"]}, {"a": [1.0, "x"]})
