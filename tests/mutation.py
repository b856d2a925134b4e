"""Mutation testing of the pure modules: how much of what the code says do the unit
tests hold? `make mutation` (or `python tests/mutation.py`) makes small changes to the
source — a comparison turned around, `and` for `or`, a constant off by one, a
condition negated, a return value dropped — one at a time, runs the unit tests that
cover the module against each, and prints the share of non-equivalent mutants the
tests kill (a failing test kills a mutant; a mutant that passes every test survived).

The source is never touched: each mutant is written into a copy of the checkout in a
temporary directory, and the tests run there in a subprocess. First the unmodified
tests of every module run once in each copy: they must pass (else every mutant would
count as killed), and their time sets the module's timeout, so a mutant that makes the
tests loop or crawl is stopped and counted as killed by the timeout (the summary shows
how many were). Hypothesis runs with a fixed seed (`--seed`), so a run is reproducible.
A mutant that cannot change behaviour (an equivalent mutant) is listed, with the
reason, in tests/mutation_equivalent.txt and left out of the score; an entry whose
mutant no longer exists (its line changed) stops the run until it is judged again
(docs/testing.md).

Options: --sample N (a reproducible sample of N mutants, --seed S; default: all),
--module PATH (only that module; repeatable), --jobs J (parallel copies), --list
(print the mutants without running them), --target 0.9 (exit 1 below it)."""

from __future__ import annotations

import argparse
import ast
import copy
import functools
import io
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT = ROOT / "tests" / "mutation_equivalent.txt"
# A mutant's tests time out at TIMEOUT_FACTOR times the unmodified tests' time in the
# same copy, and never sooner than MIN_TIMEOUT_S.
TIMEOUT_FACTOR = 10
MIN_TIMEOUT_S = 30.0

# module -> (the unit tests that hold it, the functions to mutate: None for all)
TARGETS: dict[str, tuple[tuple[str, ...], tuple[str, ...] | None]] = {
    "engine/core/planner.py": (
        (
            "tests/unit/test_planner.py",
            "tests/unit/test_repo_loops.py",
            "tests/unit/test_triggers_that_wait.py",
            "tests/unit/test_watch_rules.py",
        ),
        None,
    ),
    "engine/core/slots.py": (("tests/unit/test_slots.py",), None),
    "engine/core/simulation.py": (("tests/unit/test_simulate.py",), None),
    "engine/core/codec.py": (("tests/unit/test_codec.py",), None),
    "engine/core/cron.py": (("tests/unit/test_cron.py", "tests/unit/test_slots.py"), None),
    "engine/core/decisions.py": (("tests/unit/test_actors.py",), None),
    "engine/core/authority.py": (("tests/unit/test_authority.py",), None),
    "engine/core/nesting.py": (("tests/unit/test_bodies.py",), None),
    "engine/core/ticks.py": (
        (
            "tests/unit/test_ticks.py",
            "tests/unit/test_bridge.py",
            "tests/unit/test_slots.py",
            "tests/unit/test_watch_rules.py",
            "tests/unit/test_decide.py",
        ),
        None,
    ),
    "engine/core/triggers.py": (("tests/unit/test_triggers_that_wait.py",), None),
    "engine/intake/github.py": (("tests/unit/test_github_translate.py",), None),
    "engine/core/policy.py": (("tests/unit/test_policy.py",), None),
    "engine/core/argv.py": (
        ("tests/unit/test_command_adapter.py", "tests/unit/test_argv_preview.py"),
        None,
    ),
    "engine/core/statements.py": (("tests/unit/test_argv_preview.py",), None),
    "engine/adapters/command.py": (
        ("tests/unit/test_command_adapter.py",),
        (
            "builtins_for",
            "build_env",
            "parse_result",
            "tail",
            "describe_exit",
            "judge",
        ),
    ),
    # the heart of the decision: the state machines, settling, resuming, deciding
    "engine/core/table.py": (
        ("tests/unit/test_machines.py", "tests/unit/test_guards.py"),
        None,
    ),
    "engine/core/machines.py": (
        (
            "tests/unit/test_machines.py",
            "tests/unit/test_settle.py",
            "tests/unit/test_diagrams.py",
        ),
        None,
    ),
    "engine/core/settle.py": (
        ("tests/unit/test_settle.py", "tests/unit/test_resume.py"),
        None,
    ),
    "engine/core/resume.py": (("tests/unit/test_resume.py",), None),
    "engine/core/decide.py": (
        (
            "tests/unit/test_decide.py",
            "tests/unit/test_decide_paths.py",
            "tests/unit/test_decide_ending.py",
            "tests/unit/test_batched_planning.py",
            "tests/unit/test_codec.py",
            "tests/unit/test_resume.py",
            "tests/unit/test_spelling.py",
        ),
        None,
    ),
    # the params of a command template, checked by the adapter and by the compiler
    "engine/core/registry.py": (
        ("tests/unit/test_command_adapter.py",),
        ("lookup", "param_problem"),
    ),
}

