"""Deterministic ids: two processes deciding the same thing make the same id, so their
writes converge on one row."""

from __future__ import annotations

import hashlib


def stable_id(prefix: str, key: str) -> str:
    """`<prefix>-<16 hex digits of the key's SHA-256>`."""
    return f"{prefix}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
