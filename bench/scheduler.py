"""How fast the in-process scheduler admits and plans ticks, beside a floor and a peer.

Three figures, each on a rule tree generated into a temporary directory
(bench/scheduler_tree.py) and a fresh SQLite file, with the clock injected
(`open_service(db, paths, clock=...)`) so the slots fall where the benchmark puts them:

* **the wave**: `--loops` (10,000) enabled `every 60m` loops under `approval watched`,
  all due at one slot. A first `Service.pump()` at 09:59:59 records their enablement
  (a loop is due only from enablement); the clock moves to 10:00:00.5 and the timed
  `pump()` fires the scheduler pass and plans until drained: each tick admitted as an
  event, decided, proposed and journalled. The counts are then read back from the file.
  Beside it, in the same invocation: the floor, the same rows written with plain
  sqlite3 in one transaction (bench/scheduler_floor.py; `executemany`, and one
  `execute` a row for reference), and the peer, `../shared/bench/peer_apscheduler.sh N`
  (APScheduler 3 with a SQLite job store; its wave seconds). Target: within 3x of the
  floor.
* **the idle pass**: after the wave, with the clock inside the hour and nothing due,
  `service.scheduler.run_pass()` repeated (`--idle-reps`), median and p99. Target: at
  most 2 ms. An idle `pump()` (the pass, plus the outbox and planning queries) is
  printed beside it.
* **catch-up**: one `every 1m` loop under `catch-up all cap 50000`, enabled at t0, the
  clock then moved `--minutes` (43,200: 30 days) on; the timed `pump()` admits and plans
  every missed slot. Targets: at most 3 s and 50 MB of peak memory growth, and with
  the service's start-up at the later time (load, compile, migrate, the scheduler's
  start) within 2x its floor: the same rows for that many ticks written with plain
  sqlite3 `executemany` (bench/scheduler_floor.py). It runs in a
  child process of its own (bench/scheduler_catchup.py), which reports its peak
  resident set growth during that pump: the kernel's high-water mark (VmHWM), reset
  through /proc/self/clear_refs just before the pump, less VmRSS before it. Not
  `ru_maxrss`, which carries the spawning process's peak into the child, nor
  tracemalloc, which sees only Python's allocations, not SQLite's page cache.

Figures are printed, never asserted; each target is printed with met or MISSED.
Ratios to the floor and the peer hold better than seconds on a shared machine. Linux.

    /tmp/v/bin/python bench/scheduler.py                  # or .venv/bin/python
    /tmp/v/bin/python bench/scheduler.py --loops 2000 --minutes 5000 --no-peer
    /tmp/v/bin/python bench/scheduler.py --json           # machine-readable figures
    /tmp/v/bin/python bench/scheduler.py --profile 25     # plus a cProfile of one wave
    /tmp/v/bin/python bench/scheduler.py --queries        # plus its SQL time by query
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from check import revision
from scheduler_catchup import run_catchup
from scheduler_floor import measure_floor
from scheduler_queries import query_report
from scheduler_runtime import (
    ENABLED_AT,
    SLOT,
    WAVE_AT,
    ManualClock,
    close,
    open_at,
    tick_counts,
    timed,
    verify,
)
from scheduler_tree import write_wave_tree

from engine.loading import project_root
from engine.service import Service

FLOOR_RATIO = 3.0
IDLE_MS = 2.0
CATCHUP_S = 3.0
CATCHUP_FLOOR_RATIO = 2.0
CATCHUP_MB = 50.0
PEER = project_root().parent / "shared" / "bench" / "peer_apscheduler.sh"


# ---- the wave -----------------------------------------------------------------------


def run_wave(
    root: Path, loops: int, db: str | None = None
) -> tuple[dict[str, Any], Service, ManualClock]:
    """Open a service over `loops` loops (on `db`, a PostgreSQL URL, else a SQLite file
    in `root`), record their enablement, then time the pump that fires and plans the
    slot. The service stays open for the idle pass."""
    paths = write_wave_tree(root / "tree", loops)
    clock = ManualClock(ENABLED_AT)
    open_s, service = timed(lambda: open_at(root, paths, clock, db))
    start_s, _ = timed(service.pump)
    clock.now = WAVE_AT
    wave_s, work = timed(service.pump)
    counts = tick_counts(db or root / "engine.db")
    verify(counts, loops, "wave")
    figures = {
        "loops": loops,
        "open_service_s": open_s,
        "start_pump_s": start_s,
        "s": wave_s,
        "ticks_per_s": loops / wave_s,
        "pump_work": work,
        "counts": counts,
    }
    return figures, service, clock


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def spread(samples_ns: list[int]) -> dict[str, float]:
    ms = [s / 1e6 for s in samples_ns]
    return {
        "median_ms": statistics.median(ms),
        "p99_ms": percentile(ms, 0.99),
        "max_ms": max(ms),
        "reps": len(ms),
    }


def idle(service: Service, clock: ManualClock, reps: int) -> dict[str, Any]:
    """Passes with nothing due, the clock walking through the rest of the hour."""
    step = timedelta(minutes=50) / reps
    passes, pumps = [], []
    for i in range(reps):
        clock.now = SLOT + timedelta(minutes=1) + step * i
        start = time.perf_counter_ns()
        fired = service.scheduler.run_pass()
        passes.append(time.perf_counter_ns() - start)
        if fired:
            sys.exit(f"error: an idle pass fired {fired} ticks at {clock.now}")
    for i in range(max(1, reps // 50)):
        clock.now = SLOT + timedelta(minutes=55, milliseconds=i)
        start = time.perf_counter_ns()
        service.pump()
        pumps.append(time.perf_counter_ns() - start)
    next_due = service.scheduler.next_due()
    return {"run_pass": spread(passes), "pump": spread(pumps), "next_due": str(next_due)}


# ---- the peer ----------------------------------------------------------------------------

PEER_LINE = re.compile(r"apscheduler N=(\d+) register_s=([\d.]+) wave_s=([\d.]+) fired=(\d+)")


def run_peer(script: Path, loops: int) -> dict[str, Any]:
    """The peer's own figures, or why it could not run."""
    if not script.is_file():
        return {"error": f"{script} not found"}
    try:
        done = subprocess.run(
            ["bash", str(script), str(loops)], capture_output=True, text=True, timeout=900
        )
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 900 s"}
    found = PEER_LINE.search(done.stdout)
    if done.returncode != 0 or found is None:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        return {"error": f"exit {done.returncode}: " + " | ".join(tail)}
    n, register, wave, fired = found.groups()
    return {"loops": int(n), "register_s": float(register), "s": float(wave), "fired": int(fired)}


