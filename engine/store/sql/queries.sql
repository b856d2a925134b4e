-- Named queries shared by every backend. Parameters are written :name (the
-- PostgreSQL backend rewrites them; a parameter tested for NULL is CAST, so PostgreSQL
-- knows its type). Each query's comment states its contract.

-- name: insert_event
-- Admit an event; does nothing when the event id exists (idempotent admission).
INSERT INTO events (event_id, type, source, subject, occurred_at, correlation_id, payload,
                    loop, admitted_at, admitted_by, planned)
VALUES (:event_id, :type, :source, :subject, :occurred_at, :correlation_id, :payload,
        :loop, :admitted_at, :admitted_by, :planned)
ON CONFLICT (event_id) DO NOTHING;

-- name: get_event
SELECT * FROM events WHERE event_id = :event_id;

-- name: list_events
SELECT * FROM events WHERE (CAST(:type AS TEXT) IS NULL OR type = :type)
ORDER BY admitted_at DESC, event_id DESC LIMIT :limit;

-- name: unplanned_events
-- Oldest first, so planning follows admission order.
SELECT * FROM events WHERE planned = 0 ORDER BY admitted_at, event_id LIMIT :limit;

-- name: mark_planned
UPDATE events SET planned = 1 WHERE event_id = :event_id;

-- name: insert_decision
INSERT INTO decisions (event_id, kind, reason, definition, loop, approved_by, human_only,
                       mutating, rule, note, rules_digest, decided_at)
VALUES (:event_id, :kind, :reason, :definition, :loop, :approved_by, :human_only,
        :mutating, :rule, :note, :rules_digest, :decided_at)
ON CONFLICT (event_id) DO NOTHING;

-- name: get_decision
SELECT * FROM decisions WHERE event_id = :event_id;

