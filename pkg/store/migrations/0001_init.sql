-- Deployments as users see them; the workflow input is kept so a submission
-- can be re-enqueued if it was never handed to DBOS.
CREATE TABLE IF NOT EXISTS manent_deployments (
    id               TEXT PRIMARY KEY,
    application      TEXT NOT NULL,
    environment      TEXT NOT NULL,
    version          TEXT NOT NULL,
    state            TEXT NOT NULL,
    requester        TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    started_at       TEXT,
    finished_at      TEXT,
    error            TEXT NOT NULL DEFAULT '',
    rollback         TEXT NOT NULL DEFAULT '',
    reason           TEXT NOT NULL DEFAULT '',
    decision         TEXT,
    input            TEXT NOT NULL,
    artifact_sha256  TEXT NOT NULL DEFAULT '',
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    next_seq         BIGINT NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS manent_deployments_created ON manent_deployments (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS manent_deployments_appenv ON manent_deployments (application, environment, created_at DESC);
CREATE INDEX IF NOT EXISTS manent_deployments_state ON manent_deployments (state);

-- Steps as shown to users (`manent steps`).
CREATE TABLE IF NOT EXISTS manent_steps (
    deployment_id TEXT NOT NULL REFERENCES manent_deployments(id) ON DELETE CASCADE,
    position      INTEGER NOT NULL,
    name          TEXT NOT NULL,
    state         TEXT NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    started_at    TEXT,
    finished_at   TEXT,
    output        TEXT,
    error         TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (deployment_id, name)
);

-- Everything that happened to a deploy, in order: state and step changes,
-- log lines. seq is monotonic per deploy (SSE ids, log cursors).
CREATE TABLE IF NOT EXISTS manent_events (
    deployment_id TEXT NOT NULL REFERENCES manent_deployments(id) ON DELETE CASCADE,
    seq           BIGINT NOT NULL,
    type          TEXT NOT NULL,
    time          TEXT NOT NULL,
    data          TEXT NOT NULL,
    PRIMARY KEY (deployment_id, seq)
);

-- The current release and last failure per application/environment.
CREATE TABLE IF NOT EXISTS manent_inventory (
    application     TEXT NOT NULL,
    environment     TEXT NOT NULL,
    current         TEXT,
    last_failure    TEXT,
    PRIMARY KEY (application, environment)
);
