"""`engine fmt`: the canonical layout of a rule file, and the rewrite of its old spellings
(docs/rules.md#formatting).

Pure text in, text out. The formatter reads a file as logical lines with a small
tokenizer of its own (words, strings, comments, brackets and `\\` continuations), not
with the parser, so it keeps comments, which the parser discards, and needs nothing of
the language beyond its lexing: a file that does not lex, whose brackets do not balance
or whose indentation matches no enclosing block is refused with RulesError (nothing is
half formatted). Formatting is idempotent: format(format(x)) == format(x).

The rewrites (`rewrite=True`) turn every old spelling into its new form with the tables
of dsl.spelling, in the places the language has them only: a loop's setting lines, a
`budget` line's keys, `human-only` declarations, `emit` lines."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from dsl import spelling
from dsl.diagnostics import Collector, RulesError, Span

WIDTH = 100  # the widest line the layout joins or keeps a bracket on one line within
INDENT = "  "  # one block level
CONTINUATION = 2  # levels a line continued with `\` is indented by, past its start

_WORD = re.compile(r"[A-Za-z0-9_.@:/+\-]+")
_STRING = re.compile(r'"([^"\\\n]|\\.)*"')
_OPERATOR = re.compile(r"==|!=|<=|>=|<|>|=")
_CONTINUED = re.compile(r"\\[\t ]*$")
_OPEN = {"{": "}", "[": "]", "(": ")"}
_CLOSE = {v: k for k, v in _OPEN.items()}
_COMPARE = {"==", "!=", "<=", ">=", "<", ">"}


# ---- tokens ------------------------------------------------------------------------------


@dataclass(slots=True)
class Tok:
    kind: str  # "word" | "string" | "op" | "comma" | "colon" | "open" | "close" | "comment"
    text: str
    line: int
    column: int
    space: bool = False  # whitespace, a line break or a continuation came before it
    own_line: bool = False  # a comment that is the first thing on its physical line
    continued: bool = False  # a `\` continuation came before it (outside brackets)


@dataclass(slots=True)
class Group:
    """A bracketed part of a line: `{...}`, `[...]` or `(...)`."""

    open: Tok
    close: Tok
    items: list[Node]

    @property
    def multiline(self) -> bool:
        return self.open.line != self.close.line


Node = Tok | Group


@dataclass(slots=True)
class Line:
    """One logical line: a code line (its nodes, its trailing comment), a comment line,
    or a blank line."""

    kind: str  # "code" | "comment" | "blank"
    number: int  # its first physical line
    width: int = 0  # the columns of its indentation, tabs at 8
    nodes: list[Node] = field(default_factory=list)
    comment: str | None = None  # a code line's trailing comment, or a comment line's text
    leading: list[str] = field(default_factory=list)  # comments moved to just above it
    level: int = 0
    parent: Line | None = None

    def words(self) -> list[str]:
        """The texts of its top-level tokens (a group is "{", "[" or "(")."""
        return [n.text if isinstance(n, Tok) else n.open.text for n in self.nodes]


@dataclass(frozen=True, slots=True)
class Note:
    """Something the formatter says about a file: what a rewrite changed in meaning, or
    an old spelling it cannot rewrite (`blocking`: then `--check` and `--write` fail)."""

    line: int
    message: str
    blocking: bool = False

    def render(self, file: str) -> str:
        return f"{file}:{self.line}: {self.message}"


@dataclass(frozen=True, slots=True)
class Formatted:
    text: str
    notes: tuple[Note, ...] = ()


class _Refused(Exception):
    def __init__(self, code: str, message: str, line: int, column: int, hint: str | None) -> None:
        super().__init__(message)
        self.code, self.message, self.line, self.column, self.hint = (
            code,
            message,
            line,
            column,
            hint,
        )


def _lex(text: str) -> list[Line]:
    """Logical lines, with every bracket matched and every character known."""
    physical = text.split("\n")
    lines: list[Line] = []
    current: Line | None = None  # the code line being read (across brackets, `\`)
    stack: list[Tok] = []
    continued = False
    for number, raw in enumerate(physical, start=1):
        at = 0
        first = True
        if current is not None and continued and not stack:
            rest = raw.strip(" \t")
            if not rest or rest.startswith("#"):  # a `\` before a blank or comment line
                lines.append(current)
                current, continued = None, False
        if current is None:
            stripped = raw.lstrip(" \t")
            at = len(raw) - len(stripped)
            if not stripped:
                lines.append(Line("blank", number))
                continue
            if stripped.startswith("#"):
                lines.append(Line("comment", number, comment=stripped.rstrip()))
                continue
            width = raw[:at].count(" ") + raw[:at].count("\t") * 8  # as the parser counts
            current = Line("code", number, width)
        space = True
        while at < len(raw):
            char = raw[at]
            if char in " \t":
                at += 1
                space = True
                continue
            column = at + 1
            if char == "#":
                comment = raw[at:].rstrip()
                if stack:
                    current.nodes.append(Tok("comment", comment, number, column, True, first))
                else:
                    current.comment = comment
                at = len(raw)
                break
            if char == "\\":
                if _CONTINUED.match(raw, at) and not stack:
                    continued = True
                    at = len(raw)
                    break
                if _CONTINUED.match(raw, at):  # inside brackets a line break is enough
                    at = len(raw)
                    break
                raise _Refused(
                    "E0001",
                    "unexpected character '\\'",
                    number,
                    column,
                    "a `\\` continues a line only at its end",
                )
            token: Tok
            if char == '"':
                found = _STRING.match(raw, at)
                if found is None:
                    raise _Refused(
                        "E0001",
                        "unterminated string",
                        number,
                        column,
                        'close it with `"` on the same line',
                    )
                token = Tok("string", found.group(), number, column)
            elif char in _OPEN:
                token = Tok("open", char, number, column)
                stack.append(token)
            elif char in _CLOSE:
                if not stack or stack[-1].text != _CLOSE[char]:
                    expected = f"'{_OPEN[stack[-1].text]}'" if stack else "nothing open"
                    raise _Refused(
                        "E0001",
                        f"unbalanced '{char}'",
                        number,
                        column,
                        f"expected {expected}"
                        + (f" (opened at line {stack[-1].line})" if stack else ""),
                    )
                stack.pop()
                token = Tok("close", char, number, column)
            elif char == ",":
                token = Tok("comma", char, number, column)
            elif char == ":" and stack and stack[-1].text == "{":
                token = Tok("colon", char, number, column)
            elif (op := _OPERATOR.match(raw, at)) is not None:
                token = Tok("op", op.group(), number, column)
            elif (word := _WORD.match(raw, at)) is not None:
                text_ = word.group()
                if stack and stack[-1].text == "{" and ":" in text_:
                    text_ = text_.split(":", 1)[0]
                token = Tok("word", text_, number, column)
            else:
                raise _Refused(
                    "E0001",
                    f"unexpected character {char!r}",
                    number,
                    column,
                    'rule files hold words, "strings", brackets and # comments',
                )
            token.space = space
            token.continued = continued
            continued = False
            space = False
            first = False
            current.nodes.append(token)
            at += len(token.text)
            if token.kind == "word" and token.text == "loop" and len(current.nodes) == 1:
                at = _loop_name(raw, at, number, current)
        if not stack and not continued:
            lines.append(current)
            current = None
    if current is not None:
        if stack:
            opened = stack[-1]
            raise _Refused(
                "E0001",
                f"'{opened.text}' is never closed",
                opened.line,
                opened.column,
                f"close it with '{_OPEN[opened.text]}'",
            )
        lines.append(current)  # a `\` at the end of the file
    return lines


def _loop_name(raw: str, at: int, number: int, line: Line) -> int:
    """A loop's name is the run of characters after `loop` (it may hold `{...}`)."""
    rest = raw[at:]
    stripped = rest.lstrip(" \t")
    start = at + len(rest) - len(stripped)
    found = re.match(r"[A-Za-z0-9_][A-Za-z0-9_.{}-]*", stripped)
    if found is None or start == at:
        return at
    line.nodes.append(Tok("word", found.group(), number, start + 1, True))
    return start + len(found.group())


