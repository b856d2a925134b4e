"""Work items over HTTP (docs/work.md): an operator opens, lists, shows, blocks,
reopens, completes and cancels work with an operator token; a controller continues it
(claims the lease), blocks and completes it with its own token
(ENGINE_CONTROLLER_TOKEN), and the principal the token proves is the journal's actor
and the lease's owner, never a name taken from the body."""

from __future__ import annotations

from datetime import timedelta

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from engine.api import query
from engine.api.auth import work_principal
from engine.api.bodies import model_body, parse_json, read_body
from engine.api.context import call, call_read, operator, reply, service, settings
from engine.core.work import (
    DEFAULT_LEASE,
    MAX_KEY,
    MAX_LEASE,
    MAX_REQUEST_ID,
    MAX_TITLE,
    WorkQuery,
    WorkRequest,
    WorkState,
    WorkTrigger,
    as_dict,
    binding_dict,
)

WORK_STATES = frozenset({*(s.value for s in WorkState), "all"})

routes = web.RouteTableDef()


class OpenWorkBody(BaseModel):
    """What opening work asks: a semantic key (the same key answers the item that
    holds it), a title, and the context a controller is handed."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    semanticKey: str = Field(min_length=1, max_length=MAX_KEY)
    title: str = Field(min_length=1, max_length=MAX_TITLE)
    repo: str | None = Field(default=None, max_length=200)
    summary: str = ""
    links: list[str] = Field(default_factory=list, max_length=100)


class MoveWorkBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    note: str = Field(default="", max_length=2000)


class ContinueWorkBody(BaseModel):
    """A controller's claim: its session, and how long the lease lasts (seconds)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    session: str = Field(min_length=1, max_length=200)
    ttl: int = Field(
        default=int(DEFAULT_LEASE.total_seconds()), ge=1, le=int(MAX_LEASE.total_seconds())
    )
    note: str = Field(default="", max_length=2000)


class BindWorkBody(BaseModel):
    """Bind a reviewed work-bound loop shape to the item; `requestId` makes it
    idempotent (the same id answers what it made)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    loop: str = Field(min_length=1, max_length=200)
    requestId: str = Field(min_length=1, max_length=MAX_REQUEST_ID)


class GraduateBody(BaseModel):
    """Take the instance out of shadow mode: now, or (`atRestart`) at the next start of
    `engine serve`, recorded durably; nothing restarts."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    atRestart: bool = False
    note: str = Field(default="", max_length=2000)


async def _body(request: web.Request) -> object:
    return parse_json(await read_body(request, settings(request).body_limit), empty={})


def _principal(request: web.Request) -> str:
    s = settings(request)
    return work_principal(s.operators, s.controllers, request.headers.get("Authorization"))


@routes.get("/work")
@query.accepts(
    query.Choice("state", "only work in this state", WORK_STATES, "all"),
    query.Text("repo", "only work of this repository"),
    query.Text("key", "only work holding this semantic key"),
    query.limit_param(),
    query.cursor_param(),
)
async def list_work(request: web.Request, args: query.Args) -> web.Response:
    """Newest first, a page at a time (docs/api.md#paging)."""
    operator(request)
    state = args.text("state")
    found = WorkQuery(
        None if state == "all" else state, args.text("repo"), args.text("key"), query.before(args)
    )
    page = await call_read(service(request).work_page, found, args.number("limit"))
    return reply({"work": [as_dict(w) for w in page.items], "next": page.next})


@routes.post("/work")
@query.accepts()
async def open_work(request: web.Request, _: query.Args) -> web.Response:
    """201 with a new item; 200 with the item that already holds the key."""
    actor = operator(request)
    body = model_body(OpenWorkBody, await _body(request))
    req = WorkRequest(body.semanticKey, body.title, body.repo, body.summary, tuple(body.links))
    item, created = await call(service(request).add_work, req, actor)
    return reply({"work": as_dict(item), "created": created}, 201 if created else 200)


@routes.get("/work/{id}")
@query.accepts()
async def show_work(request: web.Request, _: query.Args) -> web.Response:
    _principal(request)
    found = await call_read(service(request).work_item, request.match_info["id"])
    return reply({"work": as_dict(found)})


@routes.post("/work/{id}/bind")
@query.accepts()
async def bind_work(request: web.Request, _: query.Args) -> web.Response:
    """201 with a new instance (in shadow); 200 with the one the request id or the
    (work, shape) already made."""
    actor = operator(request)
    body = model_body(BindWorkBody, await _body(request))
    work_id = request.match_info["id"]
    made, created = await call(
        service(request).bind_work, work_id, body.loop, actor, body.requestId
    )
    return reply({"binding": binding_dict(made), "created": created}, 201 if created else 200)


@routes.get("/work/{id}/bindings")
@query.accepts()
async def work_bindings(request: web.Request, _: query.Args) -> web.Response:
    operator(request)
    found = await call_read(service(request).work_bindings, request.match_info["id"])
    return reply({"bindings": [binding_dict(b) for b in found]})


@routes.post("/work/{id}/bindings/{shape}/graduate")
@query.accepts()
async def graduate_binding(request: web.Request, _: query.Args) -> web.Response:
    """The instance of {shape} bound to the item leaves shadow mode now, or at the next
    serve start (`atRestart`): 404 `no_work`, `no_binding`, `no_shape`; 409
    `shadow_only` (its rule file does not write `shadow false`), `not_shadow`,
    `graduation_pending`, `illegal_transition` (terminal work)."""
    actor = operator(request)
    body = model_body(GraduateBody, await _body(request))
    made = await call(
        service(request).graduate_binding,
        request.match_info["id"],
        request.match_info["shape"],
        actor,
        body.atRestart,
        body.note,
    )
    return reply({"binding": binding_dict(made)})


@routes.post("/work/{id}/continue")
@query.accepts()
async def continue_work(request: web.Request, _: query.Args) -> web.Response:
    """The caller claims (or renews) the controller lease: 409 `lease_held` while
    another principal's lease is live."""
    principal = _principal(request)
    body = model_body(ContinueWorkBody, await _body(request))
    ttl = timedelta(seconds=body.ttl)
    item = await call(
        service(request).continue_work,
        request.match_info["id"],
        principal,
        body.session,
        ttl,
        body.note,
    )
    return reply({"work": as_dict(item)})


async def _move(request: web.Request, trigger: WorkTrigger, actor: str) -> web.Response:
    body = model_body(MoveWorkBody, await _body(request))
    move = service(request).move_work
    item = await call(move, request.match_info["id"], trigger, actor, body.note)
    return reply({"work": as_dict(item)})


@routes.post("/work/{id}/complete")
@query.accepts()
async def complete_work(request: web.Request, _: query.Args) -> web.Response:
    """The work is done (its controller or an operator says so): terminal."""
    return await _move(request, WorkTrigger.COMPLETE, _principal(request))


@routes.post("/work/{id}/block")
@query.accepts()
async def block_work(request: web.Request, _: query.Args) -> web.Response:
    """The work waits on something outside it (its controller or an operator says so)."""
    return await _move(request, WorkTrigger.BLOCK, _principal(request))


@routes.post("/work/{id}/reopen")
@query.accepts()
async def reopen_work(request: web.Request, _: query.Args) -> web.Response:
    """Back to open, the lease dropped: an operator only."""
    return await _move(request, WorkTrigger.REOPEN, operator(request))


@routes.post("/work/{id}/cancel")
@query.accepts()
async def cancel_work(request: web.Request, _: query.Args) -> web.Response:
    """The work will not be done: terminal, an operator only."""
    return await _move(request, WorkTrigger.CANCEL, operator(request))
