"""Running a browser probe (docs/rules.md#browser-probes): one page in headless
Chromium through Playwright for Python, the optional extra `engine[browser]`.

Every run has a fresh browser context (no cookies, no storage, service workers
blocked, downloads refused). Every HTTP(S) request and WebSocket of the context passes
the probe's allowlist (engine.core.browsing.allows) first; a request off the list is
aborted before it leaves the browser. Chromium follows redirects inside its network
stack, where Playwright cannot stop them, so the gate fetches each allowed request
itself without following redirects: a redirect of the page is opened as a new
navigation (held to the list again), a redirect of anything else is followed hop by
hop, each hop checked, and the last answer handed to the page. Images, media and fonts
are never loaded: the text does not need them.

Playwright's sync API is used: call `run_browser_probe` (or `Chromium.probe`) from a
thread without a running asyncio loop, as the probe pool's threads are. Chromium is
the system's, launched by its path (ENGINE_CHROMIUM, default /usr/bin/chromium);
browsers are never downloaded."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from engine.core.browsing import (
    BLOCKED_MAX,
    BrowserFailure,
    BrowserObservation,
    BrowserSpec,
    allows,
    bounded,
    login_required,
    project,
)
from engine.errors import EngineError

if TYPE_CHECKING:
    from playwright.sync_api import (
        Browser,
        Page,
        Playwright,
        Request,
        Route,
        WebSocketRoute,
    )

CHROMIUM = "/usr/bin/chromium"
NEEDS_PLAYWRIGHT = "the browser probe needs Playwright: pip install 'engine[browser]'"
MAX_HOPS = 10  # redirects one request may follow
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
# What a probe never loads: its text does not need them (and they are the largest).
_UNREAD = frozenset({"image", "media", "font"})
_TEXT = "(node, most) => (node.innerText || node.textContent || '').slice(0, most)"
_BODY = "(most) => document.body ? (document.body.innerText || '').slice(0, most) : ''"


class BrowserUnavailable(EngineError):
    """Playwright is not installed, or Chromium cannot be started."""

    code = "browser_unavailable"


def chromium_path(environ: Mapping[str, str] | None = None) -> str:
    """The Chromium a probe launches: ENGINE_CHROMIUM, else /usr/bin/chromium."""
    return (os.environ if environ is None else environ).get("ENGINE_CHROMIUM") or CHROMIUM


def run_browser_probe(
    spec: BrowserSpec, now: datetime, chromium: Chromium | None = None
) -> BrowserObservation:
    """Open `spec`'s page once and report what it showed at `now`: in `chromium` when
    given (one launched browser serves many probes), else in a Chromium launched for
    this run alone. Never raises for a page, a network or a missing browser: each is a
    typed failure of the observation."""
    if chromium is not None:
        return chromium.probe(spec, now)
    try:
        with Chromium() as fresh:
            return fresh.probe(spec, now)
    except BrowserUnavailable as err:
        return BrowserObservation(
            spec.probe, now, failure=BrowserFailure.UNAVAILABLE, diagnostic=err.message
        )


class Chromium:
    """A headless Chromium, launched on entering and closed on leaving, that runs
    browser probes one after another, each in a fresh context."""

    def __init__(self, executable: str | None = None) -> None:
        self.executable = executable or chromium_path()
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None

    def __enter__(self) -> Chromium:
        try:
            from playwright.sync_api import Error, sync_playwright
        except ImportError:
            raise BrowserUnavailable(NEEDS_PLAYWRIGHT) from None
        if not Path(self.executable).is_file():
            raise BrowserUnavailable(f"no Chromium at {self.executable} (set ENGINE_CHROMIUM)")
        self._playwright = sync_playwright().start()
        try:
            self._browser = self._playwright.chromium.launch(
                executable_path=self.executable, headless=True
            )
        except Error as err:
            self._playwright.stop()
            raise BrowserUnavailable(
                f"Chromium at {self.executable} did not start: {_first_line(err)}"
            ) from None
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._browser is not None:
            self._browser.close()
        if self._playwright is not None:
            self._playwright.stop()
        self._browser = self._playwright = None

    def probe(self, spec: BrowserSpec, now: datetime) -> BrowserObservation:
        """One run of `spec` in a fresh context of this browser."""
        if self._browser is None:
            raise RuntimeError("Chromium.probe outside its `with` block")
        from playwright.sync_api import Error

        gate = _Gate(spec, time.monotonic() + spec.timeout_seconds)
        try:
            context = self._browser.new_context(service_workers="block", accept_downloads=False)
            context.route("**/*", gate.request)
            context.route_web_socket(lambda url: True, gate.socket)
            page = context.new_page()
        except Error as err:  # the browser is gone (crashed, or killed)
            return BrowserObservation(
                spec.probe,
                now,
                failure=BrowserFailure.UNAVAILABLE,
                diagnostic=bounded(f"Chromium did not open a page: {_first_line(err)}"),
            )
        try:
            return _Visit(spec, now, gate, page).run()
        finally:
            with suppress(Error):
                context.close()


@dataclass
class _Gate:
    """The context's route handlers: the allowlist, and redirects taken apart."""

    spec: BrowserSpec
    deadline: float
    page: Page | None = None
    blocked: list[str] = field(default_factory=list)
    redirect: str | None = None  # where the page's own navigation was redirected
    refused: str | None = None  # the page's own navigation the list refused

    def left_ms(self) -> float:
        return max(1.0, (self.deadline - time.monotonic()) * 1000)

    def late(self) -> bool:
        return time.monotonic() >= self.deadline

    def request(self, route: Route, request: Request) -> None:
        if not allows(self.spec.allow, request.url):
            self._block(request.url)
            if self._is_page(request):
                self.refused = request.url
            _abort(route, "blockedbyclient")
        elif request.resource_type in _UNREAD:
            _abort(route, "blockedbyclient")
        else:
            self._fetch(route, request)

    def socket(self, socket: WebSocketRoute) -> None:
        if allows(self.spec.allow, socket.url):
            socket.connect_to_server()
        else:
            self._block(socket.url)
            socket.close()

    def _fetch(self, route: Route, request: Request) -> None:
        from playwright.sync_api import Error

        url = request.url
        try:
            response = route.fetch(max_redirects=0, timeout=self.left_ms())
            for _ in range(MAX_HOPS):
                target = response.headers.get("location")
                if response.status not in _REDIRECTS or not target:
                    route.fulfill(response=response)
                    return
                url = urljoin(url, target)
                if self._is_page(request):  # opened again by the visit, through this gate
                    self.redirect = url
                    _abort(route, "aborted")
                    return
                if not allows(self.spec.allow, url):
                    self._block(url)
                    _abort(route, "blockedbyclient")
                    return
                response = route.fetch(url=url, max_redirects=0, timeout=self.left_ms())
            _abort(route, "failed")  # more hops than MAX_HOPS
        except Error:
            _abort(route, "failed")

    def _is_page(self, request: Request) -> bool:
        from playwright.sync_api import Error

        try:
            return (
                request.is_navigation_request()
                and self.page is not None
                and request.frame == self.page.main_frame
            )
        except Error:  # a request of no frame (a worker's): not the page's
            return False

    def _block(self, url: str) -> None:
        shown = bounded(url, 200)
        if shown not in self.blocked and len(self.blocked) < BLOCKED_MAX:
            self.blocked.append(shown)


