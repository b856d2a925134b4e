"""The HTTP edge of a real `engine serve` subprocess (raw sockets on loopback): the
connection bound, slow headers and bodies, aiohttp's own refusals in the API's error
shape, secrets kept out of the log, exhausted accepts logged once per interval, and a
second signal during shutdown."""

from __future__ import annotations

import json
import resource
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from engine.api import signing
from engine.intake.github import sign as github_sign

ROOT = Path(__file__).resolve().parent.parent.parent
RUNTIME_TREE = ROOT / "tests" / "data" / "runtime"
SECRETS = {
    "ENGINE_EVENT_SECRET": "event-secret-4c1f9e",
    "ENGINE_OPERATOR_TOKEN": "alice:alice-token-77d2a0",
    "ENGINE_GITHUB_WEBHOOK_SECRET": "github-secret-b5e3c8",
}


def address(serve: Any) -> tuple[str, int]:
    host, port = serve.url.removeprefix("http://").split(":")
    return host, int(port)


@contextmanager
def connections(serve: Any, count: int) -> Iterator[list[socket.socket]]:
    """`count` open connections that send nothing; closed afterwards."""
    opened = [socket.create_connection(address(serve), timeout=5) for _ in range(count)]
    try:
        yield opened
    finally:
        for sock in opened:
            sock.close()


def exchange(serve: Any, data: bytes, within: float = 10) -> tuple[int, dict[str, str], Any]:
    """Send raw bytes on a new connection; (status, headers, parsed JSON body)."""
    with socket.create_connection(address(serve), timeout=within) as sock:
        sock.sendall(data)
        return read_answer(sock)


def read_answer(sock: socket.socket) -> tuple[int, dict[str, str], Any]:
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed before an answer: {raw!r}"
        raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        assert chunk, "the connection closed mid-answer"
        body += chunk
    return int(lines[0].split()[1]), headers, json.loads(body)


def status_of(serve: Any) -> int:
    return exchange(serve, b"GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")[0]


def test_idle_connections_beyond_the_bound_never_make_serve_deaf(serve_factory: Any) -> None:
    """With --max-connections 8, forty idle connections (some halfway through their
    headers) are open and `/status` is still answered at once."""
    serve = serve_factory(ROOT / "tests" / "data" / "api", SECRETS, "--max-connections", "8")
    with connections(serve, 40) as idle:
        for sock in idle[::3]:
            sock.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\n")  # headers never finished
        time.sleep(0.2)
        started = time.monotonic()
        assert status_of(serve) == 200
        assert time.monotonic() - started < 5
    assert status_of(serve) == 200


