"""Every syntax error of a rule file in one run (docs/rules.md#e0001-syntax-error).

`dsl.parser.parse` parses a file in one fast pass; only when that pass fails does it call
`diagnose`, which parses the file again with a second parser that recovers: it records
an error, drops the line it is on (and the block indented under it), and goes on at
the next line, so a file's syntax errors are all reported, each once, at its line and
column. What this second parse builds is never used: only its diagnostics.

Common mistakes get their own message and hint from one table, `MISTAKES`. A line
whose first word is a loop setting or a block's line (dsl.spelling's vocabulary) where
the parser takes none is a setting outside a loop or a line outside its block, whatever
the parser state; a bracket or string not closed and a line indented under a line that
opens no block are recognised where the lexer sees them; the rest are recognised by the
parser state and the token at the error, learnt by parsing each mistake's examples
(`keyed_mistakes`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from dsl import expr as ex
from dsl import parser as p
from dsl import spelling
from dsl.diagnostics import Diagnostic, Sources, Span

MAX_ERRORS = 50  # syntax errors reported per file; one more line says the rest were cut


@dataclass(frozen=True)
class Mistake:
    """A common mistake: its message (`{found}` is the text at the error), its hint, and
    examples (a rule text and the line of the mistake) that must produce it."""

    name: str
    message: str
    hint: str
    examples: tuple[tuple[str, int], ...]
    keyed: bool = True  # recognised by parser state; otherwise where the lexer sees it


# The common mistakes, each with its message and hint. A test parses every example and
# checks it yields exactly this one diagnostic on the example's line.
MISTAKES: tuple[Mistake, ...] = (
    Mistake(
        "setting outside a loop",
        "'{found}' outside a loop: a setting belongs to a loop",
        "indent it under its `loop NAME` line",
        (
            ("every 1h\n", 1),
            ("# nightly\nevery 1h\n", 2),
            ("loop a\n  manual\n  emit a.b\n\napproval watched\n", 5),
            ('route a.b to c@1\ndescription "x"\n', 2),
            ("loop a\n  manual\n  emit a.b\n\ncatch_up none\n", 5),
            ("loop a\n  manual\n  emit a.b\nshadow true\n", 4),
            ("on a@1 outcome X\n  emit a.b\n  every 1h\n", 3),
            ("webhook github push\n  overlap skip\n", 2),
            ("loop a\n  manual\n  emit a.b\n\nsingleton\n", 5),
            ("loop a\n  manual\n  emit a.b\n\non_event\n", 5),
        ),
        keyed=False,
    ),
    Mistake(
        "block line outside its block",
        "'{found}' outside a block",
        "indent it under its loop, chain or webhook line, as the lines above it are",
        (
            ("loop a\n  manual\nemit a.b\n", 3),
            ("emit a.b\n", 1),
            ("# c\nemit a.b\n", 2),
            ("on a@1 outcome X\nstop\n", 2),
            ("webhook github push\n  let x = 1\nlet y = 2\n", 3),
            ("loop a\n  manual\n  emit a.b\n\nemit c.d\n", 5),
            ("route a.b to c@1\ntriage\n  ignore\n", 2),
        ),
        keyed=False,
    ),
    Mistake(
        "indented under a line that opens no block",
        "unexpected indentation",
        "only loop, for, chain, webhook and triage blocks indent; line it up with the line above",
        (
            ("loop a\n  manual\n    emit a.b\n", 3),
            ("route a.b to c@1\n  approval auto\n", 2),
        ),
        keyed=False,
    ),
    Mistake(
        "bracket not closed",
        "'{found}' is not closed",
        "close it with '{closer}'; it opens here",
        (
            ("loop a\n  manual\n  emit a.b {\n    repo: 1,\n\nroute a.b to c@1\n", 3),
            ('loop a\n  manual\n  emit a.b { repo: ["x", "y" }\n', 3),
            ("loop a\n  manual\n  emit a.b { repo: 1\n  enabled\n", 3),
            ("webhook github push\n  emit a.b if count(x\n  ignore y\n", 2),
        ),
        keyed=False,
    ),
    Mistake(
        "emit without an event type",
        "emit without an event type",
        "write the event type after `emit`, as in `emit factory.work.requested { ... }`",
        (
            ("loop a\n  manual\n  emit\n", 3),
            ('loop a\n  manual\n  emit { repo: "x" }\n', 3),
            ("on a@1 outcome X\n  emit\n", 2),
            ("webhook github push\n  emit if x\n", 2),
        ),
    ),
    Mistake(
        "guard without a condition",
        "'if' or 'unless' without a condition",
        'write a condition after `if` or `unless`, as in `if event.payload.repo == "bj29"`',
        (
            ("loop a\n  manual\n  emit a.b if\n", 3),
            ("webhook github push\n  ignore x unless\n", 2),
            ("webhook github push\n  reject x if\n", 2),
            ("on a@1 outcome X\n  emit a.b { a: 1 } if\n", 2),
            ("loop a\n  manual\n  emit a.b\n  triage\n    ignore if\n", 5),
        ),
    ),
    Mistake(
        "string not closed",
        "string not closed",
        'end it with " on the same line (a string does not span lines)',
        (
            ('loop a\n  description "nightly\n  manual\n  emit a.b\n', 2),
            ('loop a\n  manual\n  emit a.b { repo: "bj29 }\n', 3),
        ),
        keyed=False,
    ),
    Mistake(
        "= in a condition",
        "'=' in a condition",
        "compare with '=='",
        (
            ('loop a\n  manual\n  emit a.b if event.payload.repo = "x"\n', 3),
            ('webhook github push\n  ignore x unless action = "opened"\n', 2),
            ("webhook github push\n  reject x if 1 = 1\n", 2),
            ('for r in repos where r.name = "x"\n  loop a-{r.name}\n    manual\n', 1),
        ),
    ),
    Mistake(
        "route without to",
        "a route without 'to'",
        "write: route EVENT_TYPE to DEFINITION@VERSION",
        (
            ("route a.b c@1\n", 1),
            ("route a.b c@1 approval auto\n", 1),
        ),
    ),
)
MISTAKE = {mistake.name: mistake for mistake in MISTAKES}

_CLOSERS = {"LBRACE": "}", "LSQB": "]", "LPAR": ")"}
_OPENERS = {"LBRACE": "{", "LSQB": "[", "LPAR": "("}
_STRUCTURE = frozenset(("_NL", "_INDENT", "_DEDENT"))
# The words that start a declaration: a line dedented between two levels and starting
# with one of these goes with the outer level, any other line with the inner.
_DECLARATIONS = frozenset(("loop", "for", "route", "on", "webhook", "human-only", "human_only"))
_FIRST_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _width(indent: str) -> int:
    return indent.count(" ") + indent.count("\t") * p._RulesIndenter.tab_len


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _indent_at(text: str, pos: int) -> int:
    """The indentation width of the physical line holding `pos`."""
    start = _line_start(text, pos)
    line = text[start:pos]
    return _width(line[: len(line) - len(line.lstrip(" \t"))])


def _resumes_at(text: str, pos: int, indent: int) -> bool:
    """Whether the line starting at `pos`, met inside an unclosed bracket, rather starts
    a new line of rules: no deeper than the bracket's line, and a declaration or setting
    (a word then a space or the end of the line), not a closing bracket or a `key:`."""
    stripped = text[pos:].lstrip(" \t")
    if _width(text[pos : len(text) - len(stripped)]) > indent:
        return False
    word = _FIRST_WORD.match(stripped)
    if word is None:
        return False
    after = stripped[word.end() : word.end() + 1]
    return after in ("", " ", "\t", "\n", "\r")


def _logical_line_end(text: str, pos: int, depth: int, indent: int) -> int:
    """Where the logical line holding `pos` ends (the index of its newline, or of the
    `\\r` before it): the first newline outside brackets, strings and continuations,
    or, inside a bracket never closed, the first line that `_resumes_at`."""
    i, n = pos, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] not in '"\n':
                i += 2 if text[i] == "\\" and i + 1 < n and text[i + 1] != "\n" else 1
            if i < n and text[i] == '"':
                i += 1
            continue
        if c == "#":
            found = text.find("\n", i)
            i = n if found < 0 else found
            continue
        if c == "\\":
            rest = text[i + 1 :].lstrip(" \t")
            if rest.startswith("\n") or rest.startswith("\r\n"):
                i = n - len(rest) + rest.index("\n") + 1
                continue
        if c in "{[(":
            depth += 1
        elif c in "}])":
            depth = max(depth - 1, 0)
        elif c == "\n" and (depth == 0 or _resumes_at(text, i + 1, indent)):
            return i - 1 if i > 0 and text[i - 1] == "\r" else i
        i += 1
    return n


def _block_end(text: str, pos: int, outer: int) -> int:
    """Where the block indented deeper than `outer` whose first line holds `pos` ends:
    the newline before the first later line no deeper than `outer` (blank lines and
    comments are part of the block)."""
    end = _logical_line_end(text, pos, 0, _indent_at(text, pos))
    while end < len(text):
        nl = text.find("\n", end)
        start = nl + 1
        if nl < 0 or start >= len(text):
            return len(text)
        line_end = text.find("\n", start)
        line = text[start : len(text) if line_end < 0 else line_end]
        stripped = line.lstrip(" \t")
        if stripped.strip() and not stripped.startswith("#"):
            if _width(line[: len(line) - len(stripped)]) <= outer:
                return end
            end = _logical_line_end(text, start, 0, outer)
        else:
            end = len(text) if line_end < 0 else line_end
    return len(text)


@dataclass
class _Problem:
    code: str
    message: str
    line: int
    column: int
    hint: str | None


class _RecoveringIndenter(p._RulesIndenter):
    """The indenter, made to carry on: a dedent to no enclosing level is recorded
    (E0002) and the line joins the nearest level; a bracket never closed is recorded at
    where it opens, and a `_RESYNC` token tells the parse to drop the line. It can resume
    after the lexer failed (`resume`), keeping its levels."""

    def __init__(self) -> None:
        super().__init__()
        self.text = ""
        self.problems: list[_Problem] = []
        self.openers: list[Token] = []
        self.aliases: dict[int, int] = {}  # a misaligned width, and the level it joined
        self.resume = False

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        if not self.resume:
            self.paren_level, self.indent_level, self.openers = 0, [0], []
            self.aliases = {}
        self.resume = False
        return self._process(stream)

    def _unclosed(self, at: Token) -> Token:
        opener = self.openers[0]
        mistake = MISTAKE["bracket not closed"]
        closer = _CLOSERS[opener.type]
        self.problems.append(
            _Problem(
                "E0001",
                mistake.message.format(found=_OPENERS[opener.type]),
                opener.line or 1,
                opener.column or 1,
                mistake.hint.format(closer=closer),
            )
        )
        self.paren_level, self.openers = 0, []
        return Token.new_borrow_pos("_RESYNC", "", at)

    def _process(self, stream: Iterator[Token]) -> Iterator[Token]:
        token = None
        for token in stream:
            if token.type == self.NL_type:
                if self.paren_level > 0 and _resumes_at(
                    self.text,
                    token.end_pos or 0,
                    _indent_at(self.text, self.openers[0].start_pos or 0),
                ):
                    yield self._unclosed(token)
                yield from self.handle_NL(token)
            else:
                yield token
            if token.type in self.OPEN_PAREN_types:
                self.paren_level += 1
                self.openers.append(token)
            elif token.type in self.CLOSE_PAREN_types and self.paren_level > 0:
                self.paren_level -= 1
                self.openers.pop()
        if self.paren_level > 0 and token is not None:
            yield self._unclosed(token)
        while len(self.indent_level) > 1:
            self.indent_level.pop()
            yield (
                Token.new_borrow_pos(self.DEDENT_type, "", token)
                if token
                else Token(self.DEDENT_type, "")
            )

    def handle_NL(self, token: Token) -> Iterator[Token]:
        if self.paren_level > 0:
            return
        yield token
        indent = _width(token.rsplit("\n", 1)[1])
        levels = self.indent_level
        if indent in self.aliases:
            if self.aliases[indent] in levels:
                indent = self.aliases[indent]
            else:
                del self.aliases[indent]
        if indent > levels[-1]:
            levels.append(indent)
            yield Token.new_borrow_pos(self.INDENT_type, "", token)
            return
        while indent < levels[-1]:
            if len(levels) > 1 and levels[-2] < indent:  # between two levels
                self.problems.append(
                    _Problem(
                        "E0002",
                        "inconsistent indentation: this line does not line up with an "
                        "enclosing block",
                        token.end_line or 1,
                        1,
                        "indent every line of a block by the same amount",
                    )
                )
                word = _FIRST_WORD.match(self.text, token.end_pos or 0)
                if word is None or word.group() not in _DECLARATIONS:
                    self.aliases[indent] = levels[-1]  # lines so indented join the block
                    return
            levels.pop()
            yield Token.new_borrow_pos(self.DEDENT_type, "", token)


class _Broken:
    """What a callback returns when it cannot build (a builder error, or the junk that
    recovery feeds it); whatever encloses it is broken too."""


_BROKEN = _Broken()


class _Guarded:
    """The builder's callbacks, each made to record a builder error (E0602, E0603,
    E0604) instead of raising it, so the parse goes on; every value stays referenced
    until the parse ends (the builder keys expression depths by id())."""

    def __init__(self, builder: p._Builder) -> None:
        self.builder = builder
        self.errors: list[p._BuildError] = []
        self.kept: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or not name.islower():
            raise AttributeError(name)
        method = getattr(self.builder, name)  # AttributeError: the default callback

        def call(children: list[Any]) -> Any:
            if any(child is _BROKEN for child in children):
                return _BROKEN
            try:
                value = method(*children)
            except p._BuildError as err:
                self.errors.append(err)
                return _BROKEN
            except Exception:  # junk fed after an error; the result is not used
                return _BROKEN
            self.kept.append(value)
            return value

        return call


@cache
def _recovering() -> tuple[Lark, _RecoveringIndenter, _Guarded]:
    builder = p._Builder("<rules>")
    guarded = _Guarded(builder)
    indenter = _RecoveringIndenter()
    grammar = p._grammar()
    lark = Lark(
        grammar,
        parser="lalr",
        postlex=indenter,
        maybe_placeholders=True,
        transformer=guarded,  # duck-typed: Lark only looks its callbacks up by name
        cache=True,
    )
    return lark, indenter, guarded


def _found(err: UnexpectedInput, text: str) -> str:
    if isinstance(err, UnexpectedToken):
        return str(err.token).strip()
    pos = getattr(err, "pos_in_stream", 0) or 0
    return text[pos] if pos < len(text) else ""


@cache
def keyed_mistakes() -> dict[tuple[int, str], Mistake]:
    """The keyed mistakes by (parser state, token type) at their first error, learnt by
    parsing their examples."""
    table: dict[tuple[int, str], Mistake] = {}
    for mistake in MISTAKES:
        if not mistake.keyed:
            continue
        for text, _line in mistake.examples:
            key = _Run(text, "<example>", learn=True).first_key()
            if key is not None:
                table.setdefault(key, mistake)
    return table


class _Run:
    """One recovering parse of a file."""

    def __init__(self, text: str, path: str, learn: bool = False) -> None:
        if not text.endswith("\n"):
            text += "\n"
        self.text, self.path, self.learn = text, path, learn
        self.lark, self.indenter, self.guarded = _recovering()
        self.problems: list[_Problem] = []
        self.key: tuple[int, str] | None = None
        self.cut = False

    def first_key(self) -> tuple[int, str] | None:
        self.run()
        return self.key

    # ---- reporting -------------------------------------------------------------
    def _lines_reported(self) -> set[int]:
        return {problem.line for problem in [*self.problems, *self.indenter.problems]}

    def _report(self, err: UnexpectedInput, position: int, token_type: str) -> None:
        if self.key is None:
            self.key = (position, token_type)
        if self.learn:
            return
        span, message, hint = p._syntax_diagnostic(err, self.path, self.text)
        line, column = span.line, span.column
        if token_type == "_INDENT":
            token = getattr(err, "token", None)
            line, column = (token.end_line if token is not None else line) or line, 1
            mistake = MISTAKE["indented under a line that opens no block"]
            message, hint = mistake.message, mistake.hint
        elif (opener := self._mismatched(err)) is not None:
            mistake = MISTAKE["bracket not closed"]
            line, column = opener.line or line, opener.column or column
            message = mistake.message.format(found=_OPENERS[opener.type])
            hint = mistake.hint.format(closer=_CLOSERS[opener.type])
        elif isinstance(err, UnexpectedCharacters) and _found(err, self.text) == '"':
            mistake = MISTAKE["string not closed"]
            message, hint = mistake.message, mistake.hint
        elif (misplaced := self._misplaced(err, position)) is not None:
            mistake, word, column = misplaced
            message, hint = mistake.message.format(found=word), mistake.hint
        else:
            known = keyed_mistakes().get((position, token_type))
            if known is not None:
                message = known.message.format(found=_found(err, self.text))
                hint = known.hint
            elif "_INDENT" in self._expected(position):
                under = "this line" if token_type in ("_DEDENT", "$END") else "the line above"
                hint = f"expected an indented block under {under}"
        if line in self._lines_reported():
            return  # one diagnostic a line: the rest follow from the first
        if len(self.problems) + len(self.indenter.problems) >= MAX_ERRORS:
            self.cut = True
            return
        self.problems.append(_Problem("E0001", message, line, column, hint))

    def _misplaced(self, err: UnexpectedInput, position: int) -> tuple[Mistake, str, int] | None:
        """A line whose first word is a loop setting (a block line) where the grammar takes
        none: a setting outside a loop (a block line outside its block), whatever the
        parser state: after any declaration, at the start, or in a chain or webhook
        block. The parser refused the word itself, so it cannot go where it stands. With
        the word (an old kebab-case one is refused at its `-`) and its column."""
        token = getattr(err, "token", None)
        pos = token.start_pos if isinstance(token, Token) else getattr(err, "pos_in_stream", None)
        if pos is None:
            return None
        start, end = _line_start(self.text, pos), _line_end(self.text, pos)
        line = self.text[start:end]
        indent = len(line) - len(line.lstrip(" \t"))
        first = _FIRST_WORD.match(self.text, start + indent, end)
        if first is None:
            return None
        word, column = first.group(), indent + 1
        # A chain's `on` takes the start of `on_event` (or `on-active`) at the top level,
        # so the parser refuses a later word of that line, where a chain wants `outcome`.
        split = word.startswith(("on_", "on-")) and "OUTCOME" in self._expected(position)
        if not (first.start() <= pos < first.end() or split):
            return None  # the error is not in the line's first word
        if word in spelling.LOOP_SETTING_WORDS:
            return MISTAKE["setting outside a loop"], word, column
        if word in spelling.BLOCK_LINES:
            return MISTAKE["block line outside its block"], word, column
        return None

    def _mismatched(self, err: UnexpectedInput) -> Token | None:
        """The bracket a wrong closing bracket leaves open (`[1, 2 }`), if any."""
        token = getattr(err, "token", None)
        openers = self.indenter.openers
        if token is None or token.type not in p._RulesIndenter.CLOSE_PAREN_types or not openers:
            return None
        inner = openers[-1]
        return inner if _CLOSERS[inner.type] != str(token) else None

    def _expected(self, position: int) -> set[str]:
        states: Any = self.lark.parser.parser.parser.parse_table.states
        return set(states[position])

    # ---- the parse ---------------------------------------------------------------
    def run(self) -> None:
        if not self.learn:
            keyed_mistakes()  # learnt first: learning parses with the same parser
        text = self.text
        indenter = self.indenter
        indenter.text, indenter.problems, indenter.resume = text, [], False
        builder = self.guarded.builder
        builder._file = self.path
        builder._depth.clear()
        builder._start.clear()
        builder._too_deep.clear()
        self.guarded.errors, self.guarded.kept = [], []
        ip = self.lark.parse_interactive(text)
        state = ip.parser_state
        lexer_state: Any = ip.lexer_thread.state
        line_ctr = lexer_state.line_ctr

        def snap() -> tuple[list[Any], list[Any]]:
            return state.state_stack[:], state.value_stack[:]

        def restore(to: tuple[list[Any], list[Any]]) -> None:
            state.state_stack[:], state.value_stack[:] = to[0][:], to[1][:]

        def skip_to(pos: int) -> None:
            if pos > line_ctr.char_pos:
                line_ctr.feed(text[line_ctr.char_pos : pos])

        def rewind(token: Token) -> None:
            line_ctr.char_pos = token.start_pos or 0
            line_ctr.line = token.line or 1
            line_ctr.column = token.column or 1
            line_ctr.line_start_pos = (token.start_pos or 0) - (token.column or 1) + 1

        def restart() -> Iterator[Token]:
            indenter.paren_level, indenter.openers, indenter.resume = 0, [], True
            return iter(ip.lexer_thread.lex(state))  # type: ignore[no-untyped-call]

        def line_end(pos: int) -> int:
            openers = indenter.openers
            indent = (
                _indent_at(text, openers[0].start_pos or 0) if openers else _indent_at(text, pos)
            )
            return _logical_line_end(text, pos, indenter.paren_level, indent)

        stream = iter(ip.lexer_thread.lex(state))  # type: ignore[no-untyped-call]
        line_snap = prev_snap = snap()
        heads: list[tuple[list[Any], list[Any]]] = []  # before each open block's header
        at_line_start = True
        skip_nl = expect_block = recovering = False
        held: tuple[UnexpectedInput, int, str] | None = None  # a header without a block
        retried_at = -1
        budget = 20 * len(text) + 1000  # steps; recovery always advances, this is a guard

        def skip_block() -> Iterator[Token]:
            levels = indenter.indent_level
            outer = levels[-2] if len(levels) > 1 else 0
            if len(levels) > 1:
                levels.pop()
            skip_to(_block_end(text, line_ctr.char_pos, outer))
            return restart()

        while budget > 0 and not self.cut:
            budget -= 1
            try:
                token = next(stream)
            except StopIteration:
                break
            except (UnexpectedCharacters, UnexpectedToken) as err:  # raised by the lexer
                if at_line_start:
                    prev_snap, line_snap, at_line_start = line_snap, snap(), False
                bad = err.token if isinstance(err, UnexpectedToken) else None
                position = state.position
                kind = bad.type if bad is not None else "<char>"
                at = (bad.start_pos if bad is not None else line_ctr.char_pos) or 0
                if held is None and "_INDENT" in self._expected(position) and at != retried_at:
                    held, retried_at = (err, position, kind), at  # a header without a block
                    restore(prev_snap)
                    line_snap, at_line_start = prev_snap, True
                    if bad is not None:
                        rewind(bad)
                    stream = restart()
                    continue
                held = None
                self._report(err, position, kind)
                restore(line_snap)
                start = bad.start_pos if bad is not None else err.pos_in_stream
                skip_to(line_end(start or 0))
                stream = restart()
                skip_nl = recovering = True
                continue
            kind = token.type
            if kind == "_RESYNC":
                restore(line_snap)
                skip_nl = recovering = True
                continue
            if skip_nl and kind == "_NL":
                skip_nl, expect_block = False, True
                continue
            skip_nl = False
            if expect_block and kind == "_INDENT":
                expect_block = False
                stream = skip_block()
                skip_nl = True
                continue
            expect_block = False
            if kind not in _STRUCTURE and at_line_start:
                prev_snap, line_snap, at_line_start = line_snap, snap(), False
            position = state.position
            try:
                state.feed_token(token)
            except UnexpectedToken as err:
                if kind == "_DEDENT" and (recovering or held is not None):
                    # A header without a block that ended its block stays held: shown
                    # when the next line parses, dropped if that line fails itself.
                    restore(heads.pop() if heads else line_snap)
                    line_snap = snap()
                    continue  # the block emptied by recovery goes with its header
                if held is None and kind != "_INDENT" and "_INDENT" in self._expected(position):
                    held = (err, position, kind)
                    restore(prev_snap if kind not in _STRUCTURE else line_snap)
                    line_snap = snap()
                    if kind in _STRUCTURE:
                        stream = _chain(token, stream)
                    else:
                        rewind(token)
                        stream = restart()
                    at_line_start = True
                    continue
                held = None  # a retried line that fails on its own shows its own error
                self._report(err, position, kind)
                if kind == "_INDENT":
                    stream = skip_block()
                    skip_nl = True
                elif kind == "_DEDENT":
                    restore(heads.pop() if heads else line_snap)
                    line_snap = snap()
                elif kind == "_NL":
                    restore(line_snap)
                    expect_block = True
                else:
                    restore(line_snap)
                    skip_to(line_end(token.start_pos or 0))
                    stream = restart()
                    skip_nl = True
                recovering = True
                continue
            if held is not None and kind == "_NL":  # the retried line parses
                self._report(*held)
                held = None
            recovering = False
            if kind == "_INDENT":
                heads.append(line_snap)
            elif kind == "_DEDENT" and heads:
                heads.pop()
            if kind in _STRUCTURE:
                at_line_start = True
        if self.cut:
            return
        end = (
            Token.new_borrow_pos("$END", "", lexer_state.last_token)
            if lexer_state.last_token
            else Token("$END", "")
        )
        try:
            state.feed_token(end, True)
        except UnexpectedToken as err:
            if held is not None:
                self._report(*held)
            elif not recovering:
                self._report(err, state.position, "$END")
        else:
            if held is not None:
                self._report(*held)

    def diagnostics(self, sources: Sources) -> list[Diagnostic]:
        """Every problem found, in file order, with the builder's and E0608."""
        self.run()
        problems = sorted(
            [*self.problems, *self.indenter.problems], key=lambda q: (q.line, q.column)
        )
        syntax_lines = {q.line for q in problems}
        found: list[Diagnostic] = []
        for q in problems:
            span = Span(self.path, q.line, q.column)
            found.append(
                Diagnostic(q.code, q.message, span, sources.line(self.path, q.line), q.hint)
            )
        for err in self.guarded.errors:
            if err.span.line not in syntax_lines:
                found.append(
                    Diagnostic(
                        err.code,
                        err.message,
                        err.span,
                        sources.line(self.path, err.span.line),
                        err.hint,
                    )
                )
        for span in self.guarded.builder._too_deep.values():
            if span.line not in syntax_lines:
                found.append(
                    Diagnostic(
                        "E0608",
                        f"expression nested more than {ex.MAX_DEPTH} levels deep",
                        span,
                        sources.line(self.path, span.line),
                        "split it into simpler conditions (in a webhook table, with `let`)",
                    )
                )
        if self.cut:
            last = found[-1].span if found else Span(self.path, 1, 1)
            found.append(
                Diagnostic(
                    "E0001",
                    f"more than {MAX_ERRORS} syntax errors in this file; the rest are not shown",
                    last,
                    sources.line(self.path, last.line),
                    "fix these and run again",
                )
            )
        return found


def _chain(first: Token, rest: Iterator[Token]) -> Iterator[Token]:
    yield first
    yield from rest


def diagnose(text: str, path: str, sources: Sources) -> list[Diagnostic]:
    """Every syntax error of `text` (and the builder's errors, and E0608), located in
    `path`; empty when the recovering parse finds none."""
    return _Run(text, path).diagnostics(sources)
