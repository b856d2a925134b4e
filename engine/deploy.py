"""What `engine render systemd|launchd` writes (docs/deploy.md), pure: the serve unit,
an optional worker unit, the host clocks' timers (engine.bridge) and a template of
the environment file that holds the secrets. Data in, file names and bytes out:
nothing here reads the clock, installs or loads a unit."""

from __future__ import annotations

import plistlib
from dataclasses import dataclass
from typing import Any

from engine.api.settings import EVENT_SECRET_ENV, GITHUB_SECRET_ENV, OPERATOR_TOKEN_ENV
from engine.bridge import LABEL_PREFIX, UNIT_PREFIX, exec_start, render_clocks
from engine.core.config import HostTimer
from engine.errors import ConfigError
from engine.home import HOME_ENV

KINDS = ("launchd", "systemd")
ENV_TEMPLATE = "engine.env.template"
USER_ENV_FILE = "%h/.config/engine/engine.env"
URL_ENV = "ENGINE_DATABASE_URL"  # engine.bootstrap's; not imported: it pulls in the store
# engine.notify.config's (docs/notifications.md); not imported: it pulls in the loader
NOTIFY_URLS_ENV = "ENGINE_NOTIFY_URLS"
NOTIFY_WEBHOOK_ENV = "ENGINE_NOTIFY_WEBHOOK"
NOTIFY_SECRET_ENV = "ENGINE_NOTIFY_WEBHOOK_SECRET"
# Exit statuses a restart cannot fix (docs/cli.md#exit-codes): systemd stops there.
PREVENT_RESTART = (ConfigError.exit_code,)

# (variable, what it is, commented out): the template's lines, never a value.
SECRETS = (
    (EVENT_SECRET_ENV, "HMAC secret of signed POST /events; engine emit signs with it", False),
    (OPERATOR_TOKEN_ENV, "operator tokens, name:token[,name:token...] (operator routes)", False),
    (GITHUB_SECRET_ENV, "GitHub webhook secret(s), comma-separated for rotation", False),
    (URL_ENV, "instead of <home>/var/engine.db: postgresql://user:password@host/db", True),
    (NOTIFY_URLS_ENV, "notification sinks: Apprise URLs, comma-separated (chat, mail, push)", True),
    (NOTIFY_WEBHOOK_ENV, "the generic notification webhook, https://...", True),
    (NOTIFY_SECRET_ENV, "its Standard Webhooks signing secret, whsec_<base64>", True),
)


@dataclass(frozen=True)
class Target:
    """How the rendered files run the engine: `engine` its absolute path; `home` the
    instance directory (ENGINE_HOME) or None; `env_file` systemd's EnvironmentFile=;
    `worker` a separate worker process (serve then runs --no-worker)."""

    engine: str
    home: str | None
    env_file: str
    worker: bool = False


def default_env_file(home: str | None) -> str:
    """`<home>/engine.env` beside the instance, else the user's ~/.config/engine/engine.env."""
    return f"{home}/engine.env" if home is not None else USER_ENV_FILE


def managed(kind: str, name: str) -> bool:
    """Whether a file in the output directory is one `render` writes (so a stale one,
    of a clock disabled or a worker dropped since, is removed)."""
    fixed = {ENV_TEMPLATE, *(f"{n}.service" for n in ("engine-serve", "engine-worker"))}
    fixed |= {f"engine.{n}.plist" for n in ("serve", "worker")}
    return name in fixed or name.startswith(LABEL_PREFIX if kind == "launchd" else UNIT_PREFIX)


def env_template() -> str:
    """The environment file's template: the names of the secrets with empty values."""
    lines = [
        "# The secrets of engine serve, engine worker and the host clocks' engine emit",
        "# (docs/deploy.md#the-environment-file). Fill in the values, keep the file",
        "# mode 0600 and out of version control. systemd reads it (EnvironmentFile=).",
    ]
    for name, what, commented in SECRETS:
        lines += ["", f"# {what}", f"{'#' if commented else ''}{name}="]
    return "\n".join(lines) + "\n"


# ---- systemd --------------------------------------------------------------------------


def environment(target: Target) -> str:
    """The Environment= and EnvironmentFile= lines of every service."""
    home = f"Environment={HOME_ENV}={target.home}\n" if target.home is not None else ""
    return f"{home}EnvironmentFile={target.env_file}\n"


def long_running(target: Target, name: str, argv: list[str], what: str) -> str:
    """A service restarted on failure except on a configuration error."""
    prevent = " ".join(str(code) for code in PREVENT_RESTART)
    return (
        "[Unit]\n"
        f"Description=engine {name}: {what} (docs/deploy.md)\n"
        "\n"
        "[Service]\n"
        "Type=exec\n"
        f"{environment(target)}"
        f"ExecStart={exec_start(argv)}\n"
        "Restart=on-failure\n"
        "RestartSec=5s\n"
        f"# {prevent}: a configuration a restart cannot fix (docs/deploy.md#exit-codes)\n"
        f"RestartPreventExitStatus={prevent}\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def systemd_units(target: Target) -> dict[str, str]:
    serve = [target.engine, "serve", *(["--no-worker"] if target.worker else [])]
    units = {"engine-serve.service": long_running(target, "serve", serve, "the runtime")}
    if target.worker:
        argv = [target.engine, "worker"]
        units["engine-worker.service"] = long_running(target, "worker", argv, "runs queued runs")
    return units


# ---- launchd --------------------------------------------------------------------------


def variables(target: Target) -> dict[str, str]:
    return {HOME_ENV: target.home} if target.home is not None else {}


def launchd_job(target: Target, name: str, argv: list[str]) -> dict[str, Any]:
    """A job kept alive after a failure (launchd has no list of statuses not to
    restart on: it retries a configuration error every 10 s, docs/deploy.md)."""
    job: dict[str, Any] = {
        "Label": f"engine.{name}",
        "ProgramArguments": argv,
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
    }
    if target.home is not None:
        job["EnvironmentVariables"] = variables(target)
        job["StandardErrorPath"] = f"{target.home}/var/log/engine-{name}.log"
    return job


def launchd_jobs(target: Target) -> dict[str, bytes]:
    serve = [target.engine, "serve", *(["--no-worker"] if target.worker else [])]
    jobs = {"serve": launchd_job(target, "serve", serve)}
    if target.worker:
        jobs["worker"] = launchd_job(target, "worker", [target.engine, "worker"])
    return {f"engine.{n}.plist": plistlib.dumps(j, sort_keys=True) for n, j in jobs.items()}


def render(kind: str, clocks: tuple[HostTimer, ...], target: Target) -> dict[str, bytes]:
    """Every file of `kind`, by name, sorted: the serve (and worker) unit, the enabled
    host clocks' timers and the environment file's template."""
    files: dict[str, bytes] = {ENV_TEMPLATE: env_template().encode()}
    if kind == "launchd":
        files |= launchd_jobs(target)
        files |= render_clocks(kind, clocks, target.engine, variables=variables(target))
    else:
        files |= {n: text.encode() for n, text in systemd_units(target).items()}
        files |= render_clocks(kind, clocks, target.engine, environment=environment(target))
    return dict(sorted(files.items()))
