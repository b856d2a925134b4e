"""The operator's web pages in a real browser: a real `engine serve` over
tests/data/web and Debian's chromium, driven by Playwright for Python
(docs/web.md#testing). Browsers are never downloaded: the
system's chromium is launched by its path (ENGINE_CHROMIUM, default /usr/bin/chromium).

Screenshots land in `tmp_path`; with ENGINE_SCREENSHOTS=docs/images they replace the
ones the docs and the README show."""

from __future__ import annotations

import http.client
import itertools
import os
import re
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import EVENT_SECRET, OPERATOR_TOKENS, ROOT, Serve, launch_serve

pytest.importorskip("playwright")  # the test extra installs it; CI fails without it

from playwright.sync_api import Browser, BrowserContext, Locator, Page, sync_playwright

WEB_TREE = ROOT / "tests" / "data" / "web"
CHROMIUM = os.environ.get("ENGINE_CHROMIUM", "/usr/bin/chromium")
_ids = itertools.count(1)


@pytest.fixture(scope="module")
def web_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """One `engine serve` over tests/data/web for a module, with operator tokens, its
    clock three seconds before the hourly loop's 10:00 slot (which it then fires)."""
    env = {
        "ENGINE_NOW": "2026-12-01T09:59:57Z",
        "ENGINE_EVENT_SECRET": EVENT_SECRET,
        "ENGINE_OPERATOR_TOKEN": ",".join(f"{k}:{v}" for k, v in OPERATOR_TOKENS.items()),
        "WEB_SCRIPTS": str(WEB_TREE / "scripts"),
        "ENGINE_CONTROLLER_TOKEN": "agent:agent-token",
    }
    serve = launch_serve(tmp_path_factory.mktemp("web"), WEB_TREE, env)
    yield serve
    serve.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)")
    with sync_playwright() as playwright:
        found = playwright.chromium.launch(executable_path=CHROMIUM)
        yield found
        found.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    """A fresh browser profile (no cookies) per test."""
    found = browser.new_context(viewport={"width": 1280, "height": 900})
    yield found
    found.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


def sign_in(page: Page, serve: Serve, name: str = "alice", to: str = "/") -> None:
    """Sign in through the form, as an operator would."""
    page.goto(serve.url + to)
    page.fill("#token", serve.token(name))
    follow(page, page.locator("button:has-text('Sign in')"))
    page.wait_for_selector("text=Sign out")


def propose(serve: Serve, event_type: str = "web.greet.requested", **payload: Any) -> str:
    """Admit an event through POST /inject; the id of the proposal it opened."""
    event_id = f"web-{time.time_ns()}-{next(_ids)}"
    doc = {
        "eventId": event_id,
        "type": event_type,
        "source": "manual",
        "occurredAt": "2026-12-01T09:00:00Z",
        "payload": payload or {"name": "world"},
    }
    status, answer = serve.request("POST", "/inject", doc)
    assert status == 202, answer
    token = serve.token("alice")
    found = serve.wait_for(
        "/proposals",
        lambda a: any(p["eventId"] == event_id for p in a["proposals"]),
        token,
    )
    return str(next(p["proposalId"] for p in found["proposals"] if p["eventId"] == event_id))


def follow(page: Page, target: Locator) -> None:
    """Click what loads another page, and wait until that page has loaded (never read
    the page being left)."""
    with page.expect_navigation():
        target.click()


def screenshot(page: Page, tmp_path: Path, name: str) -> Path:
    """A full-page screenshot under docs/images when ENGINE_SCREENSHOTS says so."""
    where = Path(os.environ.get("ENGINE_SCREENSHOTS") or tmp_path)
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def journal_of(serve: Serve, entity: str, entity_id: str) -> list[dict[str, Any]]:
    status, answer = serve.request(
        "GET", f"/journal?entity={entity}&entityId={entity_id}", token=serve.token("alice")
    )
    assert status == 200, answer
    return list(answer["entries"])


