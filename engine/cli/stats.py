"""`engine stats`: the audit figures (docs/occurrences.md#audit-and-metrics) read from the database
— what the automation did and whether it helped. `GET /metrics` serves the same figures in the
Prometheus text format."""

from __future__ import annotations

import argparse
from typing import Any

from engine.cli import exits
from engine.cli.common import print_json
from engine.cli.inspect import add_db_options, opened
from engine.cli.render import guarded, table

DESCRIPTION = """\
Prints, per loop, its occurrences by state and its no-op rate; decisions by kind and
reason; runs by state and outcome; duplicates suppressed; retries by failure class;
budget used over the last 24 hours; candidate findings by status and the promotion
rate; the human adoption rate of proposals; mean wait and execution time of recent
runs. See docs/occurrences.md#audit-and-metrics.

exit codes: 0 success; 1 no database or invalid rules; 2 usage"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "stats",
        help="audit figures: occurrences, no-op rate, duplicates, retries, budgets, findings",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_db_options(p)
    p.set_defaults(handler=guarded(run_stats))


def run_stats(args: argparse.Namespace) -> int:
    with opened(args) as service:
        figures = service.stats()
    if args.json:
        print_json(figures)
    else:
        _print(figures)
    return exits.OK


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _print(f: dict[str, Any]) -> None:
    loops = [
        {
            "loop": loop,
            "occurrences": ", ".join(f"{s} {n}" for s, n in entry["occurrences"].items()),
            "noop": _rate(entry["noopRate"]),
        }
        for loop, entry in f["loops"].items()
    ]
    table(
        loops,
        [("LOOP", "loop"), ("OCCURRENCES", "occurrences"), ("NO-OP", "noop")],
        "no occurrences yet",
    )
    print()
    table(
        f["decisions"],
        [("DECISION", "kind"), ("REASON", "reason"), ("COUNT", "count")],
        "no decisions yet",
    )
    print()
    table(
        f["runs"],
        [
            ("LOOP", "loop"),
            ("RUN", "state"),
            ("OUTCOME", "outcome"),
            ("COUNT", "count"),
            ("CLAIMS", "attempts"),
        ],
        "no runs yet",
    )
    print()
    budget = ", ".join(
        f"{loop} {used['runs']} runs/{used['wall_clock_seconds']}s"
        for loop, used in f["budgetUsed24h"].items()
        if used["runs"] or used["wall_clock_seconds"]
    )
    findings = ", ".join(f"{s} {n}" for s, n in sorted(f["findings"].items())) or "none"
    wait, run = f["meanWaitSeconds"], f["meanExecutionSeconds"]
    for label, value in (
        ("duplicates suppressed", f["duplicatesSuppressed"]),
        ("retries", ", ".join(f"{c} {n}" for c, n in f["retries"].items())),
        ("runs per dispatched occurrence", _ratio(f["runsPerDispatchedOccurrence"])),
        ("budget used (24h)", budget or "none"),
        ("findings", findings),
        ("candidate promotion rate", _rate(f["candidatePromotionRate"])),
        ("finding dismissal rate", _rate(f["findingDismissalRate"])),
        ("human adoption of proposals", _rate(f["humanAdoptionRate"])),
        ("mean wait", "-" if wait is None else f"{wait:.1f}s"),
        ("mean execution", "-" if run is None else f"{run:.1f}s"),
    ):
        print(f"{label}: {value}")