# ---- profile -----------------------------------------------------------------------------


def profile_wave(root: Path, loops: int, top: int) -> str:
    """cProfile of the wave's pump alone (a fresh tree and file)."""
    paths = write_wave_tree(root / "tree", loops)
    clock = ManualClock(ENABLED_AT)
    service = open_at(root, paths, clock)
    service.pump()
    clock.now = WAVE_AT
    profiler = cProfile.Profile()
    profiler.runcall(service.pump)
    close(service)
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text).strip_dirs()
    for key in ("cumulative", "tottime"):
        stats.sort_stats(key).print_stats(top)
    return text.getvalue()


def wave_on_postgres(root: Path, loops: int, server: str) -> dict[str, Any]:
    """The same wave on a fresh PostgreSQL database: of the server at `server`, or of a
    throwaway cluster started like the tests' (tests/databases.py)."""
    if server == "no":
        return {"error": "--postgres no"}
    sys.path.insert(0, str(project_root() / "tests"))
    import databases

    cluster = None
    if server == "start":
        bindir = databases.server_binaries()
        if bindir is None:
            return {"error": "initdb/pg_ctl not found (Debian's postgresql package)"}
        cluster = databases.Cluster(bindir)
        cluster.start()
        server = cluster.url
    try:
        url = databases.Server(server).new_database()
        figures, service, _ = run_wave(root, loops, url)
        close(service)
        return figures
    finally:
        if cluster is not None:
            cluster.stop()


# ---- reporting ---------------------------------------------------------------------------


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def summary(f: dict[str, Any]) -> dict[str, Any]:
    """The target figures as numbers, each with whether it is met."""
    wave, floor, peer = f["wave"], f["floor"], f["peer"]
    run_pass, catchup = f["idle"]["run_pass"], f["catchup"]
    ratio = wave["s"] / floor["s"]
    return {
        "wave_s": wave["s"],
        "floor_s": floor["s"],
        "wave_over_floor": ratio,
        "wave_met": ratio <= FLOOR_RATIO,
        "peer_s": peer.get("s"),
        "wave_over_peer": wave["s"] / peer["s"] if "s" in peer else None,
        "idle_median_ms": run_pass["median_ms"],
        "idle_p99_ms": run_pass["p99_ms"],
        "idle_met": run_pass["p99_ms"] <= IDLE_MS,
        "catchup_s": catchup["s"],
        "catchup_s_met": catchup["s"] <= CATCHUP_S,
        "catchup_with_startup_s": catchup["s"] + catchup["startup_s"],
        "catchup_floor_s": f["catchup_floor"]["s"],
        "catchup_over_floor": (catchup["s"] + catchup["startup_s"]) / f["catchup_floor"]["s"],
        "catchup_floor_met": (catchup["s"] + catchup["startup_s"]) / f["catchup_floor"]["s"]
        <= CATCHUP_FLOOR_RATIO,
        "catchup_growth_mb": catchup["peak_growth_mb"],
        "catchup_mb_met": catchup["peak_growth_mb"] <= CATCHUP_MB,
    }


