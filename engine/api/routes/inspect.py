"""Reading routes: events, runs and the journal (operator token required), and the
open `GET /status` (counts and digests, no secrets)."""

from __future__ import annotations

from aiohttp import web

from engine import retry_after
from engine.api import query, wire
from engine.api.context import call_read, operator, reply, service, settings
from engine.api.observe import OBSERVED
from engine.core.decisions import Entity
from engine.core.delivery import DELIVERY_STATES
from engine.core.paging import EventQuery, NotificationQuery, RunQuery, journal_cursor
from engine.core.states import RunState
from engine.service.doctor import PILEUP
from engine.service.metrics import PROMETHEUS_CONTENT_TYPE, prometheus, scrape

RUN_STATES = frozenset({*(s.value for s in RunState), "all"})
DELIVERY_CHOICES = frozenset({*DELIVERY_STATES, "all"})
JOURNAL_ENTITIES = frozenset(str(e) for e in Entity)

routes = web.RouteTableDef()


@routes.get("/events")
@query.accepts(
    query.Text("loop", "only events of this loop"),
    query.Text("type", "only events of this type"),
    query.limit_param(),
    query.cursor_param(),
)
async def list_events(request: web.Request, args: query.Args) -> web.Response:
    """Newest first, a page at a time (docs/api.md#paging)."""
    operator(request)
    found = EventQuery(args.text("loop"), args.text("type"), query.before(args))
    page = await call_read(service(request).events_page, found, args.number("limit"))
    return reply(wire.events(page))


@routes.get("/events/{id:.+}")  # event ids may hold "/" (EVENT_ID_PATTERN)
@query.accepts()
async def show_event(request: web.Request, _: query.Args) -> web.Response:
    """The event with its decision and occurrence state."""
    operator(request)
    found = await call_read(service(request).event, request.match_info["id"])
    return reply(wire.event_detail(found))


@routes.get("/explain/{id:.+}")  # event ids may hold "/"; a slot is LOOP@TIME
@query.accepts()
async def explain(request: web.Request, _: query.Args) -> web.Response:
    """The causal chain of an event, both ways (docs/explain.md)."""
    operator(request)
    return reply(await call_read(service(request).explain, request.match_info["id"]))


@routes.get("/runs")
@query.accepts(
    query.Text("loop", "only runs of this loop"),
    query.Choice("state", "only runs in this state", RUN_STATES, "all"),
    query.limit_param(),
    query.cursor_param(),
)
async def list_runs(request: web.Request, args: query.Args) -> web.Response:
    """Newest first, a page at a time (docs/api.md#paging)."""
    operator(request)
    state = args.text("state")
    found = RunQuery(
        args.text("loop"), None if state == "all" else state, before=query.before(args)
    )
    page = await call_read(service(request).runs_page, found, args.number("limit"))
    return reply(wire.runs(page))


@routes.get("/runs/{id}")
@query.accepts()
async def show_run(request: web.Request, _: query.Args) -> web.Response:
    operator(request)
    found = await call_read(service(request).run, request.match_info["id"])
    return reply({"run": wire.record(found)})


@routes.get("/notifications")
@query.accepts(
    query.Text("loop", "only notifications of this loop"),
    query.Choice("delivery", "only notifications in this delivery state", DELIVERY_CHOICES, "all"),
    query.limit_param(),
    query.Text(
        "before",
        "the `next` of the previous page, passed back as it was: the page after it "
        "(older notifications); a cursor this listing did not give is a 400 `bad_cursor`",
        24,
    ),
)
async def list_notifications(request: web.Request, args: query.Args) -> web.Response:
    """Newest first, a page at a time (docs/api.md#paging), each with its delivery at
    every sink (docs/notifications.md#listing-them)."""
    operator(request)
    delivery, before = args.text("delivery"), args.text("before")
    found = NotificationQuery(
        args.text("loop"),
        None if delivery == "all" else delivery,
        None if before is None else journal_cursor(before),
    )
    page = await call_read(service(request).notifications_page, found, args.number("limit"))
    return reply(wire.notifications(page))


@routes.get("/journal")
@query.accepts(
    query.Integer("after", "only entries with a higher sequence number", 0, 0, 2**62),
    query.limit_param(100),
    query.Choice("entity", "only entries about this kind of entity", JOURNAL_ENTITIES),
    query.Text("entityId", "only entries about the entity with this id"),
)
async def list_journal(request: web.Request, args: query.Args) -> web.Response:
    """Oldest first after `after` (a sequence number); `next` continues the page."""
    operator(request)
    after, limit = args.number("after"), args.number("limit")
    entity, entity_id = args.text("entity"), args.text("entityId")
    found = await call_read(service(request).journal, limit, after, entity, entity_id)
    return reply(wire.journal(found, after))


@routes.get("/metrics")
@query.accepts()
async def metrics_text(request: web.Request, _: query.Args) -> web.Response:
    """The audit figures, loop timestamps, run histograms and this process's HTTP and
    runtime-loop metrics in the Prometheus text format (docs/observability.md#metrics;
    operator token: loop names and volumes are an operator's business)."""
    operator(request)
    scraped = await call_read(scrape, service(request).rt)
    body = prometheus(scraped, wire.version(), request.app[OBSERVED].registry)
    return web.Response(body=body, headers={"Content-Type": PROMETHEUS_CONTENT_TYPE})


@routes.get("/healthz")
@query.accepts()
async def healthz(request: web.Request, _: query.Args) -> web.Response:
    """Liveness for supervisors and load balancers: open to anyone, touches neither the
    database nor the rules; 200 while the process answers HTTP (docs/api.md#get-healthz).
    `/status` stays the doctor."""
    return reply({"ok": True, "version": wire.version()})


@routes.get("/readyz")
@query.accepts()
async def readyz(request: web.Request, _: query.Args) -> web.Response:
    """Readiness for supervisors and load balancers: open to anyone; 200 when the
    database answers and its migrations are this engine's, else 503 with the reason
    (docs/api.md#get-readyz) and when to ask again (`Retry-After`). One small read, never
    a write."""
    found = await call_read(service(request).readiness)
    answer = reply({**found, "version": wire.version()}, 200 if found["ready"] else 503)
    if not found["ready"]:
        answer.headers.update(retry_after.header(found["reason"]))
    return answer


@routes.get("/status")
@query.accepts(
    query.Integer("pileup", "the doctor's pile-up threshold (open proposals)", PILEUP, 0, 100_000)
)
async def status(request: web.Request, args: query.Args) -> web.Response:
    """Open to anyone: counts, the rules digest, the version and the doctor's findings
    (`?pileup=N`, default 3); never a secret."""
    config = settings(request)
    pileup = args.number("pileup")
    found = await call_read(service(request).status)
    doctor = await call_read(service(request).doctor, pileup)
    return reply(
        {
            **found,
            "version": wire.version(),
            "database": service(request).rt.store.dialect,
            "signedIntake": config.event_secret is not None,
            "githubIntake": bool(config.github_secrets),
            "operatorRoutes": bool(config.operators),
            "worker": config.worker,
            "anomalies": len(doctor["anomalies"]),
            "doctor": doctor,
        }
    )
