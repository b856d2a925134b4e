"""What an adapter reports for one run, and the file that keeps it until it is recorded.

A worker writes the execution to `result.pending.json` in the run's artifact directory
(atomically: a temporary file, fsync, rename) before it records the result in the
database, and removes it once recorded. A worker killed in between, or a database that
stays away longer than the lease, leaves the file: the lease-expiry policy then records
the run from it instead of failing it (docs/runtime.md#runs).
The file names the run, the attempt and the worker, so one left by an earlier attempt
never finishes a later one."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.core.records import RunRecord
from engine.core.states import RunState

log = logging.getLogger("engine.worker")

PENDING = "result.pending.json"
FORMAT = "engine.pending-result/v1"


@dataclass(frozen=True)
class Execution:
    """What an adapter reports for one run."""

    result: dict[str, object] | None
    error: str | None = None
    timed_out: bool = False
    artifact: str | None = None
    workspace_refused: bool = False  # the dirty-workspace guard refused to start it


@dataclass(frozen=True)
class Pending:
    """An execution that ended and is not recorded yet: run `run_id`, attempt `attempt`,
    executed by `worker` (the lease owner), ended at `ended_at`."""

    run_id: str
    attempt: int
    worker: str
    ended_at: str
    execution: Execution

    def belongs_to(self, run: RunRecord) -> bool:
        """Whether this is the result of the run's current lease (it is still running)."""
        return (
            self.run_id == run.run_id
            and self.attempt == run.attempts
            and self.worker == run.lease_owner
            and run.state == RunState.RUNNING
        )


def path(run_dir: Path) -> Path:
    return run_dir / PENDING


def keep(run_dir: Path, pending: Pending) -> None:
    """Write the file atomically and durably: it is complete or absent, even across a
    crash of the machine."""
    run_dir.mkdir(parents=True, exist_ok=True)
    body = {"format": FORMAT, **asdict(pending)}
    temporary = run_dir / f".{PENDING}.{os.getpid()}"
    with temporary.open("w", encoding="utf-8") as f:
        json.dump(body, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path(run_dir))
    _sync_directory(run_dir)


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read(run_dir: Path) -> Pending | None:
    """The pending result in `run_dir`; None when there is none or it is not readable
    (an unreadable file is logged and left for a person)."""
    try:
        body = json.loads(path(run_dir).read_text(encoding="utf-8"))
        return _pending(body)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as err:
        log.warning("ignoring the unreadable pending result in %s: %s", run_dir, err)
        return None


def _pending(body: Any) -> Pending:
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    ex = body["execution"]
    result = ex["result"]
    if result is not None and not isinstance(result, dict):
        raise ValueError("the result is not an object")
    return Pending(
        run_id=str(body["run_id"]),
        attempt=int(body["attempt"]),
        worker=str(body["worker"]),
        ended_at=str(body["ended_at"]),
        execution=Execution(
            result=result,
            error=_text(ex.get("error")),
            timed_out=bool(ex.get("timed_out", False)),
            artifact=_text(ex.get("artifact")),
            workspace_refused=bool(ex.get("workspace_refused", False)),
        ),
    )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def drop(run_dir: Path) -> None:
    """Remove the file once its result is recorded (or can no longer be)."""
    path(run_dir).unlink(missing_ok=True)
