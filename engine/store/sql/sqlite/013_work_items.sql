-- Schema version 13 (SQLite): work items (docs/work.md), a finite objective the engine
-- knows. One row per item; `version` grows with every change, and each write is a
-- compare-and-set on it. At most one item per semantic key is not terminal (the
-- partial unique index): opening a key a live item holds answers that item.
CREATE TABLE work_items (
    work_id           TEXT PRIMARY KEY,
    semantic_key      TEXT NOT NULL,
    title             TEXT NOT NULL,
    state             TEXT NOT NULL,  -- 'open' | 'active' | 'blocked' | 'completed' | 'cancelled'
    repo              TEXT,
    context           TEXT NOT NULL,  -- JSON: {"summary", "links"}, at most 64 KB
    created_by        TEXT NOT NULL,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    version           INTEGER NOT NULL DEFAULT 1,
    lease_owner       TEXT,
    lease_session     TEXT,
    lease_expires_at  TEXT
);
CREATE UNIQUE INDEX work_items_live_key ON work_items (semantic_key)
    WHERE state <> 'completed' AND state <> 'cancelled';
CREATE INDEX work_items_key ON work_items (semantic_key, created_at);
CREATE INDEX work_items_page ON work_items (created_at, work_id);
CREATE INDEX work_items_state ON work_items (state, created_at, work_id);
