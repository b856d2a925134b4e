"""The occurrence engine through the real runtime (docs/occurrences.md, issue 8): a
Service over tests/data/occurrence_engine on a real database (every test runs on SQLite
and on PostgreSQL), its clock placed by the test, runs executed by the real worker
through the command adapter (scripts/act.py answers what the test wrote for its
loop). Each group of tests names the sections of docs/occurrences.md it holds."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.bootstrap import open_service
from engine.core.envelope import Envelope
from engine.core.records import EventRecord, OccurrenceRecord
from engine.errors import Conflict, Forbidden
from engine.loading import Paths
from engine.notify.config import Notifying
from engine.notify.sinks import LogSink
from engine.service import Execution, Service
from engine.service.metrics import prometheus, scrape
from engine.worker import adapters_for, work_once

ROOT = Path(__file__).resolve().parent.parent.parent
TREE = ROOT / "tests" / "data" / "occurrence_engine"
START = datetime(2026, 12, 1, 9, 59, 59, tzinfo=UTC)  # enablement; 10:00 is the first slot
LOOPS = tuple(re.findall(r"^loop (\S+)", (TREE / "loops" / "occurrences.rules").read_text(), re.M))


def hour(h: int, minute: int = 0, second: float = 0.5) -> datetime:
    return datetime(2026, 12, 1, h, minute, tzinfo=UTC) + timedelta(seconds=second)


class World:
    """One Service on one database, with only `loops` switched on (the overlay), a
    clock the test moves, and the worker the test runs."""

    def __init__(
        self,
        db: str,
        tmp: Path,
        *loops: str,
        payload: dict[str, dict[str, Any]] | None = None,
        freeze: bool = False,
    ) -> None:
        self.db, self.tmp = db, tmp
        config = tmp / "config"
        config.mkdir(exist_ok=True)
        shutil.copy(TREE / "config" / "repos.yaml", config / "repos.yaml")
        lines = ["schedules:"]
        for name in LOOPS:
            extra = (payload or {}).get(name)
            entry = {"enabled": name in loops, **({"payload": extra} if extra else {})}
            lines.append(f"  {name}: {json.dumps(entry)}")
        if freeze:
            lines.insert(0, "release_freeze: true")
        (config / "schedule.yaml").write_text("\n".join(lines) + "\n")
        self.control = tmp / "control"
        self.control.mkdir(exist_ok=True)
        self.paths = Paths(TREE / "loops", TREE / "registry", config)
        self.now = START
        self.service = self.open()

    def open(self) -> Service:
        return open_service(self.db, self.paths, clock=lambda: self.now)

    def at(self, moment: datetime) -> int:
        self.now = moment
        return self.service.pump()

    def answer(self, loop: str, outcome: str) -> None:
        (self.control / loop).write_text(outcome)

    def work(self) -> int:
        """Execute every queued run with the real worker, and plan what the runs chained
        or followed up, until nothing is left to run; how many ran."""
        adapters = adapters_for(self.db, self.paths)
        done = 0
        while True:
            ran = 0
            while asyncio.run(work_once(self.service, "w1", 60.0, adapters)) is not None:
                ran += 1
            self.service.pump()
            done += ran
            if not ran:
                return done

    def occurrences(self, loop: str) -> list[OccurrenceRecord]:
        with self.service.rt.store.read() as tx:
            return sorted(tx.list_occurrences(1000, loop=loop), key=lambda o: o.created_at or "")

    def decisions(self, loop: str) -> list[tuple[str, str | None]]:
        with self.service.rt.store.read() as tx:
            events = tx.loop_events(loop, "", 1000)
            found = [tx.get_decision(e.event_id) for e in events]
        return [(d.kind, d.reason) for d in found if d is not None]

    def journal(self, action: str) -> list[Any]:
        with self.service.rt.store.read() as tx:
            return [e for e in tx.list_journal(10_000) if e.action == action]

    def runs(self, loop: str) -> list[Any]:
        return [r for r in self.service.runs(1000) if r.loop == loop]

    def close(self) -> None:
        self.service.rt.store.close()


@pytest.fixture
def world(database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A factory of Worlds on this test's database (one at a time)."""
    monkeypatch.setenv("OCC_SCRIPTS", str(TREE / "scripts"))
    monkeypatch.setenv("OCC_CONTROL", str(tmp_path / "control"))
    opened: list[World] = []

    def make(*loops: str, **options: Any) -> World:
        made = World(database, tmp_path, *loops, **options)
        made.at(START)  # record enablement
        opened.append(made)
        return made

    yield make
    for w in opened:
        w.close()


