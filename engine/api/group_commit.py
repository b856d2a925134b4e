"""Group commit (docs/architecture.md#intake-group-commit): every admission of the
HTTP intake is queued to one writer, which commits what has queued as one batch, in
one transaction in a thread of its own, and answers each request when its batch has
committed. A 202 still means durably admitted; the commit, not the request, is what
costs a thread hop and a sync to disk.

A batch is bounded in size (`size` requests) and in wait: the writer starts a batch
`wait` seconds after the first request of it was queued, or at once when `size` have
queued. One batch commits at a time; what queues meanwhile is the next one, taken as
soon as the commit ends if its first request has waited `wait` already.

A batch whose commit fails for a storage reason (`Unavailable`: a busy, unwritable or
unreachable store) answers every request of it with that error, as each would have had
alone. Any other failure (a bug a request's data brings out) is never taken for the
others': each request of that batch is committed again alone and answered with its
own outcome."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from engine.errors import Unavailable

T = TypeVar("T")
R = TypeVar("R")

SIZE = 256  # requests in one batch at most
# From the first request queued to the start of its batch's commit. Measured with
# bench/intake.py (16 connections, SQLite with synchronous = FULL, the runtime loop's
# planning held off to see the intake alone, a shared 2-core machine): 2 ms answered
# about 1,100 requests/s at a p50 of 13 ms, 0.5 ms about 1,400-1,900 at 7-9 ms, and
# no wait at all no better than 0.5 ms: under load a batch forms while the one before
# it commits anyway.
WAIT_S = 0.0005


Job = tuple[asyncio.AbstractEventLoop, list[T]]  # a batch for the writer's thread


@dataclass(frozen=True)
class Queued(Generic[T, R]):
    item: T
    answer: asyncio.Future[R]
    at: float  # loop time it was queued


class GroupCommit(Generic[T, R]):
    """`await submit(item)` answers `commit([..., item, ...])`'s answer for `item`,
    after the transaction that wrote it committed. `commit` runs in the writer's one
    thread and answers one result per item, in order (or raises for the batch)."""

    def __init__(
        self,
        commit: Callable[[Sequence[T]], Sequence[R]],
        size: int = SIZE,
        wait: float = WAIT_S,
    ) -> None:
        self.commit, self.size, self.wait = commit, size, wait
        self._jobs: queue.SimpleQueue[Job[T] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="engine-intake", daemon=True)
        self._queue: list[Queued[T, R]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._committing: list[Queued[T, R]] | None = None
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def queued(self) -> int:
        """Requests waiting for a batch (not counting the batch committing now)."""
        return len(self._queue)

    async def submit(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[R] = loop.create_future()
        queued = Queued(item, answer, loop.time())
        self._queue.append(queued)
        self._idle.clear()
        self._schedule(loop)
        return await queued.answer

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the next batch now if it is full or due, else when it is due."""
        if self._committing is not None or not self._queue:
            return
        due = self._queue[0].at + self.wait
        if len(self._queue) >= self.size or loop.time() >= due:
            self._start(loop)
        elif self._timer is None:
            self._timer = loop.call_at(due, self._on_timer, loop)

    def _on_timer(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        self._schedule(loop)

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._queue = self._queue[: self.size], self._queue[self.size :]
        self._committing = batch
        if not self._thread.is_alive():
            self._thread.start()
        self._jobs.put((loop, [q.item for q in batch]))

    def _work(self) -> None:
        """The writer's thread: commit each batch handed to it, and hand the answers
        back to the event loop."""
        while (job := self._jobs.get()) is not None:
            loop, items = job
            try:
                answers: list[R | Exception] | BaseException = self._commit_batch(items)
            except BaseException as err:  # answered to every request of the batch
                answers = err
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(self._answer, loop, answers)

    def _commit_batch(self, items: list[T]) -> list[R | Exception]:
        """In the writer's thread: the batch's answers, one per item."""
        try:
            return list(_checked(self.commit(items), len(items)))
        except Unavailable:
            raise
        except Exception:
            if len(items) == 1:
                raise
        return [self._commit_one(item) for item in items]  # a bug: each alone

    def _commit_one(self, item: T) -> R | Exception:
        try:
            return _checked(self.commit([item]), 1)[0]
        except Exception as err:
            return err

    def _answer(
        self, loop: asyncio.AbstractEventLoop, answers: list[R | Exception] | BaseException
    ) -> None:
        batch, self._committing = self._committing or [], None
        results: Sequence[R | BaseException] = (
            [answers] * len(batch) if isinstance(answers, BaseException) else answers
        )
        for queued, result in zip(batch, results, strict=True):
            if queued.answer.done():  # the request was cancelled: its client left
                continue
            if isinstance(result, BaseException):
                queued.answer.set_exception(result)
            else:
                queued.answer.set_result(result)
        if self._queue:
            self._schedule(loop)
        else:
            self._idle.set()

    async def close(self) -> None:
        """Commit what is queued, wait for it, and stop the writer's thread."""
        loop = asyncio.get_running_loop()
        if self._queue and self._committing is None:
            self._start(loop)
        await self._idle.wait()
        self._jobs.put(None)
        if self._thread.is_alive():
            await asyncio.to_thread(self._thread.join)


def _checked(results: Sequence[R], count: int) -> Sequence[R]:
    if len(results) != count:
        raise RuntimeError(f"a batch of {count} was answered with {len(results)} results")
    return results
