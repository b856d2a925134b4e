"""Signed-in operators of the web pages (docs/web.md#sign-in).

A session is opened by an operator token typed into the sign-in form; the browser
then holds only a random session id in an HttpOnly, SameSite=Strict cookie. Sessions
live in the serve process (a restart signs everyone out), are kept by the SHA-256 of
their id (a lookup's timing says nothing about a valid id), expire `ttl` seconds after
sign-in, and each carries the CSRF token its forms must send back."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

COOKIE = "engine_session"
SIGNIN_COOKIE = "engine_signin"  # the sign-in form's own CSRF token (double submit)
TTL_SECONDS = 12 * 3600
MAX_SESSIONS = 10_000  # the oldest is dropped beyond this


@dataclass
class Session:
    operator: str  # the name; the journal actor is operator:<name>
    csrf: str
    expires: float
    flash: list[str] = field(default_factory=list)

    def csrf_matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(
            given.encode("utf-8", "surrogatepass"), self.csrf.encode()
        )


def _key(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).digest()


class Sessions:
    def __init__(
        self, ttl: float = TTL_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl = ttl
        self.clock = clock
        self._open: dict[bytes, Session] = {}

    def open(self, operator: str) -> tuple[str, Session]:
        """A new session for `operator`: its id (for the cookie) and the session."""
        self._sweep()
        session_id = secrets.token_urlsafe(32)
        found = Session(operator, secrets.token_urlsafe(32), self.clock() + self.ttl)
        self._open[_key(session_id)] = found
        return session_id, found

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        key = _key(session_id)
        found = self._open.get(key)
        if found is not None and found.expires <= self.clock():
            del self._open[key]
            return None
        return found

    def close(self, session_id: str | None) -> None:
        if session_id:
            self._open.pop(_key(session_id), None)

    def _sweep(self) -> None:
        now = self.clock()
        for key in [k for k, s in self._open.items() if s.expires <= now]:
            del self._open[key]
        while len(self._open) >= MAX_SESSIONS:
            del self._open[next(iter(self._open))]
