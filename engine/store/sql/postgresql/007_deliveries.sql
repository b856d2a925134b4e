-- Schema version 7 (PostgreSQL): each admitted GitHub delivery beside the event it
-- became, so `engine replay` can translate it again under a changed `webhook github`
-- table (docs/replay.md). `body` is the delivery's JSON body as the text GitHub sent,
-- `rule` the `emit` line that admitted it (file:line:col), `received_at` the instant it
-- was translated at. A delivery that was ignored or rejected is not kept.
CREATE TABLE deliveries (
    event_id     TEXT COLLATE "C" PRIMARY KEY REFERENCES events (event_id),
    delivery_id  TEXT COLLATE "C" NOT NULL,
    kind         TEXT COLLATE "C" NOT NULL,
    body         TEXT COLLATE "C" NOT NULL,
    rule         TEXT COLLATE "C" NOT NULL,
    received_at  TEXT COLLATE "C" NOT NULL
);