# ---- identity, triage, findings (docs/occurrences.md) ------------------------------------


def test_a_window_has_one_occurrence_whatever_delivers_it(world: Any) -> None:
    """A second delivery of one window (another event id) returns the existing
    occurrence: decided duplicate_occurrence, journaled on it, no second run."""
    w = world("budgeted")
    w.at(hour(10))
    (first,) = w.occurrences("budgeted")
    again = Envelope.model_validate(
        {
            "eventId": "redelivered-10",
            "type": "occ.budgeted",
            "source": "schedule",
            "subject": "r1",
            "occurredAt": "2026-12-01T10:00:00Z",
            "payload": {
                "loop": "budgeted",
                "slot": "2026-12-01T10:00:00Z",
                "repo": "r1",
                "cadenceSeconds": 3600,
                "skippedSlots": 0,
            },
        }
    )
    assert w.service.admit(again, "schedule").admitted
    w.service.pump()
    assert len(w.occurrences("budgeted")) == 1
    assert w.service.event("redelivered-10")["decision"].reason == "duplicate_occurrence"
    (folded,) = w.journal("duplicate_occurrence")
    assert folded.entity_id == first.event_id and folded.data == {"event": "redelivered-10"}
    assert len(w.runs("budgeted")) == 1


def test_an_envelope_posing_as_the_scheduler_claims_no_slot(world: Any) -> None:
    """A signed envelope (actor `bridge`) that says `source: schedule` and names an auto
    loop's future slot is no tick: it is planned by its route (a proposal nobody
    approved), approved by nobody, and the real slot later fires as the scheduler's."""
    w = world("budgeted")
    forged = Envelope.model_validate(
        {
            "eventId": "forged-12",
            "type": "occ.budgeted",
            "source": "schedule",
            "subject": "r1",
            "occurredAt": "2026-12-01T12:00:00Z",
            "payload": {
                "loop": "budgeted",
                "slot": "2026-12-01T12:00:00Z",
                "repo": "r1",
                "cadenceSeconds": 3600,
                "skippedSlots": 0,
            },
        }
    )
    assert w.service.admit(forged, "bridge").admitted
    w.at(hour(10))
    seen = w.service.event("forged-12")
    assert (seen["event"].admitted_by, seen["event"].loop) == ("bridge", None)
    assert (seen["decision"].kind, seen["decision"].approved_by) == ("propose", None)
    assert [r for r in w.service.runs(1000) if r.event_id == "forged-12"] == []
    w.at(hour(12))
    real = w.service.event("clock:budgeted:2026-12-01T12:00:00Z")
    assert (real["decision"].kind, real["decision"].approved_by) == ("run", "schedule")
    assert real["event"].admitted_by == "schedule"


def test_triage_decision_and_evidence_persist_before_the_run(world: Any) -> None:
    """The decision and the snapshot it saw are on the occurrence when the run is
    queued, before any worker looks; at most one run per occurrence."""
    w = world("triaged")
    w.at(hour(10))
    (occ,) = w.occurrences("triaged")
    assert (occ.state, occ.decision) == ("work_dispatched", "run_readonly_check")
    assert occ.evidence is not None
    assert occ.evidence["snapshot"]["failures"] == 0
    assert occ.evidence["snapshot"]["repo"]["name"] == "r1"
    (run,) = w.runs("triaged")
    assert run.state == "queued"
    decided = [e for e in w.journal("decided:run") if e.entity_id == occ.event_id]
    queued = [e for e in w.journal("queued") if e.entity_id == run.run_id]
    assert decided[0].seq < queued[0].seq


