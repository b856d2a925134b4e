"""Options and output helpers shared by subcommands."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from engine.loading import PATH_ENV, Paths, default_paths

DB_METAVAR = "PATH|URL"
DB_HELP = (
    "the SQLite file, or a postgresql:// URL without a password (default: "
    "$ENGINE_DATABASE_URL, else $ENGINE_DB, else var/engine.db)"
)


def add_db_option(parser: argparse.ArgumentParser, **extra: Any) -> None:
    parser.add_argument("--db", metavar=DB_METAVAR, help=DB_HELP, **extra)


def add_rules_options(parser: argparse.ArgumentParser) -> None:
    defaults = default_paths()
    parser.add_argument(
        "--rules",
        type=Path,
        default=defaults.rules,
        metavar="DIR",
        help="rule files, loops/*.rules (default: %(default)s)",
    )
    parser.add_argument(
        "--registry",
        type=Path,
        default=defaults.registry,
        metavar="DIR",
        help="event types, definitions, contracts (default: %(default)s)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"instance repos.yaml and schedule.yaml overlay (default: {defaults.config}; "
        "a directory given here or in ENGINE_CONFIG must exist)",
    )


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")


def paths_from(args: argparse.Namespace) -> Paths:
    """The directories of the command line; a config directory named by --config or
    ENGINE_CONFIG is required to exist, the default one is not."""
    given = args.config is not None or bool(os.environ.get(PATH_ENV["config"]))
    config = args.config if args.config is not None else default_paths().config
    return Paths(args.rules, args.registry, config, config_given=given)


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")
