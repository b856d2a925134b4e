"""`engine replay`: every recorded decision decided again under the rules given, from
the facts recorded with it, and what differs (docs/replay.md). Never writes the
database."""

from __future__ import annotations

import argparse
from typing import Any

from engine.bootstrap import database_path
from engine.cli import exits
from engine.cli.common import (
    add_db_option,
    add_json_option,
    add_rules_options,
    paths_from,
    print_json,
)
from engine.cli.render import guarded
from engine.core.replay import lines
from engine.service.replay import Window, replay

DESCRIPTION = """\
Re-decides every recorded decision (decided in [--since, --until)) with the facts
recorded with it, under the rules given, and prints each one that differs (old and
new, each with its rule's file:line) and a summary; the scheduler's recorded passes
are planned again too, and each slot that would fire otherwise is listed; each
recorded GitHub delivery is translated again, and one the new webhook tables would
ignore, reject or turn into another event is listed. The database is never written
(a SQLite file is copied first). See docs/replay.md.

exit codes: 0 no difference, or differences without --fail-on-diff; 1 differences with
--fail-on-diff, or invalid rules; 2 usage (a missing database, a bad time, --since not
before --until, a missing rules directory)"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "replay",
        help="re-decide the recorded decisions under changed rules; print what differs",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_db_option(p)
    add_rules_options(p)
    p.add_argument("--since", metavar="T", help="only decisions made at or after T (ISO-8601)")
    p.add_argument("--until", metavar="T", help="only decisions made before T (ISO-8601)")
    p.add_argument("--fail-on-diff", action="store_true", help="exit 1 when anything differs")
    add_json_option(p)
    p.set_defaults(handler=guarded(run_replay))


def run_replay(args: argparse.Namespace) -> int:
    window = Window.of(args.since, args.until)
    report = replay(database_path(args.db), paths_from(args), window)
    if args.json:
        print_json(report.document())
    else:
        print("\n".join(lines(report)))
    return exits.INVALID if args.fail_on_diff and report.differs else exits.OK
