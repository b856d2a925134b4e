"""Who is calling: operator bearer tokens (the token names the operator, compared in
constant time), loopback peers for /inject, and operator names."""

from __future__ import annotations

import ipaddress

from engine.api.settings import OPERATOR_NAME, OperatorTokens
from engine.core.decisions import operator_actor
from engine.errors import BadRequest, Forbidden, Unauthorized

INJECT_ACTOR = "inject"


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def operator_from(tokens: OperatorTokens, authorization: str | None) -> str:
    """The journal actor (`operator:<name>`) the Authorization header proves."""
    if not tokens:
        raise Unauthorized(
            "operator routes are closed: the runtime has no ENGINE_OPERATOR_TOKEN",
            reason="no_token_configured",
        )
    token = bearer_token(authorization)
    if token is None:
        raise Unauthorized(
            "an operator token is required (Authorization: Bearer <token>)",
            reason="missing_token",
        )
    name = tokens.identify(token)
    if name is None:
        raise Unauthorized("the operator token is not recognised", reason="bad_token")
    return operator_actor(name)


def is_loopback(remote: str | None) -> bool:
    """127.0.0.0/8, ::1, or an IPv4-mapped loopback address."""
    if not remote:
        return False
    try:
        address = ipaddress.ip_address(remote.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def require_loopback(remote: str | None) -> None:
    if not is_loopback(remote):
        raise Forbidden(
            f"/inject answers loopback peers only, not {remote or 'an unknown peer'}",
            reason="not_loopback",
        )


def operator_name(name: str) -> str:
    if not OPERATOR_NAME.match(name):
        raise BadRequest(
            f"operator name '{name[:80]}' must match {OPERATOR_NAME.pattern}",
            reason="bad_operator_name",
        )
    return name


def inject_actor(header: str | None) -> str:
    """`operator:<name>` when X-Engine-Operator names one, else `inject`."""
    return operator_actor(operator_name(header)) if header else INJECT_ACTOR
