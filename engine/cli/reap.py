"""`engine reap`: recover expired run leases and expire stale proposals.

A dry run unless `--apply`. The reaper definition runs this as a command, so the last
stdout line is always a `factory.command-result/v1` document (`OK`, or `FAILED` with
the reason), whatever else is printed above it."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import timedelta
from typing import Any

from dsl.diagnostics import RulesError
from engine.bootstrap import database_path, open_service
from engine.cli import exits
from engine.cli.common import add_db_option, add_json_option, add_rules_options, paths_from
from engine.core.durations import DurationError, parse_duration
from engine.core.states import RunState
from engine.errors import EngineError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "reap",
        help="recover expired run leases and expire stale proposals (dry run by default)",
        description="Find runs whose worker lost its lease (requeued while read-only work "
        "has attempts left, failed with lease_expired for mutating work) and open "
        "proposals older than the TTL (expired). Changes nothing without --apply. The "
        "last stdout line is a factory.command-result/v1 JSON document. Exit 0 ok, "
        "1 failure or invalid rules, 2 usage.",
    )
    p.add_argument("--apply", action="store_true", help="make the changes (default: dry run)")
    p.add_argument(
        "--proposal-ttl",
        type=_ttl,
        default=timedelta(hours=24),
        metavar="DURATION",
        help="expire open proposals older than this, e.g. 24h or 7d (default: 24h)",
    )
    add_db_option(p)
    add_rules_options(p)
    add_json_option(p)
    p.set_defaults(handler=handler)


def _ttl(text: str) -> timedelta:
    try:
        return timedelta(seconds=parse_duration(text))
    except DurationError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def handler(args: argparse.Namespace) -> int:
    try:
        service = open_service(database_path(args.db), paths_from(args))
    except RulesError as err:
        print(err.render(), file=sys.stderr)
        _result("FAILED", f"the rules do not load ({len(err.diagnostics)} problems)", {})
        return exits.of_rules(err)
    except EngineError as err:  # a database it cannot open or use
        print(f"error: {err.message}", file=sys.stderr)
        _result("FAILED", err.message, err.as_dict())
        return err.exit_code
    try:
        report = service.reap(args.apply, args.proposal_ttl)
    except EngineError as err:
        print(f"error: {err.message}", file=sys.stderr)
        _result("FAILED", err.message, err.as_dict())
        return exits.INVALID
    finally:
        service.rt.store.close()
    if not args.json:
        _print_report(report)
    _result("OK", summary(report), report)
    return exits.OK


def summary(report: dict[str, Any]) -> str:
    leases = report["leases"]
    requeued = sum(1 for lease in leases if lease["to"] == RunState.QUEUED)
    recorded = sum(1 for lease in leases if "recordedFrom" in lease)
    failed = len(leases) - requeued - recorded
    kept = f", {recorded} recorded from result files" if recorded else ""
    counts = f"{len(leases)} expired lease(s) ({requeued} requeued{kept}, {failed} failed)"
    stale = f"{len(report['proposals'])} stale proposal(s)"
    if report["applied"]:
        return f"recovered {counts}, expired {stale}"
    return f"dry run, nothing changed: would recover {counts}, would expire {stale}"


def _print_report(report: dict[str, Any]) -> None:
    if not report["applied"]:
        print("dry run: nothing is changed; pass --apply to reap")
    verb = "" if report["applied"] else "would go "
    for lease in report["leases"]:
        kept = " (recorded from its result file)" if "recordedFrom" in lease else ""
        print(
            f"run {lease['runId']}: lease of {lease['worker']} expired; "
            f"{verb}-> {lease['to']}{kept}"
        )
    verb = "expired" if report["applied"] else "would expire"
    for proposal in report["proposals"]:
        print(f"proposal {proposal}: {verb}")


def _result(outcome: str, text: str, details: dict[str, Any]) -> None:
    """The command-result line; always the last line on stdout."""
    doc = {"outcome": outcome, "summary": text, "details": details}
    print(json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str), flush=True)
