-- PostgreSQL's own versions of shared named queries (same names, same contracts).

-- name: claim_next_run
-- Claim the oldest queued run in one statement. SKIP LOCKED passes over a row another
-- worker is claiming at this moment, so concurrent workers never wait on each other
-- and never both take one run.
UPDATE runs SET state = 'claimed', lease_owner = :owner, lease_expires_at = :lease_until,
                attempts = attempts + 1
WHERE run_id = (
    SELECT run_id FROM runs WHERE state = 'queued'
    ORDER BY created_at, run_id LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING *;
