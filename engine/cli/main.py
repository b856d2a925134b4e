"""The `engine` command. Subcommands live in small modules that register themselves on
the parser; each returns an exit code (see `engine.cli.exits`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from engine.cli import check, diagram
from engine.cli.exits import OK, USAGE

DESCRIPTION = """\
A durable, rules-driven event runtime: clock slots, webhooks and chained outcomes
become typed events, planned through reviewable rule files (loops/*.rules) into
decisions, proposals and audited runs.

exit codes: 0 success, 1 invalid rules or a failed check, 2 usage error"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="engine",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in (check, diagram):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help(sys.stderr)
        return USAGE
    try:
        code: int = args.handler(args)
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return OK
    except KeyboardInterrupt:
        return 130  # the shell's convention for SIGINT
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
