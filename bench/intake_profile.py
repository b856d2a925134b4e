"""`bench/intake.py --profile N`: py-spy samples the running `engine serve` while one
more load run goes on (after the measured runs, so their figures are not perturbed).
It samples only the thread holding the GIL (`--gil`): where the interpreter's time
goes, and how it splits between the event loop's thread and the thread pool that
`asyncio.to_thread` runs translation and the store in. Time no thread holds the GIL
(SQLite and syscalls in C, threads handing the GIL over) is not in the samples; the
share of wall time the GIL was held says how much that is. Samples are summed by
function: own time (the innermost frame) and inclusive time."""

from __future__ import annotations

import re
import shutil
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")
POOL_MARK = "concurrent/futures/thread.py"
RATE = 250  # samples per second


def py_spy() -> str | None:
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


def record_argv(binary: str, pid: int, seconds: int, out: Path) -> list[str]:
    return [
        *(binary, "record", "--pid", str(pid), "--duration", str(seconds)),
        *("--rate", str(RATE), "--gil", "--nonblocking", "--format", "raw"),
        *("--output", str(out)),
    ]


def short(path: str) -> str:
    """A frame's file without the install prefix: aiohttp/web_protocol.py, engine/..."""
    for marker in ("site-packages/", "/lib/python3", "/work/main/"):
        if marker in path:
            rest = path.split(marker, 1)[1]
            return rest.split("/", 1)[1] if marker == "/lib/python3" else rest
    return path


def frame_name(frame: str) -> str:
    found = FRAME.match(frame)
    if found is None:
        return frame
    return f"{found['func']} ({short(found['file'])})"


@dataclass(frozen=True)
class Samples:
    total: int
    own: Counter[str]
    inclusive: Counter[str]
    pool: int  # samples in the thread pool (asyncio.to_thread)


def read_samples(raw: Path) -> Samples:
    """Collapsed stacks (`frame;frame;... count`) summed by function."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = pool = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [frame_name(f) for f in stack.split(";")]
        total += n
        pool += n if any(POOL_MARK in f for f in stack.split(";")) else 0
        own[frames[-1]] += n
        for name in set(frames):
            inclusive[name] += n
    return Samples(total, own, inclusive, pool)


def summary(samples: Samples, top: int, seconds: float) -> str:
    if not samples.total:
        return "py-spy recorded no samples"
    share = samples.pool / samples.total
    held = samples.total / (RATE * seconds)
    lines = [
        f"py-spy --gil: {samples.total:,} samples at {RATE}/s over {seconds:.0f} s: the GIL "
        f"was held {held:.0%} of the time; of that, {share:.0%} in the thread pool "
        f"(asyncio.to_thread), {1 - share:.0%} on the event loop's thread",
        "",
        f"{'own %':>7}  function (file)",
    ]
    lines += [f"{n / samples.total:>7.1%}  {name}" for name, n in samples.own.most_common(top)]
    lines += ["", f"{'incl %':>7}  function (file)"]
    lines += [
        f"{n / samples.total:>7.1%}  {name}" for name, n in samples.inclusive.most_common(top)
    ]
    return "\n".join(lines)
