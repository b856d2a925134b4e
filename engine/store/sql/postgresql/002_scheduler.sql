-- Schema version 2 (PostgreSQL): the scheduler's durable state.

-- One row per loop the scheduler has seen. `cursor` is the newest slot accounted for
-- (fired or skipped); `enabled_since` bounds catch-up (never before enablement).
CREATE TABLE loop_state (
    loop           TEXT COLLATE "C" PRIMARY KEY,
    enabled        INTEGER NOT NULL,
    enabled_since  TEXT COLLATE "C",
    cursor         TEXT COLLATE "C",
    last_slot      TEXT COLLATE "C",
    paused         INTEGER NOT NULL DEFAULT 0,
    pause_note     TEXT COLLATE "C" NOT NULL DEFAULT '',
    paused_by      TEXT COLLATE "C",
    updated_at     TEXT COLLATE "C" NOT NULL
);

-- Due slots that did not fire, as compact ranges with the reason.
CREATE TABLE slot_skips (
    loop         TEXT COLLATE "C" NOT NULL,
    first_slot   TEXT COLLATE "C" NOT NULL,
    last_slot    TEXT COLLATE "C" NOT NULL,
    count        INTEGER NOT NULL,
    reason       TEXT COLLATE "C" NOT NULL,
    recorded_at  TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (loop, first_slot, reason)
);
CREATE INDEX slot_skips_loop ON slot_skips (loop, last_slot);
