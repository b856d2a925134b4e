"""Filtered, cursor-paged reads of the runs, proposals, events, the journal and the
notifications, newest first: the filters (`RunQuery`, `ProposalQuery`, `EventQuery`,
`JournalQuery`, `NotificationQuery`), one page
of results (`Page`) and the cursor text that asks for the next, older, page. A cursor is
opaque to its caller: it is what `next` gave, passed back as it was (it is URL-safe, for
`?before=`); anything else is a `BadRequest` whose reason is `bad_cursor`."""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Generic, TypeVar

from engine.errors import BadRequest

T = TypeVar("T")

# The longest cursor text read. A run cursor holds an instant and a run id (tens of
# characters each); this bound holds two fields of 128 characters of any kind (UTF-8,
# at most 4 bytes each, then base64).
MAX_CURSOR = 2048
_SEQ = re.compile(r"[1-9][0-9]{0,18}")
_MAX_SEQ = 2**63 - 1  # a BIGINT


@dataclass(frozen=True, slots=True)
class RunQuery:
    """Which runs a page holds; every filter given must hold (None: any). Times are
    compared as the store keeps them (ISO text)."""

    loop: str | None = None
    state: str | None = None
    actor: str | None = None  # the run's approved_by, exact ("operator:alice", "auto")
    since: str | None = None  # created_at >= since
    until: str | None = None  # created_at < until
    before: tuple[str, str] | None = None  # strictly older than (created_at, run_id)


@dataclass(frozen=True, slots=True)
class ProposalQuery:
    """Which proposals a page holds; every filter given must hold (None: any)."""

    loop: str | None = None
    state: str | None = None
    before: tuple[str, str] | None = None  # strictly older than (created_at, proposal_id)


@dataclass(frozen=True, slots=True)
class EventQuery:
    """Which admitted events a page holds; every filter given must hold (None: any)."""

    loop: str | None = None
    type: str | None = None
    before: tuple[str, str] | None = None  # strictly older than (admitted_at, event_id)


@dataclass(frozen=True, slots=True)
class JournalQuery:
    """Which journal entries a page holds; every filter given must hold (None: any).
    An entry is about loop L when its entity is the loop L itself, or an event, an
    occurrence, a proposal, a run or a finding of L (as that entity was stored when
    the entry was written)."""

    loop: str | None = None
    entity: str | None = None  # "event" | "occurrence" | "proposal" | "run" | "loop" | "finding"
    actor: str | None = None  # exact
    since: str | None = None  # at >= since
    until: str | None = None  # at < until
    before: int | None = None  # seq strictly lower


@dataclass(frozen=True, slots=True)
class NotificationQuery:
    """Which notifications a page holds; every filter given must hold (None: any). Its
    cursor is the journal's kind (a seq)."""

    loop: str | None = None
    delivery: str | None = None  # "pending" | "delivered" | "failed"
    before: int | None = None  # seq strictly lower


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page, newest first; `next` is the cursor of the next (older) page, None when
    there is none."""

    items: list[T]
    next: str | None


def run_cursor_text(created_at: str, run_id: str) -> str:
    """The cursor of the runs older than (created_at, run_id); the proposals' and the
    events' cursors are the same kind of text, of (created_at, proposal_id) and
    (admitted_at, event_id)."""
    raw = json.dumps([created_at, run_id], separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def run_cursor(text: str) -> tuple[str, str]:
    """The (created_at, run_id) a run cursor (`run_cursor_text`) stands for."""
    if len(text) > MAX_CURSOR or not re.fullmatch(r"[A-Za-z0-9_-]+", text):
        raise _bad()
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        found = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError):
        raise _bad() from None
    if not (isinstance(found, list) and len(found) == 2 and all(isinstance(v, str) for v in found)):
        raise _bad()
    if run_cursor_text(found[0], found[1]) != text:  # one text per cursor
        raise _bad()
    return found[0], found[1]


def journal_cursor_text(seq: int) -> str:
    """The cursor of the journal entries before `seq`."""
    return str(seq)


def journal_cursor(text: str) -> int:
    """The seq a journal cursor (`journal_cursor_text`) stands for."""
    if not _SEQ.fullmatch(text) or int(text) > _MAX_SEQ:
        raise _bad()
    return int(text)


def _bad() -> BadRequest:
    return BadRequest(
        "not a cursor this listing gave: pass back the `next` of a page as it was",
        reason="bad_cursor",
    )


def page_limit(limit: int) -> int:
    """A page's size as asked: at least 1 (BadRequest, reason `bad_limit`, else)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise BadRequest(f"a page holds at least one row, not {limit!r}", reason="bad_limit")
    return limit
