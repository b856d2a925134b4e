"""Quiet notifications (docs/notifications.md): written in the same transaction as the
state change they report, only when that state changed, each linking durable ids;
delivered later from the table (an outbox) to every configured sink by serve's
notifier, off the runtime loop.

A delivery pass reads what is due, claims it (compare-and-set: of several serves on
one database, one sends each), and for each notification tries every sink that is
due (engine.core.delivery decides which, and what each attempt leaves), outside any
transaction; then writes the sinks' rows and the notification's state at once.
Delivery is at least once: a serve that dies between sending and recording, or after
its claim ran out, sends again."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from engine.core.decide import dedup_key, notice
from engine.core.delivery import CLAIM, DeliveryState, attempted, due_sinks, settled
from engine.core.envelope import iso
from engine.core.paging import NotificationQuery, Page, journal_cursor_text, page_limit
from engine.core.records import NotificationRecord, SinkDelivery
from engine.notify.config import Notifying
from engine.notify.sinks import DeliveryFailed, Sink
from engine.service.context import Runtime
from engine.store.ports import Tx

log = logging.getLogger("engine.notify")

BATCH = 50  # notifications one pass claims


def notify(
    rt: Runtime,
    tx: Tx,
    kind: str,
    state: str,
    message: str,
    *,
    loop: str | None,
    repo: str | None = None,
    links: dict[str, Any] | None = None,
    at: str | None = None,
    subject: str | None = None,
) -> int | None:
    """Record one notification for (kind, loop, repo[, subject]) reaching `state`;
    None (nothing written) when the last one for the same subject had the same state:
    an unchanged blocker or failure is not announced again. `subject` tells apart
    things of one loop that each deserve their own (each finding)."""
    made = notice(
        kind, state, message, at or rt.now(), loop=loop, repo=repo, links=links, subject=subject
    )
    return tx.enqueue_notification(made.record)


def last_state(
    tx: Tx, kind: str, loop: str | None, repo: str | None, subject: str | None = None
) -> str | None:
    """The state last notified for that thing, if any."""
    return tx.last_notification_state(dedup_key(kind, loop, repo, subject))


# ---- delivering ------------------------------------------------------------------------


def deliver_due(
    rt: Runtime,
    notifying: Notifying,
    limit: int = BATCH,
    stopping: Callable[[], bool] = lambda: False,
) -> int:
    """One pass: claim what is due (up to `limit`) and try each of its due sinks, until
    `stopping()` says to stop (a claim not tried is tried again when it runs out). The
    number of notifications it left delivered."""
    if not notifying.sinks:
        return 0
    with rt.store.read() as tx:
        due = tx.pending_notifications(rt.now(), limit)
    if not due:
        return 0
    until = iso(rt.clock() + CLAIM)
    with rt.store.write() as tx:
        mine = [n for n in due if tx.claim_notification(n.seq, n.next_attempt_at, until)]
        rows = tx.sink_deliveries(n.seq for n in mine)
    done = 0
    for n in mine:
        if stopping():
            break
        before = {d.sink: d for d in rows.get(n.seq, [])}
        done += _deliver(rt, notifying, n, before) == DeliveryState.DELIVERED
    return done


def _deliver(
    rt: Runtime, notifying: Notifying, n: NotificationRecord, before: Mapping[str, SinkDelivery]
) -> str:
    """Try each due sink once, then record the rows and the notification's state."""
    wanted = set(due_sinks(notifying.names, before, rt.now()))
    tried = [
        _attempt(sink, n, before.get(sink.name), rt.clock(), notifying)
        for sink in notifying.sinks
        if sink.name in wanted
    ]
    after = settled(n, notifying.names, {**before, **{d.sink: d for d in tried}})
    with rt.store.write() as tx:
        tx.record_sink_deliveries(tried)
        tx.settle_notification(after)
    return after.delivery


def _attempt(
    sink: Sink,
    n: NotificationRecord,
    before: SinkDelivery | None,
    at: datetime,
    notifying: Notifying,
) -> SinkDelivery:
    """Send once; the row the attempt leaves (logged by sink name, never its URL)."""
    try:
        sink.send(n)
        error = None
    except DeliveryFailed as err:
        error = err.reason
    row = attempted(n.seq, sink.name, before, error, at, notifying.policy)
    if error is not None:
        then = "gave up" if row.state == DeliveryState.FAILED else f"next at {row.next_attempt_at}"
        log.warning(
            "notification %s to sink %s failed (attempt %d of %d; %s): %s",
            n.seq,
            sink.name,
            row.attempts,
            notifying.policy.attempts,
            then,
            error,
        )
    return row


# ---- reading ----------------------------------------------------------------------------


def page(rt: Runtime, query: NotificationQuery, limit: int) -> Page[dict[str, Any]]:
    """A page of notifications, newest first, each with its sinks' rows (`sinks`);
    `next` asks for the older ones (a seq, as the journal's cursor)."""
    with rt.store.read() as tx:
        found = tx.page_notifications(query, page_limit(limit) + 1)
        items = found[:limit]
        rows = tx.sink_deliveries(n.seq for n in items)
    more = len(found) > limit and items
    listed = [{"notification": n, "sinks": rows.get(n.seq, [])} for n in items]
    return Page(listed, journal_cursor_text(items[-1].seq) if more else None)
