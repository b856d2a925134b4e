"""Exit codes a supervisor acts on (docs/cli.md#exit-codes, docs/deploy.md#exit-codes):
`serve` and `worker` refused at start exit 2 for what a restart cannot fix (invalid
rules, a missing directory, a bad setting), which the rendered units name in
`RestartPreventExitStatus=`, and 1 for what a retry may fix (a database server that
is not up yet, the address in use), which systemd keeps restarting. `engine check`
keeps exit 1 for invalid rules. Each command is a real subprocess."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

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


# ---- a PostgreSQL server that refuses the settings: 2, one line, no secret ------------

PASSWORD = "pw-never-shown-1"


def with_user(url: str, user: str, password: str | None = None) -> str:
    """`url` with its user (and password) replaced."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    login = f"{user}:{password}" if password else user
    return urlunsplit(parts._replace(netloc=f"{login}@{host}"))


def refusing_urls(admin: str) -> dict[str, tuple[str, str]]:
    """By case: a URL the server (or libpq) refuses, and what the line must say."""
    base = admin.rsplit("/", 1)[0]
    user = urlsplit(admin).username or "engine"
    sep = "&" if "?" in admin else "?"
    return {
        "no such database": (
            with_user(f"{base}/engine_no_such_database", user, PASSWORD),
            r'database "engine_no_such_database" does not exist|authentication failed',
        ),
        "no such role": (
            with_user(admin, "engine_no_such_role", PASSWORD),
            r'role "engine_no_such_role" does not exist|authentication failed',
        ),
        "bad sslmode": (f"{admin}{sep}sslmode=bogus", r'invalid sslmode value: "bogus"'),
    }


@pytest.mark.parametrize("case", ["no such database", "no such role", "bad sslmode"])
@pytest.mark.parametrize(
    "command",
    [["serve", "--no-worker", "--port", "0"], ["worker", "--once"], ["runs"]],
    ids=["serve", "worker", "runs"],
)
def test_a_database_the_server_refuses_is_not_restarted(
    command: list[str], case: str, postgres_server: Any, tmp_path: Path
) -> None:
    """A PostgreSQL database or role that does not exist, or `?sslmode=bogus`: serve,
    worker and a reading command exit 2 (docs/cli.md#exit-codes: a restart will not
    help) with one line naming the refusal, no traceback and never the password."""
    url, says = refusing_urls(postgres_server.admin_url)[case]
    paths = ["--rules", str(API / "loops"), "--registry", str(API / "registry")]
    paths += ["--config", str(ROOT / "tests/data/no_config")]
    base = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    done = subprocess.run(
        [sys.executable, "-m", "engine", *command, *paths],
        cwd=tmp_path,
        env={**base, **SECRETS, "ENGINE_DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: the database "), done.stderr
    assert "refuses the connection" in lines[0] and re.search(says, lines[0]), lines[0]
    assert "a restart will not help" in lines[0]
    assert PASSWORD not in done.stderr + done.stdout
