-- Schema version 17 (PostgreSQL): the semantic key an occurrence works on, as SQLite's
-- 017 (docs/rules.md#semantic-keys-key).
ALTER TABLE occurrences ADD COLUMN semantic_key TEXT COLLATE "C";
CREATE INDEX occurrences_semantic_key ON occurrences (semantic_key, finished_at, event_id)
    WHERE semantic_key IS NOT NULL;
