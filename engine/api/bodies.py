"""Request bodies: read at most a limit (413 beyond it) within a deadline (408 past
it), parse JSON (400; 422 when nested too deep), and validate envelopes (422 with every
reason) or small operator bodies (400)."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from typing import Any, TypeVar

import msgspec
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from pydantic import BaseModel, ValidationError

from engine.api.context import settings
from engine.core.envelope import Envelope
from engine.core.nesting import MAX_BODY_DEPTH, nests_deeper
from engine.errors import BadRequest, PayloadTooLarge, RequestTimeout, Unprocessable

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
    reading more than `limit + 1` bytes, and (408) a body still arriving when the
    settings' `body_seconds` have passed; a body the HTTP parser cannot frame (a bad
    chunk) is a 400."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise _too_large(limit)
    seconds = settings(request).body_seconds
    try:
        async with asyncio.timeout(seconds):
            return await _read(request, limit)
    except TimeoutError:
        raise RequestTimeout(
            f"the body did not arrive within {seconds:g}s", reason="body_timeout"
        ) from None
    except HttpProcessingError as err:
        raise BadRequest(
            f"the body is not framed as its headers say ({type(err).__name__})",
            reason="bad_framing",
        ) from None


async def _read(request: web.Request, limit: int) -> bytes:
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


def _finite(text: str) -> float:
    """A JSON number as a float; one too large for a float (1e400) is refused rather
    than read as infinity, which no JSON answer or column could hold."""
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


_FAST = msgspec.json.Decoder()


def _decode(body: bytes) -> Any:
    """msgspec's decoder (a 6 KB delivery in a third of the standard library's time);
    for any text it refuses, the standard library's, whose verdict and message stand.
    msgspec refuses whatever the standard library would (NaN, 1e400, an integer past
    Python's digit limit, a lone surrogate, a BOM), so what it accepts reads the same."""
    try:
        return _FAST.decode(body)
    except msgspec.MsgspecError:
        return json.loads(body, parse_constant=_no_constants, parse_float=_finite)


def parse_json(body: bytes, empty: Any = None) -> Any:
    """Parse a JSON body (400 when it is not JSON); `empty` answers an empty body when
    given, else an empty body is refused too."""
    if not body.strip():
        if empty is not None:
            return empty
        raise BadRequest("the body is empty; expected JSON", reason="invalid_json")
    if nests_deeper(body, MAX_BODY_DEPTH):
        raise Unprocessable(
            f"the body nests arrays and objects deeper than {MAX_BODY_DEPTH} levels",
            reason="too_deep",
        )
    try:
        data = _decode(body)
    except json.JSONDecodeError as err:
        raise BadRequest(
            f"the body is not valid JSON: {err.msg} (line {err.lineno}, column {err.colno})",
            reason="invalid_json",
        ) from None
    except (UnicodeDecodeError, ValueError) as err:  # also Python's int digit limit
        raise BadRequest(f"the body is not valid JSON: {err}", reason="invalid_json") from None
    except RecursionError:  # nests_deeper bounds nesting first; kept as a backstop
        raise Unprocessable("the body nests too deeply", reason="too_deep") from None
    if (b"\\u" in body) and not all(map(_storable, strings(data))):
        raise BadRequest(
            "the body is not valid JSON text: a \\u escape names U+0000 or half a surrogate"
            " pair, which no answer or column can hold",
            reason="invalid_json",
        )
    return data


def strings(data: Any) -> Iterator[str]:
    """Every string in parsed JSON, keys included (iteratively)."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            yield from item.keys()
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


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


_ENCODE = msgspec.json.Encoder()


def json_text(body: bytes, parsed: Any) -> str:
    """A parsed JSON body as text to keep: its bytes as they came when they are UTF-8
    without a byte-order mark (what GitHub sends; nothing encoded again), else the
    parsed value as compact JSON."""
    if not body.startswith(b"\xef\xbb\xbf"):
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return _ENCODE.encode(parsed).decode("utf-8")
