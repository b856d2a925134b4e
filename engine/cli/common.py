"""Options and output helpers shared by subcommands."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.home import HOME_ENV, instance_home
from engine.loading import PATH_ENV, Paths, default_paths

DB_METAVAR = "PATH|URL"
DB_HELP = (
    "the SQLite file, or a postgresql:// URL without a password (default: "
    "$ENGINE_DATABASE_URL, else $ENGINE_DB, else var/engine.db in the instance "
    "directory or, without one, in the working directory)"
)


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high` written in ASCII digits
    (int() alone would take '٣', '1_000' and ' 7', and let '²' through as a traceback)."""

    def parse(text: str) -> int:
        if not (text.isascii() and text.isdigit()) or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(
                f"expected a whole number from {low} to {high}, not '{text}'"
            )
        return int(text)

    return parse


def number_between(kind: Callable[[str], float], low: float, high: float) -> Callable[[str], Any]:
    """An argparse type: a number of `kind` (int or float) from `low` to `high`; never
    nan or infinite, which fail the bounds."""

    def parse(text: str) -> float:
        try:
            value = kind(text) if text.isascii() else None
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"expected a number from {low:g} to {high:g}, not '{text}'"
            )
        return value

    return parse


def add_db_option(parser: argparse.ArgumentParser, **extra: Any) -> None:
    parser.add_argument("--db", metavar=DB_METAVAR, help=DB_HELP, **extra)


def add_rules_options(parser: argparse.ArgumentParser) -> None:
    """--home, --rules, --registry, --config. The directories' defaults are decided when
    the command runs (`paths_from`), so --home moves all three."""
    defaults = default_paths()
    parser.add_argument(
        "--home",
        action=HomeOption,
        default=None,
        metavar="DIR",
        help=f"the instance directory: loops/, registry/, config/ and var/ (default: "
        f"${HOME_ENV}; docs/deploy.md#the-instance-directory)",
    )
    parser.add_argument(
        "--rules",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"rule files, loops/*.rules (default: {defaults.rules})",
    )
    parser.add_argument(
        "--registry",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"event types, definitions, contracts (default: {defaults.registry})",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"instance repos.yaml and schedule.yaml overlay (default: {defaults.config}; "
        "a directory given here or in ENGINE_CONFIG must exist)",
    )


class HomeOption(argparse.Action):
    """`--home DIR` stands for ENGINE_HOME=DIR in this process and what it runs (as
    git's --git-dir stands for GIT_DIR): the database default, the directories and a
    child's environment then follow it alike."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        os.environ[HOME_ENV] = str(Path(values).absolute())
        setattr(namespace, self.dest, Path(values))


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")


def paths_from(args: argparse.Namespace) -> Paths:
    """The directories: each option given, else its variable, else the instance
    directory's, else today's defaults (`default_paths`). A config directory named by
    --config or ENGINE_CONFIG is required to exist, the default one is not; an
    instance directory that is not one is ConfigError (exit 2)."""
    instance_home()
    defaults = default_paths()
    given = args.config is not None or bool(os.environ.get(PATH_ENV["config"]))
    return Paths(
        args.rules if args.rules is not None else defaults.rules,
        args.registry if args.registry is not None else defaults.registry,
        args.config if args.config is not None else defaults.config,
        config_given=given,
    )


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")
