"""`engine diagram`: draw the lifecycle machines compiled from the rules."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dsl.diagnostics import RulesError
from engine.cli import exits
from engine.cli.common import add_json_option, add_rules_options, paths_from, print_json
from engine.loading import load_rules
from engine.machines.catalog import Machines
from engine.machines.diagrams import DiagramFormat, Target, render, resolve_target, targets
from engine.machines.errors import LifecycleError

DESCRIPTION = """\
Draw a lifecycle state machine, compiled from the rules exactly as the runtime uses it.

TARGET is one of:
  occurrence, proposal, run   a lifecycle (occurrence: the default loop profile,
                              watched and singleton)
  a loop name                 that loop's occurrence machine, with the guards its
                              rules add (no_run_in_flight, actor_is_human)
  an event type               the occurrence machine of events no loop emitted
Without TARGET, list every target with its profile.

Formats: mermaid (text, the default), dot (Graphviz source), svg (needs Graphviz's
`dot` program). Terminal states are marked; the initial state is highlighted.

exit codes: 0 drawn or listed; 1 invalid rules (diagnostics on stderr); 2 unknown
target (with a did-you-mean), svg without `dot`, a missing rules or registry
directory, or an unwritable --out file"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "diagram",
        help="draw a lifecycle state machine (mermaid, dot or svg)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", nargs="?", metavar="TARGET", help="what to draw; omit to list")
    p.add_argument(
        "--format",
        choices=[f.value for f in DiagramFormat],
        default=DiagramFormat.MERMAID.value,
        help="diagram format (default: %(default)s)",
    )
    p.add_argument("--out", type=Path, metavar="FILE", help="write to FILE instead of stdout")
    add_rules_options(p)
    add_json_option(p)
    p.set_defaults(handler=run_diagram)


def run_diagram(args: argparse.Namespace) -> int:
    try:
        machines = Machines.from_rules(load_rules(paths_from(args)))
    except RulesError as err:
        print(err.render(), file=sys.stderr)
        usage = any(d.code == "E0900" for d in err.diagnostics)
        return exits.USAGE if usage else exits.INVALID
    if args.target is None:
        return _list(targets(machines), args.json)
    try:
        target = resolve_target(machines, args.target)
        text = render(target, DiagramFormat(args.format))
    except LifecycleError as err:
        hint = "\n(run `engine diagram` to list targets)" if err.exit_code == exits.USAGE else ""
        print(f"error: {err}{hint}", file=sys.stderr)
        return err.exit_code
    return _emit(target, args.format, text, args.out, args.json)


def _list(found: list[Target], as_json: bool) -> int:
    if as_json:
        print_json([{"target": t.name, "kind": t.kind.value, "summary": t.summary} for t in found])
        return exits.OK
    width = max(len(t.name) for t in found)
    kind = None
    for t in found:
        if t.kind is not kind:
            kind = t.kind
            print(f"{kind.value}s:")
        print(f"  {t.name:<{width}}  {t.summary}")
    return exits.OK


def _emit(target: Target, fmt: str, text: str, out: Path | None, as_json: bool) -> int:
    if out is not None:
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as err:
            print(f"error: cannot write {out}: {err.strerror}", file=sys.stderr)
            return exits.USAGE
    if as_json:
        print_json({"target": target.name, "format": fmt, "out": out, "diagram": text})
    elif out is not None:
        print(f"wrote {out} ({fmt}, {target.machine.name})")
    else:
        sys.stdout.write(text)
    return exits.OK
