"""`engine runs`, `engine events`, `engine journal`: read the database directly through
the same Service the HTTP API uses. `--json` prints the API's documents."""

from __future__ import annotations

import argparse
import json
import shlex
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from engine.api import wire
from engine.bootstrap import database_exists, database_path, open_service
from engine.cli import exits
from engine.cli.common import (
    add_db_option,
    add_json_option,
    add_rules_options,
    paths_from,
    whole_number,
)
from engine.cli.render import Column, cell, fields, guarded, output, table
from engine.core.decisions import Entity
from engine.core.explain import tree as explain_tree
from engine.core.paging import EventQuery, RunQuery, run_cursor
from engine.core.states import RunState
from engine.errors import BadRequest, NotFound
from engine.service import Service

EPILOG = """\
exit codes: 0 ok; 1 refused (e.g. a proposal that is not open), not found, no
database, or invalid rules (diagnostics on stderr); 2 usage (bad arguments, a bad
--as name, a missing rules directory)"""

RUN_STATES = sorted({*(s.value for s in RunState), "all"})
ENTITIES = tuple(str(e) for e in Entity)


positive = whole_number(1, 1000)


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.05 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"expected seconds from 0.05 to 3600, not '{text}'")
    return value


def add_db_options(parser: argparse.ArgumentParser) -> None:
    add_db_option(parser)
    add_rules_options(parser)
    add_json_option(parser)


def parser_for(sub: Any, name: str, summary: str, description: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=textwrap.fill(description, 88),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return p


def cursor(text: str) -> tuple[str, str]:
    try:
        return run_cursor(text)
    except BadRequest as err:
        raise argparse.ArgumentTypeError(err.message) from None


def add_paging(parser: argparse.ArgumentParser, what: str) -> None:
    """`--loop`, `--limit` and `--before`: a page of a listing (docs/cli.md#paging)."""
    parser.add_argument("--loop", metavar="LOOP", help=f"only {what} of this loop")
    parser.add_argument("--limit", type=positive, default=50, help="(default: %(default)s)")
    parser.add_argument(
        "--before",
        metavar="CURSOR",
        type=cursor,
        help="the page after the one whose `more:` line (or JSON `next`) gave CURSOR",
    )


def more(command: str, args: argparse.Namespace, page: dict[str, Any], *flags: str) -> None:
    """After a page's table: the command that shows the next page, when there is one
    (the filters given, then `--before` the page's `next`)."""
    if page["next"] is None:
        return
    given = [f"--{f} {shlex.quote(str(v))}" for f in flags if (v := getattr(args, f)) is not None]
    if args.limit != 50:
        given.append(f"--limit {args.limit}")
    print(" ".join(["more: engine", command, *given, "--before", page["next"]]))


@contextmanager
def opened(args: argparse.Namespace) -> Iterator[Service]:
    """The service over an existing database (never creates one), opened without
    waiting for the writer lock: a listing answers while another process holds it,
    and a decision's write is refused if the lock stays taken."""
    db = database_path(args.db)
    if not database_exists(db):
        raise NotFound(f"no database at {db} (pass --db, or set ENGINE_DB)")
    service = open_service(db, paths_from(args), probe=False)
    try:
        yield service
    finally:
        service.rt.store.close()


def register(sub: Any) -> None:
    p = parser_for(sub, "runs", "list runs, or show one", "List runs, newest first, or show one.")
    p.add_argument("id", nargs="?", metavar="ID", help="show this run")
    p.add_argument("--state", choices=RUN_STATES, default="all", help="(default: %(default)s)")
    add_paging(p, "runs")
    add_db_options(p)
    p.set_defaults(handler=guarded(run_runs))

    p = parser_for(sub, "events", "list admitted events, or show one", EVENTS)
    p.add_argument("id", nargs="?", metavar="ID", help="show this event")
    p.add_argument("--type", metavar="TYPE", help="only events of this type")
    add_paging(p, "events")
    add_db_options(p)
    p.set_defaults(handler=guarded(run_events))

    p = parser_for(sub, "explain", "why an event happened and what came of it", EXPLAIN)
    p.add_argument(
        "id",
        metavar="ID",
        help="an event id (a delivery's GUID), a slot as LOOP@TIME, a proposal, a run or "
        "an occurrence id",
    )
    add_db_options(p)
    p.set_defaults(handler=guarded(run_explain))

    p = parser_for(sub, "journal", "read the append-only journal", JOURNAL)
    p.add_argument("--entity", choices=ENTITIES, help="only records of this kind")
    p.add_argument("--id", dest="entity_id", metavar="ID", help="only records of this entity")
    p.add_argument(
        "--after", type=whole_number(0, 2**62), default=0, metavar="SEQ", help="records after SEQ"
    )
    p.add_argument("--limit", type=positive, default=100, help="(default: %(default)s)")
    p.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="after the page, print new records as they are written, until Ctrl-C",
    )
    p.add_argument(
        "--interval",
        type=seconds,
        default=1.0,
        metavar="SECONDS",
        help="how often --follow looks for new records (default: %(default)s)",
    )
    add_db_options(p)
    p.set_defaults(handler=guarded(run_journal))


