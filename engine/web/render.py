"""Pages from Jinja2 templates (autoescaped, shipped in the package), with the headers
every page carries: a Content-Security-Policy that allows no inline script or style,
no framing, no caching and no referrer (docs/web.md#security)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import jinja2
from aiohttp import web

from engine.core import timefmt
from engine.core.envelope import parse_iso

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def relative(text: str | None, now: datetime) -> str:
    """`12m ago`, `in 4m`, `just now` for a stored instant; '' for None."""
    if not text:
        return ""
    try:
        moment = parse_iso(text)
    except ValueError:
        return text
    return timefmt.relative(moment, now)


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False)


def short_time(text: str | None) -> str:
    """`2026-12-01 10:00:05Z` for a stored instant (seconds, no microseconds)."""
    if not text:
        return ""
    try:
        return parse_iso(text).strftime("%Y-%m-%d %H:%M:%SZ")
    except ValueError:
        return text


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("engine.web", "templates"),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pretty"] = pretty
    env.filters["when"] = short_time
    return env


_ENV: jinja2.Environment | None = None


def page(template: str, now: datetime, status: int = 200, **context: Any) -> web.Response:
    """The rendered template as an HTML answer with the page headers; relative times
    read from `now` (the runtime's clock)."""
    global _ENV
    if _ENV is None:
        _ENV = environment()
    text = _ENV.get_template(template).render(now=now, ago=lambda t: relative(t, now), **context)
    return web.Response(
        text=text, status=status, content_type="text/html", charset="utf-8", headers=PAGE_HEADERS
    )