def target_rows(f: dict[str, Any]) -> list[dict[str, str]]:
    s, loops = f["summary"], f["wave"]["loops"]
    rows = [
        {
            "figure": f"wave: {loops:,} ticks admitted + planned",
            "ours": f"{s['wave_s']:.2f} s",
            "baseline": f"floor {s['floor_s']:.3f} s",
            "ratio": f"{s['wave_over_floor']:.1f}x",
            "target": f"<= {FLOOR_RATIO:.0f}x floor",
            "verdict": verdict(s["wave_met"]),
        },
    ]
    pg = f["wave_postgres"]
    if "s" in pg:
        rows.append(
            {
                "figure": "wave on PostgreSQL (loopback)",
                "ours": f"{pg['s']:.2f} s",
                "baseline": f"SQLite {s['wave_s']:.2f} s",
                "ratio": f"{pg['s'] / s['wave_s']:.2f}x",
                "verdict": "-",
            }
        )
    if s["peer_s"] is not None:
        rows.append(
            {
                "figure": "wave, beside the peer",
                "ours": f"{s['wave_s']:.2f} s",
                "baseline": f"APScheduler {s['peer_s']:.2f} s",
                "ratio": f"{s['wave_over_peer']:.2f}x",
                "verdict": "faster" if s["wave_over_peer"] < 1 else "slower",
            }
        )
    reps, minutes = f["idle"]["run_pass"]["reps"], f["catchup"]["minutes"]
    return [
        *rows,
        {
            "figure": f"idle pass, median ({reps:,} passes)",
            "ours": f"{s['idle_median_ms']:.4f} ms",
            "target": f"<= {IDLE_MS:.0f} ms",
            "verdict": verdict(s["idle_median_ms"] <= IDLE_MS),
        },
        {
            "figure": "idle pass, p99",
            "ours": f"{s['idle_p99_ms']:.4f} ms",
            "target": f"<= {IDLE_MS:.0f} ms",
            "verdict": verdict(s["idle_met"]),
        },
        {
            "figure": f"catch-up all: {minutes:,} missed slots",
            "ours": f"{s['catchup_s']:.2f} s",
            "ratio": f"{s['catchup_s'] / CATCHUP_S:.1f}x target",
            "target": f"<= {CATCHUP_S:.0f} s",
            "verdict": verdict(s["catchup_s_met"]),
        },
        {
            "figure": "catch-up with start-up, beside its floor",
            "ours": f"{s['catchup_with_startup_s']:.2f} s",
            "baseline": f"floor {s['catchup_floor_s']:.3f} s",
            "ratio": f"{s['catchup_over_floor']:.1f}x",
            "target": f"<= {CATCHUP_FLOOR_RATIO:.0f}x floor",
            "verdict": verdict(s["catchup_floor_met"]),
        },
        {
            "figure": "catch-up: peak memory growth",
            "ours": f"{s['catchup_growth_mb']:.1f} MB",
            "target": f"<= {CATCHUP_MB:.0f} MB",
            "verdict": verdict(s["catchup_mb_met"]),
        },
    ]


