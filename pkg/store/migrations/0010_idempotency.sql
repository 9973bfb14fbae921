-- Idempotency-Key of POST /api/v1/deployments (SPEC §11.1): the first answer
-- to a key from an identity, replayed for 24 h.
CREATE TABLE IF NOT EXISTS manent_idempotency (
    identity    TEXT NOT NULL,
    key         TEXT NOT NULL,
    body_sha256 TEXT NOT NULL,
    status      INTEGER NOT NULL,
    response    TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (identity, key)
);
CREATE INDEX IF NOT EXISTS manent_idempotency_created ON manent_idempotency (created_at);
