"""Which sinks `engine serve` delivers to, and how often it tries
(docs/notifications.md#configuring-sinks), from two places, both read once at start:

- the environment: ENGINE_NOTIFY_URLS (Apprise URLs, comma or space separated: sinks
  `url-1`, `url-2`, ...), ENGINE_NOTIFY_WEBHOOK with ENGINE_NOTIFY_WEBHOOK_SECRET (the
  signed generic webhook: sink `webhook`), ENGINE_NOTIFY_LOG (a JSON-lines file: sink
  `log`);
- config/notifications.yaml: `delivery:` (attempts and backoff) and `sinks:` by name,
  each an Apprise `url`, a `webhook` or a `log` file; a URL that holds a secret is named
  by the variable that holds it (`url_env`, `webhook_env`, `secret_env`), never written
  in the file.

A malformed file is a RulesError with file:line:col (as `engine check` shows it); a
setting of the environment that cannot be used is a ConfigError naming the variable,
never its value. Both stop serve with exit 2."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dsl.diagnostics import Collector, RulesError, Span
from engine.core.config import REPO_NAME_PATTERN
from engine.core.delivery import Policy
from engine.core.durations import DurationError, parse_duration
from engine.errors import ConfigError
from engine.home import LAYOUT
from engine.loading import _sections, node_span, validate
from engine.notify import signing
from engine.notify.redact import hidden_parts, web_url
from engine.notify.sinks import AppriseSink, LogSink, Sink, WebhookSink
from engine.places import Root

URLS_ENV = "ENGINE_NOTIFY_URLS"
WEBHOOK_ENV = "ENGINE_NOTIFY_WEBHOOK"
SECRET_ENV = "ENGINE_NOTIFY_WEBHOOK_SECRET"
LOG_ENV = "ENGINE_NOTIFY_LOG"
FILE = "notifications.yaml"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
DEFAULT_POLICY = Policy()
_TARGETS = ("url", "url_env", "webhook", "webhook_env", "log")


class SinkEntry(BaseModel):
    """One `sinks:` entry; its name is the mapping key. Exactly one target."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str | None = Field(default=None, min_length=1)  # an Apprise URL holding no secret
    url_env: str | None = Field(default=None, pattern=ENV_NAME)  # the variable holding one
    webhook: str | None = Field(default=None, min_length=1)  # http(s), holding no secret
    webhook_env: str | None = Field(default=None, pattern=ENV_NAME)
    secret_env: str | None = Field(default=None, pattern=ENV_NAME)  # the whsec_ secret
    log: str | None = Field(default=None, min_length=1)  # a JSON-lines file

    @model_validator(mode="after")
    def _one_target(self) -> SinkEntry:
        given = [t for t in _TARGETS if getattr(self, t) is not None]
        if len(given) != 1:
            what = " and ".join(given) if given else "none"
            raise ValueError(f"a sink has exactly one of {', '.join(_TARGETS)} (here: {what})")
        if self.secret_env is not None and given[0] not in ("webhook", "webhook_env"):
            raise ValueError("secret_env signs a webhook; this sink is no webhook")
        return self

    @field_validator("url")
    @classmethod
    def _apprise_url(cls, value: str | None) -> str | None:
        if value is not None:
            problem = apprise_problem(value)
            if problem is None and secret_parts(value):
                problem = (
                    "this URL holds a secret (a password or a token): put the URL in an "
                    "environment variable and name that variable with url_env"
                )
            if problem is not None:
                raise ValueError(problem)
        return value

    @field_validator("webhook")
    @classmethod
    def _web_url(cls, value: str | None) -> str | None:
        if value is not None:
            problem = web_problem(value)
            if problem is None and urllib.parse.urlsplit(value).password:
                problem = "this URL holds a password: name the variable holding it with webhook_env"
            if problem is not None:
                raise ValueError(problem)
        return value


