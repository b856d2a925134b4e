-- PostgreSQL's own versions of shared named queries (same names, same contracts).

-- name: claim_next_run
-- Claim the oldest queued run whose loop is not paused, in one statement. SKIP LOCKED
-- passes over a row another worker is claiming at this moment, so concurrent workers
-- never wait on each other and never both take one run. A paused loop's runs wait in
-- the queue for its resume.
UPDATE runs SET state = 'claimed', lease_owner = :owner, lease_expires_at = :lease_until,
                attempts = attempts + 1
WHERE run_id = (
    SELECT run_id FROM runs WHERE state = 'queued'
      AND NOT EXISTS (SELECT 1 FROM loop_state s WHERE s.loop = runs.loop AND s.paused = 1)
    ORDER BY created_at, run_id LIMIT 1
    FOR UPDATE OF runs SKIP LOCKED
)
RETURNING *;

-- ---- the batched writer: many keys as one JSON array parameter --------------------------

-- name: known_events
SELECT event_id FROM events WHERE event_id IN (SELECT jsonb_array_elements_text(CAST(:keys AS jsonb)));

-- name: decided_events
SELECT event_id FROM decisions WHERE event_id IN (SELECT jsonb_array_elements_text(CAST(:keys AS jsonb)));

-- name: occurrences_by_keys
SELECT * FROM occurrences WHERE occurrence_key IN (SELECT jsonb_array_elements_text(CAST(:keys AS jsonb)));

-- name: occurrences_by_ids
SELECT * FROM occurrences WHERE event_id IN (SELECT jsonb_array_elements_text(CAST(:keys AS jsonb)));

-- name: events_by_ids
SELECT * FROM events WHERE event_id IN (SELECT jsonb_array_elements_text(CAST(:keys AS jsonb)));

-- name: loop_states_of
SELECT * FROM loop_state WHERE loop IN (SELECT jsonb_array_elements_text(CAST(:keys AS jsonb)));

-- name: loops_in_flight
SELECT DISTINCT loop FROM runs
WHERE loop IN (SELECT jsonb_array_elements_text(CAST(:keys AS jsonb)))
  AND state IN ('queued', 'claimed', 'running');

-- name: open_proposals_of
SELECT * FROM proposals
WHERE loop IN (SELECT jsonb_array_elements_text(CAST(:keys AS jsonb))) AND state = 'open'
ORDER BY created_at, proposal_id;

-- name: occurrences_of_loops
SELECT * FROM occurrences
WHERE loop IN (SELECT jsonb_array_elements_text(CAST(:keys AS jsonb)))
  AND state IN (SELECT jsonb_array_elements_text(CAST(:states AS jsonb)));

-- name: chained_by
SELECT entity_id FROM journal
WHERE entity = 'run' AND action = 'chained' AND CAST(data AS jsonb) ->> 'eventId' = :event_id
ORDER BY seq LIMIT 1;

-- name: sink_deliveries
SELECT * FROM notification_deliveries
WHERE seq IN (SELECT CAST(jsonb_array_elements_text(CAST(:keys AS jsonb)) AS BIGINT))
ORDER BY seq, sink;
