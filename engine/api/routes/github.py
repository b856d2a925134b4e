"""GitHub webhook intake over HTTP (docs/github.md). `POST /github` takes deliveries
signed with ENGINE_GITHUB_WEBHOOK_SECRET (actor `github`); `POST /github/replay` takes
saved ones from this host, unsigned (loopback peers only; actor `inject`, or the
operator whose token the request carries). Both run the same translation and give the same
answers, and keep an admitted delivery beside its event (docs/github.md#what-is-kept).
Admission only: the answer never waits for planning or work."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from engine.api import query
from engine.api.auth import OPERATOR_HEADER, inject_actor, is_loopback
from engine.api.bodies import json_text, parse_json, read_body
from engine.api.context import INLINE_BYTES, admit, call, reply, service, settings
from engine.api.settings import GITHUB_SECRET_ENV
from engine.core.decisions import Actor
from engine.errors import BadRequest, Forbidden, Unauthorized, Unprocessable
from engine.intake.github import (
    Admit,
    Ignored,
    Reason,
    Rejected,
    Translation,
    delivery_problem,
    translate,
    verify_signature,
)
from engine.service import Admission, Service
from engine.service.admission import Delivery

EVENT_HEADER = "X-GitHub-Event"
DELIVERY_HEADER = "X-GitHub-Delivery"
SIGNATURE_HEADER = "X-Hub-Signature-256"

_JSON_NAMES = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}

log = logging.getLogger("engine.api.github")
routes = web.RouteTableDef()


@routes.post("/github")
@query.accepts()
async def post_github(request: web.Request, _: query.Args) -> web.Response:
    """A delivery from GitHub: 401 unless signed over its raw bytes by a configured
    secret; nothing is parsed before the signature holds."""
    config = settings(request)
    if not config.github_secrets:
        raise Unauthorized(
            f"GitHub intake is closed: the runtime has no {GITHUB_SECRET_ENV}", reason="no_secret"
        )
    body = await read_body(request, config.github_body_limit)
    signature = request.headers.get(SIGNATURE_HEADER)
    if not signature:
        raise Unauthorized(f"{SIGNATURE_HEADER} is required", reason="missing_signature")
    if not verify_signature(config.github_secrets, body, signature):
        raise Unauthorized("the signature does not match the body", reason="bad_signature")
    return await _deliver(request, body, Actor.GITHUB)


@routes.post("/github/replay")
@query.accepts()
async def post_github_replay(request: web.Request, _: query.Args) -> web.Response:
    """A saved delivery replayed from this host (`engine github replay`), unsigned."""
    if not is_loopback(request.remote):
        peer = request.remote or "an unknown peer"
        raise Forbidden(
            f"/github/replay answers loopback peers only, not {peer}", reason="not_loopback"
        )
    headers = request.headers
    actor = inject_actor(
        settings(request).operators, headers.get("Authorization"), headers.get(OPERATOR_HEADER)
    )
    body = await read_body(request, settings(request).github_body_limit)
    return await _deliver(request, body, actor)


async def _deliver(request: web.Request, body: bytes, actor: str) -> web.Response:
    """Translate and admit: 202 admitted, 200 duplicate or ignored, 422 rejected."""
    kind = request.headers.get(EVENT_HEADER, "").strip()
    delivery = request.headers.get(DELIVERY_HEADER, "").strip()
    if refused := delivery_problem(delivery):
        raise _rejected(refused.reason, list(refused.errors))
    engine = service(request)
    if len(body) <= INLINE_BYTES:  # parsing a small body costs less than a thread hop
        payload, outcome = _translate(engine, kind, delivery, body)
    else:
        payload, outcome = await call(_translate, engine, kind, delivery, body)
    if isinstance(outcome, Ignored):
        log.info("github %s %s ignored: %s (%s)", kind, delivery, outcome.reason, outcome.rule)
        return reply({"admitted": False, "ignored": True, "reason": outcome.reason})
    if isinstance(outcome, Rejected):
        log.info("github %s %s rejected: %s", kind, delivery, "; ".join(outcome.errors))
        raise _rejected(outcome.reason, list(outcome.errors))
    kept = Delivery(delivery, kind, json_text(body, payload), str(outcome.rule))
    admission = await _admit(request, outcome, actor, len(body), kept)
    return reply(admission.as_dict(), 202 if admission.admitted else 200)


def _translate(
    engine: Service, kind: str, delivery: str, body: bytes
) -> tuple[dict[str, Any], Translation]:
    """Parse (422 unless a JSON object) and translate (in a thread for large bodies):
    the parsed body and its translation."""
    try:
        payload = parse_json(body)
    except BadRequest as err:
        raise _rejected(Reason.INVALID_JSON, [err.message]) from None
    except Unprocessable as err:  # nested too deep to parse
        raise _rejected(str(err.details["reason"]), [err.message]) from None
    if not isinstance(payload, dict):
        found = _JSON_NAMES.get(type(payload), "a JSON value")
        raise _rejected(Reason.MALFORMED_PAYLOAD, [f"the body must be a JSON object, not {found}"])
    return payload, translate(engine.rt.rules, kind, delivery, payload, engine.rt.clock())


async def _admit(
    request: web.Request, outcome: Admit, actor: str, size: int, delivery: Delivery
) -> Admission:
    """Admit the translated envelope, and keep the delivery beside it when it is new (in
    the same commit); a payload outside its type's schema is a 422."""
    try:
        (admission,) = await admit(request, [outcome.envelope], actor, size, delivery)
        return admission
    except Unprocessable as err:
        reason = str(err.details.get("reason", Reason.MALFORMED_PAYLOAD))
        raise _rejected(reason, err.errors, err.message) from None


def _rejected(reason: str, errors: list[str], message: str = "") -> Unprocessable:
    """422 `{errors: [reason, ...]}`: the reason first, then what and where."""
    text = message or f"the delivery is refused: {reason}"
    return Unprocessable(text, [str(reason), *errors], reason=str(reason))
