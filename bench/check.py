"""How long `engine check` takes, and how much memory, on a large synthetic rule tree.

It writes a valid tree to a temporary directory (bench/synthetic_tree.py; by default
1,000 loops, among them a `for repo in repos where not repo.report_only` block over a
generated config/repos.yaml and some `cron "..." in Europe/Budapest` loops; 1,000 chain
edges over generated definitions with ten outcomes each; 200 webhook lines across
several `webhook github KIND` tables; a registry of event types with JSON Schemas,
definitions and one output contract; a small schedule overlay), checks that
`engine check` exits 0 on it with the expected counts, then measures:

* `engine check` as a real subprocess (`python -m engine check ...`): wall time
  (min/median over --runs), CPU time (user + system, median) and peak RSS. Each run is
  spawned by a fresh, small launcher process that reaps it with `os.wait4` and reports
  that child's own `ru_maxrss`. Three ways: cold (`--no-cache`), warm (the check cache
  filled, every file unchanged: docs/cli.md#engine-check) and the first check into an
  empty cache (parsing and writing every entry). The cache is the temporary
  directory's own (ENGINE_HOME is set to it for the children).
* the same for the fixed cost beside it: a bare interpreter, the interpreter plus
  `import engine.loading` (what checking needs) and plus `import engine.cli.main` (what
  the command imports), and `engine check` on the project's own small tree.
* in process: building the grammar (the first parse), parsing every rule file
  (`dsl.parser.parse`), loading the registry and config, the digest, `load_tree` and
  `compile_rules`, each once and cold (as a check runs them), and `load_tree` from the
  filled check cache, wall and CPU time.

The children cache bytecode as a developer's checkout does; where
PYTHONDONTWRITEBYTECODE is set, the cache goes under the temporary directory.

Figures are printed, never asserted; the target (`engine check` under 1 s on a 2-core
machine) is printed beside them. Linux (ru_maxrss in KiB). Run it from the checkout:

    .venv/bin/python bench/check.py               # or /tmp/v/bin/python bench/check.py
    .venv/bin/python bench/check.py --loops 5000 --chains 2000 --webhooks 400 --runs 3
    .venv/bin/python bench/check.py --json        # machine-readable figures
    .venv/bin/python bench/check.py --profile 20  # plus a cProfile of one check
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from synthetic_tree import Shape, write_tree

from dsl.diagnostics import Collector
from dsl.parser import parse
from engine.check_cache import ENV as CACHE_ENV
from engine.check_cache import CheckCache
from engine.core.compiler import compile_rules
from engine.loading import (
    Paths,
    digest,
    load_contracts,
    load_definitions,
    load_event_types,
    load_overlay,
    load_repos,
    load_tree,
    project_root,
)

TARGET_SECONDS = 1.0
T = TypeVar("T")

# ---- measuring ---------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    seconds: float
    cpu_seconds: float  # user + system
    rss_kib: int
    returncode: int


def cache_bytecode(root: Path) -> str:
    """Let the children cache bytecode, as a developer's checkout does. Where
    PYTHONDONTWRITEBYTECODE is set, every run would recompile engine/ and dsl/ (about
    0.1 s here), so the cache goes under `root` instead, never into the checkout."""
    if not os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
        return "as configured"
    os.environ["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    return "cached under the temporary directory (PYTHONDONTWRITEBYTECODE was set)"


def revision() -> str:
    """The checkout's commit, marked `+dirty` when the work tree has changes."""
    git = ["git", "-C", str(project_root())]
    try:
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True)
        dirty = subprocess.run([*git, "status", "--porcelain"], capture_output=True)
    except OSError:
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.decode().strip() + ("+dirty" if dirty.stdout.strip() else "")


def check_argv(paths: Paths, *extra: str) -> list[str]:
    where = ["--rules", str(paths.rules), "--registry", str(paths.registry)]
    return [sys.executable, "-m", "engine", "check", *where, "--config", str(paths.config), *extra]


