"""`engine check --explain LOOP [--json]`: every effective setting of one loop and where
it came from (docs/rules.md#seeing-a-loops-effective-settings). Imported only when
--explain is given, so a plain `engine check` stays lean."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from dsl.diagnostics import RulesError, did_you_mean
from engine.cli import exits
from engine.cli.common import paths_from, print_json
from engine.core.compiler import compile_rules
from engine.core.loop_explain import Row, UnknownLoop, explain_loop, warnings_of
from engine.loading import load_tree

# How `engine check` reports rules that do not load (its `_report`).
Report = Callable[[RulesError, bool], int]
HEADER = Row("SETTING", "VALUE", "FROM")
# A value longer than this does not widen the column; its row's FROM moves right.
WIDEST_VALUE = 40


def run_explain(args: argparse.Namespace, report: Report) -> int:
    """0 with the rows; the usual diagnostics and 1 (or 2) when the rules do not load;
    2 and one line for a loop the rules do not declare."""
    try:
        # Read with every position (the registry too), so each source names its line.
        rules = compile_rules(load_tree(paths_from(args), fast=False))
    except RulesError as err:
        return report(err, args.json)
    try:
        rows = explain_loop(rules, args.explain)
    except UnknownLoop as unknown:
        names = sorted(rules.loops)
        hint = did_you_mean(unknown.name, names) or (
            "loops: " + ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
            if names
            else "no loop is declared"
        )
        print(f"error: no loop '{unknown.name}'; {hint}", file=sys.stderr)
        return exits.USAGE
    if args.json:
        print_json([row.as_dict() for row in rows])
    else:
        for line in table(rows):
            print(line)
    warnings = warnings_of(rules, args.explain)
    if warnings:  # on stderr, as `engine check` prints them; the rows are what loaded
        print("\n" + "\n\n".join(w.render() for w in warnings), file=sys.stderr)
        count = len(warnings)
        print(
            f"\nwarning: {count} warning{'s' if count != 1 else ''} in this loop's lines",
            file=sys.stderr,
        )
    return exits.OK


def table(rows: list[Row]) -> list[str]:
    """Aligned columns SETTING, VALUE, FROM; a note follows its source after a colon."""
    setting_width = max(len(r.setting) for r in [HEADER, *rows])
    value_width = max(len(r.value) for r in [HEADER, *rows] if len(r.value) <= WIDEST_VALUE)
    lines = []
    for row in [HEADER, *rows]:
        source = row.source if row.note is None else f"{row.source}: {row.note}"
        lines.append(f"{row.setting:<{setting_width}}  {row.value:<{value_width}}  {source}")
    return lines
