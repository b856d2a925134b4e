"""The instance directory (docs/deploy.md#the-instance-directory): an installed engine,
run from a working directory that holds no rules, finds its loops/, registry/ and
config/ in ENGINE_HOME (or `--home DIR`) and writes its database to <home>/var; an
explicit option or variable still wins; a home that is not a readable directory is
one error line and exit 2. Each command is a real subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.loading import Paths, digest

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "tests" / "data" / "api"


def engine(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m engine ARGS` in `cwd` with no ENGINE_* variable but `env`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        cwd=cwd,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A copy of the API test tree laid out as an instance directory (no var/ yet)."""
    home = tmp_path / "home"
    shutil.copytree(TREE / "loops", home / "loops")
    shutil.copytree(TREE / "registry", home / "registry")
    (home / "config").mkdir()
    return home


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A working directory with no loops/ or registry/ of its own."""
    (tmp_path / "elsewhere").mkdir()
    return tmp_path / "elsewhere"


def tree_digest(rules: Path, registry: Path) -> str:
    return digest(Paths(rules, registry, rules.parent / "config"))


def test_engine_home_holds_the_rules_and_the_database(home: Path, elsewhere: Path) -> None:
    """With ENGINE_HOME set, the rules are the home's (not the checkout's bundled ones)
    and the database a worker creates is <home>/var/engine.db, whatever the cwd."""
    own = tree_digest(home / "loops", home / "registry")
    assert own != tree_digest(ROOT / "loops", ROOT / "registry")
    done = engine(elsewhere, "digest", ENGINE_HOME=str(home))
    assert (done.returncode, done.stdout.strip()) == (0, own), done.stderr
    worker = engine(elsewhere, "worker", "--once", ENGINE_HOME=str(home))
    assert (worker.returncode, worker.stdout) == (0, "no queued run\n"), worker.stderr
    assert (home / "var" / "engine.db").is_file()
    assert not (elsewhere / "var").exists()
    runs = engine(elsewhere, "runs", ENGINE_HOME=str(home))
    assert (runs.returncode, runs.stdout, runs.stderr) == (0, "no runs\n", "")


def test_home_option_is_the_same_as_the_variable(home: Path, elsewhere: Path) -> None:
    """`--home DIR` finds the rules and the database exactly as ENGINE_HOME=DIR does."""
    worker = engine(elsewhere, "worker", "--once", "--home", str(home))
    assert worker.returncode == 0, worker.stderr
    assert (home / "var" / "engine.db").is_file()
    done = engine(elsewhere, "digest", "--home", str(home))
    assert done.stdout.strip() == tree_digest(home / "loops", home / "registry"), done.stderr


def test_an_explicit_directory_wins_over_the_home(home: Path, elsewhere: Path) -> None:
    """ENGINE_RULES beats the home's loops/, and --rules beats ENGINE_RULES."""
    other = elsewhere.parent / "other-loops"
    shutil.copytree(home / "loops", other)
    (other / "extra.rules").write_text("# an extra file changes the digest\n")
    by_variable = engine(elsewhere, "digest", ENGINE_HOME=str(home), ENGINE_RULES=str(other))
    assert by_variable.stdout.strip() == tree_digest(other, home / "registry")
    by_option = engine(
        elsewhere,
        "digest",
        "--rules",
        str(home / "loops"),
        ENGINE_HOME=str(home),
        ENGINE_RULES=str(other),
    )
    assert by_option.stdout.strip() == tree_digest(home / "loops", home / "registry")


@pytest.mark.parametrize("command", ["serve", "worker", "check", "runs"])
@pytest.mark.parametrize("broken", ["missing", "a-file"])
def test_a_home_that_is_not_a_directory_is_one_line_and_exit_2(
    command: str, broken: str, elsewhere: Path
) -> None:
    """A missing home, or a file named as one, refuses every command with one line."""
    home = elsewhere / "home"
    if broken == "a-file":
        home.write_text("not a directory\n")
    head = {"serve": ["serve", "--port", "0", "--no-worker"], "worker": ["worker", "--once"]}
    done = engine(elsewhere, *head.get(command, [command]), ENGINE_HOME=str(home))
    what = "does not exist" if broken == "missing" else "is not a directory"
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"error: the instance directory {home} (--home or ENGINE_HOME) {what}\n"
    ), done.stderr
