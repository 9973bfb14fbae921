-- History, rollback and DORA (SPEC §11.5): a rollback deploy names the
-- deploy of the release it went back from; committed_at is the
-- descriptor's source.committed_at (UTC), the start of DORA lead time.
ALTER TABLE manent_deployments ADD COLUMN rollback_of TEXT NOT NULL DEFAULT '';
ALTER TABLE manent_deployments ADD COLUMN committed_at TEXT;
-- DORA reads one environment's final deploys by finish time.
CREATE INDEX IF NOT EXISTS manent_deployments_appenv_finished ON manent_deployments (application, environment, finished_at);
