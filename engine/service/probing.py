"""The probe pool (docs/scheduling.md, "Condition watches"): watch probes run in a
bounded pool of threads of their own, never in the runtime loop's.

The scheduler hands each due watch loop's probe to `start`, which returns at once; the
loop's next pass takes the polls that have finished (`finished`) and records them. A
loop's probe runs at most once at a time, so the queue is bounded by the number of
watch loops, and at most `size` probes run side by side. The threads are daemons: a
process that ends takes its probes with it (each probe's supervisor then ends its
process tree, engine/adapters/supervisor.py). No thread of the pool touches the store:
recording a poll is the runtime loop's, in its own transaction."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.core.probes import ProbeRun
from engine.core.registry import Probe
from engine.core.ruleset import Loop

# Runs one probe over a loop's static payload (engine.adapters.probe.ProbeRunner).
Observer = Callable[[Probe, Mapping[str, Any]], ProbeRun]

SIZE = 4  # probes that run side by side by default (`engine serve --probe-threads`)
MOST = 64  # the largest pool `--probe-threads` takes
log = logging.getLogger("engine.watches")


@dataclass(frozen=True, slots=True)
class Poll:
    """One poll of a watch loop: the probe's run, and the instant the poll is of (when
    the runtime loop started it)."""

    loop: Loop
    run: ProbeRun
    at: datetime


@dataclass(frozen=True, slots=True)
class _Job:
    loop: Loop
    probe: Probe
    at: datetime


class ProbePool:
    """`size` daemon threads running probes through `observer`; `woken` is called (from
    a pool thread) each time a poll finishes, so the runtime loop can take it at once."""

    def __init__(self, observer: Observer, size: int = SIZE) -> None:
        if not 1 <= size <= MOST:
            raise ValueError(f"a probe pool has 1 to {MOST} threads, not {size}")
        self.observer, self.size = observer, size
        self.woken: Callable[[], None] = lambda: None
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._done: list[Poll] = []
        self._running: set[str] = set()
        self._lock = threading.Condition()
        self._threads: list[threading.Thread] = []

    def start(self, loop: Loop, probe: Probe, at: datetime) -> bool:
        """Queue the loop's poll of instant `at`, without waiting for it; False when
        a poll of the loop is already queued, running or not yet taken."""
        with self._lock:
            if loop.name in self._running:
                return False
            self._running.add(loop.name)
            if len(self._threads) < self.size:
                self._spawn()
        self._jobs.put(_Job(loop, probe, at))
        return True

    def finished(self) -> list[Poll]:
        """The polls finished since the last call, taken: their loops may start again."""
        with self._lock:
            done, self._done = self._done, []
            self._running.difference_update(poll.loop.name for poll in done)
        return done

    def put_back(self, polls: list[Poll]) -> None:
        """Polls taken but not recorded (the store failed): the next `finished` has them."""
        with self._lock:
            self._done[:0] = polls
            self._running.update(poll.loop.name for poll in polls)

    def wait(self) -> None:
        """Until every poll started has finished (a caller that wants its pass whole)."""
        with self._lock:
            self._lock.wait_for(lambda: len(self._done) == len(self._running))

    def running(self) -> set[str]:
        """The loops whose poll is queued, running or finished but not taken."""
        with self._lock:
            return set(self._running)

    def _spawn(self) -> None:
        name = f"engine-probe-{len(self._threads) + 1}"
        thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            run = self._run(job)
            with self._lock:
                self._done.append(Poll(job.loop, run, job.at))
                self._lock.notify_all()
            try:
                self.woken()
            except Exception:  # a waker's bug must not end the pool's thread
                log.exception("waking the runtime loop failed")

    def _run(self, job: _Job) -> ProbeRun:
        """The probe's run; a runner that raises is the poll's failure, not the thread's."""
        try:
            return self.observer(job.probe, job.loop.payload)
        except Exception as err:  # a bug of the runner fails the poll, visibly
            log.exception("loop %s: the probe runner failed", job.loop.name)
            return ProbeRun(failure=f"the probe runner failed: {err}")
