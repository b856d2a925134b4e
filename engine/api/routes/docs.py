"""`GET /openapi.json`: the API's OpenAPI document (docs/api.md#the-openapi-document),
open to anyone: it describes the routes and holds no data."""

from __future__ import annotations

from aiohttp import web

from engine.api import openapi, query
from engine.api.context import reply

routes = web.RouteTableDef()


@routes.get("/openapi.json")
@query.accepts()
async def openapi_document(request: web.Request, _: query.Args) -> web.Response:
    return reply(openapi.document(request.app))
