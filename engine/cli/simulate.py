"""`engine simulate`: what the engine will decide over a window of time, predicted by
running it on a virtual clock and an in-memory store (docs/simulate.md)."""

from __future__ import annotations

import argparse
import tempfile
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

from engine.bootstrap import database_path
from engine.cli.common import add_json_option, add_rules_options, paths_from
from engine.cli.render import guarded, output
from engine.core.durations import DurationError, parse_duration
from engine.core.simulation import lines
from engine.errors import BadRequest
from engine.loading import load_rules
from engine.service import simulate as sim

DESCRIPTION = (
    "Predict what the engine decides over a window of virtual time: the real scheduler "
    "and the real decisions run on an in-memory store (seeded from a copy of --db, which "
    "is never written), while the clock jumps from one due instant to the next. For each "
    "slot: fired (with its skipped slots) or skipped with its reason, the decision and "
    "the rule that made it, and what came of it; then a summary per loop "
    "(docs/simulate.md)."
)
EPILOG = """\
exit codes: 0 ok; 1 invalid rules (diagnostics on stderr), or no such loop;
2 usage (a bad time, span, duration or answer, a missing directory or database)"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "simulate",
        help="predict the decisions over a window of virtual time",
        description=textwrap.fill(DESCRIPTION, 88),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--from", dest="start", required=True, metavar="T", help="the window's start")
    p.add_argument("--to", dest="end", required=True, metavar="T", help="the window's end")
    p.add_argument(
        "--asleep",
        action="append",
        default=[],
        metavar="A..B",
        help="the engine does not run from A to B (repeatable)",
    )
    p.add_argument(
        "--restart",
        action="append",
        default=[],
        metavar="T",
        help="the engine process restarts at T (repeatable)",
    )
    p.add_argument(
        "--approve",
        default="none",
        metavar="none|all|after=DUR",
        help="how an operator answers proposals: never, at once, or DUR after each is "
        "made (default: none)",
    )
    p.add_argument(
        "--runs",
        default="succeed",
        metavar="succeed|fail|outcome=X",
        help="how runs end: with their definition's success outcome, failed, or with "
        "outcome X (default: succeed)",
    )
    p.add_argument(
        "--loop",
        action="append",
        default=[],
        metavar="NAME",
        help="simulate only this loop (repeatable; the others are switched off)",
    )
    p.add_argument(
        "--db",
        metavar="PATH|URL",
        help="start from a copy of this database's records (it is never written)",
    )
    p.add_argument("--summary", action="store_true", help="print only the summary per loop")
    add_rules_options(p)
    add_json_option(p)
    p.set_defaults(handler=guarded(run_simulate))


def approve_after(text: str) -> timedelta | None:
    """`none` (never), `all` (at once) or `after=DUR`; BadRequest otherwise."""
    if text == "none":
        return None
    if text == "all":
        return timedelta(0)
    name, sep, value = text.partition("=")
    if name == "after" and sep:
        try:
            return timedelta(seconds=parse_duration(value))
        except DurationError:
            pass
    raise BadRequest(
        f"--approve '{text[:60]}' is not an answer: write none, all or after=DUR (after=15m)",
        reason="bad_answer",
    )


def runs_answer(text: str) -> str:
    """`succeed`, `fail` or `outcome=X`; BadRequest otherwise."""
    if text in (sim.SUCCEED, sim.FAIL):
        return text
    name, sep, value = text.partition("=")
    if name == "outcome" and sep and value:
        return value
    raise BadRequest(
        f"--runs '{text[:60]}' is not an answer: write succeed, fail or outcome=X",
        reason="bad_answer",
    )


def scenario_of(args: argparse.Namespace) -> sim.Scenario:
    return sim.Scenario(
        start=sim.parse_time(args.start, "--from"),
        end=sim.parse_time(args.end, "--to"),
        asleep=tuple(sim.parse_span(text) for text in args.asleep),
        restarts=tuple(sim.parse_time(text, "--restart") for text in args.restart),
        approve_after=approve_after(args.approve),
        runs=runs_answer(args.runs),
        loops=frozenset(args.loop),
    )


def run_simulate(args: argparse.Namespace) -> int:
    scenario = scenario_of(args)
    rules = load_rules(paths_from(args))
    # a URL with a password is refused as every command refuses it (process listings)
    seed = sim.seed_from(database_path(args.db)) if args.db else None
    with tempfile.TemporaryDirectory(prefix="engine-simulate-") as scratch:
        done = sim.simulate(rules, scenario, Path(scratch) / "artifacts", seed)
        doc = done.prediction()
    return output(doc, args.json, lambda: print("\n".join(lines(doc, rows=not args.summary))))
