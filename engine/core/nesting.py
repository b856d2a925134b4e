"""How deeply JSON nests, measured without recursion: on the raw text before it is
parsed (`text_depth`), on parsed values (`depth`), and a copy of a value cut at a depth
(`prune`). Parsing, validating and serialising all recurse, so a body, an envelope's
payload and an answer are bounded here first (docs/api.md#nesting). Pure."""

from __future__ import annotations

import math
import re
from typing import Any, Final

MAX_BODY_DEPTH: Final = 64  # a request body: batch, envelope, payload and its content
MAX_PAYLOAD_DEPTH: Final = 32  # an envelope's payload object counts as level 1
MAX_ANSWER_DEPTH: Final = 100  # an answer's document, its records' payloads included
PRUNED: Final = "…"  # stands for what `prune` cut

_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"')
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))


def text_depth(body: bytes, limit: int) -> int:
    """How deep the arrays and objects of JSON text nest (0 for a scalar), counting
    only up to `limit + 1`: a result above `limit` means "too deep". Brackets inside
    strings do not count. Text that is not JSON is bounded too: the levels it leaves
    open (a body cut off) count, a close that matches nothing is ignored, and the
    parser then says what is wrong with text that is not too deep."""
    brackets = _STRING.sub(b"", body).translate(_BRACKETS, _NOT_BRACKETS)
    if b"[" * (limit + 1) in brackets:  # the usual attack, found in one C-speed search
        return limit + 1
    passes = 0
    while b"[]" in brackets and passes <= limit:  # each pass peels one level of leaves
        brackets = brackets.replace(b"[]", b"")
        passes += 1
    # Left now: nothing (JSON, all peeled); more than `limit` levels still to peel; or,
    # in text that is not JSON, closes that match nothing, then the opens never closed.
    return min(max(passes, brackets.count(b"[")), limit + 1)


def nests_deeper(body: bytes, limit: int) -> bool:
    """Whether JSON text nests deeper than `limit` (as `text_depth` measures it). Text
    with no more than `limit` brackets cannot, whatever is in its strings: answered
    at C speed, which is the usual case (a 6 KB GitHub delivery has about twenty)."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    return text_depth(body, limit) > limit


def depth(value: Any, limit: int) -> int:
    """How deep lists and dicts nest in `value` (0 for a scalar), counting only up to
    `limit + 1`."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list | tuple):
            level += 1
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level) for child in children)
    return deepest


def prune(value: Any, limit: int) -> Any:
    """A copy of `value` whose lists and dicts deeper than `limit` are replaced by
    PRUNED and whose non-finite floats (which JSON cannot write) by None, keys and
    order kept: what an answer shows of stored data it could not otherwise carry."""
    holder: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(value, holder, 0, 1)]
    while stack:
        item, parent, key, level = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            parent[key] = None
        elif not isinstance(item, dict | list | tuple):
            parent[key] = item
        elif level > limit:
            parent[key] = PRUNED
        elif isinstance(item, dict):
            parent[key] = copy = dict.fromkeys(item)
            stack.extend((child, copy, k, level + 1) for k, child in item.items())
        else:
            parent[key] = seq = [None] * len(item)
            stack.extend((child, seq, i, level + 1) for i, child in enumerate(item))
    return holder[0]
