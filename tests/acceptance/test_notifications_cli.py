"""`engine notifications` as an operator runs it (docs/cli.md#engine-notifications): a
table of what was announced and where it went, the API's document with --json, the
loop and delivery filters, the next page's command, and a clear refusal of a bad
cursor."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import EngineRunner

from engine.bootstrap import open_service
from engine.core.delivery import Policy
from engine.loading import Paths
from engine.notify.config import Notifying
from engine.notify.sinks import LogSink, WebhookSink
from engine.service.notifications import notify

NOW = datetime(2026, 12, 1, 10, tzinfo=UTC)


@pytest.fixture
def db(tmp_path: Path, runtime_paths: Paths) -> Iterator[str]:
    """Three notifications: two delivered to the log; one that the log took and a
    webhook (nothing listens on its port) gave up on."""
    path = str(tmp_path / "engine.db")
    service = open_service(path, runtime_paths, clock=lambda: NOW)
    with service.rt.store.write() as tx:
        for loop, state in (("reaper", "breaker_tripped"), ("repair", "failed")):
            notify(service.rt, tx, "loop", state, f"{loop}: {state}", loop=loop)
    service.notifying = Notifying((LogSink("log", tmp_path / "n.jsonl"),))
    service.deliver_notifications()
    with service.rt.store.write() as tx:
        notify(service.rt, tx, "loop", "resumed", "repair resumed by operator:alice", loop="repair")
    refused = WebhookSink("webhook", "http://127.0.0.1:9/in", "http://127.0.0.1:9/****")
    service.notifying = Notifying((LogSink("log", tmp_path / "n.jsonl"), refused), Policy(1))
    service.deliver_notifications()
    service.rt.store.close()
    yield path


def test_the_table_shows_each_notification_and_its_delivery(
    run_engine: EngineRunner, db: str
) -> None:
    """Newest first: the loop, the state announced, the delivery, each sink's state and
    the last error of the sink that gave up."""
    done = run_engine("notifications", "--db", db)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:7] == ["SEQ", "AT", "LOOP", "REPO", "STATE", "DELIVERY", "ATTEMPTS"]
    rows = [line.split() for line in lines[2:] if line[:1].isdigit()]  # not the wrapped
    assert [(r[0], r[3], r[5], r[6]) for r in rows] == [
        ("3", "repair", "resumed", "failed"),
        ("2", "repair", "failed", "delivered"),
        ("1", "reaper", "breaker_tripped", "delivered"),
    ]
    assert "log delivered, webhook failed (1 attempt)" in lines[2]
    assert "[Errno 111] Connection" in done.stdout


def test_json_filters_and_the_next_page(run_engine: EngineRunner, db: str) -> None:
    """--json prints GET /notifications' document; --loop and --delivery filter; a
    page that has more ends with the command that shows it, which does."""
    done = run_engine("notifications", "--db", db, "--json", "--delivery", "failed")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    (failed,) = doc["notifications"]
    assert (failed["seq"], failed["delivery"], doc["next"]) == (3, "failed", None)
    assert {s["sink"]: s["state"] for s in failed["sinks"]} == {
        "log": "delivered",
        "webhook": "failed",
    }
    done = run_engine("notifications", "--db", db, "--loop", "repair", "--limit", "1")
    more = done.stdout.splitlines()[-1]
    assert more == "more: engine notifications --loop repair --limit 1 --before 3"
    done = run_engine(*more.removeprefix("more: engine ").split(), "--db", db)
    assert [line.split()[0] for line in done.stdout.splitlines()[2:]] == ["2"]
    assert done.returncode == 0


def test_a_cursor_no_page_gave_is_refused(run_engine: EngineRunner, db: str) -> None:
    """--before with a text that is no seq: exit 2 and the reason, no traceback."""
    done = run_engine("notifications", "--db", db, "--before", "yesterday")
    assert done.returncode == 2
    assert "not a cursor this listing gave" in done.stderr and "Traceback" not in done.stderr


def test_engine_check_reports_a_mistake_in_the_notifications_file(
    run_engine: EngineRunner, runtime_paths: Paths, tmp_path: Path
) -> None:
    """`engine check` reads config/notifications.yaml too: a mistake fails it (exit 1)
    with its file:line:col and a code, as serve would refuse it."""
    (tmp_path / "notifications.yaml").write_text("delivery:\n  attempts: 0\n")
    done = run_engine(
        "check",
        "--rules",
        str(runtime_paths.rules),
        "--registry",
        str(runtime_paths.registry),
        "--config",
        str(tmp_path),
    )
    assert done.returncode == 1
    assert "notifications.yaml:2:3: error[E0902]: attempts: Input should be greater" in done.stderr