# The parts of a checkout the unit tests need.
COPIED = ("engine", "dsl", "tests", "docs", "loops", "registry", "config", "pyproject.toml")

_COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BINOP_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult,
    ast.Mod: ast.FloorDiv,
}
_SYMBOLS = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.FloorDiv: "//",
    ast.Div: "/",
    ast.Mod: "%",
    ast.And: "and",
    ast.Or: "or",
}


@dataclass(frozen=True)
class Mutant:
    module: str
    index: int  # the mutation point's number in the module (stable for a given source)
    line: int
    function: str
    description: str
    source_line: str
    occurrence: int = 1  # the how-manieth mutant of the same key in the module

    @property
    def key(self) -> str:
        """How tests/mutation_equivalent.txt names it: stable when lines move, and unique
        in its module (the second of two like changes on one line ends in ` #2`)."""
        key = f"{self.module} | {self.function} | {self.source_line} | {self.description}"
        return key if self.occurrence == 1 else f"{key} #{self.occurrence}"


# ---- finding mutation points --------------------------------------------------------------


def _points(tree: ast.Module, only: tuple[str, ...] | None) -> Iterator[tuple[ast.AST, str, str]]:
    """(node, function name, description of the change) for each mutation point, in a
    fixed order. Docstrings, annotations and `__all__` are never mutated."""
    for func, node in _walk(tree, ""):
        if only is not None and func.split(".")[0] not in only:
            continue
        yield from _changes(node, func)


