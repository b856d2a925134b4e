"""Broken configurations get one line, never a traceback (issue 12): each one below is
built for real (files, permissions, databases) and `engine serve`, `engine check`,
`engine worker --once` and a listing command (`engine runs`) are run against it as real
subprocesses. Each must exit with the documented code (docs/cli.md#exit-codes: 2 for a
configuration to fix, 1 for invalid rules, which serve and worker exit 2), print
exactly one `error:` line, or the located diagnostics of the rules
(`file:line:col: error[CODE]`), show no traceback and no secret, whatever it is given.

Permission cases run the command without root's capabilities (setpriv), since the tests
run as root, for whom file modes alone deny nothing: the process keeps its user but can
no longer override a file's mode, as any other user could not."""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from engine.store.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "tests" / "data" / "api"
SECRETS = {
    "ENGINE_EVENT_SECRET": "event-secret-never-shown",
    "ENGINE_OPERATOR_TOKEN": "alice:operator-token-never-shown",
    "ENGINE_GITHUB_WEBHOOK_SECRET": "github-secret-never-shown",
}
DB_PASSWORD = "db-password-never-shown"
COMMANDS = ("serve", "check", "worker", "runs")
DATABASE_COMMANDS = ("serve", "worker", "runs")  # `check` never opens the database
UNPRIVILEGED = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"]


@dataclass
class Setup:
    """A tree, a database and an environment for the commands; a case breaks one."""

    root: Path
    db: str = ""
    env: dict[str, str] = field(default_factory=dict)
    unprivileged: bool = False

    @property
    def loops(self) -> Path:
        return self.root / "tree" / "loops"

    @property
    def registry(self) -> Path:
        return self.root / "tree" / "registry"

    @property
    def config(self) -> Path:
        return self.root / "tree" / "config"


@dataclass(frozen=True)
class Case:
    name: str
    breaks: Callable[[Setup], None]
    exit_code: int
    diagnostic: str | None = None  # the rules' code, or None: one `error:` line
    commands: tuple[str, ...] = COMMANDS


def fresh(tmp_path: Path) -> Setup:
    """The API test tree with an empty config directory and an engine database."""
    shutil.copytree(TREE, tmp_path / "tree")
    (tmp_path / "tree" / "config").mkdir()
    setup = Setup(tmp_path, db=str(tmp_path / "engine.db"))
    SqliteStore(setup.db).close()
    return setup