# A small launcher (`python -S -I`, about 8 MiB) runs each measured command. A child's
# ru_maxrss keeps the high-water mark of the process it was spawned from (Linux carries
# it across exec), so spawning straight from this process would report this process's
# size as the peak of a bare `python -c pass`.
LAUNCHER = """
import os, sys, time
quiet = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_WRONLY, 0) for fd in (1, 2)]
start = time.perf_counter()
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ, file_actions=quiet)
_, status, usage = os.wait4(pid, 0)
cpu = usage.ru_utime + usage.ru_stime
print(time.perf_counter() - start, cpu, usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def run_once(argv: list[str], before: Callable[[], object] | None = None) -> Sample:
    """One run of `argv` in a fresh child; `os.wait4` gives that child's own rusage.
    `before` runs first (unmeasured)."""
    if before is not None:
        before()
    launch = [sys.executable, "-S", "-I", "-c", LAUNCHER, *argv]
    done = subprocess.run(launch, capture_output=True, text=True, check=True)
    seconds, cpu_seconds, rss_kib, returncode = done.stdout.split()
    return Sample(float(seconds), float(cpu_seconds), int(rss_kib), int(returncode))


def verify(paths: Paths, shape: Shape) -> dict[str, Any]:
    """The summary of `engine check --json`; exits 1 unless the tree is valid and the
    counts are the ones asked for."""
    done = subprocess.run(check_argv(paths, "--json"), capture_output=True, text=True)
    summary: dict[str, Any] = json.loads(done.stdout) if done.stdout.strip() else {}
    wanted = {"loops": shape.loops, "chains": shape.chains, "webhookRules": shape.webhooks}
    got = {key: summary.get(key) for key in wanted}
    if done.returncode != 0 or got != wanted:
        sys.stderr.write(done.stdout + done.stderr)
        sys.exit(f"error: the generated tree is not as asked (exit {done.returncode}, {got})")
    return summary


def summarise(samples: list[Sample]) -> dict[str, float]:
    times = [s.seconds for s in samples]
    rss = [s.rss_kib / 1024 for s in samples]
    return {
        "min_s": min(times),
        "median_s": statistics.median(times),
        "cpu_median_s": statistics.median(s.cpu_seconds for s in samples),
        "rss_min_mib": min(rss),
        "rss_median_mib": statistics.median(rss),
        "runs": len(samples),
        "failed_runs": sum(1 for s in samples if s.returncode != 0),
    }


COLD = "engine check, synthetic tree (cold)"
WARM = "engine check, synthetic tree (warm)"
EMPTY = "engine check, synthetic tree (empty cache)"


def cache_dir(root: Path) -> Path:
    """The children's check cache (ENGINE_HOME is `root`)."""
    return root / "var" / "cache" / "check"


def subprocess_rows(paths: Paths, runs: int, root: Path) -> dict[str, dict[str, float]]:
    checkout = project_root()
    own = Paths(checkout / "loops", checkout / "registry", checkout / "config")
    commands: dict[str, tuple[list[str], Callable[[], object] | None]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], None),
        'python -c "import engine.loading"': (
            [sys.executable, "-c", "import engine.loading"],
            None,
        ),
        'python -c "import engine.cli.main"': (
            [sys.executable, "-c", "import engine.cli.main"],
            None,
        ),
        "engine check, own tree (cold)": (check_argv(own, "--no-cache"), None),
        COLD: (check_argv(paths, "--no-cache"), None),
        WARM: (check_argv(paths), None),  # verify() filled the cache
        EMPTY: (check_argv(paths), lambda: shutil.rmtree(cache_dir(root), ignore_errors=True)),
    }
    rows = {
        name: summarise([run_once(argv, before) for _ in range(runs)])
        for name, (argv, before) in commands.items()
    }
    run_once(check_argv(paths))  # leave the cache filled, for the in-process rows
    return rows


Timing = dict[str, float]


