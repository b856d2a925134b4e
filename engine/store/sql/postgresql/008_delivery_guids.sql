-- Schema version 8: the kept GitHub deliveries by their GUID, so `engine explain GUID`
-- finds the event a delivery became when the event's id is not the GUID (a `webhook
-- github` table's `id` line; docs/explain.md).
CREATE INDEX deliveries_by_guid ON deliveries (delivery_id);
