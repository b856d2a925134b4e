"""The worker: claims queued runs under a lease, has the service check each one's
authority and start it, executes it through its adapter while heartbeating, and
finishes it with the Execution. Service calls are synchronous (SQLite) and run in a
thread.

Invariants: a run is executed only by the worker holding its lease (the claim is a
compare-and-set), only after the authority check allowed it (a refused run is failed,
never executed), and only while the worker holds the lease: when a heartbeat or the
once-a-second watch finds the lease gone (an operator's cancel, the reaper) the
execution is cancelled at once (a command's process group is killed). A database error
that may pass (`transient`) never ends an execution: heartbeats are tried again, and
recording the result is retried with capped exponential backoff for RECORD_SECONDS.
Meanwhile the result waits on disk (engine.service.executions), so a worker that dies
before recording it, or a database that stays away longer than the lease, leaves it for
the lease-expiry policy (or this worker's next start) to record instead of failing the
run. `stop` ends claiming; the run in hand finishes (within its timeout) unless the
task itself is cancelled."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import TypeVar

from engine.adapters import Adapter, Adapters, CommandAdapter, ControllerAdapter, Job, Wake
from engine.bootstrap import URL_ENV, is_database_url
from engine.core.instances import is_wake
from engine.core.records import LEASED, RunRecord
from engine.errors import Conflict, Unavailable
from engine.loading import Paths, path_environment
from engine.service import Execution, Service, executions, wakes
from engine.service.runs import Start, definition_of

log = logging.getLogger("engine.worker")

T = TypeVar("T")

# How often a running run's state is read, so an operator's cancel stops it promptly.
WATCH_SECONDS = 1.0
# After a heartbeat that failed on a transient error, the next try comes this soon.
HEARTBEAT_RETRY_SECONDS = 1.0
# Recording a result is retried on transient errors for this long (longer than a
# database restart takes), waiting RETRY_FIRST_SECONDS, then twice as long each time,
# at most RETRY_CAP_SECONDS between tries.
RECORD_SECONDS = 300.0
RETRY_FIRST_SECONDS = 0.1
RETRY_CAP_SECONDS = 10.0
# How often an idle worker looks for results left on disk by a dead worker.
PENDING_SWEEP_SECONDS = 15.0


def transient(err: BaseException) -> bool:
    """Whether a store error may pass if tried again: the connection was lost, the
    database is restarting, unavailable or busy. The one place that decides it."""
    if isinstance(err, Unavailable | sqlite3.OperationalError):
        return True
    psycopg = sys.modules.get("psycopg")  # only a PostgreSQL store raises its errors
    return psycopg is not None and isinstance(err, psycopg.OperationalError)


def retry_delay(attempt: int) -> float:
    """Seconds before try `attempt + 1`: capped exponential backoff."""
    return float(min(RETRY_CAP_SECONDS, RETRY_FIRST_SECONDS * 2 ** min(attempt, 32)))


async def retrying(call: Callable[[], T], what: str, seconds: float) -> T:
    """`call()` in a thread, tried again after transient errors for up to `seconds`;
    any other error, or a transient one past the bound, is raised."""
    deadline = time.monotonic() + seconds
    attempt = 0
    while True:
        try:
            return await asyncio.to_thread(call)
        except Exception as err:
            delay = retry_delay(attempt)
            if not transient(err) or time.monotonic() + delay > deadline:
                raise
            log.warning("%s failed (%s); trying again in %.1fs", what, _short(err), delay)
            await asyncio.sleep(delay)
            attempt += 1


def _short(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def adapters_for(
    db: str,
    paths: Paths | None = None,
    overrides: Mapping[str, Adapter] | None = None,
    url: str | None = None,
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
    mine: dict[str, Adapter] = {
        "command": CommandAdapter(environ=environ),
        "controller": ControllerAdapter(environ=environ, url=url),
    }
    return Adapters(overrides={**mine, **(overrides or {})})


async def run_worker(
    service: Service,
    worker_id: str,
    stop: asyncio.Event,
    *,
    poll_seconds: float = 1.0,
    lease_seconds: float = 60.0,
    adapters: Adapters | None = None,
) -> None:
    """Work until `stop` is set, polling every `poll_seconds` when the queue is empty.
    Results left on disk are recorded at the start and every PENDING_SWEEP_SECONDS."""
    adapters = adapters or Adapters()
    log.info("worker %s: started (lease %ss)", worker_id, lease_seconds)
    swept = -PENDING_SWEEP_SECONDS
    while not stop.is_set():
        try:
            if time.monotonic() - swept >= PENDING_SWEEP_SECONDS:
                swept = time.monotonic()
                await record_pending(service, worker_id)
            run = await work_once(service, worker_id, lease_seconds, adapters)
        # A failed pass (a busy database, a broken record) must not end a long-running
        # worker: it is logged, and any lease it held expires into the reaper's hands.
        except Exception as err:
            if transient(err):  # a busy, unwritable or unreachable store: one line
                log.warning(
                    "worker %s: the database is unavailable (%s); retrying in %ss",
                    worker_id,
                    _short(err),
                    poll_seconds,
                )
            else:
                log.exception("worker %s: a pass failed", worker_id)
            run = None
        if run is None:
            await _wait(stop, poll_seconds)
    log.info("worker %s: stopped", worker_id)


async def record_pending(service: Service, worker_id: str) -> list[RunRecord]:
    """Record the results a dead worker (or this worker's previous process) left."""
    recorded = await asyncio.to_thread(service.record_pending, worker_id)
    for run in recorded:
        log.info("worker %s: recorded run %s from its result file", worker_id, run.run_id)
    return recorded


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
    lease was lost on the way, or the check refused it), or None when the queue is
    empty."""
    run = await asyncio.to_thread(service.claim, worker_id, lease_seconds)
    if run is None:
        return None
    log.info("worker %s: claimed run %s (%s)", worker_id, run.run_id, run.definition)
    return await _process(service, worker_id, run, lease_seconds, adapters or Adapters())


async def _process(
    service: Service, worker_id: str, run: RunRecord, lease_seconds: float, adapters: Adapters
) -> RunRecord:
    started = await retrying(
        lambda: service.start(run, worker_id), f"starting run {run.run_id}", lease_seconds / 2
    )
    if started is Start.REFUSED:
        refused = await asyncio.to_thread(service.run, run.run_id)
        log.warning("worker %s: refused run %s: %s", worker_id, run.run_id, refused.error)
        return refused
    if started is Start.LOST:
        return await _lost(service, worker_id, run, "before it started")
    execution = await _execute(service, worker_id, run, lease_seconds, adapters)
    if execution is None:
        return await _lost(service, worker_id, run, "while it ran; the execution was stopped")
    return await _finish(service, worker_id, run, execution)


async def _finish(
    service: Service, worker_id: str, run: RunRecord, execution: Execution
) -> RunRecord:
    """Keep the execution on disk, record it (retrying transient errors), and remove the
    file once it is recorded or can no longer be."""
    run_dir = service.rt.artifacts / run.run_id
    ended = service.rt.now()
    pending = executions.Pending(run.run_id, run.attempts, worker_id, ended, execution)
    await asyncio.to_thread(executions.keep, run_dir, pending)
    try:
        done = await retrying(
            lambda: service.finish(run, worker_id, execution, ended),
            f"recording run {run.run_id}",
            RECORD_SECONDS,
        )
    except Conflict:
        return await _finished_elsewhere(service, worker_id, run, run_dir, execution, ended)
    except Exception as err:
        if not transient(err):
            raise
        log.error(
            "worker %s: could not record run %s for %ss (%s); its result stays in %s for "
            "the lease-expiry policy or this worker's next start to record",
            worker_id,
            run.run_id,
            int(RECORD_SECONDS),
            _short(err),
            executions.path(run_dir),
        )
        return run
    await asyncio.to_thread(executions.drop, run_dir)
    log.info(
        "worker %s: run %s %s%s",
        worker_id,
        run.run_id,
        done.state,
        f" ({done.outcome})" if done.outcome else "",
    )
    return done


async def _finished_elsewhere(
    service: Service,
    worker_id: str,
    run: RunRecord,
    run_dir: Path,
    execution: Execution,
    ended: str,
) -> RunRecord:
    """The lease moved on before the result was recorded: by the reaper (from the result
    file, or by its policy), or by a commit whose answer the database never sent. When
    the run was not recorded with this result, the journal still learns what the
    execution came to (`late_result`)."""
    now = await retrying(lambda: service.run(run.run_id), f"reading run {run.run_id}", 30)
    if now.finished_at is not None and now.result is not None:
        if now.state not in LEASED:
            await asyncio.to_thread(executions.drop, run_dir)
        log.info("worker %s: run %s was recorded %s", worker_id, run.run_id, now.state)
        return now
    await retrying(
        lambda: service.late_result(run, worker_id, execution, ended),
        f"journaling the late result of run {run.run_id}",
        30,
    )
    if now.state not in LEASED:
        await asyncio.to_thread(executions.drop, run_dir)
    log.warning(
        "worker %s: lost the lease of run %s before it finished (it is %s); what the "
        "execution came to is journaled as late_result",
        worker_id,
        run.run_id,
        now.state,
    )
    return now


async def _lost(service: Service, worker_id: str, run: RunRecord, when: str) -> RunRecord:
    now = await asyncio.to_thread(service.run, run.run_id)
    log.warning(
        "worker %s: lost the lease of run %s %s (it is %s)", worker_id, run.run_id, when, now.state
    )
    return now


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
    wake = _wake(service, run) if is_wake(definition) else None
    if isinstance(wake, Execution):
        return wake
    return Job(run=run, event=event, definition=definition, run_dir=run_dir, wake=wake)


def _wake(service: Service, run: RunRecord) -> Wake | Execution:
    """What a wake's adapter is handed: its controller, and its work's context as the
    work item is now."""
    rt = service.rt
    loop = wakes.instance_of(rt, run)
    work_id = wakes.work_of(run)
    if loop is None or loop.work is None or loop.work.controller is None or work_id is None:
        return Execution(result=None, error=f"run '{run.run_id}' wakes no bound instance")
    controller = rt.rules.controllers[loop.work.controller]
    item = service.work_item(work_id)
    return Wake(
        controller,
        work_id,
        wakes.context_of(item),
        lambda: wakes.claimed(rt, work_id, run.run_id),
    )


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
    """Watch the lease (see `_watch`) until `task` is done: True; False as soon as the
    lease is definitely gone, and the task is then cancelled. A slow database never
    holds up a finished task. Cancelling this cancels the task."""
    watch = asyncio.create_task(_watch(service, worker_id, run_id, lease_seconds))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
        if watch.done():
            watch.result()  # a watch that failed (not transiently) fails the pass
        return not watch.done() or task.done()
    finally:
        watch.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait({task})


async def _watch(service: Service, worker_id: str, run_id: str, lease_seconds: float) -> None:
    """Return once the lease is definitely lost (an operator cancelled the run, the
    reaper recovered it): the lease is extended every third of it, and the run's state
    read every WATCH_SECONDS in between. A transient database error is no answer: the
    execution goes on, the heartbeat is tried again soon, and a database that stays
    away past the lease leaves the decision to the reaper."""
    interval = lease_seconds / 3
    beat_at = time.monotonic() + interval
    while True:
        await asyncio.sleep(max(0.0, min(WATCH_SECONDS, beat_at - time.monotonic())))
        if time.monotonic() >= beat_at:
            held = await _ask(lambda: service.heartbeat(run_id, worker_id, lease_seconds))
            retry = min(interval, HEARTBEAT_RETRY_SECONDS)
            beat_at = time.monotonic() + (retry if held is None else interval)
        else:
            held = await _ask(lambda: _holds(service, run_id, worker_id))
        if held is False:
            return


async def _ask(question: Callable[[], bool]) -> bool | None:
    """The store's answer, or None when a transient error left the question open."""
    try:
        return await asyncio.to_thread(question)
    except Exception as err:
        if not transient(err):
            raise
        log.warning("the database did not answer (%s); the run goes on", _short(err))
        return None


def _holds(service: Service, run_id: str, worker_id: str) -> bool:
    """Whether the worker still holds the run's lease, as the database says now."""
    run = service.run(run_id)
    return run.lease_owner == worker_id and run.state in LEASED
