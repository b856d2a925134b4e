"""The load for bench/intake.py: one signed ~6 KB pull_request delivery, and wrk (or,
where wrk is missing, bench/intake_client.py in a process of its own) sending it.

Every request carries a fresh X-GitHub-Delivery (a UUID made of a per-invocation nonce,
the wrk thread and a counter), so each one is a new admission, never a duplicate. The
signature covers only the body, so one body and one signature serve every request.
Each load run prints one `BENCH {json}` line: requests (answered), the non-2xx among
them, socket errors, duration and latency percentiles; `parse_result` reads it."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "github-payloads" / "pull_request.opened.payload.json"
BODY_BYTES = 6 * 1024
EVENT = "pull_request"
CLIENT = Path(__file__).with_name("intake_client.py")
RESULT = re.compile(r"^BENCH (\{.*\})$", re.MULTILINE)


# ---- the delivery --------------------------------------------------------------------


def _without_api_urls(value: Any) -> Any:
    """Drop the REST API link templates (`*_url`, but not `html_url`)."""
    if isinstance(value, dict):
        return {
            k: _without_api_urls(v)
            for k, v in value.items()
            if not (k.endswith("_url") and k != "html_url")
        }
    if isinstance(value, list):
        return [_without_api_urls(v) for v in value]
    return value


def make_body(fixture: Path = FIXTURE, size: int = BODY_BYTES) -> bytes:
    """The fixture's pull_request.opened delivery cut to `size` bytes of compact JSON:
    no API link templates or `_links`, head and base repos as a summary, and the PR's
    description padded to make up the size. Action, base ref and repository.full_name
    stay the fixture's, so the translation admits it once the repo is configured."""
    payload = _without_api_urls(json.loads(fixture.read_text()))
    pr = payload["pull_request"]
    pr.pop("_links", None)
    for side in ("head", "base"):
        repo = pr[side].get("repo") or {}
        pr[side]["repo"] = {k: repo.get(k) for k in ("id", "name", "full_name", "private")}
    pr["body"] = pr.get("body") or ""
    base = len(_compact(payload))
    if base > size:
        raise ValueError(f"the trimmed fixture is {base} bytes, more than {size}")
    pr["body"] += (" lorem ipsum dolor sit amet" * (size // 27 + 1))[: size - base]
    return _compact(payload)  # the padding is plain ASCII: exactly `size` bytes


def _compact(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def sign(secret: str, body: bytes) -> str:
    """The X-Hub-Signature-256 value GitHub sends."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def delivery_id(nonce: str, lane: int, counter: int) -> str:
    """A UUID-shaped GUID, unique per (nonce, lane, counter); wrk's Lua does the same."""
    return f"{nonce}-{lane:04x}-4000-8000-{counter:012x}"


@dataclass(frozen=True)
class Delivery:
    body: bytes
    signature: str
    path: Path  # the body, written out for the load generator

    def headers(self, delivery: str) -> dict[str, str]:
        return {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/bench",
            "X-GitHub-Event": EVENT,
            "X-GitHub-Delivery": delivery,
            "X-Hub-Signature-256": self.signature,
        }


def write_delivery(root: Path, secret: str) -> Delivery:
    body = make_body()
    path = root / "delivery.json"
    path.write_bytes(body)
    return Delivery(body, sign(secret, body), path)


# ---- wrk ---------------------------------------------------------------------------------

# setup() runs in the main Lua state and gives each thread its number; done() runs
# there too. No response() callback: it would make wrk parse every answer into Lua,
# costing the client about a tenth of its throughput on this 2-core machine and so
# lowering the fast servers' figures most; non-2xx answers are counted by wrk itself.
WRK_SCRIPT = """\
-- written by bench/intake_load.py
local file = assert(io.open(%(body)s, "rb"))
wrk.method = "POST"
wrk.path = "/github"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "application/json"
wrk.headers["User-Agent"] = "GitHub-Hookshot/bench"
wrk.headers["X-GitHub-Event"] = %(event)s
wrk.headers["X-Hub-Signature-256"] = %(signature)s

local threads = {}
local nonce, counter = "00000000", 0

function setup(thread)
  table.insert(threads, thread)
  thread:set("thread_id", #threads)
end

function init(args)
  nonce = args[1]
end

function request()
  counter = counter + 1
  wrk.headers["X-GitHub-Delivery"] =
    string.format("%%s-%%04x-4000-8000-%%012x", nonce, thread_id, counter)
  return wrk.format()
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests":%%d,"non_2xx":%%d,"duration_s":%%.6f,"p50_ms":%%.4f,' ..
    '"p90_ms":%%.4f,"p99_ms":%%.4f,"max_ms":%%.4f,"mean_ms":%%.4f,' ..
    '"errors":{"connect":%%d,"read":%%d,"write":%%d,"timeout":%%d}}\\n',
    summary.requests, e.status, summary.duration / 1e6, latency:percentile(50) / 1e3,
    latency:percentile(90) / 1e3, latency:percentile(99) / 1e3, latency.max / 1e3,
    latency.mean / 1e3, e.connect, e.read, e.write, e.timeout))
end
"""


def _lua_string(text: str) -> str:
    return json.dumps(text)  # a JSON string of ASCII text is a valid Lua string literal


def write_wrk_script(root: Path, delivery: Delivery) -> Path:
    path = root / "delivery.lua"
    values = {
        "body": _lua_string(str(delivery.path)),
        "event": _lua_string(EVENT),
        "signature": _lua_string(delivery.signature),
    }
    path.write_text(WRK_SCRIPT % values)
    return path


def wrk_binary() -> str | None:
    return shutil.which("wrk")


def wrk_version() -> str:
    binary = wrk_binary()
    if binary is None:
        return "not installed"
    done = subprocess.run([binary, "-v"], capture_output=True, text=True)
    return (done.stdout + done.stderr).strip().splitlines()[0]


# ---- running the load --------------------------------------------------------------------


@dataclass(frozen=True)
class Load:
    """How to load a server: wrk with `script`, or the fallback client."""

    root: Path
    delivery: Delivery
    script: Path | None  # None: bench/intake_client.py
    connections: int
    threads: int

    @property
    def tool(self) -> str:
        if self.script is None:
            return "bench/intake_client.py, an aiohttp client (wrk is not installed)"
        return "wrk"


def make_load(root: Path, delivery: Delivery, connections: int, threads: int) -> Load:
    script = write_wrk_script(root, delivery) if wrk_binary() else None
    return Load(root, delivery, script, connections, max(1, min(threads, connections)))


def load_argv(load: Load, port: int, seconds: float, nonce: str) -> list[str]:
    url = f"http://127.0.0.1:{port}/github"
    if load.script is not None:
        return [
            *(str(wrk_binary()), f"-t{load.threads}", f"-c{load.connections}"),
            *(f"-d{max(1, round(seconds))}s", "--latency", "--timeout", "10s"),
            *("-s", str(load.script), url, "--", nonce),
        ]
    return [
        sys.executable,
        str(CLIENT),
        *(url, str(load.delivery.path), load.delivery.signature),
        *(str(load.connections), str(seconds), nonce),
    ]


def new_nonce() -> str:
    return secrets.token_hex(4)


def parse_result(output: str) -> dict[str, Any]:
    """The BENCH line's figures, with requests/s and the count of 2xx answers."""
    found = RESULT.search(output)
    if found is None:
        raise RuntimeError("the load generator printed no BENCH line:\n" + output[-2000:])
    result: dict[str, Any] = json.loads(found.group(1))
    result["rps"] = result["requests"] / result["duration_s"] if result["duration_s"] else 0.0
    result["ok"] = result["requests"] - result["non_2xx"]
    return result