-- name: upsert_occurrence
INSERT INTO occurrences (event_id, loop, state, updated_at)
VALUES (:event_id, :loop, :state, :updated_at)
ON CONFLICT (event_id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at;

-- name: get_occurrence
SELECT * FROM occurrences WHERE event_id = :event_id;

-- name: loop_in_flight
-- True when a run of the loop is queued, claimed or running.
SELECT 1 FROM runs WHERE loop = :loop AND state IN ('queued', 'claimed', 'running') LIMIT 1;

-- name: insert_proposal
INSERT INTO proposals (proposal_id, event_id, loop, definition, state, human_only, mutating,
                       created_at, decided_at, decided_by, note)
VALUES (:proposal_id, :event_id, :loop, :definition, :state, :human_only, :mutating,
        :created_at, NULL, NULL, :note)
ON CONFLICT (event_id) DO NOTHING;

-- name: get_proposal
SELECT * FROM proposals WHERE proposal_id = :proposal_id;

-- name: list_proposals
SELECT * FROM proposals WHERE (CAST(:state AS TEXT) IS NULL OR state = :state)
ORDER BY created_at DESC, proposal_id DESC LIMIT :limit;

-- name: decide_proposal
-- Compare-and-set: moves a proposal only from the state the caller saw.
UPDATE proposals SET state = :to_state, decided_at = :decided_at, decided_by = :decided_by,
                     note = :note
WHERE proposal_id = :proposal_id AND state = :from_state;

-- name: stale_proposals
SELECT * FROM proposals WHERE state = 'open' AND created_at < :before
ORDER BY created_at LIMIT :limit;

-- name: insert_run
-- One run per idempotency key: an approved tick and a replayed one converge.
INSERT INTO runs (run_id, idempotency_key, event_id, proposal_id, loop, definition, state,
                  approved_by, attempts, created_at)
VALUES (:run_id, :idempotency_key, :event_id, :proposal_id, :loop, :definition, 'queued',
        :approved_by, 0, :created_at)
ON CONFLICT (idempotency_key) DO NOTHING;

-- name: get_run
SELECT * FROM runs WHERE run_id = :run_id;

-- name: get_run_by_key
SELECT * FROM runs WHERE idempotency_key = :idempotency_key;

-- name: list_runs
SELECT * FROM runs WHERE (CAST(:state AS TEXT) IS NULL OR state = :state)
ORDER BY created_at DESC, run_id DESC LIMIT :limit;

-- name: next_queued_run
SELECT run_id FROM runs WHERE state = 'queued' ORDER BY created_at, run_id LIMIT 1;

-- name: claim_run
-- Compare-and-set on 'queued': two workers can never both claim one run.
UPDATE runs SET state = 'claimed', lease_owner = :owner, lease_expires_at = :lease_until,
                attempts = attempts + 1
WHERE run_id = :run_id AND state = 'queued';

-- name: heartbeat
UPDATE runs SET lease_expires_at = :lease_until
WHERE run_id = :run_id AND lease_owner = :owner AND state IN ('claimed', 'running');

-- name: start_run
UPDATE runs SET state = 'running', started_at = :started_at
WHERE run_id = :run_id AND lease_owner = :owner AND state = 'claimed';

-- name: finish_run
-- Only the lease holder finishes a run; a run recovered from it stays recovered.
UPDATE runs SET state = :state, finished_at = :finished_at, outcome = :outcome,
                result = :result, error = :error, artifact = :artifact,
                lease_owner = NULL, lease_expires_at = NULL
WHERE run_id = :run_id AND lease_owner = :owner AND state IN ('claimed', 'running');

-- name: expired_leases
SELECT * FROM runs WHERE state IN ('claimed', 'running') AND lease_expires_at < :now
ORDER BY lease_expires_at LIMIT :limit;

-- name: recover_run
-- Compare-and-set on the expired lease the reaper saw.
UPDATE runs SET state = :state, lease_owner = NULL, lease_expires_at = NULL,
                finished_at = :finished_at, error = :error
WHERE run_id = :run_id AND lease_owner = :owner AND lease_expires_at = :lease_expires_at;

-- name: append_journal
INSERT INTO journal (at, entity, entity_id, action, from_state, to_state, actor,
                     rules_digest, note, data)
VALUES (:at, :entity, :entity_id, :action, :from_state, :to_state, :actor,
        :rules_digest, :note, :data)
RETURNING seq;

-- name: list_journal
SELECT * FROM journal
WHERE (CAST(:entity AS TEXT) IS NULL OR entity = :entity) AND (CAST(:entity_id AS TEXT) IS NULL OR entity_id = :entity_id)
  AND seq > :after
ORDER BY seq LIMIT :limit;

-- name: enqueue_outbox
INSERT INTO outbox (event, origin_run, actor, created_at)
VALUES (:event, :origin_run, :actor, :created_at);

-- name: pending_outbox
SELECT * FROM outbox WHERE published_at IS NULL ORDER BY seq LIMIT :limit;

-- name: mark_published
UPDATE outbox SET published_at = :published_at WHERE seq = :seq AND published_at IS NULL;

-- name: count_by_state
SELECT state, COUNT(*) AS n FROM runs GROUP BY state;

-- name: count_proposals_by_state
SELECT state, COUNT(*) AS n FROM proposals GROUP BY state;

-- name: get_loop_state
SELECT * FROM loop_state WHERE loop = :loop;

-- name: list_loop_states
SELECT * FROM loop_state ORDER BY loop;

-- name: upsert_loop_enabled
-- Record enablement; `enabled_since` is set when a loop turns on and kept while on.
INSERT INTO loop_state (loop, enabled, enabled_since, updated_at)
VALUES (:loop, :enabled, :enabled_since, :updated_at)
ON CONFLICT (loop) DO UPDATE SET
    enabled = excluded.enabled,
    enabled_since = CASE WHEN excluded.enabled = 1 AND loop_state.enabled = 0
                         THEN excluded.enabled_since ELSE loop_state.enabled_since END,
    updated_at = excluded.updated_at;

-- name: advance_cursor
-- The cursor only moves forward, whichever process writes last.
UPDATE loop_state SET
    cursor = CASE WHEN cursor IS NULL OR cursor < :cursor THEN :cursor ELSE cursor END,
    last_slot = CASE WHEN CAST(:last_slot AS TEXT) IS NOT NULL AND (last_slot IS NULL OR last_slot < :last_slot)
                     THEN :last_slot ELSE last_slot END,
    updated_at = :updated_at
WHERE loop = :loop;

-- name: set_paused
UPDATE loop_state SET paused = :paused, pause_note = :note, paused_by = :by, updated_at = :updated_at
WHERE loop = :loop;

-- name: insert_skip
INSERT INTO slot_skips (loop, first_slot, last_slot, count, reason, recorded_at)
VALUES (:loop, :first_slot, :last_slot, :count, :reason, :recorded_at)
ON CONFLICT (loop, first_slot, reason) DO NOTHING;

-- name: list_skips
SELECT * FROM slot_skips WHERE loop = :loop AND last_slot >= :since ORDER BY first_slot;

-- name: loop_events
-- A loop's admitted events (ticks) that occurred since an instant, oldest first.
SELECT * FROM events WHERE loop = :loop AND occurred_at >= :since
ORDER BY occurred_at, event_id LIMIT :limit;

-- name: last_loop_event
SELECT * FROM events WHERE loop = :loop ORDER BY admitted_at DESC, event_id DESC LIMIT 1;

-- name: last_loop_run
SELECT * FROM runs WHERE loop = :loop ORDER BY created_at DESC, run_id DESC LIMIT 1;

-- name: open_loop_proposals
SELECT * FROM proposals WHERE loop = :loop AND state = 'open' ORDER BY created_at, proposal_id;

-- name: count_open_by_loop
SELECT loop, COUNT(*) AS n FROM proposals WHERE state = 'open' AND loop IS NOT NULL GROUP BY loop;