def test_triage_escalates_after_two_failures_and_blocks_after_a_blocker(world: Any) -> None:
    """Triage rules over the snapshot: two failed occurrences -> human_attention_required
    (no run); a BLOCKED outcome -> the next occurrence is an external_blocker."""
    w = world("triaged")
    w.answer("triaged", "FAILED")
    for h in (10, 11):
        w.at(hour(h))
        assert w.work() == 1
    assert [o.state for o in w.occurrences("triaged")] == ["failed", "failed"]
    w.at(hour(12))
    latest = w.occurrences("triaged")[-1]
    assert (latest.state, latest.decision) == (
        "human_attention_required",
        "human_attention_required",
    )
    assert len(w.runs("triaged")) == 2
    assert w.decisions("triaged")[-1] == ("noop", "human_attention_required")


def test_findings_deduplicate_and_only_a_human_promotes(world: Any) -> None:
    """Every occurrence records the same semantic key once, counted; automation
    cannot promote; an operator's promotion admits finding.promoted."""
    w = world("finder")
    for h in (10, 11, 12):
        w.at(hour(h))
    assert [o.state for o in w.occurrences("finder")] == ["candidate_recorded"] * 3
    (finding,) = w.service.findings()
    assert (finding.semantic_key, finding.category, finding.occurrence_count) == (
        "lint:r1",
        "lint",
        3,
    )
    assert w.runs("finder") == []
    with pytest.raises(Forbidden):
        w.service.promote(finding.finding_id, "schedule")
    promoted = w.service.promote(finding.finding_id, "operator:alice", "worth fixing")
    assert (promoted.status, promoted.decided_by) == ("promoted", "operator:alice")
    event = w.service.event(f"finding:{finding.finding_id}")["event"]
    assert event.type == "finding.promoted" and event.payload["semanticKey"] == "lint:r1"
    with pytest.raises(Conflict):
        w.service.dismiss(finding.finding_id, "operator:bob", "too late")


# ---- budgets (docs/occurrences.md#budgets) -----------------------------------------------


def test_budget_is_reserved_settled_and_exhaustion_is_terminal(world: Any) -> None:
    """A dispatch reserves before it runs, the run settles from actual use, and
    the third run of the day is refused: budget_exhausted, nothing queued."""
    w = world("budgeted")
    w.at(hour(10))
    (occ,) = w.occurrences("budgeted")
    assert occ.reserved == {"runs": 1, "wall_clock_seconds": 30}
    w.work()
    (occ,) = w.occurrences("budgeted")
    assert occ.reserved is None and occ.used is not None and occ.used["runs"] == 1
    assert occ.state == "completed"
    w.at(hour(11))
    w.work()
    w.at(hour(12))
    assert [o.state for o in w.occurrences("budgeted")] == [
        "completed",
        "completed",
        "budget_exhausted",
    ]
    assert w.decisions("budgeted")[-1] == ("noop", "budget_exhausted")
    assert len(w.runs("budgeted")) == 2
    with w.service.rt.store.read() as tx:
        notes = tx.list_notifications(10)
    assert [(n.kind, n.state, n.loop) for n in notes] == [
        ("occurrence", "budget_exhausted", "budgeted")
    ]


def test_short_runs_add_up_on_the_wall_clock(world: Any) -> None:
    """A run's wall clock is settled to the millisecond, so sub-second runs add up
    in the day's use instead of costing nothing each."""
    w = world("budgeted")
    for h in (10, 11):
        w.at(hour(h))
        run = w.service.claim("w1", 60.0)
        assert run is not None
        w.service.start(run, "w1")
        assert w.service.run(run.run_id).state == "running"
        w.now += timedelta(milliseconds=600)  # the run takes 0.6 s
        w.service.finish(run, "w1", Execution(result={"outcome": "OK"}))
    assert [o.used for o in w.occurrences("budgeted")] == [
        {"runs": 1, "wall_clock_seconds": 0, "wall_clock_ms": 600}
    ] * 2
    assert w.service.stats()["budgetUsed24h"]["budgeted"] == {"runs": 2, "wall_clock_seconds": 1}


# ---- concurrency, backoff (docs/occurrences.md) ------------------------------------------


