"""The in-process scheduler: each pass fires the loops whose next slot is due.

A heap of (next due instant, loop) makes a pass with nothing due cost O(1), and one
with due loops O(due log loops). Truth is in the store, never in the heap: each due
loop's state (cursor, enablement, pause) is read in the pass's transaction, its ticks
are admitted through the same idempotent path as any event, its skipped slots are
recorded, and its cursor moves forward, all in one commit. Several processes may
run passes on one database: they converge on one admission per slot.

Watch loops share the heap: their entries are next polls, not slots (no catch-up). A
due one's probe is handed to the probe pool (engine.service.probing) after the slots of
the pass commit, and its poll is recorded (engine.service.watches) by the first pass
after it finished; only then is its next poll on the heap, so a loop is polled once at
a time.

Work-bound instances (docs/work.md#how-an-instance-fires) are loops the rules gain and
lose at runtime: each pass first reads the bindings (engine.service.instances), and an
instance made or changed since is reconciled like a loop at start; one whose work ended
has left the rules, and its heap entries fire nothing."""

from __future__ import annotations

import heapq
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from engine.core.decisions import Actor, Entity, JournalAction
from engine.core.envelope import parse_iso
from engine.core.records import LoopState, SkipRecord
from engine.core.ruleset import Loop, TriggerKind
from engine.core.slots import Fire, Pass, Policy, SkipReason, Slots, plan_pass, skip_all, slots_of
from engine.core.ticks import slot_text, tick
from engine.logs import Progress
from engine.service import instances, probing, watches
from engine.service.batch import CHUNK, Batch, plan_all
from engine.service.context import Runtime
from engine.store.ports import Tx

ACTOR = Actor.SCHEDULE
log = logging.getLogger("engine.scheduler")


@dataclass(order=True)
class _Due:
    at: datetime
    loop: str = field(compare=False)


