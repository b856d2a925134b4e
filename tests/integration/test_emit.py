"""`engine emit` (the host-clock bridge, docs/deploy.md#engine-emit) against a real
`engine serve` over the shipped tree: admitted, duplicate, refused, unreachable (with
its bounded retries, and a serve that starts while it retries), and the gate's yes
and no."""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

from conftest import EVENT_SECRET, OPERATOR_TOKENS, ROOT, Serve, free_port, launch_serve, tree_args


def emit(
    serve: Serve | str,
    *args: str,
    secret: str | None = EVENT_SECRET,
    now: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `python -m engine emit ARGS --url` the serve's (or the given) URL, its clock
    placed at `now` (ENGINE_NOW) when given."""
    url = serve if isinstance(serve, str) else serve.url
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    if now is not None:
        env["ENGINE_NOW"] = now
    if secret is not None:
        env["ENGINE_EVENT_SECRET"] = secret
    return subprocess.run(
        [sys.executable, "-m", "engine", "emit", *args, "--url", url],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def event(serve: Serve, event_id: str) -> tuple[int, Any]:
    return serve.request("GET", f"/events/{event_id}", token=serve.token("alice"))


def fresh() -> str:
    return f"test:{uuid.uuid4().hex}"


def test_bridge_loop_tick_is_admitted_then_a_duplicate(shipped_serve: Serve) -> None:
    """A bridge loop's post is admitted as bridge:<loop>:<slot>; a repeat is a duplicate."""
    argv = ("factory.triage.requested", "--payload", '{"repo":"factory"}')
    bound = (*argv, "--loop", "factory-triage", "--every", "24h")
    first = emit(shipped_serve, *bound)
    assert first.returncode == 0, first.stderr
    event_id = first.stdout.split(": ")[0]
    assert event_id.startswith("bridge:factory-triage:") and "admitted" in first.stdout
    status, found = event(shipped_serve, event_id)
    assert status == 200, found
    assert "bridge:factory-triage:" in str(found) and "'source': 'bridge'" in str(found)
    second = emit(shipped_serve, *bound)
    assert second.returncode == 0 and "duplicate" in second.stdout


def test_refused_event_exits_non_zero_with_the_reason(shipped_serve: Serve) -> None:
    """An event the runtime refuses (unregistered type, bad secret) exits 1 naming why,
    at once: a 4xx is never retried."""
    unknown = emit(shipped_serve, "factory.nope.requested", "--event-id", fresh())
    assert unknown.returncode == 1 and "refused" in unknown.stderr
    unsigned = emit(shipped_serve, "clock.tick.reaper", "--event-id", fresh(), secret="wrong")
    assert unsigned.returncode == 1 and "signature" in unsigned.stderr
    assert "retry" not in unknown.stderr + unsigned.stderr


def test_unreachable_runtime_gives_up_after_its_retries() -> None:
    """Nothing listening at --url: one log line per retry, then exit 1 naming the runtime
    unreachable and the attempts made."""
    url = f"http://127.0.0.1:{free_port()}"
    bound = ("--retries", "2", "--retry-max-seconds", "0.05")
    done = emit(url, "clock.tick.reaper", "--event-id", fresh(), *bound)
    lines = done.stderr.splitlines()
    assert done.returncode == 1, done.stderr
    assert [ln.split(" in ")[0] for ln in lines[:-1]] == [
        f"engine emit: runtime unreachable at {url}; retry {n} of 2" for n in (1, 2)
    ]
    assert lines[-1] == f"error: runtime unreachable at {url} (gave up after 3 attempts)"
    none = emit(url, "clock.tick.reaper", "--event-id", fresh(), "--retries", "0")
    assert none.stderr == f"error: runtime unreachable at {url} (gave up after 1 attempts)\n"


def serve_on(port: int, workdir: Path, env: dict[str, str]) -> Serve:
    """`engine serve` on the shipped tree at `port` (launched, not waited for)."""
    secrets = {"ENGINE_EVENT_SECRET": EVENT_SECRET, "ENGINE_OPERATOR_TOKEN": "alice:alice-token"}
    command = [sys.executable, "-m", "engine", "serve", "--port", str(port), "--no-worker"]
    log = workdir / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*command, *tree_args(workdir / "engine.db", ROOT)],
            cwd=workdir,
            env={**env, **secrets},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    return Serve(process, url, workdir / "engine.db", log, ROOT, {**env, **secrets})


