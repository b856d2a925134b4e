-- Schema version 15 (SQLite): waking a work item's controller (docs/work.md#waking-the-controller).
-- A wake takes a launch reservation on the item (the run that launched the controller,
-- until when) in the commit that starts it; the controller's own claim consumes it. An
-- instance keeps when it last woke its controller, for its cooldown.
ALTER TABLE work_items ADD COLUMN reserved_by TEXT;
ALTER TABLE work_items ADD COLUMN reserved_until TEXT;
ALTER TABLE work_bindings ADD COLUMN last_wake_at TEXT;
