-- Schema version 11 (PostgreSQL): the one spelling of an `on_event` loop's tick source. The
-- ticks an older engine made were stored as `on-event`; they read `on_event` now, as
-- the engine writes them (docs/runtime.md#who-may-tick-a-loop). Only the runtime's own
-- ticks (admitted by `schedule`): a source an event from outside claimed is kept as it
-- claimed it. The journal is append-only and keeps what it recorded.
UPDATE events SET source = 'on_event' WHERE source = 'on-event' AND admitted_by = 'schedule';