def _tree(tokens: list[Node]) -> list[Node]:
    """Nest the tokens of a line into groups (brackets balance: _lex checked)."""
    root: list[Node] = []
    stack: list[tuple[Tok, list[Node]]] = []
    for node in tokens:
        assert isinstance(node, Tok)
        if node.kind == "open":
            stack.append((node, []))
        elif node.kind == "close":
            opened, items = stack.pop()
            group = Group(opened, node, items)
            (stack[-1][1] if stack else root).append(group)
        else:
            (stack[-1][1] if stack else root).append(node)
    return root


def _levels(lines: list[Line]) -> None:
    """Each code line's block level and parent, as the parser's indenter sees them."""
    widths: list[int] = [0]
    parents: list[Line | None] = [None]
    previous: Line | None = None
    for line in lines:
        if line.kind != "code":
            continue
        if previous is None:  # the parser reads a first line's indentation as none
            line.level, line.parent, previous = 0, None, line
            continue
        if line.width > widths[-1]:
            widths.append(line.width)
            parents.append(previous)
        while line.width < widths[-1]:
            widths.pop()
            parents.pop()
        if line.width != widths[-1]:
            raise _Refused(
                "E0002",
                "inconsistent indentation: this line does not line up with an enclosing block",
                line.number,
                1,
                "indent every line of a block by the same amount",
            )
        line.level = len(widths) - 1
        line.parent = parents[-1]
        previous = line


