"""Parse rule files with the Lark grammar in `rules.lark` into `dsl.model` values.

`parse(text, path)` returns a RuleFile or raises RulesError with located diagnostics;
it never raises anything else, whatever the text."""

from __future__ import annotations

import threading
from functools import cache
from importlib import resources
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import (
    LarkError,
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)
from lark.indenter import DedentError, Indenter

from dsl import expr as ex
from dsl import model as m
from dsl.diagnostics import Collector, RulesError, Span, did_you_mean


class _RulesIndenter(Indenter):
    NL_type = "_NL"
    OPEN_PAREN_types = ["LPAR", "LSQB", "LBRACE"]
    CLOSE_PAREN_types = ["RPAR", "RSQB", "RBRACE"]
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 8


@cache
def _lark() -> Lark:
    """The parser, without a tree builder (for terminal lookups in messages)."""
    return _build(None)


@cache
def _parser() -> tuple[Lark, _Builder]:
    """The parser with the builder inline: model values are made as rules reduce, with no
    parse tree and no second pass. Spans come from tokens, so no position tracking."""
    builder = _Builder("<rules>")
    return _build(builder), builder


def _grammar() -> str:
    return resources.files("dsl").joinpath("rules.lark").read_text(encoding="utf-8")


def _build(transformer: Transformer[Token, Any] | None) -> Lark:
    return Lark(
        _grammar(),
        parser="lalr",
        postlex=_RulesIndenter(),
        maybe_placeholders=True,
        transformer=transformer,
        cache=True,  # the LALR tables, kept in the temp dir
    )


_PARSE_LOCK = threading.Lock()  # the inline builder carries the file name of a parse


# Readable names for terminals in "expected ..." messages.
_TOKEN_NAMES = {
    "_NL": "end of line",
    "_INDENT": "an indented block",
    "_DEDENT": "end of block",
    "$END": "end of file",
    "LOOP_NAME": "a loop name",
    "KEY": "a setting such as 'every'",
    "WORD": "a word",
    "NAME": "a name",
    "STRING": 'a "string"',
    "NUMBER": "a number",
    "INT": "a whole number",
    "COMPARE": "a comparison",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "LSQB": "'['",
    "RSQB": "']'",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "COLON": "':'",
    "DOT": "'.'",
    "EQUAL": "'='",
}


def _describe_expected(expected: set[str]) -> str:
    names: set[str] = set()
    for name in expected:
        if name in _TOKEN_NAMES:
            names.add(_TOKEN_NAMES[name])
            continue
        literal = _literal(name)
        names.add(f"'{literal}'" if literal is not None else name.lower())
    ordered = sorted(names)
    if len(ordered) > 6:
        ordered = [*ordered[:6], "..."]
    return ", ".join(ordered)


def _syntax_diagnostic(err: UnexpectedInput, path: str, text: str) -> tuple[Span, str, str | None]:
    line = getattr(err, "line", 0) or 0
    column = getattr(err, "column", 0) or 0
    if line <= 0:  # end of file
        lines = text.splitlines() or [""]
        line, column = len(lines), len(lines[-1]) + 1
    span = Span(path, line, max(column, 1))
    if isinstance(err, UnexpectedCharacters):
        pos = err.pos_in_stream or 0
        char = text[pos] if pos < len(text) else ""
        return span, f"unexpected character {char!r}", _describe_hint(err.allowed)
    if isinstance(err, UnexpectedToken):
        token = err.token
        if token.type == "$END":
            return span, "unexpected end of file", _describe_hint(err.expected)
        if token.type == "_INDENT":
            span = Span(path, line + 1, 1)
            return (
                span,
                "unexpected indentation",
                "only loop, for, chain, webhook and triage blocks indent",
            )
        invisible = token.type in ("_NL", "_DEDENT")  # no text of their own to quote
        shown = _TOKEN_NAMES[token.type] if invisible else repr(str(token).strip())
        close = None if invisible else did_you_mean(str(token), _keywords(err.expected))
        return span, f"unexpected {shown}", close or _describe_hint(err.expected)
    if isinstance(err, UnexpectedEOF):
        return span, "unexpected end of file", _describe_hint(set(err.expected))
    return span, "syntax error", None  # pragma: no cover


