"""A "billion laughs" in any YAML file the engine reads (config/repos.yaml,
config/schedule.yaml, registry/definitions.yaml, registry/event-types.yaml,
registry/probes.yaml): nine anchors of nine aliases each, a few hundred bytes that
stand for 387 million values. Every command that reads the file refuses it at the
alias that passes the budget, `file:line:col: error[E0909]`, exit 2, no traceback
(docs/rules.md#e0909-yaml-aliases-expand-too-far).

Each command runs as a real subprocess under an address-space limit, so an engine that
expanded the aliases again would end in a MemoryError (a traceback, a failure here)
within moments rather than swap the machine for minutes."""

from __future__ import annotations

import itertools
import os
import resource
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.store.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "tests" / "data" / "api"
LIMIT = 256 * 1024 * 1024  # address space: enough for every command here, far short of a bomb
LETTERS = "abcdefghi"


def bomb(indent: str) -> list[str]:
    """The nine lines of anchors, each aliasing the one before nine times."""
    lines = [f"{indent}a: &a [{', '.join(['lol'] * 9)}]"]
    for before, letter in itertools.pairwise(LETTERS):
        lines.append(f"{indent}{letter}: &{letter} [{', '.join([f'*{before}'] * 9)}]")
    return lines


@dataclass(frozen=True)
class Case:
    file: str  # relative to the tree
    head: tuple[str, ...]  # the lines before the bomb
    indent: str

    def text(self) -> str:
        return "\n".join([*self.head, *bomb(self.indent)]) + "\n"

    def refused_at(self) -> str:
        """`file:line:col` of the first alias of `f`: the five anchors before it repeat
        74,718 values, its first `*e` takes them past 100,000."""
        line = len(self.head) + LETTERS.index("f") + 1
        column = self.text().split("\n")[line - 1].index("*e") + 1
        return f"{self.file}:{line}:{column}"


CASES = {
    "repos-labels": Case(
        "config/repos.yaml", ("repos:", "  demo:", "    github: a/b", "    labels:"), "      "
    ),
    "repos-top-level": Case("config/repos.yaml", (), ""),
    # a NEL in a plain value: a line break to libyaml (not YAML to it), part of the
    # value to the round-trip loader, which reads (and measures) what follows
    "definition-after-nel": Case(
        "registry/definitions.yaml",
        ("definitions:", "  - id: work", "    description: one\x85two", "    env:"),
        "      ",
    ),
    "schedule-payload": Case(
        "config/schedule.yaml", ("schedules:", "  nightly:", "    payload:"), "      "
    ),
    "host-clock-gate": Case(
        "config/schedule.yaml", ("host_clocks:", "  nightly:", "    gate_command:"), "      "
    ),
    "definition-env": Case(
        "registry/definitions.yaml",
        ("definitions:", "  - id: work", "    version: 1", "    env:"),
        "      ",
    ),
    "event-type-examples": Case(
        "registry/event-types.yaml",
        ("event_types:", "  api.work.requested:", "    schema: repo.input.json", "    examples:"),
        "      ",
    ),
    "probe-argv": Case("registry/probes.yaml", ("probes:", "  - id: disk", "    argv:"), "      "),
}


def limited() -> None:
    """In the child, before exec: cap its address space at LIMIT."""
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def planted(tmp_path: Path, case: Case) -> Path:
    """The API test tree with the case's bomb written into its file."""
    root = tmp_path / "tree"
    shutil.copytree(TREE, root)
    (root / "config").mkdir()
    (root / case.file).write_text(case.text(), encoding="utf-8")
    SqliteStore(str(tmp_path / "engine.db")).close()
    return root


def run(root: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """`engine COMMAND` on the tree, a subprocess under the memory limit; a run that
    does not stop fails the test (after two minutes, not a timed assert: a hang guard)."""
    where = ["--rules", "loops", "--registry", "registry", "--config", "config"]
    db = [] if command[0] == "check" else ["--db", str(root.parent / "engine.db")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    argv = [sys.executable, "-m", "engine", *command, *where, *db]
    try:
        return subprocess.run(
            argv, cwd=root, env=env, capture_output=True, text=True, timeout=120, preexec_fn=limited
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`engine {' '.join(command)}` did not stop on the YAML bomb")


def assert_refused(result: subprocess.CompletedProcess[str], case: Case) -> None:
    printed = result.stdout + result.stderr
    assert "Traceback" not in printed and "MemoryError" not in printed, result.stderr
    assert f"{case.refused_at()}: error[E0909]: aliases repeat more than" in result.stderr
    assert result.returncode == 2, result.stderr


@pytest.mark.parametrize("name", sorted(CASES))
def test_engine_check_refuses_a_billion_laughs_at_its_alias(name: str, tmp_path: Path) -> None:
    """`engine check` refuses the bomb in each YAML file at its place, exit 2."""
    case = CASES[name]
    assert_refused(run(planted(tmp_path, case), "check", "--no-cache"), case)


@pytest.mark.parametrize("name", ["repos-labels", "definition-env"])
def test_serve_and_worker_refuse_a_billion_laughs_at_start(name: str, tmp_path: Path) -> None:
    """`engine serve` and `engine worker --once` refuse to start on the bomb, exit 2
    (invalid rules at start), printing the same located diagnostic."""
    case = CASES[name]
    root = planted(tmp_path, case)
    assert_refused(run(root, "serve", "--no-worker", "--port", str(free_port())), case)
    assert_refused(run(root, "worker", "--once"), case)


def test_schedule_enable_refuses_to_edit_an_overlay_holding_a_bomb(tmp_path: Path) -> None:
    """`engine schedule enable` reads the overlay it would edit through the same reader:
    the bomb is refused and the file left as it was."""
    case = CASES["schedule-payload"]
    root = planted(tmp_path, case)
    result = run(root, "schedule", "enable", "nightly")
    assert_refused(result, case)
    assert (root / case.file).read_text(encoding="utf-8") == case.text()
