-- Schema version 9 (PostgreSQL): filtered, cursor-paged reads of the runs and the
-- journal, as SQLite's 009: the journal's `loop` (the loop its entry is about, taken
-- from the row the entry names when it is written), filled here once for the entries
-- already written with the append-only trigger lifted for this one statement, and the
-- indexes each page reads in its order.
ALTER TABLE journal ADD COLUMN loop TEXT COLLATE "C";

ALTER TABLE journal DISABLE TRIGGER journal_no_update;
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
ALTER TABLE journal ENABLE TRIGGER journal_no_update;

CREATE INDEX journal_loop ON journal (loop, seq);
CREATE INDEX journal_actor ON journal (actor, seq);
CREATE INDEX journal_kind ON journal (entity, seq);

DROP INDEX runs_state;
CREATE INDEX runs_state ON runs (state, created_at, run_id);
CREATE INDEX runs_created ON runs (created_at, run_id);
CREATE INDEX runs_loop_created ON runs (loop, created_at, run_id);
CREATE INDEX runs_actor ON runs (approved_by, created_at, run_id);