# ---- rendering -----------------------------------------------------------------------------


def _gap(prev: Node | None, node: Node, assign_spaced: bool) -> str:
    if prev is None:
        return ""
    tok = node.open if isinstance(node, Group) else node
    before = prev.close if isinstance(prev, Group) else prev
    if tok.kind in ("comma", "colon"):
        return ""
    if before.kind in ("comma", "colon"):
        return " "
    if before.kind == "open" and before.text in "[(":
        return ""
    if tok.kind == "close" and tok.text in "])":
        return ""
    if tok.kind == "op" or before.kind == "op":
        if (tok.text == "=" or before.text == "=") and not assign_spaced:
            return ""
        return " "
    return " " if tok.space else ""


def _significant(items: list[Node]) -> list[Node]:
    return [n for n in items if not (isinstance(n, Tok) and n.kind == "comment")]


def _flat(nodes: list[Node], assign_spaced: bool) -> str:
    out: list[str] = []
    prev: Node | None = None
    for node in _significant(nodes):
        out.append(_gap(prev, node, assign_spaced))
        out.append(_flat_group(node, assign_spaced) if isinstance(node, Group) else node.text)
        prev = node
    return "".join(out)


def _flat_group(group: Group, assign_spaced: bool) -> str:
    items = _significant(group.items)
    last = items[-1] if items else None
    if group.open.text != "(" and isinstance(last, Tok) and last.kind == "comma":
        items = items[:-1]  # a trailing comma, on one line
    inner = _flat(items, assign_spaced)
    if group.open.text == "{":
        return "{ " + inner + " }" if inner else "{}"
    return group.open.text + inner + group.close.text


def _comments_in(nodes: list[Node]) -> list[str]:
    found: list[str] = []
    for node in nodes:
        if isinstance(node, Group):
            found += _comments_in(node.items)
        elif node.kind == "comment":
            found.append(node.text)
    return found


@dataclass
class _Element:
    nodes: list[Node] = field(default_factory=list)
    leading: list[str] = field(default_factory=list)
    trailing: list[str] = field(default_factory=list)