def _literal(name: str) -> str | None:
    """The text of a terminal that is a fixed string (`loop`, `{`), else None (a pattern,
    or no terminal of that name)."""
    try:
        pattern = _lark().get_terminal(name).pattern
    except KeyError:
        return None
    return str(pattern.value) if pattern.type == "str" else None


def _keywords(expected: Any) -> list[str]:
    """The keywords among the expected terminals (`loop`, `route`, ...): a misspelt one
    gets a did-you-mean (`lop a`)."""
    literals = (_literal(str(name)) for name in expected or ())
    return sorted(word for word in literals if word is not None and word.isalpha())


def _describe_hint(expected: Any) -> str | None:
    names = {str(e) for e in expected or ()}
    return f"expected {_describe_expected(names)}" if names else None


def parse(text: str, path: str) -> m.RuleFile:
    """Parse one rule file. Raises RulesError (only) when the text is not valid syntax,
    with every syntax error of the file (docs/rules.md#e0001-syntax-error)."""
    collector = Collector()
    collector.sources.add(path, text)
    if not text.endswith("\n"):
        text += "\n"
    try:
        with _PARSE_LOCK:
            lark, builder = _parser()
            builder._file = path
            builder._depth.clear()
            builder._start.clear()
            builder._too_deep.clear()
            builder._guard_at.clear()
            parsed: Any = lark.parse(text)  # the inline builder returns a RuleFile
            result: m.RuleFile = parsed
            for span in builder._too_deep.values():
                collector.error(
                    "E0608",
                    f"expression nested more than {ex.MAX_DEPTH} levels deep",
                    span,
                    "split it into simpler conditions (in a webhook table, with `let`)",
                )
    except (_BuildError, UnexpectedInput, DedentError, VisitError, LarkError) as first:
        # The fast parse stops at the first problem; a second, recovering parse (only
        # now, so a valid file costs nothing more) finds every one of the file.
        _diagnose(first, text, path, collector)
    collector.raise_if_any()
    return result


def _diagnose(first: Exception, text: str, path: str, collector: Collector) -> None:
    from dsl import recovery  # here: it builds on this module

    try:
        with _PARSE_LOCK:
            found = recovery.diagnose(text, path, collector.sources)
    except Exception:  # pragma: no cover - a bug in recovery: report the first error
        found = []
    if found:
        collector.extend(found)
    else:  # pragma: no cover - recovery found nothing: the fast parse's error stands
        _first_error(first, text, path, collector)


def _first_error(err: Exception, text: str, path: str, collector: Collector) -> None:
    """The fast parse's error as a diagnostic."""
    if isinstance(err, VisitError):
        err = err.orig_exc
    if isinstance(err, _BuildError):
        collector.error(err.code, err.message, err.span, err.hint)
    elif isinstance(err, UnexpectedInput):
        span, message, hint = _syntax_diagnostic(err, path, text)
        collector.error("E0001", message, span, hint)
    elif isinstance(err, DedentError):
        line = _dedent_line(text, str(err))
        collector.error(
            "E0002",
            "inconsistent indentation: this line does not line up with an enclosing block",
            Span(path, line, 1),
            "indent every line of a block by the same amount",
        )
    else:
        collector.error("E0001", f"could not parse: {err}", Span(path, 1, 1))


def _dedent_line(text: str, message: str) -> int:
    """Lark's DedentError carries no position; find the first line whose indentation
    matches no enclosing level."""
    levels = [0]
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.lstrip(" \t")
        if not stripped or stripped.startswith("#"):
            continue
        width = len(raw[: len(raw) - len(stripped)].expandtabs(8))
        if width > levels[-1]:
            levels.append(width)
            continue
        while width < levels[-1]:
            levels.pop()
        if width != levels[-1]:
            return number
    return 1


class _BuildError(Exception):
    def __init__(self, code: str, message: str, span: Span, hint: str | None = None) -> None:
        self.code, self.message, self.span, self.hint = code, message, span, hint
        super().__init__(message)


