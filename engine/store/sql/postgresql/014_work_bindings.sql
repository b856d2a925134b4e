-- Schema version 14 (PostgreSQL): work-bound loop instances (docs/work.md#work-bound-loops):
-- a reviewed loop shape of loops/*.rules bound to one work item. One instance per
-- (work item, shape); binding is idempotent by its request id; `version` grows with
-- every change, each write a compare-and-set on it.
CREATE TABLE work_bindings (
    binding_id  TEXT COLLATE "C" PRIMARY KEY,
    work_id     TEXT COLLATE "C" NOT NULL REFERENCES work_items (work_id),
    shape       TEXT COLLATE "C" NOT NULL,
    request_id  TEXT COLLATE "C" NOT NULL UNIQUE,
    state       TEXT COLLATE "C" NOT NULL,  -- 'shadow' | 'live' | 'paused' | 'disabled'
    created_by  TEXT COLLATE "C" NOT NULL,
    created_at  TEXT COLLATE "C" NOT NULL,
    updated_at  TEXT COLLATE "C" NOT NULL,
    version     INTEGER NOT NULL DEFAULT 1,
    UNIQUE (work_id, shape)
);
CREATE INDEX work_bindings_state ON work_bindings (state, created_at, binding_id);