def proposal_of(serve: Serve, proposal_id: str) -> dict[str, Any]:
    status, answer = serve.request("GET", f"/proposals/{proposal_id}", token=serve.token("bob"))
    assert status == 200, answer
    return dict(answer["proposal"])


def no_horizontal_scroll(page: Page) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


# ---- sessions -------------------------------------------------------------------------


def test_a_request_without_a_session_is_sent_to_the_sign_in_page(
    web_serve: Serve, page: Page
) -> None:
    """Every page needs a session: without one the browser lands on the sign-in form,
    which brings the operator back to the page asked for."""
    for path in ("/", "/ui/schedules", "/ui/runs", "/ui/journal", "/ui/findings"):
        page.goto(web_serve.url + path)
        assert page.url.startswith(web_serve.url + "/ui/signin?next=")
        assert page.locator("#token").get_attribute("type") == "password"
    page.fill("#token", web_serve.token("alice"))
    follow(page, page.locator("button:has-text('Sign in')"))
    page.wait_for_url(web_serve.url + "/ui/findings")
    assert page.locator(".who").inner_text() == "operator:alice"


def test_a_wrong_token_opens_no_session(web_serve: Serve, page: Page) -> None:
    """A token that is no operator's is refused (401) and the pages stay closed."""
    page.goto(web_serve.url + "/ui/signin")
    page.fill("#token", "not-a-token")
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.click("button:has-text('Sign in')")
    assert answer.value.status == 401
    assert "not an operator's token" in page.inner_text("[role=alert]")
    page.goto(web_serve.url + "/")
    assert "/ui/signin" in page.url


