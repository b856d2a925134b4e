"""The cursors of paged listings (engine.core.paging): what a page's `next` gives reads
back as the position it stands for, is safe in a URL as it is, and anything else is a
BadRequest whose reason is `bad_cursor`."""

from __future__ import annotations

import re
import urllib.parse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core.paging import (
    journal_cursor,
    journal_cursor_text,
    page_limit,
    run_cursor,
    run_cursor_text,
)
from engine.errors import BadRequest

URL_SAFE = re.compile(r"[A-Za-z0-9_-]+")


@given(st.text(max_size=128), st.text(max_size=128))
def test_a_run_cursor_reads_back_as_its_position(created_at: str, run_id: str) -> None:
    """Any (created_at, run_id) makes a URL-safe cursor that reads back as itself."""
    text = run_cursor_text(created_at, run_id)
    assert URL_SAFE.fullmatch(text) and urllib.parse.quote(text) == text
    assert run_cursor(text) == (created_at, run_id)


@given(st.integers(1, 2**63 - 1))
def test_a_journal_cursor_reads_back_as_its_seq(seq: int) -> None:
    """Any seq of the journal makes a URL-safe cursor that reads back as itself."""
    text = journal_cursor_text(seq)
    assert URL_SAFE.fullmatch(text) and journal_cursor(text) == seq


BAD_RUN = ["", "!!", "a b", "x" * 1100, "bm90IGpzb24", "WzFd", "WyJhIiwxXQ", "12", "WyJhIiwiYiJd="]


@pytest.mark.parametrize("text", BAD_RUN)
def test_a_run_cursor_the_listing_did_not_give_is_refused(text: str) -> None:
    """Text that is not base64 of two strings (or not written as `next` writes it,
    padding and all) is a BadRequest with reason bad_cursor."""
    with pytest.raises(BadRequest) as refused:
        run_cursor(text)
    assert refused.value.details == {"reason": "bad_cursor"} and refused.value.status == 400


@pytest.mark.parametrize(
    "text", ["", "0", "-1", "01", "1.5", "abc", "9" * 19, str(2**63), " 1", "1\n"]
)
def test_a_journal_cursor_the_listing_did_not_give_is_refused(text: str) -> None:
    """Anything but a positive seq written plainly is a BadRequest (bad_cursor)."""
    with pytest.raises(BadRequest) as refused:
        journal_cursor(text)
    assert refused.value.details == {"reason": "bad_cursor"}


@given(st.text(max_size=80))
def test_no_text_breaks_the_cursor_readers(text: str) -> None:
    """Whatever text arrives, a cursor reader answers a position or a BadRequest."""
    for read in (run_cursor, journal_cursor):
        try:
            read(text)
        except BadRequest as err:
            assert err.details == {"reason": "bad_cursor"}


@pytest.mark.parametrize("limit", [0, -1, True])
def test_a_page_holds_at_least_one_row(limit: int) -> None:
    """A page size under one is a BadRequest (bad_limit), never a database's error."""
    with pytest.raises(BadRequest) as refused:
        page_limit(limit)
    assert refused.value.details == {"reason": "bad_limit"}
