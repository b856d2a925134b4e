"""`engine schedule`: every loop's schedule, and the operator's controls over it.
Reads and writes the database directly through the same Service the HTTP API uses;
`enable` and `disable` edit the overlay `config/schedule.yaml` (a running serve
applies them when it restarts)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.bootstrap import database_exists, database_path, open_service
from engine.cli.common import add_db_option, paths_from, whole_number
from engine.cli.inspect import opened
from engine.cli.operate import actor_of
from engine.cli.render import Column, fields, guarded, output, table
from engine.core.ticks import slot_text
from engine.core.timefmt import relative_text
from engine.core.work import binding_dict
from engine.loading import default_paths
from engine.overlay_edit import set_enabled
from engine.service import Service
from engine.service.schedules import parse_when

DESCRIPTION = """\
Every loop's schedule: enabled, paused, trigger, approval, catch-up, source (kernel
or overlay), the last slot fired and what came of it, the next slot due and the next
fire times; and the operator's controls.

actions (default: list):
  list                       every loop, one line each
  show LOOP                  one loop in full, with its next five fire times
  slots LOOP [--since T]     every due slot since T (default 24h ago): fired
                             (with the decision), skipped (with the reason) or pending
  enable LOOP / disable LOOP write `enabled` into config/schedule.yaml, keeping its
                             comments; restart `engine serve` to apply
  pause LOOP --note TEXT     skip the loop's slots (reason `paused`) until resumed
  resume LOOP [--note TEXT]  fire again from the next slot; paused slots are not replayed
  trigger LOOP               run now: admits manual:<loop>:<id>, never a slot's identity
  backfill LOOP --from T1 --to T2
                             admit the slots in [T1, T2] through the same dedup (slots
                             already admitted stay as they are)
  graduate LOOP [--at-restart] [--note TEXT]
                             take a work-bound loop instance (SHAPE@WORK-ID) out of
                             shadow mode, now or at the next start of `engine serve`
                             (never restarting it); its shape's rule file must write
                             `shadow false` (docs/work.md#graduating-an-instance)

Times are ISO-8601 with an offset (2026-12-01T03:00:00Z), `now`, or how long ago as
a duration (24h, 90m, 7d). Put options after the action: engine schedule show reaper
--json.
See docs/scheduling.md."""

EPILOG = """\
exit codes: 0 ok; 1 refused (an unknown loop, pausing a paused loop, resuming one
that is not paused, an edit that would make the rules invalid; graduating a declared
loop, an unknown instance, one whose shape's rule file does not write `shadow false`,
one not in shadow, or deferring one already deferred), no database, or invalid rules
(diagnostics on stderr); 2 usage (bad arguments, a bad time, a bad --as name, a range
with too many slots, a loop without slots to backfill)"""

COLUMNS: list[Column] = [
    ("LOOP", "name"),
    ("ENABLED", "enabled"),
    ("PAUSED", "paused"),
    ("TRIGGER", "trigger"),
    ("APPROVAL", "approval"),
    ("CATCH-UP", "catchUp"),
    ("SOURCE", "source"),
    ("LAST SLOT", "lastSlot"),
    ("LAST OUTCOME", "lastOutcome"),
    ("NEXT DUE", "nextDue"),
    ("OPEN", "openProposals"),
]
SLOT_COLUMNS: list[Column] = [
    ("SLOT", "slot"),
    ("TO", "lastSlot"),
    ("COUNT", "count"),
    ("STATUS", "status"),
    ("REASON", "reason"),
    ("DECISION", "decision"),
    ("EVENT", "eventId"),
]


def _options(p: argparse.ArgumentParser, top: bool) -> None:
    """The shared options; on an action their defaults are suppressed, so a value given
    before the action is not reset by the action's parser."""
    paths = default_paths()

    def default(value: Any) -> Any:
        return value if top else argparse.SUPPRESS

    add_db_option(p, default=default(None))
    for name, value, holds in (
        ("--rules", paths.rules, "rule files, loops/*.rules"),
        ("--registry", paths.registry, "event types, definitions, contracts"),
        ("--config", paths.config, "repos.yaml and the schedule.yaml overlay"),
    ):
        p.add_argument(
            name, type=Path, metavar="DIR", default=default(value), help=f"{holds} ({value})"
        )
    p.add_argument("--json", action="store_true", default=default(False), help="print JSON")


limit = whole_number(1, 1_000_000)


def _as(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--as",
        dest="operator",
        metavar="NAME",
        help="the operator recorded in the journal (default: your login name)",
    )


def register(sub: Any) -> None:
    p = sub.add_parser(
        "schedule",
        help="list loops' schedules; enable, disable, pause, resume, trigger, backfill, graduate",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _options(p, top=True)
    p.set_defaults(handler=guarded(run_list))
    actions = p.add_subparsers(dest="action", metavar="ACTION")

    def action(name: str, summary: str, handler: Any, loop: bool = True) -> argparse.ArgumentParser:
        a: argparse.ArgumentParser = actions.add_parser(
            name,
            help=summary,
            description=summary[0].upper() + summary[1:] + ". See docs/scheduling.md.",
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if loop:
            a.add_argument("loop", metavar="LOOP")
        _options(a, top=False)
        a.set_defaults(handler=guarded(handler))
        return a

    action("list", "every loop, one line each", run_list, loop=False)
    action("show", "one loop in full", run_show)
    a = action("slots", "due slots since a time and what happened to each", run_slots)
    a.add_argument("--since", default="24h", metavar="T", help="(default: 24h, i.e. 24 hours ago)")
    action("enable", "enable a loop in config/schedule.yaml", run_enable)
    action("disable", "disable a loop in config/schedule.yaml", run_disable)
    a = action("pause", "skip a loop's slots until resumed", run_pause)
    a.add_argument("--note", required=True, metavar="TEXT", help="why (required)")
    _as(a)
    a = action("resume", "fire a paused loop again from its next slot", run_resume)
    a.add_argument("--note", default="", metavar="TEXT", help="recorded with the resume")
    _as(a)
    _as(action("trigger", "run a loop now (manual:<loop>:<id>)", run_trigger))
    a = action("backfill", "admit a past range of a loop's slots", run_backfill)
    a.add_argument("--from", dest="start", required=True, metavar="T1", help="first slot time")
    a.add_argument("--to", dest="end", required=True, metavar="T2", help="last slot time")
    a.add_argument("--limit", type=limit, default=None, metavar="N", help="most slots (10000)")
    _as(a)
    a = action(
        "graduate",
        "take a work-bound loop instance (SHAPE@WORK-ID) out of shadow mode",
        run_graduate,
    )
    a.add_argument(
        "--at-restart",
        action="store_true",
        help="at the next start of `engine serve` (recorded now; nothing restarts)",
    )
    a.add_argument("--note", default="", metavar="TEXT", help="recorded with the graduation")
    _as(a)


# ---- reading ----------------------------------------------------------------------------


def _service(args: argparse.Namespace) -> Service:
    """The service over the database, or (no database yet) over the rules alone."""
    db = database_path(args.db)
    found = database_exists(db)
    if not found:
        print(f"note: no database at {db}: showing the rules only", file=sys.stderr)
    return open_service(db if found else ":memory:", paths_from(args), probe=False)


def _run_text(outcome: dict[str, Any] | None) -> str | None:
    """The last run as `succeeded OK`."""
    if outcome is None:
        return None
    return " ".join(v for v in (outcome["state"], outcome["outcome"]) if v)


def _cause_text(cause: dict[str, Any] | None) -> str | None:
    """What fired a waiting trigger's latest tick: `event ID (TYPE)` or `LOOP STATE
    OUTCOME (occurrence ID)`."""
    if cause is None:
        return None
    if cause["kind"] == "event":
        return f"event {cause['eventId']} ({cause['type']})"
    parts = (cause["loop"], cause["state"], cause["outcome"])
    return " ".join(p for p in parts if p) + f" (occurrence {cause['occurrence']})"


def flat(entry: dict[str, Any]) -> dict[str, Any]:
    """A view entry as table cells; with no run yet, the last tick's decision. A watch
    loop's last observation takes the place of the last slot."""
    cells = {
        **entry,
        "trigger": entry["trigger"]["describe"],
        "catchUp": entry["catchUp"]["policy"],
        "overlap": _overlap_text(entry["overlap"]),
        "lastOutcome": _run_text(entry["lastOutcome"]) or entry["lastDecision"],
        "lastCause": _cause_text(entry.get("lastCause")),
        "nextFires": ", ".join(entry["nextFires"]),
        "overridden": ", ".join(entry["overridden"]),
    }
    cells.pop("singleton")  # the run level of `overlap`, in the JSON for older clients
    observation = cells.pop("observation", None)
    if observation is not None:
        cells["lastSlot"] = _observed_text(observation)
        cells["observation"] = _observation_text(observation)
        cells["diagnostic"] = observation["diagnostic"]
    return cells


def _overlap_text(overlap: dict[str, Any]) -> str | None:
    """`skip`, `allow max 2`: the loop's overlap as its rule line writes it; None for an
    old combination no overlap value means."""
    value, most = overlap["value"], overlap["max"]
    if value is None:
        return None
    return str(value) + ("" if most is None else f" max {most}")


def _observed_text(observation: dict[str, Any]) -> str | None:
    """`2026-11-30T10:05:00Z ok`: when the probe was last polled, and how it went."""
    if observation["observedAt"] is None:
        return None
    return f"{observation['observedAt'][:19]}Z {observation['status']}"


def _observation_text(observation: dict[str, Any]) -> str:
    """`probe ci-status: 12 polls, 1 change (last 2026-...), 0 failures in a row`."""
    changes = observation["changes"]
    last = f" (last {observation['changedAt'][:19]}Z)" if observation["changedAt"] else ""
    return (
        f"probe {observation['probe']}: {observation['polls']} polls, {changes} "
        f"change{'' if changes == 1 else 's'}{last}, "
        f"{observation['consecutiveFailures']} failures in a row"
    )


def run_list(args: argparse.Namespace) -> int:
    service = _service(args)
    try:
        now = service.rt.clock()
        rows = service.schedules()
        pending = service.pending_graduations()
    finally:
        service.rt.store.close()
    doc = {"schedules": rows, "pendingGraduations": pending}
    cells = [flat(r) for r in rows]

    def human() -> None:
        table(cells, COLUMNS, "no loops", now)
        for p in pending:
            print(f"pending at next restart: {pending_text(p)}")

    return output(doc, args.json, human)


def pending_text(p: dict[str, Any]) -> str:
    """`graduate nudge@work-... (operator:alice, 2026-12-07T09:00:00Z)`: a graduation
    deferred to the next serve start."""
    note = f": {p['note']}" if p["note"] else ""
    return f"graduate {p['loop']} ({p['requestedBy']}, {p['requestedAt'][:19]}Z){note}"


def run_show(args: argparse.Namespace) -> int:
    service = _service(args)
    try:
        now = service.rt.clock()
        entry = service.schedule(args.loop)
    finally:
        service.rt.store.close()
    return output({"schedule": entry}, args.json, lambda: _show(entry, now))


def _show(entry: dict[str, Any], now: datetime) -> None:
    cells = flat(entry)
    cells.pop("nextFires")
    outcome = entry["lastOutcome"]
    cells["lastOutcome"] = _run_text(outcome)
    cells["lastRun"] = outcome["runId"] if outcome else None
    fields(cells, f"loop {entry['name']}", now)
    print("next fires:" if entry["nextFires"] else "next fires: -")
    for moment in entry["nextFires"]:
        print(f"  {moment} ({relative_text(moment, now)})")


def run_slots(args: argparse.Namespace) -> int:
    with opened(args) as service:
        now = service.rt.clock()
        since = parse_when(args.since, now)
        entry = service.schedule(args.loop)
        rows = service.slots(args.loop, since)
    doc = {
        "loop": args.loop,
        "since": slot_text(since),
        "enabledSince": entry["enabledSince"],
        "slots": rows,
    }

    def human() -> None:
        enabled = entry["enabledSince"] or "-"
        print(f"loop {args.loop}: slots since {doc['since']} (enabled since {enabled})")
        table(rows, SLOT_COLUMNS, "no slots were due")

    return output(doc, args.json, human)


# ---- controls ---------------------------------------------------------------------------


def _enable(args: argparse.Namespace, enabled: bool) -> int:
    edit = set_enabled(paths_from(args), args.loop, enabled)
    state = "enabled" if enabled else "disabled"
    if edit.changed:
        message = f"{state} '{edit.loop}' in {edit.file}; restart `engine serve` to apply"
    else:
        message = f"'{edit.loop}' is already {state}; {edit.file} is unchanged"
    return output(edit.as_dict(), args.json, lambda: print(message))


def run_enable(args: argparse.Namespace) -> int:
    return _enable(args, True)


def run_disable(args: argparse.Namespace) -> int:
    return _enable(args, False)


def run_pause(args: argparse.Namespace) -> int:
    actor = actor_of(args.operator)
    with opened(args) as service:
        entry = service.pause(args.loop, actor, args.note)
    message = f"paused '{args.loop}' as {actor}: {entry['pauseNote']}"
    return output({"schedule": entry}, args.json, lambda: print(message))


def run_resume(args: argparse.Namespace) -> int:
    actor = actor_of(args.operator)
    with opened(args) as service:
        entry = service.resume(args.loop, actor, args.note)
    message = f"resumed '{args.loop}' as {actor}; next slot due {entry['nextDue'] or '-'}"
    return output({"schedule": entry}, args.json, lambda: print(message))


def run_trigger(args: argparse.Namespace) -> int:
    actor = actor_of(args.operator)
    with opened(args) as service:
        found = service.trigger(args.loop, actor)
    message = f"admitted {found.eventId} as {actor}; a running `engine serve` plans it"
    return output(found.as_dict(), args.json, lambda: print(message))


def run_backfill(args: argparse.Namespace) -> int:
    actor = actor_of(args.operator)
    with opened(args) as service:
        now = service.rt.clock()
        start, end = parse_when(args.start, now), parse_when(args.end, now)
        doc = service.backfill(args.loop, start, end, actor, args.limit)
    message = (
        f"backfilled '{args.loop}' {doc['from']}..{doc['to']} as {actor}: {doc['slots']} "
        f"slots, {doc['admitted']} admitted, {doc['alreadyAdmitted']} already admitted"
    )
    return output(doc, args.json, lambda: print(message))


def run_graduate(args: argparse.Namespace) -> int:
    actor = actor_of(args.operator)
    with opened(args) as service:
        made = service.graduate(args.loop, actor, args.at_restart, args.note)
    if args.at_restart:
        message = (
            f"'{args.loop}' graduates out of shadow at the next start of `engine serve` "
            f"(deferred as {actor}); nothing restarts now"
        )
    else:
        message = f"graduated '{args.loop}' out of shadow as {actor}: it is {made.state}"
    return output({"binding": binding_dict(made)}, args.json, lambda: print(message))
