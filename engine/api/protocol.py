"""The HTTP edge below the app (docs/api.md#connections-and-timeouts): a bound on open
connections, and aiohttp's own refusals (a malformed request line or header, a header
too long, a bad method, a body its headers do not frame) answered in the API's error
shape. aiohttp answers those itself, before any route or middleware runs, as plain
text quoting the offending bytes, and logs them with a traceback; a quoted header may
be `Authorization`. Here they are JSON, and logged as one line naming only the kind.

The access line of each answered request is `AccessLog`'s: the client's address, the
method, the path without its query string, the status, the size and the duration,
and the request id; never a header, so never a token or a signature."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from aiohttp import http_exceptions as hx
from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.web_request import BaseRequest

from engine import retry_after
from engine.api.observe import REQUEST_ID_HEADER, new_request_id

log = logging.getLogger("engine.api.edge")
_dumps = partial(json.dumps, separators=(",", ":"))


MAX_LOGGED_PATH = 512  # characters of a path the access line keeps


class AccessLog(AbstractAccessLogger):
    """One line per answered request (the `aiohttp.access` logger, at info):
    `127.0.0.1 "GET /runs/{id}" 200 512 0.004s` and its fields in JSON."""

    def log(self, request: BaseRequest, response: web.StreamResponse, time: float) -> None:
        path = request.raw_path.partition("?")[0][:MAX_LOGGED_PATH]  # as sent, %-encoded
        size = response.body_length
        self.logger.info(
            '%s "%s %s" %d %d %.3fs',
            request.remote,
            request.method,
            path,
            response.status,
            size,
            time,
            extra={
                "request_id": response.headers.get(REQUEST_ID_HEADER),
                "remote": request.remote,
                "method": request.method,
                "path": path,
                "status": response.status,
                "bytes": size,
                "duration_ms": round(time * 1000, 3),
            },
        )

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.INFO)


def held_back(count: int, interval: float) -> str:
    """The tail of a throttled line: how many like it were not logged."""
    if count:
        return f"{count} more since the last line"
    return f"logged at most once per {interval:g}s"


class Throttle:
    """One log line per `interval` seconds: `allow()` answers how many were held back
    since the last line, or None while the interval runs."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self.held = 0
        self.last: float | None = None

    def allow(self) -> int | None:
        now = self.clock()
        if self.last is not None and now - self.last < self.interval:
            self.held += 1
            return None
        held, self.held, self.last = self.held, 0, now
        return held


# (status, error code, message) by what aiohttp's parser raised; the first match wins.
_REFUSALS: tuple[tuple[type[Exception], int, str, str], ...] = (
    (hx.LineTooLong, 431, "line_too_long", "the request line or a header is too long"),
    (hx.BadHttpMethod, 400, "bad_method", "the request method is not an HTTP token"),
    (hx.InvalidURLError, 400, "bad_request_line", "the request target is not a valid URL"),
    (hx.BadStatusLine, 400, "bad_request_line", "the request line is not HTTP/1.x"),
    (hx.InvalidHeader, 400, "bad_header", "a header is malformed"),
    (hx.PayloadEncodingError, 400, "bad_framing", "the body is not framed as its headers say"),
)
_OTHER = {
    500: ("internal_error", "internal error"),
    504: ("timeout", "the request took too long"),
}
_BAD_HTTP = ("bad_http", "the request is not valid HTTP/1.1 (a header, its length or a chunk)")


def refusal(status: int, exc: BaseException | None) -> tuple[int, str, str]:
    """The status, code and message of an answer aiohttp's protocol gives by itself,
    from the exception's kind only: its text quotes the request's bytes."""
    for kind, code_status, code, message in _REFUSALS:
        if isinstance(exc, kind):
            return code_status, code, message
    if isinstance(exc, hx.BadHttpMessage) and "headers" in str(exc.message):
        return 431, "too_many_headers", "the request has too many headers"
    code, message = _OTHER.get(status, _BAD_HTTP)
    return status, code, message


def _refused_answer() -> bytes:
    """The whole HTTP/1.1 answer to a connection over the bound, written unread, with
    when to come back."""
    body = json.dumps(
        {
            "error": "too_many_connections",
            "message": "the server has no room for another connection",
        },
        separators=(",", ":"),
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        f"{retry_after.HEADER}: {retry_after.seconds('too_many_connections')}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


FULL = _refused_answer()


class EdgeProtocol(web.RequestHandler):
    """aiohttp's per-connection protocol, with the bound and the JSON refusals."""

    def __init__(self, edge: EdgeServer, **kwargs: Any) -> None:
        super().__init__(edge, **kwargs)
        self.edge = edge
        self.refused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.edge.admit(self):
            super().connection_made(transport)
            return
        self.refused = True  # never parsed, never handled: answered and closed at once
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(FULL)
        transport.close()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.refused:
            return
        self.edge.release(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self.refused:
            super().data_received(data)

    @property
    def idle(self) -> bool:
        """Between requests, or still reading a request's headers: closing it loses
        no request in hand."""
        return not self._request_in_progress and not self._messages

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """aiohttp's answer to a request it could not parse (or a handler that escaped
        the error middleware), in the API's shape; one log line, no request bytes."""
        status, code, text = refusal(status, exc)
        level = logging.ERROR if status >= 500 else logging.INFO
        kind = type(exc).__name__ if exc is not None else "no exception"
        log.log(level, "refused a request from %s: %d %s (%s)", request.remote, status, code, kind)
        if request.writer.output_size > 0:
            raise ConnectionError("an answer was already under way")
        answer = web.json_response(
            {"error": code, "message": text},
            status=status,
            dumps=_dumps,
            headers={REQUEST_ID_HEADER: new_request_id()},  # no header of its own is trusted
        )
        answer.force_close()
        return answer


class EdgeServer(web.Server):
    """aiohttp's connection manager, serving at most `max_connections` at once. At
    the bound a new connection takes the place of the oldest idle one; when none is
    idle it is answered 503 `too_many_connections` and closed, without being read."""

    def __init__(self, *args: Any, max_connections: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_connections = max_connections
        self.open: dict[EdgeProtocol, None] = {}  # oldest first
        self.throttle = Throttle(10.0)

    def __call__(self) -> EdgeProtocol:
        return EdgeProtocol(self, loop=self._loop, **self._kwargs)

    def admit(self, protocol: EdgeProtocol) -> bool:
        if len(self.open) >= self.max_connections and not self._evict():
            held = self.throttle.allow()
            if held is not None:
                log.warning(
                    "refused a connection: %d open, none idle (--max-connections); %s",
                    len(self.open),
                    held_back(held, self.throttle.interval),
                )
            return False
        self.open[protocol] = None
        return True

    def release(self, protocol: EdgeProtocol) -> None:
        self.open.pop(protocol, None)

    def _evict(self) -> bool:
        oldest = next((p for p in self.open if p.idle), None)
        if oldest is None:
            return False
        self.release(oldest)
        oldest.force_close()
        return True


class EdgeRunner(web.AppRunner):
    """An AppRunner whose server is an EdgeServer."""

    def __init__(self, app: web.Application, *, max_connections: int, **kwargs: Any) -> None:
        super().__init__(app, access_log_class=AccessLog, **kwargs)
        self.max_connections = max_connections

    async def _make_server(self) -> web.Server:
        plain = await super()._make_server()  # starts the app: cleanup_ctx, on_startup
        return EdgeServer(
            plain.request_handler,
            request_factory=plain.request_factory,
            handler_cancellation=plain.handler_cancellation,
            max_connections=self.max_connections,
            **plain._kwargs,
        )
