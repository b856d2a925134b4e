"""`engine proposals`, `engine approve`, `engine reject`: the operator's inbox, read
and decided directly on the database. The journal names the operator
(`operator:<name>`: `--as`, else the login name)."""

from __future__ import annotations

import argparse
import getpass
from typing import Any

from engine.api import wire
from engine.cli.inspect import add_db_options, add_paging, more, opened, parser_for
from engine.cli.render import Column, fields, guarded, output, table
from engine.core.decisions import operator_actor, operator_name_problem
from engine.core.paging import ProposalQuery
from engine.core.states import ProposalState
from engine.errors import BadRequest

STATES = sorted({*(s.value for s in ProposalState), "all"})

COLUMNS: list[Column] = [
    ("PROPOSAL", "proposalId"),
    ("STATE", "state"),
    ("DEFINITION", "definition"),
    ("LOOP", "loop"),
    ("EVENT", "eventId"),
    ("HUMAN-ONLY", "humanOnly"),
    ("MUTATING", "mutating"),
    ("CREATED", "createdAt"),
    ("DECIDED BY", "decidedBy"),
]


def register(sub: Any) -> None:
    p = parser_for(sub, "proposals", "list proposals (open by default), or show one", LIST)
    p.add_argument("id", nargs="?", metavar="ID", help="show this proposal")
    p.add_argument(
        "--state", choices=STATES, default=ProposalState.OPEN.value, help="(default: %(default)s)"
    )
    add_paging(p, "proposals")
    add_db_options(p)
    p.set_defaults(handler=guarded(run_proposals))

    p = parser_for(sub, "approve", "approve an open proposal and queue its run", APPROVE)
    p.add_argument("id", metavar="ID")
    add_as(p)
    p.add_argument("--note", default="", metavar="TEXT", help="recorded with the approval")
    add_db_options(p)
    p.set_defaults(handler=guarded(run_approve))

    p = parser_for(sub, "reject", "reject an open proposal; nothing runs", REJECT)
    p.add_argument("id", metavar="ID")
    add_as(p)
    p.add_argument("--reason", required=True, metavar="TEXT", help="why (required)")
    add_db_options(p)
    p.set_defaults(handler=guarded(run_reject))

    p = parser_for(sub, "cancel", "cancel a run that has not ended", CANCEL)
    p.add_argument("id", metavar="RUN")
    add_as(p)
    p.add_argument("--note", default="", metavar="TEXT", help="recorded with the cancel")
    add_db_options(p)
    p.set_defaults(handler=guarded(run_cancel))


LIST = "Proposals waiting for an operator (or in any state with --state), newest first."
APPROVE = (
    "Approve an open proposal: its run is queued with approved_by operator:<NAME>. "
    "A proposal already decided is refused (exit 1); so is a human-only proposal for "
    "anyone who is not an operator."
)
REJECT = "Reject an open proposal with a reason; its occurrence ends and nothing runs."
CANCEL = (
    "Cancel a queued, claimed or running run: it ends `cancelled` with the operator in "
    "the journal, its worker stops the execution at its next heartbeat, and its "
    "occurrence ends `cancelled`. An operator's cancel never counts as a failure toward "
    "the loop's circuit breaker. A run that already ended is refused (exit 1)."
)


def add_as(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--as",
        dest="operator",
        metavar="NAME",
        help="the operator recorded in the journal (default: your login name)",
    )


def actor_of(name: str | None) -> str:
    """`operator:<name>` for `--as NAME` or the login name; BadRequest (exit 2) when the
    name is not a valid operator name or is a reserved actor's (`schedule`, `system`...)."""
    chosen = name if name is not None else _login_name()
    problem = operator_name_problem(chosen)
    if problem is not None:
        hint = "" if name is not None else " (your login name; pass --as NAME)"
        raise BadRequest(problem + hint)
    return operator_actor(chosen)


def _login_name() -> str:
    try:
        return getpass.getuser().lower()
    except (KeyError, OSError):
        raise BadRequest("cannot tell your login name; pass --as NAME") from None


def run_proposals(args: argparse.Namespace) -> int:
    with opened(args) as service:
        if args.id:
            found = wire.record(service.proposal(args.id))
            return output({"proposal": found}, args.json, lambda: fields(found, "proposal"))
        state = None if args.state == "all" else args.state
        query = ProposalQuery(args.loop, state, args.before)
        doc = wire.proposals(service.proposals_page(query, args.limit))
        empty = f"no {args.state} proposals" if args.state != "all" else "no proposals"

        def human() -> None:
            table(doc["proposals"], COLUMNS, empty)
            more("proposals", args, doc, *(("state",) if args.state != "open" else ()), "loop")

        return output(doc, args.json, human)


def run_approve(args: argparse.Namespace) -> int:
    actor = actor_of(args.operator)
    with opened(args) as service:
        proposal, run = service.approve(args.id, actor, args.note)
        doc = wire.approval(proposal, run)
        message = f"approved {proposal.proposal_id} as {actor}: run {run.run_id} {run.state}"
        return output(doc, args.json, lambda: print(message))


def run_reject(args: argparse.Namespace) -> int:
    actor = actor_of(args.operator)
    if not args.reason.strip():
        raise BadRequest("--reason must say why")
    with opened(args) as service:
        proposal = service.reject(args.id, actor, args.reason)
        message = f"rejected {proposal.proposal_id} as {actor}"
        return output({"proposal": wire.record(proposal)}, args.json, lambda: print(message))


def run_cancel(args: argparse.Namespace) -> int:
    actor = actor_of(args.operator)
    with opened(args) as service:
        run = service.cancel(args.id, actor, args.note)
        message = f"cancelled {run.run_id} as {actor}"
        return output({"run": wire.record(run)}, args.json, lambda: print(message))