def _elements(group: Group) -> tuple[list[str], list[_Element], list[str]]:
    """A broken group's comment after its opening bracket, its elements (split at
    commas, each with its comments), and the comments before its closing bracket."""
    opening: list[str] = []
    elements: list[_Element] = []
    current = _Element()
    for node in group.items:
        if isinstance(node, Tok) and node.kind == "comment":
            if node.own_line:
                current.leading.append(node.text)
            elif current.nodes:
                current.trailing.append(node.text)
            elif elements:  # after a comma: the comment of the element before it
                elements[-1].trailing.append(node.text)
            else:
                opening.append(node.text)
            continue
        if isinstance(node, Tok) and node.kind == "comma":
            elements.append(current)
            current = _Element()
            continue
        if current.trailing:  # a comment in the middle of an element goes above it
            current.leading += current.trailing
            current.trailing = []
        current.nodes.append(node)
    closing: list[str] = []
    if current.nodes:
        elements.append(current)
    else:
        closing = current.leading + current.trailing
    for element in elements:  # comments inside a `(...)` of an element go above it
        for node in element.nodes:
            if isinstance(node, Group) and node.open.text == "(":
                element.leading += _comments_in(node.items)
        if len(element.trailing) > 1:
            element.leading += element.trailing[1:]
            element.trailing = element.trailing[:1]
    if len(opening) > 1:
        closing = opening[1:] + closing
        opening = opening[:1]
    return opening, elements, closing


class _Out:
    def __init__(self, indent: int, assign_spaced: bool) -> None:
        self.lines: list[str] = []
        self.cur = INDENT * indent
        self.assign_spaced = assign_spaced

    def newline(self, indent: int) -> None:
        self.lines.append(self.cur.rstrip())
        self.cur = INDENT * indent

    def emit_nodes(self, nodes: list[Node], indent: int, joined: bool) -> None:
        prev: Node | None = None
        items = _significant(nodes)
        for index, node in enumerate(items):
            tok = node.open if isinstance(node, Group) else node
            if tok.continued and not joined:
                self.cur += " \\"
                self.newline(indent + CONTINUATION)
            else:
                self.cur += _gap(prev, node, self.assign_spaced)
            if isinstance(node, Group):
                self.emit_group(node, items[index + 1 :], indent, joined)
            else:
                self.cur += node.text
            prev = node

    def emit_group(self, group: Group, rest: list[Node], indent: int, joined: bool) -> None:
        if group.open.text == "(" or not group.multiline:
            flat = _flat_group(group, self.assign_spaced)
            tail: list[Node] = []
            for node in rest:
                if isinstance(node, Group) and node.multiline and node.open.text != "(":
                    break
                if isinstance(node, Tok) and node.continued and not joined:
                    break
                tail.append(node)
            after = _flat(tail, self.assign_spaced)
            gap = _gap(group, tail[0], self.assign_spaced) if tail else ""
            if group.open.text == "(" or len(self.cur + flat + gap + after) <= WIDTH:
                self.cur += flat
                return
        opening, elements, closing = _elements(group)
        self.cur += group.open.text
        if opening:
            self.cur += "  " + opening[0]
        for element in elements:
            for comment in element.leading:
                self.newline(indent + 1)
                self.cur += comment
            self.newline(indent + 1)
            self.emit_nodes(element.nodes, indent + 1, True)
            self.cur += ","
            if element.trailing:
                self.cur += "  " + element.trailing[0]
        for comment in closing:
            self.newline(indent + 1)
            self.cur += comment
        self.newline(indent)
        self.cur += group.close.text


