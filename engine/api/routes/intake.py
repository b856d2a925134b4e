"""Admission over HTTP: `POST /events` (signed envelopes, actor = the envelope's
source) and `POST /inject` (loopback peers only, actor `inject` or the named operator).
Both take one envelope or a list; a list is admitted in one transaction."""

from __future__ import annotations

from aiohttp import web

from engine.api import signing
from engine.api.auth import inject_actor, require_loopback
from engine.api.bodies import envelopes, parse_json, read_body
from engine.api.context import call, reply, service, settings, wake
from engine.core.envelope import Envelope
from engine.errors import Unprocessable
from engine.service import Admission

OPERATOR_HEADER = "X-Engine-Operator"

routes = web.RouteTableDef()


async def _admit(
    request: web.Request, found: list[Envelope], batch: bool, actor: str
) -> web.Response:
    results: list[Admission] = await call(service(request).admit_many, found, actor)
    if any(r.admitted for r in results):
        wake(request)
    status = 202 if any(r.admitted for r in results) else 200
    return reply([r.as_dict() for r in results] if batch else results[0].as_dict(), status)


def _source(found: list[Envelope]) -> str:
    sources = sorted({e.source for e in found})
    if len(sources) > 1:
        raise Unprocessable(
            f"a signed batch carries one source, not {', '.join(sources)}",
            reason="mixed_sources",
        )
    return sources[0]


@routes.post("/events")
async def post_events(request: web.Request) -> web.Response:
    """Signed envelopes from another system; the journal names the envelope's source."""
    config = settings(request)
    body = await read_body(request, config.body_limit)
    signing.verify(
        config.event_secret,
        request.headers.get(signing.TIMESTAMP_HEADER),
        request.headers.get(signing.SIGNATURE_HEADER),
        body,
        config.wall_clock(),
        config.staleness_seconds,
    )
    found, batch = envelopes(parse_json(body))
    return await _admit(request, found, batch, _source(found))


@routes.post("/inject")
async def post_inject(request: web.Request) -> web.Response:
    """Unsigned envelopes from this host (the `engine inject` command)."""
    require_loopback(request.remote)
    actor = inject_actor(request.headers.get(OPERATOR_HEADER))
    body = await read_body(request, settings(request).body_limit)
    found, batch = envelopes(parse_json(body))
    return await _admit(request, found, batch, actor)
