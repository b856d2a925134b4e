"""Schedule routes (operator token required): every loop's schedule, one loop, its slot
history, and pause, resume and run-now. The token names the operator; the journal
records `operator:<name>`."""

from __future__ import annotations

from datetime import timedelta

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from engine.api import query
from engine.api.bodies import model_body, parse_json, read_body
from engine.api.context import call, call_read, operator, reply, service, settings, wake
from engine.core.ticks import slot_text
from engine.service.schedules import parse_when

routes = web.RouteTableDef()


class PauseBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    note: str = Field(min_length=1, max_length=2000)


class ResumeBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    note: str = Field(default="", max_length=2000)


async def _json_body(request: web.Request) -> object:
    return parse_json(await read_body(request, settings(request).body_limit), empty={})


@routes.get("/schedules")
@query.accepts()
async def list_schedules(request: web.Request, _: query.Args) -> web.Response:
    operator(request)
    found = await call_read(service(request).schedules)
    pending = await call_read(service(request).pending_graduations)
    return reply({"schedules": found, "pendingGraduations": pending})


@routes.get("/schedules/{loop}")
@query.accepts()
async def show_schedule(request: web.Request, _: query.Args) -> web.Response:
    operator(request)
    found = await call_read(service(request).schedule, request.match_info["loop"])
    return reply({"schedule": found})


@routes.get("/schedules/{loop}/slots")
@query.accepts(
    query.Text("since", "from when: an ISO-8601 instant, `now`, or how long ago (`24h`)", 64)
)
async def list_slots(request: web.Request, args: query.Args) -> web.Response:
    """Due slots since `since` (ISO-8601, `now` or how long ago: `24h`; default 24h)
    and what happened to each: fired, skipped with a reason, or pending."""
    operator(request)
    engine = service(request)
    now = engine.rt.clock()
    text = args.text("since")
    since = parse_when(text, now) if text else now - timedelta(hours=24)
    loop = request.match_info["loop"]
    entry = await call_read(engine.schedule, loop)
    found = await call_read(engine.slots, loop, since)
    doc = {"loop": loop, "since": slot_text(since), "enabledSince": entry["enabledSince"]}
    return reply({**doc, "slots": found})


@routes.post("/schedules/{loop}/pause")
@query.accepts()
async def pause(request: web.Request, _: query.Args) -> web.Response:
    """{note} (required); 409 when the loop is already paused."""
    actor = operator(request)
    body = model_body(PauseBody, await _json_body(request))
    found = await call(service(request).pause, request.match_info["loop"], actor, body.note)
    return reply({"schedule": found})


@routes.post("/schedules/{loop}/resume")
@query.accepts()
async def resume(request: web.Request, _: query.Args) -> web.Response:
    """{note} (optional); 409 when the loop is not paused."""
    actor = operator(request)
    body = model_body(ResumeBody, await _json_body(request))
    found = await call(service(request).resume, request.match_info["loop"], actor, body.note)
    return reply({"schedule": found})


@routes.post("/schedules/{loop}/trigger")
@query.accepts()
async def trigger(request: web.Request, _: query.Args) -> web.Response:
    """Run now: admits `manual:<loop>:<id>` (202); 409 when the loop is paused."""
    actor = operator(request)
    found = await call(service(request).trigger, request.match_info["loop"], actor)
    wake(request)
    return reply(found.as_dict(), status=202)
