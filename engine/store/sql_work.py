"""Work items in the SQL stores (SQLite and PostgreSQL): the `Work` port of
engine.store.ports over the named queries of sql/queries.sql (insert_work, get_work,
live_work_by_key, update_work, page_work, and the bindings'). Mixed into `engine.store.sqltx.SqlTx`,
which gives it its statement helpers."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engine.core.work import WorkBinding, WorkItem, WorkQuery

Row = Mapping[str, Any]

WORK_FILTERS = {
    "state": "state = :state",
    "repo": "repo = :repo",
    "key": "semantic_key = :key",
    "before": "(created_at, work_id) < (:before_at, :before_id)",
}


def work_item(row: Row) -> WorkItem:
    data = dict(row)
    data["context"] = json.loads(data["context"])
    data["version"] = int(data["version"])
    return WorkItem(**data)


def binding_of(row: Row) -> WorkBinding:
    data = dict(row)
    data["version"] = int(data["version"])
    return WorkBinding(**data)


def binding_params(binding: WorkBinding) -> dict[str, Any]:
    return {
        "binding_id": binding.binding_id,
        "work_id": binding.work_id,
        "shape": binding.shape,
        "request_id": binding.request_id,
        "state": binding.state,
        "created_by": binding.created_by,
        "created_at": binding.created_at,
        "updated_at": binding.updated_at,
        "version": binding.version,
        "last_wake_at": binding.last_wake_at,
        "graduation_requested_by": binding.graduation_requested_by,
        "graduation_requested_at": binding.graduation_requested_at,
        "graduation_note": binding.graduation_note,
    }


def work_params(item: WorkItem) -> dict[str, Any]:
    return {
        "work_id": item.work_id,
        "semantic_key": item.semantic_key,
        "title": item.title,
        "state": item.state,
        "repo": item.repo,
        "context": json.dumps(item.context, separators=(",", ":"), sort_keys=True),
        "created_by": item.created_by,
        "created_at": item.created_at,
        "updated_at": item.updated_at,
        "version": item.version,
        "lease_owner": item.lease_owner,
        "lease_session": item.lease_session,
        "lease_expires_at": item.lease_expires_at,
        "reserved_by": item.reserved_by,
        "reserved_until": item.reserved_until,
    }


class WorkRows:
    """The `Work` port; the statement helpers are SqlTx's."""

    def _exec(self, name: str, **params: Any) -> int:
        raise NotImplementedError

    def _one(self, name: str, **params: Any) -> Row | None:
        raise NotImplementedError

    def _page(self, name: str, filters: dict[str, str], query: Any, **params: Any) -> list[Row]:
        raise NotImplementedError

    def _all(self, name: str, **params: Any) -> list[Row]:
        raise NotImplementedError

    def get_work(self, work_id: str) -> WorkItem | None:
        row = self._one("get_work", work_id=work_id)
        return None if row is None else work_item(row)

    def live_work_by_key(self, semantic_key: str) -> WorkItem | None:
        row = self._one("live_work_by_key", semantic_key=semantic_key)
        return None if row is None else work_item(row)

    def page_work(self, query: WorkQuery, limit: int) -> list[WorkItem]:
        at, ident = query.before or (None, None)
        rows = self._page(
            "page_work",
            WORK_FILTERS,
            query,
            state=query.state,
            repo=query.repo,
            key=query.key,
            before_at=at,
            before_id=ident,
            limit=limit,
        )
        return [work_item(r) for r in rows]

    def insert_work(self, item: WorkItem) -> bool:
        return self._exec("insert_work", **work_params(item)) == 1

    def update_work(self, item: WorkItem, expect_version: int) -> bool:
        params = work_params(item)
        for fixed in ("semantic_key", "repo", "created_by", "created_at"):
            del params[fixed]
        return self._exec("update_work", expect_version=expect_version, **params) == 1

    def insert_binding(self, binding: WorkBinding) -> bool:
        return self._exec("insert_binding", **binding_params(binding)) == 1

    def get_binding(self, binding_id: str) -> WorkBinding | None:
        row = self._one("get_binding", binding_id=binding_id)
        return None if row is None else binding_of(row)

    def binding_by_request(self, request_id: str) -> WorkBinding | None:
        row = self._one("binding_by_request", request_id=request_id)
        return None if row is None else binding_of(row)

    def bindings_of_work(self, work_id: str) -> list[WorkBinding]:
        return [binding_of(r) for r in self._all("bindings_of_work", work_id=work_id)]

    def live_bindings(self, limit: int) -> list[WorkBinding]:
        return [binding_of(r) for r in self._all("live_bindings", limit=limit)]

    def pending_graduations(self, limit: int) -> list[WorkBinding]:
        return [binding_of(r) for r in self._all("pending_graduations", limit=limit)]

    def update_binding(self, binding: WorkBinding, expect_version: int) -> bool:
        params = {k: v for k, v in binding_params(binding).items() if k in UPDATED}
        return self._exec("update_binding", expect_version=expect_version, **params) == 1


UPDATED = frozenset(
    {
        "binding_id",
        "state",
        "updated_at",
        "version",
        "last_wake_at",
        "graduation_requested_by",
        "graduation_requested_at",
        "graduation_note",
    }
)
