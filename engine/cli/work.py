"""`engine work` (docs/work.md): add, list, show, block, reopen, complete and cancel
work items on the database, as an operator (`--as NAME`, the journal's actor). A
controller does not use this command: it claims and reports through the HTTP API with
its own token (docs/work.md#over-http)."""

from __future__ import annotations

import argparse
from typing import Any

from engine.cli.inspect import add_db_options, cursor, more, opened, parser_for, positive
from engine.cli.operate import actor_of, add_as
from engine.cli.render import Column, fields, guarded, output, table
from engine.core.work import (
    WorkQuery,
    WorkRequest,
    WorkState,
    WorkTrigger,
    as_dict,
    binding_dict,
)

STATES = (*(s.value for s in WorkState), "all")
COLUMNS: list[Column] = [
    ("WORK", "workId"),
    ("STATE", "state"),
    ("KEY", "semanticKey"),
    ("TITLE", "title"),
    ("REPO", "repo"),
    ("LEASE", "leaseOwner"),
    ("UPDATED", "updatedAt"),
]
WORK = (
    "Work items: finite objectives the engine keeps moving until they end (docs/work.md). "
    "Opening a semantic key a live item holds answers that item (existing work first). "
    "A controller claims the lease itself, over HTTP with its own token."
)
MOVES = {
    "block": (WorkTrigger.BLOCK, "the work waits on something outside it"),
    "reopen": (WorkTrigger.REOPEN, "back to open, the lease dropped"),
    "complete": (WorkTrigger.COMPLETE, "the work is done (terminal)"),
    "cancel": (WorkTrigger.CANCEL, "the work will not be done (terminal)"),
}
SHARED = frozenset({"db", "rules", "registry", "config", "json"})


def register(sub: Any) -> None:
    p = parser_for(sub, "work", "work items: add, list, show, bind, block, complete, cancel", WORK)
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    add = actions.add_parser(
        "add",
        help="open work (or answer the live item holding its key)",
        description="Open a work item; a semantic key a live item holds answers that item.",
    )
    add.add_argument("key", metavar="KEY", help="the semantic key, e.g. repair:r1#42")
    add.add_argument("title", metavar="TITLE")
    add.add_argument("--repo", metavar="REPO", help="the repository it belongs to")
    add.add_argument("--summary", default="", metavar="TEXT", help="what a controller is told")
    add.add_argument(
        "--link", action="append", default=[], metavar="URL", help="a link (repeatable)"
    )
    add_as(add)
    add_db_options(add)
    add.set_defaults(handler=guarded(run_add))
    shown = actions.add_parser(
        "list", help="list work items", description="Work items, newest first, a page at a time."
    )
    shown.add_argument("--state", choices=STATES, default="all", help="(default: %(default)s)")
    shown.add_argument("--repo", metavar="REPO", help="only this repository's")
    shown.add_argument("--key", metavar="KEY", help="only the items of this semantic key")
    shown.add_argument("--limit", type=positive, default=50, help="(default: %(default)s)")
    shown.add_argument(
        "--before",
        metavar="CURSOR",
        type=cursor,
        help="the page after the one whose `more:` line (or JSON `next`) gave CURSOR",
    )
    add_db_options(shown)
    shown.set_defaults(handler=guarded(run_list))
    one = actions.add_parser("show", help="show one work item", description="One work item.")
    one.add_argument("id", metavar="ID")
    add_db_options(one)
    one.set_defaults(handler=guarded(run_show))
    bound = actions.add_parser(
        "bind",
        help="bind a work-bound loop shape to a work item (in shadow)",
        description=(
            "Bind the reviewed shape LOOP (a loop block with a `work` line in loops/*.rules) "
            "to the work item ID: an instance that starts in shadow mode. The same "
            "--request-id answers what it made; the same item and shape answer the "
            "instance that exists."
        ),
    )
    bound.add_argument("id", metavar="ID")
    bound.add_argument("loop", metavar="LOOP")
    bound.add_argument(
        "--request-id",
        metavar="ID",
        help="makes a retried bind idempotent (default: the item and the shape)",
    )
    add_as(bound)
    add_db_options(bound)
    bound.set_defaults(handler=guarded(run_bind))
    moved = [bound]
    for name, (trigger, verb) in MOVES.items():
        act = actions.add_parser(name, help=verb, description=f"{name.capitalize()}: {verb}.")
        act.add_argument("id", metavar="ID")
        act.add_argument("--note", default="", metavar="TEXT", help="why")
        add_as(act)
        add_db_options(act)
        act.set_defaults(handler=guarded(run_move), trigger=trigger)
        moved.append(act)
    for action in (add, shown, one, *moved):
        _parent_options_win(action)
    add_db_options(p)
    p.set_defaults(
        handler=guarded(run_list), state="all", repo=None, key=None, limit=50, before=None
    )


