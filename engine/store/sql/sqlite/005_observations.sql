-- Schema version 5 (SQLite): condition watches. One row per watch loop: its probe's last
-- observation (fingerprint, when, status, a bounded diagnostic, counters), never the
-- probe's output. A change is a compare-and-set on the fingerprint, so two processes
-- polling one database fire a change once.
CREATE TABLE observations (
    loop                  TEXT PRIMARY KEY,
    fingerprint           TEXT,
    changes               INTEGER NOT NULL DEFAULT 0,
    observed_at           TEXT,
    status                TEXT NOT NULL DEFAULT 'ok',
    diagnostic            TEXT NOT NULL DEFAULT '',
    consecutive_failures  INTEGER NOT NULL DEFAULT 0,
    polls                 INTEGER NOT NULL DEFAULT 0,
    next_poll_at          TEXT,
    changed_at            TEXT
);
