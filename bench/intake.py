"""GitHub intake throughput: signed ~6 KB pull_request deliveries through `POST /github`
to durable admission, beside a bare aiohttp handler and the octokit peer.

Three servers, each a subprocess on a free loopback port, loaded the same way in the
same invocation, one at a time (all three are up; the idle two cost nothing):

* **bare**: bench/intake_bare.py, aiohttp on this interpreter reading the body and
  answering JSON; the floor of our stack.
* **peer**: ../shared/bench/peer_octokit.sh, @octokit/webhooks on Node verifying
  X-Hub-Signature-256 and dispatching to a no-op handler, in memory, no durability.
* **engine**: `engine serve --db TMP/e.db --no-worker --config TMP/config` with the
  secret in ENGINE_GITHUB_WEBHOOK_SECRET; a temporary config/repos.yaml names the
  delivery's repository and base branch, so loops/github.rules admits every delivery
  as factory.merge.requested.

The delivery is the shared fixture pull_request.opened cut to 6,144 bytes of compact
JSON (bench/intake_load.py). wrk (Debian's `wrk`) sends it with `-t2 -c16 --latency`,
a fresh X-GitHub-Delivery on every request so each is a new admission; without wrk, a
slower aiohttp client in a process of its own does, and the report says so. Each
server gets one probe delivery (its answer is printed) and a warm-up; then --rounds
rounds of one measured run per server, back to back, so a shared machine's drift falls
on all three alike; each server's median run is the one reported, with p50 and p99
(wrk's) and the server process's CPU time per answer (user + system, every thread,
from /proc), which a busy machine sways less than req/s. After the engine
stops, its SQLite file is read: the factory.merge.requested rows should equal the 2xx
answers, give or take the requests in flight when a load run stopped.

Figures are printed, never asserted. Target: the engine at least half the bare
handler's requests/s; the goal beyond it, the peer's. Ratios hold better than req/s on
a shared machine. Linux, loopback only; every child is stopped on exit, Ctrl-C included.

    /tmp/v/bin/python bench/intake.py                 # or .venv/bin/python
    /tmp/v/bin/python bench/intake.py --rounds 3       # steadier on a busy machine
    /tmp/v/bin/python bench/intake.py --duration 20 --connections 32 --no-peer
    /tmp/v/bin/python bench/intake.py --json          # machine-readable figures
    /tmp/v/bin/python bench/intake.py --profile 25    # plus py-spy of the engine (pip)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import aiohttp
from check import revision
from intake_load import (
    Load,
    load_argv,
    make_load,
    new_nonce,
    parse_result,
    write_delivery,
    wrk_version,
)
from intake_profile import py_spy, read_samples, record_argv, summary
from intake_report import ORDER, durability, median_run, report, summarise
from intake_servers import (
    PEER,
    Children,
    Server,
    bare_server,
    count_admitted,
    cpu_seconds,
    engine_server,
    peer_server,
    probe,
    tail,
    wait_ready,
    write_config,
)

# ---- the servers -------------------------------------------------------------------------


@dataclass
class Running:
    server: Server
    proc: subprocess.Popen[bytes]
    figures: dict[str, Any]


def run_load(children: Children, load: Load, port: int, seconds: int) -> dict[str, Any]:
    argv = load_argv(load, port, seconds, new_nonce())
    return parse_result(children.run("load", argv, timeout=seconds + 60))


def measured_run(children: Children, r: Running, load: Load, seconds: int) -> dict[str, Any]:
    """One load run, with the CPU time the server process spent on it."""
    before = cpu_seconds(r.proc.pid)
    run = run_load(children, load, r.server.port, seconds)
    run["server_cpu_s"] = cpu_seconds(r.proc.pid) - before
    run["server_cpu_us_per_request"] = run["server_cpu_s"] / max(1, run["requests"]) * 1e6
    return run


def start(children: Children, server: Server, load: Load, args: argparse.Namespace) -> Running:
    """Start a server, send it one probe delivery, warm it up."""
    proc = children.start(server.key, server.argv, server.env)
    figures: dict[str, Any] = {"label": server.label, "port": server.port, "runs": []}
    figures["ready_s"] = wait_ready(server, proc, children.logs)
    figures["probe"] = probe(server, load.delivery, f"{new_nonce()}-0000-4000-8000-000000000000")
    if server.key == "engine" and figures["probe"]["status"] != 202:
        raise RuntimeError(
            f"the engine did not admit the probe delivery: {figures['probe']}\n"
            + tail(children.logs, server)
        )
    figures["warmup"] = run_load(children, load, server.port, args.warmup)
    return Running(server, proc, figures)


def start_peer(
    children: Children, load: Load, args: argparse.Namespace, secret: str
) -> Running | dict[str, Any]:
    """The running peer, or why it could not run (the others go on without it)."""
    label = "octokit/webhooks (Node)"
    if args.peer is None:
        return {"label": label, "error": "--no-peer"}
    if not args.peer.is_file():
        return {"label": label, "error": f"{args.peer} not found"}
    try:
        return start(children, peer_server(args.peer, secret), load, args)
    except RuntimeError as err:
        return {"label": label, "error": str(err).splitlines()[0]}


def profile_engine(
    children: Children, engine: Running, load: Load, args: argparse.Namespace
) -> dict[str, Any]:
    """py-spy on the engine during one more load run of --duration seconds."""
    binary = py_spy()
    if binary is None:
        return {"profile_text": "py-spy not found (pip install py-spy)"}
    raw = children.logs / "engine.pyspy.txt"
    spy = children.start("py-spy", record_argv(binary, engine.proc.pid, args.duration, raw))
    run = run_load(children, load, engine.server.port, args.duration)
    with contextlib.suppress(subprocess.TimeoutExpired):  # stopped just below
        spy.wait(args.duration + 30)
    children.stop(spy)
    if not raw.exists():
        text = "py-spy wrote nothing:\n" + (children.logs / "py-spy.log").read_text()
        return {"profile_runs": [run], "profile_text": text}
    text = summary(read_samples(raw), args.profile, args.duration)
    return {"profile_runs": [run], "profile_text": text}


def run_rounds(
    children: Children, load: Load, args: argparse.Namespace, db: Path, config: Path, secret: str
) -> dict[str, Any]:
    """All three servers up at once (the two idle ones cost nothing); then --rounds
    rounds of one measured run each, back to back, so a shared machine's drift falls on
    all three alike; then the engine's profile run; then each is stopped (the engine
    gracefully, closing its store) and keeps its median run."""
    running = {"bare": start(children, bare_server(), load, args)}
    peer = start_peer(children, load, args, secret)
    if isinstance(peer, Running):
        running["peer"] = peer
    running["engine"] = start(children, engine_server(db, config, secret), load, args)
    for _ in range(args.rounds):
        for r in running.values():
            r.figures["runs"].append(measured_run(children, r, load, args.duration))
    if args.profile:
        running["engine"].figures.update(profile_engine(children, running["engine"], load, args))
    for r in running.values():
        r.figures["run"] = median_run(r.figures["runs"])
        r.figures["exit_code"] = children.stop(r.proc)
    servers = {key: r.figures for key, r in running.items()}
    if isinstance(peer, dict):
        servers["peer"] = peer
    return {key: servers[key] for key in ORDER}


# ---- main --------------------------------------------------------------------------------


def node_version() -> str:
    try:
        done = subprocess.run(["node", "--version"], capture_output=True, text=True)
    except OSError:
        return "Node not installed"
    return f"Node {done.stdout.strip()}"


def measure(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    secret = secrets.token_hex(16)
    delivery = write_delivery(root, secret)
    load = make_load(root, delivery, args.connections, args.threads)
    db, config = root / "e.db", write_config(root, delivery.body)
    (root / "logs").mkdir()
    with Children(root / "logs") as children:
        servers = run_rounds(children, load, args, db, config, secret)
    counts = count_admitted(db)
    figures = {
        "revision": revision(),
        "python": sys.version.split()[0],
        "aiohttp": aiohttp.__version__,
        "node": node_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "load": {
            "tool": load.tool,
            "wrk": wrk_version(),
            "connections": args.connections,
            "threads": load.threads,
            "duration_s": args.duration,
            "rounds": args.rounds,
            "warmup_s": args.warmup,
            "body_bytes": len(delivery.body),
        },
        "servers": servers,
        "counts": counts,
        "durability": durability(servers["engine"], counts, args.connections),
        "load_average_1m": [load_before, os.getloadavg()[0]],
    }
    figures["summary"] = summarise(figures)
    return figures


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--duration", type=int, default=10, help="seconds (%(default)s)")
    parser.add_argument("--warmup", type=int, default=2, help="seconds (%(default)s)")
    parser.add_argument("--rounds", type=int, default=1, help="runs per server (%(default)s)")
    parser.add_argument("--connections", type=int, default=16, help="(%(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="wrk threads (%(default)s)")
    parser.add_argument("--peer", type=Path, default=PEER, help="peer script (%(default)s)")
    parser.add_argument("--no-peer", dest="peer", action="store_const", const=None)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--profile", type=int, metavar="N", help="py-spy: N top functions")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    if min(args.duration, args.warmup, args.rounds, args.connections, args.threads) < 1:
        parser.error("--duration, --warmup, --rounds, --connections, --threads: at least 1")
    return args


def _interrupt(signum: int, frame: object) -> NoReturn:
    raise KeyboardInterrupt  # unwinds through Children, which stops every child


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGINT, _interrupt)  # even where a shell started it ignoring SIGINT
    signal.signal(signal.SIGTERM, _interrupt)
    root = Path(tempfile.mkdtemp(prefix="engine-bench-"))
    try:
        figures = measure(args, root)
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; every server stopped", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    profile = figures["servers"]["engine"].pop("profile_text", None)
    if args.json:
        json.dump(figures, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(report(figures))
    if profile is not None:
        out = sys.stderr if args.json else sys.stdout
        print(f"\nprofile of the engine under the same load (one more run)\n{profile}", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
