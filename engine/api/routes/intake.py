"""Admission over HTTP: `POST /events` (signed envelopes from another system, actor
`bridge` whatever the envelope's `source` says) and `POST /inject` (loopback peers
only, actor `inject`, or the operator whose token the request carries). Both take one
envelope or a list; a list is admitted in one transaction (the intake's group commit,
docs/architecture.md#intake-group-commit). The actor comes from how the request was
authenticated: an envelope never names its own actor, so it can never pose as the
scheduler, a chain, GitHub or an operator."""

from __future__ import annotations

from aiohttp import web

from engine.api import query, signing
from engine.api.auth import OPERATOR_HEADER, inject_actor, require_loopback
from engine.api.bodies import envelopes, parse_json, read_body
from engine.api.context import admit, reply, service, settings
from engine.core.decisions import Actor

routes = web.RouteTableDef()


async def _admit(request: web.Request, body: bytes, actor: str) -> web.Response:
    found, batch = envelopes(parse_json(body))
    results = await admit(request, found, actor, len(body))
    status = 202 if any(r.admitted for r in results) else 200
    return reply([r.as_dict() for r in results] if batch else results[0].as_dict(), status)


@routes.post("/events")
@query.accepts()
async def post_events(request: web.Request, _: query.Args) -> web.Response:
    """Signed envelopes from another system; the journal names them `bridge`."""
    config = settings(request)
    body = await read_body(request, config.body_limit)
    signing.verify(
        config.event_secret,
        request.headers.get(signing.TIMESTAMP_HEADER),
        request.headers.get(signing.SIGNATURE_HEADER),
        body,
        service(request).rt.clock().timestamp(),  # the one clock: ENGINE_NOW's when set
        config.staleness_seconds,
    )
    return await _admit(request, body, Actor.BRIDGE.value)


@routes.post("/inject")
@query.accepts()
async def post_inject(request: web.Request, _: query.Args) -> web.Response:
    """Unsigned envelopes from this host (the `engine inject` command)."""
    require_loopback(request.remote)
    headers = request.headers
    actor = inject_actor(
        settings(request).operators, headers.get("Authorization"), headers.get(OPERATOR_HEADER)
    )
    body = await read_body(request, settings(request).body_limit)
    return await _admit(request, body, actor)