def test_a_serve_that_starts_while_emit_retries_admits_the_tick_once(tmp_path: Path) -> None:
    """emit started before any serve listens retries; a serve started on that port
    after emit's first retry line admits the slot's tick, once."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    argv = ["factory.triage.requested", "--payload", '{"repo":"factory"}']
    argv += ["--loop", "factory-triage", "--every", "24h"]
    argv += ["--retries", "40", "--retry-max-seconds", "0.5"]
    emitting = subprocess.Popen(
        [sys.executable, "-m", "engine", "emit", *argv, "--url", f"http://127.0.0.1:{port}"],
        cwd=ROOT,
        env={**env, "ENGINE_EVENT_SECRET": EVENT_SECRET},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert emitting.stderr is not None
    first = emitting.stderr.readline()  # emit found nobody and waits to retry
    assert "runtime unreachable" in first and "retry 1 of 40" in first, first
    serve = serve_on(port, tmp_path, env)
    try:
        out, err = emitting.communicate(timeout=60)
        assert emitting.returncode == 0, err + serve.log.read_text()
        event_id = out.split(": ")[0]
        assert out == f"{event_id}: admitted\n" and event_id.startswith("bridge:factory-triage:")
        status, events = serve.request("GET", "/events?limit=1000", token=serve.token("alice"))
        assert status == 200
        assert [e["eventId"] for e in events["events"]].count(event_id) == 1
    finally:
        emitting.kill()
        serve.stop()


def test_a_cadence_over_a_hundred_years_is_a_usage_error() -> None:
    """`--every 99999999999d` exits 2 with one line naming the limit, before any post."""
    bound = ("--loop", "factory-triage", "--every", "99999999999d")
    done = emit(f"http://127.0.0.1:{free_port()}", "factory.triage.requested", *bound)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: --every: '99999999999d' is too long; a duration is at most 36500d (100 years)"
    )


def test_gate_no_is_an_observed_no_op_and_gate_yes_admits(shipped_serve: Serve) -> None:
    """A gate that exits non-zero admits nothing (exit 0, a log line); one that exits 0 admits."""
    event_id = fresh()
    payload = ("--payload", '{"repo":"factory"}', "--event-id", event_id)
    no = emit(shipped_serve, "factory.work.requested", *payload, "--gate", "false")
    assert no.returncode == 0 and "gate said no" in no.stderr and no.stdout == ""
    assert event(shipped_serve, event_id)[0] == 404
    yes = emit(shipped_serve, "factory.work.requested", *payload, "--gate", "true --ignored-arg")
    assert yes.returncode == 0 and f"{event_id}: admitted" in yes.stdout, yes.stderr
    assert event(shipped_serve, event_id)[0] == 200


def test_a_signed_post_cannot_claim_another_host_slot(shipped_serve: Serve) -> None:
    """A host-clock tick whose slot has not come, is off the loop's cadence, or comes
    under another id than the slot's own is a 422 `bad_slot` (nothing admitted): a
    signed sender fires the current slot once, never takes another's identity."""
    now = datetime.now(UTC).replace(microsecond=0)
    today = now.replace(hour=0, minute=0, second=0)
    cases = {
        "future": (today + timedelta(days=3), None),
        "off-cadence": (today + timedelta(minutes=7), None),
        "another-id": (today, f"bridge:factory-triage:{uuid.uuid4().hex}"),
    }
    for name, (slot, event_id) in cases.items():
        text = slot.strftime("%Y-%m-%dT%H:%M:%SZ")
        doc = {
            "eventId": event_id or f"bridge:factory-triage:{text}",
            "type": "factory.triage.requested",
            "source": "bridge",
            "occurredAt": text,
            "payload": {
                "repo": "factory",
                "loop": "factory-triage",
                "slot": text,
                "cadenceSeconds": 86400,
                "skippedSlots": 0,
            },
        }
        body = json.dumps(doc).encode()
        stamp = str(int(time.time()))
        mac = hmac.new(EVENT_SECRET.encode(), stamp.encode() + b"." + body, hashlib.sha256)
        headers = {"X-Engine-Timestamp": stamp, "X-Engine-Signature": "sha256=" + mac.hexdigest()}
        status, answer = shipped_serve.request("POST", "/events", raw=body, headers=headers)
        assert (status, answer["details"]["reason"]) == (422, "bad_slot"), name
        assert event(shipped_serve, doc["eventId"])[0] == 404


