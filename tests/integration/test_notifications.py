"""Delivering notifications to real receivers on loopback (docs/notifications.md): the
generic webhook verified with the `standardwebhooks` library, Apprise's `json://` and
`form://` posting to an aiohttp server, retries with backoff, giving up, secrets kept
out of what is recorded and logged, and one send per notification when two serves
share a database. Each on SQLite and PostgreSQL, through the Service serve's notifier
calls."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from receivers import SECRET, Receiver

from engine.bootstrap import open_service
from engine.core.delivery import Policy
from engine.core.paging import NotificationQuery
from engine.loading import Paths
from engine.notify import config
from engine.notify.config import Notifying
from engine.notify.sinks import WebhookSink
from engine.service import Service
from engine.service.notifications import notify

START = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


@dataclass
class Clock:
    now: datetime = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class World:
    service: Service
    clock: Clock
    receiver: Receiver
    config: Path

    def sinks(self, policy: Policy | None = None, **environ: str) -> Notifying:
        """Sinks as serve reads them, from this environment (and no file)."""
        found = config.load(self.config, environ)
        self.service.notifying = Notifying(found.sinks, policy or found.policy)
        return self.service.notifying

    def announce(self, state: str = "failed", loop: str = "repair") -> int:
        with self.service.rt.store.write() as tx:
            seq = notify(
                self.service.rt,
                tx,
                "occurrence",
                state,
                f"{loop} is {state}",
                loop=loop,
                repo="r1",
                links={"loop": loop, "occurrence": f"clock:{loop}:2026-12-01T10:00:00Z"},
            )
        assert seq is not None
        return seq

    def listed(self, **query: Any) -> list[dict[str, Any]]:
        return self.service.notifications_page(NotificationQuery(**query), 100).items


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver().start()
    yield found
    found.stop()


@pytest.fixture
def world(
    database: str, runtime_paths: Paths, receiver: Receiver, tmp_path: Path
) -> Iterator[World]:
    clock = Clock()
    service = open_service(database, runtime_paths, clock=clock)
    (tmp_path / "config").mkdir()
    yield World(service, clock, receiver, tmp_path / "config")
    service.rt.store.close()


def by_sink(item: dict[str, Any]) -> dict[str, Any]:
    return {d.sink: d for d in item["sinks"]}


def test_every_sink_takes_the_notification_and_the_webhook_verifies(world: World) -> None:
    """One notification reaches Apprise's json:// and form:// endpoints and the signed
    webhook, whose signature a receiver's Standard Webhooks library accepts; each
    sink's row and the notification say delivered."""
    r = world.receiver
    world.sinks(
        ENGINE_NOTIFY_URLS=f"json://127.0.0.1:{r.port}/json, form://127.0.0.1:{r.port}/form",
        ENGINE_NOTIFY_WEBHOOK=r.url("/hook"),
        ENGINE_NOTIFY_WEBHOOK_SECRET=SECRET,
    )
    seq = world.announce()
    assert world.service.deliver_notifications() == 1
    (hook,) = r.got("/hook")
    assert hook.verified is True
    assert hook.parsed["seq"] == seq and hook.parsed["state"] == "failed"
    assert hook.parsed["links"]["occurrence"] == "clock:repair:2026-12-01T10:00:00Z"
    assert hook.headers["webhook-id"].startswith(f"ntf_{seq}_")
    (posted,) = r.got("/json")
    assert posted.parsed["title"] == "engine: repair (r1) failed"
    assert posted.parsed["message"].startswith("repair is failed\n")
    (form,) = r.got("/form")
    assert form.parsed["title"] == "engine: repair (r1) failed"
    assert "occurrence: clock:repair:2026-12-01T10:00:00Z" in form.parsed["message"]
    (item,) = world.listed()
    assert item["notification"].delivery == "delivered"
    assert {s: d.state for s, d in by_sink(item).items()} == {
        "url-1": "delivered",
        "url-2": "delivered",
        "webhook": "delivered",
    }


def test_a_failed_attempt_is_retried_after_its_backoff_with_the_same_message_id(
    world: World,
) -> None:
    """A webhook answering 503 leaves the notification pending with one attempt and its
    next attempt a backoff later; nothing is sent before then; the retry carries the
    same webhook-id (a receiver drops a duplicate) and a fresh valid signature."""
    r = world.receiver
    world.sinks(
        Policy(attempts=5, backoff_seconds=30, max_backoff_seconds=600),
        ENGINE_NOTIFY_WEBHOOK=r.url("/hook"),
        ENGINE_NOTIFY_WEBHOOK_SECRET=SECRET,
    )
    r.answer("/hook", 503)
    world.announce()
    assert world.service.deliver_notifications() == 0
    (item,) = world.listed()
    n, row = item["notification"], by_sink(item)["webhook"]
    assert (n.delivery, n.attempts, row.state, row.attempts) == ("pending", 1, "pending", 1)
    assert row.last_error is not None and "answered 503" in row.last_error
    assert n.next_attempt_at == "2026-12-01T10:00:30.000000Z"
    world.clock.advance(29)
    assert world.service.deliver_notifications() == 0
    assert len(r.got("/hook")) == 1
    world.clock.advance(1)
    assert world.service.deliver_notifications() == 1
    first, second = r.got("/hook")
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert second.verified is True
    (item,) = world.listed()
    assert (item["notification"].delivery, item["notification"].attempts) == ("delivered", 2)


