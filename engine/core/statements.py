"""The lines of one rule statement (pure): where a decision's rule (`file:line:col`,
the span the compiler kept) begins and ends in its file's text, so a person deciding a
proposal reads the whole rule, not a fixed window around one line.

The rules language is one fact per line with indented blocks (dsl/rules.lark): a
statement is its head line, the comment lines right above it at its indentation (what
the rule file says about it), every following line indented deeper (blank and comment
lines inside the block included, trailing ones not), and the lines an open bracket or a
trailing backslash carries on. The same reading fits the YAML mapping an overlay loop
is declared by."""

from __future__ import annotations

from collections.abc import Sequence

from dsl.diagnostics import Span

# The most lines shown of one statement.
MAX_LINES = 80
TAB = 8  # the indenter's tab width (dsl/parser.py)


def location(text: str) -> Span | None:
    """`file:line:col` (the file may hold ':') as a Span; None when it is not one."""
    file, _, rest = text.rpartition(":")
    file, _, line = file.rpartition(":")
    if not file or not line.isdigit() or not rest.isdigit() or int(line) < 1:
        return None
    return Span(file, int(line), max(int(rest), 1))


def statement(lines: Sequence[str], line: int) -> range:
    """The 1-based line numbers of the statement whose head is `line` (empty when the
    text has no such line)."""
    if not 1 <= line <= len(lines):
        return range(0)
    head = _indent(lines[line - 1])
    first = line
    while first > 1 and _is_comment(lines[first - 2]) and _indent(lines[first - 2]) == head:
        first -= 1
    last = line
    depth, carried = _scan(lines[line - 1], 0)
    for number in range(line + 1, len(lines) + 1):
        text = lines[number - 1]
        if depth > 0 or carried:
            last = number
        elif not text.strip() or _is_comment(text):
            continue
        elif _indent(text) > head:
            last = number
        else:
            break
        depth, carried = _scan(text, depth)
    return range(first, min(last, first + MAX_LINES - 1) + 1)


def _indent(text: str) -> int:
    expanded = text.expandtabs(TAB)
    return len(expanded) - len(expanded.lstrip(" "))


def _is_comment(text: str) -> bool:
    return text.lstrip().startswith("#")


def _scan(text: str, depth: int) -> tuple[int, bool]:
    """The bracket depth after `text` (strings and comments left out) and whether it
    ends with a backslash that carries the statement onto the next line."""
    quoted = escaped = False
    code = []
    for char in text:
        if quoted:
            quoted = not (char == '"' and not escaped)
            escaped = char == "\\" and not escaped
            continue
        if char == "#":
            break
        quoted = char == '"'
        code.append(char)
        depth += (char in "([{") - (char in ")]}")
    return max(depth, 0), "".join(code).rstrip().endswith("\\")
