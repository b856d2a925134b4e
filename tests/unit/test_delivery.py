"""The delivery decisions (engine.core.delivery, docs/notifications.md#delivery): which
sinks are due, what an attempt leaves, the state across sinks; and, for any run of
outcomes, the invariants an operator relies on."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from engine.core.delivery import Policy, attempted, due_sinks, settled
from engine.core.envelope import iso
from engine.core.records import NotificationRecord, SinkDelivery

T0 = datetime(2026, 12, 1, 10, tzinfo=UTC)
NOTE = NotificationRecord(7, iso(T0), "loop", "reaper", None, "breaker_tripped", {}, "m", "k")


def test_backoff_doubles_from_its_first_delay_up_to_its_cap() -> None:
    """30 s, 60 s, 120 s ... never past the cap, however many attempts failed."""
    policy = Policy(attempts=10, backoff_seconds=30, max_backoff_seconds=300)
    assert [policy.delay(n) for n in range(1, 7)] == [30, 60, 120, 240, 300, 300]
    assert policy.delay(10_000) == 300


def test_a_delivered_attempt_is_final_and_a_failed_one_waits_its_backoff() -> None:
    """Success records when; a failure counts, keeps its reason and is due a backoff
    later; the last allowed failure gives up (failed, nothing due)."""
    policy = Policy(attempts=2, backoff_seconds=30, max_backoff_seconds=60)
    ok = attempted(7, "chat", None, None, T0, policy)
    assert (ok.state, ok.attempts, ok.delivered_at, ok.next_attempt_at) == (
        "delivered",
        1,
        iso(T0),
        None,
    )
    first = attempted(7, "chat", None, "answered 503", T0, policy)
    assert (first.state, first.attempts, first.last_error) == ("pending", 1, "answered 503")
    assert first.next_attempt_at == iso(T0 + timedelta(seconds=30))
    last = attempted(7, "chat", first, "answered 502", T0, policy)
    assert (last.state, last.attempts, last.next_attempt_at) == ("failed", 2, None)


def test_only_untried_and_due_sinks_are_tried() -> None:
    """A sink never tried, or pending and due, is tried; one that took it, gave up or
    waits for its backoff is not."""
    rows = {
        "took": SinkDelivery(7, "took", "delivered", 1),
        "gave-up": SinkDelivery(7, "gave-up", "failed", 3),
        "later": SinkDelivery(7, "later", "pending", 1, next_attempt_at=iso(T0 + timedelta(1))),
        "due": SinkDelivery(7, "due", "pending", 1, next_attempt_at=iso(T0)),
    }
    names = ["new", "took", "gave-up", "later", "due"]
    assert due_sinks(names, rows, iso(T0)) == ["new", "due"]


def test_the_state_across_sinks() -> None:
    """Delivered when each configured sink took it; failed when each took it or gave up
    and one gave up; pending (due at its earliest sink) otherwise; a sink that is no
    longer configured counts no more."""
    took = SinkDelivery(7, "a", "delivered", 1, delivered_at=iso(T0))
    gave_up = SinkDelivery(7, "b", "failed", 3, last_error="refused", last_attempt_at=iso(T0))
    waits = SinkDelivery(7, "c", "pending", 2, "503", iso(T0), iso(T0 + timedelta(minutes=1)))
    rows = {"a": took, "b": gave_up, "c": waits}
    assert settled(NOTE, ["a"], rows).delivery == "delivered"
    assert settled(NOTE, ["a", "b"], rows).delivery == "failed"
    found = settled(NOTE, ["a", "b", "c"], rows)
    assert (found.delivery, found.next_attempt_at, found.attempts) == (
        "pending",
        waits.next_attempt_at,
        3,
    )
    assert settled(NOTE, ["a", "d"], rows).delivery == "pending"  # d: not tried yet


outcomes = st.lists(st.lists(st.booleans(), min_size=1, max_size=3), min_size=1, max_size=12)


@given(rounds=outcomes, attempts=st.integers(1, 5))
def test_whatever_the_outcomes_delivery_is_bounded_and_honest(
    rounds: list[list[bool]], attempts: int
) -> None:
    """Over any run of passes (each sink's outcome given per pass), no sink is tried
    more than the policy's attempts or again once it took it; the notification is
    delivered exactly when every sink took it, failed only when none is still
    pending, and pending with a next attempt otherwise."""
    policy = Policy(attempts=attempts, backoff_seconds=1, max_backoff_seconds=4)
    sinks = ["a", "b", "c"][: len(rounds[0])]
    rows: dict[str, SinkDelivery] = {}
    now, n = T0, NOTE
    for results in rounds:
        for sink, ok in zip(due_sinks(sinks, rows, iso(now)), results, strict=False):
            rows[sink] = attempted(n.seq, sink, rows.get(sink), None if ok else "no", now, policy)
        n = replace(settled(n, sinks, rows), seq=n.seq)
        now += timedelta(seconds=policy.max_backoff_seconds)
    assert all(r.attempts <= attempts for r in rows.values())
    assert all(r.attempts == 1 or r.last_error for r in rows.values() if r.state == "delivered")
    states = {rows[s].state if s in rows else "untried" for s in sinks}
    if states == {"delivered"}:
        assert n.delivery == "delivered"
    elif states <= {"delivered", "failed"}:
        assert n.delivery == "failed"
    else:
        assert n.delivery == "pending"
        assert n.next_attempt_at is not None or "untried" in states
