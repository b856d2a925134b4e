"""What an installation gets (docs/deploy.md#installing): the runtime without the
PostgreSQL driver, every dependency pinned by constraints.txt at a version its
pyproject.toml range admits, and a clear error, not a traceback, for a database URL on
an installation without the `postgres` extra."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _requirements() -> list[Requirement]:
    found = [Requirement(r) for r in PROJECT["dependencies"]]
    for extra in PROJECT["optional-dependencies"].values():
        found += [Requirement(r) for r in extra]
    return [r for r in found if canonicalize_name(r.name) != "engine"]


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin (name==version)"
            pins[canonicalize_name(name)] = version
    return pins


def test_every_dependency_is_pinned_within_its_range() -> None:
    pins = _pins()
    for req in _requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not pinned in constraints.txt: run make constraints"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {req.name}=={pins[name]}, outside pyproject's {req}"
        )
        if "binary" in req.extras:  # psycopg[binary]: its compiled half is pinned too
            assert f"{name}-binary" in pins, f"{name}-binary is not pinned in constraints.txt"


def test_the_runtime_does_not_need_the_postgresql_driver() -> None:
    runtime = {canonicalize_name(Requirement(r).name) for r in PROJECT["dependencies"]}
    assert "psycopg" not in runtime
    postgres = [Requirement(r) for r in PROJECT["optional-dependencies"]["postgres"]]
    assert [canonicalize_name(r.name) for r in postgres] == ["psycopg"]


def test_a_database_url_without_the_driver_is_one_line_and_exit_2() -> None:
    # The driver made unimportable, as on an installation without the `postgres` extra.
    script = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from engine.cli.main import main\n"
        "sys.exit(main(['stats', '--db', 'postgresql://127.0.0.1:1/engine']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: a PostgreSQL database URL needs the PostgreSQL driver, which is not "
        "installed: pip install 'engine[postgres]'"
    ]
    assert "Traceback" not in done.stderr
