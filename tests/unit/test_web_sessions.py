"""The web pages' sessions and the small pure helpers of the pages (docs/web.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.web.pages import _safe_next
from engine.web.render import relative
from engine.web.sessions import Sessions


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_is_found_by_its_id_until_it_expires() -> None:
    """A session opened for an operator is found by its id, and is gone after its ttl."""
    clock = Clock()
    sessions = Sessions(ttl=60, clock=clock)
    session_id, opened = sessions.open("alice")
    assert sessions.get(session_id) is opened and opened.operator == "alice"
    clock.now += 59
    assert sessions.get(session_id) is opened
    clock.now += 1
    assert sessions.get(session_id) is None


def test_signing_out_ends_only_that_session() -> None:
    """Closing one session leaves the operator's other sessions open."""
    sessions = Sessions()
    first, _ = sessions.open("alice")
    second, _ = sessions.open("alice")
    sessions.close(first)
    assert sessions.get(first) is None and sessions.get(second) is not None


def test_unknown_or_missing_ids_find_nothing() -> None:
    """An id nobody was given, an empty one or none finds no session."""
    sessions = Sessions()
    sessions.open("alice")
    assert sessions.get("guess") is None
    assert sessions.get("") is None
    assert sessions.get(None) is None


def test_each_session_has_its_own_csrf_token_compared_exactly() -> None:
    """The CSRF token matches only itself; another session's does not."""
    sessions = Sessions()
    _, one = sessions.open("alice")
    _, two = sessions.open("alice")
    assert one.csrf != two.csrf
    assert one.csrf_matches(one.csrf)
    assert not one.csrf_matches(two.csrf)
    assert not one.csrf_matches(None)
    assert not one.csrf_matches(one.csrf[:-1])
    assert not one.csrf_matches("\udcff" + one.csrf)  # undecodable bytes: no match, no error


def test_after_sign_in_only_a_path_of_this_site_is_followed() -> None:
    """`next` is followed only when it is a path here: never another host."""
    assert _safe_next("/ui/runs?state=failed") == "/ui/runs?state=failed"
    for bad in ("//evil.example/", "https://evil.example/", "/\\evil.example", "", None):
        assert _safe_next(bad) == "/"


def test_times_read_relative_to_now() -> None:
    """Human times: `12m ago`, `in 4m`, `just now`."""
    now = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    stamp = "%Y-%m-%dT%H:%M:%S.%fZ"
    assert relative((now - timedelta(minutes=12)).strftime(stamp), now) == "12m ago"
    assert relative((now + timedelta(minutes=4, seconds=10)).strftime(stamp), now) == "in 4m"
    assert relative(now.strftime(stamp), now) == "just now"
    assert relative((now - timedelta(days=3, hours=5)).strftime(stamp), now) == "3d ago"
    assert relative(None, now) == ""
