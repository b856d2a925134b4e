-- Schema version 1 (PostgreSQL): the same tables, columns and constraints as SQLite's
-- 001, so one set of named queries serves both. Times are UTC ISO-8601 text with
-- microseconds and 'Z' (text order is time order); flags are 0/1 integers; JSON columns
-- hold compact JSON text.

CREATE TABLE events (
    event_id        TEXT PRIMARY KEY,
    type            TEXT NOT NULL,
    source          TEXT NOT NULL,
    subject         TEXT NOT NULL,
    occurred_at     TEXT NOT NULL,
    correlation_id  TEXT NOT NULL,
    payload         TEXT NOT NULL,
    loop            TEXT,
    admitted_at     TEXT NOT NULL,
    admitted_by     TEXT NOT NULL,
    planned         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX events_unplanned ON events (admitted_at) WHERE planned = 0;
CREATE INDEX events_loop ON events (loop, admitted_at);
CREATE INDEX events_admitted ON events (admitted_at);

CREATE TABLE decisions (
    event_id     TEXT PRIMARY KEY REFERENCES events (event_id),
    kind         TEXT NOT NULL,
    reason       TEXT,
    definition   TEXT,
    loop         TEXT,
    approved_by  TEXT,
    human_only   INTEGER NOT NULL,
    mutating     INTEGER NOT NULL,
    rule         TEXT,
    note         TEXT NOT NULL,
    rules_digest TEXT NOT NULL,
    decided_at   TEXT NOT NULL
);

CREATE TABLE occurrences (
    event_id    TEXT PRIMARY KEY REFERENCES events (event_id),
    loop        TEXT,
    state       TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE TABLE proposals (
    proposal_id  TEXT PRIMARY KEY,
    event_id     TEXT NOT NULL UNIQUE REFERENCES events (event_id),
    loop         TEXT,
    definition   TEXT NOT NULL,
    state        TEXT NOT NULL,
    human_only   INTEGER NOT NULL,
    mutating     INTEGER NOT NULL,
    created_at   TEXT NOT NULL,
    decided_at   TEXT,
    decided_by   TEXT,
    note         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX proposals_state ON proposals (state, created_at);
CREATE INDEX proposals_loop ON proposals (loop, state);

CREATE TABLE runs (
    run_id            TEXT PRIMARY KEY,
    idempotency_key   TEXT NOT NULL UNIQUE,
    event_id          TEXT NOT NULL REFERENCES events (event_id),
    proposal_id       TEXT,
    loop              TEXT,
    definition        TEXT NOT NULL,
    state             TEXT NOT NULL,
    approved_by       TEXT NOT NULL,
    attempts          INTEGER NOT NULL DEFAULT 0,
    lease_owner       TEXT,
    lease_expires_at  TEXT,
    created_at        TEXT NOT NULL,
    started_at        TEXT,
    finished_at       TEXT,
    outcome           TEXT,
    result            TEXT,
    error             TEXT,
    artifact          TEXT
);
CREATE INDEX runs_state ON runs (state, created_at);
CREATE INDEX runs_loop ON runs (loop, state);

CREATE TABLE journal (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            TEXT NOT NULL,
    entity        TEXT NOT NULL,
    entity_id     TEXT NOT NULL,
    action        TEXT NOT NULL,
    from_state    TEXT,
    to_state      TEXT,
    actor         TEXT NOT NULL,
    rules_digest  TEXT,
    note          TEXT NOT NULL DEFAULT '',
    data          TEXT
);
CREATE INDEX journal_entity ON journal (entity, entity_id, seq);

-- The journal is append-only.
CREATE FUNCTION journal_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the journal is append-only';
END;
$$;
CREATE TRIGGER journal_no_update BEFORE UPDATE ON journal
    FOR EACH ROW EXECUTE FUNCTION journal_append_only();
CREATE TRIGGER journal_no_delete BEFORE DELETE ON journal
    FOR EACH ROW EXECUTE FUNCTION journal_append_only();
CREATE TRIGGER journal_no_truncate BEFORE TRUNCATE ON journal
    FOR EACH STATEMENT EXECUTE FUNCTION journal_append_only();

CREATE TABLE outbox (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event         TEXT NOT NULL,
    origin_run    TEXT,
    actor         TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    published_at  TEXT
);
CREATE INDEX outbox_pending ON outbox (seq) WHERE published_at IS NULL;
