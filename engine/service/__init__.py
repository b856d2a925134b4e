"""The imperative shell: one Service that loads, calls the pure core, persists and
journals. The CLI and the HTTP handlers call these same methods. Methods are
synchronous (the store is); async callers run them in a thread."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from engine.core.envelope import Envelope
from engine.core.paging import (
    EventQuery,
    JournalQuery,
    NotificationQuery,
    Page,
    ProposalQuery,
    RunQuery,
    journal_cursor_text,
    page_limit,
    run_cursor_text,
)
from engine.core.records import (
    EventRecord,
    FindingRecord,
    JournalEntry,
    ProposalRecord,
    RunRecord,
)
from engine.core.states import FindingStatus, ProposalState
from engine.core.work import WorkBinding, WorkItem, WorkQuery, WorkRequest, WorkTrigger
from engine.errors import NotFound
from engine.notify.config import Notifying
from engine.service import (
    admission,
    explain,
    findings,
    graduation,
    leases,
    metrics,
    notifications,
    planning,
    probing,
    proposals,
    retries,
    review,
    runs,
    schedules,
    work,
)
from engine.service import doctor as checks
from engine.service.admission import Admission
from engine.service.context import Runtime
from engine.service.doctor import PILEUP
from engine.service.readiness import Readiness
from engine.service.runs import Execution
from engine.service.scheduler import Scheduler

__all__ = ["Admission", "Execution", "Runtime", "Service"]

# How often serve's runtime loop recovers expired run leases by itself, so a killed
# worker's run is requeued or failed (by the policy in engine.service.runs) even when
# the reaper loop is off.
LEASE_SWEEP = timedelta(seconds=15)


class Service:
    def __init__(
        self,
        runtime: Runtime,
        observer: probing.Observer | None = None,
        probe_threads: int = probing.SIZE,
    ) -> None:
        self.rt = runtime
        self.scheduler = Scheduler(runtime, observer=observer, probe_threads=probe_threads)
        # where serve's notifier delivers (engine.notify.config.load; none: they stay
        # in the store, listed by `engine notifications`)
        self.notifying = Notifying()
        self._last_sweep: datetime | None = None
        self._recovered = False
        # Ready means able to write (docs/api.md#get-readyz): GET /readyz asks this.
        self.readiness = Readiness(runtime.store, runtime.clock)

    # ---- intake and planning ------------------------------------------------------
    def admit(self, envelope: Envelope, actor: str) -> Admission:
        return admission.admit(self.rt, envelope, actor)

    def admit_many(self, envelopes: list[Envelope], actor: str) -> list[Admission]:
        return admission.admit_many(self.rt, envelopes, actor)

    def checked(
        self,
        envelopes: list[Envelope],
        actor: str,
        delivery: admission.Delivery | None = None,
    ) -> admission.Request:
        """One request's envelopes checked for `admit_batch` (Unprocessable, 422, for
        the first that does not fit); `delivery`: the GitHub delivery they came from."""
        return admission.checked(self.rt, envelopes, actor, delivery)

    def admit_batch(self, requests: Sequence[admission.Request]) -> list[list[Admission]]:
        return admission.admit_batch(self.rt, requests)

    def plan_pending(self, limit: int = planning.BATCH) -> int:
        return planning.plan_pending(self.rt, limit)

    def publish_outbox(self, limit: int = 500) -> int:
        return runs.publish_outbox(self.rt, limit)

    def pump(self, *, wait_for_probes: bool = True) -> int:
        """One pass of the runtime loop: fire due slots, start due watch probes and
        record finished polls (`wait_for_probes`: this pass's too; serve's runtime loop
        never waits on a probe), recover expired leases (every LEASE_SWEEP seconds),
        publish chained events, plan what is admitted. Returns how much work it did (0
        when idle)."""
        # recover from durable boundaries, once per start
        # (docs/occurrences.md#recovery-after-a-restart)
        if not self._recovered:
            self._recovered = True
            self.recover()
        done = self.scheduler.run_pass(wait_for_probes=wait_for_probes)
        now = self.rt.clock()
        if self._last_sweep is None or now - self._last_sweep >= LEASE_SWEEP:
            self._last_sweep = now
            done += len(leases.recover_expired(self.rt, apply=True))
        done += retries.resume_due(self.rt)
        done += self.publish_outbox()
        while True:  # until none is left: planning may admit ticks (on_event, after)
            planned = self.plan_pending()
            done += planned
            if planned == 0:
                return done

    def deliver_notifications(self, stopping: Callable[[], bool] = lambda: False) -> int:
        """One delivery pass of the notifications due (serve's notifier calls it, off the
        runtime loop), until `stopping()`; how many it left delivered."""
        return notifications.deliver_due(self.rt, self.notifying, stopping=stopping)

    def wake_on_polls(self, wake: Callable[[], None]) -> None:
        """Have `wake` called (from a probe thread) each time a watch's poll finishes, so
        the runtime loop records it without waiting for its next pass."""
        if self.scheduler.probes is not None:
            self.scheduler.probes.woken = wake

    def recover(self) -> retries.Recovery:
        """Rebuild the occurrence index after a restart (the first pump runs it)."""
        return retries.recover(self.rt)

    # ---- operators ----------------------------------------------------------------
    def approve(
        self, proposal_id: str, actor: str, note: str = ""
    ) -> tuple[ProposalRecord, RunRecord]:
        return proposals.approve(self.rt, proposal_id, actor, note)

    def reject(self, proposal_id: str, actor: str, reason: str) -> ProposalRecord:
        return proposals.reject(self.rt, proposal_id, actor, reason)

    def cancel(self, run_id: str, actor: str, note: str = "") -> RunRecord:
        return runs.cancel(self.rt, run_id, actor, note)

    def findings(
        self, limit: int = 50, status: str | None = FindingStatus.CANDIDATE, loop: str | None = None
    ) -> list[FindingRecord]:
        return findings.findings(self.rt, limit, status, loop)

    def finding(self, finding_id: str) -> FindingRecord:
        return findings.finding(self.rt, finding_id)

    def promote(self, finding_id: str, actor: str, note: str = "") -> FindingRecord:
        return findings.promote(self.rt, finding_id, actor, note)

    def dismiss(self, finding_id: str, actor: str, reason: str) -> FindingRecord:
        return findings.dismiss(self.rt, finding_id, actor, reason)

    def shadow_report(self, loop: str, since: str = "") -> dict[str, Any]:
        return findings.shadow_report(self.rt, loop, since)

    # ---- work items (docs/work.md) ---------------------------------------------------

    def add_work(self, req: WorkRequest, actor: str) -> tuple[WorkItem, bool]:
        return work.add(self.rt, req, actor)

    def work_page(self, query: WorkQuery, limit: int = 50) -> Page[WorkItem]:
        return work.items(self.rt, query, limit)

    def work_item(self, work_id: str) -> WorkItem:
        return work.item(self.rt, work_id)

    def bind_work(
        self, work_id: str, shape: str, actor: str, request_id: str
    ) -> tuple[WorkBinding, bool]:
        return work.bind_loop(self.rt, work_id, shape, actor, request_id)

    def work_bindings(self, work_id: str) -> list[WorkBinding]:
        return work.bindings(self.rt, work_id)

    def graduate(
        self, loop: str, actor: str, at_restart: bool = False, note: str = ""
    ) -> WorkBinding:
        """Graduate the instance `loop` (`shape@work-id`) out of shadow, now or at the
        next serve start (docs/work.md#graduating-an-instance)."""
        return graduation.graduate(self.rt, loop, actor, at_restart, note)

    def graduate_binding(
        self, work_id: str, shape: str, actor: str, at_restart: bool = False, note: str = ""
    ) -> WorkBinding:
        return graduation.graduate_bound(self.rt, work_id, shape, actor, at_restart, note)

    def pending_graduations(self) -> list[dict[str, Any]]:
        """The graduations deferred to the next serve start, oldest first."""
        return graduation.pending_view(self.rt)

    def graduate_deferred(self) -> list[graduation.Applied]:
        """Apply the graduations deferred to this serve start, each once; serve's runtime
        loop calls it before the scheduler's first pass."""
        return graduation.apply_deferred(self.rt)

    def work_overview(self, query: WorkQuery, limit: int = 50) -> list[dict[str, Any]]:
        """The newest items with their bound loops (the inbox's work page)."""
        return work.overview(self.rt, query, limit)

    def move_work(self, work_id: str, trigger: WorkTrigger, actor: str, note: str = "") -> WorkItem:
        return work.transition(self.rt, work_id, trigger, actor, note)

    def continue_work(
        self, work_id: str, principal: str, session: str, ttl: timedelta, note: str = ""
    ) -> WorkItem:
        return work.claim_lease(self.rt, work_id, principal, session, ttl, note)

    # ---- workers ------------------------------------------------------------------
    def claim(self, worker: str, lease_seconds: float) -> RunRecord | None:
        return runs.claim(self.rt, worker, lease_seconds)

    def start(self, run: RunRecord, worker: str) -> runs.Start:
        return runs.start(self.rt, run, worker)

    def heartbeat(self, run_id: str, worker: str, lease_seconds: float) -> bool:
        return runs.heartbeat(self.rt, run_id, worker, lease_seconds)

    def finish(
        self, run: RunRecord, worker: str, execution: Execution, at: str | None = None
    ) -> RunRecord:
        return runs.finish(self.rt, run, worker, execution, at)

    def late_result(self, run: RunRecord, worker: str, execution: Execution, at: str) -> None:
        runs.late_result(self.rt, run, worker, execution, at)

    def record_pending(self, worker: str) -> list[RunRecord]:
        """Record results an earlier process of `worker`, or a worker whose lease
        expired, left on disk."""
        return leases.record_pending(self.rt, worker)

    # ---- schedules (engine schedule, engine doctor, /schedules) ---------------------
    def schedules(self) -> list[dict[str, Any]]:
        return schedules.schedule_view(self.rt, self.rt.clock())

    def schedule(self, loop: str) -> dict[str, Any]:
        return schedules.schedule_of(self.rt, loop, self.rt.clock())

    def pause(self, loop: str, actor: str, note: str) -> dict[str, Any]:
        return schedules.pause(self.rt, loop, actor, note)

    def resume(self, loop: str, actor: str, note: str = "") -> dict[str, Any]:
        return schedules.resume(self.rt, loop, actor, note)

    def trigger(self, loop: str, actor: str) -> Admission:
        return schedules.trigger(self.rt, loop, actor)

    def backfill(
        self, loop: str, start: datetime, end: datetime, actor: str, limit: int | None = None
    ) -> dict[str, Any]:
        most = schedules.BACKFILL_LIMIT if limit is None else limit
        return schedules.backfill(self.rt, loop, start, end, actor, most)

    def slots(self, loop: str, since: datetime) -> list[dict[str, Any]]:
        return schedules.slot_history(self.rt, loop, since, self.rt.clock())

    def doctor(self, pileup: int = PILEUP) -> dict[str, Any]:
        return checks.doctor(self.rt, self.rt.clock(), pileup)

    def stats(self) -> dict[str, Any]:
        """The audit figures (docs/occurrences.md#audit-and-metrics); `engine stats` and
        `GET /metrics`."""
        return metrics.stats(self.rt)

    # ---- maintenance ----------------------------------------------------------------
    def reap(self, apply: bool, proposal_ttl: timedelta) -> dict[str, Any]:
        """Recover expired run leases and expire stale proposals (a dry run unless
        `apply`). The reaper loop's definition runs this through `engine reap`."""
        recovered = leases.recover_expired(self.rt, apply)
        stale = proposals.expire_stale(self.rt, proposal_ttl, apply)
        return {
            "applied": apply,
            "leases": [
                {
                    "runId": r.run.run_id,
                    "to": r.to,
                    "worker": r.run.lease_owner,
                    **({"recordedFrom": "result file"} if r.from_file else {}),
                }
                for r in recovered
            ],
            "proposals": [p.proposal_id for p in stale],
        }

    # ---- reading --------------------------------------------------------------------
    def event(self, event_id: str) -> dict[str, Any]:
        with self.rt.store.read() as tx:
            event = tx.get_event(event_id)
            if event is None:
                raise NotFound(f"no event '{event_id}'")
            decision = tx.get_decision(event_id)
            return {
                "event": event,
                "decision": decision,
                "occurrence": tx.get_occurrence_state(event_id),
            }

    def explain(self, ident: str) -> dict[str, Any]:
        """The causal chain of an event, both ways (docs/explain.md)."""
        return explain.explain(self.rt, ident)

    def events(self, limit: int = 50, type: str | None = None) -> list[EventRecord]:
        with self.rt.store.read() as tx:
            return tx.list_events(limit, type)

    def proposal(self, proposal_id: str) -> ProposalRecord:
        with self.rt.store.read() as tx:
            found = tx.get_proposal(proposal_id)
        if found is None:
            raise NotFound(f"no proposal '{proposal_id}'")
        return found

    def review(
        self, proposal_id: str, last_runs: int = 5, with_shadow: bool = True
    ) -> dict[str, Any]:
        """Everything a person needs to decide the proposal (docs/runtime.md, "Reviewing a
        proposal"): its event and payload, the deciding rule's lines, the argv that
        will run, the loop's last runs, shadow evidence and the causal chain."""
        return review.review(self.rt, proposal_id, last_runs, with_shadow)

    def shadow_evidence(self, loop: str | None) -> dict[str, Any] | None:
        """A review's `shadow`: the loop's shadow report when it has shadow history."""
        return review.shadow(self.rt, loop)

    def proposals(
        self, limit: int = 50, state: str | None = ProposalState.OPEN
    ) -> list[ProposalRecord]:
        with self.rt.store.read() as tx:
            return tx.list_proposals(limit, state)

    def run(self, run_id: str) -> RunRecord:
        with self.rt.store.read() as tx:
            found = tx.get_run(run_id)
        if found is None:
            raise NotFound(f"no run '{run_id}'")
        return found

    def runs(self, limit: int = 50, state: str | None = None) -> list[RunRecord]:
        with self.rt.store.read() as tx:
            return tx.list_runs(limit, state)

    def journal(
        self,
        limit: int = 100,
        after: int = 0,
        entity: str | None = None,
        entity_id: str | None = None,
    ) -> list[JournalEntry]:
        with self.rt.store.read() as tx:
            return tx.list_journal(limit, after, entity, entity_id)

    def status(self) -> dict[str, Any]:
        """Counts and the store's health; `ok` is false while the store cannot write
        (its last write failed for a storage reason: busy, read-only, full, I/O)."""
        with self.rt.store.read() as tx:
            counts = tx.counts()
            unplanned = len(tx.unplanned_events(1000))
        store = self.rt.store.health.as_dict()
        return {
            "ok": store["writable"],
            "store": store,
            "rulesDigest": self.rt.rules.digest,
            "loops": len(self.rt.rules.loops),
            "enabledLoops": sum(1 for loop in self.rt.rules.loops.values() if loop.enabled),
            "runs": counts["runs"],
            "proposals": counts["proposals"],
            "unplannedEvents": unplanned,
        }

    def runs_page(self, query: RunQuery, limit: int = 50) -> Page[RunRecord]:
        """A page of runs, newest first; `next` asks for the
        older ones (engine.store.ports.run_cursor reads it back), None at the end."""
        with self.rt.store.read() as tx:
            found = tx.page_runs(query, page_limit(limit) + 1)
        items = found[:limit]
        more = len(found) > limit
        last = items[-1] if items else None
        cursor = run_cursor_text(last.created_at, last.run_id) if more and last else None
        return Page(items, cursor)

    def proposals_page(self, query: ProposalQuery, limit: int = 50) -> Page[ProposalRecord]:
        """A page of proposals, newest first; `next` asks for the older ones (its
        text read back by engine.core.paging.run_cursor), None at the end."""
        with self.rt.store.read() as tx:
            found = tx.page_proposals(query, page_limit(limit) + 1)
        return _keyed_page(found, limit, lambda p: (p.created_at, p.proposal_id))

    def events_page(self, query: EventQuery, limit: int = 50) -> Page[EventRecord]:
        """A page of admitted events, newest first; `next` asks for the older ones (its
        text read back by engine.core.paging.run_cursor), None at the end."""
        with self.rt.store.read() as tx:
            found = tx.page_events(query, page_limit(limit) + 1)
        return _keyed_page(found, limit, lambda e: (e.admitted_at, e.event_id))

    def notifications_page(self, query: NotificationQuery, limit: int = 50) -> Page[dict[str, Any]]:
        """A page of notifications with their delivery state per sink, newest first
        (docs/notifications.md#listing-them)."""
        return notifications.page(self.rt, query, limit)

    def journal_page(self, query: JournalQuery, limit: int = 100) -> Page[JournalEntry]:
        """A page of the journal, newest first; `next` asks for the older entries
        (engine.store.ports.journal_cursor reads it back), None at the end."""
        with self.rt.store.read() as tx:
            found = tx.page_journal(query, page_limit(limit) + 1)
        items = found[:limit]
        last = items[-1].seq if len(found) > limit and items else None
        return Page(items, None if last is None else journal_cursor_text(last))

    def lifecycle_counts(self, loop: str) -> dict[str, dict[str, int]]:
        """The loop's occurrences, proposals and runs by state ({"occurrence": {state:
        n}, "proposal": ..., "run": ...}; a state without any is absent): the live
        counts of its lifecycle diagrams."""
        with self.rt.store.read() as tx:
            return tx.loop_state_counts(loop)


R = TypeVar("R")


def _keyed_page(found: list[R], limit: int, key: Callable[[R], tuple[str, str]]) -> Page[R]:
    """The first `limit` of `found` (read with one more than `limit`, to tell whether
    more exist), and the cursor after the last of them when more do."""
    items = found[:limit]
    return Page(items, run_cursor_text(*key(items[-1])) if len(found) > limit else None)
