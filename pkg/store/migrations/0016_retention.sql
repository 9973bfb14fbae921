-- Retention (retention.workflows): once a final deploy's DBOS workflows are
-- deleted, its deliveries are kept here and workflows_deleted_at says so.
-- retention.logs marks the deploys whose log lines were removed.
ALTER TABLE manent_deployments ADD COLUMN workflows_deleted_at TEXT;
ALTER TABLE manent_deployments ADD COLUMN deliveries TEXT;
ALTER TABLE manent_deployments ADD COLUMN logs_pruned_at TEXT;
-- Indexes the hot reads need at 50k deploys (see the EXPLAIN test in
-- pkg/store): list by environment, by state (newest first), promotion's
-- successes of a version, retention by finish time.
CREATE INDEX IF NOT EXISTS manent_deployments_env ON manent_deployments (environment, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS manent_deployments_state_created ON manent_deployments (state, created_at DESC, id DESC);
DROP INDEX IF EXISTS manent_deployments_state;
CREATE INDEX IF NOT EXISTS manent_deployments_appver ON manent_deployments (application, version, state);
CREATE INDEX IF NOT EXISTS manent_deployments_finished ON manent_deployments (finished_at);
