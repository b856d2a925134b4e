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
                       mutating, rule, note, rules_digest, decided_at, facts)
VALUES (:event_id, :kind, :reason, :definition, :loop, :approved_by, :human_only,
        :mutating, :rule, :note, :rules_digest, :decided_at, :facts)
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
ORDER BY created_at, proposal_id LIMIT :limit;

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
-- The oldest queued run whose loop is not paused: a paused loop's runs wait in the
-- queue for its resume (an operator's pause or the circuit breaker's alike).
SELECT run_id FROM runs WHERE state = 'queued'
  AND NOT EXISTS (SELECT 1 FROM loop_state s WHERE s.loop = runs.loop AND s.paused = 1)
ORDER BY created_at, run_id LIMIT 1;

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

-- name: cancel_run
-- An operator's cancel: compare-and-set on the state the caller saw; the lease is
-- dropped, so the worker's next heartbeat fails and it stops the execution.
UPDATE runs SET state = 'cancelled', finished_at = :finished_at, error = :error,
                lease_owner = NULL, lease_expires_at = NULL
WHERE run_id = :run_id AND state = :from_state;

-- name: expired_leases
SELECT * FROM runs WHERE state IN ('claimed', 'running') AND lease_expires_at < :now
ORDER BY lease_expires_at LIMIT :limit;

-- name: recover_run
-- Compare-and-set on the expired lease the reaper saw.
UPDATE runs SET state = :state, lease_owner = NULL, lease_expires_at = NULL,
                finished_at = :finished_at, error = :error
WHERE run_id = :run_id AND lease_owner = :owner AND lease_expires_at = :lease_expires_at;

-- name: append_journal
-- The entry's `loop` is the one it is about: the loop itself, or the loop of the row it
-- names as that row is stored now (each is written before its entries); NULL for none.
INSERT INTO journal (at, entity, entity_id, action, from_state, to_state, actor,
                     rules_digest, note, data, loop)
VALUES (:at, :entity, :entity_id, :action, :from_state, :to_state, :actor,
        :rules_digest, :note, :data,
        CASE CAST(:entity AS TEXT)
            WHEN 'loop' THEN CAST(:entity_id AS TEXT)
            WHEN 'event' THEN (SELECT loop FROM events WHERE event_id = :entity_id)
            WHEN 'occurrence' THEN COALESCE(
                (SELECT loop FROM occurrences WHERE event_id = :entity_id),
                (SELECT loop FROM events WHERE event_id = :entity_id))
            WHEN 'proposal' THEN (SELECT loop FROM proposals WHERE proposal_id = :entity_id)
            WHEN 'run' THEN (SELECT loop FROM runs WHERE run_id = :entity_id)
            WHEN 'finding' THEN (SELECT loop FROM findings WHERE finding_id = :entity_id)
        END)
RETURNING seq;

-- name: insert_journal
-- append_journal for many entries at once (executemany: no seq is returned).
INSERT INTO journal (at, entity, entity_id, action, from_state, to_state, actor,
                     rules_digest, note, data, loop)
VALUES (:at, :entity, :entity_id, :action, :from_state, :to_state, :actor,
        :rules_digest, :note, :data,
        CASE CAST(:entity AS TEXT)
            WHEN 'loop' THEN CAST(:entity_id AS TEXT)
            WHEN 'event' THEN (SELECT loop FROM events WHERE event_id = :entity_id)
            WHEN 'occurrence' THEN COALESCE(
                (SELECT loop FROM occurrences WHERE event_id = :entity_id),
                (SELECT loop FROM events WHERE event_id = :entity_id))
            WHEN 'proposal' THEN (SELECT loop FROM proposals WHERE proposal_id = :entity_id)
            WHEN 'run' THEN (SELECT loop FROM runs WHERE run_id = :entity_id)
            WHEN 'finding' THEN (SELECT loop FROM findings WHERE finding_id = :entity_id)
        END);

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

-- name: get_observation
SELECT * FROM observations WHERE loop = :loop;

-- name: list_observations
SELECT * FROM observations ORDER BY loop;

-- name: insert_observation
-- A watch loop's first observation (its baseline, or a first failed poll).
INSERT INTO observations (loop, fingerprint, changes, observed_at, status, diagnostic,
                          consecutive_failures, polls, next_poll_at, changed_at)
VALUES (:loop, :fingerprint, :changes, :observed_at, :status, :diagnostic,
        :consecutive_failures, :polls, :next_poll_at, :changed_at)
ON CONFLICT (loop) DO NOTHING;