class DeliveryEntry(BaseModel):
    """`delivery:`: how often one sink is tried, and how far apart."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    attempts: int = Field(default=DEFAULT_POLICY.attempts, ge=1, le=100)
    backoff: str = "30s"
    max_backoff: str = "1h"

    @field_validator("backoff", "max_backoff")
    @classmethod
    def _duration(cls, value: str) -> str:
        try:
            parse_duration(value)
        except DurationError as err:
            raise ValueError(str(err)) from None
        return value

    def policy(self) -> Policy:
        first, most = parse_duration(self.backoff), parse_duration(self.max_backoff)
        return Policy(self.attempts, first, max(first, most))


@dataclass(frozen=True)
class Entry:
    """A sink of the file with where it was written."""

    name: str
    sink: SinkEntry
    span: Span


@dataclass(frozen=True)
class FileSettings:
    policy: Policy
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class Notifying:
    """The sinks serve delivers to, in order, and the retry policy."""

    sinks: tuple[Sink, ...] = ()
    policy: Policy = DEFAULT_POLICY

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.sinks)

    def describe(self) -> list[dict[str, str]]:
        """Each sink's name, kind and target with its secrets masked."""
        return [{"name": s.name, "kind": s.kind, "target": s.shown} for s in self.sinks]


# ---- checking a URL --------------------------------------------------------------------


def apprise_problem(url: str) -> str | None:
    """Why Apprise cannot use `url` (naming its scheme only), or None."""
    import apprise  # here: loading its plugins takes most of a second

    if apprise.Apprise.instantiate(url) is not None:
        return None
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        return f"not a URL Apprise can use (scheme '{scheme}'; docs/notifications.md#sinks)"
    return "not a URL Apprise can use: write SERVICE://... (docs/notifications.md#sinks)"


def privacy_url(url: str) -> str:
    """What Apprise shows of a URL it can use (its secrets masked)."""
    import apprise

    plugin = apprise.Apprise.instantiate(url)
    return "" if plugin is None else str(plugin.url(privacy=True))  # type: ignore[no-untyped-call]


def secret_parts(url: str) -> frozenset[str]:
    """The parts of an Apprise URL that Apprise masks when it shows it."""
    return hidden_parts(url, privacy_url(url))


