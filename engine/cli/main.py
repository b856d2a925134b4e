"""The `engine` command. Subcommands live in small modules that register themselves on
the parser; each returns an exit code (see `engine.cli.exits`)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from dsl.diagnostics import RulesError
from engine.api.wire import version
from engine.cli.exits import OK, USAGE
from engine.errors import EngineError

# Each command and the module that registers it. A command imports only its own
# module, so `engine check` never pays for aiohttp or rich.
COMMANDS = {
    "check": "engine.cli.check",
    "digest": "engine.cli.check",
    "diagram": "engine.cli.diagram",
    "serve": "engine.cli.serve",
    "worker": "engine.cli.worker",
    "reap": "engine.cli.reap",
    "inject": "engine.cli.inject",
    "emit": "engine.cli.emit",
    "render": "engine.cli.render_timers",
    "github": "engine.cli.github",
    "proposals": "engine.cli.operate",
    "approve": "engine.cli.operate",
    "reject": "engine.cli.operate",
    "cancel": "engine.cli.operate",
    "findings": "engine.cli.findings",
    "shadow": "engine.cli.findings",
    "runs": "engine.cli.inspect",
    "events": "engine.cli.inspect",
    "journal": "engine.cli.inspect",
    "explain": "engine.cli.inspect",
    "simulate": "engine.cli.simulate",
    "schedule": "engine.cli.schedule",
    "doctor": "engine.cli.doctor",
    "stats": "engine.cli.stats",
    "demo": "engine.cli.demo",
    "replay": "engine.cli.replay",
}

DESCRIPTION = """\
A durable, rules-driven event runtime: clock slots, webhooks and chained outcomes
become typed events, planned through reviewable rule files (loops/*.rules) into
decisions, proposals and audited runs.

exit codes: 0 success; 1 invalid rules, a refusal, or unavailable (a retry may pass);
2 usage or configuration (an argument, a file or a setting to fix)"""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser for `command` alone, or for every command (help, unknown names)."""
    parser = argparse.ArgumentParser(
        prog="engine",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"engine {version()}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in wanted:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in args_list if not a.startswith("-")), None)
    parser = build_parser(command)
    args = parser.parse_args(args_list)
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
    except (EngineError, RulesError) as err:  # one a command did not report itself
        from engine.cli.render import fail  # rich, only on this path

        return fail(err)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
