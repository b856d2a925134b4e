"""Options and output helpers shared by subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from engine.loading import Paths, default_paths

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
        default=defaults.config,
        metavar="DIR",
        help="instance repos.yaml and schedule.yaml overlay (default: %(default)s)",
    )


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")


def paths_from(args: argparse.Namespace) -> Paths:
    return Paths(args.rules, args.registry, args.config)


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")
