"""The catch-up figure of bench/scheduler.py, run in a child process of its own.

`run_catchup(root, minutes)` spawns this file; the child writes a tree with one
enabled `every 1m` loop under `catch-up all cap 50000` (bench/scheduler_tree.py),
records its enablement at t0, moves the clock `minutes` on and times the `pump()` that
admits and plans every missed slot, then prints its figures as JSON.

Memory: the peak resident set growth during that pump. The kernel's high-water mark
(VmHWM) is reset through /proc/self/clear_refs just before the pump and read after it,
less VmRSS before it. `ru_maxrss` is reported beside it but not used: Linux carries
the spawning process's peak into a child's `ru_maxrss` across exec, so its before/after
delta can read 0 (it is the fallback where clear_refs is refused). tracemalloc would
see only Python's own allocations, not SQLite's page cache, and slow the pump down.

    python bench/scheduler_catchup.py ROOT MINUTES
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from scheduler_runtime import ENABLED_AT, ManualClock, close, open_at, tick_counts, timed, verify
from scheduler_tree import write_catchup_tree


def memory_kib() -> dict[str, int]:
    """VmRSS and VmHWM of this process, KiB."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux 4.0+); False where not permitted."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def catchup(root: Path, minutes: int) -> dict[str, Any]:
    """In the child: the timed pump over `minutes` missed slots and its memory."""
    paths = write_catchup_tree(root / "tree")
    clock = ManualClock(ENABLED_AT)
    service = open_at(root, paths, clock)
    service.pump()  # enablement at t0
    close(service)
    clock.now = ENABLED_AT + timedelta(minutes=minutes)
    # Start-up is part of a catch-up: the service opens (load, compile, migrate, the
    # scheduler's start) at the later time, then one pump admits the missed slots.
    startup_s, service = timed(lambda: open_at(root, paths, clock))
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    reset = reset_peak()
    before = memory_kib()
    seconds, _ = timed(service.pump)
    after = memory_kib()
    maxrss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    close(service)
    counts = tick_counts(root / "engine.db")
    growth_kib = after["VmHWM"] - before["VmRSS"] if reset else maxrss_after - maxrss_before
    return {
        "minutes": minutes,
        "s": seconds,
        "startup_s": startup_s,
        "ticks_per_s": counts["events"] / seconds,
        "counts": counts,
        "peak_growth_mb": growth_kib * 1024 / 1e6,
        "memory_method": "VmHWM reset via clear_refs" if reset else "ru_maxrss delta",
        "rss_before_mb": before["VmRSS"] * 1024 / 1e6,
        "peak_after_mb": after["VmHWM"] * 1024 / 1e6,
        "ru_maxrss_delta_mb": (maxrss_after - maxrss_before) * 1024 / 1e6,
    }


def run_catchup(root: Path, minutes: int) -> dict[str, Any]:
    """In the parent: spawn the child, read its figures, check its rows."""
    argv = [sys.executable, __file__, str(root), str(minutes)]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"error: the catch-up child failed:\n{done.stdout}{done.stderr}")
    figures: dict[str, Any] = json.loads(done.stdout)
    verify(figures["counts"], minutes, "catch-up")
    return figures


if __name__ == "__main__":
    json.dump(catchup(Path(sys.argv[1]), int(sys.argv[2])), sys.stdout)
