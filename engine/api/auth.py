"""Who is calling: operator bearer tokens (the token names the operator, compared in
constant time), loopback peers for /inject, and operator names. The journal actor is
decided here from how a request was authenticated, never taken from its body."""

from __future__ import annotations

import ipaddress

from engine.api.settings import OperatorTokens
from engine.core.decisions import (
    Actor,
    controller_actor,
    operator_actor,
    operator_name_problem,
)
from engine.errors import BadRequest, Forbidden, Unauthorized

OPERATOR_HEADER = "X-Engine-Operator"


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


def work_principal(
    operators: OperatorTokens, controllers: OperatorTokens, authorization: str | None
) -> str:
    """Who may act on work as its controller: `controller:<name>` for a controller's
    token, `operator:<name>` for an operator's (a person taking the work over)."""
    token = bearer_token(authorization)
    name = controllers.identify(token) if token is not None and controllers else None
    if name is not None:
        return controller_actor(name)
    if not operators and not controllers:
        raise Unauthorized(
            "work routes are closed: no ENGINE_OPERATOR_TOKEN or ENGINE_CONTROLLER_TOKEN",
            reason="no_token_configured",
        )
    if token is None:
        raise Unauthorized(
            "a controller's or an operator's token is required (Authorization: Bearer <token>)",
            reason="missing_token",
        )
    if not operators:
        raise Unauthorized("the token is not recognised", reason="bad_token")
    return operator_from(operators, authorization)


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
    """`name` when an operator may have it; BadRequest otherwise (also for the reserved
    actor names: nobody is `operator:schedule`)."""
    problem = operator_name_problem(name)
    if problem is not None:
        raise BadRequest(problem, reason="bad_operator_name")
    return name


def inject_actor(tokens: OperatorTokens, authorization: str | None, header: str | None) -> str:
    """The actor of an unsigned envelope from this host (/inject, /github/replay):
    `inject`, or the operator a bearer token proves. Naming an operator takes the
    token: X-Engine-Operator alone is refused (401), and one that names someone other
    than the token's operator is refused (403); any loopback process can send a header."""
    if header is not None:
        operator_name(header)
    if authorization is None and header is None:
        return Actor.INJECT.value
    if authorization is None:
        raise Unauthorized(
            f"{OPERATOR_HEADER} names an operator, which takes that operator's token "
            "(Authorization: Bearer <token>)",
            reason="missing_token",
        )
    actor = operator_from(tokens, authorization)
    if header is not None and actor != operator_actor(header):
        raise Forbidden(
            f"{OPERATOR_HEADER} names '{header}', but the token is {actor}'s",
            reason="operator_mismatch",
        )
    return actor
