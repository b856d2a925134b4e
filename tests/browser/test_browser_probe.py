"""The browser probe (engine.adapters.browser, docs/rules.md#browser-probes) in Debian's
chromium against pages this module serves itself on loopback: an allowed site, and
an "elsewhere" site on another port that the probe's allowlist never admits, which
counts every request that reaches it. One Chromium serves the whole module, a fresh
context per probe run."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp import web
from loopback import served

pytest.importorskip("playwright")  # the test extra installs it; CI fails without it

from engine.adapters.browser import NEEDS_PLAYWRIGHT, Chromium, chromium_path, run_browser_probe
from engine.core.browsing import (
    BrowserFailure,
    BrowserObservation,
    BrowserSpec,
    LoginMarkers,
    parse_target,
)

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
LOGIN = LoginMarkers(urls=(r"/login\b", r"/sso/"), texts=("Your session has expired",))


def page(body: str, head: str = "") -> web.Response:
    html = f"<!doctype html><html><head>{head}</head><body>{body}</body></html>"
    return web.Response(text=html, content_type="text/html")


@dataclass
class Site:
    """What the allowed site serves (`state` is the changing page's text), and the
    requests the elsewhere site received."""

    base: str = ""
    elsewhere: str = ""
    state: dict[str, str] = field(default_factory=lambda: {"status": "All systems operational"})
    minutes: list[int] = field(default_factory=lambda: [1])
    reached: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)

    def spec(self, path: str, **changes: object) -> BrowserSpec:
        allow = (parse_target(f"{self.base}/status"), parse_target(f"{self.base}/login"))
        spec = BrowserSpec(
            "vendor-status", f"{self.base}{path}", allow, "main", login=LOGIN, timeout_seconds=5
        )
        return replace(spec, **changes)  # type: ignore[arg-type]


def allowed_app(site: Site) -> web.Application:
    async def changing(_: web.Request) -> web.Response:
        return page(f"<nav>Sign in</nav><main><h1>Status</h1><p>{site.state['status']}</p></main>")

    async def clock(_: web.Request) -> web.Response:
        site.minutes[0] += 1  # every load shows another relative time
        return page(f"<main><p>Operational</p><p>Updated {site.minutes[0]} minutes ago</p></main>")

    async def private(_: web.Request) -> web.Response:
        raise web.HTTPFound("/login?next=/status/private")

    async def login(_: web.Request) -> web.Response:
        return page("<form><label>Token <input name=t></label><button>Sign in</button></form>")

    async def embeds(_: web.Request) -> web.Response:
        img = f'<img src="{site.elsewhere}/pixel.png"><img src="/status/logo.png">'
        script = f'<script>fetch("{site.elsewhere}/beacon").catch(() => null)</script>'
        hop = '<script src="/status/hop.js"></script>'
        return page(f"<main><p>Operational</p>{img}</main>{script}{hop}")

    async def logo(_: web.Request) -> web.Response:
        site.images.append("/status/logo.png")
        return web.Response(body=b"GIF89a", content_type="image/gif")

    async def hop(_: web.Request) -> web.Response:
        raise web.HTTPFound(f"{site.elsewhere}/tracker.js")

    async def away(_: web.Request) -> web.Response:
        raise web.HTTPFound(f"{site.elsewhere}/status/moved")

    async def sso(_: web.Request) -> web.Response:
        raise web.HTTPFound(f"{site.elsewhere}/sso/authorize?client=status")

    async def bare(_: web.Request) -> web.Response:
        return page("<div>No main element here</div>")

    async def slow(_: web.Request) -> web.Response:
        await asyncio.sleep(2.5)
        return page("<main>late</main>")

    app = web.Application()
    for path, handler in {
        "/status/changing": changing,
        "/status/clock": clock,
        "/status/private": private,
        "/login": login,
        "/status/embeds": embeds,
        "/status/logo.png": logo,
        "/status/hop.js": hop,
        "/status/away": away,
        "/status/sso": sso,
        "/status/bare": bare,
        "/status/slow": slow,
    }.items():
        app.router.add_get(path, handler)
    return app


def elsewhere_app(site: Site) -> web.Application:
    async def anything(request: web.Request) -> web.Response:
        site.reached.append(request.path)
        return page("<main>elsewhere</main>")

    app = web.Application()
    app.router.add_get("/{tail:.*}", anything)
    return app


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    found = Site()
    with served(allowed_app(found)) as base, served(elsewhere_app(found)) as elsewhere:
        found.base, found.elsewhere = base, elsewhere
        yield found


@pytest.fixture(scope="module")
def chromium() -> Iterator[Chromium]:
    if not Path(chromium_path()).exists():
        pytest.fail(f"no chromium at {chromium_path()} (apt-get install chromium; .ci/run does)")
    with Chromium() as browser:
        yield browser


def observe(chromium: Chromium, spec: BrowserSpec) -> BrowserObservation:
    return run_browser_probe(spec, NOW, chromium)


def test_a_page_whose_text_changes_changes_the_fingerprint(site: Site, chromium: Chromium) -> None:
    """The fingerprint is of the selected element's text: the same page gives the same
    one, a changed status another; the nav outside `main` counts for nothing."""
    spec = site.spec("/status/changing")
    first, again = observe(chromium, spec), observe(chromium, spec)
    site.state["status"] = "Major outage in eu-west"
    changed = observe(chromium, spec)
    assert first.projection is not None and first.failure is None
    assert first.projection.text == "Status\nAll systems operational"
    assert first.fingerprint == again.fingerprint != changed.fingerprint
    assert first.login_required is changed.login_required is False
    assert changed.final_url == f"{site.base}/status/changing"


def test_a_relative_timestamp_that_ignore_patterns_removes_keeps_the_fingerprint(
    site: Site, chromium: Chromium
) -> None:
    """A relative time ("Updated N minutes ago") differs on every load; with it ignored
    the fingerprint holds, without it the fingerprint moves."""
    ignoring = site.spec("/status/clock", ignore_patterns=(r"Updated \d+ minutes? ago",))
    held = {observe(chromium, ignoring).fingerprint for _ in range(2)}
    moved = {observe(chromium, site.spec("/status/clock")).fingerprint for _ in range(2)}
    assert len(held) == 1 and None not in held
    assert len(moved) == 2


def test_a_redirect_to_a_login_url_reports_login_required(site: Site, chromium: Chromium) -> None:
    """A page that redirects to /login (a login URL pattern, on the allowlist) is
    "authentication required", not a selector failure, and has no projection."""
    seen = observe(chromium, site.spec("/status/private"))
    assert (seen.login_required, seen.failure, seen.projection) == (True, None, None)
    assert seen.final_url == f"{site.base}/login?next=/status/private"


def test_a_redirect_to_a_login_url_off_the_allowlist_is_login_required_and_never_opened(
    site: Site, chromium: Chromium
) -> None:
    """A redirect to a single sign-on host off the list is refused before it leaves the
    browser; its URL still reads as a login marker."""
    before = len(site.reached)
    seen = observe(chromium, site.spec("/status/sso"))
    assert (seen.login_required, seen.failure) == (True, None)
    assert site.reached[before:] == []


def test_subresources_and_redirects_off_the_allowlist_are_blocked(
    site: Site, chromium: Chromium
) -> None:
    """An image, a fetch, and an allowed script that redirects elsewhere never reach
    the other site; the page itself still loads and is fingerprinted, and the refused
    URLs are named. The page's own redirect elsewhere is navigation_blocked. Images are
    not loaded even from the allowed site."""
    before = len(site.reached)
    seen = observe(chromium, site.spec("/status/embeds"))
    assert seen.failure is None and seen.projection is not None
    assert seen.projection.text == "Operational"
    assert {f"{site.elsewhere}/pixel.png", f"{site.elsewhere}/tracker.js"} <= set(seen.blocked)
    assert site.images == []
    moved = observe(chromium, site.spec("/status/away"))
    assert moved.failure is BrowserFailure.NAVIGATION_BLOCKED
    assert moved.blocked == (f"{site.elsewhere}/status/moved",)
    assert site.reached[before:] == []


def test_a_missing_selector_is_a_typed_failure(site: Site, chromium: Chromium) -> None:
    """A page without the element waits for it until the timeout, then fails as
    selector_missing with a diagnostic that names the selector."""
    seen = observe(chromium, site.spec("/status/bare", timeout_seconds=1))
    assert seen.failure is BrowserFailure.SELECTOR_MISSING and seen.projection is None
    assert seen.diagnostic is not None and "'main'" in seen.diagnostic


def test_a_page_slower_than_the_timeout_is_a_timeout(site: Site, chromium: Chromium) -> None:
    """A page that does not answer within the probe's timeout fails as `timeout`."""
    seen = observe(chromium, site.spec("/status/slow", timeout_seconds=1))
    assert seen.failure is BrowserFailure.TIMEOUT and seen.projection is None
    assert seen.diagnostic == f"{site.base}/status/slow did not load within 1s"


def test_without_playwright_the_probe_fails_in_one_line(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With Playwright not installed the observation is `unavailable`, its diagnostic
    the install hint, and nothing raises."""
    monkeypatch.setitem(sys.modules, "playwright.sync_api", None)
    seen = run_browser_probe(site.spec("/status/changing"), NOW)
    assert (seen.failure, seen.diagnostic) == (BrowserFailure.UNAVAILABLE, NEEDS_PLAYWRIGHT)


def test_without_chromium_the_probe_fails_in_one_line(
    site: Site, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """ENGINE_CHROMIUM naming no browser makes the observation `unavailable`, saying
    where it looked."""
    monkeypatch.setenv("ENGINE_CHROMIUM", str(tmp_path / "chromium"))
    seen = run_browser_probe(site.spec("/status/changing"), NOW)
    assert seen.failure is BrowserFailure.UNAVAILABLE
    assert seen.diagnostic == f"no Chromium at {tmp_path / 'chromium'} (set ENGINE_CHROMIUM)"
