-- Schema version 7 (SQLite): each admitted GitHub delivery beside the event it became,
-- so `engine replay` can translate it again under a changed `webhook github` table
-- (docs/replay.md). `body` is the delivery's JSON body as the text GitHub sent, `rule`
-- the `emit` line that admitted it (file:line:col), `received_at` the instant it was
-- translated at. A delivery that was ignored or rejected is not kept.
CREATE TABLE deliveries (
    event_id     TEXT PRIMARY KEY REFERENCES events (event_id),
    delivery_id  TEXT NOT NULL,
    kind         TEXT NOT NULL,
    body         TEXT NOT NULL,
    rule         TEXT NOT NULL,
    received_at  TEXT NOT NULL
);
