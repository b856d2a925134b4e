"""The operator's pages (docs/web.md): sign-in, the inbox of open proposals (and the
newest notifications, engine.web.notices), a proposal with everything needed to
decide it, the schedules and a loop's page with its live lifecycle diagrams, runs, the
journal and findings.

Every page needs a session (engine.web.sessions); without one a request is sent to
the sign-in page. Every form that changes state carries the session's CSRF token and
calls the same Service methods as the JSON API, as the session's operator."""

from __future__ import annotations

import asyncio
import hmac
import secrets
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from functools import wraps
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web
from multidict import MultiDictProxy

from engine.api import query
from engine.api.context import call, call_read, service, settings, wake
from engine.core.decisions import Entity, operator_actor
from engine.core.envelope import iso
from engine.core.explain import tree as explain_tree
from engine.core.paging import JournalQuery, RunQuery, journal_cursor, run_cursor
from engine.core.records import JournalEntry, RunRecord
from engine.core.states import FindingStatus, ProposalState, RunState
from engine.core.work import WorkQuery, WorkState, WorkTrigger
from engine.errors import BadRequest, EngineError, Forbidden, NotFound
from engine.machines.catalog import Machines
from engine.machines.diagrams import DiagramFormat, Target, TargetKind, render
from engine.machines.errors import LifecycleError
from engine.service import Service
from engine.service.schedules import parse_when
from engine.web.render import page
from engine.web.sessions import COOKIE, SIGNIN_COOKIE, Session, Sessions

SESSIONS = web.AppKey("sessions", Sessions)
_MACHINES: web.AppKey[dict[str, Machines]] = web.AppKey("machines")
STATIC = Path(__file__).parent / "static"
PAGE_SIZE = 50
MAX_PAGE = 500
INBOX_LIMIT = 100  # open proposals reviewed on one inbox page, newest first
ARTIFACT_TAIL = 64 * 1024  # bytes of a run's captured output shown on its page
JOURNAL_ENTITIES = tuple(str(e) for e in Entity)

routes = web.RouteTableDef()
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def setup(app: web.Application) -> None:
    """Add the pages and their static assets to the API's application."""
    app[SESSIONS] = Sessions()
    app[_MACHINES] = {}
    app.add_routes(routes)
    from engine.web import notices  # here: it builds on this module's helpers

    app.add_routes(notices.routes)
    app.router.add_static("/ui/static", STATIC, append_version=True)


# ---- sessions, forms and errors ------------------------------------------------------


def _session(request: web.Request) -> Session | None:
    return request.app[SESSIONS].get(request.cookies.get(COOKIE))


def _safe_next(target: str | None) -> str:
    """Only a path of this site: never `//host` or a scheme (no open redirect)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def signed_in(request: web.Request) -> Session:
    """The request's session; without one, a 303 to the sign-in page."""
    found = _session(request)
    if found is None:
        raise web.HTTPSeeOther("/ui/signin?" + urlencode({"next": request.path_qs}))
    return found


async def form(request: web.Request, session: Session) -> MultiDictProxy[Any]:
    """The posted form, once its CSRF token is the session's (403 otherwise)."""
    data = await request.post()
    given = data.get("csrf")
    if not session.csrf_matches(given if isinstance(given, str) else None):
        raise Forbidden(
            "the form's CSRF token is missing or does not match this session; "
            "reload the page and send it again",
            reason="bad_csrf",
        )
    return data


def field(data: Mapping[str, Any], name: str, limit: int = 2000) -> str:
    value = data.get(name, "")
    text = value.strip() if isinstance(value, str) else ""
    if len(text) > limit:
        raise BadRequest(f"'{name}' is longer than {limit} characters", reason="bad_form")
    return text


def actor(session: Session) -> str:
    return operator_actor(session.operator)


def back(session: Session, to: str, *messages: str) -> web.HTTPSeeOther:
    """A 303 to `to`, with `messages` shown there once."""
    session.flash.extend(messages)
    return web.HTTPSeeOther(to)


