"""Graduating a work-bound loop instance out of shadow (docs/work.md#graduating-an-instance)
over HTTP, on a real SQLite file and a real PostgreSQL database: at once, or deferred
to the next serve start, which applies it exactly once (a second start changes
nothing); the refusals with their status and reason; the pending graduation on the
bindings, the schedules and the inbox's Work page."""

from __future__ import annotations

import dataclasses
import shutil
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loopback import served
from test_work_http import AGENT, ALICE, Api

from engine.api.app import make_app
from engine.api.settings import Settings, parse_tokens
from engine.bootstrap import open_service
from engine.core.work import WorkRequest, binding_id_for
from engine.loading import Paths
from engine.service import Service
from engine.web.pages import SESSIONS
from engine.web.sessions import COOKIE

DATA = Path(__file__).resolve().parents[1] / "data"
SETTINGS = Settings(
    worker=False,
    pump_seconds=0.1,
    operators=parse_tokens(f"alice:{ALICE}", "t"),
    controllers=parse_tokens(f"agent:{AGENT}", "t"),
)


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    shutil.copytree(DATA / "shapes" / "registry", tmp_path / "registry")
    (tmp_path / "loops").mkdir()
    shutil.copy(DATA / "graduate" / "work.rules", tmp_path / "loops")
    (tmp_path / "config").mkdir()
    return Paths(tmp_path / "loops", tmp_path / "registry", tmp_path / "config")


@pytest.fixture
def api(database: str, paths: Paths) -> Iterator[Api]:
    service = open_service(database, paths)
    try:
        with served(make_app(service, SETTINGS)) as url:
            yield Api(service, url)
    finally:
        service.rt.store.close()


def bound(api: Api, key: str, *shapes: str) -> str:
    status, answer = api.call("POST", "/work", {"semanticKey": key, "title": "Repair it"})
    assert status == 201, answer
    work_id = str(answer["work"]["workId"])
    for shape in shapes:
        body = {"loop": shape, "requestId": f"{key}-{shape}"}
        assert api.call("POST", f"/work/{work_id}/bind", body)[0] == 201
    return work_id


def test_graduate_now_or_at_the_next_restart_over_http(api: Api) -> None:
    """200 with the instance: live at once, or in shadow with its pending graduation,
    shown on the item's bindings and on GET /schedules; journaled with the operator."""
    first, second = bound(api, "one", "nudge"), bound(api, "two", "nudge")
    status, now = api.call("POST", f"/work/{first}/bindings/nudge/graduate", {"note": "ok"})
    assert status == 200, now
    assert (now["binding"]["state"], now["binding"]["pendingGraduation"]) == ("live", None)
    body = {"atRestart": True, "note": "after the freeze"}
    status, later = api.call("POST", f"/work/{second}/bindings/nudge/graduate", body)
    assert status == 200, later
    pending = later["binding"]["pendingGraduation"]
    assert later["binding"]["state"] == "shadow"
    assert (pending["requestedBy"], pending["note"]) == ("operator:alice", "after the freeze")
    assert api.call("GET", f"/work/{second}/bindings")[1] == {"bindings": [later["binding"]]}
    _, schedules = api.call("GET", "/schedules")
    assert schedules["pendingGraduations"] == [
        {
            "loop": f"nudge@{second}",
            "shape": "nudge",
            "workId": second,
            "bindingId": binding_id_for(second, "nudge"),
            "state": "shadow",
            "requestedBy": "operator:alice",
            "requestedAt": pending["requestedAt"],
            "note": "after the freeze",
        }
    ]
    assert api.journal(first)[-1] == ("graduated", "operator:alice")
    assert api.journal(second)[-1] == ("graduation_deferred", "operator:alice")


def test_what_does_not_graduate_over_http(api: Api) -> None:
    """No operator token: 401 (a controller's included). An unknown item, an unbound
    shape: 404 with the reason; a shape kept in shadow, an instance already live, a
    second deferral, an instance of ended work: 409 with the reason; an unknown body
    field: 400. None writes anything."""
    work_id = bound(api, "one", "nudge", "watch")
    path = f"/work/{work_id}/bindings/nudge/graduate"
    assert api.call("POST", path, {}, token=None)[0] == 401
    assert api.call("POST", path, {}, token=AGENT)[0] == 401
    assert api.call("POST", path, {"atRestart": True, "by": "x"})[0] == 400
    before = api.journal(work_id)
    for where, body, status, reason in (
        ("/work/work-0000000000000000/bindings/nudge/graduate", {}, 404, "no_work"),
        (f"/work/{work_id}/bindings/plain/graduate", {}, 404, "no_binding"),
        (f"/work/{work_id}/bindings/watch/graduate", {}, 409, "shadow_only"),
        (f"/work/{work_id}/bindings/watch/graduate", {"atRestart": True}, 409, "shadow_only"),
    ):
        found, refused = api.call("POST", where, body)
        assert (found, refused["details"]["reason"]) == (status, reason), where
    assert "a reviewed `shadow false` in loops/work.rules:13 allows it" in refused["message"]
    assert api.journal(work_id) == before
    assert api.call("POST", path, {"atRestart": True})[0] == 200
    found, refused = api.call("POST", path, {"atRestart": True})
    assert (found, refused["details"]["reason"]) == (409, "graduation_pending")
    assert api.call("POST", path, {})[0] == 200  # now, in the deferral's place
    found, refused = api.call("POST", path, {})
    assert (found, refused["details"]["reason"], refused["details"]["state"]) == (
        409,
        "not_shadow",
        "live",
    )
    other = bound(api, "two", "nudge")
    assert api.call("POST", f"/work/{other}/cancel", {})[0] == 200
    found, refused = api.call("POST", f"/work/{other}/bindings/nudge/graduate", {})
    assert (found, refused["details"]["reason"]) == (409, "illegal_transition")


