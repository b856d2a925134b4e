-- Schema version 13 (PostgreSQL): work items (docs/work.md), a finite objective the engine
-- knows. One row per item; `version` grows with every change, and each write is a
-- compare-and-set on it. At most one item per semantic key is not terminal (the
-- partial unique index): opening a key a live item holds answers that item.
CREATE TABLE work_items (
    work_id           TEXT COLLATE "C" PRIMARY KEY,
    semantic_key      TEXT COLLATE "C" NOT NULL,
    title             TEXT COLLATE "C" NOT NULL,
    state             TEXT COLLATE "C" NOT NULL,  -- 'open' | 'active' | 'blocked' | 'completed' | 'cancelled'
    repo              TEXT COLLATE "C",
    context           TEXT COLLATE "C" NOT NULL,  -- JSON: {"summary", "links"}, at most 64 KB
    created_by        TEXT COLLATE "C" NOT NULL,
    created_at        TEXT COLLATE "C" NOT NULL,
    updated_at        TEXT COLLATE "C" NOT NULL,
    version           INTEGER NOT NULL DEFAULT 1,
    lease_owner       TEXT COLLATE "C",
    lease_session     TEXT COLLATE "C",
    lease_expires_at  TEXT COLLATE "C"
);
CREATE UNIQUE INDEX work_items_live_key ON work_items (semantic_key)
    WHERE state <> 'completed' AND state <> 'cancelled';
CREATE INDEX work_items_key ON work_items (semantic_key, created_at);
CREATE INDEX work_items_page ON work_items (created_at, work_id);
CREATE INDEX work_items_state ON work_items (state, created_at, work_id);