def _render_code(line: Line) -> list[str]:
    assign_spaced = (
        bool(line.nodes) and isinstance(line.nodes[0], Tok) and (line.nodes[0].text == "let")
    )

    def attempt(joined: bool) -> list[str]:
        out = _Out(line.level, assign_spaced)
        out.emit_nodes(line.nodes, line.level, joined)
        if line.comment:
            out.cur += "  " + line.comment
        out.lines.append(out.cur.rstrip())
        return out.lines

    for node in line.nodes:
        if isinstance(node, Group) and node.open.text == "(":
            line.leading += _comments_in(node.items)
    rendered = attempt(True)
    continued = any(isinstance(n, Tok | Group) and _tok(n).continued for n in line.nodes)
    if continued and max(len(_code_part(r)) for r in rendered) > WIDTH:
        rendered = attempt(False)
    leading = [INDENT * line.level + c for c in line.leading]
    return leading + rendered


def _tok(node: Node) -> Tok:
    return node.open if isinstance(node, Group) else node


def _code_part(text: str) -> str:
    """A rendered line without its trailing comment (an approximation for widths)."""
    at = text.find("  #")
    return text if at < 0 or text.count('"', 0, at) % 2 else text[:at]


# ---- rewrites ------------------------------------------------------------------------------


def _key(line: Line) -> str | None:
    first = line.nodes[0] if line.nodes else None
    return first.text if isinstance(first, Tok) and first.kind == "word" else None


def _is_loop(line: Line | None) -> bool:
    return line is not None and _key(line) == "loop"


def _word(text: str, like: Tok) -> Tok:
    return Tok("word", text, like.line, like.column, True)


def _rewrite(lines: list[Line], notes: list[Note]) -> list[Line]:
    """Every old spelling in its new form; the lines that go are left out."""
    removed: set[int] = set()
    added: dict[int, Line] = {}  # a new line, by the id of the line it goes before
    loops: dict[int, list[Line]] = {}
    for line in lines:
        if line.kind != "code" or not line.nodes:
            continue
        key = _key(line)
        if key == "emit":
            _emit_guard_first(line)
        if line.level == 0 and key == "human-only":
            _human_only(line, notes)
        elif _is_loop(line.parent) and line.parent is not None:
            loops.setdefault(id(line.parent), []).append(line)
    for settings in loops.values():
        for line in settings:
            _loop_setting(line)
        _overlap(settings, notes, removed, added)
    result: list[Line] = []
    for line in lines:
        if id(line) in added:
            result.append(added[id(line)])
        if id(line) not in removed:
            result.append(line)
    return result


def _emit_guard_first(line: Line) -> None:
    """`emit ... { payload } if COND` -> `emit ... if COND { payload }`."""
    nodes = line.nodes
    for index in range(2, len(nodes) - 1):
        group, guard = nodes[index], nodes[index + 1]
        if not (isinstance(group, Group) and group.open.text == "{"):
            continue
        if not (isinstance(guard, Tok) and guard.kind == "word" and guard.text in ("if", "unless")):
            continue
        before = nodes[index - 1]
        if isinstance(before, Tok) and before.text in ("subject", "id"):
            continue  # the object is an option's value, not the payload
        guard.space = group.open.space = True
        if guard.continued or group.open.continued:
            guard.continued, group.open.continued = group.open.continued, guard.continued
        line.nodes = [*nodes[:index], *nodes[index + 1 :], group]
        return


def _human_only(line: Line, notes: list[Note]) -> None:
    words = line.nodes[1:]
    if not all(isinstance(w, Tok) and w.kind == "word" for w in words) or not words:
        return
    texts = [_tok(w).text for w in words]
    if len(texts) == 2 and texts[0] == "definition":
        if "@" not in texts[1]:
            notes.append(
                Note(
                    line.number,
                    f"cannot rewrite: human_only {texts[1]} would name an event type "
                    "(a definition is NAME@VERSION)",
                    True,
                )
            )
            return
        line.nodes = [_word("human_only", _tok(line.nodes[0])), words[1]]
    elif len(texts) == 1:
        if "@" in texts[0]:
            notes.append(
                Note(
                    line.number,
                    f"cannot rewrite: human_only {texts[0]} would name a definition "
                    "(an event type has no '@')",
                    True,
                )
            )
            return
        line.nodes = [_word("human_only", _tok(line.nodes[0])), words[0]]


