"""The expression language: paths into data, literals, comparisons, `in`, boolean
operators and string templates. Expressions are data; `evaluate` walks them over a
scope of plain JSON values. Nothing here calls Python's `eval`."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from dsl.diagnostics import Span


class EvalError(Exception):
    """An expression could not be evaluated over the data it was given."""

    def __init__(self, message: str, span: Span) -> None:
        self.message = message
        self.span = span
        super().__init__(f"{span}: {message}")


class MissingPath(EvalError):
    """A path named data that is not there."""


@dataclass(frozen=True, slots=True)
class Literal:
    value: Any
    span: Span


@dataclass(frozen=True, slots=True)
class Path:
    root: str
    steps: tuple[str | int, ...]
    span: Span

    def __str__(self) -> str:
        text = self.root
        for step in self.steps:
            text += f"[{step}]" if isinstance(step, int) else f".{step}"
        return text


@dataclass(frozen=True, slots=True)
class Template:
    """A string with `{path}` placeholders; `{{` and `}}` stand for braces."""

    parts: tuple[str | Path, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class ListExpr:
    items: tuple[Expr, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class ObjectExpr:
    pairs: tuple[tuple[str, Expr], ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Not:
    operand: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class BoolOp:
    op: str  # "and" | "or"
    operands: tuple[Expr, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Compare:
    op: str  # == != < <= > >= in "not in"
    left: Expr
    right: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    args: tuple[Expr, ...]
    span: Span


Expr: TypeAlias = Literal | Path | Template | ListExpr | ObjectExpr | Not | BoolOp | Compare | Call


# How deeply expressions may nest (E0608): far beyond what a rule needs, and well
# within what evaluating one (a recursive walk) can take.
MAX_DEPTH = 64

FUNCTIONS = {
    "count": "number of items in a list, keys in an object or characters in a string",
    "lower": "the string in lower case",
    "is_sha": "true for a string of exactly 40 hex digits (a git commit id), else false",
}
_SHA = re.compile(r"[0-9a-fA-F]{40}")

_PATH_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*|\[[0-9]+\])*\Z")
_STEP_RE = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[([0-9]+)\]")


class TemplateError(ValueError):
    """A string template has an unbalanced brace or a placeholder that is not a path."""

    def __init__(self, message: str, offset: int) -> None:
        self.offset = offset
        super().__init__(message)


def parse_path(text: str, span: Span) -> Path:
    """Parse `a.b[0].c` into a Path; the caller guarantees the text matches."""
    head = re.match(r"[A-Za-z_][A-Za-z0-9_]*", text)
    assert head is not None
    steps: list[str | int] = []
    for m in _STEP_RE.finditer(text, head.end()):
        steps.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
    return Path(head.group(0), tuple(steps), span)


def parse_template(text: str, span: Span) -> Literal | Template:
    """Split a string literal's content into text and `{path}` placeholders.

    `span` points at the opening quote; placeholder spans point into the string."""
    parts: list[str | Path] = []
    buf: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if text.startswith("{{", i) or text.startswith("}}", i):
            buf.append(ch)
            i += 2
            continue
        if ch == "}":
            raise TemplateError("unmatched '}' in string template (write '}}' for a brace)", i)
        if ch != "{":
            buf.append(ch)
            i += 1
            continue
        end = text.find("}", i)
        if end < 0:
            raise TemplateError("unclosed '{' in string template (write '{{' for a brace)", i)
        inner = text[i + 1 : end].strip()
        if not _PATH_RE.match(inner):
            raise TemplateError(f"'{{{inner}}}' is not a path such as {{repo.name}}", i)
        if buf:
            parts.append("".join(buf))
            buf = []
        at = Span(span.file, span.line, span.column + 1 + i)
        parts.append(parse_path(inner, at))
        i = end + 1
    if buf:
        parts.append("".join(buf))
    if all(isinstance(p, str) for p in parts):
        return Literal("".join(p for p in parts if isinstance(p, str)), span)
    return Template(tuple(parts), span)


def walk(expr: Expr) -> Iterator[Expr]:
    """Every node of an expression, depth first."""
    yield expr
    children: tuple[Expr, ...] = ()
    if isinstance(expr, Template):
        children = tuple(p for p in expr.parts if isinstance(p, Path))
    elif isinstance(expr, ListExpr):
        children = expr.items
    elif isinstance(expr, ObjectExpr):
        children = tuple(v for _, v in expr.pairs)
    elif isinstance(expr, Not):
        children = (expr.operand,)
    elif isinstance(expr, BoolOp | Call):
        children = expr.operands if isinstance(expr, BoolOp) else expr.args
    elif isinstance(expr, Compare):
        children = (expr.left, expr.right)
    for child in children:
        yield from walk(child)


def paths(expr: Expr) -> Iterator[Path]:
    return (node for node in walk(expr) if isinstance(node, Path))


def is_static(expr: Expr) -> bool:
    """True when the expression reads no data (its value is known at load time)."""
    return not any(True for _ in paths(expr))


# ---- evaluation ----------------------------------------------------------------------


def evaluate(expr: Expr, scope: Mapping[str, Any]) -> Any:
    """Evaluate over plain data. Raises MissingPath for absent data and EvalError for a
    type mismatch; never anything else."""
    match expr:
        case Literal(value=value):
            return value
        case Path():
            return _resolve(expr, scope)
        case Template(parts=parts):
            return "".join(p if isinstance(p, str) else _text(_resolve(p, scope), p) for p in parts)
        case ListExpr(items=items):
            return [evaluate(item, scope) for item in items]
        case ObjectExpr(pairs=pairs):
            return {key: evaluate(value, scope) for key, value in pairs}
        case Not(operand=operand):
            return not truthy(evaluate(operand, scope))
        case BoolOp(op="and", operands=operands):
            return all(truthy(evaluate(o, scope)) for o in operands)
        case BoolOp(operands=operands):
            return any(truthy(evaluate(o, scope)) for o in operands)
        case Compare():
            return _compare(expr, scope)
        case Call():
            return _call(expr, scope)
    raise AssertionError(f"unknown expression node {expr!r}")  # pragma: no cover


def truthy(value: Any) -> bool:
    return value not in (None, False, 0, "", [], {})


def _resolve(path: Path, scope: Mapping[str, Any]) -> Any:
    if path.root not in scope:
        raise MissingPath(f"'{path.root}' is not defined here", path.span)
    value = scope[path.root]
    walked = path.root
    for step in path.steps:
        if isinstance(step, int):
            if not isinstance(value, list) or step >= len(value):
                raise MissingPath(f"'{walked}' has no item [{step}]", path.span)
            walked += f"[{step}]"
        else:
            if not isinstance(value, Mapping) or step not in value:
                raise MissingPath(f"'{walked}' has no field '{step}'", path.span)
            walked += f".{step}"
        value = value[step]
    return value


def _text(value: Any, path: Path) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, str | int | float):
        return str(value)
    raise EvalError(f"'{path}' is not text or a number and cannot go into a string", path.span)


_ORDERING = {"<", "<=", ">", ">="}


def same(left: Any, right: Any) -> bool:
    """JSON equality: `true` is not `1`, lists and objects compare item by item."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left is right
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(same(left[k], right[k]) for k in left)
    return bool(left == right)


