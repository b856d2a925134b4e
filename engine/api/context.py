"""What a handler works with: the app's typed keys, the service (called in a thread,
since the store is synchronous), the settings, and the JSON reply."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from functools import partial
from typing import Any, ParamSpec, TypeVar

from aiohttp import web

from engine.api.auth import operator_from
from engine.api.settings import Settings
from engine.service import Service

P = ParamSpec("P")
T = TypeVar("T")

SERVICE = web.AppKey("service", Service)
SETTINGS = web.AppKey("settings", Settings)
WAKE = web.AppKey("wake", asyncio.Event)  # set after an admission: plan it now


def settings(request: web.Request) -> Settings:
    return request.app[SETTINGS]


def service(request: web.Request) -> Service:
    return request.app[SERVICE]


async def call(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a synchronous service method off the event loop."""
    return await asyncio.to_thread(fn, *args, **kwargs)


def operator(request: web.Request) -> str:
    """The `operator:<name>` the request's bearer token proves (401 otherwise)."""
    return operator_from(settings(request).operators, request.headers.get("Authorization"))


def wake(request: web.Request) -> None:
    request.app[WAKE].set()


_dumps = partial(json.dumps, separators=(",", ":"), default=str)


def reply(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=_dumps)
