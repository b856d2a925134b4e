"""`engine demo`: serve the runtime in a throwaway directory with the fake adapter and
walk the loop of docs/walkthrough.md over HTTP, printing each step and the ids it created."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsl.diagnostics import RulesError
from engine.cli import exits
from engine.cli.common import add_json_option, print_json
from engine.cli.render import fail
from engine.cli.serve import port
from engine.errors import EngineError

if TYPE_CHECKING:
    from engine.demo import World

DEFAULT_PORT = 7522

DESCRIPTION = """\
Walk the whole loop on a fake adapter (docs/walkthrough.md): a work request, its
proposal and approval, a fake dispatch that opens PR #42, the chained work and scoped
merge requests, a signed workflow_run success delivered to the demo's own POST /github
(and deduplicated), the merge-scan proposal and approval, and the head-SHA-pinned
merge-apply proposal; then the merge-loop exception (the merge loop's read-only scan
runs approved by `schedule`).

The demo serves on 127.0.0.1 with its own secrets, a fresh database and a
config/repos.yaml naming one repository (demo -> example/demo) in a temporary
directory, and loads the shipped loops/ and registry/ unchanged. Without --keep it
stops and removes the directory at the end; with --keep it keeps serving (Ctrl-C
stops it) and leaves the directory for the CLI.

exit codes: 0 the walkthrough went through; 1 a step failed, the shipped rules are
invalid or the port is in use; 2 usage"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="walk the loop end to end on a fake adapter (docs/walkthrough.md)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--port", type=port, default=DEFAULT_PORT, help="listen port (default: %(default)s)"
    )
    p.add_argument(
        "--keep", action="store_true", help="keep serving after the walkthrough (Ctrl-C stops it)"
    )
    add_json_option(p)
    p.set_defaults(handler=run_demo_command)


@dataclass
class Steps:
    """The demo's report: printed as it goes, and kept for --json."""

    quiet: bool
    steps: list[dict[str, Any]] = field(default_factory=list)

    def step(self, title: str) -> None:
        self.steps.append({"step": len(self.steps) + 1, "title": title, "lines": []})
        self.say(f"\n[{len(self.steps)}] {title}")

    def line(self, label: str, text: str, **ids: Any) -> None:
        self.steps[-1]["lines"].append({"label": label, "text": text, **ids})
        self.say(f"    {label:<10} {text}")

    def say(self, text: str) -> None:
        if not self.quiet:
            print(text, flush=True)


def introduce(steps: Steps, directory: Path, url: str) -> None:
    steps.say("engine demo: the walkthrough's loop on the fake adapter (docs/walkthrough.md)")
    steps.say(f"    directory  {directory} (engine.db, config/repos.yaml)")
    steps.say(f"    serving    {url} (runtime loop, embedded worker, fake agent)")


def goodbye(steps: Steps, world: World, url: str, keep: bool) -> None:
    done = f"\ndone: {len(steps.steps)} steps"
    if not keep:
        steps.say(f"{done}. Run with --keep to look around afterwards.")
        return
    paths = world.paths
    for text in (
        f"{done}; still serving {url} (Ctrl-C stops it, the directory stays).",
        "Look with the CLI (it reads the same database):",
        f"    export ENGINE_DB={world.db} ENGINE_CONFIG={paths.config}",
        f"    export ENGINE_RULES={paths.rules} ENGINE_REGISTRY={paths.registry}",
        "    engine proposals; engine runs; engine journal; engine schedule",
        "    engine approve <the merge-apply proposal> --as demo   # the (fake) merge",
        f"or over HTTP: curl -H 'Authorization: Bearer {world.token}' {url}/proposals",
    ):
        steps.say(text)


async def wait_for_signal() -> None:
    """Until SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def demo(directory: Path, listen: int, keep: bool, steps: Steps) -> None:
    from engine.demo import make_world, serving, walk_over_http  # aiohttp: this command only

    world = make_world(directory)
    async with serving(world, listen) as url:
        introduce(steps, directory, url)
        await walk_over_http(url, world, steps)
        goodbye(steps, world, url, keep)
        if keep:
            await wait_for_signal()


def run_demo_command(args: argparse.Namespace) -> int:
    directory = Path(tempfile.mkdtemp(prefix="engine-demo-"))
    steps = Steps(quiet=args.json)
    try:
        asyncio.run(demo(directory, args.port, args.keep, steps))
    except (EngineError, RulesError) as err:
        return fail(err)
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    if args.json:
        print_json({"directory": str(directory), "kept": args.keep, "steps": steps.steps})
    return exits.OK
