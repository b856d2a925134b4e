"""Exit codes a supervisor acts on (docs/cli.md#exit-codes, docs/deploy.md#exit-codes):
`serve` and `worker` refused at start exit 2 for what a restart cannot fix (invalid
rules, a missing directory, a bad setting), which the rendered units name in
`RestartPreventExitStatus=`, and 1 for what a retry may fix (a database server that
is not up yet, the address in use), which systemd keeps restarting. `engine check`
keeps exit 1 for invalid rules. Each command is a real subprocess."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "tests" / "data" / "api"
INVALID = ROOT / "tests" / "data" / "rules" / "invalid" / "e0203_unknown_event_type"
SECRETS = {"ENGINE_EVENT_SECRET": "s", "ENGINE_OPERATOR_TOKEN": "alice:t"}


@pytest.fixture
def listening() -> Iterator[int]:
    """A loopback port something already listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def engine(tmp: Path, command: str, tree: Path, *extra: str, **env: str) -> int:
    """The exit status of `engine COMMAND` (serve on a free port, worker --once) over
    `tree`, run from `tmp`; asserts it printed no traceback."""
    head = {
        "serve": ["serve", "--no-worker", "--port", str(closed_port())],
        "worker": ["worker", "--once"],
        "check": ["check"],
    }[command]
    config = tree / "config" if (tree / "config").is_dir() else ROOT / "tests/data/no_config"
    paths = ["--rules", str(tree / "loops"), "--registry", str(tree / "registry")]
    paths += ["--config", str(config)]
    db = [] if command == "check" else ["--db", str(tmp / "engine.db")]
    base = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    done = subprocess.run(
        [sys.executable, "-m", "engine", *head, *paths, *db, *extra],
        cwd=tmp,
        env={**base, **SECRETS, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_invalid_rules_are_not_restarted(command: str, tmp_path: Path) -> None:
    """Invalid rules stop serve and worker with 2; `engine check` still says 1."""
    assert engine(tmp_path, command, INVALID) == 2
    assert engine(tmp_path, "check", INVALID) == 1


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_a_missing_directory_is_not_restarted(command: str, tmp_path: Path) -> None:
    """A rules directory that is not there: 2."""
    assert engine(tmp_path, command, tmp_path / "nowhere") == 2


@pytest.mark.parametrize(
    ("command", "setting"),
    [
        ("serve", {"ENGINE_OPERATOR_TOKEN": "no-colon-here"}),
        ("serve", {"ENGINE_DB_LOCK_TIMEOUT": "soon"}),
        ("worker", {"ENGINE_DB_LOCK_TIMEOUT": "soon"}),
        ("serve", {"ENGINE_NOW": "yesterday"}),
    ],
)
def test_a_bad_setting_is_not_restarted(
    command: str, setting: dict[str, str], tmp_path: Path
) -> None:
    """A malformed variable: 2."""
    assert engine(tmp_path, command, API, **setting) == 2


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_an_unreachable_database_server_is_restarted(command: str, tmp_path: Path) -> None:
    """A PostgreSQL server that refuses the connection (not up yet): 1, so a supervisor
    tries again."""
    url = f"postgresql://engine@127.0.0.1:{closed_port()}/engine?connect_timeout=5"
    head = ["--db", url]
    assert engine(tmp_path, command, API, *head) == 1


def test_an_address_in_use_is_restarted(listening: int, tmp_path: Path) -> None:
    """Another process holds the port (an old serve still stopping): 1."""
    assert engine(tmp_path, "serve", API, "--port", str(listening)) == 1