EVENTS = "List admitted events, newest first, or show one with its decision and occurrence."
EXPLAIN = (
    "The causal chain of one event, both ways: what caused it (a slot, a GitHub "
    "delivery, an event that fired an on_event loop, an upstream occurrence, a run's "
    "outcome through a chain rule), its decision with the rule and rules digest, its "
    "occurrence's steps, its proposal and runs, and the events its runs chained "
    "(docs/explain.md)."
)
JOURNAL = (
    "Lifecycle records oldest first, each with its actor (operator:<name>, schedule, "
    "chain, github, system, worker:<id>). Page on with --after <next>."
)

RUN_COLUMNS: list[Column] = [
    ("RUN", "runId"),
    ("STATE", "state"),
    ("DEFINITION", "definition"),
    ("LOOP", "loop"),
    ("APPROVED BY", "approvedBy"),
    ("OUTCOME", "outcome"),
    ("CREATED", "createdAt"),
]
EVENT_COLUMNS: list[Column] = [
    ("EVENT", "eventId"),
    ("TYPE", "type"),
    ("SOURCE", "source"),
    ("LOOP", "loop"),
    ("ADMITTED", "admittedAt"),
    ("BY", "admittedBy"),
]
JOURNAL_COLUMNS: list[Column] = [
    ("SEQ", "seq"),
    ("AT", "at"),
    ("ENTITY", "entity"),
    ("ID", "entityId"),
    ("ACTION", "action"),
    ("ACTOR", "actor"),
    ("TO", "toState"),
    ("NOTE", "note"),
]


def run_runs(args: argparse.Namespace) -> int:
    with opened(args) as service:
        now = service.rt.clock()
        if args.id:
            run = wire.record(service.run(args.id))
            return output({"run": run}, args.json, lambda: fields(run, f"run {args.id}", now))
        state = None if args.state == "all" else args.state
        doc = wire.runs(
            service.runs_page(RunQuery(args.loop, state, before=args.before), args.limit)
        )
        shown = [*(("state",) if state else ()), "loop"]
        return output(doc, args.json, lambda: _paged(doc, "runs", RUN_COLUMNS, args, shown, now))


def run_events(args: argparse.Namespace) -> int:
    with opened(args) as service:
        now = service.rt.clock()
        if args.id:
            doc = wire.event_detail(service.event(args.id))
            return output(doc, args.json, lambda: _show_event(doc, now))
        query = EventQuery(args.loop, args.type, args.before)
        found = wire.events(service.events_page(query, args.limit))
        shown = ["loop", "type"]
        return output(
            found, args.json, lambda: _paged(found, "events", EVENT_COLUMNS, args, shown, now)
        )


def _paged(
    doc: dict[str, Any],
    what: str,
    columns: list[Column],
    args: argparse.Namespace,
    flags: list[str],
    now: datetime,
) -> None:
    table(doc[what], columns, f"no {what}", now)
    more(what, args, doc, *flags)


def _show_event(doc: dict[str, Any], now: datetime) -> None:
    fields(doc["event"], "event", now)
    fields(doc["decision"], "decision", now)
    print(f"occurrence: {doc['occurrence'] or '-'}")


def run_explain(args: argparse.Namespace) -> int:
    with opened(args) as service:
        doc = service.explain(args.id)
        return output(doc, args.json, lambda: print("\n".join(explain_tree(doc))))


def run_journal(args: argparse.Namespace) -> int:
    with opened(args) as service:
        if args.follow:
            return follow(service, args)
        now = service.rt.clock()
        found = service.journal(args.limit, args.after, args.entity, args.entity_id)
        doc = wire.journal(found, args.after)
        rows = doc["entries"]
        return output(doc, args.json, lambda: table(rows, JOURNAL_COLUMNS, "no records", now))


def follow(service: Service, args: argparse.Namespace) -> int:
    """`journal --follow`: every record after --after, one line each (a JSON object per
    line with --json) as it is written, polling every --interval seconds; Ctrl-C ends
    it with exit 0."""
    after = args.after
    try:
        while True:
            found = service.journal(args.limit, after, args.entity, args.entity_id)
            for entry in wire.records(found):
                print(json.dumps(entry, sort_keys=True) if args.json else line(entry), flush=True)
            after = wire.journal(found, after)["next"]
            if len(found) < args.limit:  # caught up: wait for more
                time.sleep(args.interval)
    except KeyboardInterrupt:
        return exits.OK


def line(entry: dict[str, Any]) -> str:
    """A journal record on one line: `42 2026-11-30T09:00:01Z run run-... claimed
    worker:w1 -> claimed: note` (the time whole: a followed line is read as it comes)."""
    to = f" -> {entry['toState']}" if entry["toState"] else ""
    note = f": {entry['note']}" if entry["note"] else ""
    return (
        f"{entry['seq']} {cell(entry['at'])} {entry['entity']} {entry['entityId']} "
        f"{entry['action']} {entry['actor']}{to}{note}"
    )
