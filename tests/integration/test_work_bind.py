"""Binding a reviewed work-bound loop shape to a work item (docs/work.md#work-bound-loops),
over HTTP and the CLI, on a real SQLite file and a real PostgreSQL database: an instance
starts in shadow, one per item and shape, idempotent by its request id, journaled with
the operator; a plain loop, an unknown shape or terminal work bind nothing."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from loopback import served
from test_work_http import ALICE, Api

from engine.api.app import make_app
from engine.api.settings import Settings, parse_tokens
from engine.bootstrap import open_service
from engine.cli.main import main
from engine.loading import Paths

SHAPES = Path(__file__).resolve().parents[1] / "data" / "shapes"
RULES = """loop nudge
  work continuation controller coder
  every 1h
  emit work.nudged
  cooldown 30m
  backoff base 5m max 2h
  budget daily_runs 12

loop plain
  every 1h
  emit work.nudged

route work.nudged to nudge@1
"""


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    shutil.copytree(SHAPES / "registry", tmp_path / "registry")
    (tmp_path / "loops").mkdir()
    (tmp_path / "loops" / "t.rules").write_text(RULES)
    (tmp_path / "config").mkdir()
    return Paths(tmp_path / "loops", tmp_path / "registry", tmp_path / "config")


@pytest.fixture
def api(database: str, paths: Paths) -> Iterator[Api]:
    service = open_service(database, paths)
    settings = Settings(
        worker=False, pump_seconds=0.1, operators=parse_tokens(f"alice:{ALICE}", "t")
    )
    try:
        with served(make_app(service, settings)) as url:
            yield Api(service, url)
    finally:
        service.rt.store.close()


def opened(api: Api, key: str = "repair-42") -> str:
    status, answer = api.call("POST", "/work", {"semanticKey": key, "title": "Repair it"})
    assert status == 201, answer
    return str(answer["work"]["workId"])


def test_a_bind_makes_one_shadow_instance_idempotently(api: Api) -> None:
    work_id = opened(api)
    path = f"/work/{work_id}/bind"
    status, made = api.call("POST", path, {"loop": "nudge", "requestId": "req-1"})
    assert status == 201, made
    binding = made["binding"]
    assert (binding["shape"], binding["state"], binding["createdBy"]) == (
        "nudge",
        "shadow",
        "operator:alice",
    )
    again = api.call("POST", path, {"loop": "nudge", "requestId": "req-1"})
    other_request = api.call("POST", path, {"loop": "nudge", "requestId": "req-2"})
    assert again == other_request == (200, {"binding": binding, "created": False})
    assert api.call("GET", f"/work/{work_id}/bindings")[1] == {"bindings": [binding]}
    other = opened(api, "other")
    status, reused = api.call(
        "POST", f"/work/{other}/bind", {"loop": "nudge", "requestId": "req-1"}
    )
    assert (status, reused["details"]["reason"]) == (409, "request_reused")
    assert [a for a, _ in api.journal(work_id)] == ["opened", "bound"]


def test_what_binds_nothing(api: Api) -> None:
    """A plain loop or an unknown name is no shape (404 `no_shape`); terminal work
    refuses (409); an unknown item is 404; nothing is written."""
    work_id = opened(api)
    for loop in ("plain", "nudg"):
        status, refused = api.call(
            "POST", f"/work/{work_id}/bind", {"loop": loop, "requestId": "r"}
        )
        assert (status, refused["details"]["reason"]) == (404, "no_shape"), loop
    assert (
        "did you mean 'nudge'"
        in api.call("POST", f"/work/{work_id}/bind", {"loop": "nudg", "requestId": "r"})[1][
            "message"
        ]
    )
    status, _ = api.call("POST", "/work/work-none/bind", {"loop": "nudge", "requestId": "r"})
    assert status == 404
    api.call("POST", f"/work/{work_id}/cancel", {})
    status, refused = api.call("POST", f"/work/{work_id}/bind", {"loop": "nudge", "requestId": "r"})
    assert (status, refused["details"]["reason"]) == (409, "illegal_transition")
    assert api.call("GET", f"/work/{work_id}/bindings")[1] == {"bindings": []}


def test_the_cli_binds_as_the_operator(database: str, paths: Paths) -> None:
    open_service(database, paths).rt.store.close()

    def engine(*args: str) -> tuple[int, str, str]:
        tree = [
            "--rules",
            str(paths.rules),
            "--registry",
            str(paths.registry),
            "--config",
            str(paths.config),
        ]
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main([*args, "--db", database, *tree])
        return code, out.getvalue(), err.getvalue()

    code, out, _ = engine("work", "add", "k", "t", "--as", "alice", "--json")
    work_id = json.loads(out)["work"]["workId"]
    code, out, err = engine("work", "bind", work_id, "nudge", "--as", "bob")
    assert code == 0, err
    assert out.startswith(f"bound nudge to {work_id} (shadow, bind-")
    code, out, _ = engine("work", "bind", work_id, "nudge", "--as", "bob", "--json")
    doc: dict[str, Any] = json.loads(out)
    assert doc["created"] is False and doc["binding"]["createdBy"] == "operator:bob"
    code, _, err = engine("work", "bind", work_id, "plain", "--as", "bob")
    assert code == 1 and "no work-bound loop shape 'plain'" in err
