-- Schema version 12 (SQLite): notifications delivered to several sinks
-- (docs/notifications.md). Each notification keeps its state across the sinks
-- (`delivery`: pending, delivered, failed) and each sink's attempts are a row of
-- notification_deliveries. A pending notification's next_attempt_at is also its claim:
-- the serve that takes it moves it on, so two serves never send it at once.
ALTER TABLE notifications ADD COLUMN delivery TEXT NOT NULL DEFAULT 'pending';
UPDATE notifications SET delivery = 'delivered' WHERE delivered_at IS NOT NULL;
DROP INDEX notifications_pending;
CREATE INDEX notifications_pending ON notifications (seq) WHERE delivery = 'pending';
CREATE INDEX notifications_delivery ON notifications (delivery, seq);
CREATE INDEX notifications_loop ON notifications (loop, seq);

CREATE TABLE notification_deliveries (
    seq              INTEGER NOT NULL REFERENCES notifications (seq),
    sink             TEXT NOT NULL,
    state            TEXT NOT NULL,  -- 'pending' | 'delivered' | 'failed'
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT,
    last_attempt_at  TEXT,
    next_attempt_at  TEXT,
    delivered_at     TEXT,
    PRIMARY KEY (seq, sink)
);
