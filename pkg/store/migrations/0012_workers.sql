-- Several workers (SPEC §11.3): each manent-server records its liveness here.
-- Times in *_ms are epoch milliseconds from the database's clock, so workers
-- on several machines compare them without trusting each other's clocks.
-- state: alive | leaving (SIGTERM: hand its deploys over now) | dead
-- (silent for workers.dead_after, or left; its deploys were taken over).
CREATE TABLE IF NOT EXISTS manent_workers (
    id            TEXT PRIMARY KEY,
    state         TEXT NOT NULL,
    last_seen_ms  BIGINT NOT NULL,
    started_at_ms BIGINT NOT NULL,
    version       TEXT NOT NULL,
    app_version   TEXT NOT NULL,
    taken_over_ms BIGINT,
    taken_over_by TEXT
);
