-- Schema version 16 (SQLite): a work-bound loop instance's graduation out of shadow
-- deferred to the next serve start (docs/work.md#graduating-an-instance): who asked,
-- when, and the note; all null when none is pending. The next serve start applies it
-- once and clears it, in the transaction that journals it.
ALTER TABLE work_bindings ADD COLUMN graduation_requested_by TEXT;
ALTER TABLE work_bindings ADD COLUMN graduation_requested_at TEXT;
ALTER TABLE work_bindings ADD COLUMN graduation_note TEXT;
CREATE INDEX work_bindings_pending ON work_bindings (graduation_requested_at, binding_id)
    WHERE graduation_requested_at IS NOT NULL;
