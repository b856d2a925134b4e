"""The HTTP routes, one module per concern; `ROUTES` is every table in order."""

from __future__ import annotations

from engine.api.routes import docs, github, inspect, intake, operate, schedules, work

ROUTES = (
    intake.routes,
    github.routes,
    operate.routes,
    inspect.routes,
    schedules.routes,
    work.routes,
    docs.routes,
)

__all__ = ["ROUTES"]
