"""A real `engine serve` delivering notifications (docs/notifications.md): its notifier
sends off the runtime loop (a sink that hangs holds no admission or plan), `GET
/notifications` pages them with their delivery state behind the operator token, and a
configuration of sinks it cannot use stops it at start with exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import OPERATOR_TOKENS, ROOT, Serve, tree_args
from receivers import SECRET, Receiver

WEB_TREE = ROOT / "tests" / "data" / "web"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver().start()
    yield found
    found.stop()


def env_with(**notify: str) -> dict[str, str]:
    return {
        "ENGINE_OPERATOR_TOKEN": ",".join(f"{k}:{v}" for k, v in OPERATOR_TOKENS.items()),
        "WEB_SCRIPTS": str(WEB_TREE / "scripts"),
        **notify,
    }


def announce_resume(serve: Serve, loop: str = "hourly") -> None:
    """Pause and resume a loop: the resume is announced."""
    token = serve.token("alice")
    for action, note in (("pause", "a look"), ("resume", "looked at it")):
        status, answer = serve.request(
            "POST", f"/schedules/{loop}/{action}", {"note": note}, token=token
        )
        assert status == 200, answer


def test_a_hanging_sink_holds_neither_admissions_nor_plans(
    serve_factory: Callable[..., Serve], receiver: Receiver, tmp_path: Path
) -> None:
    """While the webhook receiver holds serve's request, an injected event is still
    admitted and planned into a proposal; once it answers, the notification reads
    delivered, with its signed webhook verified. (Should the hold outlast the
    webhook's timeout on a slow machine, the retry a second later delivers it.)"""
    config = tmp_path / "config"
    config.mkdir()
    (config / "notifications.yaml").write_text("delivery:\n  backoff: 1s\n")
    serve = serve_factory(
        WEB_TREE,
        env_with(ENGINE_NOTIFY_WEBHOOK=receiver.url("/hook"), ENGINE_NOTIFY_WEBHOOK_SECRET=SECRET),
        "--config",
        str(config),
    )
    token = serve.token("alice")
    receiver.held.clear()
    announce_resume(serve)
    receiver.wait_arrived("/hook", 1)
    event = {
        "eventId": "while-held",
        "type": "web.greet.requested",
        "source": "manual",
        "occurredAt": "2026-12-01T09:00:00Z",
        "payload": {"name": "held"},
    }
    status, answer = serve.request("POST", "/inject", event)
    assert status == 202, answer
    serve.wait_for(
        "/proposals", lambda a: any(p["eventId"] == "while-held" for p in a["proposals"]), token
    )
    receiver.held.set()
    found = serve.wait_for(
        "/notifications?delivery=delivered", lambda a: len(a["notifications"]) == 1, token
    )
    hooks = receiver.got("/hook")
    assert hooks and all(h.verified is True for h in hooks)
    assert {h.parsed["state"] for h in hooks} == {"resumed"}
    (n,) = found["notifications"]
    assert (n["loop"], n["state"], n["attempts"]) == ("hourly", "resumed", len(hooks))
    assert [(s["sink"], s["state"]) for s in n["sinks"]] == [("webhook", "delivered")]


def test_get_notifications_pages_behind_the_operator_token(
    serve_factory: Callable[..., Serve], receiver: Receiver
) -> None:
    """The route needs the token; a bad filter or cursor is a 400 naming it; a page of
    one continues with its `next` to the older one, and a delivery filter holds."""
    serve = serve_factory(
        WEB_TREE, env_with(ENGINE_NOTIFY_URLS=f"json://127.0.0.1:{receiver.port}/json")
    )
    token = serve.token("bob")
    announce_resume(serve, "hourly")
    announce_resume(serve, "spot-check")
    assert serve.request("GET", "/notifications")[0] == 401
    for bad in ("delivery=sent", "before=abc", "limit=0", "colour=red"):
        status, answer = serve.request("GET", f"/notifications?{bad}", token=token)
        assert status == 400 and answer["error"] == "bad_request", (bad, answer)
    first = serve.wait_for(
        "/notifications?limit=1&delivery=delivered", lambda a: a["next"] is not None, token
    )
    status, older = serve.request(
        "GET", f"/notifications?limit=1&delivery=delivered&before={first['next']}", token=token
    )
    assert status == 200
    assert [n["seq"] for n in first["notifications"]] > [n["seq"] for n in older["notifications"]]
    assert older["next"] is None
    assert {n["state"] for n in [*first["notifications"], *older["notifications"]]} == {"resumed"}


def start_serve(
    tmp_path: Path, env: dict[str, str], config: Path
) -> subprocess.CompletedProcess[str]:
    """`engine serve` expected to refuse at start (it would serve otherwise: a timeout)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    args = [*tree_args(tmp_path / "engine.db", WEB_TREE), "--config", str(config)]
    return subprocess.run(
        [sys.executable, "-m", "engine", "serve", "--port", "0", *args],
        cwd=tmp_path,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_malformed_notifications_file_stops_serve_with_its_place(tmp_path: Path) -> None:
    """config/notifications.yaml with a mistake: serve serves nothing, exits 2 and
    shows the mistake at file:line:col with the line and a caret."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "notifications.yaml").write_text("sinks:\n  chat:\n    url: slak://x/y/z\n")
    done = start_serve(tmp_path, env_with(), config)
    assert done.returncode == 2, done.stderr
    assert "notifications.yaml:3:5: error[E0902]: url: not a URL Apprise can use" in done.stderr
    assert "3 |     url: slak://x/y/z" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_sink_variable_stops_serve_in_one_line_without_its_value(tmp_path: Path) -> None:
    """An ENGINE_NOTIFY_URLS entry Apprise cannot use: exit 2, one line naming the
    variable and the entry, never the URL's token."""
    done = start_serve(tmp_path, env_with(ENGINE_NOTIFY_URLS="bogus://xoxb-T0KEN@team"), tmp_path)
    assert done.returncode == 2, done.stderr
    said = done.stderr.strip().splitlines()
    assert said == [
        "error: ENGINE_NOTIFY_URLS: entry 1: not a URL Apprise can use (scheme 'bogus'; "
        "docs/notifications.md#sinks)"
    ]
