"""The real application served on a loopback port from a thread of the test process,
so a test can reach into its store (make the disk "full", hold its lock) while a
client in the test's own thread (urllib, or schemathesis through requests) talks HTTP
to it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web


@contextmanager
def served(app: web.Application) -> Iterator[str]:
    """Run `app` (its startup and cleanup included) on 127.0.0.1 in a thread of its own
    event loop; the base URL while the block runs."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(60)
        loop.close()
