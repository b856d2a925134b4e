"""The inbox shows notifications with their delivery state (docs/web.md#notifications),
in Debian's chromium driven by Playwright, over a real `engine serve` whose sinks are
an Apprise `json://` endpoint and a signed webhook on a loopback receiver.

With ENGINE_SCREENSHOTS=docs/images the screenshot replaces the one docs/web.md shows."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import ROOT, Serve
from receivers import SECRET, Receiver

pytest.importorskip("playwright")  # the test extra installs it; CI fails without it

from playwright.sync_api import Browser, Page, sync_playwright

WEB_TREE = ROOT / "tests" / "data" / "web"
CHROMIUM = os.environ.get("ENGINE_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)")
    with sync_playwright() as playwright:
        found = playwright.chromium.launch(executable_path=CHROMIUM)
        yield found
        found.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield context.new_page()
    context.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver().start()
    yield found
    found.stop()


def resume(serve: Serve, loop: str) -> None:
    """Pause and resume `loop`: the resume is announced."""
    for action in ("pause", "resume"):
        status, answer = serve.request(
            "POST", f"/schedules/{loop}/{action}", {"note": "a look"}, token=serve.token("alice")
        )
        assert status == 200, answer


def delivery_of(page: Page, seq: int, sink: str | None = None) -> str:
    where = f"#n-{seq} > .delivery" if sink is None else f"#n-{seq} [data-sink='{sink}'] .delivery"
    return page.locator(where).inner_text()


def promote_a_finding(serve: Serve) -> None:
    """Run spot-check now (its triage records a finding) and promote the finding: the
    promotion is announced."""
    token = serve.token("alice")
    status, answer = serve.request("POST", "/schedules/spot-check/trigger", token=token)
    assert status == 202, answer
    found = serve.wait_for("/findings", lambda a: a["findings"], token)
    finding = found["findings"][0]["findingId"]
    status, answer = serve.request("POST", f"/findings/{finding}/promote", {}, token=token)
    assert status == 200, answer


def state_of(serve: Serve, seq: int) -> tuple[str, int]:
    status, answer = serve.request("GET", "/notifications", token=serve.token("alice"))
    assert status == 200
    found = next(n for n in answer["notifications"] if n["seq"] == seq)
    return found["delivery"], found["attempts"]


def test_the_inbox_shows_each_notification_with_its_delivery_state(
    serve_factory: Callable[..., Serve],
    receiver: Receiver,
    page: Page,
    tmp_path: Path,
) -> None:
    """Three notifications: one every sink took (delivered); one the webhook refused at
    both its attempts (failed, beside the Apprise sink that took it, with the
    refusal's reason); one refused once and waiting for its retry (pending, one
    attempt). The inbox shows each, its own page filters them by delivery, and neither
    scrolls sideways on a phone."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "notifications.yaml").write_text("delivery:\n  attempts: 2\n  backoff: 1h\n")
    env = {
        "ENGINE_OPERATOR_TOKEN": "alice:alice-token",
        "WEB_SCRIPTS": str(WEB_TREE / "scripts"),
        "ENGINE_NOTIFY_URLS": f"json://127.0.0.1:{receiver.port}/json",
        "ENGINE_NOTIFY_WEBHOOK": receiver.url("/hook"),
        "ENGINE_NOTIFY_WEBHOOK_SECRET": SECRET,
    }
    db = tmp_path / "engine.db"

    def start(now: str) -> Serve:  # serve on one database, its clock at `now`
        return serve_factory(
            WEB_TREE, {**env, "ENGINE_NOW": now}, "--config", str(config), "--db", str(db)
        )

    receiver.answer("/hook", 200, 503, 503, 503)
    first = start("2026-12-01T09:00:00Z")
    resume(first, "hourly")  # 1: delivered
    first.wait_for("/notifications?delivery=delivered", lambda a: a["notifications"], "alice-token")
    resume(first, "spot-check")  # 2: refused once, retried in an hour
    receiver.wait_for("/hook", 2)
    first.stop()
    # two hours later: the retry of 2 is refused too (failed); 3 is refused once
    later = start("2026-12-01T11:00:00Z")
    receiver.wait_for("/hook", 3)
    later.wait_for("/notifications?delivery=failed", lambda a: a["notifications"], "alice-token")
    promote_a_finding(later)
    receiver.wait_for("/hook", 4)
    later.wait_for(
        "/notifications?delivery=pending",
        lambda a: a["notifications"] and a["notifications"][0]["attempts"] == 1,
        "alice-token",
    )
    assert [state_of(later, n) for n in (1, 2, 3)] == [
        ("delivered", 1),
        ("failed", 2),
        ("pending", 1),
    ]

    page.goto(later.url + "/")
    page.fill("#token", "alice-token")
    with page.expect_navigation():
        page.locator("button:has-text('Sign in')").click()
    page.wait_for_selector("#notices-title")
    assert [delivery_of(page, n) for n in (1, 2, 3)] == ["delivered", "failed", "pending"]
    assert delivery_of(page, 2, "url-1") == "delivered"
    assert delivery_of(page, 2, "webhook") == "failed"
    refused = page.locator("#n-2 [data-sink='webhook']")
    assert "2 attempts" in refused.inner_text()
    assert "answered 503" in refused.locator(".error").inner_text()
    waiting = page.locator("#n-3 [data-sink='webhook']")
    assert "1 attempt" in waiting.inner_text() and "next" in waiting.inner_text()
    where = Path(os.environ.get("ENGINE_SCREENSHOTS") or tmp_path)
    page.locator("section.notifications").screenshot(path=str(where / "web-notifications.png"))

    with page.expect_navigation():
        page.locator("a.button:has-text('All notifications')").click()
    page.select_option("select[name=delivery]", "failed")
    with page.expect_navigation():
        page.locator("button:has-text('Filter')").click()
    assert page.locator("li.notice").count() == 1
    assert delivery_of(page, 2) == "failed"
    page.set_viewport_size({"width": 390, "height": 844})
    for path in ("/", "/ui/notifications"):  # long errors and sink rows wrap on a phone
        page.goto(later.url + path)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), path
