"""The log lines of a real `engine serve` and `engine worker` (docs/observability.md#logs): with
`--log-format json` every line it writes is one JSON object, and each HTTP request's
id (its own X-Request-Id, a GitHub delivery's GUID, or a fresh one) is echoed in the
answer and carried on its access line; text lines keep their shape; no token is
logged."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from conftest import API_TREE, OPERATOR_TOKENS, Serve, tree_args

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
ALICE = OPERATOR_TOKENS["alice"]
ENV = {"ENGINE_OPERATOR_TOKEN": f"alice:{ALICE}"}
TEXT_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR) \S+: ")


def answered_id(serve: Serve, path: str, headers: dict[str, str]) -> str:
    """The X-Request-Id of the answer to a GET (whatever its status)."""
    req = urllib.request.Request(serve.url + path, headers=headers)
    try:
        with _NO_PROXY.open(req, timeout=30) as response:
            return str(response.headers["X-Request-Id"])
    except urllib.error.HTTPError as err:
        with err:
            return str(err.headers["X-Request-Id"])


def access_lines(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {line["request_id"]: line for line in lines if line["logger"] == "aiohttp.access"}


def test_json_logs_carry_the_request_id_of_each_request(serve_factory: Any) -> None:
    """Every line of a JSON serve parses; the client's id, a delivery's GUID and a
    fresh id each come back in X-Request-Id and are on that request's access line,
    with its method, path (no query string), status and duration; the token is not."""
    serve = serve_factory(API_TREE, ENV, "--log-format", "json")
    bearer = {"Authorization": f"Bearer {ALICE}"}
    mine = answered_id(serve, "/runs?limit=5", {"X-Request-Id": "trace-42", **bearer})
    guid = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
    delivery = answered_id(serve, "/no-such-route", {"X-GitHub-Delivery": guid})
    fresh = answered_id(serve, "/healthz", {"X-Request-Id": "not sane"})
    assert (mine, delivery) == ("trace-42", guid)
    assert re.fullmatch(r"[0-9a-f]{32}", fresh)
    assert serve.stop() == 0

    text = serve.log.read_text()
    assert ALICE not in text
    lines = [json.loads(line) for line in text.splitlines()]  # each line is JSON
    assert all({"ts", "level", "logger", "msg"} <= set(line) for line in lines)
    access = access_lines(lines)
    assert {k: access[mine][k] for k in ("method", "path", "status")} == {
        "method": "GET",
        "path": "/runs",
        "status": 200,
    }
    assert access[delivery]["status"] == 404 and access[fresh]["path"] == "/healthz"
    assert all(line["duration_ms"] >= 0 for line in access.values())
    assert any(line["msg"] == "stopped" for line in lines)


def test_text_logs_keep_their_shape(serve_factory: Any) -> None:
    """By default every line is `time LEVEL logger: message`; an access line ends with
    its request id."""
    serve = serve_factory(API_TREE, ENV)
    rid = answered_id(serve, "/healthz", {"X-Request-Id": "text-7"})
    assert serve.stop() == 0
    lines = serve.log.read_text().splitlines()
    assert lines and all(TEXT_LINE.match(line) for line in lines), lines
    access = [line for line in lines if " aiohttp.access: " in line and '"GET /healthz"' in line]
    assert len(access) == 1 and access[0].endswith(f" request_id={rid}")


def test_the_worker_logs_in_the_same_formats(tmp_path: Path) -> None:
    """`engine worker` takes its format from ENGINE_LOG_FORMAT (json here): its start
    and stop lines are JSON objects from the engine.worker logger; nothing else on
    stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    command = [sys.executable, "-m", "engine", "worker", "--id", "w1", "--poll", "0.1"]
    process = subprocess.Popen(
        [*command, *tree_args(tmp_path / "engine.db", API_TREE)],
        env={**env, "ENGINE_LOG_FORMAT": "json"},
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    # The tree's old spellings are logged first, one W0901 line each (docs/rules.md#old-spellings).
    old = []
    first = json.loads(process.stderr.readline())
    while "warning[W0901]" in first["msg"]:
        old.append(first)
        first = json.loads(process.stderr.readline())  # the start line: it is running
    process.send_signal(signal.SIGTERM)
    _, rest = process.communicate(timeout=30)
    assert process.returncode == 0
    assert all((line["logger"], line["level"]) == ("engine.worker", "warning") for line in old)
    lines = [first, *(json.loads(line) for line in rest.splitlines())]
    assert [(line["logger"], line["msg"]) for line in lines] == [
        ("engine.worker", "worker w1: started (lease 60.0s)"),
        ("engine.worker", "worker w1: stopped"),
    ]