def html(handler: Handler) -> Handler:
    """Engine errors as an HTML page with their status (4xx: the reason, nothing
    changed); faults stay for the API's error middleware (a 500 without details)."""

    @wraps(handler)
    async def answer(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except EngineError as err:
            if err.status >= 500:
                raise
            return show(request, "error.html", status=err.status, title=f"{err.status}", error=err)

    return answer


def show(request: web.Request, template: str, status: int = 200, **context: Any) -> web.Response:
    """A page for the signed-in operator (nav, flash messages, CSRF token)."""
    session = _session(request)
    flash: list[str] = []
    if session is not None:
        flash, session.flash = session.flash, []
    return page(
        template,
        service(request).rt.clock(),
        status=status,
        session=session,
        flash=flash,
        path=request.path,
        **context,
    )


# ---- sign-in ---------------------------------------------------------------------------


def _secure(request: web.Request) -> bool:
    return request.secure or request.headers.get("X-Forwarded-Proto", "") == "https"


def _cookie(response: web.StreamResponse, request: web.Request, name: str, value: str) -> None:
    response.set_cookie(
        name, value, path="/", httponly=True, samesite="Strict", secure=_secure(request)
    )


def _signin_page(
    request: web.Request, target: str, error: str | None = None, status: int = 200
) -> web.Response:
    """The sign-in form with a fresh CSRF token of its own, set as its cookie too."""
    token = secrets.token_urlsafe(24)
    answer = show(
        request,
        "signin.html",
        status=status,
        title="Sign in",
        csrf=token,
        next=target,
        closed=not settings(request).operators,
        error=error,
    )
    _cookie(answer, request, SIGNIN_COOKIE, token)
    return answer


@routes.get("/ui/signin")
@html
async def signin_form(request: web.Request) -> web.StreamResponse:
    return _signin_page(request, _safe_next(request.query.get("next")))


@routes.post("/ui/signin")
@html
async def signin(request: web.Request) -> web.StreamResponse:
    data = await request.post()
    expected, given = request.cookies.get(SIGNIN_COOKIE, ""), data.get("csrf")
    if not (
        expected
        and isinstance(given, str)
        and hmac.compare_digest(given.encode(errors="surrogatepass"), expected.encode())
    ):
        raise Forbidden(
            "the sign-in form expired or was not sent from this site; reload it",
            reason="bad_csrf",
        )
    token = data.get("token")
    name = settings(request).operators.identify(token) if isinstance(token, str) else None
    wanted = data.get("next")
    target = _safe_next(wanted if isinstance(wanted, str) else None)
    if name is None:
        await asyncio.sleep(0.25)  # a wrong token costs the guesser a moment
        return _signin_page(request, target, "That token is not an operator's token.", 401)
    session_id, _ = request.app[SESSIONS].open(name)
    answer = web.HTTPSeeOther(target)
    _cookie(answer, request, COOKIE, session_id)
    answer.del_cookie(SIGNIN_COOKIE, path="/")
    raise answer


@routes.post("/ui/signout")
@html
async def signout(request: web.Request) -> web.StreamResponse:
    session = signed_in(request)
    await form(request, session)
    request.app[SESSIONS].close(request.cookies.get(COOKIE))
    answer = web.HTTPSeeOther("/ui/signin")
    answer.del_cookie(COOKIE, path="/")
    raise answer


# ---- the inbox and proposals --------------------------------------------------------------


def reviewed(
    engine: Service, proposal_id: str, shadows: dict[str | None, Any] | None = None
) -> dict[str, Any]:
    """`Service.review` with the causal chain as `engine explain` prints it. Given
    `shadows`, a loop's shadow evidence is read once and kept there for the next."""
    found = engine.review(proposal_id, with_shadow=shadows is None)
    if shadows is not None:
        loop = found["proposal"]["loop"]
        if loop not in shadows:
            shadows[loop] = engine.shadow_evidence(loop)
        found["shadow"] = shadows[loop]
    return {**found, "chain": explain_tree(found["explain"]) if found.get("explain") else []}


def _reviews(engine: Service, loop: str | None, event_type: str | None) -> dict[str, Any]:
    from engine.web.notices import recent

    opened = engine.proposals(INBOX_LIMIT, ProposalState.OPEN.value)
    shadows: dict[str | None, Any] = {}
    reviews = [reviewed(engine, p.proposal_id, shadows) for p in opened]
    loops = sorted({r["proposal"]["loop"] for r in reviews if r["proposal"]["loop"]})
    types = sorted({r["event"]["type"] for r in reviews})
    shown = [
        r
        for r in reviews
        if (loop is None or r["proposal"]["loop"] == loop)
        and (event_type is None or r["event"]["type"] == event_type)
    ]
    return {
        "reviews": shown,
        "loops": loops,
        "types": types,
        "total": len(reviews),
        "notices": recent(engine),
    }


@routes.get("/")
@html
async def inbox(request: web.Request) -> web.StreamResponse:
    signed_in(request)
    loop = request.query.get("loop") or None
    event_type = request.query.get("type") or None
    found = await call_read(_reviews, service(request), loop, event_type)
    return show(
        request,
        "inbox.html",
        title="Inbox",
        loop=loop,
        type=event_type,
        limit=INBOX_LIMIT,
        **found,
    )


@routes.get("/ui/proposals/{id}")
@html
async def proposal_page(request: web.Request) -> web.StreamResponse:
    signed_in(request)
    review = await call_read(reviewed, service(request), request.match_info["id"])
    return show(request, "proposal.html", title="Proposal", review=review)


@routes.post("/ui/proposals/{id}/approve")
@html
async def approve(request: web.Request) -> web.StreamResponse:
    """A human-only proposal is approved only after its confirm step (`confirm=yes`)."""
    session = signed_in(request)
    data = await form(request, session)
    proposal_id, note = request.match_info["id"], field(data, "note")
    engine = service(request)
    found = await call_read(engine.proposal, proposal_id)
    if found.human_only and data.get("confirm") != "yes":
        review = await call_read(reviewed, engine, proposal_id)
        return show(request, "confirm.html", title="Confirm", review=review, note=note)
    proposal, run = await call(engine.approve, proposal_id, actor(session), note)
    wake(request)
    raise back(
        session,
        f"/ui/proposals/{quote(proposal_id)}",
        f"Approved {proposal.proposal_id}; run {run.run_id} is queued.",
    )


@routes.post("/ui/proposals/{id}/reject")
@html
async def reject(request: web.Request) -> web.StreamResponse:
    session = signed_in(request)
    data = await form(request, session)
    proposal_id, reason = request.match_info["id"], field(data, "note")
    if not reason:
        raise BadRequest("a rejection needs a reason (the note)", reason="missing_reason")
    await call(service(request).reject, proposal_id, actor(session), reason)
    raise back(session, f"/ui/proposals/{quote(proposal_id)}", f"Rejected {proposal_id}.")


@routes.post("/ui/proposals")
@html
async def decide_several(request: web.Request) -> web.StreamResponse:
    """Approve or reject the selected proposals at once; a human-only one is left for
    its own page (one at a time, behind a confirm step)."""
    session = signed_in(request)
    data = await form(request, session)
    action, note = data.get("action"), field(data, "note")
    ids = [i for i in data.getall("id", []) if isinstance(i, str)]
    if action not in ("approve", "reject"):
        raise BadRequest("'action' must be approve or reject", reason="bad_form")
    if not ids:
        raise back(session, "/", "Select at least one proposal.")
    if action == "reject" and not note:
        raise back(session, "/", "Rejecting takes a reason: write it in the note.")
    messages = await call(_decide_all, service(request), ids, action, actor(session), note)
    wake(request)
    raise back(session, "/", *messages)


def _decide_all(engine: Service, ids: list[str], action: str, who: str, note: str) -> list[str]:
    done: list[str] = []
    messages: list[str] = []
    for proposal_id in dict.fromkeys(ids):
        try:
            if engine.proposal(proposal_id).human_only:
                messages.append(f"{proposal_id} is human-only: approve or reject it on its page.")
                continue
            if action == "approve":
                engine.approve(proposal_id, who, note)
            else:
                engine.reject(proposal_id, who, note)
            done.append(proposal_id)
        except EngineError as err:
            messages.append(f"{proposal_id}: {err.message}")
    verb = "Approved" if action == "approve" else "Rejected"
    if done:
        messages.insert(0, f"{verb} {len(done)}: {', '.join(done)}.")
    return messages


@routes.get("/ui/explain/{id:.+}")
@html
async def explain_page(request: web.Request) -> web.StreamResponse:
    signed_in(request)
    doc = await call_read(service(request).explain, request.match_info["id"])
    return show(request, "explain.html", title="Explain", doc=doc, chain=explain_tree(doc))


# ---- schedules and loops -------------------------------------------------------------------


def _schedules(engine: Service) -> dict[str, Any]:
    doctor = engine.doctor()
    anomalies: dict[str, list[dict[str, Any]]] = {}
    for found in doctor["anomalies"]:
        anomalies.setdefault(found["loop"], []).append(found)
    return {"schedules": engine.schedules(), "anomalies": anomalies, "doctor": doctor}


@routes.get("/ui/schedules")
@html
async def schedules_page(request: web.Request) -> web.StreamResponse:
    signed_in(request)
    found = await call_read(_schedules, service(request))
    return show(request, "schedules.html", title="Schedules", **found)


LIFECYCLES = ("occurrence", "proposal", "run")


def _diagram(machines: Machines, loop: str, kind: str, counts: Mapping[str, int]) -> dict[str, str]:
    """One of the loop's lifecycles as an SVG document, with the live `counts`; or why
    it cannot be drawn here (no Graphviz)."""
    lifecycle = machines.for_loop(loop)
    machine = getattr(lifecycle, kind)
    target = Target(kind, TargetKind.MACHINE, machine, lifecycle.profile, f"loop {loop}")
    every = {state: counts.get(state, 0) for state in machine.spec.states}
    try:
        svg = render(target, DiagramFormat.SVG, every)
    except LifecycleError as err:  # no Graphviz on this host: the page says so
        return {"kind": kind, "svg": "", "problem": str(err)}
    return {"kind": kind, "svg": svg[svg.find("<svg") :], "problem": ""}


def _diagrams(engine: Service, machines: Machines, loop: str) -> list[dict[str, str]]:
    counts = engine.lifecycle_counts(loop)
    return [_diagram(machines, loop, kind, counts.get(kind, {})) for kind in LIFECYCLES]


def machines_of(request: web.Request) -> Machines:
    """The compiled machines of the loaded rules, built once per rule set."""
    rules = service(request).rt.rules
    cache = request.app[_MACHINES]
    if rules.digest not in cache:
        cache.clear()
        cache[rules.digest] = Machines.from_rules(rules)
    return cache[rules.digest]


def _loop(engine: Service, machines: Machines, loop: str, since: datetime) -> dict[str, Any]:
    entry = engine.schedule(loop)
    return {
        "schedule": entry,
        "slots": list(reversed(engine.slots(loop, since))),
        "diagrams": _diagrams(engine, machines, loop),
        "since": iso(since),
    }


@routes.get("/ui/loops/{loop}")
@html
async def loop_page(request: web.Request) -> web.StreamResponse:
    signed_in(request)
    engine = service(request)
    text = request.query.get("since") or "24h"
    since = parse_when(text, engine.rt.clock())
    found = await call_read(_loop, engine, machines_of(request), request.match_info["loop"], since)
    return show(request, "loop.html", title=request.match_info["loop"], since_text=text, **found)


@routes.get("/ui/loops/{loop}/diagrams/{kind}.svg")
@html
async def diagram_file(request: web.Request) -> web.StreamResponse:
    """One lifecycle diagram as its own SVG document, to zoom into on a small screen."""
    signed_in(request)
    loop, kind = request.match_info["loop"], request.match_info["kind"]
    if kind not in LIFECYCLES:
        raise NotFound(f"no lifecycle '{kind}': one of {', '.join(LIFECYCLES)}")
    engine = service(request)
    await call_read(engine.schedule, loop)  # NotFound for a loop the rules do not declare
    counts = await call_read(engine.lifecycle_counts, loop)
    drawn = await asyncio.to_thread(
        _diagram, machines_of(request), loop, kind, counts.get(kind, {})
    )
    if not drawn["svg"]:
        raise NotFound(drawn["problem"], reason="no_graphviz")
    return web.Response(
        text=drawn["svg"],
        content_type="image/svg+xml",
        headers={
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store",
        },
    )


def _return_to(data: Mapping[str, Any], default: str) -> str:
    value = data.get("next")
    return _safe_next(value) if isinstance(value, str) and value else default


@routes.post("/ui/loops/{loop}/pause")
@html
async def pause(request: web.Request) -> web.StreamResponse:
    session = signed_in(request)
    data = await form(request, session)
    loop, note = request.match_info["loop"], field(data, "note")
    to = _return_to(data, f"/ui/loops/{quote(loop)}")
    if not note:
        raise back(session, to, f"Pausing {loop} takes a note: say why.")
    await call(service(request).pause, loop, actor(session), note)
    raise back(session, to, f"Paused {loop}.")


@routes.post("/ui/loops/{loop}/resume")
@html
async def resume(request: web.Request) -> web.StreamResponse:
    session = signed_in(request)
    data = await form(request, session)
    loop = request.match_info["loop"]
    to = _return_to(data, f"/ui/loops/{quote(loop)}")
    await call(service(request).resume, loop, actor(session), field(data, "note"))
    wake(request)
    raise back(session, to, f"Resumed {loop}.")


@routes.post("/ui/loops/{loop}/trigger")
@html
async def trigger(request: web.Request) -> web.StreamResponse:
    session = signed_in(request)
    data = await form(request, session)
    loop = request.match_info["loop"]
    to = _return_to(data, f"/ui/loops/{quote(loop)}")
    found = await call(service(request).trigger, loop, actor(session))
    wake(request)
    raise back(session, to, f"Triggered {loop}: event {found.eventId}.")


# ---- runs, the journal and findings ------------------------------------------------------


def _when(request: web.Request, name: str) -> str | None:
    text = (request.query.get(name) or "").strip()
    return iso(parse_when(text, service(request).rt.clock())) if text else None


def _choice(request: web.Request, name: str, choices: tuple[str, ...]) -> str | None:
    value = request.query.get(name) or None
    if value is not None and value not in choices:
        raise BadRequest(f"'{name}' must be one of {', '.join(choices)}", reason="bad_query")
    return value


def _filters(request: web.Request, names: tuple[str, ...]) -> dict[str, str]:
    return {n: request.query[n] for n in names if request.query.get(n)}


def _limit(request: web.Request) -> int:
    return query.integer(request.query, "limit", PAGE_SIZE, 1, MAX_PAGE)


RUN_STATES = tuple(s.value for s in RunState)


@routes.get("/ui/runs")
@html
async def runs_page(request: web.Request) -> web.StreamResponse:
    signed_in(request)
    engine = service(request)
    before = request.query.get("before")
    wanted = RunQuery(
        loop=request.query.get("loop") or None,
        state=_choice(request, "state", RUN_STATES),
        actor=request.query.get("actor") or None,
        since=_when(request, "since"),
        until=_when(request, "until"),
        before=run_cursor(before) if before else None,
    )
    found = await call_read(engine.runs_page, wanted, _limit(request))
    filters = _filters(request, ("loop", "state", "actor", "since", "until", "limit"))
    return show(
        request,
        "runs.html",
        title="Runs",
        runs=found.items,
        more=_more(filters, found.next),
        filters=filters,
        loops=sorted(engine.rt.rules.loops),
        states=RUN_STATES,
    )


def _more(filters: dict[str, str], cursor: str | None) -> str | None:
    return None if cursor is None else "?" + urlencode({**filters, "before": cursor})


def _run(engine: Service, run_id: str) -> dict[str, Any]:
    run = engine.run(run_id)
    return {"run": run, "output": _artifact_tail(engine, run)}


def _artifact_path(engine: Service, run: RunRecord) -> Path | None:
    """The run's captured output, when it is a file under the artifacts directory."""
    if not run.artifact:
        return None
    root = engine.rt.artifacts.resolve()
    path = Path(run.artifact).resolve()
    return path if path.is_relative_to(root) and path.is_file() else None


def _artifact_tail(engine: Service, run: RunRecord) -> dict[str, Any] | None:
    path = _artifact_path(engine, run)
    if path is None:
        return None
    size = path.stat().st_size
    with path.open("rb") as f:
        f.seek(max(0, size - ARTIFACT_TAIL))
        text = f.read().decode("utf-8", "replace")
    return {"path": str(path), "size": size, "text": text, "cut": size > ARTIFACT_TAIL}


@routes.get("/ui/runs/{id}")
@html
async def run_page(request: web.Request) -> web.StreamResponse:
    signed_in(request)
    found = await call_read(_run, service(request), request.match_info["id"])
    return show(request, "run.html", title="Run", **found)


@routes.get("/ui/runs/{id}/artifact")
@html
async def run_artifact(request: web.Request) -> web.StreamResponse:
    """The whole captured output, as plain text (never rendered by the browser)."""
    signed_in(request)
    engine = service(request)
    run = await call_read(engine.run, request.match_info["id"])
    path = await asyncio.to_thread(_artifact_path, engine, run)
    if path is None:
        raise NotFound(f"run {run.run_id} has no output file", reason="no_artifact")
    return web.FileResponse(
        path,
        headers={
            "Content-Type": "text/plain; charset=utf-8",
            "Content-Disposition": f'inline; filename="{run.run_id}.log"',
            "Content-Security-Policy": "sandbox; default-src 'none'",
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store",
        },
    )


@routes.get("/ui/journal")
@html
async def journal_page(request: web.Request) -> web.StreamResponse:
    signed_in(request)
    engine = service(request)
    before = request.query.get("before")
    wanted = JournalQuery(
        loop=request.query.get("loop") or None,
        entity=_choice(request, "entity", JOURNAL_ENTITIES),
        actor=request.query.get("actor") or None,
        since=_when(request, "since"),
        until=_when(request, "until"),
        before=journal_cursor(before) if before else None,
    )
    found = await call_read(engine.journal_page, wanted, _limit(request))
    filters = _filters(request, ("loop", "entity", "actor", "since", "until", "limit"))
    return show(
        request,
        "journal.html",
        title="Journal",
        entries=[_entry_link(e) for e in found.items],
        more=_more(filters, found.next),
        filters=filters,
        loops=sorted(engine.rt.rules.loops),
        entities=JOURNAL_ENTITIES,
    )


def _entry_link(entry: JournalEntry) -> dict[str, Any]:
    """An entry with the page of what it is about, where there is one."""
    pages = {
        "proposal": "/ui/proposals/",
        "run": "/ui/runs/",
        "loop": "/ui/loops/",
        "event": "/ui/explain/",
        "occurrence": "/ui/explain/",
        "work": "/ui/work#w-",
    }
    prefix = pages.get(entry.entity)
    link = prefix + quote(entry.entity_id, safe="") if prefix else None
    return {"entry": entry, "link": link}


FINDING_STATUSES = tuple(str(s) for s in FindingStatus)
WORK_STATES = tuple(str(s) for s in WorkState)


@routes.get("/ui/work")
@html
async def work_page(request: web.Request) -> web.StreamResponse:
    """Work items with their controller lease and their bound loops (docs/work.md)."""
    signed_in(request)
    state = _choice(request, "state", (*WORK_STATES, "all")) or "all"
    query = WorkQuery(None if state == "all" else state)
    items = await call_read(service(request).work_overview, query, PAGE_SIZE)
    return show(
        request,
        "work.html",
        title="Work",
        items=items,
        chosen=state,
        states=(*WORK_STATES, "all"),
    )


@routes.post("/ui/work/{id}/complete")
@html
async def complete_work(request: web.Request) -> web.StreamResponse:
    return await _move_work(request, WorkTrigger.COMPLETE, "Completed")


@routes.post("/ui/work/{id}/cancel")
@html
async def cancel_work(request: web.Request) -> web.StreamResponse:
    return await _move_work(request, WorkTrigger.CANCEL, "Cancelled")


async def _move_work(request: web.Request, trigger: WorkTrigger, said: str) -> web.StreamResponse:
    session = signed_in(request)
    data = await form(request, session)
    work_id = request.match_info["id"]
    move = service(request).move_work
    await call(move, work_id, trigger, actor(session), field(data, "note"))
    raise back(session, "/ui/work", f"{said} {work_id}.")


@routes.get("/ui/findings")
@html
async def findings_page(request: web.Request) -> web.StreamResponse:
    signed_in(request)
    status = _choice(request, "status", (*FINDING_STATUSES, "all")) or FindingStatus.CANDIDATE
    found = await call_read(
        service(request).findings, PAGE_SIZE, None if status == "all" else status, None
    )
    return show(
        request,
        "findings.html",
        title="Findings",
        findings=found,
        chosen=status,
        statuses=(*FINDING_STATUSES, "all"),
    )


@routes.post("/ui/findings/{id}/promote")
@html
async def promote(request: web.Request) -> web.StreamResponse:
    session = signed_in(request)
    data = await form(request, session)
    finding_id = request.match_info["id"]
    await call(service(request).promote, finding_id, actor(session), field(data, "note"))
    wake(request)
    raise back(session, "/ui/findings", f"Promoted {finding_id}.")


@routes.post("/ui/findings/{id}/dismiss")
@html
async def dismiss(request: web.Request) -> web.StreamResponse:
    session = signed_in(request)
    data = await form(request, session)
    finding_id, reason = request.match_info["id"], field(data, "note")
    if not reason:
        raise back(session, "/ui/findings", "Dismissing takes a reason: write it in the note.")
    await call(service(request).dismiss, finding_id, actor(session), reason)
    raise back(session, "/ui/findings", f"Dismissed {finding_id}.")