def test_a_loop_tick_takes_no_event_id(shipped_serve: Serve) -> None:
    """`engine emit --loop ... --event-id X` is a usage error (exit 2): a loop's tick
    has its slot's id, so each slot is admitted once; nothing is posted."""
    event_id = fresh()
    done = emit(
        shipped_serve,
        "factory.triage.requested",
        "--payload",
        '{"repo":"factory"}',
        "--loop",
        "factory-triage",
        "--every",
        "24h",
        "--event-id",
        event_id,
    )
    assert done.returncode == 2 and "--event-id" in done.stderr
    assert event(shipped_serve, event_id)[0] == 404


class Answers(http.server.BaseHTTPRequestHandler):
    """A loopback runtime that answers POST /events from a script of statuses, keeping
    the event id of each post it got."""

    script: ClassVar[list[int]] = []
    posted: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.posted.append(body["eventId"])
        status = self.script.pop(0)
        answer = {"eventId": body["eventId"], "duplicate": False}
        if status == 503:
            answer = {"error": "unavailable", "message": "database busy"}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:  # keep the test output quiet
        pass


def test_a_503_is_retried_with_the_same_event_id() -> None:
    """A runtime answering 503 (its database busy) gets the same envelope again after
    one log line per retry, and the third answer, 200, is final."""
    Answers.script, Answers.posted = [503, 503, 200], []
    server = http.server.HTTPServer(("127.0.0.1", 0), Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        event_id = fresh()
        bound = ("--retries", "3", "--retry-max-seconds", "0.05")
        done = emit(url, "clock.tick.reaper", "--event-id", event_id, *bound)
    finally:
        server.shutdown()
        server.server_close()
    assert (done.returncode, done.stdout) == (0, f"{event_id}: admitted\n"), done.stderr
    assert Answers.posted == [event_id] * 3
    retries = done.stderr.splitlines()
    assert [ln.split(" in ")[0] for ln in retries] == [
        f"engine emit: the runtime answered 503 (database busy); retry {n} of 3" for n in (1, 2)
    ]


PLACED = "2026-11-30T10:00:30Z"  # a week and more before any day this suite runs on


def test_emit_on_a_placed_clock_is_admitted_by_a_serve_on_that_clock(tmp_path: Path) -> None:
    """With ENGINE_NOW set for serve and for `engine emit` (docs/cli.md#environment), the
    bridge tick's slot, occurredAt and signature all read the placed clock: serve admits
    the 2026-11-30 slot instead of refusing a slot of the system's day as not come yet."""
    tokens = ",".join(f"{k}:{v}" for k, v in OPERATOR_TOKENS.items())
    env = {"ENGINE_EVENT_SECRET": EVENT_SECRET, "ENGINE_OPERATOR_TOKEN": tokens}
    serve = launch_serve(tmp_path, ROOT, {**env, "ENGINE_NOW": PLACED})
    try:
        bound = ("--loop", "factory-triage", "--every", "24h")
        payload = ("--payload", '{"repo":"factory"}')
        done = emit(serve, "factory.triage.requested", *payload, *bound, now=PLACED)
        assert done.returncode == 0, done.stderr + serve.log.read_text()
        event_id = "bridge:factory-triage:2026-11-30T00:00:00Z"
        assert done.stdout == f"{event_id}: admitted\n"
        status, found = event(serve, event_id)
        assert status == 200, found
        assert found["event"]["occurredAt"].startswith("2026-11-30T10:00:")
        assert found["event"]["payload"]["slot"] == "2026-11-30T00:00:00Z"
    finally:
        serve.stop()


def test_emit_on_the_system_clock_is_refused_by_a_serve_on_a_placed_one(
    tmp_path: Path,
) -> None:
    """ENGINE_NOW set for serve but not for `engine emit`: the signed post is refused
    (exit 1, its timestamp away from the runtime's clock) and nothing is admitted, so a
    clock set for one process only shows at once instead of firing the wrong slot."""
    tokens = ",".join(f"{k}:{v}" for k, v in OPERATOR_TOKENS.items())
    env = {"ENGINE_EVENT_SECRET": EVENT_SECRET, "ENGINE_OPERATOR_TOKEN": tokens}
    serve = launch_serve(tmp_path, ROOT, {**env, "ENGINE_NOW": PLACED})
    try:
        event_id = fresh()
        done = emit(serve, "factory.work.requested", "--event-id", event_id)
        assert done.returncode == 1
        assert "away from the runtime's clock" in done.stderr, done.stderr
        assert event(serve, event_id)[0] == 404
    finally:
        serve.stop()
