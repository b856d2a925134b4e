-- Schema version 9 (SQLite): filtered, cursor-paged reads of the runs and the journal,
-- newest first (docs/architecture.md, "Pages"). Each page reads an index in its order, so a
-- page costs its size however long the table has grown.
--
-- The journal gains `loop`: the loop its entry is about (the loop itself, or the loop of
-- the event, occurrence, proposal, run or finding it names), taken from that row when
-- the entry is written (append_journal), so a loop's entries are one index range. Rows
-- already written get theirs here, once: `loop` is derived from the entry's entity and
-- adds nothing to what the entry says happened, so the append-only trigger is lifted
-- for this one statement and put back.
ALTER TABLE journal ADD COLUMN loop TEXT;

DROP TRIGGER journal_no_update;
UPDATE journal SET loop = CASE entity
    WHEN 'loop' THEN entity_id
    WHEN 'event' THEN (SELECT e.loop FROM events e WHERE e.event_id = journal.entity_id)
    WHEN 'occurrence' THEN COALESCE(
        (SELECT o.loop FROM occurrences o WHERE o.event_id = journal.entity_id),
        (SELECT e.loop FROM events e WHERE e.event_id = journal.entity_id))
    WHEN 'proposal' THEN (SELECT p.loop FROM proposals p WHERE p.proposal_id = journal.entity_id)
    WHEN 'run' THEN (SELECT r.loop FROM runs r WHERE r.run_id = journal.entity_id)
    WHEN 'finding' THEN (SELECT f.loop FROM findings f WHERE f.finding_id = journal.entity_id)
END;
CREATE TRIGGER journal_no_update BEFORE UPDATE ON journal
BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;

CREATE INDEX journal_loop ON journal (loop, seq);
CREATE INDEX journal_actor ON journal (actor, seq);
CREATE INDEX journal_kind ON journal (entity, seq);

DROP INDEX runs_state;
CREATE INDEX runs_state ON runs (state, created_at, run_id);
CREATE INDEX runs_created ON runs (created_at, run_id);
CREATE INDEX runs_loop_created ON runs (loop, created_at, run_id);
CREATE INDEX runs_actor ON runs (approved_by, created_at, run_id);
