"""`engine doctor`: the anomalies an operator must act on, read from the database
(the same check `GET /status` carries under `doctor`). Exit 1 when there is any."""

from __future__ import annotations

import argparse
from typing import Any

from engine.cli import exits
from engine.cli.common import print_json, whole_number
from engine.cli.inspect import add_db_options, opened
from engine.cli.render import guarded
from engine.service.doctor import PILEUP

DESCRIPTION = """\
Checks the schedules and prints `ok` or each anomaly:

  stopped_schedule  an enabled loop admitted no tick for two of its slots (interval or
                    cron; the gap between its slots), or a host-clock loop no event for
                    two of its intervals: is `engine serve` (or the host timer) running?
  proposal_pileup   a watched loop has more than N open proposals (--pileup, default 3):
                    approve or reject them, or check its cadence

Paused loops and superseded proposals are listed as information. See
docs/scheduling.md.

exit codes: 0 no anomaly; 1 anomalies found, no database, or invalid rules; 2 usage"""


count = whole_number(0, 100_000)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "doctor",
        help="check the schedules for anomalies (exit 1 when there are any)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--pileup",
        type=count,
        default=PILEUP,
        metavar="N",
        help="a watched loop with more than N open proposals is an anomaly (default: %(default)s)",
    )
    add_db_options(p)
    p.set_defaults(handler=guarded(run_doctor))


def run_doctor(args: argparse.Namespace) -> int:
    with opened(args) as service:
        report = service.doctor(args.pileup)
    if args.json:
        print_json(report)
    else:
        _print(report)
    return exits.OK if report["ok"] else exits.INVALID


def _print(report: dict[str, Any]) -> None:
    if report["ok"]:
        print("ok: no anomalies")
    for anomaly in report["anomalies"]:
        print(f"{anomaly['kind']}: {anomaly['message']}")
    for paused in report["pausedSchedules"]:
        print(f"info: loop '{paused['loop']}' is paused by {paused['by'] or '-'}")
    for loop, n in report["supersededProposals"].items():
        print(f"info: loop '{loop}' has {n} superseded proposals (a newer slot replaced them)")