-- name: update_observation
-- A compare-and-set on the fingerprint (and the poll count) the caller read.
UPDATE observations SET
    fingerprint = :fingerprint, changes = :changes, observed_at = :observed_at,
    status = :status, diagnostic = :diagnostic,
    consecutive_failures = :consecutive_failures, polls = :polls,
    next_poll_at = :next_poll_at, changed_at = :changed_at
WHERE loop = :loop AND polls = :expect_polls
  AND (fingerprint = :expect_fingerprint
       OR (fingerprint IS NULL AND CAST(:expect_fingerprint AS TEXT) IS NULL));

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

-- ---- the occurrence engine (schema version 4) ----------------------------------------
-- "window" is quoted everywhere: it is a reserved word in PostgreSQL.

-- name: get_occurrence_by_key
SELECT * FROM occurrences WHERE occurrence_key = :occurrence_key;

-- name: open_occurrence
-- Open an occurrence under its event id. A row the event already has without a key
-- (written by upsert_occurrence before keys existed) takes the new columns; a keyed one
-- is left alone (nothing written). The caller has checked that the key is free.
INSERT INTO occurrences (event_id, loop, state, updated_at, occurrence_key, repo, "window",
                         decision, evidence, attempt, retry_at, signals, reserved, used,
                         created_at, finished_at, failure_class, semantic_key)
VALUES (:event_id, :loop, :state, :updated_at, :occurrence_key, :repo, :window,
        :decision, :evidence, :attempt, :retry_at, :signals, :reserved, :used,
        :created_at, :finished_at, :failure_class, :semantic_key)
ON CONFLICT (event_id) DO UPDATE SET
    loop = excluded.loop, state = excluded.state, updated_at = excluded.updated_at,
    occurrence_key = excluded.occurrence_key, repo = excluded.repo,
    "window" = excluded."window", decision = excluded.decision,
    evidence = excluded.evidence, attempt = excluded.attempt, retry_at = excluded.retry_at,
    signals = excluded.signals, reserved = excluded.reserved, used = excluded.used,
    created_at = excluded.created_at, finished_at = excluded.finished_at,
    failure_class = excluded.failure_class, semantic_key = excluded.semantic_key
WHERE occurrences.occurrence_key IS NULL;

