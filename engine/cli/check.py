"""`engine check` and `engine digest`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dsl.diagnostics import RulesError
from engine import check_cache
from engine.cli import exits
from engine.cli.common import add_json_option, add_rules_options, paths_from, print_json
from engine.core.compiler import describe
from engine.loading import digest, load_rules
from engine.notify.config import check_file


def register(sub: Any) -> None:
    p = sub.add_parser(
        "check",
        help="validate rules, registry and overlay (fail closed)",
        description="Parse and compile loops/*.rules with the registry and the instance "
        "overlay. Prints a summary, or every error with file:line:col, the line, a caret "
        "and a hint. Exit 0 valid, 1 invalid, 2 usage. With --explain NAME, prints "
        "every effective setting of that loop (or work-bound loop shape) and where it "
        "came from instead.",
    )
    add_rules_options(p)
    add_json_option(p)
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="parse every file afresh, neither reading nor writing the check cache in "
        f"var/cache/check (also {check_cache.ENV}=0; docs/cli.md#the-check-cache)",
    )
    p.add_argument(
        "--explain",
        metavar="NAME",
        default=None,
        help="print every effective setting of the loop or work-bound loop shape NAME and "
        "where it came from: a rule line, a default, an overlay line or the registry "
        "(docs/rules.md#seeing-a-loops-effective-settings); "
        "exit 2 for a name the rules do not declare",
    )
    p.set_defaults(handler=run_check)

    d = sub.add_parser(
        "digest",
        help="print the sha256 over the kernel files (loops/ and registry/)",
        description="The digest covers loops/**/*.rules and registry/** in canonical order; "
        "config/ (the overlay, repos) never changes it.",
    )
    add_rules_options(d)
    add_json_option(d)
    d.set_defaults(handler=run_digest)


def run_check(args: argparse.Namespace) -> int:
    if args.explain is not None:
        from engine.cli.check_explain import run_explain  # only on this path: check stays lean

        return run_explain(args, _report)

    paths = paths_from(args)
    cache = None
    if check_cache.enabled(args.no_cache):
        cache = check_cache.CheckCache(check_cache.default_directory())
    try:
        rules = load_rules(paths, cache)
        check_file(paths.config)  # config/notifications.yaml (docs/notifications.md)
    except RulesError as err:
        return _report(err, args.json)
    summary = dict(describe(rules))
    if args.json:
        print_json({"valid": True, **summary, "warnings": [w.as_dict() for w in rules.warnings]})
        return exits.OK
    if rules.warnings:  # rendered like errors, on stderr; the rules loaded
        print("\n\n".join(w.render() for w in rules.warnings), file=sys.stderr)
        count = len(rules.warnings)
        print(
            f"\nwarning: {count} warning{'s' if count != 1 else ''}; the rules loaded\n",
            file=sys.stderr,
        )
    print(
        f"ok: {summary['loops']} loops ({summary['enabledLoops']} enabled), "
        f"{summary['routes']} routes, {summary['chains']} chains, "
        f"{summary['webhookRules']} webhook rules in {summary['webhookKinds']} kinds, "
        f"{summary['eventTypes']} event types, {summary['definitions']} definitions, "
        f"{summary['repos']} repos{_shapes(summary)}"
    )
    print(f"digest: {summary['digest']}")
    return exits.OK


def _shapes(summary: dict[str, Any]) -> str:
    """`, 1 work shape` for the summary line; nothing without shapes."""
    count = len(summary.get("workShapes", ()))
    return f", {count} work shape{'s' if count != 1 else ''}" if count else ""


def _report(err: RulesError, as_json: bool) -> int:
    if as_json:
        errors = [d.as_dict() for d in err.diagnostics]
        warnings = [w.as_dict() for w in err.warnings]
        print_json({"valid": False, "errors": errors, "warnings": warnings})
    else:
        print(err.render(), file=sys.stderr)  # the errors, then the warnings
        count = len(err.diagnostics)
        print(
            f"\nerror: {count} problem{'s' if count != 1 else ''} found; nothing was loaded",
            file=sys.stderr,
        )
    return exits.of_rules(err)


def run_digest(args: argparse.Namespace) -> int:
    paths = paths_from(args)
    if not paths.rules.is_dir() or not paths.registry.is_dir():
        print(f"error: {paths.rules} or {paths.registry} is not a directory", file=sys.stderr)
        return exits.USAGE
    try:
        value = digest(paths)
    except RulesError as err:  # a kernel file that cannot be read
        return _report(err, args.json)
    if args.json:
        print_json({"digest": value})
    else:
        print(value)
    return exits.OK
