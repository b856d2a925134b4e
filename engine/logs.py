"""The log lines of `engine serve` and `engine worker` (docs/observability.md#logs): one
configuration for both, text or JSON, and the request id of the HTTP request being
handled on every line emitted while handling it.

Text is `2026-12-01 10:00:00,123 INFO engine.serve: message`, then ` request_id=ID`
on a line emitted for an HTTP request. JSON is one object per line: `ts` (UTC, ISO
8601), `level`, `logger`, `msg`, then every field the line carries (request_id,
method, path, status, duration_ms, loop...); in text those facts are in the message."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, TextIO

from engine.errors import ConfigError

FORMATS = ("text", "json")
LEVELS = ("debug", "info", "warning", "error")
FORMAT_ENV = "ENGINE_LOG_FORMAT"
LEVEL_ENV = "ENGINE_LOG_LEVEL"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
TEXT_FIELDS = ("request_id",)  # the fields a text line adds after its message

# The id of the HTTP request being handled (engine.api.observe sets it per request).
REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)

# What every LogRecord has; anything else on a record is a field of the line.
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """The extra fields of a record (`extra=`), the request id among them."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and v is not None}


class RequestIdFilter(logging.Filter):
    """Puts the request id in hand (REQUEST_ID) on a record that has none of its own."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = REQUEST_ID.get()
        return True


class TextFormatter(logging.Formatter):
    """The classic line, then ` key=value` for each of TEXT_FIELDS it carries."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        carried = fields(record)
        extra = "".join(f" {k}={carried[k]}" for k in TEXT_FIELDS if k in carried)
        if not extra:
            return line
        head, newline, rest = line.partition("\n")  # after the message, before a traceback
        return head + extra + newline + rest


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, the fields, and `exc` (the
    traceback, as one string) when the record carries an exception."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **fields(record),
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


def configure(log_format: str = "text", level: str = "info", stream: TextIO | None = None) -> None:
    """Send every logger's lines at `level` and above to `stream` (stderr), formatted
    as `log_format`; replaces any handler configured before."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())


def add_options(parser: argparse.ArgumentParser) -> None:
    """`--log-format` and `--log-level`; unset, the environment's, else text and info."""
    parser.add_argument(
        "--log-format",
        choices=FORMATS,
        help=f"log lines as text or one JSON object per line (default: ${FORMAT_ENV}, else text)",
    )
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        help=f"the least severe lines logged (default: ${LEVEL_ENV}, else info)",
    )


def chosen(
    flag: str | None, env: Mapping[str, str], name: str, allowed: tuple[str, ...], default: str
) -> str:
    """The flag, else the environment variable `name`, else `default`. A value of the
    variable outside `allowed` is a ConfigError (exit 2) naming it."""
    if flag is not None:
        return flag
    value = env.get(name, "").strip().lower()
    if not value:
        return default
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}, not '{value}'")
    return value


def configure_from(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> None:
    """Configure the logs from a command's --log-format and --log-level (the flags win
    over ENGINE_LOG_FORMAT and ENGINE_LOG_LEVEL). ConfigError on a bad variable."""
    log_format = chosen(args.log_format, env, FORMAT_ENV, FORMATS, "text")
    level = chosen(args.log_level, env, LEVEL_ENV, LEVELS, "info")
    configure(log_format, level)


class Progress:
    """A progress line for long work, at most once per `every` seconds and never for
    work that ends within its first `every` seconds: `catch-up: loop X 1,200/10,000
    slots`. `clock` is injected (monotonic seconds)."""

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        every: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger, self.what, self.every, self.clock = logger, what, every, clock
        self.last = clock()

    def due(self) -> bool:
        """Whether `every` seconds passed since the last line (or the start)."""
        return self.clock() - self.last >= self.every

    def step(self, label: str, done: int, total: int, unit: str, **extra: Any) -> bool:
        """Log `what: label done/total unit` when it is due; whether it did."""
        if not self.due():
            return False
        self.last = self.clock()
        self.logger.info(
            "%s: %s %s/%s %s",
            self.what,
            label,
            f"{done:,}",
            f"{total:,}",
            unit,
            extra={"done": done, "total": total, **extra},
        )
        return True
