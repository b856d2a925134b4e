"""A PostgreSQL database URL as messages show it — its password never — and what a
failed connection means: a refusal a restart will not help (ConfigError, exit 2), or a
server not reachable yet (Unavailable, exit 1). Pure: text in, text or an error out."""

from __future__ import annotations

import re
from urllib.parse import unquote

import psycopg

from engine.errors import ConfigError, Unavailable

_PASSWORD_PARAM = re.compile(r"(password=).*", re.IGNORECASE)  # to the end: '&' may be in it
_PASSWORD_IN_TEXT = re.compile(r"(password=)[^\s\"']*", re.IGNORECASE)
_QUOTED = re.compile(r'"([^"]*)"')


def _split(url: str) -> tuple[str, str, str] | None:
    """(scheme://, userinfo, rest after the last '@') of a URL with credentials."""
    scheme, sep, rest = url.partition("://")
    at = rest.rfind("@")
    if not sep or at < 0:
        return None
    return scheme + sep, rest[:at], rest[at + 1 :]


def redacted(url: str) -> str:
    """The URL with any password (in the user part or a `password=` parameter)
    replaced, for logs and error messages; whatever the URL, even a malformed one."""
    parts = _split(url)
    if parts is not None and ":" in parts[1]:
        user = parts[1].split(":", 1)[0]
        url = f"{parts[0]}{user}:***@{parts[2]}"
    return _PASSWORD_PARAM.sub(r"\1***", url)


def _secrets(url: str) -> list[str]:
    """The parts of a URL that may hold its password: after the user's ':', and after
    `password=` to the end (an unescaped '&' may belong to it)."""
    found = []
    parts = _split(url)
    if parts is not None and ":" in parts[1]:
        found.append(parts[1].split(":", 1)[1])
    at = url.lower().find("password=")
    if at >= 0:
        found.append(url[at + len("password=") :])
    return [form for secret in found for form in {secret, unquote(secret)} if form]


def scrubbed(text: str, url: str) -> str:
    """A driver's message with the URL and its password taken out: the URL shown
    redacted, the password and any quoted part of it replaced, on one line."""
    text = text.replace(url, redacted(url))
    secrets = _secrets(url)
    for secret in secrets:
        if len(secret) >= 3:
            text = text.replace(secret, "***")

    def quoted(match: re.Match[str]) -> str:
        inner = match.group(1)
        return '"***"' if any(inner in secret for secret in secrets) else match.group(0)

    text = _QUOTED.sub(quoted, text)
    return " ".join(_PASSWORD_IN_TEXT.sub(r"\1***", text).split())


# SQLSTATEs of a server that refuses who we are or what we ask for: a configuration to
# fix (28: role or password; 3D000: no such database; 42501: no privilege).
_REFUSALS = ("28", "3D000", "42501")

# The same refusals while connecting, where libpq gives no SQLSTATE, only the server's
# FATAL line (in the server's language: these are its English messages; another
# language is taken as unreachable, exit 1), or its own refusal of an option's value
# ("invalid sslmode value", "invalid port number": a `connection is bad: invalid ...`).
_REFUSED_AT_CONNECT = re.compile(
    r"FATAL: (?:database|role) \".*\" does not exist"  # 3D000, 28000
    r"|FATAL: (?:password|\w+) authentication failed"  # 28P01, 28000 (peer, ident, ...)
    r"|FATAL: no pg_hba\.conf entry"  # 28000
    r"|FATAL: permission denied for database"  # 42501
    r"|FATAL: role \".*\" is not permitted to log in"  # 28000
    r"|FATAL: database \".*\" is not currently accepting connections"  # 55000
    r"|no password supplied"  # libpq: the server asks for one and none is set
    r"|^(?:connection is bad: )?invalid "  # libpq: an option's value it cannot use
)


def connect_error(err: psycopg.Error, url: str) -> ConfigError | Unavailable:
    """The typed error of a failed connection: ConfigError (exit 2: a restart will not
    help) when the server or libpq refuses the settings — a database or role that does
    not exist, a password refused, an option's value libpq cannot use — with the
    refusal alone on one line; Unavailable (exit 1) when it cannot be reached."""
    what, reason = redacted(url), scrubbed(str(err), url) or type(err).__name__
    state = err.sqlstate or ""
    if state.startswith(_REFUSALS) or _REFUSED_AT_CONNECT.search(reason):
        return ConfigError(
            f"the database {what} refuses the connection: {_refusal(reason)}; "
            "a restart will not help: fix the database URL or the server"
        )
    return Unavailable(f"cannot open the database {what}: {reason}", reason="unavailable")


def _refusal(reason: str) -> str:
    """The refusal itself, without libpq's preamble: the server's FATAL line, or
    libpq's own complaint."""
    return _PREAMBLE.sub("", reason.rpartition("FATAL: ")[2], count=1)


# libpq's and psycopg's words before the refusal itself.
_PREAMBLE = re.compile(
    r"^(?:connection (?:is bad|failed): )?(?:connection to server .*? failed: )?"
)