def table(rows: list[dict[str, Any]]) -> list[str]:
    columns = ("figure", "ours", "baseline", "ratio", "target", "verdict")
    cells = [[str(row.get(c, "-")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return lines


def details(f: dict[str, Any]) -> list[str]:
    wave, floor, rows, peer = f["wave"], f["floor"], f["floor_row_by_row"], f["peer"]
    pump, catchup = f["idle"]["pump"], f["catchup"]
    peer_line = (
        f"peer: APScheduler 3 + SQLite job store, {peer['loops']:,} jobs: register "
        f"{peer['register_s']:.2f} s, wave {peer['s']:.2f} s, fired {peer['fired']:,}"
        if "s" in peer
        else f"peer: not run ({peer['error']})"
    )
    return [
        f"wave: open_service {wave['open_service_s']:.2f} s (load + compile "
        f"{wave['loops']:,} loops), first pump (enablement) {wave['start_pump_s']:.2f} s, "
        f"wave pump {wave['s']:.2f} s = {wave['ticks_per_s']:,.0f} ticks/s; rows: "
        + ", ".join(f"{k} {v:,}" for k, v in wave["counts"].items()),
        f"floor: {floor['rows_written']:,} rows in one transaction: building them "
        f"{floor['build_s']:.3f} s + executemany {floor['write_s']:.3f} s; with one execute "
        f"a row {rows['build_s']:.3f} + {rows['write_s']:.3f} s; the wave is "
        f"{wave['s'] / floor['write_s']:.0f}x the executemany writes alone",
        peer_line,
        (
            f"postgresql: wave pump {f['wave_postgres']['s']:.2f} s = "
            f"{f['wave_postgres']['ticks_per_s']:,.0f} ticks/s (open_service "
            f"{f['wave_postgres']['open_service_s']:.2f} s, enablement pump "
            f"{f['wave_postgres']['start_pump_s']:.2f} s)"
            if "s" in f["wave_postgres"]
            else f"postgresql: not run ({f['wave_postgres']['error']})"
        ),
        f"idle pump (pass + outbox + planning queries): median {pump['median_ms']:.3f} ms, "
        f"p99 {pump['p99_ms']:.3f} ms over {pump['reps']} pumps",
        f"catch-up: {catchup['ticks_per_s']:,.0f} ticks/s; memory ({catchup['memory_method']}): "
        f"RSS {catchup['rss_before_mb']:.1f} MB before, peak {catchup['peak_after_mb']:.1f} MB "
        f"during; ru_maxrss delta {catchup['ru_maxrss_delta_mb']:.1f} MB",
    ]


def report(f: dict[str, Any]) -> str:
    head = [
        f"engine scheduler: {f['wave']['loops']:,} loops, catch-up over "
        f"{f['catchup']['minutes']:,} minutes",
        f"engine at {f['revision']}, Python {f['python']}, {f['cpus']} CPUs",
        "",
    ]
    load = " / ".join(f"{x:.2f}" for x in f["load_average_1m"])
    tail = ["", *details(f), f"1-minute load average before/after: {load}"]
    return "\n".join(head + table(target_rows(f)) + tail)


# ---- main --------------------------------------------------------------------------------


def measure(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    # The child first, while this process is small (see bench/scheduler_catchup.py).
    catchup = run_catchup(root / "catchup", args.minutes)
    # The floors next, before the wave's service fills this process's heap.
    floor = measure_floor(root, args.loops, batched=True)
    floor_rows = measure_floor(root, args.loops, batched=False)
    (root / "catchup-floor").mkdir()
    catchup_floor = measure_floor(root / "catchup-floor", args.minutes, batched=True)
    wave, service, clock = run_wave(root / "wave", args.loops)
    idle_figures = idle(service, clock, args.idle_reps)
    close(service)
    peer = run_peer(args.peer, args.loops) if args.peer else {"error": "--no-peer"}
    postgres = wave_on_postgres(root / "pg", args.loops, args.postgres)
    figures = {
        "revision": revision(),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "wave": wave,
        "wave_postgres": postgres,
        "floor": floor,
        "floor_row_by_row": floor_rows,
        "peer": peer,
        "idle": idle_figures,
        "catchup": catchup,
        "catchup_floor": catchup_floor,
        "load_average_1m": [load_before, os.getloadavg()[0]],
    }
    figures["summary"] = summary(figures)
    return figures


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--loops", type=int, default=10_000, help="wave loops (%(default)s)")
    parser.add_argument("--minutes", type=int, default=43_200, help="missed slots (%(default)s)")
    parser.add_argument("--idle-reps", type=int, default=10_000, help="idle passes (%(default)s)")
    parser.add_argument("--peer", type=Path, default=PEER, help="peer script (%(default)s)")
    parser.add_argument("--no-peer", dest="peer", action="store_const", const=None)
    parser.add_argument(
        "--postgres",
        metavar="URL",
        default="start",
        help="PostgreSQL server for the wave on PostgreSQL: a URL (a role that may create "
        "databases), 'start' (a throwaway cluster, the default) or 'no'",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--profile", type=int, metavar="N", help="print N top cProfile rows")
    parser.add_argument("--queries", action="store_true", help="print SQL time by query")
    args = parser.parse_args(argv)
    if min(args.loops, args.minutes, args.idle_reps) < 1:
        parser.error("--loops, --minutes and --idle-reps must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="engine-bench-") as tmp:
        figures = measure(args, Path(tmp))
        if args.json:
            json.dump(figures, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            print(report(figures))
        out = sys.stderr if args.json else sys.stdout
        if args.profile:
            print(f"\ncProfile of one wave's pump ({args.loops:,} ticks)", file=out)
            print(profile_wave(Path(tmp) / "profile", args.loops, args.profile), file=out)
        if args.queries:
            print("\n" + query_report(Path(tmp) / "queries", args.loops), file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
