"""The bounds on every wait of the store, so that one frozen or vanished process cannot
stall the others (docs/deploy.md#when-a-process-freezes-or-a-host-vanishes).

The defaults are documented constants; an operator may change the three time bounds
through the environment (read once, by `engine.bootstrap`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from engine.errors import ConfigError

# How long a write waits for the writer lock (SQLite's busy timeout, PostgreSQL's
# lock_timeout, and the wait for another thread of the same process) before it is
# answered `Busy`: 503 `database_busy` over HTTP.
LOCK_TIMEOUT_S = 5.0
# PostgreSQL: the server ends a session that stays idle inside a transaction this long
# (idle_in_transaction_session_timeout), so a frozen holder's lock is freed.
IDLE_IN_TRANSACTION_S = 30.0
# PostgreSQL: the server cancels one statement that runs this long (statement_timeout).
STATEMENT_TIMEOUT_S = 60.0
# PostgreSQL: TCP keepalives on both ends of the connection, so a host that vanishes
# without closing it is noticed in about idle + interval * count seconds (a minute)
# instead of the operating system's default of about two hours.
KEEPALIVES_IDLE_S = 30
KEEPALIVES_INTERVAL_S = 10
KEEPALIVES_COUNT = 3

LOCK_TIMEOUT_ENV = "ENGINE_DB_LOCK_TIMEOUT"
IDLE_TIMEOUT_ENV = "ENGINE_DB_IDLE_TIMEOUT"
STATEMENT_TIMEOUT_ENV = "ENGINE_DB_STATEMENT_TIMEOUT"


@dataclass(frozen=True)
class Limits:
    """The store's time bounds, in seconds."""

    lock_timeout: float = LOCK_TIMEOUT_S
    idle_in_transaction: float = IDLE_IN_TRANSACTION_S
    statement_timeout: float = STATEMENT_TIMEOUT_S

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Limits:
        """The defaults, with any of ENGINE_DB_LOCK_TIMEOUT, ENGINE_DB_IDLE_TIMEOUT and
        ENGINE_DB_STATEMENT_TIMEOUT (seconds) that is set; ConfigError for a value that
        is not a positive number of seconds."""
        return cls(
            lock_timeout=_seconds(environ, LOCK_TIMEOUT_ENV, LOCK_TIMEOUT_S),
            idle_in_transaction=_seconds(environ, IDLE_TIMEOUT_ENV, IDLE_IN_TRANSACTION_S),
            statement_timeout=_seconds(environ, STATEMENT_TIMEOUT_ENV, STATEMENT_TIMEOUT_S),
        )


def _seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 < value <= 86_400:
        raise ConfigError(
            f"{name} must be a number of seconds (above 0, at most 86400), not {text!r}"
        )
    return value


def milliseconds(seconds: float) -> int:
    """A bound as the whole milliseconds SQLite and PostgreSQL take (at least 1)."""
    return max(1, round(seconds * 1000))
