"""`engine render launchd|systemd`: the one-way renderer of the deploy files
(docs/deploy.md): the serve unit, an optional worker unit, a timer per enabled host
clock of config/schedule.yaml calling `engine emit`, and the environment file's
template. It writes files; installing, loading or editing units is the operator's
act, never the engine's."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from engine.cli import exits
from engine.cli.common import add_json_option, add_rules_options, paths_from, print_json
from engine.cli.render import guarded
from engine.deploy import KINDS, Target, default_env_file, managed, render
from engine.errors import BadRequest
from engine.home import instance_home
from engine.loading import load_host_clocks

DESCRIPTION = """\
Write the deploy files of this instance into DIR: the serve unit (engine-serve.service,
or engine.serve.plist), with --worker a separate worker unit (serve then runs
--no-worker), a timer per enabled host clock of config/schedule.yaml (`host_clocks:`)
calling `engine emit` (engine-bridge-<name>.service and .timer, or
engine.bridge.<name>.plist), and engine.env.template, the names of the secrets with
empty values. The units run the engine at its absolute path (--engine, default: the
engine running this command) with ENGINE_HOME set when an instance directory is in
use (--home, $ENGINE_HOME). Output is deterministic (sorted, no timestamps) so it
diffs cleanly in review; files of clocks no longer enabled (or a worker unit no
longer asked for) are removed from DIR. The rules and host clocks are checked first
(fail closed). Nothing is installed or loaded: copy the files into place yourself
(docs/deploy.md).

exit codes: 0 written; 1 invalid rules or host clocks; 2 usage (a relative --engine,
an engine that cannot be found, a DIR that cannot be written)"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "render",
        help="write the systemd units or launchd plists of serve, worker and host clocks",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("kind", choices=KINDS, help="the service manager")
    add_rules_options(p)
    p.add_argument("--out", type=Path, metavar="DIR", help="where to write (default: deploy/KIND)")
    p.add_argument(
        "--engine",
        metavar="PATH",
        help="the absolute path of the engine the units run (default: this engine's)",
    )
    p.add_argument("--worker", action="store_true", help="also a worker unit; serve --no-worker")
    p.add_argument(
        "--env-file",
        metavar="PATH",
        help="systemd's EnvironmentFile= (default: <home>/engine.env, or "
        "%%h/.config/engine/engine.env without an instance directory)",
    )
    add_json_option(p)
    p.set_defaults(handler=guarded(run_render))


def engine_path(given: str | None) -> str:
    """--engine (absolute, or BadRequest); else the `engine` script running this
    command, the one beside this interpreter, or the one on PATH, made absolute (not
    resolved: a symbolic link such as /usr/local/bin/engine survives a reinstall)."""
    if given is not None:
        if not os.path.isabs(given):
            raise BadRequest(
                f"--engine {given!r} is not an absolute path: systemd and launchd do not "
                "search your shell's PATH"
            )
        return given
    running = Path(sys.argv[0])
    beside = Path(sys.executable).parent / "engine"
    for candidate in (running if running.name == "engine" else None, beside):
        if candidate is not None and candidate.is_file():
            return os.path.abspath(candidate)
    found = shutil.which("engine")
    if found is None:
        raise BadRequest("cannot tell where the engine command is: pass --engine PATH")
    return os.path.abspath(found)


def target_from(args: argparse.Namespace) -> Target:
    home = instance_home()
    text = str(home) if home is not None else None
    given = args.env_file
    if given is not None and not (os.path.isabs(given) or given.startswith("%h/")):
        raise BadRequest(f"--env-file {args.env_file!r} is not an absolute path")
    env_file = args.env_file or default_env_file(text)
    return Target(engine_path(args.engine), text, env_file, args.worker)


def write(out: Path, kind: str, files: dict[str, bytes]) -> list[Path]:
    """Write `files` into `out`; remove the managed files not among them. The removed."""
    removed = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for stale in sorted(out.iterdir()):
            if managed(kind, stale.name) and stale.name not in files:
                stale.unlink()
                removed.append(stale)
        for name, data in files.items():
            (out / name).write_bytes(data)
    except OSError as err:
        raise BadRequest(f"cannot write {out}: {err.strerror}") from None
    return removed


def run_render(args: argparse.Namespace) -> int:
    target = target_from(args)
    _, clocks = load_host_clocks(paths_from(args))
    files = render(args.kind, clocks, target)
    out: Path = args.out or Path("deploy") / args.kind
    removed = write(out, args.kind, files)
    if args.json:
        written = [{"path": str(out / n), "bytes": len(data)} for n, data in files.items()]
        print_json({"files": written, "removed": [str(p) for p in removed]})
        return exits.OK
    for name in files:
        print(out / name)
    if target.home is None:
        print(
            "note: no instance directory (--home, ENGINE_HOME): the units use the engine's "
            "default directories",
            file=sys.stderr,
        )
    return exits.OK