def test_a_sink_that_keeps_failing_is_given_up_and_the_others_are_not_sent_again(
    world: World,
) -> None:
    """With two attempts a sink, a webhook that fails twice is failed (given up) while
    the JSON sink that took it at once is never sent it again; the notification is
    failed and no longer due."""
    r = world.receiver
    world.sinks(
        Policy(attempts=2, backoff_seconds=10, max_backoff_seconds=10),
        ENGINE_NOTIFY_URLS=f"json://127.0.0.1:{r.port}/json",
        ENGINE_NOTIFY_WEBHOOK=r.url("/hook"),
    )
    r.answer("/hook", 500, 502)
    world.announce()
    world.service.deliver_notifications()
    world.clock.advance(10)
    world.service.deliver_notifications()
    world.clock.advance(3600)
    assert world.service.deliver_notifications() == 0
    assert (len(r.got("/json")), len(r.got("/hook"))) == (1, 2)
    (item,) = world.listed(delivery="failed")
    rows = by_sink(item)
    assert (rows["url-1"].state, rows["webhook"].state, rows["webhook"].attempts) == (
        "delivered",
        "failed",
        2,
    )
    assert item["notification"].next_attempt_at is None
    assert world.listed(delivery="pending") == []


def test_no_secret_of_a_sink_is_recorded_or_logged(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """Failing sinks whose URLs hold a password (Apprise masks it) and a token in the
    webhook's path and query leave errors and engine log lines that name the sink,
    never the secret; Apprise's own lines (which quote the URL) reach no handler of
    the engine's."""
    closed = world.receiver.port  # stopped: nothing answers there any more
    world.receiver.stop()
    world.sinks(
        ENGINE_NOTIFY_URLS=f"json://bot:hunter2pw@127.0.0.1:{closed}/hooks",
        ENGINE_NOTIFY_WEBHOOK=f"http://127.0.0.1:{closed}/in/S3CRETPATH?key=QU3RYK3Y",
    )
    world.announce()
    with caplog.at_level(logging.DEBUG):
        world.service.deliver_notifications()
    (item,) = world.listed()
    recorded = [d.last_error or "" for d in item["sinks"]] + [item["notification"].last_error or ""]
    assert all(recorded) and len(item["sinks"]) == 2
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("engine")]
    said = "\n".join([*recorded, *logged])
    for secret in ("hunter2pw", "S3CRETPATH", "QU3RYK3Y"):
        assert secret not in said
    assert any("sink url-1 failed" in line for line in logged)
    assert any("sink webhook failed" in line for line in logged)
    assert logging.getLogger("apprise").propagate is False


def test_two_serves_on_one_database_send_each_notification_once(
    world: World, database: str, runtime_paths: Paths
) -> None:
    """While one serve's notifier is sending a notification (its receiver holding the
    request), another serve's pass over the same database finds nothing due: the
    claim is taken; the notification reaches the receiver once."""
    r = world.receiver
    (hook,) = world.sinks(ENGINE_NOTIFY_WEBHOOK=r.url("/hook")).sinks
    assert isinstance(hook, WebhookSink)
    patient = dataclasses.replace(hook, timeout=120)  # the hold never outlasts it
    world.service.notifying = Notifying((patient,))
    world.announce()
    other = open_service(database, runtime_paths, clock=world.clock)
    other.notifying = world.service.notifying
    r.held.clear()
    first = threading.Thread(target=world.service.deliver_notifications)
    first.start()
    try:
        r.wait_arrived("/hook", 1)
        assert other.deliver_notifications() == 0
    finally:
        r.held.set()
        first.join(30)
        other.rt.store.close()
    assert r.arrived == ["/hook"]
    (item,) = world.listed()
    assert item["notification"].delivery == "delivered"


def test_a_notification_written_while_no_sink_was_configured_waits_for_one(
    world: World,
) -> None:
    """Without sinks a pass sends nothing and the notification stays pending; once a
    sink is configured, the next pass delivers it."""
    world.announce()
    assert world.service.deliver_notifications() == 0
    assert world.listed()[0]["notification"].delivery == "pending"
    world.sinks(ENGINE_NOTIFY_WEBHOOK=world.receiver.url("/hook"))
    assert world.service.deliver_notifications() == 1
    assert len(world.receiver.got("/hook")) == 1
