"""`engine check --explain NAME [--json]`: every effective setting of one loop, or of one
work-bound loop shape, and where it came from
(docs/rules.md#seeing-a-loops-effective-settings). Imported only when --explain is
given, so a plain `engine check` stays lean."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from dsl.diagnostics import RulesError, did_you_mean
from engine.cli import exits
from engine.cli.common import paths_from, print_json
from engine.core.compiler import compile_rules
from engine.core.loop_explain import Row, UnknownLoop, explain_loop, warnings_of
from engine.core.ruleset import RuleSet
from engine.core.shape_explain import explain_shape
from engine.loading import load_tree

# How `engine check` reports rules that do not load (its `_report`).
Report = Callable[[RulesError, bool], int]
HEADER = Row("SETTING", "VALUE", "FROM")
# A value longer than this does not widen the column; its row's FROM moves right.
WIDEST_VALUE = 40


def run_explain(args: argparse.Namespace, report: Report) -> int:
    """0 with the rows; the usual diagnostics and 1 (or 2) when the rules do not load;
    2 and one line for a name that is neither a loop nor a shape of the rules."""
    try:
        # Read with every position (the registry too), so each source names its line.
        rules = compile_rules(load_tree(paths_from(args), fast=False))
    except RulesError as err:
        return report(err, args.json)
    try:
        rows = explain(rules, args.explain)
    except UnknownLoop as unknown:
        print(
            f"error: no loop '{unknown.name}'; {unknown_hint(rules, unknown.name)}", file=sys.stderr
        )
        return exits.USAGE
    if args.json:
        print_json([row.as_dict() for row in rows])
    else:
        for line in table(rows):
            print(line)
    warnings = warnings_of(rules, args.explain)
    kind = "shape" if args.explain in rules.work_shapes else "loop"
    if warnings:  # on stderr, as `engine check` prints them; the rows are what loaded
        print("\n" + "\n\n".join(w.render() for w in warnings), file=sys.stderr)
        count = len(warnings)
        print(
            f"\nwarning: {count} warning{'s' if count != 1 else ''} in this {kind}'s lines",
            file=sys.stderr,
        )
    return exits.OK


def explain(rules: RuleSet, name: str) -> list[Row]:
    """The rows of loop `name`, or of work-bound shape `name` (one name space holds
    both); raises UnknownLoop."""
    if name in rules.work_shapes:
        return explain_shape(rules, name)
    return explain_loop(rules, name)


def unknown_hint(rules: RuleSet, name: str) -> str:
    """A did-you-mean over the loops and the shapes, else the names there are."""
    hint = did_you_mean(name, sorted([*rules.loops, *rules.work_shapes]))
    if hint is not None:
        return hint
    loops, shapes = sorted(rules.loops), sorted(rules.work_shapes)
    if not loops and not shapes:
        return "no loop is declared"
    parts = []
    if loops:
        parts.append("loops: " + ", ".join(loops[:12]) + (", ..." if len(loops) > 12 else ""))
    if shapes:
        more = ", ..." if len(shapes) > 12 else ""
        parts.append("work shapes: " + ", ".join(shapes[:12]) + more)
    return "; ".join(parts)


def table(rows: list[Row]) -> list[str]:
    """Aligned columns SETTING, VALUE, FROM; a note follows its source after a colon."""
    setting_width = max(len(r.setting) for r in [HEADER, *rows])
    value_width = max(len(r.value) for r in [HEADER, *rows] if len(r.value) <= WIDEST_VALUE)
    lines = []
    for row in [HEADER, *rows]:
        source = row.source if row.note is None else f"{row.source}: {row.note}"
        lines.append(f"{row.setting:<{setting_width}}  {row.value:<{value_width}}  {source}")
    return lines
