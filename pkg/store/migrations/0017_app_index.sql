-- The list filtered by application alone, newest first: without it the
-- rows of a busy application are sorted on every call (3.7 ms at 10k
-- deploys in BenchmarkHistory, growing with history).
CREATE INDEX IF NOT EXISTS manent_deployments_app ON manent_deployments (application, created_at DESC, id DESC);
