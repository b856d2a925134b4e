"""Operator routes on proposals (bearer token required): list, show, approve, reject.
The token names the operator; the journal records `operator:<name>`."""

from __future__ import annotations

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from engine.api import query, wire
from engine.api.bodies import model_body, parse_json, read_body
from engine.api.context import call, call_read, operator, reply, service, settings, wake
from engine.core.paging import ProposalQuery
from engine.core.states import FindingStatus, ProposalState

PROPOSAL_STATES = frozenset({*(s.value for s in ProposalState), "all"})

routes = web.RouteTableDef()


class ApproveBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    note: str = Field(default="", max_length=2000)


class RejectBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    reason: str = Field(min_length=1, max_length=2000)


@routes.get("/proposals")
@query.accepts(
    query.Text("loop", "only proposals of this loop"),
    query.Choice("state", "only proposals in this state", PROPOSAL_STATES, "open"),
    query.limit_param(),
    query.cursor_param(),
)
async def list_proposals(request: web.Request, args: query.Args) -> web.Response:
    """Newest first, a page at a time (docs/api.md#paging)."""
    operator(request)
    state = args.text("state")
    found = ProposalQuery(args.text("loop"), None if state == "all" else state, query.before(args))
    page = await call_read(service(request).proposals_page, found, args.number("limit"))
    return reply(wire.proposals(page))


@routes.get("/proposals/{id}")
@query.accepts()
async def show_proposal(request: web.Request, _: query.Args) -> web.Response:
    operator(request)
    found = await call_read(service(request).proposal, request.match_info["id"])
    return reply({"proposal": wire.record(found)})


@routes.get("/proposals/{id}/review")
@query.accepts(query.Integer("lastRuns", "how many of the loop's last runs to show", 5, 0, 100))
async def review_proposal(request: web.Request, args: query.Args) -> web.Response:
    """What a person needs to decide the proposal (docs/runtime.md#reviewing-a-proposal):
    the inbox's data, as JSON."""
    operator(request)
    runs = args.number("lastRuns")
    return reply(await call_read(service(request).review, request.match_info["id"], runs))


async def _json_body(request: web.Request) -> object:
    return parse_json(await read_body(request, settings(request).body_limit), empty={})


@routes.post("/proposals/{id}/approve")
@query.accepts()
async def approve(request: web.Request, _: query.Args) -> web.Response:
    """Approve and queue the run; 409 when already decided, 403 for a non-human on a
    human-only proposal."""
    actor = operator(request)
    body = model_body(ApproveBody, await _json_body(request))
    proposal, run = await call(service(request).approve, request.match_info["id"], actor, body.note)
    wake(request)
    return reply(wire.approval(proposal, run))


@routes.post("/proposals/{id}/reject")
@query.accepts()
async def reject(request: web.Request, _: query.Args) -> web.Response:
    actor = operator(request)
    body = model_body(RejectBody, await _json_body(request))
    proposal = await call(service(request).reject, request.match_info["id"], actor, body.reason)
    return reply({"proposal": wire.record(proposal)})


class CancelBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    note: str = Field(default="", max_length=2000)


class DecideFindingBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    note: str = Field(default="", max_length=2000)


FINDING_STATUSES = frozenset({*FindingStatus, "all"})


@routes.post("/runs/{id}/cancel")
@query.accepts()
async def cancel_run(request: web.Request, _: query.Args) -> web.Response:
    """An operator's cancel: 409 when the run already ended."""
    actor = operator(request)
    body = model_body(CancelBody, await _json_body(request))
    run = await call(service(request).cancel, request.match_info["id"], actor, body.note)
    return reply({"run": wire.record(run)})


@routes.get("/findings")
@query.accepts(
    query.Choice(
        "status", "only findings in this status", FINDING_STATUSES, FindingStatus.CANDIDATE
    ),
    query.Text("loop", "only findings of this loop"),
    query.limit_param(),
)
async def list_findings(request: web.Request, args: query.Args) -> web.Response:
    operator(request)
    status, loop, limit = args.text("status"), args.text("loop"), args.number("limit")
    found = await call_read(
        service(request).findings, limit, None if status == "all" else status, loop
    )
    return reply({"findings": wire.records(found)})


@routes.get("/findings/{id}")
@query.accepts()
async def show_finding(request: web.Request, _: query.Args) -> web.Response:
    operator(request)
    found = await call_read(service(request).finding, request.match_info["id"])
    return reply({"finding": wire.record(found)})


@routes.post("/findings/{id}/promote")
@query.accepts()
async def promote_finding(request: web.Request, _: query.Args) -> web.Response:
    """Only a human promotes a finding: the token's operator is recorded."""
    actor = operator(request)
    body = model_body(DecideFindingBody, await _json_body(request))
    found = await call(service(request).promote, request.match_info["id"], actor, body.note)
    wake(request)
    return reply({"finding": wire.record(found)})


@routes.post("/findings/{id}/dismiss")
@query.accepts()
async def dismiss_finding(request: web.Request, _: query.Args) -> web.Response:
    actor = operator(request)
    body = model_body(RejectBody, await _json_body(request))
    found = await call(service(request).dismiss, request.match_info["id"], actor, body.reason)
    return reply({"finding": wire.record(found)})


@routes.get("/shadow/{loop}")
@query.accepts(query.Text("since", "only the shadow history since this ISO-8601 instant"))
async def shadow_report(request: web.Request, args: query.Args) -> web.Response:
    operator(request)
    since = args.text("since") or ""
    report = await call_read(service(request).shadow_report, request.match_info["loop"], since)
    return reply(report)
