"""What a handler works with: the app's typed keys, the service (called in a thread,
since the store is synchronous), the settings, and the JSON reply."""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, ParamSpec, TypeVar

from aiohttp import web

from engine.api.auth import operator_from
from engine.api.group_commit import GroupCommit
from engine.api.settings import Settings
from engine.core.envelope import Envelope
from engine.core.nesting import MAX_ANSWER_DEPTH, prune
from engine.service import Admission, Service
from engine.service.admission import Delivery, Request

P = ParamSpec("P")
T = TypeVar("T")

# The writer every admission of the HTTP intake is queued to (engine.api.group_commit).
Intake = GroupCommit[Request, list[Admission]]

SERVICE = web.AppKey("service", Service)
INTAKE: web.AppKey[Intake] = web.AppKey("intake")
SETTINGS = web.AppKey("settings", Settings)
WAKE = web.AppKey("wake", asyncio.Event)  # set after an admission: plan it now
HURRY = web.AppKey("hurry", asyncio.Event)  # set by a second signal: shut down now


def settings(request: web.Request) -> Settings:
    return request.app[SETTINGS]


def service(request: web.Request) -> Service:
    return request.app[SERVICE]


async def call(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a synchronous service method off the event loop."""
    return await asyncio.to_thread(fn, *args, **kwargs)


# Reads run in threads of their own: a write that waits for the database's writer lock
# (another process frozen while it holds it) ties up a thread of the default pool for
# up to the lock timeout, and enough of them would leave GET /status waiting behind.
READ_THREADS = 4
_reads: ThreadPoolExecutor | None = None


async def call_read(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a synchronous service method that only reads, in the read threads, so it
    never queues behind writes waiting for a lock. It runs in a copy of the caller's
    context, as `asyncio.to_thread` does: its log lines carry the request id."""
    global _reads
    if _reads is None:
        _reads = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="engine-read")
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    return await loop.run_in_executor(_reads, partial(context.run, fn, *args, **kwargs))


def operator(request: web.Request) -> str:
    """The `operator:<name>` the request's bearer token proves (401 otherwise)."""
    return operator_from(settings(request).operators, request.headers.get("Authorization"))


# Bodies up to this size are parsed, translated and checked on the event loop (tens
# of µs); larger ones (up to GitHub's 25 MB, or a list of 500 envelopes) in a thread,
# so the loop never stalls.
INLINE_BYTES = 256 * 1024


async def admit(
    request: web.Request,
    envelopes: list[Envelope],
    actor: str,
    size: int,
    delivery: Delivery | None = None,
) -> list[Admission]:
    """Check one request's envelopes (422 for one that does not fit, nothing queued;
    on the loop unless the body's `size` passes INLINE_BYTES), then admit them in the
    intake's next group commit; answered once that commit is durable. Wakes the
    runtime loop when any was new. `delivery`: the GitHub delivery they were
    translated from, kept beside each one admitted, in the same commit."""
    engine = service(request)
    if size <= INLINE_BYTES:
        checked = engine.checked(envelopes, actor, delivery)
    else:
        checked = await call(engine.checked, envelopes, actor, delivery)
    admitted = await request.app[INTAKE].submit(checked)
    if any(a.admitted for a in admitted):
        wake(request)
    return admitted


def wake(request: web.Request) -> None:
    request.app[WAKE].set()


_dumps = partial(json.dumps, separators=(",", ":"), default=str, allow_nan=False)


def reply(data: Any, status: int = 200) -> web.Response:
    """A JSON answer. Stored data nested too deep to serialise, or holding a number
    JSON cannot write, is answered cut at MAX_ANSWER_DEPTH (docs/api.md#nesting)
    rather than failing the whole answer."""
    try:
        text = _dumps(data)
    except (RecursionError, ValueError):
        text = _dumps(prune(data, MAX_ANSWER_DEPTH))
    return web.json_response(text=text, status=status)
