-- Schema version 1 (PostgreSQL): the same tables, columns and constraints as SQLite's
-- 001, so one set of named queries serves both. Times are UTC ISO-8601 text with
-- microseconds and 'Z' (text order is time order); flags are 0/1 integers; JSON columns
-- hold compact JSON text. Text compares byte by byte (COLLATE "C", SQLite's BINARY),
-- whatever the database's locale, so ordering and cursors agree on both backends.

CREATE TABLE events (
    event_id        TEXT COLLATE "C" PRIMARY KEY,
    type            TEXT COLLATE "C" NOT NULL,
    source          TEXT COLLATE "C" NOT NULL,
    subject         TEXT COLLATE "C" NOT NULL,
    occurred_at     TEXT COLLATE "C" NOT NULL,
    correlation_id  TEXT COLLATE "C" NOT NULL,
    payload         TEXT COLLATE "C" NOT NULL,
    loop            TEXT COLLATE "C",
    admitted_at     TEXT COLLATE "C" NOT NULL,
    admitted_by     TEXT COLLATE "C" NOT NULL,
    planned         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX events_unplanned ON events (admitted_at) WHERE planned = 0;
CREATE INDEX events_loop ON events (loop, admitted_at);
CREATE INDEX events_admitted ON events (admitted_at);

CREATE TABLE decisions (
    event_id     TEXT COLLATE "C" PRIMARY KEY REFERENCES events (event_id),
    kind         TEXT COLLATE "C" NOT NULL,
    reason       TEXT COLLATE "C",
    definition   TEXT COLLATE "C",
    loop         TEXT COLLATE "C",
    approved_by  TEXT COLLATE "C",
    human_only   INTEGER NOT NULL,
    mutating     INTEGER NOT NULL,
    rule         TEXT COLLATE "C",
    note         TEXT COLLATE "C" NOT NULL,
    rules_digest TEXT COLLATE "C" NOT NULL,
    decided_at   TEXT COLLATE "C" NOT NULL
);

CREATE TABLE occurrences (
    event_id    TEXT COLLATE "C" PRIMARY KEY REFERENCES events (event_id),
    loop        TEXT COLLATE "C",
    state       TEXT COLLATE "C" NOT NULL,
    updated_at  TEXT COLLATE "C" NOT NULL
);

CREATE TABLE proposals (
    proposal_id  TEXT COLLATE "C" PRIMARY KEY,
    event_id     TEXT COLLATE "C" NOT NULL UNIQUE REFERENCES events (event_id),
    loop         TEXT COLLATE "C",
    definition   TEXT COLLATE "C" NOT NULL,
    state        TEXT COLLATE "C" NOT NULL,
    human_only   INTEGER NOT NULL,
    mutating     INTEGER NOT NULL,
    created_at   TEXT COLLATE "C" NOT NULL,
    decided_at   TEXT COLLATE "C",
    decided_by   TEXT COLLATE "C",
    note         TEXT COLLATE "C" NOT NULL DEFAULT ''
);
CREATE INDEX proposals_state ON proposals (state, created_at);
CREATE INDEX proposals_loop ON proposals (loop, state);

CREATE TABLE runs (
    run_id            TEXT COLLATE "C" PRIMARY KEY,
    idempotency_key   TEXT COLLATE "C" NOT NULL UNIQUE,
    event_id          TEXT COLLATE "C" NOT NULL REFERENCES events (event_id),
    proposal_id       TEXT COLLATE "C",
    loop              TEXT COLLATE "C",
    definition        TEXT COLLATE "C" NOT NULL,
    state             TEXT COLLATE "C" NOT NULL,
    approved_by       TEXT COLLATE "C" NOT NULL,
    attempts          INTEGER NOT NULL DEFAULT 0,
    lease_owner       TEXT COLLATE "C",
    lease_expires_at  TEXT COLLATE "C",
    created_at        TEXT COLLATE "C" NOT NULL,
    started_at        TEXT COLLATE "C",
    finished_at       TEXT COLLATE "C",
    outcome           TEXT COLLATE "C",
    result            TEXT COLLATE "C",
    error             TEXT COLLATE "C",
    artifact          TEXT COLLATE "C"
);
CREATE INDEX runs_state ON runs (state, created_at);
CREATE INDEX runs_loop ON runs (loop, state);

CREATE TABLE journal (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            TEXT COLLATE "C" NOT NULL,
    entity        TEXT COLLATE "C" NOT NULL,
    entity_id     TEXT COLLATE "C" NOT NULL,
    action        TEXT COLLATE "C" NOT NULL,
    from_state    TEXT COLLATE "C",
    to_state      TEXT COLLATE "C",
    actor         TEXT COLLATE "C" NOT NULL,
    rules_digest  TEXT COLLATE "C",
    note          TEXT COLLATE "C" NOT NULL DEFAULT '',
    data          TEXT COLLATE "C"
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
    event         TEXT COLLATE "C" NOT NULL,
    origin_run    TEXT COLLATE "C",
    actor         TEXT COLLATE "C" NOT NULL,
    created_at    TEXT COLLATE "C" NOT NULL,
    published_at  TEXT COLLATE "C"
);
CREATE INDEX outbox_pending ON outbox (seq) WHERE published_at IS NULL;
