"""Secrets out of what is shown: a sink's URL is shown with its secret parts masked
(a password, a token in the path or the query), and any text that may quote the URL
(an error, a library's log line) has each secret part replaced. Pure functions."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable

MASK = "****"
_PARTS = re.compile(r"[^/:@?&=#,;+\s]+")


def hidden_parts(url: str, shown: str) -> frozenset[str]:
    """The parts of `url` (between its separators) that its shown form `shown` does
    not contain, and its password whatever else shows the same text: what to mask
    wherever the URL may be quoted (each also as it reads percent-decoded)."""
    found = {part for part in _PARTS.findall(url) if part not in shown}
    try:
        password = urllib.parse.urlsplit(url).password
    except ValueError:  # not URL-shaped enough to have one
        password = None
    if password:
        found.add(password)
    return frozenset(found | {urllib.parse.unquote(p) for p in found})


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with each secret (the longest first) replaced by MASK."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def web_url(url: str) -> str:
    """An http(s) URL as shown: its scheme, host and port only (its path, query and
    user may hold a token)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    rest = "/" + MASK if parts.path.strip("/") or parts.query else ""
    return f"{parts.scheme}://{host}{port}{rest}"
