# PYTHON_ARGCOMPLETE_OK  (argcomplete's global completion looks for this marker)
"""The `engine` command. Subcommands live in small modules that register themselves on
the parser; each returns an exit code (see `engine.cli.exits`)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from dsl.diagnostics import RulesError
from engine.api.wire import version
from engine.cli import examples
from engine.cli.exits import OK, USAGE
from engine.errors import EngineError

# Each command and the module that registers it. A command imports only its own
# module, so `engine check` never pays for aiohttp or rich.
COMMANDS = {
    "check": "engine.cli.check",
    "digest": "engine.cli.check",
    "fmt": "engine.cli.fmt",
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
    "notifications": "engine.cli.notifications",
    "explain": "engine.cli.inspect",
    "simulate": "engine.cli.simulate",
    "schedule": "engine.cli.schedule",
    "doctor": "engine.cli.doctor",
    "stats": "engine.cli.stats",
    "demo": "engine.cli.demo",
    "replay": "engine.cli.replay",
    "work": "engine.cli.work",
}

DESCRIPTION = """\
A durable, rules-driven event runtime: clock slots, webhooks and chained outcomes
become typed events, planned through reviewable rule files (loops/*.rules) into
decisions, proposals and audited runs.

exit codes: 0 success; 1 invalid rules, a refusal, or unavailable (a retry may pass);
2 usage or configuration (an argument, a file or a setting to fix)"""


class Parser(argparse.ArgumentParser):
    """argparse, with `did you mean` for a mistyped command or action (every sub-parser
    is of this class too: argparse makes them of their parent's)."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            self.exit(USAGE, f"{self.prog}: {unknown(value, list(action.choices))}\n")
        super()._check_value(action, value)


def unknown(name: str, known: Sequence[str]) -> str:
    """`unknown command 'chek'; did you mean 'check'?` (or where to look, with no match)."""
    import difflib  # only on this path: `engine check` stays lean

    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean '{close[0]}'?" if close else "see --help for the commands"
    return f"unknown command '{name}'; {hint}"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser for `command` alone, or for every command (help, unknown names)."""
    parser = Parser(
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
    examples.apply(parser)
    return parser


def complete() -> None:
    """Shell completion (docs/cli.md#shell-completion): when the shell asks, answer
    from the full parser and exit; otherwise nothing is imported."""
    if "_ARGCOMPLETE" in os.environ:
        import argcomplete

        argcomplete.autocomplete(build_parser())


def main(argv: Sequence[str] | None = None) -> int:
    complete()
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
