"""`engine findings` (candidate findings: list, show, promote, dismiss;
docs/occurrences.md#candidate-findings) and `engine shadow report LOOP` (what a loop in shadow mode
would have done; docs/occurrences.md#shadow-mode)."""

from __future__ import annotations

import argparse
from typing import Any

from engine.api import wire
from engine.cli.inspect import add_db_options, opened, parser_for, positive
from engine.cli.operate import actor_of, add_as
from engine.cli.render import Column, fields, guarded, output, table
from engine.core.states import FindingStatus
from engine.errors import BadRequest

STATUSES = (*FindingStatus, "all")
COLUMNS: list[Column] = [
    ("FINDING", "findingId"),
    ("STATUS", "status"),
    ("KEY", "semanticKey"),
    ("CATEGORY", "category"),
    ("LOOP", "loop"),
    ("SEEN", "occurrenceCount"),
    ("FIRST", "firstSeenAt"),
    ("LAST", "lastSeenAt"),
]
FINDINGS = (
    "Candidate findings the loops' triage recorded, one per semantic key, with how often "
    "and when they were seen. Automation never promotes a finding: `engine findings "
    "promote ID --as NAME` does (and admits a `finding.promoted` event when the registry "
    "declares that type); `dismiss` marks a false positive."
)
SHADOW = (
    "What a loop decided over a period: occurrences by state and triage decision, what "
    "shadow mode would have dispatched, triggers suppressed as duplicates, and where "
    "its decisions diverge from what operators actually ran — the evidence for "
    "graduating a loop out of shadow mode (docs/occurrences.md#shadow-mode)."
)


def register(sub: Any) -> None:
    p = parser_for(sub, "findings", "candidate findings: list, show, promote, dismiss", FINDINGS)
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    shown = actions.add_parser(
        "list",
        help="list findings (candidates by default)",
        description="Findings, the most recently seen first: candidates by default.",
    )
    shown.add_argument("--status", choices=STATUSES, default=FindingStatus.CANDIDATE)
    shown.add_argument("--loop", metavar="LOOP", help="only this loop's")
    shown.add_argument("--limit", type=positive, default=50, help="(default: %(default)s)")
    add_db_options(shown)
    shown.set_defaults(handler=guarded(run_list))
    one = actions.add_parser(
        "show", help="show one finding", description="One finding with its evidence."
    )
    one.add_argument("id", metavar="ID")
    add_db_options(one)
    one.set_defaults(handler=guarded(run_show))
    decided = []
    for name, verb in (
        ("promote", "promote a candidate to work (a human act)"),
        ("dismiss", "dismiss a candidate (a false positive)"),
    ):
        act = actions.add_parser(name, help=verb, description=DECIDE[name])
        act.add_argument("id", metavar="ID")
        add_as(act)
        act.add_argument("--note", default="", metavar="TEXT", help="why (dismiss: required)")
        add_db_options(act)
        act.set_defaults(handler=guarded(run_decide), decide=name)
        decided.append(act)
    for action in (shown, one, *decided):
        _parent_options_win(action)
    add_db_options(p)
    p.set_defaults(handler=guarded(run_list), status=FindingStatus.CANDIDATE, loop=None, limit=50)

    s = parser_for(sub, "shadow", "shadow-mode evidence: `engine shadow report LOOP`", SHADOW)
    reports = s.add_subparsers(dest="action", metavar="ACTION", required=True)
    r = reports.add_parser("report", help="what LOOP decided and would have dispatched")
    r.add_argument("loop", metavar="LOOP")
    r.add_argument("--since", default="", metavar="TIME", help="from this ISO time (all)")
    add_db_options(r)
    r.set_defaults(handler=guarded(run_report))


SHARED = frozenset({"db", "rules", "registry", "config", "json"})
DECIDE = {
    "promote": (
        "Promote a candidate finding to work: only a person can. The journal names the "
        "operator; a `finding.promoted` event is admitted when the registry declares it."
    ),
    "dismiss": "Dismiss a candidate finding as a false positive (--note says why).",
}


def _parent_options_win(action: argparse.ArgumentParser) -> None:
    """`engine findings --db X show ID`: an option given before the action is not reset
    by the action's own default (argparse copies every sub-parser default over it)."""
    for arg in action._actions:
        if arg.dest in SHARED:
            if arg.help and "%(default)s" in arg.help:  # keep --help showing the default
                arg.help = arg.help.replace("%(default)s", str(arg.default))
            arg.default = argparse.SUPPRESS


def run_list(args: argparse.Namespace) -> int:
    status = None if args.status == "all" else args.status
    with opened(args) as service:
        now = service.rt.clock()
        found = wire.records(service.findings(args.limit, status, args.loop))
    doc = {"findings": found}
    empty = f"no {args.status} findings"
    return output(doc, args.json, lambda: table(found, COLUMNS, empty, now))


def run_show(args: argparse.Namespace) -> int:
    with opened(args) as service:
        now = service.rt.clock()
        found = wire.record(service.finding(args.id))
    return output({"finding": found}, args.json, lambda: fields(found, "finding", now))


def run_decide(args: argparse.Namespace) -> int:
    actor = actor_of(args.operator)
    if args.decide == "dismiss" and not args.note.strip():
        raise BadRequest("--note must say why the finding is dismissed")
    with opened(args) as service:
        decide = service.promote if args.decide == "promote" else service.dismiss
        found = wire.record(decide(args.id, actor, args.note))
    assert found is not None
    message = f"{found['status']} {found['findingId']} as {actor}"
    return output({"finding": found}, args.json, lambda: print(message))


def run_report(args: argparse.Namespace) -> int:
    with opened(args) as service:
        report = service.shadow_report(args.loop, args.since)
    return output(report, args.json, lambda: _print_report(report))


def _print_report(r: dict[str, Any]) -> None:
    div = r["divergence"]
    rate = div["agreementRate"]
    print(
        f"loop {r['loop']}: shadow {'on' if r['shadow'] else 'off'}, definition "
        f"{r['definition'] or '-'}, since {r['since'] or 'the beginning'}"
    )
    print(
        f"occurrences: {r['occurrences']}  would dispatch: {r['wouldDispatch']}  "
        f"duplicates suppressed: {r['duplicatesSuppressed']}"
    )
    print("by state: " + (", ".join(f"{k} {v}" for k, v in r["byState"].items()) or "-"))
    print("by decision: " + (", ".join(f"{k} {v}" for k, v in r["byDecision"].items()) or "-"))
    print(
        f"divergence: agree {div['agree']}, shadow only {div['shadowOnly']}, human only "
        f"{div['humanOnly']}; agreement {'-' if rate is None else f'{100 * rate:.0f}%'}"
    )
    print()
    columns: list[Column] = [
        ("WINDOW", "window"),
        ("STATE", "state"),
        ("DECISION", "decision"),
        ("WOULD DISPATCH", "wouldDispatch"),
        ("HUMAN RUNS", "humanRuns"),
    ]
    table(r["windows"], columns, "no occurrences")
