-- Schema version 4 (PostgreSQL): the occurrence engine, as SQLite's 004. An occurrence is
-- one bounded window of one loop for one repository (its key), with its triage decision,
-- retries, budget and failure class; findings are deduplicated observations a human may
-- promote; notifications are an outbox of announcements, quiet while nothing changes.
-- "window" is a reserved word in PostgreSQL: the queries quote it. `confidence` is
-- DOUBLE PRECISION, SQLite's REAL (8 bytes), so a value reads back as it was written.

ALTER TABLE occurrences
    ADD COLUMN occurrence_key TEXT COLLATE "C",
    ADD COLUMN repo           TEXT COLLATE "C",
    ADD COLUMN "window"       TEXT COLLATE "C",
    ADD COLUMN decision       TEXT COLLATE "C",
    ADD COLUMN evidence       TEXT COLLATE "C",
    ADD COLUMN attempt        INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN retry_at       TEXT COLLATE "C",
    ADD COLUMN signals        INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN reserved       TEXT COLLATE "C",
    ADD COLUMN used           TEXT COLLATE "C",
    ADD COLUMN created_at     TEXT COLLATE "C",
    ADD COLUMN finished_at    TEXT COLLATE "C",
    ADD COLUMN failure_class  TEXT COLLATE "C";
-- One occurrence per key; occurrences written before keys existed have none.
CREATE UNIQUE INDEX occurrences_key ON occurrences (occurrence_key)
    WHERE occurrence_key IS NOT NULL;
CREATE INDEX occurrences_active ON occurrences (loop, state, repo);
CREATE INDEX occurrences_retry ON occurrences (state, retry_at);
CREATE INDEX occurrences_loop_created ON occurrences (loop, created_at, event_id);
CREATE INDEX occurrences_updated ON occurrences (updated_at, event_id);

ALTER TABLE loop_state
    ADD COLUMN consecutive_failures INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN nothing_streak       INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN quiet_until          TEXT COLLATE "C";

CREATE TABLE findings (
    finding_id          TEXT COLLATE "C" PRIMARY KEY,
    semantic_key        TEXT COLLATE "C" NOT NULL UNIQUE,
    loop                TEXT COLLATE "C",
    repo                TEXT COLLATE "C",
    category            TEXT COLLATE "C" NOT NULL,
    evidence            TEXT COLLATE "C",
    confidence          DOUBLE PRECISION,
    recommended_action  TEXT COLLATE "C",
    status              TEXT COLLATE "C" NOT NULL,  -- 'candidate' | 'promoted' | 'dismissed'
    occurrence_count    INTEGER NOT NULL,
    first_seen_at       TEXT COLLATE "C" NOT NULL,
    last_seen_at        TEXT COLLATE "C" NOT NULL,
    last_occurrence     TEXT COLLATE "C",
    decided_by          TEXT COLLATE "C",
    decided_at          TEXT COLLATE "C",
    promoted_event      TEXT COLLATE "C"
);
CREATE INDEX findings_status ON findings (status, last_seen_at);

CREATE TABLE notifications (
    seq              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at               TEXT COLLATE "C" NOT NULL,
    kind             TEXT COLLATE "C" NOT NULL,
    loop             TEXT COLLATE "C",
    repo             TEXT COLLATE "C",
    state            TEXT COLLATE "C" NOT NULL,
    links            TEXT COLLATE "C" NOT NULL,
    message          TEXT COLLATE "C" NOT NULL,
    dedup_key        TEXT COLLATE "C" NOT NULL,
    delivered_at     TEXT COLLATE "C",
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT COLLATE "C",
    next_attempt_at  TEXT COLLATE "C"
);
CREATE INDEX notifications_pending ON notifications (seq) WHERE delivered_at IS NULL;
CREATE INDEX notifications_dedup ON notifications (dedup_key, seq);
