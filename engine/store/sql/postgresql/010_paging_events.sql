-- Schema version 10 (PostgreSQL): cursor-paged reads of the proposals and the events, newest
-- first, like the runs' of version 9 (docs/api.md#paging). Each page reads an index in
-- its order, so a page costs its size however long the table has grown.
CREATE INDEX proposals_created ON proposals (created_at, proposal_id);
DROP INDEX proposals_state;
CREATE INDEX proposals_state ON proposals (state, created_at, proposal_id);
CREATE INDEX proposals_loop_created ON proposals (loop, created_at, proposal_id);

DROP INDEX events_admitted;
CREATE INDEX events_admitted ON events (admitted_at, event_id);
DROP INDEX events_loop;
CREATE INDEX events_loop ON events (loop, admitted_at, event_id);
CREATE INDEX events_type ON events (type, admitted_at, event_id);