def nested(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


# ---- the ways to break it --------------------------------------------------------------


def db_not_sqlite(s: Setup) -> None:
    s.db = str(s.root / "notes.db")
    Path(s.db).write_text("my notes, not a database\n" * 50)


def db_of_another_application(s: Setup) -> None:
    s.db = str(s.root / "crm.db")
    lite = sqlite3.connect(s.db)
    lite.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    lite.commit()
    lite.close()


def db_is_a_directory(s: Setup) -> None:
    s.db = str(s.root / "var")
    Path(s.db).mkdir()


def db_unreadable(s: Setup) -> None:
    Path(s.db).chmod(0)
    s.unprivileged = True


def db_directory_not_writable(s: Setup) -> None:
    (s.root / "locked").mkdir(mode=0o555)
    s.db = str(s.root / "locked" / "engine.db")
    s.unprivileged = True


def db_read_only(s: Setup) -> None:
    Path(s.db).chmod(0o444)
    s.unprivileged = True


def db_of_a_newer_engine(s: Setup) -> None:
    lite = sqlite3.connect(s.db)
    lite.execute("INSERT INTO schema_migrations VALUES (99, 'a newer engine')")
    lite.commit()
    lite.close()


def url_with_unknown_option(s: Setup) -> None:
    s.db = ""
    s.env["ENGINE_DATABASE_URL"] = f"postgresql://engine:{DB_PASSWORD}@127.0.0.1:1/e?bogus=1"


def url_malformed(s: Setup) -> None:
    s.db = ""
    s.env["ENGINE_DATABASE_URL"] = f"postgresql://engine:{DB_PASSWORD}@[db.internal/engine"


def url_of_another_database(s: Setup) -> None:
    s.db = "mysql://engine@db.internal/engine"


def url_of_another_database_in_the_environment(s: Setup) -> None:
    s.db = ""
    s.env["ENGINE_DATABASE_URL"] = f"mysql://engine:{DB_PASSWORD}@db.internal/engine"


def bad_lock_timeout(s: Setup) -> None:
    s.env["ENGINE_DB_LOCK_TIMEOUT"] = "soon"


def now_before_year_one_in_utc(s: Setup) -> None:
    s.env["ENGINE_NOW"] = "0001-01-01T00:00:00+14:00"


def now_at_the_end_of_time(s: Setup) -> None:
    s.env["ENGINE_NOW"] = "9999-12-31T23:59:59Z"


def rules_not_utf8(s: Setup) -> None:
    (s.loops / "latin1.rules").write_bytes(b"# caf\xe9\nhuman_only api.work.requested\n")


def rules_directory(s: Setup) -> None:
    (s.loops / "old.rules").mkdir()


def rules_symlink_loop(s: Setup) -> None:
    (s.loops / "a.rules").symlink_to("b.rules")
    (s.loops / "b.rules").symlink_to("a.rules")


def rules_unreadable(s: Setup) -> None:
    (s.loops / "routes.rules").chmod(0)
    s.unprivileged = True


def rules_directory_unreadable(s: Setup) -> None:
    (s.loops / "more").mkdir()
    (s.loops / "more").chmod(0)
    s.unprivileged = True


def contracts_unreadable(s: Setup) -> None:
    (s.registry / "contracts").chmod(0)
    s.unprivileged = True


def definitions_5000_deep(s: Setup) -> None:
    (s.registry / "definitions.yaml").write_text(f"definitions:\n  - {nested(5000)}\n")


def event_types_5000_deep(s: Setup) -> None:
    text = "event_types:\n  api.work.requested: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n"
    (s.registry / "event-types.yaml").write_text(text)


def config_5000_deep(s: Setup) -> None:
    (s.config / "repos.yaml").write_text(f"repos:\n  alpha: {nested(5000)}\n")


def schema_5000_deep(s: Setup) -> None:
    text = '{"type": "object", "properties": {"repo": ' + nested(5000) + "}}"
    (s.registry / "schemas" / "repo.input.json").write_text(text)


def registry_not_utf8(s: Setup) -> None:
    path = s.registry / "definitions.yaml"
    path.write_bytes(path.read_bytes() + b"# \xff\xfe\n")


def repos_yaml_directory(s: Setup) -> None:
    (s.config / "repos.yaml").mkdir()


def config_missing(s: Setup) -> None:
    shutil.rmtree(s.config)


def expression_3000_deep(s: Setup) -> None:
    rule = "webhook github push\n  emit api.work.done { repo: " + nested(3000) + " }\n"
    (s.loops / "deep.rules").write_text(rule)


CASES = [
    Case("db-not-sqlite", db_not_sqlite, 2, commands=DATABASE_COMMANDS),
    Case("db-of-another-application", db_of_another_application, 2, commands=DATABASE_COMMANDS),
    Case("db-is-a-directory", db_is_a_directory, 2, commands=DATABASE_COMMANDS),
    Case("db-unreadable", db_unreadable, 2, commands=DATABASE_COMMANDS),
    Case("db-directory-not-writable", db_directory_not_writable, 2, commands=("serve", "worker")),
    Case("db-read-only", db_read_only, 2, commands=("serve", "worker")),
    Case("db-of-a-newer-engine", db_of_a_newer_engine, 2, commands=DATABASE_COMMANDS),
    Case("url-with-unknown-option", url_with_unknown_option, 2, commands=DATABASE_COMMANDS),
    Case("url-malformed-with-password", url_malformed, 2, commands=DATABASE_COMMANDS),
    Case("url-of-another-database", url_of_another_database, 2, commands=DATABASE_COMMANDS),
    Case(
        "url-of-another-database-in-the-environment",
        url_of_another_database_in_the_environment,
        2,
        commands=DATABASE_COMMANDS,
    ),
    Case("bad-lock-timeout", bad_lock_timeout, 2, commands=DATABASE_COMMANDS),
    Case("now-before-year-one-in-utc", now_before_year_one_in_utc, 2, commands=DATABASE_COMMANDS),
    Case("now-at-the-end-of-time", now_at_the_end_of_time, 2, commands=DATABASE_COMMANDS),
    Case("rules-not-utf8", rules_not_utf8, 1, "E0907"),
    Case("rules-directory", rules_directory, 2, "E0905"),
    Case("rules-symlink-loop", rules_symlink_loop, 2, "E0905"),
    Case("rules-unreadable", rules_unreadable, 2, "E0905"),
    Case("rules-directory-unreadable", rules_directory_unreadable, 2, "E0905"),
    Case("contracts-unreadable", contracts_unreadable, 2, "E0905"),
    Case("definitions-5000-deep", definitions_5000_deep, 1, "E0908"),
    Case("event-types-5000-deep", event_types_5000_deep, 1, "E0908"),
    Case("config-5000-deep", config_5000_deep, 1, "E0908"),
    Case("schema-5000-deep", schema_5000_deep, 1, "E0908"),
    Case("registry-not-utf8", registry_not_utf8, 1, "E0907"),
    Case("repos-yaml-directory", repos_yaml_directory, 2, "E0905"),
    Case("config-missing", config_missing, 2, "E0900"),
    Case("expression-3000-deep", expression_3000_deep, 1, "E0608"),
]


# ---- running the commands ----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def argv(command: str, s: Setup) -> list[str]:
    tree = ["--rules", str(s.loops), "--registry", str(s.registry), "--config", str(s.config)]
    db = ["--db", s.db] if s.db else []
    head = {
        "serve": ["serve", "--port", str(free_port()), "--no-worker"],
        "check": ["check"],
        "worker": ["worker", "--once"],
        "runs": ["runs"],
    }[command]
    prefix = UNPRIVILEGED if s.unprivileged and os.geteuid() == 0 else []
    return [
        *prefix,
        sys.executable,
        "-m",
        "engine",
        *head,
        *tree,
        *([] if command == "check" else db),
    ]


def run_all(s: Setup, commands: tuple[str, ...]) -> dict[str, subprocess.CompletedProcess[str]]:
    """Run the commands at once (each a real subprocess); their results by command."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    env.update(SECRETS, **s.env)
    started = {
        c: subprocess.Popen(
            argv(c, s),
            cwd=s.root,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for c in commands
    }
    done = {}
    for command, process in started.items():
        try:
            out, err = process.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
            pytest.fail(f"`engine {command}` did not stop: it took the configuration\n{err}")
        done[command] = subprocess.CompletedProcess(argv(command, s), process.returncode, out, err)
    return done


def expected_exit(case: Case, command: str) -> int:
    """The documented exit: invalid rules are 1 for `check` and the listings, but 2 for
    `serve` and `worker`, which a supervisor must not restart on them."""
    return 2 if command in ("serve", "worker") else case.exit_code


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_broken_configuration_is_one_line_and_its_exit_code(case: Case, tmp_path: Path) -> None:
    """Each command refuses the broken configuration with its documented exit code and
    exactly one `error:` line naming what is wrong (or the rules' located diagnostics),
    with no traceback and no secret in anything it prints, and creates no file named
    after a URL's scheme."""
    setup = fresh(tmp_path)
    case.breaks(setup)
    if setup.unprivileged and os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a file mode denies root nothing")
    for command, result in run_all(setup, case.commands).items():
        printed = result.stdout + result.stderr
        where = f"`engine {command}` ({case.name}):\n{result.stderr}"
        assert result.returncode == expected_exit(case, command), where
        assert "Traceback" not in printed, where
        for secret in (*SECRETS.values(), DB_PASSWORD, "operator-token-never-shown"):
            assert secret not in printed, where
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        if case.diagnostic is None:
            assert len(errors) == 1 and result.stderr.strip() == errors[0], where
        else:
            assert f"error[{case.diagnostic}]" in result.stderr, where
            located = [ln for ln in result.stderr.splitlines() if ": error[E" in ln]
            assert located and all(ln.split(":")[1].isdigit() for ln in located), where
            assert len(errors) == (1 if command == "check" else 0), where
    made = [p.name for p in setup.root.iterdir() if p.name.endswith(":")]
    assert not made, f"a database URL was taken for a path and created: {made}"


def test_a_read_only_database_is_still_listed(tmp_path: Path) -> None:
    """A database this user may read but not write refuses serve and worker (above),
    but the listing commands, which only read, still show it."""
    setup = fresh(tmp_path)
    db_read_only(setup)
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a file mode denies root nothing")
    result = run_all(setup, ("runs",))["runs"]
    assert (result.returncode, result.stdout, result.stderr) == (0, "no runs\n", "")
