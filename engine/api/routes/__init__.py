"""The HTTP routes, one module per concern; `ROUTES` is every table in order."""

from __future__ import annotations

from engine.api.routes import inspect, intake, operate

ROUTES = (intake.routes, operate.routes, inspect.routes)

__all__ = ["ROUTES"]
