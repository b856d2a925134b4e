"""The log lines of serve and worker (docs/observability.md#logs): the text and JSON
formats, the flags over the environment, the request id chosen for a request, and the
progress line of a long catch-up."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.api.observe import request_id, sane
from engine.bootstrap import open_service
from engine.errors import ConfigError
from engine.loading import Paths
from engine.logs import REQUEST_ID, Progress, add_options, chosen, configure, configure_from

ROOT = Path(__file__).resolve().parents[2]
WAVE = ROOT / "tests" / "data" / "multiprocess"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """The root logger's lines, restored afterwards."""
    root = logging.getLogger()
    before = (root.handlers[:], root.level)
    out = io.StringIO()
    yield out
    root.handlers[:] = before[0]
    root.setLevel(before[1])


def test_json_lines_carry_time_level_logger_message_and_fields(captured: io.StringIO) -> None:
    """A JSON line is one object: ts in UTC ISO 8601, level, logger, msg (formatted),
    the extra fields, and the request id in hand."""
    configure("json", "info", captured)
    token = REQUEST_ID.set("req-1")
    try:
        logging.getLogger("engine.test").info("planned %d", 3, extra={"loop": "wave"})
    finally:
        REQUEST_ID.reset(token)
    line = json.loads(captured.getvalue())
    assert datetime.fromisoformat(line.pop("ts")).utcoffset() == timedelta(0)
    assert line == {
        "level": "info",
        "logger": "engine.test",
        "msg": "planned 3",
        "loop": "wave",
        "request_id": "req-1",
    }


def test_json_line_holds_a_traceback_in_one_field(captured: io.StringIO) -> None:
    """An exception's traceback stays inside the one JSON line (`exc`)."""
    configure("json", "info", captured)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("engine.test").exception("failed")
    lines = captured.getvalue().splitlines()
    assert len(lines) == 1 and "RuntimeError: boom" in json.loads(lines[0])["exc"]


def test_text_lines_keep_their_shape_and_add_the_request_id(captured: io.StringIO) -> None:
    """Text is `time LEVEL logger: message`, plus ` request_id=ID` on a request's line;
    other fields stay out of the text (the message says them)."""
    configure("text", "info", captured)
    log = logging.getLogger("engine.test")
    log.info("plain", extra={"loop": "wave"})
    token = REQUEST_ID.set("req-2")
    try:
        log.warning("inside")
    finally:
        REQUEST_ID.reset(token)
    plain, inside = captured.getvalue().splitlines()
    assert plain.endswith(" INFO engine.test: plain")
    assert inside.endswith(" WARNING engine.test: inside request_id=req-2")
    datetime.strptime(plain[:23], "%Y-%m-%d %H:%M:%S,%f")


def test_level_drops_less_severe_lines(captured: io.StringIO) -> None:
    """--log-level warning drops info lines and keeps warnings."""
    configure("text", "warning", captured)
    logging.getLogger("engine.test").info("hidden")
    logging.getLogger("engine.test").warning("shown")
    assert "hidden" not in captured.getvalue() and "shown" in captured.getvalue()


def test_the_flag_wins_over_the_environment_and_a_bad_variable_is_refused() -> None:
    """The flag, else ENGINE_LOG_FORMAT/LEVEL (any case), else the default; a value
    outside the choices is a configuration error (exit 2) naming the variable."""
    env = {"ENGINE_LOG_FORMAT": "JSON"}
    assert chosen("text", env, "ENGINE_LOG_FORMAT", ("text", "json"), "text") == "text"
    assert chosen(None, env, "ENGINE_LOG_FORMAT", ("text", "json"), "text") == "json"
    assert chosen(None, {}, "ENGINE_LOG_FORMAT", ("text", "json"), "text") == "text"
    parser = argparse.ArgumentParser()
    add_options(parser)
    with pytest.raises(ConfigError) as err:
        configure_from(parser.parse_args([]), {"ENGINE_LOG_LEVEL": "loud"})
    assert err.value.exit_code == 2 and "ENGINE_LOG_LEVEL" in err.value.message
    configure_from(parser.parse_args(["--log-level", "info"]), {"ENGINE_LOG_LEVEL": "loud"})


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"X-Request-Id": "abc-123"}, "abc-123"),
        ({"X-Request-Id": "abc-123", "X-GitHub-Delivery": "guid"}, "abc-123"),
        ({"X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958"}, None),
        ({"X-Request-Id": "has space", "X-GitHub-Delivery": "guid-1"}, "guid-1"),
        ({"X-Request-Id": "x" * 129}, "fresh"),
        ({"X-Request-Id": "line\nbreak"}, "fresh"),
        ({"X-Request-Id": ""}, "fresh"),
        ({}, "fresh"),
    ],
)
def test_request_id_is_the_clients_when_sane(headers: dict[str, str], expected: str | None) -> None:
    """The request's X-Request-Id when bounded and printable, else the GitHub delivery
    GUID, else a new id."""
    found = request_id(headers, lambda: "fresh")
    assert found == (expected or headers["X-GitHub-Delivery"])
    assert sane(found) == found


def test_progress_logs_at_most_once_per_interval(captured: io.StringIO) -> None:
    """Nothing in the first interval, then one line per interval with the counts."""
    configure("json", "info", captured)
    now = [0.0]
    progress = Progress(logging.getLogger("engine.test"), "catch-up", 5.0, lambda: now[0])
    assert not progress.step("loop x", 10, 10_000, "slots")
    now[0] = 5.0
    assert progress.step("loop x", 1_200, 10_000, "slots", loop="x")
    now[0] = 9.0
    assert not progress.step("loop x", 1_300, 10_000, "slots")
    line = json.loads(captured.getvalue())
    assert line["msg"] == "catch-up: loop x 1,200/10,000 slots"
    assert (line["done"], line["total"], line["loop"]) == (1_200, 10_000, "x")


def test_a_long_catch_up_reports_its_progress(tmp_path: Path, captured: io.StringIO) -> None:
    """A serve back after 1,000 missed minutes of a `catch-up all` loop logs how far
    its catch-up is (every interval; here every chunk), ending at 1,000/1,000."""
    configure("json", "info", captured)
    now = [datetime(2026, 12, 1, 0, 0, 30, tzinfo=UTC)]
    paths = Paths(WAVE / "loops", WAVE / "registry", WAVE / "config")
    service = open_service(str(tmp_path / "e.db"), paths, clock=lambda: now[0])
    try:
        service.scheduler.progress_every = 0.0
        service.scheduler.run_pass()
        now[0] += timedelta(minutes=1000)
        service.scheduler.run_pass()
    finally:
        service.rt.store.close()
    lines = [json.loads(line) for line in captured.getvalue().splitlines()]
    wave = [line for line in lines if line["msg"].startswith("catch-up: loop wave ")]
    assert wave and wave[-1]["msg"] == "catch-up: loop wave 1,000/1,000 slots"
    assert [line["done"] for line in wave] == sorted(line["done"] for line in wave)


def test_a_read_in_the_read_threads_sees_the_request_id() -> None:
    """What a route reads off the event loop (`call_read`) logs with the request's id,
    as what it runs in `asyncio.to_thread` does."""
    from engine.api.context import call, call_read

    async def handle() -> tuple[str | None, str | None]:
        REQUEST_ID.set("req-42")
        return await call_read(REQUEST_ID.get), await call(REQUEST_ID.get)

    assert asyncio.run(handle()) == ("req-42", "req-42")
