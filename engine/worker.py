"""The worker: claims queued runs under a lease, executes each through its adapter while
heartbeating, and finishes it with the Execution. Service calls are synchronous
(SQLite) and run in a thread.

Invariants: a run is executed only by the worker holding its lease (the claim is a
compare-and-set), and only while it holds it: when a heartbeat finds the lease gone the
execution is cancelled (a command's process group is killed), and a finish refused for a
lost lease is logged, not retried. A worker that dies leaves its lease to expire; the
reaper then applies the policy (requeue read-only work, fail mutating work).
`stop` ends claiming; the run in hand finishes (within its timeout) unless the task
itself is cancelled."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Mapping
from contextlib import suppress
from pathlib import Path

from engine.adapters import Adapter, Adapters, CommandAdapter, Job
from engine.bootstrap import URL_ENV, is_database_url
from engine.core.records import RunRecord
from engine.errors import Conflict, Unavailable
from engine.loading import Paths, path_environment
from engine.service import Execution, Service
from engine.service.runs import definition_of

log = logging.getLogger("engine.worker")


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def adapters_for(
    db: str, paths: Paths | None = None, overrides: Mapping[str, Adapter] | None = None
) -> Adapters:
    """The adapters of a worker on database `db` with the rules at `paths`: commands
    that declare ENGINE_DB or ENGINE_DATABASE_URL and ENGINE_RULES/REGISTRY/CONFIG (the
    reaper's `engine reap`) reach the same database and rules, whatever their working
    directory.
    `overrides` (e.g. the demo's fake agent) apply on top."""
    environ = dict(os.environ)
    if is_database_url(db):
        environ[URL_ENV] = db
        environ.pop("ENGINE_DB", None)
    elif db != ":memory:":
        environ["ENGINE_DB"] = str(Path(db).resolve())
        environ.pop(URL_ENV, None)  # it would take precedence over ENGINE_DB
    if paths is not None:
        environ.update(path_environment(paths))
    return Adapters(overrides={"command": CommandAdapter(environ=environ), **(overrides or {})})


async def run_worker(
    service: Service,
    worker_id: str,
    stop: asyncio.Event,
    *,
    poll_seconds: float = 1.0,
    lease_seconds: float = 60.0,
    adapters: Adapters | None = None,
) -> None:
    """Work until `stop` is set, polling every `poll_seconds` when the queue is empty."""
    adapters = adapters or Adapters()
    log.info("worker %s: started (lease %ss)", worker_id, lease_seconds)
    while not stop.is_set():
        try:
            run = await work_once(service, worker_id, lease_seconds, adapters)
        # A failed pass (a busy database, a broken record) must not end a long-running
        # worker: it is logged, and any lease it held expires into the reaper's hands.
        except Unavailable as err:  # a busy or unwritable store: one line, no traceback
            log.warning("worker %s: %s; retrying in %ss", worker_id, err.message, poll_seconds)
            run = None
        except Exception:
            log.exception("worker %s: a pass failed", worker_id)
            run = None
        if run is None:
            await _wait(stop, poll_seconds)
    log.info("worker %s: stopped", worker_id)


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    with suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def work_once(
    service: Service,
    worker_id: str,
    lease_seconds: float = 60.0,
    adapters: Adapters | None = None,
) -> RunRecord | None:
    """Claim one run, execute it and finish it: the run as it ended up (also when the
    lease was lost on the way), or None when the queue is empty."""
    run = await asyncio.to_thread(service.claim, worker_id, lease_seconds)
    if run is None:
        return None
    log.info("worker %s: claimed run %s (%s)", worker_id, run.run_id, run.definition)
    return await _process(service, worker_id, run, lease_seconds, adapters or Adapters())


async def _process(
    service: Service, worker_id: str, run: RunRecord, lease_seconds: float, adapters: Adapters
) -> RunRecord:
    if not await asyncio.to_thread(service.start, run, worker_id):
        return await _lost(service, worker_id, run, "before it started")
    execution = await _execute(service, worker_id, run, lease_seconds, adapters)
    if execution is None:
        return await _lost(service, worker_id, run, "while it ran; the execution was stopped")
    try:
        done = await asyncio.to_thread(service.finish, run, worker_id, execution)
    except Conflict:
        return await _lost(service, worker_id, run, "before it finished; the result is dropped")
    log.info(
        "worker %s: run %s %s%s",
        worker_id,
        run.run_id,
        done.state,
        f" ({done.outcome})" if done.outcome else "",
    )
    return done


async def _lost(service: Service, worker_id: str, run: RunRecord, when: str) -> RunRecord:
    log.warning("worker %s: lost the lease of run %s %s", worker_id, run.run_id, when)
    return await asyncio.to_thread(service.run, run.run_id)


async def _execute(
    service: Service, worker_id: str, run: RunRecord, lease_seconds: float, adapters: Adapters
) -> Execution | None:
    """The adapter's Execution, heartbeating meanwhile; None when the lease was lost."""
    job = await asyncio.to_thread(prepare, service, run)
    if isinstance(job, Execution):
        return job
    adapter = adapters.for_definition(job.definition)
    if adapter is None:
        return Execution(result=None, error=f"no adapter '{job.definition.adapter}'")
    task = asyncio.create_task(_guarded(adapter.execute(job), job))
    held = await _heartbeat_until_done(service, worker_id, run.run_id, lease_seconds, task)
    return task.result() if held else None


def prepare(service: Service, run: RunRecord) -> Job | Execution:
    """The job for a run (its artifact directory created), or the Execution that fails
    it when its definition has left the rules."""
    definition = definition_of(service.rt, run.definition)
    if definition is None:
        return Execution(result=None, error=f"'{run.definition}' is no longer in the rules")
    event = service.event(run.event_id)["event"]
    run_dir = service.rt.artifacts / run.run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    return Job(run=run, event=event, definition=definition, run_dir=run_dir)


async def _guarded(execution: Awaitable[Execution], job: Job) -> Execution:
    """An adapter that raises fails its run with the error instead of the worker."""
    try:
        return await execution
    except Exception as err:  # the adapter's bug becomes the run's visible error
        log.exception("adapter %s failed on run %s", job.definition.adapter, job.run.run_id)
        return Execution(result=None, error=f"the {job.definition.adapter} adapter failed: {err}")


async def _heartbeat_until_done(
    service: Service,
    worker_id: str,
    run_id: str,
    lease_seconds: float,
    task: asyncio.Task[Execution],
) -> bool:
    """Extend the lease every third of it until `task` is done: True; False when the
    lease was lost (the task is then cancelled). Cancelling this cancels the task."""
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=lease_seconds / 3)
            if done:
                return True
            if not await asyncio.to_thread(service.heartbeat, run_id, worker_id, lease_seconds):
                return False
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
