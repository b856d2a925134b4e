"""Work items in the in-memory store: the `Work` port of engine.store.ports as the
named queries of sql/queries.sql do it (the partial unique index on a live item's
semantic key included). Mixed into `engine.store.memory_tx.MemoryTx`."""

from __future__ import annotations

from engine.core.work import LIVE, BindingState, WorkBinding, WorkItem, WorkQuery
from engine.store.memory_tables import MemoryStoreError, Tables, as_json, stored, take, writes


class WorkTx:
    """The `Work` port over `Tables.work` and its index of live keys."""

    _tables: Tables

    def _own(self) -> Tables:
        raise NotImplementedError

    def get_work(self, work_id: str) -> WorkItem | None:
        return self._tables.work.get(work_id)

    def live_work_by_key(self, semantic_key: str) -> WorkItem | None:
        found = self._tables.live_work.get(semantic_key)
        return None if found is None else self._tables.work[found]

    def page_work(self, query: WorkQuery, limit: int) -> list[WorkItem]:
        found = [w for w in self._tables.work.values() if _holds(query, w)]
        return take(sorted(found, key=lambda w: (w.created_at, w.work_id), reverse=True), limit)

    @writes
    def insert_work(self, item: WorkItem) -> bool:
        row = stored(item, context=as_json(item.context))
        live = row.state in LIVE
        taken = live and row.semantic_key in self._tables.live_work
        if row.work_id in self._tables.work or taken:
            return False
        t = self._own()
        t.work = t.work.set(row.work_id, row)
        if live:
            t.live_work = t.live_work.set(row.semantic_key, row.work_id)
        return True

    @writes
    def update_work(self, item: WorkItem, expect_version: int) -> bool:
        known = self._tables.work.get(item.work_id)
        if known is None or known.version != expect_version:
            return False
        row = stored(
            item,
            semantic_key=known.semantic_key,
            repo=known.repo,
            created_by=known.created_by,
            created_at=known.created_at,
            context=as_json(item.context),
        )
        holder = self._tables.live_work.get(row.semantic_key)
        if row.state in LIVE and holder not in (None, row.work_id):
            raise MemoryStoreError("UNIQUE constraint failed: work_items.semantic_key")
        t = self._own()
        t.work = t.work.set(row.work_id, row)
        if row.state in LIVE:
            t.live_work = t.live_work.set(row.semantic_key, row.work_id)
        elif holder == row.work_id:
            t.live_work = t.live_work.delete(row.semantic_key)
        return True

    @writes
    def insert_binding(self, binding: WorkBinding) -> bool:
        row = stored(binding)
        t = self._tables
        if row.work_id not in t.work:
            raise MemoryStoreError("FOREIGN KEY constraint failed: work_bindings.work_id")
        pair = (row.work_id, row.shape)
        if row.binding_id in t.bindings or row.request_id in t.binding_requests:
            return False
        if pair in t.binding_pairs:
            return False
        t = self._own()
        t.bindings = t.bindings.set(row.binding_id, row)
        t.binding_requests = t.binding_requests.set(row.request_id, row.binding_id)
        t.binding_pairs = t.binding_pairs.set(pair, row.binding_id)
        return True

    def get_binding(self, binding_id: str) -> WorkBinding | None:
        return self._tables.bindings.get(binding_id)

    def binding_by_request(self, request_id: str) -> WorkBinding | None:
        found = self._tables.binding_requests.get(request_id)
        return None if found is None else self._tables.bindings[found]

    def bindings_of_work(self, work_id: str) -> list[WorkBinding]:
        found = [b for b in self._tables.bindings.values() if b.work_id == work_id]
        return sorted(found, key=lambda b: (b.created_at, b.binding_id))

    def live_bindings(self, limit: int) -> list[WorkBinding]:
        found = [b for b in self._tables.bindings.values() if b.state != BindingState.DISABLED]
        return take(sorted(found, key=lambda b: (b.created_at, b.binding_id)), limit)

    def pending_graduations(self, limit: int) -> list[WorkBinding]:
        found = [b for b in self._tables.bindings.values() if b.graduation_requested_at]
        return take(sorted(found, key=lambda b: (b.graduation_requested_at, b.binding_id)), limit)

    @writes
    def update_binding(self, binding: WorkBinding, expect_version: int) -> bool:
        known = self._tables.bindings.get(binding.binding_id)
        if known is None or known.version != expect_version:
            return False
        row = stored(
            known,
            state=binding.state,
            updated_at=binding.updated_at,
            version=binding.version,
            last_wake_at=binding.last_wake_at,
            graduation_requested_by=binding.graduation_requested_by,
            graduation_requested_at=binding.graduation_requested_at,
            graduation_note=binding.graduation_note,
        )
        t = self._own()
        t.bindings = t.bindings.set(row.binding_id, row)
        return True


def _holds(query: WorkQuery, w: WorkItem) -> bool:
    return (
        (query.state is None or w.state == query.state)
        and (query.repo is None or w.repo == query.repo)
        and (query.key is None or w.semantic_key == query.key)
        and (query.before is None or (w.created_at, w.work_id) < query.before)
    )