def _loop_setting(line: Line) -> None:
    """A loop's setting line: renamed keys and budget keys, `KEY true|false`."""
    first = line.nodes[0]
    assert isinstance(first, Tok)
    key = first.text
    args = line.nodes[1:]
    if key in spelling.RENAMED_KEYS and key != "human-only":
        first.text = spelling.RENAMED_KEYS[key]
    elif key in spelling.OLD_FLAGS and not args:
        new_key, value = spelling.OLD_FLAGS[key]
        first.text = new_key
        line.nodes.append(_word(value, first))
    elif key == "shadow" and len(args) == 1 and isinstance(args[0], Tok):
        args[0].text = spelling.OLD_SHADOW.get(args[0].text, args[0].text)
    elif key == "budget":
        for position, arg in enumerate(args):
            if position % 2 == 0 and isinstance(arg, Tok):
                arg.text = spelling.RENAMED_BUDGET_KEYS.get(arg.text, arg.text)


def _overlap(
    settings: list[Line], notes: list[Note], gone: set[int], added: dict[int, Line]
) -> None:
    """The one `overlap` line for a loop's old `singleton`/`overlapping`, `on-active X`
    and `budget active-occurrences N`, placed before the first of them (in `added`);
    the ids of the lines that go, in `gone`."""
    old: list[Line] = []
    pairs: list[tuple[Line, int]] = []  # a budget line and where its pair starts
    overlap_lines: list[Line] = []
    for line in settings:
        key = _key(line)
        if key in spelling.OLD_OVERLAP_KEYS:
            old.append(line)
        elif key == "overlap":
            overlap_lines.append(line)
        elif key == "budget":
            texts = [_tok(n).text for n in line.nodes[1:]]
            for position in range(0, len(texts), 2):
                if texts[position] == "active-occurrences":
                    pairs.append((line, position + 1))
    if not old and not pairs:
        return
    first = min([*old, *(line for line, _ in pairs)], key=lambda line: line.number)
    described = _describe_old(old, pairs)

    def refuse(why: str) -> None:
        notes.append(Note(first.number, f"cannot rewrite: {why}", True))

    if overlap_lines:
        refuse(f"{described} beside an overlap line (write one of them)")
        return
    singleton: bool | None = None
    on_active = "return"
    active: int | None = None
    seen: set[str] = set()
    for line in old:
        key = _key(line) or ""
        group = "on-active" if key == "on-active" else "overlap"
        if group in seen:
            refuse(f"{described}: the setting is given twice")
            return
        seen.add(group)
        args = [_tok(n).text for n in line.nodes[1:]]
        if key == "on-active":
            if len(args) != 1 or args[0] not in ("return", "coalesce", "skip"):
                refuse(f"{described}: on-active takes return|coalesce|skip")
                return
            on_active = args[0]
        elif args:
            refuse(f"{described}: {key} takes no arguments")
            return
        else:
            singleton = key == "singleton"
    for line, at in pairs:
        value = [_tok(n).text for n in line.nodes[1:]][at : at + 1]
        if active is not None or not value or not value[0].isdigit() or int(value[0]) < 1:
            refuse(f"{described}: active-occurrences takes one whole number of at least 1")
            return
        active = int(value[0])
    rewrite = spelling.overlap_of(True if singleton is None else singleton, on_active, active)
    if rewrite is None:
        refuse(f"no single overlap value means {described}")
        return
    if rewrite.note:
        notes.append(
            Note(first.number, f"note: {described} is now `{rewrite.line}`: {rewrite.note}")
        )
    head = _tok(first.nodes[0])
    new = Line("code", first.number, first.width, level=first.level, parent=first.parent)
    new.nodes = [Tok("word", w, head.line, head.column, True) for w in rewrite.line.split()]
    comments: list[str] = []
    for line in old:
        gone.add(id(line))
        comments += line.leading
        if line.comment:
            comments.append(line.comment)
    for line, at in pairs:
        line.nodes = line.nodes[:at] + line.nodes[at + 2 :]  # key at `at`, value after
        if len(line.nodes) == 1:
            gone.add(id(line))
            comments += line.leading
            if line.comment:
                comments.append(line.comment)
    if comments:
        new.comment = comments[-1]
        new.leading = comments[:-1]
    added[id(first)] = new


