-- Web UI sessions signed out before they expired (docs/web.md): the
-- session cookie is sealed and stateless, so sign-out records its id here
-- and every worker refuses a cookie whose id is listed. id is the SHA-256
-- (hex) of the session's id. expires_at (epoch seconds) is the session's
-- own end: the row is useless after it and is pruned. revoked_at is epoch
-- seconds too.
CREATE TABLE IF NOT EXISTS manent_revoked_sessions (
    id         TEXT PRIMARY KEY,
    expires_at BIGINT NOT NULL,
    revoked_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS manent_revoked_sessions_expires ON manent_revoked_sessions (expires_at);
