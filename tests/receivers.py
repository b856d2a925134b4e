"""A real aiohttp server on loopback that receives notifications as a receiver would
(docs/notifications.md): `POST /hook` verifies the Standard Webhooks signature with the
`standardwebhooks` library, `POST /json` and `POST /form` take what Apprise's `json://`
and `form://` send. Each path answers the statuses it is told, in turn (then 200), and
may be held until released. It runs in a thread of its own, so the code under test can
block on it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # 24 bytes, base64


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    parsed: Any  # the JSON document, the form's fields, or None
    verified: bool | None = None  # /hook: whether the signature held


@dataclass
class Receiver:
    """Start with `start()`; `url(path)` is where to send; `got(path)` what came."""

    secret: str = SECRET
    received: list[Received] = field(default_factory=list)
    arrived: list[str] = field(default_factory=list)  # each request's path, as it came
    answers: dict[str, list[int]] = field(default_factory=dict)
    held: threading.Event = field(default_factory=threading.Event)  # set: answer at once
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _runner: web.AppRunner | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.held.set()

    def url(self, path: str, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def answer(self, path: str, *statuses: int) -> None:
        """Answer these statuses to the next requests to `path`, then 200."""
        with self._lock:
            self.answers[path] = list(statuses)

    def got(self, path: str) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.path == path]

    def wait_for(self, path: str, count: int, within: float = 15) -> list[Received]:
        """Poll until `count` requests to `path` were answered; AssertionError after
        `within` seconds."""
        _poll(lambda: len(self.got(path)) >= count, f"{path}: {count} requests", within)
        return self.got(path)

    def wait_arrived(self, path: str, count: int, within: float = 15) -> None:
        """Poll until `count` requests to `path` arrived (held ones too)."""
        _poll(lambda: self.arrived.count(path) >= count, f"{path}: {count} arrivals", within)

    async def _take(self, request: web.Request) -> web.Response:
        body = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        parsed: Any = None
        verified = None
        if request.path == "/hook":
            try:
                parsed = Webhook(self.secret).verify(body, headers)
                verified = True
            except WebhookVerificationError:
                verified = False
        elif request.path == "/json":
            parsed = await request.json()
        elif request.path == "/form":
            parsed = dict(await request.post())
        with self._lock:
            self.arrived.append(request.path)
        await asyncio.get_running_loop().run_in_executor(None, self.held.wait)
        with self._lock:
            self.received.append(Received(request.path, headers, body, parsed, verified))
            queue = self.answers.get(request.path) or []
            status = queue.pop(0) if queue else 200
        return web.json_response({"ok": status < 300}, status=status)

    def start(self) -> Receiver:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            app = web.Application()
            app.router.add_post("/{name}", self._take)
            self._runner = web.AppRunner(app)
            loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            server = site._server
            assert server is not None
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, name="receiver", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        """Stop serving (once; a second call does nothing)."""
        self.held.set()
        if self._thread is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._thread = None


def _poll(ready: Callable[[], bool], what: str, within: float) -> None:
    deadline = time.monotonic() + within
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)