def deferred(service: Service, key: str) -> str:
    """A work item with a `nudge` instance whose graduation is deferred."""
    item, _ = service.add_work(WorkRequest(key, f"Repair {key}"), "operator:ann")
    service.bind_work(item.work_id, "nudge", "operator:ann", f"req-{key}")
    service.graduate(f"nudge@{item.work_id}", "operator:bob", True, "after the freeze")
    return item.work_id


def started(service: Service) -> tuple[Service, list[Any], threading.Event]:
    """`service` whose serve-start call records what it applied and says when it ran."""
    applied: list[Any] = []
    ran = threading.Event()
    real = service.graduate_deferred

    def recorded() -> list[Any]:
        found = real()
        applied.append(found)
        ran.set()
        return found

    service.graduate_deferred = recorded  # type: ignore[method-assign]
    return service, applied, ran


def test_a_serve_start_applies_a_deferral_exactly_once(database: str, paths: Paths) -> None:
    """The next serve start takes the instance still in shadow live and clears the mark
    of one disabled meanwhile, each journaled by `system` naming who deferred it, before
    its first pass; a second start finds nothing pending and changes nothing."""
    service = open_service(database, paths)
    try:
        live, gone = deferred(service, "one"), deferred(service, "two")
        with service.rt.store.write() as tx:
            b = tx.get_binding(binding_id_for(gone, "nudge"))
            assert b is not None
            assert tx.update_binding(dataclasses.replace(b, state="disabled", version=3), 2)
    finally:
        service.rt.store.close()

    journals: list[list[Any]] = []
    for _ in range(2):
        service, applied, ran = started(open_service(database, paths))
        try:
            with served(make_app(service, SETTINGS)):  # its cleanup closes the store
                assert ran.wait(30), "the serve start did not apply its deferrals"
                journals.append(service.journal(limit=1000, entity="work"))
                with service.rt.store.read() as tx:
                    states = {w: tx.get_binding(binding_id_for(w, "nudge")) for w in (live, gone)}
                    assert tx.pending_graduations(10) == []
        finally:
            service.rt.store.close()
        assert len(applied) == 1
        if len(journals) == 1:
            assert sorted((a.binding.work_id, a.dropped) for a in applied[0]) == sorted(
                [(live, None), (gone, "not_shadow")]
            )
        else:
            assert applied[0] == []
        assert states[live] is not None and states[live].state == "live"
        assert states[gone] is not None and states[gone].state == "disabled"
    first, second = journals
    assert second == first  # the second start wrote nothing of work
    ends = {e.entity_id: e for e in first if e.action.startswith("graduat")}
    assert (ends[live].action, ends[live].actor) == ("graduated", "system")
    assert (ends[gone].action, ends[gone].actor) == ("graduation_dropped", "system")
    assert "deferred by operator:bob" in ends[live].note
    assert ends[gone].data is not None and ends[gone].data["reason"] == "not_shadow"


def test_the_work_page_shows_a_pending_graduation(database: str, paths: Paths) -> None:
    """The inbox's Work page says, by the bound loop, that it graduates at the next
    restart and who asked."""
    service, _, ran = started(open_service(database, paths))
    try:
        app = make_app(service, SETTINGS)
        with served(app) as url:
            assert ran.wait(30)  # deferred after this start: pending until the next
            work_id = deferred(service, "one")
            session_id, _ = app[SESSIONS].open("alice")
            request = urllib.request.Request(f"{url}/ui/work")
            request.add_header("Cookie", f"{COOKIE}={session_id}")
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with opener.open(request, timeout=30) as answer:
                page = answer.read().decode()
    finally:
        service.rt.store.close()
    card = page[page.index(f'id="w-{work_id}"') :]
    assert "pending at next restart: graduate, by operator:bob" in card.split("</li>")[0]