def _walk(node: ast.AST, func: str) -> Iterator[tuple[str, ast.AST]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{func}.{child.name}" if func else child.name
            for stmt in child.body:
                if _is_docstring(stmt):
                    continue
                yield name, stmt
                yield from _walk(stmt, name)
        elif isinstance(child, ast.ClassDef):  # its methods; not its fields nor decorators
            name = f"{func}.{child.name}" if func else child.name
            for stmt in child.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    yield from _walk(ast.Module(body=[stmt], type_ignores=[]), name)
        elif isinstance(child, (ast.arg, ast.arguments)) or _is_annotation(node, child):
            continue
        elif func:
            yield func, child
            yield from _walk(child, func)


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _is_annotation(parent: ast.AST, child: ast.AST) -> bool:
    return (isinstance(parent, ast.AnnAssign) and child is parent.annotation) or (
        isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and child is parent.returns
    )


def _changes(node: ast.AST, func: str) -> Iterator[tuple[ast.AST, str, str]]:
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            swap = _COMPARE_SWAPS.get(type(op))
            if swap is not None:
                yield node, func, f"compare#{i} {_SYMBOLS[type(op)]} -> {_SYMBOLS[swap]}"
    elif isinstance(node, ast.BoolOp):
        other = "or" if isinstance(node.op, ast.And) else "and"
        yield node, func, f"boolop {_SYMBOLS[type(node.op)]} -> {other}"
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAPS:
        swap = _BINOP_SWAPS[type(node.op)]
        yield node, func, f"binop {_SYMBOLS[type(node.op)]} -> {_SYMBOLS[swap]}"
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield node, func, "drop not"
    elif isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            yield node, func, f"constant {value} -> {not value}"
        elif isinstance(value, int):
            yield node, func, f"constant {value} -> {value + 1}"
            if value != 0:
                yield node, func, f"constant {value} -> 0"
    elif isinstance(node, (ast.If, ast.While)):
        yield node, func, "negate condition"
    elif isinstance(node, ast.IfExp):
        yield node, func, "negate conditional expression"
    elif isinstance(node, ast.Return) and node.value is not None:
        if not (isinstance(node.value, ast.Constant) and node.value.value is None):
            yield node, func, "return None"
    elif isinstance(node, ast.Continue):
        yield node, func, "continue -> break"
    elif isinstance(node, ast.Break):
        yield node, func, "break -> continue"


def _apply(node: ast.AST, description: str) -> ast.AST | None:
    """The mutated node (a copy); None when the statement is to be replaced by `pass`."""
    new = copy.deepcopy(node)
    kind = description.split(" ", 1)[0]
    if kind.startswith("compare#"):
        assert isinstance(new, ast.Compare)
        i = int(kind.split("#")[1])
        new.ops[i] = _COMPARE_SWAPS[type(new.ops[i])]()
    elif kind == "boolop":
        assert isinstance(new, ast.BoolOp)
        new.op = ast.Or() if isinstance(new.op, ast.And) else ast.And()
    elif kind == "binop":
        assert isinstance(new, ast.BinOp)
        new.op = _BINOP_SWAPS[type(new.op)]()
    elif kind == "drop":
        assert isinstance(new, ast.UnaryOp)
        return new.operand
    elif kind == "constant":
        assert isinstance(new, ast.Constant)
        target = description.rsplit(" ", 1)[1]
        new.value = (target == "True") if isinstance(new.value, bool) else int(target)
    elif kind == "negate":
        assert isinstance(new, (ast.If, ast.While, ast.IfExp))
        new.test = ast.UnaryOp(op=ast.Not(), operand=new.test)
    elif kind == "return":
        assert isinstance(new, ast.Return)
        new.value = ast.Constant(value=None)
    elif kind == "continue":
        return ast.Break()
    elif kind == "break":
        return ast.Continue()
    return new


class _Replace(ast.NodeTransformer):
    def __init__(self, target: ast.AST, replacement: ast.AST | None) -> None:
        self.target, self.replacement = target, replacement

    def generic_visit(self, node: ast.AST) -> ast.AST | None:
        if node is self.target:
            return self.replacement
        return super().generic_visit(node)


def _code_lines(source: str) -> list[str]:
    """The source's lines without their comments (a key never changes with a comment)."""
    lines = source.splitlines()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            row, column = token.start
            lines[row - 1] = lines[row - 1][:column]
    return lines


def mutants_of(module: str) -> list[Mutant]:
    source = _source(module)
    lines = _code_lines(source)
    tree = ast.parse(source)
    only = TARGETS[module][1]
    found = []
    seen: dict[tuple[str, str, str], int] = {}
    for index, (node, func, description) in enumerate(_points(tree, only)):
        line = getattr(node, "lineno", 1)
        text = lines[line - 1].strip()
        seen[func, text, description] = seen.get((func, text, description), 0) + 1
        occurrence = seen[func, text, description]
        found.append(Mutant(module, index, line, func, description, text, occurrence))
    return found


@functools.cache
def _source(module: str) -> str:
    """A module's text as it was when the run first read it: the checkout may change
    while a run takes its half hour, and every mutant must be of the text the copies hold."""
    return (ROOT / module).read_text(encoding="utf-8")


def mutated_source(mutant: Mutant) -> str:
    source = _source(mutant.module)
    tree = ast.parse(source)
    node, _, description = list(_points(tree, TARGETS[mutant.module][1]))[mutant.index]
    replacement = _apply(node, description)
    tree = _Replace(node, replacement).visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n"


# ---- running ------------------------------------------------------------------------------


def _copy_checkout(into: Path) -> Path:
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(
                src, into / name, ignore=shutil.ignore_patterns("__pycache__", ".hypothesis")
            )
        elif src.is_file():
            shutil.copy2(src, into / name)
    shared = ROOT.parent / "shared"
    if shared.is_dir() and not (into.parent / "shared").exists():
        (into.parent / "shared").symlink_to(shared)
    return into


SURVIVED, KILLED, TIMED_OUT = "survived", "killed", "timed out"


def run_tests(checkout: Path, tests: tuple[str, ...], timeout: float, seed: int) -> str:
    """SURVIVED when the tests pass, KILLED when one fails, TIMED_OUT past `timeout`."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONDONTWRITEBYTECODE": "1"}
    argv = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
    argv += [f"--hypothesis-seed={seed}", *tests]
    try:
        done = subprocess.run(
            argv, cwd=checkout, env=env, capture_output=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return TIMED_OUT  # a mutant that hangs the tests is caught by them
    return SURVIVED if done.returncode == 0 else KILLED


def baseline(checkout: Path, modules: list[str], seed: int) -> dict[str, float]:
    """Each module's timeout, from its unmodified tests' time in `checkout`; raises
    SystemExit naming the tests when they do not pass without any mutant."""
    timeouts: dict[str, float] = {}
    for module in modules:
        tests = TARGETS[module][0]
        started = time.monotonic()
        outcome = run_tests(checkout, tests, 30 * 60, seed)
        if outcome != SURVIVED:
            raise SystemExit(f"the unit tests of {module} fail without a mutant: {' '.join(tests)}")
        timeouts[module] = max(MIN_TIMEOUT_S, TIMEOUT_FACTOR * (time.monotonic() - started))
    return timeouts


def _worker(
    mutants: list[Mutant],
    checkout: Path,
    seed: int,
    timeouts: dict[str, float],
    report: list[tuple[Mutant, str]],
) -> None:
    for mutant in mutants:
        target = checkout / mutant.module
        original = target.read_text(encoding="utf-8")
        target.write_text(mutated_source(mutant), encoding="utf-8")
        try:
            outcome = run_tests(checkout, TARGETS[mutant.module][0], timeouts[mutant.module], seed)
        finally:
            target.write_text(original, encoding="utf-8")
        report.append((mutant, outcome))
        print({SURVIVED: "S", KILLED: ".", TIMED_OUT: "T"}[outcome], end="", flush=True)


def equivalent_keys() -> dict[str, str]:
    """`key  # reason` lines of tests/mutation_equivalent.txt."""
    if not EQUIVALENT.is_file():
        return {}
    found = {}
    for number, raw in enumerate(EQUIVALENT.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip() or raw.startswith("#"):
            continue
        key, _, reason = raw.rpartition("  # ")
        if not key.strip() or not reason.strip():
            raise SystemExit(f"{EQUIVALENT.name}:{number}: write `key  # why it is equivalent`")
        found[key.strip()] = reason.strip()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=0, help="run N mutants (0: all)")
    parser.add_argument("--seed", type=int, default=12, help="the sample's seed")
    parser.add_argument("--module", action="append", help="only this module (repeatable)")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2)))
    parser.add_argument("--list", action="store_true", help="print the mutants only")
    parser.add_argument("--target", type=float, default=None, help="exit 1 below this score")
    args = parser.parse_args(argv)
    modules = args.module or list(TARGETS)
    unknown = [m for m in modules if m not in TARGETS]
    if unknown:
        parser.error(f"not a mutation target: {', '.join(unknown)} (see TARGETS)")
    equivalent = equivalent_keys()
    every = [m for module in modules for m in mutants_of(module)]
    candidates = [m for m in every if m.key not in equivalent]
    keys = {m.key for m in every}
    stale = [k for k in equivalent if k.split(" | ")[0] in modules and k not in keys]
    if stale:
        print(f"{EQUIVALENT.name} names mutants that no longer exist (judge them again):")
        print("\n".join(f"  {k}" for k in stale))
        return 2
    chosen = candidates
    if args.sample and args.sample < len(candidates):
        chosen = sorted(random.Random(args.seed).sample(candidates, args.sample), key=_order)
    if args.list:
        for m in chosen:
            print(f"{m.module}:{m.line}: {m.function}: {m.description}: {m.source_line}")
        return 0
    print(
        f"{len(every)} mutants in {len(modules)} modules, {len(every) - len(candidates)} "
        f"marked equivalent; running {len(chosen)} with {args.jobs} jobs"
    )
    started = time.monotonic()
    report: list[tuple[Mutant, str]] = []
    jobs = max(1, min(args.jobs, len(chosen)))
    with tempfile.TemporaryDirectory(prefix="engine-mutation-") as tmp:
        checkouts = [_copy_checkout(Path(tmp) / f"copy{i}" / "main") for i in range(jobs)]
        shares = [chosen[i::jobs] for i in range(jobs)]
        with ThreadPoolExecutor(jobs) as pool:
            # each copy times its own unmodified tests, under the load the mutants will see
            timeouts = list(
                pool.map(baseline, checkouts, map(_modules_of, shares), [args.seed] * jobs)
            )
            running = [
                pool.submit(_worker, share, checkout, args.seed, limits, report)
                for share, checkout, limits in zip(shares, checkouts, timeouts, strict=True)
            ]
            for job in running:
                job.result()  # a worker's error is the run's, never a silent gap
    print()
    return _summary(report, modules, time.monotonic() - started, args.target)


def _order(m: Mutant) -> tuple[str, int]:
    return (m.module, m.index)


def _modules_of(mutants: list[Mutant]) -> list[str]:
    return sorted({m.module for m in mutants})


def _summary(
    report: list[tuple[Mutant, str]], modules: list[str], seconds: float, target: float | None
) -> int:
    survivors = sorted((m for m, outcome in report if outcome == SURVIVED), key=_order)
    print(f"{'module':<32} {'mutants':>8} {'killed':>7} {'timeout':>8} {'score':>6}")
    for module in modules:
        mine = [outcome for m, outcome in report if m.module == module]
        if mine:
            killed = sum(1 for o in mine if o != SURVIVED)
            late = mine.count(TIMED_OUT)
            print(f"{module:<32} {len(mine):>8} {killed:>7} {late:>8} {killed / len(mine):>6.2f}")
    killed = sum(1 for _, o in report if o != SURVIVED)
    late = sum(1 for _, o in report if o == TIMED_OUT)
    score = killed / len(report) if report else 1.0
    print(f"{'all':<32} {len(report):>8} {killed:>7} {late:>8} {score:>6.2f}   ({seconds:.0f} s)")
    if survivors:
        print("\nsurvivors (a test should fail for each, or it is equivalent: say why in")
        print("tests/mutation_equivalent.txt):")
        for m in survivors:
            print(f"  {m.module}:{m.line}: {m.function}: {m.description}: {m.source_line}")
            print(f"    key: {m.key}")
    if target is not None and score < target:
        print(f"\nscore {score:.2f} is below the target {target:.2f}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