def web_problem(url: str) -> str | None:
    """Why `url` is no http(s) URL the webhook can post to, or None."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (it raises ValueError for a port out of range)
    except ValueError:
        return "not a URL: write http(s)://HOST[:PORT]/PATH"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "not an http(s) URL: write http(s)://HOST[:PORT]/PATH"
    return None


# ---- the file ---------------------------------------------------------------------------


def read_file(config: Path, collector: Collector) -> FileSettings:
    """config/notifications.yaml's `delivery:` and `sinks:`, each checked (problems go
    to `collector`); no file: the default policy and no sink."""
    root = Root(LAYOUT["config"], config)
    found = _sections(root, config / FILE, {"delivery": dict, "sinks": dict}, collector)
    if found is None:
        return FileSettings(Policy(), ())
    file, sections = found
    delivery = validate(DeliveryEntry, sections["delivery"], file, sections["delivery"], collector)
    entries = []
    for name, body in sections["sinks"].items():
        span = node_span(file, sections["sinks"], name)
        if not isinstance(name, str) or re.match(REPO_NAME_PATTERN, name) is None:
            collector.error(
                "E0902", f"sink name '{name}' must be lower-case letters, digits, - or _", span
            )
            continue
        if name in _ENV_NAMES or name.startswith("url-"):
            collector.error(
                "E0902", f"sink name '{name}' is the name of a sink from the environment", span
            )
            continue
        entry = validate(SinkEntry, body, file, body, collector, at=span)
        if entry is not None:
            entries.append(Entry(name, entry, span))
    policy = delivery.policy() if delivery is not None else Policy()
    return FileSettings(policy, tuple(entries))


def check_file(config: Path) -> FileSettings:
    """The file read and checked; RulesError with every problem."""
    collector = Collector()
    found = read_file(config, collector)
    if collector.items:
        raise RulesError(collector.items)
    return found


# ---- the environment --------------------------------------------------------------------

_ENV_NAMES = ("webhook", "log")


def _need(environ: Mapping[str, str], variable: str, what: str) -> str:
    value = environ.get(variable, "").strip()
    if not value:
        raise ConfigError(f"{what} names {variable}, which is not set")
    return value


def _apprise_sink(name: str, url: str, origin: str) -> AppriseSink:
    problem = apprise_problem(url)
    if problem is not None:
        raise ConfigError(f"{origin}: {problem}")
    shown = privacy_url(url)
    return AppriseSink(name, url, shown.split("?", 1)[0], hidden_parts(url, shown))


def _webhook_sink(name: str, url: str, secret: str | None, origin: str) -> WebhookSink:
    problem = web_problem(url)
    if problem is not None:
        raise ConfigError(f"{origin}: {problem}")
    key = None
    if secret is not None:
        try:
            key = signing.secret_key(secret)
        except signing.BadSecret as err:
            raise ConfigError(f"the webhook secret of sink '{name}' {err}") from None
    shown = web_url(url)
    return WebhookSink(name, url, shown, key, hidden_parts(url, shown))


def env_sinks(environ: Mapping[str, str]) -> list[Sink]:
    """The sinks the environment gives: `url-N`, `webhook`, `log`."""
    from apprise.utils.parse import parse_urls

    found: list[Sink] = []
    urls: list[str] = parse_urls(environ.get(URLS_ENV, ""))  # type: ignore[no-untyped-call]
    for index, url in enumerate(urls, 1):
        found.append(_apprise_sink(f"url-{index}", url, f"{URLS_ENV}: entry {index}"))
    webhook = environ.get(WEBHOOK_ENV, "").strip()
    secret = environ.get(SECRET_ENV, "").strip() or None
    if webhook:
        found.append(_webhook_sink("webhook", webhook, secret, WEBHOOK_ENV))
    elif secret:
        raise ConfigError(f"{SECRET_ENV} is set but {WEBHOOK_ENV} is not: no webhook to sign")
    log = environ.get(LOG_ENV, "").strip()
    if log:
        found.append(_log_sink("log", Path(log), LOG_ENV))
    return found


def _log_sink(name: str, path: Path, where: str) -> LogSink:
    """A JSON-lines sink; a path that is a directory could never be appended to, so it
    stops the runtime at start (ConfigError) rather than fail every delivery."""
    if path.is_dir():
        raise ConfigError(f"{where}: {path} is a directory, not a file to append to")
    return LogSink(name, path)


def file_sink(entry: Entry, environ: Mapping[str, str], config: Path) -> Sink:
    """A sink of the file, its variables read from `environ`."""
    s, where = entry.sink, f"{entry.span.file}:{entry.span.line}: sink '{entry.name}'"
    if s.url is not None or s.url_env is not None:
        url = s.url or _need(environ, str(s.url_env), f"{where}: url_env")
        return _apprise_sink(entry.name, url, where)
    if s.webhook is not None or s.webhook_env is not None:
        url = s.webhook or _need(environ, str(s.webhook_env), f"{where}: webhook_env")
        secret = (
            None if s.secret_env is None else _need(environ, s.secret_env, f"{where}: secret_env")
        )
        return _webhook_sink(entry.name, url, secret, where)
    path = Path(str(s.log))
    return _log_sink(entry.name, path if path.is_absolute() else config.parent / path, where)


def load(config: Path, environ: Mapping[str, str]) -> Notifying:
    """Every sink, the environment's first, and the file's policy. RulesError for a
    malformed file; ConfigError for a setting that cannot be used."""
    settings = check_file(config)
    sinks = [*env_sinks(environ), *(file_sink(e, environ, config) for e in settings.entries)]
    return Notifying(tuple(sinks), settings.policy)
