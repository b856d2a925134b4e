"""The indexes of the in-memory store's tables (`memory_tables.Tables`), each a
persistent map (`immutables.Map`) that a write replaces with a changed copy sharing
all but a few nodes with it: a table's keys by state and loop (`Grouped`), by loop
and the hour of a time column (`Timeline`), and the order rows were first written."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, TypeVar

from immutables import Map

K = TypeVar("K", bound=Hashable)
Row = TypeVar("Row")

EMPTY: Map[Any, Any] = Map()
# A table's keys by (state, loop): state -> loop -> {key: None}.
Grouped = Map[Any, Map[Any, Map[Any, None]]]


def regroup(index: Grouped, key: Any, old: tuple[Any, Any] | None, new: tuple[Any, Any]) -> Grouped:
    """`index` with `key` moved from its (state, loop) `old` (None: a new key) to `new`."""
    if old == new:
        return index
    if old is not None:
        by_loop = index[old[0]]
        index = index.set(old[0], by_loop.set(old[1], by_loop[old[1]].delete(key)))
    by_loop = index.get(new[0], EMPTY)
    return index.set(new[0], by_loop.set(new[1], by_loop.get(new[1], EMPTY).set(key, None)))


def grouped(
    index: Grouped, states: Iterable[Any], loops: Iterable[Any] | None = None
) -> Iterator[Any]:
    """The keys in any of `states` (each once), of `loops` (None: of every loop)."""
    for state in dict.fromkeys(states):
        by_loop = index.get(state, EMPTY)
        if loops is None:
            for keys in by_loop.values():
                yield from keys
        else:
            for loop in loops:
                yield from by_loop.get(loop, EMPTY)


def in_order(rows: Map[K, Row], order: Map[K, int]) -> list[Row]:
    """A table's rows in the order they were first written (a dict's order, SQLite's
    rowid order)."""
    return [rows[key] for key, _ in sorted(order.items(), key=itemgetter(1))]


def _hour(at: str) -> str:
    """The bucket of a time: its text up to the hour, which sorts as the times do."""
    return at[:13]


@dataclass(frozen=True, slots=True)
class Timeline:
    """A table's keys by loop and by the hour of one of its time columns (a key whose
    time is NULL is not in it), beside each loop's hours in order: what lets a read
    of a loop's rows since a time, or of its newest rows, visit only the hours it
    needs however long the table has grown."""

    buckets: Map[tuple[Any, str], Map[Any, None]] = EMPTY  # (loop, hour) -> {key: None}
    hours: Map[Any, tuple[str, ...]] = EMPTY  # loop -> its hours, oldest first

    def moved(
        self, key: Any, old: tuple[Any, str | None] | None, new: tuple[Any, str | None]
    ) -> Timeline:
        """With `key` moved from its (loop, time) `old` (None: a new key) to `new`."""
        if old == new:
            return self
        buckets, hours = self.buckets, self.hours
        if old is not None and old[1] is not None:
            at = (old[0], _hour(old[1]))
            buckets = buckets.set(at, buckets[at].delete(key))  # an empty hour stays
        loop, time = new
        if time is not None:
            at = (loop, _hour(time))
            found = buckets.get(at)
            if found is None:
                mine = list(hours.get(loop, ()))
                insort(mine, at[1])
                hours = hours.set(loop, tuple(mine))
                found = EMPTY
            buckets = buckets.set(at, found.set(key, None))
        return Timeline(buckets, hours)

    def since(self, loop: Any, time: str) -> Iterator[Any]:
        """The keys of `loop` in the hours from that of `time` on (a caller filters the
        first hour's)."""
        mine = self.hours.get(loop, ())
        for hour in mine[bisect_left(mine, _hour(time)) :]:
            yield from self.buckets[(loop, hour)]

    def newest(self, loop: Any) -> Iterator[Map[Any, None]]:
        """The keys of `loop` hour by hour, the newest hour first."""
        for hour in reversed(self.hours.get(loop, ())):
            yield self.buckets[(loop, hour)]