@dataclass
class _Visit:
    """One probe run's navigation, login checks and extraction."""

    spec: BrowserSpec
    now: datetime
    gate: _Gate
    page: Page

    def run(self) -> BrowserObservation:
        from playwright.sync_api import Error, TimeoutError

        self.gate.page = self.page
        try:
            return self._open(self.spec.url, 0)
        except TimeoutError:
            return self._failed(BrowserFailure.TIMEOUT, self._late())
        except Error as err:
            if self.gate.late():  # the gate's own fetch ran out of time first
                return self._failed(BrowserFailure.TIMEOUT, self._late())
            return self._failed(BrowserFailure.NAVIGATION_FAILED, _first_line(err))

    def _open(self, url: str, hops: int) -> BrowserObservation:
        from playwright.sync_api import Error

        self.gate.redirect = self.gate.refused = None
        try:
            response = self.page.goto(url, timeout=self.gate.left_ms(), wait_until="load")
        except Error:
            if self.gate.redirect is not None and hops < MAX_HOPS:
                return self._open(self.gate.redirect, hops + 1)
            if self.gate.refused is not None:
                return self._refused(self.gate.refused)
            if self.gate.redirect is not None:
                return self._failed(BrowserFailure.NAVIGATION_FAILED, "too many redirects")
            raise
        final = self.page.url
        if login_required(self.spec.login, final, ""):
            return self._observed(final, login=True)
        if response is not None and response.status >= 400:
            if login_required(self.spec.login, final, self._body()):
                return self._observed(final, login=True)
            return self._failed(BrowserFailure.NAVIGATION_FAILED, f"HTTP {response.status}")
        return self._extract(final)

    def _refused(self, url: str) -> BrowserObservation:
        if login_required(self.spec.login, url, ""):
            return self._observed(url, login=True)
        return self._failed(
            BrowserFailure.NAVIGATION_BLOCKED, f"{bounded(url, 200)} is outside the allowlist"
        )

    def _extract(self, final: str) -> BrowserObservation:
        from playwright.sync_api import Error, TimeoutError

        selector = "css=" + self.spec.selector
        try:
            node = self.page.query_selector(selector)
            if node is None:
                if login_required(self.spec.login, final, self._body()):
                    return self._observed(final, login=True)
                node = self.page.wait_for_selector(
                    selector, state="attached", timeout=self.gate.left_ms()
                )
        except TimeoutError:
            if login_required(self.spec.login, self.page.url, self._body()):
                return self._observed(self.page.url, login=True)
            return self._failed(
                BrowserFailure.SELECTOR_MISSING,
                f"no element matches {self.spec.selector!r} on {bounded(self.page.url, 200)}",
            )
        except Error as err:
            return self._failed(BrowserFailure.SELECTOR_INVALID, _first_line(err))
        assert node is not None  # wait_for_selector(state="attached") returns one or raises
        text = str(node.evaluate(_TEXT, self.spec.max_chars + 1))
        if login_required(self.spec.login, final, text):
            return self._observed(final, login=True)
        observed = self._observed(final, text=text[: self.spec.max_chars])
        if len(text) > self.spec.max_chars and observed.projection is not None:
            cut = replace(observed.projection, truncated=True)  # the page had more to say
            return replace(observed, projection=cut)
        return observed

    def _body(self) -> str:
        from playwright.sync_api import Error

        try:
            return str(self.page.evaluate(_BODY, self.spec.max_chars))
        except Error:
            return ""

    def _observed(
        self, final: str, login: bool = False, text: str | None = None
    ) -> BrowserObservation:
        return BrowserObservation(
            self.spec.probe,
            self.now,
            projection=None if text is None else project(text, self.spec),
            final_url=final,
            login_required=login,
            blocked=tuple(self.gate.blocked),
        )

    def _failed(self, failure: BrowserFailure, diagnostic: str) -> BrowserObservation:
        url = self.page.url
        return BrowserObservation(
            self.spec.probe,
            self.now,
            final_url=None if url == "about:blank" else url,
            failure=failure,
            diagnostic=bounded(diagnostic),
            blocked=tuple(self.gate.blocked),
        )

    def _late(self) -> str:
        return f"{bounded(self.spec.url, 200)} did not load within {self.spec.timeout_seconds}s"


def _abort(route: Route, reason: str) -> None:
    """Abort `route`; a route whose page has gone already is aborted."""
    from playwright.sync_api import Error

    with suppress(Error):
        route.abort(reason)


def _first_line(err: Any) -> str:
    message = str(getattr(err, "message", err)).strip()
    return message.splitlines()[0] if message else type(err).__name__
