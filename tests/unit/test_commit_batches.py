"""The group commit's own rules (engine.api.group_commit), over a commit function that
records its batches: the size and wait bounds of a batch, one batch at a time, each
item answered its own result, a storage fault answered to the whole batch, any other
failure answered to the item that causes it alone, and what is queued at close
committed."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from engine.api.group_commit import GroupCommit
from engine.errors import Busy


class Recorder:
    """A commit that answers each item doubled and records each batch it was given."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.batches: list[list[int]] = []
        self.gate = gate

    def __call__(self, items: Sequence[int]) -> list[int]:
        if self.gate is not None:
            assert self.gate.wait(10)
        self.batches.append(list(items))
        if any(i < 0 for i in items):
            raise RuntimeError("a negative item breaks its batch")
        if 99 in items:
            raise Busy("the database is busy")
        return [i * 2 for i in items]


def test_a_batch_holds_at_most_size_items_and_one_commits_at_a_time() -> None:
    """Seven items queued at once with a size of three commit as 3, 3 and 1, in order,
    each answered with its own result."""
    commit = Recorder()

    async def scenario() -> list[int]:
        writer = GroupCommit(commit, size=3, wait=0.1)
        answers = await asyncio.gather(*(writer.submit(i) for i in range(7)))
        await writer.close()
        return answers

    assert asyncio.run(scenario()) == [0, 2, 4, 6, 8, 10, 12]
    assert commit.batches == [[0, 1, 2], [3, 4, 5], [6]]


def test_a_batch_waits_for_more_items_until_its_first_has_waited() -> None:
    """An item queued while the first of a batch waits joins that batch."""
    commit = Recorder()

    async def scenario() -> None:
        writer = GroupCommit(commit, size=10, wait=1.0)
        first = asyncio.ensure_future(writer.submit(1))
        await asyncio.sleep(0.01)
        assert await asyncio.gather(first, writer.submit(2)) == [2, 4]
        await writer.close()

    asyncio.run(scenario())
    assert commit.batches == [[1, 2]]


def test_items_queued_during_a_commit_form_the_next_batch() -> None:
    """While a batch commits, what is queued waits and then commits as one batch."""
    gate = threading.Event()
    commit = Recorder(gate)

    async def scenario() -> None:
        writer = GroupCommit(commit, size=10, wait=0.0)
        first = asyncio.ensure_future(writer.submit(0))
        await asyncio.sleep(0.01)
        rest = [asyncio.ensure_future(writer.submit(i)) for i in (1, 2, 3)]
        await asyncio.sleep(0.01)
        assert writer.queued == 3
        gate.set()
        assert await asyncio.gather(first, *rest) == [0, 2, 4, 6]
        await writer.close()

    asyncio.run(scenario())
    assert commit.batches == [[0], [1, 2, 3]]


def test_a_storage_fault_answers_every_item_of_the_batch() -> None:
    """A batch whose commit raises Unavailable answers each of its items that error,
    and is not committed again item by item."""
    commit = Recorder()

    async def scenario() -> list[object]:
        writer = GroupCommit(commit, size=3, wait=10.0)
        answers = await asyncio.gather(
            *(writer.submit(i) for i in (1, 99, 2)), return_exceptions=True
        )
        await writer.close()
        return answers

    answers = asyncio.run(scenario())
    assert [type(a) for a in answers] == [Busy, Busy, Busy]
    assert commit.batches == [[1, 99, 2]]


def test_any_other_failure_is_answered_to_the_item_that_causes_it_alone() -> None:
    """A batch whose commit fails for another reason is committed again item by item:
    the item that fails alone gets its error, the others their results."""
    commit = Recorder()

    async def scenario() -> list[object]:
        writer = GroupCommit(commit, size=3, wait=10.0)
        answers = await asyncio.gather(
            *(writer.submit(i) for i in (1, -1, 2)), return_exceptions=True
        )
        await writer.close()
        return answers

    first, failed, last = asyncio.run(scenario())
    assert (first, last) == (2, 4)
    assert isinstance(failed, RuntimeError)
    assert commit.batches == [[1, -1, 2], [1], [-1], [2]]


def test_close_commits_what_is_queued() -> None:
    """Closing the writer commits the items still waiting for their batch."""
    commit = Recorder()

    async def scenario() -> None:
        writer = GroupCommit(commit, size=10, wait=10.0)
        queued = [asyncio.ensure_future(writer.submit(i)) for i in (1, 2)]
        await asyncio.sleep(0)
        await writer.close()
        assert [q.result() for q in queued] == [2, 4]

    asyncio.run(scenario())
    assert commit.batches == [[1, 2]]


@pytest.mark.parametrize("size", [1, 2])
def test_a_cancelled_request_leaves_the_others_answered(size: int) -> None:
    """A request cancelled while its batch commits (its client left) does not keep
    the other items of the writer from their answers."""
    gate = threading.Event()
    commit = Recorder(gate)

    async def scenario() -> None:
        writer = GroupCommit(commit, size=size, wait=0.0)
        left = asyncio.ensure_future(writer.submit(1))
        stays = asyncio.ensure_future(writer.submit(2))
        await asyncio.sleep(0.01)
        left.cancel()
        gate.set()
        assert await stays == 4
        await writer.close()

    asyncio.run(scenario())
