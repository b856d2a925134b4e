"""Semantic keys (docs/rules.md#semantic-keys-key): the one thing an occurrence of a loop
works on, `repair:r1` or `pr:bj29#42`, written as a template on the loop (`key
"repair:{repo.name}"`). The compiler fills the placeholders of a `for` block's variable;
those over the tick's `payload` are filled when the occurrence is decided.

Whether two loops can claim one key is a question about their templates: each is
literal text and placeholders, a placeholder standing for any non-empty text (a
`payload` value is filled at decide time, so any text may come; an empty one is refused
there, so the two sides agree). `witness` answers it with a string both templates
match, or None when none exists. Pure."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from dsl import expr as ex
from dsl.diagnostics import Span
from engine.core.work import MAX_KEY

# What a placeholder stands for when a witness shows it (any one character would do).
FILLER = "x"


@dataclass(frozen=True, slots=True)
class KeyPattern:
    """A key template as a pattern: literal text, and None for a placeholder (any
    non-empty text). Adjacent texts are joined; a pattern without placeholders is a
    concrete key."""

    parts: tuple[str | None, ...]

    @staticmethod
    def of(parts: tuple[str | None, ...]) -> KeyPattern:
        """The pattern of `parts`, with adjacent texts joined and empty texts dropped."""
        joined: list[str | None] = []
        for part in parts:
            if part == "":
                continue
            if isinstance(part, str) and joined and isinstance(joined[-1], str):
                joined[-1] += part
            else:
                joined.append(part)
        return KeyPattern(tuple(joined))

    @property
    def concrete(self) -> str | None:
        """The key itself when the pattern has no placeholder, else None."""
        if any(part is None for part in self.parts):
            return None
        return "".join(part for part in self.parts if part is not None)

    def matches(self, text: str) -> bool:
        """Whether `text` is a key the pattern can claim."""
        return _regex(self).fullmatch(text) is not None

    def __str__(self) -> str:
        return "".join("{…}" if part is None else part for part in self.parts)


@lru_cache(maxsize=1024)
def _regex(pattern: KeyPattern) -> re.Pattern[str]:
    body = "".join(".+" if part is None else re.escape(part) for part in pattern.parts)
    return re.compile(body, re.DOTALL)


# A pattern as a sequence of steps: a literal character, ANY (one character) or STAR
# (any number of characters, none included). A placeholder is ANY then STAR.
_ANY = 0
_STAR = 1
_Step = str | int


def _steps(pattern: KeyPattern) -> tuple[_Step, ...]:
    out: list[_Step] = []
    for part in pattern.parts:
        if part is None:
            out += [_ANY, _STAR]
        else:
            out += list(part)
    return tuple(out)


def _fixed_ends(pattern: KeyPattern) -> tuple[str, str]:
    """The literal text before the first placeholder and after the last (the whole key
    twice, for a concrete one)."""
    parts = pattern.parts
    if not any(part is None for part in parts):
        text = "".join(p for p in parts if p is not None)
        return text, text
    head = parts[0] if isinstance(parts[0], str) else ""
    tail = parts[-1] if isinstance(parts[-1], str) else ""
    return head, tail


def witness(a: KeyPattern, b: KeyPattern) -> str | None:
    """A shortest key both patterns can claim, or None when they are disjoint (no text
    matches both). Equal concrete keys are their own witness."""
    ka, kb = a.concrete, b.concrete
    if ka is not None and kb is not None:
        return ka if ka == kb else None
    if ka is not None:
        return ka if b.matches(ka) else None
    if kb is not None:
        return kb if a.matches(kb) else None
    (head_a, tail_a), (head_b, tail_b) = _fixed_ends(a), _fixed_ends(b)
    shortest = min(len(head_a), len(head_b))
    if head_a[:shortest] != head_b[:shortest]:
        return None  # they begin differently
    shortest = min(len(tail_a), len(tail_b))
    if shortest and tail_a[-shortest:] != tail_b[-shortest:]:
        return None  # they end differently
    return _search(_steps(a), _steps(b))


def _moves(steps: tuple[_Step, ...], at: int) -> list[tuple[str | None, int]]:
    """The characters the step at `at` consumes (None: any) and where each leads."""
    if at >= len(steps):
        return []
    step = steps[at]
    if step == _STAR:
        return [(None, at)]
    if step == _ANY:
        return [(None, at + 1)]
    assert isinstance(step, str)
    return [(step, at + 1)]


def _search(sa: tuple[_Step, ...], sb: tuple[_Step, ...]) -> str | None:
    """A breadth-first walk of the two patterns side by side (each a small automaton,
    STAR its only loop), by characters consumed: stepping past a STAR consumes none
    (0-1 breadth-first search). The first pair of ends reached spells a shortest
    witness."""
    start = (0, 0)
    dist = {start: 0}
    parent: dict[tuple[int, int], tuple[tuple[int, int], str]] = {}
    queue: deque[tuple[int, int]] = deque([start])
    while queue:
        state = queue.popleft()
        i, j = state
        here = dist[state]
        if i == len(sa) and j == len(sb):
            return _spelled(parent, state)
        edges: list[tuple[tuple[int, int], str, int]] = []
        if i < len(sa) and sa[i] == _STAR:
            edges.append(((i + 1, j), "", 0))
        if j < len(sb) and sb[j] == _STAR:
            edges.append(((i, j + 1), "", 0))
        for char_a, next_a in _moves(sa, i):
            for char_b, next_b in _moves(sb, j):
                if char_a is not None and char_b is not None and char_a != char_b:
                    continue
                char = char_a if char_a is not None else char_b if char_b is not None else FILLER
                edges.append(((next_a, next_b), char, 1))
        for nxt, char, cost in edges:
            if nxt in dist and dist[nxt] <= here + cost:
                continue
            dist[nxt] = here + cost
            parent[nxt] = (state, char)
            if cost:
                queue.append(nxt)
            else:
                queue.appendleft(nxt)
    return None


def _spelled(
    parent: dict[tuple[int, int], tuple[tuple[int, int], str]], end: tuple[int, int]
) -> str:
    chars: list[str] = []
    state = end
    while state in parent:
        state, char = parent[state]
        chars.append(char)
    return "".join(reversed(chars))


# ---- a loop's key ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyTemplate:
    """A loop's compiled `key`: text, and the `payload` placeholders left for the
    decision (`ex.Path`s rooted at `payload`). `origin` is where the key is written."""

    parts: tuple[str | ex.Path, ...]
    origin: Span

    @property
    def pattern(self) -> KeyPattern:
        return KeyPattern.of(tuple(p if isinstance(p, str) else None for p in self.parts))

    def __str__(self) -> str:
        return "".join(p if isinstance(p, str) else "{" + str(p) + "}" for p in self.parts)


class KeyProblem(ex.EvalError):
    """A key that cannot be filled for one tick (a payload value missing, empty, not
    text, or a key too long)."""


def fill(template: KeyTemplate, payload: Mapping[str, Any]) -> str:
    """The key of one occurrence: the template with its `payload` placeholders filled
    from the tick's payload. Raises KeyProblem when a placeholder's value is missing,
    empty or not text or a number, or the key is longer than MAX_KEY characters."""
    out: list[str] = []
    for part in template.parts:
        if isinstance(part, str):
            out.append(part)
            continue
        try:
            text = ex.evaluate(ex.Template((part,), part.span), {"payload": dict(payload)})
        except ex.EvalError as err:
            raise KeyProblem(err.message, err.span) from None
        if text == "":
            raise KeyProblem(f"'{part}' is empty: a key's placeholder needs text", part.span)
        out.append(str(text))
    key = "".join(out)
    if len(key) > MAX_KEY:
        raise KeyProblem(f"the key is {len(key)} characters; at most {MAX_KEY}", template.origin)
    return key