def test_the_session_cookie_is_httponly_and_same_site_strict(
    web_serve: Serve, context: BrowserContext, page: Page
) -> None:
    """The session lives in an HttpOnly, SameSite=Strict cookie that scripts cannot
    read; signing out ends it."""
    sign_in(page, web_serve)
    cookies = {c["name"]: c for c in context.cookies()}
    session = cookies["engine_session"]
    assert session["httpOnly"] is True and session["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""
    follow(page, page.locator("button:has-text('Sign out')"))
    page.wait_for_url("**/ui/signin")
    page.goto(web_serve.url + "/ui/runs")
    assert "/ui/signin" in page.url


def test_pages_forbid_inline_scripts(web_serve: Serve, page: Page) -> None:
    """Every page carries a Content-Security-Policy without inline scripts, and has
    none: its only script is a file of the site."""
    sign_in(page, web_serve)
    for path in ("/", "/ui/schedules", "/ui/loops/hourly", "/ui/runs", "/ui/journal"):
        answer = page.goto(web_serve.url + path)
        assert answer is not None and answer.status == 200
        policy = answer.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy
        assert "frame-ancestors 'none'" in policy
        scripts = page.eval_on_selector_all("script", "s => s.map(e => [e.src, e.text])")
        assert scripts and all(src and not text.strip() for src, text in scripts)


def test_a_post_without_the_csrf_token_is_refused(
    web_serve: Serve, context: BrowserContext, page: Page
) -> None:
    """A form post without the session's CSRF token (or with another) is a 403 and
    changes nothing, even with the session cookie."""
    proposal_id = propose(web_serve, name="csrf")
    sign_in(page, web_serve)
    url = f"{web_serve.url}/ui/proposals/{proposal_id}/approve"
    for form in ({"note": "sneaky"}, {"note": "sneaky", "csrf": "forged"}):
        answer = context.request.post(url, form=form, max_redirects=0)
        assert answer.status == 403
        assert "CSRF" in answer.text()
    assert proposal_of(web_serve, proposal_id)["state"] == "open"


# ---- the inbox ------------------------------------------------------------------------


def wait_for_run(serve: Serve, run_id: str) -> dict[str, Any]:
    found = serve.wait_for(
        f"/runs/{run_id}",
        lambda a: a["run"]["state"] in ("succeeded", "failed"),
        serve.token("alice"),
        within=30,
    )
    return dict(found["run"])


def test_approving_a_watched_proposal_runs_it_as_the_operator(
    web_serve: Serve, page: Page, tmp_path: Path
) -> None:
    """The inbox shows what will run (the argv filled from the payload, the rule, the
    marks); approving it from its page queues the run, the run happens, and the
    journal names operator:alice."""
    proposal_id = propose(web_serve, name="ada")
    sign_in(page, web_serve)
    card = page.locator(f"#p-{proposal_id}")
    assert "--name=ada" in card.locator(".argv").inner_text()
    assert "mutating" in card.inner_text()
    follow(page, card.locator("a:has-text('Open')"))
    assert "loops/web.rules:3:1" in page.inner_text("body")  # its place (docs/rules.md#places)
    assert "route web.greet.requested" in page.inner_text("pre.rule")
    screenshot(page, tmp_path, "web-proposal")
    page.fill("#approve-note", "looks right")
    follow(page, page.locator("form[action$='/approve'] button"))
    flash = page.inner_text(".flash")
    assert f"Approved {proposal_id}" in flash
    run_id = flash.split("run ")[1].split(" ")[0]
    run = wait_for_run(web_serve, run_id)
    assert run["state"] == "succeeded" and run["approvedBy"] == "operator:alice"
    approved = [
        e for e in journal_of(web_serve, "proposal", proposal_id) if e["action"] == "approved"
    ]
    assert [e["actor"] for e in approved] == ["operator:alice"]
    assert approved[0]["note"] == "looks right"
    page.goto(f"{web_serve.url}/ui/runs/{run_id}")
    assert "hello, ada" in page.inner_text("pre.output")
    assert "greeted ada" in page.inner_text("body")
    screenshot(page, tmp_path, "web-run")


def test_rejecting_a_proposal_needs_a_reason_and_records_the_operator(
    web_serve: Serve, page: Page
) -> None:
    """Rejecting from a proposal's page records the reason and operator:bob."""
    proposal_id = propose(web_serve, name="grace")
    sign_in(page, web_serve, "bob", f"/ui/proposals/{proposal_id}")
    page.fill("#reject-note", "not today")
    follow(page, page.locator("form[action$='/reject'] button"))
    assert f"Rejected {proposal_id}" in page.inner_text(".flash")
    found = proposal_of(web_serve, proposal_id)
    assert found["state"] == "rejected" and found["decidedBy"] == "operator:bob"
    assert found["note"] == "not today"


def test_several_proposals_are_approved_at_once(
    web_serve: Serve, page: Page, tmp_path: Path
) -> None:
    """Selecting several proposals in the inbox approves them all in one post, each
    journaled as the operator."""
    shipping = propose(web_serve, "web.ship.requested", version="v2")  # human-only: stays
    ids = [propose(web_serve, name=f"bulk{n}") for n in range(3)]
    sign_in(page, web_serve)
    for proposal_id in ids:
        page.check(f"input[name=id][value='{proposal_id}']")
    page.fill(".bulk input[name=note]", "batch")
    screenshot(page, tmp_path, "web-inbox")
    follow(page, page.locator("button:has-text('Approve selected')"))
    assert "Approved 3" in page.inner_text(".flash")
    for proposal_id in ids:
        found = proposal_of(web_serve, proposal_id)
        assert found["state"] == "approved" and found["decidedBy"] == "operator:alice"
    assert proposal_of(web_serve, shipping)["state"] == "open"


def test_a_human_only_proposal_is_approved_one_at_a_time_after_a_confirm_step(
    web_serve: Serve, context: BrowserContext, page: Page
) -> None:
    """A human-only proposal has no box to select; a bulk post naming it leaves it open;
    its own Approve asks for confirmation first, and only the confirm approves it."""
    proposal_id = propose(web_serve, "web.ship.requested", version="v7")
    sign_in(page, web_serve)
    card = page.locator(f"#p-{proposal_id}")
    assert "human-only" in card.inner_text()
    assert card.locator("input[name=id]").count() == 0
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    answer = context.request.post(
        f"{web_serve.url}/ui/proposals",
        form={"csrf": csrf or "", "action": "approve", "id": proposal_id},
    )
    assert answer.status == 200 and "human-only" in answer.text()
    assert proposal_of(web_serve, proposal_id)["state"] == "open"
    page.goto(f"{web_serve.url}/ui/proposals/{proposal_id}")
    follow(page, page.locator("form[action$='/approve'] button"))
    assert "Approve a human-only proposal?" in page.inner_text("h1")
    assert proposal_of(web_serve, proposal_id)["state"] == "open"
    follow(page, page.locator("button:has-text('Yes, approve')"))
    assert f"Approved {proposal_id}" in page.inner_text(".flash")
    found = proposal_of(web_serve, proposal_id)
    assert found["state"] == "approved" and found["decidedBy"] == "operator:alice"


def test_the_inbox_filters_by_type(web_serve: Serve, page: Page) -> None:
    """The inbox's type filter shows only the proposals of that event type."""
    greet = propose(web_serve, name="filtered")
    ship = propose(web_serve, "web.ship.requested", version="v8")
    sign_in(page, web_serve, to="/?type=web.ship.requested")
    assert page.locator(f"#p-{ship}").count() == 1
    assert page.locator(f"#p-{greet}").count() == 0


# ---- schedules and loops ----------------------------------------------------------------


def test_pausing_and_resuming_a_loop_from_the_schedules(
    web_serve: Serve, page: Page, tmp_path: Path
) -> None:
    """Pause takes a note and records the operator; resume and trigger work from the
    same page."""
    sign_in(page, web_serve, to="/ui/schedules")
    loop = page.locator("#loop-hourly")
    assert "every 1h" in loop.inner_text() and "watched" in loop.inner_text()
    screenshot(page, tmp_path, "web-schedules")
    loop.locator("input[name=note]").fill("maintenance window")
    follow(page, loop.locator("button:has-text('Pause')"))
    assert "Paused hourly" in page.inner_text(".flash")
    _, answer = web_serve.request("GET", "/schedules/hourly", token=web_serve.token("bob"))
    assert answer["schedule"]["paused"] is True
    assert answer["schedule"]["pausedBy"] == "operator:alice"
    assert answer["schedule"]["pauseNote"] == "maintenance window"
    follow(page, page.locator("#loop-hourly button:has-text('Resume')"))
    assert "Resumed hourly" in page.inner_text(".flash")
    _, answer = web_serve.request("GET", "/schedules/hourly", token=web_serve.token("bob"))
    assert answer["schedule"]["paused"] is False
    follow(page, page.locator("#loop-hourly button:has-text('Trigger now')"))
    assert "Triggered hourly: event manual:hourly:" in page.inner_text(".flash")


def test_a_loops_page_draws_its_lifecycles_with_live_counts(
    web_serve: Serve, page: Page, tmp_path: Path
) -> None:
    """The loop's page says where the loop is defined, by its place under the rules
    directory, and has its occurrence, proposal and run diagrams as SVG, each state
    with how many of the loop's records are in it now."""
    status, _ = web_serve.request(
        "POST", "/schedules/hourly/trigger", token=web_serve.token("alice")
    )
    assert status == 202
    web_serve.wait_for(
        "/proposals", lambda a: any(p["loop"] == "hourly" for p in a["proposals"]), "alice-token"
    )
    sign_in(page, web_serve, to="/ui/loops/hourly")
    assert "Defined at loops/web.rules:8." in page.inner_text("body")
    for kind in ("occurrence", "proposal", "run"):
        assert page.locator(f"#diagram-{kind} svg").count() == 1
    opened = [
        p
        for p in web_serve.request("GET", "/proposals", token="alice-token")[1]["proposals"]
        if p["loop"] == "hourly"
    ]
    node = page.locator("#diagram-proposal g.node").filter(
        has=page.locator("title", has_text=re.compile(r"^open$"))
    )
    assert node.locator("text").all_text_contents() == ["open", str(len(opened))]
    screenshot(page, tmp_path, "web-loop")
    link = page.locator("#diagram-run a:has-text('full size')").get_attribute("href")
    full = page.context.request.get(web_serve.url + (link or ""))
    assert full.status == 200 and full.headers["content-type"].startswith("image/svg+xml")
    assert "<svg" in full.text()


# ---- runs, journal, phone ----------------------------------------------------------------


def test_the_journal_filters_by_actor_and_pages_older_entries(web_serve: Serve, page: Page) -> None:
    """The journal page filters by actor and pages back through older entries with a
    cursor, never showing an entry twice."""
    for n in range(3):
        propose(web_serve, name=f"page{n}")
    sign_in(page, web_serve, to="/ui/journal?actor=system&limit=5")
    seen: list[str] = []
    while True:
        actors = page.locator(".journal .actor").all_inner_texts()
        assert actors and set(actors) == {"system"}
        seen += page.locator(".journal .seq").all_inner_texts()
        older = page.locator("a[rel=next]")
        if older.count() == 0:
            break
        follow(page, older)
    numbers = [int(s.lstrip("#")) for s in seen]
    assert numbers == sorted(set(numbers), reverse=True)
    assert len(numbers) > 10  # several pages


def test_every_page_reads_on_a_phone_without_horizontal_scrolling(
    web_serve: Serve, browser: Browser, tmp_path: Path
) -> None:
    """At 390 px wide no page scrolls sideways."""
    propose(web_serve, name="phone")
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        sign_in(page, web_serve)
        token = web_serve.token("alice")
        proposal = web_serve.request("GET", "/proposals", token=token)[1]["proposals"][0]
        runs = web_serve.request("GET", "/runs", token=token)[1]["runs"]
        paths = [
            "/",
            f"/ui/proposals/{proposal['proposalId']}",
            "/ui/schedules",
            "/ui/loops/hourly",
            "/ui/runs",
            "/ui/journal",
            "/ui/findings",
            "/ui/notifications",
            "/ui/work",
        ]
        paths += [f"/ui/runs/{r['runId']}" for r in runs[:1]]
        for path in paths:
            page.goto(web_serve.url + path)
            assert no_horizontal_scroll(page), path
            if path.startswith("/ui/proposals/"):
                screenshot(page, tmp_path, "web-phone-proposal")
    finally:
        context.close()


def test_a_finding_is_promoted_by_a_person(web_serve: Serve, page: Page) -> None:
    """A candidate finding shows on the findings page; dismissing it needs a reason,
    and promoting it records operator:alice."""
    token = web_serve.token("alice")
    assert web_serve.request("POST", "/schedules/spot-check/trigger", token=token)[0] == 202
    found = web_serve.wait_for("/findings", lambda a: bool(a["findings"]), token)["findings"][0]
    sign_in(page, web_serve, to="/ui/findings")
    card = page.locator(f"#f-{found['findingId']}")
    assert "spotted" in card.inner_text()
    answer = page.context.request.post(
        f"{web_serve.url}/ui/findings/{found['findingId']}/dismiss",
        form={"csrf": card.locator("input[name=csrf]").first.get_attribute("value") or ""},
    )
    assert answer.ok and "takes a reason" in answer.text()
    card.locator("input[name=note]").first.fill("worth fixing")
    follow(page, card.locator("button:has-text('Promote')"))
    assert f"Promoted {found['findingId']}" in page.inner_text(".flash")
    _, after = web_serve.request("GET", f"/findings/{found['findingId']}", token=token)
    assert after["finding"]["status"] == "promoted"
    assert after["finding"]["decidedBy"] == "operator:alice"


def test_the_work_page_shows_the_lease_and_an_operator_completes_it(
    web_serve: Serve, page: Page
) -> None:
    """An item a controller claimed shows its lease on the work page; completing it
    there records operator:alice and drops the lease."""
    token = web_serve.token("alice")
    body = {"semanticKey": "web:repair", "title": "Repair the page", "summary": "see #12"}
    status, made = web_serve.request("POST", "/work", body, token=token)
    assert status == 201, made
    work_id = made["work"]["workId"]
    claim = {"session": "s-web"}
    assert (
        web_serve.request("POST", f"/work/{work_id}/continue", claim, token="agent-token")[0] == 200
    )
    sign_in(page, web_serve, to="/ui/work")
    card = page.locator(f"#w-{work_id}")
    text = card.inner_text()
    assert "Repair the page" in text and "controller:agent" in text and "see #12" in text
    card.locator("input[name=note]").first.fill("done by hand")
    follow(page, card.locator("button:has-text('Complete')"))
    assert f"Completed {work_id}" in page.inner_text(".flash")
    _, after = web_serve.request("GET", f"/work/{work_id}", token=token)
    assert after["work"]["state"] == "completed" and after["work"]["lease"]["owner"] is None
    entries = journal_of(web_serve, "work", work_id)
    assert [(e["action"], e["actor"]) for e in entries][-1] == ("completed", "operator:alice")


def test_bad_filters_are_a_page_with_the_reason(web_serve: Serve, page: Page) -> None:
    """A filter or cursor the pages cannot read is a 400 page that names it."""
    sign_in(page, web_serve)
    for path, says in (
        ("/ui/runs?state=sideways", "'state' must be one of"),
        ("/ui/runs?before=not-a-cursor!", "not a cursor"),
        ("/ui/journal?since=yesterday-ish", "is not a time"),
        ("/ui/proposals/prop-nope", "no proposal"),
    ):
        answer = page.goto(web_serve.url + path)
        assert answer is not None and answer.status in (400, 404), path
        assert says in page.inner_text("[role=alert]"), path


def test_the_session_cookie_is_secure_behind_tls(web_serve: Serve) -> None:
    """Behind a TLS proxy (X-Forwarded-Proto: https) the cookies are also `Secure`;
    over plain loopback HTTP they are not (a browser would drop them)."""
    host = urllib.parse.urlsplit(web_serve.url).netloc

    def cookies(headers: dict[str, str], form: str | None = None, cookie: str = "") -> list[str]:
        conn = http.client.HTTPConnection(host, timeout=10)
        sent = {**headers, **({"Cookie": cookie} if cookie else {})}
        if form is None:
            conn.request("GET", "/ui/signin", headers=sent)
        else:
            sent["Content-Type"] = "application/x-www-form-urlencoded"
            conn.request("POST", "/ui/signin", body=form, headers=sent)
        answer = conn.getresponse()
        found = answer.headers.get_all("Set-Cookie") or []
        conn.close()
        return found

    plain = cookies({})
    assert plain and all("Secure" not in c for c in plain)
    behind = cookies({"X-Forwarded-Proto": "https"})
    signin = next(c for c in behind if c.startswith("engine_signin="))
    assert "Secure" in signin and "HttpOnly" in signin and "SameSite=Strict" in signin
    csrf = signin.split(";", 1)[0].split("=", 1)[1]
    form = urllib.parse.urlencode({"csrf": csrf, "token": web_serve.token("alice"), "next": "/"})
    opened = cookies({"X-Forwarded-Proto": "https"}, form, f"engine_signin={csrf}")
    session = next(c for c in opened if c.startswith("engine_session="))
    assert "Secure" in session and "HttpOnly" in session and "SameSite=Strict" in session
