-- Schema version 17 (SQLite): the semantic key an occurrence works on
-- (docs/rules.md#semantic-keys-key), written when it is opened, for a loop that declares
-- one; NULL for every other occurrence, and for those written before keys existed.
-- Existing work first (docs/rules.md#existing-work-first) reads a key's unfinished
-- occurrences and its latest finished one through the index.
ALTER TABLE occurrences ADD COLUMN semantic_key TEXT;
CREATE INDEX occurrences_semantic_key ON occurrences (semantic_key, finished_at, event_id)
    WHERE semantic_key IS NOT NULL;
