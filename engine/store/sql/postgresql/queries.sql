-- PostgreSQL's own versions of shared named queries (same names, same contracts).

-- name: existing_events
-- Which of the event ids in :ids (a JSON array of strings) are admitted already.
SELECT event_id FROM events
WHERE event_id IN (SELECT jsonb_array_elements_text(CAST(:ids AS jsonb)));

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
