"""The generic webhook's signature, as the Standard Webhooks specification has it
(docs/notifications.md#verifying-the-webhook): the headers `webhook-id`,
`webhook-timestamp` (whole seconds since the epoch) and `webhook-signature`
(`v1,` and the base64 HMAC-SHA256 of `id.timestamp.body` under the secret). The
secret is written `whsec_` and its bytes in base64, as receivers' libraries take it.
Pure functions."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

from engine.core.records import NotificationRecord

PREFIX = "whsec_"
MIN_SECRET_BYTES = 16  # below this an HMAC key is guessable; the specification asks 24 to 64


class BadSecret(ValueError):
    """The text is not a `whsec_` secret; the message says why (never the secret)."""


def secret_key(text: str) -> bytes:
    """The key bytes of a `whsec_<base64>` secret; BadSecret when it is not one."""
    if not text.startswith(PREFIX):
        raise BadSecret(f"must start with '{PREFIX}' (then the key in base64)")
    body = text[len(PREFIX) :]
    try:
        key = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise BadSecret(f"is not base64 after '{PREFIX}'") from None
    if len(key) < MIN_SECRET_BYTES:
        raise BadSecret(f"holds {len(key)} bytes; a key is at least {MIN_SECRET_BYTES}")
    return key


def sign(key: bytes, message_id: str, timestamp: int, body: bytes) -> str:
    """`v1,<base64 HMAC-SHA256 of "id.timestamp.body">`."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def headers(key: bytes | None, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The Standard Webhooks headers of one request (no signature without a key)."""
    found = {"webhook-id": message_id, "webhook-timestamp": str(timestamp)}
    if key is not None:
        found["webhook-signature"] = sign(key, message_id, timestamp, body)
    return found


def message_id(n: NotificationRecord) -> str:
    """The same for every attempt at one notification, so a receiver drops a second
    delivery of it: its seq and a digest of when and about what it was written (a
    database started again reuses seqs, never both)."""
    digest = hashlib.sha256(f"{n.at}|{n.dedup_key}|{n.state}".encode()).hexdigest()[:12]
    return f"ntf_{n.seq}_{digest}"
