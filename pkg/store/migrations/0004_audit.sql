-- The audit log: append-only and hash-chained. Each row's hash covers its
-- fields and the previous row's hash; manent_audit_head holds the last hash
-- so a deleted tail is detected too.
CREATE TABLE IF NOT EXISTS manent_audit (
    seq        BIGINT PRIMARY KEY,
    time       TEXT NOT NULL,
    identity   TEXT NOT NULL,
    action     TEXT NOT NULL,
    target     TEXT NOT NULL,
    request_id TEXT NOT NULL,
    outcome    TEXT NOT NULL,
    detail     TEXT NOT NULL,
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS manent_audit_head (
    id   INTEGER PRIMARY KEY,
    seq  BIGINT NOT NULL,
    hash TEXT NOT NULL
);
INSERT INTO manent_audit_head (id, seq, hash) VALUES (1, 0, '') ON CONFLICT (id) DO NOTHING;