def timed(results: dict[str, Timing], name: str, action: Callable[..., T], *args: Any) -> T:
    """Run `action(*args)` once, recording its wall and CPU seconds under `name`."""
    start, cpu = time.perf_counter(), time.process_time()
    value = action(*args)
    results[name] = {"s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu}
    return value


def parse_all(texts: list[tuple[str, str]]) -> None:
    for name, text in texts:
        parse(text, name)


def load_registry_and_config(paths: Paths) -> None:
    collector = Collector()
    load_event_types(paths.registry, collector, fast=True)  # as `engine check` reads it
    load_definitions(paths.registry, collector, fast=True)
    load_contracts(paths.registry, collector)
    load_repos(paths.config, collector)
    load_overlay(paths.config, collector)


def in_process_rows(paths: Paths, root: Path) -> dict[str, Timing]:
    """Each stage once, cold as in a fresh `engine check` (empty grammar and zone
    caches), though with every module already imported."""
    results: dict[str, Timing] = {}
    timed(results, "grammar build (first parse)", parse, "", "<empty>")
    texts = [(p.name, p.read_text()) for p in sorted(paths.rules.glob("*.rules"))]
    timed(results, f"parse {len(texts)} rule files", parse_all, texts)
    timed(results, "load registry + config", load_registry_and_config, paths)
    timed(results, "digest", digest, paths)
    tree = timed(results, "load_tree (all of the above, with reads)", load_tree, paths, True)
    timed(results, "compile_rules", compile_rules, tree)
    cache = CheckCache(cache_dir(root))
    timed(results, "load_tree, check cache filled", load_tree, paths, True, cache)
    return results


def profile(paths: Paths, top: int) -> str:
    """cProfile of one whole `engine check` in a fresh child, imports included: cold
    (--no-cache), then warm (the cache filled)."""
    text = io.StringIO()
    with tempfile.TemporaryDirectory() as tmp:
        for label, extra in (("cold (--no-cache)", ("--no-cache",)), ("warm", ())):
            out = Path(tmp) / "check.prof"
            argv = check_argv(paths, *extra)
            subprocess.run(
                [argv[0], "-m", "cProfile", "-o", str(out), *argv[1:]],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            text.write(f"==== cProfile of engine check, {label}\n")
            stats = pstats.Stats(str(out), stream=text).strip_dirs()
            for key in ("tottime", "cumulative"):
                stats.sort_stats(key).print_stats(top)
    return text.getvalue()


# ---- reporting ---------------------------------------------------------------------


def report(figures: dict[str, Any]) -> str:
    shape, tree = figures["shape"], figures["tree"]
    lines = [
        f"engine check: {shape['loops']} loops, {shape['chains']} chain edges, "
        f"{shape['webhooks']} webhook rules",
        f"tree: {tree['rule_files']} rule files ({tree['rule_bytes'] / 1024:.0f} KiB), "
        f"{tree['eventTypes']} event types, {tree['definitions']} definitions, "
        f"{tree['repos']} repos, generated in {tree['generate_s']:.2f} s",
        f"engine at {figures['revision']}, Python {figures['python']}",
        "",
        f"{'subprocess (' + str(figures['runs']) + ' runs each)':<44}"
        f"{'min s':>8}{'median s':>10}{'CPU s':>8}{'peak RSS MiB':>14}",
    ]
    for name, row in figures["subprocess"].items():
        failed = f"  ({row['failed_runs']} failed)" if row["failed_runs"] else ""
        lines.append(
            f"  {name:<42}{row['min_s']:>8.3f}{row['median_s']:>10.3f}"
            f"{row['cpu_median_s']:>8.3f}{row['rss_median_mib']:>14.1f}{failed}"
        )
    lines += ["", f"{'in process (once, cold)':<44}{'s':>8}{'CPU s':>10}"]
    for name, row in figures["in_process"].items():
        lines.append(f"  {name:<42}{row['s']:>8.3f}{row['cpu_s']:>10.3f}")
    target = figures["target"]

    def verdict(median: float) -> str:
        return "met" if median < TARGET_SECONDS else f"MISSED ({median / TARGET_SECONDS:.1f}x)"

    lines += [
        "",
        f"target: engine check under {TARGET_SECONDS:.0f} s on this {os.cpu_count()}-core "
        f"machine; median cold (--no-cache) {target['cold_median_s']:.3f} s: "
        f"{verdict(target['cold_median_s'])}; warm (cache filled) {target['median_s']:.3f} s: "
        f"{verdict(target['median_s'])}; warm/cold {target['warm_share']:.0%}",
        f"fixed cost (interpreter + imports): {target['fixed_s']:.3f} s, "
        f"{target['fixed_share']:.0%} of the median cold check; the project's own tree "
        f"takes {target['own_tree_s']:.3f} s cold, so this tree's size costs "
        f"{target['size_s']:.3f} s cold",
        f"bytecode: {figures['bytecode']}; 1-minute load average before/after: "
        + " / ".join(f"{x:.2f}" for x in figures["load_average_1m"]),
    ]
    return "\n".join(lines)


def measure(args: argparse.Namespace, root: Path) -> tuple[dict[str, Any], Paths]:
    shape = Shape(args.loops, args.chains, args.webhooks)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    paths = write_tree(root, shape)
    generate_s = time.perf_counter() - start
    bytecode = cache_bytecode(root)
    os.environ["ENGINE_HOME"] = str(root)  # the children's var/cache/check: under root
    os.environ.pop(CACHE_ENV, None)
    summary = verify(paths, shape)  # also warms the OS file cache and .pyc files
    rule_files = sorted(paths.rules.glob("*.rules"))
    tree = {
        "rule_files": len(rule_files),
        "rule_bytes": sum(p.stat().st_size for p in rule_files),
        "generate_s": generate_s,
        **{k: summary[k] for k in ("eventTypes", "definitions", "repos", "routes")},
    }
    sub = subprocess_rows(paths, args.runs, root)
    check, cold = sub[WARM], sub[COLD]
    fixed = sub['python -c "import engine.cli.main"']["median_s"]
    own = sub["engine check, own tree (cold)"]["median_s"]
    target = {  # median_s, met, ratio: the warm check (what an edit-and-check loop sees)
        "seconds": TARGET_SECONDS,
        "median_s": check["median_s"],
        "met": check["median_s"] < TARGET_SECONDS,
        "ratio": check["median_s"] / TARGET_SECONDS,
        "cold_median_s": cold["median_s"],
        "cold_met": cold["median_s"] < TARGET_SECONDS,
        "warm_share": check["median_s"] / cold["median_s"],
        "fixed_s": fixed,
        "fixed_share": fixed / cold["median_s"],
        "own_tree_s": own,
        "size_s": cold["median_s"] - own,
    }
    figures = {
        "shape": vars(shape),
        "runs": args.runs,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "revision": revision(),
        "bytecode": bytecode,
        "tree": tree,
        "subprocess": sub,
        "in_process": in_process_rows(paths, root),
        "target": target,
        "load_average_1m": [load_before, os.getloadavg()[0]],
    }
    return figures, paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--loops", type=int, default=1000, help="loops (default: %(default)s)")
    parser.add_argument("--chains", type=int, default=1000, help="chain edges (%(default)s)")
    parser.add_argument("--webhooks", type=int, default=200, help="webhook lines (%(default)s)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--profile", type=int, metavar="N", help="print N top cProfile rows")
    args = parser.parse_args(argv)
    if min(args.loops, args.chains, args.webhooks, args.runs) < 1:
        parser.error("--loops, --chains, --webhooks and --runs must be at least 1")
    with tempfile.TemporaryDirectory(prefix="engine-bench-") as tmp:
        figures, paths = measure(args, Path(tmp))
        if args.json:
            json.dump(figures, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            print(report(figures))
        if args.profile:
            print(profile(paths, args.profile), file=sys.stderr if args.json else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
