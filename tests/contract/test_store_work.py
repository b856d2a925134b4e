"""The work items' storage contract (docs/work.md), held by the SQLite, PostgreSQL and
in-memory stores alike: at most one non-terminal item per semantic key, every change a
compare-and-set on the version read, the context document read back as written, and
pages newest first that give every item once."""

from __future__ import annotations

import dataclasses

import pytest
from databases import Factory, real_databases
from test_store import _create_at

from engine.core.work import WorkBinding, WorkItem, WorkQuery


def at(minute: int) -> str:
    return f"2026-12-07T08:{minute:02d}:00.000000Z"


def item(work_id: str, key: str = "repair-42", state: str = "open", minute: int = 0) -> WorkItem:
    context = {"summary": "Repair the flaky test ✓", "links": ["https://ci.example/1"]}
    return WorkItem(
        work_id, key, f"Work {work_id}", state, "acme/app", context, "operator:ann",
        at(minute), at(minute),
    )  # fmt: skip


def test_an_item_reads_back_as_written(open_store: Factory) -> None:
    """insert_work stores the item once (a second insert of its id writes nothing) and
    get_work and live_work_by_key read it back, context and lease included."""
    store = open_store()
    with store.write() as tx:
        assert tx.insert_work(item("w1")) is True
        assert tx.insert_work(dataclasses.replace(item("w1"), semantic_key="other")) is False
    with open_store().read() as tx:
        assert tx.get_work("w1") == item("w1")
        assert tx.live_work_by_key("repair-42") == item("w1")
        assert tx.get_work("nope") is None and tx.live_work_by_key("nope") is None


def test_one_live_item_per_key(open_store: Factory) -> None:
    """A second non-terminal item of a key is not written; once the first is terminal,
    the key opens again, and terminal items of a key may be many."""
    store = open_store()
    with store.write() as tx:
        assert tx.insert_work(item("w1")) is True
        assert tx.insert_work(item("w2", state="blocked")) is False
        assert tx.insert_work(item("w0", state="cancelled")) is True
        done = dataclasses.replace(item("w1"), state="completed", version=2, updated_at=at(5))
        assert tx.update_work(done, expect_version=1) is True
        assert tx.live_work_by_key("repair-42") is None
        assert tx.insert_work(item("w2", minute=6)) is True
    with store.read() as tx:
        assert tx.live_work_by_key("repair-42") == item("w2", minute=6)
        assert tx.get_work("w1") == done


def test_update_is_a_compare_and_set_on_the_version(open_store: Factory) -> None:
    """update_work writes over the version read only; a stale writer changes nothing,
    and the key, repo and creation stay as they were."""
    first, second = open_store(), open_store()
    with first.write() as tx:
        tx.insert_work(item("w1"))
    leased = dataclasses.replace(
        item("w1"),
        state="active",
        version=2,
        updated_at=at(1),
        lease_owner="operator:bot",
        lease_session="s-1",
        lease_expires_at=at(16),
        semantic_key="ignored",
    )
    with first.write() as tx:
        assert tx.update_work(leased, expect_version=1) is True
    with second.write() as tx:
        stale = dataclasses.replace(item("w1"), state="cancelled", version=2)
        assert tx.update_work(stale, expect_version=1) is False
        assert tx.update_work(dataclasses.replace(item("nope"), version=2), 1) is False
    with second.read() as tx:
        assert tx.get_work("w1") == dataclasses.replace(leased, semantic_key="repair-42")


