"""Quiet notifications (docs/occurrences.md#notifications): written in the same transaction as the
state change they report, only when that state changed, each linking durable ids; delivered later
from the table (an outbox) to the configured sink.

The sink comes from the environment (a webhook URL may carry a token):
ENGINE_NOTIFY_WEBHOOK=https://… (POST application/json, one notification per request)
or ENGINE_NOTIFY_LOG=/path/file.jsonl (one JSON line each). Neither: notifications stay
in the `notifications` table only. Delivery is at least once: a serve that
dies between sending and recording sends again; a failed delivery is retried with a
capped backoff."""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from engine.core.decide import dedup_key, notice
from engine.core.envelope import iso
from engine.core.records import NotificationRecord
from engine.service.context import Runtime
from engine.store.ports import Tx

log = logging.getLogger("engine.notify")

WEBHOOK_ENV = "ENGINE_NOTIFY_WEBHOOK"
LOG_ENV = "ENGINE_NOTIFY_LOG"
TIMEOUT_S = 5.0
RETRY_BASE_S = 30
RETRY_MAX_S = 3600
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class Sink:
    """Where notifications go: a webhook URL, a JSON-lines file, or nowhere."""

    webhook: str | None = None
    log_file: Path | None = None

    @property
    def configured(self) -> bool:
        return self.webhook is not None or self.log_file is not None

    def describe(self) -> str:
        if self.webhook:
            return "webhook"
        return f"log {self.log_file}" if self.log_file else "none"


def sink_from_env(environ: dict[str, str] | None = None) -> Sink:
    env = os.environ if environ is None else environ
    webhook = env.get(WEBHOOK_ENV) or None
    path = env.get(LOG_ENV) or None
    return Sink(webhook=webhook, log_file=Path(path) if path else None)


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


def body(n: NotificationRecord) -> dict[str, Any]:
    return {
        "seq": n.seq,
        "at": n.at,
        "kind": n.kind,
        "loop": n.loop,
        "repo": n.repo,
        "state": n.state,
        "message": n.message,
        "links": n.links,
    }


def send(sink: Sink, n: NotificationRecord) -> None:
    """Deliver one notification; OSError (or URLError) when it could not be."""
    data = json.dumps(body(n), separators=(",", ":"), sort_keys=True)
    if sink.log_file is not None:
        sink.log_file.parent.mkdir(parents=True, exist_ok=True)
        with sink.log_file.open("a", encoding="utf-8") as out:
            out.write(data + "\n")
    if sink.webhook is not None:
        request = urllib.request.Request(
            sink.webhook,
            data=data.encode(),
            headers={"Content-Type": "application/json", "User-Agent": "engine-notify"},
            method="POST",
        )
        with _NO_PROXY.open(request, timeout=TIMEOUT_S) as response:
            if response.status >= 300:
                raise OSError(f"the webhook answered {response.status}")


def deliver_pending(rt: Runtime, sink: Sink, limit: int = 50) -> int:
    """Send what is due; each result recorded in its own short transaction (never an
    HTTP call inside a write transaction). The number delivered."""
    if not sink.configured:
        return 0
    with rt.store.read() as tx:
        pending = tx.pending_notifications(rt.now(), limit)
    delivered = 0
    for n in pending:
        try:
            send(sink, n)
        except (OSError, urllib.error.URLError, ValueError) as err:
            delay = min(RETRY_BASE_S * 2**n.attempts, RETRY_MAX_S)
            retry_at = iso(rt.clock() + timedelta(seconds=delay))
            log.warning("notification %s to %s failed: %s", n.seq, sink.describe(), err)
            with rt.store.write() as tx:
                tx.notification_failed(n.seq, str(err)[:500], retry_at)
            continue
        with rt.store.write() as tx:
            tx.mark_notification_delivered(n.seq, rt.now())
        delivered += 1
    return delivered