def _describe_old(old: list[Line], pairs: list[tuple[Line, int]]) -> str:
    parts = [" ".join(_tok(n).text for n in line.nodes) for line in old]
    for line, at in pairs:
        value = [_tok(n).text for n in line.nodes[1:]][at : at + 1]
        parts.append("budget active-occurrences " + (value[0] if value else ""))
    return " + ".join(parts)


# ---- the file ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Row:
    text: str
    level: int
    kind: str  # "blank" | "comment" | "code" | "more" (a code line's further lines)
    block: bool = False  # the first line of a top-level block


def _blank_lines(rows: list[_Row]) -> list[str]:
    """The blank-line rules: at most one blank line anywhere and none at the start or
    the end; one before a top-level line (code or comment) that follows a deeper one,
    and one before a top-level block (with the comments right above it) that follows a
    one-line declaration."""
    result: list[_Row] = []
    for index, row in enumerate(rows):
        if row.kind == "blank":
            if result and result[-1].kind != "blank":
                result.append(row)
            continue
        last = result[-1] if result else None
        if last is not None and last.kind != "blank" and row.kind != "more" and row.level == 0:
            need = last.level > 0
            if not need and last.kind in ("code", "more"):
                ahead = index
                while ahead < len(rows) and rows[ahead].kind == "comment":
                    ahead += 1
                need = ahead < len(rows) and rows[ahead].block
            if need:
                result.append(_Row("", 0, "blank"))
        result.append(row)
    while result and result[-1].kind == "blank":
        result.pop()
    return [row.text for row in result]


def _layout(lines: list[Line]) -> str:
    rows: list[_Row] = []
    code = [line for line in lines if line.kind == "code"]
    opens = {id(a) for a, b in itertools.pairwise(code) if b.level > a.level}
    for index, line in enumerate(lines):
        if line.kind == "blank":
            rows.append(_Row("", 0, "blank"))
        elif line.kind == "comment":
            following = next((x for x in lines[index + 1 :] if x.kind == "code"), None)
            level = following.level if following is not None else 0
            rows.append(_Row(INDENT * level + (line.comment or ""), level, "comment"))
        else:
            rendered = _render_code(line)
            count = len(line.leading)
            rows += [_Row(text, line.level, "comment") for text in rendered[:count]]
            block = id(line) in opens and line.level == 0
            rows.append(_Row(rendered[count], line.level, "code", block))
            rows += [_Row(text, line.level, "more") for text in rendered[count + 1 :]]
    body = _blank_lines(rows)
    return "\n".join(body) + "\n" if body else ""


def format_text(text: str, path: str = "<rules>", rewrite: bool = True) -> Formatted:
    """The canonical layout of one rule file (and, with `rewrite`, every old spelling in
    its new form). Raises RulesError (E0001, E0002) when the text does not lex, its
    brackets do not balance or its indentation matches no block."""
    text = text.replace("\r\n", "\n")
    try:
        lines = _lex(text)
        for line in lines:
            if line.kind == "code":
                line.nodes = _tree(line.nodes)
        _levels(lines)
    except _Refused as err:
        collector = Collector()
        collector.sources.add(path, text)
        collector.error(err.code, err.message, Span(path, err.line, err.column), err.hint)
        raise RulesError(collector.items) from None
    notes: list[Note] = []
    if rewrite:
        lines = _rewrite(lines, notes)
    return Formatted(_layout(lines), tuple(sorted(notes, key=lambda n: n.line)))


__all__ = ["WIDTH", "Formatted", "Note", "format_text"]