def test_a_connection_over_a_bound_of_busy_ones_is_a_json_503(serve_factory: Any) -> None:
    """When every connection of the bound has a request in hand (a body still
    arriving), one more is answered 503 too_many_connections in the error shape, with
    `Retry-After: 1` (docs/api.md#when-to-come-back), and closed; once they end, new
    connections are served again."""
    serve = serve_factory(ROOT / "tests" / "data" / "api", SECRETS, "--max-connections", "4")
    head = b"POST /inject HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{"
    with connections(serve, 4) as busy:
        for sock in busy:
            sock.sendall(head)
        time.sleep(0.3)
        status, headers, body = exchange(serve, b"GET /status HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (status, body["error"]) == (503, "too_many_connections")
        assert headers["content-type"].startswith("application/json")
        assert headers["retry-after"] == "1"
    deadline = time.monotonic() + 5
    while status_of(serve) != 200:
        assert time.monotonic() < deadline


def test_a_trickling_body_is_answered_408(serve_factory: Any) -> None:
    """A body sent a byte at a time is answered 408 `body_timeout` in the error shape
    once --body-timeout has passed since its headers."""
    serve = serve_factory(ROOT / "tests" / "data" / "api", SECRETS, "--body-timeout", "1.5")
    with socket.create_connection(address(serve), timeout=10) as sock:
        sock.sendall(b"POST /inject HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
        started = time.monotonic()
        sock.settimeout(0.4)
        answer = b""
        while not answer and time.monotonic() - started < 8:
            sock.sendall(b" ")
            try:
                answer = sock.recv(65536, socket.MSG_PEEK)
            except TimeoutError:
                continue
        sock.settimeout(5)
        status, headers, body = read_answer(sock)
    assert (status, body["details"]["reason"]) == (408, "body_timeout")
    assert 1.4 < time.monotonic() - started < 6
    assert headers.get("connection", "").lower() == "close"


def test_headers_that_never_finish_are_closed_at_the_idle_timeout(serve_factory: Any) -> None:
    """A connection that trickles its headers is closed once --idle-timeout passes."""
    serve = serve_factory(ROOT / "tests" / "data" / "api", SECRETS, "--idle-timeout", "1")
    with socket.create_connection(address(serve), timeout=10) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\n")
        sock.settimeout(0.3)
        closed = False
        while not closed and time.monotonic() - started < 8:
            try:
                sock.sendall(b"X")
                closed = sock.recv(1) == b""
            except TimeoutError:
                continue
            except OSError:
                closed = True
    assert closed and time.monotonic() - started < 5


def _flood_limit() -> None:
    """Run in the child before exec: a low open-files limit it cannot raise."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


def test_a_flood_under_a_low_open_files_limit_logs_a_bounded_number_of_lines(
    tmp_path: Path,
) -> None:
    """Under a 64-file limit, 400 connections opened at once leave serve answering
    `/status`, and its log stays a few lines long: exhausted accepts are one line per
    interval, never a traceback each."""
    import conftest

    popen = conftest.subprocess.Popen

    def limited(*args: Any, **kwargs: Any) -> Any:
        return popen(*args, preexec_fn=_flood_limit, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(conftest.subprocess, "Popen", limited)
        serve = conftest.launch_serve(tmp_path, ROOT / "tests" / "data" / "api", SECRETS)
    try:
        flood: list[socket.socket] = []
        for _ in range(400):
            try:
                flood.append(socket.create_connection(address(serve), timeout=0.5))
            except OSError:
                break
        time.sleep(1)
        try:
            assert status_of(serve) == 200
        finally:
            for sock in flood:
                sock.close()
        assert status_of(serve) == 200
    finally:
        assert serve.stop() == 0
    log = serve.log.read_text()
    assert "Traceback" not in log
    assert len(log.splitlines()) < 40, log


MALFORMED = {
    "bad_header": b"GET /events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %(token)s\x01\r\n\r\n",
    "bad_header_name": b"GET /events HTTP/1.1\r\nHost: x\r\n"
    b"Auth orization: Bearer %(token)s\r\n\r\n",
    "too_long": b"GET /events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %(token)s"
    + b"a" * 9000
    + b"\r\n\r\n",
    "bad_method": b"G(T /events HTTP/1.1\r\nAuthorization: Bearer %(token)s\r\n\r\n",
    "bad_version": b"GET /events?t=%(token)s HTTP/7.1\r\nHost: x\r\n\r\n",
    "bad_length": b"POST /inject HTTP/1.1\r\nHost: x\r\nContent-Length: %(token)s\r\n\r\n",
    "bad_chunk": b"POST /inject HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"%(token)s\r\n",
    "event_secret": b"POST /events HTTP/1.1\r\nHost: x\r\n"
    b"X-Engine-Signature: %(event)s\x7f\r\n\r\n",
    "github_secret": b"POST /github HTTP/1.1\r\nHost: x\r\n"
    b"X-Hub-Signature-256: %(github)s\x00\r\n\r\n",
    "too_many_headers": b"GET /status HTTP/1.1\r\nHost: x\r\n"
    + b"".join(b"X-%d: %%(token)s\r\n" % i for i in range(200))
    + b"\r\n",
}


def test_malformed_requests_are_json_and_leave_no_secret_in_the_log(
    serve_factory: Any,
) -> None:
    """Requests aiohttp refuses by itself (a bad header line, one too long, a bad
    method or version, a bad Content-Length or chunk, too many headers) get a 4xx in the
    API's error shape; neither the answers nor the whole log of serve hold the operator
    token, the event secret, the GitHub secret or a signature they carried."""
    serve = serve_factory(ROOT / "tests" / "data" / "api", SECRETS)
    token = SECRETS["ENGINE_OPERATOR_TOKEN"].split(":")[1]
    signature = signing.sign(SECRETS["ENGINE_EVENT_SECRET"].encode(), 1, b"{}")
    github = github_sign(SECRETS["ENGINE_GITHUB_WEBHOOK_SECRET"].encode(), b"{}")
    values = {b"token": token.encode(), b"event": signature.encode(), b"github": github.encode()}
    known = [token, *SECRETS.values(), signature, github, signature.removeprefix("sha256=")]
    for name, template in MALFORMED.items():
        status, headers, body = exchange(serve, template % values)
        assert 400 <= status < 500, name
        assert headers["content-type"].startswith("application/json"), name
        assert set(body) == {"error", "message"} and body["error"], name
        assert not any(secret in json.dumps(body) for secret in known), name
    assert serve.stop() == 0
    log = serve.log.read_text()
    leaked = [secret for secret in known if secret in log]
    assert leaked == [] and "Traceback" not in log


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Engine-Timestamp": b"1\xff", "X-Engine-Signature": b"sha256=00"},
        {"X-Engine-Timestamp": b"%d", "X-Engine-Signature": "sha256=ä".encode()},
        {"X-Engine-Timestamp": "١٢٣".encode(), "X-Engine-Signature": b"sha256=00"},
        {"X-Engine-Timestamp": b"%d", "X-Engine-Signature": b"sha256=\xc3\x28\xff"},
    ],
)
def test_non_ascii_event_signature_headers_are_401(api_serve: Any, headers: Any) -> None:
    """A non-ASCII or undecodable X-Engine-Timestamp or X-Engine-Signature is a 401."""
    lines = b"".join(
        b"%s: %s\r\n" % (k.encode(), v.replace(b"%d", str(int(time.time())).encode()))
        for k, v in headers.items()
    )
    request = b"POST /events HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n" + lines + b"\r\n{}"
    status, _, body = exchange(api_serve, request)
    assert (status, body["error"]) == (401, "unauthorized")


def test_non_ascii_github_signature_and_token_are_401(serve_factory: Any) -> None:
    """A non-ASCII X-Hub-Signature-256 or Authorization token is a 401, not a 500."""
    serve = serve_factory(ROOT / "tests" / "data" / "api", SECRETS)
    github = (
        b"POST /github HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: ping\r\nX-GitHub-Delivery: d-1\r\n"
        b"X-Hub-Signature-256: sha256=\xe2\x82\xac\xff\r\nContent-Length: 2\r\n\r\n{}"
    )
    assert exchange(serve, github)[0] == 401
    bearer = b"GET /events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xff\xfe\xc3\r\n\r\n"
    assert exchange(serve, bearer)[0] == 401


def test_a_second_sigterm_during_shutdown_exits_0_without_a_traceback(
    serve_factory: Any,
) -> None:
    """With a 20 s run in hand, SIGTERM starts the shutdown; a second SIGTERM cuts the
    wait for the run short, and serve exits 0 within seconds, its log traceback-free."""
    env = {
        "ENGINE_OPERATOR_TOKEN": "alice:tok",
        "RUNTIME_SCRIPTS": str(RUNTIME_TREE / "scripts"),
    }
    serve = serve_factory(RUNTIME_TREE, env)
    event = {
        "eventId": "slow-double-signal",
        "type": "test.slow.requested",
        "source": "manual",
        "occurredAt": "2026-11-30T09:00:00Z",
        "payload": {"seconds": 20},
    }
    assert serve.request("POST", "/inject", event)[0] == 202
    serve.wait_for("/runs?state=running", lambda a: len(a["runs"]) == 1, "tok", within=15)
    serve.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10  # until the first has started the shutdown
    while "SIGTERM: shutting down" not in serve.log.read_text():
        assert time.monotonic() < deadline, serve.log.read_text()
        time.sleep(0.02)
    serve.process.send_signal(signal.SIGTERM)
    started = time.monotonic()
    assert serve.process.wait(15) == 0
    assert time.monotonic() - started < 8
    log = serve.log.read_text()
    assert "Traceback" not in log and "stopped" in log


def test_a_second_sigint_right_after_the_first_exits_0(serve_factory: Any) -> None:
    """Two SIGINTs in quick succession (an impatient Ctrl-C) exit 0, no traceback."""
    serve = serve_factory(ROOT / "tests" / "data" / "api", SECRETS)
    serve.process.send_signal(signal.SIGINT)
    time.sleep(0.01)
    serve.process.send_signal(signal.SIGINT)
    assert serve.process.wait(15) == 0
    assert "Traceback" not in serve.log.read_text()