def test_infrastructure_failure_retries_with_exponential_backoff(world: Any) -> None:
    """A crash is an infrastructure failure: the occurrence waits base * 2^attempt
    (60 s, then 120 s), re-triages and runs its job again; after its two retries the
    retry budget is used up: budget_exhausted, three runs in all."""
    w = world("retrying")
    w.answer("retrying", "CRASH")
    w.at(hour(10))
    w.work()
    (occ,) = w.occurrences("retrying")
    assert (occ.state, occ.attempt, occ.failure_class) == (
        "waiting_for_resource",
        1,
        "infrastructure_failure",
    )
    finished = w.runs("retrying")[0].finished_at
    assert occ.retry_at is not None and _gap(finished, occ.retry_at) == 60
    w.at(hour(10, 0, 30))  # not yet due
    assert w.runs("retrying")[-1].state == "failed" and len(w.runs("retrying")) == 1
    w.at(hour(10, 1, 30))
    assert len(w.runs("retrying")) == 2
    w.work()
    (occ,) = w.occurrences("retrying")
    assert occ.attempt == 2 and _gap(w.runs("retrying")[0].finished_at, occ.retry_at) >= 120
    w.at(hour(10, 4))
    w.work()
    (occ,) = w.occurrences("retrying")
    assert occ.state == "budget_exhausted"
    assert sorted(r.idempotency_key.rsplit(":", 1)[-1] for r in w.runs("retrying")) == [
        "00Z",
        "00Z#1",
        "00Z#2",
    ]
    assert [e.action for e in w.journal("retry_scheduled")] == ["retry_scheduled"] * 2


def _gap(start: str | None, end: str | None) -> int:
    assert start and end
    a, b = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (start, end))
    return round((b - a).total_seconds())


def test_a_conflict_waits_without_using_a_retry(world: Any) -> None:
    """A scope or resource conflict waits for the base delay and does not consume
    the retry budget; it completes when the resource frees."""
    w = world("retrying")
    w.answer("retrying", "CONFLICT")
    w.at(hour(10))
    w.work()
    (occ,) = w.occurrences("retrying")
    assert (occ.state, occ.attempt, occ.failure_class) == ("waiting_for_resource", 0, "conflict")
    w.answer("retrying", "OK")
    w.at(hour(10, 1, 30))
    w.work()
    (occ,) = w.occurrences("retrying")
    assert occ.state == "completed" and len(w.runs("retrying")) == 2


def test_a_trigger_during_an_active_occurrence_returns_coalesces_or_skips(world: Any) -> None:
    """While an occurrence waits for its retry, the next slot's trigger is
    returned to it (return), folded into it with one follow-up when it ends
    (coalesce), or dropped (skip); never a parallel duplicate."""
    w = world("retrying", "coalescing", "skipping")
    for loop in ("retrying", "coalescing", "skipping"):
        w.answer(loop, "CRASH")
    w.at(hour(10))
    w.work()
    w.at(hour(10, 30))  # resume: second attempts crash too, all still waiting
    w.work()
    w.at(hour(11))
    assert w.decisions("retrying")[-1] == ("noop", "occurrence_active")
    assert w.decisions("skipping")[-1] == ("noop", "skipped_active")
    assert w.decisions("coalescing")[-1] == ("noop", "coalesced")
    assert [len(w.occurrences(n)) for n in ("retrying", "coalescing", "skipping")] == [1, 1, 1]
    assert {e.action for e in w.journal("returned_active") + w.journal("skipped_active")} == {
        "returned_active",
        "skipped_active",
    }
    (waiting,) = w.occurrences("coalescing")
    assert waiting.signals == 1
    w.answer("coalescing", "OK")
    w.at(hour(11, 10))  # its last retry succeeds: one follow-up tick is admitted
    w.work()
    states = [o.state for o in w.occurrences("coalescing")]
    assert states == ["completed", "completed"]
    assert len(w.journal("follow_up")) == 1