@dataclass
class Scheduler:
    rt: Runtime
    heap: list[_Due] = field(default_factory=list)
    sequences: dict[str, Slots] = field(default_factory=dict)
    started: bool = False
    # Runs a watch's probe; without one (a service that only reads) nothing is polled.
    observer: probing.Observer | None = None
    # Probes that run side by side, in the pool's threads (docs/scheduling.md).
    probe_threads: int = probing.SIZE
    # Seconds between progress lines of a long pass (a catch-up of many slots).
    progress_every: float = 5.0
    probes: probing.ProbePool | None = None

    def __post_init__(self) -> None:
        if self.observer is not None and self.probes is None:
            self.probes = probing.ProbePool(self.observer, self.probe_threads)

    # ---- start: reconcile the store with the rules ---------------------------------------
    def start(self, now: datetime) -> None:
        """Record which loops are enabled (a loop turning on starts its catch-up window
        now) and schedule each enabled loop's next slot."""
        instances.refresh(self.rt)
        with self.rt.store.write() as tx:
            for loop in self.rt.rules.loops.values():
                self._reconcile(tx, loop, now)
        self.started = True

    def _reconcile(self, tx: Tx, loop: Loop, now: datetime) -> None:
        seq = slots_of(loop.trigger)
        if seq is not None:
            self.sequences[loop.name] = seq
        # Every loop gets a state row, manual and host-clock ones too: its
        # enablement is the doctor's baseline and pausing needs the row.
        state = tx.get_loop_state(loop.name)
        if state is None or state.enabled != loop.enabled:
            self._record_enablement(tx, loop, state, now)
        if loop.enabled and seq is not None:
            self._push(loop.name, tx.get_loop_state(loop.name), now)
        elif loop.enabled and self._polled(loop):
            heapq.heappush(self.heap, _Due(watches.first_poll(tx, loop, now), loop.name))

    def _adopt_instances(self, now: datetime) -> None:
        """Schedule the work-bound instances made or changed since the last pass
        (engine.service.instances), from their next slot."""
        changed = instances.refresh(self.rt)
        if not changed:
            return
        with self.rt.store.write() as tx:
            for loop in changed:
                self.heap = [d for d in self.heap if d.loop != loop.name]
                heapq.heapify(self.heap)
                self._reconcile(tx, loop, now)

    def _record_enablement(
        self, tx: Tx, loop: Loop, state: LoopState | None, now: datetime
    ) -> None:
        at = self.rt.now()
        tx.set_loop_enabled(loop.name, loop.enabled, slot_text(now), at)
        action = JournalAction.ENABLED if loop.enabled else JournalAction.DISABLED
        self.rt.journal(
            tx,
            Entity.LOOP,
            loop.name,
            action,
            Actor.SYSTEM,
            at=at,
            note=f"the rules say {action} ({loop.overlay_origin or loop.origin})",
        )
        seq = self.sequences.get(loop.name)
        if loop.enabled and seq is not None and state is not None and state.cursor is not None:
            # The disabled range ends before the new enablement (a slot at that very
            # second is due, not skipped), and the cursor moves past it, so a later
            # disable/enable cycle records its own range instead of colliding with this one.
            cursor = parse_iso(state.cursor)
            before = parse_iso(slot_text(now)) - timedelta(microseconds=1)
            gap = skip_all(seq, cursor, cursor, before, SkipReason.DISABLED)
            self._record_skips(tx, loop.name, gap, at)
            if gap.skips and gap.cursor is not None:
                tx.advance_cursor(loop.name, slot_text(gap.cursor), None, at)

    def _push(self, name: str, state: LoopState | None, now: datetime) -> None:
        if state is None or state.enabled_since is None:
            return
        cursor = parse_iso(state.cursor) if state.cursor else None
        self._push_after(name, cursor, parse_iso(state.enabled_since))

    def _push_after(self, name: str, cursor: datetime | None, since: datetime) -> None:
        """Schedule the loop's first slot after its cursor, never before enablement."""
        after = since - timedelta(microseconds=1)
        if cursor is not None and cursor > after:
            after = cursor
        nxt = self.sequences[name].after(after)
        if nxt is not None:
            heapq.heappush(self.heap, _Due(nxt, name))

    # ---- a pass ----------------------------------------------------------------------
    def run_pass(self, now: datetime | None = None, *, wait_for_probes: bool = True) -> int:
        """Fire every due loop, start the due watch loops' probes in the pool, and record
        the polls that have finished; the number of ticks admitted (new or duplicate).
        `wait_for_probes`: wait for the probes started to finish, so their polls are
        recorded by this pass (the CLI and tests); serve's runtime loop never waits and
        records them on a later pass."""
        now = now or self.rt.clock()
        if not self.started:
            self.start(now)
        else:
            self._adopt_instances(now)
        due: list[str] = []
        while self.heap and self.heap[0].at <= now:
            name = heapq.heappop(self.heap).loop
            if not due or due[-1] != name:
                due.append(name)
        # an instance whose work ended has left the rules: its slots are not fired
        known = self.rt.rules.loops
        loops = [known[name] for name in dict.fromkeys(due) if name in known]
        fired = 0
        slotted = [loop for loop in loops if loop.name in self.sequences]
        if slotted:
            with self.rt.store.write() as tx:
                fired += self._fire(tx, slotted, now)
        self._start_polls([loop for loop in loops if self._polled(loop)], now)
        return fired + self._take_polls(wait_for_probes)

    def _start_polls(self, loops: list[Loop], now: datetime) -> None:
        """Hand the due watch loops' probes to the pool; a loop's next poll goes on the
        heap once its poll is recorded (or now, for a loop that is not polled)."""
        if not loops or self.probes is None:
            return
        polled, nxt = watches.due(self.rt, loops, now)
        self._push_polls(nxt)
        for loop in polled:
            self.probes.start(loop, self.rt.rules.probes[loop.trigger.probe or ""], now)

    def _take_polls(self, wait: bool) -> int:
        """Record the finished polls in one commit (given back to the pool when the
        store fails, for the next pass); the ticks their changes admitted."""
        if self.probes is None:
            return 0
        if wait:
            self.probes.wait()
        polls = self.probes.finished()
        if not polls:
            return 0
        try:
            result = watches.record(self.rt, polls)
        except BaseException:
            self.probes.put_back(polls)
            raise
        self._push_polls(result.next)
        return result.fired

    def _push_polls(self, nxt: dict[str, datetime]) -> None:
        for name, at in nxt.items():
            heapq.heappush(self.heap, _Due(at, name))

    def _polled(self, loop: Loop) -> bool:
        """A watch loop, and a probe runner to poll it with."""
        return loop.trigger.kind is TriggerKind.WATCH and self.observer is not None

    def _fire(self, tx: Tx, loops: list[Loop], now: datetime) -> int:
        """Fire the due loops in one commit: every loop's due slots are ticks, admitted
        and planned through the batched writer (engine.service.batch), its skipped
        slots recorded and its cursor moved, each kind of row in one statement."""
        batch = Batch(self.rt, tx, self.rt.now())
        states = tx.loop_states_of(loop.name for loop in loops)
        fires: list[tuple[Loop, Fire]] = []
        for loop in loops:
            state = states.get(loop.name)
            if state is None or not state.enabled or state.enabled_since is None:
                continue
            seq = self.sequences[loop.name]
            cursor = parse_iso(state.cursor) if state.cursor else None
            since = parse_iso(state.enabled_since)
            if state.paused:
                result = skip_all(seq, cursor, since, now, SkipReason.PAUSED)
            else:
                result = plan_pass(seq, Policy.of(loop), cursor, since, now)
            for f in result.fires:
                fires.append((loop, f))
                if f.skipped:
                    log.info(
                        "loop %s: fired %s, skipped %d older slot(s) (%s)",
                        loop.name,
                        slot_text(f.slot),
                        f.skipped,
                        _reasons(result),
                    )
            batch.skips.extend(_skips(loop.name, result, batch.at))
            if result.cursor is not None:
                last = slot_text(result.fires[-1].slot) if result.fires else None
                batch.cursors.append((loop.name, slot_text(result.cursor), last))
            moved = (
                result.cursor
                if cursor is None or (result.cursor and result.cursor > cursor)
                else cursor
            )
            self._push_after(loop.name, moved, since)
        progress = Progress(log, "catch-up", self.progress_every)
        for start in range(0, len(fires), CHUNK):  # a long catch-up in bounded memory
            ticks = [tick(loop, f.slot, f.skipped) for loop, f in fires[start : start + CHUNK]]
            known = tx.known_events(t.eventId for t in ticks)
            fresh = [batch.admit(t, ACTOR) for t in ticks if t.eventId not in known]
            # planned in the same commit: decided before anything runs
            plan_all(self.rt, batch, fresh)
            _report(progress, fires, start + len(ticks))
        batch.flush(last=True)
        return len(fires)

    def _record_skips(self, tx: Tx, loop: str, result: Pass, at: str) -> None:
        tx.insert_skips(_skips(loop, result, at))

    def next_due(self) -> datetime | None:
        return self.heap[0].at if self.heap else None


def _report(progress: Progress, fires: list[tuple[Loop, Fire]], done: int) -> None:
    """`catch-up: loop X 1,200/10,000 slots` of the loop being fired, every few seconds
    of a long pass (nothing for a pass that is quick)."""
    if not progress.due():
        return
    name = fires[done - 1][0].name
    of_loop = [i for i, (loop, _) in enumerate(fires) if loop.name == name]
    ahead = sum(1 for i in of_loop if i < done)
    progress.step(f"loop {name}", ahead, len(of_loop), "slots", loop=name)


def _skips(loop: str, result: Pass, at: str) -> list[SkipRecord]:
    return [
        SkipRecord(loop, slot_text(s.first), slot_text(s.last), s.count, s.reason.value, at)
        for s in result.skips
    ]


def _reasons(result: Pass) -> str:
    """`4 too_late, 1 catchup_none`: the pass's skipped slots by reason."""
    return ", ".join(f"{s.count} {s.reason.value}" for s in result.skips)
