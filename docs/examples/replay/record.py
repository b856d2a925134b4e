"""Make docs/examples/replay/recorded.db, the recorded database of docs/replay.md's
how-to, by driving the real service over the rules beside this script with an
injected clock: the first slots fire at 10:00, one proposal is approved and one
rejected, the approved run finishes with an outcome, and the service then sleeps until
14:10 (under `catch_up none` each loop fires its newest slot and skips the older ones).

    python docs/examples/replay/record.py            # rewrite recorded.db
    python docs/examples/replay/record.py OUT.db     # or write another file"""

from __future__ import annotations

import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from engine.bootstrap import open_service
from engine.loading import Paths
from engine.service import Execution

HERE = Path(__file__).resolve().parent
START = datetime(2026, 12, 1, 9, 59, 59, tzinfo=UTC)


class Clock:
    """The injected clock: where the script last put it."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def record(db: Path) -> None:
    """Write the recorded history into a new SQLite file `db` (made in a scratch
    directory, where the run's artifact goes, then copied)."""
    with tempfile.TemporaryDirectory(prefix="recorded-") as scratch:
        made = Path(scratch) / "recorded.db"
        _drive(made)
        shutil.copyfile(made, db)


def _drive(db: Path) -> None:
    clock = Clock()
    paths = Paths(HERE / "loops", HERE / "registry", HERE / "no-config")
    service = open_service(str(db), paths, clock=clock)
    try:
        service.pump()  # 09:59:59: enablement recorded, nothing due yet
        clock.now = datetime(2026, 12, 1, 10, 0, 0, 500000, tzinfo=UTC)
        service.pump()  # both loops fire their 10:00 slot: two proposals
        hourly, sweep = sorted(service.proposals(100, "open"), key=lambda p: p.loop or "")
        service.approve(hourly.proposal_id, "operator:alice", "looks right")
        service.reject(sweep.proposal_id, "operator:bob", "not this one")
        run = service.claim("w1", 60.0)
        assert run is not None
        service.start(run, "w1")
        service.finish(run, "w1", Execution(result={"outcome": "OK", "summary": "done"}))
        clock.now = datetime(2026, 12, 1, 14, 10, tzinfo=UTC)
        service.pump()  # after a sleep: the newest slot fires, the older ones are skipped
    finally:
        service.rt.store.close()


if __name__ == "__main__":
    record(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "recorded.db")
