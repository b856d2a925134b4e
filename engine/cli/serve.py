"""`engine serve`: load the rules (fail closed), open the store, and run the HTTP API
with the runtime loop and (unless --no-worker) an embedded worker."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import Any

from dsl.diagnostics import RulesError
from engine.api.settings import EVENT_SECRET_ENV, GITHUB_SECRET_ENV, OPERATOR_TOKEN_ENV, Settings
from engine.bootstrap import database_path, log_rule_warnings, open_service
from engine.cli import exits
from engine.cli.common import add_db_option, add_rules_options, number_between, paths_from
from engine.cli.render import fail
from engine.errors import EngineError
from engine.logs import add_options as add_log_options
from engine.logs import configure_from as configure_logging
from engine.notify import config as notify_config
from engine.notify.config import Notifying
from engine.notify.sinks import WebhookSink
from engine.service import probing

log = logging.getLogger("engine.serve")

DESCRIPTION = f"""\
Run the runtime: the HTTP API (docs/api.md), the operator's web pages at / (sign in
with an operator token; docs/web.md), a loop that publishes chained events and plans
every admitted event (woken at once by an admission), and an embedded worker that
executes approved runs (--no-worker to run workers elsewhere: `engine worker`).

Secrets come from the environment only:
  {EVENT_SECRET_ENV}    HMAC secret of signed POST /events (unset: refuses all)
  {OPERATOR_TOKEN_ENV}  operator tokens, name:token[,name:token...] (unset: the
                         operator routes answer 401)
  {GITHUB_SECRET_ENV}  GitHub webhook secret(s), comma-separated for
                         rotation (unset: POST /github answers 401)

Notifications go to every sink of ENGINE_NOTIFY_URLS (Apprise URLs),
ENGINE_NOTIFY_WEBHOOK (signed with ENGINE_NOTIFY_WEBHOOK_SECRET, a whsec_ key),
ENGINE_NOTIFY_LOG (a JSON-lines file) and config/notifications.yaml, delivered off the
runtime loop and retried with backoff (docs/notifications.md); none: they stay in the
database (`engine notifications` lists them).

Logs go to stderr, as text or one JSON object per line (--log-format, else
ENGINE_LOG_FORMAT), at --log-level and above (else ENGINE_LOG_LEVEL, else info);
each HTTP line carries its request id (docs/observability.md#logs).

A clock for tests and demos: ENGINE_NOW=<ISO-8601> starts the runtime's clock at that
instant and lets it advance in real time.

SIGTERM or SIGINT stops intake, lets in-flight writes finish, stops the loop and the
worker, closes the store and exits 0. A second signal during that shutdown cancels the
run in hand instead of waiting for it, and the exit is still 0.

The HTTP edge (docs/api.md#connections-and-timeouts): at most --max-connections open
at once (a new one beyond takes the place of the oldest idle one, else is answered 503
and closed); a connection idle, or whose headers are unfinished, for --idle-timeout
seconds is closed; a body not arrived --body-timeout seconds after its headers is
answered 408. The open-files limit is raised to its hard limit at start.

Condition-watch probes run in a pool of --probe-threads threads of their own; the
runtime loop never waits on one (docs/scheduling.md#condition-watches).

exit codes (docs/cli.md#exit-codes): 0 stopped cleanly; 1 a retry may pass (the
database unreachable or busy, the address in use); 2 a configuration a restart cannot
fix (invalid rules, a missing directory, a bad setting, a malformed
{OPERATOR_TOKEN_ENV}, a database the engine must not use): nothing is served"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="run the runtime (HTTP API, runtime loop, embedded worker)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_db_option(p)
    p.add_argument("--host", default="127.0.0.1", help="listen address (default: %(default)s)")
    p.add_argument("--port", type=port, default=7520, help="listen port (default: %(default)s)")
    p.add_argument("--no-worker", action="store_true", help="do not run the embedded worker")
    edge = Settings()
    p.add_argument(
        "--max-connections",
        type=number_between(int, 1, 1_000_000),
        default=edge.max_connections,
        metavar="N",
        help="open connections served at once (default: %(default)s)",
    )
    p.add_argument(
        "--idle-timeout",
        type=number_between(float, 0.1, 86_400),
        default=edge.idle_seconds,
        metavar="SECONDS",
        help="close a connection idle (or its headers unfinished) this long (default: %(default)s)",
    )
    p.add_argument(
        "--body-timeout",
        type=number_between(float, 0.1, 86_400),
        default=edge.body_seconds,
        metavar="SECONDS",
        help="answer 408 to a body not arrived this long after its headers (default: %(default)s)",
    )
    p.add_argument(
        "--probe-threads",
        type=number_between(int, 1, probing.MOST),
        default=probing.SIZE,
        metavar="N",
        help="watch probes that run side by side, off the runtime loop (default: %(default)s)",
    )
    add_rules_options(p)
    add_log_options(p)
    p.set_defaults(handler=run_serve)


def port(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a number from 0 to 65535, not '{text}'")
    return int(text)


def _warn_closed(settings: Settings) -> None:
    if settings.event_secret is None:
        log.warning("%s is not set: POST /events refuses every request", EVENT_SECRET_ENV)
    if not settings.operators:
        log.warning("%s is not set: the operator routes answer 401", OPERATOR_TOKEN_ENV)
    if not settings.github_secrets:
        log.warning("%s is not set: POST /github refuses every delivery", GITHUB_SECRET_ENV)


def _tell_sinks(notifying: Notifying) -> None:
    """One line naming each sink (its secrets masked), and a warning for an unsigned
    webhook."""
    if not notifying.sinks:
        log.info("notifications: no sink configured; they stay in the database")
        return
    shown = ", ".join(f"{s['name']} ({s['kind']} {s['target']})" for s in notifying.describe())
    log.info("notifications go to %d sink(s): %s", len(notifying.sinks), shown)
    for sink in notifying.sinks:
        if isinstance(sink, WebhookSink) and sink.key is None:
            log.warning("sink %s: the webhook is not signed (no secret configured)", sink.name)


def run_serve(args: argparse.Namespace) -> int:
    from engine.api.app import make_app  # imported here: the other commands start without aiohttp
    from engine.api.serving import serve
    from engine.worker import adapters_for

    try:
        configure_logging(args)
        db, paths = database_path(args.db), paths_from(args)
        # where a woken controller reports back (docs/work.md#waking-the-controller)
        shown = "127.0.0.1" if args.host in ("0.0.0.0", "", "::") else args.host
        host = f"[{shown}]" if ":" in shown else shown
        adapters = adapters_for(db, paths, url=f"http://{host}:{args.port}")
        settings = Settings.from_env(
            worker=not args.no_worker,
            adapters=adapters,
            max_connections=args.max_connections,
            idle_seconds=args.idle_timeout,
            body_seconds=args.body_timeout,
        )
        service = open_service(db, paths, probe_threads=args.probe_threads)
        service.notifying = notify_config.load(paths.config, os.environ)
    except (EngineError, RulesError) as err:  # bad settings, ENGINE_NOW, rules, sinks
        return exits.at_start(err, fail(err))
    _warn_closed(settings)
    _tell_sinks(service.notifying)
    log_rule_warnings(service, log)
    app = make_app(service, settings)
    try:
        asyncio.run(serve(app, args.host, args.port, settings, log.info))
    except OSError as err:
        print(f"error: cannot serve on {args.host}:{args.port}: {err.strerror}", file=sys.stderr)
        return exits.INVALID
    log.info("stopped")
    return exits.OK