def _parent_options_win(action: argparse.ArgumentParser) -> None:
    """`engine work --db X show ID`: an option given before the action is not reset by
    the action's own default."""
    for arg in action._actions:
        if arg.dest in SHARED:
            if arg.help and "%(default)s" in arg.help:
                arg.help = arg.help.replace("%(default)s", str(arg.default))
            arg.default = argparse.SUPPRESS


def _row(doc: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "leaseOwner": doc["lease"]["owner"]}


def run_add(args: argparse.Namespace) -> int:
    actor = actor_of(args.operator)
    req = WorkRequest(args.key, args.title, args.repo, args.summary, tuple(args.link))
    with opened(args) as service:
        item, created = service.add_work(req, actor)
    doc = {"work": as_dict(item), "created": created}
    said = "opened" if created else f"already {item.state}:"
    return output(doc, args.json, lambda: print(f"{said} {item.work_id} ({item.semantic_key})"))


def run_list(args: argparse.Namespace) -> int:
    state = None if args.state == "all" else args.state
    with opened(args) as service:
        now = service.rt.clock()
        page = service.work_page(WorkQuery(state, args.repo, args.key, args.before), args.limit)
    listed = [as_dict(w) for w in page.items]
    doc = {"work": listed, "next": page.next}

    def show() -> None:
        table([_row(w) for w in listed], COLUMNS, "no work items", now)
        state_given = argparse.Namespace(**{**vars(args), "state": state})
        more("work list", state_given, doc, "state", "repo", "key")

    return output(doc, args.json, show)


def run_show(args: argparse.Namespace) -> int:
    with opened(args) as service:
        now = service.rt.clock()
        found = as_dict(service.work_item(args.id))
        bound = [binding_dict(b) for b in service.work_bindings(args.id)]

    def show() -> None:
        fields(found, "work", now)
        print("bound loops:" if bound else "bound loops: -")
        for b in bound:
            print(f"  {instance_line(b)}")

    return output({"work": found, "bindings": bound}, args.json, show)


def instance_line(b: dict[str, Any]) -> str:
    """`nudge@work-... shadow (bind-...)`, with a graduation deferred to the next serve
    start: `; graduates at the next restart (operator:alice, 2026-12-07T09:00:00Z)`."""
    line = f"{b['loop']} {b['state']} ({b['bindingId']})"
    pending = b["pendingGraduation"]
    if pending is not None:
        line += f"; graduates at the next restart ({pending['requestedBy']}, "
        line += f"{pending['requestedAt'][:19]}Z)"
    return line


def run_bind(args: argparse.Namespace) -> int:
    actor = actor_of(args.operator)
    request_id = args.request_id or f"cli:{args.id}:{args.loop}"
    with opened(args) as service:
        made, created = service.bind_work(args.id, args.loop, actor, request_id)
    doc = {"binding": binding_dict(made), "created": created}
    said = "bound" if created else "already bound:"
    line = f"{said} {made.shape} to {made.work_id} ({made.state}, {made.binding_id})"
    return output(doc, args.json, lambda: print(line))


def run_move(args: argparse.Namespace) -> int:
    actor = actor_of(args.operator)
    with opened(args) as service:
        item = service.move_work(args.id, args.trigger, actor, args.note)
    doc = {"work": as_dict(item)}
    return output(doc, args.json, lambda: print(f"{item.state} {item.work_id} as {actor}"))
