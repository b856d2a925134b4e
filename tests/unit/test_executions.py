"""The result file a worker keeps until a run is recorded, and the worker's retry policy:
which store errors are worth trying again, and how long it keeps trying."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from engine.core.records import RunRecord
from engine.errors import Conflict, NotFound, Unavailable
from engine.service import executions
from engine.service.executions import Execution, Pending
from engine.worker import RECORD_SECONDS, RETRY_CAP_SECONDS, retry_delay, transient

RUN = RunRecord(
    run_id="run-1",
    idempotency_key="event:e-1",
    event_id="e-1",
    proposal_id="prop-1",
    loop=None,
    definition="touch@1",
    state="running",
    approved_by="operator:alice",
    attempts=2,
    lease_owner="w1",
    lease_expires_at="2026-12-01T09:01:00.000000Z",
    created_at="2026-12-01T09:00:00.000000Z",
)
DONE = Execution(result={"outcome": "OK", "n": [1, 2.5]}, error=None, artifact="/r/stdout.log")


def pending(**changes: object) -> Pending:
    base = Pending("run-1", 2, "w1", "2026-12-01T09:00:30.000000Z", DONE)
    return replace(base, **changes)  # type: ignore[arg-type]


def test_a_kept_result_reads_back_as_it_was(tmp_path: Path) -> None:
    """What the worker keeps is what a later process reads: every Execution field, the
    attempt, the worker and when the execution ended; nothing else is left beside it."""
    failed = Execution(result=None, error="boom", timed_out=True, workspace_refused=True)
    for execution in (DONE, failed):
        executions.keep(tmp_path, pending(execution=execution))
        assert executions.read(tmp_path) == pending(execution=execution)
    assert [p.name for p in tmp_path.iterdir()] == [executions.PENDING]


def test_a_dropped_or_missing_result_reads_as_none(tmp_path: Path) -> None:
    """Once dropped there is nothing to record; dropping twice is harmless."""
    executions.keep(tmp_path, pending())
    executions.drop(tmp_path)
    executions.drop(tmp_path)
    assert executions.read(tmp_path) is None
    assert executions.read(tmp_path / "never-made") is None


@pytest.mark.parametrize(
    "text",
    ["", "{not json", "[]", '{"format": "other/v1"}', '{"format": "engine.pending-result/v1"}'],
)
def test_an_unreadable_result_file_is_ignored(tmp_path: Path, text: str) -> None:
    """A truncated, foreign or incomplete file is never taken for a result."""
    executions.path(tmp_path).write_text(text)
    assert executions.read(tmp_path) is None


@pytest.mark.parametrize(
    ("run", "belongs"),
    [
        (RUN, True),
        (replace(RUN, attempts=3), False),  # a later attempt of a requeued run
        (replace(RUN, lease_owner="w2"), False),  # another worker holds it now
        (replace(RUN, state="claimed"), False),  # never started: no execution to record
        (replace(RUN, state="failed", lease_owner=None), False),  # already recorded
        (replace(RUN, run_id="run-2"), False),
    ],
)
def test_a_result_finishes_only_the_lease_it_came_from(run: RunRecord, belongs: bool) -> None:
    """The file is the result of one attempt under one worker's lease, while the run
    still runs: it never finishes a later attempt or a run that moved on."""
    assert pending().belongs_to(run) is belongs


@pytest.mark.parametrize(
    ("error", "retry"),
    [
        (Unavailable("cannot open the database"), True),
        (sqlite3.OperationalError("database is locked"), True),
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),
        (psycopg.errors.AdminShutdown("terminating connection"), True),
        (Conflict("lease lost"), False),
        (NotFound("no run"), False),
        (sqlite3.IntegrityError("UNIQUE constraint failed"), False),
        (psycopg.errors.UniqueViolation("duplicate key"), False),
        (ValueError("a bug"), False),
    ],
)
def test_only_errors_that_may_pass_are_retried(error: Exception, retry: bool) -> None:
    """A lost connection, a database that is down, restarting or busy is tried again;
    a definite answer (a lost lease, a missing run) or a bug is not."""
    assert transient(error) is retry


def test_recording_is_retried_for_longer_than_a_restart_with_capped_backoff() -> None:
    """Waits double from 0.1 s up to the cap, and the tries span minutes."""
    delays = [retry_delay(n) for n in range(12)]
    assert delays[:4] == [0.1, 0.2, 0.4, 0.8]
    assert max(delays) == RETRY_CAP_SECONDS and delays == sorted(delays)
    assert retry_delay(10_000) == RETRY_CAP_SECONDS
    assert RECORD_SECONDS >= 120
