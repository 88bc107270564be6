-- The webhook outbox (docs/webhooks.md): events waiting for delivery to --webhook-url, claimed
-- by one node at a time (claimed_until, a lease in milliseconds since the epoch), retried at
-- next_at, kept as dead letters (dead_at) after the last attempt. Delivered events are deleted.
CREATE TABLE webhook_outbox (
    id TEXT PRIMARY KEY,
    body BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at BIGINT NOT NULL,
    claimed_until BIGINT NOT NULL DEFAULT 0,
    dead_at BIGINT,
    last_error TEXT
);

CREATE INDEX webhook_outbox_due ON webhook_outbox (next_at) WHERE dead_at IS NULL;
