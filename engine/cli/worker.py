"""`engine worker`: claim and execute queued runs until SIGTERM or SIGINT.

At start it records the results an earlier process with the same `--id` (or a worker
whose lease expired) left on disk. The first signal stops claiming and lets the run in
hand finish (within its timeout); a second one cancels it (its command's process group
is killed, its lease expires into the reaper's hands). Either way the exit is clean (0).
`--once` executes at most one run."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
from typing import Any

from dsl.diagnostics import RulesError
from engine.adapters import Adapters
from engine.api import wire
from engine.bootstrap import database_path, log_rule_warnings, open_service
from engine.cli import exits
from engine.cli.common import (
    add_db_option,
    add_json_option,
    add_rules_options,
    number_between,
    paths_from,
)
from engine.cli.render import fail
from engine.core.records import RunRecord
from engine.errors import EngineError
from engine.logs import add_options as add_log_options
from engine.logs import configure_from as configure_logging
from engine.service import Service
from engine.worker import (
    adapters_for,
    default_worker_id,
    record_pending,
    run_worker,
    work_once,
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "worker",
        help="execute queued runs until SIGTERM/SIGINT",
        description="Claim queued runs under a lease, execute them through their adapter "
        "(heartbeating every third of the lease) and record the result. Exit 0 on a clean "
        "stop; 1 a retry may pass (the database unreachable or busy); 2 a configuration a "
        "restart cannot fix (invalid rules, a bad setting; docs/cli.md#exit-codes).",
    )
    add_db_option(p)
    p.add_argument("--id", metavar="NAME", help="worker id in leases and the journal")
    p.add_argument(
        "--lease",
        type=number_between(float, 1, 86_400),
        default=60.0,
        metavar="SECONDS",
        help="lease length, 1 to 86400 (60)",
    )
    p.add_argument(
        "--poll",
        type=number_between(float, 0.01, 3600),
        default=1.0,
        metavar="SECONDS",
        help="idle poll interval, 0.01 to 3600 (1)",
    )
    p.add_argument("--once", action="store_true", help="execute at most one run, then exit")
    add_rules_options(p)
    add_json_option(p)
    add_log_options(p)
    p.set_defaults(handler=handler)


def handler(args: argparse.Namespace) -> int:
    try:
        configure_logging(args)
        db = database_path(args.db)
        service = open_service(db, paths_from(args))
    except (EngineError, RulesError) as err:  # rules, settings, a database it cannot use
        return exits.at_start(err, fail(err))
    log_rule_warnings(service, logging.getLogger("engine.worker"))
    worker_id = args.id or default_worker_id()
    adapters = adapters_for(db, paths_from(args))
    try:
        if args.once:
            _show(asyncio.run(_once(service, worker_id, adapters, args.lease)), args.json)
        else:
            asyncio.run(_until_signalled(service, worker_id, adapters, args))
    finally:
        service.rt.store.close()
    return exits.OK


async def _once(
    service: Service, worker_id: str, adapters: Adapters, lease: float
) -> RunRecord | None:
    """Record what an earlier process of this worker left on disk, then one run."""
    await record_pending(service, worker_id)
    return await work_once(service, worker_id, lease, adapters)


async def _until_signalled(
    service: Service, worker_id: str, adapters: Adapters, args: argparse.Namespace
) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_worker(
            service,
            worker_id,
            stop,
            poll_seconds=args.poll,
            lease_seconds=args.lease,
            adapters=adapters,
        )
    )

    def on_signal() -> None:
        if stop.is_set():
            task.cancel()
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    try:
        await task
    except asyncio.CancelledError:
        logging.getLogger("engine.worker").warning("worker %s: cancelled mid-run", worker_id)


def _show(run: RunRecord | None, as_json: bool) -> None:
    if as_json:
        print(json.dumps(wire.record(run), sort_keys=True))
    elif run is None:
        print("no queued run")
    else:
        outcome = f" {run.outcome}" if run.outcome else ""
        print(f"run {run.run_id}: {run.state}{outcome}" + (f" ({run.error})" if run.error else ""))
