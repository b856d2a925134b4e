-- Schema version 3 (PostgreSQL): indexes that match the hot queries' ORDER BY, so neither
-- planning nor the supersede check sorts or scans a growing pile.

DROP INDEX events_unplanned;
CREATE INDEX events_unplanned ON events (admitted_at, event_id) WHERE planned = 0;

DROP INDEX proposals_loop;
CREATE INDEX proposals_loop ON proposals (loop, state, created_at, proposal_id);
