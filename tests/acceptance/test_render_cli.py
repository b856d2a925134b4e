"""`engine render` as an operator runs it (docs/deploy.md): from an instance directory,
without --engine, a real subprocess. Every systemd unit it writes passes
`systemd-analyze verify` (the ExecStart is the real, absolute engine that rendered
it); every plist parses with plistlib into a job launchd can load; and each calendar
expression fires exactly at the slots `bridge_slot` computes, as systemd itself
evaluates it (`systemd-analyze calendar`).

systemd-analyze comes with Debian's `systemd` package (.ci/run installs it); these
tests skip without it only outside CI."""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.bridge import bridge_slot, on_calendar

ROOT = Path(__file__).resolve().parents[2]
BRIDGE_CONFIG = ROOT / "tests" / "data" / "bridge" / "config"
ANALYZE = shutil.which("systemd-analyze")
# Every cadence with an exact calendar: those dividing a minute, an hour, a day; a week.
CALENDAR_CADENCES = [n for n in (*range(1, 86401), 7 * 86400) if on_calendar(n) is not None]


def need_systemd_analyze() -> str:
    if ANALYZE is None:
        if os.environ.get("CI"):
            pytest.fail("systemd-analyze is missing in CI: install Debian's systemd package")
        pytest.skip("systemd-analyze is not installed (Debian's systemd package)")
    return ANALYZE


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An instance directory: the shipped rules and the bridge test's host clocks."""
    home = tmp_path_factory.mktemp("instance") / "home"
    shutil.copytree(ROOT / "loops", home / "loops")
    shutil.copytree(ROOT / "registry", home / "registry")
    shutil.copytree(BRIDGE_CONFIG, home / "config")
    return home


def render(home: Path, kind: str, cwd: Path) -> tuple[Path, list[Path]]:
    """`engine render KIND --worker` from `cwd` with ENGINE_HOME=home: (DIR, files)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    out = cwd / kind
    done = subprocess.run(
        [sys.executable, "-m", "engine", "render", kind, "--worker", "--out", str(out)],
        cwd=cwd,
        env={**env, "ENGINE_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    written = [Path(line) for line in done.stdout.splitlines()]
    assert sorted(written) == sorted(out.iterdir())
    return out, written


def the_engine() -> str:
    """The engine a `python -m engine` subprocess of this interpreter finds for itself."""
    return str(Path(os.path.abspath(sys.executable)).parent / "engine")


def test_every_rendered_systemd_unit_verifies(home: Path, tmp_path: Path) -> None:
    """systemd-analyze verify accepts every unit: serve, worker, each clock's service
    and timer; each runs the absolute engine that rendered it, with ENGINE_HOME."""
    analyze = need_systemd_analyze()
    out, written = render(home, "systemd", tmp_path)
    units = sorted(p.name for p in written if p.suffix in (".service", ".timer"))
    assert {"engine-serve.service", "engine-worker.service"} <= set(units)
    assert Path(the_engine()).is_file()
    for name in units:
        text = (out / name).read_text()
        if name.endswith(".service"):
            assert f"\nExecStart={the_engine()} " in text, text
            assert f"\nEnvironment=ENGINE_HOME={home}\n" in text, text
    done = subprocess.run(
        [analyze, "verify", "--man=no", *units],
        cwd=out,
        env={**os.environ, "SYSTEMD_LOG_LEVEL": "notice"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr


def test_every_rendered_plist_is_a_job_launchd_can_load(home: Path, tmp_path: Path) -> None:
    """Each plist parses; its Label is its name, its program an absolute path; a clock
    runs on a calendar or an interval; serve and worker are kept alive."""
    _, written = render(home, "launchd", tmp_path)
    plists = [p for p in written if p.suffix == ".plist"]
    assert {p.name for p in plists} >= {"engine.serve.plist", "engine.worker.plist"}
    for path in plists:
        job = plistlib.loads(path.read_bytes())
        assert job["Label"] == path.stem
        assert job["ProgramArguments"][0] == the_engine()
        assert job["EnvironmentVariables"] == {"ENGINE_HOME": str(home)}
        if path.name.startswith("engine.bridge."):
            assert "StartCalendarInterval" in job or job["StartInterval"] > 0
            assert job["ProgramArguments"][1] == "emit"
        else:
            assert job["KeepAlive"] == {"SuccessfulExit": False}


def next_elapses(analyze: str, calendar: str, base: int, count: int) -> list[datetime]:
    """When systemd would fire `calendar` next after `base` (epoch seconds), in UTC."""
    done = subprocess.run(
        [analyze, "calendar", f"--base-time=@{base}", f"--iterations={count}", calendar],
        env={**os.environ, "TZ": "UTC", "SYSTEMD_LOG_LEVEL": "notice"},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    found = []
    for line in done.stdout.splitlines():
        head, _, when = line.strip().partition(": ")
        if head == "Next elapse" or head.startswith("Iter."):
            found.append(datetime.strptime(when, "%a %Y-%m-%d %H:%M:%S UTC").replace(tzinfo=UTC))
    return found


@settings(max_examples=40, deadline=None)
@given(
    every=st.sampled_from(CALENDAR_CADENCES),
    base=st.integers(min_value=0, max_value=4_000_000_000),
)
def test_a_calendar_fires_exactly_at_the_bridge_slots(every: int, base: int) -> None:
    """For every cadence with a calendar, the next firings after any instant are the
    next slots `bridge_slot` computes: one firing per slot, none between."""
    analyze = need_systemd_analyze()
    calendar = on_calendar(every)
    assert calendar is not None
    slot = bridge_slot(datetime.fromtimestamp(base, UTC), every)
    expected = [slot + timedelta(seconds=every * k) for k in (1, 2, 3)]
    assert next_elapses(analyze, calendar, base, 3) == expected
