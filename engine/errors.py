"""The engine's exception tree. Each error carries its HTTP status, its CLI exit code,
a stable machine-readable `code` and a message a person can act on. The HTTP layer
and the CLI map these in one place each; a user never sees a traceback."""

from __future__ import annotations

from typing import Any


class EngineError(Exception):
    status = 500
    exit_code = 1
    code = "internal_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return body


class BadRequest(EngineError):
    status, exit_code, code = 400, 2, "bad_request"


class Unauthorized(EngineError):
    status, exit_code, code = 401, 1, "unauthorized"


class Forbidden(EngineError):
    status, exit_code, code = 403, 1, "forbidden"


class NotFound(EngineError):
    status, exit_code, code = 404, 1, "not_found"


class Conflict(EngineError):
    """The entity is not in a state that allows the request (e.g. approving twice)."""

    status, exit_code, code = 409, 1, "conflict"


class RequestTimeout(EngineError):
    """The request body did not arrive in time; the connection is closed after the answer."""

    status, exit_code, code = 408, 1, "request_timeout"


class PayloadTooLarge(EngineError):
    status, exit_code, code = 413, 1, "payload_too_large"


class Unprocessable(EngineError):
    """The request is well-formed but refused: unknown type, schema violation..."""

    status, exit_code, code = 422, 1, "unprocessable"

    def __init__(self, message: str, errors: list[str] | None = None, **details: Any) -> None:
        super().__init__(message, **details)
        self.errors = errors or [message]

    def as_dict(self) -> dict[str, Any]:
        body = super().as_dict()
        body["errors"] = self.errors
        return body


class Unavailable(EngineError):
    """Not now: the runtime is not reachable (CLI talking to serve), or its database
    cannot take the request at the moment. A retry may succeed (exit 1); over HTTP a
    503 whose `details.reason` says why."""

    status, exit_code, code = 503, 1, "unavailable"
    reason: str | None = None  # the default `details.reason` of a subclass

    def __init__(self, message: str, **details: Any) -> None:
        if self.reason is not None:
            details.setdefault("reason", self.reason)
        super().__init__(message, **details)


class Busy(Unavailable):
    """A lock wait or a statement ran out of time: another process (or another thread
    of this one) holds the database's writer lock, perhaps frozen."""

    reason = "database_busy"


class StoreUnwritable(Unavailable):
    """The database refuses writes: `reason` is `read_only` (the file or the server
    is read-only: a configuration to fix, exit 2), `disk_full` or `io_error`; or this
    engine refuses to write it, its schema not this engine's: `migrations_ahead`,
    `migrations_behind` (exit 2 too)."""

    FOR_A_PERSON = frozenset({"read_only", "migrations_ahead", "migrations_behind"})

    def __init__(self, message: str, reason: str, **details: Any) -> None:
        super().__init__(message, reason=reason, **details)
        if reason in self.FOR_A_PERSON:
            self.exit_code = 2


class ConfigError(EngineError):
    """A configuration the engine cannot use and a restart will not fix (exit 2): a
    database that is not the engine's, a malformed database URL, an unreadable file,
    a bad setting. The message names the file or the setting, never a secret."""

    status, exit_code, code = 500, 2, "configuration_error"


class SchemaTooNew(ConfigError):
    """The database was migrated by a newer engine: its schema version is one this
    engine does not know, so it refuses to read or write it."""

    code = "schema_too_new"