def test_the_circuit_breaker_pauses_and_an_operators_cancel_never_counts(world: Any) -> None:
    """Failures in a row pause the loop (actor `schedule`, with a note); an
    operator's cancel between them is neither a failure nor a success."""
    w = world("breaker")
    w.answer("breaker", "FAILED")
    w.at(hour(10))
    w.work()
    w.at(hour(11))
    (queued,) = [r for r in w.runs("breaker") if r.state == "queued"]
    w.service.cancel(queued.run_id, "operator:alice", "not now")
    with w.service.rt.store.read() as tx:
        state = tx.get_loop_state("breaker")
    assert state is not None and (state.paused, state.consecutive_failures) == (False, 1)
    assert w.occurrences("breaker")[-1].state == "cancelled"
    w.at(hour(12))
    w.work()
    with w.service.rt.store.read() as tx:
        state = tx.get_loop_state("breaker")
    assert state is not None and state.paused and state.paused_by == "schedule"
    (paused,) = [e for e in w.journal("paused") if e.entity_id == "breaker"]
    assert paused.actor == "schedule" and "circuit breaker" in paused.note
    w.at(hour(13))  # a paused loop's slots are skipped, recorded with the reason
    assert len(w.occurrences("breaker")) == 3
    with w.service.rt.store.read() as tx:
        skipped = tx.list_skips("breaker", "")
    assert [(s.first_slot, s.reason) for s in skipped] == [("2026-12-01T13:00:00Z", "paused")]
    w.service.resume("breaker", "operator:alice", "looked at it")  # the count starts afresh
    with w.service.rt.store.read() as tx:
        state = tx.get_loop_state("breaker")
    assert state is not None and (state.paused, state.consecutive_failures) == (False, 0)
    w.at(hour(14))
    w.work()
    with w.service.rt.store.read() as tx:
        state = tx.get_loop_state("breaker")
    assert state is not None and (state.paused, state.consecutive_failures) == (False, 1)


def test_a_queued_run_waits_while_the_breaker_has_its_loop_paused(world: Any) -> None:
    """A run queued before the circuit breaker paused its loop is not claimed while
    the loop stays paused; it waits in the queue and runs once an operator resumes."""
    w = world("breaker")
    w.answer("breaker", "FAILED")
    for h in (10, 11, 12):
        w.at(hour(h))
    first, second, third = sorted(w.runs("breaker"), key=lambda r: r.created_at)
    for _ in (first, second):
        assert asyncio.run(work_once(w.service, "w1", 60.0)) is not None
    with w.service.rt.store.read() as tx:
        state = tx.get_loop_state("breaker")
    assert state is not None and state.paused and state.paused_by == "schedule"
    assert asyncio.run(work_once(w.service, "w1", 60.0)) is None  # nothing claimable
    assert w.service.run(third.run_id).state == "queued"
    w.answer("breaker", "OK")
    w.service.resume("breaker", "operator:alice", "fixed it")
    done = asyncio.run(work_once(w.service, "w1", 60.0))
    assert done is not None and (done.run_id, done.state) == (third.run_id, "succeeded")


def test_an_operator_pause_holds_queued_runs_of_that_loop_only(world: Any) -> None:
    """An operator's pause holds the loop's queued runs back too; runs of other loops
    are still claimed, in queue order."""
    w = world("breaker", "budgeted")
    w.at(hour(10))
    (held,) = w.runs("breaker")
    w.service.pause("breaker", "operator:alice", "investigating")
    done = asyncio.run(work_once(w.service, "w1", 60.0))
    assert done is not None and done.loop == "budgeted"
    assert asyncio.run(work_once(w.service, "w1", 60.0)) is None
    w.service.resume("breaker", "operator:alice")
    done = asyncio.run(work_once(w.service, "w1", 60.0))
    assert done is not None and done.run_id == held.run_id


# ---- stop conditions, freeze, dirty workspaces (docs/occurrences.md) ---------------------


def test_a_frozen_or_disabled_repo_gets_no_mutation_but_read_only_checks_run(
    world: Any,
) -> None:
    """Mutating work for a frozen repo (release_freeze) or a disabled one
    (repository_disabled) is not dispatched; a read-only check of the frozen repo runs."""
    w = world("frozen-act", "frozen-look", "gone-act")
    w.at(hour(10))
    assert w.decisions("frozen-act") == [("noop", "stopped")]
    assert w.decisions("gone-act") == [("noop", "stopped")]
    assert w.runs("frozen-act") == [] and w.runs("gone-act") == []
    assert (
        "release_freeze"
        in w.service.event(w.occurrences("frozen-act")[0].event_id)["decision"].note
    )
    assert len(w.runs("frozen-look")) == 1


def test_a_release_freeze_stops_mutation_everywhere(world: Any) -> None:
    """`release_freeze: true` in the overlay: a mutating loop of an unfrozen repo
    is stopped too; read-only loops run."""
    w = world("dirty", "budgeted", freeze=True)
    w.at(hour(10))
    assert w.decisions("dirty") == [("noop", "stopped")]
    assert len(w.runs("budgeted")) == 1


