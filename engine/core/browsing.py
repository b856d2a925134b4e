"""Browser probes, decided purely (docs/rules.md#browser-probes).

A browser probe opens one page in headless Chromium (engine.adapters.browser) and
watches the text of one element. Everything the runner must decide without a browser
lives here: which URLs its allowlist admits (`allows`), whether what it saw means
"authentication required" (`login_required`), and the projection of the element's text
that is fingerprinted (`project`). Nothing here opens a page or reads the clock."""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from urllib.parse import SplitResult, urlsplit

MAX_CHARS = 20_000  # characters of the element's text kept, by default
MAX_CHARS_MAX = 200_000  # the most a probe may declare
BLOCKED_MAX = 10  # refused request URLs an observation names
DIAGNOSTIC_MAX = 500  # characters of a failure's diagnostic

# The default port of each scheme a probe may open; ws and wss are matched as their
# HTTP counterparts (a page's WebSocket is held to the same allowlist).
PORTS = {"http": 80, "https": 443}
_SOCKETS = {"ws": "http", "wss": "https"}
_HOST = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")
_IPV6 = re.compile(r"[0-9a-f:.]+")
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


class TargetError(ValueError):
    """An allowlist entry or a probe URL the engine refuses; `str()` says why."""


@dataclass(frozen=True, slots=True)
class Target:
    """A normalised place on the web: lower-case scheme and host, the port (the
    scheme's default when none is written) and the path, percent-escapes of unreserved
    characters decoded and dot segments resolved. As an allowlist entry, `path` is a
    prefix without its trailing slash (`""` admits the whole host)."""

    scheme: str
    host: str
    port: int
    path: str

    def admits(self, other: Target) -> bool:
        """Whether `other` is under this prefix: same scheme, host and port, and a path
        equal to the prefix or below it by whole segments (`/incidents` admits
        `/incidents` and `/incidents/12`, never `/incidentsX`)."""
        same = (self.scheme, self.host, self.port) == (other.scheme, other.host, other.port)
        return same and (other.path == self.path or other.path.startswith(self.path + "/"))

    def __str__(self) -> str:
        port = "" if PORTS[self.scheme] == self.port else f":{self.port}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}{port}{self.path}"


def parse_url(url: str) -> Target:
    """The place `url` names, normalised; TargetError when it is not an absolute
    http(s) URL with a host, or carries a user name or password (`user@host`), a
    backslash, whitespace or a control character."""
    if any(c.isspace() or ord(c) < 32 or c == "\\" for c in url):
        raise TargetError(f"'{_shown(url)}' holds whitespace, a control character or '\\'")
    try:
        parts = urlsplit(url)
    except ValueError as err:  # an unbalanced IPv6 bracket
        raise TargetError(f"'{_shown(url)}' is not a URL: {err}") from None
    scheme = _SOCKETS.get(parts.scheme.lower(), parts.scheme.lower())
    if scheme not in PORTS:
        raise TargetError(f"'{_shown(url)}' is not an http or https URL")
    if "@" in parts.netloc:
        raise TargetError(f"'{_shown(url)}' carries a user name or password")
    return Target(scheme, _host(parts, url), _port(parts, scheme, url), _path(parts.path))


def parse_target(entry: str) -> Target:
    """An allowlist entry: scheme, host, optional port and optional path prefix, no
    query or fragment; TargetError when it is anything else."""
    target = parse_url(entry)
    parts = urlsplit(entry)  # parse_url read it
    if parts.query or parts.fragment or entry.endswith(("?", "#")):
        raise TargetError(f"allow entry '{_shown(entry)}' has a query or fragment")
    return Target(target.scheme, target.host, target.port, target.path.rstrip("/"))


def allows(allow: Sequence[Target], url: str) -> bool:
    """Whether some entry of `allow` admits `url`; a URL `parse_url` refuses never is."""
    try:
        place = parse_url(url)
    except TargetError:
        return False
    return any(entry.admits(place) for entry in allow)


def _host(parts: SplitResult, url: str) -> str:
    host = parts.hostname or ""
    bracketed = parts.netloc.split(":")[0].startswith("[")
    valid = _IPV6.fullmatch(host) if bracketed else _HOST.fullmatch(host)
    if not host or valid is None or (bracketed and ":" not in host):
        raise TargetError(f"'{_shown(url)}' has no valid host (write an IDN in its xn-- form)")
    return host


def _port(parts: SplitResult, scheme: str, url: str) -> int:
    try:
        port = parts.port
    except ValueError:
        raise TargetError(f"'{_shown(url)}' has an invalid port") from None
    if parts.netloc.endswith(":") or port == 0:
        raise TargetError(f"'{_shown(url)}' has an invalid port")
    return PORTS[scheme] if port is None else port


