"""`engine inject FILE|-`: post one envelope (a JSON object) or several (a list) to a
running serve's loopback-only `POST /inject`. Standard library HTTP, no proxy."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from engine.api.auth import OPERATOR_HEADER
from engine.cli import client, exits
from engine.cli.client import add_url_option, read_input
from engine.cli.common import add_json_option, print_json
from engine.cli.operate import actor_of
from engine.cli.render import guarded
from engine.errors import BadRequest

TOKEN_ENV = "ENGINE_TOKEN"
TOKENS_ENV = "ENGINE_OPERATOR_TOKEN"

DESCRIPTION = """\
Admit factory.event/v1 envelopes into a running `engine serve` through POST /inject,
which answers loopback peers only. FILE holds one envelope (a JSON object) or a list
of them (admitted together, or not at all); `-` reads standard input. The journal
records the actor `inject`, or `operator:<NAME>` with --as, which takes that operator's
token: $ENGINE_TOKEN, else NAME's entry in $ENGINE_OPERATOR_TOKEN (name:token,...).

Prints {admitted, duplicate, eventId} for each envelope; a duplicate eventId is
answered `duplicate: true` and writes nothing.

exit codes: 0 admitted (or a duplicate); 1 refused (the reason is printed) or the
runtime is unreachable; 2 usage (unreadable FILE, not JSON, a bad --as name, --as
without the operator's token)"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "inject",
        help="admit envelopes into a running serve (loopback only)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", metavar="FILE", help="a JSON envelope or list of them; - for stdin")
    add_url_option(p)
    p.add_argument("--as", dest="operator", metavar="NAME", help="record operator:<NAME>")
    add_json_option(p)
    p.set_defaults(handler=guarded(run_inject))


def read_source(name: str) -> bytes:
    """The body to send, checked to be JSON (sent unchanged)."""
    body = read_input(name)
    try:
        json.loads(body)
    except ValueError as err:
        raise BadRequest(f"{name} is not JSON: {err}") from None
    return body


def token_of(name: str, environ: dict[str, str]) -> str:
    """The bearer token operator `name` injects with: $ENGINE_TOKEN, else `name`'s entry
    of $ENGINE_OPERATOR_TOKEN (the runtime's own list, when this shell has it).
    BadRequest when neither has one: a named actor takes the operator's token."""
    token = environ.get(TOKEN_ENV, "").strip()
    if token:
        return token
    for entry in environ.get(TOKENS_ENV, "").split(","):
        owner, sep, secret = entry.strip().partition(":")
        if sep and owner == name and secret:
            return secret
    raise BadRequest(
        f"--as {name} records operator:{name}, which takes {name}'s token: set {TOKEN_ENV} "
        f"(or {TOKENS_ENV} with an entry for {name})"
    )


def post(url: str, body: bytes, operator: str | None, token: str | None) -> tuple[int, Any]:
    """(status, JSON answer) of POST /inject; Unavailable when nothing answers."""
    headers = {OPERATOR_HEADER: operator} if operator else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return client.post(url, "/inject", body, headers)


def run_inject(args: argparse.Namespace) -> int:
    name = actor_of(args.operator).removeprefix("operator:") if args.operator else None
    token = token_of(name, dict(os.environ)) if name else None
    status, answer = post(args.url, read_source(args.file), name, token)
    if status >= 400:
        return _refused(status, answer, args.json)
    if args.json:
        print_json(answer)
        return exits.OK
    for item in answer if isinstance(answer, list) else [answer]:
        state = "duplicate (nothing written)" if item.get("duplicate") else "admitted"
        print(f"{item.get('eventId')}: {state}")
    return exits.OK


def _refused(status: int, answer: Any, as_json: bool) -> int:
    if as_json:
        print_json({"status": status, **answer} if isinstance(answer, dict) else answer)
    body = answer if isinstance(answer, dict) else {}
    print(f"error: refused ({status}): {body.get('message', body.get('error'))}", file=sys.stderr)
    for line in body.get("errors", []):
        print(f"  {line}", file=sys.stderr)
    return exits.INVALID
