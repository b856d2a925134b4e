"""What the HTTP runtime is configured with. Secrets come from the environment only
(read once at startup), never from a file or a command-line flag."""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from engine.core.decisions import operator_name_problem
from engine.errors import EngineError

MIB = 1024 * 1024

EVENT_SECRET_ENV = "ENGINE_EVENT_SECRET"
OPERATOR_TOKEN_ENV = "ENGINE_OPERATOR_TOKEN"
# The controllers' own tokens (docs/work.md#over-http), `name:token` pairs
# like the operators': a controller proves `controller:<name>` with one, and may only
# read, continue, block and complete work.
CONTROLLER_TOKEN_ENV = "ENGINE_CONTROLLER_TOKEN"
GITHUB_SECRET_ENV = "ENGINE_GITHUB_WEBHOOK_SECRET"
GITHUB_BODY_LIMIT = 25 * MIB  # GitHub caps a delivery at 25 MB; read no more than that


class SettingsError(EngineError):
    """The runtime's own configuration is malformed (e.g. ENGINE_OPERATOR_TOKEN)."""

    status, exit_code, code = 500, 2, "bad_settings"


@dataclass(frozen=True)
class OperatorTokens:
    """`name:token` pairs. A name may hold several tokens (rotation); a token names
    exactly one operator."""

    pairs: tuple[tuple[str, bytes], ...] = ()  # (name, sha256 of the token)

    def __bool__(self) -> bool:
        return bool(self.pairs)

    def identify(self, token: str) -> str | None:
        """The operator a token belongs to. Every pair is compared (digests of equal
        length, in constant time), so the timing does not tell which, if any, matched."""
        given = _digest(token)
        found: str | None = None
        for name, secret in self.pairs:
            if hmac.compare_digest(given, secret):
                found = name
        return found


def _digest(token: str) -> bytes:
    """Total and one-to-one over every string: aiohttp (and Python, for the environment)
    decodes bytes that are not UTF-8 as surrogates, so such a token is just one more
    token, matching nothing it should not."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def parse_tokens(text: str, origin: str) -> OperatorTokens:
    """`alice:s3cret,bob:t0ken` -> OperatorTokens; SettingsError names a bad entry by
    position (never echoing a secret)."""
    pairs: list[tuple[str, bytes]] = []
    seen: dict[bytes, str] = {}
    for index, entry in enumerate(e.strip() for e in text.split(",") if e.strip()):
        name, sep, token = entry.partition(":")
        where = f"{origin}: entry {index + 1}"
        if not sep or not token or any(c.isspace() for c in token):
            raise SettingsError(f"{where} must be name:token (a token without spaces)")
        problem = operator_name_problem(name)
        if problem is not None:
            raise SettingsError(f"{where}: {problem}")
        secret = _digest(token)
        if seen.get(secret, name) != name:
            raise SettingsError(
                f"{where}: the same token is given to '{seen[secret]}' and '{name}'"
            )
        seen[secret] = name
        pairs.append((name, secret))
    return OperatorTokens(tuple(pairs))


def parse_secrets(text: str) -> tuple[bytes, ...]:
    """`new,old` -> both secrets (rotation without downtime); blank entries and the
    spaces around an entry are ignored, so a secret holds no comma and no edge spaces."""
    return tuple(entry.strip().encode() for entry in text.split(",") if entry.strip())


def default_worker_id() -> str:
    return f"serve-{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class Settings:
    """`event_secret` None: POST /events refuses everything. No `github_secrets`:
    POST /github refuses everything. No operator tokens: the operator routes refuse
    everything (fail closed)."""

    event_secret: bytes | None = None
    github_secrets: tuple[bytes, ...] = field(default=(), repr=False)  # any one verifies
    operators: OperatorTokens = field(default_factory=OperatorTokens)
    controllers: OperatorTokens = field(default_factory=OperatorTokens)
    body_limit: int = MIB  # bytes; a route may raise it (GitHub intake: 25 MB)
    github_body_limit: int = GITHUB_BODY_LIMIT
    staleness_seconds: int = 300  # signed timestamps this far off either way are refused
    pump_seconds: float = 1.0  # the runtime loop's idle interval
    notify_seconds: float = 1.0  # how often the notifier looks for notifications due
    worker: bool = True  # run the embedded worker
    worker_id: str = field(default_factory=default_worker_id)
    poll_seconds: float = 1.0
    lease_seconds: float = 60.0
    shutdown_grace: float = 10.0  # how long cleanup waits for the worker to stop
    # The HTTP edge (docs/api.md#connections-and-timeouts).
    max_connections: int = 512  # open connections served at once; more are refused
    idle_seconds: float = 15.0  # a connection idle (or its headers unfinished) this long closes
    body_seconds: float = 30.0  # a request body must have arrived this long after its headers
    adapters: Any = None  # engine.adapters.Adapters for the embedded worker (None: defaults)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read the secrets from the environment; SettingsError on a malformed token list."""
        env = os.environ if env is None else env
        secret = env.get(EVENT_SECRET_ENV, "")
        tokens = parse_tokens(env.get(OPERATOR_TOKEN_ENV, ""), OPERATOR_TOKEN_ENV)
        settings = cls(
            event_secret=secret.encode() if secret else None,
            github_secrets=parse_secrets(env.get(GITHUB_SECRET_ENV, "")),
            operators=tokens,
            controllers=parse_tokens(env.get(CONTROLLER_TOKEN_ENV, ""), CONTROLLER_TOKEN_ENV),
        )
        return replace(settings, **overrides)
