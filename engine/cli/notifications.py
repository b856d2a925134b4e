"""`engine notifications`: what the engine announced and whether each sink took it
(docs/notifications.md#listing-them), newest first, read from the database through the
same Service as `GET /notifications`; `--json` prints that route's document."""

from __future__ import annotations

import argparse
from typing import Any

from engine.api import wire
from engine.cli.common import add_db_option, add_json_option, add_rules_options
from engine.cli.inspect import more, opened, parser_for, positive
from engine.cli.render import Column, guarded, output, table
from engine.core.delivery import DELIVERY_STATES
from engine.core.paging import NotificationQuery, journal_cursor
from engine.errors import BadRequest

DESCRIPTION = (
    "Notifications, newest first: what each announced (a loop's failure, its breaker, a "
    "recovery, a promoted finding) and its delivery: pending (not yet taken by every "
    "sink, retried with backoff), delivered, or failed (a sink gave up after its "
    "attempts), with each sink's state (docs/notifications.md)."
)

COLUMNS: list[Column] = [
    ("SEQ", "seq"),
    ("AT", "at"),
    ("LOOP", "loop"),
    ("REPO", "repo"),
    ("STATE", "state"),
    ("DELIVERY", "delivery"),
    ("ATTEMPTS", "attempts"),
    ("SINKS", "sinksShown"),
    ("MESSAGE", "message"),
    ("LAST ERROR", "lastError"),
]


def cursor(text: str) -> int:
    try:
        return journal_cursor(text)
    except BadRequest as err:
        raise argparse.ArgumentTypeError(err.message) from None


def register(sub: Any) -> None:
    p = parser_for(sub, "notifications", "list notifications and their delivery", DESCRIPTION)
    p.add_argument("--loop", metavar="LOOP", help="only notifications of this loop")
    p.add_argument(
        "--delivery",
        choices=[*DELIVERY_STATES, "all"],
        default="all",
        help="only notifications in this delivery state (default: %(default)s)",
    )
    p.add_argument("--limit", type=positive, default=50, help="(default: %(default)s)")
    p.add_argument(
        "--before",
        metavar="CURSOR",
        type=cursor,
        help="the page after the one whose `more:` line (or JSON `next`) gave CURSOR",
    )
    add_db_option(p)
    add_rules_options(p)
    add_json_option(p)
    p.set_defaults(handler=guarded(run_notifications))


def sinks_shown(sinks: list[dict[str, Any]]) -> str:
    """`url-1 delivered, webhook failed (3 attempts)`: each sink's state, with its
    attempts unless it took it at the first."""
    return ", ".join(f"{s['sink']} {s['state']}{_attempts(s)}" for s in sinks)


def _attempts(sink: dict[str, Any]) -> str:
    n = sink["attempts"]
    if n == 0 or (n == 1 and sink["state"] == "delivered"):
        return ""
    return f" ({n} attempt{'s' if n > 1 else ''})"


def run_notifications(args: argparse.Namespace) -> int:
    with opened(args) as service:
        now = service.rt.clock()
        delivery = None if args.delivery == "all" else args.delivery
        query = NotificationQuery(args.loop, delivery, args.before)
        doc = wire.notifications(service.notifications_page(query, args.limit))

    def human() -> None:
        rows = [{**n, "sinksShown": sinks_shown(n["sinks"])} for n in doc["notifications"]]
        table(rows, COLUMNS, "no notifications", now)
        more("notifications", args, doc, "loop", *(("delivery",) if delivery else ()))

    return output(doc, args.json, human)
