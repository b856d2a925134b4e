"""The CLI's HTTP client for a running serve on this host (`engine inject`, `engine
github replay`): standard-library HTTP, no proxy, a JSON answer or a typed error."""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.errors import BadRequest, Unavailable

DEFAULT_URL = "http://127.0.0.1:7520"
TIMEOUT_SECONDS = 30.0


def add_url_option(parser: argparse.ArgumentParser) -> None:
    """`--url`: the running serve, default $ENGINE_URL, else the loopback default."""
    parser.add_argument(
        "--url",
        default=os.environ.get("ENGINE_URL", DEFAULT_URL),
        help="the runtime (default: $ENGINE_URL, else %(default)s)",
    )


def read_input(name: str) -> bytes:
    """The bytes of FILE, or of standard input for `-`; BadRequest when unreadable."""
    try:
        return sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
    except OSError as err:
        raise BadRequest(f"cannot read {name}: {err.strerror}") from None


def post(url: str, path: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, Any]:
    """POST `body` to `url` + `path`: (status, JSON answer). Unavailable when nothing
    answers at `url`."""
    request = urllib.request.Request(
        url.rstrip("/") + path,
        data=body,
        headers={"Content-Type": "application/json", **headers},
        method="POST",
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=TIMEOUT_SECONDS) as response:
            return response.status, _json(response.read())
    except urllib.error.HTTPError as err:
        with err:
            return err.code, _json(err.read())
    except (urllib.error.URLError, OSError, ValueError):
        raise Unavailable(f"runtime unreachable at {url}") from None


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return {"error": "bad_answer", "message": raw[:200].decode("utf-8", "replace")}
