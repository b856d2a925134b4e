"""`engine github replay FILE|- --event KIND [--delivery ID]`: send a saved GitHub
delivery body, byte for byte, to a running serve's loopback-only `POST /github/replay`,
which runs the same translation as `POST /github` without a signature. Standard
library HTTP, no proxy."""

from __future__ import annotations

import argparse
import hashlib
import sys
from typing import Any

from engine.cli import client, exits
from engine.cli.client import add_url_option, read_input
from engine.cli.common import add_json_option, print_json
from engine.cli.render import guarded

DESCRIPTION = """\
GitHub intake from this host. See docs/github.md.

actions:
  replay FILE --event KIND [--delivery ID]
      run a saved delivery body through the webhook tables (loops/github.rules)"""

REPLAY_DESCRIPTION = """\
Send a saved GitHub delivery body (FILE, or - for standard input) to a running
`engine serve` through POST /github/replay, which answers loopback peers only and
needs no signature. The translation and the answers are those of POST /github; the
journal records the actor `inject`.

KIND is what GitHub sends as X-GitHub-Event (pull_request, workflow_run, ping...).
The delivery id (X-GitHub-Delivery) defaults to replay-<first 12 hex of the body's
sha256>, so replaying the same file twice is a duplicate.

Prints `admitted`, `duplicate` (nothing written) or `ignored` with the reason.

exit codes: 0 admitted, duplicate or ignored; 1 rejected (the reasons are printed) or
the runtime is unreachable; 2 usage (an unreadable FILE)"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "github",
        help="GitHub intake from this host: replay a saved delivery",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    r = actions.add_parser(
        "replay",
        help="run a saved delivery body through the webhook tables",
        description=REPLAY_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("file", metavar="FILE", help="the delivery body as GitHub sent it; - for stdin")
    r.add_argument("--event", required=True, metavar="KIND", help="the X-GitHub-Event kind")
    r.add_argument("--delivery", metavar="ID", help="the X-GitHub-Delivery id")
    add_url_option(r)
    add_json_option(r)
    r.set_defaults(handler=guarded(run_replay))


def default_delivery(body: bytes) -> str:
    """`replay-` + the first 12 hex digits of the body's sha256: stable per file."""
    return "replay-" + hashlib.sha256(body).hexdigest()[:12]


def post(url: str, body: bytes, kind: str, delivery: str) -> tuple[int, Any]:
    """(status, JSON answer) of POST /github/replay; Unavailable when nothing answers."""
    headers = {"X-GitHub-Event": kind, "X-GitHub-Delivery": delivery}
    return client.post(url, "/github/replay", body, headers)


def run_replay(args: argparse.Namespace) -> int:
    body = read_input(args.file)
    delivery = args.delivery or default_delivery(body)
    status, answer = post(args.url, body, args.event, delivery)
    if args.json:
        print_json({"status": status, "delivery": delivery, "answer": answer})
    if status >= 400 or not isinstance(answer, dict):
        return _refused(status, answer)
    if not args.json:
        print(f"{delivery}: {describe(answer)}")
    return exits.OK


def describe(answer: dict[str, Any]) -> str:
    if answer.get("ignored"):
        return f"ignored ({answer.get('reason')})"
    if answer.get("duplicate"):
        return f"duplicate of {answer.get('eventId')} (nothing written)"
    return f"admitted as {answer.get('eventId')}"


def _refused(status: int, answer: Any) -> int:
    body = answer if isinstance(answer, dict) else {}
    print(f"error: refused ({status}): {body.get('message', body.get('error'))}", file=sys.stderr)
    for line in body.get("errors", []):
        print(f"  {line}", file=sys.stderr)
    return exits.INVALID
