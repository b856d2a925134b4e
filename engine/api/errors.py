"""The one place an error becomes an HTTP answer: EngineError -> its status and
`as_dict()` (a 503 with its `Retry-After`, engine.retry_after), aiohttp's HTTP
errors -> the same JSON shape, anything else -> 500 `{"error": "internal_error"}` and
a log line. A client never sees a traceback."""

from __future__ import annotations

import json
import logging
import re
from functools import partial
from typing import Any

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler

from engine import retry_after
from engine.errors import EngineError, RequestTimeout

log = logging.getLogger("engine.api")


_KEEP_HEADERS = (hdrs.ALLOW, hdrs.WWW_AUTHENTICATE)
_dumps = partial(json.dumps, separators=(",", ":"))


def _json(body: dict[str, Any], status: int, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(body, status=status, headers=headers, dumps=_dumps)


def _slug(reason: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", reason.lower()).strip("_") or "http_error"


def http_error(err: web.HTTPException) -> web.Response:
    """aiohttp's own refusals (unknown route, wrong method...) in the engine's shape."""
    body = {"error": _slug(err.reason), "message": err.reason}
    headers = {str(k): v for k in _KEEP_HEADERS if (v := err.headers.get(k)) is not None}
    return _json(body, err.status, headers)


def engine_error(err: EngineError) -> web.Response:
    """The error's answer: a 401 with its challenge, a 503 with when to come back."""
    headers: dict[str, str] | None = None
    if err.status == 401:
        headers = {str(hdrs.WWW_AUTHENTICATE): 'Bearer realm="engine"'}
    elif err.status == 503:
        headers = retry_after.header(str(err.details.get("reason") or err.code))
    return _json(err.as_dict(), err.status, headers)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except EngineError as err:
        if err.status == 500:  # an engine fault: logged, never detailed to the client
            log.error("%s %s: %s", request.method, request.path, err.message)
            return _json({"error": "internal_error"}, 500)
        answer = engine_error(err)
        if isinstance(err, RequestTimeout):  # the rest of the body is not waited for
            answer.force_close()
        return answer
    except web.HTTPException as err:
        if err.status < 400:
            raise
        return http_error(err)
    except ConnectionError:  # the client went away mid-request: nobody to answer
        log.info("%s %s: the client closed the connection", request.method, request.path)
        return _json({"error": "client_gone"}, 400)
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return _json({"error": "internal_error"}, 500)
