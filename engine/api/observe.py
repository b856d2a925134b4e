"""What serve observes of its own HTTP traffic (docs/observability.md): a request id on
every request, its answer and its log lines, and the in-process metrics of
`GET /metrics` (requests by route template, their durations, intake latency, the
runtime loop's passes).

The request id is the request's own `X-Request-Id` when it is sane (1 to 128
printable ASCII characters, no space), else a GitHub delivery's `X-GitHub-Delivery`
GUID (equally sane), else a fresh one; it is echoed in the answer's `X-Request-Id`."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Mapping

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics

from engine.logs import REQUEST_ID

REQUEST_ID_HEADER = "X-Request-Id"
DELIVERY_HEADER = "X-GitHub-Delivery"
_SANE = re.compile(r"[\x21-\x7e]{1,128}")
UNMATCHED = "unmatched"  # the route label of a request no route matched (a 404 or 405)
# The routes whose answer waits for an admission to be durable (intake latency).
INTAKE_ROUTES = frozenset({"/events", "/github", "/inject"})
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
PASS_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0)


def new_request_id() -> str:
    return uuid.uuid4().hex


def sane(value: str | None) -> str | None:
    """The value when it may be a request id (bounded, printable, no space)."""
    return value if value is not None and _SANE.fullmatch(value) else None


def request_id(headers: Mapping[str, str], generate: Callable[[], str] = new_request_id) -> str:
    """The request's id: its sane X-Request-Id, else its sane X-GitHub-Delivery, else new."""
    return sane(headers.get(REQUEST_ID_HEADER)) or sane(headers.get(DELIVERY_HEADER)) or generate()


def route_of(request: web.Request) -> str:
    """The matched route's template (`/runs/{id}`), never the raw path: a bounded label."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else UNMATCHED


# No `_created` series beside each counter and histogram: in the 0.0.4 text format they
# are separate gauge families of process start times that no dashboard reads.
disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated


class Observed:
    """The in-process metrics of one app, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "engine_http_requests",
            "HTTP requests answered, by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.durations = Histogram(
            "engine_http_request_duration_seconds",
            "Seconds from a request's headers to its answer, by method and route template.",
            ["method", "route"],
            buckets=HTTP_BUCKETS,
            registry=self.registry,
        )
        self.intake = Histogram(
            "engine_intake_duration_seconds",
            "Seconds from an intake request's headers to its answer, given once what it "
            "admitted is durable (this process; POST /events, /github, /inject).",
            ["route"],
            buckets=HTTP_BUCKETS,
            registry=self.registry,
        )
        self.passes = Histogram(
            "engine_planning_duration_seconds",
            "Seconds a runtime-loop pass took that fired, published or planned something "
            "(this process).",
            buckets=PASS_BUCKETS,
            registry=self.registry,
        )

    def answered(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.durations.labels(method, route).observe(seconds)
        if method == "POST" and route in INTAKE_ROUTES:
            self.intake.labels(route).observe(seconds)


OBSERVED = web.AppKey("observed", Observed)


@web.middleware
async def observe_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Outermost: the request id in the log context and the answer's header; the
    request counted and timed by its route template."""
    rid = request_id(request.headers)
    token = REQUEST_ID.set(rid)
    started = time.perf_counter()
    status: int | None = None  # stays None when the handler is cancelled
    try:
        response = await handler(request)
        if not response.prepared:  # a streamed answer sent its headers already
            response.headers[REQUEST_ID_HEADER] = rid
        status = response.status
        return response
    except web.HTTPException as answer:  # a redirect the error middleware lets through
        status = answer.status
        answer.headers[REQUEST_ID_HEADER] = rid
        raise
    finally:
        REQUEST_ID.reset(token)
        if status is not None:
            elapsed = time.perf_counter() - started
            request.app[OBSERVED].answered(request.method, route_of(request), status, elapsed)