def _path(path: str) -> str:
    """`path` with unreserved escapes decoded, other escapes upper-cased and the dot
    segments resolved (RFC 3986, 6.2.2); `/` when empty."""

    def escape(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else "%" + match.group(1).upper()

    out: list[str] = []
    segments = _ESCAPE.sub(escape, path).split("/")[1:]
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "..":
            if out:
                out.pop()
            if last:
                out.append("")
        elif segment == ".":
            if last:
                out.append("")
        else:
            out.append(segment)
    return "/" + "/".join(out)


def _shown(text: str) -> str:
    return bounded(text.encode("unicode_escape").decode("ascii"), 200)


def bounded(text: str, limit: int = DIAGNOSTIC_MAX) -> str:
    """`text` cut to `limit` characters (an ellipsis marks the cut)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---- what a probe declares ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoginMarkers:
    """What means "authentication required": a final URL any of `urls` (regular
    expressions) finds, or a text containing any of `texts` (whitespace and case aside)."""

    urls: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class BrowserSpec:
    """One browser probe, as registry/probes.yaml declares it (built by
    engine.core.registry.Probe.browser_spec): the page to open, the allowlist every
    request of it is held to, the element whose text counts and how it is reduced."""

    probe: str
    url: str
    allow: tuple[Target, ...]
    selector: str = "body"
    include_terms: tuple[str, ...] = ()
    ignore_patterns: tuple[str, ...] = ()
    max_chars: int = MAX_CHARS
    timeout_seconds: int = 30
    login: LoginMarkers = LoginMarkers()


def login_required(markers: LoginMarkers, final_url: str, text: str) -> bool:
    """Whether the page is asking to sign in: a login URL pattern matches the URL the
    page ended at (searched, not anchored), or a login text occurs in `text`."""
    if any(re.search(pattern, final_url) for pattern in markers.urls):
        return True
    seen = _spaced(text).casefold()
    wanted = [_spaced(marker).casefold() for marker in markers.texts]
    return any(marker and marker in seen for marker in wanted)


# ---- the projection and its fingerprint ------------------------------------------------


@dataclass(frozen=True, slots=True)
class Projection:
    """The part of the element's text that counts, its SHA-256 (hex), and whether it was
    cut at the probe's `max_chars`."""

    text: str
    fingerprint: str
    truncated: bool = False


def project(text: str, spec: BrowserSpec) -> Projection:
    """The projection of an element's text: each line's whitespace collapsed, every
    `ignore_patterns` match removed from it (and its whitespace collapsed again), blank
    lines dropped, only the lines containing an `include_terms` term kept when terms are
    given (whitespace and case aside), the lines joined by newlines and cut to `max_chars`."""
    ignores = [re.compile(pattern) for pattern in spec.ignore_patterns]
    terms = [t for t in (_spaced(term).casefold() for term in spec.include_terms) if t]
    kept: list[str] = []
    for raw in text.splitlines():
        line = _spaced(raw)
        for pattern in ignores:
            line = _spaced(pattern.sub("", line))
        if line and (not terms or any(term in line.casefold() for term in terms)):
            kept.append(line)
    joined = "\n".join(kept)
    cut = joined[: spec.max_chars]
    return Projection(cut, fingerprint(cut), truncated=len(cut) < len(joined))


def fingerprint(text: str) -> str:
    """The SHA-256 (hex) of `text` as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _spaced(text: str) -> str:
    return " ".join(text.split())


# ---- what one run saw -------------------------------------------------------------------


class BrowserFailure(StrEnum):
    """Why a browser probe saw no projection (each an infrastructure failure of its poll)."""

    UNAVAILABLE = "unavailable"  # no Playwright, or no Chromium where configured
    TIMEOUT = "timeout"  # the page did not load within the probe's timeout
    NAVIGATION_BLOCKED = "navigation_blocked"  # the page, or a redirect of it, is off the list
    NAVIGATION_FAILED = "navigation_failed"  # refused connection, DNS, an HTTP error status
    SELECTOR_MISSING = "selector_missing"  # the page loaded without the element
    SELECTOR_INVALID = "selector_invalid"  # the selector is not CSS Chromium can read


@dataclass(frozen=True, slots=True)
class BrowserObservation:
    """What one run of a browser probe saw at `at`: the projection of the element (None
    when the run failed, or the page asked to sign in before showing it), the URL the
    page ended at, whether it asked to sign in, the failure and its bounded diagnostic,
    and the first BLOCKED_MAX request URLs the allowlist refused."""

    probe: str
    at: datetime
    projection: Projection | None = None
    final_url: str | None = None
    login_required: bool = False
    failure: BrowserFailure | None = None
    diagnostic: str | None = None
    blocked: tuple[str, ...] = ()

    @property
    def fingerprint(self) -> str | None:
        return None if self.projection is None else self.projection.fingerprint