def _compare(expr: Compare, scope: Mapping[str, Any]) -> bool:
    left = evaluate(expr.left, scope)
    right = evaluate(expr.right, scope)
    if expr.op == "==":
        return same(left, right)
    if expr.op == "!=":
        return not same(left, right)
    if expr.op in ("in", "not in"):
        if not isinstance(right, list | str | dict):
            raise EvalError(f"'{expr.op}' needs a list, object or string on the right", expr.span)
        if isinstance(right, str) and not isinstance(left, str):
            raise EvalError("'in' on a string needs a string on the left", expr.span)
        if isinstance(right, dict):  # keys are strings; other values (even unhashable) are absent
            found = isinstance(left, str) and left in right
        elif isinstance(right, str):
            found = left in right
        else:
            found = any(same(left, item) for item in right)
        return found if expr.op == "in" else not found
    comparable = (isinstance(left, int | float) and isinstance(right, int | float)) or (
        isinstance(left, str) and isinstance(right, str)
    )
    if not comparable or isinstance(left, bool) or isinstance(right, bool):
        raise EvalError(f"'{expr.op}' compares two numbers or two strings", expr.span)
    assert expr.op in _ORDERING
    result: bool = {
        "<": left < right,
        "<=": left <= right,
        ">": left > right,
        ">=": left >= right,
    }[expr.op]
    return result


def _call(expr: Call, scope: Mapping[str, Any]) -> Any:
    args = [evaluate(a, scope) for a in expr.args]
    if len(args) != 1:
        raise EvalError(f"{expr.name}() takes one argument", expr.span)
    (arg,) = args
    if expr.name == "count":
        if not isinstance(arg, list | dict | str):
            raise EvalError("count() needs a list, object or string", expr.span)
        return len(arg)
    if expr.name == "is_sha":  # any value: a guard refuses what is not a commit id
        return isinstance(arg, str) and _SHA.fullmatch(arg) is not None
    if expr.name == "lower":
        if not isinstance(arg, str):
            raise EvalError("lower() needs a string", expr.span)
        return arg.lower()
    raise EvalError(f"unknown function '{expr.name}'", expr.span)