def _unquote(token: Token) -> str:
    body = str(token)[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append({"n": "\n", "t": "\t"}.get(nxt, nxt))
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


@v_args(inline=True)
class _Builder(Transformer[Token, Any]):
    """Turns the parse tree into model values; every value keeps its span."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self._file = path
        # The nesting depth of each compound expression built in this parse, by id():
        # every node stays referenced (by its parent or the parser's stack) until the
        # parse ends, so an id is never reused within one.
        self._depth: dict[int, int] = {}
        self._start: dict[int, Span] = {}  # where each compound expression begins
        self._too_deep: dict[int, Span] = {}
        self._guard_at: dict[int, Span] = {}  # where each guard's `if`/`unless` is

    def _span(self, token: Token) -> Span:
        return Span(self._file, token.line or 1, token.column or 1)

    # ---- file ----------------------------------------------------------------
    def start(self, *decls: m.Decl) -> m.RuleFile:
        return m.RuleFile(self._file, tuple(decls))

    # ---- loops ---------------------------------------------------------------
    def loop(
        self, name: Token, *lines: m.Emit | m.Setting | m.TriageDecl | m.OnEvent
    ) -> m.LoopDecl:
        emits = tuple(line for line in lines if isinstance(line, m.Emit))
        settings = tuple(line for line in lines if isinstance(line, m.Setting))
        triage = tuple(line for line in lines if isinstance(line, m.TriageDecl))
        on_events = tuple(line for line in lines if isinstance(line, m.OnEvent))
        span = self._span(name)
        line_span = Span(self._file, span.line, 1)
        return m.LoopDecl(str(name), span, emits, settings, line_span, triage, on_events)

    def on_event(
        self, keyword: Token, event_type: Token, window: ex.Expr | None, guard: m.Guard | None
    ) -> m.OnEvent:
        span = self._span(keyword)
        old = m.Old(str(keyword), span) if str(keyword) != "on_event" else None
        return m.OnEvent(str(event_type), self._span(event_type), window, guard, span, old)

    def on_event_window(self, value: ex.Expr) -> ex.Expr:
        return value

    def setting(self, key: Token, *args: Token | m.Arg) -> m.Setting:
        built = tuple(a if isinstance(a, m.Arg) else self._word(a) for a in args)
        return m.Setting(str(key), built, self._span(key))

    def _word(self, token: Token) -> m.Arg:
        return m.Arg("word", str(token), self._span(token))

    def arg_string(self, token: Token) -> m.Arg:
        return m.Arg("string", _unquote(token), self._span(token))

    def arg_assign(self, name: Token, value: Token) -> m.Arg:
        return m.Arg("assign", str(name), self._span(name), self._word(value))

    # ---- triage ----------------------------------------------------------------
    def triage(self, keyword: Token, *lines: m.TriageLine) -> m.TriageDecl:
        return m.TriageDecl(tuple(lines), self._span(keyword))

    def triage_line(
        self,
        decision: Token,
        guard: m.Guard | None,
        note: Token | None,
        key: Token | None,
        category: Token | None,
    ) -> m.TriageLine:
        key_expr = self.string(key) if key is not None else None
        return m.TriageLine(
            str(decision),
            self._span(decision),
            guard,
            _unquote(note) if note is not None else None,
            key_expr,
            self._span(key) if key is not None else None,
            str(category) if category is not None else None,
            self._span(category) if category is not None else None,
        )

    def triage_note(self, token: Token) -> Token:
        return token

    def triage_key(self, token: Token) -> Token:
        return token

    def triage_category(self, token: Token) -> Token:
        return token

    def where(self, expr: ex.Expr) -> ex.Expr:
        return expr

    def foreach(
        self, var: Token, collection: Token, where: ex.Expr | None, *loops: m.LoopDecl
    ) -> m.ForEach:
        span = self._span(var)
        return m.ForEach(
            str(var),
            str(collection),
            self._span(collection),
            where,
            tuple(loops),
            Span(self._file, span.line, 1),
        )

    # ---- routes, policies ------------------------------------------------------
    def route(self, event_type: Token, definition: Token, approval: m.Arg | None) -> m.RouteDecl:
        span = self._span(event_type)
        return m.RouteDecl(
            str(event_type),
            span,
            str(definition),
            self._span(definition),
            approval,
            Span(self._file, span.line, 1),
        )

    def route_approval(self, word: Token) -> m.Arg:
        return self._word(word)

    def human_only(self, keyword: Token, kind: Token | None, target: Token) -> m.HumanOnlyDecl:
        span = self._span(target)
        target_kind = "definition" if kind is not None or "@" in target else "event"
        old = None
        if str(keyword) != "human_only":
            old = m.Old(str(keyword), self._span(keyword))
        elif kind is not None:
            old = m.Old(str(kind), self._span(kind))
        line = Span(self._file, span.line, 1)
        return m.HumanOnlyDecl(target_kind, str(target), span, line, old)

    # ---- chains --------------------------------------------------------------
    def chain(self, definition: Token, *rest: Token | m.Emit | m.Stop) -> m.ChainDecl:
        outcomes = tuple(m.Outcome(str(t), self._span(t)) for t in rest if isinstance(t, Token))
        emits = tuple(r for r in rest if isinstance(r, m.Emit))
        stops = [r for r in rest if isinstance(r, m.Stop)]
        span = self._span(definition)
        return m.ChainDecl(
            str(definition),
            span,
            outcomes,
            emits,
            stops[0] if stops else None,
            Span(self._file, span.line, 1),
        )

    def stop(self, token: Token) -> m.Stop:
        return m.Stop(self._span(token))

    # ---- webhooks ------------------------------------------------------------
    def webhook(self, source: Token, kind: Token, *lines: m.WebhookLine) -> m.WebhookDecl:
        span = self._span(source)
        return m.WebhookDecl(
            str(source), span, str(kind), tuple(lines), Span(self._file, span.line, 1)
        )

    def let(self, name: Token, value: ex.Expr) -> m.Let:
        return m.Let(str(name), value, self._span(name))

    def ignore(self, reason: Token, guard: m.Guard | None = None) -> m.Refusal:
        return m.Refusal("ignore", str(reason), guard, self._span(reason))

    def reject(self, reason: Token, guard: m.Guard | None = None) -> m.Refusal:
        return m.Refusal("reject", str(reason), guard, self._span(reason))

    # ---- emit ----------------------------------------------------------------
    def emit(self, event_type: Token, *rest: Any) -> m.Emit:
        subject = event_id = payload = guard = old = None
        for item in rest:
            if isinstance(item, tuple) and item[0] == "subject":
                subject = item[1]
            elif isinstance(item, tuple) and item[0] == "id":
                event_id = item[1]
            elif isinstance(item, ex.ObjectExpr):
                payload = item
            elif isinstance(item, m.Guard):
                guard = item
                if payload is not None:  # the old form: the guard after the payload
                    word = "unless" if item.negate else "if"
                    old = m.Old(word, self._guard_at.get(id(item), payload.span))
        span = self._span(event_type)
        return m.Emit(str(event_type), span, subject, event_id, payload, guard, span, old)

    def subject(self, value: ex.Expr) -> tuple[str, ex.Expr]:
        return ("subject", value)

    def event_id(self, value: ex.Expr) -> tuple[str, ex.Expr]:
        return ("id", value)

    def if_guard(self, keyword: Token, expr: ex.Expr) -> m.Guard:
        return self._guard(keyword, m.Guard(expr, negate=False))

    def unless_guard(self, keyword: Token, expr: ex.Expr) -> m.Guard:
        return self._guard(keyword, m.Guard(expr, negate=True))

    def _guard(self, keyword: Token, guard: m.Guard) -> m.Guard:
        self._guard_at[id(guard)] = self._span(keyword)  # for an old trailing guard's warning
        return guard

    # ---- expressions ---------------------------------------------------------
    def _nested(self, node: ex.Expr, children: tuple[ex.Expr, ...]) -> ex.Expr:
        """`node`, its depth (one more than its deepest child's) and where it begins
        recorded; a node deeper than MAX_DEPTH is kept for E0608 (at where it begins)
        unless a deeper one encloses it."""
        depth = 1 + max((self._depth.get(id(c), 1) for c in children), default=0)
        starts = [node.span, *(self._start.get(id(c), c.span) for c in children)]
        self._depth[id(node)] = depth
        self._start[id(node)] = min(starts, key=lambda span: (span.line, span.column))
        if depth > ex.MAX_DEPTH:  # reported where the outermost such node starts
            for child in children:
                self._too_deep.pop(id(child), None)
            self._too_deep[id(node)] = self._start[id(node)]
        return node

    def or_expr(self, *operands: ex.Expr) -> ex.Expr:
        return self._nested(ex.BoolOp("or", operands, operands[0].span), operands)

    def and_expr(self, *operands: ex.Expr) -> ex.Expr:
        return self._nested(ex.BoolOp("and", operands, operands[0].span), operands)

    def not_(self, token: Token, operand: ex.Expr) -> ex.Expr:
        return self._nested(ex.Not(operand, self._span(token)), (operand,))

    def compare(self, left: ex.Expr, op: Token, right: ex.Expr) -> ex.Expr:
        return self._nested(ex.Compare(str(op), left, right, self._span(op)), (left, right))

    def in_(self, left: ex.Expr, right: ex.Expr) -> ex.Expr:
        return self._nested(ex.Compare("in", left, right, self._span_of(left)), (left, right))

    def not_in(self, left: ex.Expr, _not: Token, right: ex.Expr) -> ex.Expr:
        node = ex.Compare("not in", left, right, self._span_of(left))
        return self._nested(node, (left, right))

    def _span_of(self, node: ex.Expr) -> Span:
        return node.span

    def string(self, token: Token) -> ex.Expr:
        span = self._span(token)
        try:
            return ex.parse_template(_unquote(token), span)
        except ex.TemplateError as err:
            at = Span(span.file, span.line, span.column + 1 + err.offset)
            raise _BuildError("E0602", str(err), at) from None

    def number(self, token: Token) -> ex.Expr:
        text = str(token)
        value: int | float = float(text) if "." in text else int(text)
        return ex.Literal(value, self._span(token))

    def true(self, token: Token) -> ex.Expr:
        return ex.Literal(True, self._span(token))

    def false(self, token: Token) -> ex.Expr:
        return ex.Literal(False, self._span(token))

    def null(self, token: Token) -> ex.Expr:
        return ex.Literal(None, self._span(token))

    def path(self, root: Token, *steps: Token) -> ex.Expr:
        built: list[str | int] = [int(s) if s.type == "INT" else str(s) for s in steps]
        return ex.Path(str(root), tuple(built), self._span(root))

    def list(self, bracket: Token, *items: ex.Expr | None) -> ex.Expr:
        kept = tuple(i for i in items if i is not None)
        return self._nested(ex.ListExpr(kept, self._span(bracket)), kept)

    def object(self, brace: Token, *pairs: tuple[str, ex.Expr, Span] | None) -> ex.Expr:
        seen: set[str] = set()
        kept: list[tuple[str, ex.Expr]] = []
        for pair in pairs:
            if pair is None:
                continue
            key, value, span = pair
            if key in seen:
                raise _BuildError("E0604", f"key '{key}' appears twice in this object", span)
            seen.add(key)
            kept.append((key, value))
        node = ex.ObjectExpr(tuple(kept), self._span(brace))
        return self._nested(node, tuple(value for _, value in kept))

    def pair(self, key: Token, value: ex.Expr) -> tuple[str, ex.Expr, Span]:
        name = _unquote(key) if key.type == "STRING" else str(key)
        return (name, value, self._span(key))

    def call(self, name: Token, *args: ex.Expr | None) -> ex.Expr:
        span = self._span(name)
        if str(name) not in ex.FUNCTIONS:
            known = ", ".join(sorted(ex.FUNCTIONS))
            raise _BuildError("E0603", f"unknown function '{name}'", span, f"functions: {known}")
        kept = tuple(a for a in args if a is not None)
        return self._nested(ex.Call(str(name), kept, span), kept)


__all__ = ["RulesError", "parse"]
