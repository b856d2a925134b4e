"""What `engine render` writes (docs/deploy.md), as pure data: a cadence's calendar,
the serve and worker units with the instance directory and the statuses not to
restart on, the environment file's template (names, never values), and the command's
refusals and `--json` document."""

from __future__ import annotations

import json
import plistlib
import re
from pathlib import Path

import pytest

from engine.api.settings import EVENT_SECRET_ENV, GITHUB_SECRET_ENV, OPERATOR_TOKEN_ENV
from engine.bridge import launchd_calendar, on_calendar
from engine.cli import exits
from engine.cli.main import main
from engine.deploy import ENV_TEMPLATE, Target, env_template, render

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "tests" / "data" / "bridge" / "config"
ENGINE = "/opt/engine/venv/bin/engine"
HOMED = Target(ENGINE, "/srv/engine", "/srv/engine/engine.env", worker=True)


@pytest.mark.parametrize(
    ("every", "calendar"),
    [
        (5, "*-*-* *:*:00/5 UTC"),
        (30, "*-*-* *:*:00/30 UTC"),
        (60, "*-*-* *:*:00 UTC"),
        (300, "*-*-* *:00/5:00 UTC"),
        (1200, "*-*-* *:00/20:00 UTC"),
        (3600, "*-*-* *:00:00 UTC"),
        (6 * 3600, "*-*-* 00/6:00:00 UTC"),
        (86400, "*-*-* 00:00:00 UTC"),
        (7 * 86400, "Thu *-*-* 00:00:00 UTC"),
        (7, None),  # does not divide a minute
        (90, None),  # a minute and a half
        (45 * 60, None),  # does not divide an hour
        (5 * 3600, None),  # does not divide a day
        (2 * 86400, None),  # epoch-even days are no calendar's
    ],
)
def test_a_cadence_maps_to_its_exact_calendar_or_none(every: int, calendar: str | None) -> None:
    """Every N seconds becomes the calendar of the epoch multiples of N, or None."""
    assert on_calendar(every) == calendar


def test_launchd_calendars_list_the_slots_of_an_hour_or_a_day() -> None:
    """launchd has no seconds: minutes dividing an hour, hours dividing a day, a day,
    a week (the epoch's weekday, Thursday); anything else keeps StartInterval."""
    assert launchd_calendar(900) == [{"Minute": m} for m in (0, 15, 30, 45)]
    assert launchd_calendar(3600) == [{"Minute": 0}]
    assert launchd_calendar(8 * 3600) == [{"Hour": h, "Minute": 0} for h in (0, 8, 16)]
    assert launchd_calendar(86400) == [{"Hour": 0, "Minute": 0}]
    assert launchd_calendar(7 * 86400) == [{"Weekday": 4, "Hour": 0, "Minute": 0}]
    assert [launchd_calendar(n) for n in (30, 60, 2700, 2 * 86400)] == [None] * 4


def test_the_environment_template_names_every_secret_and_holds_no_value() -> None:
    """Each secret variable serve reads is named with an empty value; no line assigns one."""
    text = env_template()
    assignments = [ln for ln in text.splitlines() if "=" in ln and not ln.startswith("# ")]
    assert {ln.lstrip("#").split("=")[0] for ln in assignments} == {
        EVENT_SECRET_ENV,
        OPERATOR_TOKEN_ENV,
        GITHUB_SECRET_ENV,
        "ENGINE_DATABASE_URL",
        "ENGINE_NOTIFY_URLS",
        "ENGINE_NOTIFY_WEBHOOK",
        "ENGINE_NOTIFY_WEBHOOK_SECRET",
    }
    assert all(ln.endswith("=") for ln in assignments)


def test_systemd_units_carry_the_home_and_do_not_restart_on_a_configuration_error() -> None:
    """Every service runs with ENGINE_HOME and the env file; serve and worker restart
    on failure except on the configuration status (exits.USAGE); serve leaves the
    work to the worker unit."""
    files = render("systemd", (), HOMED)
    assert list(files) == ["engine-serve.service", "engine-worker.service", ENV_TEMPLATE]
    for name in ("engine-serve.service", "engine-worker.service"):
        text = files[name].decode()
        assert "Environment=ENGINE_HOME=/srv/engine\n" in text
        assert "EnvironmentFile=/srv/engine/engine.env\n" in text
        assert "Restart=on-failure\n" in text
        assert f"RestartPreventExitStatus={exits.USAGE}\n" in text
    assert f"ExecStart={ENGINE} serve --no-worker\n" in files["engine-serve.service"].decode()
    assert f"ExecStart={ENGINE} worker\n" in files["engine-worker.service"].decode()
    alone = render("systemd", (), Target(ENGINE, None, "%h/.config/engine/engine.env"))
    assert "engine-worker.service" not in alone
    serve = alone["engine-serve.service"].decode()
    assert f"ExecStart={ENGINE} serve\n" in serve and "ENGINE_HOME" not in serve


def test_launchd_jobs_keep_serve_alive_with_the_home() -> None:
    """The serve and worker plists run at load, are kept alive after a failure and get
    ENGINE_HOME; their log goes under <home>/var/log."""
    files = render("launchd", (), HOMED)
    for name in ("serve", "worker"):
        job = plistlib.loads(files[f"engine.{name}.plist"])
        assert job["Label"] == f"engine.{name}" and job["ProgramArguments"][0] == ENGINE
        assert job["KeepAlive"] == {"SuccessfulExit": False} and job["RunAtLoad"] is True
        assert job["EnvironmentVariables"] == {"ENGINE_HOME": "/srv/engine"}
        assert job["StandardErrorPath"] == f"/srv/engine/var/log/engine-{name}.log"


def render_args(out: Path, *extra: str) -> list[str]:
    tree = ["--rules", str(ROOT / "loops"), "--registry", str(ROOT / "registry")]
    return ["render", "systemd", *tree, "--config", str(CONFIG), "--out", str(out), *extra]


def test_a_relative_engine_is_refused_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--engine engine` exits 2 with one line: a service manager has no PATH to search."""
    assert main(render_args(tmp_path / "out", "--engine", "bin/engine")) == exits.USAGE
    err = capsys.readouterr().err
    assert err.startswith("error: --engine 'bin/engine' is not an absolute path")
    assert not (tmp_path / "out").exists()


def test_render_json_lists_the_files_and_the_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--json` prints {"files": [{"path", "bytes"}], "removed": [...]}; a worker unit
    rendered before and not asked for now is removed, an unrelated file kept."""
    out = tmp_path / "out"
    assert main(render_args(out, "--engine", ENGINE, "--worker")) == 0
    (out / "notes.txt").write_text("kept")
    capsys.readouterr()
    assert main(render_args(out, "--engine", ENGINE, "--json")) == 0
    document = json.loads(capsys.readouterr().out)
    files = {Path(f["path"]).name: f["bytes"] for f in document["files"]}
    assert files == {p.name: p.stat().st_size for p in out.iterdir() if p.name != "notes.txt"}
    assert "engine-serve.service" in files and "engine-worker.service" not in files
    assert document["removed"] == [str(out / "engine-worker.service")]
    assert (out / "notes.txt").read_text() == "kept"
    served = (out / "engine-serve.service").read_text()
    assert re.search(r"^ExecStart=\S+ serve$", served, re.M)
