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
    """The runtime is not reachable (CLI talking to serve)."""

    status, exit_code, code = 503, 1, "unavailable"
