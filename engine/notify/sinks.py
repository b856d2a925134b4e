"""Sending one notification to one sink (docs/notifications.md#sinks): an Apprise URL
(chat, mail, push: every service Apprise knows), the generic webhook (a JSON POST
signed as Standard Webhooks specify) or a JSON-lines file. A failure is a
DeliveryFailed whose reason has every secret of the sink masked; nothing here logs a
URL. Apprise is imported when first used: its plugins take most of a second to load.
Blocking calls: the notifier runs them in a thread of its own, never on serve's
runtime loop."""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from engine import clock
from engine.core.records import NotificationRecord
from engine.notify import message, signing
from engine.notify.redact import scrub

TIMEOUT_S = 5.0
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# Apprise's own log lines name the endpoint as it was given (a Slack or Teams URL is its
# token): they go nowhere but into each attempt's captured result, read scrubbed below.
_APPRISE_LOG = logging.getLogger("apprise")
_APPRISE_LOG.propagate = False
_APPRISE_LOG.addHandler(logging.NullHandler())


class DeliveryFailed(Exception):
    """One attempt at one sink failed; `reason` holds no secret of the sink."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Sink(Protocol):
    """One configured destination, by its name (the delivery rows name it)."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str:
        """`apprise`, `webhook` or `log`."""

    @property
    def shown(self) -> str:
        """Where it sends, with every secret masked."""

    def send(self, n: NotificationRecord) -> None:
        """Deliver `n` once; DeliveryFailed when it was not taken."""


@dataclass(frozen=True)
class AppriseSink:
    """Any service Apprise has a URL for: Slack, Matrix, Teams, email, ntfy and the rest
    (its `json://` and `form://` post to any HTTP endpoint)."""

    name: str
    url: str = field(repr=False)
    shown: str
    secrets: frozenset[str] = field(default=frozenset(), repr=False)
    kind: str = "apprise"

    def send(self, n: NotificationRecord) -> None:
        import apprise  # here: its plugins take most of a second to load

        sender = apprise.Apprise()
        if not sender.add(self.url):
            raise DeliveryFailed(f"Apprise took no service from {self.shown}")
        result = sender.notify(
            body=message.text(n), title=message.title(n), body_format=apprise.NotifyFormat.TEXT
        )
        if not result:
            said = [e.message for e in result.logs() if e.level in ("WARNING", "ERROR")]
            why = "; ".join(said[-2:]) or "the service did not take it"
            raise DeliveryFailed(scrub(why, self.secrets | {self.url}))


@dataclass(frozen=True)
class WebhookSink:
    """A JSON POST of the notification's document (engine.notify.message.document),
    signed with the `whsec_` key when one is configured; an answer of 300 or more, a
    refused connection or a timeout is a failure."""

    name: str
    url: str = field(repr=False)
    shown: str
    key: bytes | None = field(default=None, repr=False)
    secrets: frozenset[str] = field(default=frozenset(), repr=False)
    wall: Callable[[], float] = lambda: clock.now().timestamp()  # webhook-timestamp (engine.clock)
    timeout: float = TIMEOUT_S
    kind: str = "webhook"

    def send(self, n: NotificationRecord) -> None:
        data = message.body(n)
        stamp = int(self.wall())
        sent = {
            "Content-Type": "application/json",
            "User-Agent": "engine-notify",
            **signing.headers(self.key, signing.message_id(n), stamp, data),
        }
        request = urllib.request.Request(self.url, data=data, headers=sent, method="POST")
        try:
            with _NO_PROXY.open(request, timeout=self.timeout) as response:
                status = response.status
        except urllib.error.HTTPError as err:
            err.close()
            status = err.code
        except (urllib.error.URLError, OSError, ValueError) as err:
            reason = getattr(err, "reason", err)
            raise DeliveryFailed(self._scrubbed(f"{self.shown}: {reason}")) from None
        if status >= 300:
            raise DeliveryFailed(f"{self.shown} answered {status}")

    def _scrubbed(self, text: str) -> str:
        return scrub(text, self.secrets | {self.url})


@dataclass(frozen=True)
class LogSink:
    """One JSON line per notification, appended to a file (its folders made)."""

    name: str
    path: Path
    kind: str = "log"

    @property
    def shown(self) -> str:
        return str(self.path)

    def send(self, n: NotificationRecord) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("ab") as out:
                out.write(message.body(n) + b"\n")
        except OSError as err:
            raise DeliveryFailed(f"{self.path}: {err.strerror or err}") from None