def _git(path: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _dirty_checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "checkout"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    (repo / "README").write_text("hello\n")
    _git(repo, "add", "README")
    _git(repo, "commit", "-qm", "init")
    (repo / "README").write_text("hello, edited by a person\n")
    (repo / "notes.txt").write_text("unsaved work\n")
    return repo


def test_a_dirty_workspace_is_never_touched(world: Any, tmp_path: Path) -> None:
    """Uncommitted changes stop a workspace run (human_attention_required) and
    stay exactly as they were; with `isolate: worktree` the run works in a fresh
    worktree of HEAD and the person's changes are still untouched."""
    repo = _dirty_checkout(tmp_path)
    before = _git(repo, "status", "--porcelain")
    place = {"place": str(repo)}
    w = world("dirty", "dirty-isolated", payload={"dirty": place, "dirty-isolated": place})
    w.at(hour(10))
    w.work()
    (refused,) = w.occurrences("dirty")
    assert refused.state == "human_attention_required"
    (run,) = w.runs("dirty")
    assert run.state == "failed" and "uncommitted changes" in (run.error or "")
    (isolated,) = w.occurrences("dirty-isolated")
    assert isolated.state == "completed"
    executions = (tmp_path / "control" / "executions").read_text().splitlines()
    (line,) = [x for x in executions if " dirty-isolated " in x]
    assert line.endswith("/worktree")
    assert _git(repo, "status", "--porcelain") == before
    assert (repo / "notes.txt").read_text() == "unsaved work\n"
    assert _git(repo, "stash", "list") == ""
    assert "worktree" not in _git(repo, "worktree", "list").split("\n", 1)[-1]


def test_a_stop_condition_a_person_must_clear_pauses_the_loop(world: Any, tmp_path: Path) -> None:
    """After an occurrence needed a person (a dirty workspace), `stop-when
    human_review_required` stops the next one and pauses the loop (actor `schedule`);
    an operator's resume starts afresh and the loop dispatches again."""
    repo = _dirty_checkout(tmp_path)
    w = world("dirty-stop", payload={"dirty-stop": {"place": str(repo)}})
    w.at(hour(10))
    w.work()
    assert w.occurrences("dirty-stop")[0].state == "human_attention_required"
    w.at(hour(11))
    assert w.decisions("dirty-stop")[-1] == ("noop", "stopped")
    (paused,) = [e for e in w.journal("paused") if e.entity_id == "dirty-stop"]
    assert paused.actor == "schedule" and "human_review_required" in paused.note
    w.service.resume("dirty-stop", "operator:alice", "cleaned up")
    w.at(hour(12))
    assert w.decisions("dirty-stop")[-1] == ("run", None)


# ---- shadow mode (docs/occurrences.md#shadow-mode) ---------------------------------------


def test_a_mutating_loop_runs_in_shadow_by_default(world: Any, run_engine: Any) -> None:
    """No `shadow` and mutating work: it records what it would have dispatched,
    creates no proposal and no run; `engine shadow report` shows it, and where an
    operator's own run agrees."""
    w = world("shadowed")
    for h in (10, 11):
        w.at(hour(h))
    assert [o.state for o in w.occurrences("shadowed")] == ["shadow_recorded"] * 2
    assert all(
        o.evidence and o.evidence["would_dispatch"] == "act@1" for o in w.occurrences("shadowed")
    )
    assert w.runs("shadowed") == [] and w.service.proposals(100, None) == []
    human = Envelope.model_validate(
        {
            "eventId": "by-hand-1",
            "type": "occ.shadowed",
            "source": "manual.ops",
            "subject": "r1",
            "occurredAt": "2026-12-01T11:05:00Z",
            "payload": {"repo": "r1", "loop": "by-hand"},
        }
    )
    w.now = hour(11, 5)
    w.service.admit(human, "operator:alice")
    w.service.pump()
    (proposal,) = w.service.proposals(10)
    w.service.approve(proposal.proposal_id, "operator:alice")
    done = run_engine(
        "shadow",
        "report",
        "shadowed",
        "--json",
        "--db",
        w.db,
        "--rules",
        str(w.paths.rules),
        "--registry",
        str(w.paths.registry),
        "--config",
        str(w.paths.config),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["shadow"], report["occurrences"], report["wouldDispatch"]) == (True, 2, 2)
    assert report["divergence"]["agree"] == 1 and report["divergence"]["shadowOnly"] == 1


# ---- quiet backoff, notifications (docs/occurrences.md) ----------------------------------


def test_repeated_nothing_to_do_backs_off_quietly(world: Any) -> None:
    """After three nothing_to_do in a row the loop skips triage until its quiet
    backoff (base, doubling) has passed."""
    w = world("quiet")
    for h in (10, 11, 12, 13):
        w.at(hour(h))
    assert [d[1] for d in w.decisions("quiet")] == ["nothing_to_do"] * 3 + ["quiet_backoff"]
    with w.service.rt.store.read() as tx:
        state = tx.get_loop_state("quiet")
    assert state is not None and state.nothing_streak == 3 and state.quiet_until


def test_notifications_go_to_the_sink_only_on_a_state_change(world: Any, tmp_path: Path) -> None:
    """A failure is announced once to the configured sink, with durable ids; the
    same failure again is not announced again; a recovery is."""
    sink = tmp_path / "notify.jsonl"
    w = world("breaker")
    w.service.notifying = Notifying((LogSink("log", sink),))
    w.answer("breaker", "FAILED")
    w.at(hour(10))
    w.work()
    w.answer("breaker", "OK")
    w.at(hour(11))
    w.work()
    w.answer("breaker", "FAILED")
    w.at(hour(12))
    w.work()
    w.at(hour(12, 1))
    w.service.deliver_notifications()  # serve's notifier
    lines = [json.loads(x) for x in sink.read_text().splitlines()]
    assert [(n["kind"], n["state"]) for n in lines] == [
        ("occurrence", "failed"),
        ("occurrence", "recovered"),
        ("occurrence", "failed"),
    ]
    assert all(n["links"]["occurrence"].startswith("clock:breaker:") for n in lines)


def test_after_an_operators_resume_success_and_failure_are_announced(
    world: Any, tmp_path: Path
) -> None:
    """The breaker trips (failed, breaker_tripped), an operator resumes (resumed);
    the success that follows is announced as `recovered` and the next failure again,
    although the resume had reset the failure count; a second trip is news again."""
    sink = tmp_path / "notify.jsonl"
    w = world("breaker")
    w.service.notifying = Notifying((LogSink("log", sink),))
    w.answer("breaker", "FAILED")
    for h in (10, 11):
        w.at(hour(h))
        w.work()
    w.service.resume("breaker", "operator:alice", "looked at it")
    w.answer("breaker", "OK")
    w.at(hour(12))
    w.work()
    w.answer("breaker", "FAILED")
    for h in (13, 14):
        w.at(hour(h))
        w.work()
    w.at(hour(14, 1))
    w.service.deliver_notifications()  # serve's notifier
    lines = [json.loads(x) for x in sink.read_text().splitlines()]
    assert [(n["kind"], n["state"]) for n in lines] == [
        ("occurrence", "failed"),
        ("loop", "breaker_tripped"),
        ("loop", "resumed"),
        ("occurrence", "recovered"),
        ("occurrence", "failed"),
        ("loop", "breaker_tripped"),
    ]


# ---- self-improvement limits, recovery, metrics (docs/occurrences.md) --------------------


def test_nothing_at_run_time_widens_a_loops_policy(world: Any) -> None:
    """A run-now spends the same budget (no way around it), and the overlay cannot
    change a budget, approval or shadow: only a reviewed rule file can."""
    w = world("budgeted")
    w.at(hour(10))
    w.work()
    w.at(hour(11))
    w.work()
    w.service.trigger("budgeted", "operator:alice")
    w.service.pump()
    assert w.decisions("budgeted")[-1] == ("noop", "budget_exhausted")
    overlay = w.paths.config / "schedule.yaml"
    overlay.write_text(
        overlay.read_text().replace(
            '  budgeted: {"enabled": true}', "  budgeted: {enabled: true, budget: {daily_runs: 99}}"
        )
    )
    from dsl.diagnostics import RulesError
    from engine.loading import load_rules

    with pytest.raises(RulesError):
        load_rules(w.paths)


def test_restart_resumes_from_durable_boundaries(world: Any) -> None:
    """A waiting occurrence resumes after a restart from its persisted retry
    time; an occurrence left without a decision is ended as failed, journaled."""
    w = world("retrying")
    w.answer("retrying", "CRASH")
    w.at(hour(10))
    w.work()
    with w.service.rt.store.write() as tx:  # a process died between admitting and deciding
        tx.insert_event(
            EventRecord(
                event_id="orphan",
                type="occ.retrying",
                source="inject",
                subject="r1",
                occurred_at="2026-12-01T10:00:01Z",
                correlation_id="orphan",
                payload={"repo": "r1"},
                loop="retrying",
                admitted_at="2026-12-01T10:00:01Z",
                admitted_by="operator:alice",
                planned=True,
            )
        )
        tx.open_occurrence(
            OccurrenceRecord(
                event_id="orphan",
                loop="retrying",
                state="triaging",
                updated_at="2026-12-01T10:00:01Z",
                occurrence_key="orphan-key",
                created_at="2026-12-01T10:00:01Z",
            )
        )
    w.close()
    w.answer("retrying", "OK")
    w.service = w.open()
    w.at(hour(10, 2))
    w.work()
    states = {o.event_id: o.state for o in w.occurrences("retrying")}
    assert states["orphan"] == "failed"
    assert [s for e, s in states.items() if e != "orphan"] == ["completed"]
    assert [e.entity_id for e in w.journal("recovered")] == ["orphan"]


def test_duplicates_suppressed_means_one_thing_everywhere(world: Any) -> None:
    """`duplicatesSuppressed` in `engine stats` (and /metrics) and in the shadow report
    count the same triggers: those that opened no occurrence because their window or
    loop already had one. A quiet backoff is a no-op, not a duplicate, in both."""
    w = world("retrying", "quiet")
    w.answer("retrying", "CRASH")
    for h in (10, 11, 12, 13):
        w.at(hour(h))
        w.work()
    report = {loop: w.service.shadow_report(loop) for loop in ("retrying", "quiet")}
    assert report["retrying"]["suppressedBy"].get("occurrence_active", 0) >= 1
    assert report["quiet"]["duplicatesSuppressed"] == 0
    assert report["quiet"]["noopsBy"].get("quiet_backoff") == 1
    assert "quiet_backoff" not in report["quiet"]["suppressedBy"]
    total = sum(r["duplicatesSuppressed"] for r in report.values())
    assert w.service.stats()["duplicatesSuppressed"] == total


def test_metrics_report_what_the_automation_did(world: Any, run_engine: Any) -> None:
    """Occurrences by outcome, the no-op rate, duplicates suppressed, retries by
    class, budget use and findings, as `engine stats --json` and Prometheus text."""
    w = world("budgeted", "quiet", "finder", "retrying")
    w.answer("retrying", "CRASH")
    for h in (10, 11, 12):
        w.at(hour(h))
        w.work()
    figures = w.service.stats()
    assert figures["loops"]["quiet"]["noopRate"] == 1.0
    assert figures["loops"]["budgeted"]["occurrences"] == {"budget_exhausted": 1, "completed": 2}
    assert figures["findings"] == {"candidate": 1} and figures["findingObservations"] == 3
    assert figures["duplicatesSuppressed"] >= 1  # retrying's later slots returned
    assert figures["retries"]["infrastructure_failure"] >= 1
    assert figures["budgetUsed24h"]["budgeted"]["runs"] == 2
    from prometheus_client.parser import text_string_to_metric_families

    text = prometheus(scrape(w.service.rt), "test").decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {
        (s.labels.get("loop"), s.labels.get("state")): s.value
        for s in families["engine_occurrences"].samples
    }
    assert samples[("budgeted", "completed")] == 2
    assert "engine_noop_rate" in families and "engine_retries" in families
    assert "engine_retries_total" in text and families["engine_retries"].type == "counter"
    done = run_engine(
        "stats",
        "--json",
        "--db",
        w.db,
        "--rules",
        str(w.paths.rules),
        "--registry",
        str(w.paths.registry),
        "--config",
        str(w.paths.config),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["loops"]["quiet"]["noopRate"] == 1.0
