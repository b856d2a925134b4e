"""The OpenAPI 3.1 document of the JSON API (docs/api.md#the-openapi-document), built
from the application's router: every route but the web pages (`/` and `/ui/...`, HTML
for people, docs/web.md), each with the query parameters it declared
(engine.api.query.accepts), its request body's pydantic model, its answers' models
(engine.api.schema) and the error body of engine/api/errors.py for its refusals.
Served at `GET /openapi.json`; docs/openapi.json is a copy, regenerated with

    python -m engine.api.openapi > docs/openapi.json
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from engine import retry_after
from engine.api import query, schema
from engine.api.bodies import MAX_BATCH
from engine.api.routes.operate import ApproveBody, CancelBody, DecideFindingBody, RejectBody
from engine.api.routes.schedules import PauseBody, ResumeBody
from engine.api.routes.work import (
    BindWorkBody,
    ContinueWorkBody,
    GraduateBody,
    MoveWorkBody,
    OpenWorkBody,
)
from engine.core.envelope import Envelope

REF = "#/components/schemas/{model}"
# The version of the API this document describes (OpenAPI's `info.version`), not the
# engine's: it changes when a route changes incompatibly. The engine's version is in
# `GET /healthz` and `GET /status`.
API_VERSION = "1"

# Why a route refuses, by status (each answered with the Error body).
WHY = {
    400: "a bad query parameter (`bad_query`), cursor (`bad_cursor`) or body",
    401: "no operator token, or one not recognised (or, for intake, a bad signature)",
    403: "refused to this caller",
    404: "no such entity",
    408: "the body did not arrive in time",
    409: "the entity is not in a state that allows this",
    413: "the body is larger than the route's limit",
    422: "well-formed but refused (every reason in `errors`)",
    503: "the database cannot take the request now (`details.reason` says why)",
}


@dataclass(frozen=True, slots=True)
class Operation:
    """What the document says of one route beyond what the router and its declared
    parameters tell: its answers by status (a model, `ADMISSIONS`, or `TEXT`), its
    body, its refusals and who may call it."""

    summary: str
    answers: dict[int, Any]
    refusals: tuple[int, ...] = ()
    body: Any = None
    operator: bool = True  # the bearer token is required
    headers: tuple[tuple[str, str], ...] = ()


TEXT = "text/plain"  # an answer in Prometheus' text format
ADMISSIONS = "admissions"  # one Admission, or a list of them for a batch
GITHUB = "github"  # an Admission, or Ignored
ANY_OBJECT = "object"  # a GitHub delivery's payload: any JSON object

_ID = (404,)
_BODY = (408, 413)
_SIGNED = (
    ("X-Engine-Timestamp", "seconds since the epoch, signed"),
    ("X-Engine-Signature", "sha256=<hex HMAC of timestamp.body> (docs/api.md)"),
)
_GITHUB = (
    ("X-GitHub-Event", "the delivery's kind"),
    ("X-GitHub-Delivery", "the delivery's GUID"),
    ("X-Hub-Signature-256", "sha256=<hex HMAC of the body>"),
)

OPERATIONS: dict[tuple[str, str], Operation] = {
    ("POST", "/events"): Operation(
        "Admit signed envelopes from another system (actor `bridge`)",
        {200: ADMISSIONS, 202: ADMISSIONS},
        (401, *_BODY, 422),
        ADMISSIONS,
        False,
        _SIGNED,
    ),
    ("POST", "/inject"): Operation(
        "Admit unsigned envelopes from this host (actor `inject`, or the token's operator)",
        {200: ADMISSIONS, 202: ADMISSIONS},
        (401, 403, *_BODY, 422),
        ADMISSIONS,
        False,
        (("X-Engine-Operator", "the operator the token names"),),
    ),
    ("POST", "/github"): Operation(
        "A GitHub webhook delivery, signed with ENGINE_GITHUB_WEBHOOK_SECRET",
        {200: GITHUB, 202: GITHUB},
        (401, *_BODY, 422),
        ANY_OBJECT,
        False,
        _GITHUB,
    ),
    ("POST", "/github/replay"): Operation(
        "A saved GitHub delivery replayed from this host, unsigned",
        {200: GITHUB, 202: GITHUB},
        (401, 403, *_BODY, 422),
        ANY_OBJECT,
        False,
        (*_GITHUB[:2], ("X-Engine-Operator", "the operator the token names")),
    ),
    ("GET", "/proposals"): Operation(
        "Proposals, newest first, a page at a time", {200: schema.ProposalsPage}
    ),
    ("GET", "/proposals/{id}"): Operation("One proposal", {200: schema.OneProposal}, _ID),
    ("GET", "/proposals/{id}/review"): Operation(
        "What a person needs to decide a proposal", {200: schema.Document}, _ID
    ),
    ("POST", "/proposals/{id}/approve"): Operation(
        "Approve a proposal and queue its run",
        {200: schema.Approval},
        (403, 404, 409, *_BODY),
        ApproveBody,
    ),
    ("POST", "/proposals/{id}/reject"): Operation(
        "Reject a proposal", {200: schema.OneProposal}, (403, 404, 409, *_BODY), RejectBody
    ),
    ("POST", "/runs/{id}/cancel"): Operation(
        "Cancel a run that has not ended", {200: schema.OneRun}, (404, 409, *_BODY), CancelBody
    ),
    ("GET", "/findings"): Operation("Findings", {200: schema.Findings}),
    ("GET", "/findings/{id}"): Operation("One finding", {200: schema.OneFinding}, _ID),
    ("POST", "/findings/{id}/promote"): Operation(
        "Promote a finding (a human only)",
        {200: schema.OneFinding},
        (403, 404, 409, *_BODY),
        DecideFindingBody,
    ),
    ("POST", "/findings/{id}/dismiss"): Operation(
        "Dismiss a finding", {200: schema.OneFinding}, (404, 409, *_BODY), RejectBody
    ),
    ("GET", "/shadow/{loop}"): Operation("A loop's shadow report", {200: schema.Document}, _ID),
    ("GET", "/events"): Operation(
        "Admitted events, newest first, a page at a time", {200: schema.EventsPage}
    ),
    ("GET", "/events/{id}"): Operation(
        "An event with its decision and occurrence", {200: schema.EventDetail}, _ID
    ),
    ("GET", "/explain/{id}"): Operation(
        "The causal chain of an event, both ways", {200: schema.Document}, _ID
    ),
    ("GET", "/runs"): Operation("Runs, newest first, a page at a time", {200: schema.RunsPage}),
    ("GET", "/runs/{id}"): Operation("One run", {200: schema.OneRun}, _ID),
    ("GET", "/notifications"): Operation(
        "Notifications with their delivery state per sink, newest first, a page at a time",
        {200: schema.NotificationsPage},
    ),
    ("GET", "/journal"): Operation(
        "The journal, oldest first after `after`", {200: schema.JournalPage}
    ),
    ("GET", "/metrics"): Operation("The audit figures in Prometheus' text format", {200: TEXT}),
    ("GET", "/healthz"): Operation(
        "Liveness: no token, no database", {200: schema.Health}, operator=False
    ),
    ("GET", "/readyz"): Operation(
        "Readiness: the database answers, its migrations are this engine's; no token",
        {200: schema.Ready, 503: schema.Ready},
        operator=False,
    ),
    ("GET", "/status"): Operation(
        "Counts, digests and the doctor's findings; no token", {200: schema.Status}, operator=False
    ),
    ("GET", "/openapi.json"): Operation(
        "This document; no token", {200: schema.Document}, operator=False
    ),
    ("GET", "/schedules"): Operation("Every loop's schedule", {200: schema.Schedules}),
    ("GET", "/schedules/{loop}"): Operation("One loop's schedule", {200: schema.OneSchedule}, _ID),
    ("GET", "/schedules/{loop}/slots"): Operation(
        "A loop's due slots since a time and what came of each", {200: schema.Slots}, _ID
    ),
    ("POST", "/schedules/{loop}/pause"): Operation(
        "Pause a loop", {200: schema.OneSchedule}, (404, 409, *_BODY), PauseBody
    ),
    ("POST", "/schedules/{loop}/resume"): Operation(
        "Resume a paused loop", {200: schema.OneSchedule}, (404, 409, *_BODY), ResumeBody
    ),
    ("POST", "/schedules/{loop}/trigger"): Operation(
        "Run a loop now", {202: schema.Admission}, (404, 409)
    ),
    ("GET", "/work"): Operation(
        "Work items, newest first, a page at a time", {200: schema.WorkPage}
    ),
    ("POST", "/work"): Operation(
        "Open work, or answer the live item that holds its semantic key",
        {200: schema.OpenedWork, 201: schema.OpenedWork},
        (*_BODY, 413, 422),
        OpenWorkBody,
    ),
    ("GET", "/work/{id}"): Operation(
        "One work item (an operator's or a controller's token)", {200: schema.OneWork}, _ID
    ),
    ("POST", "/work/{id}/bind"): Operation(
        "Bind a reviewed work-bound loop shape to the item (in shadow), idempotent by requestId",
        {200: schema.Bound, 201: schema.Bound},
        (404, 409, *_BODY, 422),
        BindWorkBody,
    ),
    ("GET", "/work/{id}/bindings"): Operation(
        "The item's work-bound loop instances", {200: schema.WorkBindings}, _ID
    ),
    ("POST", "/work/{id}/bindings/{shape}/graduate"): Operation(
        "Take the item's instance of a shape out of shadow mode, now or at the next serve start",
        {200: schema.OneBinding},
        (404, 409, *_BODY),
        GraduateBody,
    ),
    ("POST", "/work/{id}/continue"): Operation(
        "Claim or renew the controller lease (the token's principal owns it)",
        {200: schema.OneWork},
        (404, 409, *_BODY),
        ContinueWorkBody,
    ),
    ("POST", "/work/{id}/complete"): Operation(
        "The work is done (a controller's or an operator's token)",
        {200: schema.OneWork},
        (404, 409, *_BODY),
        MoveWorkBody,
    ),
    ("POST", "/work/{id}/block"): Operation(
        "The work waits on something outside it",
        {200: schema.OneWork},
        (404, 409, *_BODY),
        MoveWorkBody,
    ),
    ("POST", "/work/{id}/reopen"): Operation(
        "Back to open, the lease dropped", {200: schema.OneWork}, (404, 409, *_BODY), MoveWorkBody
    ),
    ("POST", "/work/{id}/cancel"): Operation(
        "The work will not be done", {200: schema.OneWork}, (404, 409, *_BODY), MoveWorkBody
    ),
}

# Answers that touch no database, so never a 503.
NO_DATABASE = {("GET", "/healthz"), ("GET", "/openapi.json")}


def is_page(path: str) -> bool:
    """A web page (docs/web.md), left out of the document."""
    return path == "/" or path == "/ui" or path.startswith("/ui/")


def api_routes(app: web.Application) -> Iterator[tuple[str, str, web.AbstractRoute]]:
    """(method, path template, route) of every JSON API route, as the router has them
    (the HEAD aiohttp adds beside each GET left out)."""
    for route in app.router.routes():
        path = route.resource.canonical if route.resource is not None else ""
        if route.method != "HEAD" and not is_page(path):
            yield route.method, path, route


def document(app: web.Application) -> dict[str, Any]:
    """The OpenAPI document of `app`'s JSON API; KeyError for a route this module does
    not describe (add it to OPERATIONS)."""
    models = _models()
    names, defs = models_json_schema(
        [(m, "serialization") for m in models if m not in _BODIES]
        + [(m, "validation") for m in _BODIES],
        ref_template=REF,
    )
    refs: dict[Any, str] = {m: v["$ref"] for (m, _), v in names.items() if _is_model(m)}
    paths: dict[str, dict[str, Any]] = {}
    for method, path, route in sorted(api_routes(app), key=lambda r: (r[1], r[0])):
        try:
            operation = OPERATIONS[(method, path)]
        except KeyError:
            raise KeyError(f"{method} {path} is not described in engine.api.openapi") from None
        declared = query.DECLARED.get(route.handler, query.Params())
        paths.setdefault(path, {})[method.lower()] = _operation(
            method, path, operation, declared, refs
        )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "engine",
            "version": API_VERSION,
            "description": "The engine's JSON API (docs/api.md). Operator routes take "
            "`Authorization: Bearer <token>` (ENGINE_OPERATOR_TOKEN).",
        },
        "paths": paths,
        "components": {
            "schemas": defs.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


_BODIES: tuple[type[BaseModel], ...] = (
    ApproveBody,
    RejectBody,
    CancelBody,
    DecideFindingBody,
    PauseBody,
    ResumeBody,
    OpenWorkBody,
    BindWorkBody,
    GraduateBody,
    MoveWorkBody,
    ContinueWorkBody,
    Envelope,
)


def _is_model(found: object) -> bool:
    return isinstance(found, type) and issubclass(found, BaseModel)


def _models() -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = [schema.Error, schema.Admission, schema.Ignored]
    for operation in OPERATIONS.values():
        for answer in operation.answers.values():
            if isinstance(answer, type) and answer not in found:
                found.append(answer)
    return [*found, *_BODIES]


def _operation(
    method: str,
    path: str,
    operation: Operation,
    declared: query.Params,
    refs: dict[type[BaseModel], str],
) -> dict[str, Any]:
    found: dict[str, Any] = {
        "summary": operation.summary,
        "operationId": _operation_id(method, path),
        "parameters": [*_path_params(path), *_query_params(declared), *_headers(operation)],
        "responses": _responses(method, path, operation, refs),
    }
    if operation.operator:
        found["security"] = [{"bearer": []}]
    elif (method, path) in {("POST", "/inject"), ("POST", "/github/replay")}:
        found["security"] = [{}, {"bearer": []}]  # the token is optional: it names the actor
    else:
        found["security"] = []
    if operation.body is not None:
        found["requestBody"] = _body(operation.body, refs)
    elif method == "POST":
        found["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    return found


def _operation_id(method: str, path: str) -> str:
    words = re.findall(r"[A-Za-z0-9]+", path.replace("{", "by_").replace(".json", ""))
    return "_".join([method.lower(), *words]) if words else method.lower()


def _path_params(path: str) -> list[dict[str, Any]]:
    return [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in re.findall(r"\{([^}:]+)", path)
    ]


def _query_params(declared: query.Params) -> list[dict[str, Any]]:
    return [
        {
            "name": p.name,
            "in": "query",
            "required": False,
            "description": p.description,
            "schema": p.schema(),
        }
        for p in declared.params
    ]


def _headers(operation: Operation) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "in": "header",
            "required": False,
            "description": why,
            "schema": {"type": "string"},
        }
        for name, why in operation.headers
    ]


def _json(schema_: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema_}}}


def _answer_schema(answer: Any, refs: dict[type[BaseModel], str]) -> dict[str, Any]:
    if answer == ADMISSIONS:
        one = {"$ref": refs[schema.Admission]}
        return {"oneOf": [one, {"type": "array", "items": one}]}
    if answer == GITHUB:
        return {"oneOf": [{"$ref": refs[schema.Admission]}, {"$ref": refs[schema.Ignored]}]}
    return {"$ref": refs[answer]}


def _responses(
    method: str, path: str, operation: Operation, refs: dict[type[BaseModel], str]
) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for status, answer in operation.answers.items():
        if answer == TEXT:
            found[str(status)] = {
                "description": "OK",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        else:
            why = {202: "admitted"}.get(
                status, "OK" if status < 400 else "not OK: the body says why"
            )
            found[str(status)] = _json(_answer_schema(answer, refs), why)
    refusals = {400, *operation.refusals}
    if operation.operator:
        refusals.add(401)
    if (method, path) not in NO_DATABASE:
        refusals.add(503)
    error = {"$ref": refs[schema.Error]}
    for status in sorted(refusals - operation.answers.keys()):  # /readyz answers its own 503
        found[str(status)] = _json(error, WHY[status])
    if "503" in found:
        found["503"]["headers"] = _retry_after()
    return found


def _retry_after() -> dict[str, Any]:
    """The header every 503 carries (docs/api.md#when-to-come-back)."""
    return {
        retry_after.HEADER: {
            "description": "whole seconds to wait before sending the request again",
            "required": True,
            "schema": {"type": "integer", "minimum": 1},
        }
    }


def _body(body: Any, refs: dict[type[BaseModel], str]) -> dict[str, Any]:
    if body == ADMISSIONS:
        one = {"$ref": refs[Envelope]}
        shape = {
            "oneOf": [one, {"type": "array", "items": one, "minItems": 1, "maxItems": MAX_BATCH}]
        }
        return {"required": True, "content": {"application/json": {"schema": shape}}}
    if body == ANY_OBJECT:
        return {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}}
    return {"required": False, "content": {"application/json": {"schema": {"$ref": refs[body]}}}}


def routes_app() -> web.Application:
    """An application with the API's routes (and the web pages'), as make_app adds
    them, and nothing running: what `python -m engine.api.openapi` documents."""
    from engine.api.routes import ROUTES
    from engine.web import pages

    app = web.Application()
    for table in ROUTES:
        app.add_routes(table)
    pages.setup(app)
    return app


def text(doc: dict[str, Any]) -> str:
    """The document as docs/openapi.json holds it."""
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def main() -> int:
    sys.stdout.write(text(document(routes_app())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
