"""`engine emit TYPE`: the host clock bridge's one act (docs/deploy.md#engine-emit). Runs
the gate (an argv, never a shell), then admits one typed event into a running serve
over the signed `POST /events`, retrying while no runtime answers. A host timer
(launchd, systemd) calls it; it does no work."""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import time
import uuid
from datetime import datetime
from typing import Any

from engine.api import signing
from engine.bridge import bridge_event_id, bridge_slot, retry_delays, tick_payload
from engine.cli import client, exits
from engine.cli.client import add_url_option
from engine.cli.common import add_json_option, number_between, print_json
from engine.cli.render import guarded
from engine.clock import Clock, process_clock, unix_seconds
from engine.core.durations import DurationError, parse_duration
from engine.core.envelope import iso
from engine.errors import BadRequest, Unavailable

SOURCE = "bridge"
SECRET_ENV = "ENGINE_EVENT_SECRET"
RETRIES = 5
FIRST_WAIT_SECONDS = 0.5
RETRY_MAX_SECONDS = 8.0

DESCRIPTION = """\
Admit one typed event into a running `engine serve` through the signed POST /events
(HMAC with $ENGINE_EVENT_SECRET), as source `bridge`. A host timer rendered by
`engine render` calls this; the runtime never installs or edits timers.

--gate CMD runs first (split like a shell would, but run without one): a non-zero exit
means "not now", an observed no-op that exits 0 and admits nothing. --dry CMD runs
next, for the log; when it fails nothing is admitted and the exit is 1.

With --loop NAME --every DURATION the event is that bridge loop's tick: payload
{loop, slot, cadenceSeconds, skippedSlots} over --payload, event id
bridge:<loop>:<slot> (the slot is the epoch floor of the cadence; --event-id is not
allowed), so a second post in one slot is a duplicate. Otherwise the event id is
--event-id or a fresh one.

While no runtime answers at --url (the connection refused or failing: a serve still
starting at boot) or it answers 503, the post is retried --retries times, waiting
0.5 s doubling up to --retry-max-seconds, jittered, one log line per retry. A retry
is safe: the event id is decided once (a slot's, or the given one), so a post that
did arrive is a duplicate. Any other answer, a 4xx above all, is never retried.

exit codes: 0 admitted, a duplicate, or the gate said no; 1 refused (the reason is
printed), the runtime still unreachable after the last retry, or the gate or dry
command could not run or the dry command failed; 2 usage (bad JSON, no secret)"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "emit",
        help="admit one event into a running serve after a gate (the host clock bridge)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("type", metavar="TYPE", help="the registered event type")
    p.add_argument("--payload", default="{}", metavar="JSON", help="a JSON object")
    p.add_argument("--event-id", metavar="ID", help="the event id (default: a fresh one)")
    p.add_argument("--gate", metavar="CMD", help="run first; a non-zero exit admits nothing")
    p.add_argument("--dry", metavar="CMD", help="run after the gate, for the log")
    p.add_argument("--loop", metavar="NAME", help="post the tick of this bridge loop")
    p.add_argument("--every", metavar="DURATION", help="the bridge loop's cadence (with --loop)")
    p.add_argument(
        "--retries",
        type=number_between(int, 0, 100),
        default=RETRIES,
        metavar="N",
        help="retries while no runtime answers (default: %(default)s)",
    )
    p.add_argument(
        "--retry-max-seconds",
        type=number_between(float, 0.01, 3600),
        default=RETRY_MAX_SECONDS,
        metavar="SECONDS",
        help="the longest wait between two attempts (default: %(default)s)",
    )
    add_url_option(p)
    add_json_option(p)
    p.set_defaults(handler=guarded(run_emit))


def _log(message: str) -> None:
    """One line for the timer's log (launchd's or the journal)."""
    print(f"engine emit: {message}", file=sys.stderr, flush=True)


def run_command(text: str, what: str) -> int | None:
    """Run CMD (shlex-split, no shell) with its output in the log; its exit status, or
    None (logged) when it could not be started."""
    argv = shlex.split(text)
    if not argv:
        raise BadRequest(f"--{what} is empty")
    try:
        return subprocess.run(argv, check=False).returncode
    except OSError as err:
        _log(f"{what} {argv[0]!r} could not run: {err.strerror}")
        return None


def build_envelope(args: argparse.Namespace, now: datetime) -> dict[str, Any]:
    """The envelope to post (validated by the runtime on admission)."""
    try:
        payload = json.loads(args.payload)
    except ValueError as err:
        raise BadRequest(f"--payload is not JSON: {err}") from None
    if not isinstance(payload, dict):
        raise BadRequest("--payload must be a JSON object")
    subject = ""
    if args.loop is not None:
        if args.every is None:
            raise BadRequest("--loop needs --every DURATION (the cadence of its host_clock loop)")
        if args.event_id is not None:
            raise BadRequest(
                "--event-id cannot be given with --loop: a loop's tick has its slot's id "
                "(bridge:<loop>:<slot>), so each slot is admitted once"
            )
        try:
            every = parse_duration(args.every)
        except DurationError as err:
            raise BadRequest(f"--every: {err}") from None
        slot = bridge_slot(now, every)
        payload = tick_payload(payload, args.loop, slot, every)
        event_id = bridge_event_id(args.loop, slot)
        subject = args.loop
    else:
        event_id = args.event_id or f"emit:{uuid.uuid4().hex}"
    return {
        "schemaVersion": "factory.event/v1",
        "eventId": event_id,
        "type": args.type,
        "source": SOURCE,
        "subject": subject,
        "occurredAt": iso(now),
        "payload": payload,
    }


def signed(secret: str, body: bytes, clock: Clock) -> dict[str, str]:
    """The signature headers, made afresh for each attempt (the timestamp is checked
    against the runtime's clock: ENGINE_NOW's when set, docs/cli.md#environment)."""
    timestamp = str(unix_seconds(clock))
    return {
        signing.TIMESTAMP_HEADER: timestamp,
        signing.SIGNATURE_HEADER: signing.sign(secret.encode(), timestamp, body),
    }


def post_with_retries(
    args: argparse.Namespace, body: bytes, secret: str, clock: Clock
) -> tuple[int, Any]:
    """POST the envelope; while no runtime answers (Unavailable) or it answers 503,
    wait and post the same body again, at most --retries times. Unavailable after the
    last attempt; any other answer is returned as it came."""
    waits = retry_delays(args.retries, FIRST_WAIT_SECONDS, args.retry_max_seconds, random.random)
    attempt = 0
    while True:
        attempt += 1
        code: int | None = None
        try:
            code, answer = client.post(args.url, "/events", body, signed(secret, body, clock))
        except Unavailable as err:
            why = err.message
        else:
            if code != 503:
                return code, answer
            why = f"the runtime answered 503 ({_reason(answer)})"
        if attempt > len(waits):
            if code is None:
                raise Unavailable(f"{why} (gave up after {attempt} attempts)")
            return code, answer
        wait = waits[attempt - 1]
        _log(f"{why}; retry {attempt} of {len(waits)} in {wait:.1f}s")
        time.sleep(wait)


def _reason(answer: Any) -> Any:
    found = answer if isinstance(answer, dict) else {}
    return found.get("message", found.get("error"))


def run_emit(args: argparse.Namespace) -> int:
    secret = os.environ.get(SECRET_ENV)
    if not secret:
        raise BadRequest(f"{SECRET_ENV} is not set: POST /events needs the shared secret")
    clock = process_clock()
    envelope = build_envelope(args, clock())  # usage errors before any gate runs
    if args.gate:
        status = run_command(args.gate, "gate")
        if status is None:
            return exits.INVALID
        if status != 0:
            _log(f"gate said no (exit {status}): nothing admitted for {args.type}")
            if args.json:
                print_json({"admitted": False, "gate": status})
            return exits.OK
    if args.dry:
        status = run_command(args.dry, "dry")
        if status != 0:
            _log(f"dry command failed (exit {status}): nothing admitted for {args.type}")
            return exits.INVALID
    body = json.dumps(envelope, sort_keys=True).encode()
    code, answer = post_with_retries(args, body, secret, clock)
    if code >= 400:
        found = answer if isinstance(answer, dict) else {}
        reason = _reason(answer)
        if args.json:
            print_json({"status": code, **found})
        print(f"error: refused ({code}): {reason}", file=sys.stderr)
        for line in found.get("errors", []):
            print(f"  {line}", file=sys.stderr)
        return exits.INVALID
    if args.json:
        print_json(answer)
        return exits.OK
    state = "duplicate (nothing written)" if answer.get("duplicate") else "admitted"
    print(f"{answer.get('eventId', envelope['eventId'])}: {state}")
    return exits.OK
