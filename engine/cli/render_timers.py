"""`engine render launchd|systemd`: the one-way renderer from the host clocks of
config/schedule.yaml to timer files that call `engine emit` (seed 1 §15). It writes
files; installing, loading or editing timers is the operator's act, never the engine's."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from engine.bridge import LABEL_PREFIX, UNIT_PREFIX, render_files
from engine.cli import exits
from engine.cli.common import add_rules_options, paths_from
from engine.cli.render import guarded
from engine.errors import BadRequest
from engine.loading import load_host_clocks

PREFIXES = {"launchd": LABEL_PREFIX, "systemd": UNIT_PREFIX}

DESCRIPTION = """\
Render each enabled host clock of config/schedule.yaml (`host_clocks:`) as a launchd
plist (engine.bridge.<name>.plist) or a systemd pair (engine-bridge-<name>.service and
.timer), each calling `engine emit`. Output is deterministic (sorted, no timestamps)
so it diffs cleanly in review; earlier rendered files of clocks no longer enabled
are removed from DIR. The rules and host clocks are checked first (fail
closed). Nothing is installed or loaded: copy the files into place yourself.

exit codes: 0 written; 1 invalid rules or host clocks; 2 usage"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "render",
        help="write launchd plists or systemd timers for the host clocks",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("kind", choices=("launchd", "systemd"), help="the timer format")
    add_rules_options(p)
    p.add_argument("--out", type=Path, metavar="DIR", help="where to write (default: deploy/KIND)")
    p.add_argument(
        "--engine",
        default=shutil.which("engine") or "engine",
        metavar="PATH",
        help="the engine command the timers call (default: %(default)s)",
    )
    p.set_defaults(handler=guarded(run_render))


def run_render(args: argparse.Namespace) -> int:
    _, clocks = load_host_clocks(paths_from(args))
    files = render_files(args.kind, clocks, args.engine)
    out: Path = args.out or Path("deploy") / args.kind
    try:
        out.mkdir(parents=True, exist_ok=True)
        for stale in sorted(out.glob(f"{PREFIXES[args.kind]}*")):
            if stale.name not in files:  # a clock disabled or removed since the last render
                stale.unlink()
        for name, data in files.items():
            (out / name).write_bytes(data)
    except OSError as err:
        raise BadRequest(f"cannot write {out}: {err.strerror}") from None
    for name in files:
        print(out / name)
    if not files:
        print(f"no enabled host clocks: nothing written to {out}")
    return exits.OK
