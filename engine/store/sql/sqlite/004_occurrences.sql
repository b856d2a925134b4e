-- Schema version 4 (SQLite): the occurrence engine. An occurrence is one bounded window
-- of one loop for one repository (its key), with its triage decision, retries, budget
-- and failure class; findings are deduplicated observations a human may promote;
-- notifications are an outbox of announcements, quiet while nothing changes.

ALTER TABLE occurrences ADD COLUMN occurrence_key TEXT;
ALTER TABLE occurrences ADD COLUMN repo TEXT;
ALTER TABLE occurrences ADD COLUMN "window" TEXT;
ALTER TABLE occurrences ADD COLUMN decision TEXT;
ALTER TABLE occurrences ADD COLUMN evidence TEXT;
ALTER TABLE occurrences ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE occurrences ADD COLUMN retry_at TEXT;
ALTER TABLE occurrences ADD COLUMN signals INTEGER NOT NULL DEFAULT 0;
ALTER TABLE occurrences ADD COLUMN reserved TEXT;
ALTER TABLE occurrences ADD COLUMN used TEXT;
ALTER TABLE occurrences ADD COLUMN created_at TEXT;
ALTER TABLE occurrences ADD COLUMN finished_at TEXT;
ALTER TABLE occurrences ADD COLUMN failure_class TEXT;
-- One occurrence per key; occurrences written before keys existed have none.
CREATE UNIQUE INDEX occurrences_key ON occurrences (occurrence_key)
    WHERE occurrence_key IS NOT NULL;
CREATE INDEX occurrences_active ON occurrences (loop, state, repo);
CREATE INDEX occurrences_retry ON occurrences (state, retry_at);
CREATE INDEX occurrences_loop_created ON occurrences (loop, created_at, event_id);
CREATE INDEX occurrences_updated ON occurrences (updated_at, event_id);

ALTER TABLE loop_state ADD COLUMN consecutive_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE loop_state ADD COLUMN nothing_streak INTEGER NOT NULL DEFAULT 0;
ALTER TABLE loop_state ADD COLUMN quiet_until TEXT;

CREATE TABLE findings (
    finding_id          TEXT PRIMARY KEY,
    semantic_key        TEXT NOT NULL UNIQUE,
    loop                TEXT,
    repo                TEXT,
    category            TEXT NOT NULL,
    evidence            TEXT,
    confidence          REAL,
    recommended_action  TEXT,
    status              TEXT NOT NULL,  -- 'candidate' | 'promoted' | 'dismissed'
    occurrence_count    INTEGER NOT NULL,
    first_seen_at       TEXT NOT NULL,
    last_seen_at        TEXT NOT NULL,
    last_occurrence     TEXT,
    decided_by          TEXT,
    decided_at          TEXT,
    promoted_event      TEXT
);
CREATE INDEX findings_status ON findings (status, last_seen_at);

CREATE TABLE notifications (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    at               TEXT NOT NULL,
    kind             TEXT NOT NULL,
    loop             TEXT,
    repo             TEXT,
    state            TEXT NOT NULL,
    links            TEXT NOT NULL,
    message          TEXT NOT NULL,
    dedup_key        TEXT NOT NULL,
    delivered_at     TEXT,
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT,
    next_attempt_at  TEXT
);
CREATE INDEX notifications_pending ON notifications (seq) WHERE delivered_at IS NULL;
CREATE INDEX notifications_dedup ON notifications (dedup_key, seq);