def test_pages_are_newest_first_and_filtered(open_store: Factory) -> None:
    """page_work gives the items newest first (created_at, then id), filtered by state,
    repo and key, and from a `before` cursor only the older ones."""
    store = open_store()
    with store.write() as tx:
        for n in range(5):
            state = "completed" if n % 2 else "open"
            tx.insert_work(item(f"w{n}", key=f"k{n}", state=state, minute=n // 2))
    with store.read() as tx:
        everything = [w.work_id for w in tx.page_work(WorkQuery(), 10)]
        assert everything == ["w4", "w3", "w2", "w1", "w0"]
        assert [w.work_id for w in tx.page_work(WorkQuery(), 2)] == ["w4", "w3"]
        older = tx.page_work(WorkQuery(before=(at(1), "w3")), 10)
        assert [w.work_id for w in older] == ["w2", "w1", "w0"]
        assert [w.work_id for w in tx.page_work(WorkQuery(state="open"), 10)] == ["w4", "w2", "w0"]
        assert [w.work_id for w in tx.page_work(WorkQuery(key="k3"), 10)] == ["w3"]
        assert tx.page_work(WorkQuery(repo="other/repo"), 10) == []


def test_a_rolled_back_write_leaves_nothing(open_store: Factory) -> None:
    """An item inserted in a transaction that fails is not stored, nor is its key held."""
    store = open_store()
    with pytest.raises(RuntimeError), store.write() as tx:
        tx.insert_work(item("w1"))
        raise RuntimeError("boom")
    with store.write() as tx:
        assert tx.get_work("w1") is None
        assert tx.insert_work(item("w2")) is True


# ---- work-bound loop instances (docs/work.md#work-bound-loops) ---------------------


def binding(
    n: int, work_id: str = "w-1", shape: str = "nudge", state: str = "shadow"
) -> WorkBinding:
    return WorkBinding(f"b-{n}", work_id, shape, f"req-{n}", state, "operator:alice", at(n), at(n))


def test_one_instance_per_work_and_shape_and_per_request(open_store: Factory) -> None:
    """A binding reads back as written; its id, its request id and its (work, shape)
    each hold one instance: a second insert of any is refused and writes nothing."""
    store = open_store()
    with store.write() as tx:
        assert tx.insert_work(item("w-1")) and tx.insert_work(item("w-2", key="other"))
        assert tx.insert_binding(binding(1))
        assert not tx.insert_binding(binding(1, shape="watch"))  # the same id
        assert not tx.insert_binding(dataclasses.replace(binding(2), request_id="req-1"))
        assert not tx.insert_binding(binding(3))  # the same work and shape
        assert tx.insert_binding(binding(4, shape="watch"))
        assert tx.insert_binding(binding(5, work_id="w-2"))
    with store.read() as tx:
        assert tx.get_binding("b-1") == binding(1)
        assert tx.binding_by_request("req-4") == binding(4, shape="watch")
        assert tx.get_binding("b-2") is None and tx.binding_by_request("req-3") is None
        assert [b.binding_id for b in tx.bindings_of_work("w-1")] == ["b-1", "b-4"]


def test_an_instance_update_is_a_compare_and_set(open_store: Factory) -> None:
    """A state change applies over the version read; a stale writer is refused and
    changes nothing; disabled instances are not live."""
    store = open_store()
    with store.write() as tx:
        tx.insert_work(item("w-1"))
        tx.insert_binding(binding(1))
        tx.insert_binding(binding(2, shape="watch"))
    live = dataclasses.replace(binding(1), state="live", updated_at=at(9), version=2)
    with store.write() as tx:
        assert tx.update_binding(live, 1)
        assert not tx.update_binding(dataclasses.replace(live, state="paused", version=3), 1)
        done = dataclasses.replace(binding(2, shape="watch"), state="disabled", version=2)
        assert tx.update_binding(done, 1)
    with store.read() as tx:
        assert tx.get_binding("b-1") == live
        assert [b.binding_id for b in tx.live_bindings(10)] == ["b-1"]
        assert tx.live_bindings(0) == []


# ---- a graduation deferred to the next serve start (docs/work.md#graduating-an-instance) --


def deferred(b: WorkBinding, minute: int, by: str = "operator:bob") -> WorkBinding:
    return dataclasses.replace(
        b,
        version=b.version + 1,
        updated_at=at(minute),
        graduation_requested_by=by,
        graduation_requested_at=at(minute),
        graduation_note=f"asked at {minute} ✓",
    )


def test_a_deferred_graduation_is_kept_and_listed_until_cleared(open_store: Factory) -> None:
    """update_binding writes the pending graduation with the state (compare-and-set as
    ever); pending_graduations lists the instances that hold one, oldest request first,
    whatever their state, and forgets one once its mark is cleared."""
    store = open_store()
    with store.write() as tx:
        tx.insert_work(item("w-1"))
        for n, shape in ((1, "nudge"), (2, "watch"), (3, "keep")):
            tx.insert_binding(binding(n, shape=shape))
    first, second = deferred(binding(1), 20), deferred(binding(2, shape="watch"), 10, "ann")
    with store.write() as tx:
        assert tx.update_binding(first, 1) and tx.update_binding(second, 1)
        assert not tx.update_binding(deferred(binding(3, shape="keep"), 5), 2)  # stale
        assert tx.pending_graduations(10) == [second, first]
    with open_store().read() as tx:  # another connection reads what was committed
        assert tx.get_binding("b-1") == first
        assert [b.binding_id for b in tx.pending_graduations(10)] == ["b-2", "b-1"]
        assert [b.binding_id for b in tx.pending_graduations(1)] == ["b-2"]
        assert tx.pending_graduations(0) == []
    applied = dataclasses.replace(
        second,
        state="live",
        version=3,
        updated_at=at(30),
        graduation_requested_by=None,
        graduation_requested_at=None,
        graduation_note=None,
    )
    disabled = dataclasses.replace(first, state="disabled", version=3)
    with store.write() as tx:
        assert tx.update_binding(applied, 2) and tx.update_binding(disabled, 2)
    with store.read() as tx:
        assert tx.get_binding("b-2") == applied
        assert tx.pending_graduations(10) == [disabled]  # disabled, still marked
        assert tx.live_bindings(10) == [applied, binding(3, shape="keep")]


def test_a_binding_inserted_with_a_pending_graduation_reads_back_whole(
    open_store: Factory,
) -> None:
    store = open_store()
    made = deferred(binding(1), 7)
    with store.write() as tx:
        tx.insert_work(item("w-1"))
        assert tx.insert_binding(made)
    with store.read() as tx:
        assert tx.get_binding("b-1") == made and tx.pending_graduations(5) == [made]


@real_databases  # migrations are SQL run on a database (the memory store has no schema)
def test_migration_16_keeps_the_instances_a_version_14_database_holds(
    open_store: Factory, store_database: str
) -> None:
    """An instance bound before graduations could be deferred reads back as it was,
    with none pending, once a store migrates its database; it then takes a deferral."""
    _create_at(
        store_database,
        14,
        ("INSERT INTO work_items (work_id, semantic_key, title, state, context, created_by, "
         "created_at, updated_at) VALUES ('w-1', 'k', 't', 'open', '{}', 'operator:ann', ?, ?)",
         (at(0), at(0))),
        ("INSERT INTO work_bindings (binding_id, work_id, shape, request_id, state, created_by, "
         "created_at, updated_at) VALUES ('b-1', 'w-1', 'nudge', 'req-1', 'shadow', "
         "'operator:alice', ?, ?)", (at(1), at(1))),
    )  # fmt: skip
    store = open_store()
    with store.write() as tx:
        assert tx.get_binding("b-1") == binding(1)
        assert tx.pending_graduations(10) == []
        assert tx.update_binding(deferred(binding(1), 2), 1)
    with store.read() as tx:
        assert tx.pending_graduations(10) == [deferred(binding(1), 2)]
