"""The notifications on the operator's pages (docs/web.md#notifications): the newest
on the inbox, every one on /ui/notifications, each with its delivery state (pending,
delivered, failed), its attempts and each sink's state, as `GET /notifications` has
them. Registered by engine.web.pages.setup."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from engine.api.context import call_read, service
from engine.core.delivery import DELIVERY_STATES
from engine.core.paging import NotificationQuery, journal_cursor
from engine.service import Service
from engine.web.pages import _choice, _filters, _limit, _more, html, show, signed_in

INBOX_NOTICES = 10  # the newest notifications the inbox shows

routes = web.RouteTableDef()


def recent(engine: Service, limit: int = INBOX_NOTICES) -> list[dict[str, Any]]:
    """The newest notifications, each {notification, sinks}."""
    return engine.notifications_page(NotificationQuery(), limit).items


@routes.get("/ui/notifications")
@html
async def notifications_page(request: web.Request) -> web.StreamResponse:
    signed_in(request)
    engine = service(request)
    before = request.query.get("before")
    wanted = NotificationQuery(
        loop=request.query.get("loop") or None,
        delivery=_choice(request, "delivery", DELIVERY_STATES),
        before=journal_cursor(before) if before else None,
    )
    found = await call_read(engine.notifications_page, wanted, _limit(request))
    filters = _filters(request, ("loop", "delivery", "limit"))
    return show(
        request,
        "notifications.html",
        title="Notifications",
        notices=found.items,
        more=_more(filters, found.next),
        filters=filters,
        loops=sorted(engine.rt.rules.loops),
        deliveries=DELIVERY_STATES,
        sinks=engine.notifying.names,
    )
