"""`engine proposals`, `engine approve`, `engine reject`: the operator's inbox, read
and decided directly on the database. The journal names the operator
(`operator:<name>`: `--as`, else the login name)."""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Callable
from typing import Any

from engine.api import wire
from engine.cli import exits, review
from engine.cli.common import print_json
from engine.cli.inspect import add_db_options, add_paging, more, opened, parser_for
from engine.cli.render import Column, guarded, output, table
from engine.core.decisions import operator_actor, operator_name_problem
from engine.core.paging import ProposalQuery
from engine.core.states import ProposalState
from engine.errors import BadRequest, EngineError
from engine.service import Service

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
    p.add_argument("word", nargs="?", metavar="show", help="show one proposal (`show` optional)")
    p.add_argument("id", nargs="?", metavar="ID", help="the proposal to show")
    p.add_argument(
        "--state", choices=STATES, default=ProposalState.OPEN.value, help="(default: %(default)s)"
    )
    add_paging(p, "proposals")
    add_db_options(p)
    p.set_defaults(handler=guarded(run_proposals))

    p = parser_for(sub, "approve", "approve open proposals and queue their runs", APPROVE)
    p.add_argument("ids", nargs="+", metavar="ID", help="one or more proposals")
    add_as(p)
    p.add_argument("--note", default="", metavar="TEXT", help="recorded with the approval")
    add_db_options(p)
    p.set_defaults(handler=guarded(run_approve))

    p = parser_for(sub, "reject", "reject open proposals; nothing runs", REJECT)
    p.add_argument("ids", nargs="+", metavar="ID", help="one or more proposals")
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
    "Approve open proposals: each one's run is queued with approved_by operator:<NAME>. "
    "A proposal already decided is refused (exit 1); so is a human-only proposal for "
    "anyone who is not an operator. With several ids each is decided on its own, in "
    "order; a refusal does not stop the others (exit 1 when any was refused)."
)
REJECT = (
    "Reject open proposals with a reason; their occurrences end and nothing runs. With "
    "several ids each is decided on its own (exit 1 when any was refused)."
)
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


def shown_id(word: str | None, given: str | None) -> str | None:
    """The proposal of `proposals show ID` or `proposals ID`; None for the listing."""
    if word == "show" and given is None:
        raise BadRequest("engine proposals show: which proposal? (show ID)")
    if word not in (None, "show") and given is not None:
        raise BadRequest(f"engine proposals: one ID, or show ID (not '{word} {given}')")
    return given if word == "show" else word


def run_proposals(args: argparse.Namespace) -> int:
    proposal_id = shown_id(args.word, args.id)
    with opened(args) as service:
        now = service.rt.clock()
        if proposal_id is not None:
            doc = service.review(proposal_id)
            return output(doc, args.json, lambda: print("\n".join(review.lines(doc, now))))
        state = None if args.state == "all" else args.state
        query = ProposalQuery(args.loop, state, args.before)
        doc = wire.proposals(service.proposals_page(query, args.limit))
        empty = f"no {args.state} proposals" if args.state != "all" else "no proposals"

        def human() -> None:
            table(doc["proposals"], COLUMNS, empty, now)
            more("proposals", args, doc, *(("state",) if args.state != "open" else ()), "loop")

        return output(doc, args.json, human)


Decided = tuple[dict[str, Any], str]  # (the JSON document, the line a person reads)


def run_approve(args: argparse.Namespace) -> int:
    actor = actor_of(args.operator)

    def approve(service: Service, proposal_id: str) -> Decided:
        proposal, run = service.approve(proposal_id, actor, args.note)
        message = f"approved {proposal.proposal_id} as {actor}: run {run.run_id} {run.state}"
        return wire.approval(proposal, run), message

    return each(args, approve, "approved")


def run_reject(args: argparse.Namespace) -> int:
    actor = actor_of(args.operator)
    if not args.reason.strip():
        raise BadRequest("--reason must say why")

    def reject(service: Service, proposal_id: str) -> Decided:
        proposal = service.reject(proposal_id, actor, args.reason)
        return {"proposal": wire.record(proposal)}, f"rejected {proposal.proposal_id} as {actor}"

    return each(args, reject, "rejected")


def each(args: argparse.Namespace, decide: Callable[[Service, str], Decided], verb: str) -> int:
    """Decide every id on its own (its own transaction), never stopping at a refusal.
    One id: its document, or its refusal's message and exit code, as ever. Several: a
    line (or JSON result) per id, and exit 1 when any was refused, those listed."""
    ids = list(dict.fromkeys(args.ids))
    with opened(args) as service:
        if len(ids) == 1:
            doc, message = decide(service, ids[0])
            return output(doc, args.json, lambda: print(message))
        results = [_one(service, decide, i, args.json) for i in ids]
    return summary(results, args.json, verb)


def _one(
    service: Service, decide: Callable[[Service, str], Decided], proposal_id: str, as_json: bool
) -> dict[str, Any]:
    """The result of deciding one of several ids; a person reads it as it happens."""
    try:
        doc, message = decide(service, proposal_id)
    except EngineError as err:
        if not as_json:
            print(f"error: {proposal_id}: {err.message}", file=sys.stderr)
        return {"id": proposal_id, "ok": False, **err.as_dict()}
    if not as_json:
        print(message, flush=True)
    return {"id": proposal_id, "ok": True, **doc}


def summary(results: list[dict[str, Any]], as_json: bool, verb: str) -> int:
    failed = [r["id"] for r in results if not r["ok"]]
    if as_json:
        print_json({"results": results})
    elif failed:
        done = len(results) - len(failed)
        print(f"{verb} {done} of {len(results)}; refused: {' '.join(failed)}", file=sys.stderr)
    return exits.INVALID if failed else exits.OK


def run_cancel(args: argparse.Namespace) -> int:
    actor = actor_of(args.operator)
    with opened(args) as service:
        run = service.cancel(args.id, actor, args.note)
        message = f"cancelled {run.run_id} as {actor}"
        return output({"run": wire.record(run)}, args.json, lambda: print(message))
