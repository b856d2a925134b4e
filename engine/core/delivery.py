"""Delivering notifications (docs/notifications.md), decided purely: which sinks a
notification is due at, what one attempt at one sink leaves recorded, and the state
the notification is in across its sinks. The delivering shell
(engine.service.notifications) reads the records, calls these, sends, and writes what
they answer once.

A notification is `pending` until every configured sink took it (`delivered`) or each
sink either took it or gave up after the policy's attempts (`failed`: one sink or more
gave up). A sink's failed attempt is retried after `backoff`, doubled each time, at
most `max_backoff`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from engine.core.envelope import iso
from engine.core.records import NotificationRecord, SinkDelivery


class DeliveryState(StrEnum):
    """A notification's (or one sink's) delivery state; the value is the stored text."""

    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


DELIVERY_STATES = tuple(s.value for s in DeliveryState)
# How long a claimed notification is left to the serve that claimed it before another
# may try (it died mid-send): longer than every sink's timeouts, once.
CLAIM = timedelta(minutes=2)
MAX_ERROR = 500  # characters of a delivery error kept


@dataclass(frozen=True, slots=True)
class Policy:
    """How often, and how far apart, one sink is tried."""

    attempts: int = 10
    backoff_seconds: int = 30
    max_backoff_seconds: int = 3600

    def delay(self, attempts: int) -> int:
        """Seconds before the next try after `attempts` (>= 1) failed ones."""
        return min(self.backoff_seconds << min(attempts - 1, 62), self.max_backoff_seconds)


def due_sinks(sinks: Sequence[str], deliveries: Mapping[str, SinkDelivery], now: str) -> list[str]:
    """The sinks (in their order) that have neither taken nor given up on the
    notification and whose next attempt is due at `now`."""
    due = []
    for sink in sinks:
        found = deliveries.get(sink)
        if found is None or (
            found.state == DeliveryState.PENDING
            and (found.next_attempt_at is None or found.next_attempt_at <= now)
        ):
            due.append(sink)
    return due


def attempted(
    seq: int,
    sink: str,
    before: SinkDelivery | None,
    error: str | None,
    at: datetime,
    policy: Policy,
) -> SinkDelivery:
    """What one attempt at `sink` leaves recorded: delivered (`error` None), or a
    failure retried after the policy's delay, or given up (`failed`) on its last try."""
    was = before or SinkDelivery(seq=seq, sink=sink)
    attempts = was.attempts + 1
    now = iso(at)
    if error is None:
        return replace(
            was,
            state=DeliveryState.DELIVERED,
            attempts=attempts,
            last_attempt_at=now,
            next_attempt_at=None,
            delivered_at=now,
        )
    final = attempts >= policy.attempts
    retry = None if final else iso(at + timedelta(seconds=policy.delay(attempts)))
    return replace(
        was,
        state=DeliveryState.FAILED if final else DeliveryState.PENDING,
        attempts=attempts,
        last_error=error[:MAX_ERROR],
        last_attempt_at=now,
        next_attempt_at=retry,
    )


def settled(
    n: NotificationRecord, sinks: Sequence[str], deliveries: Mapping[str, SinkDelivery]
) -> NotificationRecord:
    """The notification's state across `sinks` (the configured ones; a sink no longer
    configured counts no more): delivered when each took it, failed when each took
    it or gave up and one gave up, else pending until its earliest due sink. Its
    `attempts` are the most any sink made, its `last_error` the newest of theirs."""
    mine = [deliveries[s] for s in sinks if s in deliveries]
    if len(mine) < len(sinks):  # a sink not tried yet: due at once
        return _pending(n, mine, None)
    states = {d.state for d in mine}
    if DeliveryState.PENDING in states:
        due = min(d.next_attempt_at or "" for d in mine if d.state == DeliveryState.PENDING)
        return _pending(n, mine, due or None)
    if states == {DeliveryState.DELIVERED}:
        done = max((d.delivered_at or "" for d in mine), default="") or None
        return replace(_pending(n, mine, None), delivery=DeliveryState.DELIVERED, delivered_at=done)
    return replace(_pending(n, mine, None), delivery=DeliveryState.FAILED)


def _pending(
    n: NotificationRecord, mine: Sequence[SinkDelivery], due: str | None
) -> NotificationRecord:
    tried = [d for d in mine if d.last_attempt_at is not None]
    errors = sorted((d.last_attempt_at or "", d.last_error) for d in tried if d.last_error)
    return replace(
        n,
        delivery=DeliveryState.PENDING,
        attempts=max((d.attempts for d in mine), default=n.attempts),
        last_error=errors[-1][1] if errors else n.last_error,
        next_attempt_at=due,
    )
