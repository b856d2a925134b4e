"""Request bodies: read at most a limit (413 beyond it), parse JSON (400), and validate
envelopes (422 with every reason) or small operator bodies (400)."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from engine.core.envelope import Envelope
from engine.errors import BadRequest, PayloadTooLarge, Unprocessable

MAX_BATCH = 500
M = TypeVar("M", bound=BaseModel)


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"the body is larger than this route's limit of {limit} bytes",
        reason="body_too_large",
        limit=limit,
    )


async def read_body(request: web.Request, limit: int) -> bytes:
    """The raw body, refusing (413) a declared or actual size over `limit` without
    reading more than `limit + 1` bytes."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = await request.content.read(limit + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise _too_large(limit)
    return b"".join(chunks)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(body: bytes, empty: Any = None) -> Any:
    """Parse a JSON body (400 when it is not JSON); `empty` answers an empty body when
    given, else an empty body is refused too."""
    if not body.strip():
        if empty is not None:
            return empty
        raise BadRequest("the body is empty; expected JSON", reason="invalid_json")
    try:
        return json.loads(body, parse_constant=_no_constants)
    except json.JSONDecodeError as err:
        raise BadRequest(
            f"the body is not valid JSON: {err.msg} (line {err.lineno}, column {err.colno})",
            reason="invalid_json",
        ) from None
    except (UnicodeDecodeError, ValueError) as err:
        raise BadRequest(f"the body is not valid JSON: {err}", reason="invalid_json") from None


def reasons(err: ValidationError, prefix: str = "") -> list[str]:
    """One readable line per pydantic error: `payload.repo: Field required`."""
    lines = []
    for e in err.errors():
        where = prefix + ".".join(str(p) for p in e["loc"])
        message = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            message = "unknown field"
        lines.append(f"{where.rstrip('.') or 'body'}: {message}")
    return lines


def envelopes(data: Any) -> tuple[list[Envelope], bool]:
    """One envelope (an object) or a batch (a list of them); every problem in one 422."""
    batch = isinstance(data, list)
    items = data if batch else [data]
    if not isinstance(data, (dict, list)) or not items:
        raise Unprocessable(
            "the body must be an envelope object or a non-empty list of them",
            reason="invalid_envelope",
        )
    if len(items) > MAX_BATCH:
        raise Unprocessable(
            f"a batch holds at most {MAX_BATCH} envelopes, not {len(items)}",
            reason="batch_too_large",
        )
    found: list[Envelope] = []
    errors: list[str] = []
    for index, item in enumerate(items):
        prefix = f"[{index}]." if batch else ""
        try:
            found.append(Envelope.model_validate(item))
        except ValidationError as err:
            errors.extend(reasons(err, prefix))
    if errors:
        raise Unprocessable(
            "the envelope is not a valid factory.event/v1", errors, reason="invalid_envelope"
        )
    return found, batch


def model_body(model: type[M], data: Any) -> M:
    """A small operator body validated into `model`; 400 with every reason."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        lines = reasons(err)
        raise BadRequest("; ".join(lines), reason="invalid_body", errors=lines) from None