-- name: update_occurrence
-- Compare-and-set on the state the caller saw (any state when :expect_state is NULL).
-- {changes} is filled by SqlTx.update_occurrence with "column = :column, " for each
-- changed column, from a whitelist (never a caller's text).
UPDATE occurrences SET {changes}updated_at = :updated_at
WHERE event_id = :event_id
  AND (CAST(:expect_state AS TEXT) IS NULL OR state = :expect_state);

-- name: add_signal
UPDATE occurrences SET signals = signals + 1 WHERE event_id = :event_id RETURNING signals;

-- name: active_occurrences
-- A loop's occurrences for one repository (NULL matches NULL) in any of some states, in
-- one statement (the (loop, state, repo) index answers it); {states} is filled by
-- SqlTx.active_occurrences with ":state_a, :state_b, ..." (never a caller's text). SqlTx orders
-- them oldest first.
SELECT * FROM occurrences
WHERE loop = :loop AND state IN ({states})
  AND (repo = :repo OR (CAST(:repo AS TEXT) IS NULL AND repo IS NULL));

-- name: key_occurrences
-- The occurrences working on a semantic key (schema version 17) in any of some states,
-- oldest first; {states} is filled by SqlTx.key_occurrences as for active_occurrences.
SELECT * FROM occurrences
WHERE semantic_key = :semantic_key AND state IN ({states})
ORDER BY created_at, event_id LIMIT :limit;

-- name: last_attempt
-- The latest finished occurrence of a semantic key that settled a run (its `used`).
SELECT * FROM occurrences
WHERE semantic_key = :semantic_key AND finished_at IS NOT NULL AND used IS NOT NULL
ORDER BY finished_at DESC, event_id DESC LIMIT 1;

-- name: due_retries
-- Occurrences waiting for a resource whose retry is due, the soonest first.
SELECT * FROM occurrences WHERE state = 'waiting_for_resource' AND retry_at <= :now
ORDER BY retry_at, event_id LIMIT :limit;

-- name: list_occurrences
SELECT * FROM occurrences
WHERE (CAST(:loop AS TEXT) IS NULL OR loop = :loop)
  AND (CAST(:state AS TEXT) IS NULL OR state = :state)
ORDER BY updated_at DESC, event_id DESC LIMIT :limit;

-- name: occurrences_of_loop
SELECT * FROM occurrences WHERE loop = :loop AND created_at >= :since
ORDER BY created_at, event_id LIMIT :limit;

-- name: budget_rows
-- What a loop's occurrences for one repository (NULL matches NULL) created since an
-- instant reserved and used; SqlTx sums the JSON.
SELECT reserved, used, finished_at FROM occurrences
WHERE loop = :loop AND created_at >= :since
  AND (repo = :repo OR (CAST(:repo AS TEXT) IS NULL AND repo IS NULL));

-- name: set_loop_counters
UPDATE loop_state SET consecutive_failures = :consecutive_failures,
                      nothing_streak = :nothing_streak, quiet_until = :quiet_until,
                      updated_at = :updated_at
WHERE loop = :loop;

-- name: insert_finding
INSERT INTO findings (finding_id, semantic_key, loop, repo, category, evidence, confidence,
                      recommended_action, status, occurrence_count, first_seen_at,
                      last_seen_at, last_occurrence, decided_by, decided_at, promoted_event)
VALUES (:finding_id, :semantic_key, :loop, :repo, :category, :evidence, :confidence,
        :recommended_action, :status, :occurrence_count, :first_seen_at,
        :last_seen_at, :last_occurrence, :decided_by, :decided_at, :promoted_event)
ON CONFLICT (semantic_key) DO NOTHING;

-- name: observe_finding
-- A finding seen again: counted, with the latest sighting and evidence; its id, status
-- and first sighting stay.
UPDATE findings SET occurrence_count = occurrence_count + 1, last_seen_at = :last_seen_at,
                    last_occurrence = :last_occurrence, evidence = :evidence
WHERE semantic_key = :semantic_key;

-- name: get_finding
SELECT * FROM findings WHERE finding_id = :finding_id;

-- name: get_finding_by_key
SELECT * FROM findings WHERE semantic_key = :semantic_key;

-- name: list_findings
SELECT * FROM findings
WHERE (CAST(:status AS TEXT) IS NULL OR status = :status)
  AND (CAST(:loop AS TEXT) IS NULL OR loop = :loop)
ORDER BY last_seen_at DESC, finding_id DESC LIMIT :limit;

-- name: decide_finding
-- Compare-and-set on the status the caller saw; a promotion's event is kept when none
-- is given.
UPDATE findings SET status = :to_status, decided_by = :decided_by, decided_at = :decided_at,
                    promoted_event = COALESCE(CAST(:promoted_event AS TEXT), promoted_event)
WHERE finding_id = :finding_id AND status = :from_status;

-- name: last_notification_state
SELECT state FROM notifications WHERE dedup_key = :dedup_key ORDER BY seq DESC LIMIT 1;

-- name: insert_notification
INSERT INTO notifications (at, kind, loop, repo, state, links, message, dedup_key,
                           delivered_at, attempts, last_error, next_attempt_at, delivery)
VALUES (:at, :kind, :loop, :repo, :state, :links, :message, :dedup_key,
        :delivered_at, :attempts, :last_error, :next_attempt_at, :delivery)
RETURNING seq;

-- name: pending_notifications
SELECT * FROM notifications
WHERE delivery = 'pending' AND (next_attempt_at IS NULL OR next_attempt_at <= :now)
ORDER BY seq LIMIT :limit;

-- name: claim_notification
-- Compare-and-set on the next attempt the caller saw: the one serve that moves it on
-- (to the end of its claim) sends it.
UPDATE notifications SET next_attempt_at = :until
WHERE seq = :seq AND delivery = 'pending'
  AND COALESCE(next_attempt_at, '') = COALESCE(CAST(:seen AS TEXT), '');

-- name: settle_notification
-- A pending notification's state across its sinks, after a round of attempts.
UPDATE notifications SET delivery = :delivery, delivered_at = :delivered_at,
                         attempts = :attempts, last_error = :last_error,
                         next_attempt_at = :next_attempt_at
WHERE seq = :seq AND delivery = 'pending';

-- name: upsert_sink_delivery
INSERT INTO notification_deliveries (seq, sink, state, attempts, last_error,
                                     last_attempt_at, next_attempt_at, delivered_at)
VALUES (:seq, :sink, :state, :attempts, :last_error, :last_attempt_at, :next_attempt_at,
        :delivered_at)
ON CONFLICT (seq, sink) DO UPDATE SET
    state = excluded.state, attempts = excluded.attempts, last_error = excluded.last_error,
    last_attempt_at = excluded.last_attempt_at, next_attempt_at = excluded.next_attempt_at,
    delivered_at = excluded.delivered_at;

-- name: sink_deliveries
SELECT * FROM notification_deliveries
WHERE seq IN (SELECT value FROM json_each(:keys)) ORDER BY seq, sink;

-- name: list_notifications
SELECT * FROM notifications ORDER BY seq DESC LIMIT :limit;

-- name: page_notifications
SELECT * FROM notifications WHERE 1 = 1 {where}
ORDER BY seq DESC LIMIT :limit;

-- name: metrics_occurrences
SELECT loop, state, decision, COUNT(*) AS n FROM occurrences GROUP BY loop, state, decision;

-- name: metrics_decisions
SELECT kind, reason, COUNT(*) AS n FROM decisions GROUP BY kind, reason;

-- name: metrics_runs
SELECT loop, state, outcome, COUNT(*) AS n, SUM(attempts) AS attempts FROM runs
GROUP BY loop, state, outcome;

-- name: metrics_findings
SELECT status, COUNT(*) AS n, SUM(occurrence_count) AS occurrences FROM findings
GROUP BY status;

-- name: metrics_dispatched
-- Occurrences that ran work: the events with at least one run (retries share one).
SELECT COUNT(DISTINCT event_id) AS n FROM runs;

-- name: metrics_journal
SELECT action, COUNT(*) AS n FROM journal GROUP BY action;

-- name: metrics_proposals
SELECT state, COUNT(*) AS n,
       SUM(CASE WHEN decided_by LIKE 'operator:%' THEN 1 ELSE 0 END) AS by_operator
FROM proposals GROUP BY state;

-- name: applied_migrations
SELECT version FROM schema_migrations ORDER BY version;

-- name: run_timings
SELECT created_at, started_at, finished_at FROM runs
ORDER BY created_at DESC, run_id DESC LIMIT :limit;

-- ---- the batched writer (engine.service.batch) ------------------------------------------
-- Reads of many keys at once: `:keys` is a JSON array of strings (one parameter, so one
-- statement whatever the batch's size); PostgreSQL has its own versions.

-- name: known_events
SELECT event_id FROM events WHERE event_id IN (SELECT value FROM json_each(:keys));

-- name: decided_events
SELECT event_id FROM decisions WHERE event_id IN (SELECT value FROM json_each(:keys));

-- name: occurrences_by_keys
SELECT * FROM occurrences WHERE occurrence_key IN (SELECT value FROM json_each(:keys));

-- name: occurrences_by_ids
SELECT * FROM occurrences WHERE event_id IN (SELECT value FROM json_each(:keys));

-- name: events_by_ids
SELECT * FROM events WHERE event_id IN (SELECT value FROM json_each(:keys));

-- name: loop_states_of
SELECT * FROM loop_state WHERE loop IN (SELECT value FROM json_each(:keys));

-- name: loops_in_flight
SELECT DISTINCT loop FROM runs
WHERE loop IN (SELECT value FROM json_each(:keys)) AND state IN ('queued', 'claimed', 'running');

-- name: open_proposals_of
SELECT * FROM proposals WHERE loop IN (SELECT value FROM json_each(:keys)) AND state = 'open'
ORDER BY created_at, proposal_id;

-- name: occurrences_of_loops
-- Every occurrence of some loops in some states (`:states`, a JSON array too); the
-- caller keeps each (loop, repo)'s own, as active_occurrences would give them.
SELECT * FROM occurrences
WHERE loop IN (SELECT value FROM json_each(:keys)) AND state IN (SELECT value FROM json_each(:states));

-- name: chained_by
-- The run whose outcome chained an event (its `chained` journal entry names the event).
SELECT entity_id FROM journal
WHERE entity = 'run' AND action = 'chained' AND json_extract(data, '$.eventId') = :event_id
ORDER BY seq LIMIT 1;

-- ---- GitHub deliveries (schema version 7, engine replay) ---------------------------------

-- name: insert_delivery
-- Keep an admitted delivery beside its event; nothing when the event has one already.
INSERT INTO deliveries (event_id, delivery_id, kind, body, rule, received_at)
VALUES (:event_id, :delivery_id, :kind, :body, :rule, :received_at)
ON CONFLICT (event_id) DO NOTHING;

-- name: get_delivery
SELECT * FROM deliveries WHERE event_id = :event_id;

-- name: delivered_as
-- The event a delivery GUID became (the first kept, should a GUID have been resent).
SELECT event_id FROM deliveries WHERE delivery_id = :delivery_id
ORDER BY received_at, event_id LIMIT 1;

-- name: list_deliveries
-- Oldest first (received_at, then event_id).
SELECT * FROM deliveries ORDER BY received_at, event_id LIMIT :limit;

-- ---- pages: filtered, newest first, from a cursor (schema version 9) ---------------------
-- {where} is filled by SqlTx with "AND <condition>" for each filter given, from a fixed
-- list of conditions (never a caller's text), so each page reads the index of its most
-- selective filter in the page's order.

-- name: page_runs
SELECT * FROM runs WHERE 1 = 1 {where}
ORDER BY created_at DESC, run_id DESC LIMIT :limit;

-- name: page_proposals
SELECT * FROM proposals WHERE 1 = 1 {where}
ORDER BY created_at DESC, proposal_id DESC LIMIT :limit;

-- name: page_events
SELECT * FROM events WHERE 1 = 1 {where}
ORDER BY admitted_at DESC, event_id DESC LIMIT :limit;

-- name: page_journal
SELECT * FROM journal WHERE 1 = 1 {where}
ORDER BY seq DESC LIMIT :limit;

-- name: loop_occurrence_states
SELECT state, COUNT(*) AS n FROM occurrences WHERE loop = :loop GROUP BY state;

-- name: loop_proposal_states
SELECT state, COUNT(*) AS n FROM proposals WHERE loop = :loop GROUP BY state;

-- name: loop_run_states
SELECT state, COUNT(*) AS n FROM runs WHERE loop = :loop GROUP BY state;

-- name: insert_work
-- A new work item; nothing when its id exists or a live item holds its key
-- (work_items_live_key).
INSERT INTO work_items (work_id, semantic_key, title, state, repo, context, created_by,
                        created_at, updated_at, version, lease_owner, lease_session,
                        lease_expires_at, reserved_by, reserved_until)
VALUES (:work_id, :semantic_key, :title, :state, :repo, :context, :created_by,
        :created_at, :updated_at, :version, :lease_owner, :lease_session, :lease_expires_at,
        :reserved_by, :reserved_until)
ON CONFLICT DO NOTHING;

-- name: get_work
SELECT * FROM work_items WHERE work_id = :work_id;

-- name: live_work_by_key
SELECT * FROM work_items
WHERE semantic_key = :semantic_key AND state IN ('open', 'active', 'blocked');

-- name: update_work
-- A compare-and-set on the version the writer read.
UPDATE work_items SET state = :state, title = :title, context = :context,
                      updated_at = :updated_at, version = :version,
                      lease_owner = :lease_owner, lease_session = :lease_session,
                      lease_expires_at = :lease_expires_at,
                      reserved_by = :reserved_by, reserved_until = :reserved_until
WHERE work_id = :work_id AND version = :expect_version;

-- name: page_work
SELECT * FROM work_items WHERE 1 = 1 {where}
ORDER BY created_at DESC, work_id DESC LIMIT :limit;

-- name: insert_binding
-- A new work-bound loop instance; nothing when its id, its request id or its
-- (work item, shape) exists.
INSERT INTO work_bindings (binding_id, work_id, shape, request_id, state, created_by,
    created_at, updated_at, version, last_wake_at, graduation_requested_by,
    graduation_requested_at, graduation_note)
VALUES (:binding_id, :work_id, :shape, :request_id, :state, :created_by,
    :created_at, :updated_at, :version, :last_wake_at, :graduation_requested_by,
    :graduation_requested_at, :graduation_note)
ON CONFLICT DO NOTHING;

-- name: get_binding
SELECT * FROM work_bindings WHERE binding_id = :binding_id;

-- name: binding_by_request
SELECT * FROM work_bindings WHERE request_id = :request_id;

-- name: bindings_of_work
SELECT * FROM work_bindings WHERE work_id = :work_id ORDER BY created_at, binding_id;

-- name: live_bindings
SELECT * FROM work_bindings WHERE state <> 'disabled'
ORDER BY created_at, binding_id LIMIT :limit;

-- name: pending_graduations
-- Instances whose graduation waits for the next serve start, oldest request first.
SELECT * FROM work_bindings WHERE graduation_requested_at IS NOT NULL
ORDER BY graduation_requested_at, binding_id LIMIT :limit;

-- name: update_binding
UPDATE work_bindings SET state = :state, updated_at = :updated_at, version = :version,
    last_wake_at = :last_wake_at,
    graduation_requested_by = :graduation_requested_by,
    graduation_requested_at = :graduation_requested_at,
    graduation_note = :graduation_note
WHERE binding_id = :binding_id AND version = :expect_version;
