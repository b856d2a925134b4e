"""Signed envelopes for POST /events: `X-Engine-Signature: sha256=<hex>` is
HMAC-SHA256(secret, f"{timestamp}." + raw body) and `X-Engine-Timestamp` is unix
seconds within a staleness window either way. Pure: the caller passes `now`."""

from __future__ import annotations

import hashlib
import hmac

from engine.errors import Unauthorized

TIMESTAMP_HEADER = "X-Engine-Timestamp"
SIGNATURE_HEADER = "X-Engine-Signature"
PREFIX = "sha256="


def sign(secret: bytes, timestamp: int | str, body: bytes) -> str:
    """The header value a sender puts in X-Engine-Signature."""
    mac = hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256)
    return PREFIX + mac.hexdigest()


def _refuse(message: str, reason: str) -> Unauthorized:
    return Unauthorized(message, reason=reason)


def verify(
    secret: bytes | None,
    timestamp: str | None,
    signature: str | None,
    body: bytes,
    now: float,
    window: int,
) -> None:
    """Raise Unauthorized unless the signature is good and the timestamp fresh."""
    if secret is None:
        raise _refuse(
            "signed intake is closed: the runtime has no ENGINE_EVENT_SECRET", "no_secret"
        )
    if not timestamp or not signature:
        raise _refuse(
            f"{TIMESTAMP_HEADER} and {SIGNATURE_HEADER} are required", "missing_signature"
        )
    if not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > 12:
        raise _refuse(f"{TIMESTAMP_HEADER} must be unix seconds", "bad_timestamp")
    if abs(now - int(timestamp)) > window:
        raise _refuse(
            f"{TIMESTAMP_HEADER} is more than {window}s away from the runtime's clock",
            "stale_timestamp",
        )
    expected = sign(secret, timestamp, body).encode()
    if not hmac.compare_digest(expected, signature.strip().lower().encode("ascii", "replace")):
        raise _refuse("the signature does not match the body", "bad_signature")
