"""Running the app (`engine serve`): the open-files limit raised, accept errors logged
once per interval, the connection bound and timeouts of the HTTP edge, and the
signals. The first SIGTERM or SIGINT stops intake and shuts down within the grace; a
second one cuts the grace short (the run in hand is cancelled) and the exit is still
clean (docs/api.md#connections-and-timeouts)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import signal
from collections.abc import Callable
from typing import Any

from aiohttp import web

from engine.api.context import HURRY
from engine.api.protocol import EdgeRunner, Throttle, held_back
from engine.api.settings import Settings

log = logging.getLogger("engine.serve")

FD_RESERVE = 128  # open files kept for the store, the worker's commands and the logs
SIGNALS = (signal.SIGTERM, signal.SIGINT)
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def raise_open_files_limit() -> int:
    """Lift the soft RLIMIT_NOFILE to the hard limit where allowed; the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def connection_bound(wanted: int, limit: int) -> int:
    """The connections to serve at once under an open-files `limit`: `wanted`, or
    fewer so that FD_RESERVE descriptors (half the limit, when it is small) stay free."""
    room = limit - FD_RESERVE if limit > 2 * FD_RESERVE else limit // 2
    return max(1, min(wanted, room))


class AcceptErrors:
    """A loop exception handler: a failed accept for want of file descriptors (or
    memory) is one warning per interval with a count of the ones held back, never a
    traceback per accept; everything else goes to asyncio's own handler."""

    def __init__(self, limit: int, interval: float = 10.0) -> None:
        self.limit = limit
        self.throttle = Throttle(interval)

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if _late_accept_retry(context):
            return
        if not (isinstance(exc, OSError) and exc.errno in _OUT_OF_RESOURCES):
            loop.default_exception_handler(context)
            return
        held = self.throttle.allow()
        if held is not None:
            log.warning(
                "cannot accept connections: %s (open-files limit %d); %s",
                exc.strerror,
                self.limit,
                held_back(held, self.throttle.interval),
            )


def _late_accept_retry(context: dict[str, Any]) -> bool:
    """asyncio answers a failed accept by retrying a second later, once per failure;
    a retry that fires after shutdown closed the listening socket fails on its closed
    descriptor. Nothing is lost: the socket is gone on purpose."""
    callback = getattr(context.get("handle"), "_callback", None)
    return isinstance(context.get("exception"), ValueError) and (
        getattr(callback, "__name__", "") == "_start_serving"
    )


async def serve(
    app: web.Application,
    host: str,
    port: int,
    settings: Settings,
    announce: Callable[[str], None],
) -> None:
    """Serve until a signal, then clean up. OSError when the address cannot be bound."""
    loop = asyncio.get_running_loop()
    limit = raise_open_files_limit()
    loop.set_exception_handler(AcceptErrors(limit))
    bound = connection_bound(settings.max_connections, limit)
    if bound < settings.max_connections:
        log.warning(
            "serving at most %d connections: --max-connections %d does not fit under the"
            " open-files limit %d with room for the store and the worker",
            bound,
            settings.max_connections,
            limit,
        )
    stop = asyncio.Event()
    _catch_signals(loop, stop, app[HURRY])
    runner = EdgeRunner(
        app,
        max_connections=bound,
        keepalive_timeout=settings.idle_seconds,
        shutdown_timeout=settings.shutdown_grace,
    )
    try:
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port)
            await site.start()
            announce(f"Running on http://{host}:{port}")
            await stop.wait()
        finally:
            await runner.cleanup()
    finally:
        for sig in SIGNALS:  # shut down: a late signal changes nothing, and says nothing
            signal.signal(sig, signal.SIG_IGN)


def _catch_signals(
    loop: asyncio.AbstractEventLoop, stop: asyncio.Event, hurry: asyncio.Event
) -> None:
    """Plain signal handlers that hand the signal to the loop (not the loop's own:
    closing the loop puts back the default action, so a signal arriving while the
    process exits would kill it or print a traceback)."""

    def handler(signum: int, frame: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            loop.call_soon_threadsafe(_on_signal, signal.Signals(signum), stop, hurry)

    for sig in SIGNALS:
        signal.signal(sig, handler)


def _on_signal(sig: signal.Signals, stop: asyncio.Event, hurry: asyncio.Event) -> None:
    if not stop.is_set():
        log.info("%s: shutting down", sig.name)
        stop.set()
    elif not hurry.is_set():
        log.warning("%s again: shutting down without waiting for the run in hand", sig.name)
        hurry.set()
