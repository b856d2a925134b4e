"""The OpenAPI document (docs/api.md#the-openapi-document): it describes every route of
the JSON API the application registers and no other, with the query parameters each
route declared; docs/openapi.json is what the code generates; a running serve answers
it without a token."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from conftest import Serve

from engine.api import openapi, query
from engine.api.app import make_app
from engine.api.settings import Settings
from engine.bootstrap import open_service
from engine.loading import Paths

ROOT = Path(__file__).resolve().parents[2]
API_TREE = ROOT / "tests" / "data" / "api"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[web.Application]:
    """The application `engine serve` runs (make_app over a real SQLite file)."""
    db = tmp_path_factory.mktemp("openapi") / "e.db"
    tree = Paths(API_TREE / "loops", API_TREE / "registry", API_TREE / "config")
    service = open_service(str(db), tree)
    yield make_app(service, Settings(worker=False))
    service.rt.store.close()


def registered(app: web.Application) -> set[tuple[str, str]]:
    """(method, path template) of every route but HEAD and the web pages."""
    found = set()
    for route in app.router.routes():
        path = route.resource.canonical if route.resource is not None else ""
        if route.method != "HEAD" and path != "/" and not path.startswith("/ui"):
            found.add((route.method, path))
    return found


def documented(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(m.upper(), path) for path, ops in doc["paths"].items() for m in ops}


def test_every_registered_route_is_documented_and_nothing_else(app: web.Application) -> None:
    """Each route of the JSON API the application registers is an operation of the
    document, and each operation (and each described route) is a registered route."""
    routes = registered(app)
    assert documented(openapi.document(app)) == routes
    assert set(openapi.OPERATIONS) == routes
    assert ("GET", "/runs") in routes and ("POST", "/proposals/{id}/approve") in routes


def test_each_operation_lists_the_query_parameters_its_route_accepts(
    app: web.Application,
) -> None:
    """The document's query parameters of a route are those the route declared (and
    so accepts), with their bounds; a route declaring none lists none."""
    doc = openapi.document(app)
    by_route = {
        (r.method, r.resource.canonical): query.DECLARED.get(r.handler, query.Params()).names
        for r in app.router.routes()
        if r.resource is not None and (r.method, r.resource.canonical) in documented(doc)
    }
    for (method, path), names in by_route.items():
        params = doc["paths"][path][method.lower()]["parameters"]
        assert [p["name"] for p in params if p["in"] == "query"] == names, (method, path)
    (limit,) = [p for p in doc["paths"]["/runs"]["get"]["parameters"] if p["name"] == "limit"]
    assert limit["schema"] == {"type": "integer", "minimum": 1, "maximum": 1000, "default": 50}


def test_operator_routes_require_the_bearer_token(app: web.Application) -> None:
    """Operator routes name the bearer scheme; the open ones (status, healthz, the
    document, signed intake) do not require it."""
    doc = openapi.document(app)
    assert doc["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
    assert doc["paths"]["/runs"]["get"]["security"] == [{"bearer": []}]
    for path in ("/status", "/healthz", "/openapi.json"):
        assert doc["paths"][path]["get"]["security"] == []
    assert doc["paths"]["/events"]["post"]["security"] == []


def test_docs_copy_is_what_the_code_generates(app: web.Application) -> None:
    """docs/openapi.json equals the document of the running application and the output
    of `python -m engine.api.openapi` (the command that regenerates it)."""
    kept = (ROOT / "docs" / "openapi.json").read_text("utf-8")
    assert kept == openapi.text(openapi.document(app)), (
        "docs/openapi.json is stale: python -m engine.api.openapi > docs/openapi.json"
    )
    printed = subprocess.run(
        [sys.executable, "-m", "engine.api.openapi"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert printed.stdout == kept


def test_a_running_serve_answers_the_document_without_a_token(api_serve: Serve) -> None:
    """GET /openapi.json needs no token and is the document of docs/openapi.json."""
    status, answer = api_serve.request("GET", "/openapi.json")
    kept = json.loads((ROOT / "docs" / "openapi.json").read_text("utf-8"))
    assert status == 200 and answer == kept
