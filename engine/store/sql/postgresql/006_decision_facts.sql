-- Schema version 6 (PostgreSQL): the facts each decision read, as compact JSON text
-- (engine.core.codec.encode_facts), so `engine replay` can decide it again under other
-- rules (docs/replay.md). NULL for a decision made before this version.
ALTER TABLE decisions ADD COLUMN facts TEXT COLLATE "C";
