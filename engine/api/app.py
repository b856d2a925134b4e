"""The aiohttp application: `make_app(service, settings)`. Resources live in
`cleanup_ctx` and are released in reverse order on shutdown: the notifier stops (after
the notification in hand), the embedded worker stops, then the runtime loop (its
in-flight pump finishes its transaction), then the intake's writer (what is queued
commits), then the store closes (after any write still holding it)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiohttp import web

from engine.api.context import HURRY, INTAKE, SERVICE, SETTINGS, WAKE
from engine.api.errors import error_middleware
from engine.api.group_commit import GroupCommit
from engine.api.observe import OBSERVED, Observed, observe_middleware
from engine.api.routes import ROUTES
from engine.api.settings import Settings
from engine.errors import Unavailable
from engine.service import Service
from engine.service.graduation import DROPPED
from engine.web import pages
from engine.worker import run_worker

log = logging.getLogger("engine.api")


def make_app(service: Service, settings: Settings) -> web.Application:
    app = web.Application(middlewares=[observe_middleware, error_middleware])
    app[OBSERVED] = Observed()
    app[SERVICE] = service
    app[SETTINGS] = settings
    app[WAKE] = asyncio.Event()
    app[HURRY] = asyncio.Event()
    app[INTAKE] = GroupCommit(service.admit_batch)
    app.cleanup_ctx.extend([_store, _intake, _runtime_loop, _worker, _notifier])
    for table in ROUTES:
        app.add_routes(table)
    pages.setup(app)  # the operator's web pages at / (docs/web.md)
    return app


async def pump_forever(
    service: Service,
    wake: asyncio.Event,
    stop: asyncio.Event,
    idle: float,
    observe: Callable[[float], None] = lambda seconds: None,
) -> None:
    """The runtime loop: publish chained events and plan admitted ones, in a thread;
    then sleep until `idle` passes or an admission (or a finished watch probe) wakes it.
    It never waits on a probe: those run in the probe pool, and a pass records the polls
    that finished. `observe` is told how long each pass that did some work took.

    Before its first pass (so before the scheduler's), it applies what an operator
    deferred to this serve start (docs/work.md#graduating-an-instance), once; a store
    that cannot take it yet is asked again on the next pass, and no pass runs before.
    Any other failure of it is logged and leaves what is deferred for the next start
    (the instances stay in shadow): it never holds the runtime loop."""
    at_start = True
    while not stop.is_set():
        wake.clear()
        started = time.perf_counter()
        try:
            if at_start:
                try:
                    await asyncio.to_thread(_serve_started, service)
                except Unavailable:
                    raise
                except Exception:
                    log.exception("serve start: the deferred graduations failed; the rest wait")
                at_start = False
            if await asyncio.to_thread(service.pump, wait_for_probes=False):
                observe(time.perf_counter() - started)
        except Unavailable as err:  # a busy or unwritable store: one line, no traceback
            log.warning("runtime loop: %s; retrying in %.1fs", err.message, idle)
        except Exception:
            log.exception("runtime loop: a pass failed; retrying in %.1fs", idle)
        if stop.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), idle)


def _serve_started(service: Service) -> None:
    """What a serve start applies once: the graduations deferred to it."""
    for applied in service.graduate_deferred():
        b = applied.binding
        if applied.dropped is None:
            log.info(
                "graduated %s@%s out of shadow (deferred by %s)",
                b.shape,
                b.work_id,
                applied.deferred_by,
            )
        else:
            log.warning(
                "dropped the graduation of %s@%s deferred by %s: %s",
                b.shape,
                b.work_id,
                applied.deferred_by,
                DROPPED[applied.dropped],
            )


async def notify_forever(service: Service, stop: threading.Event, every: float) -> None:
    """Serve's notifier (docs/notifications.md#delivery): a delivery pass every `every`
    seconds, in a thread of its own, so a slow or hanging sink never holds the runtime
    loop, the intake or the reads; a pass ends after the notification in hand once
    `stop` is set."""
    with ThreadPoolExecutor(1, thread_name_prefix="engine-notify") as thread:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            try:
                await loop.run_in_executor(thread, service.deliver_notifications, stop.is_set)
            except Unavailable as err:  # a busy or unwritable store: one line, no traceback
                log.warning("notifier: %s; retrying in %.1fs", err.message, every)
            except Exception:
                log.exception("notifier: a pass failed; retrying in %.1fs", every)
            await loop.run_in_executor(thread, stop.wait, every)


def _spawn(coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
    task = asyncio.create_task(coro, name=name)
    task.add_done_callback(_report_crash)
    return task


def _report_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("%s stopped on an error", task.get_name(), exc_info=task.exception())


async def _drain(
    task: asyncio.Task[None], grace: float | None, hurry: asyncio.Event | None = None
) -> None:
    """Wait for a task told to stop; cancel it after `grace` seconds, or at once when
    `hurry` is set (a second signal)."""
    waits: set[asyncio.Future[Any]] = {task}
    if hurry is not None:
        waits.add(asyncio.ensure_future(hurry.wait()))
    try:
        await asyncio.wait(waits, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for other in waits - {task}:
            other.cancel()
    if not task.done():
        why = "on a second signal" if hurry and hurry.is_set() else f"within {grace:.0f}s"
        log.warning("%s did not stop %s; cancelling it", task.get_name(), why)
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):  # crashes: _report_crash
        await task


async def _store(app: web.Application) -> AsyncIterator[None]:
    yield
    await asyncio.to_thread(app[SERVICE].rt.store.close)


async def _intake(app: web.Application) -> AsyncIterator[None]:
    yield
    await app[INTAKE].close()  # after the last request: what it queued commits first


def _waker(event: asyncio.Event) -> Callable[[], None]:
    """A callable any thread may call to set `event` on the running event loop."""
    loop = asyncio.get_running_loop()

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed: serve has stopped
            loop.call_soon_threadsafe(event.set)

    return wake


async def _runtime_loop(app: web.Application) -> AsyncIterator[None]:
    stop = asyncio.Event()
    app[SERVICE].wake_on_polls(_waker(app[WAKE]))
    observe = app[OBSERVED].passes.observe
    loop = pump_forever(app[SERVICE], app[WAKE], stop, app[SETTINGS].pump_seconds, observe)
    task = _spawn(loop, "runtime loop")
    yield
    stop.set()
    app[WAKE].set()
    await _drain(task, None)  # never hurried: its pass finishes its transaction


async def _notifier(app: web.Application) -> AsyncIterator[None]:
    service = app[SERVICE]
    if not service.notifying.sinks:
        yield
        return
    stop = threading.Event()
    task = _spawn(notify_forever(service, stop, app[SETTINGS].notify_seconds), "notifier")
    yield
    stop.set()
    await _drain(task, None)  # never hurried: the notification in hand is recorded


async def _worker(app: web.Application) -> AsyncIterator[None]:
    settings = app[SETTINGS]
    if not settings.worker:
        yield
        return
    stop = asyncio.Event()
    work = run_worker(
        app[SERVICE],
        settings.worker_id,
        stop,
        poll_seconds=settings.poll_seconds,
        lease_seconds=settings.lease_seconds,
        adapters=settings.adapters,
    )
    task = _spawn(work, f"worker {settings.worker_id}")
    yield
    stop.set()
    await _drain(task, settings.shutdown_grace, app[HURRY])
